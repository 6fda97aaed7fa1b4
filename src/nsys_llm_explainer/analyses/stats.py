"""Grouped duration statistics — the single definition used by every table.

For each group: ``count``, ``total_ns`` (sum of ``end − start``), ``avg_ns`` (total / count, rounded half
up to an integer), ``min_ns``, ``max_ns``, and percentiles ``p50_ns`` / ``p90_ns`` / ``p99_ns`` computed
with linear interpolation between closest ranks (numpy's default method; p50 equals nsys stats' "Med"),
rounded half up to an integer. ``p50_exact`` keeps the unrounded median.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Sequence

import numpy as np


def round_half_up(x: np.ndarray) -> np.ndarray:
    return np.floor(np.asarray(x, dtype=np.float64) + 0.5).astype(np.int64)


@dataclass
class GroupStats:
    """Per-group statistics; ``keys`` holds one array per key column (aligned with the stats)."""

    keys: Dict[str, np.ndarray]
    count: np.ndarray
    total: np.ndarray
    min: np.ndarray
    max: np.ndarray
    avg: np.ndarray
    p50: np.ndarray
    p90: np.ndarray
    p99: np.ndarray
    p50_exact: np.ndarray

    def __len__(self) -> int:
        return int(self.count.shape[0])

    def order_by_total(self) -> np.ndarray:
        """Indices sorted by total descending (ties: count descending, then first key ascending)."""
        first = next(iter(self.keys.values())) if self.keys else np.zeros_like(self.count)
        return np.lexsort((first, -self.count, -self.total))


def percentile_sorted(values: np.ndarray, starts: np.ndarray, counts: np.ndarray, q: float) -> np.ndarray:
    """Linear-interpolation percentile ``q`` (0–100) of each segment of an already sorted array."""
    if counts.shape[0] == 0:
        return np.empty(0, np.float64)
    pos = (counts - 1) * (q / 100.0)
    lo = np.floor(pos).astype(np.int64)
    hi = np.minimum(lo + 1, counts - 1)
    frac = pos - lo
    vlo = values[starts + lo].astype(np.float64)
    vhi = values[starts + hi].astype(np.float64)
    return vlo + (vhi - vlo) * frac


def group_stats(keys: Dict[str, np.ndarray], dur: np.ndarray) -> GroupStats:
    """Statistics of ``dur`` grouped by the combination of ``keys`` (all int arrays of equal length)."""
    names = list(keys.keys())
    n = dur.shape[0]
    if n == 0:
        empty = np.empty(0, np.int64)
        return GroupStats({k: empty for k in names}, empty, empty, empty, empty, empty, empty, empty, empty,
                          np.empty(0, np.float64))
    cols = [np.asarray(keys[k], dtype=np.int64) for k in names]
    # sort by keys, then by duration (lexsort: last key is primary)
    order = np.lexsort([dur] + cols[::-1])
    sd = dur[order]
    sk = [c[order] for c in cols]
    change = np.zeros(n, bool)
    change[0] = True
    for c in sk:
        change[1:] |= c[1:] != c[:-1]
    starts = np.nonzero(change)[0]
    counts = np.diff(np.append(starts, n))
    total = np.add.reduceat(sd, starts)
    mn = sd[starts]
    mx = sd[starts + counts - 1]
    p50 = percentile_sorted(sd, starts, counts, 50)
    return GroupStats(
        keys={k: c[starts] for k, c in zip(names, sk)},
        count=counts.astype(np.int64), total=total.astype(np.int64), min=mn, max=mx,
        avg=round_half_up(total / counts),
        p50=round_half_up(p50), p90=round_half_up(percentile_sorted(sd, starts, counts, 90)),
        p99=round_half_up(percentile_sorted(sd, starts, counts, 99)), p50_exact=p50,
    )


def summary(dur: np.ndarray) -> Dict[str, int]:
    """Ungrouped statistics of ``dur`` as a JSON-ready dict (all integer ns)."""
    gs = group_stats({"all": np.zeros(dur.shape[0], np.int64)}, dur)
    if len(gs) == 0:
        return {"count": 0, "total_ns": 0, "avg_ns": 0, "min_ns": 0, "max_ns": 0, "p50_ns": 0, "p90_ns": 0,
                "p99_ns": 0}
    return {"count": int(gs.count[0]), "total_ns": int(gs.total[0]), "avg_ns": int(gs.avg[0]),
            "min_ns": int(gs.min[0]), "max_ns": int(gs.max[0]), "p50_ns": int(gs.p50[0]),
            "p90_ns": int(gs.p90[0]), "p99_ns": int(gs.p99[0])}


def pct(part: float, whole: float, digits: int = 4) -> float:
    """``100 * part / whole`` rounded; 0 when ``whole`` is 0."""
    return round(100.0 * part / whole, digits) if whole else 0.0


def share_under(dur: np.ndarray, thresholds_ns: Sequence[int]) -> Dict[str, float]:
    """Percent of ``dur`` strictly below each threshold."""
    n = dur.shape[0]
    return {f"pct_under_{t // 1000}us": pct(int((dur < t).sum()), n) for t in thresholds_ns}
