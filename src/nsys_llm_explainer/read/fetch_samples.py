"""CPU samples (``COMPOSITE_EVENTS``) and the two frames of each sample's callchain (``SAMPLING_CALLCHAINS``) that
the host-samples analysis uses — read-only like every fetcher in :mod:`read.fetch`.

Columns are selected by name; both tables have had the same columns in every export seen (2022.2, 2022.4,
2023.4, 2024.6: ``COMPOSITE_EVENTS(id, start, cpu, threadState, globalTid, cpuCycles)``,
``SAMPLING_CALLCHAINS(id, symbol, module, kernelMode, thumbCode, unresolved, specialEntry, originalIP,
unwindMethod, stackDepth)``; one 2022.2 file also had a ``symbolName`` column appended by a third-party tool,
which is not read). ``kernelMode`` / ``unresolved`` are NULL in the 2022.2 export for user frames: read as 0.

Bounded work: only the samples of the given threads (the threads that made CUDA calls — the only ones that can
be a gap's host thread) are read, with their leaf frame (``stackDepth = 0``, one primary-key lookup per sample)
and, per sample, the first frame among the :data:`CALLER_DEPTH` innermost whose module is not in a given set
(one ``min(stackDepth)`` per sample computed by SQLite over at most that many frames; SQLite's documented
"bare column of a min() aggregate" rule gives that frame's symbol and module). Names stay StringIds ids: the
model resolves each distinct id once.
"""

from __future__ import annotations

import sqlite3
from typing import Iterable, List, Optional, Sequence

import numpy as np

from .fetch import Columns, ValueTypeError, _exclude_note, _fetch_ints, _query
from .schema import Schema

EVENTS = "COMPOSITE_EVENTS"
CHAINS = "SAMPLING_CALLCHAINS"
#: frames searched (from the leaf) for the first one outside the system modules
CALLER_DEPTH = 16


def has_samples_tables(schema: Schema) -> bool:
    """True when both tables exist with the columns the reader needs."""
    return all(schema.has(EVENTS, c) for c in ("id", "start", "globalTid")) and \
        all(schema.has(CHAINS, c) for c in ("id", "symbol", "module", "stackDepth"))


def count_samples(conn: sqlite3.Connection, schema: Schema) -> int:
    """Rows of ``COMPOSITE_EVENTS`` (0 when the table is absent)."""
    if not schema.has(EVENTS):
        return 0
    rows = _query(conn, f'SELECT count(*) FROM "{EVENTS}"')
    return int(rows[0][0]) if rows and rows[0][0] is not None else 0


def _ints(values: Iterable[int]) -> str:
    """An SQL list of integers (our own ints, never user text)."""
    out = ",".join(str(int(v)) for v in values)
    return out or "-1"


def _opt(schema: Schema, col: str) -> str:
    return f'COALESCE(c."{col}", 0)' if schema.has(CHAINS, col) else "0"


def _run(conn: sqlite3.Connection, sql: str, names: Sequence[str], guard: str, note: str) -> Columns:
    """``sql`` (with a ``{guard}`` placeholder in its WHERE clause) through the integer fetch; rows with a
    non-integer value are left out (``guard`` filters them) and stated."""
    try:
        return _fetch_ints(conn, sql.format(guard="1"), names)
    except ValueTypeError:
        _exclude_note(conn, note)
        return _fetch_ints(conn, sql.format(guard=guard), names)


def fetch_samples(conn: sqlite3.Connection, schema: Schema, threads: Sequence[int]) -> Optional[Columns]:
    """Samples of ``threads`` (serialized globalTids): ``id``, ``start``, ``gtid`` and the leaf frame's
    ``leaf_symbol``, ``leaf_module`` (StringIds ids; -1 when the sample has no callchain), ``leaf_kernel``
    (kernelMode) and ``leaf_unresolved``. ``None`` when the tables are missing."""
    if not has_samples_tables(schema):
        return None
    if not threads:
        return {k: np.empty(0, np.int64) for k in ("id", "start", "gtid", "leaf_symbol", "leaf_module",
                                                   "leaf_kernel", "leaf_unresolved")}
    sql = (f'SELECT e.id, e.start, e.globalTid, COALESCE(c.symbol, -1), COALESCE(c.module, -1), '
           f'{_opt(schema, "kernelMode")}, {_opt(schema, "unresolved")} '
           f'FROM "{EVENTS}" e LEFT JOIN "{CHAINS}" c ON c.id = e.id AND c.stackDepth = 0 '
           f'WHERE e.globalTid IN ({_ints(threads)}) AND {{guard}}')
    guard = ("typeof(e.id) = 'integer' AND typeof(e.start) = 'integer' AND "
             "typeof(c.symbol) IN ('integer', 'null') AND typeof(c.module) IN ('integer', 'null')")
    return _run(conn, sql, ["id", "start", "gtid", "leaf_symbol", "leaf_module", "leaf_kernel", "leaf_unresolved"],
                guard, f"{EVENTS}/{CHAINS}: samples with a non-integer value were left out.")


def fetch_callers(conn: sqlite3.Connection, schema: Schema, threads: Sequence[int],
                  system_modules: Sequence[int], depth: int = CALLER_DEPTH) -> Optional[Columns]:
    """Per sample of ``threads`` that has one: the first frame among the ``depth`` innermost (``stackDepth <
    depth``) that is in user mode and whose module id is not in ``system_modules`` — ``id`` (sample),
    ``depth``, ``symbol``, ``module``, ``unresolved``. Samples without such a frame have no row."""
    if not has_samples_tables(schema):
        return None
    names = ["id", "depth", "symbol", "module", "unresolved"]
    if not threads:
        return {k: np.empty(0, np.int64) for k in names}
    km = 'AND COALESCE(c."kernelMode", 0) = 0 ' if schema.has(CHAINS, "kernelMode") else ""
    sql = (f'SELECT c.id, min(c.stackDepth), c.symbol, c.module, {_opt(schema, "unresolved")} '
           f'FROM "{EVENTS}" e CROSS JOIN "{CHAINS}" c ON c.id = e.id AND c.stackDepth < {int(depth)} '
           f'WHERE e.globalTid IN ({_ints(threads)}) AND c.module NOT IN ({_ints(system_modules)}) {km}'
           f'AND {{guard}} GROUP BY c.id')
    guard = ("typeof(c.id) = 'integer' AND typeof(c.stackDepth) = 'integer' AND typeof(c.symbol) = 'integer' "
             "AND typeof(c.module) = 'integer'")
    return _run(conn, sql, names, guard, f"{CHAINS}: callchain frames with a non-integer value were left out.")


def capture_requested(schema: Schema) -> Optional[bool]:
    """Whether the capture metadata says CPU IP/backtrace sampling was on (``None``: not recorded)."""
    v = schema.meta_value("capture:LINUX_PERF_OPTIONS:COLLECT_IP_BACKTRACE_SAMPLES")
    if v is None:
        return None
    return str(v).strip().lower() == "true"


__all__: List[str] = ["CALLER_DEPTH", "capture_requested", "count_samples", "fetch_callers", "fetch_samples",
                      "has_samples_tables"]
