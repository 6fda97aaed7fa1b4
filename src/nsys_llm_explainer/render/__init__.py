"""Renderers: the typed :class:`..report.Report` → ``report.md``, ``report.json``, ``tables/*.csv`` and
``report.html`` (:data:`ALL_RENDERERS`); formatting only. Layout and how to add a section or a table: docs/DESIGN.md,
"One document for every output"."""

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
