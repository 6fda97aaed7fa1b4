"""One timeline per device and window: the single definition of GPU busy and idle (docs/MODEL.md, "Device
timeline"); every busy/idle number in the report comes from :func:`build_timelines`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Iterator, List, Optional, Tuple

import numpy as np

from . import intervals as iv
from .trace import GpuActivity, TraceModel

#: copyKind → direction label (ENUM_CUDA_MEMCPY_OPER)
MEMCPY_KIND_LABEL = {
    0: "Unknown", 1: "Host-to-Device", 2: "Device-to-Host", 3: "Host-to-Array", 4: "Array-to-Host",
    5: "Array-to-Array", 6: "Array-to-Device", 7: "Device-to-Array", 8: "Device-to-Device", 9: "Host-to-Host",
    10: "Peer-to-Peer", 11: "Unified Host-to-Device", 12: "Unified Device-to-Host", 13: "Unified Device-to-Device",
}
H2D, D2H = 1, 2       # copyKind of host → device, device → host
PAGEABLE = 0          # srcKind / dstKind value of pageable host memory (ENUM_CUDA_MEM_KIND)
GRAPH_LABEL = "[CUDA graph (graph-level trace)]"


def copy_kind_label(k: int) -> str:
    """The direction label of copyKind ``k`` (its number when the table has none)."""
    return MEMCPY_KIND_LABEL.get(int(k), str(int(k)))


@dataclass(frozen=True)
class Activity:
    """Rows of one device sorted by start (kernels, graph executions, optionally copies)."""

    start: np.ndarray
    end: np.ndarray
    label_idx: np.ndarray     # index into ``labels``
    launch_idx: np.ndarray    # API row that launched it, -1 unknown
    is_kernel: np.ndarray     # bool: a kernel row (not a graph execution / copy)


@dataclass(frozen=True)
class DeviceTimeline:
    """Busy, copies and idle gaps of one device over ``[w0, w1)``."""

    device_id: int
    w0: int
    w1: int
    act: Activity
    labels: List[str]
    busy: iv.IntervalUnion
    copy_start: np.ndarray
    copy_end: np.ndarray
    copy_label: np.ndarray    # index into ``copy_labels``
    copy_launch_idx: np.ndarray
    copy_labels: List[str]
    copies: iv.IntervalUnion
    kernel_count: int         # kernel rows intersecting the window
    graph_count: int = 0      # whole-graph executions (graph-level tracing) intersecting the window
    copy_label_base: int = -1  # first label of the copy rows in ``act`` (``--include-memcpy-in-busy``); -1: none

    @property
    def window_ns(self) -> int:
        return self.w1 - self.w0

    @property
    def busy_ns(self) -> int:
        return self.busy.length

    @property
    def idle_ns(self) -> int:
        return self.window_ns - self.busy_ns

    @property
    def copy_busy_ns(self) -> int:
        return self.copies.length

    @property
    def copy_only_ns(self) -> int:
        """Copy time while no kernel (or whole-graph execution) runs: |copies| − |copies ∩ kernel busy| (busy less
        the copies when they count as busy: docs/MODEL.md)."""
        if len(self.copies) == 0:
            return 0
        k = self.busy
        if self.copy_label_base >= 0:
            keep = self.act.label_idx < self.copy_label_base
            k = iv.union_lean(self.act.start[keep], self.act.end[keep])
        inside = iv.overlap_length(k, self.copies.start, self.copies.end)
        return int(self.copies.length - int(inside.sum()))

    def gaps(self) -> Gaps:
        """Idle gaps in time order, with the activity rows around them (-1 at the window edges)."""
        u = self.busy
        n = len(u)
        if n == 0:
            return Gaps(np.array([self.w0], np.int64), np.array([self.w1], np.int64),
                        np.array([-1], np.int64), np.array([-1], np.int64))
        gs = np.concatenate(([self.w0], u.end)).astype(np.int64, copy=False)
        ge = np.concatenate((u.start, [self.w1])).astype(np.int64, copy=False)
        prev_row = np.concatenate(([-1], u.last_row)).astype(np.int64, copy=False)
        next_row = np.concatenate((u.first_row, [-1])).astype(np.int64, copy=False)
        keep = ge > gs
        if keep.all():
            return Gaps(gs, ge, prev_row, next_row)
        return Gaps(gs[keep], ge[keep], prev_row[keep], next_row[keep])


@dataclass(frozen=True)
class Gaps:
    """Idle gaps ``[start, end)``; ``prev_row`` / ``next_row``: activity row closing the block before /
    opening the block after the gap (index into :class:`Activity`), -1 at a window edge."""

    start: np.ndarray
    end: np.ndarray
    prev_row: np.ndarray
    next_row: np.ndarray

    def __len__(self) -> int:
        return int(self.start.shape[0])


def _copy_labels(model: TraceModel) -> tuple:
    """Per memcpy/memset row: label index, and the label list (direction, '(pageable)' for pageable host)."""
    labels: List[str] = []
    parts: List[Tuple[GpuActivity, np.ndarray]] = []
    mc, ms = model.memcpy, model.memset
    if mc is not None and len(mc):
        ck = np.asarray(mc.copy_kind, np.int64)
        pg = (np.asarray(mc.src_kind, np.int64) == PAGEABLE) | (np.asarray(mc.dst_kind, np.int64) == PAGEABLE)
        code = ck * 2 + pg.astype(np.int64)
        uniq, inv = np.unique(code, return_inverse=True)
        for u in uniq.tolist():
            labels.append(copy_kind_label(u // 2) + (" (pageable)" if u % 2 else ""))
        parts.append((mc, inv.reshape(-1)))
    if ms is not None and len(ms):
        labels.append("memset")
        parts.append((ms, np.full(len(ms), len(labels) - 1, np.int64)))
    return parts, labels


def few_distinct(x: np.ndarray) -> np.ndarray:
    """Sorted distinct values of ``x``, cheap when there are few: the distinct values of a sample, then
    only the values the sample missed are sorted."""
    n = x.shape[0]
    if n == 0:
        return np.unique(x)
    if x.dtype.kind in "iu":
        lo, hi = int(x.min()), int(x.max())
        if hi - lo < max(n, 1 << 16):   # a dense range: one counting pass (in chunks: small copies), no search
            seen = np.zeros(hi - lo + 1, bool)
            for a in range(0, n, 1 << 20):
                c = x[a:a + (1 << 20)]
                seen[c.astype(np.intp) - lo] = True     # in the index type: no wrap-around of small types
            return (np.nonzero(seen)[0] + lo).astype(x.dtype)
    cand = np.unique(x[:: max(1, n // 4096)])
    if cand.shape[0] <= 8:                     # a few values: one comparison pass each beats a search per row
        miss = x != cand[0]
        for c in cand[1:].tolist():
            miss &= x != c
    else:
        at = np.minimum(np.searchsorted(cand, x), cand.shape[0] - 1)
        miss = cand[at] != x
    if miss.any():
        cand = np.union1d(cand, x[miss])
    return cand


def rows_by_value(x: np.ndarray, values: Optional[np.ndarray] = None) -> List[Tuple[int, np.ndarray]]:
    """(value, its rows in ascending order) per distinct value of the integer array ``x``, values ascending. One
    mask per value when they are few (≤ 16; rows as int32 when they fit), else one stable sort (of 16-bit codes when
    the values span < 2^15): never one pass over every row per value. ``values``: a superset of the distinct values
    when the caller knows one (saves a pass)."""
    if x.shape[0] == 0:
        return []
    ids = np.unique(values) if values is not None else few_distinct(x)
    if ids.shape[0] <= 16:
        small = np.int32 if x.shape[0] < (1 << 31) else np.int64
        out = [(int(v), np.nonzero(x == v)[0].astype(small)) for v in ids.tolist()]
        return [(v, r) for v, r in out if r.shape[0]]
    lo, hi = int(ids[0]), int(ids[-1])             # numpy sorts 16-bit integers stably by radix
    order = np.argsort((x - lo).astype(np.int16) if hi - lo < (1 << 15) else x, kind="stable")
    v = x[order]
    cut = np.nonzero(v[1:] != v[:-1])[0] + 1
    return [(int(x[seg[0]]), seg) for seg in np.split(order, cut)]


def spans_by(key: np.ndarray, start: np.ndarray, end: np.ndarray) -> List[Tuple[int, int, int, int]]:
    """Per distinct ``key`` (ascending, :func:`rows_by_value`): (key, its rows, Σ (end − start), length of the union
    of its intervals ``[start, end)``)."""
    return [(v, int(r.shape[0]), int((end[r] - start[r]).sum()), iv.union_blocks(start[r], end[r]).length)
            for v, r in rows_by_value(key)]


def run_starts(*cols: np.ndarray) -> np.ndarray:
    """Index of the first row of each run of equal rows of the columns ``cols`` (one length; a row that differs
    from the one before in any column starts a run)."""
    n = cols[0].shape[0]
    new = np.ones(n, bool)
    if n > 1:
        np.not_equal(cols[0][1:], cols[0][:-1], out=new[1:])
        for c in cols[1:]:
            new[1:] |= c[1:] != c[:-1]
    return np.flatnonzero(new)


def _cat(parts: List[np.ndarray], dt: type) -> np.ndarray:
    if len(parts) == 1:
        return np.asarray(parts[0]).astype(dt, copy=False)
    return np.concatenate(parts).astype(dt, copy=False) if parts else np.empty(0, dt)


def _take(arrays: tuple, idx: Optional[np.ndarray]) -> tuple:
    return arrays if idx is None else tuple(a[idx] for a in arrays)


@dataclass(frozen=True)
class _Source:
    """One table's rows that may enter a device's activity: columns as the model holds them (no copies);
    ``label``: index of each row's label; ``rows``: device → its rows in the window (None = all)."""

    start: np.ndarray
    end: np.ndarray
    label: np.ndarray
    launch: np.ndarray
    is_kernel: bool
    rows: Dict[int, Optional[np.ndarray]]

    def take(self, r: Optional[np.ndarray]) -> tuple:
        s, e, lab, lix = _take((self.start, self.end, self.label, self.launch), r)
        return (s.astype(np.int64, copy=False), e.astype(np.int64, copy=False), lab.astype(np.int32, copy=False),
                lix.astype(np.int64, copy=False), np.full(s.shape[0], self.is_kernel, bool))


def _source(start: np.ndarray, end: np.ndarray, label: np.ndarray, dev: np.ndarray, launch: np.ndarray,
            is_kernel: bool, w0: int, w1: int) -> _Source:
    keep = iv.in_window(start, end, w0, w1)
    if keep.all():
        rows: Dict[int, Optional[np.ndarray]] = {d: (None if r.shape[0] == dev.shape[0] else r)
                                                 for d, r in rows_by_value(dev)}
    else:
        kept = np.nonzero(keep)[0]
        rows = {d: kept[r] for d, r in rows_by_value(dev[kept])}
    return _Source(start, end, label, launch, is_kernel, rows)


def build_timelines(model: TraceModel, w0: int, w1: int, include_memcpy: bool = False) -> Dict[int, DeviceTimeline]:
    """Device → timeline over ``[w0, w1)``. Rows outside the window are ignored, rows crossing an edge are
    clipped to it (pass a model clipped with :func:`model.clip.clip_model` or the full model)."""
    return {tl.device_id: tl for tl in iter_timelines(model, w0, w1, include_memcpy)}


def iter_timelines(model: TraceModel, w0: int, w1: int, include_memcpy: bool = False) -> Iterator[DeviceTimeline]:
    """The timelines of :func:`build_timelines`, one device at a time in device-id order, each built only when
    asked for from that device's rows of the model's columns — a consumer that drops each one before the next
    holds one device's rows at a time. Activity rows are kernels, then graph executions, then (optionally)
    copies, stably sorted by (start, end)."""
    sources: List[_Source] = []
    labels: List[str] = []
    k = model.kernels
    if k is not None and len(k):
        li = k.launch_idx if k.launch_idx.shape[0] == len(k) else np.full(len(k), -1, np.int64)
        sources.append(_source(k.start, k.end, k.name_idx, k.device, li, True, w0, w1))
        labels = list(k.names)
    gt, graph_label = model.graph_trace, -1
    if gt is not None and len(gt):
        labels.append(GRAPH_LABEL)
        graph_label = len(labels) - 1
        sources.append(_source(gt.start, gt.end, np.full(len(gt), graph_label, np.int32),
                               np.asarray(gt.device, np.int64), gt.launch_idx, False, w0, w1))
    copy_parts, copy_labels = _copy_labels(model)
    copy_label_base = len(labels) if include_memcpy else -1
    if include_memcpy:
        for ops, lab in copy_parts:
            base = len(labels)
            labels += ["[CUDA " + x + "]" if x == "memset" else f"[CUDA memcpy {x}]" for x in copy_labels]
            sources.append(_source(ops.start, ops.end, (base + lab).astype(np.int32),
                                   np.asarray(ops.device, np.int64), ops.launch_idx, False, w0, w1))

    cols = [(ops.start, ops.end, lb, np.asarray(ops.device, np.int64), ops.launch_idx)
            for ops, lb in copy_parts]
    cs, ce, cl, cd, cli = (_cat([c[i] for c in cols], np.int64) for i in range(5))
    ck = (cs < w1) & (np.maximum(ce, cs) > w0)
    cs, ce, cl, cd, cli = cs[ck], ce[ck], cl[ck], cd[ck], cli[ck]
    cs = np.maximum(cs, w0)
    ce = np.clip(ce, cs, w1)
    corder = np.lexsort((ce, cs))
    cs, ce, cl, cd, cli = cs[corder], ce[corder], cl[corder], cd[corder], cli[corder]
    copy_by_dev = dict(rows_by_value(cd))

    devices = set(copy_by_dev)
    for src in sources:
        devices |= set(src.rows)
    for d in sorted(devices):
        parts = [src.take(src.rows.pop(d)) for src in sources if d in src.rows]
        if not parts:
            e64 = np.empty(0, np.int64)
            parts = [(e64, e64, np.empty(0, np.int32), e64, np.empty(0, bool))]
        s, e, lab, lix, isk = parts[0] if len(parts) == 1 else tuple(
            _cat([p[i] for p in parts], dt) for i, dt in enumerate((np.int64, np.int64, np.int32, np.int64, bool)))
        del parts
        if s.shape[0] and not (int(s.min()) >= w0 and int(e.max()) <= w1 and bool((e >= s).all())):
            s = np.maximum(s, w0)
            e = np.clip(e, s, w1)
        if not iv.in_start_end_order(s, e):         # kernels come sorted by start: usually no sort at all
            s, e, lab, lix, isk = _take((s, e, lab, lix, isk), np.lexsort((e, s)))
        act = Activity(s, e, lab, lix, isk)
        del s, e, lab, lix, isk
        c = copy_by_dev.get(d, np.empty(0, np.int64))
        yield DeviceTimeline(
            device_id=d, w0=int(w0), w1=int(w1), act=act, labels=labels, busy=iv.union(act.start, act.end),
            copy_start=cs[c], copy_end=ce[c], copy_label=cl[c], copy_launch_idx=cli[c], copy_labels=copy_labels,
            copies=iv.union(cs[c], ce[c]), kernel_count=int(act.is_kernel.sum()),
            graph_count=int((act.label_idx == graph_label).sum()) if graph_label >= 0 else 0,
            copy_label_base=copy_label_base)
        del act


def pooled(timelines: Dict[int, DeviceTimeline]) -> Optional[Dict[str, int]]:
    """Σ over devices of window, busy and idle ns (None without devices)."""
    if not timelines:
        return None
    return {k: sum(getattr(t, k) for t in timelines.values()) for k in ("window_ns", "busy_ns", "idle_ns")}
