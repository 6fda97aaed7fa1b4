"""CUDA graphs: graph launches, kernels launched from graphs, and graph-level (hidden-kernel) tracing
(docs/FINDINGS.md, "CUDA graphs").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Tuple

import numpy as np

from ...jsonable import NONE_AS_EMPTY, FieldsJson, Outcome
from ...model.timeline import spans_by
from ...model.trace import TraceModel
from ..common.stats import median, pct
from . import classes as ac

FIX_CMD = "nsys profile --cuda-graph-trace=node"
HIDDEN_WARNING = (
    "CUDA graphs were traced at graph level: {n} graph launch(es) but no kernel inside them was recorded. "
    "Per-kernel tables, kernel counts, launch statistics and GPU idle time are unreliable (work inside "
    "graphs is missing or appears only as whole-graph GRAPH_TRACE rows). Re-capture with `" + FIX_CMD + "`."
)


@dataclass(frozen=True)
class GraphLaunchPid(FieldsJson):
    """The graph-launch calls of one process: calls and their summed duration (ns)."""

    pid: int
    count: int
    host_ns: int


@dataclass(frozen=True)
class KernelsPerLaunch(FieldsJson):
    """Kernels per graph launch over the launches with at least one linked kernel (docs/FINDINGS.md)."""

    launches: int
    min: int
    p50: float
    mean: float
    max: int


@dataclass(frozen=True)
class LaunchSizeCount(FieldsJson):
    """Graph launches with ``kernels`` linked kernels."""

    kernels: int
    launches: int


@dataclass(frozen=True)
class GraphTraceDevice(FieldsJson):
    """The ``GRAPH_TRACE`` rows of one device: rows, summed and union duration (ns)."""

    device_id: int
    count: int
    total_ns: int
    union_ns: int


@dataclass(frozen=True)
class GraphTraceSummary(FieldsJson):
    """The ``GRAPH_TRACE`` rows (one per graph execution; module docstring)."""

    count: int
    total_ns: int
    by_device: Tuple[GraphTraceDevice, ...]


@dataclass(frozen=True)
class GraphResult(Outcome):
    trace_mode: str = "none"                    # "node" / "graph" / "none"
    capture_graph_trace_mode: Optional[str] = None
    graph_launch_count: int = 0
    graph_launch_host_ns: int = 0
    launches_by_pid: Tuple[GraphLaunchPid, ...] = ()
    graph_kernel_count: int = 0
    graph_kernel_ns: int = 0
    total_kernel_ns: int = 0
    graph_kernel_pct: float = 0.0
    kernels_per_launch: Optional[KernelsPerLaunch] = field(default=None, metadata=NONE_AS_EMPTY)
    kernels_per_launch_hist: Tuple[LaunchSizeCount, ...] = ()
    launches_without_kernels: int = 0
    graph_level_hidden: bool = False
    graph_trace: Optional[GraphTraceSummary] = None
    warning: Optional[str] = None
    fix: Optional[str] = None


def _graph_trace_summary(model: TraceModel) -> Optional[GraphTraceSummary]:
    gt = model.graph_trace
    if gt is None or len(gt) == 0:
        return None
    per_dev = tuple(GraphTraceDevice(*t) for t in spans_by(np.asarray(gt.device), gt.start, gt.end))
    return GraphTraceSummary(count=int(len(gt)), total_ns=int((gt.end - gt.start).sum()), by_device=per_dev)


def analyze_graphs(model: TraceModel) -> GraphResult:
    api, k = model.api, model.kernels
    # graph-launch calls (runtime/driver rows), the kernels they launched, kernels of graphs (those, or with a node id)
    gm = ac.name_set_mask(api.names, api.name_idx, ac.GRAPH_LAUNCH) & api.primary if api is not None \
        else np.zeros(0, bool)
    nk = len(k) if k is not None else 0
    li = k.launch_idx if k is not None and k.launch_idx.shape[0] == nk and gm.shape[0] else np.full(nk, -1, np.int64)
    by_launch = li >= 0
    by_launch[by_launch] = gm[li[by_launch]]
    gkm = by_launch | (k.graph_node >= 0) if k is not None and nk else by_launch
    gt = _graph_trace_summary(model)
    n_launch = int(gm.sum())
    n_gk = int(gkm.sum())
    cap_mode = model.info.graph_trace_mode if model.info is not None else None
    if n_launch == 0 and n_gk == 0 and gt is None:
        return GraphResult(False, "no CUDA graph launches, graph kernels or GRAPH_TRACE rows in the trace",
                           capture_graph_trace_mode=cap_mode)
    launch_host_ns = 0
    launches_by_pid: Tuple[GraphLaunchPid, ...] = ()
    if n_launch and api is not None:   # (graph launches are API rows)
        dur = (api.end - api.start)[gm]
        launch_host_ns = int(dur.sum())
        launches_by_pid = tuple(GraphLaunchPid(p, c, t) for p, c, t, _ in spans_by(api.pid[gm], api.start[gm],
                                                                                    api.end[gm]))
    total = int(k.dur.sum()) if k is not None and len(k) else 0
    gk_ns = int(k.dur[gkm].sum()) if n_gk and k is not None else 0
    without = 0
    per_launch: Optional[KernelsPerLaunch] = None
    hist: Tuple[LaunchSizeCount, ...] = ()
    if n_launch:
        kpl = np.bincount(li[by_launch], minlength=gm.shape[0])[gm]   # kernels linked to each graph-launch call
        without = int((kpl == 0).sum())
        pos = np.sort(kpl[kpl > 0])
        if pos.shape[0]:
            per_launch = KernelsPerLaunch(launches=int(pos.shape[0]), min=int(pos[0]), p50=median(pos),
                                          mean=round(float(pos.mean()), 3), max=int(pos[-1]))
        vals, cnts = np.unique(kpl, return_counts=True)
        hist = tuple(LaunchSizeCount(kernels=int(v), launches=int(c)) for v, c in zip(vals.tolist(), cnts.tolist()))
    mode = "node" if n_gk else "graph" if gt is not None or n_launch else "none"
    hidden = bool(n_launch > 0 and n_gk == 0)
    return GraphResult(
        True, None, trace_mode=mode, capture_graph_trace_mode=cap_mode, graph_launch_count=n_launch,
        graph_launch_host_ns=launch_host_ns, launches_by_pid=launches_by_pid, graph_kernel_count=n_gk,
        graph_kernel_ns=gk_ns, total_kernel_ns=total, graph_kernel_pct=pct(gk_ns, total),
        kernels_per_launch=per_launch, kernels_per_launch_hist=hist, launches_without_kernels=without,
        graph_level_hidden=hidden, graph_trace=gt, warning=HIDDEN_WARNING.format(n=n_launch) if hidden else None,
        fix=FIX_CMD if hidden else None)
