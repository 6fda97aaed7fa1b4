"""User regular expressions (``--step-marker``, the rules of a ``--categories`` file) matched in bounded time.

Python's ``re`` backtracks: a pattern such as ``(a+)+$`` takes exponential time on a long name of ``a``s, even
``a\\w*b`` takes quadratic time on a 100 KB name, and a signal handler never runs inside one ``re`` call. The
built-in patterns are written to run in linear time (docs/SECURITY.md, "Bounded matching"); a user's pattern
cannot be trusted so, and is matched here:

* Over the **distinct** names only (names are interned: a pattern never runs per row), each name once (a name
  over :data:`MATCH_CHARS` characters by its two ends: :func:`match_text`).
* A pattern :func:`is_small` — no unbounded repeat, no backreference, at most :data:`SMALL_WORK` paths × width
  (``argmax|top_?k``, literal alternations) — costs at most ``SMALL_WORK`` steps per character of a name: it
  is matched in this process, with the time limit checked between names.
* Any other pattern is matched in a child Python process (``python -I -S``: ``re`` and ``json`` only) that reads
  the names once and answers, per name, the first pattern that matches. It is killed after
  :data:`TIMEOUT_S` seconds — and ends itself (``SIGALRM``, whose default action stops a process even inside
  ``re``) a little later should this process die first — and the run ends with one line naming the option and
  the pattern (:class:`~nsys_llm_explainer.errors.OptionError`; the command line: exit 2). While it waits,
  this process polls every :data:`POLL_S` seconds: a termination signal (:mod:`interrupts`) kills the child and
  stops the run, whichever thread waits. Where no child can be started (no Python executable, e.g. an embedded
  interpreter), the patterns are matched here with the time limit checked between names.

:func:`risk` reads the parse tree (``re._parser`` / ``sre_parse``) to say *why* a pattern that ran out of time
is slow (a repeat nested in an unbounded repeat, a backreference); nothing is rejected up front, so every
pattern that finishes in time works as ``re`` defines it.
"""

from __future__ import annotations

import importlib
import json
import re
import subprocess
import sys
import time
from typing import Any, List, Optional, Sequence, Tuple

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
#: how often a wait for the child looks for a termination signal
POLL_S = 0.05
#: most paths × width of a pattern matched in this process (per character of a name)
SMALL_WORK = 256
_FLAGS = re.IGNORECASE

_CHILD = r"""
import json, re, signal, sys
job = json.loads(sys.stdin.buffer.read().decode("utf-8"))
if hasattr(signal, "alarm"):
    signal.alarm(job["alarm"])
names, first = job["names"], [-1] * len(job["names"])
todo = list(range(len(names)))
for j, p in enumerate(job["patterns"]):
    sys.stdout.write("%d\n" % j)
    sys.stdout.flush()
    rx, rest = re.compile(p, re.IGNORECASE), []
    for i in todo:
        if rx.search(names[i]):
            first[i] = j
        else:
            rest.append(i)
    todo = rest
sys.stdout.write(json.dumps(first) + "\n")
"""


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


# ------------------------------------------------------------------------------------------- the parse tree
def _parse(pattern: str) -> Any:
    return _sre.parse(pattern, _FLAGS)


_INF = float("inf")
_REPEATS = tuple(getattr(_sre, n) for n in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT") if hasattr(_sre, n))
_REFS = tuple(getattr(_sre, n) for n in ("GROUPREF", "GROUPREF_EXISTS", "GROUPREF_IGNORE", "GROUPREF_LOC_IGNORE",
                                          "GROUPREF_UNI_IGNORE") if hasattr(_sre, n))


def _children(op: Any, av: Any) -> List[Any]:
    """The sub-patterns of one parse-tree node."""
    if op is _sre.BRANCH:
        return list(av[1])
    if op is _sre.SUBPATTERN:
        return [av[-1]]
    if op in _REPEATS:
        return [av[2]]
    if op in (_sre.ASSERT, _sre.ASSERT_NOT):
        return [av[1]]
    if hasattr(_sre, "ATOMIC_GROUP") and op is _sre.ATOMIC_GROUP:
        return [av]
    if op is _sre.GROUPREF_EXISTS:
        return [x for x in av[1:] if x is not None]
    return []


def _paths(items: Any) -> float:
    """Upper bound on the ways the engine can try ``items`` from one position (∞: an unbounded repeat or a
    backreference): a sequence multiplies, a branch adds, ``{m,n}`` sums the powers ``m..n`` of its body."""
    total = 1.0
    for op, av in items:
        if op in _REFS:
            return _INF
        if op in _REPEATS:
            lo, hi = int(av[0]), int(av[1])
            if hi == _sre.MAXREPEAT:
                return _INF
            body = _paths(av[2])
            c = float(hi - lo + 1) if body == 1 else sum(body ** k for k in range(lo, min(hi, 64) + 1))
        elif op is _sre.BRANCH:
            c = sum(_paths(b) for b in av[1])
        else:
            kids = _children(op, av)
            c = _paths(kids[0]) if kids else 1.0
        total *= c
        if total > 1e12:
            return _INF
    return total


def is_small(pattern: str) -> bool:
    """True for a pattern whose work per character of a name is at most :data:`SMALL_WORK` steps (see module
    docstring): no unbounded repeat, no backreference, paths × width small."""
    try:
        tree = _parse(pattern)
        width = tree.getwidth()[1]
    except (re.error, OverflowError, RecursionError):
        return False
    if width >= _sre.MAXREPEAT:
        return False
    return _paths(tree) * max(1, width) <= SMALL_WORK


def risk(pattern: str) -> str:
    """Why ``pattern`` may backtrack catastrophically, in words ("" when the parse tree shows nothing special)."""
    try:
        tree = _parse(pattern)
    except (re.error, RecursionError):
        return ""
    found: List[str] = []

    def walk(items: Any, in_unbounded: bool) -> None:
        for op, av in items:
            if op in _REFS:
                found.append("a backreference, which can backtrack exponentially")
            unbounded = op in _REPEATS and int(av[1]) == _sre.MAXREPEAT
            if op in _REPEATS and int(av[1]) > 1 and in_unbounded:
                found.append("a repeat nested in an unbounded repeat (as in '(a+)+'), which backtracks "
                             "exponentially")
            for kid in _children(op, av):
                walk(kid, in_unbounded or unbounded)

    walk(tree, False)
    if found:
        return found[0]
    if _paths(tree) == _INF:
        return "unbounded repeats that can rescan a long name from every position (as in '.*x.*y')"
    return "bounded repeats or alternatives that multiply the ways each position is tried"


# ------------------------------------------------------------------------------------------- matching
def first_match(patterns: Sequence[str], names: Sequence[str], option: str, labels: Sequence[str],
                what: str = "kernel name") -> List[int]:
    """Per name, the index of the first of ``patterns`` that ``re.search`` finds in it (case-insensitive), or
    -1; within :data:`TIMEOUT_S` seconds, else :class:`OptionError` ``<option> <label> did not finish …`` naming
    the pattern that was running (``labels[j]`` names pattern ``j``; ``what`` names the kind of name)."""
    names = for_matching(names)
    if not patterns or not names:
        return [-1] * len(names)
    if all(is_small(p) for p in patterns):
        return _match_here(patterns, names, option, labels, what)
    try:
        proc = subprocess.Popen([sys.executable, "-I", "-S", "-c", _CHILD], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    except (OSError, ValueError):
        return _match_here(patterns, names, option, labels, what)
    return _match_in_child(proc, patterns, names, option, labels, what)


def _slow(option: str, label: str, pattern: str, names: Sequence[str], what: str) -> OptionError:
    longest = max((len(n) for n in names), default=0)
    return OptionError(option, f"{label} did not finish within {TIMEOUT_S:g} s over {len(names):,} {what}(s) "
                               f"(the longest has {longest:,} characters): it has {risk(pattern)}; simplify it")


def _match_here(patterns: Sequence[str], names: Sequence[str], option: str, labels: Sequence[str],
                what: str) -> List[int]:
    """In this process, the time limit checked between names (each search is bounded: :func:`is_small`)."""
    deadline = time.monotonic() + TIMEOUT_S
    first = [-1] * len(names)
    todo = list(range(len(names)))
    for j, p in enumerate(patterns):
        rx, rest = re.compile(p, _FLAGS), []
        for i in todo:
            if rx.search(names[i]):
                first[i] = j
            else:
                rest.append(i)
            if time.monotonic() > deadline:
                raise _slow(option, labels[j], p, names, what)
        todo = rest
    return first


def _match_in_child(proc: subprocess.Popen, patterns: Sequence[str], names: Sequence[str], option: str,
                    labels: Sequence[str], what: str) -> List[int]:
    job = json.dumps({"patterns": list(patterns), "names": list(names), "alarm": int(TIMEOUT_S) + 2},
                     ensure_ascii=True).encode("ascii")
    deadline = time.monotonic() + TIMEOUT_S
    out: Optional[bytes] = None
    try:
        payload: Optional[bytes] = job
        while out is None:
            check_interrupts()
            if time.monotonic() > deadline:
                break
            try:
                out, _ = proc.communicate(payload, timeout=POLL_S)
            except subprocess.TimeoutExpired:
                pass
            payload = None
    finally:
        if out is None:
            proc.kill()
            rest, _ = _drain(proc)
    if out is None:   # out of time: the last pattern the child started is the slow one
        started = [int(x) for x in rest.split() if x.isdigit()]
        j = started[-1] if started else 0
        raise _slow(option, labels[j], patterns[j], names, what)
    return _answer(out, len(names), proc.returncode, option, labels)


def _drain(proc: subprocess.Popen) -> Tuple[bytes, bytes]:
    """What a killed child had written (never waits long: the child is gone)."""
    try:
        out, err = proc.communicate(timeout=5)
        return out or b"", err or b""
    except (subprocess.SubprocessError, OSError, ValueError):
        return b"", b""


def _answer(out: bytes, n: int, code: Optional[int], option: str, labels: Sequence[str]) -> List[int]:
    last = out.strip().splitlines()[-1:] if out else []
    try:
        first = json.loads(last[0]) if last else None
    except ValueError:
        first = None
    if not (isinstance(first, list) and len(first) == n and all(isinstance(x, int) for x in first)):
        raise OptionError(option, f"{labels[0] if len(labels) == 1 else 'the patterns'} could not be matched: the "
                                  f"matching process ended with code {code}")
    return first
