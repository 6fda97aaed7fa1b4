"""The plain-text writer: paragraphs as terminal lines (the stdout summary; :func:`terminal.say` makes each line
inert) and spans as CSV text (a finding's checks). Names as they are, shortened to a :class:`Code`'s limit."""

from __future__ import annotations

from typing import List, Sequence

from .document import Cell, Code, Data, Em, Link, Paragraph, Rich, Spans, Strong, Styled, Value
from .escape import shorten


def plain(x: Spans) -> str:
    """Spans as plain text: the tool's words and user text alike, without markup."""
    if isinstance(x, str):
        return x
    if isinstance(x, (tuple, list)):
        return "".join(plain(s) for s in x)
    if isinstance(x, Code):
        return shorten(x.value, x.limit)
    if isinstance(x, (Data, Cell, Rich)):
        return "" if x.value is None else str(x.value)
    if isinstance(x, (Strong, Em, Styled, Link)):
        return plain(x.children)
    if isinstance(x, Value):
        return x.shown
    return "" if x is None else str(x)


def text_lines(parts: Sequence[Paragraph]) -> List[str]:
    """One line per paragraph, its whitespace runs as one space."""
    return [" ".join(plain(p.text).split()) for p in parts]
