"""PyTorch traces full of framework NVTX ranges (`emit_nvtx` / `record_function` op ranges, autograd's per-node ranges,
`Optimizer.step#…`, `ProfilerStep#N`). Each trace is built by hand; the truth is worked out in the docstring."""

from __future__ import annotations

from pathlib import Path

from claims_support import finding_of as _finding
from claims_support import report_of as _run
from synth import TraceBuilder

from nsys_llm_explainer.findings.advice import ADVICE

US = 1_000
MS = 1_000_000
PID = 100
GEMM = "ampere_sgemm_128x64_nn"
SGD = ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
       "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)")
ADAM = "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<FusedAdamMathFunctor>(float*)"


def _training(*, profiler_step: bool, update: str = ADAM, bw_thread: str = "pt_autograd_0") -> TraceBuilder:
    """10 training iterations of 10 ms from 1 ms. Main thread (`python`, tid 1): `ProfilerStep#i` [t, t+9 ms) when
    ``profiler_step``; forward op j = 0…3 `aten::linear, seq = …, op_id = …` [t+j ms, +400 µs) ⊃ `aten::addmm, op_id
    = …` [+100, +400 µs), launch [+350, +380 µs), GEMM [+400, +900 µs). Autograd thread (tid 2, ``bw_thread``):
    backward op j `autograd::engine::evaluate_function: AddmmBackward0` [t+4+j ms, +600 µs) ⊃ `AddmmBackward0, op_id =
    …` [+50, +550) ⊃ `aten::mm, seq = …, op_id = …` [+100, +500), launch [+450, +480), GEMM [+500, +1000 µs). Main:
    `Optimizer.step#AdamW.step` [t+8, t+9 ms) ⊃ `aten::_foreach_add_` [+100, +300 µs), launch [+250, +280), the
    ``update`` kernel [+300, +400 µs). So an iteration is 10 ms; the backward per-node ranges last 600 µs (4 per
    iteration), the optimizer range 1 ms (1 per iteration)."""
    b = TraceBuilder()
    b.process(PID)
    g1, g2 = b.thread(PID, 1, "python"), b.thread(PID, 2, bw_thread)
    seq = 0
    for i in range(10):
        t = MS + i * 10 * MS
        if profiler_step:
            b.nvtx_push_pop(t, t + 9 * MS, f"ProfilerStep#{i}", tid_g=g1)
        for j in range(4):
            o = t + j * MS
            b.nvtx_push_pop(o, o + 400 * US, f"aten::linear, seq = {seq}, op_id = {3 * seq}", tid_g=g1)
            b.nvtx_push_pop(o + 100 * US, o + 400 * US, f"aten::addmm, op_id = {3 * seq + 1}", tid_g=g1)
            b.launch(o + 350 * US, o + 380 * US, o + 400 * US, o + 900 * US, pid=PID, tid=1, name=GEMM)
            seq += 1
        for j in range(4):
            o = t + 4 * MS + j * MS
            b.nvtx_push_pop(o, o + 600 * US, "autograd::engine::evaluate_function: AddmmBackward0", tid_g=g2)
            b.nvtx_push_pop(o + 50 * US, o + 550 * US, f"AddmmBackward0, op_id = {3 * seq + 2}", tid_g=g2)
            b.nvtx_push_pop(o + 100 * US, o + 500 * US, f"aten::mm, seq = {seq}, op_id = {3 * seq}", tid_g=g2)
            b.launch(o + 450 * US, o + 480 * US, o + 500 * US, o + 1000 * US, pid=PID, tid=2, name=GEMM)
            seq += 1
        o = t + 8 * MS
        b.nvtx_push_pop(o, o + MS, "Optimizer.step#AdamW.step", tid_g=g1)
        b.nvtx_push_pop(o + 100 * US, o + 300 * US, "aten::_foreach_add_", tid_g=g1)
        b.launch(o + 250 * US, o + 280 * US, o + 300 * US, o + 400 * US, pid=PID, tid=1, name=update)
    return b


def test_autograd_node_and_optimizer_ranges_are_not_steps(tmp_path: Path) -> None:
    """(trace: :func:`_training` without `ProfilerStep`) The report said "40 steps from NVTX range
    `autograd::engine::evaluate_function: AddmmBackward#`", step time p50 600 µs — one backward op, four per 10 ms
    iteration; with that excluded it said "10 steps from `Optimizer.step#AdamW.step`", step time 1 ms — the
    optimizer's part of a 10 ms iteration. Neither range is a step: no NVTX range repeats once per step, so no step
    is claimed (the marker method finds no sampling kernel either)."""
    rep = _run(_training(profiler_step=False), tmp_path)
    s = rep["steps"]
    assert not s["available"] and s["step_count"] == 0, (s["confidence_reason"], s["step_count"])
    assert s["reason"].startswith("no NVTX range repeats once per step")


def test_profiler_step_ranges_stay_the_steps(tmp_path: Path) -> None:
    """(trace: :func:`_training` with `ProfilerStep#i` [t, t+9 ms)) The steps are the 10 `ProfilerStep` ranges, 9 ms
    each, period 10 ms; each encloses the 5 kernels of its thread's launches (4 forward GEMMs + the update), and in
    time also the 4 backward GEMMs: GPU busy per step 4 × 0.5 + 4 × 0.5 + 0.1 = 4.1 ms."""
    rep = _run(_training(profiler_step=True), tmp_path)
    s = rep["steps"]
    assert s["method"] == "nvtx" and s["step_count"] == 10 and s["confidence"] == "high"
    assert s["summary"]["p50_ns"] == 9 * MS, s["summary"]
    assert s["totals"]["gpu_busy_ns"] == 41 * MS, s["totals"]


def test_step_coverage_counts_the_autograd_threads_launches(tmp_path: Path) -> None:
    """(trace: :func:`_training` with `ProfilerStep#i` on the main thread) The confidence reason says "NVTX range
    'ProfilerStep##' (10 instances) encloses 100% of kernel launches", and each step is given 5 kernels
    (`totals.kernel_count` 50): the 40 backward GEMMs launched by `pt_autograd_0` — 20 of the 41 ms of kernel time
    — are in no step, and the share counts only the main thread's launches (50 of 50). Of all 90 launches the ranges
    enclose 50 (56 %); the reason should say so (or name the other thread), and a fix would either assign a
    same-process thread's launches inside a step's span to it or state the share over all launching threads.
    Fixed: the reason says whose launches the share is of, and how many of the trace's launches the ranges hold."""
    rep = _run(_training(profiler_step=True), tmp_path)
    s = rep["steps"]
    assert "encloses 100% of kernel launches" not in s["confidence_reason"], s["confidence_reason"]
    assert ("encloses 100% of the kernel launches of its threads (50 of the trace's 90 launches: other threads "
            "launched the rest)") in s["confidence_reason"]


def test_backward_nvtx_ranges_say_training(tmp_path: Path) -> None:
    """(trace: :func:`_training`, an SGD update as an elementwise add — no kernel named for an optimizer or for
    backward — and the autograd thread named like the process, `python3`, as by a PyTorch that does not name it)
    The report said "Workload: inference (backward + optimizer kernels 0.0 % of kernel time, no autograd thread)"
    beside 40 `autograd::engine::evaluate_function: AddmmBackward0` ranges: the backward pass ran. Workload:
    training, with the backward ranges as evidence (41 distinct names: the engine's one and 40 `AddmmBackward0,
    op_id = …`)."""
    rep = _run(_training(profiler_step=True, update=SGD, bw_thread="python3"), tmp_path)
    kt = rep["kernel_traits"]
    assert kt["workload"] == "training", kt["workload_evidence"]
    assert any(e.startswith("41 NVTX range name(s) of autograd's backward pass") for e in kt["workload_evidence"])


def _decode(tmp_path: Path):
    """Inference: 50 tokens of 1 ms from 1 ms, each 20 ops 40 µs apart on one thread and stream: op range
    `aten::linear` / `aten::add, seq = k, op_id = k` [o, o+30 µs) ⊃ `aten::addmm, op_id = k` [o+5, o+30 µs), launch
    call [o+20, o+25 µs), a 4 µs kernel [o+28, o+32 µs). No backward range, no optimizer kernel. Per op the GPU
    idles 36 µs (from the previous kernel's end at o−8 µs): 8 host, 5 op range, 15 `aten::addmm`, 5 launch call,
    then 3 µs with the kernel launched but not started — launch latency on a single stream with no event, copy or
    other stream to wait on (1,000 × 3 µs = 3 ms, 6.0 % of the 49.792 ms window)."""
    b = TraceBuilder()
    b.process(PID)
    g1 = b.thread(PID, 1, "python")
    seq = 0
    for i in range(50):
        t = MS + i * MS
        for j in range(20):
            o = t + j * 40 * US
            op = "aten::add" if j % 2 else "aten::linear"
            b.nvtx_push_pop(o, o + 30 * US, f"{op}, seq = {seq}, op_id = {seq}", tid_g=g1)
            b.nvtx_push_pop(o + 5 * US, o + 30 * US, f"aten::addmm, op_id = {seq}", tid_g=g1)
            b.launch(o + 20 * US, o + 25 * US, o + 28 * US, o + 32 * US, pid=PID, tid=1,
                     name=SGD if j % 2 else "sm80_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize64x64x64_kernel")
            seq += 1
    return _run(b, tmp_path)


def test_forward_only_op_ranges_say_inference(tmp_path: Path) -> None:
    """(trace: :func:`_decode`) Forward op ranges only (`aten::linear`, `aten::add`, `aten::addmm`): no backward
    range, so the NVTX evidence does not make it training; the workload stays inference."""
    kt = _decode(tmp_path)["kernel_traits"]
    assert kt["workload"] == "inference", kt["workload_evidence"]


def test_queued_advice_does_not_claim_a_dependency_on_one_stream(tmp_path: Path) -> None:
    """(trace: :func:`_decode`) `idle_queued` (3.000 ms, 6.0 %) says "Look at the largest gaps: the next kernel
    was already launched, so it waited on another stream, an event (`cudaStreamWaitEvent`) or a copy" — the trace
    has one stream, no event call and no copy: each kernel starts 3 µs after its launch call returns (launch
    latency). The advice must not name a dependency the trace does not have. Fixed: 3 µs of `queued` per gap
    holding it (< 10 µs) is launch latency: "each kernel starts a few µs after its launch", fusion advice. Since
    host-paced queued time (docs/MODEL.md) it is not even that: each call returns 36 µs after the kernel before it
    started, so the queue is never deeper than the kernel just launched and the 3 µs (up to the previous kernel's
    own 3 µs delay) are the host's launch interval shifted: the launch-bound finding holds them (999 × 3 µs =
    2.997 ms; the first kernel's wait has no kernel before it) and no `idle_queued` finding is left."""
    rep = _decode(tmp_path)
    assert "idle_queued" not in {f["id"] for f in rep["findings"]}
    f = _finding(rep, "launch_overhead")
    assert "launched kernels waiting to start after host-paced launches (each launched only after the kernel " \
           "before it started) 2.997 ms" in f["evidence"][1], f["evidence"][1]
    assert not any("another stream" in a for a in f["recommendation"]), f["recommendation"]


def test_per_op_ranges_get_framework_overhead_advice(tmp_path: Path) -> None:
    """(trace: :func:`_training` with `ProfilerStep#i`) The GPU idles 43.5 % of the window with the host in
    `aten::…` / autograd op ranges (largest `aten::mm, seq = N, op_id = N`, which launches its kernel): the advice
    read "move work that does not feed the GPU out of the loop, onto another thread, or overlap it" — inside a
    per-op range the host time is PyTorch's own per-op work. The line is now the op ranges' (`nvtx.op_ranges`: CUDA
    graphs / torch.compile, and emit_nvtx's own cost)."""
    f = _finding(_run(_training(profiler_step=True), tmp_path), "idle_nvtx")
    assert f["title"].endswith("largest `aten::mm, seq = N, op_id = N` (14.1 %)")
    assert f["recommendation"] == [ADVICE["nvtx.op_ranges"].text]
