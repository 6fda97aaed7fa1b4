"""Steady-state window rule (6): an autotuning pass at the start of the window is trimmed, and a window left with
too little work after it is no steady state (docs/FINDINGS.md, "Steady-state window"). Every number is worked out
by hand in the docstrings; times in µs from T0 unless said."""

from __future__ import annotations

from pathlib import Path

from synth import TraceBuilder

from nsys_llm_explainer.analyses.trace.window import WindowResult, detect_window
from nsys_llm_explainer.pipeline import load_model

US = 1_000
T0 = 1_000 * US
PID = 100
CONV = "volta_scudnn_128x32_relu_small_nn_v1"


def _kernel(b: TraceBuilder, start_us: float, len_us: float, name: str) -> None:
    """A kernel [start, start + len) µs after T0, launched by a call [start − 10, start − 5) µs."""
    s = T0 + int(start_us * US)
    b.launch(s - 10 * US, s - 5 * US, s, s + int(len_us * US), pid=PID, tid=101, name=name)


def _autotune_pass(b: TraceBuilder, rounds: int = 50, at_us: float = 0.0) -> None:
    """``rounds`` rounds of 200 µs from ``at_us``: a 40 µs cuDNN convolution at +0, a 100 µs `redzone_checker` trial
    at +50 (the `autotune` trait): 70 % busy; trials 100 of 140 µs of kernel time a round (71.4 %)."""
    for r in range(rounds):
        _kernel(b, at_us + 200 * r, 40, CONV)
        _kernel(b, at_us + 200 * r + 50, 100, "redzone_checker")


def _warm_steps(b: TraceBuilder, steps: int, at_us: float = 10_000.0) -> None:
    """``steps`` steps of 1,000 µs from ``at_us``, each 5 `gemm` kernels of 140 µs every 200 µs (70 % busy, like the
    pass), each step an NVTX range `step`."""
    g = b.thread(PID, 101)
    for i in range(steps):
        s = at_us + 1_000 * i
        b.nvtx_push_pop(T0 + int(s * US) - 20 * US, T0 + int((s + 1_000) * US) - 20 * US, "step", tid_g=g)
        for j in range(5):
            _kernel(b, s + 200 * j, 140, "gemm")


def _window(tmp_path: Path, b: TraceBuilder, name: str) -> WindowResult:
    p = tmp_path / name
    b.write(str(p), overwrite=True)
    return detect_window(load_model(str(p)))


def _builder() -> TraceBuilder:
    b = TraceBuilder()
    b.process(PID)
    b.thread(PID, 101)
    return b


def test_an_autotuning_first_pass_before_warm_steps_is_trimmed(tmp_path: Path) -> None:
    """The pass [0, 9,950) µs (its last trial ends at 49 × 200 + 150), then 6 warm steps from 10,000 µs: 30 `gemm`
    kernels, the last ending at 15,000 + 800 + 140 = 15,940 µs. Both parts are 70 % busy, so rules (1)–(5) keep the
    whole capture. Rule (6): the first kernel that is no trial and starts at or after the last trial's end is the
    first `gemm`, at 10,000 µs: the pass is [full start, 10,000 µs), 100 kernels (50 convolutions + 50 trials),
    trials 5,000 of 7,000 µs of kernel time = 71.4 % ≥ 50 %, and 30 kernels (≥ 20) start after it → trimmed. The
    full start is the first launch call's, T0 − 10 µs: the pass is 10.010 ms long. Kept window [10,000 µs, the last
    step range's end 15,980 µs): busy 30 × 140 = 4,200 µs of 5,980 µs = 70.23 %."""
    b = _builder()
    _autotune_pass(b)
    _warm_steps(b, 6)
    w = _window(tmp_path, b, "autotune_then_steps.sqlite")
    assert (w.method, w.full_start_ns, w.start_ns, w.end_ns) == ("auto", T0 - 10 * US, T0 + 10_000 * US,
                                                                  T0 + 15_980 * US)
    assert (w.warmup_ns, w.tail_ns) == (10_010 * US, 0)
    assert (w.details.autotune_until_ns, w.details.autotune_trial_pct) == (T0 + 10_000 * US, 71.4)
    assert w.reason.startswith("Auto-detected window: trimmed a leading 10.010 ms autotuning pass (100 kernels, "
                               "71.4% of their kernel time `autotune` trials: one-time work); the kept window is GPU "
                               "busy 70.23%"), w.reason


def _only_the_pass(tmp_path: Path, after: int) -> WindowResult:
    b = _builder()
    _autotune_pass(b)
    for i in range(after):
        _kernel(b, 10_000 + 200 * i, 140, "gemm")
    return _window(tmp_path, b, f"autotune_only_{after}.sqlite")


def test_an_autotuning_pass_with_too_little_after_it_keeps_the_whole_trace(tmp_path: Path) -> None:
    """The same pass alone (0 kernels after it: the pass runs to the window's end), or followed by 5 `gemm` kernels
    (< 20, the rule's minimum): no steady state is found; the whole capture is kept and the reason says so. Alone:
    100 kernels (71.4 % trials) over [T0 − 10 µs, the last trial's end 9,950 µs) = 9.960 ms; with 5 after it the
    pass ends at the first `gemm`, 10,000 µs: 10.010 ms."""
    for after, length in ((0, "9.960"), (5, "10.010")):
        w = _only_the_pass(tmp_path, after)
        assert (w.method, w.start_ns, w.end_ns, w.warmup_ns, w.tail_ns) == ("full", w.full_start_ns, w.full_end_ns,
                                                                            0, 0)
        assert w.reason == (f"Full trace kept: no steady state found: the densest stretch starts with an autotuning "
                            f"pass ({length} ms, 100 kernels, 71.4% of their kernel time `autotune` trials: one-time "
                            f"work) and only {after} kernels run after it (under 20)."), w.reason


def test_trials_that_hold_under_half_of_what_precedes_them_are_no_pass(tmp_path: Path) -> None:
    """4 warm steps (20 `gemm`), then 5 rounds of the pass from 4,000 µs (5 trials), then 4 more steps from 5,000 µs:
    the stretch up to the first `gemm` after the last trial (5,000 µs) holds 20 × 140 + 5 × 140 = 3,500 µs of kernel
    time, 500 µs of it trials = 14.3 % < 50 %: no autotuning pass, the window is the whole capture as before."""
    b = _builder()
    _warm_steps(b, 4, at_us=0.0)
    _autotune_pass(b, rounds=5, at_us=4_000.0)
    _warm_steps(b, 4, at_us=5_000.0)
    w = _window(tmp_path, b, "mid_trials.sqlite")
    assert w.method == "full" and w.details.autotune_until_ns is None
    assert "autotuning" not in w.reason


def test_a_sparse_warm_up_of_trials_is_trimmed_as_before(tmp_path: Path) -> None:
    """20 `redzone_checker` trials of 100 µs every 5,000 µs in [0, 100,000) µs (2 % busy, 2,000 µs), then 20 warm
    steps from 100,000 µs (100 `gemm`, 14,000 µs busy, 70 %). Rules (1)–(5) trim the sparse lead at the first `gemm`
    (100,000 µs; it holds 2,000 / 16,000 = 12.5 % ≤ 25 % of the busy time and is under half as busy); the kept
    window holds no trial, so rule (6) changes nothing and the reason names no autotuning pass."""
    b = _builder()
    for i in range(20):
        _kernel(b, 5_000 * i, 100, "redzone_checker")
    _warm_steps(b, 20, at_us=100_000.0)
    w = _window(tmp_path, b, "sparse_trials.sqlite")
    assert (w.method, w.start_ns) == ("auto", T0 + 100_000 * US)
    assert w.details.autotune_until_ns is None and "autotuning" not in w.reason
    assert w.reason.startswith("Auto-detected window: trimmed 100.010 ms of warm-up (GPU busy 2.0%)"), w.reason


def _one_run(tmp_path: Path, steps: bool):
    """A 20 ms `cudaMalloc` at T0, then from 1 s: 30 `gemm` kernels of 140 µs every 200 µs (6,000 µs), as 6 NVTX
    `step` ranges of 1,000 µs (``steps``) or none (one pass). The auto window trims the idle lead [T0 − 20 µs,
    T0 + 1 s): 1,000.020 ms, 0 % busy."""
    from nsys_llm_explainer.pipeline import analyze_path

    b = _builder()
    g = b.thread(PID, 101)
    b.runtime(T0 - 20 * US, T0, tid_g=g, name="cudaMalloc_v3020")
    if steps:
        _warm_steps(b, 6, at_us=1_000_000.0)
    else:
        for i in range(30):
            _kernel(b, 1_000_000 + 200 * i, 140, "gemm")
    p = tmp_path / f"one_run_{steps}.sqlite"
    b.write(str(p), overwrite=True)
    return analyze_path(str(p))


def test_a_window_without_repeated_steps_is_not_called_a_steady_state(tmp_path: Path) -> None:
    """With 6 steps in the window (each range starts 20 µs before its first kernel, so the first one's 1,000 µs are
    980 µs inside the window, which starts at that kernel: Σ fractions 5 + 0.98 = 5.98 ≥ 2) the window line says
    "the steady window (auto-detected)" and `capture_window` (whole capture ~99 % idle vs 30 % in the window) advises
    capturing a few steps after warm-up; without steps (0 < 2) the line says no repeated steps, not a steady state,
    and the advice is `capture.iterations`."""
    from nsys_llm_explainer.findings.advice import ADVICE
    from nsys_llm_explainer.render import render_markdown

    for steps in (True, False):
        rep = _one_run(tmp_path, steps)
        w = rep.window
        assert w.method == "auto" and w.reason.startswith("Auto-detected window: trimmed 1,000.020 ms of warm-up")
        assert rep.steps.inside(w.start_ns, w.end_ns) == (5.98 if steps else 0.0)
        line = next(x for x in render_markdown(rep).splitlines() if x.startswith("**Window:**"))
        (f,) = [f for f in rep.findings if f.id == "capture_window"]
        if steps:
            assert line.startswith("**Window:** the steady window (auto-detected), "), line
            assert f.recommendation[0] == ADVICE["capture.range"].text and "steady state" in f.title
        else:
            assert line.startswith("**Window:** the auto-detected window, no repeated steps found in it (not shown "
                                   "to be a steady state), "), line
            assert f.recommendation[0] == ADVICE["capture.iterations"].text
            assert f.title.endswith("idler than the auto-detected window")
