"""Nesting of NVTX push/pop ranges (parent, depth), computed with vectorized pointer jumping, per (thread, domain)
segment: ranges ordered by (thread, domain, start, −end), the parent of a range the nearest earlier range of the
segment whose end is ≥ its end; start/end ranges and ranges closed on another thread are not in the tree
(docs/METRICS.md, "NVTX ranges").

Every walk along the tree is O(n log depth), never one numpy pass per depth level (how: docs/PERFORMANCE.md,
"NVTX nesting"); ``ROUNDS["n"]`` counts the Python-level rounds of those loops (tests check they stay O(log depth)).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional

import numpy as np

from ...model.trace import NvtxRanges


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
    domain: np.ndarray      # NVTX domain id of each range
    sub_end: np.ndarray     # exclusive end of each node's subtree in tree order (preorder): [i, sub_end[i])
    _up: List[np.ndarray] = field(default_factory=list, repr=False, compare=False)  # binary-lifting cache

    def __len__(self) -> int:
        return int(self.row.shape[0])

    def lifting(self) -> List[np.ndarray]:
        """``up[k][i]``: the 2**k-th ancestor of node i (-1 past the root); built once, cached."""
        if not self._up and len(self):
            up = [self.parent]
            for _ in range(max(1, int(self.depth.max()).bit_length()) - 1):
                a = up[-1]
                up.append(np.where(a >= 0, a[np.maximum(a, 0)], -1))
            self._up.extend(up)
        return self._up



ROUNDS = {"n": 0}
_CHEAP_ROUNDS = 6


def prev_greater_equal(e: np.ndarray, lo: np.ndarray) -> np.ndarray:
    """For each i: the nearest j in ``[lo[i], i)`` with ``e[j] >= e[i]``, -1 when none (exact).

    A few rounds of pointer jumping settle shallow nestings; what is left (deep nestings, where each
    round climbs only one level) is found by a descent over a sparse table of range maxima."""
    n = e.shape[0]
    f = np.arange(n, dtype=np.int64) - 1
    f[f < lo] = -1
    act = np.nonzero(f >= 0)[0]
    for r in range(_CHEAP_ROUNDS + 1):
        fa = f[act]
        bad = e[fa] < e[act]      # invariant: every j in (f[i], i) has e[j] < e[i]
        act, fa = act[bad], fa[bad]
        if act.shape[0] == 0 or r == _CHEAP_ROUNDS:
            break
        ROUNDS["n"] += 1
        f[act] = f[fa]
        act = act[f[act] >= 0]
    if act.shape[0] == 0:
        return f
    # left: e[f[i]] < e[i], so e[f[i] .. i-1] < e[i]; extend that run leftwards by powers of two
    table = [e]
    while (1 << len(table)) <= n:
        h = 1 << (len(table) - 1)
        table.append(np.maximum(table[-1][:-h], table[-1][h:]))   # max of e[j .. j + 2**k - 1]
    v, lo_a, pos = e[act], lo[act], f[act]
    for k in range(len(table) - 1, -1, -1):
        ROUNDS["n"] += 1
        cand = pos - (1 << k)
        ok = cand >= lo_a
        ok[ok] = table[k][cand[ok]] < v[ok]
        pos = np.where(ok, cand, pos)
    f[act] = np.where(pos - 1 >= lo_a, pos - 1, -1)
    return f


def nearest_marked(parent: np.ndarray, marked: np.ndarray) -> np.ndarray:
    """Nearest ancestor-or-self of each node that is ``marked``, -1 when none —
    pointer doubling, O(log depth) rounds."""
    jump = parent.copy()   # invariant: nodes strictly between i and jump[i] are not marked
    act = np.nonzero(jump >= 0)[0]
    act = act[~marked[jump[act]]]
    while act.shape[0]:
        ROUNDS["n"] += 1
        jump[act] = jump[jump[act]]
        act = act[jump[act] >= 0]
        act = act[~marked[jump[act]]]
    return np.where(marked, np.arange(parent.shape[0]), jump)


def subtree_ends(parent: np.ndarray, seg: np.ndarray, seg_end: np.ndarray) -> np.ndarray:
    """Exclusive end of each subtree of a preorder forest (``seg``: segment per node, ``seg_end`` its
    end): the next sibling of the nearest ancestor-or-self that has one, else the segment's end."""
    n = parent.shape[0]
    key = np.where(parent >= 0, parent, -1 - seg)
    order = np.argsort(key, kind="stable")
    ks = key[order]
    nxt = np.full(n, -1, np.int64)
    same = ks[1:] == ks[:-1]
    nxt[order[:-1][same]] = order[1:][same]
    a = nearest_marked(parent, nxt >= 0)
    return np.where(a >= 0, nxt[np.maximum(a, 0)], seg_end).astype(np.int64)


def preorder_depth(sub_end: np.ndarray) -> np.ndarray:
    """Depth of each node of a preorder forest: the number of subtrees ``[j, sub_end[j])`` holding it."""
    n = sub_end.shape[0]
    closed = np.cumsum(np.bincount(sub_end, minlength=n + 1))[:n]   # nodes j with sub_end[j] <= i
    return np.arange(n, dtype=np.int64) - closed


def subtree_sums(tree: NvtxTree, values: np.ndarray) -> np.ndarray:
    """Per node: the sum of ``values`` over its subtree (itself and all descendants)."""
    c = np.concatenate(([0], np.cumsum(values, dtype=np.int64)))
    return c[tree.sub_end] - c[:-1]


def has_ancestor_with_key(tree: NvtxTree, key: np.ndarray) -> np.ndarray:
    """Per node: whether a strict ancestor has the same ``key`` (subtrees of one key are nested or
    disjoint, so a running maximum of subtree ends per key answers it)."""
    n = len(tree)
    if n == 0:
        return np.zeros(0, bool)
    o = np.argsort(np.asarray(key, np.int64), kind="stable")
    ko = np.asarray(key, np.int64)[o]
    gid = np.cumsum(np.concatenate(([True], ko[1:] != ko[:-1]))) - 1
    cm = np.maximum.accumulate(gid * (n + 1) + tree.sub_end[o])
    prev = np.full(n, -1, np.int64)
    prev[1:] = cm[:-1] - gid[1:] * (n + 1)   # < 0 when the previous entry is of another key
    out = np.zeros(n, bool)
    out[o] = prev > o
    return out


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
    bounds = np.append(np.nonzero(first)[0], n)
    seg = np.cumsum(first) - 1
    parent = prev_greater_equal(e, bounds[seg])
    sub_end = subtree_ends(parent, seg, bounds[seg + 1])
    return NvtxTree(row=rows, gtid=g, start=s, end=e, name_idx=nvtx.name_idx[rows], pid=nvtx.pid[rows],
                    parent=parent, depth=preorder_depth(sub_end), thread_bounds=bounds, domain=dom,
                    sub_end=sub_end)


def self_time(tree: NvtxTree) -> np.ndarray:
    """Exclusive time of each range: its duration minus its direct children's durations (≥ 0)."""
    dur = tree.end - tree.start
    child = np.zeros(len(tree), np.int64)
    has_p = tree.parent >= 0
    np.add.at(child, tree.parent[has_p], dur[has_p])
    return np.maximum(dur - child, 0)


def enclosing_by_domain(tree: NvtxTree, gtid: np.ndarray, t0: np.ndarray, t1: np.ndarray,
                        rows: Optional[np.ndarray] = None) -> Dict[int, np.ndarray]:
    """For each query (thread, [t0, t1]) and each NVTX domain: the innermost push/pop range of that domain on that
    thread with start ≤ t0 and end ≥ t1 — returned as **layers**: layer → per query a tree node (-1 none). A query's
    enclosing range of each domain is in exactly one layer, a layer holds at most one range per query, and the
    domain of a node is ``tree.domain[node]`` (:func:`domain_layer_nodes` gives one domain's). Domains whose
    queries do not meet share a layer (first fit); each (thread, domain) segment looks only at the queries of its
    thread within its span (memory and time: docs/PERFORMANCE.md, "NVTX domains × kernels"). ``rows``: the queries
    are these rows of the three arrays (None: every row), read without a copy of each array."""
    out: Dict[int, np.ndarray] = {}
    n = gtid.shape[0] if rows is None else rows.shape[0]
    if len(tree) == 0 or n == 0:
        return out
    bounds = tree.thread_bounds
    seg_starts = bounds[:-1]
    seg_g = tree.gtid[seg_starts]
    seg_d = tree.domain[seg_starts]
    seg_hi = np.maximum.reduceat(tree.end, seg_starts)          # latest end in the segment (a root's)
    seg_lo = tree.start[seg_starts]                             # earliest start (tree order: start ascending)
    qt = t0 if rows is None else t0[rows]
    qg = gtid if rows is None else gtid[rows]
    if n > 1 and bool((qt[1:] >= qt[:-1]).all()):             # queries by (thread, t0): launch calls come in
        qs = np.argsort(qg, kind="stable")                      # time order, so a stable sort by thread is enough
    else:
        qs = np.lexsort((qt, qg))
    qg = qg[qs]
    # per segment, the queries of its thread with seg_lo ≤ t0 ≤ seg_hi (the others have no enclosing range in it)
    g_lo = np.searchsorted(qg, seg_g, "left")
    g_hi = np.searchsorted(qg, seg_g, "right")
    del qg
    qt = qt[qs]
    lo = np.empty(seg_g.shape[0], np.int64)
    hi = np.empty(seg_g.shape[0], np.int64)
    for j, (a, b) in enumerate(zip(g_lo.tolist(), g_hi.tolist())):   # one step per segment, no per-query work
        if a == b:
            lo[j] = hi[j] = a
            continue
        lo[j] = a + int(np.searchsorted(qt[a:b], seg_lo[j], "left"))
        hi[j] = a + int(np.searchsorted(qt[a:b], seg_hi[j], "right"))
    layer_of: Dict[int, int] = {}   # domain → its layer for the current thread (domains are per thread here)
    for j in np.nonzero(hi > lo)[0].tolist():
        q = qs[lo[j]:hi[j]]
        a, b = int(bounds[j]), int(bounds[j + 1])
        cand = np.searchsorted(tree.start[a:b], qt[lo[j]:hi[j]], side="right")
        cand += a - 1                                           # a tree node; < a: none starts at or before t0
        cand[cand < a] = -1
        # climb to the first ancestor-or-self ending at or after t1 (ends never decrease upwards)
        qe = t1[q] if rows is None else t1[rows[q]]
        climb = np.flatnonzero((tree.end[cand] < qe) & (cand >= 0))   # (a -1 reads the last node's end: masked)
        if climb.shape[0]:
            up = tree.lifting()
            c, v = cand[climb], qe[climb]
            for k in range(len(up) - 1, -1, -1):
                ROUNDS["n"] += 1
                u = up[k][c]
                ok = u >= 0
                ok[ok] = tree.end[u[ok]] < v[ok]
                c = np.where(ok, u, c)
            cand[climb] = tree.parent[c]
        del qe, climb
        hit = cand >= 0
        if not hit.all():
            if not hit.any():
                continue
            q, cand = q[hit], cand[hit]
        del hit
        key = int(seg_d[j])
        layer = layer_of.get(key)
        if layer is None or (out[layer][q] >= 0).any():
            layer = next((i for i, arr in out.items() if not (arr[q] >= 0).any()), None)
            if layer is None:
                layer = len(out)
                out[layer] = np.full(n, -1, np.int64)
            layer_of[key] = layer
        out[layer][q] = cand
    return out


def domain_layer_nodes(tree: NvtxTree, layers: Dict[int, np.ndarray], domain: int, n: int) -> np.ndarray:
    """Per query, the node of ``domain`` among the ``layers`` of :func:`enclosing_by_domain` (-1 none)."""
    out = np.full(n, -1, np.int64)
    for arr in layers.values():
        m = arr >= 0
        m[m] = tree.domain[arr[m]] == domain
        out[m] = arr[m]
    return out


def distinct_calls(n_calls: int, li: np.ndarray) -> np.ndarray:
    """Distinct launch-call rows among ``li`` (ascending; a presence mask over the ``n_calls`` API rows, no sort)."""
    present = np.zeros(n_calls, np.bool_)
    present[li[li >= 0]] = True
    return np.flatnonzero(present)


def per_call(n_calls: int, li: np.ndarray, calls: np.ndarray, call_value: np.ndarray) -> np.ndarray:
    """Spread a value per distinct launch call (``calls``, sorted, rows of the ``n_calls`` API rows) to the work
    items launched by it (``li``: each item's API row, -1 none: gets -1)."""
    if calls.shape[0] == 0 or not (li >= 0).any():
        return np.full(li.shape[0], -1, np.int64)
    lut = np.full(n_calls + 1, -1, np.int64)     # the last slot, lut[-1], is the value of li = -1
    lut[calls] = call_value
    return lut[li]


def innermost_enclosing(tree: NvtxTree, gtid: np.ndarray, t0: np.ndarray, t1: np.ndarray,
                        rows: Optional[np.ndarray] = None) -> np.ndarray:
    """For each query (thread, [t0, t1]; ``rows``: see :func:`enclosing_by_domain`), the innermost push/pop range on
    that thread, over all domains, with start ≤ t0 and end ≥ t1 (latest start wins; ties: earliest end), as an index
    into the tree; -1 when none encloses it."""
    return combine_innermost(tree, enclosing_by_domain(tree, gtid, t0, t1, rows),
                             gtid.shape[0] if rows is None else rows.shape[0])


def combine_innermost(tree: NvtxTree, by_domain: Dict[int, np.ndarray], n: int) -> np.ndarray:
    """Innermost over domains of per-domain innermost nodes (latest start; ties: earliest end; exact ties: the
    lower domain id)."""
    best = np.full(n, -1, np.int64)
    for cand in by_domain.values():
        better = cand >= 0
        both = np.flatnonzero(better & (best >= 0))    # only these need a comparison of the two ranges
        if both.shape[0]:
            c, b = cand[both], best[both]
            sc, sb = tree.start[c], tree.start[b]
            ec, eb = tree.end[c], tree.end[b]
            win = (sc > sb) | ((sc == sb) & (ec < eb))
            win |= (sc == sb) & (ec == eb) & (tree.domain[c] < tree.domain[b])
            better[both] = win
            del c, b, sc, sb, ec, eb, both, win
        best[better] = cand[better]
    return best
