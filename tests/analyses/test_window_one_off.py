"""Steady-state window rule (7): a leading pass of one-time work (kernel names that never run again in the window, as
a cuDNN benchmark pass trying algorithms it then does not use) is trimmed when the rest repeats its own kernels
(docs/FINDINGS.md, "Steady-state window"). Every number is worked out by hand in the docstrings; times in µs from T0
unless said."""

from __future__ import annotations

from pathlib import Path

from synth import TraceBuilder
from test_window_autotune import T0, US, _builder, _kernel, _window  # the same trace helpers

TRIALS = ("void fft2d_r2c_32x32<__half>", "volta_scudnn_winograd_128x128", "volta_gcgemm_32x32_nt",
          "void flip_filter<__half>")


def _steps(b: TraceBuilder, steps: int, at_us: float) -> None:
    """``steps`` steps of 1,000 µs from ``at_us``: `conv`, `gemm`, `gemm`, `relu`, `gemm`, 140 µs each, every 200 µs
    (70 % busy); no NVTX."""
    for i in range(steps):
        for j, name in enumerate(("conv", "gemm", "gemm", "relu", "gemm")):
            _kernel(b, at_us + 1_000 * i + 200 * j, 140, name)


def test_a_benchmark_pass_before_steady_steps_is_trimmed(tmp_path: Path) -> None:
    """40 rounds of 200 µs from 0: a 40 µs `conv` at +0 (the steps' own kernel) and a 100 µs trial at +50 (FFT,
    Winograd, gcgemm, flip_filter in turn; no `redzone_checker`, so rule (6) sees no trial): 70 % busy, like the 40
    steps from 8,000 µs after it (last kernel ends 8,000 + 39,000 + 800 + 140 = 47,940 µs), so rules (1)–(5) keep
    the whole capture [T0 − 10 µs, 47,940 µs): 47,950 µs. Rule (7): a quarter of it ends at 11,977.5 µs; the trial
    names start only before it (last at 7,850 µs), `conv` / `gemm` / `relu` after it: the one-off kernels are the 40
    trials, the last ending at 7,950 µs; the first other kernel starting at or after it is the steps' first `conv`,
    8,000 µs. The stretch [T0 − 10 µs, 8,000 µs) = 8.010 ms holds 80 kernels, 40 × 100 = 4,000 of 40 × 140 = 5,600 µs
    of kernel time one-off (71.4 % ≥ 50 %); after it 200 kernels (≥ 20), `conv` 40 times, `gemm` 120, `relu` 40
    (each ≥ 2) → trimmed. Kept [8,000, 47,940) µs: busy 200 × 140 = 28,000 of 39,940 µs = 70.11 %."""
    b = _builder()
    for r in range(40):
        _kernel(b, 200 * r, 40, "conv")
        _kernel(b, 200 * r + 50, 100, TRIALS[r % 4])
    _steps(b, 40, 8_000.0)
    w = _window(tmp_path, b, "benchmark_then_steps.sqlite")
    assert (w.method, w.full_start_ns, w.start_ns, w.end_ns) == ("auto", T0 - 10 * US, T0 + 8_000 * US,
                                                                  T0 + 47_940 * US)
    assert (w.warmup_ns, w.tail_ns) == (8_010 * US, 0)
    assert (w.details.one_off_until_ns, w.details.one_off_pct, w.details.autotune_until_ns) == (T0 + 8_000 * US,
                                                                                                71.4, None)
    assert w.reason.startswith("Auto-detected window: trimmed a leading 8.010 ms pass of one-time work (80 kernels, "
                               "71.4% of their kernel time of kernel names that never run again in the window: "
                               "one-time work); the kept window is GPU busy 70.11% (active bins ≥ "), w.reason


def test_a_one_off_init_kernel_inside_the_first_step_trims_at_most_itself(tmp_path: Path) -> None:
    """40 steps from 0 (window [T0 − 10 µs, 39,940 µs)) with a 20 µs `init_rng` at 170 µs inside step 1, between
    its `conv` [0, 140) and first `gemm` at 200: the only one-off kernel; the stretch up to the first other kernel
    starting at or after its end (190 µs), the `gemm` at 200 µs, holds `conv` + `init_rng` = 160 µs of kernel time,
    20 of it one-off = 12.5 % < 50 %: nothing trimmed, the whole capture is kept. With the 20 µs `init_rng` at 0 and
    the steps from 300 µs instead, the stretch is the init kernel alone (100 %): the window starts at the first
    `conv`, 300 µs — step 1 is kept whole."""
    b = _builder()
    _steps(b, 40, 0.0)
    _kernel(b, 170, 20, "init_rng")
    w = _window(tmp_path, b, "init_inside_step.sqlite")
    assert (w.method, w.start_ns, w.end_ns) == ("full", T0 - 10 * US, T0 + 39_940 * US)
    assert w.details.one_off_until_ns is None and "one-time" not in w.reason
    b = _builder()
    _kernel(b, 0, 20, "init_rng")
    _steps(b, 40, 300.0)
    w = _window(tmp_path, b, "init_before_step.sqlite")
    assert (w.method, w.start_ns, w.end_ns) == ("auto", T0 + 300 * US, T0 + 40_240 * US)
    assert (w.details.one_off_until_ns, w.details.one_off_pct) == (T0 + 300 * US, 100.0)


def test_a_single_pass_whose_layers_run_once_is_not_trimmed(tmp_path: Path) -> None:
    """One inference, no loop (TensorRT-like, real trace 16): 10 `stem_i` kernels every 200 µs from 0, then 30
    `layer_j` kernels every 200 µs from 2,000 µs, 140 µs each, every name once. Window [T0 − 10 µs, 7,940 µs): a
    quarter ends at 1,977.5 µs, so the stems are one-off (100 % of the stretch up to the first layer, 2,000 µs) — but
    each of the 30 kernels after it is of a name running once there: no repetition to trim towards, whole capture
    kept."""
    b = _builder()
    for i in range(10):
        _kernel(b, 200 * i, 140, f"stem_{i}")
    for j in range(30):
        _kernel(b, 2_000 + 200 * j, 140, f"layer_{j}")
    w = _window(tmp_path, b, "single_pass.sqlite")
    assert (w.method, w.start_ns, w.end_ns) == ("full", T0 - 10 * US, T0 + 7_940 * US)
    assert w.details.one_off_until_ns is None
