"""JAX / XLA and TensorFlow workloads: sentences a report made that its trace contradicts. Each trace is built by hand;
the truth is worked out in the docstring."""

from __future__ import annotations

from pathlib import Path

from claims_support import finding_of as _finding
from claims_support import report_of as _run
from synth import TraceBuilder

US = 1_000
MS = 1_000_000
PID = 100
SDPA = "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wmma_f16_knob_3_64x64x128_4x1x1_kernel0_0"
SDPA_BWD = "cudnn_generated_fort_native_sdpa_sm90_flash_bprop_wmma_f16_knob_7_64x64x128_4x1x1_kernel0_0"


def _jax_launch_bound() -> TraceBuilder:
    """A JAX (XLA) decode loop, process and thread `python3`, no NVTX, no `tf_` threads, no autotuning: 10 steps of
    2 ms; each launches 30 `loop_fusion_k` kernels of 5 µs (one every 50 µs, call 8 µs), then XLA's Triton GEMM
    `triton_gemm_dot_5` (200 µs) and the cuBLAS GEMM `gemm_fusion_7` (200 µs). Median kernel 5 µs, 320 kernels over
    19.93 ms: launch-bound."""
    b = TraceBuilder()
    b.process(PID, "python3")
    b.thread(PID, 1, "python3")
    for s in range(10):
        u = s * 2 * MS
        for k in range(30):
            b.launch(u, u + 8 * US, u + 10 * US, u + 15 * US, pid=PID, tid=1, name=f"loop_fusion_{k}")
            u += 50 * US
        b.launch(u, u + 8 * US, u + 10 * US, u + 210 * US, pid=PID, tid=1, name="triton_gemm_dot_5")
        u += 220 * US
        b.launch(u, u + 8 * US, u + 10 * US, u + 210 * US, pid=PID, tid=1, name="gemm_fusion_7")
    return b


def test_xla_triton_gemm_is_no_pytorch_evidence(tmp_path: Path) -> None:
    """(trace: :func:`_jax_launch_bound`) The report said "Stack: pytorch" (evidence: `triton_gemm_dot_5` matches
    /triton_/) and advised "In PyTorch: `torch.compile(mode="reduce-overhead")` or `torch.cuda.graphs` capture the
    step" — false: no name in the trace is PyTorch's; `triton_gemm_…` is XLA's Triton GEMM fusion. No name says
    jax / xla / tensorflow, so only the last stack rule holds: XLA-compiled kernel names, read as JAX (TensorFlow's
    XLA traces carry `tensorflow` / `tf_` names, which earlier rules read); no PyTorch line is given; the generic
    CUDA-graphs line stays."""
    rep = _run(_jax_launch_bound(), tmp_path)
    assert rep["facts"]["stack"] == "jax" and rep["facts"]["framework"] == "jax"
    rec = _finding(rep, "launch_overhead")["recommendation"]
    assert not any("torch" in a.lower() for a in rec), rec
    assert any(a.startswith("Cut the number of launches per step with CUDA graphs") for a in rec), rec


def test_cudnn_fused_attention_is_no_convolution(tmp_path: Path) -> None:
    """A JAX step on an H100: per step (10 steps of 1 ms) one cuDNN flash-attention forward kernel `…_sdpa_…_flash_
    fprop_…` of 200 µs and one GEMM `gemm_fusion_3` of 300 µs. Kernel time 5 ms: attention 2 ms (40 %), GEMM 3 ms.
    The traits said `conv` 40 % ("convolution kernels") because the name has `fprop`: the trace holds no convolution.
    Expected: `attention_fused` 40.0 %, no `conv` trait."""
    b = TraceBuilder()
    b.process(PID, "python3")
    b.thread(PID, 1, "python3")
    for s in range(10):
        t = s * MS
        b.launch(t, t + 8 * US, t + 10 * US, t + 210 * US, pid=PID, tid=1, name=SDPA)
        b.launch(t + 220 * US, t + 228 * US, t + 230 * US, t + 530 * US, pid=PID, tid=1, name="gemm_fusion_3")
    traits = _run(b, tmp_path)["kernel_traits"]["traits"]
    assert traits["attention_fused"]["share_pct"] == 40.0
    assert "conv" not in traits, traits["conv"]


def test_jax_training_with_cudnn_backward_attention_is_not_inference(tmp_path: Path) -> None:
    """A JAX training step (10 steps of 1 ms): `fusion_1` 100 µs, cuDNN flash attention forward (`…flash_fprop…`)
    200 µs, its backward (`…flash_bprop…`) 400 µs. Kernel time 7 ms; the backward attention is 4 ms = 57.1 % ≥ 5 %:
    training. The report says "Workload: inference (backward + optimizer kernels 0.0 %)". The fix: `bprop` in the
    `backward` rule (cuDNN's name for a backward kernel)."""
    b = TraceBuilder()
    b.process(PID, "python3")
    b.thread(PID, 1, "python3")
    for s in range(10):
        t = s * MS
        b.launch(t, t + 8 * US, t + 10 * US, t + 110 * US, pid=PID, tid=1, name="fusion_1")
        b.launch(t + 120 * US, t + 128 * US, t + 130 * US, t + 330 * US, pid=PID, tid=1, name=SDPA)
        b.launch(t + 340 * US, t + 348 * US, t + 350 * US, t + 750 * US, pid=PID, tid=1, name=SDPA_BWD)
    assert _run(b, tmp_path)["kernel_traits"]["workload"] == "training"


def test_tf_threads_do_not_outrank_jax_evidence() -> None:
    """XLA's runtime names its threads `tf_…` under JAX too: a JAX trace (`loop_fusion` kernels, a `jax` NVTX range,
    threads `python3`, `tf_XLAEigen`) read "Stack: tensorflow" because the TensorFlow rule, checked first, took
    `^tf_` threads. Now `^tf_` is evidence only after the JAX rule found none: jax here; a trace whose only evidence
    is a `tf_Compute` thread still reads tensorflow, and TensorFlow's own kernels (`Eigen::`) win first as before."""
    from nsys_llm_explainer.analyses.kernels.stack import detect_stack

    jax = detect_stack(["loop_fusion_1", "gemm_fusion_2"], ["jax.profiler step"], ["python3"],
                       ["python3", "tf_XLAEigen"])
    assert jax[0] == "jax"
    assert detect_stack(["loop_fusion_1"], [], ["python3"], ["python3", "tf_Compute"])[0] == "tensorflow"
    eigen = "void Eigen::internal::EigenMetaKernel<Eigen::TensorEvaluator<float>>(int)"
    assert detect_stack([eigen], [], ["python3"], ["tf_Compute"])[0] == "tensorflow"
