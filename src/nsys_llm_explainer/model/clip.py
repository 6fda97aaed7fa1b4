"""Restrict a :class:`TraceModel` to a time window ``[start_ns, end_ns)``: rows that intersect it, clipped to it
(docs/MODEL.md, "Windows"); vectorized, no per-row Python loops.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Dict, Optional, Tuple, TypeVar, Union

import numpy as np

from .info import RowCounts
from .trace import ApiCalls, GpuRows, Kernels, NvtxRanges, TraceModel

R = TypeVar("R", bound=GpuRows)


def _keep_mask(start: np.ndarray, end: np.ndarray, w0: int, w1: int) -> np.ndarray:
    e = np.maximum(end, start)
    return (start < w1) & ((e > w0) | ((e == start) & (start >= w0)))


Rows = Union[slice, np.ndarray]


def _select(start: np.ndarray, end: np.ndarray, w0: int, w1: int,
            neg_end_order: bool = False) -> Tuple[Rows, np.ndarray, np.ndarray]:
    """(rows kept in their new order, clipped start, clipped end). ``rows`` is a slice when the kept rows are
    contiguous and already in their new order (the usual case: rows sorted by start, few crossing the window
    edges), so the other columns of the clipped model are views of the model's arrays instead of copies."""
    rows = np.nonzero(_keep_mask(start, end, w0, w1))[0]
    n = rows.shape[0]
    if n and not neg_end_order and int(rows[-1]) - int(rows[0]) + 1 == n:
        a = int(rows[0])
        sl = slice(a, a + n)
        cs = np.maximum(start[sl], w0)
        ce = np.maximum(np.minimum(end[sl], w1), cs)
        if n < 2 or bool(((cs[1:] > cs[:-1]) | ((cs[1:] == cs[:-1]) & (ce[1:] >= ce[:-1]))).all()):
            return sl, cs, ce                          # the (start, end) sort below would keep this order
    cs = np.maximum(start[rows], w0)
    ce = np.maximum(np.minimum(end[rows], w1), cs)
    order = np.lexsort((-ce if neg_end_order else ce, cs))
    return rows[order], cs[order], ce[order]


def _old_to_new(rows: Rows, n_old: int) -> Callable[[np.ndarray], np.ndarray]:
    """Old row → new row (-1 when dropped) of a selection made by :func:`_select`."""
    if isinstance(rows, slice):
        a, b = rows.start, rows.stop
        return lambda li: np.where((li >= a) & (li < b), li - a, -1)
    table = np.full(n_old, -1, np.int64)
    table[rows] = np.arange(rows.shape[0], dtype=np.int64)
    return lambda li: table[li]


def _remap(launch_idx: np.ndarray, old_to_new: Optional[Callable[[np.ndarray], np.ndarray]],
           n_old: int) -> np.ndarray:
    li = np.asarray(launch_idx, dtype=np.int64)
    if old_to_new is None or n_old == 0 or li.shape[0] == 0:
        return np.full(li.shape[0], -1, np.int64)
    return np.where(li >= 0, old_to_new(np.clip(li, 0, n_old - 1)), -1)


def _clip_ops(ops: Optional[R], w0: int, w1: int, old_to_new: Optional[Callable[[np.ndarray], np.ndarray]],
              n_old: int) -> Optional[R]:
    if ops is None:
        return None
    rows, cs, ce = _select(ops.start, ops.end, w0, w1)
    cols: Dict[str, np.ndarray] = {f.name: getattr(ops, f.name)[rows] for f in dataclasses.fields(ops)
                                   if f.name not in ("start", "end", "names")}
    if "launch_idx" in cols:
        cols["launch_idx"] = _remap(cols["launch_idx"], old_to_new, n_old)
    return dataclasses.replace(ops, start=cs, end=ce, **cols)


def clip_model(model: TraceModel, start_ns: int, end_ns: int) -> TraceModel:
    """A new :class:`TraceModel` holding only the rows intersecting ``[start_ns, end_ns)``, clipped to it."""
    w0, w1 = int(start_ns), int(end_ns)
    if w1 < w0:
        raise ValueError(f"clip window end {w1} is before its start {w0}")

    api: Optional[ApiCalls] = None
    old_to_new = None
    n_api = len(model.api) if model.api is not None else 0
    a = model.api
    if a is not None:
        rows, cs, ce = _select(a.start, a.end, w0, w1)
        old_to_new = _old_to_new(rows, n_api)
        api = ApiCalls(start=cs, end=ce, gtid=a.gtid[rows], pid=a.pid[rows], tid=a.tid[rows],
                       corr=a.corr[rows], name_idx=a.name_idx[rows], event_class=a.event_class[rows],
                       names=a.names, base_names=a.base_names)

    kernels: Optional[Kernels] = None
    k = model.kernels
    if k is not None:
        rows, cs, ce = _select(k.start, k.end, w0, w1)
        li = k.launch_idx if k.launch_idx.shape[0] == len(k) else np.full(len(k), -1, np.int64)
        kernels = Kernels(start=cs, end=ce, device=k.device[rows], stream=k.stream[rows], corr=k.corr[rows],
                          pid=k.pid[rows], name_idx=k.name_idx[rows], graph_node=k.graph_node[rows],
                          names=k.names, launch_idx=_remap(li[rows], old_to_new, n_api))

    nvtx: Optional[NvtxRanges] = None
    n = model.nvtx
    if n is not None:
        rows, cs, ce = _select(n.start, n.end, w0, w1, neg_end_order=True)
        nvtx = NvtxRanges(start=cs, end=ce, closed=n.closed[rows], event_type=n.event_type[rows],
                          gtid=n.gtid[rows], pid=n.pid[rows], tid=n.tid[rows], end_gtid=n.end_gtid[rows],
                          name_idx=n.name_idx[rows], names=n.names,
                          domain=n.domain[rows] if n.domain.shape[0] == len(n) else np.zeros(cs.shape[0], np.int64))

    memcpy = _clip_ops(model.memcpy, w0, w1, old_to_new, n_api)
    memset = _clip_ops(model.memset, w0, w1, old_to_new, n_api)
    sync = _clip_ops(model.sync, w0, w1, old_to_new, n_api)
    graph_trace = _clip_ops(model.graph_trace, w0, w1, old_to_new, n_api)
    info = model.info
    if info is not None:
        counts = dict(info.row_counts)
        for key, part in (("kernels", kernels), ("cuda_api", api), ("nvtx_ranges", nvtx), ("memcpy", memcpy),
                          ("memset", memset), ("sync", sync), ("graph_trace", graph_trace)):
            if key in counts or part is not None:
                counts[key] = len(part) if part is not None else 0
        info = dataclasses.replace(info, row_counts=RowCounts.of(counts))
    return TraceModel(
        info=info, kernels=kernels, api=api, nvtx=nvtx, memcpy=memcpy, memset=memset, sync=sync,
        graph_trace=graph_trace, osrt=_clip_ops(model.osrt, w0, w1, None, 0),
        thread_names=model.thread_names, thread_labels=model.thread_labels, warnings=model.warnings,
        notes=model.notes,
        um_gpu_faults=_clip_ops(model.um_gpu_faults, w0, w1, None, 0),
        um_cpu_faults=_clip_ops(model.um_cpu_faults, w0, w1, None, 0),
    )
