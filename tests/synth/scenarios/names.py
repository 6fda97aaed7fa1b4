"""Realistic kernel names (H100 / vLLM / PyTorch flavoured) and per-layer kernel shapes of a decode step."""

from __future__ import annotations

from typing import Tuple

__all__ = ["K", "PREFILL_SEG1", "PREFILL_SEG2", "SAMPLER", "SEG1", "SEG2", "Shape"]


class K:
    """Realistic kernel names (H100 / vLLM flavoured)."""

    GEMM_QKV = (
        "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_"
        "execute_segment_k_off_kernel__5x_cublas"
    )
    GEMM_O = "nvjet_tst_192x192_64x4_2x1_v_bz_coopB_bias_TNN"
    GEMM_UP = (
        "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize256x128x64_warpgroupsize2x1x1_"
        "execute_segment_k_off_kernel__5x_cublas"
    )
    GEMM_DOWN = "nvjet_tst_128x256_64x4_1x2_h_bz_coopA_TNT"
    GEMM_AMPERE = "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_tn"
    LM_HEAD = "nvjet_tst_256x128_64x4_2x1_v_bz_coopA_NNT"
    FLASH = (
        "void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, "
        "cutlass::bfloat16_t, Flash_kernel_traits<128, 128, 64, 4, cutlass::bfloat16_t>>, false, true, "
        "false, false, true, true, false, false>(Flash_fwd_params)"
    )
    FLASH_SPLITKV = (
        "void flash::flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4, false, "
        "false, cutlass::bfloat16_t, Flash_kernel_traits<128, 64, 128, 4, cutlass::bfloat16_t>>, "
        "true, false, false, false, true, true, false, false>(Flash_fwd_params)"
    )
    PAGED_ATTN = (
        "void vllm::paged_attention_v2_kernel<__nv_bfloat16, __nv_bfloat16, 128, 16, 128, "
        "(vllm::Fp8KVCacheDataType)0, false, 512>(float*, float*, __nv_bfloat16*, "
        "const __nv_bfloat16*, const __nv_bfloat16*, const __nv_bfloat16*, int, float, "
        "const int*, const int*, int, const float*, int, int, int, const float*, const float*)"
    )
    RMS_NORM = (
        "void vllm::rms_norm_kernel<c10::BFloat16, 8>(c10::BFloat16*, const c10::BFloat16*, "
        "const c10::BFloat16*, float, int, int)"
    )
    FUSED_ADD_RMS = (
        "void vllm::fused_add_rms_norm_kernel<c10::BFloat16, 8>(c10::BFloat16*, c10::BFloat16*, "
        "const c10::BFloat16*, float, int, int)"
    )
    ACT_MUL = (
        "void vllm::act_and_mul_kernel<c10::BFloat16, &vllm::silu_kernel<c10::BFloat16>, true>"
        "(c10::BFloat16*, const c10::BFloat16*, int)"
    )
    ROTARY = (
        "void vllm::rotary_embedding_kernel<c10::BFloat16, true>(const long*, c10::BFloat16*, "
        "c10::BFloat16*, const c10::BFloat16*, int, long, long, int, int, int)"
    )
    RESHAPE_CACHE = (
        "void vllm::reshape_and_cache_flash_kernel<__nv_bfloat16, __nv_bfloat16, "
        "(vllm::Fp8KVCacheDataType)0>(const __nv_bfloat16*, const __nv_bfloat16*, "
        "__nv_bfloat16*, __nv_bfloat16*, const long*, long, long, long, long, int, int, int, "
        "const float*, const float*)"
    )
    NCCL_AR = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
    CUSTOM_AR = (
        "void vllm::cross_device_reduce_1stage<__nv_bfloat16, 2>(vllm::RankData*, vllm::RankSignals, "
        "vllm::Signal*, __nv_bfloat16*, int, int)"
    )
    ELEMENTWISE = (
        "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<c10::BFloat16>, "
        "std::array<char*, 1ul>>(int, at::native::FillFunctor<c10::BFloat16>, std::array<char*, 1ul>)"
    )
    COPY = (
        "void at::native::vectorized_elementwise_kernel<4, at::native::bfloat16_copy_kernel_cuda"
        "(at::TensorIteratorBase&)::{lambda()#1}::operator()() const::{lambda(float)#1}, "
        "std::array<char*, 2ul>>(int, at::native::bfloat16_copy_kernel_cuda(at::TensorIteratorBase&)"
        "::{lambda()#1}::operator()() const::{lambda(float)#1}, std::array<char*, 2ul>)"
    )
    TRITON = "triton_poi_fused_add_mul_0"
    SOFTMAX = (
        "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, "
        "at::native::(anonymous namespace)::SoftMaxForwardEpilogue>(float*, const float*, int)"
    )
    ARGMAX = (
        "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::ArgMaxOps<float>, "
        "unsigned int, long, 4>>(at::native::ReduceOp<float, at::native::ArgMaxOps<float>, "
        "unsigned int, long, 4>)"
    )
    TOPK_SOFTMAX = (
        "void vllm::moe::topk_softmax<8, 8, 4, 64>(const float*, const bool*, float*, int*, int*, "
        "int, int, int, int)"
    )
    FUSED_MOE = "fused_moe_kernel"
    FP8_QUANT = (
        "void vllm::scaled_fp8_quant_kernel<c10::BFloat16, c10::Float8_e4m3fn>(c10::Float8_e4m3fn*, "
        "const c10::BFloat16*, const float*, long)"
    )


# (name, duration ns at scale 1, grid) -- decode of a ~8B model, TP=2, batch 32 on H100
Shape = Tuple[str, int, Tuple[int, int, int]]

SEG1 = [
    (K.RMS_NORM, 2500, (32, 1, 1)),
    (K.GEMM_QKV, 14000, (132, 1, 1)),
    (K.ROTARY, 2200, (32, 1, 1)),
    (K.RESHAPE_CACHE, 2400, (32, 1, 1)),
    (K.FLASH_SPLITKV, 18000, (4, 32, 8)),
    (K.GEMM_O, 8000, (66, 1, 1)),
]
SEG2 = [
    (K.FUSED_ADD_RMS, 2800, (32, 1, 1)),
    (K.GEMM_UP, 28000, (132, 1, 1)),
    (K.ACT_MUL, 3500, (32, 1, 1)),
    (K.GEMM_DOWN, 16000, (132, 1, 1)),
]
PREFILL_SEG1 = [
    (K.RMS_NORM, 9000, (2048, 1, 1)),
    (K.GEMM_QKV, 210000, (132, 1, 1)),
    (K.ROTARY, 11000, (2048, 1, 1)),
    (K.RESHAPE_CACHE, 8000, (2048, 1, 1)),
    (K.FLASH, 260000, (16, 32, 1)),
    (K.GEMM_O, 95000, (132, 1, 1)),
]
PREFILL_SEG2 = [
    (K.FUSED_ADD_RMS, 12000, (2048, 1, 1)),
    (K.GEMM_UP, 420000, (132, 1, 1)),
    (K.ACT_MUL, 30000, (2048, 1, 1)),
    (K.GEMM_DOWN, 210000, (132, 1, 1)),
]
SAMPLER = [
    (K.RMS_NORM, 2500, (32, 1, 1)),
    (K.LM_HEAD, 45000, (132, 1, 1)),
    (K.SOFTMAX, 6000, (32, 1, 1)),
    (K.ARGMAX, 4000, (32, 1, 1)),
]
