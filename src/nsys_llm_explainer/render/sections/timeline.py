"""Per-device timeline of the analysis window (``timeline.devices[]``) with the largest gaps marked.

One stacked bar chart per device: each bar is one bin of the window as binned by the analysis
(``edges_ns``, or ``start_ns + i · bin_ns``), its height the bin's ns split into ``busy_ns`` then
``idle_ns_by_kind[kind]`` in the idle-cause precedence (so every bar is the bin's width). Copy-engine time
(``copy_ns``, which may overlap kernels) is an optional line. Dashed lines mark the analysis window edges
(``window.start_ns`` / ``end_ns``; the part of the capture outside it is shaded), shaded boxes the device's
``largest_gaps`` coloured by their cause, the largest ones labelled. A table lists the gaps. The section is HTML
only (report.md has the idle causes and the largest gaps as text).
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence

from ...vocabulary.units import fmt_at, fmt_dur, fmt_int, fmt_ms, ms_value, us_value
from ..base import Row, rows_of, section
from ..charts import BUSY_LABEL, idle_label, kind_color, layout, plot_text
from ..document import (
    Chart,
    Code,
    Details,
    Em,
    Figure,
    Heading,
    Inline,
    Part,
    Section,
    SectionResult,
    TablePart,
    inline,
    joined,
    para,
)
from ..table import name_col, show_col, text_col
from .ctx import View
from .idle import KIND_MEANING

#: gaps labelled on the chart (all of ``largest_gaps`` are shaded and listed in the table)
GAP_LABELS = 5
#: share of the window length shown beyond each window edge (when the capture extends there)
MARGIN = 0.04


def _edges(dev: Row) -> Optional[List[int]]:
    """Bin edges of a device: ``edges_ns`` when present, else ``start_ns + i · bin_ns`` capped at ``end_ns``."""
    busy = dev.get("busy_ns")
    if not isinstance(busy, list) or not busy:
        return None
    n = len(busy)
    edges = dev.get("edges_ns")
    if isinstance(edges, list) and len(edges) == n + 1:
        return edges
    start, end, width = dev.get("start_ns"), dev.get("end_ns"), dev.get("bin_ns")
    if not (isinstance(start, int) and isinstance(end, int) and isinstance(width, int)):
        return None
    return [min(start + i * width, end) for i in range(n)] + [end]


def _kinds(ctx: View, by_kind: Mapping[str, Any]) -> List[str]:
    order = [str(k) for k in (ctx.sec("idle_causes").get("precedence") or [])]
    return [k for k in order if k in by_kind] + sorted(k for k in by_kind if k not in order)


def _window_marks(ctx: View) -> Dict[str, List[Dict[str, Any]]]:
    """Shapes and labels for the analysis window edges (and the shaded rest of the capture)."""
    w = ctx.window
    shapes: List[Dict[str, Any]] = []
    notes: List[Dict[str, Any]] = []
    full0, full1 = ctx.rel_ms(w.get("full_start_ns")), ctx.rel_ms(w.get("full_end_ns"))
    w0, w1 = ctx.rel_ms(w.get("start_ns")), ctx.rel_ms(w.get("end_ns"))
    for x0, x1 in ((full0, w0), (w1, full1)):
        if x0 is not None and x1 is not None and x1 > x0:
            shapes.append({"type": "rect", "xref": "x", "yref": "paper", "x0": x0, "x1": x1, "y0": 0, "y1": 1,
                           "fillcolor": "#bdbdbd", "opacity": 0.35, "line": {"width": 0}, "layer": "below"})
            notes.append({"x": (x0 + x1) / 2, "y": 0.5, "xref": "x", "yref": "paper", "showarrow": False,
                          "text": "outside the<br>analysis window", "font": {"size": 10, "color": "#616161"}})
    for x, label in ((w0, "window start"), (w1, "window end")):
        if x is not None:
            shapes.append({"type": "line", "xref": "x", "yref": "paper", "x0": x, "x1": x, "y0": 0, "y1": 1,
                           "line": {"color": "#212121", "width": 1.5, "dash": "dash"}})
            notes.append({"x": x, "y": 1.0, "xref": "x", "yref": "paper", "yanchor": "bottom", "showarrow": False,
                          "text": label, "font": {"size": 10},
                          "xanchor": "left" if label == "window start" else "right"})
    return {"shapes": shapes, "annotations": notes}


def _gap_marks(ctx: View, gaps: Sequence[Row]) -> Dict[str, List[Dict[str, Any]]]:
    shapes: List[Dict[str, Any]] = []
    notes: List[Dict[str, Any]] = []
    for i, g in enumerate(gaps, 1):  # one iteration per listed gap (at most the analysis's cap)
        x0, x1 = ctx.rel_ms(g.get("start_ns")), ctx.rel_ms(g.get("end_ns"))
        if x0 is None or x1 is None:
            continue
        color = kind_color(str(g.get("cause_kind")))
        shapes.append({"type": "rect", "xref": "x", "yref": "paper", "x0": x0, "x1": x1, "y0": 0, "y1": 1,
                       "fillcolor": color, "opacity": 0.3, "line": {"color": color, "width": 1}})
        if i <= GAP_LABELS:
            cause = plot_text(g.get("cause_kind")) + (f" {plot_text(g.get('cause_detail'))}"
                                                      if g.get("cause_detail") else "")
            hover = (f"gap #{i}: {fmt_dur(g.get('duration_ns'))} ({ctx.span(g.get('start_ns'), g.get('end_ns'))})"
                     f"<br>cause: {cause}<br>before: {plot_text(g.get('kernel_before'))}"
                     f"<br>after: {plot_text(g.get('kernel_after'))}")
            notes.append({"x": (x0 + x1) / 2, "y": 1.0, "xref": "x", "yref": "paper", "yanchor": "bottom",
                          "yshift": 12, "showarrow": False, "text": f"#{i}", "hovertext": hover,
                          "font": {"size": 10, "color": color}})
    return {"shapes": shapes, "annotations": notes}


def _bins(ctx: View, edges: List[int]) -> Dict[str, Any]:
    """Bar positions shared by every trace of a device: bin start (ms from trace start) and width (ms)."""
    return {"x": [ctx.rel_ms(e) for e in edges[:-1]], "width": [ms_value(b - a) for a, b in zip(edges[:-1], edges[1:])]}


def _traces(ctx: View, dev: Row, n: int, unit: str) -> List[Dict[str, Any]]:
    """The stacked series of one device; ``x`` / ``width`` come from the figure's shared bins."""
    conv = us_value if unit == "µs" else ms_value

    def bar(name: str, series: Any, color: str, what: str) -> Dict[str, Any]:
        return {"type": "bar", "name": name, "offset": 0,
                "y": [conv(v) for v in series], "marker": {"color": color, "line": {"width": 0}},
                "hovertemplate": f"%{{y:,.3f}} {unit}<extra>{what}</extra>"}

    traces = [bar(BUSY_LABEL, dev.get("busy_ns") or [], kind_color("busy"), "busy")]
    by_kind = section(dev, "idle_ns_by_kind")
    for i, kind in enumerate(_kinds(ctx, by_kind)):
        series = by_kind.get(kind)
        if isinstance(series, list) and len(series) == n:
            name = idle_label(kind)
            traces.append(bar(name, series, kind_color(kind, i), name))
    copy = dev.get("copy_ns")
    if isinstance(copy, list) and len(copy) == n and any(copy):
        traces.append({"type": "scatter", "mode": "lines", "name": "copy engine busy (may overlap kernels)",
                       "width": None,  # a line: keep the shared bar widths off it
                       "y": [conv(v) for v in copy], "visible": "legendonly",
                       "line": {"color": kind_color("copy"), "width": 1, "shape": "hv"},
                       "hovertemplate": f"%{{y:,.3f}} {unit}<extra>copy engine</extra>"})
    return traces


def _gap_table(v: View, tid: str, gaps: Sequence[Row]) -> TablePart:
    cols = (show_col("#", lambda r: str(r.get("_rank")), True, lambda r: r.get("_rank")),
            show_col("start (ms from trace start)", lambda r: fmt_at(r.get("start_ns"), v.t0, unit=False), True,
                     lambda r: r.get("start_ns"), "start_ns"),
            show_col("duration (ms)", lambda r: fmt_ms(r.get("duration_ns")), True, lambda r: r.get("duration_ns"),
                     "duration_ns"),
            text_col("cause_kind", "cause_kind", "cause"), name_col("cause_detail", "cause_detail", "detail"),
            name_col("kernel_before", "kernel_before", "kernel before"),
            name_col("kernel_after", "kernel_after", "kernel after"))
    return TablePart(cols, [{**g, "_rank": i} for i, g in enumerate(gaps, 1)], (), tid)


def _x_range(ctx: View) -> List[Optional[float]]:
    """The initial x range: the analysis window with a margin of :data:`MARGIN` of its length each side
    (inside the capture), so both edges and a sliver of the excluded capture are visible; zoom out for all."""
    w = ctx.window
    full0, full1 = ctx.rel_ms(w.get("full_start_ns")), ctx.rel_ms(w.get("full_end_ns"))
    w0, w1 = ctx.rel_ms(w.get("start_ns")), ctx.rel_ms(w.get("end_ns"))
    if full0 is None or full1 is None or w0 is None or w1 is None:
        return [full0, full1]
    pad = (w1 - w0) * MARGIN
    return [max(full0, w0 - pad), min(full1, w1 + pad)]


def _figure(v: View, i: int, dev: Row, edges: List[int], gaps: List[Row]) -> Figure:
    did = dev.get("device_id")
    unit = "µs" if (edges[-1] - edges[0]) / max(1, len(edges) - 1) < 1e7 else "ms"
    marks = _window_marks(v)
    gm = _gap_marks(v, gaps)
    x_range = _x_range(v)
    lay = layout(340, "ms from trace start", f"{unit} of each bin", barmode="stack", bargap=0,
                 hovermode="x unified", shapes=marks["shapes"] + gm["shapes"],
                 annotations=marks["annotations"] + gm["annotations"])
    lay["margin"]["t"] = 40
    lay["legend"]["traceorder"] = "normal"
    if None not in x_range:
        lay["xaxis"]["range"] = x_range
    cap = inline("Busy and idle time of ", v.device(did), f" in each of {fmt_int(len(edges) - 1)} bins of the "
                 f"analysis window; idle coloured by cause, the {len(gaps)} largest gaps shaded (the largest "
                 f"{GAP_LABELS} numbered; hover a number). Text equivalent: report.json ", Code("timeline.devices[]"),
                 " (per-bin ", Code("busy_ns"), ", ", Code("idle_ns_by_kind"), ", ", Code("copy_ns"), ") and ",
                 Code("idle_causes.devices[]"), "; gaps: ", Code("devices[].largest_gaps"), " (section “Largest idle "
                 "gaps”, ", Code("tables/gpu_idle_gaps.csv"), ").")
    return Figure(f"timeline-{i}", _traces(v, dev, len(edges) - 1, unit), lay, cap, _bins(v, edges))


def _device_block(v: View, i: int, dev: Row, gaps_by_dev: Dict[Any, List[Row]]) -> List[Part]:
    edges = _edges(dev)
    out: List[Part] = [Heading(3, v.device(dev.get("device_id")))]
    if edges is None:
        return out + [para("No bins for this device in ", Code("timeline.devices[]"), ".")]
    gaps = sorted(gaps_by_dev.get(dev.get("device_id"), []), key=lambda g: -(g.get("duration_ns") or 0))
    out.append(Chart(lambda: _figure(v, i, dev, edges, gaps)))
    if gaps:
        out.append(Details(("Largest gaps of this device",), (_gap_table(v, f"gaps-dev-{i}", gaps),)))
    return out


def sec_timeline(v: View) -> SectionResult:
    title = "Timeline of the analysis window"
    tl = v.sec("timeline")
    devs = rows_of(tl, "devices")
    if not devs:
        why: Inline = (("this report.json has no ", Code("timeline"), " section (written by an older version)")
                       if not tl else (Code("timeline.devices"), " is empty (no device timeline in the window)"))
        return Section("timeline", title, (para("No per-device timeline: ", why, ". The idle causes below still say "
                                                "where the idle time went.", cls="missing"),), "Timeline",
                       html_only=True)
    gaps_by_dev: Dict[Any, List[Row]] = {d.get("device_id"): rows_of(d, "largest_gaps") for d in v.rows("devices")}
    kinds = [k for k in (v.sec("idle_causes").get("precedence") or []) if k in KIND_MEANING]
    legend = joined([inline(Code(k), f": {KIND_MEANING[k]}") for k in kinds], "; ")
    body: List[Part] = [para("Each bar is one bin of the window: busy time at the bottom, then the bin's idle time "
                             "by cause (docs/MODEL.md precedence). Drag to zoom, double-click to reset.")]
    for i, d in enumerate(devs):
        body += _device_block(v, i, d, gaps_by_dev)
    if legend:
        body.append(para(Em(("Causes:",)), " ", legend, ".", cls="legend"))
    return Section("timeline", title, tuple(body), "Timeline", html_only=True)
