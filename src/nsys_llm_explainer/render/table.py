"""Table specs: the one column language of every table (report, compare, cluster) in every format. A :class:`Table`
is a CSV file name, its :class:`Col` columns and the rows it holds; rows are read by field name through
:func:`field_of` (a name a result row lacks raises). Docs: docs/DESIGN.md, "One document for every output"."""

from __future__ import annotations

import json
import math
from collections import abc
from dataclasses import dataclass, is_dataclass, replace
from typing import Any, Callable, Dict, Generic, Iterable, List, Mapping, Optional, Sequence, Tuple, TypeVar

from ..vocabulary.units import exact_decimal, fmt_int, fmt_ms, fmt_pct, fmt_us
from .document import Cell, Code, Spans
from .escape import MD_NAME_LIMIT

S = TypeVar("S")   # what a table's rows are taken from
P = TypeVar("P")   # a parent row whose child rows a table flattens
Getter = Callable[[Any], Any]
CellFn = Callable[[Any], Spans]


def field_of(row: Any, key: str) -> Any:
    """Field ``key`` of a table row: a result row's attribute or a joined parent field (:class:`Joined`); a row
    without it raises ``AttributeError`` (a misspelt column is an error, never an empty cell)."""
    return getattr(row, key)


class Joined:
    """A row with fields of its parent beside it (``device_id``, ``scope``, …): :func:`field_of` reads ``extra``
    first, then the row."""

    __slots__ = ("row", "extra")

    def __init__(self, row: Any, extra: Mapping[str, Any]) -> None:
        self.row = row
        self.extra = dict(extra)

    def __getattr__(self, name: str) -> Any:
        if name in self.extra:
            return self.extra[name]
        return field_of(self.row, name)


def row_dict(row: Any) -> Dict[str, Any]:
    """A table row as the ``report.json`` object it is (pandas frames: :mod:`.frames`)."""
    from ..jsonable import json_ready

    if isinstance(row, Joined):   # the row's fields then the joined ones (a joined name replaces a value in place)
        return {**row_dict(row.row), **row.extra}
    d = json_ready(row)
    return dict(d) if isinstance(d, abc.Mapping) else {}


@dataclass(frozen=True)
class Col:
    """One logical column: its CSV columns ``csv`` ((name, getter), …); when shown (``head`` set), the header,
    the cell's spans (``cell``; default: the first CSV value as escaped text), right-aligned or not (numbers),
    and the exact value behind the cell (``value``) under the report key ``key`` (HTML ``data-v`` / ``data-k``);
    ``html_only``: shown in HTML tables only (a page's wider table; Markdown keeps its short one)."""

    csv: Tuple[Tuple[str, Getter], ...] = ()
    head: Spans = ""
    cell: Optional[CellFn] = None
    right: bool = False
    value: Optional[Getter] = None
    key: str = ""
    html_only: bool = False

    def html(self) -> Col:
        """This column, shown in HTML only."""
        return replace(self, html_only=True)

    def with_csv(self, *names: str) -> Col:
        """This column with the CSV columns ``names`` copied verbatim from the row (none: not in the CSV)."""
        return replace(self, csv=tuple((n, raw(n)) for n in names))

    def spans(self, row: Any) -> Spans:
        if self.cell is not None:
            return self.cell(row)
        return Cell(self.csv[0][1](row)) if self.csv else ""


@dataclass(frozen=True)
class Table(Generic[S]):
    """A table spec: the CSV file name, its columns, and the rows it holds of its source (the typed report; a
    compare or cluster result's dict)."""

    csv: str
    cols: Tuple[Col, ...]
    rows: Callable[[S], Sequence[Any]]

    def csv_header(self) -> List[str]:
        return [name for c in self.cols for name, _ in c.csv]

    def csv_rows(self, report: S) -> List[List[Any]]:
        return [[g(r) for c in self.cols for _, g in c.csv] for r in self.rows(report)]


# ------------------------------------------------------------------------------------------- getters
def raw(key: str) -> Getter:
    return lambda r: field_of(r, key)


def scaled(key: str, digits: int) -> Getter:
    """Integer ns ``key`` as an exact decimal of ms (``digits`` 6) or µs (3)."""
    return lambda r: exact_decimal(field_of(r, key), digits)


def listed(key: str, sep: str = ";") -> Getter:
    return lambda r: sep.join(str(x) for x in (field_of(r, key) or []))


# ------------------------------------------------------------------------------------------- columns
def csv_col(*names: str) -> Col:
    """Columns copied verbatim into the CSV only."""
    return Col(tuple((n, raw(n)) for n in names))


def name_col(key: str, csv_name: str, head: str, limit: int = MD_NAME_LIMIT) -> Col:
    """A user-controlled name: full in CSV, shortened to ``limit`` characters in monospace when shown."""
    return Col(((csv_name, raw(key)),), head, lambda r: Code(field_of(r, key), limit), False, raw(key), key)


def text_col(key: str, csv_name: str, head: str, code: bool = False) -> Col:
    """A short text value (category, phase, kind): escaped; ``code`` shows it monospace."""
    return fmt_col(key, csv_name, head, (lambda v: Code(v, MD_NAME_LIMIT)) if code else Cell, False)


def dur_col(key: str, stem: str, head: str = "", unit: str = "ms") -> Col:
    """A duration ``key`` (ns): CSV ``<stem>_<unit>`` and ``<stem>_ns``; shown as ``head (unit)``."""
    digits, fmt = (6, fmt_ms) if unit == "ms" else (3, fmt_us)
    label = f"{head} ({'ms' if unit == 'ms' else 'µs'})" if head else ""
    return Col(((f"{stem}_{unit}", scaled(key, digits)), (f"{stem}_ns", raw(key))), label,
               lambda r: fmt(field_of(r, key)), True, raw(key), key)


def fmt_col(key: str, csv_name: str, head: Spans, fmt: Callable[[Any], Spans], right: bool = True) -> Col:
    """A value copied verbatim into CSV ``csv_name``, shown through ``fmt`` (a unit formatter; right-aligned)."""
    return Col(((csv_name, raw(key)),), head, lambda r: fmt(field_of(r, key)), right, raw(key), key)


def pct_col(key: str, csv_name: str, head: str = "") -> Col:
    return fmt_col(key, csv_name, head, fmt_pct)


def int_col(key: str, csv_name: str, head: str = "") -> Col:
    return fmt_col(key, csv_name, head, fmt_int)


def show_col(head: Spans, cell: CellFn, right: bool = False, value: Optional[Getter] = None, key: str = "") -> Col:
    """A shown column with no CSV output (``value``: the exact value behind the cell)."""
    return Col((), head, cell, right, value, key)


def csv_cell(v: Any) -> Any:
    """A CSV cell: ``None`` and non-finite floats → empty, booleans → true/false, containers and result rows →
    compact JSON (their ``report.json`` form)."""
    t = type(v)
    if t is int or t is str:
        return v
    if v is None:
        return ""
    if t is bool:
        return "true" if v else "false"
    if t is float:
        return v if math.isfinite(v) else ""
    if isinstance(v, (list, tuple, dict)) or hasattr(v, "to_dict") or is_dataclass(v):
        from ..jsonable import json_ready

        return json.dumps(json_ready(v), separators=(",", ":"), allow_nan=False, default=str)
    return v


def with_fields(rows: Sequence[Any], **extra: Any) -> List[Joined]:
    """Rows with parent fields beside them (a scope label or a parent key), values unchanged."""
    return [Joined(r, extra) for r in rows]


def each(parents: Iterable[P], rows: Callable[[P], Sequence[Any]],
         extra: Callable[[P], Mapping[str, Any]]) -> List[Joined]:
    """The child rows ``rows(p)`` of every parent ``p``, with the parent's fields ``extra(p)`` beside each."""
    return [Joined(r, x) for p in parents for x in (extra(p),) for r in rows(p)]
