"""The one place where user-controlled text (names, paths, labels) is made inert for each output: Markdown
(``md_*``), HTML, CSV (formula guard), terminal lines, and shortening. Every rule: docs/SECURITY.md §4."""

from __future__ import annotations

import html
import re
from typing import Any

from ..vocabulary.code_spans import split as split_spans

#: Markdown shortens names longer than this many characters (full names are in the CSV and JSON files)
MD_NAME_LIMIT = 80

#: a name shown in monospace (``md_code``, HTML ``<code>``) / any other text is shortened beyond this
CODE_LIMIT = 200
TEXT_LIMIT = 2000
#: one terminal line (summary, error) is shortened beyond this many characters
TERM_LIMIT = 300
#: a name a terminal line's sentence quotes is shortened to this many characters where it stands when the line would
#: run over TERM_LIMIT (render/text.py), so the cut keeps the sentence
TERM_NAME_LIMIT = 80
_HIDDEN = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]")
_WHITE = {"\t": " ", "\n": " ", "\r": " "}
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
#: what Markdown could read as markup (an underscore only at a word's edge: ``[^\W_]`` is :meth:`str.isalnum`) and
#: its inert form
_MD_SPECIAL = re.compile(r"[&<>`|@\\*\[\]~$]|(?<![^\W_])_|_(?![^\W_])")
_MD_ESCAPES = {"&": "&amp;", "<": "&lt;", ">": "&gt;", "`": "&#96;", "|": "\\|", "@": "&#64;",
               **{ch: "\\" + ch for ch in "\\*[]~$_"}}
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


def shorten(text: Any, limit: int = MD_NAME_LIMIT) -> str:
    """``text`` cut to ``limit`` characters with a middle ellipsis (⅘ head, ⅕ tail) when longer; made
    :func:`visible` first so the head/tail split never hides a line break or a control character."""
    s = visible(text)
    if limit <= 0 or len(s) <= limit:
        return s
    tail = limit // 5
    head = limit - 1 - tail
    return s[:head] + "…" + (s[-tail:] if tail else "")


_LONG_WORD = re.compile(rf"\S{{{CODE_LIMIT + 1},}}")


def shorten_text(text: Any, limit: int = TEXT_LIMIT) -> str:
    """A sentence (which may quote names) cut to ``limit`` characters: when longer, each run of over
    :data:`CODE_LIMIT` non-space characters (a long name the sentence quotes) is first :func:`shorten`-ed to
    :data:`CODE_LIMIT` where it stands, so the sentence around it stays whole; then the middle cut if still longer.
    Made :func:`visible` first; text within ``limit`` is unchanged."""
    s = visible(text)
    if len(s) <= limit:
        return s
    return shorten(_LONG_WORD.sub(lambda m: shorten(m.group(), CODE_LIMIT), s), limit)


def md_name(text: Any, limit: int = MD_NAME_LIMIT) -> str:
    """A kernel / NVTX / API / process name for Markdown: shortened, monospace, escaped (cell-safe)."""
    return md_code(shorten(text, limit))


def _escape_inline(s: str) -> str:
    r = _MD_SPECIAL.sub(lambda m: _MD_ESCAPES[m.group()], shorten_text(s))
    r = r.replace("://", "&#58;//")
    return re.sub(r"(?i)\bwww\.", lambda m: m.group(0)[:-1] + "&#46;", r)


def _escape_leading(r: str, numbered: bool = True) -> str:
    def sub(m: re.Match[str]) -> str:
        if m.group(2):
            return m.group(1) + "\\" + m.group(2)
        if not numbered:
            return m.group(0)
        return m.group(1) + m.group(3) + "\\" + m.group(4)

    return _LEADING_BLOCK.sub(sub, r, count=1)


def md_cell(text: Any) -> str:
    """Escape ``text`` for one GitHub Markdown table cell (docs/SECURITY.md §4)."""
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
    """Escape text whose code spans (:func:`vocabulary.code_spans.split`: backtick-delimited, or fenced for a name
    holding a backtick) are names (e.g. finding evidence); ``line_start`` as for :func:`md_text`."""
    parts = split_spans(_to_str(text))
    if parts is None:  # unbalanced backticks: treat everything as plain text
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
