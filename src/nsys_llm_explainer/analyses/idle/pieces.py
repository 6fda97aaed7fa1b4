"""The idle gaps of one host thread cut into elementary pieces, each charged to one idle-cause kind (docs/MODEL.md,
"How the pieces are cut").
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Callable, List, Sequence, Tuple

import numpy as np

from ...model.timeline import DeviceTimeline, run_starts
from ...vocabulary.cause_kinds import API_KINDS, KIND_CODE
from ...vocabulary.os_calls import waits_of
from ..nvtx.tree import innermost_enclosing
from .range_names import normalize_range_name
from .result import IdlePieces

if TYPE_CHECKING:   # the host side of the trace (built once per trace, shared by every device)
    from .host_context import HostContext

K = KIND_CODE


class Cover:
    """Point coverage by a set of intervals sorted by start: which row covers ``t`` (the one reaching
    furthest, i.e. the outermost of nested calls; ties: the later row)."""

    def __init__(self, start: np.ndarray, end: np.ndarray) -> None:
        self.start = start
        n = start.shape[0]
        self.cm = np.maximum.accumulate(np.maximum(end, start)) if n else end      # furthest end so far
        idx = np.arange(n)
        self.arg = np.maximum.accumulate(np.where(end >= self.cm, idx, 0)) if n else idx   # row reaching it

    def row(self, t: np.ndarray) -> np.ndarray:
        """Covering row per time (-1 when none)."""
        if self.start.shape[0] == 0:
            return np.full(t.shape[0], -1, np.int64)
        i = np.searchsorted(self.start, t, side="right") - 1
        ok = i >= 0
        i0 = np.maximum(i, 0)
        ok &= self.cm[i0] > t
        return np.where(ok, self.arg[i0], -1)


def index_runs(lo: np.ndarray, n: np.ndarray) -> np.ndarray:
    """The indices ``lo[i] … lo[i] + n[i] − 1`` of all runs, concatenated (``n`` ≥ 0)."""
    keep = n > 0
    lo, n = lo[keep], n[keep]
    if lo.shape[0] == 0:
        return np.empty(0, np.int64)
    shift = lo - np.concatenate(([0], np.cumsum(n)[:-1]))
    return np.arange(int(n.sum()), dtype=np.int64) + np.repeat(shift, n)


def within(t: np.ndarray, us: np.ndarray, ue: np.ndarray) -> np.ndarray:
    """Indices of the sorted times ``t`` that lie in one of the disjoint sorted intervals ``[us, ue)``
    (two ``searchsorted`` per interval, then the index runs)."""
    lo = np.searchsorted(t, us, side="left")
    return index_runs(lo, np.searchsorted(t, ue, side="left") - lo)


def touching(gs: np.ndarray, ge: np.ndarray, s: np.ndarray, e: np.ndarray) -> np.ndarray:
    """Per row ``[s, e]``: does it meet a closed gap ``[gs, ge]`` (gaps sorted, disjoint)? Rows that do not
    neither put a boundary inside a gap nor cover any point of one."""
    n = gs.shape[0]
    if n == 0 or s.shape[0] == 0:
        return np.zeros(s.shape[0], bool)
    lo, hi = (s, e) if bool((e >= s).all()) else (np.minimum(s, e), np.maximum(s, e))
    j = np.searchsorted(ge, lo, side="left")                # first gap ending at or after the row's start
    return (j < n) & (gs[np.minimum(j, n - 1)] <= hi)


@dataclass(frozen=True)
class DeviceGaps:
    """The idle gaps of one device timeline (time order) and what charges their pieces whatever the host thread:
    ``queued_from`` — per gap, the point from which the next kernel is queued (its launch call's end, clipped to
    the gap; ``end + 1`` when never), and the device's copies (``copy_cover`` with each copy's detail code)."""

    tl: DeviceTimeline
    start: np.ndarray
    end: np.ndarray
    queued_from: np.ndarray
    copy_cover: Cover
    copy_det: np.ndarray

    @cached_property
    def copy_ends(self) -> np.ndarray:
        """The device's copy ends (clipped to the window), sorted: sorted once, read by every thread's pass."""
        return np.sort(self.tl.copy_end)


#: the pieces of one thread's gaps, in time order: (gap index, kind code, detail code, length ns, start ns, shadow);
#: ``shadow`` per piece: for a ``copy`` piece, the kind it would take without the copies (:func:`thread_pieces`), -1
#: for the others
Pieces = Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]
#: shadow kinds of a copy piece in which a kernel waits on the copy (``osrt``: only a waiting call; ``unknown`` is
#: kept apart): docs/MODEL.md, "Copies the kernels waited on"
WAITING_SHADOWS: Tuple[str, ...] = ("queued", "sync", "sync_memcpy", "pageable_memcpy", "launch", "osrt")
WAITING_CODES = np.array([KIND_CODE[k] for k in WAITING_SHADOWS], np.int8)
UNKNOWN_CODE = KIND_CODE["unknown"]


def thread_rows(host: HostContext, g: int, sgs: np.ndarray, sge: np.ndarray
                ) -> Tuple[np.ndarray, np.ndarray, np.ndarray, bool]:
    """The rows of thread ``g`` touching the closed intervals ``[sgs, sge]`` (sorted, disjoint): row indices into
    the model's tables, in start order, of its API calls with a kind, NVTX tree nodes and OS-runtime calls; and
    whether the thread has OS-runtime rows at all (touching a gap or not)."""
    e = np.empty(0, np.int64)
    a = host.api_near(g, sgs, sge) if sgs.shape[0] else e
    t = e
    tree, osrt = host.tree, host.model.osrt
    if tree is not None and len(tree):
        t = host.thread_rows_of("nvtx", g)
        t = t[touching(sgs, sge, tree.start[t], tree.end[t])]
    o, o_any = e, False
    if osrt is not None and len(osrt):
        o = host.thread_rows_of("osrt", g)
        o_any = o.shape[0] > 0
        o = o[touching(sgs, sge, osrt.start[o], osrt.end[o])]
    return a, t, o, o_any


def cut(sgs: np.ndarray, sge: np.ndarray, queued: np.ndarray, extra: Sequence[np.ndarray]
        ) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Pieces of the gaps ``[sgs, sge)`` (sorted, disjoint) cut at the queued points ``queued`` (in
    ``[sgs, sge]``, or ``sge + 1`` when never queued) and at the values of ``extra`` inside a gap:
    ``(t0, t1, p)`` in time order, ``p`` the index of the piece's gap in ``sgs``. Built by placing each
    gap's distinct interior cut points after its start (no sort over all gaps)."""
    n = sgs.shape[0]
    x = np.concatenate([queued[queued > sge]] + [np.asarray(v, np.int64) for v in extra])
    px = np.searchsorted(sgs, x, side="right") - 1
    pc = np.maximum(px, 0)
    ok = (px >= 0) & (x > sgs[pc]) & (x < sge[pc])       # strictly inside a gap: cuts it
    x, px = x[ok], px[ok]
    order = np.argsort(x, kind="stable")
    x, px = x[order], px[order]
    h_in = (queued > sgs) & (queued < sge)
    hp = np.nonzero(h_in)[0]
    hv = queued[hp]
    if x.shape[0]:                                      # merge the two sorted cut lists (value order)
        at = np.searchsorted(hv, x, side="right") + np.arange(x.shape[0])
        v = np.empty(hv.shape[0] + x.shape[0], np.int64)
        vp = np.empty(v.shape[0], np.int64)
        from_h = np.ones(v.shape[0], bool)
        from_h[at] = False
        v[at], vp[at] = x, px
        v[from_h], vp[from_h] = hv, hp
        if v.shape[0] > 1:
            keep = np.empty(v.shape[0], bool)
            keep[0] = True
            np.not_equal(v[1:], v[:-1], out=keep[1:])
            v, vp = v[keep], vp[keep]
    else:
        v, vp = hv, hp
    c = np.bincount(vp, minlength=n)                    # cut points per gap
    first = np.arange(n, dtype=np.int64)                # index of each gap's first piece
    first[1:] += np.cumsum(c)[:-1]
    t0 = np.empty(n + v.shape[0], np.int64)
    t0[first] = sgs
    t0[np.arange(v.shape[0]) + vp + 1] = v
    t1 = np.empty_like(t0)
    t1[:-1] = t0[1:]
    t1[first + c] = sge
    return t0, t1, np.repeat(np.arange(n, dtype=np.int32 if n < (1 << 31) else np.int64), c + 1)


def thread_pieces(host: HostContext, gaps: DeviceGaps, g: int, gi: np.ndarray) -> Pieces:
    """Pieces of the gaps ``gi`` (indices into ``gaps``) of host thread ``g`` (-1 unknown), in time order."""
    api, tree, osrt, tl = host.model.api, host.tree, host.model.osrt, gaps.tl
    gs, ge, queued_from = gaps.start, gaps.end, gaps.queued_from
    every = gi.shape[0] == gs.shape[0]                  # all gaps are on this thread: no gathers needed
    sgs, sge, sq = (gs, ge, queued_from) if every else (gs[gi], ge[gi], queued_from[gi])
    e = np.empty(0, np.int64)
    pre = sq > sgs               # rows matter only before the queued point: after it, copy or queued wins
    r_api, r_tree, r_osrt, osrt_any = thread_rows(host, g, sgs[pre], np.minimum(sq[pre], sge[pre])) \
        if g >= 0 else (e, e, e, False)
    extra: List[np.ndarray] = [tl.copy_start, tl.copy_end]
    if api is not None and r_api.shape[0]:
        extra += [api.start[r_api], api.end[r_api]]
    if tree is not None and r_tree.shape[0]:
        extra += [tree.start[r_tree], tree.end[r_tree]]
    if osrt is not None and r_osrt.shape[0]:
        extra += [osrt.start[r_osrt], osrt.end[r_osrt]]
    t0, t1, p = cut(sgs, sge, sq, extra)
    gap = p if every else gi[p]
    kind = np.full(t0.shape[0], -1, np.int8)
    det = np.zeros(t0.shape[0], np.int32)           # detail codes: few (one per distinct name)

    def assign(k: int, row_of: Callable[[np.ndarray], np.ndarray], det_of_row: np.ndarray) -> None:
        """Charge the still free pieces that ``row_of`` covers (row ≥ 0) to kind ``k``, with the detail code of the
        covering row (``det_of_row``: per row of the cover)."""
        free = np.nonzero(kind < 0)[0]
        if free.shape[0] == 0:
            return
        r = row_of(t0[free])
        hit = r >= 0
        sel = free[hit]
        kind[sel] = k
        det[sel] = det_of_row[r[hit]]

    # the copy pieces are found first and charged to ``copy`` once the passes that decide whether a kernel waits on
    # them (queued, the API kinds, the waiting OS calls) have given them their shadow kind: one cutting pass
    copy_det, cp, cdet = gaps.copy_det, e, e
    if copy_det.shape[0]:                  # only pieces starting inside the copies' union can be copies
        cand = within(t0, tl.copies.start, tl.copies.end)
        r = gaps.copy_cover.row(t0[cand])
        # and a copy ends after the piece, within its gap: else the work after the gap started while every copy in
        # flight still ran — it waited on none of them (docs/MODEL.md, "idle causes", row 1)
        ends = gaps.copy_ends
        j = np.searchsorted(ends, ge[gap[cand]], side="right") - 1
        hit = (r >= 0) & (j >= 0) & (ends[np.maximum(j, 0)] > t0[cand])
        cp, cdet = cand[hit], copy_det[r[hit]]
    queued = t0 >= queued_from[gap]
    q = np.nonzero(queued)[0]
    kind[q] = K["queued"]
    det[q] = 0
    shadow = np.full(t0.shape[0], -1, np.int8)

    def charge_copies() -> None:
        """The copy pieces' shadow kinds (those still free: ``host_cpu``, standing for any kind that does not wait)
        kept in ``shadow``, then the pieces charged to ``copy``."""
        if cp.shape[0]:
            sk = kind[cp]
            shadow[cp] = np.where(sk < 0, K["host_cpu"], sk)
            kind[cp] = K["copy"]
            det[cp] = cdet

    if g < 0:
        kind[kind < 0] = K["unknown"]
        charge_copies()
        return gap, kind, det, t1 - t0, t0, shadow
    # base-name index → detail code: registers the base names as details first (detail codes break ties by order)
    dmap = np.array([host.detail_code(s) for s in host.base_names] + [0], np.int64)
    for name in API_KINDS:
        r_k = r_api[host.kinds[r_api] == K[name]]
        if api is None or r_k.shape[0] == 0:
            continue
        cov = Cover(api.start[r_k], api.end[r_k])
        assign(K[name], cov.row, dmap[host.base_idx[r_k]])
    # the thread's OS-runtime calls (``osrt``, the outermost covering call's name as detail): those that wait before
    # the NVTX ranges, the others after them; every call name is registered as a detail (the same codes on every run)
    osrt_passes: List[Tuple[Callable[[np.ndarray], np.ndarray], np.ndarray]] = []
    if osrt is not None and osrt_any:
        ni = osrt.name_idx
        odet = np.array([host.detail_code(s) for s in osrt.names] + [host.detail_code("")], np.int64)
        waits = waits_of(osrt.names)[ni[r_osrt]]
        osrt_passes = [(Cover(osrt.start[o], osrt.end[o]).row, odet[ni[o]]) for o in (r_osrt[waits], r_osrt[~waits])]
    if osrt_passes:                          # a call that waits on another thread wins over the range around it
        assign(K["osrt"], *osrt_passes[0])
    charge_copies()                          # what follows does not wait: the copies' shadow is host work
    if tree is not None and r_tree.shape[0]:
        q = np.nonzero(kind < 0)[0]
        node = innermost_enclosing(tree, np.full(q.shape[0], g, np.int64), t0[q], t1[q])
        hit = node >= 0
        names = tree.name_idx[node[hit]]
        uniq, inv = np.unique(names, return_inverse=True)
        dm = np.array([host.detail_code(normalize_range_name(host.nvtx_names[u])) for u in uniq.tolist()], np.int64)
        kind[q[hit]] = K["nvtx"]
        det[q[hit]] = dm[inv.reshape(-1)] if uniq.shape[0] else 0
    if osrt_passes:
        assign(K["osrt"], *osrt_passes[1])
    kind[kind < 0] = K["host_cpu"]
    return gap, kind, det, t1 - t0, t0, shadow


def gap_codes(n_gaps: int, pk: np.ndarray, pg: np.ndarray, pns: np.ndarray) -> np.ndarray:
    """Per gap: the cause code with the most ns in it (ties: the lower code, i.e. precedence order), -1 for
    none. ``(pk, pg, pns)``: cause, gap and ns of each distinct (cause, gap) pair. Gaps with one cause need
    no sort."""
    code = np.full(n_gaps, -1, np.int64)
    multi = np.bincount(pg, minlength=n_gaps) > 1 if pg.shape[0] else np.zeros(n_gaps, bool)
    single = ~multi[pg]
    code[pg[single]] = pk[single]
    rows = np.nonzero(~single)[0]
    if rows.shape[0]:
        best = rows[np.lexsort((pk[rows], -pns[rows], pg[rows]))]
        first = best[run_starts(pg[best])]
        code[pg[first]] = pk[first]
    return code


def host_pieces(parts: List[Pieces], threads: List[int], details: List[str],
                codes: np.ndarray) -> IdlePieces:
    """The pieces whose kind code is in ``codes`` of every thread's part (``thread_pieces`` output, one per
    thread of ``threads``), in time order (see :class:`IdlePieces`)."""
    cols: List[Tuple[np.ndarray, ...]] = []
    for (_, kind, det, ln, t0, _), g in zip(parts, threads):
        m = np.isin(kind, codes)
        s = t0[m]
        cols.append((s, s + ln[m], kind[m], det[m], np.full(s.shape[0], g, np.int64)))
    if not cols:
        e = np.empty(0, np.int64)
        return IdlePieces(e, e, np.empty(0, np.int8), np.empty(0, np.int32), e, tuple(details))
    start, end, kind, det, gtid = (np.concatenate(c) for c in zip(*cols))
    if len(parts) > 1:
        order = np.argsort(start, kind="stable")
        start, end, kind, det, gtid = (a[order] for a in (start, end, kind, det, gtid))
    return IdlePieces(start, end, kind, det, gtid, tuple(details))
