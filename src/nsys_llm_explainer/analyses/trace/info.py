"""Trace & capture facts: versions, GPUs, processes with CUDA activity, time span, graph trace mode.

``path`` is the trace as the user named it (``display_path`` when given: the report file a SQLite export
was made from, or the demo's copy); ``span_ns`` = ``end_ns − start_ns`` of all captured activity;
``processes`` lists the PIDs with kernels or CUDA API calls (their counts); ``other_processes`` those with NVTX
ranges, CPU samples or OS-runtime calls but no CUDA call (their counts, most first) save the minor ones, which
``minor_processes`` counts (:data:`MINOR_PCT`); ``schema_notes`` the schema
quirks the reader handled; ``session`` the session as the export records it (:mod:`.session`); ``capture`` the
capture and export settings the export's metadata records (:class:`CaptureSettings`); ``row_counts`` the rows of
each activity table the model holds (:class:`model.info.RowCounts`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Tuple

import numpy as np

from ...jsonable import NONE_OMITTED, FieldsJson
from ...model.info import GpuInfo, RowCounts
from ...model.trace import TraceModel
from .session import SessionSpan, analyze_session


@dataclass(frozen=True)
class ProcessRow(FieldsJson):
    """A process with CUDA activity: its name (``PROCESSES``; "" unknown), kernels and CUDA API calls."""

    pid: int
    name: str
    kernels: int
    cuda_api_calls: int


@dataclass(frozen=True)
class OtherProcessRow(FieldsJson):
    """A process the trace records activity of but no CUDA call (no kernel, no CUDA API call): its name
    (``PROCESSES``; "" unknown), NVTX ranges, CPU samples and OS-runtime calls over the whole capture."""

    pid: int
    name: str
    nvtx_ranges: int
    cpu_samples: int
    os_runtime_calls: int

    @property
    def activity(self) -> int:
        """Its recorded activity: NVTX ranges + CPU samples + OS-runtime calls (the order of the list)."""
        return self.nvtx_ranges + self.cpu_samples + self.os_runtime_calls


#: a process without CUDA calls is minor (counted, not listed) when it has no NVTX range and under this % of the
#: capture's CPU samples and under this % of its OS-runtime calls: a shell, ``readlink`` or compiler the workload
#: started for a moment (6-8 samples of 3,700 on traces 01-03), not a tokenizer, a Ray driver or a monitor
MINOR_PCT = 1.0


def _other_processes(model: TraceModel, cuda: Dict[int, Dict[str, int]]
                     ) -> Tuple[Optional[Tuple[OtherProcessRow, ...]], Optional[MinorProcesses]]:
    """The processes outside ``cuda`` (the pids with kernels or CUDA API calls) with NVTX ranges, CPU samples or
    OS-runtime calls, most recorded activity first (then by pid), None when there is none; and the minor ones left
    out of that list (:data:`MINOR_PCT` of the whole capture's rows of each kind, every process's), None when none
    is."""
    counts: Dict[int, Dict[str, int]] = {}
    for table, what in ((model.nvtx, "nvtx_ranges"), (model.osrt, "os_runtime_calls")):
        if table is not None and len(table):
            u, c = np.unique(table.pid, return_counts=True)
            for p, n in zip(u.tolist(), c.tolist()):
                counts.setdefault(p, {})[what] = n
    for p, n in model.info.samples_by_pid.items():
        counts.setdefault(p, {})["cpu_samples"] = n
    names = model.info.process_names
    rows = [OtherProcessRow(p, names.get(p, ""), c.get("nvtx_ranges", 0), c.get("cpu_samples", 0),
                            c.get("os_runtime_calls", 0)) for p, c in counts.items() if p >= 0 and p not in cuda]
    total = {what: sum(c.get(what, 0) for c in counts.values()) for what in ("cpu_samples", "os_runtime_calls")}
    kept = [r for r in rows if r.nvtx_ranges or any(
        100.0 * getattr(r, what) >= MINOR_PCT * n > 0 for what, n in total.items())]
    kept.sort(key=lambda r: (-r.activity, r.pid))
    minor = [r for r in rows if r not in kept]
    return tuple(kept) or None, MinorProcesses(len(minor), sum(r.cpu_samples for r in minor),
                                               sum(r.os_runtime_calls for r in minor)) if minor else None


@dataclass(frozen=True)
class MinorProcesses(FieldsJson):
    """The minor processes without CUDA calls (:data:`MINOR_PCT`), counted, not listed: how many, and their CPU
    samples and OS-runtime calls summed."""

    processes: int
    cpu_samples: int
    os_runtime_calls: int


def _recorded() -> Any:
    """A setting ``report.json`` leaves out when the export does not record it (None)."""
    return field(default=None, metadata=NONE_OMITTED)


#: metadata keys (``EXPORT_META_DATA`` / ``META_DATA_EXPORT`` names, ``capture:`` for ``META_DATA_CAPTURE``); each
#: one's field is its name
CAPTURE_META_KEYS = ("capture:CUDA_TRACE_SCOPE", "capture:CUDA_SKIP_SOME_API_CALLS", "EXPORT_PARAM_TIME_NORMALIZE",
                     "EXPORT_CONFIG_TIME_SHIFT", "EXPORT_PARAM_LAZY", "EXPORT_LAZY", "EXPORT_TIME_UTC")


@dataclass(frozen=True)
class CaptureSettings(FieldsJson):
    """Capture and export settings as the export's metadata records them (the first value of the key,
    :data:`CAPTURE_META_KEYS`); a setting not recorded (or empty) is None and has no key in ``report.json``."""

    CUDA_TRACE_SCOPE: Optional[str] = _recorded()
    CUDA_SKIP_SOME_API_CALLS: Optional[str] = _recorded()
    EXPORT_PARAM_TIME_NORMALIZE: Optional[str] = _recorded()
    EXPORT_CONFIG_TIME_SHIFT: Optional[str] = _recorded()
    EXPORT_PARAM_LAZY: Optional[str] = _recorded()
    EXPORT_LAZY: Optional[str] = _recorded()
    EXPORT_TIME_UTC: Optional[str] = _recorded()

    def items(self) -> Tuple[Tuple[str, str], ...]:
        """(name, value) of each recorded setting, in ``report.json`` order."""
        pairs = ((f.name, getattr(self, f.name)) for f in dataclasses.fields(self))
        return tuple((k, v) for k, v in pairs if v is not None)


@dataclass(frozen=True)
class TraceInfoResult(FieldsJson):
    path: str
    nsys_version: Optional[str]
    export_schema_version: Optional[str]
    metadata_table: Optional[str]
    kernel_table: Optional[str]
    start_ns: Optional[int]
    end_ns: Optional[int]
    span_ns: int
    gpus: Tuple[GpuInfo, ...] = ()
    processes: Tuple[ProcessRow, ...] = ()
    row_counts: RowCounts = RowCounts()
    cuda_graph_trace_mode: Optional[str] = None
    capture: CaptureSettings = CaptureSettings()
    schema_notes: Tuple[str, ...] = ()
    session: Optional[SessionSpan] = None   # the session's recorded length, the CUDA activity's place in it
    #: the processes with NVTX ranges, CPU samples or OS-runtime calls but no CUDA call, most activity first
    #: (:class:`OtherProcessRow`); None (no key in report.json) when there is none
    other_processes: Optional[Tuple[OtherProcessRow, ...]] = field(default=None, metadata=NONE_OMITTED)
    #: the minor processes without CUDA calls left out of ``other_processes`` (:data:`MINOR_PCT`); None (no key in
    #: report.json) when there is none
    minor_processes: Optional[MinorProcesses] = field(default=None, metadata=NONE_OMITTED)


def analyze_trace_info(model: TraceModel, display_path: Optional[str] = None) -> TraceInfoResult:
    """Facts of ``model``; ``display_path`` (optional) replaces the path the model was read from."""
    info = model.info
    t0, t1 = model.trace_start, model.trace_end
    names = info.process_names
    active: Dict[int, Dict[str, int]] = {}
    for rows, what in ((model.kernels, "kernels"), (model.api, "cuda_api_calls")):
        if rows is not None and len(rows):
            u, c = np.unique(rows.pid, return_counts=True)
            for p, n in zip(u.tolist(), c.tolist()):
                active.setdefault(p, {})[what] = n
    processes = tuple(ProcessRow(p, names.get(p, ""), active[p].get("kernels", 0), active[p].get("cuda_api_calls", 0))
                      for p in sorted(active))
    recorded = {key.split(":")[-1]: info.meta[key][0] for key in CAPTURE_META_KEYS if info.meta.get(key)}
    others, minor = _other_processes(model, active)
    return TraceInfoResult(
        path=display_path if display_path is not None else info.path, nsys_version=info.product_version,
        export_schema_version=info.schema_version, metadata_table=info.meta_table, kernel_table=info.kernel_table,
        start_ns=t0, end_ns=t1, span_ns=(t1 - t0) if t0 is not None and t1 is not None else 0,
        gpus=info.gpus, processes=processes,
        row_counts=info.row_counts, cuda_graph_trace_mode=info.graph_trace_mode, capture=CaptureSettings(**recorded),
        schema_notes=tuple(model.notes), session=analyze_session(model),
        other_processes=others, minor_processes=minor)
