"""Kernel categories: classification rules, presets, user rules, and the non-overlapped time split."""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Sequence, Tuple, TypeVar

import numpy as np
import pytest
from synth import TraceBuilder

from nsys_llm_explainer.analyses.kernels import stack, traits
from nsys_llm_explainer.analyses.kernels.categories import CategoryResult, CategoryShare, analyze_categories, classify
from nsys_llm_explainer.analyses.kernels.category_split import nonoverlap_split
from nsys_llm_explainer.config.categories import CATEGORY_NAMES, PRESET_DIR, PRESETS, builtin_preset, load_rules
from nsys_llm_explainer.errors import InputError
from nsys_llm_explainer.pipeline import load_model

GEMM = "nvjet_tst_192x192_64x4_2x1_v_bz_coopB_bias_TNN"
ATTN = "void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<(int)128, (int)128, (int)64, (int)4, (bool)0, " \
       "(bool)0, cutlass::bfloat16_t, Flash_kernel_traits<(int)128, (int)128, (int)64, (int)4, " \
       "cutlass::bfloat16_t>>, (bool)0, (bool)1>(Flash_fwd_params)"
NORM = "void vllm::rms_norm_kernel<c10::BFloat16, (int)8>(c10::BFloat16 *, const c10::BFloat16 *, float, int)"
NCCL = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<(unsigned long)4096>)"
CAT = {c: i for i, c in enumerate(CATEGORY_NAMES)}
US = 1_000

KernelSpec = Tuple[int, int, str, int]   # start, end, name, device


def _model(tmp_path: Path, kernels: Sequence[KernelSpec], memcpy: Sequence[Tuple[int, int, int]] = (),
           fname: str = "t.sqlite"):
    b = TraceBuilder()
    b.process(100, "python3")
    b.thread(100, 100, "python3")
    for d in sorted({k[3] for k in kernels} | {m[2] for m in memcpy}):
        b.gpu(d)
    for i, (s, e, name, dev) in enumerate(kernels):
        b.kernel(s, e, pid=100, device=dev, stream=7 + i, name=name)
    for s, e, dev in memcpy:
        b.memcpy(s, e, pid=100, bytes=64, device=dev)
    return load_model(b.write(str(tmp_path / fname)))


S = TypeVar("S", bound=CategoryShare)


def _row(rows: Sequence[S], cat: str) -> S:
    """The row of ``cat`` (overall rows are :class:`CategoryRow`, device/phase rows :class:`CategoryShare`)."""
    found = [r for r in rows if r.category == cat]
    assert len(found) == 1, (cat, rows)
    return found[0]


# ---------------------------------------------------------------------------------------------------------
# non-overlapped split


def test_nonoverlap_two_overlapping_categories() -> None:
    # [0,10) gemm, [5,15) attention: gemm 5 + 2.5, attention 2.5 + 5 → 7.5 / 7.5; the odd ns goes to the
    # lowest category index (gemm) → 8 / 7; Σ = 15 = busy.
    out, busy = nonoverlap_split(np.array([0, 5]), np.array([10, 15]),
                                 np.array([CAT["gemm"], CAT["attention"]]), len(CATEGORY_NAMES))
    assert busy == 15
    assert out[CAT["gemm"]] == 8 and out[CAT["attention"]] == 7
    assert int(out.sum()) == busy


def test_nonoverlap_same_category_counts_once_and_gaps_excluded() -> None:
    # gemm [0,10) and [2,6) (same category: one share), attention [4,7), idle [10,20), norm [20,23)
    # segments: [0,4) gemm 4; [4,6) gemm+attn 1/1; [6,7) gemm+attn 0.5/0.5; [7,10) gemm 3; [20,23) norm 3
    # gemm = 4 + 1 + 0.5 + 3 = 8.5, attention = 1 + 0.5 = 1.5, norm = 3 → floors 8/1/3 = 12, busy 13:
    # remainders .5/.5 tie → lowest index (gemm) gets the ns → 9 / 1 / 3.
    s = np.array([0, 2, 4, 20])
    e = np.array([10, 6, 7, 23])
    c = np.array([CAT["gemm"], CAT["gemm"], CAT["attention"], CAT["norm"]])
    out, busy = nonoverlap_split(s, e, c, len(CATEGORY_NAMES))
    assert busy == 13
    assert (out[CAT["gemm"]], out[CAT["attention"]], out[CAT["norm"]]) == (9, 1, 3)


def test_nonoverlap_three_way_largest_remainder() -> None:
    # [0,10) a, [0,10) b, [0,4) c (c has index 2 but the largest remainder):
    # [0,4): 3 cats → 4/3 each; [4,10): 2 cats → 3 each. a = b = 13/3 = 4.333, c = 4/3 = 1.333
    # floors 4 + 4 + 1 = 9, busy 10 → one ns to the largest fractional part: all equal (.333) → index 0.
    out, busy = nonoverlap_split(np.array([0, 0, 0]), np.array([10, 10, 4]), np.array([0, 1, 2]), 3)
    assert busy == 10
    assert out.tolist() == [5, 4, 1]
    # a wins a larger remainder: [0,5) a,b,c; [5,8) a,b → a = b = 5/3 + 1.5 = 3.1667, c = 1.6667
    out, busy = nonoverlap_split(np.array([0, 0, 0]), np.array([8, 8, 5]), np.array([0, 1, 2]), 3)
    assert busy == 8
    assert out.tolist() == [3, 3, 2]


def test_nonoverlap_unsorted_input_and_zero_length() -> None:
    out, busy = nonoverlap_split(np.array([5, 0, 7]), np.array([15, 10, 7]), np.array([1, 0, 3]), 4)
    assert busy == 15 and out.tolist() == [8, 7, 0, 0]
    out, busy = nonoverlap_split(np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.int64), 4)
    assert busy == 0 and out.tolist() == [0, 0, 0, 0]


def test_nonoverlap_random_identity() -> None:
    rng = np.random.default_rng(7)
    for _ in range(20):
        n = int(rng.integers(1, 400))
        s = np.sort(rng.integers(0, 10_000, n))
        e = s + rng.integers(0, 300, n)
        c = rng.integers(0, 14, n)
        out, busy = nonoverlap_split(s, e, c, 14)
        # busy = union length, computed by brute force on the integer grid
        grid = np.zeros(10_400, bool)
        for a, b in zip(s.tolist(), e.tolist()):
            grid[a:b] = True
        assert busy == int(grid.sum())
        assert int(out.sum()) == busy
        # each category's share lies between (its own union)/14 and its own union length
        for k in range(14):
            own = np.zeros(10_400, bool)
            for a, b in zip(s[c == k].tolist(), e[c == k].tolist()):
                own[a:b] = True
            assert out[k] <= own.sum() + 1
            assert out[k] >= own.sum() // 14 - 1


# ---------------------------------------------------------------------------------------------------------
# classification

REAL_NAMES: List[Tuple[str, str]] = [
    # from the shared traces
    ("ampere_sgemm_128x64_nn", "gemm"),
    (GEMM, "gemm"),
    (ATTN, "attention"),
    ("ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<(unsigned long)4096>)", "nccl"),
    ("void at::native::<unnamed>::vectorized_layer_norm_kernel<float, float, (bool)0>(int, T2, const T1 *, "
     "const T1 *, const T1 *, T2 *, T2 *, T1 *)", "norm"),
    ("void at::native::vectorized_elementwise_kernel<(int)8, at::native::GeluCUDAKernelImpl(at::TensorIterato"
     "rBase &, at::native::GeluType)::[lambda() (instance 1)]>(int, T2, T3)", "activation"),
    ("void at::native::elementwise_kernel<(int)128, (int)4, void at::native::gpu_kernel_impl_nocast<at::nati"
     "ve::direct_copy_kernel_cuda(at::TensorIteratorBase &)>(int, T3)", "elementwise"),
    ("void at::native::reduce_kernel<(int)512, (int)1, at::native::ReduceOp<float, at::native::MeanOps<float,"
     " float, float, float>, unsigned int, float, (int)4, (int)4>>(T3)", "reduction"),
    ("void at::native::<unnamed>::distribution_elementwise_grid_stride_kernel<float, (int)4, void at::native:"
     ":templates::cuda::normal_and_transform<float, float>>(long, at::PhiloxCudaState, T3, T4)",
     "elementwise"),
    ("void at::native::<unnamed>::CatArrayBatchedCopy_vectorized<at::native::<unnamed>::OpaqueType<(unsigned "
     "int)2>, unsigned int, (int)1, (int)128, (int)1, (int)16, (int)8>(char *)", "elementwise"),
    ("void at::native::vectorized_elementwise_kernel<(int)4, at::native::FillFunctor<float>, std::array<char "
     "*, (unsigned long)1>>(int, T2, T3)", "elementwise"),
    ("sm80_xmma_fprop_implicit_gemm_f16f16_f16f16_f16_nhwckrsc_nhwc_tilesize128x128x32_stage4_warpsize2x2x1_g1"
     "_tensor16x8x16_t1r3s3_aACCESS_execute_kernel_trt", "gemm"),
    ("volta_fp16_scudnn_fp16_128x64_relu_interior_nn_v1", "gemm"),
    ("void gemv2T_kernel_val<int, int, float2, float2, float2, 128, 16, 2, 2, false, false>(float2)", "gemm"),
    ("CudaCodeGen::kernel1(CudaCodeGen::Tensor<CudaCodeGen::__bfloat, (int)2, (int)2>)", "triton"),
    ("saxpy(double *, double *, double *, double, int)", "elementwise"),
    # reductions and pooling (real traces 07, 10, 16, 23): their own categories, not `elementwise`
    ("void at::native::reduce_kernel<(int)512, (int)1, at::native::ReduceOp<float, at::native::MaxOps<float>, "
     "unsigned int, float, (int)4>>(T3)", "reduction"),
    ("void tensorflow::functor::ColumnReduceKernel<float const*, float*, cub::Sum>(float const*, float*, int, int)",
     "reduction"),
    ("void Eigen::internal::FullReductionKernel<256, 128>(Eigen::internal::SumReducer<float>)", "reduction"),
    ("void at::native::(anonymous namespace)::max_pool_forward_nchw<c10::Half, c10::Half>(int, c10::Half const*)",
     "pooling"),
    ("void at::native::(anonymous namespace)::adaptive_average_pool<float>(float *, float *, int, int)", "pooling"),
    ("sm50_xmma_pooling_coalescedC_NHWC_kMAX_3_False_execute_kernel_trt", "pooling"),
    ("void cudnn::detail::pooling_fw_4d_kernel<float, float, cudnn::detail::maxpooling_func<float>>()", "pooling"),
    ("void MaxPoolForward<float>(int, float const*, int, int, int, int, int, int, int, int, float*)", "pooling"),
    # TensorRT's reformat copy: `…ArrayNWithReducedDivisors…` in its arguments is no reduction
    ("void genericReformat::copyVectorizedKernel<double, __half, __half, (bool)1, (bool)0, (int)1>(unsigned int, "
     "genericReformat::ArrayNWithReducedDivisors<T6>)", "elementwise"),
    # vLLM / SGLang / FlashInfer / TRT-LLM / Triton names
    ("void at::native::reduce_kernel<(int)512, (int)1, at::native::ReduceOp<float, "
     "at::native::ArgMaxOps<float>, unsigned int, long, (int)4, (int)4>>(T3)", "sampling"),
    ("void at::native::(anonymous namespace)::cunn_SoftMaxForward<(int)4, float, float, float>"
     "(T4 *, const T2 *, int)", "softmax"),
    ("void at::native::sbtopk::gatherTopK<float, unsigned int, (int)2, (bool)0>"
     "(at::cuda::detail::TensorInfo)",
     "sampling"),
    ("void flashinfer::sampling::TopKTopPSamplingFromProbKernel<1024u, (cub::BlockScanAlgorithm)2>(float *)",
     "sampling"),
    (NORM, "norm"),
    ("void vllm::fused_add_rms_norm_kernel<c10::BFloat16, (int)8>(c10::BFloat16 *, c10::BFloat16 *)", "norm"),
    ("void flashinfer::norm::FusedAddRMSNormKernel<8u, __nv_bfloat16>(__nv_bfloat16 *, __nv_bfloat16 *)",
     "norm"),
    # PyTorch's group norm: its statistics and its fused-parameter kernels (a UNet's GroupNorm)
    ("void at::native::(anonymous namespace)::RowwiseMomentsCUDAKernel<float, float>(long, float, const T1 *, T2 *, "
     "T2 *)", "norm"),
    ("void at::native::(anonymous namespace)::ComputeFusedParamsCUDAKernel<float>(long, long, long, const T1 *)",
     "norm"),
    # expert parallelism's token exchange: communication, not MoE compute; DeepEP's layout stays moe
    ("void deep_ep::intranode::dispatch<8, 768, 8192>(int4*, float*, int*)", "all_to_all"),
    ("void deep_ep::internode_ll::combine<false>(void*, void const*)", "all_to_all"),
    ("void deep_ep::layout::get_dispatch_layout<256, 32, 8>(long const*, int*)", "moe"),
    ("triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_1", "norm"),
    ("void vllm::act_and_mul_kernel<c10::BFloat16, &vllm::silu_kernel<c10::BFloat16>, (bool)1>"
     "(c10::BFloat16 *)",
     "activation"),
    ("void flashinfer::activation::act_and_mul_kernel<__nv_bfloat16, &silu>(__nv_bfloat16 *)", "activation"),
    ("triton_poi_fused_mul_silu_0", "activation"),
    ("void vllm::rotary_embedding_kernel<c10::BFloat16, (bool)1>(const long *, c10::BFloat16 *)", "rope"),
    ("void flashinfer::BatchQKApplyRotaryPosIdsCosSinCacheKernel<true, 128u, 8u, 16u, __nv_bfloat16>(int *)",
     "rope"),
    ("void flashinfer::BatchPrefillWithPagedKVCacheKernel<(flashinfer::PosEncodingMode)1, __nv_bfloat16>"
     "(int)",
     "attention"),
    ("void vllm::reshape_and_cache_flash_kernel<__nv_bfloat16, __nv_bfloat16, (vllm::Fp8KVCacheDataType)0>"
     "(int)",
     "attention"),
    ("void vllm::paged_attention_v1_kernel<unsigned short, unsigned short, 128, 16, 128>(unsigned short *)",
     "attention"),
    ("kernel_unified_attention_2d", "attention"),
    ("_fwd_grouped_kernel_stage1", "attention"),
    ("fmha_v2_flash_attention_bf16_64_128_S_q_paged_kv_128_sm90_kernel", "attention"),
    ("void tensorrt_llm::kernels::mmha::masked_multihead_attention_kernel<__nv_bfloat16, 128>(int)",
     "attention"),
    ("void vllm::cross_device_reduce_1stage<__nv_bfloat16, (int)2>(vllm::RankData *, vllm::RankSignals)",
     "custom_allreduce"),
    ("void sglang::cross_device_reduce_2stage<__nv_bfloat16, (int)8>(sglang::RankData *)",
     "custom_allreduce"),
    ("void flashinfer::trtllm_allreduce_fusion::allreduce_fusion_kernel_oneshot_lamport<__nv_bfloat16, 8>"
     "(int)",
     "custom_allreduce"),
    ("void tensorrt_llm::kernels::oneShotAllReduceKernel<__nv_bfloat16, (int)8>(AllReduceParams)",
     "custom_allreduce"),
    (NCCL, "nccl"),
    ("ncclKernel_AllGather_RING_LL_Sum_int8_t(ncclDevComm *, unsigned long, ncclWork *)", "nccl"),
    ("fused_moe_kernel", "moe"),
    ("void vllm::moe::moe_align_block_size_kernel<int>(int *, int *)", "moe"),
    ("void vllm::moe::topkGatingSoftmax<(int)8, (int)128, (int)4, (int)16, int>(const float *)", "moe"),
    ("void vllm::scaled_fp8_quant_kernel<c10::BFloat16, c10::Float8_e4m3fn>(c10::Float8_e4m3fn *)",
     "quantize"),
    ("_per_token_group_quant_fp8", "quantize"),
    ("void cutlass::device_kernel<vllm::cutlass_3x_gemm<cutlass::float_e4m3_t, cutlass::bfloat16_t>>(Params)",
     "gemm"),
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_"
     "kernel__5x_cublas", "gemm"),
    ("void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x4_tn_align8>(Params)",
     "gemm"),
    ("void marlin::Marlin<(vllm::ScalarTypeId)5, 256, 1, 8, 8, 8>(const int4 *, const int4 *)", "gemm"),
    ("void at::native::index_elementwise_kernel<(int)128, (int)4>(long, T3)", "elementwise"),
    ("void at::native::(anonymous namespace)::indexSelectLargeIndex<c10::BFloat16, long, unsigned int>(int)",
     "elementwise"),
    ("triton_per_fused_sum_3", "reduction"),
    ("_compute_slot_mapping_kernel", "triton"),
    ("[CUDA memcpy Host-to-Device]", "memcpy"),
    ("[CUDA memset]", "memcpy"),
    ("_ZN5flash15flash_fwd_kernelI23Flash_fwd_kernel_traitsEEvv", "attention"),
    ("redzone_checker", "other"),
]


def test_classify_real_names() -> None:
    rules = load_rules("generic")
    names = [n for n, _ in REAL_NAMES]
    got = classify(names, rules)
    wrong = [(n, rules.categories[int(g)], want) for (n, want), g in zip(REAL_NAMES, got)
             if rules.categories[int(g)] != want]
    assert wrong == []


def test_fwd_alone_does_not_make_a_gemm_attention() -> None:
    """The attention rule's ``_fwd_`` (Triton's `_attn_fwd_…`, `_fwd_kernel`) matched first for a GEMM named after its
    pass: `triton_gemm_fwd_bwd_kernel` and `_matmul_fwd_kernel` were counted as attention. ``_fwd_`` now claims only
    names that say neither `gemm` nor `matmul` (docs/FINDINGS.md, "Kernel categories"): those two are `gemm` (their
    GEMM words, by the gemm rule), `_attn_fwd_kernel` stays attention (`attn`), `_fwd_kernel` too (``_fwd_`` alone),
    FlashAttention's `flash_fwd_kernel` with `cutlass::gemm` in its template too (`flash` matches first), and a
    norm's `layer_norm_fwd_kernel` stays `norm` (its rule comes first)."""
    rules = load_rules("generic")
    want = {"triton_gemm_fwd_bwd_kernel": "gemm", "_matmul_fwd_kernel": "gemm", "_attn_fwd_kernel": "attention",
            "_fwd_kernel": "attention", "void flash::flash_fwd_kernel<cutlass::gemm::GemmShape<128>>()": "attention",
            "layer_norm_fwd_kernel": "norm"}
    got = classify(list(want), rules)
    assert {n: rules.categories[int(g)] for n, g in zip(want, got)} == want


SOFTMAX_EAGER = ("void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, "
                 "at::native::(anonymous namespace)::LogSoftMaxForwardEpilogue>(T4 *, const T2 *, int)")
SOFTMAX_WARP = ("void <unnamed>::softmax_warp_forward<float, float, float, (int)11, (bool)0, (bool)0>(T2 *, "
                "const T1 *, int, int, int, const bool *, int, bool)")
MTA = "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::"
#: (name, category under the generic preset, under the vLLM preset): docs/FINDINGS.md "Kernel categories", the rules
#: for softmax, Inductor's kernels, the optimizer step and XLA's fusions
NAME_RULES: List[Tuple[str, str, str]] = [
    # a softmax name says not what it normalises: `softmax`; under an engine preset PyTorch's large-row softmax
    # (cunn_SoftMax…, rows > 1024: the vocabulary) is the sampler's, a warp softmax (≤ 1024: a router) is not
    (SOFTMAX_EAGER, "softmax", "sampling"),
    (SOFTMAX_WARP, "softmax", "softmax"),
    ("triton_per_fused__softmax_3", "softmax", "softmax"),
    ("triton_red_fused__log_softmax_5", "softmax", "softmax"),
    ("void vllm::moe::topk_softmax<8, 8, 4, 64>(const float*, const bool*, float*, int*, int*, int)", "moe", "moe"),
    ("void flashinfer::sampling::OnlineSoftmaxFusedKernel<true, 1024u>(float *)", "sampling", "sampling"),
    # Inductor: the fused ops' part where they name one, else elementwise (pointwise / reduction)
    ("triton_poi_fused_add_mul_0", "elementwise", "elementwise"),
    ("triton_poi_fused_cat_1", "elementwise", "elementwise"),
    ("triton_red_fused__to_copy_mean_pow_0", "reduction", "reduction"),
    ("triton_per_fused_sum_3", "reduction", "reduction"),
    ("triton_poi_fused_mul_silu_0", "activation", "activation"),
    ("triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_1", "norm", "norm"),
    ("triton_tem_fused_addmm_0", "gemm", "gemm"),
    ("triton_tem_fused_mm_1", "gemm", "gemm"),
    # the optimizer step: foreach (multi_tensor_apply) kernels, also a foreach norm (gradient clipping)
    (MTA + "TensorListMetadata<(int)4>, at::native::(anonymous namespace)::FusedAdamMathFunctor<float, (int)4>>(T1)",
     "optimizer", "optimizer"),
    (MTA + "TensorListMetadata<(int)1>, at::native::(anonymous namespace)::LpNormFunctor<float, 1, float>>(T1)",
     "optimizer", "optimizer"),
    (MTA + "TensorListMetadata<(int)1>, at::native::(anonymous namespace)::BinaryOpScalarFunctor<float>>(T1)",
     "optimizer", "optimizer"),
    ("void multi_tensor_apply_kernel<TensorListMetadata<4>, AdamFunctor<float, float, float>>(long, int *)",
     "optimizer", "optimizer"),
    ("void fast_hadamard_transform_kernel<128>(HadamardParamsBase)", "other", "other"),
    # XLA: fusions by kind (loop: elementwise, input: reduction-rooted) or one wrapped op: elementwise unless the
    # name says a part; XLA's GEMM fusions and cuBLAS calls are GEMMs
    ("loop_add_fusion", "elementwise", "elementwise"),
    ("loop_exponential_fusion", "elementwise", "elementwise"),
    ("input_reduce_fusion_1", "elementwise", "elementwise"),
    ("fusion_12", "elementwise", "elementwise"),
    ("fusion", "elementwise", "elementwise"),
    ("wrapped_slice", "elementwise", "elementwise"),
    ("wrapped_exponential", "elementwise", "elementwise"),
    ("wrapped_tanh", "activation", "activation"),
    ("gemm_fusion_dot_3", "gemm", "gemm"),
    ("triton_gemm_dot_1", "gemm", "gemm"),
    ("triton_softmax_2", "softmax", "softmax"),
    ("allreduce_fusion_kernel_oneshot_lamport", "custom_allreduce", "custom_allreduce"),
]


def test_softmax_inductor_optimizer_and_xla_names() -> None:
    """Each name of :data:`NAME_RULES` lands where the written rule puts it. Before: every softmax was `sampling`
    (an Inductor attention softmax read "sampling 11 %"), `triton_poi_fused_add_mul_0` was `triton` while
    `triton_red_fused__to_copy_mean_pow_0` was `elementwise`, `multi_tensor_apply_kernel` was `elementwise` (or `norm`
    for LpNorm), `loop_add_fusion` / `fusion_12` / `wrapped_slice` were `other` and `loop_exponential_fusion`
    `sampling`; `triton_tem_fused_addmm_0` was `triton` while `triton_tem_fused_mm_1` was `gemm`."""
    generic, vllm = load_rules("generic"), load_rules("vllm")
    got = [(n, generic.categories[int(g)], vllm.categories[int(v)])
           for n, g, v in zip([r[0] for r in NAME_RULES], classify([r[0] for r in NAME_RULES], generic),
                              classify([r[0] for r in NAME_RULES], vllm))]
    assert [g for g in got if g not in NAME_RULES] == []


def test_engine_presets_take_the_eager_softmax_as_the_samplers() -> None:
    """SGLang and TRT-LLM read PyTorch's large-row softmax as the sampler's, as vLLM does; the generic preset not."""
    for preset, want in (("generic", "softmax"), ("vllm", "sampling"), ("sglang", "sampling"), ("trtllm", "sampling")):
        r = load_rules(preset)
        assert r.categories[int(classify([SOFTMAX_EAGER], r)[0])] == want, preset


def test_category_rules_shared_with_traits() -> None:
    """The generic preset's optimizer and XLA rules are the kernel traits' regexes (one rule each: the `optimizer`
    category holds the kernels the training workload reads, the XLA fusions the ones that make it unknown)."""
    rules = builtin_preset("generic").rules
    assert [rx for rx, c in rules if c == "optimizer"] == [traits._RX["optimizer"].pattern]
    assert (stack.XLA_FUSION, "elementwise") in rules


def test_category_names_and_presets_load() -> None:
    assert CATEGORY_NAMES[0] == "gemm" and CATEGORY_NAMES[-1] == "other"
    assert len(CATEGORY_NAMES) == len(set(CATEGORY_NAMES)) == 19
    for p in PRESETS:
        data = json.loads((PRESET_DIR / f"categories_{p}.json").read_text())
        assert data["name"] == p
        for rx, cat in builtin_preset(p).rules:
            assert cat in CATEGORY_NAMES, (p, rx, cat)
    # engine presets extend generic: their own rules first, then generic's
    generic = builtin_preset("generic").rules
    vllm = builtin_preset("vllm").rules
    assert vllm[-len(generic):] == generic and len(vllm) > len(generic)


def test_engine_preset_rules() -> None:
    vllm, sglang, trt = load_rules("vllm"), load_rules("sglang"), load_rules("trtllm")
    c = vllm.categories
    assert c[int(classify(["_compute_slot_mapping_kernel"], vllm)[0])] == "elementwise"
    assert c[int(classify(["create_flashinfer_kv_indices_triton"], load_rules("generic"))[0])] == "triton"
    assert c[int(classify(["create_flashinfer_kv_indices_triton"], sglang)[0])] == "attention"
    rope = "void tensorrt_llm::kernels::applyBiasRopeUpdateKVCacheV2<__nv_bfloat16, 128>(QKVParams)"
    assert c[int(classify([rope], load_rules("generic"))[0])] == "attention"
    assert c[int(classify([rope], trt)[0])] == "rope"
    # NCCL all-reduce stays NCCL under the TRT-LLM preset's all-reduce rule
    assert c[int(classify([NCCL], trt)[0])] == "nccl"


# ---------------------------------------------------------------------------------------------------------
# user rules


def test_user_rules_prepend_and_replace(tmp_path: Path) -> None:
    f = tmp_path / "cats.json"
    f.write_text(json.dumps({"rules": [["nvjet", "lm_head"], ["rms_norm", "attention"]]}))
    r = load_rules("generic", str(f))
    assert r.categories[: len(CATEGORY_NAMES)] == CATEGORY_NAMES and r.categories[-1] == "lm_head"
    got = [r.categories[int(i)] for i in classify([GEMM, NORM, NCCL, "mystery"], r)]
    assert got == ["lm_head", "attention", "nccl", "other"]
    f.write_text(json.dumps({"rules": [["nccl", "comm"]], "replace": True}))
    r = load_rules("vllm", str(f))
    assert r.replace and r.preset == "custom" and r.rules == (("nccl", "comm"),)
    got = [r.categories[int(i)] for i in classify([GEMM, NCCL], r)]
    assert got == ["other", "comm"]


def test_user_rules_yaml(tmp_path: Path) -> None:
    pytest.importorskip("yaml")
    f = tmp_path / "cats.yaml"
    f.write_text("rules:\n  - ['flash', 'fa']\nreplace: false\n")
    r = load_rules(None, str(f))
    assert r.categories[int(classify([ATTN], r)[0])] == "fa"


@pytest.mark.parametrize("content", [
    "{not json",
    json.dumps({"rules": "x"}),
    json.dumps({"nope": []}),
    json.dumps({"rules": [["(unclosed", "gemm"]]}),
    json.dumps({"rules": [["a", "b", "c"]]}),
    json.dumps({"rules": [["a", ""]]}),
    json.dumps({"rules": [], "replace": "yes"}),
])
def test_user_rules_bad_file(tmp_path: Path, content: str) -> None:
    f = tmp_path / "bad.json"
    f.write_text(content)
    with pytest.raises(InputError) as ei:
        load_rules(None, str(f))
    assert "\n" not in str(ei.value) and str(f) in str(ei.value)


def test_bad_preset_and_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="unknown categories preset"):
        load_rules("tgi")
    with pytest.raises(InputError, match="cannot read"):
        load_rules(None, str(tmp_path / "missing.json"))


# ---------------------------------------------------------------------------------------------------------
# analysis on synthetic traces


def test_analyze_two_devices_and_phases(tmp_path: Path) -> None:
    ks = [
        (1000, 1010, GEMM, 0),   # device 0: gemm [0,10) + attention [5,15) (relative to 1000)
        (1005, 1015, ATTN, 0),
        (1020, 1030, NCCL, 0),   # nccl alone
        (2000, 2007, NORM, 1),   # device 1: norm [0,7) + gemm [0,7): 3.5 / 3.5 → 4 (gemm) / 3 (norm)
        (2000, 2007, GEMM, 1),
        (2010, 2013, "mystery_kernel(int)", 1),
    ]
    m = _model(tmp_path, ks)
    order = np.argsort(m.kernels.start, kind="stable")
    assert m.kernels.start[order].tolist() == sorted(k[0] for k in ks)
    # phase per kernel row (model order is by start): device 0 → 0 (prefill), device 1 → 1, "mystery" → -1
    dev = m.kernels.device
    names = [m.kernels.names[i] for i in m.kernels.name_idx]
    phase = np.where(dev == 0, 0, 1)
    phase[[i for i, n in enumerate(names) if n.startswith("mystery")]] = -1
    r = analyze_categories(m, load_rules("generic"), kernel_phase=phase, phase_names=["prefill", "decode"])
    assert isinstance(r, CategoryResult) and r.available
    assert r.preset == "generic" and r.kernel_count == 6
    assert r.total_kernel_ns == 10 + 10 + 10 + 7 + 7 + 3
    assert r.busy_ns == 25 + 10
    assert r.other_ns == 3 and r.other_pct == pytest.approx(100 * 3 / 47)
    g = _row(r.overall, "gemm")
    assert (g.count, g.total_ns, g.nonoverlap_ns) == (2, 17, 8 + 4)
    assert g.pct == pytest.approx(100 * 17 / 47) and g.nonoverlap_pct == pytest.approx(100 * 12 / 35)
    assert _row(r.overall, "attention").nonoverlap_ns == 7
    assert _row(r.overall, "norm").nonoverlap_ns == 3
    assert _row(r.overall, "nccl").nonoverlap_ns == 10
    assert [t.name for t in _row(r.overall, "other").top_kernels] == ["mystery_kernel(int)"]
    assert [t.name for t in r.other_top_kernels] == ["mystery_kernel(int)"]
    d0, d1 = r.devices
    assert (d0.device_id, d0.busy_ns, d0.total_kernel_ns) == (0, 25, 30)
    assert (d1.device_id, d1.busy_ns, d1.total_kernel_ns) == (1, 10, 17)
    for d in r.devices:
        assert sum(c.nonoverlap_ns for c in d.categories) == d.busy_ns
    assert [c.category for c in d0.categories] == ["nccl", "gemm", "attention"]
    assert _row(d1.categories, "gemm").nonoverlap_ns == 4
    assert _row(d1.categories, "norm").nonoverlap_ns == 3
    # phases
    assert [(p.phase, p.phase_index) for p in r.phases] == [("prefill", 0), ("decode", 1), (None, -1)]
    pre, dec, none = r.phases
    assert (pre.busy_ns, pre.total_kernel_ns, pre.kernel_count) == (25, 30, 3)
    assert _row(pre.categories, "gemm").nonoverlap_ns == 8
    assert (dec.busy_ns, dec.total_kernel_ns) == (7, 14)
    assert _row(dec.categories, "gemm").pct == 50.0
    assert (none.busy_ns, [c.category for c in none.categories]) == (3, ["other"])
    # category per kernel name (not serialized), read for each kernel row
    cats = [r.categories[int(r.name_category[i])] for i in m.kernels.name_idx]
    expect = {GEMM: "gemm", ATTN: "attention", NCCL: "nccl", NORM: "norm"}
    assert cats == [expect.get(n, "other") for n in names]
    d = r.to_dict()
    json.dumps(d)
    assert set(d) >= {"preset", "preset_reason", "other_ns", "other_pct", "overall", "devices", "phases"}
    assert "name_category" not in d


def test_analyze_autodetects_engine(tmp_path: Path) -> None:
    m = _model(tmp_path, [
        (0, 100, NORM, 0),                                       # vllm:: — 100 ns
        (200, 250, "void sglang::cross_device_reduce_1stage<float, 2>(int)", 0),   # sglang:: — 50 ns
        (300, 1000, GEMM, 0),
        (1100, 1110, "_compute_slot_mapping_kernel", 0),         # vllm preset rule → elementwise
    ])
    r = analyze_categories(m)
    assert r.preset == "vllm"
    assert r.detect_pct["vllm"] == pytest.approx(100 * 110 / 860)
    assert r.detect_pct["sglang"] == pytest.approx(100 * 50 / 860)
    assert r.detect_pct["trtllm"] == 0.0 and "auto" in r.preset_reason
    # the shares in words through the one percentage formatter (one decimal): 110 / 860 = 12.79 %, 50 / 860 = 5.81 %
    assert r.preset_reason == ("auto: vllm kernel names cover the most kernel time (vllm 12.8 %, sglang 5.8 %, "
                               "trtllm 0.0 %)")
    assert _row(r.overall, "elementwise").total_ns == 10
    # nothing engine-specific → generic; an explicit preset is kept as requested
    m2 = _model(tmp_path, [(0, 10, GEMM, 0)], fname="t2.sqlite")
    r2 = analyze_categories(m2)
    assert r2.preset == "generic" and "no engine" in r2.preset_reason
    r3 = analyze_categories(m, load_rules("sglang"))
    assert r3.preset == "sglang" and r3.detect_pct == {}


def test_analyze_auto_keeps_user_rules(tmp_path: Path) -> None:
    f = tmp_path / "c.json"
    f.write_text(json.dumps({"rules": [["slot_mapping", "prep"]]}))
    m = _model(tmp_path, [(0, 100, NORM, 0), (100, 110, "_compute_slot_mapping_kernel", 0)])
    r = analyze_categories(m, load_rules(None, str(f)))
    assert r.preset == "vllm" and r.rules_file == str(f)
    assert _row(r.overall, "prep").total_ns == 10 and r.categories[-1] == "prep"


def test_analyze_include_memcpy(tmp_path: Path) -> None:
    m = _model(tmp_path, [(0, 10, GEMM, 0)], memcpy=[(5, 20, 0)])
    r = analyze_categories(m, load_rules("generic"), include_memcpy=True)
    assert r.busy_ns == 20 and r.kernel_count == 2
    assert _row(r.overall, "gemm").nonoverlap_ns == 8      # 5 + 2.5 → 8 (lowest index)
    assert _row(r.overall, "memcpy").nonoverlap_ns == 12   # 2.5 + 10 → 12
    assert len(r.name_category) == 1      # the one kernel name: copies are no kernel names
    r0 = analyze_categories(m, load_rules("generic"))
    assert r0.busy_ns == 10 and r0.kernel_count == 1


def test_analyze_no_kernels(tmp_path: Path) -> None:
    b = TraceBuilder()
    b.process(1)
    g = b.thread(1, 1)
    b.runtime(0, 10, tid_g=g, name="cudaFree_v3020")
    m = load_model(b.write(str(tmp_path / "e.sqlite")))
    r = analyze_categories(m)
    assert not r.available and r.reason


def test_phase_length_mismatch(tmp_path: Path) -> None:
    m = _model(tmp_path, [(0, 10, GEMM, 0)])
    with pytest.raises(ValueError):
        analyze_categories(m, kernel_phase=np.array([0, 1]))


def test_auto_preset_resolved_without_file_io(tmp_path: Path, monkeypatch) -> None:
    """``load_rules(None)`` carries every preset auto-selection may pick, so the analysis reads no file."""
    from nsys_llm_explainer.config import categories as cfg

    rules = load_rules(None)
    m = _model(tmp_path, [(0, 100, NORM, 0), (100, 110, "_compute_slot_mapping_kernel", 0)])

    def no_io(name: str):
        raise AssertionError(f"analysis read preset {name}")

    monkeypatch.setattr(cfg, "_read_preset", no_io)
    cfg.builtin_preset.cache_clear()
    try:
        r = analyze_categories(m, rules)
    finally:
        cfg.builtin_preset.cache_clear()
    assert r.preset == "vllm" and r.detect_pct["vllm"] == 100.0
    assert _row(r.overall, "elementwise").total_ns == 10 and _row(r.overall, "norm").total_ns == 100


def test_nonoverlap_serial_stream_is_each_categorys_own_time() -> None:
    # one stream: back-to-back (touching) and gapped kernels, a zero-length one; no instant has two categories
    s = np.array([0, 10, 10, 25, 40])
    e = np.array([10, 10, 25, 30, 41])
    c = np.array([0, 2, 1, 0, 2])
    out, busy = nonoverlap_split(s, e, c, 3)
    assert busy == 10 + 15 + 5 + 1 and out.tolist() == [15, 15, 1]
    # random serial streams against a per-ns grid (each ns covered by one category at most)
    rng = np.random.default_rng(11)
    for _ in range(20):
        n = int(rng.integers(1, 300))
        gaps = rng.integers(0, 50, n)
        durs = rng.integers(0, 40, n)
        s = np.cumsum(gaps + np.concatenate(([0], durs[:-1])))
        e = s + durs
        c = rng.integers(0, 6, n)
        out, busy = nonoverlap_split(s, e, c, 6)
        grid = np.full(int(e.max()) + 1, -1)
        for a, b, k in zip(s.tolist(), e.tolist(), c.tolist()):
            assert (grid[a:b] == -1).all()
            grid[a:b] = k
        assert busy == int((grid >= 0).sum())
        assert out.tolist() == [int((grid == k).sum()) for k in range(6)]


def test_memsets_are_categorized_over_a_window_when_copies_count_as_busy(tmp_path: Path) -> None:
    """--include-memcpy-in-busy with a window narrower than the capture: the categories over the window (what a
    comparison splits) count memsets as the ``[CUDA memset]`` name, category ``memcpy``. Kernel GEMM [10, 20) µs,
    memset [15, 30) µs, a second GEMM [100, 110) µs after the window [10, 50) µs: the 5 µs they share is split in
    two, so GEMM 5 + 2.5 = 7.5 µs and memcpy 2.5 + 10 = 12.5 µs of the 20 µs busy."""
    from nsys_llm_explainer import analyze

    b = TraceBuilder()
    b.process(100, "python3")
    b.kernel(10 * US, 20 * US, pid=100, name=GEMM)
    b.memset(15 * US, 30 * US, pid=100, bytes=64)
    b.kernel(100 * US, 110 * US, pid=100, name=GEMM)
    p = b.write(str(tmp_path / "ms.sqlite"))
    rep = analyze(p, include_memcpy_in_busy=True, window=(10 * US, 50 * US))
    c = rep.steady_categories
    assert not rep.window.is_full and c.include_memcpy and c.busy_ns == 20 * US and c.kernel_count == 2
    assert _row(c.overall, "gemm").nonoverlap_ns == 7_500
    mem = _row(c.overall, "memcpy")
    assert mem.nonoverlap_ns == 12_500
    assert [(k.name, k.count, k.total_ns) for k in mem.top_kernels] == [("[CUDA memset]", 1, 15 * US)]
