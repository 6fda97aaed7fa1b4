"""``report.html``: report.md's document as one self-contained offline page with charts and sortable tables (what it
adds, what it never ships, why plotly and its size: docs/DESIGN.md, "HTML")."""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from ..base import Renderer
from ..sections import build_document
from .writer import html_page

if TYPE_CHECKING:
    from ...report import Report


def render_html(report: Report, js: Optional[str] = None, plotly_src: Optional[str] = None) -> str:
    """The full ``report.html`` text of a report (``js``, ``plotly_src``: :func:`.writer.html_page`)."""
    return html_page(build_document(report), js, plotly_src=plotly_src)


class HtmlRenderer(Renderer):
    """``report.html`` (see module docstring)."""

    filename = "report.html"

    def __init__(self, plotly_src: Optional[str] = None) -> None:
        self.plotly_src = plotly_src

    def text(self, report: Report) -> str:
        return render_html(report, plotly_src=self.plotly_src)


__all__ = ["HtmlRenderer", "render_html"]
