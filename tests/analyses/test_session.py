"""The capture as recorded (docs/METRICS.md "Session and CUDA activity"): the session's length
from ``ANALYSIS_DETAILS``, its start on the export's timeline, the CUDA activity's place in it, and the one
line report.md says when that activity starts or ends far (> max(10 % of the session, 1 s)) from its edges.
Every number below is written by hand from the rows the test plants."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Optional, Tuple

import pytest
from conftest import as_report
from synth import TraceBuilder

from nsys_llm_explainer.analyses.trace.session import analyze_clock
from nsys_llm_explainer.pipeline import analyze_path, load_model
from nsys_llm_explainer.render import render_all

S = 1_000_000_000
MS = 1_000_000


def _trace(tmp_path: Path, first: int, last: int, session: Optional[Tuple[int, int]], *, drop: Tuple[str, ...] = (),
           meta: Optional[Dict[str, str]] = None, name: str = "t") -> Path:
    """Kernels launched every 10 ms from ``first``; the last kernel ends at ``last``: the CUDA activity is
    ``[first, last)`` (first launch call's start → last kernel's end)."""
    b = TraceBuilder()
    b.session = session
    for c in drop:
        b.drop_column("ANALYSIS_DETAILS", c)
    for k, v in (meta or {}).items():
        b.meta(k, v)
    t = first
    while t + 10 * MS <= last:
        b.launch(t, t + 5_000, t + 20_000, t + 10 * MS if t + 20 * MS > last else t + 8 * MS, pid=10, tid=10)
        t += 10 * MS
    p = tmp_path / f"{name}.sqlite"
    b.write(str(p))
    return p


def _report(p: Path, out: Path) -> Tuple[Any, str]:
    rep = analyze_path(str(p))
    j = rep.to_dict()
    render_all(as_report(j), out)
    return j, (out / "report.md").read_text(encoding="utf-8")


def test_cuda_activity_far_from_both_edges(tmp_path: Path) -> None:
    """Session 0 → 20 s, CUDA activity 3 s → 4 s: far threshold max(2 s, 1 s) = 2 s; 3 s after the start and
    16 s before the end are both beyond it."""
    j, md = _report(_trace(tmp_path, 3 * S, 4 * S, (0, 20 * S)), tmp_path / "o")
    assert j["trace"]["session"] == {"duration_ns": 20 * S, "start_ns": 0, "end_ns": 20 * S,
                                     "cuda_start_ns": 3 * S, "cuda_end_ns": 4 * S, "placed": True,
                                     "starts_far": True, "ends_far": True}
    lines = [ln for ln in md.splitlines() if ln.startswith("**Session:**")]
    assert lines == ["**Session:** 20.000 s long as the export records it; its CUDA activity (1,000.000 ms) starts "
                     "3,000.000 ms after the session's start and ends 16.000 s before its end: the rest of the "
                     "session has no CUDA activity.  "]
    assert "; session 20.000 s as recorded (`ANALYSIS_DETAILS.duration`)." in md
    assert "of the 1,000.000 ms capture" not in md and " capture length" not in md


def test_far_is_strictly_more_than_the_threshold(tmp_path: Path) -> None:
    """Session 0 → 20 s, CUDA 2 s → 18 s: both gaps are exactly 2 s = 10 % of the session, not more: not far.
    Session 0 → 4.5 s, CUDA 3 s → 4 s: threshold max(0.45 s, 1 s) = 1 s; starts 3 s in (far), ends 0.5 s before
    the end (not far)."""
    j, md = _report(_trace(tmp_path, 2 * S, 18 * S, (0, 20 * S), name="a"), tmp_path / "a")
    s = j["trace"]["session"]
    assert (s["placed"], s["starts_far"], s["ends_far"]) == (True, False, False)
    assert "**Session:**" not in md and "; session 20.000 s as recorded" in md
    j, md = _report(_trace(tmp_path, 3 * S, 4 * S, (0, 4 * S + 500 * MS), name="b"), tmp_path / "b")
    s = j["trace"]["session"]
    assert (s["duration_ns"], s["starts_far"], s["ends_far"]) == (4_500 * MS, True, False)
    assert "**Session:** 4,500.000 ms long as the export records it; its CUDA activity (1,000.000 ms) starts " \
           "3,000.000 ms after the session's start and ends 500.000 ms before its end" in md


def test_length_from_start_and_stop_when_duration_is_absent(tmp_path: Path) -> None:
    """No ``duration`` column: stopTime − startTime (30 s); neither column: no session, and no line about it."""
    j, _ = _report(_trace(tmp_path, 3 * S, 4 * S, (5 * S, 35 * S), drop=("duration",), name="a"), tmp_path / "a")
    assert j["trace"]["session"]["duration_ns"] == 30 * S and j["trace"]["session"]["start_ns"] == 0
    j, md = _report(_trace(tmp_path, 3 * S, 4 * S, (0, 20 * S), drop=("duration", "stopTime"), name="b"),
                    tmp_path / "b")
    assert j["trace"]["session"] is None
    assert "**Session:**" not in md and "as recorded" not in md


@pytest.mark.parametrize("meta, start", [({"EXPORT_CONFIG_TIME_SHIFT": str(50 * S)}, 50 * S),
                                         ({"EXPORT_CONFIG_TIME_SHIFT": " ", "EXPORT_PARAM_TIME_SHIFT": str(50 * S)},
                                          50 * S),
                                         ({"EXPORT_PARAM_TIME_NORMALIZE": "true"}, 1735732800000000000)])
def test_session_start_follows_the_export_clock(tmp_path: Path, meta: Dict[str, str], start: int) -> None:
    """``--ts-shift 50 s``: the session starts at 50 s on the export's timeline; ``--ts-normalize``: at
    utcEpochNs (the builder's default). CUDA 3 s → 4 s after that start, session 20 s."""
    p = _trace(tmp_path, start + 3 * S, start + 4 * S, (0, 20 * S), meta=meta)
    j, md = _report(p, tmp_path / "o")
    s = j["trace"]["session"]
    assert (s["start_ns"], s["end_ns"], s["cuda_start_ns"] - start, s["placed"], s["starts_far"]) == (
        start, start + 20 * S, 3 * S, True, True)
    assert "starts 3,000.000 ms after the session's start and ends 16.000 s before its end" in md
    clock = analyze_clock(load_model(str(p)))   # a cluster places the file on UTC with the same shift
    assert (clock.shift_ns, clock.normalized) == (0 if "EXPORT_PARAM_TIME_NORMALIZE" in meta else 50 * S,
                                                  "EXPORT_PARAM_TIME_NORMALIZE" in meta)


def test_activity_outside_the_session_is_not_placed(tmp_path: Path) -> None:
    """Session 0 → 1 s, CUDA 3 s → 4 s: the timeline does not fit the record; the length is stated, no position."""
    j, md = _report(_trace(tmp_path, 3 * S, 4 * S, (0, 1 * S)), tmp_path / "o")
    s = j["trace"]["session"]
    assert (s["duration_ns"], s["placed"], s["starts_far"], s["ends_far"]) == (1 * S, False, False, False)
    assert "**Session:**" not in md and "; session 1,000.000 ms as recorded" in md


@pytest.mark.parametrize("meta, bound", [
    ({"START_DELAY_MS": "3000"}, "the recording started after a start delay of 3,000 ms (`START_DELAY_MS`)"),
    ({"START_TRIGGER": "Delayed", "START_DELAY_MS": "3000"},
     "the recording started after a start delay of 3,000 ms (`START_DELAY_MS`); the recording started at the start "
     "trigger `Delayed` (`START_TRIGGER`)"),
])
def test_a_bounded_recording_is_not_called_a_session_without_cuda_work(tmp_path: Path, meta: Dict[str, str],
                                                                      bound: str) -> None:
    """`nsys profile --delay=3`: the session 0 → 20 s, recording from 3 s (activity 3 s → 4 s). What ran in the
    first 3 s was not recorded (a model load's CUDA work): "the rest of the session has no CUDA activity" was false
    of it; the line says nothing was recorded and what bounded the recording."""
    j, md = _report(_trace(tmp_path, 3 * S, 4 * S, (0, 20 * S), meta=meta), tmp_path / "o")
    assert j["trace"]["session"]["bounded_by"] == bound
    lines = [ln for ln in md.splitlines() if ln.startswith("**Session:**")]
    assert lines == ["**Session:** 20.000 s long as the export records it; its CUDA activity (1,000.000 ms) starts "
                     "3,000.000 ms after the session's start and ends 16.000 s before its end: the rest of the "
                     f"session has no CUDA activity recorded — {bound} — so the program may have run CUDA work "
                     "then.  "]


def test_the_programs_profiler_calls_bound_the_recording(tmp_path: Path) -> None:
    """`--capture-range=cudaProfilerApi`: the program's `cudaProfilerStop` is recorded (the start trigger left as
    written, `Immediate`): the calls may have bounded the recording (they do under that option only)."""
    p = tmp_path / "api.sqlite"
    b = TraceBuilder()
    b.session = (0, 20 * S)
    t = 3 * S
    while t + 10 * MS <= 4 * S:
        b.launch(t, t + 5_000, t + 20_000, t + 8 * MS, pid=10, tid=10)
        t += 10 * MS
    b.runtime(4 * S - 2 * MS, 4 * S - 1 * MS, tid_g=b.thread(10, 10), name="cudaProfilerStop_v4000")
    b.write(str(p))
    j, _ = _report(p, tmp_path / "o")
    assert j["trace"]["session"]["bounded_by"] == ("the program calls `cudaProfilerStart` / `cudaProfilerStop`, which "
                                                   "bound the recording under `--capture-range=cudaProfilerApi`")
