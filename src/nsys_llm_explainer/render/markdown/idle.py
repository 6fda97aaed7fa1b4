"""Where the idle time went (``idle_causes`` and ``devices``) and the largest idle gaps."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

from ...vocabulary.cause_kinds import CAUSE_KINDS
from ..base import Row, fmt_dur, fmt_int, fmt_ms, fmt_pct, num, rows_of
from ..escape import md_code, md_rich, md_text
from ..host_samples import CAUSE_COL, attach, captured, samples_note
from ..specs import GAPS, IDLE_CAUSES
from ..table import md_col, md_table
from .ctx import Ctx, Lines, Omitted, Result, heading

#: causes named in the legend per device (the table's own row count comes from the data)
CAUSE_ROWS = 6

#: what each cause kind means, one short phrase (docs/MODEL.md has the precise rule)
KIND_MEANING = {k.name: k.meaning for k in CAUSE_KINDS}


def _example(ctx: Ctx, r: Row) -> str:
    ex = rows_of(r, "examples")
    return ctx.span(ex[0].get("start_ns"), ex[0].get("end_ns")) if ex else ""


def _other_row(other: Row) -> List[str]:
    """The causes past the first rows, folded into one row by the analysis (``idle_causes…other``)."""
    return [f"other ({fmt_int(other.get('count'))} causes)", "", fmt_ms(other.get("ns")),
            fmt_pct(other.get("pct_of_window")), fmt_pct(other.get("pct_of_idle")), "", ""]


def device_line(ctx: Ctx, d: Row) -> str:
    full = d.get("full") if isinstance(d.get("full"), dict) else {}
    line = (f"**{ctx.device(d.get('device_id'))}:** busy {fmt_dur(d.get('busy_ns'))} "
            f"({fmt_pct(d.get('busy_pct'))} %), idle {fmt_dur(d.get('idle_ns'))} "
            f"({fmt_pct(d.get('idle_pct'))} %) of the {fmt_dur(d.get('window_ns'))} window")
    if full and full.get("window_ns") != d.get("window_ns"):
        line += (f"; whole capture: busy {fmt_pct(full.get('busy_pct'))} %, idle {fmt_dur(full.get('idle_ns'))}"
                 f" of {fmt_dur(full.get('window_ns'))}")
    line += f". {fmt_int(d.get('kernel_count'))} kernels, {fmt_int(d.get('gap_count'))} gaps"
    if num(d.get("copy_busy_ns")):
        line += (f"; copies {fmt_dur(d.get('copy_busy_ns'))} "
                 f"({fmt_dur(d.get('copy_only_ns'))} with no kernel running)")
    return line + "."


def _histogram_line(d: Row) -> str:
    parts = [f"{md_text(h.get('bucket'), line_start=False)}: {fmt_int(h.get('count'))} ({fmt_dur(h.get('total_ns'))})"
             for h in rows_of(d, "gap_histogram") if h.get("count")]
    return ("Gaps by length: " + " · ".join(parts) + ".") if parts else ""


def cause_table(ctx: Ctx, causes: Sequence[Row], other: Optional[Row] = None, samples: bool = False) -> Lines:
    cols = tuple(c for c in IDLE_CAUSES.cols if c is not CAUSE_COL) + (
        md_col("example gap (from capture start)", lambda r: _example(ctx, r)),) + ((CAUSE_COL,) if samples else ())
    if other and num(other.get("count")):
        return md_table(cols, list(causes[: int(other.get("after_rows") or 0)]), [_other_row(other)])
    return md_table(cols, list(causes))


def sec_idle(ctx: Ctx) -> Result:
    devices = ctx.rows("devices")
    ic = ctx.sec("idle_causes")
    if not devices:
        return Omitted("Where the idle time went", str(ic.get("reason") or ctx.sec("gpu_time").get("reason")
                                                        or "no device timeline"))
    by_dev: Dict[Any, Row] = {d.get("device_id"): d for d in rows_of(ic, "devices")}
    note = ("Every idle ns of a device's window is charged to one cause (first match in the precedence of "
            "docs/MODEL.md); each table's rows add up to that device's idle time.")
    if not ic.get("available"):
        note = f"Idle causes not available: {md_text(ic.get('reason'), line_start=False)}."
    lines = heading("Where the idle time went", note)
    kinds: List[str] = []
    for d in devices:  # one iteration per device
        lines += [device_line(ctx, d), ""]
        dc = by_dev.get(d.get("device_id"), {})
        causes = attach(ctx.report, d.get("device_id"), rows_of(dc, "causes"))
        if causes:
            other = dc.get("other") if isinstance(dc.get("other"), dict) else None
            lines += cause_table(ctx, causes, other, captured(ctx.report)) + [""]
            kinds += [str(c.get("kind")) for c in causes[:CAUSE_ROWS] if str(c.get("kind")) not in kinds]
            kinds = list(dict.fromkeys(kinds))
        hist = _histogram_line(d)
        if hist:
            lines += [hist, ""]
    legend = [f"{md_code(k)}: {KIND_MEANING[k]}" for k in kinds if k in KIND_MEANING]
    tail = ("*Causes:* " + "; ".join(legend) + ". " if legend else "") + samples_text(ctx.report, kinds)
    if tail.strip():
        lines += [tail.strip()]
    return lines if lines[-1] else lines[:-1]


def sec_gaps(ctx: Ctx) -> Result:
    rows = GAPS.rows(ctx.report)
    if not rows:
        return Omitted("Largest idle gaps", "no idle gaps in the window")
    limit = min(ctx.top, 5)
    shown = sorted(rows, key=lambda r: -(num(r.get("duration_ns")) or 0))[:limit]
    cols = (md_col("start (from capture start)", lambda r: ctx.at(r.get("start_ns")), True),
            md_col("device", lambda r: md_text(r.get("device_id"), line_start=False), True)) + GAPS.cols
    note = f"The {len(shown)} largest gaps of the window with the cause charged most of their time. " \
           + ctx.capped(len(shown), len(rows), GAPS.csv)
    return heading("Largest idle gaps", note) + md_table(cols, shown)


def samples_text(report: Row, kinds: Sequence[str]) -> str:
    """The note under the idle tables on CPU samples (``host_samples``), in the legend's paragraph."""
    note = samples_note(report, kinds)
    return "*Host samples:* " + md_rich(note, line_start=False) if note else ""
