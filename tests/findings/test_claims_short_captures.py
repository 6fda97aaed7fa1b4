"""Short captures, edges and windows: the GPU-bound finding's words about a window not detected or chosen by an
override. Each trace is built by hand; the truth is worked out in the docstring."""

from __future__ import annotations

from pathlib import Path

from claims_support import finding_of as _finding
from claims_support import report_of as _run
from synth import TraceBuilder

US = 1_000
MS = 1_000_000
PID = 100


def test_gpu_bound_does_not_call_an_undetected_window_steady(tmp_path: Path) -> None:
    """One 50 ms kernel: call [1, 1.01) ms, kernel [2, 52) ms. Window = whole trace [1, 52) ms (51 ms), busy 50 ms
    = 98.04 %. With one kernel (< 20) the window rule keeps the full trace and says "too little GPU activity to detect
    a steady state" — so the gpu_bound title / evidence must not say "of the steady window" (there is none); they
    say "of the whole capture"."""
    b = TraceBuilder()
    b.process(PID)
    b.thread(PID, 1, "main")
    b.launch(1 * MS, 1 * MS + 10 * US, 2 * MS, 52 * MS, pid=PID, tid=1, name="big_gemm")
    rep = _run(b, tmp_path)
    assert rep["window"]["method"] == "full"
    f = _finding(rep, "gpu_bound")
    assert f["title"] == "GPU-bound: the GPU is busy 98.0 % of the whole capture; kernel time sets the pace"
    assert f["evidence"][0].startswith("GPU busy 98.0 % of the whole capture (50.000 ms of 51.000 ms, device 0)")


def test_gpu_bound_under_window_override_names_the_chosen_window(tmp_path: Path) -> None:
    """Warm-up [0, 160) ms (cudaMalloc calls, 5 × 480 µs autotune kernels) then 40 decode kernels of 850 µs, one per
    ms ([160 + s + 0.05, 160 + s + 0.9) ms). `--window 170500000:180500000` (10 ms) holds 11 kernels clipped to it:
    0.4 + 9 × 0.85 + 0.45 = 8.5 ms busy = 85.0 %. The user chose the window and nothing checked it is steady (the
    capture_window finding says "whether that is warm-up or tail was not checked"), so gpu_bound must not call it "the
    steady window": it says "of the window set by --window"."""
    b = TraceBuilder()
    b.process(PID)
    g = b.thread(PID, 1, "main")
    for i in range(40):
        b.runtime(i * 4 * MS, i * 4 * MS + 3 * MS, tid_g=g, name="cudaMalloc_v3020")
    for i in range(5):
        t = i * 30 * MS + 2 * MS
        b.launch(t, t + 10 * US, t + 20 * US, t + 500 * US, pid=PID, tid=1, name="autotune_trial")
    for s in range(40):
        t = 160 * MS + s * MS
        b.launch(t, t + 10 * US, t + 50 * US, t + 900 * US, pid=PID, tid=1, name="decode_gemm")
    rep = _run(b, tmp_path, window="170500000:180500000")
    assert rep["window"]["method"] == "override"
    f = _finding(rep, "gpu_bound")
    assert f["title"] == ("GPU-bound: the GPU is busy 85.0 % of the window set by --window; kernel time sets the pace")
    assert f["evidence"][0].startswith("GPU busy 85.0 % of the window set by --window (8.500 ms of 10.000 ms")
