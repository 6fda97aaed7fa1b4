"""The diagnosis analyses, as one explicit flow of pure functions (nothing is mutated after it is built):

window (decided once) → steady model (clipped) → device timelines (one device at a time) → idle causes →
GPU time per device → kernel traits, steady-window kernels, CUDA graphs, NCCL, launch rate; beside them (on a
second thread when given) phases → categories → steps; then memory (needs the steps) and Unified Memory.
"""

from __future__ import annotations

import dataclasses
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple

import numpy as np

from .analyses.api.graphs import GraphResult, analyze_graphs
from .analyses.api.launch import LaunchResult, analyze_launch
from .analyses.common.stats import kernel_stats
from .analyses.comms.nccl import NcclResult, analyze_nccl
from .analyses.idle.bins import DEFAULT_BINS
from .analyses.idle.causes import IdleCausesResult, analyze_idle_causes
from .analyses.idle.gpu_time import DeviceTime, GpuTimeResult, device_time, gpu_time_result, window_times
from .analyses.idle.host_samples import HostSamplesResult, analyze_host_samples
from .analyses.idle.result import DeviceCauses
from .analyses.kernels.categories import CategoryResult, analyze_categories
from .analyses.kernels.summary import KernelSummary, analyze_kernels
from .analyses.kernels.traits import KernelTraitsResult, analyze_kernel_traits
from .analyses.memory.traffic import MemoryResult, analyze_memory
from .analyses.memory.unified import UnifiedMemoryResult, analyze_unified_memory
from .analyses.nvtx.attribution import AttributionResult
from .analyses.nvtx.tree import NvtxTree
from .analyses.steps.metrics import StepResult, analyze_steps
from .analyses.steps.phases import PhaseResult, analyze_phases
from .analyses.steps.sync import StepSyncContext, StepSyncResult, StepSyncSeries, device_step_sync, step_sync_result
from .analyses.trace.facts import TraceFacts, analyze_facts
from .analyses.trace.window import WindowResult, detect_window
from .config.categories import load_rules
from .config.phase_map import build_phase_map
from .model.clip import clip_model
from .model.timeline import DeviceTimeline, build_timelines, iter_timelines
from .model.trace import TraceModel
from .options import Options
from .tasks import Task, gather


@dataclass(frozen=True)
class Diagnosis:
    window: WindowResult
    steady: TraceModel
    gpu_time: GpuTimeResult
    idle_causes: IdleCausesResult
    traits: KernelTraitsResult
    steady_kernels: KernelSummary
    phases: PhaseResult
    categories: CategoryResult
    steps: StepResult
    graphs: GraphResult
    memory: MemoryResult
    nccl: NcclResult
    launch: LaunchResult
    facts: TraceFacts
    step_sync: StepSyncResult          # per-step synchronization (analyses/steps/sync.py)
    unified_memory: Optional[UnifiedMemoryResult] = None   # None only for a Diagnosis built without it
    host_samples: Optional[HostSamplesResult] = None   # CPU samples in host-side idle (idle/host_samples.py)


def _kernel_pids(model: TraceModel) -> Set[int]:
    k = model.kernels
    return set(np.unique(k.pid).tolist()) if k is not None and len(k) else set()


def _traits(model: TraceModel, steady: TraceModel, processes: Sequence[Dict[str, Any]]) -> KernelTraitsResult:
    k = steady.kernels
    pids = _kernel_pids(model)
    threads = [n for g, n in model.thread_names.items() if ((int(g) >> 24) & 0xFFFFFF) in pids]
    procs = [str(p.get("name", "")) for p in processes if p.get("pid") in pids]
    nv = model.nvtx.names if model.nvtx is not None else []
    if k is None or len(k) == 0:
        kk = model.kernels
        names = kk.names if kk is not None else []
        return analyze_kernel_traits(names, np.empty(0, np.int64), np.empty(0, np.int64), nv, threads, procs)
    return analyze_kernel_traits(k.names, k.name_idx, k.dur, nv, threads, procs, kernel_stats(steady, "name"))


def _structure_lane(model: TraceModel, opts: Options, tree: Optional[NvtxTree], att: AttributionResult
                    ) -> Tuple[PhaseResult, Optional[AttributionResult], CategoryResult, StepResult]:
    """Phases, categories and steps: the longest chain that does not need the window."""
    phase_map = opts.phase_map if opts.phase_map is not None else build_phase_map(None)
    phase_nodes = att.kernel_nodes if att.kernel_nodes else att.kernel_node
    kernel_node = att.kernel_nodes.get(0, att.kernel_node) if att.kernel_nodes else att.kernel_node
    phases = analyze_phases(model, phase_map, tree, phase_nodes)
    new_att = None
    if opts.phase_map and phases.available and att.available:
        new_att = dataclasses.replace(att, phases=tuple(
            {"phase": r["phase"], "kernel_count": r["kernel_count"], "kernel_ns": r["gpu_time_ns"],
             "pct_of_kernel_time": r["pct_of_kernel_time"]} for r in phases.phases))
    kernel_phase = phases.kernel_phase if phases.available else None
    phase_names = phases.phase_names if phases.available else None
    rules = opts.categories if opts.categories is not None else load_rules(None, None)
    categories = analyze_categories(model, rules, kernel_phase, phase_names, opts.include_memcpy_in_busy)
    steps = analyze_steps(model, phases, step_marker=opts.step_marker, step_range=opts.step_range,
                          top=min(opts.top, 10), tree=tree, kernel_node=kernel_node,
                          domain_nodes=att.kernel_nodes or None)
    return phases, new_att, categories, steps


def run_diagnosis(model: TraceModel, opts: Options, tree: Optional[NvtxTree], att: AttributionResult,
                  processes: Sequence[Dict[str, Any]], pool: Optional[Executor] = None
                  ) -> Tuple[Diagnosis, Optional[AttributionResult]]:
    """All diagnosis results, and the NVTX attribution with phase totals set from the phases section when a
    user phase map is given (a new object; ``att`` is not changed). With ``pool`` the window-independent
    analyses run on it while this thread builds the timelines (numpy releases the GIL in its big loops)."""
    lane = Task(pool, _structure_lane, model, opts, tree, att)
    window = detect_window(model, opts.window, opts.window_nvtx)
    steady = model if window.is_full else clip_model(model, window.start_ns, window.end_ns)
    full_times = None
    if not window.is_full:   # only the full capture's totals are reported: its per-row timelines are dropped at once
        full_times = window_times(build_timelines(model, window.full_start_ns, window.full_end_ns,
                                                  opts.include_memcpy_in_busy))
    # one device at a time: its timeline → idle causes → busy/idle figures, then it is dropped (memory ∝ 1 device)
    dev_times: List[DeviceTime] = []
    ss_ctx = StepSyncContext(steady)              # per-step sync series, cut from the same timelines and pieces
    ss_series: List[StepSyncSeries] = []

    def per_device(tl: DeviceTimeline, dc: DeviceCauses) -> None:
        full = full_times.get(tl.device_id) if full_times is not None else tl
        dev_times.append(device_time(tl, full, dc.gap_cause, opts.top))
        ss_series.extend(device_step_sync(ss_ctx, tl, dc))

    causes = analyze_idle_causes(model, steady, iter_timelines(steady, window.start_ns, window.end_ns,
                                                                opts.include_memcpy_in_busy),
                                 tree, DEFAULT_BINS, per_device)
    gpu = gpu_time_result(dev_times, opts.include_memcpy_in_busy)
    # queued behind the phases → categories → steps lane on the other thread; this thread takes back whichever
    # has not started yet once its own work is done
    late = [Task(pool, analyze_graphs, model), Task(pool, analyze_nccl, model),
            Task(pool, analyze_launch, steady, window.end_ns - window.start_ns, opts.top)]
    traits, steady_kernels = _traits(model, steady, processes), analyze_kernels(steady)
    graphs, nccl, launch = gather(late)
    phases, new_att, categories, steps = lane.result()
    bounds = (steps.arrays.start, steps.arrays.end) if steps.available and steps.arrays is not None else None
    diag = Diagnosis(
        window=window, steady=steady, gpu_time=gpu, idle_causes=causes, traits=traits,
        steady_kernels=steady_kernels, phases=phases, categories=categories, steps=steps,
        graphs=graphs, memory=analyze_memory(steady, bounds), nccl=nccl, launch=launch,
        facts=analyze_facts(model, traits, graphs),
        unified_memory=analyze_unified_memory(model, steady, window.start_ns, window.end_ns, window.full_start_ns,
                                              window.full_end_ns),
        host_samples=analyze_host_samples(model.samples, causes),
        step_sync=step_sync_result(ss_ctx, causes, ss_series))
    return diag, new_att
