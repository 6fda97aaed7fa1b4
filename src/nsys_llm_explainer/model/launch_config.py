"""Launch configurations (grid, block, registers per thread, shared memory) of the kernels the timeline file holds,
read again by rowid (:mod:`read.fetch_launch`). Each row read is checked against the model's own start, end and
correlation id of that kernel: any difference (the file changed, a read order that was not the rowid order) and
nothing is used.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from ..read.fetch_launch import fetch_launch_config
from .trace import TraceModel


@dataclass(frozen=True)
class LaunchConfig:
    """Per kernel of ``rows`` (rows of the model's kernel table, in that order): ``grid`` and ``block`` (n × 3: x, y,
    z), ``registers`` (per thread), ``static_smem`` / ``dynamic_smem`` (shared memory per block, bytes); -1 where
    the export has no value (NULL, no such column, a value that is not an integer)."""

    rows: np.ndarray
    grid: np.ndarray
    block: np.ndarray
    registers: np.ndarray
    static_smem: np.ndarray
    dynamic_smem: np.ndarray

    def __len__(self) -> int:
        return int(self.rows.shape[0])


def read_launch_config(model: TraceModel, rows: np.ndarray) -> Optional[LaunchConfig]:
    """The launch configurations of the model's kernels ``rows``; None when there are none to show: no such rows,
    rowids unknown (``Kernels.rowid_base``), no grid / block columns, the file unreadable or not the one read."""
    k, table = model.kernels, model.info.kernel_table
    if k is None or table is None or rows.shape[0] == 0:
        return None
    rid = k.rowids(rows)
    if rid is None:
        return None
    got = fetch_launch_config(model.info.path, table, rid)
    if got is None:
        return None
    order = np.argsort(rid, kind="stable")
    srt = rid[order]
    at = np.minimum(np.searchsorted(srt, got["rowid"]), srt.shape[0] - 1)
    found = srt[at] == got["rowid"]
    idx = order[at[found]]   # position in ``rows`` of each row read
    mine = rows[idx]
    if not all(np.array_equal(np.asarray(getattr(k, c), np.int64)[mine], got[c][found])
               for c in ("start", "end", "corr")):
        return None
    n = rows.shape[0]

    def col(name: str) -> np.ndarray:
        out = np.full(n, -1, np.int64)
        out[idx] = got[name][found]
        return out

    grid, block = (np.stack([col(f"{w}_{a}") for a in "xyz"], axis=1) for w in ("grid", "block"))
    return LaunchConfig(rows, grid, block, col("registers"), col("static_smem"), col("dynamic_smem"))
