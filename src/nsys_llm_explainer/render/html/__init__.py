"""``report.html``: the report as one self-contained, offline page with interactive charts.

The page lays out the same document as report.md (:func:`..sections.build_document`: every section, sentence and
table of report.md, by the same builders), plus what only a page can show: charts (the per-device timeline of the
analysis window, ``timeline.devices[]``; idle time by cause per device; non-overlapped time per kernel category;
the step time series and distributions), sortable tables whose cells carry the exact report values, and a few
chart-side tables. Every chart has a caption naming the report.json key (and CSV) that holds the same numbers.

Formatting only: every number comes from the report dict (the same dict as report.json) and is converted
to display units, never recomputed; the analysis does the downsampling (``timeline.bins`` bins per device),
no per-row data is shipped (kernels, gaps and causes are the report's capped lists; steps are capped at
:data:`..sections.steps.MAX_STEP_POINTS` points). User-controlled strings are HTML-escaped in markup, entity-escaped
in plotly labels and JSON-escaped in the data script (:mod:`.markup`); a strict Content-Security-Policy
(:mod:`.page`) forbids loading anything.

Why plotly (the Python package's bundled plotly.js, inlined): the timeline needs interactive zoom, pan and
hover to be useful (500 bins per device, gaps of a few hundred µs in a window of seconds); the page must be
one file that works from ``file://`` with no network, which plotly.js does with nothing but itself; and the
vLLM seed of this project uses plotly too, so the charts look and behave alike. Figures are written
as plain dicts: plotly's Python figure layer (``graph_objects``) validates every attribute, about 0.1 s
for one 9-trace, 500-bin timeline, while this whole page is built and written in about 40 ms. The cost
is size: plotly.js is about 4.6 MiB (4,815,814 bytes in plotly 7.1.0), inlined once per page; the demo's
report.html (``python -m nsys_llm_explainer demo``) is 5,005,153 bytes (about 5.0 MB) with plotly 7.1.0, of
which about 190 kB is the report itself (markup, tables and figure data). A 5 M-kernel trace
(``bench/bench_report.py``'s export, 2 devices) gives 5,216,958 bytes: the timeline is 500 bins per device
and steps are capped at 4,000 points, so the page does not grow with the trace. The chart library is
imported only when the page is written.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from ..base import Renderer
from ..sections import build_document
from .page import plotly_js
from .writer import html_page

if TYPE_CHECKING:
    from ...report import Report


def render_html(report: Report, js: Optional[str] = None, plotly_src: Optional[str] = None) -> str:
    """The full ``report.html`` text of a report (``js``, ``plotly_src``: :func:`.writer.html_page`)."""
    return html_page(build_document(report), js, plotly_src=plotly_src)


class HtmlRenderer(Renderer):
    """``report.html`` (see module docstring)."""

    name = "html"
    filename = "report.html"

    def __init__(self, plotly_src: Optional[str] = None) -> None:
        self.plotly_src = plotly_src

    def text(self, report: Report) -> str:
        return render_html(report, plotly_src=self.plotly_src)


__all__ = ["HtmlRenderer", "plotly_js", "render_html"]
