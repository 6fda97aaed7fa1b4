"""The real traces' windows and the words around them: an unnamed launching thread (trace 24), the steady window beside
an autotuning pass (trace 12), the range advice and the samples it reads (trace 03), a single inference and its trimmed
tail (trace 16), and windows that must not move (traces 10, 23, 24). Each truth is read from the trace with plain
read-only SQL (worked out in the docstrings); a missing trace directory fails the test (``raises=AssertionError`` keeps
a missing file from passing as the expected failure)."""

from __future__ import annotations

import pytest
from conftest import real_report, real_trace, require_traces

pytestmark = pytest.mark.slow   # real traces through the whole pipeline

TRACE12 = "12_gartangh_keras_gtx1650"
TRACE24 = "24_cs336_laptop_rtx5000ada_launch_bound"


def _report(name: str):
    require_traces()
    return real_report(real_trace(name))


def test_trace24_unnamed_launching_thread_is_its_tid_not_thread():
    """Trace 24: every one of the 6,628 CUDA API rows is on globalTid 282226260469352 (pid 44780, tid 26216), and
    ThreadNames has no row for tid 26216 (SQL: ``SELECT globalTid & 0xFFFFFF FROM ThreadNames``). The NVTX-coverage
    finding's title names it `tid 26216`; its evidence called the same thread `` `thread` (tid 26216) ``, a name
    the trace does not give it. One form for an unnamed thread: `tid 26216`."""
    rep = _report(TRACE24)
    (f,) = [f for f in rep.findings if f.id == "nvtx_coverage"]
    assert f.title.endswith("launched by `tid 26216`")
    line = next(e for e in f.evidence if e.startswith("Kernels no range covers"))
    assert line == ("Kernels no range covers, by launching thread: `tid 26216` 100.0 %, 180 range(s) on that "
                    "thread.")
    assert "`thread`" not in " ".join(f.evidence)


def test_trace12_steady_window_is_not_the_autotuning_pass():
    """Trace 12 (TF/Keras Darknet-53 inference, GTX 1650): rules (1)–(5) of the auto window keep 4,601.528 →
    5,939.158 ms from trace start, 3,912 kernels (SQL over CUPTI_ACTIVITY_KIND_KERNEL ⋈ StringIds); the last
    `redzone_checker` runs 5,871.678 → 5,872.015 ms and the first kernel after it starts at 5,872.112 ms. The 3,461
    kernels before it (1,247.171 ms of kernel time, 92.9 % of it `autotune` trials, as the autotuning finding said)
    are the first forward's one-time autotuning (SOURCE.md), not a steady state. Rule (6) trims them: the window is
    5,872.112 → 5,939.158 ms, the warm forward: 451 kernels, 23.850 ms of kernel time (SQL), GPU busy 23.850 /
    67.046 = 35.57 % (SOURCE.md's 38 % is over the kernels' own span, 64.14 ms), not the 79.9 % of the pass."""
    rep = _report(TRACE12)
    w = rep.window
    assert w.method == "auto"
    assert (w.start_ns - w.full_start_ns, w.end_ns - w.full_start_ns) == (5_872_112_331, 5_939_158_413)
    assert w.reason == ("Auto-detected window: trimmed 4,601.528 ms of warm-up (GPU busy 0.18%) and the "
                        "1,270.585 ms autotuning pass after it (3,461 kernels, 92.9% of their kernel time `autotune` "
                        "trials: one-time work); the kept window is GPU busy 35.57% (active bins ≥ 23.27% busy).")
    assert (rep.steady_kernels.kernel_count, rep.steady_kernels.total_kernel_ns) == (451, 23_850_368)


def test_trace03_range_advice_reads_the_samples_it_has():
    """Trace 03 (llama3 inference simulation): the launching thread has 57 CPU samples inside the `nvtx` idle gaps
    (COMPOSITE_EVENTS; `time_sleep` among the top code), and OS calls were not traced (no OSRT_API table). The
    range advice asked to "capture with `--trace=osrt` (and CPU sampling)" although the report's own evidence
    quotes those samples: it now points at them and asks only for the OS-call trace."""
    rep = _report("03_llama3_real_inference_simulation")
    (f,) = [f for f in rep.findings if f.id == "idle_nvtx"]
    assert any(e.startswith("CPU samples of the launching thread inside these gaps (57 over") for e in f.evidence)
    text = " ".join(f.recommendation)
    assert "(and CPU sampling)" not in text
    assert "its CPU samples there (evidence above, `tables/host_samples.csv`) show what it ran" in text


def test_range_advice_without_samples_still_asks_for_them(tmp_path_factory):
    """Scenario `host_gap`: NVTX idle on a trace with no CPU samples and no OS calls traced: the advice still asks
    for both (`--trace=osrt` and CPU sampling)."""
    from conftest import scenario_report

    _, _, rep = scenario_report("host_gap", tmp_path_factory)
    f = next(f for f in rep.findings if f.id == "idle_nvtx")
    assert "capture with `--trace=osrt` (and CPU sampling) to tell" in " ".join(f.recommendation)


def test_trace16_one_inference_is_not_called_a_steady_state():
    """Trace 16 (TensorRT ResNet-18, RTX 3090): one `TensorRT:ExecutionContext::execute` range (NVTX_EVENTS: 1 row of
    that name), 36 kernels in 6.836 ms, then 527 ms of teardown; no step is detected (no NVTX range repeats, no
    marker kernel). SOURCE.md: no steady-state conclusion from one run. The window (0 → 6.836 ms, its tail trimmed)
    holds 0 < 2 steps: the window line says no repeated steps / not shown to be a steady state, and the capture
    advice asks for several iterations instead of "a few steps after warm-up"."""
    from nsys_llm_explainer.findings.advice import ADVICE
    from nsys_llm_explainer.render import render_markdown

    rep = _report("16_memfusion_tensorrt_rtx3090")
    w = rep.window
    assert (w.method, w.start_ns - w.full_start_ns, w.end_ns - w.full_start_ns) == ("auto", 0, 6_835_525)
    assert rep.steps.step_count == 0
    line = next(x for x in render_markdown(rep).splitlines() if x.startswith("**Window:**"))
    assert line.startswith("**Window:** the auto-detected window, no repeated steps found in it "
                           "(not shown to be a steady state), ")
    assert "the steady window (auto-detected)" not in line and "Auto-detected steady state" not in line
    (f,) = [f for f in rep.findings if f.id == "capture_window"]
    assert f.recommendation == (ADVICE["capture.iterations"].text,)
    assert "a few steps after warm-up" not in " ".join(f.recommendation)


def test_trace05_window_line_names_the_window_as_the_findings_do():
    """Trace 05 (FSDP, 2 GPUs): the window rule keeps the whole trace, 0.000 → 299.986 ms (method `full`, no warm-up
    or tail above 10 % found) and the window holds repeated steps (`window_repeats`), so
    :func:`vocabulary.windows.window_name` names it "the steady window", as the GPU-bound finding's title does ("…
    busy 89.2 % of the steady window"). The window line said "whole trace" instead: one window, two names. It now
    gives the same name, with how it was set beside it."""
    from nsys_llm_explainer.render import render_markdown

    rep = _report("05_nsysai_mfu_2gpu_before")
    assert (rep.window.method, rep.window_repeats) == ("full", True)
    assert any("of the steady window" in f.title for f in rep.findings)
    line = next(x for x in render_markdown(rep).splitlines() if x.startswith("**Window:**"))
    assert line.startswith("**Window:** the steady window (the whole trace), 0.000 → 299.986 ms from trace start "
                           "(299.986 ms)."), line


def test_trace16_trimmed_tail_is_named_teardown():
    """Trace 16: the window ends at the last kernel's end, 25,827,633 ns abs (SQL: ``SELECT max(end) FROM
    CUPTI_ACTIVITY_KIND_KERNEL``); the capture at 552,920,194 ns, the last `cuModuleUnload`'s end: a tail of
    527,092,561 ns with no kernel. The 5,490 `cuModuleUnload` calls (all on one thread, the only module calls: SQL
    over CUPTI_ACTIVITY_KIND_RUNTIME ⋈ StringIds, name LIKE '%Module%' OR '%Library%') run 479,449,057 ns, all in the
    tail = 90.96 % of it ≥ 50 %: the reason names the trimmed tail teardown, not only "tail (GPU busy 0.0%)"."""
    w = _report("16_memfusion_tensorrt_rtx3090").window
    assert (w.tail_ns, w.full_end_ns - w.end_ns) == (527_092_561, 527_092_561)
    assert w.reason.startswith("Auto-detected window: trimmed 527.093 ms of tail (GPU busy 0.0%; teardown: "
                               "`cuModuleUnload` × 5,490 run during 91.0% of it); "), w.reason


def test_windows_of_traces_10_23_24_are_unchanged():
    """Rule (6) and the repeated-steps wording move no other window: traces 10 (no `autotune` trial: no
    `redzone_checker`), 23 and 24 keep their windows (ns from trace start, as before this rule); 23 and 24 hold 128
    and 60 NVTX steps, so they stay "steady state"; 10 (serving, no step detected) is no longer called one. Rule (7)
    moves trace 10's start only: from its first kernel (7,975,154,753) to the first kernel after its cuDNN benchmark
    pass (8,196,352,682 = 8,960,584,717 abs, the first kernel starting after the last trial's end 8,960,228,240 abs,
    test_claims_real_traces_unmarked_steps.py)."""
    want = {"10_abacus_dnn_serving_titanrtx_r1": (8_196_352_682, 9_849_414_215, False),
            "23_cs336_2p7b_a100_fp32_nvtx": (32_939_638_003, 36_398_982_351, True),
            "24_cs336_laptop_rtx5000ada_launch_bound": (1_361_409_433, 1_536_087_487, True)}
    for name, exp in want.items():
        rep = _report(name)
        w = rep.window
        got = (w.start_ns - w.full_start_ns, w.end_ns - w.full_start_ns, rep.steps.repeat_in(w.start_ns, w.end_ns))
        assert w.method == "auto" and w.details.autotune_until_ns is None, name
        assert got == exp, (name, got)
