"""Compare traces: BASE against one or more NEW runs of the same workload (docs/COMPARE.md). :func:`compare_reports`
/ :func:`compare_paths` return a typed :class:`CompareResult` and write nothing (:mod:`.write` writes)."""

from __future__ import annotations

from .core import compare_paths, compare_reports, default_labels
from .result import COMPARE_SCHEMA_VERSION, CompareResult, Comparison, MetricSpec, TraceSummary

__all__ = [
    "COMPARE_SCHEMA_VERSION",
    "CompareResult",
    "Comparison",
    "MetricSpec",
    "TraceSummary",
    "compare_paths",
    "compare_reports",
    "default_labels",
]
