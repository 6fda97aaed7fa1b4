"""CUDA API summary: per (display name, eventClass) calls, total, avg, p50, min, max of call durations on the
calling CPU thread; launch-call cost; allocation/free churn (docs/METRICS.md, "CUDA API summary").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

import numpy as np

from ...jsonable import NONE_AS_EMPTY, FieldsJson, Outcome
from ...model.timeline import few_distinct
from ...model.trace import ApiCalls, TraceModel
from ..common.stats import Summary, group_stats, pct, summary
from . import classes as ac


@dataclass(frozen=True)
class ApiRow(FieldsJson):
    """One CUDA API (display name, event class): its raw names, class (:mod:`classes`; ``wrapper`` for another
    event class), calls and their durations (ns), ``pct`` of all CUDA API time."""

    name: str
    raw_names: Tuple[str, ...]
    event_class: int
    api_class: str
    count: int
    total_ns: int
    avg_ns: int
    p50_ns: int
    min_ns: int
    max_ns: int
    pct: float


@dataclass(frozen=True)
class AllocFreeApi(FieldsJson):
    """An allocation or free API of :attr:`CudaApiResult.apis`: calls and their durations (ns)."""

    name: str
    api_class: str
    count: int
    total_ns: int
    avg_ns: int
    max_ns: int


@dataclass(frozen=True)
class CudaApiResult(Outcome):
    total_ns: int = 0
    call_count: int = 0
    apis: Tuple[ApiRow, ...] = ()
    launch_calls: Optional[Summary] = field(default=None, metadata=NONE_AS_EMPTY)   # launch calls' durations
    alloc_free: Tuple[AllocFreeApi, ...] = ()


def base_index(api: ApiCalls, rows: Optional[np.ndarray] = None) -> Tuple[np.ndarray, List[str]]:
    """(row → base-name index, base names): the rows (all, or ``rows``) grouped by display name."""
    uniq: Dict[str, int] = {}
    m = np.array([uniq.setdefault(b, len(uniq)) for b in api.base_names] + [0], dtype=np.int32)
    return m[api.name_idx if rows is None else api.name_idx[rows]], list(uniq.keys())


def analyze_cuda_api(model: TraceModel) -> CudaApiResult:
    api = model.api
    if api is None:
        return CudaApiResult(False, "no CUPTI_ACTIVITY_KIND_RUNTIME table: CUDA API calls were not traced")
    if len(api) == 0:
        return CudaApiResult(False, "CUDA API table is empty")
    dur = api.end - api.start
    bidx, bnames = base_index(api)
    total = int(dur.sum())
    gs = group_stats({"name": bidx, "event_class": api.event_class}, dur)
    raw_by_group: Dict[tuple, set] = {}   # (display name, event class) → raw names
    # distinct (base, class, raw name) triples without a per-row loop
    key = api.name_idx.astype(np.int64) << 8
    key |= api.event_class.astype(np.int64) & 0xFF
    for k in few_distinct(key).tolist():
        ni, e = k >> 8, k & 0xFF
        e = -1 if e == 0xFF else e
        raw_by_group.setdefault((api.base_names[ni], e), set()).add(api.names[ni])
    del key
    keys = list(zip(gs.keys["name"].tolist(), gs.keys["event_class"].tolist()))
    apis = gs.rows(ApiRow, bnames, raw_names=[tuple(sorted(raw_by_group.get((bnames[b], ec), ()))) for b, ec in keys],
                   api_class=[ac.api_class(bnames[b]) if ec in (0, 1, -1) else "wrapper" for b, ec in keys],
                   pct=[pct(t, total) for t in gs.total.tolist()])
    lm = ac.class_mask(api, "launch")
    alloc_free = tuple(AllocFreeApi(r.name, r.api_class, r.count, r.total_ns, r.avg_ns, r.max_ns)
                       for r in apis if r.api_class in ("alloc", "free"))
    return CudaApiResult(True, None, total_ns=total, call_count=len(api), apis=tuple(apis),
                         launch_calls=summary(dur[lm]), alloc_free=alloc_free)
