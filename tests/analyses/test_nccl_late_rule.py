"""The single-file NCCL straggler verdict names its late rank by the cluster's late-arriver rule (one rule,
analyses/comms/arrival.py; docs/FINDINGS.md "NCCL"): the rank whose late arrivals caused the most waiting, when
that is >= 60 % of all the waiting, it was last at >= 2 collectives and took part in >= 5. Waits on the export's
one clock: latest start − own start."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from conftest import nccl_of
from synth import TraceBuilder

from nsys_llm_explainer.analyses.comms.nccl_result import NcclResult
from nsys_llm_explainer.options import options_from_kwargs
from nsys_llm_explainer.pipeline import analyze_path, load_model
from nsys_llm_explainer.render import render_all

US = 1_000
MS = 1_000_000
T0 = 1_000_000
AR = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"


def _trace(path: Path, n_ranks: int, n: int, period: int, start: Callable[[int, int], int], end: int) -> None:
    """``n_ranks`` ranks (pid 100 + r on GPU r), ``n`` all-reduces ``period`` ns apart; at collective i (t = T0 +
    i·period) rank r's kernel runs [t + start(i, r), t + end) (every kernel of a collective ends together)."""
    b = TraceBuilder()
    for r in range(n_ranks):
        b.process(100 + r)
        b.gpu(r)
    for i in range(n):
        t = T0 + i * period
        for r in range(n_ranks):
            s = t + start(i, r)
            b.launch(s - 6 * US, s - 2 * US, s, t + end, pid=100 + r, tid=101 + r, device=r, name=AR)
    b.write(str(path))


def _nccl(path: Path) -> NcclResult:
    return nccl_of(load_model(str(path)))


def _jitter_and_straggler(i: int, r: int) -> int:
    """Collectives 0, 4, …, 20 (6): rank 2 starts at +300 µs, ranks 0, 1 at +210 µs (rank 2 last by 90 µs); the
    other 20: rank 0 at +300 µs, ranks 1, 2 at +297 µs (rank 0 last by 3 µs)."""
    if i % 4 == 0 and i < 24:
        return (300 if r == 2 else 210) * US
    return (300 if r == 0 else 297) * US


def test_a_rank_last_by_microseconds_is_not_named_over_the_one_the_others_wait_for(tmp_path: Path) -> None:
    """3 ranks, 26 all-reduces 410 µs apart ending at +400 µs (:func:`_jitter_and_straggler`). Waits (latest start −
    own): rank 0 6 × 90 = 540 µs, rank 1 20 × 3 + 6 × 90 = 600 µs, rank 2 20 × 3 = 60 µs: 1.2 ms in all. Waiting
    caused: rank 0 20 × (3 + 3) = 120 µs (10 %), rank 2 6 × (90 + 90) = 1,080 µs (90 % ≥ 60 %), last at 6 ≥ 2, in
    26 ≥ 5 matched: rank 2 is late although rank 0 is last at 20 of 26 (77 %); the other rank that waits most: rank
    1 (600 µs); confidence high (90 % ≥ 80 %). The old rule named nobody ("no significant imbalance": p50 durations
    100 / 103 / 103 µs, ratio 1.01 < 1.5), and by its most-frequent-last-arriver count would have blamed rank 0. The
    waiting matters: 1.080 ms / (2 × the 10.446 ms captured per GPU) = 5.17 % ≥ 5 % (the next test)."""
    p = tmp_path / "t.sqlite"
    _trace(p, 3, 26, 410 * US, _jitter_and_straggler, 400 * US)
    r = _nccl(p)
    assert r.matched_collectives == 26
    assert [(x.pid, x.last_arrival_count, x.wait_ns_total, x.wait_caused_ns) for x in r.ranks] == [
        (100, 20, 540 * US, 120 * US), (101, 0, 600 * US, 0), (102, 6, 60 * US, 1080 * US)]
    v = r.straggler
    assert v is not None
    assert (v.late_pid, v.waiting_pid, v.wait_ns_total, v.wait_caused_share, v.last_arrivals, v.late_share,
            v.with_last_arriver, v.confidence) == (102, 101, 1080 * US, 0.9, 6, 0.2308, 26, "high")


def test_the_nccl_wait_finding_says_the_rule_and_checks_it(tmp_path: Path) -> None:
    """The trace above through the pipeline: the ``nccl_wait`` finding names rank 2 as the late rank of 2 waiting
    ranks (rank 1 the most), gives the 1.080 ms it caused (90 % of the 1.2 ms) as time at stake, its 6 of 26 last
    arrivals (23 %) and the three checks of the rule on the late rank: matched 26 ≥ 5, last arrivals 6 ≥ 2, waiting
    caused share 0.9 ≥ 0.6, and that the waiting matters: the all-reduces here run 410 µs apart (1 ms apart, the
    1.080 ms is 2.14 % of the other two GPUs' 25.196 ms windows: no finding), so each GPU's window (first API call
    T0 + 204 µs to the last end T0 + 25 × 410 + 400 µs) is 10.446 ms and 1.080 / (2 × 10.446) = 5.17 % ≥ 5 %. The
    NCCL section says the 1.080 ms is the other 2 ranks' waiting in all."""
    p = tmp_path / "t.sqlite"
    _trace(p, 3, 26, 410 * US, _jitter_and_straggler, 400 * US)
    rep = analyze_path(str(p), options_from_kwargs())
    f = next(f for f in rep.findings if f.id == "nccl_wait")
    assert f.title == "NCCL wait: 2 ranks wait in collectives for late rank pid 102 / GPU 2 (the most: pid 101 / GPU 1)"
    assert f.evidence == (
        "Across 26 matched collectives the late rank's 6 late arrivals cause 1.080 ms of waiting on the other ranks: "
        "90 % of all the waiting in them.", "pid 102 / GPU 2 arrived last in 23 % of them.",
        # nothing else runs on the GPUs: at collectives 4, …, 20 (0 has no previous all-reduce) rank 2 idles from
        # the previous all-reduce's end (10 µs before t) to its start at t + 300 µs, 310 µs, the earliest (rank 0,
        # +210 µs) 220 µs: 90 µs more idle while 90 µs late: launched late
        "Launched late: at the collectives it started last, its GPU sat idle a median 90.00 µs longer than the "
        "earliest rank's since the previous kernel of that collective, while it started a median 90.00 µs after the "
        "earliest rank (extra idle / lateness: median 100 %) — the delay is on the host side.")
    assert (f.time_at_stake_ns, f.severity, f.confidence) == (1080 * US, "high", "high")
    assert [(c.metric, c.observed, c.op, c.threshold, c.scope.device_id) for c in f.checks] == [
        ("matched", 26, ">=", 5, 2), ("last_arrivals", 6, ">=", 2, 2), ("wait_caused_share", 0.9, ">=", 0.6, 2),
        ("wait_pct_of_window", 5.17, ">=", 5.0, 2),
        ("late_idle_share_p50", 1.0, ">=", 0.5, 2)]
    assert f.holds()
    out = tmp_path / "out"
    render_all(rep, out)
    assert ("**Straggler:** pid 102 / GPU 2 arrives late; the other 2 ranks wait 1.080 ms in all for it in collectives "
            "(90 % of all the waiting; the most: pid 101 / GPU 1; confidence high).") in (out / "report.md").read_text()


def _stalls(at: tuple) -> Callable[[int, int], int]:
    """2 ranks, collectives 2.5 ms apart ending at +400 µs (+2,400 µs at a stall): rank 1's host stalls 2 ms before
    the collectives ``at`` (rank 1 starts at +2,100 µs, rank 0 at +100 µs); at the others rank 0 starts at +105 µs,
    rank 1 at +100 µs (rank 0 last by 5 µs)."""
    def start(i: int, r: int) -> int:
        if i in at:
            return (2100 if r == 1 else 100) * US
        return (105 if r == 0 else 100) * US
    return start


def _stall_trace(path: Path, at: tuple) -> None:
    b = TraceBuilder()
    for r in range(2):
        b.process(100 + r)
        b.gpu(r)
    st = _stalls(at)
    for i in range(26):
        t = T0 + i * 2500 * US
        for r in range(2):
            s = t + st(i, r)
            b.launch(s - 6 * US, s - 2 * US, s, t + (2400 if i in at else 400) * US, pid=100 + r, tid=101 + r,
                     device=r, name=AR)
    b.write(str(path))


def test_a_host_stall_at_2_of_26_collectives_is_named(tmp_path: Path) -> None:
    """2 ranks, 26 all-reduces; rank 1 stalls 2 ms before collectives 9 and 19 (:func:`_stalls`). Rank 0 waits
    2 × 2,000 µs = 4 ms (caused by rank 1) and rank 1 waits 24 × 5 = 120 µs (caused by rank 0): rank 1 caused 4 /
    4.12 = 97.09 % ≥ 60 %, at 2 ≥ 2 collectives: named, although rank 0 is last at 24 of 26 (92 %); rank 1's
    last-arrival share 2 / 26 = 0.0769; confidence high (97 % ≥ 80 %). The old rule named nobody (p50 durations
    295 / 300 µs, ratio 1.02 < 1.5). The waiting matters: rank 0 captured T0 + 94 µs (rank 1's first API call) to
    T0 + 25 × 2.5 ms + 400 µs, 62.806 ms, and 4 / 62.806 = 6.37 % ≥ 5 % (5 ms apart, 3.19 %: no verdict)."""
    p = tmp_path / "t.sqlite"
    _stall_trace(p, (9, 19))
    r = _nccl(p)
    assert [(x.pid, x.last_arrival_count, x.wait_ns_total, x.wait_caused_ns) for x in r.ranks] == [
        (100, 24, 4 * MS, 120 * US), (101, 2, 120 * US, 4 * MS)]
    v = r.straggler
    assert v is not None
    assert (v.late_pid, v.waiting_pid, v.wait_ns_total, v.wait_caused_share, v.last_arrivals, v.late_share,
            v.confidence, v.wait_pct_of_window) == (101, 100, 4 * MS, 0.9709, 2, 0.0769, "high", 6.37)


def test_a_single_stall_is_an_event_not_a_late_rank(tmp_path: Path) -> None:
    """The same with one stall (collective 9): rank 1 caused 2,000 of the 2,000 + 25 × 5 = 2,125 µs of waiting
    (94 %), but at 1 collective only (< 2): no verdict, and the reason says so (last in 1 / 26 = 4 %)."""
    p = tmp_path / "t.sqlite"
    _stall_trace(p, (9,))
    r = _nccl(p)
    assert r.straggler is None
    assert r.straggler_reason == (
        "pid 101 / GPU 1 started last in 4% of collectives, its late arrivals causing 94% of the 2.125 ms of waiting, "
        "but at 1 collective only (vs ≥ 2): one stall is an event, not a rank the others keep waiting for")


def test_ranks_late_together_are_not_one_straggler(tmp_path: Path) -> None:
    """4 ranks, 10 all-reduces 1 ms apart ending at +400 µs; ranks 0, 1 start at +100 µs, rank 2 at +250 µs and rank 3
    at +252 µs (a group late together: a socket, a node's input). Waits 152, 152, 2, 0 µs per collective; rank 3
    is last at 10 of 10 and caused 306 of the 306 µs each time (100 %), but rank 2 started within a quarter of
    its lateness (2 ≤ 152 / 4) at all 10: before, 'pid 103 / GPU 3' was the straggler (had it been on time the others
    would still have waited 150 µs for rank 2); now no verdict, and the reason names rank 2."""
    p = tmp_path / "t.sqlite"
    _trace(p, 4, 10, MS, lambda i, r: (100, 100, 250, 252)[r] * US, 400 * US)
    r = _nccl(p)
    assert [(x.pid, x.last_arrival_count, x.wait_ns_total) for x in r.ranks] == [
        (100, 0, 1520 * US), (101, 0, 1520 * US), (102, 0, 20 * US), (103, 10, 0)]
    assert r.straggler is None
    assert r.straggler_reason == (
        "pid 103 / GPU 3 started last in 100% of collectives, its late arrivals causing 100% of the 3.060 ms of "
        "waiting, but pid 102 / GPU 2 started within a quarter of its lateness at half or more of those collectives: "
        "those ranks were late together (the others would have waited for them had pid 103 / GPU 3 been on time), "
        "not pid 103 / GPU 3 alone; no straggler verdict")


def test_a_straggler_that_moves_is_not_named(tmp_path: Path) -> None:
    """4 ranks, 16 all-reduces 1 ms apart ending at +400 µs; at collective i rank i % 4 starts at +300 µs, the others
    at +210 µs (last by 90 µs). Every rank is last at 4 and caused 4 × 3 × 90 = 1,080 µs of the 16 × 270 = 4,320 µs
    (25 % < 60 %): no late rank; the reason gives the first of the tied ranks' figures."""
    p = tmp_path / "t.sqlite"
    _trace(p, 4, 16, MS, lambda i, r: (300 if r == i % 4 else 210) * US, 400 * US)
    r = _nccl(p)
    assert [(x.last_arrival_count, x.wait_ns_total, x.wait_caused_ns) for x in r.ranks] == [
        (4, 1080 * US, 1080 * US)] * 4
    assert r.straggler is None
    assert r.straggler_reason == (
        "no rank's late arrivals cause ≥ 60% of the waiting (the most: pid 100 / GPU 0 started last in 25% of "
        "collectives, its late arrivals causing 25% of the 4.320 ms of waiting)")


GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel"


def _gemm_then_ar(path: Path, gemm_us: Callable[[int], int], gap_us: Callable[[int], int]) -> None:
    """2 ranks (pid 100 + r on GPU r), 10 collectives 1 ms apart: at t = T0 + i ms rank r runs a GEMM [t, t +
    gemm_us(r)) µs, then its all-reduce from gap_us(r) µs after it to 20 µs after the later one starts."""
    b = TraceBuilder()
    for r in range(2):
        b.process(100 + r)
        b.gpu(r)
    for i in range(10):
        t = T0 + i * MS
        ar = [t + (gemm_us(r) + gap_us(r)) * US for r in range(2)]
        for r in range(2):
            g1 = t + gemm_us(r) * US
            b.launch(t - 6 * US, t - 5 * US, t, g1, pid=100 + r, tid=101 + r, device=r, name=GEMM)
            b.launch(ar[r] - 6 * US, ar[r] - 5 * US, ar[r], max(ar) + 20 * US, pid=100 + r, tid=101 + r, device=r,
                     name=AR)
    b.write(str(path))


def test_the_verdict_says_the_late_rank_was_launched_late(tmp_path: Path) -> None:
    """Both GEMMs run 300 µs; rank 1's all-reduce starts 82 µs after its GEMM (rank 0's 2 µs): 80 µs late at all
    10; since the previous all-reduce (ended at t − 598 µs; collectives 1-9) its GPU idled 598 + 82 = 680 µs, rank
    0's 598 + 2 = 600 µs: 80 µs more, min(80, 80) / 80 = 1.0 >= 0.5: launched late."""
    p = tmp_path / "t.sqlite"
    _gemm_then_ar(p, lambda r: 300, lambda r: 82 if r == 1 else 2)
    v = _nccl(p).straggler
    assert v is not None and v.late_pid == 101
    assert (v.late_idle_before_p50_ns, v.late_by_p50_ns, v.late_idle_share_p50) == (80 * US, 80 * US, 1.0)
    rep = analyze_path(str(p))
    (f,) = [f for f in rep.findings if f.id == "nccl_wait"]
    assert (f.checks[-1].metric, f.checks[-1].observed, f.checks[-1].op) == ("late_idle_share_p50", 1.0, ">=")
    assert f.evidence[-1].startswith("Launched late: at the collectives it started last, its GPU sat idle a median "
                                     "80.00 µs longer than the earliest rank's since the previous kernel of that "
                                     "collective, while it started a median 80.00 µs")
    assert f.recommendation[0].startswith("The late rank's work reaches its GPU late")


def test_the_verdict_says_the_late_rank_s_gpu_work_ran_longer(tmp_path: Path) -> None:
    """Rank 1's GEMM runs 380 µs (rank 0's 300), both all-reduces 2 µs after: 80 µs late; since the previous
    all-reduce both GPUs idled 598 + 2 = 600 µs: 0 µs more, 0 / 80 = 0.0 <= 0.1: GPU work. Rank 1's GEMM 360 µs and
    gap 22 µs: 80 late, idle 620 vs 600 µs: 20 / 80 = 0.25, between: no cause, the old advice."""
    p = tmp_path / "t.sqlite"
    _gemm_then_ar(p, lambda r: 380 if r == 1 else 300, lambda r: 2)
    v = _nccl(p).straggler
    assert v is not None and (v.late_idle_before_p50_ns, v.late_by_p50_ns, v.late_idle_share_p50) == (
        0, 80 * US, 0.0)
    (f,) = [f for f in analyze_path(str(p)).findings if f.id == "nccl_wait"]
    assert f.evidence[-1].startswith("GPU work ran longer:") and f.checks[-1].op == "<="
    assert f.recommendation[0].startswith("The late rank's GPU work before the collective takes longer")
    q = tmp_path / "m.sqlite"
    _gemm_then_ar(q, lambda r: 360 if r == 1 else 300, lambda r: 22 if r == 1 else 2)
    (f,) = [f for f in analyze_path(str(q)).findings if f.id == "nccl_wait"]
    assert f.checks[-1].metric == "wait_pct_of_window" and f.recommendation[0].startswith("Balance the work")
    assert _nccl(q).straggler.late_idle_share_p50 == 0.25   # type: ignore[union-attr]
