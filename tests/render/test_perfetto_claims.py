"""Claims of timeline.pftrace: a track or marker the file shows that its trace contradicts. Each trace is built by hand;
the truth is worked out in the docstring."""

from __future__ import annotations

from pathlib import Path

import pytest
from synth import TraceBuilder
from test_perfetto import Parsed

from nsys_llm_explainer.pipeline import analyze_path
from nsys_llm_explainer.render.perfetto import FILE_NAME, write_perfetto

US = 1_000
MS = 1_000_000


def _warmup_trace(path: Path, tail: bool = False) -> None:
    """Warm-up: a 50 µs kernel every 4 ms over [0, 36.07) ms; then 20 steps: a 900 µs kernel at 40.05 + i ms (call at
    40 + i ms). The auto window keeps [40.05, 59.95) ms: 40.05 ms of warm-up trimmed, no tail. With ``tail``: a
    30 µs kernel every 4 ms from 64.02 ms to 100.05 ms too, the window the same, 40.1 ms of tail trimmed."""
    b = TraceBuilder()
    b.process(100, "python3")
    b.thread(100, 1, "main")
    for i in range(10):
        t = i * 4 * MS
        b.launch(t, t + 10 * US, t + 20 * US, t + 70 * US, pid=100, tid=1, name="warm")
    for i in range(20):
        t = 40 * MS + i * MS
        b.launch(t, t + 10 * US, t + 50 * US, t + 950 * US, pid=100, tid=1, name="gemm")
    for i in range(10 if tail else 0):
        t = 64 * MS + i * 4 * MS
        b.launch(t, t + 10 * US, t + 20 * US, t + 50 * US, pid=100, tid=1, name="tail")
    b.write(str(path))


@pytest.mark.parametrize("tail", [False, True])
def test_the_warm_up_finding_marks_the_warm_up_not_the_window(tmp_path: Path, tail: bool) -> None:
    """The `capture_window` finding ("Warm-up / tail make the whole capture look N points idler ...") is about what
    the window trimmed: its marker lies over the warm-up [0, 40.05 ms) (no tail: none), not over the window
    [40.05, 59.95) ms it says is *not* idle; the file keeps the whole capture (82 rows < 50 000), and the analysis
    track's slices stay a stack (Parsed pairs begin / end as Perfetto does). With a tail (to 100.05 ms), a second
    marker lies over [59.95, 100.05) ms, after the window and the findings over it."""
    p = tmp_path / "w.sqlite"
    _warmup_trace(p, tail)
    r = analyze_path(str(p))
    assert (r.window.start_ns, r.window.end_ns, r.window.full_start_ns) == (40_050_000, 59_950_000, 0)
    assert r.timeline_file.span.kept == "capture"
    out = tmp_path / FILE_NAME
    r.write_perfetto(out)
    t = Parsed(out.read_bytes())
    marks = [(s.start, s.end) for s in t.slices if s.name.startswith("Warm-up / tail")]
    want = [(0, 40_050_000)] + ([(59_950_000, 100_050_000)] if tail else [])
    assert marks == want
    assert sorted({(s.start, s.end) for s in t.on("analysis")}) == sorted(want + [(40_050_000, 59_950_000)])


def test_a_rank_thread_track_names_its_own_tid(tmp_path: Path) -> None:
    """In a cluster each rank is one Perfetto process and a thread track carries its tid in its name. Thread 1 is
    named "tid 12": its track must read "tid 12 (tid 1)", not "tid 12" (the tid 1 of "tid 12" is a prefix of the
    text, not the thread's tid)."""
    b = TraceBuilder()
    b.process(100, "python3")
    b.thread(100, 1, "tid 12")
    for i in range(5):
        t = i * MS
        b.launch(t, t + 10 * US, t + 50 * US, t + 500 * US, pid=100, tid=1, name="gemm")
    p = tmp_path / "r.sqlite"
    b.write(str(p))
    r = analyze_path(str(p))
    out = tmp_path / FILE_NAME
    write_perfetto(r, out, rank=(0, "0"))
    t = Parsed(out.read_bytes())
    names = {t.name(s.track) for s in t.slices if s.name == "cudaLaunchKernel"}
    assert names == {"tid 12 (tid 1)"}
