"""Where the time went: idle causes per device (``idle_causes.devices[].causes``), kernel categories
(``categories.overall``, non-overlapped time) and the top kernels (``steady_kernels.by_name`` when the
window was trimmed, else ``kernels_summary.by_name``). Each chart has the table of the same rows under it."""

from __future__ import annotations

from typing import Any, Dict, List, Sequence, Tuple

from ..base import Row, available, fmt_dur, fmt_int, fmt_pct, num, rows_of
from ..host_samples import attach, captured, samples_note
from ..markdown.idle import KIND_MEANING
from .ctx import HtmlCtx, kind_color, layout, ms
from .markup import (
    Col,
    code,
    h,
    int_col,
    ms_col,
    name_col,
    pct_col,
    plot_text,
    rich,
    section,
    table,
    text_col,
    us_col,
)

#: bars of an idle-cause chart when the analysis did not fold the tail into ``other``
CHART_CAUSES = 15
#: rows of an idle-cause table (all rows are in tables/idle_causes.csv)
TABLE_CAUSES = 100
#: rows of the top-kernel table, at least (``options.top`` when larger)
KERNEL_ROWS = 50
#: characters of a cause detail in a chart label (the table and CSV hold it in full)
LABEL_DETAIL = 60


def _label(kind: Any, detail: Any) -> str:
    return plot_text(kind) + (f": {plot_text(detail, LABEL_DETAIL)}" if detail else "")


def _hbar(ctx: HtmlCtx, fid: str, labels: List[str], values_ns: List[Any], colors: List[str],
          hover: List[str], caption: str) -> str:
    """A horizontal bar chart in ms, first row on top; labels are tick texts (already plotly-escaped)."""
    idx = list(range(len(labels)))
    data = [{"type": "bar", "orientation": "h", "y": idx, "x": [ms(v) for v in values_ns],
             "marker": {"color": colors}, "hovertext": hover, "hoverinfo": "text", "showlegend": False}]
    lay = layout(max(160, 60 + 26 * len(labels)), "ms", "")
    lay["yaxis"].update({"tickvals": idx, "ticktext": labels, "autorange": "reversed", "automargin": True})
    lay["margin"]["l"] = 20
    return ctx.figure(fid, data, lay, caption)


def _device_line(ctx: HtmlCtx, d: Row) -> str:
    full = d.get("full") if isinstance(d.get("full"), dict) else {}
    line = (f"<strong>{ctx.device(d.get('device_id'))}:</strong> busy {h(fmt_dur(d.get('busy_ns')))} "
            f"({fmt_pct(d.get('busy_pct'))} %), idle {h(fmt_dur(d.get('idle_ns')))} "
            f"({fmt_pct(d.get('idle_pct'))} %) of the {h(fmt_dur(d.get('window_ns')))} window")
    if full and full.get("window_ns") != d.get("window_ns"):
        line += (f"; whole capture: busy {fmt_pct(full.get('busy_pct'))} %, idle {h(fmt_dur(full.get('idle_ns')))} "
                 f"of {h(fmt_dur(full.get('window_ns')))}")
    line += f". {fmt_int(d.get('kernel_count'))} kernels, {fmt_int(d.get('gap_count'))} gaps."
    return f"<p>{line}</p>"


def _cause_chart(ctx: HtmlCtx, i: int, dc: Row, causes: Sequence[Row]) -> str:
    other = dc.get("other") if isinstance(dc.get("other"), dict) else {}
    folded = bool(num(other.get("count")))
    shown = list(causes[: int(other.get("after_rows") or 0)]) if folded else list(causes[:CHART_CAUSES])
    labels = [_label(c.get("kind"), c.get("detail")) for c in shown]
    values = [c.get("ns") for c in shown]
    colors = [kind_color(str(c.get("kind")), j) for j, c in enumerate(shown)]
    hover = [f"{lab}<br>{h(fmt_dur(c.get('ns')))} idle · {fmt_pct(c.get('pct_of_window'))} % of the window · "
             f"{fmt_pct(c.get('pct_of_idle'))} % of idle · {fmt_int(c.get('gap_count'))} gaps"
             for lab, c in zip(labels, shown)]
    if folded:
        labels.append(f"other ({fmt_int(other.get('count'))} causes)")
        values.append(other.get("ns"))
        colors.append("#bdbdbd")
        hover.append(f"{fmt_int(other.get('count'))} more causes: {h(fmt_dur(other.get('ns')))} · "
                     f"{fmt_pct(other.get('pct_of_window'))} % of the window")
        note = f"the first {len(shown)} causes and the rest folded into “other” by the analysis"
    else:
        note = (f"the first {len(shown)} of {len(causes)} causes" if len(causes) > len(shown) else "every cause")
    cap = (f"Idle time of {ctx.device(dc.get('device_id'))} by cause ({note}). Text equivalent: report.json "
           "<code>idle_causes.devices[].causes</code> (and <code>.other</code>), the table below, report.md "
           "“Where the idle time went”, <code>tables/idle_causes.csv</code>.")
    return _hbar(ctx, f"idle-causes-{i}", labels, values, colors, hover, cap)


def _cause_table(ctx: HtmlCtx, i: int, causes: Sequence[Row]) -> str:
    def example(r: Row) -> str:
        ex = rows_of(r, "examples")
        return h(ctx.span(ex[0].get("start_ns"), ex[0].get("end_ns"))) if ex else ""

    cols: Tuple[Col, ...] = (text_col("kind", "kind"), name_col("detail", "detail", 80), ms_col("idle (ms)", "ns"),
            pct_col("% of window", "pct_of_window"), pct_col("% of idle", "pct_of_idle"),
            int_col("gaps", "gap_count"),
            Col("largest example (ms from capture start)", example, numeric=False))
    if captured(ctx.report):   # CPU samples inside each host-side cause (render/host_samples.py)
        cols += (text_col("host samples", "host_samples"),)
    shown = list(causes[:TABLE_CAUSES])
    cap = (f"Showing {len(shown)} of {len(causes)} causes; all in <code>tables/idle_causes.csv</code>."
           if len(causes) > len(shown) else "")
    return table(f"idle-causes-dev-{i}", cols, shown, cap)


def sec_idle(ctx: HtmlCtx) -> str:
    devices = ctx.rows("devices")
    ic = ctx.sec("idle_causes")
    if not devices:
        why = ic.get("reason") or ctx.sec("gpu_time").get("reason") or "no device timeline"
        return section("idle", "Where the idle time went", [f'<p class="missing">Not available: {h(why)}.</p>'])
    by_dev: Dict[Any, Row] = {d.get("device_id"): d for d in rows_of(ic, "devices")}
    body: List[str] = []
    if ic.get("available"):
        body.append("<p>Every idle ns of a device's window is charged to one cause (first match in the "
                    "precedence of docs/MODEL.md); each table's rows add up to that device's idle time.</p>")
    else:
        body.append(f'<p class="missing">Idle causes not available: {h(ic.get("reason"))}.</p>')
    kinds: List[str] = []
    for i, d in enumerate(devices):  # one iteration per device
        body.append(f"<h3>{ctx.device(d.get('device_id'))}</h3>" + _device_line(ctx, d))
        dc = by_dev.get(d.get("device_id"), {})
        causes = attach(ctx.report, d.get("device_id"), rows_of(dc, "causes"))
        if causes:
            body.append(_cause_chart(ctx, i, dc, causes) + _cause_table(ctx, i, causes))
            kinds += [str(c.get("kind")) for c in causes]
    legend = [f"{code(k)}: {h(KIND_MEANING[k])}" for k in dict.fromkeys(kinds) if k in KIND_MEANING]
    if legend:
        body.append('<p class="legend"><em>Causes:</em> ' + "; ".join(legend) + ".</p>")
    note = samples_note(ctx.report, list(dict.fromkeys(kinds)))
    if note:
        body.append(f'<p class="legend"><em>Host samples:</em> {rich(note)}</p>')
    return section("idle", "Where the idle time went", body)


def sec_categories(ctx: HtmlCtx) -> str:
    cat = ctx.sec("categories")
    rows = ctx.rows("categories", "overall")
    if not available(cat) or not rows:
        return section("categories", "Kernel categories",
                       [f'<p class="missing">Not available: {h(cat.get("reason") or "no categories")}.</p>'])
    labels = [plot_text(r.get("category"), 40) for r in rows]
    hover = [f"{lab}<br>{h(fmt_dur(r.get('nonoverlap_ns')))} not overlapped · {fmt_pct(r.get('nonoverlap_pct'))} %"
             f" · {fmt_int(r.get('count'))} kernels" for lab, r in zip(labels, rows)]
    colors = ["#1565c0"] * len(rows)
    cap = ("Non-overlapped kernel time per category, whole capture, all devices. Text equivalent: report.json "
           "<code>categories.overall[]</code> (<code>nonoverlap_ns</code>, <code>nonoverlap_pct</code>), the "
           "table below, report.md “Kernel categories”, <code>tables/categories.csv</code>.")
    note = f"<p>Preset {code(cat.get('preset'))}" + (f" — {h(cat.get('preset_reason'))}" if cat.get(
        "preset_reason") else "") + ".</p>"
    chart = _hbar(ctx, "categories-chart", labels, [r.get("nonoverlap_ns") for r in rows], colors, hover, cap)
    top = Col("top kernel", lambda r: _top_kernel(r), numeric=False)
    cols = (text_col("category", "category"), int_col("kernels", "count"), ms_col("total (ms)", "total_ns"),
            pct_col("% of kernel time", "pct"), ms_col("non-overlapped (ms)", "nonoverlap_ns"),
            pct_col("non-overlapped %", "nonoverlap_pct"), top)
    return section("categories", "Kernel categories", [note, chart, table("categories", cols, rows)])


def _top_kernel(r: Row) -> str:
    tops = rows_of(r, "top_kernels")
    return name_col("", "name", 60).cell(tops[0]) if tops else ""


def sec_kernels(ctx: HtmlCtx) -> str:
    ks = ctx.sec("kernels_summary")
    st = ctx.sec("steady_kernels")
    if available(st) and ctx.rows("steady_kernels", "by_name"):
        rows, src = ctx.rows("steady_kernels", "by_name"), "steady_kernels.by_name"
        scope = (f"<strong>Analysis window</strong>, all devices (kernels clipped to it): "
                 f"{fmt_int(st.get('kernel_count'))} kernels, {h(fmt_dur(st.get('total_kernel_ns')))} of summed "
                 "kernel time.")
    elif available(ks) and ctx.rows("kernels_summary", "by_name"):
        rows, src = ctx.rows("kernels_summary", "by_name"), "kernels_summary.by_name"
        scope = (f"<strong>Whole capture</strong>, all devices: {fmt_int(ks.get('kernel_count'))} kernels, "
                 f"{h(fmt_dur(ks.get('total_kernel_ns')))} of summed kernel time.")
    else:
        return section("kernels", "Top kernels",
                       [f'<p class="missing">Not available: {h(ks.get("reason") or "no kernels")}.</p>'])
    shown = rows[: max(ctx.top, KERNEL_ROWS)]
    count = (f"Showing {len(shown)} of {len(rows)} names" if len(rows) > len(shown)
             else f"All {len(rows)} names")
    note = (f"<p>{scope} {count}; click a column header to sort. Text equivalent: report.json "
            f"<code>{src}</code>, report.md “Top kernels”, <code>tables/kernels.csv</code> (per device).</p>")
    cols = (name_col("kernel", "name"), int_col("count", "count"), ms_col("total (ms)", "total_ns"),
            pct_col("% of kernel time", "pct"), us_col("avg (µs)", "avg_ns"), us_col("p50 (µs)", "p50_ns"),
            us_col("p90 (µs)", "p90_ns"), us_col("p99 (µs)", "p99_ns"), us_col("min (µs)", "min_ns"),
            us_col("max (µs)", "max_ns"))
    return section("kernels", "Top kernels", [note, table("top-kernels", cols, shown)])


__all__ = ["sec_categories", "sec_idle", "sec_kernels"]
