"""CPU samples (``COMPOSITE_EVENTS``) and the two frames of each sample's callchain (``SAMPLING_CALLCHAINS``) that
the host-samples analysis uses: only the samples of the given threads inside the trace's activity span, each with
its leaf frame and its first frame among the :data:`CALLER_DEPTH` innermost outside a given set of modules (a
correlated ``LIMIT 1`` search); names stay StringIds ids. What is read and why: docs/MODEL.md, "What the host ran
during host-side idle".
"""

from __future__ import annotations

from typing import Iterable, List, Optional, Sequence

import numpy as np

from .connection import TraceConnection
from .fetch import Columns, ValueTypeError, _fetch_ints, _query
from .schema import Schema

EVENTS = "COMPOSITE_EVENTS"
CHAINS = "SAMPLING_CALLCHAINS"
#: frames searched (from the leaf) for the first one outside the system modules
CALLER_DEPTH = 16


def has_samples_tables(schema: Schema) -> bool:
    """True when both tables exist with the columns the reader needs."""
    return all(schema.has(EVENTS, c) for c in ("id", "start", "globalTid")) and \
        all(schema.has(CHAINS, c) for c in ("id", "symbol", "module", "stackDepth"))


def count_samples(conn: TraceConnection, schema: Schema) -> int:
    """Rows of ``COMPOSITE_EVENTS`` (0 when the table is absent)."""
    return int(_query(conn, f'SELECT count(*) FROM "{EVENTS}"')[0][0]) if schema.has(EVENTS) else 0


def count_samples_by_pid(conn: TraceConnection, schema: Schema) -> Optional[Columns]:
    """``pid`` and ``samples`` (rows of ``COMPOSITE_EVENTS``) of every process with a CPU sample, the process decoded
    from the sample's serialized globalTid (bits 24-47, like :func:`model.trace.pid_of`); rows with a non-integer
    globalTid are not counted. ``None`` when the table lacks ``globalTid``. One grouped scan (the trace facts'
    "other processes", docs/METRICS.md "Trace and capture")."""
    if not schema.has(EVENTS, "globalTid"):
        return None
    sql = (f'SELECT (e.globalTid >> 24) & {0xFFFFFF} AS pid, count(*) FROM "{EVENTS}" e '
           f"WHERE typeof(e.globalTid) = 'integer' GROUP BY pid ORDER BY pid")
    return _fetch_ints(conn, sql, ["pid", "samples"])


def _ints(values: Iterable[int]) -> str:
    """An SQL list of integers (our own ints, never user text)."""
    out = ",".join(str(int(v)) for v in values)
    return out or "-1"


def _opt(schema: Schema, col: str, alias: str) -> str:
    return f'COALESCE({alias}."{col}", 0)' if schema.has(CHAINS, col) else "0"


def fetch_samples(conn: TraceConnection, schema: Schema, threads: Sequence[int], system_modules: Sequence[int],
                  lo: Optional[int] = None, hi: Optional[int] = None) -> Optional[Columns]:
    """Samples of ``threads`` (serialized globalTids) taken in ``[lo, hi)`` (unbounded side when None), one row
    each: ``start``, ``gtid``; the leaf frame's ``leaf_symbol``, ``leaf_module``; the caller frame's
    ``caller_symbol``, ``caller_module`` — the first frame among the ``CALLER_DEPTH`` innermost that is in user mode and
    whose module id is not in ``system_modules`` (-1 when the sample has no callchain / no such frame) — and
    ``flags``: 1 = leaf in kernel mode, 2 = leaf unresolved, 4 = caller unresolved. ``None`` when the tables are
    missing. Bounded work: docs/MODEL.md, "What the host ran during host-side idle"."""
    names = ["start", "gtid", "leaf_symbol", "leaf_module", "caller_symbol", "caller_module", "flags"]
    if not has_samples_tables(schema):
        return None
    if not threads:
        return {k: np.empty(0, np.int64) for k in names}
    km = 'AND COALESCE(c1."kernelMode", 0) = 0 ' if schema.has(CHAINS, "kernelMode") else ""
    span = (f" AND e.start >= {int(lo)}" if lo is not None else "") + (f" AND e.start < {int(hi)}" if hi is not None
                                                                       else "")
    first = (f'(SELECT c1.stackDepth FROM "{CHAINS}" c1 WHERE c1.id = e.id AND c1.stackDepth < {CALLER_DEPTH} '
             f'AND c1.module NOT IN ({_ints(system_modules)}) {km}ORDER BY c1.stackDepth LIMIT 1)')
    flags = (f'({_opt(schema, "kernelMode", "l")} != 0) + 2 * ({_opt(schema, "unresolved", "l")} != 0) '
             f'+ 4 * ({_opt(schema, "unresolved", "c")} != 0)')
    sql = (f'SELECT s.start, s.gtid, COALESCE(l.symbol, -1), COALESCE(l.module, -1), COALESCE(c.symbol, -1), '
           f'COALESCE(c.module, -1), {flags} '
           f'FROM (SELECT e.id AS id, e.start AS start, e.globalTid AS gtid, {first} AS cd FROM "{EVENTS}" e '
           f'WHERE e.globalTid IN ({_ints(threads)}){span} AND {{guard}}) s '
           f'LEFT JOIN "{CHAINS}" l ON l.id = s.id AND l.stackDepth = 0 '
           f'LEFT JOIN "{CHAINS}" c ON c.id = s.id AND c.stackDepth = s.cd')
    try:
        return _fetch_ints(conn, sql.format(guard="1"), names)
    except ValueTypeError:   # the samples with a non-integer value left out, and stated
        conn.excluded.append(f"{EVENTS}/{CHAINS}: samples with a non-integer value were left out.")
        return _fetch_ints(conn, sql.format(guard="typeof(e.id) = 'integer' AND typeof(e.start) = 'integer'"), names)


def fetch_sample_times(conn: TraceConnection, schema: Schema, pids: Optional[Sequence[int]], lo: int, hi: int
                       ) -> Optional[Columns]:
    """``start`` and ``gtid`` of every sample of the threads of processes ``pids`` (None: of every process) taken
    in ``[lo, hi)``: no frame is read (the waits analysis counts who ran, not what). The process of a sample is
    decoded from its serialized globalTid (bits 24-47, like :func:`model.trace.pid_of`). ``None`` when
    ``COMPOSITE_EVENTS`` lacks those columns. What is read and why: docs/MODEL.md, "CPU samples during the waits"."""
    names = ["start", "gtid"]
    if not all(schema.has(EVENTS, c) for c in ("start", "globalTid")):
        return None
    if (pids is not None and not pids) or hi <= lo:
        return {k: np.empty(0, np.int64) for k in names}
    of_pids = "" if pids is None else f'AND ((e.globalTid >> 24) & {0xFFFFFF}) IN ({_ints(pids)}) '
    sql = (f'SELECT e.start, e.globalTid FROM "{EVENTS}" e WHERE e.start >= {int(lo)} AND e.start < {int(hi)} '
           f'{of_pids}AND {{guard}}')
    try:
        return _fetch_ints(conn, sql.format(guard="1"), names)
    except ValueTypeError:   # the samples with a non-integer value left out, and stated
        conn.excluded.append(f"{EVENTS}: samples with a non-integer value were left out.")
        return _fetch_ints(conn, sql.format(
            guard="typeof(e.start) = 'integer' AND typeof(e.globalTid) = 'integer'"), names)


def capture_requested(schema: Schema) -> Optional[bool]:
    """Whether the capture metadata says CPU IP/backtrace sampling was on (``None``: not recorded)."""
    v = schema.meta_value("capture:LINUX_PERF_OPTIONS:COLLECT_IP_BACKTRACE_SAMPLES")
    return None if v is None else v.strip().lower() == "true"


__all__: List[str] = ["CALLER_DEPTH", "capture_requested", "count_samples", "count_samples_by_pid",
                       "fetch_sample_times", "fetch_samples", "has_samples_tables"]
