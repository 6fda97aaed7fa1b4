"""Cluster claims on several-rank NCCL workloads whose truth is known by construction (docs/CLUSTER.md "Collectives
across ranks" and "Per-rank view and claims"): stragglers and late arrivers, ranks captured over different spans,
instances matched by issue order. Each rank: 10 steps of 1 ms from 50 ms (common clock); a GEMM launched 10 µs into the
step, then (unless the rank runs no NCCL kernel) a collective kernel starting 2 µs after the GEMM ends and ending on
every rank at the same time; a ``cudaStreamSynchronize`` and an ``execute_model`` NVTX range per step."""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
from synth import TraceBuilder
from synth.scenarios.cluster import AR, BASE_UTC, GEMM, MS

import nsys_llm_explainer as nle
from nsys_llm_explainer.analyses.comms.matching import best_shift
from nsys_llm_explainer.render.cluster import render_cluster_markdown

US = 1_000
AG = "ncclDevKernel_AllGather_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
RS = "ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"


def _step0(s: int) -> int:
    return 50 * MS + s * MS


def _rank(path: str, r: int, steps: Sequence[int], gemm_us: Callable[[int, int], int],
          coll_start: Callable[[int, int], int], coll_end: Callable[[int], int], utc_offset_ns: int,
          name: Callable[[int], str] = lambda s: AR, nccl: bool = True, session: bool = True) -> None:
    """Rank ``r`` (pid 5000 + r, GPU r) whose session starts ``utc_offset_ns`` after BASE_UTC (its timestamps are
    the common clock − that offset); ``session=False``: the export has no session start (utcEpochNs 0)."""
    b = TraceBuilder("2024.2", seed=r, utc_epoch_ns=BASE_UTC + utc_offset_ns if session else 0)
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
    ReduceScatters: rank 0 starts 100 µs after rank 1, so rank 0 is last in all 5 of the 10 collectives that had a
    last arriver (share 5 / 5 = 1.0, the single-file verdict's rule: tied collectives count in neither part) and
    rank 1 waits 5 × 100 = 500 µs in total: rank 0 is the late arriver (high: 100 % ≥ 80 %). Before: ties counted
    for rank 0 ("arrives last in 100% (10 of 10)") and the AllGather row named rank 0 "most often last"; then the
    share divided by all 10 matched (0.5, no claim) while one file holding both ranks named rank 0."""
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
        "rank0": (5, 1.0, 0), "rank1": (0, 0.0, 500 * US)}
    assert (ranks["rank0"].with_last_arriver, ranks["rank1"].with_last_arriver) == (5, 5)
    names = {n.name.split("_")[1]: n for n in coll.by_name}
    assert (names["AllGather"].skew_max_ns, names["AllGather"].most_late_rank, names["AllGather"].most_late_share) \
        == (0, None, 0.0)
    assert (names["ReduceScatter"].most_late_rank, names["ReduceScatter"].most_late_share) == ("rank0", 1.0)
    (claim,) = res.claims
    assert (claim.id, claim.rank, claim.severity) == ("late_arriver", "rank0", "high")
    assert claim.evidence[0] == (
        "rank0 arrives last in 100% (5 of the 5) of its matched NCCL collectives that had a last arriver (in the other "
        "5 every rank's kernel ran as long), and its late arrivals cause 100 % of all the waiting; the other ranks "
        "wait 500.00 µs each in total (50.00 µs per matched collective; 100.00 µs for it at each collective it "
        "arrived last at).")


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


def _late_by(lag_us: dict):
    """Collective start in step ``s`` on rank ``r``: 312 µs into the step + ``lag_us[r]``; every rank's kernel ends
    20 µs after the latest start."""
    def start(r: int, s: int) -> int:
        return _step0(s) + 312 * US + lag_us.get(r, 0) * US

    def end(s: int) -> int:
        return _step0(s) + 312 * US + max(lag_us.values()) * US + 20 * US
    return start, end


def test_three_ranks_captured_over_different_spans_match_where_all_three_ran(tmp_path):
    """Rank 0 captured steps 0–11, rank 1 steps 2–9, rank 2 steps 4–11 (sessions 0, 1, 2 ms after BASE_UTC:
    aligned); ranks 1 and 2 start each all-reduce 30 and 50 µs after rank 0. Matched by time: the 6 steps all three
    captured (4–9), 12 + 8 + 8 − 3 × 6 = 10 kernels unmatched; waits rank0 6 × 50 = 300 µs, rank1 6 × 20 = 120 µs,
    rank2 0 and last in 6 of 6; instance 0 is step 4 (first start 54.312 ms on the cluster clock)."""
    start, end = _late_by({0: 0, 1: 30, 2: 50})
    for r, steps in ((0, range(12)), (1, range(2, 10)), (2, range(4, 12))):
        _rank(str(tmp_path / f"rank{r}.sqlite"), r, steps, lambda r, s: 300, start, end, r * MS)
    res = nle.analyze_cluster(str(tmp_path), jobs=1)
    coll = res.collectives
    assert res.alignment.aligned and coll.matching == "time" and [n.matching for n in coll.by_name] == ["time"]
    assert (coll.matched_collectives, coll.unmatched_kernels) == (6, 10)
    assert {x.rank: (x.matched, x.wait_ns_total, x.last_arrival_count) for x in coll.ranks} == {
        "rank0": (6, 300 * US, 0), "rank1": (6, 120 * US, 0), "rank2": (6, 0, 6)}
    assert [(i.seq, i.first_start_ns, i.skew_ns, i.end_spread_ns) for i in coll.instances] == [
        (k, 54 * MS + k * MS + 312 * US, 50 * US, 0) for k in range(6)]
    # rank 2 is last at all 6, but the 420 µs of waiting it caused is < 5 % of ranks 0 and 1's windows (rank 0's
    # ≥ 11 ms, steps 0–11; rank 1's ≥ 7 ms, steps 2–9: < 420 / 18,000 = 2.3 %): no late-arriver claim
    # (docs/FINDINGS.md "NCCL", waiting that matters)
    assert [(c.id, c.rank) for c in res.claims if c.id == "late_arriver"] == []
    assert "6 matched collectives, 10 unmatched kernels (matched per collective name, by time: the kernels that " \
        "overlap on the aligned clocks)." in render_cluster_markdown(res).splitlines()


def test_a_name_whose_kernels_never_overlap_is_matched_by_issue_order_and_withholds_the_claim(tmp_path):
    """Rank 0 (steps 0–11) runs an AllGather in steps 0–1 and all-reduces after; rank 1 (steps 2–9, aligned) runs
    all-reduces in steps 2–7 and AllGathers in steps 8–9, 30 µs after rank 0 would. All-reduces: matched by time,
    steps 2–7 (6; 4 of rank 0's unmatched), rank 0 waits 6 × 30 µs. AllGathers: no kernel of rank 1 overlaps rank
    0's, so they fall back to issue order (step 0 with 8, 1 with 9): their starts lie 8.030 ms apart, but a wait is
    clock-free (duration less the instance's shortest: rank 0's 50 µs − rank 1's 20 µs = 30 µs), so rank 0's 'wait'
    totals 6 × 30 + 2 × 30 = 240 µs (start-based it was 180 µs + 2 × 8.030 ms = 16.24 ms). Matching 'mixed'; rank 1
    is 'last' in 8 of 8 and the end spread p50 is 0 (the other checks would pass), but no late-arriver claim is made
    and a warning names the AllGather."""
    start, end = _late_by({0: 0, 1: 30})
    _rank(str(tmp_path / "rank0.sqlite"), 0, range(12), lambda r, s: 300, start, end, 0,
          name=lambda s: AG if s < 2 else AR)
    _rank(str(tmp_path / "rank1.sqlite"), 1, range(2, 10), lambda r, s: 300, start, end, 1 * MS,
          name=lambda s: AG if s >= 8 else AR)
    res = nle.analyze_cluster(str(tmp_path), jobs=1)
    coll = res.collectives
    assert coll.timed and coll.matching == "mixed"
    assert [(n.name.split("_")[1], n.matching, n.matched, n.unmatched_kernels) for n in coll.by_name] == [
        ("AllGather", "issue order", 2, 0), ("AllReduce", "time", 6, 4)]
    assert (coll.matched_collectives, coll.unmatched_kernels, coll.end_spread_p50_ns) == (8, 4, 0)
    ranks = {x.rank: x for x in coll.ranks}
    assert ranks["rank0"].wait_ns_total == 6 * 30 * US + 2 * 30 * US and ranks["rank1"].last_arrival_count == 8
    assert [c.id for c in res.claims if c.id == "late_arriver"] == []
    assert [w for w in res.warnings if "matched by issue order" in w and "ncclDevKernel_AllGather_RING_LL" in w
            and "no late-arriver claim" in w]
    assert "8 matched collectives, 4 unmatched kernels (matched per collective name, by time where the kernels " \
        "overlap on the aligned clocks, in issue order for 1 name(s) whose kernels on some rank never overlap " \
        "another rank's)." in render_cluster_markdown(res).splitlines()


def test_without_a_session_start_collectives_are_matched_by_issue_order(tmp_path):
    """The spans of the strict-xfail case (rank 0 steps 0–11, rank 1 steps 2–9) exported with no session start
    (utcEpochNs 0): the clocks cannot be aligned, so no kernel times are compared: the k-th all-reduces are paired
    (8 matched, 4 unmatched), matching 'issue order', no wait column, and cluster.md says so."""
    start, end = _late_by({0: 0, 1: 30})
    _rank(str(tmp_path / "rank0.sqlite"), 0, range(12), lambda r, s: 300, start, end, 0, session=False)
    _rank(str(tmp_path / "rank1.sqlite"), 1, range(2, 10), lambda r, s: 300, start, end, 1 * MS, session=False)
    res = nle.analyze_cluster(str(tmp_path), jobs=1)
    coll = res.collectives
    assert not res.alignment.aligned and not coll.timed and coll.matching == "issue order"
    assert (coll.matched_collectives, coll.unmatched_kernels, coll.instances) == (8, 4, ())
    assert [x.wait_ns_total for x in coll.ranks] == [None, None] and [n.matching for n in coll.by_name] == [
        "issue order"]
    assert "8 matched collectives, 4 unmatched kernels (matched per collective name, in issue order)." in \
        render_cluster_markdown(res).splitlines()


def test_back_to_back_collectives_pair_with_the_kernel_they_overlap_longest(tmp_path):
    """20 all-reduces per rank, one session (aligned). Rank 0's k-th runs [T_k, T_k + 60 µs], T_k = 50 ms + 61 µs ×
    k; rank 1's k-th [T_k − 1.5 µs, T_k + 59 µs], so its (k+1)-th starts at T_k + 59.5 µs, 0.5 µs before rank 0's
    k-th ends. Rank 0's k-th overlaps rank 1's k-th 59 µs and (k+1)-th 0.5 µs: shift 0, 20 matched; rank 1 waits
    (clock-free: its 60.5 µs kernel less rank 0's 60 µs) 0.5 µs each (10 µs in total), rank 0 (the shorter kernel)
    last in 20 of 20. (Voting for the latest-starting overlapping kernel would pick shift +1: 19 matched.)"""
    for r in range(2):
        b = TraceBuilder("2024.2", seed=r, utc_epoch_ns=BASE_UTC)
        b.process(7000 + r)
        b.gpu(r)
        for k in range(20):
            t = 50 * MS + 61 * US * k
            a, e = (t, t + 60 * US) if r == 0 else (t - 1500, t + 59 * US)
            b.launch(a - 20 * US, a - 15 * US, a, e, pid=7000 + r, tid=7000 + r, device=r, name=AR)
        b.write(str(tmp_path / f"rank{r}.sqlite"), overwrite=True)
    res = nle.analyze_cluster(str(tmp_path), jobs=1)
    coll = res.collectives
    assert coll.matching == "time" and (coll.matched_collectives, coll.unmatched_kernels) == (20, 0)
    assert {x.rank: (x.wait_ns_total, x.last_arrival_count) for x in coll.ranks} == {
        "rank0": (0, 20), "rank1": (10 * US, 0)}


def test_index_shift_votes_and_ties():
    """``best_shift`` by hand. (1) Reference [0, 10], [100, 110]; other [0, 10], [50, 60], [100, 110]: the first
    overlaps the other's 0 (shift 0), the second its 2 (+1): one vote each, the smaller |d| wins: 0. (2) Other
    [50, 60], [100, 110]: only the second overlaps (the other's 1: shift 0). (3) Reference [0, 10]; other [0, 9],
    [9, 20]: both start by 10, overlaps 9 and 1 ns: the longer, shift 0 (the latest-starting one would give +1).
    (4) Reference [0, 10], [100, 110], [200, 210]; other [100, 110], [200, 210]: two votes for −1. (5) Nothing
    overlaps, or no kernel: None."""
    a = np.array
    assert best_shift(a([0, 100]), a([10, 110]), a([0, 50, 100]), a([10, 60, 110])) == 0
    assert best_shift(a([0, 100]), a([10, 110]), a([50, 100]), a([60, 110])) == 0
    assert best_shift(a([0]), a([10]), a([0, 9]), a([9, 20])) == 0
    assert best_shift(a([0, 100, 200]), a([10, 110, 210]), a([100, 200]), a([110, 210])) == -1
    assert best_shift(a([0, 100]), a([10, 110]), a([20, 120]), a([30, 130])) is None
    assert best_shift(a([0]), a([10]), a([], np.int64), a([], np.int64)) is None
