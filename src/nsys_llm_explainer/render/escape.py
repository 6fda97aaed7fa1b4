"""The one place where user-controlled text (kernel / NVTX / process / thread names, paths, labels) is made
inert for each output. Every renderer and the command line's terminal lines use these helpers.

* :func:`visible` — tab, LF and CR become a space; every other C0/C1 control character, DEL, and the bidi
  controls (U+202A–U+202E embeddings/overrides, U+2066–U+2069 isolates, U+200E/U+200F marks, U+061C) and
  U+2028/U+2029 become a *visible* escape (``\\x1b``, ``\\u202e``), so an ESC/OSC-8/BEL sequence or a
  right-to-left override is shown, never executed or applied. Used by every Markdown, HTML and terminal helper.
* :func:`term_text` — one terminal line (stdout summary, stderr errors): :func:`visible`, whitespace
  collapsed, shortened to :data:`TERM_LIMIT` characters.
* :func:`csv_text` — a CSV text cell: a value starting with ``=`` ``+`` ``-`` ``@``, tab or CR (which a
  spreadsheet could run as a formula) gets a leading ``'`` (OWASP "CSV injection"); numbers are untouched
  and the rest of the text is kept exactly (report.json always holds the raw name).

* :func:`md_cell` — text for one cell of a GitHub-flavoured Markdown table. The result never contains a raw
  ``|`` (escaped ``\\|``), a line break (newline, CR and tab become a space, other controls :func:`visible`), a
  raw ``<`` ``>`` ``&`` or backtick (HTML entities), an unescaped emphasis/link/strikethrough/math marker
  (``* _ [ ] ~ $`` and ``\\`` are backslash-escaped; ``_`` only where it could start or end emphasis, i.e.
  not between two letters/digits), nor an autolink trigger (``://``, ``www.`` and ``@`` are broken with
  entities). So a cell cannot split the table, open HTML, or inject a link or image.
* :func:`md_text` — the same escaping for inline text in a paragraph or bullet; in addition a leading
  block marker (``#``, ``>``, ``-``, ``+``, ``=``, ``1.``/``1)``) is escaped so text cannot become a
  heading, quote or list item (``md_cell`` escapes the same markers except ``1.``, which is inert in a
  cell).
* :func:`md_code` — ``text`` in monospace: a backtick code span for plain names, ``<code>`` with the
  :func:`md_text`-style escaping for names holding ``< > & |``, backticks, backslashes or control
  characters (so the .md source never holds raw HTML from a name); safe inside a table cell.
* :func:`md_rich` — text that already uses backtick code spans for names (finding evidence): code
  spans are re-emitted with :func:`md_code`, the rest with :func:`md_text`.
* :func:`html_escape` — text for an HTML element or attribute value (``& < > " '``).
* :func:`truncate` — shorten to at most ``limit`` characters with a trailing ``…``; :func:`shorten` — the
  same with a middle ellipsis (head and tail of a long kernel name). Markdown only; CSV and JSON always keep
  the full name.
* :func:`md_name` — a user-controlled name for Markdown: :func:`shorten` then :func:`md_code`.

Over-long text is shortened in every human-facing output (Markdown, HTML, terminal: at most
:data:`CODE_LIMIT` characters for a name in monospace, :data:`TEXT_LIMIT` for a paragraph); CSV and JSON keep
the full name.
"""

from __future__ import annotations

import html
import re
from typing import Any, List

#: Markdown shortens names longer than this many characters (full names are in the CSV and JSON files)
MD_NAME_LIMIT = 80

#: a name shown in monospace (``md_code``, HTML ``<code>``) / any other text is shortened beyond this
CODE_LIMIT = 200
TEXT_LIMIT = 2000
#: one terminal line (summary, error) is shortened beyond this many characters
TERM_LIMIT = 300
_HIDDEN = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]")
_WHITE = {"\t": " ", "\n": " ", "\r": " "}
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_BACKSLASH_ESCAPED = set("\\*[]~$")
_ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;", "`": "&#96;", "|": "\\|"}
_UNSAFE_IN_SPAN = re.compile(r"[<>&|`\\]")
#: a block marker at the start of a line: quote, heading/list/setext marker followed by a space, end or a
#: run of markers (``---``), or an ordered-list number (``1.`` / ``1)``) followed by a space or end
_LEADING_BLOCK = re.compile(r"^(\s*)(?:(>|[#+=-](?=[\s#+=-]|$))|(\d+)([.)])(?=\s|$))")


def _to_str(text: Any) -> str:
    if text is None:
        return ""
    return text if isinstance(text, str) else str(text)


def _show(m: re.Match[str]) -> str:
    ch = m.group()
    if ch in _WHITE:
        return " "
    o = ord(ch)
    return f"\\x{o:02x}" if o < 0x100 else f"\\u{o:04x}"


def visible(text: Any) -> str:
    """``text`` with tab/LF/CR as spaces and every other control or bidi character as a visible escape."""
    s = _to_str(text)
    return _HIDDEN.sub(_show, s) if _HIDDEN.search(s) else s


def term_text(text: Any, limit: int = TERM_LIMIT) -> str:
    """One inert terminal line: :func:`visible`, runs of whitespace as one space, at most ``limit`` chars."""
    return shorten(" ".join(visible(text).split()), limit)


def csv_text(value: Any) -> Any:
    """A CSV cell value: text that a spreadsheet could read as a formula gets a leading ``'``."""
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        return "'" + value
    return value


def truncate(text: Any, limit: int = MD_NAME_LIMIT) -> str:
    """``text`` cut to ``limit`` characters (the last one an ellipsis) when longer."""
    s = _to_str(text)
    if limit > 0 and len(s) > limit:
        return s[: limit - 1] + "…"
    return s


def shorten(text: Any, limit: int = MD_NAME_LIMIT) -> str:
    """``text`` cut to ``limit`` characters with a middle ellipsis (⅘ head, ⅕ tail) when longer; made
    :func:`visible` first so the head/tail split never hides a line break or a control character."""
    s = visible(text)
    if limit <= 0 or len(s) <= limit:
        return s
    tail = limit // 5
    head = limit - 1 - tail
    return s[:head] + "…" + (s[-tail:] if tail else "")


def md_name(text: Any, limit: int = MD_NAME_LIMIT) -> str:
    """A kernel / NVTX / API / process name for Markdown: shortened, monospace, escaped (cell-safe)."""
    return md_code(shorten(text, limit))


def _escape_inline(s: str) -> str:
    s = shorten(s, TEXT_LIMIT)
    out: List[str] = []
    n = len(s)
    for i, ch in enumerate(s):  # loop over the characters of one name, not over table rows
        if ch in _ENTITIES:
            out.append(_ENTITIES[ch])
        elif ch in _BACKSLASH_ESCAPED:
            out.append("\\" + ch)
        elif ch == "_":
            prev_alnum = i > 0 and s[i - 1].isalnum()
            next_alnum = i + 1 < n and s[i + 1].isalnum()
            out.append("_" if prev_alnum and next_alnum else "\\_")
        elif ch == "@":
            out.append("&#64;")
        else:
            out.append(ch)
    r = "".join(out)
    r = r.replace("://", "&#58;//")
    r = re.sub(r"(?i)\bwww\.", lambda m: m.group(0)[:-1] + "&#46;", r)
    return r


def _escape_leading(r: str, numbered: bool = True) -> str:
    def sub(m: re.Match[str]) -> str:
        if m.group(2):
            return m.group(1) + "\\" + m.group(2)
        if not numbered:
            return m.group(0)
        return m.group(1) + m.group(3) + "\\" + m.group(4)

    return _LEADING_BLOCK.sub(sub, r, count=1)


def md_cell(text: Any) -> str:
    """Escape ``text`` for one GitHub Markdown table cell (see module docstring)."""
    return _escape_leading(_escape_inline(_to_str(text)).strip(), numbered=False)


def md_text(text: Any, line_start: bool = True) -> str:
    """Escape ``text`` for inline Markdown (paragraphs, bullet points). ``line_start=False`` when the text
    is placed after other text on the same line (no block marker can be formed there)."""
    r = _escape_inline(_to_str(text))
    return _escape_leading(r) if line_start else r


def md_code(text: Any) -> str:
    """``text`` in monospace, shown verbatim. Plain names become a backtick code span; names holding
    ``< > & | \\`` backticks or control characters become ``<code>…</code>`` with escaped content (a code span
    could not hide raw HTML from a reader of the .md source). Safe inside a table cell."""
    s = shorten(text, CODE_LIMIT)
    if not s:
        return ""
    if _UNSAFE_IN_SPAN.search(s) or s.startswith(" ") or s.endswith(" "):
        return "<code>" + _escape_inline(s) + "</code>"
    return f"`{s}`"


def md_rich(text: Any, line_start: bool = True) -> str:
    """Escape text whose backtick-delimited parts are code spans (e.g. finding evidence); ``line_start``
    as for :func:`md_text`."""
    parts = _to_str(text).split("`")
    if len(parts) % 2 == 0:  # unbalanced backticks: treat everything as plain text
        return md_text(text, line_start)
    out = []
    for i, part in enumerate(parts):
        if i % 2:
            out.append(md_code(part) if part else "")
        else:
            out.append(md_text(part, line_start=(i == 0 and line_start)))
    return "".join(out)


def html_escape(text: Any) -> str:
    """Escape ``text`` for HTML element content or a quoted attribute value (:func:`visible` first; not
    shortened: callers shorten names)."""
    return html.escape(visible(text), quote=True)
