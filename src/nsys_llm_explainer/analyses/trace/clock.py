"""The clock facts that place one export's timestamps on UTC (docs/CLUSTER.md "Clock alignment"): the session
start ``TARGET_INFO_SESSION_START_TIME.utcEpochNs`` (None when absent or not positive), whether the export was
normalised to UTC (``EXPORT_PARAM_TIME_NORMALIZE``), its time shift (``EXPORT_CONFIG_TIME_SHIFT`` /
``EXPORT_PARAM_TIME_SHIFT``, ns; 0 when absent) and the activity span (first / last timestamp of the export
timeline). A cluster aligns several files with them (:mod:`cluster.align`); not in ``report.json``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from ...jsonable import FieldsJson
from ...model.trace import TraceModel
from .session import export_clock


@dataclass(frozen=True)
class ClockInfo(FieldsJson):
    utc_epoch_ns: Optional[int]     # TARGET_INFO_SESSION_START_TIME.utcEpochNs
    normalized: bool                # EXPORT_PARAM_TIME_NORMALIZE == true: timestamps already UTC epoch ns
    shift_ns: int                   # EXPORT_CONFIG_TIME_SHIFT / EXPORT_PARAM_TIME_SHIFT
    start_ns: Optional[int]         # first / last activity timestamp, export timeline
    end_ns: Optional[int]


def analyze_clock(model: TraceModel) -> ClockInfo:
    """The clock facts of ``model`` (module docstring)."""
    raw: Any = model.info.session.utc_epoch_ns
    try:
        utc = int(raw) if raw is not None and int(raw) > 0 else None
    except (TypeError, ValueError):
        utc = None
    norm, shift = export_clock(model.info.meta)
    return ClockInfo(utc, norm, shift, model.trace_start, model.trace_end)
