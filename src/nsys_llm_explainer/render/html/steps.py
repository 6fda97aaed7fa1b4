"""Per-step time series and distribution (``steps.rows``, ``steps.by_phase``), when steps were found.

The page never ships every step of a long run: at most :data:`MAX_STEP_POINTS` rows are plotted — when
``steps.rows`` holds more, every k-th row (k = ⌈rows / MAX_STEP_POINTS⌉, in step order) plus the slowest
steps of ``steps.slowest`` — and the caption says so. The distribution chart bins the same plotted steps in
the page; the exact per-phase percentiles are the table under it (``steps.by_phase``).
"""

from __future__ import annotations

from typing import Any, Dict, List

from ..base import Row, available, fmt_int, rows_of
from .ctx import HtmlCtx, layout, ms
from .markup import code, h, int_col, ms_col, plot_text, section, table, text_col

#: most step points plotted (the time series and the histogram)
MAX_STEP_POINTS = 4000
#: phases with a distribution chart of their own (every phase is in the table)
MAX_HIST_PHASES = 4
#: the time series uses a log y axis when the longest plotted step is this many times the shortest
LOG_RATIO = 100
PHASE_COLORS = ("#1565c0", "#ef6c00", "#2e7d32", "#6a1b9a", "#c62828", "#00838f", "#9e9d24", "#5d4037")
HOVER = ("step %{customdata[0]} · pid %{customdata[1]} · device %{customdata[2]}<br>start %{x:,.3f} ms · "
         "wall %{y:,.3f} ms<br>GPU busy %{customdata[3]:,.3f} ms · idle %{customdata[4]:,.3f} ms · "
         "sync %{customdata[5]:,.3f} ms · %{customdata[6]} kernels")


def plotted_steps(steps: Row) -> List[Row]:
    """The step rows drawn: all of them up to :data:`MAX_STEP_POINTS`, else every k-th plus the slowest."""
    rows = rows_of(steps, "rows")
    if len(rows) <= MAX_STEP_POINTS:
        return rows
    k = -(-len(rows) // MAX_STEP_POINTS)
    picked = rows[::k]
    seen = {r.get("index") for r in picked}
    extra = [r for r in rows_of(steps, "slowest") if r.get("index") not in seen]
    return sorted(picked + extra, key=lambda r: (r.get("start_ns") or 0, r.get("index") or 0))


def _by_phase(rows: List[Row]) -> Dict[str, List[Row]]:
    out: Dict[str, List[Row]] = {}
    for r in rows:  # one pass over the (capped) plotted rows
        out.setdefault(str(r.get("phase") if r.get("phase") is not None else "unmapped"), []).append(r)
    return out


def _series(ctx: HtmlCtx, groups: Dict[str, List[Row]]) -> List[Dict[str, Any]]:
    traces = []
    for i, (phase, rows) in enumerate(groups.items()):
        traces.append({
            "type": "scatter", "mode": "markers", "name": plot_text(phase, 40),
            "x": [ctx.rel_ms(r.get("start_ns")) for r in rows], "y": [ms(r.get("wall_ns")) for r in rows],
            "customdata": [[r.get("index"), r.get("pid"), r.get("device"), ms(r.get("gpu_busy_ns")),
                            ms(r.get("gpu_idle_ns")), ms(r.get("sync_ns")), r.get("kernel_count")] for r in rows],
            "marker": {"size": 5, "color": PHASE_COLORS[i % len(PHASE_COLORS)]}, "hovertemplate": HOVER})
    return traces


def _hist(groups: Dict[str, List[Row]], by_phase: Dict[str, Row]) -> Dict[str, Any]:
    """One histogram per phase side by side (phases differ by orders of magnitude), p50 / p99 of
    ``steps.by_phase`` marked as dashed lines."""
    phases = list(groups)[:MAX_HIST_PHASES]
    k = max(1, len(phases))
    data: List[Dict[str, Any]] = []
    shapes: List[Dict[str, Any]] = []
    lay = layout(280, "", "steps", barmode="overlay", showlegend=False)
    for i, phase in enumerate(phases):
        ax = "" if i == 0 else str(i + 1)
        color = PHASE_COLORS[i % len(PHASE_COLORS)]
        data.append({"type": "histogram", "name": plot_text(phase, 40), "xaxis": f"x{ax}", "yaxis": f"y{ax}",
                     "x": [ms(r.get("wall_ns")) for r in groups[phase]], "marker": {"color": color},
                     "hovertemplate": "%{x} ms: %{y} steps<extra>%{fullData.name}</extra>"})
        lo, hi = i / k + (0.04 if i else 0), (i + 1) / k - (0.04 if i + 1 < k else 0)
        lay[f"xaxis{ax}"] = {"domain": [lo, hi], "anchor": f"y{ax}", "gridcolor": "#eeeeee",
                             "title": {"text": f"{plot_text(phase, 40)}: step wall time (ms)"}}
        lay[f"yaxis{ax}"] = {"anchor": f"x{ax}", "gridcolor": "#eeeeee", "rangemode": "tozero",
                             **({"title": {"text": "steps"}} if i == 0 else {})}
        stats = by_phase.get(phase, {})
        for key, dash in (("p50_ns", "dash"), ("p99_ns", "dot")):
            x = ms(stats.get(key))
            if x is not None:
                shapes.append({"type": "line", "xref": f"x{ax}", "yref": "paper", "x0": x, "x1": x, "y0": 0,
                               "y1": 1, "line": {"color": "#212121", "width": 1, "dash": dash}})
    lay["shapes"] = shapes
    return {"data": data, "layout": lay}


def sec_steps(ctx: HtmlCtx) -> str:
    st = ctx.sec("steps")
    if not available(st) or not rows_of(st, "rows"):
        return section("steps", "Steps", [f'<p class="missing">No steps: {h(st.get("reason") or "not detected")}.</p>'])
    rows = rows_of(st, "rows")
    shown = plotted_steps(st)
    groups = _by_phase(shown)
    how = (f"all {fmt_int(len(rows))} steps" if len(shown) == len(rows) else
           f"{fmt_int(len(shown))} of {fmt_int(len(rows))} steps (every {-(-len(rows) // MAX_STEP_POINTS)}-th "
           "step plus the slowest, to keep the page small)")
    if st.get("rows_capped"):
        how += f"; report.json keeps the first {fmt_int(len(rows))} of {fmt_int(st.get('step_count'))} steps"
    ranges = ", ".join(code(r) for r in (st.get("step_ranges") or []))
    intro = (f"<p>{fmt_int(st.get('step_count'))} steps found by {h(st.get('method'))}"
             + (f" ({ranges})" if ranges else "") + f", confidence {h(st.get('confidence'))}"
             + (f": {h(st.get('confidence_reason'))}" if st.get("confidence_reason") else "") + ".</p>")
    cap1 = (f"Wall time of each step at its start; {how}. Text equivalent: report.json <code>steps.rows</code>, "
            "<code>tables/steps.csv</code>; slowest and outlier steps in report.md “Phases and steps”.")
    cap2 = (f"Distribution of step wall time, one chart per phase (first {MAX_HIST_PHASES}), over the same {how}; "
            "dashed line p50, dotted line p99 (report.json <code>steps.by_phase</code>, the table below).")
    lay = layout(320, "step start, ms from capture start", "step wall time (ms)")
    walls = [r.get("wall_ns") for r in shown if isinstance(r.get("wall_ns"), int) and r.get("wall_ns") > 0]
    if walls and max(walls) > LOG_RATIO * min(walls):
        lay["yaxis"]["type"] = "log"
        cap1 += " Logarithmic y axis (step times span more than two orders of magnitude)."
    series = ctx.figure("steps-series", _series(ctx, groups), lay, cap1)
    by_phase = {str(r.get("phase")): r for r in rows_of(st, "by_phase")}
    hf = _hist(groups, by_phase)
    hist = ctx.figure("steps-hist", hf["data"], hf["layout"], cap2)
    cols = (text_col("phase", "phase"), int_col("steps", "count"), ms_col("total (ms)", "total_ns"),
            ms_col("avg (ms)", "avg_ns"), ms_col("p50 (ms)", "p50_ns"), ms_col("p90 (ms)", "p90_ns"),
            ms_col("p99 (ms)", "p99_ns"), ms_col("max (ms)", "max_ns"), ms_col("GPU idle (ms)", "gpu_idle_ns"),
            ms_col("sync (ms)", "sync_ns"), int_col("kernels", "kernel_count"))
    return section("steps", "Steps", [intro, series, hist, table("steps-by-phase", cols, rows_of(st, "by_phase"))])
