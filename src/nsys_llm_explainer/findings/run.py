"""Run every finding rule over the typed results and rank them (the only entry point of ``findings``)."""

from __future__ import annotations

from typing import List, Optional, Tuple

from ..analyses.api.graphs import GraphResult
from ..analyses.comms.nccl import NcclResult
from ..analyses.idle.causes import IdleCausesResult
from ..analyses.idle.gpu_time import GpuTimeResult
from ..analyses.idle.host_samples import HostSamplesResult
from ..analyses.kernels.categories import CategoryResult
from ..analyses.kernels.summary import KernelSummary
from ..analyses.kernels.traits import KernelTraitsResult
from ..analyses.memory.copy_engines import CopyEnginesResult
from ..analyses.memory.unified import UnifiedMemoryResult
from ..analyses.nvtx.attribution import AttributionResult
from ..analyses.steps.sync import StepSyncResult
from ..analyses.threads.waits import WaitsResult
from ..analyses.trace.facts import TraceFacts
from ..analyses.trace.window import WindowResult
from ..model.trace import TraceModel
from ..options import Options
from .base import Finding
from .capture import capture_window_finding, gate_finding, graph_trace_finding, nccl_finding, nvtx_coverage_finding
from .copy_path import copy_path_finding
from .idle import DeviceKernels, active_devices, idle_findings
from .kernels import kernel_findings
from .rank import Headline, headline, rank
from .step_sync import claimed_ns, step_sync_finding
from .unified_memory import unified_memory_finding


def run_findings(gpu_time: GpuTimeResult, idle_causes: IdleCausesResult, traits: KernelTraitsResult,
                 facts: TraceFacts, step_sync: StepSyncResult, window: WindowResult, steady_kernels: KernelSummary,
                 categories: CategoryResult, graphs: GraphResult, nccl: NcclResult,
                 unified_memory: Optional[UnifiedMemoryResult], host_samples: Optional[HostSamplesResult],
                 kernels: KernelSummary, attribution: AttributionResult, options: Options,
                 waits: Optional[WaitsResult] = None, copy_engines: Optional[CopyEnginesResult] = None
                 ) -> Tuple[Tuple[Finding, ...], Headline]:
    """Every finding of the typed results, ranked, and the headline (the analysis graph's ``findings`` step: its
    parameters are the graph's values of the same names)."""
    advice_facts = facts.advice_facts()
    pooled = gpu_time.pooled() if gpu_time.available else None
    busy = pooled.busy_pct if pooled else None
    gate = gate_finding(gpu_time, kernels.kernel_count if kernels.available else 0, kernels.reason, advice_facts)
    kern = {d.device_id: DeviceKernels(d.device_id, d.kernel_p50_ns, d.launches_per_s) for d in gpu_time.devices}
    found: List[Finding] = []
    ran = set(gpu_time.kernel_devices())
    ss = step_sync_finding(step_sync, advice_facts, ran)   # claims host idle ns before the idle findings
    found += [ss] if ss is not None else []
    active = active_devices(gpu_time) if gpu_time.available else None
    cp, cp_claimed = copy_path_finding(copy_engines, idle_causes, active, advice_facts)
    found += [cp] if cp is not None else []     # claims the copy idle ns of its path before the idle findings
    found += idle_findings(idle_causes, gpu_time, kern, window.full_start_ns, traits, advice_facts,
                           launch_ranges=attribution.launch_range_details() if attribution.available
                           else frozenset(),
                           samples=host_samples, claimed=claimed_ns(step_sync, ss), waits=waits,
                           launches_known=attribution.available, copy_claimed=cp_claimed)
    top = steady_kernels.by_name if steady_kernels.available else ()
    cats = categories.overall if categories.available else ()
    found += kernel_findings(gpu_time, traits, top, cats, advice_facts)
    for f in (graph_trace_finding(graphs, pooled.idle_ns if pooled else 0, advice_facts),
              capture_window_finding(window, gpu_time, advice_facts),
              nvtx_coverage_finding(attribution, options.nvtx_coverage_warn_threshold, advice_facts),
              nccl_finding(nccl, advice_facts),
              unified_memory_finding(unified_memory, active, advice_facts)):
        if f is not None:
            found.append(f)
    ranked = rank(found, gate, busy, idle_causes, advice_facts, sorted(ran))
    return ranked, headline(ranked, busy, window.method)


def collect_warnings(model: TraceModel, kernels: KernelSummary, att: AttributionResult, graphs: GraphResult,
                     opts: Options) -> Tuple[str, ...]:
    """The report's warnings: the model's (what the read dropped or repaired) and the partial analyses'."""
    w = list(model.warnings)
    if not kernels.available and kernels.reason:
        w.append(kernels.reason[0].upper() + kernels.reason[1:])
    thr = opts.nvtx_coverage_warn_threshold
    if att.available and att.coverage < thr:
        w.append(f"NVTX→kernel attribution covers {att.coverage * 100:.1f}% of kernel time "
                 f"(< {thr * 100:.1f}%): per-range and per-phase GPU time is partial.")
    g = graphs
    if g.available and g.graph_level_hidden:
        w.append(g.warning or "CUDA graphs ran with graph-level tracing: their kernels are not in the trace.")
    return tuple(w)


