"""Large-scale training as Megatron-LM / NeMo run it (TransformerEngine FP8 kernels, tensor / sequence-parallel
all-gathers and reduce-scatters inside the layers, a distributed optimizer, several ranks in one capture). Each trace is
built by hand; the truth is worked out in the docstrings."""

from __future__ import annotations

from pathlib import Path

from claims_support import finding_of, report_of
from synth import TraceBuilder

from nsys_llm_explainer.findings.advice import ADVICE

US = 1_000
MS = 1_000 * US
T0 = 10 * MS

GEMM = ("sm90_xmma_gemm_e4m3bf16_e4m3f32_f32_tn_n_tilesize128x128x128_warpgroupsize1x1x1_execute_segment_k_off_"
        "kernel__5x_cublas")
FLASH_B = ("void flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<Flash_bwd_kernel_traits<128, 64, 128, 8>>"
           "(Flash_bwd_params)")
LN_F = ("void transformer_engine::normalization::ln_fwd_tuned_kernel<transformer_engine::normalization::FwdParams, "
        "__nv_bfloat16, __nv_bfloat16, float, __nv_fp8_e4m3, float, unsigned int, 1u, 4u, 1u, 16u>"
        "(transformer_engine::normalization::FwdParams)")
AG = "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
RS = "ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
AR = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"


def _ddp_ranks(n_ranks: int) -> TraceBuilder:
    """``n_ranks`` ranks in one capture (pid 100 + r on GPU r, thread tid = pid): 20 steps, step i at
    t = T0 + 2 i ms; on stream 7 the backward kernel `flash_bwd…` [t, t + 1) ms (launched [t − 20, t − 15) µs),
    then the gradients' all-reduce on stream 20 [t + 1, t + 1.5) ms (launched [t + 900, t + 905) µs), the same
    instants on every rank: no rank arrives late, each all-reduce runs alone on its GPU."""
    b = TraceBuilder()
    for r in range(n_ranks):
        pid = 100 + r
        b.process(pid)
        b.thread(pid, pid, "pt_main_thread")
        b.gpu(r)
        for i in range(20):
            t = T0 + i * 2 * MS
            b.launch(t - 20 * US, t - 15 * US, t, t + MS, pid=pid, tid=pid, device=r, stream=7, name=FLASH_B)
            b.launch(t + 900 * US, t + 905 * US, t + MS, t + 1500 * US, pid=pid, tid=pid, device=r, stream=20,
                     name=AR)
    return b


def test_exposed_comm_with_every_rank_in_the_trace_does_not_ask_for_the_other_ranks_traces(tmp_path: Path) -> None:
    """(trace: :func:`_ddp_ranks`, 2 ranks) Each GPU runs 20 all-reduces of 0.5 ms with nothing beside them:
    10.000 ms exposed per device, 20.000 ms pooled over the window [T0, T0 + 39.5 ms) × 2 devices (79.000 ms):
    25.3 % ≥ 10, the `comm_exposed` finding. Both ranks are in this trace and the NCCL section compares them (20
    collectives matched, equal durations and starts: no straggler). The evidence read "only the other ranks' traces
    tell that wait from the transfer" — the other rank's kernels are in this trace and were compared; it must say
    that the NCCL section compared the 2 ranks and names no late rank, with the section's reason."""
    rep = report_of(_ddp_ranks(2), tmp_path)
    f = finding_of(rep, "comm_exposed")
    assert f["time_at_stake_ns"] == 20 * MS, f["time_at_stake_ns"]
    reason = rep["nccl"]["straggler_reason"]
    assert reason == "no rank arrives late: in every matched collective the kernels started together on every rank"
    line = next(e for e in f["evidence"] if "late peer" in e)
    assert line == ("A communication kernel also runs while it waits for a late peer: the NCCL section compares the "
                    f"2 ranks this trace holds and names no late rank: {reason}."), line


def test_exposed_comm_of_one_rank_still_points_to_the_other_ranks_traces(tmp_path: Path) -> None:
    """(trace: :func:`_ddp_ranks`, 1 rank) 20 × 0.5 ms = 10.000 ms exposed of the 39.500 ms window (25.3 %): the
    finding; one rank in the trace, so only the other ranks' traces can tell a wait for a late peer from the
    transfer: the sentence stays."""
    rep = report_of(_ddp_ranks(1), tmp_path)
    f = finding_of(rep, "comm_exposed")
    assert f["time_at_stake_ns"] == 10 * MS, f["time_at_stake_ns"]
    assert ("A communication kernel also runs while it waits for a late peer: only the other ranks' traces tell that "
            "wait from the transfer.") in f["evidence"]


def _megatron_tp() -> TraceBuilder:
    """One Megatron-LM rank (pid 300, GPU 0) with tensor + sequence parallelism and TransformerEngine FP8 layers:
    30 layer passes, pass i at t = T0 + 1.2 i ms: TE's `ln_fwd_tuned_kernel` [t, t + 50) µs, the sequence-parallel
    all-gather of its output [t + 50, t + 200) µs (stream 20), the FP8 GEMM `sm90_xmma_gemm_e4m3…` [t + 200,
    t + 600) µs, the backward `flash_bwd…` [t + 600, t + 1000) µs, the reduce-scatter of the output
    [t + 1000, t + 1150) µs (stream 20); each launched 20 µs before it starts. No FSDP evidence anywhere (no
    flat-parameter copies, no FSDP NVTX ranges): TransformerEngine's kernels are Megatron-LM's / NeMo's layers."""
    b = TraceBuilder()
    b.process(300)
    b.thread(300, 300, "pt_main_thread")
    for i in range(30):
        t = T0 + i * 1200 * US
        for a, e, s, name in ((0, 50, 7, LN_F), (50, 200, 20, AG), (200, 600, 7, GEMM), (600, 1000, 7, FLASH_B),
                              (1000, 1150, 20, RS)):
            b.launch(t + (a - 20) * US, t + (a - 15) * US, t + a * US, t + e * US, pid=300, tid=300, stream=s,
                     name=name)
    return b


def test_megatron_tp_collectives_are_not_told_to_prefetch_like_fsdp(tmp_path: Path) -> None:
    """(trace: :func:`_megatron_tp`) The all-gathers (30 × 150 µs = 4.500 ms) and reduce-scatters (4.500 ms) run
    alone: 9.000 ms of the window [T0, T0 + 35.95 ms) = 25.0 %, the `comm_exposed` finding (training: the backward
    kernels are 11.1 ms of 27.0 ms of kernel time, 41 %). Its first advice line — the report's "Do first" — reads
    "FSDP: prefetch the next all-gather … (`backward_prefetch=BackwardPrefetch.BACKWARD_PRE` …)": FSDP knobs for a
    Megatron-LM rank whose TransformerEngine layers run tensor / sequence-parallel collectives between their GEMMs,
    with no FSDP evidence in the trace. The fix I would make: a fact `transformer_engine` (TE kernel names,
    `transformer_engine::` / `nvte_`) in the advice facts, and a line before FSDP's for training with it: Megatron-LM
    / NeMo overlap the tensor-parallel all-gather / reduce-scatter with the GEMMs (`--tp-comm-overlap`, TE
    userbuffers) and the distributed optimizer's gradient reduce-scatter / parameter all-gather with backward /
    forward (`--overlap-grad-reduce`, `--overlap-param-gather`); FSDP's line only without that fact. Fixed so: the
    kernel trait `transformer_engine`, read by comm_exposed as a fact; DDP's and FSDP's lines need it false."""
    rep = report_of(_megatron_tp(), tmp_path)
    f = finding_of(rep, "comm_exposed")
    assert f["time_at_stake_ns"] == 9 * MS, f["time_at_stake_ns"]
    assert rep["kernel_traits"]["workload"] == "training"
    assert not f["recommendation"][0].startswith("FSDP"), f["recommendation"][0]
    assert f["recommendation"][0] == ADVICE["comm_exposed.te"].text
    assert not any(a.startswith(("FSDP", "DDP")) for a in f["recommendation"])
    assert "transformer_engine" in rep["kernel_traits"]["traits"]


def test_exposed_comm_of_several_ranks_in_one_trace_points_to_its_nccl_section(tmp_path: Path) -> None:
    """(trace: :func:`_ddp_ranks` with two ranks) The generic line said only "check the other ranks for
    a late peer … cluster view over every rank's trace" of a capture holding two ranks the NCCL section already
    compares: with ≥ 2 NCCL ranks in the trace the line is `comm_exposed.generic.here` (the NCCL section first; the
    cluster view for ranks captured elsewhere)."""
    f = finding_of(report_of(_ddp_ranks(2), tmp_path), "comm_exposed")
    assert ADVICE["comm_exposed.generic.here"].text in f["recommendation"]
    assert ADVICE["comm_exposed.generic"].text not in f["recommendation"]


def test_the_forward_backward_range_of_an_iteration_is_the_step_not_its_microbatches(tmp_path: Path) -> None:
    """Megatron's ``forward_backward_func`` around one iteration: 5 iterations, iteration i at t = T0 + 25 i ms,
    NVTX `forward-backward` [t, t + 20) ms holding 4 microbatch `forward_step` ranges [t + 2m, t + 2m + 2) ms (one
    GEMM each, launched 10 µs in, run 1.5 ms) then 4 `backward_step` ranges [t + 8 + 3m, t + 11 + 3m) ms (one
    flash-backward kernel each, 2.5 ms); the distributed optimizer's all-gather outside it at t + 21 ms. The
    microbatch ranges (step-like: `forward_step`) were the steps, 20 of them of 2 ms, "step time" a microbatch's
    forward; `forward-backward` spans the iteration and is now the step: 5 steps of 20 ms."""
    b = TraceBuilder("2024.2")
    b.process(100)
    g = b.thread(100, 100, "pt_main_thread")
    for i in range(5):
        t = T0 + i * 25 * MS
        b.nvtx_push_pop(t, t + 20 * MS, "forward-backward", tid_g=g)
        for m in range(4):
            f = t + 2 * m * MS
            b.nvtx_push_pop(f, f + 2 * MS, "forward_step", tid_g=g)
            b.launch(f + 10 * US, f + 15 * US, f + 20 * US, f + 1_520 * US, pid=100, tid=100, name=GEMM)
            k = t + (8 + 3 * m) * MS
            b.nvtx_push_pop(k, k + 3 * MS, "backward_step", tid_g=g)
            b.launch(k + 10 * US, k + 15 * US, k + 20 * US, k + 2_520 * US, pid=100, tid=100, name=FLASH_B)
        b.launch(t + 21 * MS, t + 21 * MS + 5 * US, t + 21 * MS + 10 * US, t + 22 * MS, pid=100, tid=100, name=AG)
    steps = report_of(b, tmp_path)["steps"]
    assert steps["step_ranges"] == ["forward-backward"], steps["step_ranges"]
    assert steps["step_count"] == 5 and steps["summary"]["p50_ns"] == 20 * MS
