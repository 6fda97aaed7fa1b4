"""Where every idle nanosecond went: each ns of each device's idle gaps is charged to exactly one cause
``(kind, detail)`` — the first kind of :data:`KINDS` whose condition holds at that ns (docs/MODEL.md).

The gap's *host thread* is the thread whose CUDA call launched the activity opening the busy block after
the gap; for the trailing gap (or when that activity has no linked call) the one that launched the
activity closing the block before it; else the thread that launched most of the device's activity; else
``unknown``. Each gap is cut into elementary pieces at every boundary of copies, the queued point, and the
thread's API calls, NVTX push/pop ranges and OS-runtime calls; each piece takes the first kind that
covers it. Σ causes = idle exactly (asserted). Vectorized: work per thread and per kind, never per row.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..model.timeline import DeviceTimeline
from ..model.trace import TraceModel
from . import api_classes as ac
from .idle_cause_result import KINDS, DeviceCauses, GapExample, IdleCause, IdleCausesResult
from .nvtx_tree import NvtxTree, innermost_enclosing
from .stats import pct
from .timeline_bins import DeviceBins, device_bins

K = {k: i for i, k in enumerate(KINDS)}
API_KINDS = ("sync", "sync_memcpy", "pageable_memcpy", "alloc", "module_load", "launch", "other_api")
ONE_TIME = {"module_load"}
MAX_EXAMPLES = 3
LONG_GAP_NS = 1_000_000   # gaps at least this long are "long"; ``short_gap_ns`` counts the others
TINY_GAP_NS = 10_000      # ``tiny_gap_ns`` counts ns in gaps shorter than this (back-to-back kernels)
_DIGITS = re.compile(r"(?<![A-Za-z0-9])\d+|\d+(?![A-Za-z0-9])")
_MODULE_LOAD = re.compile(r"^(cu|cuda)(Module|Library)Load")


def normalize_range_name(name: str) -> str:
    """NVTX range name with digit runs replaced by ``N`` unless between two letters (``layer_12_attn`` →
    ``layer_N_attn``, ``h2d_copy`` unchanged)."""
    return _DIGITS.sub("N", name)


# ------------------------------------------------------------------------------------------ API kinds


def api_kinds(full: TraceModel, model: TraceModel) -> Tuple[np.ndarray, List[str], np.ndarray]:
    """Per API row of ``model``: kind code (index into :data:`KINDS`, -1 = not a runtime/driver row), the
    base-name list and the row → base-name index. First launches are found on ``full`` (the whole
    capture) and matched to ``model``'s rows by (pid, correlation id)."""
    api = model.api
    if api is None or len(api) == 0:
        return np.empty(0, np.int64), [], np.empty(0, np.int64)
    base = [ac.normalize(n) for n in api.names]
    uniq = sorted(set(base))
    pos = {b: i for i, b in enumerate(uniq)}
    name_to_base = np.array([pos[b] for b in base] + [0], np.int64)
    per_name = np.array([_name_kind(b) for b in base] + [K["other_api"]], np.int64)
    kinds = per_name[api.name_idx]
    is_async_copy = np.array([("Memcpy" in b and "Async" in b) for b in base] + [False], bool)[api.name_idx]
    mc = model.memcpy
    if mc is not None and len(mc) and "launch_idx" in mc.cols:
        pg = np.zeros(len(mc), bool)
        for c in ("src_kind", "dst_kind"):
            if c in mc.cols:
                pg |= np.asarray(mc.cols[c], np.int64) == 0
        li = np.asarray(mc["launch_idx"], np.int64)[pg]
        li = li[li >= 0]
        hit = np.zeros(len(api), bool)
        hit[li] = True
        kinds = np.where(hit & is_async_copy, K["pageable_memcpy"], kinds)
    first = _first_launch_keys(full)
    if first.shape[0]:
        key = api.pid.astype(np.int64) * (1 << 32) + (api.corr.astype(np.int64) & 0xFFFFFFFF)
        fl = np.isin(key, first) & (kinds == K["launch"])
        kinds = np.where(fl, K["module_load"], kinds)
    kinds = np.where(api.primary, kinds, -1)
    return kinds, uniq, name_to_base[api.name_idx]


def _name_kind(b: str) -> int:
    if b in ac.SYNC_WAIT:
        return K["sync"]
    if b in ac.SYNC_MEMCPY:
        return K["sync_memcpy"]
    if b in ac.ALLOC or b in ac.FREE:
        return K["alloc"]
    if _MODULE_LOAD.search(b):
        return K["module_load"]
    if b in ac.LAUNCH:
        return K["launch"]
    return K["other_api"]


def _first_launch_keys(full: TraceModel) -> np.ndarray:
    """(pid << 32 | corr) of the launch call of the first kernel of each (process, kernel name)."""
    k, api = full.kernels, full.api
    if k is None or len(k) == 0 or api is None or k.launch_idx.shape[0] != len(k):
        return np.empty(0, np.int64)
    key = k.pid.astype(np.int64) * (1 << 32) + k.name_idx.astype(np.int64)
    _, first = np.unique(key, return_index=True)        # kernels are sorted by start: first = earliest
    li = k.launch_idx[first]
    li = li[li >= 0]
    return np.unique(api.pid[li].astype(np.int64) * (1 << 32) + (api.corr[li].astype(np.int64) & 0xFFFFFFFF))


# ------------------------------------------------------------------------------------------ coverage


class _Cover:
    """Point coverage by a set of intervals sorted by start: which row covers ``t`` (the one reaching
    furthest, i.e. the outermost of nested calls)."""

    def __init__(self, start: np.ndarray, end: np.ndarray) -> None:
        self.start = start
        n = start.shape[0]
        self.cm = np.maximum.accumulate(np.maximum(end, start)) if n else end
        idx = np.arange(n)
        self.arg = np.maximum.accumulate(np.where(end >= self.cm, idx, 0)) if n else idx

    def row(self, t: np.ndarray) -> np.ndarray:
        """Covering row per time (-1 when none)."""
        if self.start.shape[0] == 0:
            return np.full(t.shape[0], -1, np.int64)
        i = np.searchsorted(self.start, t, side="right") - 1
        ok = i >= 0
        i0 = np.maximum(i, 0)
        ok &= self.cm[i0] > t
        return np.where(ok, self.arg[i0], -1)


def _sorted_distinct(x: np.ndarray) -> np.ndarray:
    """Sorted distinct values (sort + neighbour compare: faster than hashing for millions of values)."""
    x = np.sort(x)
    if x.shape[0] < 2:
        return x
    keep = np.empty(x.shape[0], bool)
    keep[0] = True
    np.not_equal(x[1:], x[:-1], out=keep[1:])
    return x[keep]


def _inside(x: np.ndarray, gs: np.ndarray, ge: np.ndarray) -> np.ndarray:
    p = np.searchsorted(gs, x, side="right") - 1
    return (p >= 0) & (x <= ge[np.maximum(p, 0)])


# ------------------------------------------------------------------------------------------ main


@dataclass
class _Ctx:
    model: TraceModel
    kinds: np.ndarray
    base_idx: np.ndarray
    details: List[str]
    detail_pos: Dict[str, int]
    tree: Optional[NvtxTree]
    nvtx_names: Sequence[str]
    base_names: Sequence[str]

    def det(self, s: str) -> int:
        j = self.detail_pos.get(s)
        if j is None:
            j = self.detail_pos[s] = len(self.details)
            self.details.append(s)
        return j


def _thread_pieces(ctx: _Ctx, tl: DeviceTimeline, g: int, gi: np.ndarray, gs: np.ndarray, ge: np.ndarray,
                   hce: np.ndarray, copy_cover: _Cover, copy_det: np.ndarray):
    """Pieces of gaps ``gi`` (host thread ``g``; -1 unknown): (gap index, kind, detail, length)."""
    m, api = ctx.model, ctx.model.api
    sgs, sge = gs[gi], ge[gi]
    bounds = [sgs, sge, hce[gi], tl.copy_start, tl.copy_end]
    api_rows = np.empty(0, np.int64)
    if g >= 0 and api is not None and len(api):
        api_rows = np.nonzero((api.gtid == g) & (ctx.kinds >= 0))[0]
        bounds += [api.start[api_rows], api.end[api_rows]]
    tree_rows = np.empty(0, np.int64)
    if g >= 0 and ctx.tree is not None and len(ctx.tree):
        tree_rows = np.nonzero(ctx.tree.gtid == g)[0]
        bounds += [ctx.tree.start[tree_rows], ctx.tree.end[tree_rows]]
    os_rows = np.empty(0, np.int64)
    if g >= 0 and m.osrt is not None and len(m.osrt):
        os_rows = np.nonzero(m.osrt["gtid"] == g)[0]
        bounds += [m.osrt["start"][os_rows], m.osrt["end"][os_rows]]
    b = np.concatenate([np.asarray(x, np.int64) for x in bounds])
    b = _sorted_distinct(b[_inside(b, sgs, sge)])
    t0, t1 = b[:-1], b[1:]
    p = np.searchsorted(sgs, t0, side="right") - 1
    ok = (p >= 0) & (t1 <= sge[np.maximum(p, 0)])
    t0, t1, p = t0[ok], t1[ok], p[ok]
    gap = gi[p]
    kind = np.full(t0.shape[0], -1, np.int64)
    det = np.zeros(t0.shape[0], np.int64)

    def assign(mask: np.ndarray, k: int, d: np.ndarray) -> None:
        free = mask & (kind < 0)
        kind[free] = k
        det[free] = d[free] if d.shape else d

    r = copy_cover.row(t0)
    assign(r >= 0, K["copy"], copy_det[np.maximum(r, 0)] if copy_det.shape[0] else np.zeros_like(r))
    assign(t0 >= hce[gap], K["queued"], np.zeros_like(t0))
    if g < 0:
        assign(np.ones_like(kind, bool), K["unknown"], np.zeros_like(t0))
        return gap, kind, det, t1 - t0, t0
    dmap = np.array([ctx.det(s) for s in ctx.base_names] + [0], np.int64)
    for name in API_KINDS:
        rows = api_rows[ctx.kinds[api_rows] == K[name]]
        if rows.shape[0] == 0:
            continue
        rr = _Cover(api.start[rows], api.end[rows]).row(t0)
        assign(rr >= 0, K[name], dmap[ctx.base_idx[rows[np.maximum(rr, 0)]]])
    if tree_rows.shape[0]:
        q = np.nonzero(kind < 0)[0]
        node = innermost_enclosing(ctx.tree, np.full(q.shape[0], g, np.int64), t0[q], t1[q])
        hit = node >= 0
        names = ctx.tree.name_idx[np.maximum(node[hit], 0)]
        uniq, inv = np.unique(names, return_inverse=True)
        dm = np.array([ctx.det(normalize_range_name(ctx.nvtx_names[int(u)])) for u in uniq.tolist()], np.int64)
        kind[q[hit]] = K["nvtx"]
        det[q[hit]] = dm[inv.reshape(-1)] if uniq.shape[0] else 0
    if os_rows.shape[0]:
        rr = _Cover(m.osrt["start"][os_rows], m.osrt["end"][os_rows]).row(t0)
        ni = m.osrt.cols.get("name_idx")
        if ni is not None:
            dm = np.array([ctx.det(s) for s in m.osrt.names] + [ctx.det("")], np.int64)
            d = dm[np.where(rr >= 0, ni[os_rows][np.maximum(rr, 0)], len(m.osrt.names))]
        else:
            d = np.zeros_like(t0)
        assign(rr >= 0, K["osrt"], d)
    assign(np.ones_like(kind, bool), K["host_cpu"], np.zeros_like(t0))
    return gap, kind, det, t1 - t0, t0


def _device(ctx: _Ctx, tl: DeviceTimeline, n_bins: int) -> Tuple[DeviceCauses, Optional[DeviceBins]]:
    api = ctx.model.api
    gp = tl.gaps()
    gs, ge = gp.start, gp.end
    li = tl.act.launch_idx
    has_api = api is not None and len(api) > 0
    nli = np.where(gp.next_row >= 0, li[np.maximum(gp.next_row, 0)], -1) if li.shape[0] else gp.next_row * 0 - 1
    pli = np.where(gp.prev_row >= 0, li[np.maximum(gp.prev_row, 0)], -1) if li.shape[0] else gp.prev_row * 0 - 1
    if has_api:
        linked = api.gtid[li[li >= 0]]
        dom_g = -1
        if linked.shape[0]:
            threads = np.unique(linked[:: max(1, linked.shape[0] // 100_000)])   # few distinct launch threads
            threads = _sorted_distinct(np.concatenate([threads, linked[np.isin(linked, threads, invert=True)]]))
            dom_g = int(threads[np.bincount(np.searchsorted(threads, linked)).argmax()])
        thread = np.where(nli >= 0, api.gtid[np.maximum(nli, 0)],
                          np.where(pli >= 0, api.gtid[np.maximum(pli, 0)], dom_g)).astype(np.int64)
        hce = np.where(nli >= 0, np.clip(api.end[np.maximum(nli, 0)], gs, ge), ge + 1)
    else:
        thread = np.full(len(gp), -1, np.int64)
        hce = ge + 1                                   # never queued
    copy_cover = _Cover(tl.copy_start, tl.copy_end)
    copy_det = np.array([ctx.det(s) for s in tl.copy_labels], np.int64)[tl.copy_label] \
        if tl.copy_label.shape[0] else np.empty(0, np.int64)
    parts = []
    for g in np.unique(thread).tolist():
        gi = np.nonzero(thread == g)[0]
        parts.append(_thread_pieces(ctx, tl, int(g), gi, gs, ge, hce, copy_cover, copy_det))
    gap = np.concatenate([p[0] for p in parts]) if parts else np.empty(0, np.int64)
    kind = np.concatenate([p[1] for p in parts]) if parts else np.empty(0, np.int64)
    det = np.concatenate([p[2] for p in parts]) if parts else np.empty(0, np.int64)
    ln = np.concatenate([p[3] for p in parts]) if parts else np.empty(0, np.int64)
    bins = None
    if n_bins > 0:
        t0 = np.concatenate([p[4] for p in parts]) if parts else np.empty(0, np.int64)
        bins = device_bins(tl, t0, ln, kind, n_bins)
    return _aggregate(ctx, tl, gs, ge, gap, kind, det, ln), bins


def _aggregate(ctx: _Ctx, tl: DeviceTimeline, gs, ge, gap, kind, det, ln) -> DeviceCauses:
    """Sum the pieces per cause and per (cause, gap) with one sort (dense cause codes, no hashing)."""
    idle, window = tl.idle_ns, tl.window_ns
    D = max(len(ctx.details), 1)
    key = kind * D + det
    if key.shape[0] > 1:                                # merge runs of pieces of one cause in one gap
        run = np.concatenate(([True], (key[1:] != key[:-1]) | (gap[1:] != gap[:-1])))
        at = np.nonzero(run)[0]
        key, gap, ln = key[at], gap[at], np.add.reduceat(ln, at)
    ns_all = np.bincount(key, weights=ln, minlength=len(KINDS) * D).round().astype(np.int64)
    assert int(ns_all.sum()) == idle, (tl.device_id, int(ns_all.sum()), idle)
    ukey = np.nonzero(ns_all)[0]
    G = max(len(gs), 1)
    pair = key * G + gap
    order = np.argsort(pair, kind="stable")
    ps = pair[order]
    start = np.nonzero(np.concatenate(([True], ps[1:] != ps[:-1])))[0] if ps.shape[0] else ps
    upair = ps[start]
    pns = np.add.reduceat(ln[order], start) if ps.shape[0] else ps
    pk, pg = upair // G, upair % G
    causes = []
    first_pair = np.searchsorted(pk, ukey, "left")
    last_pair = np.searchsorted(pk, ukey, "right")
    short = ((ge - gs) < LONG_GAP_NS)[pg]
    tiny = ((ge - gs) < TINY_GAP_NS)[pg]
    for j, code in enumerate(ukey.tolist()):
        a, b = int(first_pair[j]), int(last_pair[j])
        sl = slice(a, b)
        top = a + np.argsort(-pns[sl], kind="stable")[:MAX_EXAMPLES]
        k = KINDS[code // D]
        ex = tuple(GapExample(int(gs[pg[r]]), int(ge[pg[r]]), int(pns[r])) for r in top.tolist())
        ns = int(ns_all[code])
        causes.append(IdleCause(k, ctx.details[code % D], ns, pct(ns, window), pct(ns, idle), b - a, k in ONE_TIME,
                                int(pns[sl][short[sl]].sum()), ex, int(gs[pg[a]]), int(ge[pg[b - 1]]),
                                int(pns[sl][tiny[sl]].sum())))
    causes.sort(key=lambda c: (-c.ns, K[c.kind], c.detail))
    # per gap: the cause with the most ns in it (ties: precedence order); gaps with one cause need no sort
    code = np.full(len(gs), -1, np.int64)
    multi = np.bincount(pg, minlength=len(gs)) > 1 if pg.shape[0] else np.zeros(len(gs), bool)
    single = ~multi[pg]
    code[pg[single]] = pk[single]
    rows = np.nonzero(~single)[0]
    if rows.shape[0]:
        best = rows[np.lexsort((pk[rows], -pns[rows], pg[rows]))]
        first = np.ones(best.shape[0], bool)
        first[1:] = pg[best][1:] != pg[best][:-1]
        code[pg[best[first]]] = pk[best[first]]
    used = np.unique(code[code >= 0])
    table = {int(c): (KINDS[int(c) // D], ctx.details[int(c) % D]) for c in used.tolist()}
    return DeviceCauses(tl.device_id, window, tl.busy_ns, idle, tuple(causes), code, table)


def _totals(devs: Sequence[DeviceCauses]) -> Tuple[IdleCause, ...]:
    window = sum(d.window_ns for d in devs)
    idle = sum(d.idle_ns for d in devs)
    acc: Dict[Tuple[str, str], List[int]] = {}
    for d in devs:
        for c in d.causes:
            a = acc.setdefault((c.kind, c.detail), [0, 0, 0])
            a[0] += c.ns
            a[1] += c.gap_count
            a[2] += c.short_gap_ns
    out = [IdleCause(k, det, v[0], pct(v[0], window), pct(v[0], idle), v[1], k in ONE_TIME, v[2])
           for (k, det), v in acc.items()]
    out.sort(key=lambda c: (-c.ns, K[c.kind], c.detail))
    return tuple(out)


def analyze_idle_causes(full: TraceModel, model: TraceModel, timelines: Dict[int, DeviceTimeline],
                        tree: Optional[NvtxTree], n_bins: int = 0) -> IdleCausesResult:
    """Idle causes of every device timeline (``model``: the model the timelines were built from, e.g.
    clipped to the steady window; ``full``: the whole capture, for first-launch detection). With
    ``n_bins`` > 0 the result also holds the binned timeline of each device (:mod:`timeline_bins`)."""
    if not timelines:
        return IdleCausesResult(False, "no GPU activity in the window (no kernels captured)")
    kinds, base_names, base_idx = api_kinds(full, model)
    ctx = _Ctx(model, kinds, base_idx, [""], {"": 0}, tree,
               full.nvtx.names if full.nvtx is not None else [], base_names)
    done = [_device(ctx, timelines[d], n_bins) for d in sorted(timelines)]
    devs = tuple(d for d, _ in done)
    bins = tuple(b for _, b in done if b is not None)
    return IdleCausesResult(True, None, devs, _totals(devs), bins)
