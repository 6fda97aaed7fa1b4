"""The analysis graph: every analysis of a report, with the values it reads and makes, in one list (:data:`STEPS`;
per-device analyses in :data:`DEVICE_STEPS`), run by :func:`runner.run_graph`. Every value a step makes that
:data:`REPORT_VALUES` names becomes the :class:`report.Report` field of that name. The small functions below only
bind an option's field, a window's bounds or a default to an analysis's parameters. Given values, windows and
adding an analysis: docs/DESIGN.md, "The analysis graph".
"""

from __future__ import annotations

from typing import Callable, Dict, Optional, Tuple

from .analyses.api.cuda_api import analyze_cuda_api
from .analyses.api.graphs import analyze_graphs
from .analyses.api.launch import LaunchResult, analyze_launch
from .analyses.api.sync import analyze_sync
from .analyses.comms.exposure import CommExposureResult, analyze_comm_exposure
from .analyses.comms.nccl import analyze_nccl
from .analyses.comms.series import nccl_series
from .analyses.idle.bins import bins_for, device_count
from .analyses.idle.causes import IdleCausesResult, analyze_idle_causes
from .analyses.idle.gpu_time import DeviceTime, GpuTimeResult, WindowTime, device_time, full_times, gpu_time_result
from .analyses.idle.host_samples import (
    DeviceHostSamples,
    HostSamplesResult,
    UnsampledGaps,
    analyze_host_samples,
    device_host_samples,
    device_unsampled_gaps,
    host_sample_frames,
)
from .analyses.idle.result import DeviceCauses
from .analyses.kernels.categories import CategoryResult, analyze_categories, window_categories
from .analyses.kernels.harness import harness_kernels
from .analyses.kernels.starts import kernel_starts
from .analyses.kernels.stats import KernelStats, capture_kernel_stats, window_kernel_stats
from .analyses.kernels.summary import KernelSummary, analyze_kernels
from .analyses.kernels.traits import kernel_traits, optimizer_names
from .analyses.memory.copy_engines import CopyEnginesResult, analyze_copy_engines
from .analyses.memory.memcpy import analyze_memcpy
from .analyses.memory.traffic import MemoryResult, analyze_memory
from .analyses.memory.unified import UnifiedMemoryResult, analyze_unified_memory
from .analyses.nvtx.attribution import AttributionResult, analyze_attribution, default_domain_node
from .analyses.nvtx.ranges import NvtxResult, analyze_nvtx
from .analyses.steps.host_evidence import StepSyncContext
from .analyses.steps.metrics import StepResult, analyze_steps
from .analyses.steps.period_parts import PeriodParts, analyze_period_parts
from .analyses.steps.phases import PhaseResult, analyze_phases, with_phase_totals
from .analyses.steps.sync import StepSyncResult, device_step_sync, step_sync_result
from .analyses.threads.waits import WaitsResult, analyze_waits
from .analyses.timeline.content import TimelineFile, analyze_timeline, span_launch_config
from .analyses.timeline.span import TimelineSpan, named_span, plan_span
from .analyses.trace.facts import analyze_facts
from .analyses.trace.info import analyze_trace_info
from .analyses.trace.session import analyze_clock
from .analyses.trace.window import WindowResult, detect_window
from .config.categories import load_rules
from .config.phase_map import build_phase_map
from .findings.base import Finding
from .findings.copy_path import copy_path_claims
from .findings.idle import idle_findings
from .findings.kernels import kernel_findings
from .findings.run import capture_rule, collect_warnings, rank_findings, step_sync_claims
from .model.clip import clip_model
from .model.launch_config import LaunchConfig
from .model.timeline import DeviceTimeline, iter_timelines
from .model.trace import TraceModel
from .options import Options
from .runner import Step
from .vocabulary.windows import window_name


# ---------------------------------------------------------------------------------------- window and model
def _window(model: TraceModel, options: Options) -> WindowResult:
    return detect_window(model, options.window, options.window_nvtx)


def _steady(model: TraceModel, window: WindowResult) -> TraceModel:
    """The model clipped to the analysis window (``model`` itself when the window is the whole capture)."""
    return model if window.is_full else clip_model(model, window.start_ns, window.end_ns)


def _step_sync_context(model: TraceModel, steady: TraceModel, window: WindowResult) -> StepSyncContext:
    """Per-step sync inputs of the window's calls, each call's copies read from the whole capture."""
    return StepSyncContext(steady, model, window.start_ns, window.end_ns)


def _full_times(model: TraceModel, window: WindowResult, options: Options) -> Optional[Dict[int, WindowTime]]:
    return full_times(model, window, options.include_memcpy_in_busy)


def _timeline_span(model: TraceModel, steady: TraceModel, window: WindowResult, options: Options) -> TimelineSpan:
    return plan_span(model, steady, window, options.timeline_events)


def _device_pass(model: TraceModel, steady: TraceModel, window: WindowResult, nvtx: NvtxResult, options: Options,
                 timeline_span: TimelineSpan, pieces_needed: bool, each: Callable[..., None]) -> IdleCausesResult:
    """One device at a time: its steady timeline → its idle causes (with the idle pieces inside the timeline file's
    span) → ``each(timeline=…, device_causes=…)`` runs the :data:`DEVICE_STEPS` on them; then the timeline (and,
    past the budget, the pieces) is dropped, so memory holds one device's rows at a time."""
    return analyze_idle_causes(model, steady, iter_timelines(steady, window.start_ns, window.end_ns,
                                                             options.include_memcpy_in_busy),
                               nvtx.tree, bins_for(device_count(steady, options.include_memcpy_in_busy)),
                               lambda tl, dc: each(timeline=tl, device_causes=dc),
                               (timeline_span.start_ns, timeline_span.end_ns) if timeline_span.written else None,
                               pieces_needed=pieces_needed, slices_max=timeline_span.limit_rows)


def _pieces_needed(step_sync_context: StepSyncContext, host_sample_frames: Optional[object],
                   steady: TraceModel) -> bool:
    """Whether a device step reads the idle pieces' places in time (per-step sync series, CPU samples of the host
    thread or of any process while a device idles): else the device pass may charge devices past the pieces' budget
    by their host threads' partitions."""
    ws = steady.wait_samples
    return step_sync_context.needs_pieces() or host_sample_frames is not None or (ws is not None and len(ws) > 0)


def _device_time(timeline: DeviceTimeline, device_causes: DeviceCauses, full_times: Optional[Dict[int, WindowTime]],
                 options: Options) -> DeviceTime:
    """Busy/idle figures and the largest gaps of one device (``full_times`` None: the window is the capture)."""
    full = full_times.get(timeline.device_id) if full_times is not None else timeline
    return device_time(timeline, full, device_causes.gap_cause, options.top)


def _gpu_time(device_times: Tuple[DeviceTime, ...], options: Options) -> GpuTimeResult:
    return gpu_time_result(device_times, options.include_memcpy_in_busy)


#: the per-device analyses: run once per device in its turn of the device pass, on its ``timeline`` and
#: ``device_causes`` (and graph values by name); each makes the tuple of its results over the devices
DEVICE_STEPS: Tuple[Step, ...] = (
    Step("device: gpu time", _device_time, ("timeline", "device_causes", "full_times", "options"),
         ("device_times",), "steady"),
    Step("device: per-step sync", device_step_sync, ("step_sync_context", "timeline", "device_causes"),
         ("step_sync_series",), "steady"),
    Step("device: host samples", device_host_samples, ("host_sample_frames", "device_causes"),
         ("host_sample_devices",), "steady"),
    Step("device: unsampled gaps", device_unsampled_gaps, ("steady", "device_causes"), ("unsampled_gap_devices",),
         "steady"),
)


# ---------------------------------------------------------------------------------------- kernels
def _kernels(model: TraceModel, kernel_stats: Optional[KernelStats]) -> KernelSummary:
    return analyze_kernels(model, kernel_stats)


def _steady_kernels(steady: TraceModel, steady_kernel_stats: Optional[KernelStats]) -> KernelSummary:
    return analyze_kernels(steady, steady_kernel_stats)


def _launch(steady: TraceModel, window: WindowResult, options: Options, steady_kernel_stats: Optional[KernelStats]
            ) -> LaunchResult:
    return analyze_launch(steady, window.end_ns - window.start_ns, options.top, steady_kernel_stats)


# ---------------------------------------------------------------------------------------- NVTX, phases, steps
def _attribution(model: TraceModel, nvtx: NvtxResult, options: Options) -> AttributionResult:
    if not options.nvtx_kernel_map:
        return AttributionResult(False, "disabled with --no-nvtx-kernel-map")
    return analyze_attribution(model, nvtx.tree)


def _phases(model: TraceModel, options: Options, nvtx: NvtxResult, nvtx_attribution: AttributionResult
            ) -> Tuple[PhaseResult, AttributionResult]:
    """Phases, and the NVTX attribution with its per-phase totals set from them when a user phase map is given
    (a new object)."""
    phases = analyze_phases(model, build_phase_map(options.phase_map), nvtx.tree, nvtx_attribution.kernel_nodes)
    return phases, with_phase_totals(nvtx_attribution, phases) if options.phase_map else nvtx_attribution


def _categories(model: TraceModel, options: Options, phases: PhaseResult) -> CategoryResult:
    rules = options.categories if options.categories is not None else load_rules(None, None)
    return analyze_categories(model, rules, phases.kernel_phase if phases.available else None,
                              phases.phase_names if phases.available else None, options.include_memcpy_in_busy)


def _steady_categories(steady: TraceModel, window: WindowResult, options: Options, categories: CategoryResult
                       ) -> CategoryResult:
    return window_categories(steady, window, categories, options.include_memcpy_in_busy)


def _comm_exposure(steady: TraceModel, window: WindowResult, categories: CategoryResult) -> CommExposureResult:
    return analyze_comm_exposure(steady, categories, window.start_ns, window.end_ns)


def _steps(model: TraceModel, options: Options, nvtx: NvtxResult, nvtx_attribution: AttributionResult,
           phases: PhaseResult) -> StepResult:
    return analyze_steps(model, phases, step_marker=options.step_marker, step_range=options.step_range,
                         top=min(options.top, 10), tree=nvtx.tree,
                         kernel_node=default_domain_node(model, nvtx.tree, nvtx_attribution),
                         domain_nodes=nvtx_attribution.kernel_nodes or None,
                         optimizer_names=optimizer_names(model.kernels.names) if model.kernels is not None else None)


def _period_parts(model: TraceModel, steady: TraceModel, window: WindowResult, steps: StepResult, nvtx: NvtxResult,
                  categories: CategoryResult, options: Options) -> Optional[PeriodParts]:
    return analyze_period_parts(model, steady, window, steps, nvtx.tree, categories, options.include_memcpy_in_busy)


# ---------------------------------------------------------------------------------------- memory
def _memory(steady: TraceModel, steps: StepResult) -> MemoryResult:
    a = steps.arrays if steps.bounds is not None else None
    return analyze_memory(steady, steps.bounds, a.pid if a is not None else None)


def _copy_engines(model: TraceModel, steady: TraceModel, window: WindowResult, steps: StepResult
                  ) -> CopyEnginesResult:
    a = steps.arrays if steps.bounds is not None else None
    return analyze_copy_engines(model, steady, window.start_ns, window.end_ns, steps.bounds,
                                a.device if a is not None else None)


def _unified_memory(model: TraceModel, steady: TraceModel, window: WindowResult) -> UnifiedMemoryResult:
    return analyze_unified_memory(model, steady, window.start_ns, window.end_ns, window.full_start_ns,
                                  window.full_end_ns)


def _host_samples(model: TraceModel, idle_causes: IdleCausesResult,
                  host_sample_devices: Tuple[Optional[DeviceHostSamples], ...],
                  unsampled_gap_devices: Tuple[Optional[UnsampledGaps], ...]) -> HostSamplesResult:
    return analyze_host_samples(model.samples, idle_causes, host_sample_devices, unsampled_gap_devices)


def _waits(steady: TraceModel, window: WindowResult, idle_causes: IdleCausesResult, nvtx: NvtxResult) -> WaitsResult:
    return analyze_waits(steady, window.start_ns, window.end_ns, idle_causes, nvtx.tree)


def _window_repeats(window: WindowResult, steps: StepResult, step_sync: StepSyncResult) -> bool:
    """Whether the analysis window holds repeated steps (docs/FINDINGS.md, window rules): ≥ ``MIN_REPEATED_STEPS``
    detected steps inside it (``StepResult.repeat_in``) or a holding per-step sync series (computed on the window): the
    one fact every "steady window" / "auto-detected window" word follows."""
    return steps.repeat_in(window.start_ns, window.end_ns) or bool(step_sync.holding())


def _timeline(model: TraceModel, window: WindowResult, window_repeats: bool, timeline_span: TimelineSpan,
              idle_causes: IdleCausesResult, steps: StepResult, findings: Tuple[Finding, ...],
              categories: CategoryResult, launch_config: Optional[LaunchConfig], options: Options) -> TimelineFile:
    refs = [(f.id, f.title, f.severity, f.time_at_stake_ns, f.device_id, f.cause) for f in findings]
    timeline_span = named_span(timeline_span, window,
                               window_name(window.method, window.details.bins is not None, window_repeats))
    return analyze_timeline(model, window, timeline_span, idle_causes, steps, refs, categories.name_category,
                            categories.categories, launch_config, options.include_memcpy_in_busy)


#: every step of a report, in declaration order (also the order two threads take ready steps in: the long
#: chains — the device pass and NVTX → phases → categories → steps — come first)
STEPS: Tuple[Step, ...] = (
    Step("trace info", analyze_trace_info, ("model", "display_path"), ("trace",)),
    Step("nvtx", analyze_nvtx, ("model",), ("nvtx",)),
    Step("window", _window, ("model", "options"), ("window",)),
    Step("clip to the window", _steady, ("model", "window"), ("steady",), "steady"),
    Step("full-capture busy", _full_times, ("model", "window", "options"), ("full_times",)),
    Step("timeline span", _timeline_span, ("model", "steady", "window", "options"), ("timeline_span",)),
    Step("step sync context", _step_sync_context, ("model", "steady", "window"), ("step_sync_context",), "steady"),
    Step("host sample frames", host_sample_frames, ("model",), ("host_sample_frames",)),
    Step("pieces needed", _pieces_needed, ("step_sync_context", "host_sample_frames", "steady"), ("pieces_needed",),
         "steady"),
    Step("device pass", _device_pass, ("model", "steady", "window", "nvtx", "options", "timeline_span",
                                       "pieces_needed"), ("idle_causes",), "steady",
         each=DEVICE_STEPS, item_values=("timeline", "device_causes")),
    Step("gpu time", _gpu_time, ("device_times", "options"), ("gpu_time",), "steady"),
    Step("kernel stats", capture_kernel_stats, ("model",), ("kernel_stats",)),
    Step("kernels", _kernels, ("model", "kernel_stats"), ("kernels",)),
    Step("cuda api", analyze_cuda_api, ("model",), ("cuda_api",)),
    Step("nvtx attribution", _attribution, ("model", "nvtx", "options"), ("nvtx_attribution",)),
    Step("phases", _phases, ("model", "options", "nvtx", "nvtx_attribution"), ("phases", "attribution")),
    Step("categories", _categories, ("model", "options", "phases"), ("categories",)),
    Step("steps", _steps, ("model", "options", "nvtx", "nvtx_attribution", "phases"), ("steps",)),
    Step("sync", analyze_sync, ("model",), ("sync",)),
    Step("memcpy", analyze_memcpy, ("model",), ("memcpy",)),
    Step("graphs", analyze_graphs, ("model",), ("graphs",)),
    Step("nccl", analyze_nccl, ("model", "gpu_time"), ("nccl",)),
    Step("timeline launch config", span_launch_config, ("model", "timeline_span"), ("launch_config",)),
    Step("steady kernel stats", window_kernel_stats, ("steady", "window", "kernel_stats"), ("steady_kernel_stats",),
         "steady"),
    Step("launch", _launch, ("steady", "window", "options", "steady_kernel_stats"), ("launch",), "steady"),
    Step("kernel traits", kernel_traits, ("model", "steady", "trace", "steady_kernel_stats", "steps"), ("traits",),
         "steady"),
    Step("harness kernels", harness_kernels, ("model", "steady"), ("harness",), "steady"),
    Step("steady kernels", _steady_kernels, ("steady", "steady_kernel_stats"), ("steady_kernels",), "steady"),
    Step("steady kernel starts", kernel_starts, ("steady",), ("steady_kernel_starts",), "steady"),
    Step("steady categories", _steady_categories, ("steady", "window", "options", "categories"),
         ("steady_categories",), "steady"),
    Step("comm exposure", _comm_exposure, ("steady", "window", "categories"), ("comm_exposure",), "steady"),
    # what only a comparison reads (pipeline.COMPARE_ONLY): a second idle attribution, over whole step periods
    Step("period parts", _period_parts, ("model", "steady", "window", "steps", "nvtx", "categories", "options"),
         ("period_parts",), "steady"),
    Step("memory", _memory, ("steady", "steps"), ("memory",), "steady"),
    Step("copy engines", _copy_engines, ("model", "steady", "window", "steps"), ("copy_engines",), "steady"),
    Step("facts", analyze_facts, ("model", "traits", "graphs", "copy_engines"), ("facts",)),
    Step("unified memory", _unified_memory, ("model", "steady", "window"), ("unified_memory",), "steady"),
    Step("host samples", _host_samples, ("model", "idle_causes", "host_sample_devices", "unsampled_gap_devices"),
         ("host_samples",),
         "steady"),
    Step("waits", _waits, ("steady", "window", "idle_causes", "nvtx"), ("waits",), "steady"),
    Step("step sync", step_sync_result, ("step_sync_context", "idle_causes", "step_sync_series"), ("step_sync",),
         "steady"),
    Step("window repeats", _window_repeats, ("window", "steps", "step_sync"), ("window_repeats",), "steady"),
    Step("finding: per-step sync", step_sync_claims, ("step_sync", "facts", "gpu_time"), ("step_sync_claims",),
         "steady"),
    Step("finding: copy path", copy_path_claims, ("copy_engines", "idle_causes", "gpu_time", "facts", "steps"),
         ("copy_path_claims",), "steady"),
    Step("findings: idle", idle_findings, ("idle_causes", "gpu_time", "window", "traits", "facts", "attribution",
                                       "host_samples", "waits", "step_sync_claims", "copy_path_claims",
                                       "copy_engines", "cuda_api", "step_sync", "window_repeats"),
         ("idle_found",), "steady"),
    Step("findings: kernels", kernel_findings, ("gpu_time", "traits", "steady_kernels", "categories", "facts",
                                                "graphs", "window", "window_repeats", "steps", "comm_exposure", "nccl",
                                                "harness"),
         ("kernel_found",), "steady"),
    Step("findings: capture", capture_rule, ("graphs", "gpu_time", "window", "attribution", "options", "nccl",
                                             "unified_memory", "facts", "nvtx", "window_repeats",
                                             "trace"),
         ("capture_found",)),
    Step("findings", rank_findings, ("gpu_time", "idle_causes", "kernels", "window", "window_repeats", "facts",
                                     "step_sync_claims",
                                     "copy_path_claims", "idle_found", "kernel_found", "capture_found"),
         ("findings", "headline")),
    Step("timeline file", _timeline, ("model", "window", "window_repeats", "timeline_span", "idle_causes", "steps",
                                      "findings", "categories", "launch_config", "options"), ("timeline_file",)),
    Step("warnings", collect_warnings, ("model", "kernels", "attribution", "graphs", "options"), ("warnings",)),
    # what a cluster reads of the trace (cluster.summary): not in report.json
    Step("clock", analyze_clock, ("model",), ("clock",)),
    Step("nccl series", nccl_series, ("model", "categories"), ("nccl_series",)),
)
