"""Compare verdicts on pairs where one well-known optimization changed (docs/COMPARE.md).

The loop (:func:`synth.loops.synced_loop`, exact rows, no jitter): per step a 16 µs H2D copy, the kernels back to
back from t + 20 µs, a ``cudaStreamSynchronize`` returning 5 µs after the last, an NVTX ``execute_model`` range;
the next step starts 645 µs after the sync returns, so the step period is 670 µs + Σ kernel durations."""

from __future__ import annotations

import pytest
from synth.loops import SAMPLER, synced_loop
from synth.scenarios.names import K

import nsys_llm_explainer as nle
from nsys_llm_explainer.comparison.gate import gate

US = 1_000
FP8_GEMM = ("sm90_xmma_gemm_e4m3e4m3_bf16f32_f32_tn_n_tilesize128x128x128_warpgroupsize1x1x1_"
            "execute_segment_k_off_kernel__5x_cublas")
FP8_QUANT = ("void vllm::dynamic_scaled_fp8_quant_kernel<c10::BFloat16, c10::Float8_e4m3fn>(c10::Float8_e4m3fn*, "
             "const c10::BFloat16*, const float*, int)")
NCCL_A2A = "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)"
DISPATCH = "void deep_ep::internode_ll::dispatch<7, 1, 7168>(void*, float*, int*, long*, int, int, int, bool, int)"
COMBINE = "void deep_ep::internode_ll::combine<7, 1, 7168>(void*, void*, int*, void*, int, int, int, bool)"


def test_fp8_quantization_is_the_same_workload_and_faster(tmp_path):
    """BASE: BF16 GEMM 200 µs, FlashAttention 100, RMS norm 20, sampler 10 (330 µs: period 1.000 ms). NEW: the same
    model with FP8 weights — a ``dynamic_scaled_fp8_quant`` of 5 µs and an FP8 (e4m3) cuBLAS GEMM of 120 µs in place
    of the BF16 GEMM (255 µs: period 0.925 ms). Truth: the same work, 7.5 % faster, all of it the GEMM (category
    `gemm` −0.080 ms per step, `quantize` +0.005 ms). It read "not compared — too different to compare: the runs
    share little kernel work: BASE spends only 39 % of its kernel time in kernel names NEW also ran" (130 / 330; NEW
    130 / 255 = 51 %), and ``--fail-on-regression`` exited 4 on the very change FP8 is measured for.

    Fixed (``comparison.measure.precision_renamed``, docs/COMPARE.md "Too short, too different"): the `gemm` names
    only one run ran are renamed by a precision change — one launch per step on each side, formats {} vs {fp8}, and
    the rest of each run (FlashAttention, norm, sampler: 130 µs) all in common names — and NEW's `quantize` kernel
    (1 launch per step ≤ 1 renamed launch) is its price: kernel time in common BASE 330 / 330, NEW 255 / 255 = 1."""
    base = synced_loop(str(tmp_path / "b.sqlite"), ((K.GEMM_QKV, 200), (K.FLASH, 100), (K.RMS_NORM, 20),
                                                    (SAMPLER, 10)))
    new = synced_loop(str(tmp_path / "n.sqlite"), ((FP8_QUANT, 5), (FP8_GEMM, 120), (K.FLASH, 100),
                                                   (K.RMS_NORM, 20), (SAMPLER, 10)))
    res = nle.compare([base, new], labels=["BASE", "NEW"])
    c = res.comparisons[0]
    assert (c.metric_base.p50_ns, c.metric_new.p50_ns) == (1_000 * US, 925 * US)
    cats = {d.name: d.delta_per_unit_ns for d in c.category_changes}
    assert (cats["gemm"], cats["quantize"]) == (-80 * US, 5 * US)
    assert (c.status, c.verdict, c.change_pct) == ("comparable", "faster", pytest.approx(-7.5))
    assert c.common_kernel_share == 1.0 and c.reasons == ()
    assert c.headline[-1] == ("Compared across a precision change: NEW's fp8 `gemm` kernels replace BASE's (1 launch "
                              "per step in each), NEW's `quantize` kernels counted with them.")
    assert gate(res, 5.0)[1] == 0


def _exchange_pair(tmp_path):
    """BASE: GEMM 200 µs, an NCCL all-to-all (``SendRecv``) 80, FlashAttention 100, sampler 10 (390 µs: period
    1.060 ms); NEW: DeepEP's low-latency dispatch 20 and combine 20 in place of the NCCL exchange (350 µs: 1.020
    ms)."""
    base = synced_loop(str(tmp_path / "b.sqlite"), ((K.GEMM_QKV, 200), (NCCL_A2A, 80), (K.FLASH, 100),
                                                    (SAMPLER, 10)))
    new = synced_loop(str(tmp_path / "n.sqlite"), ((K.GEMM_QKV, 200), (DISPATCH, 20), (COMBINE, 20),
                                                   (K.FLASH, 100), (SAMPLER, 10)))
    return nle.compare([base, new], labels=["BASE", "NEW"]).comparisons[0]


def test_deepep_replacing_nccl_all_to_all_verdict_and_parts(tmp_path):
    """The DeepEP pair: the same workload (kernel time in common names BASE 310 / 390 = 79 %, NEW 310 / 350 = 89 %),
    3.8 % faster (1.060 → 1.020 ms: (1 020 − 1 060) / 1 060 = −3.77 %); the parts table moves the exchange from
    `nccl` (0.080 ms per step → none) to `all_to_all` (none → 0.040 ms), the other parts unchanged."""
    c = _exchange_pair(tmp_path)
    assert (c.metric_base.p50_ns, c.metric_new.p50_ns) == (1_060 * US, 1_020 * US)
    assert (c.status, c.verdict, round(c.change_pct, 2)) == ("comparable", "faster", -3.77)
    cats = {d.name: (d.base_per_unit_ns, d.new_per_unit_ns) for d in c.category_changes}
    assert (cats["nccl"], cats["all_to_all"]) == ((80 * US, 0), (0, 40 * US))
    assert cats["gemm"] == (200 * US, 200 * US) and cats["attention"] == (100 * US, 100 * US)


def test_a_replaced_exchange_is_not_a_main_reason_twice_the_change(tmp_path):
    """The DeepEP pair: NEW is 0.040 ms per step faster, all of it the all-to-all exchange (80 → 40 µs). The headline
    reads "Main reason: non-overlapped GPU time in `nccl` kernels −0.080 ms per step (window time per step 1.060 ms →
    1.020 ms)": twice the whole change, with nothing saying that half of it came back as `all_to_all` +0.040 ms (the
    next row of the parts table). The same shape in other replacements: vLLM's custom all-reduce (`nccl`
    −0.240, `custom_allreduce` +0.096 ms per step in a 0.144 ms gain) and torch.compile (eager RMS norm's pow / mean /
    rsqrt kernels, category `elementwise` −0.132 ms, fused into ``triton_per_…rsqrt`` kernels of category `norm`
    +0.044 ms).

    Fix I would make: the main-reason line names the part of the opposite sign that offsets it when that part's
    delta is at least a quarter of the main reason's ("… `nccl` kernels −0.080 ms per step, offset by `all_to_all`
    +0.040 ms …"; compare.json's Comparison gains the offsetting Delta), docs/COMPARE.md "Where the change comes
    from" saying so. Fixed so (``diff.OFFSET_SHARE``); 0.040 ≥ 0.25 × 0.080."""
    c = _exchange_pair(tmp_path)
    assert c.headline[2] == ("Main reason: non-overlapped GPU time in `nccl` kernels −0.080 ms per step, offset by "
                             "`all_to_all` kernels +0.040 ms (window time per step 1.060 ms → 1.020 ms).")


def _graph_level(path, steps: int = 40) -> str:
    """The synced loop's kernels (GEMM 200, FlashAttention 100, RMS norm 20, sampler 10 µs) run as one CUDA graph per
    step, traced graph-level (nsys's default ``--cuda-graph-trace=graph``): one ``cudaGraphLaunch`` (12 µs) and one
    GRAPH_TRACE row per step (the 330 µs of kernels, 1 µs apart: 333 µs), no kernel row."""
    from synth import TraceBuilder

    b = TraceBuilder("2024.2")
    b.process(100)
    g = b.thread(100, 100)
    b.gpu(0)
    t = 1_000 * US
    for _ in range(steps):
        ks, k = [], t + 20 * US
        for name, dur in ((K.GEMM_QKV, 200), (K.FLASH, 100), (K.RMS_NORM, 20), (SAMPLER, 10)):
            ks.append((k, k + dur * US, name))
            k += (dur + 1) * US
        b.graph_launch(t + 2 * US, t + 14 * US, pid=100, tid=100, kernels=ks, node_mode=False)
        c = b.runtime(t + 14 * US, k + 5 * US, tid_g=g, name="cudaStreamSynchronize_v3020")
        b.sync(t + 14 * US, k + 5 * US, pid=100, sync_type=3, corr=c)
        b.nvtx_push_pop(t, k + 15 * US, "execute_model", tid_g=g)
        t = k + 650 * US
    return b.write(str(path), overwrite=True)


def test_a_graph_level_capture_is_not_a_run_with_no_gpu_work(tmp_path):
    """BASE: the eager synced loop; NEW: the same kernels as one CUDA graph per step, captured with nsys's default
    graph-level tracing (no kernel rows; the GPU busy 333 µs per step in whole-graph executions). The comparison read
    "not compared — too different to compare: no kernel ran in the whole capture of NEW" and the gate "NEW NEW has no
    GPU work (no kernel in the whole capture)" — false: NEW's GPU ran every step's kernels (GPU busy 40 × 333 µs
    over the capture, first step's start to the last range's end, 39 × 1 003 + 368 µs: 13.320 / 39.485 ms =
    33.7 %); its kernels are not in the trace. The headline's busy line read "of BASE's the steady window / NEW's
    the whole capture". Now the reason and the gate line say what is missing and why; the pair stays not compared
    (no kernel names to compare; the gate fails closed, exit 4)."""
    base = synced_loop(str(tmp_path / "b.sqlite"))
    res = nle.compare([base, _graph_level(tmp_path / "n.sqlite")], labels=["BASE", "NEW"])
    c = res.comparisons[0]
    assert (c.status, c.verdict) == ("too_different", "not_compared")
    assert c.reasons == ("the kernels of NEW are not in the trace: its GPU work in the whole capture is whole "
                         "CUDA-graph executions traced without their kernels (nsys --cuda-graph-trace=node records "
                         "them)",)
    assert c.headline[-1] == "GPU busy 33.5 % → 33.7 % of BASE's steady window / NEW's whole capture."
    lines, code = gate(res, 5.0)
    assert code == 4 and lines[0].startswith(
        "NOT COMPARABLE, failing (exit 4): NEW NEW has no kernel in the trace (its GPU work in the whole capture is "
        "whole CUDA-graph executions, traced without their kernels) — too different to compare: the kernels of NEW")


def test_a_graph_level_capture_alone_is_not_a_trace_without_gpu_work(tmp_path):
    """The single report of the graph-level NEW above said "No GPU kernels in the trace: nothing to diagnose" and
    warned "No CUDA kernels were captured — was `--trace=cuda` on?" beside "GPU busy 33.7 %": CUDA was traced (40
    `cudaGraphLaunch` calls, 40 whole-graph executions of 333 µs: 13.320 ms of the 39.525 ms window). The gate is
    now only for a trace whose devices ran nothing: the verdict is the graph-level finding, the warning the
    graph-level one alone, and the loop's own findings (the per-step sync) follow it."""
    rep = nle.analyze(_graph_level(tmp_path / "n.sqlite"))
    ids = [f.id for f in rep.findings]
    assert ids[0] == "graph_trace_mode" and "no_gpu_work" not in ids and "step_sync" in ids
    assert rep.headline.top_finding_id == "graph_trace_mode"
    assert not any("was `--trace=cuda` on" in w for w in rep.warnings)
    assert any(w.startswith("CUDA graphs were traced at graph level") for w in rep.warnings)
    (d,) = rep.gpu_time.devices
    assert (d.busy_ns, d.window_ns) == (13_320 * US, 39_525 * US)
