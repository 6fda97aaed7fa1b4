"""HTML building blocks: escaping for markup, for plotly text and for JSON inside a ``<script>``, and tables.

* :func:`h` — any user-controlled string (kernel / NVTX / API / process names, paths, phases) for element
  content or a quoted attribute value (``& < > " '`` and U+2028 / U+2029 become references).
* :func:`rich` — text whose backtick-delimited parts are names (finding evidence, advice): names become
  ``<code>``, everything escaped.
* :func:`plot_text` — text handed to plotly (trace names, tick labels, hover text, annotations). Plotly
  renders a subset of HTML in those (``<b>``, ``<br>``, ``<a href>``…), so ``& < >`` become entities, which
  plotly shows literally; control characters become spaces and long names are shortened.
* :func:`script_json` — a value as JSON that is safe inside an HTML ``<script>`` element: every ``<``,
  ``>`` and ``&`` becomes ``\\u003c`` / ``\\u003e`` / ``\\u0026`` (so neither ``</script>`` nor ``<!--`` can
  appear: stricter than escaping ``</`` as ``<\\/``), and U+2028 / U+2029 are escaped. These characters only
  occur inside JSON strings, so the result is the same JSON value.
* :func:`table` — a ``<table class="sortable">``: each cell is produced by a :class:`Col` (already escaped
  HTML) and carries the raw value it shows in ``data-v`` (exact ns, %, counts from the report dict), which
  the inline sort script orders by and the tests compare with report.json.
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass
from typing import Any, Callable, List, Optional, Sequence

from ..base import Row, fmt_int, fmt_ms, fmt_pct, fmt_us, num
from ..escape import CODE_LIMIT, TEXT_LIMIT, html_escape, shorten

#: characters kept for a name shown in a table cell or a chart label (the full name is in ``title`` / CSV)
NAME_LIMIT = 120
PLOT_NAME_LIMIT = 70


def _s(text: Any) -> str:
    return "" if text is None else (text if isinstance(text, str) else str(text))


def h(text: Any) -> str:
    """Escape for HTML element content or a quoted attribute value (:func:`..escape.html_escape`: control and
    bidi characters, U+2028 / U+2029 included, become visible escapes, so no JavaScript line terminator
    appears anywhere in the page's markup)."""
    return html_escape(text)


def code(text: Any) -> str:
    """A name in monospace, escaped; empty for an empty name."""
    s = shorten(text, CODE_LIMIT)
    return f"<code>{h(s)}</code>" if s else ""


def name_html(text: Any, limit: int = NAME_LIMIT) -> str:
    """A possibly long name: shortened (middle ellipsis) in ``<code>``, the full name in ``title``."""
    s = _s(text)
    if not s:
        return ""
    short = shorten(s, limit)
    title = f' title="{h(shorten(s, TEXT_LIMIT))}"' if short != s else ""
    return f"<code{title}>{h(short)}</code>"


def rich(text: Any) -> str:
    """Text with backtick code spans (as in report.md): code spans become ``<code>``, the rest is escaped."""
    parts = _s(text).split("`")
    if len(parts) % 2 == 0:  # unbalanced backticks: everything is plain text
        return h(text)
    return "".join(code(p) if i % 2 else h(p) for i, p in enumerate(parts))


def plot_text(text: Any, limit: int = PLOT_NAME_LIMIT) -> str:
    """Text for a plotly label or hover: shortened, control characters removed, ``& < >`` as entities."""
    return html.escape(shorten(_s(text), limit), quote=False)


def script_json(value: Any) -> str:
    """``value`` as compact JSON that cannot end or confuse the ``<script>`` element holding it."""
    s = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    for ch, esc in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"),
                    ("\u2029", "\\u2029")):
        s = s.replace(ch, esc)
    return s


def raw_value(v: Any) -> Optional[str]:
    """The exact value for a ``data-v`` attribute (JSON number or string; a string longer than
    :data:`..escape.TEXT_LIMIT` shortened: it only orders the rows), ``None`` when missing."""
    if v is None:
        return None
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return json.dumps(v, allow_nan=False) if num(v) is not None else None
    s = _s(v)
    return s if len(s) <= TEXT_LIMIT else shorten(s, TEXT_LIMIT)


# ------------------------------------------------------------------------------------------------ tables
@dataclass(frozen=True)
class Col:
    """One column: header text, the cell's HTML, the raw value behind it (``data-v``), right-aligned or not."""

    title: str
    cell: Callable[[Row], str]
    value: Optional[Callable[[Row], Any]] = None
    numeric: bool = True
    key: str = ""


def text_col(title: str, key: str) -> Col:
    return Col(title, lambda r: h(shorten(r.get(key), TEXT_LIMIT)), lambda r: r.get(key), numeric=False, key=key)


def name_col(title: str, key: str, limit: int = NAME_LIMIT) -> Col:
    return Col(title, lambda r: name_html(r.get(key), limit), lambda r: r.get(key), numeric=False, key=key)


def ms_col(title: str, key: str) -> Col:
    return Col(title, lambda r: fmt_ms(r.get(key)), lambda r: r.get(key), key=key)


def us_col(title: str, key: str) -> Col:
    return Col(title, lambda r: fmt_us(r.get(key)), lambda r: r.get(key), key=key)


def pct_col(title: str, key: str) -> Col:
    return Col(title, lambda r: fmt_pct(r.get(key)), lambda r: r.get(key), key=key)


def int_col(title: str, key: str) -> Col:
    return Col(title, lambda r: fmt_int(r.get(key)), lambda r: r.get(key), key=key)


def _cell(col: Col, row: Row) -> str:
    v = raw_value(col.value(row)) if col.value else None
    attrs = (f' data-v="{h(v)}"' if v is not None else "") + (' class="n"' if col.numeric else "")
    if col.key:
        attrs += f' data-k="{h(col.key)}"'
    return f"<td{attrs}>{col.cell(row)}</td>"


def table(tid: str, cols: Sequence[Col], rows: Sequence[Row], caption: str = "",
          extra: Sequence[Sequence[str]] = ()) -> str:
    """A sortable table; ``extra`` rows (already escaped cells, e.g. a folded "other" row) stay at the end."""
    num_cls = ' class="n"'
    head = "".join(f'<th scope="col" tabindex="0"{num_cls if c.numeric else ""}>{h(c.title)}</th>' for c in cols)
    body: List[str] = ["<tr>" + "".join(_cell(c, r) for c in cols) + "</tr>" for r in rows]
    foot = "".join("<tr>" + "".join(f"<td>{x}</td>" for x in cells) + "</tr>" for cells in extra)
    cap = f"<caption>{caption}</caption>" if caption else ""
    return (f'<div class="tw"><table id="{h(tid)}" class="sortable">{cap}<thead><tr>{head}</tr></thead>'
            f"<tbody>{''.join(body)}</tbody>" + (f"<tfoot>{foot}</tfoot>" if foot else "") + "</table></div>")


def para(html_text: str, cls: str = "") -> str:
    return f'<p class="{cls}">{html_text}</p>' if cls else f"<p>{html_text}</p>"


def section(sid: str, title: str, body: Sequence[str]) -> str:
    """``<section id=…><h2>title</h2>…</section>`` (title is plain text, escaped here)."""
    return f'<section id="{h(sid)}"><h2>{h(title)}</h2>' + "".join(body) + "</section>"
