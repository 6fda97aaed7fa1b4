"""``cluster.html``: the cluster report (a ``cluster.json`` dict) as one self-contained, offline page.

Layout, in the order of cluster.md: headline (how many files / devices, the first claim, the clock alignment
statement), the claims (``claims[]``: title, severity, evidence, checks — the same cards as report.html's
findings), warnings, the per-rank busy / idle-by-cause stacked bars (``devices[]``, the colours and names of
report.html's timeline) and rank table, the NCCL charts and tables (:mod:`.cluster_nccl`; cross-rank timing
only when the clocks are aligned), and the files with links to each one's own ``ranks/<label>/report.html``.

Built from report.html's pieces: the page shell, Content-Security-Policy and boot script (:mod:`.page`), the
escaping and sortable tables (:mod:`.markup`), the chart layout and idle-cause colours (:mod:`.ctx`). Every
number is the dict's, only converted to display units; user-controlled text (labels, paths, collective names,
claim text) goes through :mod:`..escape` (``h`` / ``rich`` / ``plot_text``).
"""

from __future__ import annotations

from typing import Any, Callable, Collection, List, Mapping, Optional
from urllib.parse import quote

from ..base import Row, fmt_int, fmt_ms, fmt_pct, rows_of
from ..markdown.idle import KIND_MEANING
from .cluster_nccl import sec_nccl
from .ctx import BUSY_LABEL, KIND_COLORS, HtmlCtx, idle_label, kind_color, layout, ms
from .markup import Col, code, h, int_col, ms_col, pct_col, plot_text, rich, section, table, text_col
from .page import page
from .summary import finding_html

NAV = (("headline", "Headline"), ("findings", "Findings"), ("ranks", "Ranks"), ("nccl", "NCCL"),
       ("files", "Files"), ("method", "Method"))

FOOTER = ("<footer id=\"method\"><h2>How these numbers are computed</h2><p>Every number on this page is read "
          "from cluster.json (written in the same run) and only formatted here: durations in ms / µs, "
          "percentages with one decimal. Definitions (ranks, clock alignment, matching, wait, skew, late "
          "arriver, the claims' preconditions): docs/CLUSTER.md; busy and idle causes: docs/MODEL.md. Charts "
          "are drawn in the page by plotly.js, which is embedded in this file; the page loads nothing from the "
          "network (its Content-Security-Policy forbids it). cluster.md holds the same content as text."
          "</p></footer>")


def report_href(label: Any) -> Optional[str]:
    """The relative link to a file's own report (``ranks/<label>/report.html``, the label percent-encoded so it
    stays one path segment); ``None`` for a label that could not name that directory."""
    s = "" if label is None else str(label)
    if s in ("", ".", ".."):
        return None
    return f"ranks/{quote(s, safe='')}/report.html"


def make_link(pages: Optional[Collection[str]]) -> Callable[[Any], str]:
    """``label → HTML``: a link to the label's report (only to those in ``pages`` when given), else the text."""
    def link(label: Any) -> str:
        href = report_href(label)
        if href is None or (pages is not None and str(label) not in pages):
            return h(label)
        return f'<a href="{h(href)}">{h(label)}</a>'
    return link


#: the idle-cause kinds in the precedence of docs/MODEL.md (the order of report.html's colours)
KINDS = tuple(k for k in KIND_COLORS if k != "busy")


def _kinds(devices: List[Row]) -> List[str]:
    """Idle-cause kinds present on any device, in the precedence order of docs/MODEL.md."""
    seen = {str(k) for r in devices for k in (r.get("idle_by_kind") or {})}
    return [k for k in KINDS if k in seen] + sorted(seen - set(KINDS))


def sec_headline(d: Mapping[str, Any]) -> str:
    al = d.get("alignment") if isinstance(d.get("alignment"), Mapping) else {}
    claims = rows_of(d, "claims")
    out = [f'<header id="headline"><h1>Cluster report: {fmt_int(len(rows_of(d, "files")))} files, '
           f'{fmt_int(len(rows_of(d, "devices")))} devices</h1>']
    if claims:
        out.append(f'<p class="verdict">{rich(claims[0].get("title"))}</p>')
    else:
        out.append('<p class="verdict">No rank stands out (every claim\'s preconditions are in docs/CLUSTER.md).'
                   "</p>")
    if al.get("aligned"):
        out.append('<p id="clocks"><strong>Clocks:</strong> aligned on the session start times (UTC); the NCCL '
                   "timing below compares the ranks on that one clock.</p>")
    else:
        out.append(f'<p id="clocks" class="warning"><strong>Clocks NOT aligned:</strong> {h(al.get("reason"))}. '
                   "No cross-rank timing claim is made and no cross-rank timing chart is drawn.</p>")
    out.append(f'<p class="meta">nsys-llm-explainer {h(d.get("tool_version"))} · cluster.json schema '
               f'{h(d.get("schema_version"))} · each file\'s own report: <code>ranks/&lt;label&gt;/report.html'
               "</code> (linked in the tables)</p></header>")
    return "".join(out)


def sec_claims(d: Mapping[str, Any]) -> str:
    claims = rows_of(d, "claims")
    body = [finding_html(i, {**c, "recommendation": c.get("advice") or []}) for i, c in enumerate(claims, 1)]
    if not body:
        body = ["<p>No rank stands out: no claim's preconditions held (docs/CLUSTER.md).</p>"]
    warn = [f'<p class="warning"><strong>Warning:</strong> {h(w)}</p>' for w in (d.get("warnings") or []) if w]
    return section("findings", "Findings", body + warn)


def _busy_chart(ctx: HtmlCtx, devices: List[Row], kinds: List[str]) -> str:
    idx = list(range(len(devices)))
    ticks = [f"{plot_text(r.get('rank'), 40)}<br>{fmt_pct(r.get('busy_pct'))} % busy" for r in devices]

    def bar(name: str, values: List[Any], color: str, what: str) -> Row:
        hover = [f"{plot_text(r.get('rank'))} · {what}: {ms(v)} ms" for r, v in zip(devices, values)]
        return {"type": "bar", "name": name, "x": idx, "y": [ms(v) for v in values], "marker": {"color": color},
                "hovertext": hover, "hoverinfo": "text"}

    data = [bar(BUSY_LABEL, [r.get("busy_ns") for r in devices], kind_color("busy"), "busy")]
    for i, k in enumerate(kinds):
        data.append(bar(idle_label(k), [(r.get("idle_by_kind") or {}).get(k, 0) for r in devices],
                        kind_color(k, i), f"idle {plot_text(k)}"))
    lay = layout(360, "", "ms of the steady window", barmode="stack")
    lay["xaxis"].update({"tickvals": idx, "ticktext": ticks, "automargin": True})
    lay["legend"]["traceorder"] = "normal"
    cap = ("Busy time and idle time by cause of each rank's GPU over its own steady window (ms; the bar is the "
           "window; the tick label gives the steady busy %). Text equivalent: cluster.json "
           "<code>devices[]</code> (<code>busy_ns</code>, <code>busy_pct</code>, <code>idle_by_kind</code>), the "
           "table below, cluster.md “Ranks (steady window of each file)”, <code>tables/ranks.csv</code>.")
    return ctx.figure("rank-busy", data, lay, cap)


def sec_ranks(ctx: HtmlCtx, d: Mapping[str, Any], link: Callable[[Any], str]) -> str:
    devices = rows_of(d, "devices")
    if not devices:
        return section("ranks", "Ranks (steady window of each file)",
                       ['<p class="missing">No device with kernels in any file.</p>'])
    kinds = _kinds(devices)
    cols: List[Col] = [text_col("rank", "rank"), Col("report", lambda r: link(r.get("file")),
                                                     lambda r: r.get("file"), numeric=False),
                       int_col("GPU", "device_id"), pct_col("busy %", "busy_pct"), ms_col("window (ms)", "window_ns"),
                       ms_col("busy (ms)", "busy_ns"), ms_col("idle (ms)", "idle_ns"),
                       int_col("kernels", "kernel_count"), int_col("steps", "step_count"),
                       ms_col("step p50 (ms)", "step_p50_ns"), ms_col("step p90 (ms)", "step_p90_ns")]
    for k in kinds:
        cols.append(Col(f"idle {k} (ms)", lambda r, k=k: fmt_ms((r.get("idle_by_kind") or {}).get(k, 0)),
                        lambda r, k=k: (r.get("idle_by_kind") or {}).get(k, 0), key=f"idle_{k}_ns"))
    legend = "; ".join(f"{code(k)}: {h(KIND_MEANING[k])}" for k in kinds if k in KIND_MEANING)
    body = ["<p>Each file's steady analysis window, per device (docs/CLUSTER.md); click a column header to "
            "sort.</p>", _busy_chart(ctx, devices, kinds), table("ranks-table", cols, devices)]
    if legend:
        body.append(f'<p class="legend"><em>Causes:</em> {legend}.</p>')
    return section("ranks", "Ranks (steady window of each file)", body)


def sec_files(d: Mapping[str, Any], link: Callable[[Any], str]) -> str:
    cols = [Col("label (its report)", lambda r: link(r.get("label")), lambda r: r.get("label"), numeric=False),
            Col("path", lambda r: code(r.get("path")), lambda r: r.get("path"), numeric=False),
            text_col("nsys", "nsys_version"), text_col("window", "window_method"),
            ms_col("clock offset (ms)", "offset_ns"), int_col("NCCL kernels", "nccl_kernels"),
            Col("verdict", lambda r: rich(r.get("headline")), lambda r: r.get("headline"), numeric=False)]
    return section("files", "Files", [table("files-table", cols, rows_of(d, "files"),
                                            "cluster.json <code>files[]</code>, <code>tables/files.csv</code>; "
                                            "clock offsets are relative to the earliest session start.")])


def render_cluster_html(d: Mapping[str, Any], js: Optional[str] = None,
                        rank_pages: Optional[Collection[str]] = None) -> str:
    """The full ``cluster.html`` for a cluster.json dict. ``js`` replaces the plotly.js bundle (``None``: the
    installed one; tests that draw nothing pass ``""``); ``rank_pages``: the labels whose
    ``ranks/<label>/report.html`` exists (``None``: link every label)."""
    from . import plotly_js

    ctx = HtmlCtx({})
    link = make_link(rank_pages)
    body = "\n".join([sec_headline(d), sec_claims(d), sec_ranks(ctx, d, link), sec_nccl(ctx, d, link),
                      sec_files(d, link)])
    title = f"Cluster report: {len(rows_of(d, 'files'))} files"
    return page(title, body, ctx.figures_json(), plotly_js() if js is None else js, NAV, FOOTER)


__all__ = ["render_cluster_html", "report_href"]
