"""Top CUDA kernels, per device and overall, and per process: duration statistics per kernel name and ``pct``
of all kernel time (docs/METRICS.md, "Kernels").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, List, Optional, Tuple

from ...jsonable import FieldsJson, Outcome
from ...model.trace import Kernels, TraceModel
from ..common.stats import GroupStats, pct
from .stats import KernelStats, kernel_stats


@dataclass(frozen=True)
class KernelStatsRow(FieldsJson):
    """Duration statistics (ns) of a group of kernels and ``pct`` of all kernel time (the rows below add the keys
    that name the group, written first: ``JSON_KEYS``)."""

    count: int
    total_ns: int
    avg_ns: int
    p50_ns: int
    p90_ns: int
    p99_ns: int
    min_ns: int
    max_ns: int
    pct: float


@dataclass(frozen=True)
class KernelRow(KernelStatsRow):
    """One kernel name across devices."""

    name: str
    JSON_KEYS: ClassVar[Tuple[str, ...]] = ("name",)


@dataclass(frozen=True)
class KernelDeviceRow(KernelStatsRow):
    """One kernel name on one device."""

    name: str
    device_id: int
    JSON_KEYS: ClassVar[Tuple[str, ...]] = ("name", "device_id")


@dataclass(frozen=True)
class KernelPidRow(FieldsJson):
    """The kernels of one process: count, summed duration (ns) and ``pct`` of all kernel time."""

    pid: int
    count: int
    total_ns: int
    pct: float


@dataclass(frozen=True)
class KernelPidNameRow(KernelStatsRow):
    """One kernel name of one process on one device, and ``pct_of_pid`` = its total / the process's kernel total
    × 100."""

    name: str
    pid: int
    device_id: int
    pct_of_pid: float
    JSON_KEYS: ClassVar[Tuple[str, ...]] = ("name", "pid", "device_id")


@dataclass(frozen=True)
class TopKernel(FieldsJson):
    """One of the largest kernel names of a group (a category, a trait): kernels and their summed duration (ns)."""

    name: str
    count: int
    total_ns: int


@dataclass(frozen=True)
class KernelSummary(Outcome):
    total_kernel_ns: int = 0
    kernel_count: int = 0
    by_name_device: Tuple[KernelDeviceRow, ...] = ()     # JSON "kernels"
    by_name: Tuple[KernelRow, ...] = ()                  # across devices
    by_pid: Tuple[KernelPidRow, ...] = ()                # top PIDs
    by_pid_name: Tuple[KernelPidNameRow, ...] = ()       # kernels per PID


NO_KERNELS = "no CUDA kernels were captured — was `--trace=cuda` on?"


def analyze_kernels(model: TraceModel, stats: Optional[KernelStats] = None) -> KernelSummary:
    """Kernels of ``model``; ``stats``: their :class:`~.stats.KernelStats` when already computed."""
    k: Optional[Kernels] = model.kernels
    if k is None or len(k) == 0:
        reason = NO_KERNELS if k is None or model.info.kernel_table is None else \
            "the kernel table is empty: " + NO_KERNELS
        return KernelSummary(False, reason)
    st = stats if stats is not None else kernel_stats(k)
    total = int(k.dur.sum())

    def pcts(gs: GroupStats) -> List[float]:
        return [pct(t, total) for t in gs.total.tolist()]

    gd, gn, gp, gs = st.by("name", "device_id"), st.by("name"), st.by("pid"), st.by("pid", "name", "device_id")
    by_pid = gp.rows(KernelPidRow, pct=pcts(gp))
    pid_total = {r.pid: r.total_ns for r in by_pid}
    by_pid_name = gs.rows(KernelPidNameRow, k.names, pct=pcts(gs), pct_of_pid=[
        pct(t, pid_total.get(p, 0)) for p, t in zip(gs.keys["pid"].tolist(), gs.total.tolist())])
    by_pid_name.sort(key=lambda r: (r.pid, -r.total_ns, r.name))
    return KernelSummary(True, None, total_kernel_ns=total, kernel_count=len(k),
                         by_name_device=tuple(gd.rows(KernelDeviceRow, k.names, pct=pcts(gd))),
                         by_name=tuple(gn.rows(KernelRow, k.names, pct=pcts(gn))), by_pid=tuple(by_pid),
                         by_pid_name=tuple(by_pid_name))
