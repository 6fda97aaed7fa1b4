"""Restrict a :class:`TraceModel` to a time window ``[start_ns, end_ns)``: rows that intersect it, clipped to it
(docs/MODEL.md, "Windows"); vectorized, no per-row Python loops.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Dict, Optional, Tuple, TypeVar, Union

import numpy as np

from .intervals import in_start_end_order, in_window
from .trace import Rows as Table
from .trace import TraceModel

R = TypeVar("R", bound=Table)


Rows = Union[slice, np.ndarray]
Relink = Callable[[np.ndarray], np.ndarray]


def _select(start: np.ndarray, end: np.ndarray, w0: int, w1: int,
            neg_end_order: bool = False) -> Tuple[Rows, np.ndarray, np.ndarray]:
    """(rows kept in their new order, clipped start, clipped end). ``rows`` is a slice when the kept rows are
    contiguous and already in their new order (the usual case: rows sorted by start, few crossing the window
    edges), so the other columns of the clipped model are views of the model's arrays instead of copies."""
    rows = np.nonzero(in_window(start, end, w0, w1))[0]
    n = rows.shape[0]
    if n and not neg_end_order and int(rows[-1]) - int(rows[0]) + 1 == n:
        a = int(rows[0])
        sl = slice(a, a + n)
        cs = np.maximum(start[sl], w0)
        ce = np.maximum(np.minimum(end[sl], w1), cs)
        if in_start_end_order(cs, ce):
            return sl, cs, ce                          # the (start, end) sort below would keep this order
    cs = np.maximum(start[rows], w0)
    ce = np.maximum(np.minimum(end[rows], w1), cs)
    order = np.lexsort((-ce if neg_end_order else ce, cs))
    return rows[order], cs[order], ce[order]


def _relink(rows: Optional[Rows], n_old: int) -> Relink:
    """``launch_idx`` (a row of the API table of ``n_old`` rows, or -1) → the row of the clipped API table (-1 when
    that call was dropped); ``rows``: the API rows kept (:func:`_select`), None without an API table."""
    if rows is None or n_old == 0:
        return lambda li: np.full(li.shape[0], -1, np.int64)
    if isinstance(rows, slice):
        a, b = rows.start, rows.stop
        return lambda li: np.where((li >= a) & (li < b), li - a, -1)
    table = np.full(n_old, -1, np.int64)
    table[rows] = np.arange(rows.shape[0], dtype=np.int64)
    return lambda li: np.where(li >= 0, table[np.clip(li, 0, n_old - 1)], -1)


def _take(t: R, sel: Tuple[Rows, np.ndarray, np.ndarray], relink: Relink, **fixed: Any) -> R:
    """The table ``t`` (any of the model's) restricted to the selection ``sel`` (:func:`_select`): every per-row
    array taken in the new order, ``launch_idx`` relinked (unset: -1 each), name lists and arrays of another length
    (an unset ``domain``) kept; ``fixed``: fields set as given."""
    rows, cs, ce = sel
    n = len(t)
    cols: Dict[str, Any] = {"start": cs, "end": ce}
    for f in dataclasses.fields(t):
        v = getattr(t, f.name)
        if f.name == "launch_idx":
            cols[f.name] = relink(np.asarray(v if v.shape[0] == n else np.full(n, -1), np.int64)[rows])
        elif isinstance(v, np.ndarray) and v.shape[0] == n and f.name not in cols:
            cols[f.name] = v[rows]
    return dataclasses.replace(t, **{**cols, **fixed})


def api_relink(model: TraceModel, start_ns: int, end_ns: int) -> Relink:
    """``launch_idx`` of the whole model (a row of its API table, or -1) → the row of the API table of
    ``clip_model(model, start_ns, end_ns)`` (-1 when that call lies outside the window): how a GPU row outside the
    window finds its launch call inside it (analyses/steps/host_evidence.py)."""
    a = model.api
    if a is None:
        return _relink(None, 0)
    return _relink(_select(a.start, a.end, int(start_ns), int(end_ns))[0], len(a))


def clip_model(model: TraceModel, start_ns: int, end_ns: int) -> TraceModel:
    """A new :class:`TraceModel` holding only the rows intersecting ``[start_ns, end_ns)``, clipped to it."""
    w0, w1 = int(start_ns), int(end_ns)
    if w1 < w0:
        raise ValueError(f"clip window end {w1} is before its start {w0}")

    def clip(t: Optional[R], relink: Relink, neg_end_order: bool = False, **fixed: Any) -> Optional[R]:
        return None if t is None else _take(t, _select(t.start, t.end, w0, w1, neg_end_order), relink, **fixed)

    a, api, linked, unlinked = model.api, None, _relink(None, 0), _relink(None, 0)
    if a is not None:
        sel = _select(a.start, a.end, w0, w1)
        api, linked = _take(a, sel, unlinked), _relink(sel[0], len(a))
    out = dataclasses.replace(
        model, kernels=clip(model.kernels, linked, rowid_base=None, read_pos=np.empty(0, np.int32)), api=api,
        nvtx=clip(model.nvtx, unlinked, neg_end_order=True), memcpy=clip(model.memcpy, linked),
        memset=clip(model.memset, linked), sync=clip(model.sync, linked), graph_trace=clip(model.graph_trace, linked),
        osrt=clip(model.osrt, unlinked), um_gpu_faults=clip(model.um_gpu_faults, unlinked),
        um_cpu_faults=clip(model.um_cpu_faults, unlinked), samples=None,   # the samples are not clipped
        wait_samples=None if model.wait_samples is None else model.wait_samples.clip(w0, w1))
    return out.with_row_counts()
