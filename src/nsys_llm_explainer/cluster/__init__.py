"""Many files, one report: per-file analysis in parallel, then a cluster view (docs/CLUSTER.md)."""

from __future__ import annotations

from .result import SCHEMA_VERSION, ClusterResult, build_result
from .run import analyze_many, expand_inputs, make_labels
from .summary import FileSummary, analyze_file

__all__ = ["SCHEMA_VERSION", "ClusterResult", "FileSummary", "analyze_file", "analyze_many", "build_result",
           "expand_inputs", "make_labels"]
