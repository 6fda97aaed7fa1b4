"""User regular expressions (``--step-marker``, the rules of a ``--categories`` file) matched in bounded time, in
this process, by the ``regex`` package: once per distinct name, case-insensitively, all patterns of one option
within :data:`TIMEOUT_S` seconds over one trace's names. Rules, limits and where ``regex`` reads a pattern
differently from ``re``: docs/SECURITY.md, "Bounded matching".
"""

from __future__ import annotations

import importlib
import time
from typing import Any, List, Sequence

import regex

from ..errors import OptionError
from ..interrupts import check as check_interrupts

try:   # the parser behind re.compile: re._parser from Python 3.11, sre_parse before (deprecated since)
    _sre: Any = importlib.import_module("re._parser")
except ImportError:   # pragma: no cover - Python 3.9 / 3.10
    _sre = importlib.import_module("sre_parse")

#: a longer kernel name is matched (built-in and user patterns alike) by its two ends (:func:`match_text`;
#: docs/SECURITY.md, "Bounded matching")
MATCH_CHARS = 8192
#: seconds all user patterns of one option may take over one trace's distinct names
TIMEOUT_S = 5.0
#: most items a user pattern may expand to (each repeat's body counted ``m`` times for ``{m,n}``, nested
#: repeats multiplied)
MAX_ITEMS = 100_000
_REPEATS = tuple(getattr(_sre, n) for n in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT") if hasattr(_sre, n))


def match_text(name: Any) -> str:
    """A name as the patterns see it: a string (None → ""); longer than :data:`MATCH_CHARS`, its first and last
    ``MATCH_CHARS // 2`` characters joined by a newline."""
    s = str(name or "")
    if len(s) <= MATCH_CHARS:
        return s
    half = MATCH_CHARS // 2
    return s[:half] + "\n" + s[-half:]


def for_matching(names: Sequence[Any]) -> List[str]:
    """:func:`match_text` of each name."""
    return [match_text(n) for n in names]


def _items(seq: Any) -> int:
    """Items ``regex`` compiles a parsed pattern into (stops counting past :data:`MAX_ITEMS`)."""
    n = 0
    for op, av in seq:
        if op in _REPEATS:
            n += max(1, int(av[0])) * _items(av[2])
        elif op is _sre.BRANCH:
            n += sum(_items(b) for b in av[1])
        elif op is _sre.SUBPATTERN:
            n += _items(av[-1])
        elif op in (_sre.ASSERT, _sre.ASSERT_NOT):
            n += _items(av[1])
        elif hasattr(_sre, "ATOMIC_GROUP") and op is _sre.ATOMIC_GROUP:
            n += _items(av)
        elif op is _sre.GROUPREF_EXISTS:
            n += sum(_items(x) for x in av[1:] if x is not None)
        else:
            n += 1
        if n > MAX_ITEMS:
            break
    return n


def _compile(pattern: str, option: str, label: str) -> Any:
    """``pattern`` compiled by ``regex`` (case-insensitive), or :class:`OptionError` naming it."""
    try:
        if _items(_sre.parse(pattern, _sre.SRE_FLAG_IGNORECASE)) > MAX_ITEMS:
            raise OptionError(option, f"{label} has repeats that expand to over {MAX_ITEMS:,} items (a repeat "
                                      f"{{m,n}} counts its body m times; names are matched on at most "
                                      f"{MATCH_CHARS + 1:,} characters): lower the counts")
        return regex.compile(pattern, regex.IGNORECASE)
    except (regex.error, _sre.error) as e:
        raise OptionError(option, f"{label} is not a valid regular expression: {e}") from None
    except (OverflowError, RecursionError):   # a repeat count past the engine's limit, nesting past its stack
        raise OptionError(option, f"{label} is not a valid regular expression: a repeat count or nesting beyond "
                                  "what the matcher takes") from None


def first_match(patterns: Sequence[str], names: Sequence[str], option: str, labels: Sequence[str]) -> List[int]:
    """Per name, the index of the first of ``patterns`` that a case-insensitive search finds in it, or -1;
    within :data:`TIMEOUT_S` seconds, else :class:`OptionError` ``<option> <label> did not finish …`` naming
    the pattern that was running (``labels[j]`` names pattern ``j``)."""
    names = for_matching(names)
    first = [-1] * len(names)
    if not patterns or not names:
        return first
    deadline = time.monotonic() + TIMEOUT_S
    todo = list(range(len(names)))
    for j, p in enumerate(patterns):
        search, rest = _compile(p, option, labels[j]).search, []
        try:
            for i in todo:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError
                check_interrupts()
                if search(names[i], timeout=left):
                    first[i] = j
                else:
                    rest.append(i)
        except TimeoutError:
            longest = max(len(n) for n in names)
            raise OptionError(option, f"{labels[j]} did not finish within {TIMEOUT_S:g} s over {len(names):,} "
                                      f"kernel name(s) (the longest has {longest:,} characters): nested repeats (as in "
                                      f"'(a+)+') and backreferences backtrack exponentially; simplify it") from None
        todo = rest
    return first
