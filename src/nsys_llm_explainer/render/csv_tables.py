"""CSV tables (``tables/*.csv``): every row of the report's tables, never capped by ``--top``, full names.

Written with the :mod:`csv` module (``QUOTE_MINIMAL``, ``\\r\\n`` line ends, UTF-8): names holding commas,
quotes or newlines round-trip through :func:`csv.reader`. Every file has its header row even when the
table is empty. Missing values are empty cells. A text cell that a spreadsheet could run as a formula (first
character ``=``, ``+``, ``-``, ``@``, tab or CR — e.g. a hostile kernel name) is written with a leading ``'``
(:func:`.escape.csv_text`); numbers never are, and ``report.json`` keeps every name exactly.

Column conventions: ``*_ns`` — integer nanoseconds as in ``report.json`` (timestamps are absolute, on the
export's timeline); ``*_ms`` = ns / 10⁶ (6 decimals) and ``*_us`` = ns / 10³ (3 decimals): the same number in
another unit, no rounding; ``pct_*`` / ``*_pct`` — percentages as in ``report.json``.

The files and their columns are the table specs in :mod:`.specs` (``CSV_TABLES``); each names the
``report.json`` field its rows come from. One file per table: no two files hold the same rows.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, List, Sequence, Tuple

from .base import Renderer
from .escape import csv_text
from .specs import CSV_TABLES
from .table import S, Table, csv_cell

if TYPE_CHECKING:
    from ..report import Report


def write_csv(path: Path, header: Sequence[str], rows: Iterable[Sequence[Any]]) -> Path:
    """Write one CSV file (header row always present)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8", errors="replace") as fh:
        w = csv.writer(fh, quoting=csv.QUOTE_MINIMAL)
        w.writerow([csv_text(h) for h in header])
        w.writerows([csv_text(csv_cell(v)) for v in row] for row in rows)
    return path


def write_tables(tables: Sequence[Table[S]], source: S, out_dir: Path) -> List[Path]:
    """Each table spec's CSV file of ``source`` (a report, a compare or cluster result) as ``out_dir/tables/<csv>``,
    in order."""
    tdir = Path(out_dir) / "tables"
    tdir.mkdir(parents=True, exist_ok=True)
    return [write_csv(tdir / t.csv, t.csv_header(), t.csv_rows(source)) for t in tables]


class CsvRenderer(Renderer):
    """``tables/*.csv`` (see module docstring)."""

    name = "csv"

    def render(self, report: Report, out_dir: Path) -> List[Path]:
        return write_tables(CSV_TABLES, report, out_dir)


def read_table(path: Path) -> Tuple[List[str], List[List[str]]]:
    """Read a CSV written here back (header, rows) — used by tests and tools."""
    with open(path, newline="", encoding="utf-8") as fh:
        data = list(csv.reader(fh))
    return (data[0] if data else []), data[1:]


__all__ = ["CSV_TABLES", "CsvRenderer", "read_table", "write_csv", "write_tables"]
