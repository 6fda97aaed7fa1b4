"""Findings in report order: severity, title, time at stake, evidence, what to do, the checks held."""

from __future__ import annotations

from collections import abc
from typing import List

from ..base import Row, facts_pairs, fmt_dur, rows_of
from ..escape import md_code, md_rich, md_text
from ..specs import check_text
from .ctx import Ctx, Lines, Result, heading


def _text(s: object) -> str:
    return md_text(s, line_start=False)


def _facts(f: Row) -> str:
    parts: List[str] = [f"**At stake:** {fmt_dur(f.get('time_at_stake_ns'))}"]
    if f.get("confidence"):
        parts.append(f"confidence {md_text(f['confidence'], line_start=False)}")
    if f.get("device_id") is not None:
        parts.append(f"device {md_text(f['device_id'], line_start=False)}")
    cause = f.get("cause") if isinstance(f.get("cause"), abc.Mapping) else {}
    if cause.get("kind"):
        detail = f" {md_code(cause['detail'])}" if cause.get("detail") else ""
        parts.append(f"cause {md_code(cause['kind'])}{detail}")
    if f.get("id"):
        parts.append(f"id {md_code(f['id'])}")
    return " · ".join(parts)


def finding_lines(i: int, f: Row) -> Lines:
    sev = str(f.get("severity") or "info").upper()
    lines = [f"### {i}. {md_text(sev, line_start=False)} — {md_rich(f.get('title'))}", "", _facts(f)]
    lines += [f"- {md_rich(e)}" for e in (f.get("evidence") or []) if e]
    recs = [r for r in (f.get("recommendation") or []) if r]
    if len(recs) == 1:
        lines += ["", f"**Do:** {md_rich(recs[0])}"]
    elif recs:
        lines += ["", "**Do:**"] + [f"- {md_rich(r)}" for r in recs]
    checks = rows_of(f, "checks")
    if checks:
        lines += ["", "*Checked:* " + "; ".join(check_text(c, _text, md_code) for c in checks)]
    return lines


def sec_findings(ctx: Ctx) -> Result:
    findings = ctx.rows("findings")
    lines = heading("Findings")
    if not findings:
        return lines + ["No finding: no rule's preconditions held."]
    for i, f in enumerate(findings, 1):
        lines += finding_lines(i, f) + [""]
    return lines + facts_line(ctx)


def facts_line(ctx: Ctx) -> Lines:
    """The trace facts every piece of advice above was checked against (``facts`` in report.json), one line."""
    pairs = facts_pairs(ctx.report)
    if not pairs:
        return []
    return ["*Facts the advice rests on* (every recommendation declares the facts it needs and is left out when "
            "these contradict it): " + " · ".join(f"**{k}:** {_text(v)}" for k, v in pairs)]
