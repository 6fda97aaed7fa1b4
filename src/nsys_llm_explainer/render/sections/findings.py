"""Findings in report order: severity, title, time at stake, evidence, what to do, the checks held; then the
trace facts the advice was checked against."""

from __future__ import annotations

from collections import abc
from typing import Any, List, Mapping

from ...vocabulary.units import fmt_dur
from ..base import Row, facts_pairs, rows_of
from ..document import (
    NL,
    Code,
    Data,
    Em,
    Group,
    Heading,
    Inline,
    Paragraph,
    Part,
    Rich,
    Section,
    SectionResult,
    Strong,
    Styled,
    Value,
    bullets,
    inline,
    joined,
    para,
    parts,
)
from ..specs import check_spans
from .ctx import View


def _facts(f: Row) -> Inline:
    out: List[Inline] = [inline(Strong(("At stake:",)), " ", Value(fmt_dur(f.get("time_at_stake_ns")),
                                                                  "time_at_stake_ns", f.get("time_at_stake_ns")))]
    if f.get("confidence"):
        out.append(inline("confidence ", Data(f["confidence"])))
    if f.get("device_id") is not None:
        out.append(inline("device ", Data(f["device_id"])))
    c = f.get("cause")
    cause: Mapping[str, Any] = c if isinstance(c, abc.Mapping) else {}
    if cause.get("kind"):
        out.append(inline("cause ", Code(cause["kind"]), (" ", Code(cause["detail"])) if cause.get("detail") else None))
    if f.get("id"):
        out.append(inline("id ", Code(f["id"])))
    return joined(out, " · ")


def finding_parts(i: int, f: Row, recommendation: str = "recommendation") -> Group:
    """One finding (or cluster claim) as a card: heading, facts, evidence, what to do, the checks held."""
    sev = str(f.get("severity") or "info")
    evidence = [e for e in (f.get("evidence") or []) if e]
    recs = [r for r in (f.get(recommendation) or []) if r]
    out: List[Any] = [
        Heading(3, (f"{i}. ", Styled("badge", (Data(sev.upper()),)), " — ",
                    Styled("title", (Rich(f.get("title"), lead=True),)))),
        Paragraph(_facts(f), "facts", NL if evidence else ""),
        bullets([Rich(e, lead=True) for e in evidence])]
    if len(recs) == 1:
        out.append(para(Strong(("Do:",)), " ", Rich(recs[0], lead=True), cls="do"))
    elif recs:
        out += [para(Strong(("Do:",)), cls="do", brk=NL), bullets([Rich(r, lead=True) for r in recs])]
    checks = rows_of(f, "checks")
    if checks:
        out.append(para(Em(("Checked:",)), " ", joined([check_spans(c) for c in checks], "; "), cls="checks"))
    cls = "".join(ch for ch in sev.lower() if ch.isalnum())
    return Group(parts(out), f"finding sev-{cls}", str(f.get("id") or ""))


def facts_parts(v: View) -> List[Part]:
    """The trace facts every piece of advice was checked against (``facts`` in report.json), one paragraph."""
    pairs = facts_pairs(v.report)
    if not pairs:
        return []
    return [para(Em(("Facts the advice rests on",)), " (every recommendation declares the facts it needs and is "
                 "left out when these contradict it): ",
                 joined([inline(Strong((f"{k}:",)), " ", Data(x)) for k, x in pairs], " · "), cls="facts")]


def sec_findings(v: View) -> SectionResult:
    findings = v.rows("findings")
    if not findings:
        body: List[Any] = [para("No finding: no rule's preconditions held.")]
    else:
        body = [finding_parts(i, f) for i, f in enumerate(findings, 1)]
    return Section("findings", "Findings", parts(body, facts_parts(v)), "Findings")
