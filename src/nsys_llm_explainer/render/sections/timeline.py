"""Per-device timeline of the analysis window (``timeline.devices[]``), HTML only: per device one stacked bar per bin
(busy, then idle by cause in precedence order; copy time a line), the window's edges dashed, the largest gaps
shaded and listed in a table. report.md has the idle causes and the largest gaps as text."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Sequence

from ...vocabulary.cause_kinds import KINDS
from ...vocabulary.units import fmt_at, fmt_dur, fmt_int, fmt_ms, ms_value, us_value
from ..charts import BUSY_LABEL, idle_label, in_kind_order, kind_color, layout, plot_text
from ..document import (
    Chart,
    Code,
    Details,
    Figure,
    Heading,
    Inline,
    Part,
    Section,
    SectionResult,
    TablePart,
    inline,
    para,
)
from ..table import Joined, name_col, show_col, text_col
from .ctx import View
from .idle import causes_legend

if TYPE_CHECKING:
    from ...analyses.idle.bins import DeviceBins
    from ...analyses.idle.gpu_time import Gap

#: gaps labelled on the chart (all of ``largest_gaps`` are shaded and listed in the table)
GAP_LABELS = 5
#: share of the window length shown beyond each window edge (when the capture extends there)
MARGIN = 0.04


def _window_marks(ctx: View, shapes: List[Dict[str, Any]], notes: List[Dict[str, Any]]) -> List[float]:
    """Adds the shapes and labels of the analysis window edges (and the shaded rest of the capture); returns the
    initial x range: the analysis window with a margin of :data:`MARGIN` of its length each side (inside the
    capture), so both edges and a sliver of the excluded capture are visible; zoom out for all."""
    w = ctx.r.window
    full0, full1 = ctx.rel_ms(w.full_start_ns), ctx.rel_ms(w.full_end_ns)
    w0, w1 = ctx.rel_ms(w.start_ns), ctx.rel_ms(w.end_ns)
    for x0, x1 in ((full0, w0), (w1, full1)):
        if x1 > x0:
            shapes.append({"type": "rect", "xref": "x", "yref": "paper", "x0": x0, "x1": x1, "y0": 0, "y1": 1,
                           "fillcolor": "#bdbdbd", "opacity": 0.35, "line": {"width": 0}, "layer": "below"})
            notes.append({"x": (x0 + x1) / 2, "y": 0.5, "xref": "x", "yref": "paper", "showarrow": False,
                          "text": "outside the<br>analysis window", "font": {"size": 10, "color": "#616161"}})
    for x, label in ((w0, "window start"), (w1, "window end")):
        shapes.append({"type": "line", "xref": "x", "yref": "paper", "x0": x, "x1": x, "y0": 0, "y1": 1,
                       "line": {"color": "#212121", "width": 1.5, "dash": "dash"}})
        notes.append({"x": x, "y": 1.0, "xref": "x", "yref": "paper", "yanchor": "bottom", "showarrow": False,
                      "text": label, "font": {"size": 10}, "xanchor": "left" if label == "window start" else "right"})
    pad = (w1 - w0) * MARGIN
    return [max(full0, w0 - pad), min(full1, w1 + pad)]


def _gap_marks(ctx: View, gaps: Sequence[Gap], shapes: List[Dict[str, Any]], notes: List[Dict[str, Any]]) -> None:
    """Adds a shaded band per listed gap, the first :data:`GAP_LABELS` numbered."""
    for i, g in enumerate(gaps, 1):  # one iteration per listed gap (at most the analysis's cap)
        x0, x1 = ctx.rel_ms(g.start_ns), ctx.rel_ms(g.end_ns)
        color = kind_color(g.cause_kind)
        shapes.append({"type": "rect", "xref": "x", "yref": "paper", "x0": x0, "x1": x1, "y0": 0, "y1": 1,
                       "fillcolor": color, "opacity": 0.3, "line": {"color": color, "width": 1}})
        if i <= GAP_LABELS:
            cause = plot_text(g.cause_kind) + (f" {plot_text(g.cause_detail)}" if g.cause_detail else "")
            hover = (f"gap #{i}: {fmt_dur(g.duration_ns)} ({ctx.span(g.start_ns, g.end_ns)})"
                     f"<br>cause: {cause}<br>before: {plot_text(g.kernel_before)}"
                     f"<br>after: {plot_text(g.kernel_after)}")
            notes.append({"x": (x0 + x1) / 2, "y": 1.0, "xref": "x", "yref": "paper", "yanchor": "bottom",
                          "yshift": 12, "showarrow": False, "text": f"#{i}", "hovertext": hover,
                          "font": {"size": 10, "color": color}})


def _bins(ctx: View, edges: List[int]) -> Dict[str, Any]:
    """Bar positions shared by every trace of a device: bin start (ms from trace start) and width (ms)."""
    return {"x": [ctx.rel_ms(e) for e in edges[:-1]], "width": [ms_value(b - a) for a, b in zip(edges[:-1], edges[1:])]}


def _traces(dev: DeviceBins, n: int, unit: str) -> List[Dict[str, Any]]:
    """The stacked series of one device; ``x`` / ``width`` come from the figure's shared bins."""
    conv = us_value if unit == "µs" else ms_value

    def bar(name: str, series: Any, color: str, what: str) -> Dict[str, Any]:
        return {"type": "bar", "name": name, "offset": 0,
                "y": [conv(v) for v in series], "marker": {"color": color, "line": {"width": 0}},
                "hovertemplate": f"%{{y:,.3f}} {unit}<extra>{what}</extra>"}

    traces = [bar(BUSY_LABEL, dev.busy_ns, kind_color("busy"), "busy")]
    by_kind = dev.idle_ns_by_kind
    for i, kind in enumerate(in_kind_order(by_kind)):
        series = by_kind[kind]
        if len(series) == n:
            name = idle_label(kind)
            traces.append(bar(name, series, kind_color(kind, i), name))
    copy = dev.copy_ns
    if len(copy) == n and any(copy):
        traces.append({"type": "scatter", "mode": "lines", "name": "copy engine busy (may overlap kernels)",
                       "width": None,  # a line: keep the shared bar widths off it
                       "y": [conv(v) for v in copy], "visible": "legendonly",
                       "line": {"color": kind_color("copy"), "width": 1, "shape": "hv"},
                       "hovertemplate": f"%{{y:,.3f}} {unit}<extra>copy engine</extra>"})
    return traces


def _gap_table(v: View, tid: str, gaps: Sequence[Gap]) -> TablePart:
    cols = (show_col("#", lambda r: str(r.rank), True, lambda r: r.rank),
            show_col("start (ms from trace start)", lambda r: fmt_at(r.start_ns, v.t0, unit=False), True,
                     lambda r: r.start_ns, "start_ns"),
            show_col("duration (ms)", lambda r: fmt_ms(r.duration_ns), True, lambda r: r.duration_ns, "duration_ns"),
            text_col("cause_kind", "cause_kind", "cause"), name_col("cause_detail", "cause_detail", "detail"),
            name_col("kernel_before", "kernel_before", "kernel before"),
            name_col("kernel_after", "kernel_after", "kernel after"))
    return TablePart(cols, [Joined(g, {"rank": i}) for i, g in enumerate(gaps, 1)], (), tid)


def _figure(v: View, i: int, dev: DeviceBins, edges: List[int], gaps: List[Gap]) -> Figure:
    did = dev.device_id
    unit = "µs" if (edges[-1] - edges[0]) / max(1, len(edges) - 1) < 1e7 else "ms"
    shapes: List[Dict[str, Any]] = []
    notes: List[Dict[str, Any]] = []
    x_range = _window_marks(v, shapes, notes)
    _gap_marks(v, gaps, shapes, notes)
    lay = layout(340, "ms from trace start", f"{unit} of each bin", barmode="stack", bargap=0,
                 hovermode="x unified", shapes=shapes, annotations=notes)
    lay["margin"]["t"] = 40
    lay["legend"]["traceorder"] = "normal"
    lay["xaxis"]["range"] = x_range
    cap = inline("Busy and idle time of ", v.device(did), f" in each of {fmt_int(len(edges) - 1)} bins of the "
                 f"analysis window; idle coloured by cause, the {len(gaps)} largest gaps shaded (the largest "
                 f"{GAP_LABELS} numbered; hover a number). Text equivalent: report.json ", Code("timeline.devices[]"),
                 " (per-bin ", Code("busy_ns"), ", ", Code("idle_ns_by_kind"), ", ", Code("copy_ns"), ") and ",
                 Code("idle_causes.devices[]"), "; gaps: ", Code("devices[].largest_gaps"), " (section “Largest idle "
                 "gaps”, ", Code("tables/gpu_idle_gaps.csv"), ").")
    return Figure(f"timeline-{i}", _traces(dev, len(edges) - 1, unit), lay, cap, _bins(v, edges))


def _device_block(v: View, i: int, dev: DeviceBins, gaps_by_dev: Mapping[int, Sequence[Gap]]) -> List[Part]:
    edges = list(dev.edges_ns) if dev.busy_ns else None
    out: List[Part] = [Heading(3, v.device(dev.device_id))]
    if edges is None:
        return out + [para("No bins for this device in ", Code("timeline.devices[]"), ".")]
    gaps = sorted(gaps_by_dev.get(dev.device_id, ()), key=lambda g: -g.duration_ns)
    out.append(Chart(lambda: _figure(v, i, dev, edges, gaps)))
    if gaps:
        out.append(Details(("Largest gaps of this device",), (_gap_table(v, f"gaps-dev-{i}", gaps),)))
    return out


def sec_timeline(v: View) -> SectionResult:
    title = "Timeline of the analysis window"
    devs = v.r.idle_causes.bins
    if not devs:
        why: Inline = (Code("timeline.devices"), " is empty (no device timeline in the window)")
        return Section("timeline", title, (para("No per-device timeline: ", why, ". The idle causes below still say "
                                                "where the idle time went.", cls="missing"),), "Timeline",
                       html_only=True)
    gaps_by_dev = {d.device_id: d.largest_gaps for d in v.r.gpu_time.devices}
    legend = causes_legend(KINDS)
    body: List[Part] = [para("Each bar is one bin of the window: busy time at the bottom, then the bin's idle time "
                             "by cause (docs/MODEL.md precedence). Drag to zoom, double-click to reset.")]
    for i, d in enumerate(devs):
        body += _device_block(v, i, d, gaps_by_dev)
    if legend:
        body.append(para(legend, cls="legend"))
    return Section("timeline", title, tuple(body), "Timeline", html_only=True)
