"""Copy engines as a resource: per device and copy path, how busy the path is in the steady window, how many
bytes it moves, at what rate, and how much of it runs under kernels (docs/METRICS.md, "Copy paths").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from ...jsonable import Outcome
from ...model import intervals as iv
from ...model.timeline import MEMCPY_KIND_LABEL, PAGEABLE, rows_by_value
from ...model.trace import ApiCalls, Memcpy, Memset, TraceModel
from ..api import classes as ac
from ..common.copy_bytes import recorded_bytes
from ..common.stats import median, round_half_up
from .traffic import step_of
from .unified import kernel_unions

#: copyKind → copy path
PATH_OF_KIND: Dict[int, str] = {1: "H2D", 3: "H2D", 2: "D2H", 4: "D2H", 5: "D2D", 6: "D2D", 7: "D2D", 8: "D2D",
                                9: "H2H", 10: "P2P", 11: "Unified", 12: "Unified", 13: "Unified"}
#: every path, in the report's order, with its words
PATH_LABEL: Dict[str, str] = {"H2D": "Host-to-Device", "D2H": "Device-to-Host", "D2D": "Device-to-Device",
                              "P2P": "Peer-to-Peer", "H2H": "Host-to-Host", "Unified": "Unified-Memory migration",
                              "memset": "memset", "other": "other copy kinds"}
HOST_PATHS = ("H2D", "D2H")
PINNED = 1            # srcKind / dstKind value of pinned host memory (ENUM_CUDA_MEM_KIND)
KNOWN_MEM_KINDS = range(0, 7)   # 0 pageable … 6 managed static; 7 "unknown" and NULL (read as -1) are not known
_CODE = {p: i for i, p in enumerate(PATH_LABEL)}
_KIND_OF_LABEL = {v: k for k, v in MEMCPY_KIND_LABEL.items()}


def path_of_detail(detail: str) -> str:
    """The copy path of an idle-cause ``copy`` detail (a direction label, `` (pageable)`` optional, or
    ``memset``)."""
    d = str(detail)
    if d == "memset":
        return "memset"
    if d.endswith(" (pageable)"):
        d = d[: -len(" (pageable)")]
    k = _KIND_OF_LABEL.get(d)
    return PATH_OF_KIND.get(k, "other") if k is not None else "other"


@dataclass(frozen=True)
class CopyPath:
    """One copy path of one device over the window (docs/METRICS.md, "Copy paths")."""

    device_id: int
    path: str
    label: str
    count: int
    bytes: Optional[int]                    # prorated bytes of the rows that record theirs; None: none does
    busy_ns: int
    busy_pct: float
    gb_per_s: Optional[float]               # None also when a row does not record its bytes, and for memsets
    kernel_overlap_ns: int
    overlap_pct: float
    beyond_kernels_ns: int
    pageable_count: int
    pageable_bytes: Optional[int]           # None: pageable copies none of which records its bytes
    steps: int                              # steps in the window (0: no steps)
    step_busy_pct_p50: Optional[float]
    bytes_per_step_p50: Optional[int]
    pinned_count: int = 0                   # host copies whose host side is pinned (and neither side pageable)
    kind_unknown_count: int = 0             # host copies, none pageable, whose host side's memory kind is not recorded
    copy_time_ns: int = 0                   # Σ of the copies' durations in the window (overlaps counted twice)
    call_known_ns: int = 0                  # of which copies linked to the CUDA call that issued them
    async_side_ns: int = 0                  # of which truly async on a side stream (docs/METRICS.md, "Copy paths")
    held_ns: int = 0                        # no-kernel time up to a copy ending in the kernel gap (METRICS.md)

    @property
    def async_side_pct(self) -> Optional[float]:
        """100 · async_side_ns / copy_time_ns; None when no copy of the path is linked to its call."""
        return 100.0 * self.async_side_ns / self.copy_time_ns if self.call_known_ns and self.copy_time_ns else None


@dataclass(frozen=True)
class CopyDevice:
    """A device with copies in the window: its window, kernel busy |K|, and all its copies together."""

    device_id: int
    window_ns: int
    kernel_busy_ns: int
    copy_busy_ns: int
    copy_overlap_ns: int


@dataclass(frozen=True)
class CopyEnginesResult(Outcome):
    window_start_ns: int = 0
    window_end_ns: int = 0
    paths: Tuple[CopyPath, ...] = ()
    devices: Tuple[CopyDevice, ...] = ()


def _i64(v: np.ndarray) -> np.ndarray:
    return np.asarray(v, np.int64)


def _key(pid: np.ndarray, dev: np.ndarray, stream: np.ndarray) -> np.ndarray:
    """One int64 per (process, device, stream): the identity of a CUDA stream across tables."""
    k = (_i64(pid) & 0x3FFFFF) << 40
    k |= (_i64(dev) & 0xFF) << 32
    k |= _i64(stream) & 0xFFFFFFFF
    return k


def kernel_streams(steady: TraceModel) -> Tuple[np.ndarray, bool]:
    """The sorted stream keys (:func:`_key`) that kernels or whole-graph executions run on in the window, and
    whether the keys hold the process (False when a table lacks ``globalPid``: streams are then matched by device
    and stream id only)."""
    tables = [t for t in (steady.kernels, steady.graph_trace) if t is not None and len(t)]
    with_pid = all(bool((_i64(t.pid) >= 0).all()) for t in tables)
    keys = [_key(t.pid if with_pid else np.zeros(len(t), np.int64), t.device, t.stream) for t in tables]
    return (np.unique(np.concatenate(keys)) if keys else np.empty(0, np.int64)), with_pid


def _async_call(api: Optional[ApiCalls]) -> np.ndarray:
    """Per API name index (one more slot for -1): an asynchronous copy or memset call (``cudaMemcpyAsync``,
    ``cuMemcpyHtoDAsync``, ``cudaMemsetAsync``, batched async copies)."""
    if api is None:
        return np.zeros(1, bool)
    base, _, _ = ac.name_bases(api.names)
    return np.array([("Memcpy" in b or "Memset" in b) and "Async" in b for b in base] + [False], bool)


def _rows(model: TraceModel, w0: int, w1: int, streams: Tuple[np.ndarray, bool] = (np.empty(0, np.int64), True)
          ) -> Optional[Dict[str, np.ndarray]]:
    """Copy and memset rows in the window: clipped start/end, device, path code, prorated bytes, pageable, pinned
    and unknown-kind host copies, whether the row is linked to its call, and whether it is asynchronous on a side
    stream: issued by an async copy/memset call, on a stream not in ``streams`` (:func:`kernel_streams`), and not
    a host copy from/to pageable memory (the driver stages those synchronously) or of unrecorded memory kind."""
    parts: List[Dict[str, np.ndarray]] = []
    api = model.api
    is_async = _async_call(api)
    k_streams, with_pid = streams
    copies: Tuple[Union[Memcpy, Memset, None], ...] = (model.memcpy, model.memset)
    for ops in copies:
        if ops is None or len(ops) == 0:
            continue
        s, e = _i64(ops.start), _i64(ops.end)
        e = np.maximum(e, s)
        keep = (s < w1) & ((e > w0) | ((e == s) & (s >= w0)))
        if not keep.any():
            continue
        s, e = s[keep], e[keep]
        cs = np.maximum(s, w0)
        ce = np.maximum(np.minimum(e, w1), cs)
        dur = e - s
        nb0, known = recorded_bytes(_i64(ops.bytes)[keep])
        nb = nb0.astype(np.float64)
        nb = np.where(dur > 0, nb * (ce - cs) / np.where(dur > 0, dur, 1), nb)
        n = s.shape[0]
        if not isinstance(ops, Memcpy):
            code = np.full(n, _CODE["memset"], np.int64)
            pg, pin, unk = np.zeros(n, bool), np.zeros(n, bool), np.zeros(n, bool)
        else:
            ck = _i64(ops.copy_kind)[keep]
            lut = np.full(int(max(ck.max(initial=0), 13)) + 2, _CODE["other"], np.int64)
            for k, p in PATH_OF_KIND.items():
                lut[k] = _CODE[p]
            code = lut[np.where(ck >= 0, ck, lut.shape[0] - 1)]
            sk, dk = _i64(ops.src_kind)[keep], _i64(ops.dst_kind)[keep]
            host = np.isin(code, [_CODE[p] for p in HOST_PATHS])
            pg = ((sk == PAGEABLE) | (dk == PAGEABLE)) & host
            hk = np.where(code == _CODE["H2D"], sk, dk)        # the host side: the source of H2D, the target of D2H
            pin = host & ~pg & (hk == PINNED)
            unk = host & ~pg & ((hk < KNOWN_MEM_KINDS.start) | (hk >= KNOWN_MEM_KINDS.stop))
        li = _i64(ops.launch_idx)[keep] if ops.launch_idx.shape[0] == len(ops) else np.full(n, -1, np.int64)
        linked = li >= 0
        if api is not None and len(api):
            linked &= li < len(api)
            call_async = is_async[np.asarray(api.name_idx)[np.where(linked, li, 0)]] & linked
        else:
            linked[:] = False
            call_async = linked.copy()
        key = _key(ops.pid[keep] if with_pid else np.zeros(n, np.int64), ops.device[keep], ops.stream[keep])
        side = ~np.isin(key, k_streams)
        parts.append({"s": cs, "e": ce, "dev": _i64(ops.device)[keep], "code": code, "bytes": nb, "known": known,
                      "pg": pg, "pin": pin, "unk": unk, "linked": linked, "aside": call_async & side & ~pg & ~unk})
    if not parts:
        return None
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


def held_length(k: iv.IntervalUnion, u: iv.IntervalUnion, ends: np.ndarray, w0: int, w1: int) -> int:
    """|U ∩ [g0, last end in the gap]| summed over the gaps [g0, g1) of ``k`` in ``[w0, w1)`` in which one of
    ``ends`` (the path's copies' ends) lies in (g0, g1]: the no-kernel time of the path that the work after a gap
    can have waited on (a kernel that starts while every copy in flight still runs waited on none of them)."""
    g0 = np.concatenate(([w0], k.end)).astype(np.int64)
    g1 = np.concatenate((k.start, [w1])).astype(np.int64)
    i = np.searchsorted(g0, ends, side="left") - 1          # the last gap starting before the copy's end
    ok = (i >= 0) & (ends <= g1[np.maximum(i, 0)])
    if not ok.any():
        return 0
    last = np.full(g0.shape[0], np.iinfo(np.int64).min)
    np.maximum.at(last, i[ok], ends[ok])
    h = last > g0
    return int(iv.overlap_length(u, g0[h], last[h]).sum())


def analyze_copy_engines(model: TraceModel, steady: TraceModel, w0: int, w1: int,
                         step_bounds: Optional[Tuple[np.ndarray, np.ndarray]] = None,
                         step_device: Optional[np.ndarray] = None) -> CopyEnginesResult:
    """Copy paths over ``[w0, w1)``: copies from ``model`` (clipped here, bytes prorated), kernels from ``steady``
    (the model clipped to the window); ``step_bounds``: (starts, ends) of the steps, when steps exist, and
    ``step_device`` their devices: when the steps run on several devices (a prefill and a decode engine), a path's
    per-step figures are over the steps of its device only."""
    rows = _rows(model, w0, w1, kernel_streams(steady))
    if rows is None:
        return CopyEnginesResult(False, "no memcpy or memset rows with a device in the analysis window", w0, w1)
    win = w1 - w0
    steps: Optional[Tuple[np.ndarray, np.ndarray]] = None
    steps_of: Dict[int, Tuple[np.ndarray, np.ndarray]] = {}
    if step_bounds is not None:                  # the steps clipped to the window: the non-empty ones, by start
        s0 = np.maximum(np.asarray(step_bounds[0], np.int64), w0)
        s1 = np.minimum(np.asarray(step_bounds[1], np.int64), w1)
        ok = s1 > s0
        o = np.argsort(s0[ok], kind="stable")
        steps = (s0[ok][o], s1[ok][o]) if ok.any() else None
        if steps is not None and step_device is not None:
            sd = np.asarray(step_device, np.int64)[ok][o]
            by_dev = rows_by_value(sd)
            if len(by_dev) > 1:                  # steps on several devices: each device's own steps
                steps_of = {int(d): (steps[0][r], steps[1][r]) for d, r in by_dev}
    paths: List[CopyPath] = []
    devices: List[CopyDevice] = []
    names = list(PATH_LABEL)
    union_of = kernel_unions(steady)
    for d, on in rows_by_value(rows["dev"]):     # one sort, not a mask over every row per device
        k = union_of(d)
        every = iv.union_blocks(rows["s"][on], rows["e"][on])
        ov_all = int(iv.overlap_length(k, every.start, every.end).sum()) if len(k) and len(every) else 0
        devices.append(CopyDevice(int(d), win, k.length, every.length, ov_all))
        for c in np.unique(rows["code"][on]).tolist():
            sel = on[rows["code"][on] == c]
            u = iv.union_blocks(rows["s"][sel], rows["e"][sel])
            busy = u.length
            ov = int(iv.overlap_length(k, u.start, u.end).sum()) if len(k) and busy else 0
            kn = rows["known"][sel]
            nb: Optional[int] = int(round_half_up(float(rows["bytes"][sel].sum()))) if kn.any() else None
            pg = sel[rows["pg"][sel]]
            d_ns = rows["e"][sel] - rows["s"][sel]
            n_steps, step_pct, step_bytes = 0, None, None
            dsteps = steps_of.get(int(d)) if steps_of else steps
            if dsteps is not None:
                s0, s1 = dsteps
                n_steps = int(s0.shape[0])
                inside = iv.overlap_length(u, s0, s1)
                step_pct = float(median(100.0 * inside / (s1 - s0)))
                i = step_of(rows["s"][sel], s0, s1)
                per = np.bincount(i[i >= 0], weights=rows["bytes"][sel][i >= 0], minlength=n_steps)
                step_bytes = int(round_half_up(median(per))) if nb is not None else None
            paths.append(CopyPath(
                device_id=int(d), path=names[c], label=PATH_LABEL[names[c]], count=int(sel.shape[0]), bytes=nb,
                busy_ns=busy, busy_pct=100.0 * busy / win if win else 0.0,
                gb_per_s=nb / busy if busy and nb is not None and kn.all() and names[c] != "memset" else None,
                kernel_overlap_ns=ov, overlap_pct=100.0 * ov / busy if busy else 0.0, beyond_kernels_ns=busy - ov,
                pageable_count=int(pg.shape[0]), pageable_bytes=(int(round_half_up(float(rows["bytes"][pg].sum())))
                                                            if rows["known"][pg].any() or not pg.shape[0] else None),
                steps=n_steps, step_busy_pct_p50=step_pct, bytes_per_step_p50=step_bytes,
                pinned_count=int(rows["pin"][sel].sum()), kind_unknown_count=int(rows["unk"][sel].sum()),
                copy_time_ns=int(d_ns.sum()), call_known_ns=int(d_ns[rows["linked"][sel]].sum()),
                async_side_ns=int(d_ns[rows["aside"][sel]].sum()),
                held_ns=held_length(k, u, rows["e"][sel].astype(np.int64), int(w0), int(w1)) if busy else 0))
    paths.sort(key=lambda p: (p.device_id, _CODE[p.path]))
    return CopyEnginesResult(True, None, int(w0), int(w1), tuple(paths), tuple(devices))


#: share (%) of the copies' time issued asynchronously on a side stream from which they "already are"
ASYNC_SIDE_PCT = 90.0


def async_side_share(paths: Sequence[CopyPath]) -> Optional[float]:
    """Σ async_side_ns / Σ copy_time_ns · 100 over ``paths`` (Unified-Memory migrations left out: no call issues
    them); None when no copy of them is linked to its call."""
    ps = [p for p in paths if p.path != "Unified"]
    total = sum(p.copy_time_ns for p in ps)
    if not total or not sum(p.call_known_ns for p in ps):
        return None
    return 100.0 * sum(p.async_side_ns for p in ps) / total


def copies_async_side_stream(paths: Sequence[CopyPath]) -> Optional[bool]:
    """Whether the copies of ``paths`` already are asynchronous on a side stream: at least :data:`ASYNC_SIDE_PCT`
    % of their time issued by an async copy/memset call on a stream no kernel of their process and device runs on
    in the window (None: not known, :func:`async_side_share`)."""
    share = async_side_share(paths)
    return None if share is None else share >= ASYNC_SIDE_PCT


def host_copies_pageable(paths: Sequence[CopyPath]) -> Optional[bool]:
    """Whether host copies of ``paths`` are from/to pageable memory: True when any is, False when every one's
    host-side memory kind is recorded and none is pageable, None when there are no host copies or some have no
    recorded kind (NULL / "unknown" srcKind / dstKind, or an export without the columns)."""
    host = [p for p in paths if p.path in HOST_PATHS and p.count]
    if not host:
        return None
    if any(p.pageable_count for p in host):
        return True
    return None if any(p.kind_unknown_count for p in host) else False
