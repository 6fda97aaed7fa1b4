"""Run the whole flow: read → model → analyses → findings. Rendering happens in :mod:`render`."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Tuple

from . import __version__
from .analyses.cuda_api import CudaApiResult, analyze_cuda_api
from .analyses.idle import IdleResult, analyze_idle
from .analyses.kernels import KernelSummary, analyze_kernels
from .analyses.launch import LaunchResult, analyze_launch
from .analyses.memcpy import MemcpyResult, analyze_memcpy
from .analyses.nvtx import NvtxResult, analyze_nvtx
from .analyses.nvtx_attribution import AttributionResult, analyze_attribution
from .analyses.sync import SyncResult, analyze_sync
from .analyses.trace_info import TraceInfoResult, analyze_trace_info
from .model.build import build_model
from .model.trace import TraceModel
from .read.connection import open_readonly
from .read.schema import probe

Progress = Callable[[str], None]


@dataclass
class Options:
    top: int = 20
    phase_map: Optional[Dict[str, List[str]]] = None
    nvtx_coverage_warn_threshold: float = 0.7
    nvtx_kernel_map: bool = True
    include_memcpy_in_busy: bool = False
    categories_file: Optional[str] = None
    step_marker: Optional[str] = None
    window: Optional[Tuple[int, int]] = None
    window_nvtx: Optional[str] = None
    step_range: Optional[str] = None


@dataclass
class Report:
    tool_version: str
    options: Options
    model: TraceModel
    trace: TraceInfoResult
    kernels: KernelSummary
    idle: IdleResult
    launch: LaunchResult
    sync: SyncResult
    cuda_api: CudaApiResult
    memcpy: MemcpyResult
    nvtx: NvtxResult
    attribution: AttributionResult
    warnings: List[str] = field(default_factory=list)
    findings: List[Dict] = field(default_factory=list)
    extra: Dict[str, object] = field(default_factory=dict)   # issue-3 analyses (diagnosis)
    timings_s: Dict[str, float] = field(default_factory=dict)


def _noop(_: str) -> None:
    return None


def load_model(path: str, progress: Progress = _noop) -> TraceModel:
    conn = open_readonly(path)
    try:
        schema = probe(conn, str(path))
        progress("reading tables")
        return build_model(conn, schema, str(path))
    finally:
        conn.close()


def analyze_model(model: TraceModel, options: Optional[Options] = None, progress: Progress = _noop) -> Report:
    opts = options or Options()
    timings: Dict[str, float] = {}

    def step(name: str, fn, *a, **kw):
        progress(name)
        t = time.perf_counter()
        out = fn(*a, **kw)
        timings[name] = round(time.perf_counter() - t, 4)
        return out

    trace = step("trace info", analyze_trace_info, model)
    kernels = step("kernels", analyze_kernels, model)
    idle = step("gpu idle", analyze_idle, model, opts.include_memcpy_in_busy, opts.top)
    launch = step("launch storm", analyze_launch, model, opts.top)
    sync = step("sync", analyze_sync, model)
    cuda_api = step("cuda api", analyze_cuda_api, model)
    memcpy = step("memcpy", analyze_memcpy, model)
    nvtx = step("nvtx", analyze_nvtx, model)
    if opts.nvtx_kernel_map:
        attribution = step("nvtx attribution", analyze_attribution, model, nvtx.tree)
    else:
        attribution = AttributionResult(False, "disabled with --no-nvtx-kernel-map")
    report = Report(
        tool_version=__version__, options=opts, model=model, trace=trace, kernels=kernels, idle=idle,
        launch=launch, sync=sync, cuda_api=cuda_api, memcpy=memcpy, nvtx=nvtx, attribution=attribution,
        timings_s=timings,
    )
    from .diagnose import run_diagnosis  # issue-3 analyses; imported late to keep the core path light
    step("diagnosis", run_diagnosis, report)
    from .findings.rules import collect_warnings, run_rules
    report.warnings = collect_warnings(report)
    report.findings = step("findings", run_rules, report)
    return report


def analyze_path(path: str, options: Optional[Options] = None, progress: Progress = _noop) -> Report:
    return analyze_model(load_model(path, progress), options, progress)
