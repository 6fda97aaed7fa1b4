"""Title, headline (verdict, steady busy %, window, top cause, first action) and capture warnings."""

from __future__ import annotations

from ..base import fmt_dur, fmt_pct, num
from ..escape import md_code, md_rich, md_text
from .ctx import Ctx, Result

WINDOW_METHOD = {
    "full": "whole capture",
    "auto": "steady state (auto-detected)",
    "override": "set by `--window`",
    "nvtx": "set by `--window-nvtx`",
}


def window_line(ctx: Ctx) -> str:
    """The analysis window stated once: method, start → end from capture start, length, why."""
    w = ctx.window
    method = WINDOW_METHOD.get(str(w.get("method")), md_text(w.get("method"), line_start=False))
    where = f"{ctx.span(w.get('start_ns'), w.get('end_ns'))} from capture start ({fmt_dur(w.get('window_ns'))}"
    if w.get("start_ns") != w.get("full_start_ns") or w.get("end_ns") != w.get("full_end_ns"):
        where += f" of the {ctx.at(w.get('full_end_ns'))} capture"
    reason = md_rich(w.get("reason")) if w.get("reason") else ""
    return f"**Window:** {method}, {where}). {reason}".rstrip()


def sec_title(ctx: Ctx) -> Result:
    trace = ctx.sec("trace")
    path = str(trace.get("path") or "")
    name = path.replace("\\", "/").rsplit("/", 1)[-1] or "trace"
    h = ctx.sec("headline")
    lines = [f"# Nsight Systems LLM report: {md_code(name)}", ""]
    if h.get("verdict"):
        lines.append(f"**Verdict: {md_rich(h['verdict'])}**  ")
    busy = num(h.get("steady_busy_pct"))
    devs = ctx.rows("devices")
    if busy is not None:
        per = ", ".join(f"device {d.get('device_id')} {fmt_pct(d.get('busy_pct'))} %" for d in devs[:8])
        more = ", …" if len(devs) > 8 else ""
        lines.append(f"**GPU busy {fmt_pct(busy)} %** of the analysis window"
                     + (f" ({per}{more})." if len(devs) > 1 else ".") + "  ")
    lines.append(window_line(ctx) + "  ")
    stake = fmt_dur(h.get("time_at_stake_ns")) if num(h.get("time_at_stake_ns")) else ""
    if h.get("top_cause_kind"):
        share = f" ({fmt_pct(h['top_share_pct'])} % of the window)" if num(h.get("top_share_pct")) else ""
        largest = f", largest {md_code(h['top_cause_detail'])}" if h.get("top_cause_detail") else ""
        lines.append(f"**Top cause:** {md_code(h['top_cause_kind'])}{share}{largest}"
                     + (f", {stake} at stake" if stake else "") + ".  ")
    elif h.get("top_cause"):
        lines.append(f"**Top cause:** {md_code(h['top_cause'])}" + (f", {stake} at stake" if stake else "") + ".  ")
    elif stake:
        lines.append(f"**At stake:** {stake} (finding {md_code(h.get('top_finding_id'))}).  ")
    if h.get("action"):
        lines.append(f"**Do first:** {md_rich(h['action'])}")
    lines[-1] = lines[-1].rstrip()
    return lines


def sec_warnings(ctx: Ctx) -> Result:
    warnings = [w for w in (ctx.report.get("warnings") or []) if w]
    if not warnings:
        return None
    return [f"> **Warning:** {md_rich(w)}  " for w in warnings[:-1]] + [f"> **Warning:** {md_rich(warnings[-1])}"]
