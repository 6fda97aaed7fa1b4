"""``report.html``: the report as one self-contained, offline page with interactive charts.

Layout, in the order of report.md: title and headline (verdict, steady busy %, the window stated once, top
cause with time at stake, first action), warnings, findings, then the per-device **timeline** of the
analysis window (``timeline.devices[]``: busy and idle-by-cause per bin, window edges and largest gaps
marked), where the idle time went per device (``idle_causes``), kernel categories, steps, and a sortable
top-kernel table. Every chart has a caption naming the report.json key (and report.md section / CSV) that
holds the same numbers as text. :data:`SECTIONS` is the one ordered list of sections.

Formatting only: every number comes from the report dict (the same dict as report.json) and is converted
to display units, never recomputed; the analysis does the downsampling (``timeline.bins`` bins per device),
no per-row data is shipped (kernels, gaps and causes are the report's capped lists; steps are capped at
:data:`.steps.MAX_STEP_POINTS` points). User-controlled strings are HTML-escaped in markup, entity-escaped
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

from typing import Any, Mapping, Optional, Tuple

from ..base import Renderer
from .breakdown import sec_categories, sec_idle, sec_kernels
from .ctx import HtmlCtx, Section
from .page import page
from .step_sync import sec_step_sync
from .steps import sec_steps
from .summary import sec_facts, sec_findings, sec_headline, sec_warnings
from .timeline import sec_timeline
from .unified_memory import sec_unified_memory

#: every section of report.html, in order
SECTIONS: Tuple[Section, ...] = (
    sec_headline,
    sec_warnings,
    sec_findings,
    sec_timeline,
    sec_idle,
    sec_facts,
    sec_categories,
    sec_steps,
    sec_kernels,
    sec_unified_memory,
    sec_step_sync,   # per-step synchronization
)


def plotly_js() -> str:
    """The plotly.js bundle shipped with the ``plotly`` Python package (a declared dependency)."""
    from plotly.offline import get_plotlyjs

    return get_plotlyjs()


def render_html(report: Mapping[str, Any], js: Optional[str] = None) -> str:
    """The full ``report.html`` text for a report dict. ``js`` replaces the plotly.js bundle (``None``: the
    installed one); tests that never draw a chart pass ``""`` to keep the 4.6 MB out of their strings."""
    ctx = HtmlCtx(report)
    body = "\n".join(out for out in (fn(ctx) for fn in SECTIONS) if out)
    name = str(ctx.sec("trace").get("path") or "").replace("\\", "/").rsplit("/", 1)[-1] or "trace"
    return page(f"Nsight Systems LLM report: {name}", body, ctx.figures_json(), plotly_js() if js is None else js)


class HtmlRenderer(Renderer):
    """``report.html`` (see module docstring)."""

    name = "html"
    filename = "report.html"

    def text(self, report: Mapping[str, Any]) -> str:
        return render_html(report)


__all__ = ["HtmlRenderer", "SECTIONS", "render_html"]
