"""What made the late rank late (docs/CLUSTER.md "What made the late rank late"): the cluster's late-arriver claim
names "launched late" (since the previous kernel of that collective its GPU sat idle longer than the earliest
rank's by at least half of how late it was) or "GPU work ran longer" (by at most a tenth: its GPU was busy for the
rest), and nothing new in between. Truth by construction: hand-computed numbers."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np
import pytest
from synth import TraceBuilder
from synth.scenarios.cluster import AR, BASE_UTC, GEMM, MS

import nsys_llm_explainer as nle
from nsys_llm_explainer.analyses.comms.arrival import excess_idle, idle_share, idle_since_previous, late_cause

US = 1_000
N = 4
Param = Callable[[int, int], int]


def _tp(out: Path, gemm_us: Param, gap_us: Param, steps: int = 10) -> None:
    """4 rank files (pid 5000 + r on GPU r, every session starting at BASE_UTC), ``steps`` steps of 1 ms from 50 ms:
    in step s rank r runs a GEMM from T + 10 µs for ``gemm_us(r, s)`` µs, then its all-reduce from ``gap_us(r, s)``
    µs after the GEMM's end (each launched 5 µs before its kernel starts); every all-reduce ends 20 µs after the
    latest one starts. From step 1 on, its GPU's idle since the previous all-reduce (which ended together on every
    rank) is the stretch up to its GEMM, the same on every rank, + ``gap_us``: a rank's extra idle over the earliest
    is its gap less the earliest's; how late the last rank is = its all-reduce start − the earliest (the all-reduces
    end together: also their longest − its duration)."""
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
    its GPU sits idle 152 / 252 µs after its GEMM (the others' 2 µs) and it arrives 150 / 250 µs after the others:
    150 / 250 µs more idle than the earliest (rank 0) since the previous all-reduce, extra idle / lateness 1.0 at its
    9 late arrivals with a previous all-reduce (steps 1-9; step 0 has none: unknown, left out): launched late.
    Medians over steps 2, 4, 6, 8 (150 µs) and 1, 3, 5, 7, 9 (250 µs): extra idle 250 µs, lateness 250 µs. Waiting
    caused (all 10): 3 ranks × 5 × (150 + 250) µs = 6 ms."""
    _tp(tmp_path, lambda r, s: 300, lambda r, s: 2 + ((150 if s % 2 == 0 else 250) if r == 2 else 0))
    c, ranks = _claim(tmp_path)
    r2 = ranks["rank2"]
    assert (c.rank, r2.last_arrival_count, r2.wait_caused_ns) == ("rank2", 10, 6 * MS)
    assert (r2.late_idle_before_p50_ns, r2.late_by_p50_ns, r2.late_idle_share_p50) == (250 * US, 250 * US, 1.0)
    assert [(k.metric, k.observed, k.op, k.threshold) for k in c.checks][-1] == ("late_idle_share_p50", 1.0, ">=",
                                                                                 0.5)
    assert c.evidence[-1].startswith("Launched late: at the collectives it arrived last at, its GPU sat idle a "
                                     "median 250.00 µs longer than the earliest rank's since the previous kernel of "
                                     "that collective")
    assert "while it was a median 250.00 µs late" in c.evidence[-1] and "median 100 %" in c.evidence[-1]
    assert c.advice[0].startswith("rank2's work was launched late: in its single-file report (ranks/)")
    assert "compare" not in " ".join(c.advice)


def test_a_rank_whose_gemm_runs_longer_is_named_gpu_work(tmp_path: Path) -> None:
    """Rank 1's GEMM runs 420 µs, the others' 300 µs; every all-reduce starts 2 µs after its rank's GEMM: rank 1
    arrives 120 µs late at all 10, its GPU idled as long as the earliest's since the previous all-reduce (0 µs
    more): 0 / 120 = 0.0 <= 0.1: GPU work. Waiting caused: 3 × 10 × 120 µs = 3.6 ms."""
    _tp(tmp_path, lambda r, s: 420 if r == 1 else 300, lambda r, s: 2)
    c, ranks = _claim(tmp_path)
    r1 = ranks["rank1"]
    assert (c.rank, r1.wait_caused_ns) == ("rank1", 3600 * US)
    assert (r1.late_idle_before_p50_ns, r1.late_by_p50_ns, r1.late_idle_share_p50) == (0, 120 * US, 0.0)
    assert [(k.metric, k.observed, k.op, k.threshold) for k in c.checks][-1] == ("late_idle_share_p50", 0.0,
                                                                                 "<=", 0.1)
    assert c.evidence[-1].startswith("GPU work ran longer: at the collectives it arrived last at, its GPU sat idle "
                                     "a median 0.00 µs longer than the earliest rank's")
    assert "a median 120.00 µs late" in c.evidence[-1]
    assert c.advice[0] == ("Compare rank1's kernels with another rank's: `nsys-llm-explain compare` on rank0's "
                           "trace and rank1's (which kernels take longer or run more often).")
    assert "throttling" in c.advice[1]


def test_a_rank_late_for_both_reasons_gets_no_cause(tmp_path: Path) -> None:
    """Rank 3's GEMM runs 360 µs (60 µs longer) and its all-reduce starts 42 µs after it (the others' 2 µs): 100 µs
    late, 40 µs of it more GPU idle than the earliest's: 0.4, between 0.1 and 0.5: the claim is made as before, with
    its generic advice, no cause named and no check row for one (the rank's row still carries the medians)."""
    _tp(tmp_path, lambda r, s: 360 if r == 3 else 300, lambda r, s: 42 if r == 3 else 2)
    c, ranks = _claim(tmp_path)
    r3 = ranks["rank3"]
    assert c.rank == "rank3"
    assert (r3.late_idle_before_p50_ns, r3.late_by_p50_ns, r3.late_idle_share_p50) == (40 * US, 100 * US, 0.4)
    assert "late_idle_share_p50" not in [k.metric for k in c.checks]
    assert not any(e.startswith(("Launched late", "GPU work ran longer")) for e in c.evidence)
    assert c.advice == ("Look at what this rank does before its collectives (host work, data loading, a slower GPU "
                        "or link); its single-file report is under ranks/.",)


@pytest.mark.parametrize("extra_gemm, gap, cause", [
    (50, 52, "launched_late"),   # 50 µs more idle of 50 + 50 = 100 µs late: 0.5, the threshold (>=)
    (52, 50, None),              # 48 of 100: 0.48
    (90, 12, "gpu_work"),        # 10 of 90 + 10 = 100: 0.1, the threshold (<=)
    (88, 14, None),              # 12 of 100: 0.12
])
def test_the_thresholds_are_inclusive(tmp_path: Path, extra_gemm: int, gap: int, cause: str) -> None:
    """Rank 0's GEMM runs ``extra_gemm`` µs longer and its all-reduce starts ``gap`` µs after it (the others': 2 µs):
    it is late by extra_gemm + gap − 2 = 100 µs, with gap − 2 µs of it more GPU idle than the earliest rank's."""
    _tp(tmp_path, lambda r, s: 300 + (extra_gemm if r == 0 else 0), lambda r, s: gap if r == 0 else 2)
    c, ranks = _claim(tmp_path)
    assert (c.rank, ranks["rank0"].late_by_p50_ns) == ("rank0", 100 * US)
    assert ranks["rank0"].late_idle_share_p50 == (gap - 2) / 100
    assert late_cause(ranks["rank0"].late_idle_share_p50) == cause
    assert ("late_idle_share_p50" in [k.metric for k in c.checks]) == (cause is not None)


def test_idle_since_previous_counts_every_kernel_of_the_device() -> None:
    """Kernels (start, end, device; group for the queried ones), given unsorted: on d0 A [0, 100] g1, B [50, 300]
    (another stream), C [350, 380], A2 [500, 520] g1, A3 [510, 530] g1, D [600, 610] g2; on d1 E [5, 9] g3,
    F [20, 40], E2 [100, 110] g3. A2: since A's end, [100, 500) less B's 200 and C's 30 busy ns: 170; A3: A2 (its
    group's previous) still runs at 510: 0; E2: [9, 100) less F's 20: 71; A, D (A's are another group's), E: the
    first of their group: −1 (unknown)."""
    start = np.array([500, 0, 350, 20, 510, 50, 600, 5, 100])
    end = np.array([520, 100, 380, 40, 530, 300, 610, 9, 110])
    dev = np.array([0, 0, 0, 1, 0, 0, 0, 1, 1])
    rows, group = np.array([0, 7, 4, 6, 1, 8]), np.array([1, 3, 1, 2, 1, 3])   # A2, E, A3, D, A, E2
    assert idle_since_previous(start, end, dev, rows, group).tolist() == [170, -1, 0, -1, -1, 71]
    o = np.argsort(start, kind="stable")   # sorted by start, as the model's kernels are: the same answers
    back = np.argsort(o)
    assert idle_since_previous(start[o], end[o], dev[o], back[rows], group).tolist() == [170, -1, 0, -1, -1, 71]
    assert idle_since_previous(start, end, dev, np.empty(0, np.int64), np.empty(0, np.int64)).tolist() == []


def test_idle_since_previous_is_the_definition_on_random_kernels() -> None:
    """On 400 random kernels over 3 devices (short and long ones, ties of start), 120 queried in 6 groups: each
    query's previous is the one of its group just before it in (start, end, given) order; its idle = the ns of
    [previous end, its start) in which no kernel of its device runs (0 when the previous ends at or after its start),
    −1 for a group's first — the definition applied ns by ns."""
    rng = np.random.default_rng(7)
    start = rng.integers(0, 2000, 400)
    end = start + rng.choice([1, 5, 40, 300], 400)
    dev = rng.integers(0, 3, 400)
    rows = rng.choice(400, 120, replace=False)
    group = rng.integers(0, 6, 120)
    busy = np.zeros((3, 2400), bool)
    for s0, e0, d0 in zip(start.tolist(), end.tolist(), dev.tolist()):
        busy[d0, s0:e0] = True
    order = sorted(range(120), key=lambda j: (group[j], start[rows[j]], end[rows[j]], j))
    want = [-1] * 120
    for prev, j in zip(order, order[1:]):
        if group[prev] == group[j]:
            a, b = int(end[rows[prev]]), int(start[rows[j]])
            want[j] = int((~busy[dev[rows[j]], a:b]).sum()) if a < b else 0
    assert idle_since_previous(start, end, dev, rows, group).tolist() == want


def test_excess_idle_is_at_least_0_and_unknown_when_either_is() -> None:
    """Late rank's idle less the earliest's: 680 − 600 = 80; 600 − 650 → 0 (it idled less); −1 on either side →
    −1."""
    assert excess_idle(np.array([680, 600, -1, 50]), np.array([600, 650, 10, -1])).tolist() == [80, 0, -1, -1]


def test_idle_share_caps_at_the_lateness_and_leaves_unknowns_out() -> None:
    """min(excess idle, late) / late: 300 of 200 late → 1; 20 of 200 → 0.1; −1 (unknown) or 0 late → NaN."""
    got = idle_share(np.array([300, 20, -1, 5]), np.array([200, 200, 100, 0]))
    assert got[:2].tolist() == [1.0, 0.1] and np.isnan(got[2:]).all()
    assert (late_cause(None), late_cause(0.5), late_cause(0.4999), late_cause(0.1), late_cause(0.1001)) == (
        None, "launched_late", None, "gpu_work", None)
