"""Where the idle time went (``idle_causes`` and ``devices``; in HTML with a bar chart per device) and the
largest idle gaps."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any, List, Optional, Sequence

from ...vocabulary.cause_kinds import KIND
from ...vocabulary.device_roles import ROLE_NOTES
from ...vocabulary.units import fmt_count, fmt_dur, fmt_int, fmt_ms, fmt_pct
from ..charts import hbar, kind_color, plot_text
from ..document import (
    Chart,
    Code,
    Data,
    Em,
    Figure,
    Inline,
    Omitted,
    Paragraph,
    Rich,
    Section,
    SectionResult,
    Strong,
    TablePart,
    inline,
    joined,
    para,
    parts,
)
from ..host_samples import CAUSE_COL, attach, captured, samples_note
from ..specs import GAP_HISTOGRAM, GAPS, IDLE_CAUSES
from ..table import show_col
from .ctx import View, capped

if TYPE_CHECKING:
    from ...analyses.idle.gpu_time import DeviceTime
    from ...analyses.idle.result import DeviceCauses, Other

#: causes named in the legend per device (the table's own row count comes from the data)
CAUSE_ROWS = 6
#: bars of an idle-cause chart when the analysis did not fold the tail into ``other``
CHART_CAUSES = 15
#: characters of a cause detail in a chart label (the table and CSV hold it in full)
LABEL_DETAIL = 60

TITLE = "Where the idle time went"


def _example(v: View, r: Any) -> str:
    ex = r.examples
    return v.span(ex[0].start_ns, ex[0].end_ns) if ex else ""


def _other_row(other: Other) -> Inline:
    """The causes past the first rows, folded into one row by the analysis (``idle_causes…other``)."""
    return (f"other ({fmt_int(other.count)} causes)", "", fmt_ms(other.ns), fmt_pct(other.pct_of_window),
            fmt_pct(other.pct_of_idle), "", "")


def device_line(v: View, d: DeviceTime) -> Inline:
    full = d.full
    role = ROLE_NOTES.get(d.role)
    line = f" {role};" if role else ""
    line += (f" busy {fmt_dur(d.busy_ns)} ({fmt_pct(d.busy_pct)} %), idle {fmt_dur(d.idle_ns)} "
             f"({fmt_pct(d.idle_pct)} %) of the {fmt_dur(d.window_ns)} window")
    if full is not None and full.window_ns != d.window_ns:
        rec = " (its recorded time)" if v.r.window.details.not_recorded_ns else ""
        line += (f"; whole capture{rec}: busy {fmt_pct(full.busy_pct)} %, idle {fmt_dur(full.idle_ns)}"
                 f" of {fmt_dur(full.window_ns)}")
    line += f". {fmt_count(d.kernel_count, 'kernel')}, {fmt_count(d.gap_count, 'gap')}"
    if d.copy_busy_ns:
        line += f"; copies {fmt_dur(d.copy_busy_ns)} ({fmt_dur(d.copy_only_ns)} with no kernel running)"
    return inline(Strong(inline(v.device(d.device_id), ":")), line, ".")


def _histogram(d: DeviceTime) -> Optional[Paragraph]:
    items = [inline(Data(h.bucket), f": {fmt_int(h.count)} ({fmt_dur(h.total_ns)})")
             for h in d.gap_histogram if h.count]
    return para("Gaps by length: ", joined(items, " · "), ".") if items else None


def cause_table(v: View, causes: Sequence[Any], other: Other, samples: bool, tid: str) -> TablePart:
    cols = tuple(c for c in IDLE_CAUSES.cols if c is not CAUSE_COL) + (
        show_col("example gap (from trace start)", lambda r: _example(v, r)),) + ((CAUSE_COL,) if samples else ())
    rows, extra = (causes[: other.after_rows], (_other_row(other),)) if other.count else (causes, ())
    return TablePart(cols, list(rows), extra, tid)


def _label(kind: Any, detail: Any) -> str:
    return plot_text(kind) + (f": {plot_text(detail, LABEL_DETAIL)}" if detail else "")


def cause_chart(v: View, i: int, dc: DeviceCauses, causes: Sequence[Any]) -> Figure:
    """Idle time of one device by cause, as bars (the table's rows; the analysis's "other" fold kept)."""
    other = dc.other()
    shown = list(causes[: other.after_rows] if other.count else causes[:CHART_CAUSES])
    labels = [_label(c.kind, c.detail) for c in shown]
    values = [c.ns for c in shown]
    colors = [kind_color(c.kind, j) for j, c in enumerate(shown)]
    hover = [f"{lab}<br>{fmt_dur(c.ns)} idle · {fmt_pct(c.pct_of_window)} % of the window · "
             f"{fmt_pct(c.pct_of_idle)} % of idle · {fmt_count(c.gap_count, 'gap')}" for lab, c in zip(labels, shown)]
    if other.count:
        labels.append(f"other ({fmt_int(other.count)} causes)")
        values.append(other.ns)
        colors.append("#bdbdbd")
        hover.append(f"{fmt_int(other.count)} more causes: {fmt_dur(other.ns)} · "
                     f"{fmt_pct(other.pct_of_window)} % of the window")
        note = f"the first {len(shown)} causes and the rest folded into “other” by the analysis"
    else:
        note = (f"the first {len(shown)} of {len(causes)} causes" if len(causes) > len(shown) else "every cause")
    cap = inline("Idle time of ", v.device(dc.device_id), f" by cause ({note}). Text equivalent: report.json ",
                 Code("idle_causes.devices[].causes"), " (and ", Code(".other"), "), the table below, ",
                 Code("tables/idle_causes.csv"), ".")
    return hbar(f"idle-causes-{i}", labels, values, colors, hover, cap)


def causes_legend(kinds: Sequence[str]) -> Inline:
    """``Causes: kind: what it means; …`` over the kinds that have a meaning (empty when none has)."""
    legend = [inline(Code(k), f": {KIND[k].meaning}") for k in kinds if k in KIND]
    return inline(Em(("Causes:",)), " ", joined(legend, "; "), ".") if legend else ()


def _tail(v: View, kinds: Sequence[str]) -> Optional[Paragraph]:
    note = samples_note(v.r, kinds)
    pieces = [causes_legend(kinds), inline(Em(("Host samples:",)), " ", Rich(note)) if note else ()]
    text = joined([p for p in pieces if p], " ")
    return para(text, cls="legend") if text else None


def sec_idle(v: View) -> SectionResult:
    devices = v.r.gpu_time.devices
    ic = v.r.idle_causes
    if not devices:
        return Omitted(TITLE, ic.reason or v.r.gpu_time.reason or "no device timeline")
    by_dev = {d.device_id: d for d in ic.devices}
    if ic.available:
        body: List[Any] = [para("Every idle ns of a device's window is charged to one cause (first match in the "
                                "precedence of docs/MODEL.md); each table's rows add up to that device's idle time.")]
    else:
        body = [para("Idle causes not available: ", Data(ic.reason), ".")]
    kinds: List[str] = []
    for i, d in enumerate(devices):  # one iteration per device
        body.append(para(device_line(v, d)))
        dc = by_dev.get(d.device_id)
        causes = attach(v.r, d.device_id, dc.causes) if dc is not None else []
        if dc is not None and causes:
            body += [Chart(partial(cause_chart, v, i, dc, causes)),
                     cause_table(v, causes, dc.other(), captured(v.r), f"idle-causes-dev-{i}")]
            kinds = list(dict.fromkeys(kinds + [c.kind for c in causes[:CAUSE_ROWS]]))
        body.append(_histogram(d))
    body.append(_tail(v, kinds))
    return Section("idle", TITLE, parts(body), "Idle causes")


def sec_gaps(v: View) -> SectionResult:
    rows = GAPS.rows(v.r)
    if not rows:
        return Omitted("Largest idle gaps", "no idle gaps in the window")
    limit = min(v.top, 5)
    shown = sorted(rows, key=lambda r: -r.duration_ns)[:limit]
    cols = (show_col("start (from trace start)", lambda r: v.at(r.start_ns), True, lambda r: r.start_ns, "start_ns"),
            show_col("device", lambda r: Data(r.device_id), True, lambda r: r.device_id, "device_id")) + GAPS.cols
    total = sum(d.gap_count for d in v.r.gpu_time.devices)
    kept = capped(len(shown), len(rows), GAPS.csv) if len(rows) >= total else (
        f"Showing {len(shown)}; the {len(rows)} largest (per device) of the window's {fmt_int(total)} gaps in ",
        Code(f"tables/{GAPS.csv}"), "; every gap, by length, in ", Code(f"tables/{GAP_HISTOGRAM.csv}"), ".")
    note = inline(f"The {len(shown)} largest gaps of the window with the cause charged most of their time. ", kept)
    return Section("gaps", "Largest idle gaps", (para(note), TablePart(cols, shown, (), "largest-gaps")))
