"""Synthetic Nsight Systems SQLite exports: a row-level builder and planted-cause scenarios."""

from __future__ import annotations

from .builder import FLAVORS, TraceBuilder, global_pid, global_tid, short_kernel_name
from .scenarios import CAUSES, SCENARIOS, build_scenario

__all__ = [
    "CAUSES",
    "FLAVORS",
    "SCENARIOS",
    "TraceBuilder",
    "build_scenario",
    "global_pid",
    "global_tid",
    "short_kernel_name",
]
