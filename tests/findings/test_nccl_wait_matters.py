"""The ``nccl_wait`` finding rests on waiting that matters (docs/FINDINGS.md "NCCL"): the late-rank rule names the
rank whose late arrivals caused most of the waiting, but a rank that starts its collectives a few µs after the
others (launch jitter) costs them a sliver of their time; the finding needs the waiting it caused to be ≥ 5 % of
the other ranks' windows (the findings' MEDIUM_SHARE), the verdict's numbers stay in the NCCL section."""

from __future__ import annotations

from pathlib import Path

from synth import TraceBuilder

from nsys_llm_explainer.options import options_from_kwargs
from nsys_llm_explainer.pipeline import analyze_path

US = 1_000
T0 = 1_000_000
AR = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"


def _tp4(path: Path, late_us: int, end_us: int, flavor: str) -> None:
    """4 ranks (pid 100 + r on GPU r, one process per GPU), 40 all-reduces 500 µs apart: at t = T0 + i · 500 µs
    ranks 0–2 start at t + 300 µs, rank 3 at t + 300 + ``late_us``; every kernel ends at t + ``end_us``. Each
    launch's API call starts 6 µs before its kernel."""
    b = TraceBuilder(flavor=flavor)
    for r in range(4):
        b.process(100 + r)
        b.gpu(r)
    for i in range(40):
        t = T0 + i * 500 * US
        for r in range(4):
            s = t + (300 + (late_us if r == 3 else 0)) * US
            b.launch(s - 6 * US, s - 2 * US, s, t + end_us * US, pid=100 + r, tid=101 + r, device=r, name=AR)
    b.write(str(path))


def test_a_rank_late_by_launch_jitter_gets_no_finding(tmp_path: Path) -> None:
    """Rank 3 starts every all-reduce 3 µs after the others (old exporter). The rule still names it (last at 40 of
    40, the 3 × 3 µs × 40 = 360 µs it caused is 100 % of the waiting) and the NCCL section says so, but the window
    (first API call T0 + 294 µs to the last end T0 + 19,500 + 350 µs) is 19,556 µs per GPU: 360 / (3 × 19,556) =
    0.61 % of the other ranks' time < 5 %: no ``nccl_wait`` finding (the old code made it a HIGH one)."""
    p = tmp_path / "t.sqlite"
    _tp4(p, 3, 350, "2022.4")
    rep = analyze_path(str(p), options_from_kwargs())
    v = rep.nccl.straggler
    assert v is not None and (v.late_pid, v.wait_ns_total, v.last_arrivals) == (103, 360 * US, 40)
    assert [d.window_ns for d in rep.gpu_time.devices] == [19_556 * US] * 4
    assert [f.id for f in rep.findings if f.id == "nccl_wait"] == []


def test_a_rank_late_by_a_fifth_of_the_step_is_a_high_finding(tmp_path: Path) -> None:
    """Rank 3 starts every all-reduce 60 µs after the others, all end at t + 420 µs (new exporter): it caused 3 × 60
    × 40 = 7,200 µs of waiting (100 %); window T0 + 294 µs → T0 + 19,500 + 420 µs = 19,626 µs per GPU: 7,200 /
    (3 × 19,626) = 12.23 % ≥ 5 %: the finding, its check row, severity high (confidence high: 100 % ≥ 80 %)."""
    p = tmp_path / "t.sqlite"
    _tp4(p, 60, 420, "2026.2")
    rep = analyze_path(str(p), options_from_kwargs())
    f = next(f for f in rep.findings if f.id == "nccl_wait")
    assert (f.time_at_stake_ns, f.severity) == (7_200 * US, "high")
    assert [(c.metric, c.observed, c.op, c.threshold) for c in f.checks][:4] == [
        ("matched", 40, ">=", 5), ("last_arrivals", 40, ">=", 2), ("wait_caused_share", 1.0, ">=", 0.6),
        ("wait_pct_of_window", 12.23, ">=", 5.0)]
    assert f.holds()
