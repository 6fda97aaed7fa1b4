"""Kernel names of A100 (sm80) training and FP32 workloads, and of the one-time / side-stream scenarios."""

from __future__ import annotations

from typing import Any, Dict, List

__all__ = ["A100", "KT", "triton_names"]

# TARGET_INFO_GPU columns of an A100-SXM4-80GB (others default to the builder's H100-like values)
A100: Dict[str, Any] = {
    "name": "NVIDIA A100-SXM4-80GB",
    "sm_count": 108,
    "memory_bandwidth": 2039000000000,
    "total_memory": 85089976320,
    "chipName": "GA100",
    "l2CacheSize": 41943040,
    "clockRate": 1410000000,
    "maxShmemPerBlockOptin": 166912,
    "maxShmemPerSm": 167936,
    "computeMajor": 8,
    "computeMinor": 0,
    "smMajor": 8,
    "smMinor": 0,
}

_EW = "void at::native::vectorized_elementwise_kernel<4, "
_MTA = "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<"


class KT:
    """Training (BF16 tensor-core forward / backward, fused Adam) and FP32 SIMT kernel names."""

    SGEMM = "ampere_sgemm_128x64_nn"
    ADD_F32 = (
        _EW + "at::native::CUDAFunctor_add<float>, std::array<char*, 3ul>>(int, "
        "at::native::CUDAFunctor_add<float>, std::array<char*, 3ul>)"
    )
    GELU_F32 = (
        _EW + "at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::"
        "operator()() const::{lambda()#3}::operator()() const::{lambda(float)#1}, std::array<char*, 2ul>>(int, "
        "at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::"
        "operator()() const::{lambda()#3}::operator()() const::{lambda(float)#1}, std::array<char*, 2ul>)"
    )
    MUL_F32 = (
        _EW
        + "at::native::BinaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float>>, "
        "std::array<char*, 3ul>>(int, at::native::BinaryFunctor<float, float, float, "
        "at::native::binary_internal::MulFunctor<float>>, std::array<char*, 3ul>)"
    )
    GEMM_QKV = "sm80_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x32_stage4_warpsize2x2x1_tensor16x8x16_kernel"
    GEMM_O = (
        "sm80_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x128x32_stage5_warpsize2x2x1_tensor16x8x16_kernel"
    )
    GEMM_UP = "sm80_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize256x128x32_stage3_warpsize4x2x1_tensor16x8x16_kernel"
    GEMM_DGRAD = "sm80_xmma_gemm_bf16bf16_bf16f32_f32_nn_n_tilesize256x128x32_stage3_warpsize4x2x1_tensor16x8x16_kernel"
    GEMM_WGRAD = "sm80_xmma_gemm_bf16bf16_bf16f32_f32_nt_n_tilesize128x256x32_stage3_warpsize2x4x1_tensor16x8x16_kernel"
    LAYER_NORM = (
        "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float>(int, float, "
        "const c10::BFloat16*, const c10::BFloat16*, const c10::BFloat16*, float*, float*, c10::BFloat16*)"
    )
    LAYER_NORM_BWD = (
        "void at::native::(anonymous namespace)::layer_norm_grad_input_kernel<c10::BFloat16, float>("
        "const c10::BFloat16*, const c10::BFloat16*, const float*, const float*, const c10::BFloat16*, "
        "c10::BFloat16*, int)"
    )
    GAMMA_BETA_BWD = (
        "void at::native::(anonymous namespace)::GammaBetaBackwardCUDAKernel_32x32<c10::BFloat16, float>(long, "
        "long, const c10::BFloat16*, const c10::BFloat16*, const float*, const float*, c10::BFloat16*, "
        "c10::BFloat16*)"
    )
    GELU_BF16 = (
        _EW + "at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::"
        "operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16)#1}, std::array<char*, 2ul>>"
        "(int, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::"
        "operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16)#1}, std::array<char*, 2ul>)"
    )
    GELU_BWD = (
        _EW + "at::native::GeluBackwardCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::"
        "{lambda()#2}::operator()() const::{lambda()#4}::operator()() const::"
        "{lambda(c10::BFloat16, c10::BFloat16)#1}, std::array<char*, 3ul>>(int, "
        "at::native::GeluBackwardCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::"
        "operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16, c10::BFloat16)#1}, "
        "std::array<char*, 3ul>)"
    )
    ADD_BF16 = (
        _EW + "at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul>>(int, "
        "at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul>)"
    )
    FLASH_BWD = (
        "void flash::flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<Flash_bwd_kernel_traits<128, 64, 128, 8, 2, 4, "
        "2, false, false, cutlass::bfloat16_t, Flash_kernel_traits<128, 64, 128, 8, cutlass::bfloat16_t>>, "
        "false, false, false, false, false, true, false>(Flash_bwd_params)"
    )
    FLASH_BWD_DOT = (
        "void flash::flash_bwd_dot_do_o_kernel<true, Flash_bwd_kernel_traits<128, 64, 128, 8, 2, 4, 2, false, "
        "false, cutlass::bfloat16_t, Flash_kernel_traits<128, 64, 128, 8, cutlass::bfloat16_t>>>"
        "(Flash_bwd_params)"
    )
    FLASH_BWD_CONVERT = (
        "void flash::flash_bwd_convert_dq_kernel<Flash_bwd_kernel_traits<128, 64, 128, 8, 2, 4, 2, false, "
        "false, cutlass::bfloat16_t, Flash_kernel_traits<128, 64, 128, 8, cutlass::bfloat16_t>>, false, false>"
        "(Flash_bwd_params, int)"
    )
    FLASH_FWD = (
        "void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t, "
        "Flash_kernel_traits<128, 128, 64, 4, cutlass::bfloat16_t>>, false, true, false, false, false, true, "
        "false, false>(Flash_fwd_params)"
    )
    SOFTMAX_FWD = (
        "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, "
        "at::native::(anonymous namespace)::LogSoftMaxForwardEpilogue>(float*, const float*, int)"
    )
    SOFTMAX_BWD = (
        "void at::native::(anonymous namespace)::cunn_SoftMaxBackward<4, float, float, float, "
        "at::native::(anonymous namespace)::LogSoftMaxBackwardEpilogue>(float*, const float*, const float*, int)"
    )
    NLL_FWD = (
        "void at::native::(anonymous namespace)::nll_loss_forward_reduce_cuda_kernel_2d<float, float, long>("
        "float*, float*, const float*, const long*, const float*, bool, long, long, long, long)"
    )
    NLL_BWD = (
        "void at::native::(anonymous namespace)::nll_loss_backward_reduce_cuda_kernel_2d<float, long>(float*, "
        "const float*, const long*, const float*, const float*, bool, int, int, long, long)"
    )
    ADAM = (
        _MTA + "at::native::(anonymous namespace)::TensorListMetadata<4>, "
        "at::native::(anonymous namespace)::FusedAdamMathFunctor<float, 4, (at::native::ADAM_MODE)1, false>, "
        "bool*, const float*, double, double, double, double, double, bool, const float*, const float*>"
        "(int, at::native::(anonymous namespace)::TensorListMetadata<4>&, "
        "at::native::(anonymous namespace)::FusedAdamMathFunctor<float, 4, (at::native::ADAM_MODE)1, false>, "
        "bool*, const float*, double, double, double, double, double, bool, const float*, const float*)"
    )
    GRAD_NORM = (
        _MTA + "at::native::(anonymous namespace)::TensorListMetadata<1>, "
        "at::native::(anonymous namespace)::LpNormFunctor<float, 2, float, float>, float*, float*, int>"
        "(int, at::native::(anonymous namespace)::TensorListMetadata<1>&, "
        "at::native::(anonymous namespace)::LpNormFunctor<float, 2, float, float>, float*, float*, int)"
    )


def triton_names(n: int) -> List[str]:
    """``n`` distinct Inductor-style Triton kernel names."""
    stems = ("triton_poi_fused_add_mul_", "triton_red_fused__to_copy_mean_pow_", "triton_per_fused_softmax_")
    return [f"{stems[i % len(stems)]}{i // len(stems)}" for i in range(n)]
