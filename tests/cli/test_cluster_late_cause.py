"""What made the late rank late (docs/CLUSTER.md "What made the late rank late"): the cluster's late-arriver claim
names "launched late" (its GPU sat idle right before its collective kernel for most of how late it was) or "GPU work
ran longer" (its GPU busy up to it), and nothing new in between. Truth by construction: hand-computed numbers."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np
import pytest
from synth import TraceBuilder
from synth.scenarios.cluster import AR, BASE_UTC, GEMM, MS

import nsys_llm_explainer as nle
from nsys_llm_explainer.analyses.comms.arrival import idle_before, idle_share, late_cause

US = 1_000
N = 4
Param = Callable[[int, int], int]


def _tp(out: Path, gemm_us: Param, gap_us: Param, steps: int = 10) -> None:
    """4 rank files (pid 5000 + r on GPU r, every session starting at BASE_UTC), ``steps`` steps of 1 ms from 50 ms:
    in step s rank r runs a GEMM from T + 10 µs for ``gemm_us(r, s)`` µs, then its all-reduce from ``gap_us(r, s)``
    µs after the GEMM's end (each launched 5 µs before its kernel starts); every all-reduce ends 20 µs after the
    latest one starts. Its GPU's idle before the all-reduce is ``gap_us``; how late the last rank is = its
    all-reduce start − the earliest (the all-reduces end together: also their longest − its duration)."""
    for r in range(N):
        b = TraceBuilder("2024.2", seed=r, utc_epoch_ns=BASE_UTC)
        pid = 5000 + r
        b.process(pid, "python3")
        b.thread(pid, pid, f"rank{r}")
        b.gpu(r)
        for s in range(steps):
            t = 50 * MS + s * MS
            ar = [t + (10 + gemm_us(q, s) + gap_us(q, s)) * US for q in range(N)]
            g0, g1 = t + 10 * US, t + (10 + gemm_us(r, s)) * US
            b.launch(g0 - 5 * US, g0 - 4 * US, g0, g1, pid=pid, tid=pid, device=r, stream=7, name=GEMM)
            b.launch(ar[r] - 5 * US, ar[r] - 4 * US, ar[r], max(ar) + 20 * US, pid=pid, tid=pid, device=r, stream=7,
                     name=AR)
        b.write(str(out / f"rank{r}.sqlite"), overwrite=True)


def _claim(out: Path):   # the late-arriver claim and rank 2's row
    res = nle.analyze_cluster(str(out), jobs=1)
    (c,) = [c for c in res.claims if c.id == "late_arriver"]
    return c, {x.rank: x for x in res.collectives.ranks}


def test_a_rank_whose_host_launches_late_is_named_launched_late(tmp_path: Path) -> None:
    """Every GEMM runs 300 µs; rank 2's host launches its all-reduce 150 µs (even steps) / 250 µs (odd) late, so
    its GPU sits idle 152 / 252 µs after its GEMM (the others' 2 µs) and it arrives 150 / 250 µs after the others.
    idle / lateness capped at 1: 1.0 at every one of its 10 late arrivals: launched late. Medians: idle
    (152 + 252) / 2 = 202 µs, lateness (150 + 250) / 2 = 200 µs. Waiting caused: 3 ranks × 5 × (150 + 250) µs =
    6 ms."""
    _tp(tmp_path, lambda r, s: 300, lambda r, s: 2 + ((150 if s % 2 == 0 else 250) if r == 2 else 0))
    c, ranks = _claim(tmp_path)
    r2 = ranks["rank2"]
    assert (c.rank, r2.last_arrival_count, r2.wait_caused_ns) == ("rank2", 10, 6 * MS)
    assert (r2.late_idle_before_p50_ns, r2.late_by_p50_ns, r2.late_idle_share_p50) == (202 * US, 200 * US, 1.0)
    assert [(k.metric, k.observed, k.op, k.threshold) for k in c.checks][-1] == ("late_idle_share_p50", 1.0, ">=",
                                                                                 0.5)
    assert c.evidence[-1].startswith("Launched late: at the collectives it arrived last at, its GPU sat idle a "
                                     "median 202.00 µs right before its collective kernel")
    assert "while it was a median 200.00 µs late" in c.evidence[-1] and "median 100 %" in c.evidence[-1]
    assert c.advice[0].startswith("rank2's collectives were launched late: in its single-file report (ranks/)")
    assert "compare" not in " ".join(c.advice)


def test_a_rank_whose_gemm_runs_longer_is_named_gpu_work(tmp_path: Path) -> None:
    """Rank 1's GEMM runs 420 µs, the others' 300 µs; every all-reduce starts 2 µs after its rank's GEMM: rank 1
    arrives 120 µs late at all 10, its GPU idle 2 µs before: 2 / 120 = 0.0167 <= 0.1: GPU work. Waiting caused:
    3 × 10 × 120 µs = 3.6 ms."""
    _tp(tmp_path, lambda r, s: 420 if r == 1 else 300, lambda r, s: 2)
    c, ranks = _claim(tmp_path)
    r1 = ranks["rank1"]
    assert (c.rank, r1.wait_caused_ns) == ("rank1", 3600 * US)
    assert (r1.late_idle_before_p50_ns, r1.late_by_p50_ns, r1.late_idle_share_p50) == (2 * US, 120 * US, 0.0167)
    assert [(k.metric, k.observed, k.op, k.threshold) for k in c.checks][-1] == ("late_idle_share_p50", 0.0167,
                                                                                 "<=", 0.1)
    assert c.evidence[-1].startswith("GPU work ran longer: at the collectives it arrived last at, its GPU sat idle "
                                     "a median 2.00 µs")
    assert "a median 120.00 µs late" in c.evidence[-1]
    assert c.advice[0] == ("Compare rank1's kernels with another rank's: `nsys-llm-explain compare` on rank0's "
                           "trace and rank1's (which kernels take longer or run more often).")
    assert "throttling" in c.advice[1]


def test_a_rank_late_for_both_reasons_gets_no_cause(tmp_path: Path) -> None:
    """Rank 3's GEMM runs 360 µs (60 µs longer) and its all-reduce starts 42 µs after it (the others' 2 µs): 100 µs
    late, 42 µs of it with its GPU idle: 0.42, between 0.1 and 0.5: the claim is made as before, with its generic
    advice, no cause named and no check row for one (the rank's row still carries the medians)."""
    _tp(tmp_path, lambda r, s: 360 if r == 3 else 300, lambda r, s: 42 if r == 3 else 2)
    c, ranks = _claim(tmp_path)
    r3 = ranks["rank3"]
    assert c.rank == "rank3"
    assert (r3.late_idle_before_p50_ns, r3.late_by_p50_ns, r3.late_idle_share_p50) == (42 * US, 100 * US, 0.42)
    assert "late_idle_share_p50" not in [k.metric for k in c.checks]
    assert not any(e.startswith(("Launched late", "GPU work ran longer")) for e in c.evidence)
    assert c.advice == ("Look at what this rank does before its collectives (host work, data loading, a slower GPU "
                        "or link); its single-file report is under ranks/.",)


@pytest.mark.parametrize("extra_gemm, gap, cause", [
    (52, 50, "launched_late"),   # 50 µs idle of 52 + 48 = 100 µs late: 0.5, the threshold (>=)
    (54, 48, None),              # 48 of 100: 0.48
    (92, 10, "gpu_work"),        # 10 of 92 + 8 = 100: 0.1, the threshold (<=)
    (90, 12, None),              # 12 of 100: 0.12
])
def test_the_thresholds_are_inclusive(tmp_path: Path, extra_gemm: int, gap: int, cause: str) -> None:
    """Rank 0's GEMM runs ``extra_gemm`` µs longer and its all-reduce starts ``gap`` µs after it (the others': 2 µs):
    it is late by extra_gemm + gap − 2 = 100 µs, with ``gap`` µs of it idle."""
    _tp(tmp_path, lambda r, s: 300 + (extra_gemm if r == 0 else 0), lambda r, s: gap if r == 0 else 2)
    c, ranks = _claim(tmp_path)
    assert (c.rank, ranks["rank0"].late_by_p50_ns) == ("rank0", 100 * US)
    assert ranks["rank0"].late_idle_share_p50 == gap / 100
    assert late_cause(ranks["rank0"].late_idle_share_p50) == cause
    assert ("late_idle_share_p50" in [k.metric for k in c.checks]) == (cause is not None)


def test_idle_before_counts_every_kernel_of_the_device() -> None:
    """Kernels (start, end, device): a [0, 100] d0, b [50, 300] d0 (another stream), c [200, 250] d0, x [210, 400]
    d1, q1 [320, 340] d0, q2 [400, 410] d0, q3 [400, 420] d0 (starts with q2), q4 [5, 9] d1, given unsorted.
    q1: the latest end among d0's kernels started before it is b's 300: 20 ns idle (c's 250 is not the one);
    q2 / q3: 340 (q1), each other's start not before: 60 each; c: b still runs at 200: 0 (busy); a and q4: no
    kernel of their device started before: −1 (unknown); x: q4 ended at 9: 201."""
    start = np.array([400, 0, 50, 200, 210, 320, 400, 5])
    end = np.array([410, 100, 300, 250, 400, 340, 420, 9])
    dev = np.array([0, 0, 0, 0, 1, 0, 0, 1])
    assert idle_before(start, end, dev, np.array([5, 0, 6, 3, 1, 7, 4])).tolist() == [20, 60, 60, 0, -1, -1, 201]
    o = np.argsort(start, kind="stable")   # sorted by start, as the model's kernels are: the same answers
    back = np.argsort(o)
    assert idle_before(start[o], end[o], dev[o], back[[5, 0, 6, 3, 1, 7, 4]]).tolist() == [20, 60, 60, 0, -1, -1,
                                                                                          201]
    assert idle_before(start, end, dev, np.empty(0, np.int64)).tolist() == []


def test_idle_before_is_the_definition_on_random_kernels() -> None:
    """On 400 random kernels over 3 devices (short and long ones, ties of start): each query's idle before is its
    start − max(end of its device's kernels with an earlier start), floored at 0, −1 when there is none — the
    definition applied kernel by kernel."""
    rng = np.random.default_rng(7)
    start = rng.integers(0, 2000, 400)
    end = start + rng.choice([1, 5, 40, 300], 400)
    dev = rng.integers(0, 3, 400)
    rows = rng.choice(400, 120, replace=False)
    want = []
    for r in rows.tolist():
        before = (dev == dev[r]) & (start < start[r])
        want.append(-1 if not before.any() else max(int(start[r] - end[before].max()), 0))
    assert idle_before(start, end, dev, rows).tolist() == want


def test_idle_share_caps_at_the_lateness_and_leaves_unknowns_out() -> None:
    """min(idle, late) / late: 300 of 200 late → 1; 20 of 200 → 0.1; −1 (unknown) or 0 late → NaN."""
    got = idle_share(np.array([300, 20, -1, 5]), np.array([200, 200, 100, 0]))
    assert got[:2].tolist() == [1.0, 0.1] and np.isnan(got[2:]).all()
    assert (late_cause(None), late_cause(0.5), late_cause(0.4999), late_cause(0.1), late_cause(0.1001)) == (
        None, "launched_late", None, "gpu_work", None)
