"""Columnar reads: the same SQL as the standard-library path, fetched through ADBC's SQLite driver as Arrow columns
(no Python object per value; the driver releases the GIL, so two tables are read at once), on the same read-only
URI as :func:`read.connection.open_readonly`. Every call returns ``None`` when it cannot give exactly what
:func:`read.fetch._fetch_ints` would (no driver, a NULL, a value that is not a 64-bit integer, a driver error): the
standard-library path then runs. Measurements: docs/PERFORMANCE.md, "Reader, chosen by measurement".
"""

from __future__ import annotations

import contextlib
import enum
import os
from types import ModuleType
from typing import TYPE_CHECKING, Dict, List, Optional, Sequence, Union

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow

#: reader names accepted by ``Options.reader`` / ``NSYS_LLM_EXPLAINER_READER``
READERS = ("auto", "adbc", "sqlite3")
#: rows per Arrow batch (the driver's default, 1,024, makes ~5,000 chunks per 5 M rows)
BATCH_ROWS = 65_536


class _Outcome(enum.Enum):
    TYPE_MISMATCH = "type mismatch"


#: returned by :func:`fetch_ints` when a value is not an integer (text, blob, real): the rows must be filtered
TYPE_MISMATCH = _Outcome.TYPE_MISMATCH


def adbc_available() -> bool:
    """True when ``adbc-driver-sqlite`` (with its driver manager) and ``pyarrow`` import."""
    try:
        import adbc_driver_manager  # noqa: F401
        import adbc_driver_sqlite  # noqa: F401
        import pyarrow  # noqa: F401
    except Exception:   # ImportError, or a broken binary wheel
        return False
    return True


def resolve_reader(requested: str) -> str:
    """The reader a run uses: ``requested`` (``auto`` → ``adbc`` when installed, else ``sqlite3``); the
    environment variable ``NSYS_LLM_EXPLAINER_READER`` overrides ``auto`` (benchmarks, tests)."""
    if requested == "auto":
        requested = os.environ.get("NSYS_LLM_EXPLAINER_READER", "auto").strip().lower() or "auto"
        if requested not in READERS:
            requested = "auto"
    if requested == "auto":
        return "adbc" if adbc_available() else "sqlite3"
    if requested == "adbc" and not adbc_available():
        return "sqlite3"
    return requested


def _values(col: pyarrow.Array, pa: ModuleType) -> np.ndarray:
    """The values of an Arrow integer array without nulls, as numpy (a view of its data buffer for int64 —
    ``Array.to_numpy`` would import pandas, +0.25 s — else through ``to_numpy``)."""
    if col.type == pa.int64():
        return np.frombuffer(col.buffers()[1], dtype=np.int64, count=col.offset + len(col))[col.offset:]
    return col.to_numpy(zero_copy_only=True)


def _fill(reader: pyarrow.RecordBatchReader, ncol: int, pa: ModuleType, capacity: int) -> Optional[List[np.ndarray]]:
    """Copy the Arrow batches of ``reader`` into one int64 array per column, preallocated for ``capacity``
    rows (grown by doubling if the guess was short) and trimmed at the end — no list of per-batch pieces, so
    peak memory is about the result itself. ``None`` on a NULL or a non-integer column."""
    cap = max(int(capacity), 1)
    out = [np.empty(cap, np.int64) for _ in range(ncol)]
    n = 0
    for batch in reader:
        if batch.num_columns != ncol:
            return None
        m = batch.num_rows
        if n + m > cap:
            cap = max(2 * cap, n + m)
            out = [np.concatenate([o[:n], np.empty(cap - n, np.int64)]) for o in out]
        for i in range(ncol):
            col = batch.column(i)
            if m and (col.null_count or not pa.types.is_integer(col.type)):
                return None
            if m:
                out[i][n:n + m] = _values(col, pa)
        n += m
    return [o[:n] if n > 0.9 * o.shape[0] else o[:n].copy() for o in out]


def fetch_ints(uri: str, sql: str, names: Sequence[str], capacity: int = 0
               ) -> Union[Dict[str, np.ndarray], _Outcome, None]:
    """Run ``sql`` (an integer-only select list without NULLs) on ``uri`` and return one int64 array per
    column; :data:`TYPE_MISMATCH` when a value is not an integer (or a NULL slipped through); ``None`` when the
    columnar path fails otherwise (see the module docstring).
    ``capacity``: expected number of rows (an upper bound such as the table's largest rowid avoids regrowth)."""
    try:
        # the low-level API: the DB-API module imports pyarrow.dataset and pandas (~0.4 s) for nothing here
        import adbc_driver_manager as dm
        import adbc_driver_sqlite
        import pyarrow as pa

        with contextlib.ExitStack() as handles:   # closed in reverse: statement, connection, database
            db = adbc_driver_sqlite.connect(uri)
            handles.callback(db.close)
            conn = dm.AdbcConnection(db)
            handles.callback(conn.close)
            st = dm.AdbcStatement(conn)
            handles.callback(st.close)
            st.set_options(**{"adbc.sqlite.query.batch_rows": str(BATCH_ROWS)})
            st.set_sql_query(sql)
            stream, _ = st.execute_query()
            reader = pa.RecordBatchReader._import_from_c(stream.address)
            try:
                cols = _fill(reader, len(names), pa, capacity or BATCH_ROWS)
            finally:
                reader.close()
    except Exception as exc:   # any other driver failure: the standard-library path decides
        return TYPE_MISMATCH if "type mismatch" in str(exc).lower() else None
    return TYPE_MISMATCH if cols is None else dict(zip(names, cols))
