"""Closing sections: trace & capture info (and ``timeline.pftrace``), the omitted sections, how numbers are computed."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, List, Sequence

from ...vocabulary.cause_kinds import KINDS
from ...vocabulary.units import fmt_bool, fmt_bytes, fmt_count, fmt_dur, fmt_int
from ...vocabulary.windows import window_name
from ..document import (
    Code,
    Data,
    Em,
    HtmlOnly,
    Inline,
    Omitted,
    Rich,
    Section,
    SectionResult,
    Strong,
    bullets,
    inline,
    joined,
    para,
    parts,
)
from ..escape import shorten
from .ctx import View

if TYPE_CHECKING:
    from ...analyses.trace.info import TraceInfoResult

ROW_COUNT_LABELS = (("kernels", "kernels"), ("cuda_api", "CUDA API calls"), ("nvtx_ranges", "NVTX ranges"),
                    ("memcpy", "memcpy"), ("memset", "memset"), ("sync", "sync records"),
                    ("graph_trace", "graph-trace rows"))
_KEPT = {"capture": "the whole capture"}   # steady / steady_start: the window's name (vocabulary.windows)


def _session(t: TraceInfoResult) -> Inline:
    """The session's recorded length (analyses/trace/session.py), when the export records it."""
    s = t.session
    if s is None or not s.duration_ns:
        return ()
    return inline(f"; session {fmt_dur(s.duration_ns)} as recorded (", Code("ANALYSIS_DETAILS.duration"), ")")


def timeline_note(v: View) -> Inline:
    """One sentence for the "Trace and capture" rows line: what ``timeline.pftrace`` holds and what it leaves out
    (``timeline_file.span``; docs/MODEL.md, "Timeline file")."""
    span, idle_out = v.r.timeline_file.span, v.r.timeline_file.idle_left_out
    if not span.written:
        return inline(" No ", Code("timeline.pftrace"), " (", Code("--timeline-events 0"), ").")
    w = v.r.window
    where = window_name(w.method, w.details.bins is not None, v.r.window_repeats)
    kept = {"steady": where, "steady_start": f"the start of {where}"}.get(span.kept) or _KEPT.get(span.kept, span.kept)
    n = len(idle_out)
    idle = (f"; the idle-cause track{'s' if n > 1 else ''} of {n:,} device{'s' if n > 1 else ''} (their idle slices "
            f"would pass the file's {span.limit_rows:,})" if idle_out else "")
    left = "; left out: " + (span.left_out + idle if span.left_out else idle[2:]) if span.left_out or idle else ""
    return inline(" Timeline file ", Code("timeline.pftrace"), f" (open it in ui.perfetto.dev): {kept}, "
                  f"{span.kept_rows:,} rows", left, ".")


def sec_trace(v: View) -> SectionResult:
    t = v.r.trace
    cap = t.capture
    items: List[Inline] = [inline(
        "File ", Code(t.path), "; Nsight Systems ", Data(t.nsys_version), ", export schema ",
        Data(t.export_schema_version),
        (", captured ", Data(cap.EXPORT_TIME_UTC), " UTC") if cap.EXPORT_TIME_UTC else None,
        "; traced span (first to last CUDA or NVTX activity) ", v.at(v.r.window.full_end_ns), _session(t), ".")]
    gpus = t.gpus
    if gpus:
        items.append(inline("GPUs: ", joined([inline(Data(g.id), ": ", Data(g.name),
                                                     f" ({fmt_int(g.smCount)} SMs, "
                                                     f"{fmt_bytes(g.totalMemory)})") for g in gpus[:16]], "; "),
                            "."))
    procs = t.processes
    if procs:
        more = f" (+{len(procs) - 8} more)" if len(procs) > 8 else ""
        items.append(inline("Processes: ", joined([inline(
            *(("pid ", Data(p.pid), " ", Code(p.name, 40)) if p.pid >= 0 else
              ("rows with no process id in the export",)),
            f" ({fmt_count(p.kernels, 'kernel')}, {fmt_int(p.cuda_api_calls)} CUDA API calls)")
            for p in procs[:8]], "; "), more, "."))
    others, minor = t.other_processes or (), t.minor_processes
    if others or minor:
        more = f"; and {len(others) - 8:,} more" if len(others) > 8 else ""
        few = ""
        if minor is not None:      # analyses/trace/info.MINOR_PCT
            n, kinds = minor.processes, [(k, w) for k, w in ((minor.cpu_samples, "CPU sample"),
                                                             (minor.os_runtime_calls, "OS-runtime call")) if k]
            few = (("; and " if others else "") + f"{n:,} {'more ' if others else ''}process{'es' if n != 1 else ''} "
                   f"with {' and '.join(fmt_count(k, w) for k, w in kinds)}{' in all, each' if n != 1 else ','} "
                   f"under 1 % of the capture's {' and of its '.join(w + 's' for _, w in kinds)}")
        items.append(inline("Other processes with recorded activity (no CUDA calls): ", joined([inline(
            "pid ", Data(p.pid), (" ", Code(p.name, 40)) if p.name else None, " (", ", ".join(
                fmt_count(n, what) for n, what in ((p.nvtx_ranges, "NVTX range"), (p.cpu_samples, "CPU sample"),
                                                   (p.os_runtime_calls, "OS-runtime call")) if n), ")")
            for p in others[:8]], "; "), more, few, "."))
    rc = t.row_counts
    if rc:
        items.append(inline("Rows: " + ", ".join(f"{fmt_int(rc[k])} {label}" for k, label in ROW_COUNT_LABELS
                                                 if k in rc) + ".", timeline_note(v)))
    mode = t.cuda_graph_trace_mode
    settings: List[Inline] = [inline(Code(k), "=", Code(x)) for k, x in cap.items() if k != "EXPORT_TIME_UTC"]
    if mode:
        settings.append(inline("CUDA graph trace ", Code(mode)))
    if settings:
        items.append(inline("Capture settings: ", joined(settings, ", "), "."))
    items += [(Rich(n, lead=True),) for n in t.schema_notes if n]
    return Section("trace", "Trace and capture", parts(bullets(items)), "Trace")


def omitted_section(omitted: Sequence[Omitted]) -> Section:
    text = joined([inline(f"{o.title} (", Rich(shorten(o.reason, 160), lead=True), ")") for o in omitted], "; ")
    return Section("omitted", "", (para(Strong(("Not shown (no data):",)), " ", text, ".", cls="meta"),), tag="div")


def how_computed(v: View) -> Section:
    prec = joined([(Code(k),) for k in KINDS], " → ")
    memcpy = v.r.gpu_time.include_memcpy
    items: List[Any] = [
        (Strong(("Time base:",)), " timestamps are ms from trace start (the first traced CUDA or NVTX activity, "
         "not the session's start); durations are in µs, ms or s. ", Code("report.json"), " and ",
         Code("tables/*.csv"), " keep absolute integer ns."),
        (Strong(("Analysis window:",)), " the whole capture, or the steady state left after trimming warm-up and "
         "idle tail (", Code("window"), " in report.json); every rate, share and finding uses it unless labelled ",
         Em(("whole capture",)), "."),
        (Strong(("Busy / idle:",)), " busy = union of kernel intervals on a device inside the window (overlapping "
         f"kernels count once; memcpy/memset counted as busy: {fmt_bool(memcpy)}); idle = window − busy, including "
         "before the first and after the last kernel."),
        (Strong(("Idle causes:",)), " each idle ns goes to the first cause that holds", (" (", prec, ")") if prec
         else None, ", judged from the host thread that launched the work after the gap."),
        (Strong(("Findings:",)), " emitted only when every check on their ", Em(("Checked",)), " line holds; time at "
         "stake is the GPU time the finding is about."),
        (Strong(("Kernel tables:",)), " per kernel name; % = share of summed kernel time, not of wall time; p50/p90 = "
         "percentiles of single-kernel durations."),
        (Strong(("Names",)), " longer than 80 characters are shortened with ", Code("…"), " here; full names are in "
         "report.json and the CSV files."),
    ]
    return Section("method", "How these numbers are computed", parts(
        para("Full definitions: ", Code("docs/MODEL.md"), " (window, busy/idle, idle causes, checks) and ",
             Code("docs/METRICS.md"), " (every other metric)."),
        bullets(items),
        HtmlOnly((para("Every number on this page is read from report.json (written in the same run) and only "
                       "formatted here. Charts are drawn in the page by plotly.js, which is embedded in this file; the "
                       "page loads nothing from the network (its Content-Security-Policy forbids it). report.md holds "
                       "the same sections as text, without the charts.", cls="meta"),))), "Method")
