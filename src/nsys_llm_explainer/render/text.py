"""The plain-text writer: paragraphs as terminal lines (the stdout summary; :func:`terminal.say` makes each line
inert) and spans as CSV text (a finding's checks). Names as they are, shortened to a :class:`Code`'s limit; a
terminal line that would run over :data:`.escape.TERM_LIMIT` has the names its sentences quote shortened to
:data:`.escape.TERM_NAME_LIMIT` where they stand first (docs/SECURITY.md §4, "Long names")."""

from __future__ import annotations

from typing import List, Optional, Sequence

from ..vocabulary.code_spans import code_name, split
from .document import Cell, Code, Data, Em, Link, Paragraph, Rich, Spans, Strong, Styled, Value
from .escape import TERM_LIMIT, TERM_NAME_LIMIT, shorten, visible


def plain(x: Spans, name_limit: Optional[int] = None) -> str:
    """Spans as plain text: the tool's words and user text alike, without markup; ``name_limit``: the names quoted in
    :class:`Rich` sentences (their code spans) shortened to that many characters, each where it stands."""
    if isinstance(x, str):
        return x
    if isinstance(x, (tuple, list)):
        return "".join(plain(s, name_limit) for s in x)
    if isinstance(x, Code):
        return shorten(x.value, x.limit)
    if isinstance(x, Rich) and name_limit is not None and x.value is not None:
        parts = split(str(x.value))
        if parts is not None:       # unbalanced backticks: plain text, cut as a whole line
            return "".join(code_name(shorten(p, name_limit)) if i % 2 else p for i, p in enumerate(parts))
    if isinstance(x, (Data, Cell, Rich)):
        return "" if x.value is None else str(x.value)
    if isinstance(x, (Strong, Em, Styled, Link)):
        return plain(x.children, name_limit)
    if isinstance(x, Value):
        return x.shown
    return "" if x is None else str(x)


def text_lines(parts: Sequence[Paragraph]) -> List[str]:
    """One line per paragraph, its whitespace runs as one space; a line over :data:`.escape.TERM_LIMIT` (shown) with
    its quoted names shortened to :data:`.escape.TERM_NAME_LIMIT` first, so that the cut the terminal makes
    (:func:`.escape.term_text`) leaves the sentence around a long name whole."""
    out = []
    for p in parts:
        line = " ".join(plain(p.text).split())
        if len(visible(line)) > TERM_LIMIT:
            line = " ".join(plain(p.text, TERM_NAME_LIMIT).split())
        out.append(line)
    return out
