"""Copy engines as a resource: per device and copy path, how busy the path is in the steady window, how many
bytes it moves, at what rate, and how much of it runs under kernels (docs/METRICS.md, "Copy paths").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple, Union

import numpy as np

from ...jsonable import FieldsJson
from ...model import intervals as iv
from ...model.timeline import MEMCPY_KIND_LABEL, PAGEABLE, rows_by_value
from ...model.trace import Memcpy, Memset, TraceModel
from ..common.stats import median, round_half_up
from .unified import kernel_unions

#: copyKind → copy path
PATH_OF_KIND: Dict[int, str] = {1: "H2D", 3: "H2D", 2: "D2H", 4: "D2H", 5: "D2D", 6: "D2D", 7: "D2D", 8: "D2D",
                                9: "H2H", 10: "P2P", 11: "Unified", 12: "Unified", 13: "Unified"}
#: every path, in the report's order, with its words
PATH_LABEL: Dict[str, str] = {"H2D": "Host-to-Device", "D2H": "Device-to-Host", "D2D": "Device-to-Device",
                              "P2P": "Peer-to-Peer", "H2H": "Host-to-Host", "Unified": "Unified-Memory migration",
                              "memset": "memset", "other": "other copy kinds"}
HOST_PATHS = ("H2D", "D2H")
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
    bytes: int
    busy_ns: int
    busy_pct: float
    gb_per_s: Optional[float]
    kernel_overlap_ns: int
    overlap_pct: float
    beyond_kernels_ns: int
    pageable_count: int
    pageable_bytes: int
    steps: int                              # steps in the window (0: no steps)
    step_busy_pct_p50: Optional[float]
    bytes_per_step_p50: Optional[int]


@dataclass(frozen=True)
class CopyDevice:
    """A device with copies in the window: its window, kernel busy |K|, and all its copies together."""

    device_id: int
    window_ns: int
    kernel_busy_ns: int
    copy_busy_ns: int
    copy_overlap_ns: int


@dataclass(frozen=True)
class CopyEnginesResult(FieldsJson):
    available: bool
    reason: Optional[str]
    window_start_ns: int = 0
    window_end_ns: int = 0
    paths: Tuple[CopyPath, ...] = ()
    devices: Tuple[CopyDevice, ...] = ()


def _i64(v: np.ndarray) -> np.ndarray:
    return np.asarray(v, np.int64)


def _rows(model: TraceModel, w0: int, w1: int) -> Optional[Dict[str, np.ndarray]]:
    """Copy and memset rows in the window: clipped start/end, device, path code, prorated bytes, pageable."""
    parts: List[Dict[str, np.ndarray]] = []
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
        nb = np.maximum(_i64(ops.bytes)[keep], 0).astype(np.float64)
        nb = np.where(dur > 0, nb * (ce - cs) / np.where(dur > 0, dur, 1), nb)
        if not isinstance(ops, Memcpy):
            code = np.full(s.shape[0], _CODE["memset"], np.int64)
            pg = np.zeros(s.shape[0], bool)
        else:
            ck = _i64(ops.copy_kind)[keep]
            lut = np.full(int(max(ck.max(initial=0), 13)) + 2, _CODE["other"], np.int64)
            for k, p in PATH_OF_KIND.items():
                lut[k] = _CODE[p]
            code = lut[np.where(ck >= 0, ck, lut.shape[0] - 1)]
            pg = (_i64(ops.src_kind)[keep] == PAGEABLE) | (_i64(ops.dst_kind)[keep] == PAGEABLE)
            pg &= np.isin(code, [_CODE[p] for p in HOST_PATHS])
        parts.append({"s": cs, "e": ce, "dev": _i64(ops.device)[keep], "code": code, "bytes": nb, "pg": pg})
    if not parts:
        return None
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


def analyze_copy_engines(model: TraceModel, steady: TraceModel, w0: int, w1: int,
                         step_bounds: Optional[Tuple[np.ndarray, np.ndarray]] = None) -> CopyEnginesResult:
    """Copy paths over ``[w0, w1)``: copies from ``model`` (clipped here, bytes prorated), kernels from ``steady``
    (the model clipped to the window); ``step_bounds``: (starts, ends) of the steps, when steps exist."""
    rows = _rows(model, w0, w1)
    if rows is None:
        return CopyEnginesResult(False, "no memcpy or memset rows with a device in the analysis window", w0, w1)
    win = w1 - w0
    steps: Optional[Tuple[np.ndarray, np.ndarray]] = None
    if step_bounds is not None:                  # the steps clipped to the window: the non-empty ones, by start
        s0 = np.maximum(np.asarray(step_bounds[0], np.int64), w0)
        s1 = np.minimum(np.asarray(step_bounds[1], np.int64), w1)
        ok = s1 > s0
        o = np.argsort(s0[ok], kind="stable")
        steps = (s0[ok][o], s1[ok][o]) if ok.any() else None
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
            nb = int(round_half_up(float(rows["bytes"][sel].sum())))
            pg = sel[rows["pg"][sel]]
            n_steps, step_pct, step_bytes = 0, None, None
            if steps is not None:
                s0, s1 = steps
                n_steps = int(s0.shape[0])
                inside = iv.overlap_length(u, s0, s1)
                step_pct = float(median(100.0 * inside / (s1 - s0)))
                t = rows["s"][sel]
                i = np.searchsorted(s0, t, side="right") - 1
                hit = (i >= 0) & (t < s1[np.maximum(i, 0)])
                per = np.bincount(i[hit], weights=rows["bytes"][sel][hit], minlength=n_steps)
                step_bytes = int(round_half_up(median(per)))
            paths.append(CopyPath(
                device_id=int(d), path=names[c], label=PATH_LABEL[names[c]], count=int(sel.shape[0]), bytes=nb,
                busy_ns=busy, busy_pct=100.0 * busy / win if win else 0.0, gb_per_s=nb / busy if busy else None,
                kernel_overlap_ns=ov, overlap_pct=100.0 * ov / busy if busy else 0.0, beyond_kernels_ns=busy - ov,
                pageable_count=int(pg.shape[0]), pageable_bytes=int(round_half_up(float(rows["bytes"][pg].sum()))),
                steps=n_steps, step_busy_pct_p50=step_pct, bytes_per_step_p50=step_bytes))
    paths.sort(key=lambda p: (p.device_id, _CODE[p.path]))
    return CopyEnginesResult(True, None, int(w0), int(w1), tuple(paths), tuple(devices))
