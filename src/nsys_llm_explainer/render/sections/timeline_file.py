"""The report's line on the timeline file: what ``timeline.pftrace`` (the Perfetto trace beside the report) holds
and what it leaves out (report.json ``timeline_file``; docs/MODEL.md "Timeline file")."""

from __future__ import annotations

from ..document import Code, Inline, inline
from .ctx import View

_KEPT = {"capture": "the whole capture", "steady": "the steady window",
         "steady_start": "the start of the steady window"}


def timeline_note(v: View) -> Inline:
    """One sentence for the "Trace and capture" rows line: what ``timeline.pftrace`` holds and what it leaves out
    (``timeline_file.span``)."""
    span = v.r.timeline_file.span
    if not span.written:
        return inline(" No ", Code("timeline.pftrace"), " (", Code("--timeline-events 0"), ").")
    kept = _KEPT.get(span.kept, span.kept)
    return inline(" Timeline file ", Code("timeline.pftrace"), f" (open it in ui.perfetto.dev): {kept}, "
                  f"{span.kept_rows:,} rows", (f"; left out: {span.left_out}" if span.left_out else ""), ".")
