"""The HTML writer: a :class:`..document.Document` → the body of a page, its navigation and the figures' JSON;
escapes (:mod:`.markup`) and lays out only (docs/DESIGN.md, "HTML")."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence

from ...vocabulary.units import DASH
from ..charts import PLOT_CONFIG
from ..document import (
    BulletList,
    Cell,
    Chart,
    Code,
    Data,
    Details,
    Document,
    Em,
    Figure,
    Group,
    Heading,
    HtmlOnly,
    Link,
    Note,
    Paragraph,
    Part,
    Rich,
    Section,
    Spans,
    Strong,
    Styled,
    TablePart,
    Value,
)
from ..escape import shorten_text
from ..table import Col
from .markup import h, name_html, raw_value, rich, script_json
from .page import page, plotly_js


def html_inline(x: Spans) -> str:
    """Spans as HTML: every piece of text escaped, names in ``<code>``."""
    if isinstance(x, str):
        return h(x)
    if isinstance(x, (tuple, list)):
        return "".join(html_inline(s) for s in x)
    if isinstance(x, Data):
        return h(shorten_text(x.value))
    if isinstance(x, Cell):
        return h(shorten_text(x.value).strip())
    if isinstance(x, Code):
        return name_html(x.value, x.limit)
    if isinstance(x, Rich):
        return rich(x.value)
    if isinstance(x, Strong):
        return "<strong>" + html_inline(x.children) + "</strong>"
    if isinstance(x, Em):
        return "<em>" + html_inline(x.children) + "</em>"
    if isinstance(x, Styled):
        return f'<span class="{h(x.cls)}">' + html_inline(x.children) + "</span>"
    if isinstance(x, Value):
        raw = raw_value(x.raw)
        return (f'<span class="v" data-k="{h(x.key)}"' + (f' data-v="{h(raw)}"' if raw is not None else "")
                + f">{h(x.shown)}</span>")
    if isinstance(x, Link):
        return f'<a href="{h(x.href)}">{html_inline(x.children)}</a>'
    return "" if x is None else h(x)


def _cell(col: Col, row: Mapping[str, Any]) -> str:
    v = raw_value(col.value(row)) if col.value else None
    attrs = (f' data-v="{h(v)}"' if v is not None else "") + (' class="n"' if col.right else "")
    if col.key:
        attrs += f' data-k="{h(col.key)}"'
    return f"<td{attrs}>{html_inline(col.spans(row)) or DASH}</td>"


def html_table(t: TablePart) -> str:
    """A sortable table of the shown columns; ``extra`` rows stay at the end (``<tfoot>``)."""
    shown = [c for c in t.cols if c.head]
    num_cls = ' class="n"'
    head = "".join(f'<th scope="col" tabindex="0"{num_cls if c.right else ""}>{html_inline(c.head)}</th>'
                   for c in shown)
    body = ["<tr>" + "".join(_cell(c, r) for c in shown) + "</tr>" for r in t.rows]
    right = [c.right for c in shown]
    foot = "".join("<tr>" + "".join(f"<td{num_cls if j < len(right) and right[j] else ''}>{html_inline(x)}</td>"
                                    for j, x in enumerate(cells)) + "</tr>" for cells in t.extra)
    cap = f"<caption>{html_inline(t.caption)}</caption>" if t.caption else ""
    tid = f' id="{h(t.tid)}"' if t.tid else ""
    return (f'<div class="tw"><table{tid} class="sortable">{cap}<thead><tr>{head}</tr></thead>'
            f"<tbody>{''.join(body)}</tbody>" + (f"<tfoot>{foot}</tfoot>" if foot else "") + "</table></div>")


class HtmlWriter:
    """Lays out parts; collects the figures of the charts it meets (in order) for :meth:`figures_json`."""

    def __init__(self) -> None:
        self.figures: List[Dict[str, Any]] = []

    def figure(self, f: Figure) -> str:
        fig: Dict[str, Any] = {"id": f.fid, "data": f.data, "layout": f.layout}
        if f.shared:
            fig["shared"] = f.shared
        self.figures.append(fig)
        return (f'<figure><div id="{h(f.fid)}" class="chart" role="img" aria-label="chart; text equivalent '
                f'in the caption"></div><figcaption>{html_inline(f.caption)}</figcaption></figure>')

    def part(self, p: Part) -> str:
        if isinstance(p, Paragraph):
            cls = f' class="{h(p.cls)}"' if p.cls else ""
            return f"<p{cls}>{html_inline(p.text)}</p>"
        if isinstance(p, Heading):
            return f"<h{p.level}>{html_inline(p.text)}</h{p.level}>"
        if isinstance(p, Note):
            return f'<p class="warning">{html_inline(p.text)}</p>'
        if isinstance(p, BulletList):
            return "<ul>" + "".join(f"<li>{html_inline(i)}</li>" for i in p.items) + "</ul>"
        if isinstance(p, TablePart):
            return html_table(p)
        if isinstance(p, Chart):
            return self.figure(p.make())
        if isinstance(p, Details):
            return f"<details><summary>{html_inline(p.summary)}</summary>{self.parts(p.parts)}</details>"
        if isinstance(p, Group):
            ident = f' data-id="{h(p.ident)}"' if p.ident else ""
            return f'<article class="{h(p.cls)}"{ident}>{self.parts(p.parts)}</article>'
        if isinstance(p, HtmlOnly):
            return self.parts(p.parts)
        return ""

    def parts(self, ps: Sequence[Part]) -> str:
        return "".join(self.part(p) for p in ps)

    def section(self, s: Section) -> str:
        title = f"<h2>{html_inline(s.title)}</h2>" if s.title else ""
        return f'<{s.tag} id="{h(s.sid)}">{title}{self.parts(s.parts)}</{s.tag}>'

    def body(self, doc: Document) -> str:
        return "\n".join(self.section(s) for s in doc.sections)

    def figures_json(self) -> str:
        return script_json({"config": PLOT_CONFIG, "figures": self.figures})


def html_page(doc: Document, js: Optional[str] = None, footer: str = "", plotly_src: Optional[str] = None) -> str:
    """The full page of a document (report.html, compare.html, cluster.html): the sections that name themselves in
    the navigation, ``footer`` (escaped HTML after ``<main>``); ``js`` replaces the plotly.js bundle (``None``: the
    installed one; tests that never draw a chart pass ``""``); ``plotly_src``: load plotly.js from that relative
    path (a copy shared by the pages of one directory tree) instead of inlining it."""
    w = HtmlWriter()
    body = w.body(doc)
    lib = "" if plotly_src is not None else plotly_js() if js is None else js
    nav = tuple((s.sid, s.nav) for s in doc.sections if s.nav)
    return page(doc.title, body, w.figures_json(), lib, nav, footer, plotly_src)


__all__ = ["HtmlWriter", "html_inline", "html_page", "html_table"]
