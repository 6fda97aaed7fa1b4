"""Trace & capture facts: versions, GPUs, processes with CUDA activity, time span, graph trace mode.

``path`` is the trace as the user named it (``display_path`` when given: the report file a SQLite export
was made from, or the demo's copy); ``span_ns`` = ``end_ns − start_ns`` of all captured activity;
``processes`` lists the PIDs with kernels or CUDA API calls (their counts); ``schema_notes`` the schema
quirks the reader handled; ``session`` the session as the export records it (:mod:`.session`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Tuple

import numpy as np

from ...jsonable import FieldsJson
from ...model.trace import TraceModel, sql_int
from .session import SessionSpan, analyze_session


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
    gpus: Tuple[Dict[str, Any], ...] = ()
    processes: Tuple[Dict[str, Any], ...] = ()
    row_counts: Dict[str, int] = field(default_factory=dict)
    cuda_graph_trace_mode: Optional[str] = None
    capture: Dict[str, object] = field(default_factory=dict)
    schema_notes: Tuple[str, ...] = ()
    session: Optional[SessionSpan] = None   # the session's recorded length, the CUDA activity's place in it


def _json_safe(v: object) -> object:
    if isinstance(v, (int, float, str)) or v is None:
        return v
    return str(v)


def analyze_trace_info(model: TraceModel, display_path: Optional[str] = None) -> TraceInfoResult:
    """Facts of ``model``; ``display_path`` (optional) replaces the path the model was read from."""
    info = model.info
    t0, t1 = model.trace_start, model.trace_end
    names = {}
    for p in info.processes:
        try:
            names[sql_int(p["pid"])] = str(p.get("name") or "")
        except (KeyError, TypeError, ValueError):
            continue
    active: Dict[int, Dict[str, int]] = {}
    if model.kernels is not None and len(model.kernels):
        u, c = np.unique(model.kernels.pid, return_counts=True)
        for p, n in zip(u.tolist(), c.tolist()):
            active.setdefault(p, {})["kernels"] = n
    if model.api is not None and len(model.api):
        u, c = np.unique(model.api.pid, return_counts=True)
        for p, n in zip(u.tolist(), c.tolist()):
            active.setdefault(p, {})["cuda_api_calls"] = n
    processes = tuple({"pid": p, "name": names.get(p, ""), "kernels": active[p].get("kernels", 0),
                       "cuda_api_calls": active[p].get("cuda_api_calls", 0)} for p in sorted(active))
    capture: Dict[str, object] = {}
    for key in ("capture:CUDA_TRACE_SCOPE", "capture:CUDA_SKIP_SOME_API_CALLS", "EXPORT_PARAM_TIME_NORMALIZE",
                "EXPORT_CONFIG_TIME_SHIFT", "EXPORT_PARAM_LAZY", "EXPORT_LAZY", "EXPORT_TIME_UTC"):
        v = info.meta.get(key)
        if v:
            capture[key.replace("capture:", "")] = v[0]
    return TraceInfoResult(
        path=display_path if display_path is not None else info.path, nsys_version=info.product_version,
        export_schema_version=info.schema_version, metadata_table=info.meta_table, kernel_table=info.kernel_table,
        start_ns=t0, end_ns=t1, span_ns=(t1 - t0) if t0 is not None and t1 is not None else 0,
        gpus=tuple({k: _json_safe(v) for k, v in g.items()} for g in info.gpus), processes=processes,
        row_counts=dict(info.row_counts), cuda_graph_trace_mode=info.graph_trace_mode, capture=capture,
        schema_notes=tuple(model.notes), session=analyze_session(model))
