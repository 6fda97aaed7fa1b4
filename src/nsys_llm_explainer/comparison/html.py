"""``compare.html``: one self-contained, offline page — the headline, stacked bars of the time per unit of work
(non-overlapped GPU time per kernel category plus non-GPU time, as vLLM's ``gputrc2graph.py`` draws them;
and the non-GPU time split by idle cause), then the tables of ``compare.md``.

Built from the report page's pieces (:mod:`render.html`): the same Content-Security-Policy, style sheet,
escaping (``h`` / ``plot_text`` / ``script_json``), sortable tables, chart boot script and the plotly.js
bundle inlined from the ``plotly`` package. Without ``plotly`` installed the page still has every table and
says that the charts could not be drawn. Formatting only: every number is the ``compare.json`` dict's.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence

from ..render.base import fmt_ms, fmt_pct
from ..render.html.ctx import PLOT_CONFIG, kind_color, layout, ms
from ..render.html.markup import (
    Col,
    h,
    int_col,
    ms_col,
    name_col,
    name_html,
    pct_col,
    plot_text,
    rich,
    script_json,
    table,
    text_col,
)
from ..render.html.page import BOOT_JS, CSP, CSS, inline_js

UNIT_WORD = {"step": "step", "iteration": "iteration", "window_s": "s of window"}
CATEGORY_COLORS = ("#1565c0", "#2e7d32", "#ef6c00", "#6a1b9a", "#00838f", "#c62828", "#9e9d24", "#4527a0",
                   "#ad1457", "#00695c", "#5d4037", "#283593", "#f9a825", "#7cb342", "#039be5", "#8d6e63")
NON_GPU_COLOR = "#bdbdbd"
KERNEL_ROWS = 50


def plotly_bundle() -> str:
    """plotly.js from the ``plotly`` package, or ``""`` when it is not installed (the page says so)."""
    try:
        from plotly.offline import get_plotlyjs
    except ImportError:
        return ""
    return get_plotlyjs()


def _stack(fid: str, d: Mapping[str, Any], key: str, unit: str, colors: Dict[str, str]) -> Dict[str, Any]:
    traces = d["traces"]
    x = [plot_text(t["label"], 40) for t in traces]
    names: Dict[str, None] = {}
    for t in traces:
        for s in t[key]:
            names.setdefault(s["name"], None)
    data = []
    for n in names:
        rows = [{s["name"]: s for s in t[key]}.get(n) for t in traces]
        data.append({"type": "bar", "name": plot_text(n, 40), "x": x,
                     "y": [ms(r["per_unit_ns"]) if r else 0 for r in rows],
                     "marker": {"color": colors.get(n, NON_GPU_COLOR)},
                     "hovertext": [f"{plot_text(n, 60)}: {fmt_ms(r['per_unit_ns'])} ms per {unit} · "
                                   f"{fmt_pct(r['pct_of_window'])} % of the window" if r else "" for r in rows],
                     "hoverinfo": "text"})
    lay = layout(420, "", f"ms per {unit}", barmode="stack")
    return {"id": fid, "data": data, "layout": lay}


def _figure_div(fid: str, caption: str) -> str:
    return (f'<figure><div id="{h(fid)}" class="chart" role="img" aria-label="chart; text equivalent in the '
            f'table below"></div><figcaption>{caption}</figcaption></figure>')


def _parts_table(tid: str, d: Mapping[str, Any], key: str, unit: str) -> str:
    rows: List[Dict[str, Any]] = []
    for t in d["traces"]:
        for s in t[key]:
            rows.append({"trace": t["label"], **s})
    cols = [text_col("trace", "trace"), name_col("part", "name"), ms_col(f"ms per {unit}", "per_unit_ns"),
            pct_col("% of window", "pct_of_window"), ms_col("total (ms)", "ns")]
    return table(tid, cols, rows)


def _signed(key: str, title: str) -> Col:
    def cell(r: Mapping[str, Any]) -> str:
        v = r.get(key)
        return "–" if v is None else ("+" if v >= 0 else "−") + fmt_ms(abs(v))
    return Col(title, cell, lambda r: r.get(key), key=key)


def _pair(i: int, c: Mapping[str, Any], unit: str) -> str:
    kcols = [name_col("kernel", "name"), ms_col(f"BASE ms/{unit}", "base_per_unit_ns"),
             ms_col(f"NEW ms/{unit}", "new_per_unit_ns"), _signed("delta_per_unit_ns", "Δ ms"),
             pct_col("change %", "change_pct"), int_col("BASE count", "base_count"), int_col("NEW count", "new_count")]
    fcols = [text_col("finding", "id"), text_col("category", "category"), text_col("change", "change"),
             text_col("BASE", "base_severity"), text_col("NEW", "new_severity"),
             Col("title", lambda r: rich(r.get("title")), lambda r: r.get("title"), numeric=False)]
    title = f"{h(c['new'])} vs {h(c['base'])}"
    return (f'<section id="pair-{i}"><h2>Top kernel changes: {title}</h2>'
            + table(f"kernels-{i}", kcols, list(c["kernel_deltas"][:KERNEL_ROWS]),
                    caption=f"kernel time per {h(unit)}, largest absolute change first (all rows: "
                            "tables/kernel_deltas.csv)")
            + f"<h2>Findings: {title}</h2>" + table(f"findings-{i}", fcols, list(c["finding_changes"]))
            + "</section>")


def _metric_table(d: Mapping[str, Any], unit: str) -> str:
    comps = {c["new"]: c for c in d["comparisons"]}
    rows = []
    for i, t in enumerate(d["traces"]):
        c = comps.get(t["label"], {})
        rows.append({"trace": t["label"], "role": "BASE" if i == 0 else "NEW", **t["metric"],
                     "busy_pct": t["busy_pct"], "change_pct": c.get("change_pct"), "noise_pct": c.get("noise_pct"),
                     "verdict": c.get("verdict"), "status": c.get("status")})
    cols = [text_col("trace", "trace"), text_col("role", "role"), ms_col("p50 (ms)", "p50_ns"),
            ms_col("p90 (ms)", "p90_ns"), Col("p90/p50", lambda r: "–" if r.get("spread") is None else
                                              f"{r['spread']:.2f}", lambda r: r.get("spread")),
            int_col(f"{unit}s", "count"), pct_col("GPU busy %", "busy_pct"), pct_col("change %", "change_pct"),
            pct_col("noise ± %", "noise_pct"), text_col("verdict", "verdict"), text_col("status", "status")]
    return table("metric", cols, rows)


def render_compare_html(d: Mapping[str, Any], js: Optional[str] = None) -> str:
    """The full ``compare.html`` for a ``compare.json`` dict (``js``: plotly.js; ``None`` = installed one)."""
    unit = UNIT_WORD.get(d["metric"]["basis"], "unit")
    traces: Sequence[Mapping[str, Any]] = d["traces"]
    cats: Dict[str, None] = {}
    for t in traces:
        for s in t["categories"]:
            cats.setdefault(s["name"], None)
    ccol = {n: CATEGORY_COLORS[i % len(CATEGORY_COLORS)] for i, n in enumerate(c for c in cats if c != "non_gpu")}
    kinds = {s["name"]: kind_color(s["name"], i) for t in traces for i, s in enumerate(t["idle_by_kind"])}
    figs = [_stack("stack-categories", d, "categories", unit, ccol), _stack("stack-idle", d, "idle_by_kind", unit,
                                                                            kinds)]
    m = d["metric"]
    desc = h(m["description"]) + (f"; anchor kernel {name_html(m['anchor_kernel'])}" if m.get("anchor_kernel")
                                  else "")
    verdict = ' class="verdict"'
    head = "".join('<div class="pair">' + "".join(f"<p{verdict if j == 0 else ''}>{rich(line)}</p>"
                                                  for j, line in enumerate(c["headline"])) + "</div>"
                   for c in d["comparisons"])
    body = [f"<h1>Trace comparison: {', '.join(h(t['label']) for t in traces[1:])} vs BASE "
            f"{h(traces[0]['label'])}</h1>", f'<section id="headline">{head}</section>',
            f'<section id="metric"><h2>Headline metric</h2><p>{desc}. Why: {h(m["reason"])}. Lower is better; '
            "noise is the ~95 % half-width of the change (docs/COMPARE.md).</p>" + _metric_table(d, unit)
            + "</section>",
            f'<section id="stack"><h2>Time per {h(unit)}</h2>'
            + _figure_div("stack-categories", f"Non-overlapped GPU time per kernel category and non-GPU time "
                          f"(window − busy), ms per {h(unit)}; the bar is the window time per {h(unit)}.")
            + _parts_table("categories", d, "categories", unit)
            + _figure_div("stack-idle", f"Non-GPU time by idle cause, ms per {h(unit)} (docs/MODEL.md).")
            + _parts_table("idle", d, "idle_by_kind", unit) + "</section>"]
    body += [_pair(i, c, unit) for i, c in enumerate(d["comparisons"])]
    if d.get("warnings"):
        body.append("<section id=\"warnings\"><h2>Warnings</h2>" + "".join(
            f'<p class="warning">{h(w)}</p>' for w in d["warnings"]) + "</section>")
    figures = script_json({"config": PLOT_CONFIG, "figures": figs})
    title = "Trace comparison: " + ", ".join(str(t["label"]) for t in traces)
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f'<meta http-equiv="Content-Security-Policy" content="{h(CSP)}">'
            '<meta name="referrer" content="no-referrer">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{h(title)}</title><style>{CSS}</style></head>\n<body><main>\n" + "\n".join(body)
            + f"\n</main><footer>Generated by nsys-llm-explain {h(d['tool_version'])}; compare.json holds every "
            "number of this page; the page loads nothing from the network.</footer>\n"
            f'<script type="application/json" id="nle-figures">{figures}</script>\n'
            f"<script>{inline_js(plotly_bundle() if js is None else js)}</script>\n<script>{BOOT_JS}</script>\n"
            "</body></html>\n")
