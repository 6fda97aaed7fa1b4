"""Top CUDA kernels, per device and overall, and per process: duration statistics per kernel name and ``pct``
of all kernel time (docs/METRICS.md, "Kernels").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Dict, Optional, Tuple

from ...jsonable import FieldsJson
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
class KernelSummary(FieldsJson):
    available: bool
    reason: Optional[str]
    total_kernel_ns: int = 0
    kernel_count: int = 0
    by_name_device: Tuple[KernelDeviceRow, ...] = ()     # JSON "kernels"
    by_name: Tuple[KernelRow, ...] = ()                  # across devices
    by_pid: Tuple[KernelPidRow, ...] = ()                # top PIDs
    by_pid_name: Tuple[KernelPidNameRow, ...] = ()       # kernels per PID


NO_KERNELS = "no CUDA kernels were captured — was `--trace=cuda` on?"


def _stats(gs: GroupStats, i: int, total_all: int, row: type = KernelStatsRow) -> Dict[str, Any]:
    """The statistics fields of a ``row`` (keyword arguments of :class:`KernelRow` and its kin) of group ``i``."""
    return dict(gs.row(i, row), pct=pct(int(gs.total[i]), total_all))


def analyze_kernels(model: TraceModel, stats: Optional[KernelStats] = None) -> KernelSummary:
    """Kernels of ``model``; ``stats``: their :class:`~.stats.KernelStats` when already computed."""
    k: Optional[Kernels] = model.kernels
    if k is None or len(k) == 0:
        reason = NO_KERNELS if k is None or model.info.kernel_table is None else \
            "the kernel table is empty: " + NO_KERNELS
        return KernelSummary(False, reason)
    st = stats if stats is not None else kernel_stats(k)
    total = int(k.dur.sum())
    gd = st.by("name", "device_id")
    by_name_device = [KernelDeviceRow(name=k.names[int(gd.keys["name"][i])], device_id=int(gd.keys["device_id"][i]),
                                      **_stats(gd, i, total)) for i in gd.order_by_total().tolist()]
    gn = st.by("name")
    by_name = [KernelRow(name=k.names[int(gn.keys["name"][i])], **_stats(gn, i, total))
               for i in gn.order_by_total().tolist()]
    # per process
    pid_stats = st.by("pid")
    by_pid = [KernelPidRow(pid=int(pid_stats.keys["pid"][i]), **_stats(pid_stats, i, total, KernelPidRow))
              for i in pid_stats.order_by_total().tolist()]
    pid_total = {r.pid: r.total_ns for r in by_pid}
    gs = st.by("pid", "name", "device_id")
    by_pid_name = []
    for i in gs.order_by_total().tolist():
        p, row = int(gs.keys["pid"][i]), _stats(gs, i, total)
        by_pid_name.append(KernelPidNameRow(name=k.names[int(gs.keys["name"][i])], pid=p,
                                            device_id=int(gs.keys["device_id"][i]), **row,
                                            pct_of_pid=pct(row["total_ns"], pid_total.get(p, 0))))
    by_pid_name.sort(key=lambda r: (r.pid, -r.total_ns, r.name))
    return KernelSummary(True, None, total_kernel_ns=total, kernel_count=len(k), by_name_device=tuple(by_name_device),
                         by_name=tuple(by_name), by_pid=tuple(by_pid), by_pid_name=tuple(by_pid_name))
