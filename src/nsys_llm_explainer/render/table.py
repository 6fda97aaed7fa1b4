"""Declarative tables shared by Markdown and CSV.

A :class:`Table` is a list of :class:`Col`; each column names its CSV output columns (exact values: integer
ns, raw percentages, full names) and, optionally, one Markdown column (a header and a cell formatter that
returns already-escaped text). The same spec therefore drives ``tables/<csv>`` and the Markdown table of the
section that shows it, so the two can never disagree on what a column means.

Helpers build the common column kinds: :func:`name_col` (a user-controlled name: full in CSV, shortened and
escaped in Markdown), :func:`dur_col` (a duration: ``*_ns`` and ``*_ms``/``*_us`` in CSV, ms or µs in
Markdown), :func:`pct_col`, :func:`int_col`, :func:`text_col`, :func:`csv_col` (CSV only).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable, List, Mapping, Optional, Sequence, Tuple

from .base import DASH, Row, fmt_int, fmt_ms, fmt_pct, fmt_us
from .escape import md_cell, md_name

Getter = Callable[[Row], Any]
Cell = Callable[[Row], str]


@dataclass(frozen=True)
class Col:
    """One logical column: its CSV columns ``csv`` ((name, getter), …) and its Markdown header ``head`` and
    cell formatter ``cell`` (``head == ""``: CSV only). ``right``: right-align in Markdown (numbers)."""

    csv: Tuple[Tuple[str, Getter], ...]
    head: str = ""
    cell: Optional[Cell] = None
    right: bool = False


@dataclass(frozen=True)
class Table:
    """A table spec: the CSV file name, its columns, and the rows of the report dict it holds in CSV."""

    csv: str
    cols: Tuple[Col, ...]
    rows: Callable[[Row], List[Row]]

    def csv_header(self) -> List[str]:
        return [name for c in self.cols for name, _ in c.csv]

    def csv_rows(self, report: Row) -> List[List[Any]]:
        return [[g(r) for c in self.cols for _, g in c.csv] for r in self.rows(report)]


# ------------------------------------------------------------------------------------------- getters
def raw(key: str) -> Getter:
    return lambda r: r.get(key)


def _exact(ns: Any, digits: int) -> str:
    """Integer ns / 10**digits as an exact decimal string ('' for missing)."""
    if ns is None or isinstance(ns, bool) or not isinstance(ns, (int, float)):
        return ""
    if isinstance(ns, float):
        if ns != ns or ns in (float("inf"), float("-inf")):
            return ""
        if ns != int(ns):
            return f"{ns / 10**digits:.{digits + 3}f}"
    n = int(ns)
    sign = "-" if n < 0 else ""
    q, r = divmod(abs(n), 10**digits)
    return f"{sign}{q}.{r:0{digits}d}"


def ms(key: str) -> Getter:
    return lambda r: _exact(r.get(key), 6)


def us(key: str) -> Getter:
    return lambda r: _exact(r.get(key), 3)


def joined(key: str, sep: str = ";") -> Getter:
    return lambda r: sep.join(str(x) for x in (r.get(key) or []))


# ------------------------------------------------------------------------------------------- columns
def csv_col(*names: str) -> Col:
    """Columns copied verbatim into the CSV only."""
    return Col(tuple((n, raw(n)) for n in names))


def name_col(key: str, csv_name: str, head: str, limit: int = 80) -> Col:
    return Col(((csv_name, raw(key)),), head, lambda r: md_name(r.get(key), limit))


def text_col(key: str, csv_name: str, head: str, code: bool = False) -> Col:
    """A short text value (category, phase, kind): escaped; ``code`` shows it monospace."""
    cell: Cell = (lambda r: md_name(r.get(key))) if code else (lambda r: md_cell(r.get(key)))
    return Col(((csv_name, raw(key)),), head, cell)


def dur_col(key: str, stem: str, head: str = "", unit: str = "ms") -> Col:
    """A duration ``key`` (ns): CSV ``<stem>_<unit>`` and ``<stem>_ns``; Markdown ``head (unit)``."""
    conv = ms if unit == "ms" else us
    fmt = fmt_ms if unit == "ms" else fmt_us
    label = f"{head} ({'ms' if unit == 'ms' else 'µs'})" if head else ""
    return Col(((f"{stem}_{unit}", conv(key)), (f"{stem}_ns", raw(key))), label, lambda r: fmt(r.get(key)), True)


def pct_col(key: str, csv_name: str, head: str = "", decimals: int = 1) -> Col:
    return Col(((csv_name, raw(key)),), head, lambda r: fmt_pct(r.get(key), decimals), True)


def int_col(key: str, csv_name: str, head: str = "") -> Col:
    return Col(((csv_name, raw(key)),), head, lambda r: fmt_int(r.get(key)), True)


def md_col(head: str, cell: Cell, right: bool = False) -> Col:
    """A Markdown-only column (no CSV output)."""
    return Col((), head, cell, right)


# ------------------------------------------------------------------------------------------- output
def md_table(cols: Sequence[Col], rows: Sequence[Row], extra: Sequence[Sequence[str]] = ()) -> List[str]:
    """A GitHub Markdown table of the columns with a header (``extra``: pre-formatted trailing rows, e.g.
    an "other" row, one cell per Markdown column)."""
    shown = [c for c in cols if c.head]
    lines = ["| " + " | ".join(c.head for c in shown) + " |",
             "|" + "|".join("---:" if c.right else "---" for c in shown) + "|"]
    for r in rows:
        cells = [(c.cell(r) if c.cell else md_cell(c.csv[0][1](r) if c.csv else "")) or DASH for c in shown]
        lines.append("| " + " | ".join(cells) + " |")
    for cells in extra:
        lines.append("| " + " | ".join(list(cells) + [""] * (len(shown) - len(cells))) + " |")
    return lines


def csv_cell(v: Any) -> Any:
    """A CSV cell: ``None`` → empty, booleans → true/false, containers → compact JSON."""
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (list, tuple, dict)):
        return json.dumps(v, separators=(",", ":"), allow_nan=False, default=str)
    return v


def with_fields(rows: Sequence[Mapping[str, Any]], **extra: Any) -> List[Row]:
    """Rows with extra fields added (a scope label or a parent key), values unchanged."""
    return [{**r, **extra} for r in rows]
