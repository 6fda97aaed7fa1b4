"""The trace rows of the timeline file: the values of the rows inside the span copied out of the model per table, with
a small name table per table (only the kept rows' names); memory ∝ the kept rows (at most ``--timeline-events``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from ...model.launch_config import LaunchConfig
from ...model.trace import GraphTrace, Memcpy, Memset, NvtxRanges, OsCalls, TraceModel

_E = np.empty(0, np.int64)


def _i64(v: np.ndarray, rows: np.ndarray) -> np.ndarray:
    return np.asarray(v, np.int64)[rows]


def name_table(idx: np.ndarray, names: Sequence[str], fallback: str
               ) -> Tuple[np.ndarray, Tuple[str, ...], List[int]]:
    """(index of each row into the returned names, the distinct names the rows use, their indices in ``names``):
    ``names[i]`` for each distinct index ``i``, ``fallback`` for an index outside ``names``."""
    u, inv = np.unique(np.asarray(idx, np.int64), return_inverse=True)
    used, n = u.tolist(), len(names)
    return inv.astype(np.int64).reshape(-1), tuple(names[i] if 0 <= i < n else fallback for i in used), used


class _Rows:
    """Rows copied out of one table: as many as ``start`` values."""

    start: np.ndarray

    def __len__(self) -> int:
        return int(self.start.shape[0])


@dataclass(frozen=True)
class KernelRows(_Rows):
    """Kernels inside the span, in the model's order (by start): ``row`` is the kernel's row in the model,
    ``launch`` the API row (model) of its launch call when that call is in the file too, else -1; ``name`` indexes
    ``names``, ``category`` the category of each of ``names`` ("" unknown); ``config`` the launch configuration of
    each row (grid, block, registers, shared memory; None when the export does not give them)."""

    row: np.ndarray
    start: np.ndarray
    end: np.ndarray
    device: np.ndarray
    stream: np.ndarray
    corr: np.ndarray
    graph_node: np.ndarray     # bool: ran as a CUDA-graph node
    launch: np.ndarray
    name: np.ndarray
    names: Tuple[str, ...]
    category: Tuple[str, ...] = ()
    config: Optional[LaunchConfig] = None


@dataclass(frozen=True)
class CopyRows(_Rows):
    """Memcpy or memset rows inside the span; ``device`` / ``stream`` -1 where the export lacks them, a column
    None where the table has no such column (memcpy: ``copy_kind``, ``src_kind``, ``dst_kind``; memset:
    ``mem_kind``); ``launch`` as for :class:`KernelRows`."""

    start: np.ndarray
    end: np.ndarray
    device: np.ndarray
    stream: np.ndarray
    launch: np.ndarray
    bytes: Optional[np.ndarray] = None
    copy_kind: Optional[np.ndarray] = None
    src_kind: Optional[np.ndarray] = None
    dst_kind: Optional[np.ndarray] = None
    mem_kind: Optional[np.ndarray] = None
    corr: Optional[np.ndarray] = None


@dataclass(frozen=True)
class GraphRows(_Rows):
    """Whole-graph executions inside the span (``device`` -1 where unknown, ``graph_id`` None without the column)."""

    start: np.ndarray
    end: np.ndarray
    device: np.ndarray
    graph_id: Optional[np.ndarray] = None


@dataclass(frozen=True)
class ApiRows(_Rows):
    """CUDA API calls inside the span: ``row`` is the call's row in the model (the id its flows carry), ``flow``
    True for a call that launched a kernel or copy in the file; ``name`` indexes ``names`` (display names)."""

    row: np.ndarray
    start: np.ndarray
    end: np.ndarray
    gtid: np.ndarray
    corr: np.ndarray
    flow: np.ndarray
    name: np.ndarray
    names: Tuple[str, ...]


@dataclass(frozen=True)
class HostRows(_Rows):
    """NVTX ranges or OS-runtime calls inside the span, per thread (``gtid``; None: the OS-runtime table has no
    thread column and is not shown); ``closed`` False for an unterminated NVTX range."""

    start: np.ndarray
    end: np.ndarray
    gtid: Optional[np.ndarray]
    name: np.ndarray
    names: Tuple[str, ...]
    closed: Optional[np.ndarray] = None


@dataclass(frozen=True)
class SampleRows(_Rows):
    """CPU samples inside the span: the leaf frame's symbol and module and the caller's symbol, each an index into
    ``names``."""

    start: np.ndarray
    gtid: np.ndarray
    symbol: np.ndarray
    module: np.ndarray
    caller: np.ndarray
    names: Tuple[str, ...]


def kernel_rows(model: TraceModel, rows: np.ndarray, launch: np.ndarray, name_category: Optional[np.ndarray],
                categories: Sequence[str], config: Optional[LaunchConfig] = None) -> KernelRows:
    """The kernels ``rows`` of ``model``; ``name_category``: index into ``categories`` of each of the model's kernel
    names; ``config``: the launch configurations read for these rows (dropped unless made for exactly these rows)."""
    k = model.kernels
    if k is None or rows.shape[0] == 0:
        return KernelRows(_E, _E, _E, _E, _E, _E, np.empty(0, bool), _E, _E, ())
    name, names, used = name_table(k.name_idx[rows], k.names, "[unknown]")
    cat: Tuple[str, ...] = ()
    if name_category is not None and len(name_category) and len(categories):
        nc = name_category.tolist()
        cat = tuple(categories[nc[i]] if 0 <= i < len(nc) and 0 <= nc[i] < len(categories) else "" for i in used)
    return KernelRows(rows, _i64(k.start, rows), _i64(k.end, rows), _i64(k.device, rows), _i64(k.stream, rows),
                      _i64(k.corr, rows), np.asarray(k.graph_node)[rows] >= 0, launch, name, names, cat,
                      config if config is not None and np.array_equal(config.rows, rows) else None)


def copy_rows(ops: Union[Memcpy, Memset, None], rows: np.ndarray, launch: np.ndarray) -> CopyRows:
    """The memcpy / memset ``rows`` of ``ops`` (a memcpy has no ``mem_kind``, a memset no copy / memory kinds)."""
    if ops is None or rows.shape[0] == 0:
        return CopyRows(_E, _E, _E, _E, _E)
    kinds = {c: _i64(getattr(ops, c), rows)
             for c in ("copy_kind", "src_kind", "dst_kind", "mem_kind") if hasattr(ops, c)}   # the table's own
    return CopyRows(_i64(ops.start, rows), _i64(ops.end, rows), _i64(ops.device, rows), _i64(ops.stream, rows),
                    launch, _i64(ops.bytes, rows), corr=_i64(ops.corr, rows), **kinds)


def graph_rows(g: Optional[GraphTrace], rows: np.ndarray) -> GraphRows:
    """The whole-graph rows ``rows`` of ``g``."""
    if g is None or rows.shape[0] == 0:
        return GraphRows(_E, _E, _E)
    return GraphRows(_i64(g.start, rows), _i64(g.end, rows), _i64(g.device, rows), _i64(g.graph_id, rows))


def api_rows(model: TraceModel, rows: np.ndarray, launched: np.ndarray) -> ApiRows:
    """The CUDA API ``rows``; ``launched``: API rows (model) of the kept kernels' and copies' launch calls."""
    api = model.api
    if api is None or rows.shape[0] == 0:
        return ApiRows(_E, _E, _E, _E, _E, np.empty(0, bool), _E, ())
    name, names, _ = name_table(api.name_idx[rows], api.base_names, "[unknown]")
    return ApiRows(rows, _i64(api.start, rows), _i64(api.end, rows), _i64(api.gtid, rows), _i64(api.corr, rows),
                   np.isin(rows, launched[launched >= 0]), name, names)


def host_rows(t: Union[NvtxRanges, OsCalls, None], rows: np.ndarray) -> HostRows:
    """The NVTX ``rows`` (names domain-qualified as in the model) or OS-runtime ``rows`` of ``t``."""
    if t is None or rows.shape[0] == 0:
        return HostRows(_E, _E, _E, _E, ())
    fallback = "[unnamed]" if isinstance(t, NvtxRanges) else "[OS runtime call]"
    name, names, _ = name_table(t.name_idx[rows], t.names, fallback)
    return HostRows(_i64(t.start, rows), _i64(t.end, rows), _i64(t.gtid, rows), name, names,
                    np.asarray(t.closed, bool)[rows] if isinstance(t, NvtxRanges) else None)


def sample_rows(model: TraceModel, rows: np.ndarray) -> SampleRows:
    """The CPU-sample ``rows``: their leaf and caller frames' names."""
    s = model.samples
    if s is None or rows.shape[0] == 0:
        return SampleRows(_E, _E, _E, _E, _E, ())
    leaf, caller = _i64(s.leaf, rows), _i64(s.caller, rows)
    u = np.unique(np.concatenate((leaf, caller)))
    frames = u.tolist()
    names = tuple(s.frame_symbol[f] for f in frames) + tuple(s.frame_module[f] for f in frames)
    li, ci = np.searchsorted(u, leaf), np.searchsorted(u, caller)
    return SampleRows(_i64(s.start, rows), _i64(s.gtid, rows), li, li + u.shape[0], ci, names)


def labels_of(model: TraceModel, *gtids: Optional[np.ndarray]) -> Dict[int, str]:
    """The label of each named thread among ``gtids`` (:meth:`model.trace.TraceModel.thread_label`)."""
    parts = [np.asarray(g, np.int64) for g in gtids if g is not None and g.shape[0]]
    out: Dict[int, str] = {}
    if parts:
        for g in np.unique(np.concatenate(parts)).tolist():
            label = model.thread_label(g)
            if label:
                out[g] = label
    return out
