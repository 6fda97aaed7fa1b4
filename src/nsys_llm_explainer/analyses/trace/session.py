"""The capture as recorded: the profiling session's length and where the CUDA activity lies in it, and whether
it starts or ends far from the session's edges (docs/METRICS.md, "Session and CUDA activity"); and the clock facts
that place the export's timestamps on UTC (:class:`ClockInfo`, docs/CLUSTER.md "Clock alignment").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np

from ...jsonable import NONE_OMITTED, FieldsJson
from ...model.trace import TraceModel, trace_edge
from ...vocabulary.code_spans import code_name

#: a gap between the session's edge and the CUDA activity is *far* when it exceeds both this share of the
#: session …
FAR_SHARE = 0.10
#: … and this many ns
FAR_NS = 1_000_000_000


@dataclass(frozen=True)
class SessionSpan(FieldsJson):
    """The session as the export records it, and the CUDA activity's place in it (module docstring)."""

    duration_ns: int                 # the session's length (ANALYSIS_DETAILS.duration)
    start_ns: Optional[int]          # the session's start on the export's timeline; None: unknown (no utcEpochNs)
    end_ns: Optional[int]            # start_ns + duration_ns
    cuda_start_ns: Optional[int]     # first CUDA activity (None: no CUDA row)
    cuda_end_ns: Optional[int]       # last CUDA activity
    placed: bool                     # the CUDA activity lies inside [start_ns, end_ns]
    starts_far: bool                 # placed, and cuda_start_ns − start_ns > max(FAR_SHARE × duration, FAR_NS)
    ends_far: bool                   # placed, and end_ns − cuda_end_ns > max(FAR_SHARE × duration, FAR_NS)
    #: what bounded the recording inside the session, when the export shows it (:func:`capture_bound`); None: nothing
    bounded_by: Optional[str] = field(default=None, metadata=NONE_OMITTED)


def _int(v: Any) -> Optional[int]:
    if isinstance(v, bool) or not isinstance(v, (int, float, str)):
        return None
    try:
        return int(str(v).strip() or "x") if isinstance(v, str) else int(v)
    except (TypeError, ValueError, OverflowError):
        return None


@dataclass(frozen=True)
class ClockInfo(FieldsJson):
    """The export's clock, by which a cluster aligns several files (:mod:`cluster.align`); not in ``report.json``."""

    utc_epoch_ns: Optional[int]     # TARGET_INFO_SESSION_START_TIME.utcEpochNs; None: absent or not positive
    normalized: bool                # EXPORT_PARAM_TIME_NORMALIZE == true: timestamps already UTC epoch ns
    shift_ns: int                   # EXPORT_CONFIG_TIME_SHIFT / EXPORT_PARAM_TIME_SHIFT (--ts-shift); 0 when absent
    start_ns: Optional[int]         # first / last activity timestamp, export timeline
    end_ns: Optional[int]
    #: the host whose clock it is (``TARGET_INFO_SYSTEM_ENV`` ``Hostname``); None (not written): not recorded
    host: Optional[str] = field(default=None, metadata=NONE_OMITTED)


def analyze_clock(model: TraceModel) -> ClockInfo:
    """The clock facts of ``model`` from the export metadata (SCHEMA.md §2.2)."""
    meta = model.info.meta
    norm = (meta.get("EXPORT_PARAM_TIME_NORMALIZE") or ["false"])[0].strip().lower() in ("true", "1", "yes")
    shifts = [_int(v[0]) for v in (meta.get("EXPORT_CONFIG_TIME_SHIFT"), meta.get("EXPORT_PARAM_TIME_SHIFT")) if v]
    shift = next((s for s in shifts if s is not None), 0)     # the first key with a number wins
    utc = _int(model.info.session.utc_epoch_ns)
    return ClockInfo(utc if utc is not None and utc > 0 else None, norm, shift, model.trace_start, model.trace_end,
                     model.info.session.host)


#: calls a process makes once, when it initializes CUDA: recorded before its first launch, they show its start
INIT_CALLS = frozenset({"cuInit", "cuModuleGetLoadingMode", "cuDevicePrimaryCtxRetain", "cuCtxCreate"})


def capture_bound(model: TraceModel) -> Optional[str]:
    """In words, what started the recording inside the session or may have bounded it, when the export shows it: a
    start delay (``START_DELAY_MS`` > 0, `nsys profile --delay`), a start trigger other than ``Immediate``
    (``START_TRIGGER``: a capture range), the program's ``cudaProfilerStart`` / ``cudaProfilerStop`` calls (``cu…``
    too: they bound it under ``--capture-range=cudaProfilerApi`` only); None: none."""
    meta, words = model.info.meta, []
    delay = _int((meta.get("capture:START_DELAY_MS") or ["0"])[0])
    if delay is not None and delay > 0:
        words.append(f"the recording started after a start delay of {delay:,} ms (`START_DELAY_MS`)")
    trigger = (meta.get("capture:START_TRIGGER") or ["Immediate"])[0].strip()
    if trigger and trigger != "Immediate":
        words.append(f"the recording started at the start trigger {code_name(trigger)} (`START_TRIGGER`)")
    api = model.api
    calls = {"cudaProfilerStart", "cudaProfilerStop", "cuProfilerStart", "cuProfilerStop"}
    if api is not None and len(api) and any(api.base_names[i] in calls for i in np.unique(api.name_idx).tolist()):
        words.append("the program calls `cudaProfilerStart` / `cudaProfilerStop`, which bound the recording under "
                     "`--capture-range=cudaProfilerApi`")
    return "; ".join(words) or None


def started_mid_run(full: TraceModel) -> np.ndarray:
    """Pids whose first launches in the capture may not be their first (the recording began while they ran): no
    CUDA initialization call (:data:`INIT_CALLS`) recorded before their first recorded launch call, and the capture
    says it began inside the session (:func:`capture_bound`: a start delay, a start trigger, profiler start/stop
    calls) or GPU work of theirs whose launch call was not recorded starts before that launch call (a capture
    attached to a running process, ``nsys start``)."""
    api, launched = full.api, [t for t in (full.kernels, full.memcpy, full.memset) if t is not None and len(t)]
    if api is None or len(api) == 0 or not launched or any(t.launch_idx.shape[0] != len(t) for t in launched):
        return np.empty(0, np.int64)
    li = np.concatenate([np.asarray(t.launch_idx, np.int64) for t in launched])
    pid = np.concatenate([np.asarray(t.pid, np.int64) for t in launched])
    start = np.concatenate([np.asarray(t.start, np.int64) for t in launched])
    pids = np.unique(api.pid)
    big = np.iinfo(np.int64).max
    first = np.full(pids.shape[0], big, np.int64)          # per pid: its first recorded launch call's start
    ok = li >= 0
    np.minimum.at(first, np.searchsorted(pids, api.pid[li[ok]]), api.start[li[ok]])
    init = np.array([b in INIT_CALLS for b in api.base_names] + [False], bool)[api.name_idx]
    first_init = np.full(pids.shape[0], big, np.int64)
    np.minimum.at(first_init, np.searchsorted(pids, api.pid[init]), api.start[init])
    lead = np.zeros(pids.shape[0], bool)                   # unlaunched GPU work before the first launch call
    at = np.searchsorted(pids, pid[~ok])
    known = at < pids.shape[0]
    known[known] = pids[at[known]] == pid[~ok][known]
    lead[at[known][start[~ok][known] < first[at[known]]]] = True
    mid = (first_init > first) & (lead | (capture_bound(full) is not None))
    return pids[mid]


def analyze_session(model: TraceModel) -> Optional[SessionSpan]:
    """The session of ``model`` (None when the export records no positive length)."""
    duration = _int(model.info.session.duration_ns)
    if duration is None or duration <= 0:
        return None
    clock = analyze_clock(model)
    utc = clock.utc_epoch_ns if clock.normalized else 0   # a normalised export counts from UTC epoch 0
    start = None if utc is None else clock.shift_ns + utc
    end = None if start is None else start + duration
    c0, c1 = trace_edge(min, *model.cuda_rows), trace_edge(max, *model.cuda_rows)
    placed = start is not None and end is not None and c0 is not None and c1 is not None and start <= c0 <= c1 <= end
    far_ns = max(FAR_SHARE * duration, FAR_NS)
    starts_far = placed and c0 is not None and start is not None and c0 - start > far_ns
    ends_far = placed and c1 is not None and end is not None and end - c1 > far_ns
    return SessionSpan(duration, start, end, c0, c1, bool(placed), bool(starts_far), bool(ends_far),
                       capture_bound(model))
