"""Section "Timeline file": what ``timeline.pftrace`` (the Perfetto trace beside the report) holds and what it leaves
out (report.json ``timeline_file``; docs/MODEL.md "Timeline file")."""

from __future__ import annotations

from ..document import Code, Section, para
from .ctx import View

_KEPT = {"capture": "the whole capture", "steady": "the steady window",
         "steady_start": "the start of the steady window"}


def sec_timeline_file(v: View) -> Section | None:
    span = v.sec("timeline_file").get("span") or {}
    if not span:
        return None
    if not span.get("written"):
        body = para("No ", Code("timeline.pftrace"), " was written (", Code("--timeline-events 0"), ").")
    else:
        kept = _KEPT.get(str(span.get("kept")), str(span.get("kept")))
        left = str(span.get("left_out") or "")
        body = para(Code("timeline.pftrace"), f" holds {kept} ({int(span.get('kept_rows') or 0):,} rows: kernels, "
                    "copies, CUDA API calls, NVTX ranges, OS-runtime calls, CPU samples) with the idle causes, steps, "
                    "findings and busy/bandwidth counters; open it in ui.perfetto.dev (drag the file in; it stays "
                    "local) or query it with trace_processor.",
                    (" Left out: " + left + ".") if left else "")
    return Section("timeline-file", "Timeline file", (body,), "Timeline file")
