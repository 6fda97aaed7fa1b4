"""Few, long steps: long-context chunked prefill captured without NVTX ranges and without sampling kernels. The steps
analysis finds no step (no NVTX range, no marker kernel), but the launching thread synchronizes once per step and the
per-step sync pattern holds (12 regular sync points holding the window's kernels): the window does hold repeated steps.
The report said "auto-detected, no repeated steps in it (not shown to be a steady state)" and asked to capture several
iterations "not one pass", beside a per-step sync table of those 12 steps. A holding step-sync series counts as repeated
steps of the window (docs/FINDINGS.md, window rules). Each trace is built by hand; the truth is worked out in the
docstrings."""

from __future__ import annotations

from pathlib import Path
from typing import List, Tuple

from claims_support import finding_of, report_of
from synth import TraceBuilder

from nsys_llm_explainer.findings.advice import ADVICE
from nsys_llm_explainer.options import options_from_kwargs
from nsys_llm_explainer.pipeline import analyze_path
from nsys_llm_explainer.render.markdown import render_markdown

US = 1_000
MS = 1_000_000
PID = 100
T0 = 10 * MS
NOT_STEADY = "no repeated steps found in it (not shown to be a steady state)"


def _step(b: TraceBuilder, g: int, t: int, kernels: List[Tuple[str, int]], nvtx: bool, name: str) -> int:
    """Kernels launched back to back from ``t`` (10 µs launch calls; kernel i starts at max(previous end, call end
    + 5 µs)), then ``cudaStreamSynchronize`` from the last call's end to the last kernel's end + 5 µs; with ``nvtx``
    a push/pop range ``name`` from ``t`` to that end + 10 µs. Returns the last kernel's end + 10 µs."""
    a, k = t, t + 15 * US
    for kname, d in kernels:
        k = max(k, a + 15 * US)
        b.launch(a, a + 10 * US, k, k + d, pid=PID, tid=1, name=kname)
        k += d
        a += 10 * US
    b.runtime(a, k + 5 * US, tid_g=g, name="cudaStreamSynchronize_v3020")
    if nvtx:
        b.nvtx_push_pop(t, k + 10 * US, name, tid_g=g)
    return k + 10 * US


def _prefill(nvtx: bool = False, chunks: int = 8, decodes: int = 4, profiler: bool = False) -> TraceBuilder:
    """A 100 µs ``warmup_fill`` kernel at T0 (with its sync), then 300 ms of host-only tokenization (no CUDA call),
    then ``chunks`` prefill chunks of 4 × 50 ms kernels (a 200.025 ms step) and ``decodes`` decode steps of 20 × 1 ms
    kernels (20.025 ms), 1 ms of host between steps; one ``cudaStreamSynchronize`` per step (13 in all). The window
    rule trims the 300.140 ms before the first chunk as warm-up (GPU busy 0.03 %). ``profiler``: a
    ``cudaProfilerStart`` call [T0 − 30 µs, T0 − 25 µs) (a capture bounded by `--capture-range=cudaProfilerApi`)."""
    b = TraceBuilder()
    b.process(PID)
    g = b.thread(PID, 1, "main")
    b.gpu(0)
    if profiler:
        b.runtime(T0 - 30 * US, T0 - 25 * US, tid_g=g, name="cudaProfilerStart_v4000")
    t = _step(b, g, T0, [("warmup_fill", 100 * US)], False, "")
    t += 300 * MS
    for _ in range(chunks):
        t = _step(b, g, t, [("flash_attn_prefill", 50 * MS), ("gemm_mlp", 50 * MS), ("gemm_qkv", 50 * MS),
                            ("gemm_out", 50 * MS)], nvtx, "prefill_chunk") + 1 * MS
    for _ in range(decodes):
        t = _step(b, g, t, [("decode_gemv", 1 * MS)] * 20, nvtx, "decode_step") + 1 * MS
    return b


def test_sync_delimited_prefill_steps_are_repeated_steps(tmp_path: Path) -> None:
    """No NVTX: no step detected (steps unavailable). Window: auto, [T0 + 300.140 ms, end). The 12 syncs of the
    window drain each step (12 sync points of `cudaStreamSynchronize`, 11 steps between them holding 96 % of the
    112 kernels, period p90/p50 = 1.00): the step-sync series holds, so the window holds repeated steps: the window
    line says "the steady window (auto-detected)", `capture_window` says "the steady state" and gives `capture.range`
    (a few steps after warm-up), not `capture.iterations` ("not one pass")."""
    p = tmp_path / "t.sqlite"
    _prefill().write(str(p))
    report = analyze_path(str(p), options_from_kwargs())
    rep = report.to_dict()
    assert not rep["steps"]["available"] or not rep["steps"].get("step_count")
    (s,) = rep["step_sync"]["series"]
    assert (s["holds"], s["step_sync_points"], s["steps"]) == (True, 12, 11)
    assert rep["window"]["method"] == "auto" and rep["window"]["warmup_ns"] == 300_140_000
    assert rep["window_repeats"] is True
    md = render_markdown(report)
    assert NOT_STEADY not in md
    assert "**Window:** the steady window (auto-detected), 300.140 → " in md
    f = finding_of(rep, "capture_window")
    assert f["title"] == "Warm-up / tail make the whole capture look 15 points idler than the steady state"
    assert "single pass" not in f["evidence"][0]
    assert f["recommendation"][0] == ADVICE["capture.range"].text


def test_a_capture_already_bounded_by_profiler_calls_is_told_to_start_later(tmp_path: Path) -> None:
    """The same steps, the program calling `cudaProfilerStart` before the warm-up kernel: the recording is already
    bounded by the profiler API, yet holds the 300.140 ms warm-up, so `capture_window` still holds (15 points) but
    does not advise bounding it with `--capture-range=cudaProfilerApi` / `--delay` (`capture.range`, which it does
    already): it advises starting it later (`capture.range.later`). The whole-run capture above keeps
    `capture.range`."""
    rep = report_of(_prefill(profiler=True), tmp_path)
    f = finding_of(rep, "capture_window")
    assert f["title"] == "Warm-up / tail make the whole capture look 15 points idler than the steady state"
    assert f["recommendation"][0] == ADVICE["capture.range.later"].text
    assert ADVICE["capture.range"].text not in f["recommendation"]


def test_a_single_pass_still_shows_no_steady_state(tmp_path: Path) -> None:
    """The opposite case: one prefill chunk and one decode step after the tokenization (2 sync points in the window
    < 5: the series does not hold; no NVTX): nothing shows repeated steps, the window line keeps "no repeated steps
    in it" and `capture_window` keeps `capture.iterations`."""
    rep = report_of(_prefill(chunks=1, decodes=1), tmp_path)
    assert not any(s["holds"] for s in rep["step_sync"]["series"])
    f = finding_of(rep, "capture_window")
    assert "in which no repeated steps were found: it may be a single pass" in f["evidence"][0]
    assert f["recommendation"][0] == ADVICE["capture.iterations"].text


def test_single_pass_window_is_not_called_the_steady_window(tmp_path: Path) -> None:
    """One prefill chunk (4 × 50 ms) and one decode step (20 × 1 ms) after 300 ms of tokenization: the window rule
    trims the 300.140 ms before the chunk; the window holds no repeated steps (no NVTX, 2 sync points < 5), so the
    window line says "no repeated steps in it (not shown to be a steady state)" and `capture_window` speaks of "the
    auto-detected window". Busy 220.000 ms of the window [T0 + 300.140 ms, T0 + 521.190 ms) = 221.050 ms → 99.5 %:
    the verdict (`gpu_bound`) says "busy 99.5 % of the steady window" — the report calls the same window steady
    and not shown to be steady (real trace 16, a single TensorRT inference, reads the same). It should name it
    "the auto-detected window" wherever the window holds no repeated steps."""
    rep = report_of(_prefill(chunks=1, decodes=1), tmp_path)
    assert rep["window_repeats"] is False
    f = finding_of(rep, "gpu_bound")
    assert f["title"] == "GPU-bound: the GPU is busy 99.5 % of the auto-detected window; kernel time sets the pace"
    assert "steady window" not in f["title"] and "steady window" not in " ".join(f["evidence"])
    assert "steady window" not in rep["headline"]["verdict"]
