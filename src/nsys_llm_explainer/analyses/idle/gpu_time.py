"""GPU busy / idle per device over the steady window and the full capture, read off the device timelines
(:mod:`model.timeline`), with the largest gaps and a gap-size histogram; pooled over the devices that ran kernels
(:meth:`GpuTimeResult.pooled`). Definitions: docs/MODEL.md and docs/METRICS.md, "GPU busy / idle".
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from ...jsonable import Outcome
from ...model.timeline import DeviceTimeline, build_timelines
from ...model.trace import TraceModel
from ...vocabulary.device_roles import ROLE_COPIES, ROLE_FEW, ROLE_IDLE, ROLE_KERNELS
from ..common.stats import median, pct, top_indices
from ..trace.window import WindowResult

__all__ = ["GAP_BUCKETS", "MIN_BUSY_NS", "MIN_BUSY_SHARE", "MIN_KERNELS", "GpuTimeResult", "device_role", "device_time",
           "gpu_time_result"]

MIN_KERNELS = 20          # a device (or trace) with fewer kernels …
MIN_BUSY_NS = 1_000_000   # … and less busy time than this in the window has no workload to diagnose
#: a device busy under :data:`MIN_BUSY_NS` and under this share of the busiest device's busy time has no workload
#: either, however many kernels it ran (a monitor's probes on a GPU of their own; the share under which a process
#: is a bystander on one GPU, analyses/idle/causes.BYSTANDER_SHARE)
MIN_BUSY_SHARE = 0.01

#: gap-size histogram buckets: (label, lower bound ns inclusive, upper bound ns exclusive)
GAP_BUCKETS = [
    ("<1 µs", 0, 1_000),
    ("1–5 µs", 1_000, 5_000),
    ("5–10 µs", 5_000, 10_000),
    ("10–50 µs", 10_000, 50_000),
    ("50–100 µs", 50_000, 100_000),
    ("0.1–1 ms", 100_000, 1_000_000),
    ("≥1 ms", 1_000_000, None),
]


@dataclass(frozen=True)
class WindowTime:
    window_start_ns: int
    window_end_ns: int
    window_ns: int
    busy_ns: int
    idle_ns: int
    busy_pct: float
    idle_pct: float


@dataclass(frozen=True)
class Gap:
    start_ns: int
    end_ns: int
    duration_ns: int
    kernel_before: Optional[str]
    kernel_after: Optional[str]
    cause_kind: str
    cause_detail: str


@dataclass(frozen=True)
class Bucket:
    bucket: str
    lo_ns: int
    hi_ns: Optional[int]
    count: int
    total_ns: int


def device_role(kernel_count: int, graph_count: int, copy_count: int) -> str:
    """``kernels`` when a kernel row or a whole-graph execution intersects the window, else ``copies only`` when a
    memcpy/memset row does, else ``idle``."""
    if kernel_count > 0 or graph_count > 0:
        return ROLE_KERNELS
    return ROLE_COPIES if copy_count > 0 else ROLE_IDLE


@dataclass(frozen=True)
class DeviceTime:
    device_id: int
    role: str                 # "kernels" | "few kernels" | "copies only" | "idle" (device_role, gpu_time_result)
    window_start_ns: int
    window_end_ns: int
    window_ns: int
    busy_ns: int
    idle_ns: int
    busy_pct: float
    idle_pct: float
    copy_busy_ns: int
    copy_only_ns: int
    kernel_count: int
    launches_per_s: float
    kernel_p50_ns: int        # median duration of the kernels in the window (clipped to it)
    gap_count: int
    largest_gaps: Tuple[Gap, ...]
    gap_histogram: Tuple[Bucket, ...]
    full: Optional[WindowTime]

    @property
    def counted(self) -> bool:
        """It ran the workload's kernels (or whole-graph executions) in the window (role ``kernels``): it counts in
        the pooled busy %."""
        return self.role == ROLE_KERNELS


@dataclass(frozen=True)
class GpuTimeResult(Outcome):
    include_memcpy: bool
    devices: Tuple[DeviceTime, ...] = ()

    def kernel_devices(self) -> Tuple[int, ...]:
        """The devices that ran the workload's kernels in the (steady) window (role ``kernels``; not a device of
        :data:`ROLE_FEW`): the ones :meth:`pooled` sums over."""
        return tuple(d.device_id for d in self.devices if d.role == ROLE_KERNELS)

    def pooled(self, full: bool = False) -> Optional[WindowTime]:
        """Σ busy / Σ window over the devices that ran kernels in the steady window (:meth:`kernel_devices`;
        ``full``: the same devices over the whole capture); None when no device ran a kernel there."""
        rows: List[Union[WindowTime, DeviceTime]] = [
            r for r in (d.full if full else d for d in self.devices if d.counted) if r is not None]
        if not rows:
            return None
        w = sum(r.window_ns for r in rows)
        b = sum(r.busy_ns for r in rows)
        return WindowTime(min(r.window_start_ns for r in rows), max(r.window_end_ns for r in rows), w, b, w - b,
                          pct(b, w), pct(w - b, w))

    def device(self, device_id: int) -> Optional[DeviceTime]:
        return next((d for d in self.devices if d.device_id == device_id), None)


def _histogram(durations: np.ndarray) -> Tuple[Bucket, ...]:
    out = []
    for label, lo, hi in GAP_BUCKETS:
        m = durations >= lo if hi is None else (durations >= lo) & (durations < hi)
        out.append(Bucket(label, lo, hi, int(m.sum()), int(durations[m].sum())))
    return tuple(out)


def _window_time(tl: DeviceTimeline, lost: int = 0) -> WindowTime:
    """``tl``'s totals, less ``lost`` ns of its window that nothing was recorded in."""
    w, idle = tl.window_ns - lost, tl.idle_ns - lost
    return WindowTime(tl.w0, tl.w1, w, tl.busy_ns, idle, pct(tl.busy_ns, w), pct(idle, w))


def full_times(model: TraceModel, window: WindowResult, include_memcpy: bool) -> Optional[Dict[int, WindowTime]]:
    """Per device, the full capture's busy/idle totals (None when the window is the whole capture: the steady
    timelines are then the full ones), over its recorded time: the spans the profiler did not record
    (``window.details.not_recorded_ns``; no row lies in them) count as neither busy nor idle. Only totals are kept: the
    full timelines' rows are dropped at once."""
    if window.is_full:
        return None
    tls = build_timelines(model, window.full_start_ns, window.full_end_ns, include_memcpy)
    lost = window.details.not_recorded_ns or 0
    return {d: _window_time(tl, lost) for d, tl in tls.items()}


def device_time(tl: DeviceTimeline, full: Union[DeviceTimeline, WindowTime, None],
                gap_cause: Callable[[int], Tuple[str, str]], top: int) -> DeviceTime:
    """Busy/idle, gaps and the ``top`` longest gaps (with their dominant cause from ``gap_cause``) of one device
    over the timeline's window; ``full``: the same device over the full capture (timeline or its totals)."""
    gp = tl.gaps()
    gd = gp.end - gp.start
    order = top_indices(gd, top)
    lab = tl.act.label_idx

    def name(row: int) -> Optional[str]:
        return tl.labels[int(lab[row])] if row >= 0 else None

    gaps = tuple(Gap(int(gp.start[j]), int(gp.end[j]), int(gd[j]), name(int(gp.prev_row[j])),
                     name(int(gp.next_row[j])), *gap_cause(j)) for j in order.tolist())
    w = tl.window_ns
    kd = (tl.act.end - tl.act.start)[tl.act.is_kernel]
    role = device_role(tl.kernel_count, tl.graph_count, int(tl.copy_start.shape[0]))
    return DeviceTime(
        tl.device_id, role, tl.w0, tl.w1, w, tl.busy_ns, tl.idle_ns, pct(tl.busy_ns, w), pct(tl.idle_ns, w),
        tl.copy_busy_ns, tl.copy_only_ns, tl.kernel_count, tl.kernel_count / (w / 1e9) if w > 0 else 0.0,
        int(round(median(kd))) if kd.shape[0] else 0, len(gp), gaps, _histogram(gd),
        _window_time(full) if isinstance(full, DeviceTimeline) else full)


def gpu_time_result(devices: Sequence[DeviceTime], include_memcpy: bool) -> GpuTimeResult:
    """The result for per-device figures computed one device at a time (:func:`device_time`)."""
    if not devices:
        return GpuTimeResult(False, "no GPU activity rows to build a timeline from (no kernels captured)",
                             include_memcpy)
    top = max((d.busy_ns for d in devices if d.role == ROLE_KERNELS), default=0)
    work = [d.role == ROLE_KERNELS and (d.busy_ns >= MIN_BUSY_NS or (d.kernel_count >= MIN_KERNELS
                                                                     and d.busy_ns >= MIN_BUSY_SHARE * top))
            for d in devices]
    if any(work):   # the devices with a workload speak for the run; the others' few kernels are not counted
        devices = [d if ok or d.role != ROLE_KERNELS else replace(d, role=ROLE_FEW) for d, ok in zip(devices, work)]
    return GpuTimeResult(True, None, include_memcpy, tuple(sorted(devices, key=lambda d: d.device_id)))
