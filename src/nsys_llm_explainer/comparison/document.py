"""The comparison as one document (``compare.md`` and ``compare.html``; contents: docs/COMPARE.md): per NEW the
headline lines, the headline metric, the traces, the time per unit of work by kernel category and idle cause (in
HTML as stacked bars), the top kernel changes and the finding changes."""

from __future__ import annotations

from dataclasses import dataclass
from operator import attrgetter
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ..render.charts import kind_color, layout, plot_text
from ..render.document import (
    BR,
    Cell,
    Chart,
    Code,
    Data,
    Document,
    Figure,
    Group,
    Heading,
    Inline,
    Paragraph,
    Rich,
    Section,
    Spans,
    TablePart,
    bullets,
    inline,
    joined,
    para,
    parts,
)
from ..render.escape import shorten
from ..render.html.writer import html_page
from ..render.table import Col, Joined, field_of, show_col
from ..vocabulary.units import fmt_float, fmt_int, fmt_ms, fmt_pct, ms_value, signed_ms, signed_pct
from .diff import UNIT_WORD, count_word, per_unit
from .metric import PERIOD, STEP
from .result import COMPARE_SCHEMA_VERSION, CompareResult, Comparison, Share, StepInfo, TraceSummary

KERNEL_ROWS = 15
CHANGE_TEXT = {"new": "new", "gone": "gone", "severity": "severity changed", "same": "unchanged",
               "untraced": "not traced in the other"}
CATEGORY_COLORS = ("#1565c0", "#2e7d32", "#ef6c00", "#6a1b9a", "#00838f", "#c62828", "#9e9d24", "#4527a0",
                   "#ad1457", "#00695c", "#5d4037", "#283593", "#f9a825", "#7cb342", "#039be5", "#8d6e63")
NON_GPU_COLOR = "#bdbdbd"
SharesOf = Callable[[TraceSummary], Tuple[Share, ...]]   # one trace's parts: its categories or its idle kinds


@dataclass(frozen=True)
class PerUnitRow:
    """One part (a category, ``non_gpu`` or an idle kind) across the traces: per trace its time per unit of work,
    then for each NEW the change against BASE; ``cells`` as shown, ``values`` the exact ns behind them."""

    name: str
    cells: Tuple[str, ...]
    values: Tuple[Optional[int], ...]


def _label(t: TraceSummary) -> Inline:
    return (Code(t.label, 40),)


def _col(head: Spans, key: str, fmt: Callable[[Any], Spans], right: bool = True) -> Col:
    """A shown column of the row's field ``key`` formatted by ``fmt`` (the exact value behind it for HTML)."""
    return show_col(head, lambda r: fmt(field_of(r, key)), right, lambda r: field_of(r, key), key)


def _headline(d: CompareResult) -> Section:
    names = joined([_label(t) for t in d.traces[1:]], ", ")
    out: List[Any] = [Heading(1, inline("Trace comparison: ", names, " vs BASE ", _label(d.traces[0])))]
    for c in d.comparisons:
        lines = list(c.headline)
        out.append(Group(tuple(para(Rich(x, lead=True), cls="verdict" if i == 0 else "",
                                    brk=BR if i + 1 < len(lines) else "") for i, x in enumerate(lines)), "pair"))
    return Section("headline", "", parts(out), tag="header")


def _metric_row(i: int, t: TraceSummary, c: Optional[Comparison]) -> Joined:
    """One trace's row of the headline-metric table: its metric, and (a NEW) the change against BASE."""
    vs_base = {k: getattr(c, k) if c is not None else None for k in ("change_pct", "noise_pct", "verdict", "status")}
    return Joined(t.metric, {"label": t.label, "role": "BASE" if i == 0 else "NEW", **vs_base})


def _metric(d: CompareResult) -> Section:
    m = d.metric
    comps = {c.new: c for c in d.comparisons}
    desc = inline(Data(m.description, lead=True),
                  ("; anchor kernel ", Code(m.anchor_kernel, 80)) if m.anchor_kernel else None)
    rows = [_metric_row(i, t, comps.get(t.label)) for i, t in enumerate(d.traces)]
    cols = (_col("trace", "label", lambda v: Code(v, 40), False), _col("role", "role", lambda v: v, False),
            _col("p50 (ms)", "p50_ns", fmt_ms), _col("p90 (ms)", "p90_ns", fmt_ms),
            _col("p90/p50", "spread", lambda v: fmt_float(v, 2)),
            _col(f"{count_word(m)}s", "count", fmt_int),
            _col("change", "change_pct", lambda v: "" if v is None else signed_pct(v)),
            _col("noise", "noise_pct", lambda v: "" if v is None else "±" + fmt_pct(v) + " %"),
            _col("verdict", "verdict", lambda v: Cell(v.replace("_", " ")) if v else "", False),
            _col("status", "status", lambda v: Cell(v.replace("_", " ")) if v else "", False))
    return Section("metric", "Headline metric", (
        para(desc, ". Why: ", Data(m.reason), ". Lower is better; change = (NEW − BASE) / BASE; noise = ~95 % "
             "half-width of the change (docs/COMPARE.md)."),
        TablePart(cols, rows, (), "metric")), "Headline metric")


def _steps(st: StepInfo) -> Spans:
    if not st.available:
        return "none"
    return (f"{fmt_int(st.count)} (", Cell(st.method), f"), wall p50 {fmt_ms(st.p50_ns)} ms")   # the steps' own walls


def _traces(d: CompareResult, unit: str) -> Section:
    # ``units``: the step periods of the period span for step_period_p50, the steps of the tiled span for
    # step_time_p50 (docs/COMPARE.md "Over whole step periods"), else the units of work in the window
    units = f"{count_word(d.metric)}s in span" if d.metric.name in (PERIOD, STEP) else f"{unit}s in window"
    if any(t.device_count > 1 for t in d.traces):   # units summed over the devices, as the parts are
        units += ", devices summed"
    cols = (_col("trace", "label", lambda v: Code(v, 40), False),
            show_col("GPUs", lambda r: Cell(", ".join(r.gpus) or "–"), False, lambda r: list(r.gpus), "gpus"),
            _col("devices", "device_count", fmt_int),
            show_col("window (ms)", lambda r: (f"{fmt_ms(r.window_ns)} (", Cell(r.window_method), ")"),
                     True, lambda r: r.window_ns, "window_ns"),
            _col("GPU busy %", "busy_pct", fmt_pct), _col("kernels", "kernel_count", fmt_int),
            _col(units, "units", fmt_int),     # a whole count as an integer, a fraction with 3 decimals
            show_col("steps", lambda r: _steps(r.steps), False, lambda r: r.steps.count, "step_count"),
            _col("verdict", "verdict", lambda v: Rich(v), False))
    notes = [inline(_label(t), ": ", Data(n)) for t in d.traces for n in t.notes]
    return Section("traces", "Traces", parts(TablePart(cols, d.traces, (), "traces"), bullets(notes)), "Traces")


def _grid(traces: Sequence[TraceSummary], shares: SharesOf) -> List[Tuple[str, List[Optional[Share]]]]:
    """Each part name of any trace (first-seen order) with its part in each trace (None where it has none)."""
    by = [{s.name: s for s in shares(t)} for t in traces]
    return [(n, [b.get(n) for b in by]) for n in dict.fromkeys(s.name for t in traces for s in shares(t))]


def _per_unit_rows(d: CompareResult, shares: SharesOf) -> List[PerUnitRow]:
    """One row per part name: ``cells`` (per trace, then the change against BASE) and ``values`` (exact ns)."""
    rows = []
    for n, per in _grid(d.traces, shares):
        cells: List[str] = []
        values: List[Optional[int]] = []
        for i, s in enumerate(per):
            cells.append(f"{fmt_ms(s.per_unit_ns)} ({fmt_pct(s.pct_of_window)} %)" if s else "–")
            values.append(s.per_unit_ns if s else None)
            if i:
                pb, pn = (per[0].per_unit_ns if per[0] else 0), (s.per_unit_ns if s else 0)
                values.append(pn - pb if pb is not None and pn is not None else None)
                cells.append(signed_ms(values[-1]))   # "–" when either is not known
        rows.append(PerUnitRow(n, tuple(cells), tuple(values)))
    return rows


def _per_unit_col(head: Inline, j: int) -> Col:
    """Column ``j`` of the per-unit rows: its cells, with the exact ns behind each."""
    return show_col(head, lambda r: r.cells[j], True, lambda r: r.values[j])


def _stack_cols(d: CompareResult, unit: str, first: str) -> List[Col]:
    heads: List[Inline] = []
    for i, t in enumerate(d.traces):
        heads.append(inline(_label(t), f" ms/{unit} (% of window)"))
        if i:
            heads.append(inline("Δ ", _label(t)))
    return [show_col(first, lambda r: Cell(r.name), False, lambda r: r.name, "name")] + [
        _per_unit_col(h, j) for j, h in enumerate(heads)]


def _stack_chart(fid: str, d: CompareResult, shares: SharesOf, unit: str, colors: Dict[str, str], cap: str
                 ) -> Figure:
    traces = d.traces
    x = [plot_text(t.label, 40) for t in traces]
    data = []
    for n, rows in _grid(traces, shares):
        data.append({"type": "bar", "name": plot_text(n, 40), "x": x,
                     "y": [ms_value(r.per_unit_ns) if r else 0 for r in rows],
                     "marker": {"color": colors.get(n, NON_GPU_COLOR)},
                     "hovertext": [f"{plot_text(n, 60)}: {fmt_ms(r.per_unit_ns)} ms per {unit} · "
                                   f"{fmt_pct(r.pct_of_window)} % of the window" if r else "" for r in rows],
                     "hoverinfo": "text"})
    return Figure(fid, data, layout(420, "", f"ms per {unit}", barmode="stack"), (cap,))


def _stack(d: CompareResult, unit: str) -> List[Section]:
    traces = d.traces
    cats: SharesOf = attrgetter("categories")
    kinds: SharesOf = attrgetter("idle_by_kind")
    ccol = {n: CATEGORY_COLORS[i % len(CATEGORY_COLORS)]
            for i, n in enumerate(c for c, _ in _grid(traces, cats) if c != "non_gpu")}
    kcol = {s.name: kind_color(s.name, i) for t in traces for i, s in enumerate(t.idle_by_kind)}
    return [
        Section("stack", f"Time per {unit}: non-overlapped GPU time per kernel category, and non-GPU time", (
            para("Each category's share of the busy time (overlapping kernels split equally); ", Code("non_gpu"),
                 f" = window − GPU busy. The parts add up to the window time per {unit}."),
            Chart(lambda: _stack_chart("stack-categories", d, cats, unit, ccol, (
                f"Non-overlapped GPU time per kernel category and non-GPU time (window − busy), ms per {unit}; the "
                f"bar is the window time per {unit}; the table below holds the same numbers."))),
            TablePart(tuple(_stack_cols(d, unit, "part")), _per_unit_rows(d, cats), (), "categories")),
                f"Time per {unit}"),
        Section("idle", f"GPU idle per {unit} by cause", (
            para("Where the non-GPU time went (docs/MODEL.md: every idle ns is charged to one cause)."),
            Chart(lambda: _stack_chart("stack-idle", d, kinds, unit, kcol, (
                f"Non-GPU time by idle cause, ms per {unit} (docs/MODEL.md); the table below holds the same "
                "numbers."))),
            *parts(TablePart(tuple(_stack_cols(d, unit, "cause kind")), _per_unit_rows(d, kinds), (), "idle"),
                   _paced_note(d, unit))), "Idle by cause")]


def _paced_note(d: CompareResult, unit: str) -> Optional[Paragraph]:
    """The note under the idle table when a trace's ``launch`` row holds host-paced ``queued`` time
    (``TraceSummary.host_paced_ns``; docs/COMPARE.md, "Launch overhead as the report counts it"), which each report's
    own idle-cause table lists under ``queued``."""
    held = [(t, ns) for t in d.traces if (ns := t.host_paced_ns)]
    if not held:
        return None
    return para(Code("launch"), " includes the host-paced ", Code("queued"), " time of the devices each report finds "
                "launch-bound (each kernel launched only after the one before it started: launch overhead, as the "
                "launch-bound finding counts it; the report's own idle-cause table lists it under ", Code("queued"),
                "): ", joined([inline(_label(t), f" {fmt_ms(per_unit(ns, t.units))}") for t, ns in held], ", "),
                f" ms/{unit} of it (detail ", Code("host-paced queued"), " in tables/part_changes.csv).")


def _pair(i: int, c: Comparison, unit: str, top: int) -> List[Section]:
    title = inline(Code(c.new, 40), " vs ", Code(c.base, 40))
    kcols = (_col("kernel", "name", lambda v: Code(v, 80), False), _col(f"BASE ms/{unit}", "base_per_unit_ns", fmt_ms),
             _col(f"NEW ms/{unit}", "new_per_unit_ns", fmt_ms), _col("Δ ms", "delta_per_unit_ns", signed_ms),
             _col("change", "change_pct", signed_pct),
             show_col("instances", lambda r: f"{fmt_int(r.base_count)} → {fmt_int(r.new_count)}", True,
                      lambda r: r.new_count, "new_count"))
    fcols = (_col("finding", "id", Cell, False), _col("category", "category", Cell, False),
             _col("change", "change", lambda v: CHANGE_TEXT.get(v) or Cell(v), False),
             _col("BASE", "base_severity", lambda v: Cell(v or "–"), False),
             _col("NEW", "new_severity", lambda v: Cell(v or "–"), False),
             _col("title (NEW, else BASE)", "title", Rich, False))
    return [Section(f"pair-{i}", inline("Top kernel changes: ", title), (
                para(f"Kernel time per {unit} by name (analysis window, all devices), largest absolute change first."),
                TablePart(kcols, list(c.kernel_deltas[:top]), (), f"kernels-{i}")), "Kernels" if i == 0 else ""),
            Section(f"findings-{i}", inline("Findings: ", title), ((para(
                "The captures differ: ", Data("; ".join(c.capture_differences)), ". Each report's findings read what "
                "its own capture records, so a finding new, gone or of another severity here may be the capture's "
                "difference, not the code's."),) if c.capture_differences else ()) + (
                    TablePart(fcols, list(c.finding_changes), (), f"findings-{i}"),), "Findings" if i == 0 else "")]


def compare_document(d: CompareResult, top: Optional[int] = None) -> Document:
    """Every section of the comparison (``top``: kernel-change rows per NEW, default :data:`KERNEL_ROWS`)."""
    unit = UNIT_WORD.get(d.metric.basis, "unit")
    sections = [_headline(d), _metric(d), _traces(d, unit)] + _stack(d, unit)
    for i, c in enumerate(d.comparisons):
        sections += _pair(i, c, unit, top or KERNEL_ROWS)
    if d.warnings:
        sections.append(Section("warnings", "Warnings", parts(bullets([Data(w) for w in d.warnings]))))
    sections.append(Section("generated", "", (para("Generated by nsys-llm-explain ", Data(d.tool_version),
                                                   " (compare.json schema ", Data(COMPARE_SCHEMA_VERSION), ").",
                                                   cls="meta"),), tag="footer"))
    # the page title (HTML <title>) names each trace as the headline does: shortened (a --labels label is unbounded)
    return Document("Trace comparison: " + ", ".join(shorten(t.label, 40) for t in d.traces), tuple(sections))


def render_compare_html(result: CompareResult, js: Optional[str] = None, top: Optional[int] = None) -> str:
    """The full ``compare.html`` of the comparison: its document as one self-contained, offline page, with stacked
    bars of the time per unit of work (``js``: :func:`render.html.writer.html_page`)."""
    return html_page(compare_document(result, top), js)


__all__ = ["compare_document", "render_compare_html"]
