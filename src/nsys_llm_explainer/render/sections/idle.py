"""Where the idle time went (``idle_causes`` and ``devices``; in HTML with a bar chart per device) and the
largest idle gaps."""

from __future__ import annotations

from functools import partial
from typing import Any, Dict, List, Optional, Sequence

from ...vocabulary.cause_kinds import CAUSE_KINDS
from ...vocabulary.units import fmt_dur, fmt_int, fmt_ms, fmt_pct, num
from ..base import Row, rows_of, section
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
from ..specs import GAPS, IDLE_CAUSES
from ..table import show_col
from .ctx import View, capped

#: causes named in the legend per device (the table's own row count comes from the data)
CAUSE_ROWS = 6
#: bars of an idle-cause chart when the analysis did not fold the tail into ``other``
CHART_CAUSES = 15
#: characters of a cause detail in a chart label (the table and CSV hold it in full)
LABEL_DETAIL = 60

#: what each cause kind means, one short phrase (docs/MODEL.md has the precise rule)
KIND_MEANING = {k.name: k.meaning for k in CAUSE_KINDS}
TITLE = "Where the idle time went"


def _example(v: View, r: Row) -> str:
    ex = rows_of(r, "examples")
    return v.span(ex[0].get("start_ns"), ex[0].get("end_ns")) if ex else ""


def _other_row(other: Row) -> Inline:
    """The causes past the first rows, folded into one row by the analysis (``idle_causes…other``)."""
    return (f"other ({fmt_int(other.get('count'))} causes)", "", fmt_ms(other.get("ns")),
            fmt_pct(other.get("pct_of_window")), fmt_pct(other.get("pct_of_idle")), "", "")


#: what a device's role means in its line (devices[].role; docs/MODEL.md)
ROLE_NOTE = {"copies only": "copies only: ran no kernel in the window, not counted in the GPU busy %",
             "idle": "idle: ran neither kernels nor copies in the window, not counted in the GPU busy %"}


def device_line(v: View, d: Row) -> Inline:
    full = section(d, "full")
    role = ROLE_NOTE.get(str(d.get("role")))
    line = f" {role};" if role else ""
    line += (f" busy {fmt_dur(d.get('busy_ns'))} ({fmt_pct(d.get('busy_pct'))} %), idle {fmt_dur(d.get('idle_ns'))} "
            f"({fmt_pct(d.get('idle_pct'))} %) of the {fmt_dur(d.get('window_ns'))} window")
    if full and full.get("window_ns") != d.get("window_ns"):
        line += (f"; whole capture: busy {fmt_pct(full.get('busy_pct'))} %, idle {fmt_dur(full.get('idle_ns'))}"
                 f" of {fmt_dur(full.get('window_ns'))}")
    line += f". {fmt_int(d.get('kernel_count'))} kernels, {fmt_int(d.get('gap_count'))} gaps"
    if num(d.get("copy_busy_ns")):
        line += (f"; copies {fmt_dur(d.get('copy_busy_ns'))} "
                 f"({fmt_dur(d.get('copy_only_ns'))} with no kernel running)")
    return inline(Strong(inline(v.device(d.get("device_id")), ":")), line, ".")


def _histogram(d: Row) -> Optional[Paragraph]:
    items = [inline(Data(h.get("bucket")), f": {fmt_int(h.get('count'))} ({fmt_dur(h.get('total_ns'))})")
             for h in rows_of(d, "gap_histogram") if h.get("count")]
    return para("Gaps by length: ", joined(items, " · "), ".") if items else None


def cause_table(v: View, causes: Sequence[Row], other: Optional[Row], samples: bool, tid: str) -> TablePart:
    cols = tuple(c for c in IDLE_CAUSES.cols if c is not CAUSE_COL) + (
        show_col("example gap (from trace start)", lambda r: _example(v, r)),) + ((CAUSE_COL,) if samples else ())
    if other and num(other.get("count")):
        return TablePart(cols, list(causes[: int(other.get("after_rows") or 0)]), (_other_row(other),), tid)
    return TablePart(cols, list(causes), (), tid)


def _label(kind: Any, detail: Any) -> str:
    return plot_text(kind) + (f": {plot_text(detail, LABEL_DETAIL)}" if detail else "")


def cause_chart(v: View, i: int, dc: Row, causes: Sequence[Row]) -> Figure:
    """Idle time of one device by cause, as bars (the table's rows; the analysis's "other" fold kept)."""
    other = section(dc, "other")
    folded = bool(num(other.get("count")))
    shown = list(causes[: int(other.get("after_rows") or 0)]) if folded else list(causes[:CHART_CAUSES])
    labels = [_label(c.get("kind"), c.get("detail")) for c in shown]
    values = [c.get("ns") for c in shown]
    colors = [kind_color(str(c.get("kind")), j) for j, c in enumerate(shown)]
    hover = [f"{lab}<br>{fmt_dur(c.get('ns'))} idle · {fmt_pct(c.get('pct_of_window'))} % of the window · "
             f"{fmt_pct(c.get('pct_of_idle'))} % of idle · {fmt_int(c.get('gap_count'))} gaps"
             for lab, c in zip(labels, shown)]
    if folded:
        labels.append(f"other ({fmt_int(other.get('count'))} causes)")
        values.append(other.get("ns"))
        colors.append("#bdbdbd")
        hover.append(f"{fmt_int(other.get('count'))} more causes: {fmt_dur(other.get('ns'))} · "
                     f"{fmt_pct(other.get('pct_of_window'))} % of the window")
        note = f"the first {len(shown)} causes and the rest folded into “other” by the analysis"
    else:
        note = (f"the first {len(shown)} of {len(causes)} causes" if len(causes) > len(shown) else "every cause")
    cap = inline("Idle time of ", v.device(dc.get("device_id")), f" by cause ({note}). Text equivalent: report.json ",
                 Code("idle_causes.devices[].causes"), " (and ", Code(".other"), "), the table below, ",
                 Code("tables/idle_causes.csv"), ".")
    return hbar(f"idle-causes-{i}", labels, values, colors, hover, cap)


def _tail(v: View, kinds: Sequence[str]) -> Optional[Paragraph]:
    legend = [inline(Code(k), f": {KIND_MEANING[k]}") for k in kinds if k in KIND_MEANING]
    note = samples_note(v.report, kinds)
    pieces = [inline(Em(("Causes:",)), " ", joined(legend, "; "), ".") if legend else (),
              inline(Em(("Host samples:",)), " ", Rich(note)) if note else ()]
    text = joined([p for p in pieces if p], " ")
    return para(text, cls="legend") if text else None


def sec_idle(v: View) -> SectionResult:
    devices = v.rows("devices")
    ic = v.sec("idle_causes")
    if not devices:
        return Omitted(TITLE, str(ic.get("reason") or v.sec("gpu_time").get("reason") or "no device timeline"))
    by_dev: Dict[Any, Row] = {d.get("device_id"): d for d in rows_of(ic, "devices")}
    if ic.get("available"):
        body: List[Any] = [para("Every idle ns of a device's window is charged to one cause (first match in the "
                                "precedence of docs/MODEL.md); each table's rows add up to that device's idle time.")]
    else:
        body = [para("Idle causes not available: ", Data(ic.get("reason")), ".")]
    kinds: List[str] = []
    for i, d in enumerate(devices):  # one iteration per device
        body.append(para(device_line(v, d)))
        dc = by_dev.get(d.get("device_id"), {})
        causes = attach(v.report, d.get("device_id"), rows_of(dc, "causes"))
        if causes:
            other = section(dc, "other") or None
            body += [Chart(partial(cause_chart, v, i, dc, causes)),
                     cause_table(v, causes, other, captured(v.report), f"idle-causes-dev-{i}")]
            kinds = list(dict.fromkeys(kinds + [str(c.get("kind")) for c in causes[:CAUSE_ROWS]]))
        body.append(_histogram(d))
    body.append(_tail(v, kinds))
    return Section("idle", TITLE, parts(body), "Idle causes")


def sec_gaps(v: View) -> SectionResult:
    rows = GAPS.rows(v.report)
    if not rows:
        return Omitted("Largest idle gaps", "no idle gaps in the window")
    limit = min(v.top, 5)
    shown = sorted(rows, key=lambda r: -(num(r.get("duration_ns")) or 0))[:limit]
    cols = (show_col("start (from trace start)", lambda r: v.at(r.get("start_ns")), True, lambda r: r.get("start_ns"),
                     "start_ns"),
            show_col("device", lambda r: Data(r.get("device_id")), True, lambda r: r.get("device_id"), "device_id")) \
        + GAPS.cols
    note = inline(f"The {len(shown)} largest gaps of the window with the cause charged most of their time. ",
                  capped(len(shown), len(rows), GAPS.csv))
    return Section("gaps", "Largest idle gaps", (para(note), TablePart(cols, shown, (), "largest-gaps")))
