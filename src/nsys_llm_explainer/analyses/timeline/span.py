"""The span of the timeline file: the first of the whole capture, the steady window, or the start of the steady
window that holds at most ``--timeline-events`` rows. Definitions: docs/MODEL.md, "Timeline file".
"""

from __future__ import annotations

from dataclasses import dataclass, replace
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
    if inside <= limit:
        return TimelineSpan(True, limit, "steady", w0, w1, capture, inside, inside,
                            _left_out("steady", window, w1, capture, inside, inside, limit, STEADY))
    tables = row_starts(steady)   # clipped to the window: every start is in [w0, w1)
    lo, hi = w0, w1               # invariant: rows before lo ≤ limit < rows before hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _rows_before(tables, mid) <= limit:
            lo = mid
        else:
            hi = mid
    kept = _rows_before(tables, lo)
    return TimelineSpan(True, limit, "steady_start", w0, lo, capture, inside, kept,
                        _left_out("steady_start", window, lo, capture, inside, kept, limit, STEADY))


#: the window's name :func:`plan_span` words its ``left_out`` with, before the report knows whether the window holds
#: repeated steps; :func:`named_span` rewords it with the window's name (vocabulary.windows.window_name)
STEADY = "the steady window"


def _left_out(kept: str, window: WindowResult, end: int, capture: int, inside: int, kept_rows: int, limit: int,
              where: str) -> str:
    """What a span that keeps ``kept`` (``steady`` / ``steady_start``, up to ``end``) leaves out, the window named
    ``where``; the rows outside are "(what the window rule trimmed)" where it trimmed them (an ``auto`` window: warm-up,
    a lead-in, one-time work, a tail, other capture ranges, as its reason says), nothing more where a user chose it."""
    w0, w1 = int(window.start_ns), int(window.end_ns)
    outside = f"the {capture - inside:,} rows outside {where}"
    if kept == "steady":
        trimmed = " (what the window rule trimmed)" if window.method == "auto" else ""
        return (f"{outside}{trimmed} are left out (the capture has {capture:,} rows, over --timeline-events "
                f"{limit:,})")
    rest = f"; {outside}" if capture > inside else ""
    return (f"only the first {end - w0:,} ns of the {w1 - w0:,} ns {where.split(' ', 1)[1]} are kept ({kept_rows:,} "
            f"of its {inside:,} rows, --timeline-events {limit:,}){rest}")


def named_span(span: TimelineSpan, window: WindowResult, where: str) -> TimelineSpan:
    """``span`` with its ``left_out`` naming the window ``where`` (the report's window name, known once the steps
    are: "the auto-detected window" when it holds no repeated steps)."""
    if where == STEADY or span.kept not in ("steady", "steady_start"):
        return span
    return replace(span, left_out=_left_out(span.kept, window, int(span.end_ns), span.capture_rows, span.steady_rows,
                                            span.kept_rows, span.limit_rows, where))
