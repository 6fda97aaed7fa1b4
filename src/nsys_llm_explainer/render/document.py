"""The document model: every output is built once as small frozen parts (inline spans, blocks, sections); the
Markdown and HTML writers only escape and lay them out. What each part means: docs/DESIGN.md, "What each writer
writes"."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Union

from .escape import CODE_LIMIT

if TYPE_CHECKING:   # annotations only: table.py imports this module
    from .table import Col


# ------------------------------------------------------------------------------------------------ inline
@dataclass(frozen=True)
class Data:
    """User-controlled text, escaped in every format; ``lead``: Markdown escapes a leading block marker."""

    value: Any
    lead: bool = False


@dataclass(frozen=True)
class Cell:
    """User-controlled text escaped as one Markdown table cell (stripped; ``|`` escaped)."""

    value: Any


@dataclass(frozen=True)
class Rich:
    """Text whose backtick-delimited parts are names (shown in monospace); the rest is escaped."""

    value: Any
    lead: bool = False


@dataclass(frozen=True)
class Code:
    """A name in monospace, shortened to ``limit`` characters (HTML keeps the full name in ``title``)."""

    value: Any
    limit: int = CODE_LIMIT


@dataclass(frozen=True)
class Strong:
    children: Inline


@dataclass(frozen=True)
class Em:
    children: Inline


@dataclass(frozen=True)
class Styled:
    """``<span class="cls">`` in HTML; the children alone in Markdown."""

    cls: str
    children: Inline


@dataclass(frozen=True)
class Value:
    """A formatted number (``shown``) with the exact report value behind it (HTML ``data-k`` / ``data-v``)."""

    shown: str
    key: str
    raw: Any


@dataclass(frozen=True)
class Link:
    """A relative link (HTML); Markdown writes the text only."""

    children: Inline
    href: str


Span = Union[str, Data, Cell, Rich, Code, Strong, Em, Styled, Value, Link]
Inline = Tuple[Span, ...]
#: what a builder may pass where inline text is expected (nested, with ``None`` / ``""`` left out)
Spans = Union[Span, Sequence[Any], None]


def inline(*parts: Any) -> Inline:
    """Spans flattened into one tuple; nested tuples / lists are spliced, ``None`` and ``""`` dropped."""
    return tuple(_flat(parts))


def _flat(items: Sequence[Any]) -> Iterator[Any]:
    for p in items:
        if isinstance(p, (tuple, list)):
            yield from _flat(p)
        elif p is not None and p != "":
            yield p


def joined(items: Sequence[Inline], sep: str) -> Inline:
    """``items`` with ``sep`` (the tool's text) between them."""
    return inline(*[x for i, it in enumerate(items) for x in ((sep, it) if i else (it,))])


# ------------------------------------------------------------------------------------------------ blocks
#: ``brk`` values: blank line after the block (default), hard line break, next block on the next line
PARA, BR, NL = "", "br", "nl"


@dataclass(frozen=True)
class Heading:
    level: int
    text: Inline


@dataclass(frozen=True)
class Paragraph:
    text: Inline
    cls: str = ""
    brk: str = PARA


@dataclass(frozen=True)
class Note:
    """A warning: ``> …`` in Markdown, a highlighted paragraph in HTML."""

    text: Inline
    brk: str = PARA


@dataclass(frozen=True)
class BulletList:
    items: Tuple[Inline, ...]


@dataclass(frozen=True)
class TablePart:
    """A table: columns (those with a header are shown), the rows shown, pre-formatted trailing rows (``extra``,
    e.g. a folded "other" row), the HTML id and caption."""

    cols: Tuple[Col, ...]
    rows: Sequence[Any]                   # result rows (:func:`.table.field_of` reads them)
    extra: Tuple[Inline, ...] = ()
    tid: str = ""
    caption: Inline = ()


@dataclass(frozen=True)
class Figure:
    """One plotly figure (``data`` / ``layout`` dicts) with its caption; ``shared``: arrays the page copies
    into every trace lacking them."""

    fid: str
    data: List[Dict[str, Any]]
    layout: Dict[str, Any]
    caption: Inline
    shared: Optional[Dict[str, Any]] = None


@dataclass(frozen=True)
class Chart:
    """A chart (HTML only), built when the page is written."""

    make: Callable[[], Figure]


@dataclass(frozen=True)
class Details:
    """Collapsible in HTML (``<details>``); Markdown writes the summary and the parts."""

    summary: Inline
    parts: Tuple[Part, ...]


@dataclass(frozen=True)
class Group:
    """Parts kept together: an ``<article>`` (``cls``, ``ident`` as ``data-id``) in HTML; laid out as usual in
    Markdown."""

    parts: Tuple[Part, ...]
    cls: str = ""
    ident: str = ""


@dataclass(frozen=True)
class HtmlOnly:
    """Parts shown only in HTML (charts' companions, the page's meta line)."""

    parts: Tuple[Part, ...]


Part = Union[Heading, Paragraph, Note, BulletList, TablePart, Chart, Details, Group, HtmlOnly]


@dataclass(frozen=True)
class Section:
    """One section: ``sid`` (HTML id), ``title`` (none for the top block), its parts; ``nav`` labels it in the
    page's navigation; ``tag`` is its HTML element; ``html_only`` sections (charts) are not in Markdown."""

    sid: str
    title: Spans
    parts: Tuple[Part, ...]
    nav: str = ""
    tag: str = "section"
    html_only: bool = False


@dataclass(frozen=True)
class Omitted:
    """A section left out: its title and why (the result's ``reason``)."""

    title: str
    reason: str


SectionResult = Union[Section, Omitted, None]


@dataclass(frozen=True)
class Document:
    """The ordered sections of one output; ``title`` is the page title (plain text)."""

    title: str
    sections: Tuple[Section, ...]


def parts(*items: Any) -> Tuple[Part, ...]:
    """Parts flattened into one tuple (nested tuples / lists spliced, ``None`` dropped; a part is never ``""``)."""
    return tuple(_flat(items))


def para(*text: Any, cls: str = "", brk: str = PARA) -> Paragraph:
    return Paragraph(inline(*text), cls, brk)


def bullets(items: Sequence[Any]) -> Optional[BulletList]:
    """A bullet list of the non-empty items (``None`` when there is none)."""
    rows = tuple(r for r in (inline(i) for i in items) if r)
    return BulletList(rows) if rows else None
