"""Interval arithmetic on sorted numpy arrays (no Python loops over rows).

*Union* (:class:`IntervalUnion`): overlapping or touching intervals merge into disjoint blocks; its length counts
every nanosecond covered by at least one interval once (gaps between blocks: ``model.timeline.DeviceTimeline.gaps``).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np


@dataclass(frozen=True)
class IntervalUnion:
    """Disjoint, sorted blocks covering the input intervals.

    ``last_row[b]``: input row (in the sorted input) whose end closes block ``b`` (earliest such row);
    ``first_row[b]``: input row that opens block ``b``.
    """

    start: np.ndarray
    end: np.ndarray
    first_row: np.ndarray
    last_row: np.ndarray

    @property
    def length(self) -> int:
        return int((self.end - self.start).sum())

    @cached_property
    def cum_before(self) -> np.ndarray:
        """Total length of the blocks before block ``k`` (computed on first use)."""
        c = np.zeros(self.start.shape[0], np.int64)
        if c.shape[0] > 1:
            np.cumsum((self.end - self.start)[:-1], out=c[1:])
        return c

    def __len__(self) -> int:
        return int(self.start.shape[0])


def in_window(start: np.ndarray, end: np.ndarray, w0: int, w1: int) -> np.ndarray:
    """Rows ``[start, end)`` that intersect the window ``[w0, w1)`` (a zero-length row: when inside it)."""
    e = np.maximum(end, start)
    return (start < w1) & ((e > w0) | ((e == start) & (start >= w0)))


def in_start_end_order(s: np.ndarray, e: np.ndarray) -> bool:
    """Are the rows already in (start, end) order (then a stable sort would keep them as they are)?"""
    if s.shape[0] < 2:
        return True
    if not (s[1:] >= s[:-1]).all():
        return False
    tie = np.nonzero(s[1:] == s[:-1])[0]
    return bool((e[tie + 1] >= e[tie]).all())


def union(start: np.ndarray, end: np.ndarray) -> IntervalUnion:
    """Union of intervals already sorted by ``start``. O(n), no sort: ``cm`` (furthest end so far) is
    non-decreasing, a block starts where ``start`` passes it, and the earliest row reaching the block's end
    is the block's last strict increase of ``cm``."""
    n = start.shape[0]
    if n == 0:
        e = np.empty(0, np.int64)
        return IntervalUnion(e, e, e, e)
    cm = np.maximum(end, start)
    np.maximum.accumulate(cm, out=cm)
    new = np.empty(n, bool)
    new[0] = True
    np.greater(start[1:], cm[:-1], out=new[1:])
    first = np.nonzero(new)[0]
    if first.shape[0] == n:                             # every row is its own block (no copy: arrays are not
        return IntervalUnion(start, cm, first, first)   # written to in place)
    rise = np.empty(n, bool)                            # cm strictly increases here (block starts included)
    rise[0] = True
    np.greater(cm[1:], cm[:-1], out=rise[1:])
    at = np.nonzero(rise)[0]
    del rise
    opens = np.nonzero(new[at])[0]                      # position in ``at`` of each block's first row
    del new
    last = at[np.append(opens[1:] - 1, at.shape[0] - 1)]
    del at, opens
    return IntervalUnion(start[first], np.maximum.reduceat(cm, first), first, last)   # cm ascends: its block maxima


def union_lean(start: np.ndarray, end: np.ndarray) -> IntervalUnion:
    """Union of intervals already sorted by ``start``: the same blocks as :func:`union`, without the
    first/last-row bookkeeping (``first_row`` / ``last_row`` are empty), so no sort is needed: O(n)."""
    n = start.shape[0]
    e0 = np.empty(0, np.int64)
    if n == 0:
        return IntervalUnion(e0, e0, e0, e0)
    s = np.asarray(start, dtype=np.int64)
    cm = np.maximum(np.asarray(end, dtype=np.int64), s)
    np.maximum.accumulate(cm, out=cm)
    new = np.empty(n, bool)
    new[0] = True
    np.greater(s[1:], cm[:-1], out=new[1:])
    first = np.nonzero(new)[0]
    del new
    return IntervalUnion(s[first], np.maximum.reduceat(cm, first), e0, e0)   # cm ascends: each block's last value


def union_blocks(start: np.ndarray, end: np.ndarray) -> IntervalUnion:
    """The blocks of the union of intervals in any order, without row bookkeeping (as :func:`union_lean`):
    rows already sorted by start (the model's tables are) are used as they are, with no copy or sort."""
    if start.shape[0] < 2 or bool((start[1:] >= start[:-1]).all()):
        return union_lean(start, end)
    order = np.argsort(start, kind="stable")
    return union_lean(start[order], end[order])


def covered_before(u: IntervalUnion, t: np.ndarray) -> np.ndarray:
    """Length of the union that lies before each time ``t`` (vectorized, O(log n) per query)."""
    if len(u) == 0:
        return np.zeros(np.shape(t), np.int64)
    cum = u.cum_before
    t = np.asarray(t, dtype=np.int64)
    i = np.searchsorted(u.start, t, side="right") - 1   # last block starting at or before t
    valid = i >= 0
    np.maximum(i, 0, out=i)
    partial = np.minimum(t, u.end[i])
    partial -= u.start[i]
    np.maximum(partial, 0, out=partial)
    partial += cum[i]
    partial[~valid] = 0
    return partial


def points_inside(u: IntervalUnion, t: np.ndarray) -> np.ndarray:
    """Whether each time ``t`` lies inside a block ``[start, end)`` of the union (one ``searchsorted``)."""
    t = np.asarray(t, dtype=np.int64)
    if len(u) == 0:
        return np.zeros(t.shape, bool)
    i = np.searchsorted(u.start, t, side="right") - 1   # last block starting at or before t
    return (i >= 0) & (t < u.end[np.maximum(i, 0)])


def overlap_length(u: IntervalUnion, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Length of ``[a, b)`` ∩ union for each query interval."""
    b = np.maximum(b, a)
    return covered_before(u, b) - covered_before(u, a)


def grouped_overlap(group: np.ndarray, start: np.ndarray, end: np.ndarray, n_groups: int,
                    w: IntervalUnion) -> np.ndarray:
    """Per group ``0 … n_groups − 1``: |(union of its rows ``[start, end)``) ∩ w|. One sort by (group, start); each
    group's rows are made disjoint with a per-group running maximum of ends (groups shifted apart in one key, or
    one pass per group when the key would overflow), then summed as :func:`overlap_length`: O(n log n)."""
    out = np.zeros(n_groups, np.int64)
    if group.shape[0] == 0 or len(w) == 0:
        return out
    o = np.lexsort((start, group))
    g, s, e = group[o], start[o].astype(np.int64), end[o].astype(np.int64)
    first = np.ones(g.shape[0], bool)
    first[1:] = g[1:] != g[:-1]
    seg = np.cumsum(first) - 1
    # running maximum of ends within each group: shift each group above the previous ones
    lo = int(min(s.min(), e.min()))
    span = int(max(s.max(), e.max())) - lo + 1
    prev = np.empty_like(e)
    if int(seg[-1]) * span < (1 << 62):
        key = seg * span + (e - lo)
        cm = np.maximum.accumulate(key) - seg * span + lo
        prev[1:] = cm[:-1]
    else:                                             # too many groups for one key: per group (groups are few)
        cm = np.empty_like(e)
        starts = np.nonzero(first)[0]
        for a, b in zip(starts.tolist(), np.append(starts[1:], e.shape[0]).tolist()):
            cm[a:b] = np.maximum.accumulate(e[a:b])
        prev[1:] = cm[:-1]
    prev[first] = np.iinfo(np.int64).min
    s2 = np.maximum(s, prev)
    ok = e > s2
    ns = overlap_length(w, s2[ok], e[ok])
    np.add.at(out, g[ok], ns)
    return out
