"""Findings about the capture rather than the workload, and the ones that gate all performance claims:

* ``no_gpu_work`` — no kernels: nothing to diagnose (no performance claim is made).
* ``too_little_work`` — fewer than ``MIN_KERNELS`` kernels and under ``MIN_BUSY_NS`` of GPU busy time in
  the window: the trace shows start-up only; idle and kernel claims are withheld.
* ``graph_trace_mode`` — CUDA graphs traced at graph level: kernels missing (ranked first).
* ``capture_window`` — the warm-up / tail explain idle only when trimming them lowers pooled idle by at
  least ``WARMUP_IDLE_POINTS`` percentage points (full − steady).
* ``nvtx_coverage`` — NVTX ranges cover little kernel time (low).
* ``nccl_wait`` — a matched straggler rank from the NCCL analysis.
"""

from __future__ import annotations

from typing import Optional

from ..analyses.graphs import GraphResult
from ..analyses.idle import GpuTimeResult
from ..analyses.nccl import NcclResult
from ..analyses.window import WindowResult
from .base import MIN_BUSY_NS, MIN_KERNELS, Check, Finding, Scope, ms
from .text import stack_tips

WARMUP_IDLE_POINTS = 10.0


def gate_finding(gpu: GpuTimeResult, kernel_count_total: int, kernels_reason: Optional[str]) -> Optional[Finding]:
    """The finding that withholds performance claims, or None when there is a workload to diagnose."""
    if kernel_count_total == 0:
        return Finding(
            id="no_gpu_work", category="no_gpu_work", severity="info", confidence="high",
            title="No GPU kernels in the trace: nothing to diagnose",
            evidence=(kernels_reason or "The export holds no kernel rows.",),
            recommendation=("Capture with `nsys profile --trace=cuda,nvtx` around the GPU part of the program.",),
            time_at_stake_ns=0, checks=(Check("kernel_count", 0, "==", 0, Scope(window="full")),),
            about_capture=True)
    p = gpu.pooled()
    kc = sum(d.kernel_count for d in gpu.devices)
    if p is None or (kc < MIN_KERNELS and p.busy_ns < MIN_BUSY_NS):
        busy = p.busy_ns if p else 0
        return Finding(
            id="too_little_work", category="too_little_work", severity="info", confidence="high",
            title=f"Too little GPU work to diagnose: {kc} kernels, {ms(busy)} of GPU time in the window",
            evidence=(f"{kc} kernels keep the GPU busy {ms(busy)} of {ms(p.window_ns if p else 0)}; the trace shows "
                      "start-up and one-off work, so no utilisation or kernel conclusion is drawn.",),
            recommendation=("Capture a run of the real workload (several steady steps after warm-up).",),
            time_at_stake_ns=0,
            checks=(Check("kernel_count", kc, "<", MIN_KERNELS), Check("busy_ns", busy, "<", MIN_BUSY_NS)),
            about_capture=True)
    return None


def graph_trace_finding(g: GraphResult, idle_ns: int) -> Optional[Finding]:
    if not g.available or not g.graph_level_hidden:
        return None
    return Finding(
        id="graph_trace_mode", category="graph_trace_mode", severity="high", confidence="high",
        title="CUDA graphs were traced at graph level: their kernels are missing",
        evidence=(f"{g.graph_launch_count} CUDA graph launches but no kernel rows linked to them.",
                  f"Capture metadata graph trace mode: {g.capture_graph_trace_mode or 'not recorded'}."),
        recommendation=("Re-capture with `nsys profile --cuda-graph-trace=node` so every kernel inside the graphs is "
                        "recorded; until then per-kernel tables and idle causes are unreliable.",),
        time_at_stake_ns=idle_ns, blocks_analysis=True)


def capture_window_finding(w: WindowResult, gpu: GpuTimeResult, stack: str) -> Optional[Finding]:
    if w.is_full or not gpu.available:
        return None
    full, steady = gpu.pooled(full=True), gpu.pooled()
    if full is None or steady is None:
        return None
    change = full.idle_pct - steady.idle_pct
    check = Check("idle_pct_change", change, ">=", WARMUP_IDLE_POINTS)
    if not check.holds():
        return None
    return Finding(
        id="capture_window", category="capture_window", severity="low", confidence="high",
        title=f"Warm-up / tail make the whole capture look {change:.0f} points idler than the steady state",
        evidence=(f"Idle {full.idle_pct:.1f} % over the whole capture vs {steady.idle_pct:.1f} % in the steady "
                  f"window ({ms(w.warmup_ns)} of warm-up and {ms(w.tail_ns)} of tail trimmed). {w.reason}",),
        recommendation=("Capture only the steady state: `nsys profile --capture-range=cudaProfilerApi` with "
                        "`torch.cuda.profiler.start()/stop()` around a few steps after warm-up, or `--delay`/"
                        "`--duration`.",) + tuple(stack_tips("capture_window", stack)),
        time_at_stake_ns=w.warmup_ns + w.tail_ns, checks=(check,), about_capture=True)


def nvtx_coverage_finding(coverage: Optional[float], threshold: float, attributed_ns: int,
                          total_ns: int) -> Optional[Finding]:
    if coverage is None or coverage >= threshold:
        return None
    return Finding(
        id="nvtx_coverage", category="nvtx_coverage", severity="low", confidence="high",
        title="NVTX ranges cover little of the GPU time",
        evidence=(f"{coverage * 100:.1f} % of kernel time ({ms(attributed_ns)} of {ms(total_ns)}) is launched "
                  "inside an NVTX push/pop range.",),
        recommendation=("Add NVTX ranges around prefill/decode steps (vLLM/SGLang can emit them) to get per-phase "
                        "GPU time.",),
        time_at_stake_ns=0, about_capture=True)


def nccl_finding(n: NcclResult) -> Optional[Finding]:
    v = n.straggler if n.available else None
    if v is None or v.wait_ns_total <= 0:
        return None
    wait = v.wait_ns_total
    return Finding(
        id="nccl_wait", category="nccl_wait", severity="high" if v.confidence == "high" else "medium",
        confidence=v.confidence,
        title=f"NCCL wait: rank {v.waiting_rank} waits in collectives for late rank {v.late_rank}",
        evidence=(f"Across {v.matched_collectives} matched collectives the late rank arrived {ms(wait)} "
                  "after the earliest in total.",
                  f"{v.late_rank} arrived last in {v.late_share * 100:.0f} % of them."),
        recommendation=("Balance the work before the collective on the late rank (uneven batch split, extra host "
                        "work or a slower GPU); check its step timeline.",),
        time_at_stake_ns=wait)

