"""Interval arithmetic lives in :mod:`model.intervals` (the timeline is built from it); re-exported here for
the analyses."""

from __future__ import annotations

from ..model.intervals import (
    Union,
    covered_before,
    gaps,
    overlap_length,
    union,
    union_blocks,
    union_lean,
    union_unsorted,
)

__all__ = ["Union", "covered_before", "gaps", "overlap_length", "union", "union_blocks", "union_lean",
           "union_unsorted"]
