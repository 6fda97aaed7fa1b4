"""Top CUDA kernels, per device and overall, and per process.

Kernel duration = ``end − start`` (ns). Kernels are grouped by demangled name (fallback: short name,
then ``[missing StringId N]``). ``pct`` = group total / total kernel time of all kernels × 100
(shares of summed kernel time, not of wall time: concurrent kernels are each counted).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional

import numpy as np

from ..model.trace import Kernels, TraceModel
from .stats import GroupStats, group_stats, pct


@dataclass
class KernelSummary:
    available: bool
    reason: Optional[str]
    total_kernel_ns: int = 0
    kernel_count: int = 0
    by_name_device: List[Dict] = field(default_factory=list)   # JSON "kernels"
    by_name: List[Dict] = field(default_factory=list)          # across devices
    by_pid: List[Dict] = field(default_factory=list)           # top PIDs
    by_pid_name: List[Dict] = field(default_factory=list)      # kernels per PID


NO_KERNELS = "no CUDA kernels were captured — was `--trace=cuda` on?"


def _rows(gs: GroupStats, names: List[str], total_all: int, extra_keys: List[str]) -> List[Dict]:
    rows = []
    for i in gs.order_by_total().tolist():
        r: Dict = {"name": names[int(gs.keys["name"][i])]}
        for k in extra_keys:
            r[k] = int(gs.keys[k][i])
        r.update(count=int(gs.count[i]), total_ns=int(gs.total[i]), avg_ns=int(gs.avg[i]),
                 p50_ns=int(gs.p50[i]), p90_ns=int(gs.p90[i]), p99_ns=int(gs.p99[i]), min_ns=int(gs.min[i]),
                 max_ns=int(gs.max[i]), pct=pct(int(gs.total[i]), total_all))
        rows.append(r)
    return rows


def analyze_kernels(model: TraceModel) -> KernelSummary:
    k: Optional[Kernels] = model.kernels
    if k is None or len(k) == 0:
        reason = NO_KERNELS if k is None or model.info.kernel_table is None else \
            "the kernel table is empty: " + NO_KERNELS
        return KernelSummary(False, reason)
    dur = k.dur
    total = int(dur.sum())
    name = k.name_idx.astype(np.int64)
    s = KernelSummary(True, None, total_kernel_ns=total, kernel_count=len(k))
    s.by_name_device = _rows(group_stats({"name": name, "device_id": k.device}, dur), k.names, total, ["device_id"])
    s.by_name = _rows(group_stats({"name": name}, dur), k.names, total, [])
    # per process
    pid_stats = group_stats({"pid": k.pid}, dur)
    for i in pid_stats.order_by_total().tolist():
        s.by_pid.append({"pid": int(pid_stats.keys["pid"][i]), "count": int(pid_stats.count[i]),
                         "total_ns": int(pid_stats.total[i]), "pct": pct(int(pid_stats.total[i]), total)})
    pid_total = {r["pid"]: r["total_ns"] for r in s.by_pid}
    gs = group_stats({"pid": k.pid, "name": name, "device_id": k.device}, dur)
    for r in _rows(gs, k.names, total, ["pid", "device_id"]):
        r["pct_of_pid"] = pct(r["total_ns"], pid_total.get(r["pid"], 0))
        s.by_pid_name.append(r)
    s.by_pid_name.sort(key=lambda r: (r["pid"], -r["total_ns"], r["name"]))
    return s
