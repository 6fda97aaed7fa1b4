"""Kernel launch configurations (grid, block, registers, shared memory) of the few kernels the timeline file holds,
read afterwards by rowid (``rowid IN (…)``: one b-tree descent per row; the model keeps each kernel's rowid); an
export without the columns gives ``None``. Why: docs/PERFORMANCE.md, "Kernel launch configurations in the
timeline file".
"""

from __future__ import annotations

import sqlite3
from typing import Dict, List, Optional, Tuple

import numpy as np

from ..errors import InputError
from .connection import TraceConnection, open_readonly

#: output name → column of the kernel table (CUPTI_ACTIVITY_KIND_KERNEL, 2021.x – 2026.x)
LAUNCH_COLS = {
    "grid_x": "gridX", "grid_y": "gridY", "grid_z": "gridZ",
    "block_x": "blockX", "block_y": "blockY", "block_z": "blockZ",
    "registers": "registersPerThread", "static_smem": "staticSharedMemory", "dynamic_smem": "dynamicSharedMemory",
}
#: the columns the rows are checked against (the model's values of the same kernels)
KEY_COLS = {"start": "start", "end": "end", "corr": "correlationId"}
BATCH = 500   # rowids per query (under every SQLite's limit of bound parameters)


def rowid_range(conn: TraceConnection, table: str) -> Optional[Tuple[int, int]]:
    """(smallest, largest) rowid of ``table`` — two b-tree descents — or None (empty, not a rowid table, error).
    Two statements: SQLite answers a lone ``min(rowid)`` or ``max(rowid)`` from the b-tree's edge, but both in one
    statement scan the whole table (0.4 s on 5 M kernels)."""
    try:
        with conn.lock:
            lo = conn.execute(f'SELECT min(rowid) FROM "{table}"').fetchone()[0]
            hi = conn.execute(f'SELECT max(rowid) FROM "{table}"').fetchone()[0]
    except sqlite3.DatabaseError:
        return None
    return (lo, hi) if isinstance(lo, int) and isinstance(hi, int) else None


def fetch_launch_config(path: str, table: str, rowids: np.ndarray) -> Optional[Dict[str, np.ndarray]]:
    """For each of ``rowids`` (rows of the kernel ``table`` of the export at ``path``): ``rowid``, the key columns
    (:data:`KEY_COLS`) and the launch columns the table has (:data:`LAUNCH_COLS`; -1 for NULL or a column the export
    lacks), one int64 array each, in no particular order. A row whose value is not an integer (text, blob, real) is
    left out. None when the table has no grid / block column or the file cannot be read again."""
    want = np.unique(np.asarray(rowids, np.int64))
    try:
        conn: TraceConnection = open_readonly(path, "sqlite3")
    except InputError:
        return None
    try:
        cols = {str(r[0]) for r in conn.execute("SELECT name FROM pragma_table_info(?)", (table,))}
        if not cols >= {"gridX", "blockX", "start", "end", "correlationId"}:
            return None
        names = ["rowid"] + list(KEY_COLS) + list(LAUNCH_COLS)
        src = list(KEY_COLS.values()) + list(LAUNCH_COLS.values())
        exprs = ["rowid"] + [f'COALESCE("{c}", -1)' if c in cols else "-1" for c in src]
        ints = " AND ".join(f"typeof(\"{c}\") IN ('integer', 'null')" for c in src if c in cols)
        parts: List[np.ndarray] = []
        for i in range(0, want.shape[0], BATCH):
            chunk = want[i:i + BATCH].tolist()
            sql = (f'SELECT {", ".join(exprs)} FROM "{table}" WHERE rowid IN ({",".join("?" * len(chunk))}) '
                   f"AND {ints}")
            got = conn.execute(sql, chunk).fetchall()
            if got:
                parts.append(np.array(got, dtype=np.int64).reshape(-1, len(names)))
    except (sqlite3.DatabaseError, OverflowError):
        return None
    finally:
        conn.close()
    arr = np.concatenate(parts) if parts else np.empty((0, len(names)), np.int64)
    return {n: arr[:, j].copy() for j, n in enumerate(names)}
