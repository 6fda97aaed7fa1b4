"""Launch storm: kernel launch rate and kernel-size distribution per device and per process.

launches/s = kernels on the device (or of the PID) in the analysis window / the window's length (the same
window as every other rate in the report; docs/MODEL.md).
Kernel duration percentiles use the shared definition in :mod:`stats`; ``pct_under_Xus`` = percent of
kernels shorter than X µs. A device or PID is flagged a *launch storm* when
(launches/s ≥ 50 000 and p50 ≤ 10 µs) or (launches/s ≥ 100 000 and p50 ≤ 20 µs). The flag is evaluated
per device and per PID only, never over all GPUs pooled.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional

import numpy as np

from ..model.trace import TraceModel
from .stats import group_stats, share_under

STORM_RULES = ((50_000.0, 10_000), (100_000.0, 20_000))  # (launches/s at least, p50 at most ns)
TINY_NS = 10_000


def is_storm(rate: float, p50_ns: float) -> bool:
    return any(rate >= r and p50_ns <= p for r, p in STORM_RULES)


@dataclass
class LaunchResult:
    available: bool
    reason: Optional[str]
    overall: Dict = field(default_factory=dict)
    per_device: List[Dict] = field(default_factory=list)
    per_pid: List[Dict] = field(default_factory=list)
    tiny_kernels: List[Dict] = field(default_factory=list)


def _rows(key_name: str, keys: np.ndarray, dur: np.ndarray, window: int) -> List[Dict]:
    out = []
    gs = group_stats({key_name: keys}, dur)
    for i in range(len(gs)):
        kv = int(gs.keys[key_name][i])
        m = keys == kv
        n = int(gs.count[i])
        rate = n / (window / 1e9) if window > 0 else 0.0
        row = {key_name: kv, "launches": n, "window_ns": window, "launches_per_s": rate,
               "p50_ns": int(gs.p50[i]), "p90_ns": int(gs.p90[i]), "p99_ns": int(gs.p99[i])}
        row.update(share_under(dur[m], (5_000, 10_000, 20_000)))
        row["launch_storm"] = is_storm(rate, float(gs.p50_exact[i]))
        out.append(row)
    return out


def analyze_launch(model: TraceModel, window_ns: int, top: int = 10) -> LaunchResult:
    """``model``: clipped to the analysis window; ``window_ns``: its length (the rate's denominator)."""
    k = model.kernels
    if k is None or len(k) == 0:
        return LaunchResult(False, "no CUDA kernels were captured")
    dur = k.dur
    res = LaunchResult(True, None)
    overall = _rows("all", np.zeros(len(k), np.int64), dur, window_ns)[0]
    overall.pop("all")
    overall["launch_storm"] = None  # never evaluated over all GPUs pooled
    res.overall = overall
    res.per_device = _rows("device_id", k.device, dur, window_ns)
    res.per_pid = _rows("pid", k.pid, dur, window_ns)
    gs = group_stats({"name": k.name_idx.astype(np.int64)}, dur)
    tiny = np.nonzero(gs.p50_exact < TINY_NS)[0]
    tiny = tiny[np.lexsort((gs.keys["name"][tiny], -gs.count[tiny]))][:top]
    res.tiny_kernels = [{"name": k.names[int(gs.keys["name"][i])], "count": int(gs.count[i]),
                         "avg_ns": int(gs.avg[i]), "p50_ns": int(gs.p50[i])} for i in tiny.tolist()]
    return res
