"""A trimmed warm-up or tail that CUDA module / library load or unload calls fill is named start-up or teardown in the
window's reason, with the calls and their counts (docs/FINDINGS.md, "Steady-state window"; real trace 16: 527 ms of
`cuModuleUnload` teardown after a single TensorRT inference). Times in µs from T0 unless said."""

from __future__ import annotations

from pathlib import Path

from synth import TraceBuilder
from test_window_autotune import T0, US, _builder, _window  # the same trace helpers
from test_window_one_off import _steps


def _calls(b: TraceBuilder, name: str, n: int, at_us: float, len_us: float, every_us: float) -> None:
    """``n`` driver calls ``name`` of ``len_us`` every ``every_us`` from ``at_us`` on the launching thread."""
    g = b.thread(100, 101)
    for i in range(n):
        s = T0 + int((at_us + every_us * i) * US)
        b.runtime(s, s + int(len_us * US), tid_g=g, name=name, event_class=1)


def test_a_tail_of_module_unloads_is_named_teardown(tmp_path: Path) -> None:
    """40 steps from 0 (5 × 140 µs kernels every 200 µs, launch calls from −10 µs): the kernels end at 39,940 µs.
    Then 100 `cuModuleUnload` of 80 µs every 100 µs from 40,000 µs (the last ends at 40,000 + 9,900 + 80 = 49,980 µs)
    and 2 `cuLibraryUnload` of 10 µs at 40,085 and 40,185 µs (in the unloads' gaps). The tail [39,940, 49,980) =
    10.040 ms (> 10 % of the 39,950 µs window, no GPU busy) is trimmed; module calls run during 100 × 80 + 2 × 10 =
    8,020 µs of it (no overlap) = 79.88 % → 79.9 % ≥ 50 %; `cuModuleUnload` (8,000 µs) named first, and the largest
    is an unload: teardown. Kept [−10, 39,940) µs: 200 × 140 = 28,000 µs busy of 39,950 = 70.09 %."""
    b = _builder()
    _steps(b, 40, 0.0)
    _calls(b, "cuModuleUnload", 100, 40_000, 80, 100)
    _calls(b, "cuLibraryUnload", 2, 40_085, 10, 100)
    w = _window(tmp_path, b, "unload_tail.sqlite")
    assert (w.method, w.start_ns, w.end_ns, w.tail_ns) == ("auto", T0 - 10 * US, T0 + 39_940 * US, 10_040 * US)
    assert w.reason.startswith("Auto-detected window: trimmed 10.040 ms of tail (GPU busy 0.0%; teardown: "
                               "`cuModuleUnload` × 100, `cuLibraryUnload` × 2 run during 79.9% of it); the kept "
                               "window is GPU busy 70.09% "), w.reason


def test_a_warm_up_of_module_loads_is_named_start_up(tmp_path: Path) -> None:
    """50 `cuModuleLoadData` of 150 µs every 200 µs from 0 (the capture starts at T0), then 40 steps from 10,000 µs
    (first kernel at 10,000 µs, its launch call at 9,990 µs; the last kernel ends at 49,940 µs). The warm-up [0,
    10,000) µs = 10.000 ms, no GPU busy, is trimmed; the loads run during 50 × 150 = 7,500 µs of it = 75.0 %: start-up.
    """
    b = _builder()
    _calls(b, "cuModuleLoadData", 50, 0, 150, 200)
    _steps(b, 40, 10_000.0)
    w = _window(tmp_path, b, "load_warmup.sqlite")
    assert (w.method, w.start_ns, w.end_ns, w.warmup_ns) == ("auto", T0 + 10_000 * US, T0 + 49_940 * US, 10_000 * US)
    assert w.reason.startswith("Auto-detected window: trimmed 10.000 ms of warm-up (GPU busy 0.0%; start-up: "
                               "`cuModuleLoadData` × 50 run during 75.0% of it); "), w.reason


def test_a_tail_module_calls_fill_less_than_half_of_is_not_named(tmp_path: Path) -> None:
    """As the teardown test, but 40 `cuModuleUnload` of 100 µs every 250 µs from 40,000 µs (the last ends at 40,000 +
    9,750 + 100 = 49,850 µs): the tail [39,940, 49,850) = 9.910 ms is trimmed, the unloads run during 4,000 µs of it =
    40.4 % < 50 %: the reason names no start-up or teardown."""
    b = _builder()
    _steps(b, 40, 0.0)
    _calls(b, "cuModuleUnload", 40, 40_000, 100, 250)
    w = _window(tmp_path, b, "sparse_unload_tail.sqlite")
    assert w.tail_ns == 9_910 * US
    assert w.reason.startswith("Auto-detected window: trimmed 9.910 ms of tail (GPU busy 0.0%); "), w.reason
