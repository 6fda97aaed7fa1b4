"""The same workload across a precision change (docs/COMPARE.md, "Too short, too different"): kernel names that only
one run ran count as work in common when a precision / quantization change renamed them
(:func:`nsys_llm_explainer.comparison.measure.precision_renamed`), and only then: another engine, another workload and
another number of kernels stay "too different".

The loop (:func:`synth.loops.synced_loop`, exact rows, no jitter): per step a 16 µs H2D copy, the kernels back to
back from t + 20 µs, a ``cudaStreamSynchronize`` returning 5 µs after the last, an NVTX ``execute_model`` range; the
step period is 670 µs + Σ kernel durations, 40 steps (39 step periods: the unit of work is the step). BASE, the BF16
loop: a cuBLAS BF16 GEMM 200 µs, FlashAttention 100, RMS norm 20, sampler 10 (330 µs: period 1.000 ms)."""

from __future__ import annotations

import pytest
from synth.loops import SAMPLER, synced_loop
from synth.scenarios.names import K

import nsys_llm_explainer as nle
from nsys_llm_explainer.comparison.gate import gate
from nsys_llm_explainer.comparison.measure import precision_types
from nsys_llm_explainer.errors import EXIT_INCOMPARABLE

US = 1_000
FP8_GEMM = ("sm90_xmma_gemm_e4m3e4m3_bf16f32_f32_tn_n_tilesize128x128x128_warpgroupsize1x1x1_"
            "execute_segment_k_off_kernel__5x_cublas")
FP8_QUANT = ("void vllm::dynamic_scaled_fp8_quant_kernel<c10::BFloat16, c10::Float8_e4m3fn>(c10::Float8_e4m3fn*, "
             "const c10::BFloat16*, const float*, int)")
TOKEN_QUANT = ("void vllm::dynamic_per_token_scaled_fp8_quant_kernel<c10::BFloat16, c10::Float8_e4m3fn>("
               "c10::Float8_e4m3fn*, float*, const c10::BFloat16*, const float*, int)")
MARLIN = ("void marlin::Marlin<256, 1, 8, 8, true, 4, 8, true>(const int4*, const int4*, int4*, int4*, const int4*, "
          "const int4*, const int*, int, int, int, int, int*)")
FLASH_BWD = "void flash::flash_bwd_dq_dk_dv_loop_kernel<Flash_bwd_kernel_traits<128, 64, 128, 8>>(Flash_bwd_params)"
ADAM = "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<FusedAdamMathFunctor>()"
XQA = "void tensorrt_llm::kernels::xqa_kernel<__nv_bfloat16, 128, 8>(tensorrt_llm::kernels::XQAParams)"
TRT_NORM = "void tensorrt_llm::kernels::generalRmsNorm<__nv_bfloat16, float>(tensorrt_llm::kernels::RmsNormParams)"
TRT_SAMPLER = "void tensorrt_llm::kernels::topKStage2Sampling<__nv_bfloat16, 128, 8>(tensorrt_llm::kernels::TopKParams)"
REST = ((K.FLASH, 100), (K.RMS_NORM, 20), (SAMPLER, 10))
BASE = ((K.GEMM_QKV, 200),) + REST
#: the reasons' words when each run ran kernels of a kind the other did not (docs/COMPARE.md "Too short, too different")
RENAMED = ("kernels the other did not (kernels are matched by name, not by kind: the same work under another library, "
           "version or GPU is not matched)")


def _pair(tmp_path, new):
    base = synced_loop(str(tmp_path / "b.sqlite"), BASE)
    res = nle.compare([base, synced_loop(str(tmp_path / "n.sqlite"), new)], labels=["BASE", "NEW"])
    return res, res.comparisons[0]


def test_precision_types_of_kernel_names():
    """The formats a name names: FP8 by e4m3 / e5m2 / fp8 / float8, INT4 weights by Marlin (and its ``int4*``
    arguments), none for BF16 cuBLAS / nvjet GEMMs and for a BF16 paged-attention kernel whose template holds the
    enum ``vllm::Fp8KVCacheDataType``."""
    assert precision_types({FP8_GEMM}) == {"fp8"} and precision_types({FP8_QUANT, TOKEN_QUANT}) == {"fp8"}
    assert precision_types({"cutlass_3x_gemm<cutlass::float_e5m2_t>"}) == {"fp8"}
    assert precision_types({MARLIN}) == {"int4"}
    assert precision_types({"sm80_xmma_gemm_i8i8_i32_tn", "nvfp4_gemm_e2m1"}) == {"int8", "fp4"}
    assert precision_types({K.GEMM_QKV, K.GEMM_O, K.PAGED_ATTN, K.FLASH}) == frozenset()


def test_int4_weight_only_quantization_is_compared(tmp_path):
    """NEW: GPTQ-Marlin INT4 weights — a Marlin GEMM of 90 µs in place of the BF16 GEMM, no quantize kernel (the
    activations stay BF16): 220 µs, period 0.890 ms. The `gemm` names only one run ran: BASE's cuBLAS GEMM (formats
    {}), NEW's Marlin (formats {int4}), 39 launches over 39 steps each: renamed; the rest (130 µs) is in common names:
    kernel time in common 1 on both sides. Truth: the same work, (890 − 1 000) / 1 000 = −11.0 %, faster."""
    res, c = _pair(tmp_path, ((MARLIN, 90),) + REST)
    assert (c.metric_base.p50_ns, c.metric_new.p50_ns) == (1_000 * US, 890 * US)
    assert (c.status, c.verdict, c.change_pct, c.common_kernel_share) == ("comparable", "faster",
                                                                          pytest.approx(-11.0), 1.0)
    assert c.headline[-1] == ("Compared across a precision change: NEW's int4 `gemm` kernels replace BASE's "
                              "(1 launch per step in each).")


def test_quantize_kernels_beyond_one_per_renamed_kernel_are_new_work(tmp_path):
    """NEW: two FP8 quantize kernels (5 µs each) before one FP8 GEMM of 120 µs: 260 µs, period 0.930 ms. The GEMM is
    renamed (1 launch per step each side, {} vs {fp8}), but 2 quantize launches per step exceed the 1 renamed launch,
    so they stay NEW's own work: NEW spends (120 + 130) / 260 = 96.2 % in common, BASE 100 %. Still the same
    workload: (930 − 1 000) / 1 000 = −7.0 %, and the headline does not say the quantize kernels were counted."""
    res, c = _pair(tmp_path, ((FP8_QUANT, 5), (TOKEN_QUANT, 5), (FP8_GEMM, 120)) + REST)
    assert c.common_kernel_share == pytest.approx(250 / 260)
    assert (c.status, c.verdict, c.change_pct) == ("comparable", "faster", pytest.approx(-7.0))
    assert c.headline[-1] == ("Compared across a precision change: NEW's fp8 `gemm` kernels replace BASE's (1 launch "
                              "per step in each).")


def test_another_bf16_gemm_library_stays_too_different(tmp_path):
    """NEW: nvjet (cuBLASLt's BF16 GEMM) of 200 µs in place of the cuBLAS ``sm90_xmma_gemm_bf16bf16`` one, the rest
    the same: another library, no precision change — the two GEMM names name no low-precision format ({} and {}), so
    nothing is renamed and each run spends 130 / 330 = 39.4 % of its kernel time in common names (< 50 %): too
    different, as before this rule; the gate fails closed."""
    res, c = _pair(tmp_path, ((K.GEMM_O, 200),) + REST)
    assert c.common_kernel_share == pytest.approx(130 / 330)
    assert (c.status, c.verdict) == ("too_different", "not_compared")
    assert c.reasons == ("the runs share few kernel names: BASE and NEW spend only 39 % and 39 % of their kernel "
                         f"time in kernel names the other also ran (< 50 %); each ran gemm {RENAMED}",)
    assert gate(res, 5.0)[1] == EXIT_INCOMPARABLE


def test_three_fp8_gemms_for_one_bf16_gemm_are_not_a_renaming(tmp_path):
    """NEW runs the FP8 GEMM three times per step (3 × 120 µs) with the same rest: 490 µs. Formats differ ({} vs
    {fp8}) and the rest is in common, but the launches per step do not match (1 vs 3: |1 − 3| = 2 > 0.1 × 3), so a
    precision change did not merely rename BASE's one GEMM: nothing is renamed, BASE spends 130 / 330 = 39.4 % and
    NEW 130 / 490 = 26.5 % in common names: too different (renamed, both would have read 100 %)."""
    res, c = _pair(tmp_path, ((FP8_GEMM, 120), (FP8_GEMM, 120), (FP8_GEMM, 120)) + REST)
    assert c.common_kernel_share == pytest.approx(130 / 490)
    assert c.status == "too_different"
    assert c.reasons == ("the runs share few kernel names: BASE and NEW spend only 39 % and 26 % of their kernel "
                         f"time in kernel names the other also ran (< 50 %); each ran gemm {RENAMED}",)


def test_an_fp8_training_step_is_not_the_bf16_decode_loop(tmp_path):
    """NEW: an FP8 training step — three FP8 GEMMs (forward, dgrad, wgrad) each after a 5 µs quantize, FlashAttention
    100 and its backward 250, RMS norm 20, an Adam step 100, no sampler: 845 µs. Not renamed (GEMM launches 1 vs 3 per
    step; the rest of NEW, 470 µs, only 120 in common names: 25.5 % < 50 %), so BASE spends (100 + 20) / 330 = 36.4 %
    and NEW 120 / 845 = 14.2 % of their kernel time in names the other ran: too different."""
    q, g = (FP8_QUANT, 5), (FP8_GEMM, 120)
    res, c = _pair(tmp_path, (q, g, (K.FLASH, 100), (K.RMS_NORM, 20), (FLASH_BWD, 250), q, g, q, g, (ADAM, 100)))
    assert c.common_kernel_share == pytest.approx(120 / 845)
    assert c.status == "too_different"
    assert c.reasons == ("the runs share few kernel names: BASE and NEW spend only 36 % and 14 % of their kernel "
                         f"time in kernel names the other also ran (< 50 %); each ran gemm {RENAMED}",)


def test_another_engine_in_fp8_stays_too_different(tmp_path):
    """NEW: another engine (TensorRT-LLM) in FP8 — quantize 5, FP8 GEMM 150, XQA attention 100, its RMS norm 20 and
    sampler 10 (285 µs). The GEMMs alone look renamed (1 launch per step each, {} vs {fp8}), but the rest of each run
    — BASE's FlashAttention, norm and sampler (130 µs), NEW's XQA, norm and sampler (130 µs) — is in no common name
    (0 < 50 %): another engine renames everything, not a precision change. Nothing is renamed, no name is common:
    0 % and 0 %, too different (renamed, it would have read BASE 200 / 330 = 61 %, NEW 155 / 285 = 54 %:
    compared)."""
    res, c = _pair(tmp_path, ((FP8_QUANT, 5), (FP8_GEMM, 150), (XQA, 100), (TRT_NORM, 20), (TRT_SAMPLER, 10)))
    assert c.common_kernel_share == 0.0
    assert (c.status, c.reasons[0]) == ("too_different", "the runs share few kernel names: BASE and NEW spend only "
                                        "0 % and 0 % of their kernel time in kernel names the other also ran (< 50 %); "
                                        f"each ran attention, gemm, norm and sampling {RENAMED}")
