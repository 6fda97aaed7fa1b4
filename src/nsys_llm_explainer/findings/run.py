"""The per-step sync and capture rules as steps of the analysis graph (the idle, kernel and copy-path rules are steps
in their own modules; each declares what it reads by its parameters' names), the ranking of every rule's findings,
and the report's warnings."""

from __future__ import annotations

from typing import List, Optional, Tuple

from ..analyses.api.graphs import GraphResult
from ..analyses.comms.nccl_result import NcclResult
from ..analyses.idle.causes import IdleCausesResult
from ..analyses.idle.gpu_time import GpuTimeResult
from ..analyses.kernels.summary import KernelSummary
from ..analyses.memory.unified import UnifiedMemoryResult
from ..analyses.nvtx.attribution import AttributionResult
from ..analyses.nvtx.ranges import NvtxResult
from ..analyses.steps.sync import StepSyncResult
from ..analyses.trace.facts import TraceFacts
from ..analyses.trace.info import TraceInfoResult
from ..analyses.trace.window import WindowResult
from ..model.trace import TraceModel
from ..options import Options
from ..vocabulary.windows import window_name
from .base import Claims, Finding
from .capture import capture_window_finding, gate_finding, graph_trace_finding, nccl_finding, nvtx_coverage_finding
from .rank import Headline, headline, rank
from .step_sync import step_sync_finding
from .unified_memory import unified_memory_finding

# Each rule below is a step of the analysis graph (graph.STEPS): its parameters are the graph's values of the same
# names (the runner binds them by name), so each rule declares exactly what it reads.


def step_sync_claims(step_sync: StepSyncResult, facts: TraceFacts, gpu_time: GpuTimeResult) -> Claims:
    """The per-step sync finding (on devices that ran kernels) and the host idle ns it claims."""
    f = step_sync_finding(step_sync, facts.advice_facts(), set(gpu_time.kernel_devices()))
    return Claims(f, step_sync.claimed() if f is not None else {})   # claimed only when the finding is made


def capture_rule(graphs: GraphResult, gpu_time: GpuTimeResult, window: WindowResult, attribution: AttributionResult,
                 options: Options, nccl: NcclResult, unified_memory: Optional[UnifiedMemoryResult],
                 facts: TraceFacts, nvtx: NvtxResult, window_repeats: bool,
                 trace: TraceInfoResult) -> Tuple[Finding, ...]:
    """Findings about the capture and the signals beside the idle time: graph-level tracing, the window's edges,
    NVTX coverage, NCCL waits, Unified Memory; ``window_repeats``: the window holds repeated steps (graph value)."""
    advice = {**facts.advice_facts(),
              "capture_bounded": trace.session is not None and trace.session.bounded_by is not None}
    pooled = gpu_time.pooled()
    active = set(gpu_time.kernel_devices()) if gpu_time.available else None
    found = (graph_trace_finding(graphs, pooled.idle_ns if pooled else 0, advice),
             capture_window_finding(window, gpu_time, advice, window_repeats),
             nvtx_coverage_finding(attribution, options.nvtx_coverage_warn_threshold, advice,
                                   [r.name for r in nvtx.ranges]),
             nccl_finding(nccl, advice),
             unified_memory_finding(unified_memory, active, advice,
                                    window_name(window.method, window.details.bins is not None,
                                                window_repeats)))
    return tuple(f for f in found if f is not None)


def rank_findings(gpu_time: GpuTimeResult, idle_causes: IdleCausesResult, kernels: KernelSummary,
                  window: WindowResult, window_repeats: bool, facts: TraceFacts, step_sync_claims: Claims,
                  copy_path_claims: Claims,
                  idle_found: Tuple[Finding, ...], kernel_found: Tuple[Finding, ...],
                  capture_found: Tuple[Finding, ...]) -> Tuple[Tuple[Finding, ...], Headline]:
    """Every rule's findings (with the too-little-work gate), ranked, and the headline."""
    advice = facts.advice_facts()
    pooled = gpu_time.pooled()
    busy = pooled.busy_pct if pooled else None
    gate = gate_finding(gpu_time, kernels.kernel_count if kernels.available else 0, kernels.reason, advice)
    found: List[Finding] = [c.finding for c in (step_sync_claims, copy_path_claims) if c.finding is not None]
    found += [*idle_found, *kernel_found, *capture_found]
    ranked = rank(found, gate, busy, idle_causes, advice, sorted(gpu_time.kernel_devices()),
                  window_name(window.method, window.details.bins is not None, window_repeats))
    kdev = set(gpu_time.kernel_devices())      # the devices the findings speak for (and the busy % pools)
    idle = sum(d.idle_ns for d in idle_causes.devices if d.device_id in kdev) if idle_causes.available else 0
    return ranked, headline(ranked, busy, window.method, idle)


def collect_warnings(model: TraceModel, kernels: KernelSummary, attribution: AttributionResult, graphs: GraphResult,
                     options: Options) -> Tuple[str, ...]:
    """The report's warnings: the model's (what the read dropped or repaired) and the partial analyses'."""
    w = list(model.warnings)
    hidden = graphs.available and graphs.graph_level_hidden   # no kernel rows because the graphs hide them
    if not kernels.available and kernels.reason and not hidden:
        w.append(kernels.reason[0].upper() + kernels.reason[1:])
    thr = options.nvtx_coverage_warn_threshold
    if attribution.available and attribution.coverage < thr:
        se = attribution.startend_kernel_ns      # start/end ranges enclosing launches: coverage is push/pop only
        w.append(f"NVTX→kernel attribution covers {attribution.coverage * 100:.1f}% of kernel time "
                 f"(< {thr * 100:.1f}%): per-range and per-phase GPU time is partial." if not se else
                 f"NVTX→kernel attribution covers {attribution.coverage * 100:.1f}% of kernel time with push/pop "
                 f"ranges (< {thr * 100:.1f}%); start/end ranges enclose the launches of "
                 f"{100.0 * se / attribution.total_kernel_ns:.1f} % but take no part in phases or innermost "
                 "ranges: per-phase GPU time is partial.")
    if hidden:
        w.append(graphs.warning or "CUDA graphs ran with graph-level tracing: their kernels are not in the trace.")
    return tuple(w)


