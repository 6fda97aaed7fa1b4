"""Compare traces: BASE against one or more NEW runs of the same workload (docs/COMPARE.md). :func:`compare_reports`
/ :func:`compare_paths` return a typed :class:`CompareResult` and write nothing (:mod:`.write` writes)."""

from __future__ import annotations

from typing import Any, Dict

from ..render import load_schema
from .core import compare_paths, compare_reports, default_labels
from .result import COMPARE_SCHEMA_VERSION, CompareResult, Comparison, MetricSpec, TraceSummary

SCHEMA_FILE = "compare_schema.json"


def load_compare_schema() -> Dict[str, Any]:
    """The JSON Schema of ``compare.json`` (package data ``nsys_llm_explainer/compare_schema.json``)."""
    return load_schema(SCHEMA_FILE)


__all__ = [
    "COMPARE_SCHEMA_VERSION",
    "CompareResult",
    "Comparison",
    "MetricSpec",
    "TraceSummary",
    "compare_paths",
    "compare_reports",
    "default_labels",
    "load_compare_schema",
]
