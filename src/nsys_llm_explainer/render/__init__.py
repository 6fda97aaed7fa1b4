"""Renderers: the report dict (``report.json``, built by :mod:`..serialize`) → files in an output directory.

``ALL_RENDERERS`` lists the renderer classes run for every report: Markdown (``report.md``), JSON
(``report.json``), CSV (``tables/*.csv``) and HTML (``report.html``, one offline page with charts).
:func:`load_schema` returns the JSON Schema of ``report.json``.
Renderers format the dict; they never compute a metric (docs/MODEL.md defines every number).
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any, Dict, List, Mapping, Type

from .base import JsonRenderer, Renderer
from .csv_tables import CsvRenderer
from .html import HtmlRenderer, render_html
from .markdown import MarkdownRenderer, render_markdown

ALL_RENDERERS: List[Type[Renderer]] = [MarkdownRenderer, JsonRenderer, CsvRenderer, HtmlRenderer]
SCHEMA_FILE = "report_schema.json"


def load_schema() -> Dict[str, Any]:
    """The JSON Schema of ``report.json`` (package data ``nsys_llm_explainer/report_schema.json``)."""
    text = resources.files("nsys_llm_explainer").joinpath(SCHEMA_FILE).read_text(encoding="utf-8")
    return json.loads(text)


def render_all(report: Mapping[str, Any], out_dir: Path) -> List[Path]:
    """Run every renderer in :data:`ALL_RENDERERS` into ``out_dir``; return the files written."""
    written: List[Path] = []
    for cls in ALL_RENDERERS:
        written += cls().render(report, Path(out_dir))
    return written


__all__ = [
    "ALL_RENDERERS",
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
