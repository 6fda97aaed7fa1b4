"""Rows whose times cannot be true are left out where they enter the model, counted and stated.

A row of an activity table (kernels, CUDA API calls, memcpy/memset/synchronization/graph rows, OS-runtime calls,
NVTX ranges) is **impossible** when its ``start`` is missing or outside ``[0, 2^62]`` ns (2^62 ns ≈ 146 years:
no clock an export uses gets there; values near 2^63 would overflow every sum), when its ``end`` is outside that
range, or when it ends before it starts. Such rows are excluded from every number, and the report's warnings say
how many per table and why (docs/SECURITY.md, "Values entering the model"). Zero-length rows are kept.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import numpy as np

MAX_TS = 1 << 62


def impossible(start: np.ndarray, end: np.ndarray, has_end: Optional[np.ndarray] = None
               ) -> Tuple[np.ndarray, int, int]:
    """(mask of impossible rows, rows with a time out of range, rows ending before they start). ``has_end``:
    rows whose ``end`` is known (NVTX: unterminated ranges have none); default: every row."""
    out_of_range = (start < 0) | (start > MAX_TS)
    known = np.ones(start.shape[0], bool) if has_end is None else has_end.astype(bool)
    out_of_range |= known & ((end < 0) | (end > MAX_TS))
    backwards = ~out_of_range & known & (end < start)
    return out_of_range | backwards, int(out_of_range.sum()), int(backwards.sum())


def note(table: str, n_range: int, n_back: int) -> Optional[str]:
    """The warning line for a table's excluded rows (None when there are none)."""
    parts = []
    if n_range:
        parts.append(f"{n_range} with a start or end time missing or outside 0 … 2^62 ns")
    if n_back:
        parts.append(f"{n_back} ending before they start")
    if not parts:
        return None
    return f"{table}: {n_range + n_back} impossible row(s) left out of every number ({'; '.join(parts)})."


def drop_impossible(cols: Dict[str, np.ndarray], table: str, warnings: List[str],
                    has_end: Optional[str] = None) -> Dict[str, np.ndarray]:
    """``cols`` without its impossible rows (a warning added to ``warnings`` when there are some);
    the same dict, untouched, when every row is possible."""
    if "start" not in cols or "end" not in cols or cols["start"].shape[0] == 0:
        return cols
    bad, n_range, n_back = impossible(cols["start"], cols["end"], cols.get(has_end) if has_end else None)
    if not (n_range or n_back):
        return cols
    keep = np.nonzero(~bad)[0]
    msg = note(table, n_range, n_back)
    if msg:
        warnings.append(msg)
    return {k: v[keep] for k, v in cols.items()}
