"""The CSV writer (``tables/*.csv`` of report, compare and cluster, from the table specs of :mod:`.specs`); quoting,
empty cells and the column conventions (``*_ns``, ``*_ms``, ``*_us``, ``pct_*``): docs/DESIGN.md, "CSV"."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import TYPE_CHECKING, List, Sequence

from .base import Renderer
from .escape import csv_text
from .specs import CSV_TABLES
from .table import S, Table, csv_cell

if TYPE_CHECKING:
    from ..report import Report


def write_tables(tables: Sequence[Table[S]], source: S, out_dir: Path) -> List[Path]:
    """Each table spec's CSV file of ``source`` (a report, a compare or cluster result) as ``out_dir/tables/<csv>``
    (header row always present), in order."""
    tdir = Path(out_dir) / "tables"
    tdir.mkdir(parents=True, exist_ok=True)
    for t in tables:
        with open(tdir / t.csv, "w", newline="", encoding="utf-8", errors="replace") as fh:
            w = csv.writer(fh, quoting=csv.QUOTE_MINIMAL)
            w.writerow([csv_text(h) for h in t.csv_header()])
            w.writerows([csv_text(csv_cell(v)) for v in row] for row in t.csv_rows(source))
    return [tdir / t.csv for t in tables]


class CsvRenderer(Renderer):
    """``tables/*.csv`` (see module docstring)."""


    def render(self, report: Report, out_dir: Path) -> List[Path]:
        return write_tables(CSV_TABLES, report, out_dir)


__all__ = ["CSV_TABLES", "CsvRenderer", "write_tables"]
