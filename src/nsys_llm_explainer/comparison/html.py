"""``compare.html``: the comparison's document (:mod:`.document`: the same sections, sentences and tables as
``compare.md``, plus stacked bars of the time per unit of work) as one self-contained, offline page.

Built from the report page's pieces (:mod:`render.html`): the same Content-Security-Policy, style sheet, writer
(escaping, sortable tables), chart boot script and the plotly.js bundle inlined from the ``plotly`` package.
Without ``plotly`` installed the page still has every table and says that the charts could not be drawn.
Formatting only: every number is the typed :class:`.result.CompareResult`'s (as in ``compare.json``).
"""

from __future__ import annotations

from typing import Optional

from ..render.html.page import page
from ..render.html.writer import HtmlWriter, nav
from .document import compare_document
from .result import CompareResult


def plotly_bundle() -> str:
    """plotly.js from the ``plotly`` package, or ``""`` when it is not installed (the page says so)."""
    try:
        from plotly.offline import get_plotlyjs  # type: ignore[import-untyped]  # plotly ships no type stubs
    except ImportError:
        return ""
    return str(get_plotlyjs())


def render_compare_html(result: CompareResult, js: Optional[str] = None, top: Optional[int] = None) -> str:
    """The full ``compare.html`` of the comparison (``js``: plotly.js; ``None`` = installed one)."""
    doc = compare_document(result, top)
    w = HtmlWriter()
    body = w.body(doc)
    return page(doc.title, body, w.figures_json(), plotly_bundle() if js is None else js, nav(doc))
