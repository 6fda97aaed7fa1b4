"""NVTX range names as idle-cause details: digit runs replaced by ``N`` (``layer_12_attn`` → ``layer_N_attn``), in
time linear in the name (docs/SECURITY.md, "Bounded matching")."""

from __future__ import annotations

import re
from typing import List

_DIGIT_RUN = re.compile(r"\d+")


def _free(s: str, i: int) -> bool:
    """Position ``i`` of ``s`` is outside it or holds no ASCII letter or digit (``[^A-Za-z0-9]``)."""
    return i < 0 or i >= len(s) or not (s[i].isascii() and s[i].isalnum())


def _digit_run(m: re.Match) -> str:
    """What ``(?<![A-Za-z0-9])\\d+|\\d+(?![A-Za-z0-9])`` replaces by ``N`` in the maximal digit run ``m``, found by
    stepping through the run once: a match at ``p`` either follows a character that is not an ASCII letter or
    digit (then it takes the rest of the run), or ends before one (the run's end, or a non-ASCII digit: ``\\d`` is
    Unicode) — the last such end, as the regex's backtracking finds it."""
    s, a, b = m.string, m.start(), m.end()
    if _free(s, a - 1) or _free(s, b):
        return "N"
    if m.group(0).isascii():
        return m.group(0)
    last = max(i for i in range(a, b) if _free(s, i))   # the last non-ASCII digit
    out: List[str] = []
    p = a
    while p < b:
        if _free(s, p - 1):
            return "".join(out) + "N"
        if p < last:
            out.append("N")
            p = last
        else:
            out.append(s[p])
            p += 1
    return "".join(out)


def normalize_range_name(name: str) -> str:
    """NVTX range name with digit runs replaced by ``N`` unless between two letters (``layer_12_attn`` →
    ``layer_N_attn``, ``h2d_copy`` unchanged). The replacement ``(?<![A-Za-z0-9])\\d+|\\d+(?![A-Za-z0-9])`` would
    make, applied by ``re.sub``, but in linear time: that regex rescans a digit run from each of its digits (quadratic
    in a 100 KB run), this looks at each maximal run once."""
    return _DIGIT_RUN.sub(_digit_run, name)
