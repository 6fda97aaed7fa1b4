"""pandas frames of the report's tables (``Report.to_frame``): the specs of ``tables/*.csv`` by file name without
``.csv``, holding the ``report.json`` rows (exact ns, nested objects flattened one level)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List

from .specs import CSV_TABLES
from .table import Table, row_dict

if TYPE_CHECKING:
    from ..report import Report

#: table name → its spec (``kernels``, ``devices``, ``idle_causes``, ``gpu_idle_gaps``, ``findings``, ``steps``, …)
TABLES: Dict[str, Table[Report]] = {t.csv[:-len(".csv")]: t for t in CSV_TABLES}


def table_names() -> List[str]:
    return sorted(TABLES)


def check_table(name: str) -> Table[Report]:
    """The spec of table ``name``; ``ValueError`` naming the known tables for an unknown name."""
    if name not in TABLES:
        raise ValueError(f"unknown table {name!r}; known: {', '.join(table_names())}")
    return TABLES[name]


def table_frame(report: Report, name: str, pd: Any) -> Any:
    """A ``DataFrame`` (``pd``: the pandas module) of table ``name`` of the report: its rows as ``report.json``
    objects."""
    rows = [row_dict(r) for r in check_table(name).rows(report)]
    return pd.json_normalize(rows, max_level=1) if rows else pd.DataFrame()
