"""Copy byte counts an export may not record (docs/METRICS.md, "Memcpy / memset"): the reader reads a NULL byte
count, or an export without the ``bytes`` column, as ``-1`` (read/fetch.py). A byte total counts only the rows that
record their bytes; it is None (shown "–") when no row of the group records one, never a sum of the sentinel.
"""

from __future__ import annotations

from typing import Optional, Tuple

import numpy as np


def recorded_bytes(nbytes: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """(the byte count of each row, 0 where unrecorded; the mask of the rows that record theirs)."""
    nb = np.asarray(nbytes, np.int64)
    known = nb >= 0
    return np.where(known, nb, 0), known


def bytes_or_none(total: int, recorded: int, rows: int) -> Optional[int]:
    """``total`` (bytes of the rows that record them), None when ``rows`` > 0 rows of which ``recorded`` = 0 do (no
    rows: 0 bytes)."""
    return int(total) if recorded or not rows else None
