"""All SQL the tool runs lives here. Each fetcher selects columns by name (never ``SELECT *``),
substitutes a sentinel for columns an export version lacks, and returns numpy arrays.

Sentinel: ``-1`` stands for NULL or "column absent" in integer columns.
"""

from __future__ import annotations

import itertools
import sqlite3
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np

from ..errors import InputError
from . import columnar
from .connection import TraceConnection, all_rows
from .fetch_launch import rowid_range
from .schema import Schema

CHUNK = 1_048_576
NULL = -1

Columns = Dict[str, np.ndarray]


class ReadError(InputError):
    """SQLite failed while reading rows (corrupt or truncated file)."""


class ValueTypeError(ReadError):
    """A value of another type (text, blob, real) in a column that must hold integers."""


def left_out(conn: TraceConnection, rows: str, note: str) -> None:
    """Record a warning about the rows a read leaves out (``build_model`` puts it in the report): ``rows`` says
    which (``table WHERE condition``), ``note`` is the warning with ``{}`` for their count; none when there are none."""
    n = int(_query(conn, f"SELECT count(*) FROM {rows}")[0][0])
    if n > 0:
        conn.excluded.append(note.format(n))


def _expr(schema: Schema, table: str, col: str, strict: bool = False) -> str:
    """Select expression of an integer column (NULL → :data:`NULL`). ``strict``: a REAL value becomes text, so
    that the standard-library fetch fails on it (as the columnar driver does) instead of truncating it."""
    if schema.has(table, col):
        return f'COALESCE({_strict(col) if strict else chr(34) + col + chr(34)}, {NULL})'
    return str(NULL)


def _strict(col: str) -> str:
    """``col`` with a REAL value turned into text (an error for the integer fetch, like text or a blob)."""
    return f'CASE WHEN typeof("{col}") = \'real\' THEN \'real\' ELSE "{col}" END'


def _fetch_ints(conn: TraceConnection, sql: str, names: Sequence[str], table: Optional[str] = None) -> Columns:
    """Run ``sql`` (integer-only select list, no NULLs) and return one int64 array per column: through
    :mod:`read.columnar` when the connection allows it and it can, else through the standard library.
    ``table``: the one table ``sql`` reads (its largest rowid sizes the columnar arrays)."""
    uri = conn.columnar_uri
    if uri:
        span = rowid_range(conn, table) if table else None   # the largest rowid: ≥ the rows when rowids are positive
        got = columnar.fetch_ints(uri, sql, names, span[1] if span and 0 < span[1] < 1 << 31 else 0)
        if got is columnar.TYPE_MISMATCH:
            raise ValueTypeError("a non-integer value (text, blob or real) in an integer column")
        if got is not None:
            return got
    with conn.lock:
        return _fetch_ints_stdlib(conn, sql, names)


def _fetch_ints_stdlib(conn: TraceConnection, sql: str, names: Sequence[str]) -> Columns:
    """Rows stream straight from the cursor into ``np.fromiter`` (no list of tuples is built: about twice as
    fast as ``fetchall``), one chunk at a time; each chunk is split into per-column arrays right away so
    peak memory is about one copy of the result plus one chunk."""
    ncol = len(names)
    parts: List[List[np.ndarray]] = [[] for _ in range(ncol)]
    try:
        cur = conn.execute(sql)
        while True:
            flat = np.fromiter(itertools.chain.from_iterable(itertools.islice(cur, CHUNK)), dtype=np.int64)
            if flat.shape[0] == 0:
                break
            if flat.shape[0] % ncol:
                raise ReadError("unexpected row shape while reading the trace")
            arr = flat.reshape(-1, ncol)
            for i in range(ncol):
                parts[i].append(arr[:, i].copy())
            del arr, flat
    except sqlite3.DatabaseError as exc:
        raise ReadError(f"SQLite error while reading the trace: {exc} (file corrupt or truncated?)") from None
    except (OverflowError, TypeError, ValueError) as exc:
        raise ValueTypeError(f"unexpected non-integer or NULL value in an integer column: {exc}") from None
    out: Columns = {}
    for i, n in enumerate(names):
        out[n] = np.concatenate(parts[i]) if parts[i] else np.empty(0, np.int64)
        parts[i] = []
    return out


def _query(conn: TraceConnection, sql: str) -> List[tuple]:
    """All rows of ``sql``; text that is not UTF-8 is read with U+FFFD (:func:`read.connection.lenient`)."""
    try:
        return all_rows(conn, sql)
    except sqlite3.DatabaseError as exc:
        raise ReadError(f"SQLite error while reading the trace: {exc} (file corrupt or truncated?)") from None


def _select(conn: TraceConnection, schema: Schema, table: str, cols: Dict[str, str]) -> Columns:
    """``cols`` maps output name → source column; absent columns read as ``NULL`` (-1)."""
    exprs = [_expr(schema, table, src, strict=not conn.columnar_uri) for src in cols.values()]
    sql = f'SELECT {", ".join(exprs)} FROM "{table}"'
    try:
        return _fetch_ints(conn, sql, list(cols.keys()), table=table)
    except ValueTypeError:
        ok = integer_rows(conn, schema, table, cols.values())
        return _fetch_ints(conn, f"{sql} WHERE ({ok})", list(cols.keys()), table=table)


def integer_rows(conn: TraceConnection, schema: Schema, table: str, cols: Iterable[str], alias: str = "",
                 where: str = "") -> str:
    """The SQL condition that keeps the rows of ``table`` (``alias``: its name in the query) whose ``cols`` (those
    it has) hold an integer or NULL: a text / blob / real value in an integer column leaves its row out, counted
    (among the rows ``where`` keeps) in a note for the report's warnings."""
    col = f'{alias}."{{}}"' if alias else '"{}"'
    ok = " AND ".join(f"typeof({col.format(c)}) IN ('integer', 'null')" for c in cols if schema.has(table, c)) or "1"
    left_out(conn, f'"{table}" {alias} WHERE {where}NOT ({ok})',
             f"{table}: {{}} row(s) with a non-integer value (text, blob or real) in an integer column were left out.")
    return ok


# --------------------------------------------------------------------------- strings


def text_value(v: object) -> str:
    """A name read from a text column: a blob decoded as UTF-8 (invalid bytes replaced), a number written out,
    NULL as ``""``."""
    if v is None:
        return ""
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v).decode("utf-8", "replace")
    return str(v)


def fetch_strings(conn: TraceConnection, schema: Schema) -> Dict[int, str]:
    """The whole ``StringIds`` table as a dict (ids are unique, values deduplicated by nsys). Rows whose id is not
    an integer (NULL, text, blob, real: only a hand-made table allows them) are left out and counted (the one rule
    for values of the wrong type, docs/SECURITY.md §5): a name id of another table never matches them."""
    if not (schema.has("StringIds", "id") and schema.has("StringIds", "value")):
        return {}
    rows = _query(conn, "SELECT id, value FROM StringIds WHERE typeof(id) = 'integer'")
    left_out(conn, "StringIds WHERE typeof(id) != 'integer'",
             "StringIds: {} row(s) with a non-integer id (NULL, text, blob or real) were left out.")
    return {int(i): text_value(v) for i, v in rows}


# --------------------------------------------------------------------------- GPU activity

#: the columns of every GPU row a CUDA API call launches (output name → column), the kinds' own after them
LAUNCHED_COLS = {"start": "start", "end": "end", "device": "deviceId", "stream": "streamId", "corr": "correlationId",
                 "gpid": "globalPid"}
KERNEL_COLS = {**LAUNCHED_COLS, "demangled": "demangledName", "short": "shortName", "graph_node": "graphNodeId"}
MEMCPY_COLS = {**LAUNCHED_COLS, "bytes": "bytes", "copy_kind": "copyKind", "src_kind": "srcKind", "dst_kind": "dstKind",
               "graph_node": "graphNodeId", "migration_cause": "migrationCause"}
MEMSET_COLS = {**LAUNCHED_COLS, "bytes": "bytes", "mem_kind": "memKind", "graph_node": "graphNodeId"}
SYNC_COLS = {**LAUNCHED_COLS, "sync_type": "syncType"}
GRAPH_TRACE_COLS = {**LAUNCHED_COLS, "graph_id": "graphId", "graph_exec_id": "graphExecId"}
RUNTIME_COLS = {"start": "start", "end": "end", "gtid": "globalTid", "corr": "correlationId", "name_id": "nameId",
                "event_class": "eventClass"}
OSRT_COLS = {"start": "start", "end": "end", "gtid": "globalTid", "name_id": "nameId"}


def _packed(conn: TraceConnection, table: str, cols: Dict[str, str], ints: Sequence[str], ok: str, packed: str,
            p2: Optional[str] = None, extra: Optional[Dict[str, str]] = None) -> Optional[Columns]:
    """The packed fast path (what big traces need: Python object creation dominates fetch cost): ``cols``, then the
    small columns packed into one integer ``p`` (and ``p2``) per row, unpacked in numpy by the caller; None when a
    row fails ``ok`` (its small columns do not fit, or ``ints`` are not all integers: a REAL would be truncated by
    the shifts), a value is not an integer, or the table is empty: the caller then takes the generic path."""
    ok += "".join(f" AND typeof({c}) = 'integer'" for c in ints)
    sel = [_strict(c) for c in cols.values()] + [f"CASE WHEN {ok} THEN {packed} ELSE -1 END"] + ([p2] if p2 else [])
    sel += list((extra or {}).values())     # integer SQL expressions (``extra``: output name → expression)
    try:
        c = _fetch_ints(conn, f'SELECT {", ".join(sel)} FROM "{table}"',
                        [*cols, "p"] + (["p2"] if p2 else []) + list(extra or {}))
    except ValueTypeError:
        return None
    return None if c["p"].shape[0] == 0 or (c["p"] < 0).any() else c


def fetch_kernels(conn: TraceConnection, schema: Schema, table: Optional[str]) -> Optional[Columns]:
    """Kernel rows: start, end, device, stream, corr, gpid, demangled, short, graph_node (graphNodeId, -1: none);
    through :func:`_packed` when it can (``short`` is then resolved only for demangled ids missing from StringIds:
    :func:`fetch_short_for`)."""
    if table is None or not schema.has(table, "start") or not schema.has(table, "end"):
        return None
    need = ("deviceId", "streamId", "correlationId", "globalPid", "demangledName")
    if not all(schema.has(table, c) for c in need):
        return _select(conn, schema, table, KERNEL_COLS)
    if conn.columnar_uri:   # as the packed path: shortName only for ids missing from StringIds (fetch_short_for)
        return _select(conn, schema, table, {k: v for k, v in KERNEL_COLS.items() if k != "short"})
    has_gn = schema.has(table, "graphNodeId")
    # the node id is its own column; a text / blob / real id leaves its row out (one rule)
    c = _packed(conn, table, {"start": "start", "end": "end"}, need,
                "deviceId BETWEEN 0 AND 63 AND streamId BETWEEN 0 AND 16777215 AND correlationId BETWEEN 0 AND "
                "4294967295 AND globalPid IS NOT NULL AND demangledName BETWEEN 0 AND 2147483647"
                + (" AND typeof(graphNodeId) IN ('integer', 'null')" if has_gn else ""),
                "(deviceId << 56) | (streamId << 32) | correlationId",
                "(((globalPid >> 24) & 16777215) << 32) | demangledName",
                {"graph_node": "CASE WHEN typeof(graphNodeId) = 'integer' THEN graphNodeId ELSE -1 END"
                 if has_gn else "-1"})
    if c is None:
        return _select(conn, schema, table, KERNEL_COLS)
    p1v, p2v = c.pop("p"), c.pop("p2")
    c["device"] = ((p1v >> 56) & 0x3F).astype(np.int32)
    c["stream"] = ((p1v >> 32) & 0xFFFFFF).astype(np.int32)
    c["corr"] = p1v & 0xFFFFFFFF
    del p1v
    pid = p2v >> 32
    # keep the globalPid layout the model expects (VM id 1 is irrelevant to PID decoding)
    c["gpid"] = pid << 24
    c["demangled"] = p2v & 0xFFFFFFFF
    return c


def fetch_short_for(conn: TraceConnection, schema: Schema, table: str, demangled_ids: List[int]) -> Dict[int, int]:
    """shortName id for kernels whose demangledName id is in ``demangled_ids`` (first seen wins)."""
    if not demangled_ids or not schema.has(table, "shortName"):
        return {}
    out: Dict[int, int] = {}
    for i in range(0, len(demangled_ids), 500):
        chunk = demangled_ids[i:i + 500]
        q = (f'SELECT demangledName, min(shortName) FROM "{table}" WHERE demangledName IN '
             f'({",".join("?" * len(chunk))}) AND typeof(demangledName) = \'integer\' '
             "AND typeof(shortName) = 'integer' GROUP BY demangledName")
        try:
            rows = conn.execute(q, tuple(chunk)).fetchall()
        except sqlite3.DatabaseError as exc:
            raise ReadError(f"SQLite error while reading the trace: {exc}") from None
        out.update({int(a): int(b) for a, b in rows if b is not None})
    return out


def fetch_runtime(conn: TraceConnection, schema: Schema) -> Optional[Columns]:
    """CUDA API rows: start, end, gtid, corr, name_id, event_class (packed fast path as for kernels)."""
    t = "CUPTI_ACTIVITY_KIND_RUNTIME"
    if not schema.has(t, "start") or not schema.has(t, "end"):
        return None
    if conn.columnar_uri or not all(schema.has(t, c) for c in ("globalTid", "correlationId", "nameId", "eventClass")):
        return _select(conn, schema, t, RUNTIME_COLS)
    c = _packed(conn, t, {"start": "start", "end": "end", "gtid": "globalTid"},
                ("correlationId", "nameId", "eventClass"),
                "correlationId BETWEEN 0 AND 4294967295 AND nameId BETWEEN 0 AND 16777215 AND eventClass BETWEEN 0 AND "
                "127 AND globalTid IS NOT NULL", "(eventClass << 56) | (nameId << 32) | correlationId")
    if c is None:
        return _select(conn, schema, t, RUNTIME_COLS)
    p = c.pop("p")
    c["event_class"] = (p >> 56).astype(np.int32)
    c["name_id"] = (p >> 32) & 0xFFFFFF
    c["corr"] = p & 0xFFFFFFFF
    return c


def fetch_table(conn: TraceConnection, schema: Schema, table: Optional[str],
                cols: Dict[str, str]) -> Optional[Columns]:
    """Fetch ``cols`` of ``table``; ``None`` when the table does not exist or lacks start/end. A table without
    ``end`` in ``cols`` holds point events (CPU page faults): ``end`` is set to ``start``."""
    if table is None or not schema.has(table, "start") or ("end" in cols and not schema.has(table, "end")):
        return None
    c = _select(conn, schema, table, cols)
    if "end" not in c:
        c["end"] = c["start"].copy()
    return c


# --------------------------------------------------------------------------- target / session info


def fetch_rows(conn: TraceConnection, schema: Schema, table: str,
               wanted: Sequence[str]) -> List[Dict[str, object]]:
    """Small info tables: return dict rows of the ``wanted`` columns that exist."""
    cols = [c for c in wanted if schema.has(table, c)]
    if not cols:
        return []
    sql = f'SELECT {", ".join(chr(34) + c + chr(34) for c in cols)} FROM "{table}"'
    return [dict(zip(cols, r)) for r in _query(conn, sql)]


def fetch_session(conn: TraceConnection, schema: Schema) -> Tuple[object, object, object, Optional[str]]:
    """(``utcEpochNs``, ``utcTime``, the session's length: ``duration``, else ``stopTime − startTime``, the host)
    as the export records them, None each when not recorded."""
    start = (fetch_rows(conn, schema, "TARGET_INFO_SESSION_START_TIME", ("utcEpochNs", "utcTime")) or [{}])[0]
    run = (fetch_rows(conn, schema, "ANALYSIS_DETAILS", ("duration", "startTime", "stopTime")) or [{}])[0]
    d, s0, s1 = run.get("duration"), run.get("startTime"), run.get("stopTime")
    if d is None and isinstance(s0, int) and isinstance(s1, int):
        d = s1 - s0
    return start.get("utcEpochNs"), start.get("utcTime"), d, fetch_host(conn, schema)


def fetch_host(conn: TraceConnection, schema: Schema) -> Optional[str]:
    """The host the capture ran on: ``TARGET_INFO_SYSTEM_ENV``'s ``Hostname`` row (captures of 2022.x on; none in
    2019.6 / 2020.3 ones, SCHEMA.md §3); None when absent, empty, or when its rows disagree."""
    t = "TARGET_INFO_SYSTEM_ENV"
    if not (schema.has(t, "name") and schema.has(t, "value")):
        return None
    vals = {str(v).strip() for (v,) in _query(conn, f"SELECT DISTINCT value FROM {t} WHERE name = 'Hostname'")}
    vals.discard("")
    return vals.pop() if len(vals) == 1 else None


# --------------------------------------------------------------------------- Unified Memory (managed memory)

#: GPU page-fault groups (2022.x → 2026.x: same columns); ``access``: ENUM_CUDA_UNIF_MEM_ACCESS_TYPE
UM_GPU_FAULT_COLS = {
    "start": "start", "end": "end", "device": "deviceId", "gpid": "globalPid", "faults": "numberOfPageFaults",
    "access": "faultAccessType",
}
#: CPU page faults: one timestamp per fault (no ``end``: point events); function and module are StringIds ids
UM_CPU_FAULT_COLS = {"start": "start", "gpid": "globalPid", "func_id": "CpuInstruction", "module_id": "module"}
