"""Kernel-name traits: hand-computed numbers on small arrays, per-trait positive/negative names, workload,
stack and GPU capabilities, and the readings of real traces (../shared/traces)."""

from __future__ import annotations

import json
import sqlite3
from typing import Dict, List, Sequence, Tuple

import numpy as np
import pytest
from conftest import require_traces

from nsys_llm_explainer.analyses.kernels.stack import detect_stack
from nsys_llm_explainer.analyses.kernels.summary import TopKernel
from nsys_llm_explainer.analyses.kernels.traits import TRAITS, KernelTraitsResult, analyze_kernel_traits, classify_names

SGEMM = "ampere_sgemm_128x64_tn"
ELT = "void at::native::vectorized_elementwise_kernel<(int)4, at::native::CUDAFunctor_add<float>, " \
      "std::array<char *, (unsigned long)3>>(int, T2, T3)"
SOFTMAX = "void <unnamed>::softmax_warp_forward<float, float, float, (int)11, (bool)0, (bool)0>(T2 *, const T1 *, " \
          "int, int, int, const bool *, int, bool)"
FLASH = "void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<(int)128, (int)128, (int)64, (int)4, (bool)0, " \
        "(bool)0, cutlass::bfloat16_t>, (bool)0>(Flash_fwd_params)"
TF32_XMMA = "sm80_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x16_stage4_warpsize2x2x1_tensor16x8x8_execute_kernel"
F32_XMMA = "sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize128x128x8_stage3_warpsize2x2x1_ffma_execute_kernel"


def run(names: Sequence[str], rows: Sequence[Tuple[int, int]], **kw) -> KernelTraitsResult:
    idx = np.array([r[0] for r in rows], np.int64)
    dur = np.array([r[1] for r in rows], np.int64)
    return analyze_kernel_traits(list(names), idx, dur, **kw)


# ---------------------------------------------------------------- exact numbers on a small window

def test_exact_numbers_three_names():
    rows = [(0, 100), (1, 10), (0, 300), (2, 50), (1, 21), (0, 200)]   # total 681 ns
    r = run([SGEMM, ELT, SOFTMAX], rows)
    assert r.available and r.reason is None
    assert (r.kernel_count, r.total_kernel_ns) == (6, 681)
    g = r.traits["fp32_gemm_simt"]
    assert (g.kernel_count, g.total_ns, g.p50_ns) == (3, 600, 200)
    assert g.share_pct == pytest.approx(100 * 600 / 681)
    assert g.top_kernels == (TopKernel(SGEMM, 3, 600),)
    e = r.traits["eager_pointwise"]
    assert (e.kernel_count, e.total_ns, e.p50_ns) == (2, 31, 16)      # median 15.5 rounds half up
    assert e.share_pct == pytest.approx(100 * 31 / 681)
    assert r.traits["tiny_eager_pointwise"].total_ns == 31                 # median 15.5 ns < 10 µs
    s = r.traits["softmax"]
    assert (s.kernel_count, s.total_ns, s.p50_ns, s.top_kernels) == (1, 50, 50, (TopKernel(SOFTMAX, 1, 50),))
    # softmax + a GEMM and no fused attention: unfused attention, numbers = the softmax kernels
    assert r.traits["attention_unfused"] == s.__class__("attention_unfused", 1, 50, s.share_pct, 50, s.top_kernels)
    assert set(r.traits) == {"fp32_gemm_simt", "eager_pointwise", "tiny_eager_pointwise", "softmax",
                             "attention_unfused"}
    assert r.workload == "inference"


def test_top_kernels_order_and_limit():
    a, b, c, d = (f"void at::native::elementwise_kernel<{x}>" for x in "abcd")
    rows = [(0, 25), (0, 25), (1, 50), (2, 70), (3, 5)]
    hit = run([a, b, c, d], rows).traits["eager_pointwise"]
    # largest total first; a/b tie on total 50: more launches first; d (5 ns) is cut (top 3)
    assert hit.top_kernels == (TopKernel(c, 1, 70), TopKernel(a, 2, 50), TopKernel(b, 1, 50))
    assert (hit.kernel_count, hit.total_ns, hit.p50_ns) == (5, 175, 25)


def test_names_outside_window_and_unused_names_are_ignored():
    r = run([SGEMM, ELT, "unused_name_nccl"], [(1, 4), (1, 6)])
    assert set(r.traits) == {"eager_pointwise", "tiny_eager_pointwise"}
    assert r.traits["eager_pointwise"].p50_ns == 5
    assert r.traits["eager_pointwise"].share_pct == pytest.approx(100.0)


def test_tiny_eager_pointwise_threshold_uses_per_name_median():
    slow = "void at::native::elementwise_kernel<slow>"
    fast = "void at::native::elementwise_kernel<fast>"
    r = run([slow, fast], [(0, 10_000), (0, 10_000), (0, 1), (1, 9_998), (1, 10_000)])   # medians 10000, 9999
    assert r.traits["eager_pointwise"].kernel_count == 5
    t = r.traits["tiny_eager_pointwise"]
    assert (t.kernel_count, t.total_ns, t.top_kernels) == (2, 19_998, (TopKernel(fast, 2, 19_998),))


def test_no_kernels():
    r = run([], [], thread_names=["pt_autograd_0"])
    assert not r.available and r.reason
    assert (r.kernel_count, r.total_kernel_ns, r.traits, r.workload) == (0, 0, {}, "unknown")


def test_to_dict_is_json_ready():
    r = run([SGEMM, SOFTMAX], [(0, 5), (1, 3)])
    d = r.to_dict()
    assert json.loads(json.dumps(d)) == d
    assert d["traits"]["fp32_gemm_simt"]["top_kernels"] == [{"name": SGEMM, "count": 1, "total_ns": 5}]
    assert "tensor_cores" not in d and "tf32" not in d   # GPU capabilities are facts (analyses/trace/facts.py)
    assert list(d["traits"]) == [t for t in TRAITS if t in d["traits"]]


# ---------------------------------------------------------------- per-trait names

POSITIVE: Dict[str, List[str]] = {
    "fp32_gemm_simt": [
        SGEMM, "volta_sgemm_128x64_nn", "maxwell_sgemm_128x64_nt", "turing_sgemm_64x64_tn", F32_XMMA,
        "cutlass_80_simt_sgemm_128x32_8x5_nn_align1", "void cutlass::Kernel2<cutlass_80_simt_sgemm_256x128_8x4_nt>",
        "void gemmSN_TN_kernel<float, 128, 16, 2, 4, 8, 9, false, cublasGemvTensorStridedBatched<const float>>",
        "void gemv2T_kernel_val<int, int, float, float, float, float, 128, 16, 4, 4, false, false>",
        "void cudnn::detail::implicit_convolve_sgemm<float, float, 1024, 5, 5, 3, 3, 3, 1, true, false, true>",
        "volta_scudnn_128x64_relu_interior_nn_v1", "volta_gcgemm_32x32_nt"],
    # the same CUDA-core kernels with 16-bit operands (FP32 accumulation): not an FP32 model
    "half_simt": [
        "volta_fp16_scudnn_fp16_128x64_relu_interior_nn_v1",
        "void implicit_convolve_sgemm<__half, __half, 1024, 5, 5, 3, 3, 3, 1, false, true, true>(int, int)",
        "void gemv2T_kernel_val<int, int, __half, __half, float, float, 128, 16, 4, 4, false, false>",
        "void gemv2T_kernel_val<int, int, __nv_bfloat16, __nv_bfloat16, float, float, 128, 16, 4, 4>",
        "void gemmSN_TN_kernel<c10::Half, 128, 16, 2, 4, 8, 9, false, float>"],
    "tensor_core_gemm": [
        TF32_XMMA, "volta_h884gemm_64x64_ldg8_nn", "turing_h1688gemm_128x128_ldg8_tn",
        "ampere_fp16_s16816gemm_fp16_128x128_ldg8_f2f_stages_32x5_nn", "ampere_bf16_s16816gemm_bf16_64x64_nn",
        "cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4", "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n",
        "nvjet_tst_192x192_64x4_2x1_v_bz_coopB_bias_TNN", "sm80_xmma_gemm_bf16bf16_bf16f32_f32_nt_n_tilesize64x64",
        "volta_fp16_s884cudnn_fp16_128x128_ldg8_splitK_relu_f2f_exp_small_nhwc_tn_v1",
        "sm80_xmma_fprop_implicit_gemm_f16f16_f16f16_f16_nhwckrsc_nhwc_tilesize128x128x32_execute_kernel_trt",
        "trt_ampere_h16816gemm_64x64_ldg8_relu_stages_64x5_tn_v1", "void wgmma_kernel<cute::SM90_64x128x16>",
        "sm80_xmma_gemm_i8i8_i8i32_f32_tn_n_tilesize128x128x64",
        # quantized serving: Marlin, AWQ, vLLM's CUTLASS FP8 / INT8 GEMMs
        "void marlin::Marlin<256, 1, 8, 8, 4, 8>(int4 const*, int4 const*, int4*, int4*)",
        "void gemm_forward_4bit_cuda_m16nXk32<128>(int, int, __half*, int*, __half*, int*, int, int, int, __half*)",
        "void cutlass::device_kernel<vllm::cutlass_3x_gemm<cutlass::float_e4m3_t, cutlass::bfloat16_t>>(Params)",
        "void cutlass::Kernel2<cutlass_2x_gemm<int8_t, cutlass::bfloat16_t>>(Params)",
        "void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cutlass::float_e4m3_t>>(Params)"],
    "attention_fused": [
        FLASH, "void flash_bwd_dq_dk_dv_loop_kernel<Flash_bwd_kernel_traits>", "fmha_cutlassF_f16_aligned_64x64_rf",
        "void pytorch_flash::flash_fwd_kernel<>", "void vllm::paged_attention_v2_kernel<__nv_bfloat16>",
        "void flashinfer::BatchPrefillWithPagedKVCacheKernel<>", "fmha_cutlassB_f16_aligned_128x64_k64",
        "void fmha::fused_multihead_attention_v2", "void mmha::masked_multihead_attention_kernel<>",
        "void attention_kernel_batched_impl<AttentionKernel<>> efficient_attention", "xqa_kernel_dt_bf16_d_128",
        # Triton attention: vLLM's unified kernel, SGLang's decode kernels, the Triton tutorial's, custom attn_* kernels
        "kernel_unified_attention_2d", "_decode_grouped_att_m_fwd_kernel", "_decode_att_m_fwd_kernel", "_attn_fwd",
        "attn_decode_kernel", "self_attn_prefill"],
    "softmax": [SOFTMAX, "void cunn_SoftMaxForward<4, float>", "void (anonymous namespace)::softmax_kernel<>",
                "void tensorflow::SoftmaxKernel<float>"],
    "inductor_pointwise": ["triton_poi_fused_add_mul_0", "triton_poi_fused__to_copy_cat_3"],
    "eager_pointwise": [ELT, "void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda>",
                        "void at::native::elementwise_kernel<128, 2, where_kernel_impl>",
                        "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>",
                        "void cast_kernel<float, half>",
                        "void Eigen::internal::EigenMetaKernel<Eigen::TensorEvaluator>"],
    "norm": ["void at::native::<unnamed>::vectorized_layer_norm_kernel<float, float, (bool)0>",
             "void vllm::rms_norm_kernel<c10::BFloat16, 8>", "void cuApplyLayerNorm<float>",
             "void at::native::batch_norm_transform_input_kernel<c10::Half>", "generic_rmsnorm_kernel"],
    "reduce": ["void at::native::reduce_kernel<(int)512, (int)1, at::native::ReduceOp<float>>"],
    "backward": ["void at::native::<unnamed>::layer_norm_backward_kernel<float>", "flash_bwd_convert_dq_kernel",
                 "void cunn_SoftMaxBackward<4, float>", "sm80_xmma_dgrad_implicit_gemm_f16f16", "conv2d_grad_weight",
                 "void cudnn::bn_bw_1C11_kernel_new<float>", "sm80_xmma_wgrad_implicit_gemm_f16f16",
                 "cudnn_generated_fort_native_sdpa_sm90_flash_bprop_wgmma_f16_knob_3_64x128x128_4x1x1_kernel0"],
    "optimizer": ["void at::native::multi_tensor_apply_kernel<FusedAdamMathFunctor<float, 4>>",
                  "void apex::FusedAdam", "sgd_momentum_kernel", "lamb_stage1_kernel", "optimizer_step"],
    "nccl": ["ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<(unsigned long)4096>)",
             "ncclKernel_AllReduce_RING_LL_Sum_float"],
    "conv": ["void implicit_convolve_sgemm<__half, __half, 128>", "volta_scudnn_winograd_128x128_ldg1_ldg4_relu",
             "void cudnn::winograd_nonfused::winogradForwardData4x4<float, float>", "void fft2d_r2c_32x32<float>",
             "sm80_xmma_fprop_implicit_gemm_f16f16_f16f16_f16_nhwckrsc_nhwc", "void cudnn::cnn::im2col4d_kernel<>",
             "void at::native::conv_depthwise2d_forward_kernel<float>", "turing_fp16_s1688cudnn_fp16_256x64"],
    "layout_transform": ["void nchwToNhwcKernel<__half, __half, float, true, false>", "void nhwcToNchwKernel<>",
                         "void transpose_readWrite_alignment_kernel<float2>",
                         "void tensorflow::functor::SwapDimension1And2InTensor3UsingTiles<unsigned int>",
                         "void tensorflow::functor::ShuffleInTensor3Simple<float, 2, 1, 0>",
                         "void CUTENSOR_NAMESPACE::permutationKernelPLC3<>", "genericReformat::copyVectorizedKernel"],
}

NEGATIVE: Dict[str, List[str]] = {
    # tf32 / f16 / bf16 / hmma / tensorop names are tensor-core kernels, never SIMT
    "fp32_gemm_simt": [TF32_XMMA, "ampere_fp16_s16816gemm_fp16_128x128", "volta_h884gemm_64x64_ldg8_nn",
                       "cutlass_80_tensorop_s1688gemm_128x128_32x3_nn", "turing_fp16_s1688cudnn_fp16_256x64",
                       "sm80_xmma_gemm_bf16bf16_bf16f32_f32", "nvjet_tst_192x192", "void cublasLt::splitKreduce_kernel",
                       ELT, FLASH, "void gemv2T_kernel_val<int, int, __half, __half, float, float, 128, 16>"],
    "half_simt": [SGEMM, "void gemv2T_kernel_val<int, int, float, float, float, float, 128, 16, 4, 4, false, false>",
                  "turing_fp16_s1688cudnn_fp16_256x64", "ampere_fp16_s16816gemm_fp16_128x128", ELT],
    "tensor_core_gemm": [SGEMM, F32_XMMA, "volta_scudnn_128x64_relu", FLASH, "fmha_cutlassF_f16_aligned_64x64_rf",
                         "sm50_xmma_pooling_fw_4d_FP16FP32NHWC_Average_FastDiv_CAlign8_execute_kernel_trt", ELT],
    "attention_fused": [SOFTMAX, SGEMM, ELT, "ncclDevKernel_SendRecv", "pattn_kernel", "attnorm_fused",
                        "void at::native::reduce_kernel<512, 1, ReduceOp<float, MeanOps<float>>>"],
    "softmax": [FLASH, "void flash::flash_fwd_splitkv_kernel<softmax>", ELT],
    "eager_pointwise": [SGEMM, "void at::native::reduce_kernel<512>",
                        "void at::native::<unnamed>::CatArrayBatchedCopy_vectorized<>", "broadcast_kernel",
                        "void foo<static_cast<int>(3)>"],
    "norm": [ELT, SGEMM, "normal_kernel_float"],
    "reduce": ["void cublasLt::splitKreduce_kernel<32, 16>", "ncclDevKernel_AllReduce_Sum_bf16_RING_LL", ELT],
    "backward": [FLASH, ELT, SGEMM, "void at::native::vectorized_layer_norm_kernel<float>"],
    # "lambda" in demangled PyTorch names is not LAMB
    "optimizer": ["void at::native::vectorized_elementwise_kernel<4, [lambda(float) (instance 1)]>", SGEMM,
                  "void fast_hadamard_transform_kernel<fast_hadamard_transform_kernel_traits<8, 12, c10::BFloat16>>"],
    "nccl": [ELT, SGEMM],
    "conv": ["void cudnn::ops::convertTensor_kernel<float, __half>", SGEMM, ELT, "nvjet_tst_192x192"],
    "layout_transform": [SGEMM, ELT],
}


@pytest.mark.parametrize("trait", sorted(POSITIVE))
def test_trait_positive_names(trait):
    m = classify_names(POSITIVE[trait])[trait]
    missed = [n for n, hit in zip(POSITIVE[trait], m) if not hit]
    assert not missed


@pytest.mark.parametrize("trait", sorted(NEGATIVE))
def test_trait_negative_names(trait):
    m = classify_names(NEGATIVE[trait])[trait]
    wrong = [n for n, hit in zip(NEGATIVE[trait], m) if hit]
    assert not wrong


def test_tf32_gemm_is_tensor_core_not_simt():
    r = run([TF32_XMMA, F32_XMMA], [(0, 30), (1, 10)])
    assert r.traits["tensor_core_gemm"].top_kernels == (TopKernel(TF32_XMMA, 1, 30),)
    assert r.traits["fp32_gemm_simt"].top_kernels == (TopKernel(F32_XMMA, 1, 10),)
    assert r.traits["fp32_gemm_simt"].share_pct == pytest.approx(25.0)


def test_attention_unfused_needs_softmax_gemm_and_no_fused():
    assert "attention_unfused" not in run([SGEMM, SOFTMAX, FLASH], [(0, 1), (1, 1), (2, 1)]).traits
    assert "attention_unfused" not in run([ELT, SOFTMAX], [(0, 1), (1, 1)]).traits
    bmm = "void at::native::bmm_out_kernel<float>"
    r = run([bmm, SOFTMAX], [(0, 7), (1, 3)])
    assert r.traits["attention_unfused"].total_ns == 3
    assert r.traits["attention_unfused"].share_pct == pytest.approx(30.0)


def test_autotune_redzone_and_fft_trials():
    fft, cg = "void fft2d_r2c_32x32<float, false, 1u, true>(float2*)", "volta_gcgemm_32x32_nt"
    r = run(["redzone_checker", fft, cg], [(0, 10), (1, 20), (2, 30)])
    a = r.traits["autotune"]
    assert (a.kernel_count, a.total_ns) == (3, 60)
    assert a.top_kernels == (TopKernel(cg, 1, 30), TopKernel(fft, 1, 20), TopKernel("redzone_checker", 1, 10))
    r = run([fft, cg], [(0, 20), (1, 30)])          # no redzone_checker: FFT conv is real work
    assert "autotune" not in r.traits and r.traits["conv"].total_ns == 20


# ---------------------------------------------------------------- workload

def test_training_from_backward_share():
    bwd = "void at::native::<unnamed>::layer_norm_backward_kernel<float>"
    r = run([SGEMM, bwd], [(0, 688), (1, 312)])
    assert r.workload == "training"
    assert "backward kernels 31.2 % of kernel time" in r.workload_evidence
    assert r.traits["backward"].share_pct == pytest.approx(31.2)


def test_training_threshold_is_five_percent_of_backward_plus_optimizer():
    """A `_foreach` kernel (an optimizer trait, no optimizer's name) in 1 of 3 steps (< half): 4.9 % of backward +
    optimizer time is inference, 5.0 % training (whatever the steps)."""
    bwd, opt = "flash_bwd_kernel", "multi_tensor_apply_kernel<BinaryOpScalarFunctor<float>>"
    r = run([SGEMM, bwd, opt], [(0, 951), (1, 25), (2, 24)], optimizer_steps=(1, 3))   # 4.9 %
    assert r.workload == "inference"
    assert r.workload_evidence[-1] == ("backward + optimizer kernels 4.9 % of kernel time (< 5 %), no autograd "
                                       "thread, optimizer kernels in 1 of 3 steps")
    r = run([SGEMM, bwd, opt], [(0, 950), (1, 25), (2, 25)], optimizer_steps=(1, 3))   # 5.0 %
    assert r.workload == "training"
    assert r.workload_evidence[:2] == ("backward kernels 2.5 % of kernel time",
                                       "optimizer kernels 2.5 % of kernel time")


def test_a_kernel_named_for_an_optimizer_is_training_at_any_share():
    """One fused-Adam kernel of 24 ns among 1,000 ns (2.4 %), in 1 of 4 steps (gradient accumulation over 4
    micro-steps), no backward name, no autograd thread: training (inference never runs Adam), its line first.
    A Hadamard transform (`hadamard` holds `adam`) is no optimizer: inference."""
    opt = "void at::native::multi_tensor_apply_kernel<at::native::FusedAdamMathFunctor<float, 4>>(int)"
    r = run([SGEMM, opt], [(0, 976), (1, 24)], optimizer_steps=(1, 4))
    assert r.workload == "training"
    assert r.workload_evidence == ("1 kernel(s) named for an optimizer step (Adam / SGD / LAMB): inference runs none",
                                   "optimizer kernels 2.4 % of kernel time")
    had = "void fast_hadamard_transform_kernel<fast_hadamard_transform_kernel_traits<8, 12, c10::BFloat16>>"
    r = run([SGEMM, had], [(0, 976), (1, 24)], optimizer_steps=(4, 4))
    assert r.workload == "inference" and "optimizer" not in r.traits


def test_a_foreach_kernel_in_half_the_steps_is_training():
    """A `_foreach` kernel (multi_tensor_apply, no optimizer's name: PyTorch's default foreach Adam launches only
    these) of 24 ns among 1,000 ns (2.4 %), no backward kernel, no autograd thread: in 10 of 20 steps (half):
    training, the per-step line first; in 9 of 20: inference (`_foreach` ops also run outside optimizers), the
    count in the last line."""
    foreach = ("void at::native::multi_tensor_apply_kernel<at::native::TensorListMetadata<2>, "
               "at::native::BinaryOpScalarFunctor<float, 2, 1, 1>, std::multiplies<float>, float>(T1, T2, T3...)")
    rows = [(0, 976), (1, 24)]
    r = run([SGEMM, foreach], rows, optimizer_steps=(10, 20))
    assert r.workload == "training"
    assert r.workload_evidence == ("optimizer kernels in 10 of 20 steps (≥ half: an optimizer step every "
                                   "iteration)", "optimizer kernels 2.4 % of kernel time")
    r = run([SGEMM, foreach], rows, optimizer_steps=(9, 20))
    assert r.workload == "inference"
    assert r.workload_evidence[-1].endswith("no autograd thread, optimizer kernels in 9 of 20 steps")


def test_without_steps_a_foreach_kernel_per_thousand_kernels_is_training():
    """No steps: 2 `_foreach` kernels among 2,000 kernels = 1 per 1,000: training; 1 among 2,000 (0.5 per
    1,000): inference. A window without any optimizer kernel stays inference."""
    foreach = "void at::native::multi_tensor_apply_kernel<TensorListMetadata<1>, UnaryOpFunctor<float>>(T1, T2)"
    r = run([SGEMM, foreach], [(0, 1_000)] * 1_998 + [(1, 10)] * 2)
    assert r.workload == "training"
    assert r.workload_evidence[0] == "2 optimizer kernel(s) among 2,000 kernels (≥ 1 per 1,000; no steps)"
    r = run([SGEMM, foreach], [(0, 1_000)] * 1_999 + [(1, 10)])
    assert r.workload == "inference"
    assert r.workload_evidence[-1].endswith("no autograd thread, 1 optimizer kernel(s) among 2,000 kernels")
    assert run([SGEMM], [(0, 1_000)] * 5, optimizer_steps=(0, 5)).workload == "inference"


def test_training_from_autograd_thread_and_inference_otherwise():
    r = run([FLASH], [(0, 5)], thread_names=["python3", "pt_autograd_0"])
    assert r.workload == "training" and any("pt_autograd_0" in e for e in r.workload_evidence)
    # the thread's name is quoted as a name (a code span), as every user name in a sentence is
    assert "autograd thread(s) `pt_autograd_0` (backward ran in this process)" in r.workload_evidence
    r = run([FLASH], [(0, 5)], thread_names=["python3", "pt_nccl_watchdg"])
    assert r.workload == "inference" and r.workload_evidence


# ---------------------------------------------------------------- stack

@pytest.mark.parametrize("kw,stack", [
    (dict(kernel_names=["void vllm::rms_norm_kernel<>", ELT]), "vllm"),
    (dict(kernel_names=[ELT], process_names=["vllm"]), "vllm"),
    (dict(kernel_names=["void vllm_custom::reshape_and_cache_flash_kernel<>"]), "vllm"),
    (dict(kernel_names=[ELT], thread_names=["sglang::schedul"]), "sglang"),
    (dict(kernel_names=["void sgl_kernel::fused_add_rmsnorm<>", ELT]), "sglang"),
    (dict(kernel_names=["void tensorrt_llm::kernels::topKStage1<>"]), "trtllm"),
    (dict(kernel_names=["xqa_kernel_dt_bf16_d_128_beam_1"]), "trtllm"),
    (dict(kernel_names=["sm80_xmma_fprop_implicit_gemm_f16f16_execute_kernel_trt"]), "tensorrt"),
    (dict(kernel_names=["foo"], nvtx_names=["/conv1/Conv"]), "tensorrt"),
    (dict(kernel_names=["foo"], process_names=["trtexec"]), "tensorrt"),
    (dict(kernel_names=["redzone_checker"]), "tensorflow"),
    (dict(kernel_names=["void Eigen::internal::EigenMetaKernel<>"]), "tensorflow"),
    (dict(kernel_names=["foo"], thread_names=["tf_Compute"]), "tensorflow"),
    (dict(kernel_names=["fusion_12"], process_names=["python"], thread_names=["xla_launcher"]), "jax"),
    (dict(kernel_names=["redzone_checker", "loop_add_fusion"], nvtx_names=["jax.jit(train_step)"]), "jax"),
    (dict(kernel_names=[ELT]), "pytorch"),
    (dict(kernel_names=["triton_poi_fused_add_0"]), "pytorch"),
    (dict(kernel_names=["saxpy(double *, double *)"], nvtx_names=["aten::mul, seq = 1"]), "pytorch"),
    (dict(kernel_names=["saxpy(double *, double *)"], process_names=["mpirun"]), ""),
])
def test_stack_detection(kw, stack):
    got, evidence = detect_stack(**kw)
    assert got == stack
    assert bool(evidence) == bool(stack)


def test_stack_in_result_uses_only_window_kernels():
    r = run([ELT, "void vllm::rms_norm_kernel<>"], [(0, 5)])       # the vllm kernel did not run in the window
    assert r.stack == "pytorch" and r.stack_evidence


# ---------------------------------------------------------------- real traces

def load_trace(name: str) -> dict:
    """Kernel names/durations of a real trace with plain SQL, plus GPU, NVTX, process and thread names (only
    of the processes that ran kernels)."""
    p = require_traces() / name / "trace.sqlite"
    assert p.is_file(), f"missing real trace {p}"
    con = sqlite3.connect(f"file:{p}?mode=ro&immutable=1", uri=True)
    try:
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        rows = con.execute("SELECT s.value, k.end - k.start, k.globalPid >> 24 FROM CUPTI_ACTIVITY_KIND_KERNEL k "
                           "JOIN StringIds s ON s.id = k.demangledName").fetchall()
        names = sorted({r[0] for r in rows})
        pos = {n: i for i, n in enumerate(names)}
        pids = ",".join(str(x) for x in sorted({r[2] for r in rows}))
        threads = [r[0] for r in con.execute(
            "SELECT DISTINCT s.value FROM ThreadNames t JOIN StringIds s ON s.id = t.nameId "
            f"WHERE t.globalTid >> 24 IN ({pids})")] if "ThreadNames" in tables else []
        procs = [r[0] for r in con.execute(f"SELECT name FROM PROCESSES WHERE globalPid >> 24 IN ({pids})")] \
            if "PROCESSES" in tables else []
        nvtx = [r[0] for r in con.execute(
            "SELECT DISTINCT COALESCE(n.text, s.value) FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = n.textId")
            if r[0]] if "NVTX_EVENTS" in tables else []
    finally:
        con.close()
    return dict(names=names, name_idx=np.array([pos[r[0]] for r in rows], np.int64),
                dur=np.array([r[1] for r in rows], np.int64), nvtx_names=nvtx,
                thread_names=threads, process_names=procs)


def real(name: str) -> KernelTraitsResult:
    return analyze_kernel_traits(**load_trace(name))


def test_real_23_fp32_gemm_on_a100():
    r = real("23_cs336_2p7b_a100_fp32_nvtx")
    g = r.traits["fp32_gemm_simt"]
    top_name, top_ns = g.top_kernels[0].name, g.top_kernels[0].total_ns
    assert top_name == "ampere_sgemm_128x64_tn"
    assert 100 * top_ns / r.total_kernel_ns > 80        # one non-tensor-core FP32 GEMM: ~88 % of kernel time
    assert 85 < g.share_pct < 95
    assert "tensor_core_gemm" not in r.traits
    assert (r.stack, r.workload) == ("pytorch", "inference")


def test_real_05_flash_attention_training():
    r = real("05_nsysai_mfu_2gpu_before")
    assert 40 < r.traits["attention_fused"].share_pct < 60
    assert 5 < r.traits["tensor_core_gemm"].share_pct < 20       # nvjet BF16 GEMMs
    assert "fp32_gemm_simt" not in r.traits and "attention_unfused" not in r.traits
    assert 25 < r.traits["eager_pointwise"].share_pct < 35
    assert 3 < r.traits["nccl"].share_pct < 7
    assert (r.workload, r.stack) == ("training", "pytorch")


def test_real_06_flash_attention_training():
    r = real("06_nsysai_mfu_2gpu_after")
    assert 40 < r.traits["attention_fused"].share_pct < 60
    assert (r.workload, r.stack) == ("training", "pytorch")


def test_real_10_titan_rtx_convs_on_cuda_cores():
    r = real("10_abacus_dnn_serving_titanrtx_r1")
    assert 80 < r.traits["conv"].share_pct < 92                  # SOURCE.md: 87 % convs on non-tensor-core kernels
    assert 65 < r.traits["half_simt"].share_pct < 80             # implicit/explicit_convolve_sgemm<__half>: FP16
    assert r.traits["fp32_gemm_simt"].share_pct < 10             # data on CUDA cores (FFT / complex GEMVs: ~5 %)
    assert r.traits["tensor_core_gemm"].share_pct < 5            # the few s884/s1688 cuDNN kernels
    assert "autotune" not in r.traits
    assert (r.workload, r.stack) == ("inference", "pytorch")


def test_real_12_gtx1650_tensorflow_autotuning():
    r = real("12_gartangh_keras_gtx1650")
    assert r.stack == "tensorflow"
    a = r.traits["autotune"]
    assert a.share_pct > 80                                      # redzone_checker + FFT/cgemm trials
    assert "redzone_checker" in [t.name for t in a.top_kernels]
    assert r.traits["layout_transform"].share_pct > 5
    assert "tensor_core_gemm" not in r.traits
    assert r.workload == "inference"


def test_real_16_tensorrt_tensor_core_convs():
    r = real("16_memfusion_tensorrt_rtx3090")
    assert r.stack == "tensorrt"
    assert r.traits["tensor_core_gemm"].share_pct > 90
    assert r.traits["conv"].share_pct > 90
    assert "fp32_gemm_simt" not in r.traits
    assert r.workload == "inference"


def test_real_01_unfused_attention():
    r = real("01_llama3_demo")
    assert r.traits["fp32_gemm_simt"].share_pct > 80
    assert r.traits["attention_unfused"].share_pct == pytest.approx(r.traits["softmax"].share_pct)
    assert 5 < r.traits["attention_unfused"].share_pct < 8


def test_real_24_laptop_ada_tiny_eager_pointwise():
    r = real("24_cs336_laptop_rtx5000ada_launch_bound")
    assert 60 < r.traits["fp32_gemm_simt"].share_pct < 75
    assert r.traits["tiny_eager_pointwise"].share_pct > 20
    assert r.traits["tiny_eager_pointwise"].p50_ns < 10_000


def test_real_14_v100_nvfuser():
    r = real("14_nvfuser_v100_nvtx_heavy")
    assert r.stack == "pytorch"
    assert sum(h.share_pct for h in r.traits.values()) < 1       # CudaCodeGen kernels carry no trait


def test_triton_attention_kernels_make_a_recognisable_model():
    """An SGLang-style decode capture: Triton attention (``_decode_grouped_att_m_fwd_kernel``) beside elementwise
    kernels and no GEMM in the window. It read workload "unknown" ("no GEMM, convolution, attention, softmax or
    normalization kernel"); the attention kernel is a model's: inference, with the fused-attention trait 30 of 40 ns."""
    r = run(["_decode_grouped_att_m_fwd_kernel", ELT], [(0, 30), (1, 10)])
    assert r.workload == "inference"
    assert r.traits["attention_fused"].share_pct == pytest.approx(75.0)


def test_an_xla_trace_is_unknown_not_inference():
    """XLA's fusions (`loop_add_fusion` 300 ns, `fusion_12` 100 ns) beside a cuBLAS GEMM (600 ns), no other stack's
    names: XLA fuses the backward pass into kernels named like the forward one's and runs no autograd thread, so no
    name tells training from inference: `unknown` (it said `inference`), the first line naming the XLA fusion with
    the most time. The stack is jax by the last stack rule (XLA-compiled kernel names and nothing else). The same
    kernels beside a PyTorch kernel (`at::native::…`: stack pytorch, whose backward kernels carry their names) stay
    inference; with an autograd thread, training."""
    gemm = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_kernel__5x_cublas"
    names = [gemm, "fusion_12", "loop_add_fusion"]
    rows = [(0, 600), (1, 100), (2, 300)]
    r = run(names, rows)
    assert (r.workload, r.stack) == ("unknown", "jax")
    assert r.workload_evidence[0] == ("XLA-compiled kernels (e.g. 'loop_add_fusion') never name forward or backward "
                                      "and XLA runs no autograd thread: nothing tells training from inference")
    assert run(names, rows, thread_names=["XlaLauncher"]).workload == "unknown"   # stack jax
    pt = names + ["void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>(int)"]
    r = run(pt, rows + [(3, 10)])
    assert (r.workload, r.stack) == ("inference", "pytorch")
    assert run(names, rows, thread_names=["pt_autograd_0"]).workload == "training"


# ---------------------------------------------------------------- training with generation (RL post-training)

VLLM_NORM = "void vllm::rms_norm_kernel<c10::BFloat16>"
ADAM = "void at::native::multi_tensor_apply_kernel<FusedAdamMathFunctor<float>>"
BWD = "flash_bwd_dq_dk_dv_kernel<Flash_bwd>"


def test_training_beside_a_serving_engines_kernels_is_training_with_generation():
    """An RL job's window: a vLLM norm kernel 100 ns (generation), a GEMM 600 ns, a backward kernel 250 ns and a
    fused Adam 50 ns (training): backward 25.0 % + optimizer 5.0 % ≥ 5 % → training; a vLLM kernel ran too (vLLM
    only generates) → `training with generation`, the first evidence line joins both. Stack: vllm (its rule matches
    the norm, named with `c10::`), and PyTorch's rule matches the Adam kernel (`at::native`), a name vLLM's rule does
    not match → `vllm + pytorch`, evidence of both."""
    r = run([VLLM_NORM, SGEMM, BWD, ADAM], [(0, 100), (1, 600), (2, 250), (3, 50)])
    assert r.workload == "training with generation"
    assert r.workload_evidence == (
        "backward kernels 25.0 % of kernel time; 1 vLLM kernel name(s), e.g. "
        "'void vllm::rms_norm_kernel<c10::BFloat16>' (a serving engine: it generates and runs no backward pass)",
        "optimizer kernels 5.0 % of kernel time")
    assert r.stack == "vllm + pytorch"
    assert len(r.stack_evidence) == 2 and "at::native::multi_tensor_apply_kernel" in r.stack_evidence[1]


def test_a_serving_engine_with_pytorch_named_kernels_only_of_its_own_is_vllm():
    """Training evidence (backward 25 %, no autograd thread) beside vLLM kernels, but the only PyTorch
    names are vLLM's own (`c10::BFloat16` in its template): the workload is `training with generation`, the stack
    stays `vllm` — no name outside vLLM's rule is PyTorch's."""
    r = run([VLLM_NORM, SGEMM, BWD], [(0, 100), (1, 650), (2, 250)])
    assert r.workload == "training with generation"
    assert r.stack == "vllm" and len(r.stack_evidence) == 1


def test_a_serving_engine_without_training_evidence_stays_inference_and_vllm():
    """vLLM serving: the vLLM norm, a GEMM and an `at::native` Adam-free elementwise kernel: no backward, no
    optimizer → inference; PyTorch's kernel names under vLLM are vLLM's PyTorch, the stack stays `vllm`."""
    r = run([VLLM_NORM, SGEMM, ELT], [(0, 100), (1, 800), (2, 100)])
    assert r.workload == "inference" and r.stack == "vllm"


def test_training_without_a_serving_engine_stays_training():
    """The same training kernels with no serving engine's kernel: `training`, stack `pytorch`."""
    r = run([SGEMM, BWD, ADAM], [(0, 700), (1, 250), (2, 50)])
    assert r.workload == "training" and r.stack == "pytorch"
