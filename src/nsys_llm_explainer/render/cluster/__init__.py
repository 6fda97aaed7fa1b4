"""``cluster.md`` and ``cluster.html``: one document of a typed :class:`cluster.ClusterResult`, laid out by the
Markdown and HTML writers (its sections, charts and links: docs/CLUSTER.md)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any, Collection, Dict, List, Optional, Sequence
from urllib.parse import quote

from ...vocabulary.cause_kinds import KINDS
from ...vocabulary.units import fmt_pct, ms_value
from ..charts import BUSY_LABEL, idle_label, in_kind_order, kind_color, layout, plot_text
from ..document import (
    Chart,
    Code,
    Data,
    Document,
    Figure,
    Heading,
    HtmlOnly,
    Link,
    Section,
    Spans,
    TablePart,
    bullets,
    inline,
    para,
    parts,
)
from ..html.writer import html_page
from ..markdown import write_markdown
from ..sections.findings import finding_parts
from ..sections.idle import causes_legend
from .nccl import sec_nccl
from .tables import FILES, RANKS, Linker, idle, idle_col, linked

if TYPE_CHECKING:
    from ...cluster.result import ClusterResult
    from ...cluster.summary import DeviceRow


def report_href(label: Any) -> Optional[str]:
    """The relative link to a file's own report (``ranks/<label>/report.html``, the label percent-encoded so it
    stays one path segment); ``None`` for a label that could not name that directory."""
    s = "" if label is None else str(label)
    if s in ("", ".", ".."):
        return None
    return f"ranks/{quote(s, safe='')}/report.html"


def make_link(pages: Optional[Collection[str]]) -> Linker:
    """``label → spans``: a link to the label's report (only to those in ``pages`` when given), else the text."""
    def link(label: Any) -> Spans:
        href = report_href(label)
        if href is None or (pages is not None and str(label) not in pages):
            return Data(label)
        return Link((Data(label),), href)
    return link


def sec_headline(d: ClusterResult) -> Section:
    al = d.alignment
    clocks = ("aligned on the session start times (UTC)." if al.aligned else
              Data(f"NOT aligned — {al.reason}; no cross-rank timing claim is made."))
    meta = para(f"nsys-llm-explainer {d.tool_version} · cluster.json schema {d.schema_version} · each "
                "file's own report: ", Code("ranks/<label>/report.html"), " (linked in the tables)", cls="meta")
    return Section("headline", "", (
        Heading(1, ("Cluster report",)),
        para(f"{len(d.files)} files, {len(d.devices)} devices. Clocks: ", clocks,
             cls="" if al.aligned else "warning"),
        HtmlOnly((meta,))), "Headline", "header")


def sec_claims(d: ClusterResult) -> Section:
    # a claim's confidence is not stated (cluster.json does not carry it; every claim's checks all hold)
    body: List[Any] = [finding_parts(i, replace(c.finding, confidence="")) for i, c in enumerate(d.claims, 1)]
    if not body and not d.alignment.aligned:   # the timing claims were never tried: say so, not "no rank stands out"
        body = [para("No claim holds of what could be compared; the ranks' timing (collective waits, late arrivers) "
                     "was not compared: the clocks are not aligned (every claim's preconditions are listed in "
                     "docs/CLUSTER.md).")]
    elif not body and d.late_group:   # a group late together (cluster.claims.late_group): not "no rank"
        g = d.late_group
        names = ", ".join(g[:9]) + (f" and {len(g) - 9} more" if len(g) > 9 else "")
        body = [para("No single rank stands out: ", Data(names), " arrived late together at the "
                     "collectives, and the others waited for them (see the warnings; every claim's preconditions are "
                     "listed in docs/CLUSTER.md).")]
    elif not body and d.late_unjudged:   # the late-arriver claim was never judged: not "no rank stands out"
        body = [para("No claim holds; whether a rank arrives late at the collectives was not judged (",
                     Data(d.late_unjudged), "; see the warnings). Every claim's preconditions are listed in "
                     "docs/CLUSTER.md.")]
    elif not body and d.late_little:   # a rank arrives last, but the waiting it causes is too little for a claim
        body = [para("No claim holds: ", Data(d.late_little), " (every claim's preconditions are listed in "
                     "docs/CLUSTER.md).")]
    elif not body and d.p2p_left_out:   # the waits at the send/recv names were not judged: not "no rank"
        body = [para("No rank stands out at the collectives judged; the waits at the point-to-point (send / recv) "
                     "name(s) ", Data(", ".join(d.p2p_left_out)), " were not judged (each kernel waits for its own "
                     "peers: a ring's neighbours, a pipeline pair, or every rank in an all-to-all; see the warnings). "
                     "Every claim's preconditions are listed in docs/CLUSTER.md.")]
    elif not body:
        body = [para("No rank stands out (every claim's preconditions are listed in docs/CLUSTER.md).")]
    return Section("findings", "Findings", parts(body), "Findings")


def windows_words(d: ClusterResult) -> str:
    """The files' analysis window in words without "the " ("steady window", "whole capture", …) when every file's
    is the same (cluster.json ``files[].window_name``), else "analysis window"."""
    names = {f.window_name for f in d.files}
    one = names.pop() if len(names) == 1 else "the analysis window"
    return one[len("the "):] if one.startswith("the ") else one


def _busy_chart(devices: Sequence[DeviceRow], kinds: List[str], where: str, title: str) -> Figure:
    idx = list(range(len(devices)))
    ticks = [f"{plot_text(r.rank, 40)}<br>{fmt_pct(r.busy_pct)} % busy" for r in devices]

    def bar(name: str, values: List[Any], color: str, what: str) -> Dict[str, Any]:
        hover = [f"{plot_text(r.rank)} · {what}: {ms_value(v)} ms" for r, v in zip(devices, values)]
        return {"type": "bar", "name": name, "x": idx, "y": [ms_value(v) for v in values], "marker": {"color": color},
                "hovertext": hover, "hoverinfo": "text"}

    data = [bar(BUSY_LABEL, [r.busy_ns for r in devices], kind_color("busy"), "busy")]
    data += [bar(idle_label(k), [idle(k)(r) for r in devices], kind_color(k, i), f"idle {plot_text(k)}")
             for i, k in enumerate(kinds)]
    lay = layout(360, "", f"ms of the {where}" if where != "analysis window" else "ms of each file's analysis window",
                 barmode="stack")
    lay["xaxis"].update({"tickvals": idx, "ticktext": ticks, "automargin": True})
    lay["legend"]["traceorder"] = "normal"
    busy = "steady busy %" if where == "steady window" else "busy % over it"
    which = (inline(" (each file's: cluster.json ", Code("files[].window_name"), ")") if where == "analysis window"
             else ())
    cap = inline(f"Busy time and idle time by cause of each rank's GPU over its own {where}", which, " (ms; the bar is "
                 f"the window; the tick label gives the {busy}). Text equivalent: cluster.json ",
                 Code("devices[]"), " (", Code("busy_ns"), ", ", Code("busy_pct"), ", ", Code("idle_by_kind"), "), the "
                 f"table below, cluster.md “{title}”, ", Code("tables/ranks.csv"), ".")
    return Figure("rank-busy", data, lay, cap)


def sec_ranks(d: ClusterResult, link: Linker) -> Section:
    where = windows_words(d)
    title = f"Ranks ({where} of each file)"
    devices = d.devices
    kinds = in_kind_order(str(k) for r in devices for k in r.idle_by_kind)   # those present on any device
    absent = {f"idle_{k}_ns" for k in KINDS if k not in kinds}
    extra = tuple(idle_col(k) for k in kinds if k not in KINDS)
    cols = linked([c for c in RANKS.cols if c.key not in absent], link) + extra
    legend = causes_legend(kinds)
    return Section("ranks", title, parts(
        Chart(lambda: _busy_chart(devices, kinds, where, title)) if devices else None,
        TablePart(cols, devices, (), "ranks-table"),
        HtmlOnly((para(legend, cls="legend"),)) if legend else None), "Ranks")


def sec_files(d: ClusterResult, link: Linker) -> Section:
    return Section("files", "Files", (
        TablePart(linked([c for c in FILES.cols if c.key != "host" or any(f.clock.host for f in d.files)], link),
                  d.files, (), "files-table"),
        para("Each file's own report: ", Code("ranks/<label>/report.md"), ". Definitions: docs/CLUSTER.md."),
        HtmlOnly((para("Clock offsets are relative to the earliest session start; each label links to the file's "
                       "own report.html.", cls="meta"),))), "Files")


def cluster_document(d: ClusterResult, rank_pages: Optional[Collection[str]] = None) -> Document:
    """The cluster report's sections; ``rank_pages``: the labels whose ``ranks/<label>/report.html`` exists
    (``None``: link every label)."""
    link = make_link(rank_pages)
    warnings = bullets([Data(w) for w in d.warnings if w])
    sections = [sec_headline(d), sec_claims(d), sec_ranks(d, link), sec_nccl(d, link), sec_files(d, link)]
    if warnings:
        sections.append(Section("warnings", "Warnings", (warnings,)))
    return Document(f"Cluster report: {len(d.files)} files", tuple(sections))


def render_cluster_markdown(d: ClusterResult) -> str:
    """The full ``cluster.md`` of a cluster result."""
    return write_markdown(cluster_document(d))


FOOTER = ("<footer id=\"method\"><p>Every number on this page is read from cluster.json (written in the same run) "
          "and only formatted here: durations in ms / µs, percentages with one decimal. Definitions (ranks, clock "
          "alignment, matching, wait, skew, late arriver, the claims' preconditions): docs/CLUSTER.md; busy and idle "
          "causes: docs/MODEL.md. Charts are drawn in the page by plotly.js, which is embedded in this file; the page "
          "loads nothing from the network (its Content-Security-Policy forbids it). cluster.md holds the same "
          "sections as text.</p></footer>")


def render_cluster_html(d: ClusterResult, js: Optional[str] = None,
                        rank_pages: Optional[Collection[str]] = None) -> str:
    """The full ``cluster.html`` of a cluster result (``js``: :func:`..html.writer.html_page`); ``rank_pages``: the
    labels whose ``ranks/<label>/report.html`` exists (``None``: link every label)."""
    return html_page(cluster_document(d, rank_pages), js, FOOTER)


__all__ = ["cluster_document", "render_cluster_html", "render_cluster_markdown", "report_href"]
