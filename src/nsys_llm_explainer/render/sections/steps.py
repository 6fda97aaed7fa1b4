"""Phases and steps (``steps``, ``phases``); in HTML the per-step time series and the per-phase distribution of step
wall time, over at most :data:`MAX_STEP_POINTS` plotted steps (docs/DESIGN.md, "HTML")."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Optional

from ...vocabulary.units import fmt_count, fmt_dur, fmt_int, ms_value
from ..charts import layout, plot_text
from ..document import (
    BR,
    NL,
    Chart,
    Code,
    Data,
    Figure,
    Omitted,
    Rich,
    Section,
    SectionResult,
    Strong,
    TablePart,
    bullets,
    inline,
    joined,
    para,
    parts,
)
from ..specs import PHASES, STEPS, STEPS_BY_PHASE
from .ctx import View

if TYPE_CHECKING:
    from ...analyses.steps.metrics import StepResult, StepRow


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
TITLE = "Phases and steps"


def plotted_steps(steps: StepResult) -> List[StepRow]:
    """The step rows drawn: all of ``steps.rows`` up to :data:`MAX_STEP_POINTS`, else every k-th plus the
    slowest."""
    rows = steps.rows
    if len(rows) <= MAX_STEP_POINTS:
        return list(rows)
    k = -(-len(rows) // MAX_STEP_POINTS)
    picked = list(rows[::k])
    seen = {r.index for r in picked}
    extra: List[StepRow] = [r for r in steps.slowest if r.index not in seen]
    return sorted(picked + extra, key=lambda r: (r.start_ns, r.index))


def _by_phase(rows: List[StepRow]) -> Dict[str, List[StepRow]]:
    out: Dict[str, List[StepRow]] = {}
    for r in rows:  # one pass over the (capped) plotted rows
        out.setdefault(r.phase, []).append(r)
    return out


def _series(v: View, groups: Dict[str, List[StepRow]]) -> List[Dict[str, Any]]:
    return [{"type": "scatter", "mode": "markers", "name": plot_text(phase, 40),
             "x": [v.rel_ms(r.start_ns) for r in rows], "y": [ms_value(r.wall_ns) for r in rows],
             "customdata": [[r.index, r.pid, r.device, ms_value(r.gpu_busy_ns),
                             ms_value(r.gpu_idle_ns), ms_value(r.sync_ns), r.kernel_count]
                            for r in rows],
             "marker": {"size": 5, "color": PHASE_COLORS[i % len(PHASE_COLORS)]}, "hovertemplate": HOVER}
            for i, (phase, rows) in enumerate(groups.items())]


def _how(st: StepResult, shown: List[StepRow]) -> str:
    rows = st.rows
    how = (f"all {fmt_count(len(rows), 'step')}" if len(shown) == len(rows) else
           f"{fmt_int(len(shown))} of {fmt_count(len(rows), 'step')} (every {-(-len(rows) // MAX_STEP_POINTS)}-th "
           "step plus the slowest, to keep the page small)")
    if st.step_count > len(rows):
        how += f"; report.json keeps the first {fmt_int(len(rows))} of {fmt_count(st.step_count, 'step')}"
    return how


def series_chart(v: View, st: StepResult) -> Figure:
    shown = plotted_steps(st)
    cap = inline(f"Wall time of each step at its start; {_how(st, shown)}. Text equivalent: report.json ",
                 Code("steps.rows"), ", ", Code("tables/steps.csv"), "; the slowest steps are listed below.")
    lay = layout(320, "step start, ms from trace start", "step wall time (ms)")
    walls = [w for w in (r.wall_ns for r in shown) if isinstance(w, int) and w > 0]
    if walls and max(walls) > LOG_RATIO * min(walls):
        lay["yaxis"]["type"] = "log"
        cap = inline(cap, " Logarithmic y axis (step times span more than two orders of magnitude).")
    return Figure("steps-series", _series(v, _by_phase(shown)), lay, cap)


def hist_chart(st: StepResult) -> Figure:
    """One histogram per phase side by side (phases differ by orders of magnitude), p50 / p99 of
    ``steps.by_phase`` marked as dashed lines."""
    shown = plotted_steps(st)
    groups = _by_phase(shown)
    by_phase = {r.phase: r for r in st.by_phase}
    phases = list(groups)[:MAX_HIST_PHASES]
    k = max(1, len(phases))
    data: List[Dict[str, Any]] = []
    shapes: List[Dict[str, Any]] = []
    lay = layout(280, "", "steps", barmode="overlay", showlegend=False)
    for i, phase in enumerate(phases):
        ax = "" if i == 0 else str(i + 1)
        color = PHASE_COLORS[i % len(PHASE_COLORS)]
        data.append({"type": "histogram", "name": plot_text(phase, 40), "xaxis": f"x{ax}", "yaxis": f"y{ax}",
                     "x": [ms_value(r.wall_ns) for r in groups[phase]], "marker": {"color": color},
                     "hovertemplate": "%{x} ms: %{y} steps<extra>%{fullData.name}</extra>"})
        lo, hi = i / k + (0.04 if i else 0), (i + 1) / k - (0.04 if i + 1 < k else 0)
        lay[f"xaxis{ax}"] = {"domain": [lo, hi], "anchor": f"y{ax}", "gridcolor": "#eeeeee",
                             "title": {"text": f"{plot_text(phase, 40)}: step wall time (ms)"}}
        lay[f"yaxis{ax}"] = {"anchor": f"x{ax}", "gridcolor": "#eeeeee", "rangemode": "tozero",
                             **({"title": {"text": "steps"}} if i == 0 else {})}
        stats = by_phase.get(phase)
        for key, dash in (("p50_ns", "dash"), ("p99_ns", "dot")):
            x = ms_value(getattr(stats, key)) if stats is not None else None
            if x is not None:
                shapes.append({"type": "line", "xref": f"x{ax}", "yref": "paper", "x0": x, "x1": x, "y0": 0,
                               "y1": 1, "line": {"color": "#212121", "width": 1, "dash": dash}})
    lay["shapes"] = shapes
    cap = inline(f"Distribution of step wall time, one chart per phase (first {MAX_HIST_PHASES}), over the same "
                 f"{_how(st, shown)}; dashed line p50, dotted line p99 (report.json ", Code("steps.by_phase"),
                 ", the table below).")
    return Figure("steps-hist", data, lay, cap)


def _steps(v: View) -> List[Any]:
    st = v.r.steps
    s = st.summary
    if st.method == "nvtx":
        how = inline("NVTX range ", joined([(Code(n, 80),) for n in st.step_ranges], ", "))
    else:
        how = inline("marker kernels matching ", Code(st.marker_regex))
    conf = inline("confidence ", Data(st.confidence),
                  (": ", Rich(st.confidence_reason, lead=True)) if st.confidence_reason else None)
    scope = ", counted over the whole capture, not only the analysis window" if not v.r.window.is_full else ""
    out: List[Any] = [
        para(Strong((f"{fmt_count(st.step_count, 'step')}",)), " from ", how, " (", conf, ")", scope, ".", brk=BR),
        para(f"Step time p50 {fmt_dur(s.p50_ns if s else None)}, p90 {fmt_dur(s.p90_ns if s else None)}, "
             f"p99 {fmt_dur(s.p99_ns if s else None)}, max {fmt_dur(s.max_ns if s else None)}"
             + (";" if st.period else "."), _period(st, bool(v.r.window.details.not_recorded_ns)))]
    if st.notes:
        out.append(bullets([inline("Note: ", Rich(n)) for n in st.notes]))   # kernel names in backticks
    if st.rows:
        out += [Chart(lambda: series_chart(v, st)), Chart(lambda: hist_chart(st))]
    if st.by_phase:
        out.append(TablePart(STEPS_BY_PHASE.cols, st.by_phase, (), "steps-by-phase"))
    slow = st.outliers[:3]
    if slow:
        out += [para("Slowest steps against their phase median:", brk=NL),
                bullets([inline("step ", Data(r.index), " (", Data(r.phase), ", device ", Data(r.device),
                                f") at {v.at(r.start_ns)}: {fmt_dur(r.wall_ns)}; ", Rich(r.what_differed))
                         for r in slow])]
    out.append(para("Every step in ", Code(f"tables/{STEPS.csv}"), "."))
    return out


def _period(st: StepResult, unrecorded: bool) -> Optional[str]:
    """The step period line of NVTX steps: what a step costs with the host work between the ranges; ``unrecorded``:
    the capture has spans the profiler did not record (a period over one has no step and no GPU work recorded)."""
    p, s = st.period, st.summary
    if p is None or s is None:
        return None
    c = st.period_cover_pct
    cover = f"; a step's range covers {c:.0f} % of its period (p50 of range ÷ period per step)" if c is not None else ""
    pause = "an idle pause or a span the profiler did not record" if unrecorded else "an idle pause"
    pauses = f"; {fmt_count(st.period_pauses, 'period')} over {pause} left out" if st.period_pauses else ""
    return (f" step period (start to the next step's start, same process) p50 {fmt_dur(p.p50_ns)}, p90 "
            f"{fmt_dur(p.p90_ns)} over {fmt_count(p.count, 'period')}{cover}{pauses}.")


def sec_steps(v: View) -> SectionResult:
    st, ph = v.r.steps, v.r.phases
    phases = [r for r in ph.phases if r.range_count or r.kernel_count]
    if not st.available and not (ph.available and phases):
        reasons = "; ".join(x for x in (st.reason, ph.reason) if x)
        return Omitted(TITLE, reasons or "no steps or phases")
    body: List[Any] = _steps(v) if st.available else []
    if ph.available and phases:
        body += [para("Phases from NVTX range names (map: ", Data(ph.source), "); kernel time is whole capture."),
                 TablePart(PHASES.cols, phases, (), "phases")]
    return Section("steps", TITLE, parts(body), "Steps")
