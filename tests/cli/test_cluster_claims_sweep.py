"""Cluster claims checked against traces whose truth is known by construction (a claims sweep over several-rank
NCCL workloads, docs/CLUSTER.md "NCCL collectives across ranks" and "Per-rank view and claims"). Each rank: 10
steps of 1 ms from 50 ms (common clock); a GEMM launched 10 µs into the step, then (unless the rank runs no NCCL
kernel) a collective kernel starting 2 µs after the GEMM ends and ending on every rank at the same time; a
``cudaStreamSynchronize`` and an ``execute_model`` NVTX range per step."""

from __future__ import annotations

from typing import Callable, Sequence

from synth import TraceBuilder
from synth.scenarios.cluster import AR, BASE_UTC, GEMM, MS

import nsys_llm_explainer as nle

US = 1_000
AG = "ncclDevKernel_AllGather_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
RS = "ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"


def _step0(s: int) -> int:
    return 50 * MS + s * MS


def _rank(path: str, r: int, steps: Sequence[int], gemm_us: Callable[[int, int], int],
          coll_start: Callable[[int, int], int], coll_end: Callable[[int], int], utc_offset_ns: int,
          name: Callable[[int], str] = lambda s: AR, nccl: bool = True) -> None:
    """Rank ``r`` (pid 5000 + r, GPU r) whose session starts ``utc_offset_ns`` after BASE_UTC (its timestamps are
    the common clock − that offset)."""
    b = TraceBuilder("2024.2", seed=r, utc_epoch_ns=BASE_UTC + utc_offset_ns)
    sh = -utc_offset_ns
    pid = 5000 + r
    b.process(pid)
    g = b.thread(pid, pid, f"rank{r}")
    b.gpu(r)
    for s in steps:
        st = _step0(s)
        gs = st + 10 * US
        end = gs + gemm_us(r, s) * US
        b.launch(st + sh, st + 5 * US + sh, gs + sh, end + sh, pid=pid, tid=pid, device=r, stream=7, name=GEMM)
        if nccl:
            end = coll_end(s)
            b.launch(st + 6 * US + sh, st + 9 * US + sh, coll_start(r, s) + sh, end + sh, pid=pid, tid=pid,
                     device=r, stream=7, name=name(s))
        c = b.runtime(st + 12 * US + sh, end + 5 * US + sh, tid_g=g, name="cudaStreamSynchronize_v3020")
        b.sync(st + 12 * US + sh, end + 5 * US + sh, pid=pid, sync_type=3, device=r, stream=7, corr=c)
        b.nvtx_push_pop(st + sh, end + 8 * US + sh, "execute_model", tid_g=g)
    b.write(path, overwrite=True)


def test_a_rank_waiting_for_the_straggler_is_not_called_the_slowest(tmp_path):
    """3 ranks, clocks 3 ms apart; rank 1's GEMM takes 500 µs (others 300 µs), rank 2 runs no NCCL kernel. Ranks 0
    and 1 all-reduce: rank 0 waits 200 µs per step for rank 1, so both take 540 µs a step (10 + 500 + 2 + 20 + 8
    µs); rank 2 takes 318 µs (10 + 300 + 8). Rank 1 is the late arriver (10 of 10) and rank 2 the least busy, but
    no rank has *the* slowest steps: ranks 0 and 1 tie at 540 µs (the claim named rank 0, the rank that waits,
    "step time p50 540 µs vs a median of 429 µs")."""
    def gemm(r: int, s: int) -> int:
        return 500 if r == 1 else 300

    def start(r: int, s: int) -> int:
        return _step0(s) + 10 * US + gemm(r, s) * US + 2 * US

    def end(s: int) -> int:
        return start(1, s) + 20 * US

    for r in range(3):
        _rank(str(tmp_path / f"rank{r}.sqlite"), r, range(10), gemm, start, end, 3 * r * MS, nccl=r != 2)
    res = nle.analyze_cluster(str(tmp_path), jobs=1)
    assert res.alignment.aligned
    assert {d.rank: d.step_p50_ns for d in res.devices} == {"rank0": 540 * US, "rank1": 540 * US, "rank2": 318 * US}
    assert sorted((c.id, c.rank) for c in res.claims) == [("late_arriver", "rank1"), ("low_busy_rank", "rank2")]


def test_collectives_that_start_together_have_no_late_arriver(tmp_path):
    """2 ranks, clocks 7 ms apart, alternating AllGather (even steps) and ReduceScatter (odd steps); rank 0's GEMM
    takes 400 µs in odd steps (else 300 µs). AllGathers start together on both ranks (skew 0): nobody arrives last.
    ReduceScatters: rank 0 starts 100 µs after rank 1, so rank 0 is last in 5 of 10 collectives (50 %, under the
    60 % a late-arriver claim needs) and rank 1 waits 5 × 100 = 500 µs. Before: ties counted for rank 0 ("arrives
    last in 100% (10 of 10)") and the AllGather row named rank 0 "most often last"."""
    def gemm(r: int, s: int) -> int:
        return 400 if (r == 0 and s % 2) else 300

    def start(r: int, s: int) -> int:
        return _step0(s) + 10 * US + gemm(r, s) * US + 2 * US

    def end(s: int) -> int:
        return max(start(0, s), start(1, s)) + 40 * US

    for r in range(2):
        _rank(str(tmp_path / f"rank{r}.sqlite"), r, range(10), gemm, start, end, 7 * r * MS,
              name=lambda s: RS if s % 2 else AG)
    res = nle.analyze_cluster(str(tmp_path), jobs=1)
    coll = res.collectives
    assert coll.timed and coll.matched_collectives == 10
    ranks = {x.rank: x for x in coll.ranks}
    assert {k: (v.last_arrival_count, v.last_arrival_share, v.wait_ns_total) for k, v in ranks.items()} == {
        "rank0": (5, 0.5, 0), "rank1": (0, 0.0, 500 * US)}
    names = {n.name.split("_")[1]: n for n in coll.by_name}
    assert (names["AllGather"].skew_max_ns, names["AllGather"].most_late_rank, names["AllGather"].most_late_share) \
        == (0, None, 0.0)
    assert (names["ReduceScatter"].most_late_rank, names["ReduceScatter"].most_late_share) == ("rank0", 1.0)
    assert [c.id for c in res.claims] == []


def test_ranks_captured_over_different_spans_match_the_same_collectives(tmp_path):
    """Rank 0 captured steps 0–11, rank 1 steps 2–9 (same session start + 1 ms, aligned); rank 1 starts every
    all-reduce 30 µs after rank 0 and both end 20 µs later. The 8 collectives both captured: rank 0 waits 8 × 30 =
    240 µs. Matched by issue order, rank 0's steps 0–7 pair with rank 1's steps 2–9: 'wait' 2.030 ms each, 16.24 ms
    in total in the NCCL table (the late-arriver claim is withheld, the table's numbers are not)."""
    def gemm(r: int, s: int) -> int:
        return 300

    def start(r: int, s: int) -> int:
        return _step0(s) + 312 * US + (30 * US if r == 1 else 0)

    def end(s: int) -> int:
        return start(1, s) + 20 * US

    _rank(str(tmp_path / "rank0.sqlite"), 0, range(12), gemm, start, end, 0)
    _rank(str(tmp_path / "rank1.sqlite"), 1, range(2, 10), gemm, start, end, 1 * MS)
    res = nle.analyze_cluster(str(tmp_path), jobs=1)
    ranks = {x.rank: x for x in res.collectives.ranks}
    assert res.collectives.matched_collectives == 8 and res.collectives.unmatched_kernels == 4
    assert ranks["rank0"].wait_ns_total == 240 * US and ranks["rank1"].last_arrival_count == 8
