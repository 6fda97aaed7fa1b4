"""Where every idle nanosecond went: each ns of each device's idle gaps charged to exactly one cause ``(kind, detail)``
on the gap's host thread (Σ causes = idle, asserted). Definitions: docs/MODEL.md, "Where every idle nanosecond went".
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from ...model.timeline import DeviceTimeline, few_distinct, rows_by_value, run_starts
from ...model.trace import TraceModel, pid_of
from ...vocabulary.cause_kinds import HOST_PIECE_KINDS, KIND_CODE, KINDS, ONE_TIME
from ..common.stats import int_sums, pct, top_indices
from ..nvtx.tree import NvtxTree
from .api_kinds import api_kinds
from .bins import DeviceBins, bin_edges, device_bins
from .host_context import AFTER_SYNC_BIT, DETAIL_MASK, HostContext
from .host_partition import interval_sums
from .pieces import UNKNOWN_CODE, WAITING_CODES, Cover, DeviceGaps, Pieces, gap_codes, host_pieces, thread_pieces
from .result import DeviceCauses, GapExample, IdleCause, IdleCausesResult, IdlePieces

K = KIND_CODE
MAX_EXAMPLES = 3
LONG_GAP_NS = 1_000_000   # gaps at least this long are "long"; ``short_gap_ns`` counts the others
TINY_GAP_NS = 10_000      # ``tiny_gap_ns`` counts ns in gaps shorter than this (back-to-back kernels)
#: host-side pieces kept after the device pass: ``max(PIECES_KEPT, ROWS_FACTOR × rows of the API, NVTX, OS-runtime
#: and kernel tables)``; also the pieces cut before the pass turns to the partitions (docs/PERFORMANCE.md,
#: "Many device ids, many NVTX domains")
PIECES_KEPT = 1 << 20
ROWS_FACTOR = 4
#: a process whose launched activity holds under this share of a device's launched activity time is a bystander (a
#: monitoring process's probe kernel, another process's warm-up): a gap its activity closes is the next other
#: process's (docs/MODEL.md, "The gap's host thread")
BYSTANDER_SHARE = 0.01


# ------------------------------------------------------------------------------------------ main


def span_slices(ctx: HostContext, gap: np.ndarray, kind: np.ndarray, det: np.ndarray, t0: np.ndarray, ln: np.ndarray,
                span: Tuple[int, int]) -> IdlePieces:
    """The pieces ``[t0, t0 + ln)`` (gap order, time order inside a gap) that intersect ``span``, clipped to it, with
    touching pieces of one cause in one gap merged: per (kind, detail), Σ (end − start) is the ns the cause holds
    inside ``span`` (all of its ns when ``span`` holds the window)."""
    s0, s1 = span
    keep = np.nonzero((t0 < s1) & (t0 + ln > s0))[0]
    a = np.maximum(t0[keep], s0)
    b = np.minimum(t0[keep] + ln[keep], s1)
    g, k, d = gap[keep], kind[keep], det[keep]
    order = np.lexsort((a, g))
    a, b, g, k, d = (x[order] for x in (a, b, g, k, d))
    if a.shape[0] > 1:
        new = np.empty(a.shape[0], bool)
        new[0] = True
        new[1:] = (g[1:] != g[:-1]) | (k[1:] != k[:-1]) | (d[1:] != d[:-1]) | (a[1:] != b[:-1])
        first = np.nonzero(new)[0]
        last = np.append(first[1:], a.shape[0]) - 1
        a, b, k, d = a[first], b[last], k[first], d[first]
    return IdlePieces(a.astype(np.int64), b.astype(np.int64), k.astype(np.int8), d.astype(np.int64),
                      np.full(a.shape[0], -1, np.int64), tuple(ctx.details))


def _device(ctx: HostContext, tl: DeviceTimeline, n_bins: int, span: Optional[Tuple[int, int]] = None
            ) -> Tuple[DeviceCauses, Optional[DeviceBins]]:
    api = ctx.model.api
    gp = tl.gaps()
    gs, ge = gp.start, gp.end
    li = tl.act.launch_idx
    # launch call of the kernel after / before each gap (-1 none)
    next_call = np.where(gp.next_row >= 0, li[np.maximum(gp.next_row, 0)], -1) if li.shape[0] else gp.next_row * 0 - 1
    prev_call = np.where(gp.prev_row >= 0, li[np.maximum(gp.prev_row, 0)], -1) if li.shape[0] else gp.prev_row * 0 - 1
    if api is not None and len(api) > 0:
        linked = api.gtid[li[li >= 0]]
        dom_g = -1
        threads = np.empty(0, np.int64)
        if linked.shape[0]:
            threads = few_distinct(linked)                  # few distinct launch threads
            dom_g = int(threads[0]) if threads.shape[0] == 1 else \
                int(threads[np.bincount(np.searchsorted(threads, linked)).argmax()])
        del linked
        if threads.shape[0] == 1:                           # one launching thread: every gap is on it
            thread = np.full(len(gp), dom_g, np.int64)
        else:
            next_call = _past_bystanders(tl, api.gtid, threads, next_call, gp.next_row)
            thread = np.where(next_call >= 0, api.gtid[np.maximum(next_call, 0)],
                              np.where(prev_call >= 0, api.gtid[np.maximum(prev_call, 0)], dom_g)).astype(np.int64)
        queued_from = np.where(next_call >= 0, np.clip(api.end[np.maximum(next_call, 0)], gs, ge), ge + 1)
        paced = paced_cap(tl.act.start, gp.prev_row, next_call, prev_call, api.end)
        cand = np.append(threads.astype(np.int64), dom_g)
    else:
        thread = np.full(len(gp), -1, np.int64)
        queued_from = ge + 1                               # never queued
        paced = np.zeros(len(gp), np.int64)
        cand = np.array([-1], np.int64)
    copy_det = np.array([ctx.detail_code(s) for s in tl.copy_labels], np.int64)[tl.copy_label] \
        if tl.copy_label.shape[0] else np.empty(0, np.int64)
    gaps = DeviceGaps(tl, gs, ge, queued_from, Cover(tl.copy_start, tl.copy_end), copy_det)
    groups = rows_by_value(thread, cand)
    del gp, next_call, prev_call, thread, queued_from, copy_det   # per-gap inputs no longer needed while cutting
    if ctx.partition_ok and ctx.pieces_cut > ctx.partition_after and (
            span is None or tl.w1 <= span[0] or tl.w0 >= span[1]):   # the timeline file needs its pieces in place
        return _device_by_partition(ctx, tl, gaps, groups, gs, ge, paced, n_bins)
    parts = [thread_pieces(ctx, gaps, g, gi) for g, gi in groups]
    ctx.pieces_cut += sum(p[0].shape[0] for p in parts)
    host = host_pieces(parts, [g for g, _ in groups], ctx.details, np.array([K[k] for k in HOST_PIECE_KINDS], np.int8))
    copy_wait: Dict[int, int] = {}
    copy_unknown: Dict[int, int] = {}
    for p in parts:
        _copy_waits(copy_wait, copy_unknown, p)
    drained = [ctx.after_sync(g, p[4]) for p, (g, _) in zip(parts, groups)]   # per piece: after a drain
    if not parts:                                      # no idle gap at all
        e = np.empty(0, np.int64)
        parts = [(e, np.empty(0, np.int8), e, e, e, np.empty(0, np.int8))]
        drained = [np.empty(0, bool)]
    del groups, gaps                                   # the pieces are cut: free their inputs
    gap, kind, det, ln, t0 = parts[0][:5] if len(parts) == 1 else (np.concatenate([p[i] for p in parts])
                                                                    for i in range(5))
    after = drained[0] if len(drained) == 1 else np.concatenate(drained)
    if len(parts) > 1:                                 # time order: gaps are disjoint, each on one thread
        order = np.argsort(gap, kind="stable")
        gap, kind, det, ln, t0, after = (a[order] for a in (gap, kind, det, ln, t0, after))
    bins = device_bins(tl, t0, ln, kind, n_bins) if n_bins > 0 else None
    slices = span_slices(ctx, gap, kind, det, t0, ln, span) if span is not None else None
    pieces = [gap, kind, det, ln, after]
    del t0, parts, gap, kind, det, ln, after, drained  # _aggregate drops each piece array as soon as it can
    return dataclasses.replace(_aggregate(ctx, tl, gs, ge, pieces, copy_wait, copy_unknown, paced), pieces=host,
                               slices=slices,
                               wait_ns_by_thread=_add_waits({}, ctx, host.gtid, host.kind, host.detail,
                                                            host.end - host.start)), bins


def paced_cap(act_start: np.ndarray, prev_row: np.ndarray, next_call: np.ndarray, prev_call: np.ndarray,
              api_end: np.ndarray) -> np.ndarray:
    """Per gap, the most ``queued`` ns of it that are *host-paced* (docs/MODEL.md, "Host-paced queued time"): the
    activity before it (``prev_row``, launched by ``prev_call``)'s launch-to-start delay when the next activity's
    launch call (``next_call``, another call) returned after it started; 0 for the other gaps."""
    ok = (next_call >= 0) & (prev_call >= 0) & (next_call != prev_call) & (prev_row >= 0)
    ps = act_start[np.maximum(prev_row, 0)] if act_start.shape[0] else np.zeros(prev_row.shape[0], np.int64)
    ok &= api_end[np.maximum(next_call, 0)] > ps
    return np.where(ok, np.maximum(ps - api_end[np.maximum(prev_call, 0)], 0), 0).astype(np.int64)


def _past_bystanders(tl: DeviceTimeline, gtid: np.ndarray, threads: np.ndarray, next_call: np.ndarray,
                     next_row: np.ndarray) -> np.ndarray:
    """``next_call`` with each gap whose closing activity a bystander process launched (under
    :data:`BYSTANDER_SHARE` of the device's launched activity time in the window, while others hold more) given the
    launch call of the next activity another process launched (-1: none). A thread of the workload's own process
    is never a bystander: its few kernels are part of the work (an input pipeline's, an executor thread's).
    ``threads``: the device's launching threads (sorted, few): one process among them costs no row-level work."""
    procs, t_proc = np.unique(pid_of(threads), return_inverse=True)    # per launching thread, its process
    if procs.shape[0] < 2:
        return next_call
    li = tl.act.launch_idx
    rows = np.flatnonzero(li >= 0)
    dur = np.minimum(tl.act.end[rows], tl.w1) - np.maximum(tl.act.start[rows], tl.w0)
    inv = t_proc[np.searchsorted(threads, gtid[li[rows]])]              # per row, its process (few: no sort)
    held = np.bincount(inv, weights=np.maximum(dur, 0), minlength=procs.shape[0])
    small = held < BYSTANDER_SHARE * held.sum()
    if not small.any() or small.all():
        return next_call
    by_row = np.zeros(li.shape[0], bool)
    by_row[rows[small[inv]]] = True
    own = rows[~small[inv]]                        # the others' rows, in time order
    hit = np.flatnonzero((next_row >= 0) & by_row[np.maximum(next_row, 0)])
    k = np.searchsorted(own, next_row[hit])
    out = next_call.copy()
    out[hit] = np.where(k < own.shape[0], li[own[np.minimum(k, own.shape[0] - 1)]], -1)
    return out


def _device_by_partition(ctx: HostContext, tl: DeviceTimeline, gaps: DeviceGaps, groups: List[Tuple[int, np.ndarray]],
                         gs: np.ndarray, ge: np.ndarray, paced: np.ndarray, n_bins: int
                         ) -> Tuple[DeviceCauses, Optional[DeviceBins]]:
    """:func:`_device` by the host threads' partitions (host_partition.py): the same causes, gaps and bins; the
    pieces' places in time are not kept (``pieces`` is None)."""
    cols: List[Tuple[np.ndarray, ...]] = []        # (gap, kind, detail, ns, t0, after a drain) parts
    bcols: List[Tuple[np.ndarray, ...]] = []       # (t0, ns, kind) parts: the bins' pieces (none across an edge)
    edges = bin_edges(tl, n_bins) if n_bins > 0 else None
    waits: Dict[int, int] = {}
    copy_wait: Dict[int, int] = {}
    copy_unknown: Dict[int, int] = {}
    for g, gi in groups:
        gap, kind, det, ln, t0, shadow = thread_pieces(ctx, gaps, -1, gi)   # copy, queued, and the rest unknown
        if g >= 0:    # a copy piece's shadow `unknown` stands for the thread's host side: read from its partition
            cu = np.flatnonzero(shadow == K["unknown"])
            shadow[cu] = -1
            if cu.shape[0]:
                _partition_copy_waits(copy_wait, ctx, g, tl, t0[cu], t0[cu] + ln[cu], det[cu])
        _copy_waits(copy_wait, copy_unknown, (gap, kind, det, ln, t0, shadow))
        u = (kind == K["unknown"]) if g >= 0 else np.zeros(kind.shape[0], bool)
        own = np.flatnonzero(~u)
        cols.append((gap[own], kind[own], det[own], ln[own], t0[own], ctx.after_sync(g, t0[own])))
        bcols.append((t0[own], ln[own], kind[own]))
        ui = np.flatnonzero(u)
        if ui.shape[0] == 0:
            continue
        by_code, by_kind = ctx.partition(g, tl.w0, tl.w1)
        a, b = t0[ui], t0[ui] + ln[ui]
        w, code, ns = interval_sums(by_code, a, b)
        k, d = (code >> 32).astype(np.int8), (code & DETAIL_MASK).astype(np.int32)
        cols.append((gap[ui[w]], k, d, ns, a[w], (code & AFTER_SYNC_BIT) != 0))
        _add_waits(waits, ctx, np.full(k.shape[0], g, np.int64), k, d, ns)
        if edges is not None:                                      # the host parts cut at the bin edges
            pts = np.unique(np.concatenate((a, b, edges[(edges > a[0]) & (edges < b[-1])])))
            sa, sb = pts[:-1], pts[1:]
            inside = np.searchsorted(a, sa, side="right") - 1
            keep = (inside >= 0) & (sb <= b[np.maximum(inside, 0)])
            sa, sb = sa[keep], sb[keep]
            w2, kc, ns2 = interval_sums(by_kind, sa, sb)
            bcols.append((sa[w2], ns2, kc.astype(np.int8)))
    gap, kind, det, ln, t0, after = (np.concatenate(c) for c in zip(*cols)) if cols else \
        [np.empty(0, np.int64)] * 5 + [np.empty(0, bool)]
    order = np.lexsort((np.arange(t0.shape[0]), t0))
    gap, kind, det, ln = gap[order], kind[order].astype(np.int8), det[order].astype(np.int32), ln[order]
    after = after[order]
    bins = None
    if edges is not None:
        bt, bl, bk = (np.concatenate(c) for c in zip(*bcols)) if bcols else [np.empty(0, np.int64)] * 3
        o = np.argsort(bt, kind="stable")
        bins = device_bins(tl, bt[o], bl[o], bk[o].astype(np.int8), n_bins)
    dc = _aggregate(ctx, tl, gs, ge, [gap, kind, det, ln, after], copy_wait, copy_unknown, paced)
    return dataclasses.replace(dc, pieces=None, wait_ns_by_thread=waits), bins


def _copy_waits(acc: Dict[int, int], unknown: Dict[int, int], p: Pieces) -> None:
    """Add to ``acc`` (copy detail code → ns) the ns of the copy pieces of ``p`` in which a kernel waited on the
    copy: their shadow kind is one of :data:`.pieces.WAITING_SHADOWS`; to ``unknown`` those whose shadow is
    ``unknown`` (no host thread linked: whether a kernel waited is not known)."""
    det, ln, shadow = p[2], p[3], p[5]
    for out, m in ((acc, np.isin(shadow, WAITING_CODES)), (unknown, shadow == UNKNOWN_CODE)):
        if m.any():
            ln_m = ln[m]
            for d, r in rows_by_value(det[m].astype(np.int64)):
                out[d] = out.get(d, 0) + int(ln_m[r].sum())


def _partition_copy_waits(acc: Dict[int, int], ctx: HostContext, g: int, tl: DeviceTimeline, a: np.ndarray,
                          b: np.ndarray, det: np.ndarray) -> None:
    """Add to ``acc`` the ns of the copy pieces ``[a, b)`` (sorted, disjoint; copy detail codes ``det``) of thread
    ``g`` whose shadow, read from the thread's partition, is a waiting kind (``osrt`` only for a call that waits)."""
    w, code, ns = interval_sums(ctx.partition(g, tl.w0, tl.w1)[0], a, b)
    k, d = code >> 32, code & DETAIL_MASK
    waiting = np.isin(k, WAITING_CODES.astype(np.int64))
    osrt = k == K["osrt"]
    waiting[osrt] = ctx.wait_mask()[d[osrt]]
    ns_w = ns[waiting]
    for c, r in rows_by_value(det[w[waiting]].astype(np.int64)):
        acc[c] = acc.get(c, 0) + int(ns_w[r].sum())


def _add_waits(acc: Dict[int, int], ctx: HostContext, gtid: np.ndarray, kind: np.ndarray, det: np.ndarray,
               ns: np.ndarray) -> Dict[int, int]:
    """``acc`` with the idle ns of the pieces charged to an OS call that waits added per host thread ``gtid``."""
    m = kind == K["osrt"]
    if m.any():
        m[m] = ctx.wait_mask()[det[m]]
    ns_m = ns[m]
    for g, r in rows_by_value(gtid[m]):
        acc[g] = acc.get(g, 0) + int(ns_m[r].sum())
    return acc


def _aggregate(ctx: HostContext, tl: DeviceTimeline, gs: np.ndarray, ge: np.ndarray, pieces: List[np.ndarray],
               copy_wait: Mapping[int, int], copy_unknown: Mapping[int, int], paced: np.ndarray) -> DeviceCauses:
    """Sum the pieces (time order; ``pieces`` = [gap, kind, detail, length, after a drain], emptied here to free
    them early) per cause and per (cause, gap). ``copy_wait`` / ``copy_unknown``: per copy detail code,
    :attr:`IdleCause.waiting_ns` / :attr:`IdleCause.waiting_unknown_ns`; ``paced``: per gap, the most of its
    ``queued`` ns that are host-paced (:func:`paced_cap`)."""
    gap, kind, det, ln, after = pieces
    pieces.clear()
    idle, window = tl.idle_ns, tl.window_ns
    D = max(len(ctx.details), 1)
    key: np.ndarray = kind.astype(np.int32) if len(KINDS) * D < (1 << 31) else kind.astype(np.int64)
    key *= D
    key += det
    del kind, det
    drained = np.flatnonzero(after)
    drained = drained[(ge - gs)[gap[drained]] < LONG_GAP_NS]     # after a drain, in a short gap
    after_short = int_sums(key[drained], ln[drained], len(KINDS) * D)
    del after, drained
    if key.shape[0] > 1:                                # merge runs of pieces of one cause in one gap
        at = run_starts(key, gap)
        key, gap, ln = key[at], gap[at], np.add.reduceat(ln, at)
        del at
    ns_all = int_sums(key, ln, len(KINDS) * D)
    assert int(ns_all.sum()) == idle, (tl.device_id, int(ns_all.sum()), idle)
    ukey = np.nonzero(ns_all)[0]                       # every piece has ns > 0: ukey = the causes present
    one_per_gap = gap.shape[0] < 2 or bool((gap[1:] != gap[:-1]).all())   # then (cause, gap) pairs = runs
    small = ukey.shape[0] <= 1 << 16                   # numpy sorts 16-bit integers stably by radix
    rank_of = np.zeros(ns_all.shape[0], np.uint16 if small else np.int64)
    rank_of[ukey] = np.arange(ukey.shape[0])
    order = np.argsort(rank_of[key], kind="stable")    # (cause, gap) order: pieces are in gap order
    key = key[order]                                   # (one column at a time: less memory)
    gap = gap[order]
    ln = ln[order]
    del order
    if not one_per_gap:                                # one row per (cause, gap) pair
        at = run_starts(key, gap)
        key, gap, ln = key[at], gap[at], np.add.reduceat(ln, at)
        del at
    pk, pg, pns = key, gap, ln
    causes = []
    first_pair = np.searchsorted(pk, ukey, "left")
    last_pair = np.searchsorted(pk, ukey, "right")
    glen = (ge - gs)[pg]
    short = glen < LONG_GAP_NS
    tiny = glen < TINY_GAP_NS
    del glen
    lead = gs[pg] == tl.w0                             # the gap before the device's first busy activity
    trail = (ge[pg] == tl.w1) & ~lead                  # the gap after its last one
    for j, cause_code in enumerate(ukey.tolist()):
        a, b = int(first_pair[j]), int(last_pair[j])
        sl = slice(a, b)
        top = a + top_indices(pns[sl], MAX_EXAMPLES)
        k = KINDS[cause_code // D]
        ex = tuple(GapExample(int(gs[pg[r]]), int(ge[pg[r]]), int(pns[r])) for r in top.tolist())
        ns = int(ns_all[cause_code])
        hp = np.minimum(pns[sl], paced[pg[sl]]) if k == "queued" else None
        causes.append(IdleCause(k, ctx.details[cause_code % D], ns, pct(ns, window), pct(ns, idle), b - a,
                                k in ONE_TIME, int(pns[sl][short[sl]].sum()), ex, int(gs[pg[a]]), int(ge[pg[b - 1]]),
                                int(pns[sl][tiny[sl]].sum()),
                                copy_wait.get(cause_code % D, 0) if k == "copy" else None,
                                copy_unknown.get(cause_code % D) or None if k == "copy" else None,
                                int(after_short[cause_code]) or None,
                                int(pns[sl][pns[sl] < TINY_GAP_NS].sum()),
                                int(pns[sl][lead[sl]].sum()), int(pns[sl][trail[sl]].sum()),
                                *((int(hp.sum()), int(hp[tiny[sl]].sum()), int(hp[pns[sl] < TINY_GAP_NS].sum()))
                                  if hp is not None else ())))
    causes.sort(key=lambda c: (-c.ns, K[c.kind], c.detail))
    if one_per_gap:
        code = np.full(len(gs), -1, np.int64)
        code[pg] = pk
    else:
        code = gap_codes(len(gs), pk, pg, pns)
    seen = np.zeros(ns_all.shape[0], bool)
    seen[code[code >= 0]] = True
    used = np.nonzero(seen)[0]
    table = {int(c): (KINDS[int(c) // D], ctx.details[int(c) % D]) for c in used.tolist()}
    return DeviceCauses(tl.device_id, window, tl.busy_ns, idle, tuple(causes), code, table)


def cause_totals(devs: Sequence[DeviceCauses]) -> Tuple[IdleCause, ...]:
    """Each (kind, detail) summed over ``devs`` (shares of their summed window and idle time), largest first; ties
    in the charging order of the kinds, then by detail."""
    window = sum(d.window_ns for d in devs)
    idle = sum(d.idle_ns for d in devs)
    acc: Dict[Tuple[str, str], List[int]] = {}
    for d in devs:
        for c in d.causes:
            a = acc.setdefault((c.kind, c.detail), [0] * 6)
            for i, v in enumerate((c.ns, c.gap_count, c.short_gap_ns, c.waiting_ns, c.waiting_unknown_ns,
                                   c.after_sync_short_ns)):
                a[i] += v or 0
    out = [IdleCause(k, det, v[0], pct(v[0], window), pct(v[0], idle), v[1], k in ONE_TIME, v[2],
                     waiting_ns=v[3] if k == "copy" else None,
                     waiting_unknown_ns=v[4] or None if k == "copy" else None, after_sync_short_ns=v[5] or None)
           for (k, det), v in acc.items()]
    out.sort(key=lambda c: (-c.ns, K[c.kind], c.detail))
    return tuple(out)


def analyze_idle_causes(full: TraceModel, model: TraceModel,
                        timelines: Union[Mapping[int, DeviceTimeline], Iterable[DeviceTimeline]],
                        tree: Optional[NvtxTree], n_bins: int = 0,
                        on_device: Optional[Callable[[DeviceTimeline, DeviceCauses], None]] = None,
                        span: Optional[Tuple[int, int]] = None, pieces_needed: bool = True,
                        slices_max: int = 0) -> IdleCausesResult:
    """Idle causes of every device timeline (``model``: the model the timelines were built from; ``full``: the whole
    capture, for first-launch detection); with ``n_bins`` > 0 also each device's bins (:mod:`.bins`). ``timelines``:
    device → timeline, or the timelines in device-id order; ``on_device`` sees each timeline with its causes before
    the next one is built; ``span``: the devices keep their idle pieces inside it (:attr:`DeviceCauses.slices`)
    within ``slices_max``; ``pieces_needed`` False: past the budget, devices may be charged by partitions."""
    seq = (timelines[d] for d in sorted(timelines)) if isinstance(timelines, Mapping) else iter(timelines)
    ctx: Optional[HostContext] = None
    done = []
    budget = max(PIECES_KEPT, ROWS_FACTOR * sum(len(t) for t in (model.api, model.nvtx, model.osrt, model.kernels)
                                                if t is not None))
    slices_left, kept_slices = slices_max, False
    for tl in seq:
        if ctx is None:
            kinds, base_names, base_idx = api_kinds(full, model)
            ctx = HostContext(model, kinds, base_idx, [""], {"": 0}, tree,
                       full.nvtx.names if full.nvtx is not None else [], base_names,
                       partition_ok=not pieces_needed, partition_after=budget)
        dc, b = _device(ctx, tl, n_bins, span if span is not None and slices_left > 0 else None)
        n_slices = len(dc.slices) if dc.slices is not None else 0
        if n_slices > slices_left and kept_slices:   # over the file's budget: this device's idle track is left out
            dc = dataclasses.replace(dc, slices=None)
            slices_left = 0
        elif dc.slices is not None:         # the first device with slices keeps them (∝ the span's host rows)
            slices_left = max(0, slices_left - n_slices)
            kept_slices = True
        if on_device is not None:
            on_device(tl, dc)
        kept = len(dc.pieces) if dc.pieces is not None else 0
        if kept > budget:                  # memory ∝ the trace's rows: these pieces were used in their turn
            dc = dataclasses.replace(dc, pieces=None)
        else:
            budget -= kept
        done.append((dc, b))
        del tl
    if not done:
        return IdleCausesResult(False, "no GPU activity in the window (no kernels captured)")
    devs = tuple(d for d, _ in done)
    bins = tuple(b for _, b in done if b is not None)
    return IdleCausesResult(True, None, devices=devs, totals=cause_totals(devs), bins=bins)
