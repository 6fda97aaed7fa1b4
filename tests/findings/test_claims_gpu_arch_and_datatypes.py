"""GPU architectures, datatypes and quantized kernels: sentences a report made that its trace contradicts (a
half-precision GEMV called FP32, a kernel both FP32 SIMT and tensor-core, FlashAttention advice on Turing). Each trace
is built by hand; the truth is worked out in the docstring."""

from __future__ import annotations

from pathlib import Path

import pytest
from synth import TraceBuilder

from nsys_llm_explainer.findings.advice import ADVICE
from nsys_llm_explainer.options import options_from_kwargs
from nsys_llm_explainer.pipeline import analyze_path

US = 1_000
PID = 100
A100 = dict(name="NVIDIA A100-SXM4-80GB", sm_count=108, computeMajor=8, computeMinor=0)
T4 = dict(name="Tesla T4", sm_count=40, computeMajor=7, computeMinor=5)
H100 = dict(name="NVIDIA H100 80GB HBM3", computeMajor=9, computeMinor=0)
#: cuBLAS GEMVs of an FP16 / BF16 model at batch 1 (decode): half-precision inputs and outputs, FP32 accumulation
HGEMV = ("void gemv2T_kernel_val<int, int, __half, __half, float, float, 128, 16, 4, 4, false, false, "
         "cublasGemvParamsEx<int, cublasGemvTensorStridedBatched<__half const>, cublasGemvTensorStridedBatched<__half "
         "const>, cublasGemvTensorStridedBatched<__half>, float> >(T13, T6, T6)")
BGEMV = ("void gemv2T_kernel_val<int, int, __nv_bfloat16, __nv_bfloat16, float, float, 128, 16, 4, 4, false, false, "
         "cublasGemvParamsEx<int, cublasGemvTensorStridedBatched<__nv_bfloat16 const>, "
         "cublasGemvTensorStridedBatched<__nv_bfloat16 const>, cublasGemvTensorStridedBatched<__nv_bfloat16>, "
         "float> >(T13, T6, T6)")
SM90_F32 = ("sm90_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x32_warpgroupsize1x1x1_execute_segment_k_off_"
            "kernel__5x_cublas")
SM90_FP8 = ("sm90_xmma_gemm_e4m3e4m3_e4m3f32_f32_tn_n_tilesize128x128x128_warpgroupsize1x1x1_execute_segment_k_off_"
            "kernel__5x_cublas")
SOFTMAX = ("void (anonymous namespace)::softmax_warp_forward<c10::Half, c10::Half, float, 10, false, false>"
           "(T2 *, const T1 *, int, int, int, const bool *, int, bool)")
BMM = "turing_fp16_s1688gemm_fp16_128x128_ldg8_f2f_nn"
ELEM = ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::Half>, "
        "at::detail::Array<char *, 3>>(int, T2, T3)")


def _loop(tmp_path: Path, gpu: dict, kernels, steps: int = 30):
    """One thread launches ``kernels`` (name, duration) back to back, 2 µs apart, ``steps`` times on device 0."""
    b = TraceBuilder()
    b.process(PID)
    b.thread(PID, PID, "python3")
    b.gpu(0, **gpu)
    t = 0
    for _ in range(steps):
        for name, d in kernels:
            b.launch(t, t + 5 * US, t + 10 * US, t + 10 * US + d, pid=PID, tid=PID, name=name)
            t += d + 2 * US
    p = tmp_path / "t.sqlite"
    b.write(str(p), overwrite=True)
    return analyze_path(str(p), options_from_kwargs()).to_dict()


def test_half_precision_gemv_is_not_called_an_fp32_model(tmp_path: Path) -> None:
    """An FP16/BF16 model decoding at batch 1 on an A100: per step a `__half` cuBLAS GEMV (300 µs), a
    `__nv_bfloat16` one (300 µs) and an add (20 µs). The GEMVs run on CUDA cores (FP32 accumulation), but their
    operands are 16-bit: the report titled them "FP32 GEMMs run on CUDA cores" and advised "Let FP32 matmuls use
    TF32" (`allow_tf32` changes no FP16 matmul) and "run the model in bfloat16" (half of it already is). They are
    now the `half_simt` trait (60 kernels, 18 ms of 18.6 ms), not `fp32_gemm_simt`, and draw no FP32 finding (a
    batch-1 GEMV is bandwidth-bound: no precision advice fits it)."""
    rep = _loop(tmp_path, A100, [(HGEMV, 300 * US), (BGEMV, 300 * US), (ELEM, 20 * US)])
    tr = rep["kernel_traits"]["traits"]
    assert "fp32_gemm_simt" not in tr and (tr["half_simt"]["kernel_count"], tr["half_simt"]["total_ns"]) == (
        60, 18_000_000)
    f = [f for f in rep["findings"] if f["id"] == "fp32_gemm"]
    assert not any("FP32 GEMMs" in x["title"] for x in f), [x["title"] for x in f]
    advice = [a for x in f for a in x["recommendation"]]
    assert not any("allow_tf32" in a or "bfloat16" in a for a in advice), advice


def test_a_kernel_is_not_both_fp32_simt_and_tensor_core(tmp_path: Path) -> None:
    """On an H100, per step: an FP8 cuBLAS GEMM (`sm90_xmma_gemm_e4m3…`, 400 µs) and an FP32 one
    (`sm90_xmma_gemm_f32f32_f32f32_f32…`, 300 µs). The FP32 kernel is the `fp32_gemm_simt` trait (30 kernels,
    9 ms of 21 ms = 42.9 %); the report also counted it as `tensor_core_gemm` ("GEMM/conv kernels that use tensor
    cores": 60 kernels, 100 %) — a kernel is on CUDA cores or on tensor cores, not both: `tensor_core_gemm` holds
    the FP8 kernels only (30 kernels, 12 ms, 57.1 %)."""
    rep = _loop(tmp_path, H100, [(SM90_FP8, 400 * US), (SM90_F32, 300 * US)])
    tr = rep["kernel_traits"]["traits"]
    assert (tr["fp32_gemm_simt"]["kernel_count"], tr["fp32_gemm_simt"]["total_ns"]) == (30, 9_000_000)
    assert (tr["tensor_core_gemm"]["kernel_count"], tr["tensor_core_gemm"]["total_ns"]) == (30, 12_000_000)
    assert tr["tensor_core_gemm"]["share_pct"] == pytest.approx(57.14, abs=0.01)


def test_no_flashattention_advice_on_turing(tmp_path: Path) -> None:
    """A T4 (compute capability 7.5), per step: an FP16 tensor-core GEMM (700 µs) and a softmax (100 µs), no fused
    attention kernel: `attention_unfused` holds (softmax 3 ms of 24 ms = 12.5 %, busy ≈ 99 %). Its advice said
    "FlashAttention / memory-efficient backends), FlashAttention or FlashInfer": FlashAttention-2 (and PyTorch
    SDPA's flash backend) run only from compute capability 8.0 (Ampere); on Turing SDPA picks the
    memory-efficient backend (xformers-style). The same loop on an A100 keeps the FlashAttention line."""
    rep = _loop(tmp_path, T4, [(BMM, 700 * US), (SOFTMAX, 100 * US)])
    f = next(f for f in rep["findings"] if f["id"] == "attention_unfused")
    assert f["recommendation"] == [ADVICE["attention.fused.pre_ampere"].text]
    rep = _loop(tmp_path, A100, [(BMM, 700 * US), (SOFTMAX, 100 * US)])
    f = next(f for f in rep["findings"] if f["id"] == "attention_unfused")
    assert f["recommendation"] == [ADVICE["attention.fused"].text]
