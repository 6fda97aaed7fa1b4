"""Memcpy / memset GPU activity by direction and memory kind (docs/METRICS.md, "Memcpy / memset").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, ClassVar, Dict, Optional, Tuple, Type, TypeVar

import numpy as np

from ...jsonable import NONE_OMITTED, FieldsJson, Outcome
from ...model.timeline import copy_kind_label
from ...model.trace import TraceModel
from ..common.copy_bytes import bytes_or_none, recorded_bytes
from ..common.stats import group_stats

MEM_KIND_LABEL = {0: "Pageable", 1: "Pinned", 2: "Device", 3: "Array", 4: "Managed", 5: "Device Static",
                  6: "Managed Static", 7: "Unknown"}


def mem_kind(k: int) -> str:
    return MEM_KIND_LABEL.get(int(k), "Unknown" if k < 0 else str(int(k)))


@dataclass(frozen=True)
class CopyStatsRow(FieldsJson):
    """Count, bytes, GPU durations (ns) and achieved bandwidth of a group of copies or memsets (docs/METRICS.md;
    the rows below add the keys that name the group, written first: ``JSON_KEYS``). ``bytes``: of the rows that
    record theirs, None when none does; ``gb_per_s``: those bytes over those rows' summed duration (None for
    memsets: their recorded duration need not bound the write, docs/METRICS.md)."""

    count: int
    bytes: Optional[int]
    total_ns: int
    avg_ns: int
    p50_ns: int
    min_ns: int
    max_ns: int
    gb_per_s: Optional[float]


@dataclass(frozen=True)
class MemcpyDirectionRow(CopyStatsRow):
    """The copies of one direction (``copy_kind``)."""

    direction: str
    copy_kind: int
    JSON_KEYS: ClassVar[Tuple[str, ...]] = ("direction", "copy_kind")


@dataclass(frozen=True)
class MemcpyKindRow(CopyStatsRow):
    """The copies of one (direction, source memory kind, destination memory kind)."""

    direction: str
    src_kind_name: str
    dst_kind_name: str
    copy_kind: int
    src_kind: int
    dst_kind: int
    JSON_KEYS: ClassVar[Tuple[str, ...]] = ("direction", "src_kind_name", "dst_kind_name", "copy_kind", "src_kind",
                                            "dst_kind")


@dataclass(frozen=True)
class MemsetRow(CopyStatsRow):
    """The memsets of one memory kind."""

    mem_kind_name: str
    mem_kind: int
    JSON_KEYS: ClassVar[Tuple[str, ...]] = ("mem_kind_name", "mem_kind")


@dataclass(frozen=True)
class MemcpyResult(Outcome):
    by_direction: Tuple[MemcpyDirectionRow, ...] = ()
    by_kind: Tuple[MemcpyKindRow, ...] = ()
    memset: Tuple[MemsetRow, ...] = ()
    total_bytes: Optional[int] = 0      # bytes of the copies that record theirs; None: no copy does
    total_ns: int = 0
    #: copies whose byte count the export does not record (NULL, or no ``bytes`` column); None when every copy does
    bytes_unrecorded: Optional[int] = field(default=None, metadata=NONE_OMITTED)


R = TypeVar("R", MemcpyDirectionRow, MemcpyKindRow, MemsetRow)


def _stats_rows(row: Type[R], keys: Dict[str, np.ndarray], dur: np.ndarray, nbytes: np.ndarray,
                **labels: Tuple[str, Callable[[int], str]]) -> Tuple[R, ...]:
    """A ``row`` per distinct combination of ``keys``, largest total first; ``labels``: each label field's key and
    the function naming its value; no rate for a :class:`MemsetRow`."""
    gs = group_stats(keys, dur)
    nb, known = recorded_bytes(nbytes)
    b = group_stats(keys, nb).total.tolist()      # the same groups in the same (key) order: integer sums
    if known.all():
        n, t = gs.count.tolist(), gs.total.tolist()
    else:                                          # rows without a byte count: neither their bytes nor their time
        n = group_stats(keys, known.astype(np.int64)).total.tolist()
        t = group_stats(keys, np.where(known, dur, 0)).total.tolist()
    named = {f: [name(v) for v in gs.keys[k].tolist()] for f, (k, name) in labels.items()}
    return tuple(gs.rows(row, bytes=[bytes_or_none(x, k, 1) for x, k in zip(b, n)],
                         gb_per_s=[x / d if k and d > 0 and row is not MemsetRow else None
                                   for x, k, d in zip(b, n, t)], **named))


def analyze_memcpy(model: TraceModel) -> MemcpyResult:
    mc, ms = model.memcpy, model.memset
    if (mc is None or len(mc) == 0) and (ms is None or len(ms) == 0):
        return MemcpyResult(False, "no memcpy or memset activity in the trace")
    by_direction: Tuple[MemcpyDirectionRow, ...] = ()
    by_kind: Tuple[MemcpyKindRow, ...] = ()
    memset: Tuple[MemsetRow, ...] = ()
    total_bytes: Optional[int] = 0
    total_ns = 0
    unrecorded: Optional[int] = None
    if mc is not None and len(mc):
        dur = mc.end - mc.start
        nb, known = recorded_bytes(mc.bytes)
        n_known = int(known.sum())
        total_bytes = bytes_or_none(int(nb.sum()), n_known, len(mc))
        unrecorded = len(mc) - n_known or None
        total_ns = int(dur.sum())
        direction = ("copy_kind", copy_kind_label)
        by_direction = _stats_rows(MemcpyDirectionRow, {"copy_kind": mc.copy_kind}, dur, mc.bytes, direction=direction)
        by_kind = _stats_rows(
            MemcpyKindRow, {"copy_kind": mc.copy_kind, "src_kind": mc.src_kind, "dst_kind": mc.dst_kind}, dur,
            mc.bytes, direction=direction, src_kind_name=("src_kind", mem_kind), dst_kind_name=("dst_kind", mem_kind))
    if ms is not None and len(ms):
        dur = ms.end - ms.start
        memset = _stats_rows(MemsetRow, {"mem_kind": ms.mem_kind}, dur, ms.bytes, mem_kind_name=("mem_kind", mem_kind))
    return MemcpyResult(True, None, by_direction=by_direction, by_kind=by_kind, memset=memset,
                        total_bytes=total_bytes, total_ns=total_ns, bytes_unrecorded=unrecorded)
