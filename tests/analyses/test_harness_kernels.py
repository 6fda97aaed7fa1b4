"""Harness kernels (docs/FINDINGS.md, "Harness kernels"): the kernels an event-timed thread launches outside every
`cudaEventRecord` pair, on hand-built exports with hand-computed answers."""

from __future__ import annotations

from pathlib import Path

from synth import TraceBuilder

from nsys_llm_explainer.analyses.kernels.harness import harness_kernels
from nsys_llm_explainer.pipeline import load_model

US = 1_000
PID = 100


def _model(tmp_path: Path, b: TraceBuilder):
    p = tmp_path / "t.sqlite"
    b.write(str(p))
    return load_model(str(p))


def _reps(b: TraceBuilder, g: int, tid: int, n: int, reads: int, t0: int) -> None:
    """``n`` repetitions on thread ``tid`` every 100 µs from ``t0``: a 50 µs `flush` launched [t, t+5) µs, a
    record [t+5, t+7) µs, a 20 µs `bench` launched [t+7, t+12) µs, a record [t+12, t+14) µs; then ``reads``
    elapsed-time reads."""
    for i in range(n):
        t = t0 + i * 100 * US
        b.launch(t, t + 5 * US, t + 10 * US, t + 60 * US, pid=PID, tid=tid, name="flush")
        b.runtime(t + 5 * US, t + 7 * US, tid_g=g, name="cudaEventRecord_v3020")
        b.launch(t + 7 * US, t + 12 * US, t + 61 * US, t + 81 * US, pid=PID, tid=tid, name="bench")
        b.runtime(t + 12 * US, t + 14 * US, tid_g=g, name="cudaEventRecord_v3020")
    t = t0 + n * 100 * US
    for i in range(reads):
        b.runtime(t + i * 3 * US, t + i * 3 * US + 2 * US, tid_g=g, name="cudaEventElapsedTime_v3020")


def test_flushes_between_pairs_are_harness_kernels(tmp_path: Path) -> None:
    """10 pairs, 8 reads (= 0.8 × 10): event-timed. The 10 flushes come after 0, 2, …, 18 records (even: outside),
    the 10 bench kernels after 1, 3, …, 19 (odd: inside): 10 harness kernels, 10 × 50 µs = 500 µs; the timed
    kernels are the benches, 200 µs, the top one `bench` (10 calls, 200 µs); no timed kernel is elementwise."""
    b = TraceBuilder()
    b.process(PID)
    g = b.thread(PID, 1, "main")
    _reps(b, g, 1, 10, 8, 1_000 * US)
    m = _model(tmp_path, b)
    h = harness_kernels(m, m)
    assert (h.threads, h.kernel_count, h.kernel_ns, h.timed_kernel_ns) == ((g,), 10, 500 * US, 200 * US)
    assert h.top_kernel is not None and (h.top_kernel.name, h.top_kernel.count, h.top_kernel.total_ns) == \
        ("bench", 10, 200 * US)
    assert h.timed_traits is not None and h.timed_traits.kernel_count == 10


def test_only_the_event_timed_threads_kernels(tmp_path: Path) -> None:
    """Thread 1 as above (event-timed); thread 2 the same loop 2 ms later with 7 reads of its 10 pairs (< 8): not
    event-timed, its flushes stay: 10 harness kernels, all thread 1's."""
    b = TraceBuilder()
    b.process(PID)
    g1, g2 = b.thread(PID, 1, "main"), b.thread(PID, 2, "other")
    _reps(b, g1, 1, 10, 8, 1_000 * US)
    _reps(b, g2, 2, 10, 7, 3_000 * US)
    m = _model(tmp_path, b)
    h = harness_kernels(m, m)
    assert (h.threads, h.kernel_count, h.kernel_ns, h.timed_kernel_ns) == ((g1,), 10, 500 * US, 900 * US)


def test_fewer_than_five_pairs_is_no_event_timed_thread(tmp_path: Path) -> None:
    """4 pairs, 4 reads: fewer than 5 pairs, no repeated measurement: nothing is left out."""
    b = TraceBuilder()
    b.process(PID)
    g = b.thread(PID, 1, "main")
    _reps(b, g, 1, 4, 4, 1_000 * US)
    m = _model(tmp_path, b)
    h = harness_kernels(m, m)
    assert (h.threads, h.kernel_count, h.timed_traits) == ((), 0, None)
