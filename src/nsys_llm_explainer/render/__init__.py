"""Renderers: the typed :class:`..report.Report` → files in an output directory.

``ALL_RENDERERS`` lists the renderer classes run for every report: Markdown (``report.md``), JSON
(``report.json``), CSV (``tables/*.csv``) and HTML (``report.html``, one offline page with charts).
:func:`load_schema` returns the JSON Schema of ``report.json``.
Renderers format the typed results; they never compute a metric (docs/MODEL.md defines every number).

One document model for every output (:mod:`.document`):

* **sections** (:mod:`.sections` for the report, :mod:`.cluster` for the cluster report, ``comparison.document``
  for compare) read the typed report (cluster and compare: their result dicts) once and build a
  :class:`.document.Document` of typed, frozen parts — headings, paragraphs of inline spans (the tool's words,
  user data to escape, names in monospace, emphasis, links),
  bullet lists, tables, charts, collapsible details, cards;
* **tables** are :class:`.table.Table` specs (:mod:`.specs`): one column language (:class:`.table.Col`) gives a
  table's CSV columns and its shown columns, so ``tables/*.csv`` and the tables of report.md / report.html
  cannot disagree;
* **writers** only escape (:mod:`.escape`) and lay out: :mod:`.markdown` (report.md, compare.md, cluster.md),
  :mod:`.html.writer` in the page shell of :mod:`.html.page` (report.html, compare.html, cluster.html; charts as
  plotly figure dicts, built only for the page), :mod:`.csv_tables` (every CSV file);
* **units** are formatted by :mod:`..vocabulary.units` only (one formatter per unit).

To add a report section: write a builder ``(View) -> Section | Omitted | None`` in :mod:`.sections` (parts
only; no Markdown or HTML), add it to ``sections.SECTIONS``; for a new table add its spec to :mod:`.specs`
(``CSV_TABLES``) and show ``TablePart(SPEC.cols, rows)``. report.md and report.html then both hold it
(tests/render/test_document.py checks that the page holds every section, sentence and table row of the Markdown).
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Type

from .base import JsonRenderer, Renderer
from .csv_tables import CsvRenderer
from .html import HtmlRenderer, render_html
from .markdown import MarkdownRenderer, render_markdown

if TYPE_CHECKING:
    from ..report import Report

ALL_RENDERERS: List[Type[Renderer]] = [MarkdownRenderer, JsonRenderer, CsvRenderer, HtmlRenderer]
SCHEMA_FILE = "report_schema.json"


def load_schema(name: str = SCHEMA_FILE) -> Dict[str, Any]:
    """The JSON Schema of ``report.json`` (package data ``nsys_llm_explainer/report_schema.json``; ``name``: another
    of the package's schema files)."""
    text = resources.files("nsys_llm_explainer").joinpath(name).read_text(encoding="utf-8")
    return json.loads(text)


def summary_lines(report: Report) -> List[str]:
    """The command line's stdout summary of a report (verdict, busy share, first action), one line each:
    the headline's terminal parts (:func:`.sections.headline.terminal_summary`) through the plain-text writer."""
    from .sections.ctx import View
    from .sections.headline import terminal_summary
    from .text import text_lines

    return text_lines(terminal_summary(View(report)))


def render_all(report: Report, out_dir: Path, plotly_src: Optional[str] = None) -> List[Path]:
    """Run every renderer in :data:`ALL_RENDERERS` into ``out_dir``; return the files written. ``plotly_src``:
    report.html loads plotly.js from that relative path (a copy the caller writes once for many reports)."""
    written: List[Path] = []
    for cls in ALL_RENDERERS:
        r = HtmlRenderer(plotly_src) if cls is HtmlRenderer else cls()
        written += r.render(report, Path(out_dir))
    return written


__all__ = [
    "ALL_RENDERERS",
    "summary_lines",
    "CsvRenderer",
    "HtmlRenderer",
    "JsonRenderer",
    "MarkdownRenderer",
    "Renderer",
    "load_schema",
    "render_all",
    "render_html",
    "render_markdown",
]
