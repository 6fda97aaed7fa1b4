"""The report's line on ``timeline.pftrace``: what it holds and leaves out (docs/MODEL.md, "Timeline file")."""

from __future__ import annotations

from ..document import Code, Inline, inline
from .ctx import View

_KEPT = {"capture": "the whole capture", "steady": "the steady window",
         "steady_start": "the start of the steady window"}


def timeline_note(v: View) -> Inline:
    """One sentence for the "Trace and capture" rows line: what ``timeline.pftrace`` holds and what it leaves out
    (``timeline_file.span``)."""
    span, idle_out = v.r.timeline_file.span, v.r.timeline_file.idle_left_out
    if not span.written:
        return inline(" No ", Code("timeline.pftrace"), " (", Code("--timeline-events 0"), ").")
    kept = _KEPT.get(span.kept, span.kept)
    n = len(idle_out)
    idle = (f"; the idle-cause track{'s' if n > 1 else ''} of {n:,} device{'s' if n > 1 else ''} (their idle slices "
            f"would pass the file's {span.limit_rows:,})" if idle_out else "")
    left = "; left out: " + (span.left_out + idle if span.left_out else idle[2:]) if span.left_out or idle else ""
    return inline(" Timeline file ", Code("timeline.pftrace"), f" (open it in ui.perfetto.dev): {kept}, "
                  f"{span.kept_rows:,} rows", left, ".")
