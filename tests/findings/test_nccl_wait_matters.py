"""The straggler verdict rests on waiting that matters (docs/FINDINGS.md "NCCL"): the late-rank rule names the rank
whose late arrivals caused most of the waiting, but a rank that starts its collectives a few µs after the others
(launch jitter) costs them a sliver of their time; the rule needs the waiting it caused to be ≥ 5 % of the other
ranks' captured time (one scope: the collectives matched over the whole capture, the devices' whole captures). The
NCCL section, the ``nccl_wait`` finding and the ``comm_exposed`` finding's account of the wait follow the one
verdict: when it is withheld the section says why, with the numbers."""

from __future__ import annotations

from pathlib import Path

import pytest
from synth import TraceBuilder

from nsys_llm_explainer.options import options_from_kwargs
from nsys_llm_explainer.pipeline import analyze_path
from nsys_llm_explainer.render import render_all
from nsys_llm_explainer.report import Report

US = 1_000
MS = 1_000_000
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


def _nccl_section(rep: Report, out: Path) -> str:
    render_all(rep, out)
    md = (out / "report.md").read_text()
    return md[md.index("## NCCL"):].split("\n## ")[0]


def test_a_rank_late_by_launch_jitter_is_no_straggler(tmp_path: Path) -> None:
    """Rank 3 starts every all-reduce 3 µs after the others (old exporter): last at 40 of 40, the 3 × 3 µs × 40 =
    360 µs it caused is 100 % of the waiting, but each GPU captured 19,556 µs (first API call T0 + 294 µs to the last
    end T0 + 19,500 + 350 µs): 360 / (3 × 19,556) = 0.61 % of the other ranks' time < 5 %: no verdict, and the NCCL
    section says why (before: "**Straggler:** pid 103 / GPU 3 arrives late; …" while the finding was withheld).
    The exposed-communication finding no longer takes off a wait "that the NCCL-wait finding explains" when there is
    no such finding: its 160 kernels (120 × 50 µs + 40 × 47 µs = 7,880 µs) run alone for 7.880 / (4 × 19.556) =
    10.07 % ≥ 10 % of the GPUs' time (before: less the 360 µs, 9.61 %, no finding)."""
    p = tmp_path / "t.sqlite"
    _tp4(p, 3, 350, "2022.4")
    rep = analyze_path(str(p), options_from_kwargs())
    assert rep.nccl.straggler is None
    why = ("pid 103 / GPU 3 started last in 100% of collectives, its late arrivals causing 100% of the 360.00 µs of "
           "waiting, but that is a mean 3.00 µs per other rank at each collective it arrived last at, 0.61 % of the "
           "other ranks' captured time (vs ≥ 5 %): too little waiting to name a rank the others wait for; no "
           "straggler verdict")
    assert rep.nccl.straggler_reason == why
    assert [(d.window_ns, d.full.window_ns if d.full else 0) for d in rep.gpu_time.devices] == [(19_556 * US,) * 2] * 4
    assert [f.id for f in rep.findings if f.id == "nccl_wait"] == []
    sec = _nccl_section(rep, tmp_path / "out")
    assert "**Straggler:**" not in sec and f"No straggler: {why}" in sec
    (f,) = [f for f in rep.findings if f.id == "comm_exposed"]
    assert f.checks[0].observed == pytest.approx(100 * 7_880 / (4 * 19_556))
    assert f.evidence[-1] == ("A communication kernel also runs while it waits for a late peer: the NCCL section "
                              f"compares the 4 ranks this trace holds and names no late rank: {why}.")


def test_launch_jitter_that_rotates_between_ranks_names_no_rank(tmp_path: Path) -> None:
    """At all-reduce i rank i % 4 starts 3 µs after the others (the same layout otherwise): each rank is last at 10
    and caused 10 × 3 × 3 = 90 µs of the 360 µs (25 % < 60 %): no verdict, the reason gives the first rank's figures;
    nothing in the report calls a rank late."""
    p = tmp_path / "t.sqlite"
    b = TraceBuilder(flavor="2026.2")
    for r in range(4):
        b.process(100 + r)
        b.gpu(r)
    for i in range(40):
        t = T0 + i * 500 * US
        for r in range(4):
            s = t + (303 if r == i % 4 else 300) * US
            b.launch(s - 6 * US, s - 2 * US, s, t + 350 * US, pid=100 + r, tid=101 + r, device=r, name=AR)
    b.write(str(p))
    rep = analyze_path(str(p), options_from_kwargs())
    assert [(x.last_arrival_count, x.wait_ns_total, x.wait_caused_ns) for x in rep.nccl.ranks] == [
        (10, 90 * US, 90 * US)] * 4
    why = ("no rank's late arrivals cause ≥ 60% of the waiting (the most: pid 100 / GPU 0 started last in 25% of "
           "collectives, its late arrivals causing 25% of the 360.00 µs of waiting)")
    assert rep.nccl.straggler is None and rep.nccl.straggler_reason == why
    sec = _nccl_section(rep, tmp_path / "out")
    assert "**Straggler:**" not in sec and f"No straggler: {why}" in sec
    assert [f.id for f in rep.findings if f.id == "nccl_wait"] == []


def test_the_waiting_counts_against_the_whole_capture_not_the_window(tmp_path: Path) -> None:
    """Rank 3 starts every all-reduce 20 µs late (new exporter, kernels end at t + 420 µs): it caused 3 × 20 × 40 =
    2,400 µs over the whole capture, 2,400 / (3 × 19,626) = 4.08 % of the other GPUs' captured time (T0 + 294 µs to
    T0 + 19,500 + 420 µs each): no verdict. With ``--window`` set to 5 ms of it the waiting stays the capture's, so
    the share does too (before: 2,400 µs over the others' 3 × 5 ms windows, 16 %: a HIGH finding putting all the
    capture's waiting in a 5 ms window)."""
    p = tmp_path / "t.sqlite"
    _tp4(p, 20, 420, "2026.2")
    rep = analyze_path(str(p), options_from_kwargs(window=(T0 + 5 * MS, T0 + 10 * MS)))
    assert [d.window_ns for d in rep.gpu_time.devices] == [5 * MS] * 4
    assert rep.nccl.straggler is None
    assert rep.nccl.straggler_reason == (
        "pid 103 / GPU 3 started last in 100% of collectives, its late arrivals causing 100% of the 2.400 ms of "
        "waiting, but that is a mean 20.00 µs per other rank at each collective it arrived last at, 4.08 % of the "
        "other ranks' captured time (vs ≥ 5 %): too little waiting to name a rank the others wait for; no straggler "
        "verdict")
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
    assert ("**Straggler:** pid 103 / GPU 3 arrives late; the other 3 ranks wait 7.200 ms in all for it in "
            "collectives (100 % of all the waiting; the most: pid 100 / GPU 0; confidence high).") in _nccl_section(
        rep, tmp_path / "o")
