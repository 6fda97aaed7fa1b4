"""Cluster claims on an 8-rank DeepSeek-style MoE serving run: tensor-parallel attention with vLLM's custom all-reduce,
expert parallelism with DeepEP's dispatch / combine, one NCCL all-gather at start-up. Truth by construction (docstrings:
hand-computed answers)."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, List

from synth import TraceBuilder
from synth.scenarios.cluster import BASE_UTC, GEMM, MS

import nsys_llm_explainer as nle
from nsys_llm_explainer.render.cluster import render_cluster_markdown

US = 1_000
N = 8
VAR = "void vllm::cross_device_reduce_1stage<__nv_bfloat16, 8>(vllm::RankData*, vllm::RankSignals, int)"
DISP = "void deep_ep::intranode::dispatch<8, 768, 8192>(int4*, float*, int*)"
COMB = "void deep_ep::intranode::combine<__nv_bfloat16, 8, 768>(int4*, float*, int*)"
GG = "void deep_gemm::m_grouped_gemm_fp8_kernel<128, 128>(__nv_bfloat16*, int*)"
AG = "ncclDevKernel_AllGather_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"


def _zero(r: int, s: int = 0) -> int:
    return 0


def _moe(out: Path, steps: int, gg: Callable[[int, int], int] = lambda r, s: 300,
         host_delay: Callable[[int, int], int] = _zero, sj: Callable[[int, int], int] = _zero,
         ej: Callable[[int, int], int] = _zero) -> List[int]:
    """8 rank files (rank r: pid 5000 + r on GPU r, every session starting at BASE_UTC: one host), one NCCL all-gather
    of 50 µs 5 ms before step 0 on every rank; then per step from T (50 ms for step 0; next T = combine end + 300 µs),
    all in µs after T: GEMM 10 → 110; custom all-reduce 112 + sj → 132 + ej; DeepEP dispatch 135 + host_delay + sj →
    (latest dispatch start without sj) + 30 + ej; grouped GEMM from 2 µs after the latest dispatch ends (without ej)
    for ``gg(r, s)`` µs; combine 2 µs after the rank's grouped GEMM → latest combine start + 20 + ej. Every kernel of
    the step is launched at T … T + 4 µs (the dispatch, grouped GEMM and combine ``host_delay`` µs later: a host stall
    on that rank); a ``cudaStreamSynchronize`` from T + 12 (+ host_delay) to the combine end + 5; an
    ``execute_model`` range T → combine end + 8. Returns each step's T."""
    bs = [TraceBuilder("2024.2", seed=r, utc_epoch_ns=BASE_UTC) for r in range(N)]
    gs = []
    for r, b in enumerate(bs):
        b.process(5000 + r)
        gs.append(b.thread(5000 + r, 5000 + r, f"rank{r}"))
        b.gpu(r)
        a = 45 * MS
        b.launch(a, a + 5 * US, a + 10 * US, a + 60 * US, pid=5000 + r, tid=5000 + r, device=r, stream=9, name=AG)
    t, ts = 50 * MS, []
    for s in range(steps):
        ts.append(t)
        d = [t + (135 + host_delay(r, s)) * US for r in range(N)]
        dend = max(d) + 30 * US
        g0 = dend + 2 * US
        c = [g0 + (gg(r, s) + 2) * US for r in range(N)]
        cend = max(c) + 20 * US
        for r, b in enumerate(bs):
            pid, hd, j, e = 5000 + r, host_delay(r, s) * US, sj(r, s) * US, ej(r, s) * US
            for i, (ks, ke, name) in enumerate(((t + 10 * US, t + 110 * US, GEMM),
                                                (t + 112 * US + j, t + 132 * US + e, VAR),
                                                (d[r] + j, dend + e, DISP), (g0, c[r] - 2 * US, GG),
                                                (c[r], cend + e, COMB))):
                a = t + i * US + (hd if i >= 2 else 0)
                b.launch(a, a + 1 * US, ks, ke, pid=pid, tid=pid, device=r, name=name)
            k = b.runtime(t + 12 * US + hd, cend + 5 * US, tid_g=gs[r], name="cudaStreamSynchronize_v3020")
            b.sync(t + 12 * US + hd, cend + 5 * US, pid=pid, device=r, corr=k)
            b.nvtx_push_pop(t, cend + 8 * US, "execute_model", tid_g=gs[r])
        t = cend + 300 * US
    for r, b in enumerate(bs):
        b.write(str(out / f"rank{r}.sqlite"), overwrite=True)
    return ts


def _straggler(r: int, s: int) -> int:
    return 390 if r == 5 else 300


def test_all_to_all_straggler_is_named_at_custom_collectives(tmp_path: Path) -> None:
    """12 steps; rank 5's grouped GEMM takes 390 µs (the others 300 µs): it starts every combine 90 µs after the
    others and all end together, so the other 7 ranks' combines run 110 µs, rank 5's 20 µs: each other rank waits
    12 × 90 = 1.080 ms, all caused by rank 5 (7 × 1.080 = 7.560 ms). The all-reduces, dispatches and the start-up
    all-gather ran as long on every rank (skew 0): no last arriver. The claim's title read "rank5 is the rank the
    others wait for at NCCL and custom collectives" (the start-up NCCL all-gather, where nobody waited, made it
    "NCCL and"), and the 25 tied instances named rank0 "last" in cluster.json / nccl_instances.csv (and coloured
    the skew chart's points rank0's)."""
    _moe(tmp_path, 12, gg=_straggler)
    res = nle.analyze_cluster(str(tmp_path), jobs=1)
    (c,) = res.claims
    assert (c.id, c.rank, c.severity) == ("late_arriver", "rank5", "high")
    assert c.title == "rank5 is the rank the others wait for at custom collectives"
    ranks = {x.rank: x for x in res.collectives.ranks}
    assert ranks["rank5"].wait_caused_ns == 7 * 1080 * US and ranks["rank5"].wait_ns_total == 0
    assert all(ranks[f"rank{r}"].wait_ns_total == 1080 * US for r in range(N) if r != 5)
    assert all(ranks[f"rank{r}"].wait_caused_ns == 0 for r in range(N) if r != 5)
    late = [(i.name, i.late_rank) for i in res.collectives.instances]
    assert sorted(set(late)) == sorted({(AG.split("(")[0], None), (COMB, "rank5"), (DISP, None), (VAR, None)})
    assert late.count((COMB, "rank5")) == 12 and len(late) == 37
    assert [(k.metric, k.observed) for k in c.checks if k.metric in ("last_arrivals", "wait_caused_share")] == [
        ("last_arrivals", 12), ("wait_caused_share", 1.0)]
    # what made it late: its combine starts 2 µs after its grouped GEMM ends, 90 µs late; since the previous
    # combine (ended together; steps 1-11) its GPU idled as long as the earliest rank's (the same gaps between the
    # step's kernels): 0 µs more, 0 / 90 = 0.0, GPU work
    r5 = ranks["rank5"]
    assert (r5.late_idle_before_p50_ns, r5.late_by_p50_ns, r5.late_idle_share_p50) == (0, 90 * US, 0.0)
    assert c.evidence[-1].startswith("GPU work ran longer:") and c.advice[0].startswith("Compare rank5's kernels")


def test_a_straggler_that_moves_is_most_often_last_for_nobody(tmp_path: Path) -> None:
    """16 steps; the 390 µs grouped GEMM moves: rank s % 8 in step s, so every rank is last at 2 of the 16
    combines (share 2 / 16 = 12.5 %) and no rank stands out. The combine row of the per-collective table read
    "most often last: rank0" (the first of eight ranks tied at 2)."""
    _moe(tmp_path, 16, gg=lambda r, s: 390 if r == s % 8 else 300)
    res = nle.analyze_cluster(str(tmp_path), jobs=1)
    assert res.claims == ()
    comb = next(n for n in res.collectives.by_name if n.name == COMB)
    assert (comb.most_late_rank, comb.most_late_share, comb.skew_max_ns) == (None, 0.125, 90 * US)
    assert {x.last_arrival_count for x in res.collectives.ranks} == {2}
    row = next(ln for ln in render_cluster_markdown(res).splitlines() if "deep_ep::intranode::combine" in ln)
    assert row.endswith("| – |") and "rank0" not in row


def _jitter(r: int, s: int) -> int:
    return (5 * r) % 4


def _end_jitter(r: int, s: int) -> int:
    return r % 3


def test_a_rank_last_by_microseconds_is_not_blamed_for_anothers_waits(tmp_path: Path) -> None:
    """The straggler run (12 steps, rank 5's grouped GEMM 90 µs longer) with the µs jitter real kernels have: the
    all-reduce and the dispatch start ``(5 r) % 4`` µs late on rank r (0, 1, 2, 3, 0, 1, 2, 3) and every custom
    kernel ends ``r % 3`` µs late (0, 1, 2, 0, 1, 2, 0, 1). All-reduce / dispatch durations − the nominal: 0, 0, 0,
    −3, 1, 1, −2, −2 µs: rank 3 runs the shortest (last by 3 µs) and the others wait 3 + 3 + 3 + 4 + 4 + 1 + 1 =
    19 µs per instance: rank 3 caused 24 × 19 = 456 µs. Combine: rank 5's kernel runs 22 µs, the others' 110 + r % 3
    µs: they wait 88 + r % 3 µs, 621 µs per instance: rank 5 caused 12 × 621 = 7.452 ms (94 % of the 7.908 ms).
    Rank 3 is last at 24 of the 36 collectives that had a last arriver (67 %), rank 5 at 12 (33 %). The cluster
    read "HIGH — rank3 is the rank the others wait for … the other ranks wait 978.86 µs each in total" — 6 % of
    that waiting was for rank 3; now the claim needs the waiting the rank caused to be ≥ 60 % of all of it."""
    _moe(tmp_path, 12, gg=_straggler, sj=_jitter, ej=_end_jitter)
    res = nle.analyze_cluster(str(tmp_path), jobs=1)
    ranks = {x.rank: x for x in res.collectives.ranks}
    assert (ranks["rank3"].last_arrival_count, ranks["rank3"].with_last_arriver) == (24, 36)
    assert (ranks["rank3"].wait_caused_ns, ranks["rank5"].wait_caused_ns) == (456 * US, 7452 * US)
    assert sum(x.wait_ns_total or 0 for x in ranks.values()) == 7908 * US
    assert [c.rank for c in res.claims if c.id == "late_arriver"] != ["rank3"]


def test_the_rank_that_causes_the_waiting_is_named_despite_jitter(tmp_path: Path) -> None:
    """The trace above: rank 5 caused 7.452 ms of the 7.908 ms of waiting (94 %): it is the rank the others wait
    for, though it is last at only 12 of the 36 contested collectives (rank 3 is last by 3 µs at the other 24).
    Fixed: the late arriver is the rank whose late arrivals caused the most waiting (≥ 60 % of it, last at ≥ 2
    collectives), no longer the one last most often."""
    _moe(tmp_path, 12, gg=_straggler, sj=_jitter, ej=_end_jitter)
    res = nle.analyze_cluster(str(tmp_path), jobs=1)
    assert [(c.id, c.rank) for c in res.claims] == [("late_arriver", "rank5")]
    # per other rank at each of its 12 late arrivals: 7.452 ms / 12 / 7 = 88.71 µs (the mean over all 73 matched
    # collectives, counting those nobody waited at, is far lower)
    assert "88.71 µs for it at each collective it arrived last at" in res.claims[0].evidence[0]


def _gc(r: int, s: int) -> int:
    return 2000 if (r == 3 and s % 10 == 9) else 0


def test_a_host_stall_on_one_rank_is_its_late_arrival_and_its_own_idle(tmp_path: Path) -> None:
    """20 steps; rank 3's host stalls 2 ms (a GC pause inside ``execute_model``) before launching the dispatch in
    steps 9 and 19: the others' dispatches run 2.030 ms, rank 3's 30 µs; every other collective ran as long. Rank 3
    is last at 2 of 2 and each other rank waits 2 × 2 ms = 4 ms. Its own GPU idles from the all-reduce's end (132
    µs into the step) to the launch at 2.002 ms, its host inside ``execute_model`` and outside CUDA calls: 1.870 ms
    charged to ``nvtx`` per stall — a host stall, not a slow GPU. (Rank 3's own steady window keeps the 5 ms
    start-up and ends before step 19, unlike the others': one stall, 1.870 ms, is in it; the other ranks have
    60 µs of ``nvtx``, the 3 µs between each step's range start and its first launch's end.)"""
    _moe(tmp_path, 20, host_delay=_gc)
    res = nle.analyze_cluster(str(tmp_path), jobs=1)
    (c,) = res.claims
    assert (c.id, c.rank, c.title) == ("late_arriver", "rank3", "rank3 is the rank the others wait for at custom "
                                       "collectives")
    ranks = {x.rank: x for x in res.collectives.ranks}
    assert all(ranks[f"rank{r}"].wait_ns_total == 4 * MS for r in range(N) if r != 3)
    assert ranks["rank3"].wait_caused_ns == 7 * 4 * MS
    # what made it late: since the previous dispatch (ended together) its GPU idles as the others' do except from
    # the all-reduce's end (132 µs) to the dispatch at 2.135 ms instead of 135 µs: 2 ms more idle, while it is 2 ms
    # late: 1.0: launched late
    r3 = ranks["rank3"]
    assert (r3.late_idle_before_p50_ns, r3.late_by_p50_ns, r3.late_idle_share_p50) == (2 * MS, 2 * MS, 1.0)
    assert c.evidence[-1].startswith("Launched late:") and "launched late" in c.advice[0]
    nvtx = {d.rank: d.idle_by_kind.get("nvtx", 0) for d in res.devices}
    assert nvtx["rank3"] >= 1870 * US and all(v < 100 * US for k, v in nvtx.items() if k != "rank3")


def test_a_host_stall_is_named_when_jitter_gives_every_combine_a_last_arriver(tmp_path: Path) -> None:
    """The run above (20 steps, rank 3's 2 ms stalls in steps 9 and 19) with rank (3 s) % 8's grouped GEMM 5 µs
    longer in step s: each rank is last at 2 or 3 combines by 5 µs (7 × 5 = 35 µs of waiting each). Rank 3 caused
    2 × 7 × 2 ms = 28 ms of waiting plus its combines', the other ranks about 0.1 ms each: the report read "No rank
    stands out". Named now (the waiting it caused decides)."""
    _moe(tmp_path, 20, gg=lambda r, s: 305 if r == (3 * s) % 8 else 300, host_delay=_gc)
    res = nle.analyze_cluster(str(tmp_path), jobs=1)
    assert [(c.id, c.rank) for c in res.claims] == [("late_arriver", "rank3")]
