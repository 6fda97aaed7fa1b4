"""Nesting of NVTX push/pop ranges (parent, depth), computed with vectorized pointer jumping.

NVTX keeps one push/pop stack per thread *and domain*, so ranges of one (thread, domain) nest, while
ranges of different domains on the same thread may interleave (e.g. an ``NCCL:`` range that ends just
after the enclosing model-layer range). The tree is therefore built per (thread, domain) segment: ranges
are ordered by (thread, domain, start, −end); the parent of a range is the nearest earlier range of the
same segment whose end is ≥ its end. Start/end ranges (type 60/71) and ranges closed on another thread
are not part of the tree.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Optional

import numpy as np

from ..model.trace import NvtxRanges


@dataclass
class NvtxTree:
    """Push/pop ranges in (gtid, start, −end) order; ``row`` maps back into :class:`NvtxRanges`."""

    row: np.ndarray
    gtid: np.ndarray
    start: np.ndarray
    end: np.ndarray
    name_idx: np.ndarray
    pid: np.ndarray
    parent: np.ndarray      # index into this tree, -1 for roots
    depth: np.ndarray       # 0 for roots
    thread_bounds: np.ndarray  # start offsets of each (thread, domain) segment (plus len at the end)
    domain: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))

    def __len__(self) -> int:
        return int(self.row.shape[0])

    def ancestors_rounds(self):
        """Yield successive ancestor arrays (parent, grandparent, …) until all are -1."""
        anc = self.parent.copy()
        while (anc >= 0).any():
            yield anc
            anc = np.where(anc >= 0, self.parent[np.maximum(anc, 0)], -1)


def build_tree(nvtx: Optional[NvtxRanges]) -> Optional[NvtxTree]:
    if nvtx is None or len(nvtx) == 0:
        return None
    m = nvtx.is_push_pop & (nvtx.end_gtid < 0)
    rows = np.nonzero(m)[0]
    if rows.size == 0:
        return None
    g, s, e = nvtx.gtid[rows], nvtx.start[rows], nvtx.end[rows]
    dom = nvtx.domain[rows] if nvtx.domain.shape[0] == len(nvtx) else np.zeros(rows.shape[0], np.int64)
    order = np.lexsort((-e, s, dom, g))
    rows, g, s, e, dom = rows[order], g[order], s[order], e[order], dom[order]
    n = rows.shape[0]
    first = np.ones(n, bool)
    first[1:] = (g[1:] != g[:-1]) | (dom[1:] != dom[:-1])
    f = np.arange(n) - 1
    f[first] = -1
    # pointer jumping: f(x) moves left past ranges that end before x ends
    active = f >= 0
    while True:
        fc = np.maximum(f, 0)
        bad = active & (e[fc] < e)
        if not bad.any():
            break
        f = np.where(bad, f[fc], f)
        active = f >= 0
    parent = f
    depth = np.zeros(n, np.int64)
    anc = parent.copy()
    while (anc >= 0).any():
        depth += anc >= 0
        anc = np.where(anc >= 0, parent[np.maximum(anc, 0)], -1)
    bounds = np.append(np.nonzero(first)[0], n)
    return NvtxTree(row=rows, gtid=g, start=s, end=e, name_idx=nvtx.name_idx[rows], pid=nvtx.pid[rows],
                    parent=parent, depth=depth, thread_bounds=bounds, domain=dom)


def self_time(tree: NvtxTree) -> np.ndarray:
    """Exclusive time of each range: its duration minus its direct children's durations (≥ 0)."""
    dur = tree.end - tree.start
    child = np.zeros(len(tree), np.int64)
    has_p = tree.parent >= 0
    np.add.at(child, tree.parent[has_p], dur[has_p])
    return np.maximum(dur - child, 0)


def enclosing_by_domain(tree: NvtxTree, gtid: np.ndarray, t0: np.ndarray,
                        t1: np.ndarray) -> Dict[int, np.ndarray]:
    """Domain → for each query (thread, [t0, t1]), the innermost push/pop range of that domain on that
    thread with start ≤ t0 and end ≥ t1 (index into the tree, -1 when none)."""
    out: Dict[int, np.ndarray] = {}
    if len(tree) == 0 or gtid.shape[0] == 0:
        return out
    seg_starts = tree.thread_bounds[:-1]
    seg_g = tree.gtid[seg_starts]
    seg_d = tree.domain[seg_starts] if tree.domain.shape[0] == len(tree) else np.zeros(seg_g.shape[0], np.int64)
    qs = np.argsort(gtid, kind="stable")
    qg = gtid[qs]
    for j, (g, d) in enumerate(zip(seg_g.tolist(), seg_d.tolist())):
        lo, hi = np.searchsorted(qg, g, "left"), np.searchsorted(qg, g, "right")
        if lo == hi:
            continue
        q = qs[lo:hi]
        a, b = int(tree.thread_bounds[j]), int(tree.thread_bounds[j + 1])
        cand = np.searchsorted(tree.start[a:b], t0[q], side="right") - 1
        cand = np.where(cand >= 0, cand + a, -1)
        while True:
            c = np.maximum(cand, 0)
            bad = (cand >= 0) & (tree.end[c] < t1[q])
            if not bad.any():
                break
            cand = np.where(bad, tree.parent[c], cand)
        arr = out.get(int(d))
        if arr is None:
            arr = out[int(d)] = np.full(gtid.shape[0], -1, np.int64)
        arr[q] = cand
    return out


def innermost_enclosing(tree: NvtxTree, gtid: np.ndarray, t0: np.ndarray, t1: np.ndarray) -> np.ndarray:
    """For each query (thread, [t0, t1]), the innermost push/pop range on that thread, over all domains,
    with start ≤ t0 and end ≥ t1 (latest start wins; ties: earliest end), as an index into the tree;
    -1 when none encloses it."""
    return combine_innermost(tree, enclosing_by_domain(tree, gtid, t0, t1), gtid.shape[0])


def combine_innermost(tree: NvtxTree, by_domain: Dict[int, np.ndarray], n: int) -> np.ndarray:
    """Innermost over domains of per-domain innermost nodes (latest start; ties: earliest end)."""
    best = np.full(n, -1, np.int64)
    for cand in by_domain.values():
        c = np.maximum(cand, 0)
        b = np.maximum(best, 0)
        better = (cand >= 0) & ((best < 0) | (tree.start[c] > tree.start[b])
                                | ((tree.start[c] == tree.start[b]) & (tree.end[c] < tree.end[b])))
        best = np.where(better, cand, best)
    return best
