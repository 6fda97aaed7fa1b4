"""NVTX ranges from ``NVTX_EVENTS`` (push/pop and start/end rows, their messages and domains), read-only like
every fetcher in :mod:`read.fetch`; rows with a non-integer value in an integer column are left out and counted."""

from __future__ import annotations

import itertools
import sqlite3
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

import numpy as np

from .connection import TraceConnection, lenient, undecodable
from .fetch import CHUNK, NULL, Columns, ReadError, ValueTypeError, _query, integer_rows, left_out, text_value
from .schema import Schema


@dataclass
class NvtxRows:
    """Raw NVTX range rows plus domain-name rows; ``text`` is resolved (inline text or registered)."""

    cols: Columns
    text: List[Optional[str]]
    domains: List[Tuple[int, int, str]]  # (globalTid, domainId, name)
    max_ts: Optional[int] = None         # latest start/end of any NVTX_EVENTS row (end of unterminated ranges)


NVTX_RANGE_TYPES = (59, 60, 70, 71)


def _nvtx_rows(conn: TraceConnection, sql: str) -> Tuple[np.ndarray, List[Optional[str]]]:
    """(rows × 7 int64 array, message per row) of the NVTX select; :class:`ValueTypeError` on a value that is
    not an integer."""
    parts: List[np.ndarray] = []
    text: List[Optional[str]] = []
    seen: Dict[object, Optional[str]] = {None: None}   # one str per distinct text (millions of rows); NULL: None
    try:
        cur = conn.execute(sql)
        while True:
            rows = cur.fetchmany(CHUNK // 4)
            if not rows:
                break
            parts.append(np.fromiter(itertools.chain.from_iterable(r[:7] for r in rows), dtype=np.int64,
                                     count=7 * len(rows)).reshape(len(rows), 7))
            text.extend([seen[r[7]] if r[7] in seen else seen.setdefault(r[7], text_value(r[7])) for r in rows])
            del rows
    except sqlite3.DatabaseError as exc:
        if undecodable(exc):
            raise   # read again with lenient decoding (fetch_nvtx)
        raise ReadError(f"SQLite error while reading NVTX_EVENTS: {exc}") from None
    except (OverflowError, TypeError, ValueError) as exc:
        raise ValueTypeError(f"unexpected non-integer value in NVTX_EVENTS: {exc}") from None
    return (np.concatenate(parts) if parts else np.empty((0, 7), dtype=np.int64)), text


def fetch_nvtx(conn: TraceConnection, schema: Schema) -> Optional[NvtxRows]:
    t = "NVTX_EVENTS"
    if not (schema.has(t, "start") and schema.has(t, "eventType")):
        return None
    inline, by_id = schema.has(t, "text"), schema.has(t, "textId") and schema.has("StringIds", "value")
    text_expr = ("COALESCE(n.text, s.value)" if by_id else "n.text") if inline else ("s.value" if by_id else "NULL")
    join = " LEFT JOIN StringIds s ON s.id = n.textId" if by_id else ""

    def e(col: str) -> str:
        return f'COALESCE(n."{col}", {NULL})' if schema.has(t, col) else str(NULL)

    has_end = "(n.\"end\" IS NOT NULL)" if schema.has(t, "end") else "0"
    types = ",".join(str(x) for x in NVTX_RANGE_TYPES)
    sql = (
        f"SELECT n.start, {e('end')}, {has_end}, n.eventType, {e('globalTid')}, {e('endGlobalTid')}, "
        f"{e('domainId')}, {text_expr} FROM NVTX_EVENTS n{join} WHERE n.eventType IN ({types})"
    )
    try:
        arr, text = lenient(conn, t, lambda: _nvtx_rows(conn, sql))
    except ValueTypeError:
        ok = integer_rows(conn, schema, t, ("start", "end", "eventType", "globalTid", "endGlobalTid", "domainId"),
                          "n", f"n.eventType IN ({types}) AND ")
        sql = sql.replace(f"WHERE n.eventType IN ({types})", f"WHERE n.eventType IN ({types}) AND {ok}")
        arr, text = lenient(conn, t, lambda: _nvtx_rows(conn, sql))
    names = ["start", "end", "has_end", "event_type", "gtid", "end_gtid", "domain"]
    cols = {n: np.ascontiguousarray(arr[:, i]) for i, n in enumerate(names)}
    domains: List[Tuple[int, int, str]] = []
    if schema.has(t, "domainId"):
        dsql = (
            f"SELECT {e('globalTid')}, n.domainId, {text_expr} FROM NVTX_EVENTS n{join} "
            "WHERE n.eventType = 75"
        )
        # a domain row whose domainId or globalTid is not an integer (text, blob, real) is left out and counted (the
        # one rule for values of the wrong type): its domain's ranges then keep their names unqualified
        gt = 'typeof(n."globalTid") IN (\'integer\', \'null\')' if schema.has(t, "globalTid") else "1"
        ok = f"typeof(n.domainId) IN ('integer', 'null') AND {gt}"
        for g, d, name in _query(conn, f"{dsql} AND {ok}"):
            if d is not None and name is not None:
                domains.append((int(g), int(d), text_value(name)))
        left_out(conn, f"NVTX_EVENTS n WHERE n.eventType = 75 AND NOT ({ok})",
                 "NVTX_EVENTS: {} domain row(s) with a non-integer domainId or globalTid (text, blob or real) were "
                 "left out; their domains' ranges keep their names unqualified.")
    max_ts = None
    if schema.has(t, "end"):
        row = _query(conn, "SELECT max(CASE WHEN typeof(start) = 'integer' THEN start END), "
                           "max(CASE WHEN typeof(\"end\") = 'integer' THEN \"end\" END) FROM NVTX_EVENTS")[0]
        vals = [int(v) for v in row if v is not None]
        max_ts = max(vals) if vals else None
    return NvtxRows(cols=cols, text=text, domains=domains, max_ts=max_ts)
