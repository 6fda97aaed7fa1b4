"""The report's line on the timeline file: what ``timeline.pftrace`` (the Perfetto trace beside the report) holds
and what it leaves out (report.json ``timeline_file``; docs/MODEL.md "Timeline file")."""

from __future__ import annotations

from ..document import Code, Inline, inline
from .ctx import View

_KEPT = {"capture": "the whole capture", "steady": "the steady window",
         "steady_start": "the start of the steady window"}


def timeline_note(v: View) -> Inline:
    """One sentence for the "Trace and capture" rows line: what ``timeline.pftrace`` holds and what it leaves out
    (nothing when the report has no ``timeline_file``)."""
    span = v.sec("timeline_file").get("span") or {}
    if not span:
        return ()
    if not span.get("written"):
        return inline(" No ", Code("timeline.pftrace"), " (", Code("--timeline-events 0"), ").")
    kept = _KEPT.get(str(span.get("kept")), str(span.get("kept")))
    left = str(span.get("left_out") or "")
    return inline(" Timeline file ", Code("timeline.pftrace"), f" (open it in ui.perfetto.dev): {kept}, "
                  f"{int(span.get('kept_rows') or 0):,} rows", (f"; left out: {left}" if left else ""), ".")
