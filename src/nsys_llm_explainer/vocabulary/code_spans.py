"""Names inside the tool's sentences (docs/SECURITY.md §4, "Names in sentences"): every user-controlled name that
a finding, reason, note or verdict quotes is written by :func:`code_name` as a code span, and every renderer reads
the spans back with :func:`split` — one format for the writer and the readers, kept in report.json as written."""

from __future__ import annotations

import re
from typing import List, Optional

#: a fenced span as :func:`code_name` writes it for a name holding a backtick: a run of two or more backticks, a space,
#: the name, a space and a run of exactly as many backticks
_FENCED = re.compile(r"(?<!`)(`{2,}) (.*?) \1(?!`)", re.S)


def code_name(name: object) -> str:
    """``name`` as a code span of a sentence: ```name``` when it holds no backtick (an ordinary name); otherwise
    fenced by a run of one backtick more than its longest run, a space inside each fence (``"`` `x` <b> ``"``,
    as CommonMark writes such a span), so its own backticks cannot pair with the sentence's."""
    s = "" if name is None else str(name)
    if "`" not in s:
        return f"`{s}`"
    fence = "`" * (max(len(r) for r in re.findall("`+", s)) + 1)
    return f"{fence} {s} {fence}"


def _plain(seg: str, out: List[str]) -> bool:
    """Append the single-backtick parts of ``seg`` (text outside fenced spans) to ``out``; False when one is
    unpaired."""
    parts = seg.split("`")
    if len(parts) % 2 == 0:
        return False
    out[-1] += parts[0]
    out.extend(parts[1:])
    return True


def split(text: str) -> Optional[List[str]]:
    """The parts of a sentence written with :func:`code_name`: plain text at even indexes, a code span's name at odd
    ones (as ``text.split("`")`` for a sentence without fenced spans); None when a backtick is unpaired (the sentence is
    then shown as plain text)."""
    out = [""]
    pos = 0
    for m in _FENCED.finditer(text):
        if not _plain(text[pos:m.start()], out):
            return None
        out += [m.group(2), ""]
        pos = m.end()
    return out if _plain(text[pos:], out) else None
