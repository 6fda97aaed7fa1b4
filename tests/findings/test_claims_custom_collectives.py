"""Tensor-parallel communication outside NCCL (vLLM's custom all-reduce, TensorRT-LLM's one-shot all-reduce, DeepEP
all-to-all, several ranks spinning in a custom all-reduce). Each trace is built by hand; the truth is worked out in the
docstrings."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence, Tuple

from claims_support import finding_of, report_of
from synth import TraceBuilder

from nsys_llm_explainer.findings.advice import ADVICE

US = 1_000
MS = 1_000 * US
GEMM = ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x64x64_warpgroupsize1x1x1_execute_segment_k_off_kernel"
        "__5x_cublas")
ATT = ("void flash::flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4, false, false, "
       "cutlass::bfloat16_t>, false>(Flash_fwd_params)")
NORM = ("void vllm::fused_add_rms_norm_kernel<c10::BFloat16, 8>(c10::BFloat16*, c10::BFloat16*, "
        "c10::BFloat16 const*, float, int, int)")
VLLM_AR = "void vllm::cross_device_reduce_1stage<__nv_bfloat16, 2>(vllm::RankData*, vllm::RankSignals, int)"
TRT_AR = ("void tensorrt_llm::kernels::oneShotAllReduceKernel<__nv_bfloat16, 4, false>("
          "tensorrt_llm::kernels::AllReduceParams)")
NCCL_AR = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
DISPATCH = ("void deep_ep::intranode::dispatch<8, 768, 8192>(int4*, float*, int*, long*, float*, int*, int*, "
            "int4 const*, float const*, long const*, float const*, bool const*, int*, int*, int, int, int, int, int, "
            "int, int, int, int, void**, int, int, int)")
COMBINE = ("void deep_ep::intranode::combine<__nv_bfloat16, 8, 768, 4096>(__nv_bfloat16*, float*, "
           "__nv_bfloat16 const*, float const*, int const*, int const*, int const*, void**, int, int, int, int, int, "
           "int, int, int, int)")
GROUPED = ("void cutlass::device_kernel<flashinfer::gemm::GroupedGemm<cutlass::bfloat16_t>>("
           "flashinfer::gemm::GroupedGemm<cutlass::bfloat16_t>::Params)")


def _tp(layer: Sequence[Tuple[str, int]], steps: int = 10, layers: int = 8) -> TraceBuilder:
    """Two processes, one per GPU (pid 100 → GPU 0, pid 200 → GPU 1): ``steps`` decode steps of ``layers`` layers,
    each layer the kernels of ``layer`` (name, µs) on stream 7, 2 µs apart, launched 8 µs before they start; after
    the layers a 64-byte D2H copy and 300 µs of host work before the next step. No NVTX."""
    b = TraceBuilder()
    for pid, dev in ((100, 0), (200, 1)):
        b.process(pid)
        b.gpu(dev)
        g = b.thread(pid, pid, "python3")
        t = 1 * MS + dev * 3 * US
        for _ in range(steps):
            k = t
            for _ in range(layers):
                for name, d in layer:
                    b.launch(k - 8 * US, k - 4 * US, k, k + d * US, pid=pid, tid=pid, device=dev, name=name)
                    k += (d + 2) * US
            c = b.runtime(k, k + 20 * US, tid_g=g, name="cudaMemcpyAsync_v3020")
            b.memcpy(k + 12 * US, k + 14 * US, pid=pid, bytes=64, copy_kind=2, src_kind=2, dst_kind=0, device=dev,
                     corr=c)
            t = k + 300 * US
    return b


def _layer(ar: str) -> Tuple[Tuple[str, int], ...]:
    """QKV 40, attention 30, o_proj 20, all-reduce 60, norm 5, gate_up 60, down 40, all-reduce 60, norm 5 (µs)."""
    return ((GEMM, 40), (ATT, 30), (GEMM, 20), (ar, 60), (NORM, 5), (GEMM, 60), (GEMM, 40), (ar, 60), (NORM, 5))


def test_a_running_custom_all_reduce_is_not_advised_as_if_absent(tmp_path: Path) -> None:
    """vLLM TP=2 decode whose all-reduce is vLLM's own (``cross_device_reduce_1stage``), 120 µs of the 320 µs of
    kernels per layer, nothing beside it: per device 10 steps × 8 layers × 2 × 60 µs = 9.600 ms exposed, 19.200 ms
    pooled. The comm_exposed advice said "use the engine's custom (one-/two-shot) all-reduce", which the trace
    already runs. Fixed: with a custom all-reduce kernel in the trace (fact ``custom_allreduce``) the line is
    ``comm_exposed.tp.custom`` ("already runs": fuse it, or fewer TP GPUs); with NCCL's all-reduce in its place the
    old line stays. Same on TensorRT-LLM's ``oneShotAllReduceKernel``. The stack is vLLM (its norm kernels): "check
    `--disable-custom-all-reduce` and peer-to-peer access" (``comm_exposed.tp.vllm``) only where no custom all-reduce
    kernel ran (it said "keep the custom all-reduce on" of a trace whose all-reduce was NCCL's)."""
    for ar in (VLLM_AR, TRT_AR):
        f = finding_of(report_of(_tp(_layer(ar)), tmp_path), "comm_exposed")
        assert f["time_at_stake_ns"] == 19_200 * US
        assert ADVICE["comm_exposed.tp.custom"].text in f["recommendation"]
        assert ADVICE["comm_exposed.tp"].text not in f["recommendation"]
        assert ADVICE["comm_exposed.tp.vllm"].text not in f["recommendation"]
    f = finding_of(report_of(_tp(_layer(NCCL_AR)), tmp_path), "comm_exposed")
    assert f["time_at_stake_ns"] == 19_200 * US
    assert ADVICE["comm_exposed.tp"].text in f["recommendation"]
    assert ADVICE["comm_exposed.tp.custom"].text not in f["recommendation"]
    assert ADVICE["comm_exposed.tp.vllm"].text in f["recommendation"]
    assert "no custom all-reduce kernel ran" in ADVICE["comm_exposed.tp.vllm"].text


def test_deep_ep_all_to_all_is_communication(tmp_path: Path) -> None:
    """MoE expert parallelism over 2 GPUs through DeepEP: per layer QKV 20, attention 20, o_proj 10, DeepEP
    ``dispatch`` 80, grouped GEMM 30, ``combine`` 80, norm 5 µs. Dispatch and combine move tokens between the GPUs
    over NVLink (an all-to-all) and run with nothing beside them: per device 10 × 8 × 160 µs = 12.800 ms, pooled
    25.600 ms. The report put them in category `moe` (76.8 % with the grouped GEMM), made no exposed-communication
    claim and named the host gaps the verdict. Fix I would make: a rule before the `moe` one in
    presets/categories_generic.json taking ``deep_ep::(intranode|internode|internode_ll)::(dispatch|combine)`` and
    NVSHMEM's ``nvshmemi_`` kernels into a communication category (a new ``custom_comm``, or ``custom_allreduce``
    renamed), listed in exposure.COMM_CATEGORIES, with ``collective_op`` reading dispatch/combine as all-to-all.
    Fixed: category ``all_to_all`` (after ``nccl``, before ``moe``), a communication category; the advice names expert
    parallelism's exchange (``comm_exposed.ep``). Kernel time per layer 245 µs: all_to_all 160 / 245 = 65.3 %, moe
    (the grouped GEMM) 30 / 245 = 12.2 %."""
    layer = ((GEMM, 20), (ATT, 20), (GEMM, 10), (DISPATCH, 80), (GROUPED, 30), (COMBINE, 80), (NORM, 5))
    rep = report_of(_tp(layer), tmp_path)
    f = finding_of(rep, "comm_exposed")
    assert f["time_at_stake_ns"] == 25_600 * US
    assert f["title"].startswith("Exposed communication: the all-to-all runs with no compute beside it")
    assert ADVICE["comm_exposed.ep"].text in f["recommendation"]
    cats = {c["category"]: round(c["pct"], 1) for c in rep["categories"]["overall"] if c["pct"]}
    assert (cats["all_to_all"], cats["moe"]) == (65.3, 12.2)
