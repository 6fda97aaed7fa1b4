"""HTML escaping: for markup, and for JSON inside a ``<script>`` (rules: docs/SECURITY.md §4)."""

from __future__ import annotations

import json
from typing import Any, Optional

from ...vocabulary.code_spans import split as split_spans
from ...vocabulary.units import num
from ..escape import CODE_LIMIT, TEXT_LIMIT, _to_str, shorten, shorten_text
from ..escape import html_escape as h  # element content or a quoted attribute value (docs/SECURITY.md §4)

#: characters kept for a name shown in a table cell (the full name is in ``title`` / CSV)
NAME_LIMIT = 120


def code(text: Any) -> str:
    """A name in monospace, escaped; empty for an empty name."""
    s = shorten(text, CODE_LIMIT)
    return f"<code>{h(s)}</code>" if s else ""


def name_html(text: Any, limit: int = NAME_LIMIT) -> str:
    """A possibly long name: shortened (middle ellipsis) in ``<code>``, the full name in ``title``."""
    s = _to_str(text)
    if not s:
        return ""
    short = shorten(s, limit)
    title = f' title="{h(shorten(s, TEXT_LIMIT))}"' if short != s else ""
    return f"<code{title}>{h(short)}</code>"


def rich(text: Any) -> str:
    """Text with code spans (as in report.md: :func:`vocabulary.code_spans.split`): code spans become ``<code>``, the
    rest is escaped and, as in report.md, shortened (:func:`..escape.shorten_text`)."""
    parts = split_spans(_to_str(text))
    if parts is None:  # unbalanced backticks: everything is plain text
        return h(shorten_text(text))
    return "".join(code(p) if i % 2 else h(shorten_text(p)) for i, p in enumerate(parts))


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
    s = _to_str(v)
    return s if len(s) <= TEXT_LIMIT else shorten(s, TEXT_LIMIT)
