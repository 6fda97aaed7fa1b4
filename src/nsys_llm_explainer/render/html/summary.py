"""The top of the page: title, headline (verdict, steady busy %, window, top cause, first action), capture
warnings, and the findings in report order — the same content and order as the top of report.md."""

from __future__ import annotations

from collections import abc
from typing import Any, List, Mapping

from ..base import Row, facts_pairs, fmt_dur, fmt_pct, num, rows_of
from ..markdown.headline import WINDOW_METHOD
from ..specs import check_text
from .ctx import HtmlCtx
from .markup import code, h, raw_value, rich, section


def _value(key: str, v: Any, shown: str) -> str:
    """A number shown in running text with its exact report value in ``data-v`` (tests compare it)."""
    raw = raw_value(v)
    return f'<span class="v" data-k="{h(key)}"' + (f' data-v="{h(raw)}"' if raw is not None else "") \
        + f">{shown}</span>"


def window_html(ctx: HtmlCtx) -> str:
    """The analysis window stated once: method, start → end from capture start, length, why."""
    w = ctx.window
    method = rich(WINDOW_METHOD.get(str(w.get("method")), str(w.get("method") or "")))
    where = f"{h(ctx.span(w.get('start_ns'), w.get('end_ns')))} from capture start ({h(fmt_dur(w.get('window_ns')))}"
    if w.get("start_ns") != w.get("full_start_ns") or w.get("end_ns") != w.get("full_end_ns"):
        where += f" of the {h(ctx.at(w.get('full_end_ns')))} capture"
    reason = f" {rich(w.get('reason'))}" if w.get("reason") else ""
    return f"<strong>Window:</strong> {method}, {where}).{reason}"


def sec_headline(ctx: HtmlCtx) -> str:
    trace = ctx.sec("trace")
    path = str(trace.get("path") or "")
    name = path.replace("\\", "/").rsplit("/", 1)[-1] or "trace"
    hd = ctx.sec("headline")
    out: List[str] = [f'<header id="headline"><h1>Nsight Systems LLM report: {code(name)}</h1>']
    if hd.get("verdict"):
        out.append(f'<p class="verdict">Verdict: {rich(hd["verdict"])}</p>')
    busy = num(hd.get("steady_busy_pct"))
    if busy is not None:
        devs = ctx.rows("devices")
        per = ", ".join(f"device {h(d.get('device_id'))} " + _value(
            f"devices.{d.get('device_id')}.busy_pct", d.get("busy_pct"), fmt_pct(d.get("busy_pct"))) + " %"
            for d in devs)
        out.append("<p><strong>GPU busy "
                   + _value("headline.steady_busy_pct", hd.get("steady_busy_pct"), fmt_pct(busy))
                   + " %</strong> of the analysis window" + (f" ({per})." if len(devs) > 1 else ".") + "</p>")
    out.append(f"<p>{window_html(ctx)}</p>")
    stake = h(fmt_dur(hd.get("time_at_stake_ns"))) if num(hd.get("time_at_stake_ns")) else ""
    at_stake = f", {stake} at stake" if stake else ""
    if hd.get("top_cause_kind"):
        share = f" ({fmt_pct(hd['top_share_pct'])} % of the window)" if num(hd.get("top_share_pct")) else ""
        largest = f", largest {code(hd['top_cause_detail'])}" if hd.get("top_cause_detail") else ""
        out.append(f"<p><strong>Top cause:</strong> {code(hd['top_cause_kind'])}{share}{largest}{at_stake}.</p>")
    elif hd.get("top_cause"):
        out.append(f"<p><strong>Top cause:</strong> {code(hd['top_cause'])}{at_stake}.</p>")
    elif stake:
        out.append(f"<p><strong>At stake:</strong> {stake} (finding {code(hd.get('top_finding_id'))}).</p>")
    if hd.get("action"):
        out.append(f'<p class="action"><strong>Do first:</strong> {rich(hd["action"])}</p>')
    meta = [f"nsys-llm-explainer {h(ctx.report.get('tool_version'))}",
            f"report.json schema {h(ctx.report.get('schema_version'))}"]
    if trace.get("nsys_version"):
        meta.append(f"Nsight Systems {h(trace.get('nsys_version'))}")
    if path:
        meta.append(f"trace {code(path)}")
    out.append(f'<p class="meta">{" · ".join(meta)}</p></header>')
    return "".join(out)


def sec_warnings(ctx: HtmlCtx) -> str:
    warnings = [w for w in (ctx.report.get("warnings") or []) if w]
    if not warnings:
        return ""
    return '<div id="warnings">' + "".join(
        f'<p class="warning"><strong>Warning:</strong> {rich(w)}</p>' for w in warnings) + "</div>"


def _safe_check(c: Row) -> Row:
    """A check whose observed / threshold are shown as numbers; anything else is escaped text."""
    fixed = {k: (c.get(k) if num(c.get(k)) is not None or c.get(k) is None else h(c.get(k)))
             for k in ("observed", "threshold")}
    return {**c, **fixed}


def _facts(f: Row) -> str:
    parts: List[str] = ["<strong>At stake:</strong> "
                        + _value("time_at_stake_ns", f.get("time_at_stake_ns"), h(fmt_dur(f.get("time_at_stake_ns"))))]
    if f.get("confidence"):
        parts.append(f"confidence {h(f['confidence'])}")
    if f.get("device_id") is not None:
        parts.append(f"device {h(f['device_id'])}")
    cause: Mapping[str, Any] = f.get("cause") if isinstance(f.get("cause"), abc.Mapping) else {}
    if cause.get("kind"):
        parts.append(f"cause {code(cause['kind'])}" + (f" {code(cause['detail'])}" if cause.get("detail") else ""))
    if f.get("id"):
        parts.append(f"id {code(f['id'])}")
    return " · ".join(parts)


def finding_html(i: int, f: Row) -> str:
    sev = str(f.get("severity") or "info")
    cls = "".join(ch for ch in sev.lower() if ch.isalnum())
    out = [f'<article class="finding sev-{cls}" data-id="{h(f.get("id"))}">',
           f'<h3><span class="badge">{h(sev.upper())}</span> {i}. '
           f'<span class="title">{rich(f.get("title"))}</span></h3>',
           f'<p class="facts">{_facts(f)}</p>']
    evidence = [e for e in (f.get("evidence") or []) if e]
    if evidence:
        out.append("<ul>" + "".join(f"<li>{rich(e)}</li>" for e in evidence) + "</ul>")
    recs = [r for r in (f.get("recommendation") or []) if r]
    if len(recs) == 1:
        out.append(f'<p class="do"><strong>Do:</strong> {rich(recs[0])}</p>')
    elif recs:
        out.append('<p class="do"><strong>Do:</strong></p><ul>' + "".join(f"<li>{rich(r)}</li>" for r in recs)
                   + "</ul>")
    checks = rows_of(f, "checks")
    if checks:
        text = "; ".join(check_text(_safe_check(c), h, code) for c in checks)
        out.append(f'<p class="checks"><em>Checked:</em> {text}</p>')
    return "".join(out) + "</article>"


def sec_findings(ctx: HtmlCtx) -> str:
    findings = ctx.rows("findings")
    if not findings:
        return section("findings", "Findings", ["<p>No finding: no rule's preconditions held.</p>"])
    return section("findings", "Findings", [finding_html(i, f) for i, f in enumerate(findings, 1)])


__all__ = ["sec_findings", "sec_headline", "sec_warnings", "window_html"]


def sec_facts(ctx: HtmlCtx) -> str:
    """The trace facts the advice was checked against (the same pairs as report.md)."""
    pairs = facts_pairs(ctx.report)
    if not pairs:
        return ""
    return ('<section id="facts"><h2>Facts the advice rests on</h2><p>Every recommendation above declares the facts '
            "it needs and is left out when these contradict it.</p><ul>"
            + "".join(f"<li><strong>{h(k)}:</strong> {h(v)}</li>" for k, v in pairs) + "</ul></section>")
