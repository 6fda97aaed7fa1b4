"""Title, headline (verdict, steady busy %, window, top cause, first action) and capture warnings."""

from __future__ import annotations

from typing import Any, List

from ...vocabulary.units import fmt_dur, fmt_pct, num
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
    Strong,
    Value,
    inline,
    joined,
    para,
)
from .ctx import View

WINDOW_METHOD = {
    "full": ("whole trace",),
    "auto": ("steady state (auto-detected)",),
    "override": ("set by ", Code("--window")),
    "nvtx": ("set by ", Code("--window-nvtx")),
}


def window_line(v: View) -> Inline:
    """The analysis window stated once: method, start → end from trace start, length, why."""
    w = v.window
    method = WINDOW_METHOD.get(str(w.get("method")), (Data(w.get("method")),))
    where = f"{v.span(w.get('start_ns'), w.get('end_ns'))} from trace start ({fmt_dur(w.get('window_ns'))}"
    if w.get("start_ns") != w.get("full_start_ns") or w.get("end_ns") != w.get("full_end_ns"):
        where += f" of the {v.at(w.get('full_end_ns'))} traced span"
    reason = (" ", Rich(w.get("reason"), lead=True)) if w.get("reason") else None
    return inline(Strong(("Window:",)), " ", method, f", {where}).", reason)


def _device_busy(d: Any) -> Inline:
    """One device in the headline: its busy %, or its role when it ran no kernel (not counted)."""
    if d.get("role") not in (None, "kernels"):
        return inline(f"device {d.get('device_id')} ", Data(d.get("role")), ", not counted")
    did = d.get("device_id")
    return inline(f"device {did} ", Value(fmt_pct(d.get("busy_pct")), f"devices.{did}.busy_pct", d.get("busy_pct")),
                  " %")


def session_line(v: View) -> Inline:
    """The session as the export records it, stated once, when the CUDA activity starts or ends far from its
    edges (analyses/trace/session.py); empty otherwise."""
    s = v.sec("trace").get("session")
    if not isinstance(s, dict) or not s.get("placed") or not (s.get("starts_far") or s.get("ends_far")):
        return ()
    t0, t1 = num(s.get("start_ns")), num(s.get("end_ns"))
    c0, c1 = num(s.get("cuda_start_ns")), num(s.get("cuda_end_ns"))
    if t0 is None or t1 is None or c0 is None or c1 is None:
        return ()
    return inline(Strong(("Session:",)), f" {fmt_dur(s.get('duration_ns'))} long as the export records it; its CUDA "
                  f"activity ({fmt_dur(c1 - c0)}) starts {fmt_dur(c0 - t0)} after the session's start and ends "
                  f"{fmt_dur(t1 - c1)} before its end: the rest of the session has no CUDA activity.")


def _busy(v: View, busy: float) -> Inline:
    h = v.sec("headline")
    devs = v.rows("devices")
    per: List[Any] = []
    if len(devs) > 1:
        shown = joined([_device_busy(d) for d in devs[:8]], ", ")
        per = [" (", shown, ", …" if len(devs) > 8 else "", ")."]
    over = (" over the devices that ran kernels" if any(d.get("role") not in (None, "kernels") for d in devs)
            else "")
    return inline(Strong(("GPU busy ", Value(fmt_pct(busy), "headline.steady_busy_pct", h.get("steady_busy_pct")),
                          " %")), " of the analysis window", over, per or ".")


def _no_busy(v: View) -> Inline:
    """The headline line when no device ran a kernel in the window (devices listed: copies only)."""
    devs = v.rows("devices")
    if not devs:
        return ()
    return inline(Strong(("GPU busy:",)), " no device ran a kernel in the analysis window (",
                  joined([inline(f"device {d.get('device_id')} ", Data(d.get("role"))) for d in devs[:8]], ", "),
                  ", …" if len(devs) > 8 else "", "), so no busy % is stated.")


def _cause(v: View) -> Inline:
    h = v.sec("headline")
    stake = fmt_dur(h.get("time_at_stake_ns")) if num(h.get("time_at_stake_ns")) else ""
    at_stake = f", {stake} at stake" if stake else ""
    if h.get("top_cause_kind"):
        share = f" ({fmt_pct(h['top_share_pct'])} % of the window)" if num(h.get("top_share_pct")) else ""
        largest = (", largest ", Code(h["top_cause_detail"])) if h.get("top_cause_detail") else None
        return inline(Strong(("Top cause:",)), " ", Code(h["top_cause_kind"]), share, largest, at_stake, ".")
    if h.get("top_cause"):
        return inline(Strong(("Top cause:",)), " ", Code(h["top_cause"]), at_stake, ".")
    if stake:
        return inline(Strong(("At stake:",)), f" {stake} (finding ", Code(h.get("top_finding_id")), ").")
    return ()


def terminal_summary(v: View) -> List[Paragraph]:
    """The command line's summary of a written report (stdout): the verdict, the steady busy share of the
    analysis window and the first thing to do."""
    h, w = v.sec("headline"), v.sec("window")
    out: List[Paragraph] = []
    if h.get("verdict"):
        out.append(Paragraph(("verdict: ", Rich(h["verdict"]))))
    busy = num(h.get("steady_busy_pct"))
    if busy is not None:
        length = (num(w.get("end_ns")) or 0) - (num(w.get("start_ns")) or 0)
        out.append(Paragraph((f"GPU busy {fmt_pct(busy)}% of the {w.get('method')} window ({fmt_dur(length)})",)))
    if h.get("action"):
        out.append(Paragraph(("first thing to do: ", Rich(h["action"]))))
    return out


def trace_name(v: View) -> str:
    path = str(v.sec("trace").get("path") or "")
    return path.replace("\\", "/").rsplit("/", 1)[-1] or "trace"


def sec_title(v: View) -> SectionResult:
    trace = v.sec("trace")
    h = v.sec("headline")
    out: List[Any] = [Heading(1, ("Nsight Systems LLM report: ", Code(trace_name(v))))]
    if h.get("verdict"):
        out.append(Paragraph((Strong(("Verdict: ", Rich(h["verdict"], lead=True))),), "verdict", BR))
    busy = num(h.get("steady_busy_pct"))
    if busy is not None:
        out.append(Paragraph(_busy(v, busy), brk=BR))
    elif _no_busy(v):
        out.append(Paragraph(_no_busy(v), brk=BR))
    out.append(Paragraph(window_line(v), brk=BR))
    session = session_line(v)
    if session:
        out.append(Paragraph(session, brk=BR))
    cause = _cause(v)
    if cause:
        out.append(Paragraph(cause, brk=BR))
    if h.get("action"):
        out.append(para(Strong(("Do first:",)), " ", Rich(h["action"], lead=True), cls="action"))
    meta: List[Any] = [f"nsys-llm-explainer {v.report.get('tool_version')}",
                       f"report.json schema {v.report.get('schema_version')}"]
    if trace.get("nsys_version"):
        meta.append(("Nsight Systems ", Data(trace.get("nsys_version"))))
    if trace.get("path"):
        meta.append(("trace ", Code(trace.get("path"))))
    out.append(HtmlOnly((para(joined([inline(m) for m in meta], " · "), cls="meta"),)))
    return Section("headline", "", tuple(out), "Headline", "header")


def sec_warnings(v: View) -> SectionResult:
    warnings = [w for w in (v.report.get("warnings") or []) if w]
    if not warnings:
        return None
    return Section("warnings", "", tuple(Note((Strong(("Warning:",)), " ", Rich(w, lead=True)), BR)
                                         for w in warnings), tag="div")
