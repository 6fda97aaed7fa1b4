"""Title, headline (verdict, steady busy %, window, top cause, first action) and capture warnings."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, List

from ...serialize import SCHEMA_VERSION
from ...vocabulary.units import fmt_dur, fmt_pct
from ...vocabulary.windows import window_name
from ..document import (
    BR,
    Code,
    Data,
    Heading,
    HtmlOnly,
    Inline,
    Note,
    Paragraph,
    Rich,
    Section,
    SectionResult,
    Spans,
    Strong,
    Value,
    inline,
    joined,
    para,
)
from .ctx import View
from .findings import quoted_part

if TYPE_CHECKING:
    from ...analyses.idle.gpu_time import DeviceTime

WINDOW_METHOD = {      # how the window was set, after its name (vocabulary.windows.window_name)
    "full": " (the whole trace)",
    "auto": " (auto-detected)",
}


def window_line(v: View) -> Inline:
    """The analysis window stated once: its name (:func:`window_name`, as findings, compare and the timeline name
    it), how it was set, start → end from trace start, length, why."""
    w = v.r.window
    name = window_name(w.method, w.details.bins is not None, v.r.window_repeats)
    method: Spans = (name + WINDOW_METHOD[w.method] if name == "the steady window" and w.method in WINDOW_METHOD
                      else name + ", no repeated steps found in it (not shown to be a steady state)"
                      if name == "the auto-detected window" else name)
    if w.method in ("override", "nvtx"):
        method = ("the window set by ", Code("--window" if w.method == "override" else "--window-nvtx"))
    where = f"{v.span(w.start_ns, w.end_ns)} from trace start ({fmt_dur(w.window_ns)}"
    if w.start_ns != w.full_start_ns or w.end_ns != w.full_end_ns:
        where += f" of the {v.at(w.full_end_ns)} traced span"
    reason = (" ", Rich(w.reason, lead=True)) if w.reason else None
    return inline(Strong(("Window:",)), " ", method, f", {where}).", reason)


def _device_busy(d: DeviceTime) -> Inline:
    """One device in the headline: its busy %, or its role when it is not counted (no kernel, or a few kernels)."""
    if not d.counted:
        return inline(f"device {d.device_id} ", Data(d.role), ", not counted")
    return inline(f"device {d.device_id} ", Value(fmt_pct(d.busy_pct), f"devices.{d.device_id}.busy_pct", d.busy_pct),
                  " %")


def session_line(v: View) -> Inline:
    """The session as the export records it, stated once, when the CUDA activity starts or ends far from its
    edges (analyses/trace/session.py); empty otherwise."""
    s = v.r.trace.session
    if s is None or not s.placed or not (s.starts_far or s.ends_far):
        return ()
    t0, t1, c0, c1 = s.start_ns, s.end_ns, s.cuda_start_ns, s.cuda_end_ns
    if t0 is None or t1 is None or c0 is None or c1 is None:
        return ()
    rest = ("no CUDA activity." if s.bounded_by is None else
            f"no CUDA activity recorded — {s.bounded_by} — so the program may have run CUDA work then.")
    return inline(Strong(("Session:",)), f" {fmt_dur(s.duration_ns)} long as the export records it; its CUDA "
                  f"activity ({fmt_dur(c1 - c0)}) starts {fmt_dur(c0 - t0)} after the session's start and ends "
                  f"{fmt_dur(t1 - c1)} before its end: the rest of the session has {rest}")


def _busy(v: View, busy: float) -> Inline:
    devs = v.r.gpu_time.devices
    per: List[Any] = []
    if len(devs) > 1:
        shown = joined([_device_busy(d) for d in devs[:8]], ", ")
        per = [" (", shown, ", …" if len(devs) > 8 else "", ")."]
    skipped = [d for d in devs if not d.counted]   # a device of a few stray kernels ran some: no "ran kernels"
    over = ("" if not skipped else " over the devices with a workload" if any(d.kernel_count for d in skipped)
            else " over the devices that ran kernels")
    return inline(Strong(("GPU busy ", Value(fmt_pct(busy), "headline.steady_busy_pct", busy), " %")),
                  " of the analysis window", over, per or ".")


def _no_busy(v: View) -> Inline:
    """The headline line when no device ran a kernel in the window (devices listed: copies only)."""
    devs = v.r.gpu_time.devices
    if not devs:
        return ()
    return inline(Strong(("GPU busy:",)), " no device ran a kernel in the analysis window (",
                  joined([inline(f"device {d.device_id} ", Data(d.role)) for d in devs[:8]], ", "),
                  ", …" if len(devs) > 8 else "", "), so no busy % is stated.")


def _cause(v: View) -> Inline:
    """The top finding's cause and one quantity: its time at stake, with that time's share of the GPU idle time
    (``headline.top_idle_pct``) — the same ns the finding claims; what it covers and the verdict's part of it when
    the verdict quotes another time (``headline.quoted``); the detail the verdict names (its largest in the loop for a
    loop finding named after start-up work, ``headline.top_loop_detail``)."""
    h = v.r.headline
    stake = fmt_dur(h.time_at_stake_ns) if h.time_at_stake_ns else ""
    if h.top_cause_kind or h.top_cause:
        named = (" (largest in the loop ", Code(h.top_loop_detail), ")") if h.top_loop_detail else \
            (" (largest ", Code(h.top_cause_detail), ")") if h.top_cause_detail else None   # as the verdict names it
        what = (Code(h.top_cause_kind), named) if h.top_cause_kind else (Code(h.top_cause or ""),)
        share = f", {fmt_pct(h.top_idle_pct)} % of the GPU idle time" if stake and h.top_idle_pct is not None else ""
        told = (f" — {stake} at stake", quoted_part(h.quoted, "verdict"), share) if stake else ""
        return inline(Strong(("Top cause:",)), " ", *what, told, ".")
    if stake:
        return inline(Strong(("At stake:",)), f" {stake} (finding ", Code(h.top_finding_id), ").")
    return ()


def terminal_summary(v: View) -> List[Paragraph]:
    """The command line's summary of a written report (stdout): the verdict, the steady busy share of the
    analysis window and the first thing to do."""
    h, w = v.r.headline, v.r.window
    out: List[Paragraph] = []
    if h.verdict:
        out.append(Paragraph(("verdict: ", Rich(h.verdict))))
    if h.steady_busy_pct is not None:
        out.append(Paragraph((f"GPU busy {fmt_pct(h.steady_busy_pct)}% of the {w.method} window "
                              f"({fmt_dur(w.window_ns)})",)))
    if h.action:
        out.append(Paragraph(("first thing to do: ", Rich(h.action))))
    return out


def trace_name(v: View) -> str:
    return v.r.trace.path.replace("\\", "/").rsplit("/", 1)[-1] or "trace"


def sec_title(v: View) -> SectionResult:
    trace, h = v.r.trace, v.r.headline
    out: List[Any] = [Heading(1, ("Nsight Systems LLM report: ", Code(trace_name(v))))]
    if h.verdict:
        out.append(Paragraph((Strong(("Verdict: ", Rich(h.verdict, lead=True))),), "verdict", BR))
    busy = _busy(v, h.steady_busy_pct) if h.steady_busy_pct is not None else _no_busy(v)
    out += [Paragraph(line, brk=BR) for line in (busy, window_line(v), session_line(v), _cause(v)) if line]
    if h.action:
        out.append(para(Strong(("Do first:",)), " ", Rich(h.action, lead=True), cls="action"))
    meta: List[Any] = [f"nsys-llm-explainer {v.r.tool_version}", f"report.json schema {SCHEMA_VERSION}"]
    if trace.nsys_version:
        meta.append(("Nsight Systems ", Data(trace.nsys_version)))
    if trace.path:
        meta.append(("trace ", Code(trace.path)))
    out.append(HtmlOnly((para(joined([inline(m) for m in meta], " · "), cls="meta"),)))
    return Section("headline", "", tuple(out), "Headline", "header")


def sec_warnings(v: View) -> SectionResult:
    warnings = [w for w in v.r.warnings if w]
    if not warnings:
        return None
    return Section("warnings", "", tuple(Note((Strong(("Warning:",)), " ", Rich(w, lead=True)), BR)
                                         for w in warnings), tag="div")
