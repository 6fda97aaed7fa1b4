"""User regular expressions (``--step-marker``, the rules of a ``--categories`` file) matched in bounded time.

Python's ``re`` backtracks: a pattern such as ``(a+)+$`` takes exponential time on a long name of ``a``s, and
one ``re`` call can be neither timed out nor interrupted. The built-in patterns are written to run in linear
time (docs/SECURITY.md, "Bounded matching"); a user's pattern cannot be trusted so. It is checked by ``re``
when the option is read (its errors are ``re``'s) and matched here, in this process, with the ``regex``
package, whose matcher takes a time limit and lets a signal's handler run:

* over the **distinct** names only (names are interned: a pattern never runs per row), each name once (a name
  over :data:`MATCH_CHARS` characters by its two ends: :func:`match_text`), case-insensitively;
* all patterns of one option share :data:`TIMEOUT_S` seconds over one trace's names; past it the run ends
  with one line naming the option and the pattern (:class:`~nsys_llm_explainer.errors.OptionError`; the
  command line: exit 2);
* ``regex`` compiles a repeat ``{m,n}`` as ``m`` copies of its body, so a pattern whose repeats expand to more
  than :data:`MAX_ITEMS` items is refused (as one line) before it is compiled: no name as matched is longer
  than 8,193 characters.

``regex`` answers as ``re`` does on ASCII names; on other characters ``\\w``, ``\\b``, ``\\d`` and ``\\s``
follow Unicode's definitions (``re``: ``str.isalnum``, ``str.isdigit``, ``str.isspace``), and braces or
brackets that ``re`` reads as text can mean fuzzy matching (``a{e<=1}``) or a POSIX class (``[[:alpha:]]``).
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

#: a kernel name longer than MATCH_CHARS is matched (built-in and user patterns alike) on its first and last
#: MATCH_CHARS / 2 characters joined by a newline (which ``.``, ``\w``, ``\S`` and ``\d`` never cross; ``^`` and
#: ``$`` keep their meaning): every real kernel name seen is far shorter (the longest in the test traces: 1,781
#: characters), and a pattern with many alternatives costs ~100 ns per character, so 50 names of 100 KB would
#: take a minute over the category and trait rules
MATCH_CHARS = 8192
#: seconds all user patterns of one option may take over one trace's distinct names
TIMEOUT_S = 5.0
#: most items a user pattern may expand to (each repeat's body counted ``m`` times for ``{m,n}``, nested
#: repeats multiplied): ``a{100000}`` compiles in ~0.05 s and ~30 MB, ``a{10000000}`` would take gigabytes
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
