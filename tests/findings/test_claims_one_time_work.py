"""One-time work advised as loop work (docs/FINDINGS.md, "Start-up and shutdown", "Autotuning allocations"): idle in
the gap before the GPU's first kernel / after its last, and allocations of an autotuning pass, on hand-built traces
(numbers worked out in the docstrings). Every trace runs on one thread; a kernel of 9 µs every 10 µs is launched 8 µs
ahead by a 2 µs call (``_loop``), and the window is set to the whole capture."""

from __future__ import annotations

from pathlib import Path

from synth import TraceBuilder

from nsys_llm_explainer.findings.advice import ADVICE
from nsys_llm_explainer.options import options_from_kwargs
from nsys_llm_explainer.pipeline import analyze_path

US = 1_000
PID = 7
REG = "cudaHostRegister_v4000"


def _run(b: TraceBuilder, tmp_path: Path, name: str, end_us: int):
    p = tmp_path / name
    b.write(str(p), overwrite=True)
    return analyze_path(str(p), options_from_kwargs(window=(0, end_us * US)))


def _loop(b: TraceBuilder, t0: int, n: int, name: str = "gemm") -> int:
    """n kernels of 9 µs every 10 µs from t0; returns t0 + n × 10 µs."""
    for i in range(n):
        t = t0 + i * 10 * US
        b.launch(t - 8 * US, t - 6 * US, t, t + 9 * US, pid=PID, tid=1, name=name)
    return t0 + n * 10 * US


def _builder():
    b = TraceBuilder()
    b.process(PID)
    return b, b.thread(PID, 1)


def _one(rep, kind: str):
    found = [f for f in rep.findings if f.cause and f.cause[0] == kind]
    assert len(found) == 1, [f.title for f in rep.findings]
    return found[0]


def _text(f) -> str:
    return " ".join((f.title,) + f.recommendation)


def _check(f, metric: str) -> float:
    return next(c.observed for c in f.checks if c.metric == metric)


def _steps(b: TraceBuilder, g: int, t: int, calls: int, steps: int = 10, call: str = REG) -> int:
    """``steps`` steps from t, each a 30 µs ``call`` (in the first ``calls`` steps only; else 30 µs of nothing) and
    10 kernels from 40 µs after the step's start: 140 µs a step."""
    for i in range(steps):
        if i < calls:
            b.runtime(t, t + 30 * US, tid_g=g, name=call)
        t = _loop(b, t + 40 * US, 10)
    return t


def test_start_up_only_call_is_one_time(tmp_path: Path) -> None:
    """cudaHostRegister [0, 300 µs), then 100 kernels from 310 µs (last ends 1,309 µs): window [0, 1,309 µs). The
    leading gap [0, 310 µs) holds all 300 µs of `other_api` (22.9 % of the window): 100 % of the kind once per
    run, 0 % of the window between kernels → the start-up finding (low, one_time), never "out of the loop"."""
    b, g = _builder()
    b.runtime(0, 300 * US, tid_g=g, name=REG)
    _loop(b, 310 * US, 100)
    f = _one(_run(b, tmp_path, "startup.sqlite", 1_309), "other_api")
    assert f.title.startswith("Start-up, not the loop: GPU idle in other CUDA API calls (`cudaHostRegister`) "
                              "before the GPU's first kernel, "), f.title
    assert (f.category, f.severity, f.about_capture) == ("one_time", "low", True)
    assert f.recommendation == (ADVICE["startup.once"].text,)
    assert "out of the loop" not in _text(f) and "in the step" not in _text(f)
    assert _check(f, "startup_pct_of_cause") == 100.0 and _check(f, "loop_pct_of_window") == 0.0
    assert "300.00 µs of it on device 0 (100.0 %) lies before the GPU's first kernel" in " ".join(f.evidence)
    assert f.holds()


def test_shutdown_call_is_one_time(tmp_path: Path) -> None:
    """100 kernels from 10 µs (last ends 1,009 µs), then cudaHostUnregister [1,020, 1,320 µs): window [0, 1,320
    µs); the trailing gap [1,009, 1,320 µs) holds all 300 µs of `other_api` → "Shutdown, not the loop"."""
    b, g = _builder()
    _loop(b, 10 * US, 100)
    b.runtime(1_020 * US, 1_320 * US, tid_g=g, name="cudaHostUnregister_v4000")
    f = _one(_run(b, tmp_path, "shutdown.sqlite", 1_320), "other_api")
    assert f.title.startswith("Shutdown, not the loop: GPU idle in other CUDA API calls (`cudaHostUnregister`) "
                              "after the GPU's last kernel, "), f.title
    assert f.category == "one_time" and "out of the loop" not in _text(f)


def test_call_repeated_every_step_is_in_the_loop(tmp_path: Path) -> None:
    """cudaHostRegister 30 µs at the start of each of 10 steps of 140 µs (window [0, 1,399 µs)): 300 µs of
    `other_api`, of which the first call's 30 µs (10 %) lies in the leading gap [0, 40 µs) → still the loop
    finding with its "move it out of the loop" advice, and no start-up line (30 µs is 2.1 % of the window)."""
    b, g = _builder()
    _steps(b, g, 0, calls=10)
    f = _one(_run(b, tmp_path, "loop.sqlite", 1_399), "other_api")
    assert f.title.startswith("The host is inside `cudaHostRegister` while the GPU idles"), f.title
    assert f.category == "cuda_api" and f.recommendation == (ADVICE["other_api.find"].text,)
    assert not any("start-up / shutdown" in e for e in f.evidence)


def test_mix_with_a_loop_part_stays_in_the_loop(tmp_path: Path) -> None:
    """cudaHostRegister [0, 600 µs), then 10 steps from 610 µs with a 30 µs call each (window [0, 2,009 µs)):
    the leading gap [0, 650 µs) holds 600 + 30 = 630 µs of the 900 µs of `other_api` (70.0 %), but the 9 later
    calls, 270 µs, are 13.4 % of the window (≥ 5 %: a finding on their own) → the loop finding, with the start-up
    part stated."""
    b, g = _builder()
    b.runtime(0, 600 * US, tid_g=g, name=REG)
    _steps(b, g, 610 * US, calls=10)
    f = _one(_run(b, tmp_path, "mix_loop.sqlite", 2_009), "other_api")
    assert f.category == "cuda_api" and f.recommendation == (ADVICE["other_api.find"].text,)
    assert ("630.00 µs of it on device 0 (70.0 %) lies before the GPU's first kernel (start-up / shutdown: once per "
            "run, not in every step); the other 270.00 µs (13.4 % of the window) lies between kernels, in the loop: "
            "this finding is about both.") in f.evidence


def test_mix_mostly_start_up_is_one_time(tmp_path: Path) -> None:
    """As above, but only the first 2 steps call it: the leading gap holds 630 of 660 µs (95.5 %), the one later call
    (30 µs) is 1.5 % of the window (< 5 %) → the start-up finding, its evidence giving the rest."""
    b, g = _builder()
    b.runtime(0, 600 * US, tid_g=g, name=REG)
    _steps(b, g, 610 * US, calls=2)
    f = _one(_run(b, tmp_path, "mix_once.sqlite", 2_009), "other_api")
    assert f.title.startswith("Start-up, not the loop:") and f.category == "one_time"
    assert round(_check(f, "startup_pct_of_cause"), 1) == 95.5 and round(_check(f, "loop_pct_of_window"), 1) == 1.5
    assert ("630.00 µs of it on device 0 (95.5 %) lies before the GPU's first kernel (start-up / shutdown: once per "
            "run, not in every step); the rest, between kernels, is 1.5 % of the window.") in f.evidence


def _autotune_pass(b: TraceBuilder, g: int) -> int:
    """10 rounds from 0, each a 50 µs cudaMalloc then 5 `redzone_checker` trials (the `autotune` trait) from 60 µs:
    110 µs a round, the pass ends at 1,100 µs; 50 trials × 9 µs = 450 µs of kernel time, all trials."""
    t = 0
    for _ in range(10):
        b.runtime(t, t + 50 * US, tid_g=g, name="cudaMalloc_v3020")
        t = _loop(b, t + 60 * US, 5, name="redzone_checker")
    return t


def test_autotuning_allocations_are_not_in_the_loop(tmp_path: Path) -> None:
    """The autotuning pass (above), then 100 warm `gemm` kernels from 1,110 µs with no allocation (last ends 2,109
    µs; window [0, 2,109 µs)). 500 µs of `alloc` (23.7 % of the window), the last allocation gap ends at 1,050 µs
    (past the first quarter, 527 µs: not allocator growth), the first call's 50 µs in the leading gap (10 %: not
    start-up). The pass runs until the first gemm, 1,110 µs; trials hold 450 of its 450 µs of kernel time (100 %)
    → "Autotuning allocations, not the loop", one-time advice."""
    b, g = _builder()
    t = _autotune_pass(b, g)
    _loop(b, t + 10 * US, 100)
    f = _one(_run(b, tmp_path, "autotune.sqlite", 2_109), "alloc")
    assert f.title.startswith("Autotuning allocations, not the loop: `cudaMalloc` holds "), f.title
    assert "in the loop" not in f.title and (f.category, f.severity) == ("one_time", "low")
    # `redzone_checker` is TensorFlow / XLA's trial kernel: the stack is tensorflow, its line is given
    assert f.recommendation == (ADVICE["alloc.autotune"].text, ADVICE["alloc.autotune.tf"].text)
    assert _check(f, "autotune_trial_pct") == 100.0
    assert any("until 1.110 ms from trace start" in e and "450.00 µs of kernel time" in e
               and "100 kernels after it" in e for e in f.evidence), f.evidence
    assert f.holds()


def test_warm_steps_that_allocate_are_in_the_loop(tmp_path: Path) -> None:
    """The same pass, then 10 warm steps of 140 µs each starting with a 30 µs cudaMalloc (from 1,110 µs; window
    [0, 2,509 µs)): allocation gaps end after the pass (1,150 µs) → "Allocation in the loop" stands."""
    b, g = _builder()
    t = _autotune_pass(b, g)
    _steps(b, g, t + 10 * US, calls=10, call="cudaMalloc_v3020")
    f = _one(_run(b, tmp_path, "autotune_loop.sqlite", 2_509), "alloc")
    assert f.title.startswith("Allocation in the loop"), f.title
    assert f.category == "allocation" and f.recommendation == (ADVICE["alloc.pool"].text,)
