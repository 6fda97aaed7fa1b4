"""PyTorch training loops: sentences a report made about a training trace that the trace does not support (cuBLAS GEMMs
called TensorRT, the optimizer step as the training step, a data-loader wait said to be inside the step, advice to add
ranges the trace has). Each trace is built by hand; the truth is worked out in the docstring."""

from __future__ import annotations

from pathlib import Path

from claims_support import report_of as _run
from synth import TraceBuilder

from nsys_llm_explainer.findings.advice import ADVICE

US = 1_000
MS = 1_000_000
PID = 100
#: cuBLAS's BF16 GEMM on Hopper as PyTorch captures show it
CUBLAS_H100 = ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_cgasize1x2x1_warpgroupsize1x1x1"
               "_execute_segment_k_off_kernel__5x_cublas")
ADAM = "void multi_tensor_apply_kernel<TensorListMetadata<4>, AdamFunctor<float>>"


def _train_loop(b: TraceBuilder, *, steps: int = 10) -> None:
    """H100, one process: per 10 ms step t, the main thread (tid 1) opens `forward` [t, t + 3) ms and launches 10
    cuBLAS GEMMs (call [a, a + 10) µs, kernel [a + 20, a + 300) µs, a = t + 300k µs); `backward` [t + 3, t + 8) ms,
    waiting in pthread_cond_wait while `pt_autograd_0` (tid 2, no NVTX range) launches 10 backward GEMMs of 480 µs;
    `optimizer.step` [t + 8, t + 9) ms launches 4 fused-Adam kernels of 230 µs; `loss.item()` at t + 9 ms."""
    b.gpu(0)
    b.process(PID, "python3")
    m = b.thread(PID, 1, "python3")
    ag = b.thread(PID, 2, "pt_autograd_0")
    for s in range(steps):
        t = s * 10 * MS
        b.nvtx_push_pop(t, t + 3 * MS, "forward", tid_g=m)
        for k in range(10):
            a = t + k * 300 * US
            b.kernel(a + 20 * US, a + 300 * US, pid=PID, name=CUBLAS_H100, corr=b.runtime(a, a + 10 * US, tid_g=m))
        b.nvtx_push_pop(t + 3 * MS, t + 8 * MS, "backward", tid_g=m)
        b.osrt(t + 3 * MS + 5 * US, t + 8 * MS - 5 * US, tid_g=m, name="pthread_cond_wait")
        for k in range(10):
            a = t + 3 * MS + k * 500 * US
            b.kernel(a + 20 * US, a + 500 * US, pid=PID, name=CUBLAS_H100.replace("_tn_", "_nt_") + "_backward",
                     corr=b.runtime(a, a + 10 * US, tid_g=ag))
        b.nvtx_push_pop(t + 8 * MS, t + 9 * MS, "optimizer.step", tid_g=m)
        for k in range(4):
            a = t + 8 * MS + k * 250 * US
            b.kernel(a + 20 * US, a + 250 * US, pid=PID, name=ADAM, corr=b.runtime(a, a + 10 * US, tid_g=m))
        a = t + 9 * MS
        c = b.runtime(a, a + 10 * US, tid_g=m, name="cudaMemcpyAsync_v3020")
        b.memcpy(a + 20 * US, a + 25 * US, pid=PID, bytes=4, copy_kind=2, src_kind=2, dst_kind=1, corr=c)
        c = b.runtime(a + 12 * US, a + 30 * US, tid_g=m, name="cudaStreamSynchronize_v3020")
        b.sync(a + 12 * US, a + 30 * US, pid=PID, sync_type=3, corr=c)


def test_cublas_hopper_gemms_are_not_tensorrt(tmp_path: Path) -> None:
    """The loop's GEMMs are cuBLAS's (`…_execute_segment_k_off_kernel__5x_cublas`), its backward launched by
    `pt_autograd_0`: PyTorch. The report said "Stack: tensorrt" (the rule `sm\\d+_xmma_\\w*execute` took the cuBLAS
    name for a TensorRT one), and, the framework being tensorrt, the NVTX-coverage finding lost its autograd advice
    and said only "Add NVTX ranges around forward, backward and the optimizer step" — ranges the trace has. The
    uncovered kernels (10 × 10 × 480 µs = 48.000 ms of 85.200 ms) are all launched by `pt_autograd_0`: the advice is
    the autograd one."""
    b = TraceBuilder()
    _train_loop(b)
    rep = _run(b, tmp_path)
    kt = rep["kernel_traits"]
    assert (kt["workload"], kt["stack"]) == ("training", "pytorch"), (kt["stack"], kt["stack_evidence"])
    f = next(f for f in rep["findings"] if f["id"] == "nvtx_coverage")
    assert ADVICE["nvtx.autograd"].text in f["recommendation"], f["recommendation"]


def test_optimizer_step_is_not_the_training_step(tmp_path: Path) -> None:
    """The loop of :func:`_train_loop` has no range around a whole iteration; `optimizer.step` (10 instances of
    1.000 ms, 40 of its thread's 140 launches) is one part of it. The report said "10 steps from NVTX range
    `optimizer.step` (confidence medium: ... looks like a step ...)" with "Step time p50 1.000 ms" — the iteration
    is 10.000 ms. `step` as the optimizer's method does not make a step-like name: no range looks like a step, the
    outermost repeating range enclosing the most launches (`forward`, 100) is used with confidence low, and its
    period is the iteration's 10.000 ms."""
    b = TraceBuilder()
    _train_loop(b)
    st = _run(b, tmp_path)["steps"]
    assert (st["step_ranges"], st["confidence"]) == (["forward"], "low"), st["step_ranges"]
    assert (st["step_count"], st["period"]["p50_ns"]) == (10, 10 * MS)


def test_data_loader_wait_between_steps_is_not_said_to_be_inside_the_step(tmp_path: Path) -> None:
    """Per 20 ms iteration t (8 of them) the main thread waits for the data loader — `poll` [t, t + 1.5) ms, `read`
    [t + 1.5, t + 2) ms — and then opens `train_step` [t + 2, t + 20) ms: 4 micro-steps (4 forward GEMMs from the
    main thread, then `pthread_cond_wait` 2.495 ms while `pt_autograd_0` launches 5 backward GEMMs, `loss.item()`),
    then fused Adam. The GPU idles in `poll`/`read` before each step but the first (7 × 2 ms = 14.000 ms; the first
    lies before the trace's first CUDA/NVTX activity). None of those waits is inside `train_step`; the thread's
    waits inside it are `pthread_cond_wait` (32 × 2.495 = 79.840 ms of its 90.340 ms of waits, 88 %) while the
    GPU runs backward. The report's title said "The launching thread waits in `poll` inside `train_step` while the
    GPU idles" and its evidence "These waits are inside NVTX range `train_step` (88 % of the wait time)": the range
    is the context of the thread's waits overall, not of the `poll`/`read` waits the finding is about."""
    b = TraceBuilder()
    b.gpu(0)
    b.process(PID, "python3")
    m = b.thread(PID, 1, "python3")
    ag = b.thread(PID, 2, "pt_autograd_0")
    for s in range(8):
        t = s * 20 * MS
        b.osrt(t, t + 1_500 * US, tid_g=m, name="poll")
        b.osrt(t + 1_500 * US, t + 2 * MS, tid_g=m, name="read")
        T = t + 2 * MS
        b.nvtx_push_pop(T, T + 18 * MS, "train_step", tid_g=m)
        for u in range(4):
            U = T + u * 4 * MS
            for k in range(4):
                a = U + k * 250 * US
                b.kernel(a + 20 * US, a + 250 * US, pid=PID, name=CUBLAS_H100, corr=b.runtime(a, a + 10 * US, tid_g=m))
            b.osrt(U + 1_005 * US, U + 3_500 * US, tid_g=m, name="pthread_cond_wait")
            for k in range(5):
                a = U + 1 * MS + k * 500 * US
                b.kernel(a + 20 * US, a + 500 * US, pid=PID, name=CUBLAS_H100.replace("_tn_", "_nt_"),
                         corr=b.runtime(a, a + 10 * US, tid_g=ag))
            a = U + 3_600 * US
            c = b.runtime(a, a + 10 * US, tid_g=m, name="cudaMemcpyAsync_v3020")
            b.memcpy(a + 20 * US, a + 25 * US, pid=PID, bytes=4, copy_kind=2, src_kind=2, dst_kind=1, corr=c)
            c = b.runtime(a + 12 * US, a + 30 * US, tid_g=m, name="cudaStreamSynchronize_v3020")
            b.sync(a + 12 * US, a + 30 * US, pid=PID, sync_type=3, corr=c)
        a = T + 16 * MS
        for k in range(4):
            s0 = a + k * 250 * US
            b.kernel(s0 + 20 * US, s0 + 250 * US, pid=PID, name=ADAM, corr=b.runtime(s0, s0 + 10 * US, tid_g=m))
    rep = _run(b, tmp_path)
    f = next(f for f in rep["findings"] if f["id"] == "idle_osrt")
    assert f["time_at_stake_ns"] == 14 * MS, f["time_at_stake_ns"]
    assert "inside `train_step`" not in f["title"], f["title"]
    # the title names `poll` and quotes poll's part (7 × 1.5 ms = 10.500 ms of 158 ms = 6.6 %), not all 14 ms of
    # OS-call idle (`read` holds 3.5 ms of it): it said "waits in `poll` …: 8.9 % (14.000 ms)"
    assert f["title"] == "The launching thread waits in `poll` while the GPU idles: 6.6 % (10.500 ms)", f["title"]
    assert not any("inside NVTX range `train_step`" in e for e in f["evidence"]), f["evidence"]
    # per waiting call (read is file I/O, not a wait): no range encloses poll; pthread_cond_wait (32 × 2.495 ms =
    # 79.840 ms) lies wholly in train_step
    (w,) = rep["waits"]["launchers"]
    ctx = {c["name"]: (c["ns"], c["context"], c["context_pct"]) for c in w["calls"]}
    assert set(ctx) == {"poll", "pthread_cond_wait"} and ctx["poll"][1:] == ("", 0.0)
    assert ctx["pthread_cond_wait"] == (79_840 * US, "train_step", 100.0)


def test_no_advice_to_add_ranges_the_trace_already_has(tmp_path: Path) -> None:
    """:func:`_train_loop` has `forward`, `backward` and `optimizer.step` ranges on the main thread; the backward
    kernels (48.000 ms of 85.200 ms) are launched by `pt_autograd_0`, outside any range, so the coverage finding
    holds with the autograd advice. It also said "Add NVTX ranges around forward, backward and the optimizer step":
    ranges the trace has. The same loop with its ranges named `a` / `b` / `c` keeps that advice."""
    b = TraceBuilder()
    _train_loop(b)
    rec = next(f for f in _run(b, tmp_path)["findings"] if f["id"] == "nvtx_coverage")["recommendation"]
    assert ADVICE["nvtx.autograd"].text in rec and ADVICE["nvtx.add.training"].text not in rec, rec
    b = TraceBuilder()
    _train_loop(b)
    for row in b._rows["nvtx"]:
        row["text"] = {"forward": "a", "backward": "b", "optimizer.step": "c"}[row["text"]]
    rec = next(f for f in _run(b, tmp_path)["findings"] if f["id"] == "nvtx_coverage")["recommendation"]
    assert ADVICE["nvtx.autograd"].text in rec and ADVICE["nvtx.add.training"].text in rec, rec
