"""Top CUDA kernels, per device and overall, and per process.

Kernel duration = ``end − start`` (ns). Kernels are grouped by demangled name (fallback: short name,
then ``[missing StringId N]``). ``pct`` = group total / total kernel time of all kernels × 100
(shares of summed kernel time, not of wall time: concurrent kernels are each counted).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

from ...jsonable import FieldsJson
from ...model.trace import Kernels, TraceModel
from ..common.stats import GroupStats, pct
from .stats import KernelStats, kernel_stats

Row = Dict[str, Any]


@dataclass(frozen=True)
class KernelRow(FieldsJson):
    """One kernel name across devices: duration statistics (ns) and ``pct`` of all kernel time."""

    name: str
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
class KernelSummary(FieldsJson):
    available: bool
    reason: Optional[str]
    total_kernel_ns: int = 0
    kernel_count: int = 0
    by_name_device: Tuple[Row, ...] = ()      # JSON "kernels"
    by_name: Tuple[KernelRow, ...] = ()       # across devices
    by_pid: Tuple[Row, ...] = ()              # top PIDs
    by_pid_name: Tuple[Row, ...] = ()         # kernels per PID


NO_KERNELS = "no CUDA kernels were captured — was `--trace=cuda` on?"


def _stats(gs: GroupStats, i: int, total_all: int) -> Row:
    return dict(count=int(gs.count[i]), total_ns=int(gs.total[i]), avg_ns=int(gs.avg[i]), p50_ns=int(gs.p50[i]),
                p90_ns=int(gs.p90[i]), p99_ns=int(gs.p99[i]), min_ns=int(gs.min[i]), max_ns=int(gs.max[i]),
                pct=pct(int(gs.total[i]), total_all))


def _rows(gs: GroupStats, names: List[str], total_all: int, extra_keys: List[str]) -> List[Row]:
    return [{"name": names[int(gs.keys["name"][i])], **{k: int(gs.keys[k][i]) for k in extra_keys},
             **_stats(gs, i, total_all)} for i in gs.order_by_total().tolist()]


def analyze_kernels(model: TraceModel, stats: Optional[KernelStats] = None) -> KernelSummary:
    """Kernels of ``model``; ``stats``: their :class:`~.stats.KernelStats` when already computed."""
    k: Optional[Kernels] = model.kernels
    if k is None or len(k) == 0:
        reason = NO_KERNELS if k is None or model.info.kernel_table is None else \
            "the kernel table is empty: " + NO_KERNELS
        return KernelSummary(False, reason)
    st = stats if stats is not None else kernel_stats(k)
    total = int(k.dur.sum())
    by_name_device = _rows(st.by("name", "device_id"), k.names, total, ["device_id"])
    gn = st.by("name")
    by_name = [KernelRow(name=k.names[int(gn.keys["name"][i])], **_stats(gn, i, total))
               for i in gn.order_by_total().tolist()]
    # per process
    pid_stats = st.by("pid")
    by_pid = [{"pid": int(pid_stats.keys["pid"][i]), "count": int(pid_stats.count[i]),
               "total_ns": int(pid_stats.total[i]), "pct": pct(int(pid_stats.total[i]), total)}
              for i in pid_stats.order_by_total().tolist()]
    pid_total = {r["pid"]: r["total_ns"] for r in by_pid}
    gs = st.by("pid", "name", "device_id")
    by_pid_name = [{**r, "pct_of_pid": pct(r["total_ns"], pid_total.get(r["pid"], 0))}
                   for r in _rows(gs, k.names, total, ["pid", "device_id"])]
    by_pid_name.sort(key=lambda r: (r["pid"], -r["total_ns"], r["name"]))
    return KernelSummary(True, None, total_kernel_ns=total, kernel_count=len(k), by_name_device=tuple(by_name_device),
                         by_name=tuple(by_name), by_pid=tuple(by_pid), by_pid_name=tuple(by_pid_name))
