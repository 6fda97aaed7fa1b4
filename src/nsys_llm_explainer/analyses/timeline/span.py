"""The span of the timeline file: the first of the whole capture, the steady window, or the start of the steady
window that holds at most ``--timeline-events`` rows. Definitions: docs/MODEL.md, "Timeline file".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, List, Tuple

import numpy as np

from ...jsonable import FieldsJson
from ...model.trace import TraceModel
from ..trace.window import WindowResult


@dataclass(frozen=True)
class TimelineSpan(FieldsJson):
    """What ``timeline.pftrace`` holds: ``[start_ns, end_ns)`` (``kept`` says which span), the row
    counts of the capture, of the steady window and of the file, and ``left_out``: what the file lacks, in words
    ("" when it holds the whole capture)."""

    written: bool          # False: --timeline-events 0 (no file written)
    limit_rows: int        # --timeline-events
    kept: str              # capture | steady | steady_start | none
    start_ns: int
    end_ns: int
    capture_rows: int
    steady_rows: int
    kept_rows: int
    left_out: str


def row_starts(model: TraceModel) -> List[np.ndarray]:
    """The starts of every table of rows the timeline shows, each sorted by start (model/build.py)."""
    tables: Tuple[Any, ...] = (model.kernels, model.api, model.nvtx, model.memcpy, model.memset, model.graph_trace,
                               model.osrt, model.samples)
    return [t.start for t in tables if t is not None and len(t)]


def _rows_before(tables: List[np.ndarray], t: int) -> int:
    return sum(int(np.searchsorted(s, t, side="left")) for s in tables)


def plan_span(model: TraceModel, steady: TraceModel, window: WindowResult, limit: int) -> TimelineSpan:
    """The span of the timeline file under ``limit`` rows (module docstring)."""
    capture, inside = (sum(int(s.shape[0]) for s in row_starts(m)) for m in (model, steady))
    w0, w1 = int(window.start_ns), int(window.end_ns)
    if limit <= 0:
        return TimelineSpan(False, limit, "none", w0, w0, capture, inside, 0,
                            "no timeline file: --timeline-events 0")
    if capture <= limit:
        return TimelineSpan(True, limit, "capture", int(window.full_start_ns), int(window.full_end_ns), capture,
                            inside, capture, "")
    outside = (f"the {capture - inside:,} rows outside the steady window (warm-up and tail) are left out "
               f"(the capture has {capture:,} rows, over --timeline-events {limit:,})")
    if inside <= limit:
        return TimelineSpan(True, limit, "steady", w0, w1, capture, inside, inside, outside)
    tables = row_starts(steady)   # clipped to the window: every start is in [w0, w1)
    lo, hi = w0, w1               # invariant: rows before lo ≤ limit < rows before hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _rows_before(tables, mid) <= limit:
            lo = mid
        else:
            hi = mid
    kept = _rows_before(tables, lo)
    rest = f"; {outside.split(' (')[0]}" if capture > inside else ""
    return TimelineSpan(True, limit, "steady_start", w0, lo, capture, inside, kept,
                        f"only the first {lo - w0:,} ns of the {w1 - w0:,} ns steady window are kept ({kept:,} of its "
                        f"{inside:,} rows, --timeline-events {limit:,}){rest}")
