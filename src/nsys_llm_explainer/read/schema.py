"""Probe which tables and columns an export has (exports differ by version), and read its metadata; only real
tables count (:data:`REAL_TABLES_SQL`): views and virtual tables are never read.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from typing import Dict, List, Optional

from ..errors import InputError
from .connection import all_rows

#: Tables whose presence identifies an Nsight Systems export.
NSYS_MARKER_TABLES = (
    "StringIds",
    "EXPORT_META_DATA",
    "META_DATA_EXPORT",
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_RUNTIME",
    "NVTX_EVENTS",
    "TARGET_INFO_SESSION_START_TIME",
)

#: only ordinary tables are read: a view (or a virtual table) named like an nsys table could run any query —
#: a recursive CTE that never ends — each time the reader selects from it, so it is ignored like a missing table
REAL_TABLES_SQL = ("SELECT name FROM sqlite_master WHERE type = 'table' "
                   "AND coalesce(upper(substr(ltrim(sql), 1, 14)), '') != 'CREATE VIRTUAL'")

KERNEL_TABLES = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL")


@dataclass
class Schema:
    """Tables → column names (in table order), plus export metadata as a multimap."""

    tables: Dict[str, List[str]]
    meta: Dict[str, List[str]] = field(default_factory=dict)
    meta_table: Optional[str] = None

    def has(self, table: str, column: Optional[str] = None) -> bool:
        return table in self.tables and (column is None or column in self.tables[table])

    def meta_value(self, key: str) -> Optional[str]:
        vals = self.meta.get(key)
        return vals[0] if vals else None

    @property
    def product_version(self) -> Optional[str]:
        return self.meta_value("EXPORT_PRODUCT_VERSION")

    @property
    def schema_version(self) -> Optional[str]:
        return self.meta_value("EXPORT_SCHEMA_VERSION")

    @property
    def kernel_table(self) -> Optional[str]:
        return next((n for n in KERNEL_TABLES if n in self.tables), None)


def probe(conn: sqlite3.Connection, path_label: str = "trace") -> Schema:
    """Read table/column lists and metadata; raise :class:`InputError` if this is not an nsys export."""
    try:
        names = [r[0] for r in all_rows(conn, REAL_TABLES_SQL, where="sqlite_master")]
        tables: Dict[str, List[str]] = {}
        for name in names:
            cols = all_rows(conn, "SELECT name FROM pragma_table_info(?)", (name,), where="sqlite_master")
            tables[name] = [c[0] for c in cols]
    except sqlite3.DatabaseError as exc:
        raise InputError(f"{path_label} is corrupt or truncated ({exc})") from None
    if not any(t in tables for t in NSYS_MARKER_TABLES):
        if not tables:
            raise InputError(f"{path_label} is an empty SQLite database, not an Nsight Systems export")
        raise InputError(
            f"{path_label} is an SQLite database but not an Nsight Systems export "
            f"(none of {', '.join(NSYS_MARKER_TABLES[:3])} ... found)"
        )
    schema = Schema(tables=tables)
    def name_value(t: str) -> bool:
        return schema.has(t, "name") and schema.has(t, "value")

    schema.meta_table = next((t for t in ("META_DATA_EXPORT", "EXPORT_META_DATA") if name_value(t)), None)
    for mt, prefix in ((schema.meta_table, ""), ("META_DATA_CAPTURE", "capture:")):
        if mt is None or not name_value(mt):
            continue
        try:
            rows = all_rows(conn, f'SELECT name, value FROM "{mt}"')
        except sqlite3.DatabaseError as exc:
            raise InputError(f"{path_label} is corrupt or truncated ({exc})") from None
        for k, v in rows:
            schema.meta.setdefault(prefix + str(k), []).append("" if v is None else str(v))
    return schema
