"""Memcpy / memset GPU activity by direction and memory kind.

Per group: ``count``, ``bytes``, ``total_ns`` (sum of ``end − start`` on the GPU), duration stats, and
achieved bandwidth ``gb_per_s`` = bytes / total_ns (1 byte/ns = 1 GB/s, decimal GB).
Direction labels follow ``ENUM_CUDA_MEMCPY_OPER``; memory kinds ``ENUM_CUDA_MEM_KIND`` (built-in fallbacks).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional

import numpy as np

from ..model.trace import TraceModel
from .idle import MEMCPY_KIND_LABEL
from .stats import group_stats

MEM_KIND_LABEL = {0: "Pageable", 1: "Pinned", 2: "Device", 3: "Array", 4: "Managed", 5: "Device Static",
                  6: "Managed Static", 7: "Unknown"}


def mem_kind(k: int) -> str:
    return MEM_KIND_LABEL.get(int(k), "Unknown" if k < 0 else str(int(k)))


@dataclass
class MemcpyResult:
    available: bool
    reason: Optional[str]
    by_direction: List[Dict] = field(default_factory=list)
    by_kind: List[Dict] = field(default_factory=list)
    memset: List[Dict] = field(default_factory=list)
    total_bytes: int = 0
    total_ns: int = 0


def _stats_rows(keys: Dict[str, np.ndarray], dur: np.ndarray, nbytes: np.ndarray, label) -> List[Dict]:
    gs = group_stats(keys, dur)
    # bytes per group: same grouping order → recompute with a stable key
    rows = []
    for i in gs.order_by_total().tolist():
        m = np.ones(dur.shape[0], bool)
        for k, v in keys.items():
            m &= v == gs.keys[k][i]
        b = int(nbytes[m].sum())
        t = int(gs.total[i])
        r = label({k: int(v[i]) for k, v in gs.keys.items()})
        r.update(count=int(gs.count[i]), bytes=b, total_ns=t, avg_ns=int(gs.avg[i]), p50_ns=int(gs.p50[i]),
                 min_ns=int(gs.min[i]), max_ns=int(gs.max[i]), gb_per_s=b / t if t > 0 else None)
        rows.append(r)
    return rows


def analyze_memcpy(model: TraceModel) -> MemcpyResult:
    mc, ms = model.memcpy, model.memset
    if (mc is None or len(mc) == 0) and (ms is None or len(ms) == 0):
        return MemcpyResult(False, "no memcpy or memset activity in the trace")
    res = MemcpyResult(True, None)
    if mc is not None and len(mc):
        dur = mc["end"] - mc["start"]
        res.total_bytes = int(mc["bytes"].sum())
        res.total_ns = int(dur.sum())
        res.by_direction = _stats_rows(
            {"copy_kind": mc["copy_kind"]}, dur, mc["bytes"],
            lambda k: {"direction": MEMCPY_KIND_LABEL.get(k["copy_kind"], str(k["copy_kind"])), **k})
        res.by_kind = _stats_rows(
            {"copy_kind": mc["copy_kind"], "src_kind": mc["src_kind"], "dst_kind": mc["dst_kind"]}, dur,
            mc["bytes"],
            lambda k: {"direction": MEMCPY_KIND_LABEL.get(k["copy_kind"], str(k["copy_kind"])),
                       "src_kind_name": mem_kind(k["src_kind"]), "dst_kind_name": mem_kind(k["dst_kind"]), **k})
    if ms is not None and len(ms):
        dur = ms["end"] - ms["start"]
        res.memset = _stats_rows({"mem_kind": ms["mem_kind"]}, dur, ms["bytes"],
                                 lambda k: {"mem_kind_name": mem_kind(k["mem_kind"]), **k})
    return res
