"""Claims about kernel names: what a softmax, Inductor's kernels, the optimizer step and XLA's fusions are called in the
categories, and the workload of an XLA trace. Each trace is built by hand; the truth is worked out in the docstrings
(rules: docs/FINDINGS.md, "Kernel categories" and "workload")."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Sequence, Tuple

from claims_support import finding_of, report_of
from synth import TraceBuilder

from nsys_llm_explainer.findings.advice import ADVICE

US = 1_000
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_kernel__5x_cublas"
MTA = "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::"


def _loop(layer: Sequence[Tuple[str, int]], steps: int = 20, ranged: int = 0) -> TraceBuilder:
    """pid 100, one thread: ``steps`` repeats of ``layer`` ((name, µs) kernels), each launched by a 4 µs call and
    starting 5 µs after it; the next launch max(d, 5) + 1 µs later; 2 µs between repeats. The first ``ranged``
    repeats sit in an NVTX range `init` each."""
    b = TraceBuilder()
    b.process(100, "python3")
    g = b.thread(100, 100, "python3")
    b.gpu(0)
    h = 1000 * US
    for s in range(steps):
        t0 = h
        for name, d in layer:
            b.launch(h, h + 4 * US, h + 5 * US, h + 5 * US + d * US, pid=100, tid=100, name=name)
            h += (max(d, 5) + 1) * US
        if s < ranged:
            b.nvtx_push_pop(t0, h, "init", tid_g=g)
        h += 2 * US
    return b


def _split(rep: Dict[str, Any]) -> Dict[str, float]:
    return {r["category"]: round(r["pct"], 1) for r in rep["categories"]["overall"]}


def test_an_inductor_attention_softmax_is_no_sampling(tmp_path: Path) -> None:
    """A torch.compile'd layer: GEMMs 60 + 20 µs, the Inductor attention softmax `triton_per_fused__softmax_3`
    11 µs, Inductor pointwise / reduction kernels 10 + 9 + 10 µs, a template `addmm` 30 µs (150 µs a layer). Kernel
    time: gemm (60 + 20 + 30) / 150 = 73.3 %, elementwise (the pointwise) 20 / 150 = 13.3 %, reduction 9 / 150 =
    6.0 %, softmax 11 / 150 = 7.3 %. It read
    "sampling 7 %" (no sampler runs) and `triton` 33.3 % (the two pointwise kernels and the template GEMM) beside
    `elementwise` 6.0 % (the reduction), gemm 53.3 %; the GPU-bound finding quotes the split."""
    rep = report_of(_loop([(GEMM, 60), ("triton_per_fused__softmax_3", 11), (GEMM, 20),
                           ("triton_poi_fused_add_mul_0", 10), ("triton_red_fused__to_copy_mean_pow_0", 9),
                           ("triton_poi_fused_cat_1", 10), ("triton_tem_fused_addmm_0", 30)]), tmp_path)
    assert _split(rep) == {"gemm": 73.3, "elementwise": 13.3, "softmax": 7.3, "reduction": 6.0}
    ev = " ".join(finding_of(rep, "gpu_bound")["evidence"])
    assert "sampling" not in ev and "softmax 7 %" in ev, ev


def test_the_optimizer_step_is_its_own_category(tmp_path: Path) -> None:
    """A training loop: GEMMs 30 + 60 µs, the loss's log-softmax 8 µs, then foreach kernels: a gradient-clipping
    norm (LpNorm) 5 µs, a scale 5 µs and the fused Adam 20 µs (128 µs a step). optimizer = 30 / 128 = 23.4 % (it
    read `elementwise` 19.5 % and `norm` 3.9 %: an optimizer step is neither), softmax 8 / 128 = 6.25 → 6.2 % (it
    read `sampling`: a training loss samples nothing), gemm 90 / 128 = 70.3 %; the workload is training (Adam)."""
    rep = report_of(_loop([
        (GEMM, 30), ("void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, "
                     "at::native::(anonymous namespace)::LogSoftMaxForwardEpilogue>(T4 *, const T2 *, int)", 8),
        (GEMM, 60), (MTA + "TensorListMetadata<(int)1>, at::native::LpNormFunctor<float, 1, float>>(T1)", 5),
        (MTA + "TensorListMetadata<(int)1>, at::native::BinaryOpScalarFunctor<float>>(T1)", 5),
        (MTA + "TensorListMetadata<(int)4>, at::native::FusedAdamMathFunctor<float, 4>>(T1)", 20)]), tmp_path)
    assert _split(rep) == {"gemm": 70.3, "optimizer": 23.4, "softmax": 6.2}
    assert rep["kernel_traits"]["workload"] == "training"


def test_an_xla_trace_says_unknown_workload_and_gives_no_inference_advice(tmp_path: Path) -> None:
    """A JAX step: a cuBLAS GEMM 40 µs and XLA fusions `loop_add_fusion` 6, `input_reduce_fusion_1` 7, `fusion_12` 8,
    `wrapped_convert` 5, `loop_exponential_fusion` 6, `wrapped_slice` 5 µs (77 µs a step). The fusions are
    elementwise 37 / 77 = 48.1 % (it read `other` 24.7 %, `elementwise` 15.6 %, `sampling` 7.8 % for `exp`), gemm
    40 / 77 = 51.9 %. Nothing tells training from inference (XLA fuses the backward into kernels named like the
    forward's): workload unknown, the facts line says why (it read "inference"). One NVTX range around the first of
    20 steps covers 5 % of kernel time: the coverage finding no longer advises "ranges around each prefill and
    decode step" (nor the training ranges: the workload is not known)."""
    rep = report_of(_loop([(GEMM, 40), ("loop_add_fusion", 6), ("input_reduce_fusion_1", 7), ("fusion_12", 8),
                           ("wrapped_convert", 5), ("loop_exponential_fusion", 6), ("wrapped_slice", 5)], ranged=1),
                    tmp_path)
    assert _split(rep) == {"gemm": 51.9, "elementwise": 48.1}
    kt = rep["kernel_traits"]
    assert kt["workload"] == "unknown" and kt["workload_evidence"][0].startswith(
        "XLA-compiled kernels (e.g. 'fusion_12') never name forward or backward"), kt["workload_evidence"]
    rec = finding_of(rep, "nvtx_coverage")["recommendation"]
    assert ADVICE["nvtx.add.inference"].text not in rec and ADVICE["nvtx.add.training"].text not in rec, rec


def test_xla_unfused_attention_gets_jax_advice_not_pytorch_s(tmp_path: Path) -> None:
    """A JAX attention step: `triton_gemm_dot_1` 30 µs, XLA's `triton_softmax_2` 20 µs, `triton_gemm_dot_2` 30 µs,
    `loop_add_fusion` 10 µs (90 µs a step). Softmax is 20 / 90 = 22.2 % of kernel time beside GEMMs with no fused
    attention kernel: "Attention runs unfused" holds. Nothing in the trace is PyTorch: the advice said "Use
    `torch.nn.functional.scaled_dot_product_attention`"; XLA's fusions are now JAX evidence (the last stack rule,
    Stack: jax), and the line is JAX's (`jax.nn.dot_product_attention(..., implementation='cudnn')`: the trace's GPU
    is a Hopper)."""
    rep = report_of(_loop([("triton_gemm_dot_1", 30), ("triton_softmax_2", 20), ("triton_gemm_dot_2", 30),
                           ("loop_add_fusion", 10)]), tmp_path)
    assert rep["kernel_traits"]["stack"] == "jax"
    f = finding_of(rep, "attention_unfused")
    assert f["title"] == "Attention runs unfused (softmax + batched GEMMs): softmax alone is 22.2 % of kernel time"
    assert f["recommendation"] == [ADVICE["attention.fused.jax"].text]
