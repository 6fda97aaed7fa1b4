"""CPU↔GPU synchronization: host-blocking CUDA calls (:mod:`classes`), globally and per PID, with ``total_ns``
(Σ call durations) and per PID ``wall_ns`` (union of its calls); non-blocking calls apart (docs/METRICS.md,
"CPU↔GPU synchronization").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Tuple

from ...jsonable import FieldsJson, Outcome
from ...model.timeline import spans_by
from ...model.trace import TraceModel
from ..common.stats import group_stats
from . import classes as ac
from .cuda_api import base_index


@dataclass(frozen=True)
class SyncApiRow(FieldsJson):
    """One CUDA API (display name) of the class: calls and their durations (ns) on the calling threads."""

    name: str
    count: int
    total_ns: int
    avg_ns: int
    p50_ns: int
    max_ns: int


@dataclass(frozen=True)
class SyncPidApiRow(SyncApiRow):
    """One synchronizing CUDA API of one process: as :class:`SyncApiRow`."""

    pid: int
    JSON_KEYS: ClassVar[Tuple[str, ...]] = ("pid", "name")


@dataclass(frozen=True)
class SyncPidTotal(FieldsJson):
    """The synchronizing calls of one process: calls, summed durations and ``wall_ns`` (module docstring)."""

    pid: int
    count: int
    total_ns: int
    wall_ns: int


@dataclass(frozen=True)
class SyncResult(Outcome):
    total_ns: int = 0
    call_count: int = 0
    sync_apis: Tuple[SyncApiRow, ...] = ()
    nonblocking_apis: Tuple[SyncApiRow, ...] = ()
    per_pid: Tuple[SyncPidApiRow, ...] = ()
    per_pid_totals: Tuple[SyncPidTotal, ...] = ()


def analyze_sync(model: TraceModel) -> SyncResult:
    api = model.api
    if api is None or len(api) == 0:
        return SyncResult(False, "no CUDA API calls in the trace")
    dur = api.end - api.start
    bidx, bnames = base_index(api)
    sm = ac.class_mask(api, "sync")
    nm = ac.class_mask(api, "nonblocking_sync")
    per_pid = group_stats({"pid": api.pid[sm], "name": bidx[sm]}, dur[sm]).rows(SyncPidApiRow, bnames)
    per_pid.sort(key=lambda r: (r.pid, -r.total_ns))
    totals = [SyncPidTotal(*t) for t in spans_by(api.pid[sm], api.start[sm], api.end[sm])]
    return SyncResult(True, None, total_ns=int(dur[sm].sum()), call_count=int(sm.sum()),
                      sync_apis=tuple(group_stats({"name": bidx[sm]}, dur[sm]).rows(SyncApiRow, bnames)),
                      nonblocking_apis=tuple(group_stats({"name": bidx[nm]}, dur[nm]).rows(SyncApiRow, bnames)),
                      per_pid=tuple(per_pid), per_pid_totals=tuple(totals))
