"""Findings in report order: severity, title, time at stake, evidence, what to do, the checks held; then the
trace facts the advice was checked against."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any, List, Optional, Tuple

from ...vocabulary.units import fmt_count, fmt_dur
from ..document import (
    NL,
    Code,
    Data,
    Em,
    Group,
    Heading,
    Inline,
    Paragraph,
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

if TYPE_CHECKING:
    from ...analyses.trace.facts import TraceFacts
    from ...findings.base import Finding, Quoted


def quoted_part(q: Optional[Quoted], whose: str) -> Inline:
    """What a time at stake covers and the part of it the title (``whose``: "verdict", "title") quotes, when the
    finding says they differ (``Finding.quoted``); empty otherwise."""
    if q is None:
        return ()
    return inline(" ", Rich(q.stake), f" ({fmt_dur(q.ns)} of it ", Rich(q.what), f", the {whose}'s)")


def _facts(f: Finding) -> Inline:
    out: List[Inline] = [inline(Strong(("At stake:",)), " ", Value(fmt_dur(f.time_at_stake_ns), "time_at_stake_ns",
                                                                  f.time_at_stake_ns),
                                quoted_part(f.quoted, "title"))]
    if f.confidence:
        out.append(inline("confidence ", Data(f.confidence)))
    if f.device_id is not None:
        out.append(inline("device ", Data(f.device_id)))
    if f.cause is not None and f.cause[0]:
        kind, detail = f.cause
        out.append(inline("cause ", Code(kind), (" ", Code(detail)) if detail else None))
    if f.id:
        out.append(inline("id ", Code(f.id)))
    return joined(out, " · ")


def finding_parts(i: int, f: Finding) -> Group:
    """One finding (or cluster claim) as a card: heading, facts, evidence, what to do, the checks held."""
    sev = f.severity or "info"
    evidence = [e for e in f.evidence if e]
    recs = [r for r in f.recommendation if r]
    out: List[Any] = [
        Heading(3, (f"{i}. ", Styled("badge", (Data(sev.upper()),)), " — ",
                    Styled("title", (Rich(f.title, lead=True),)))),
        Paragraph(_facts(f), "facts", NL if evidence else ""),
        bullets([Rich(e, lead=True) for e in evidence])]
    if len(recs) == 1:
        out.append(para(Strong(("Do:",)), " ", Rich(recs[0], lead=True), cls="do"))
    elif recs:
        out += [para(Strong(("Do:",)), cls="do", brk=NL), bullets([Rich(r, lead=True) for r in recs])]
    if f.checks:
        out.append(para(Em(("Checked:",)), " ", joined([check_spans(c) for c in f.checks], "; "), cls="checks"))
    cls = "".join(ch for ch in sev.lower() if ch.isalnum())
    return Group(parts(out), f"finding sev-{cls}", f.id)


def facts_pairs(f: TraceFacts) -> List[Tuple[str, str]]:
    """The trace facts as (label, plain text) pairs, in a fixed order, for every format (each writer escapes)."""
    kinds = Counter(f"{g.name or 'GPU'}: {g.architecture}"   # identical GPUs once, with their number
                    + (f" (compute capability {g.compute_capability}"
                       + (", from the name" if g.source == "name" else "") + ")" if g.compute_capability else "")
                    + ", tensor cores " + ("/".join(g.tensor_core_types) or "none") for g in f.gpus)
    gp = "; ".join((f"{n} × " if n > 1 else "") + k for k, n in kinds.items()) or "not recorded in the export"
    ev = list(f.workload_evidence[:1])
    threads = f.nvtx_threads
    nv = ("yes, on " + ", ".join(f"{t.name or 'tid ' + str(t.gtid & 0xFFFFFF)} ({fmt_count(t.ranges, 'range')})"
                                 for t in threads[:4])
          + (f" and {len(threads) - 4} more threads" if len(threads) > 4 else "")) if f.nvtx else "no"
    return [("GPUs", gp),
            ("Workload", f.workload + (f" ({ev[0]})" if ev else "")),
            ("Stack", f.stack or "not recognised"),
            ("CUDA graphs", "yes: " + f.cuda_graphs_evidence if f.cuda_graphs else "no"),
            ("torch.compile", "yes: " + f.torch_compile_evidence if f.torch_compile else "no"),
            ("CPU samples of CUDA threads", "yes" if f.cpu_samples else "no"),   # the model keeps only theirs
            ("Unified Memory", "yes: " + f.unified_memory_evidence if f.unified_memory else "no"),
            ("NVTX ranges", nv)]


def sec_findings(v: View) -> SectionResult:
    if not v.r.findings:
        body: List[Any] = [para("No finding: no rule's preconditions held.")]
    else:
        body = [finding_parts(i, f) for i, f in enumerate(v.r.findings, 1)]
    # the trace facts every piece of advice was checked against (``facts`` in report.json), one paragraph
    pairs = joined([inline(Strong((f"{k}:",)), " ", Data(x)) for k, x in facts_pairs(v.r.facts)], " · ")
    facts = para(Em(("Facts the advice rests on",)), " (every recommendation declares the facts it needs and is "
                 "left out when these contradict it): ", pairs, cls="facts")
    return Section("findings", "Findings", parts(body, facts), "Findings")
