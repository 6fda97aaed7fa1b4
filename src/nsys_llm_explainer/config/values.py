"""Option values checked and parsed once: one function per kind of value, ``check(value, name) -> parsed``, taking
the raw value (from the Python API or ``argparse``) and raising :class:`~nsys_llm_explainer.errors.OptionError`
naming the option; :data:`options.OPTIONS` says which check parses which option.
"""

from __future__ import annotations

import math
import numbers
import os
import re
from typing import Any, List, Mapping, Optional, Sequence, Tuple, Union

from ..errors import OptionError
from .categories import CategoryRules
from .phase_map import FORMAT as PHASE_MAP_FORMAT
from .phase_map import PhaseMap, build_phase_map, read_phase_map_file
from .window import check_window


def shown(v: Any) -> str:
    """A value for a message: its ``repr``, shortened; ``a <type>`` when it has none that can be made (an
    integer of more than 4,300 digits, a ``__repr__`` that fails)."""
    try:
        s = repr(v)
    except Exception:
        return "an integer of more than 4,300 digits" if isinstance(v, numbers.Integral) else \
            f"a {type(v).__name__} that cannot be shown"
    return s if len(s) <= 80 else f"{s[:60]}… ({len(s):,} characters)"


def is_path(v: Any) -> bool:
    return isinstance(v, (str, os.PathLike))


#: the largest count an option takes (``top``, ``jobs``): far above any real use, and small enough to be written
#: into report.json and compared as a machine integer
MAX_COUNT = 10 ** 9


def _integer(v: Any, name: str, low: int, at_least: str, got: str) -> int:
    """An integer from ``low`` to :data:`MAX_COUNT`; the messages say ``must be <at_least>`` / ``must be at most
    N`` followed by ``got`` (a format with the value shown: ``" (got {})"``)."""
    if isinstance(v, bool) or not isinstance(v, numbers.Integral):
        raise OptionError(name, f"must be an integer, got {shown(v)}")
    if v < low:
        raise OptionError(name, f"must be {at_least}" + got.format(shown(v)))
    if int(v) > MAX_COUNT:
        raise OptionError(name, f"must be at most {MAX_COUNT:,}" + got.format(shown(v)))
    return int(v)


def positive_int(v: Any, name: str) -> int:
    """An integer from 1 to :data:`MAX_COUNT` (``top``)."""
    return _integer(v, name, 1, "at least 1", " (got {})")


def count(v: Any, name: str) -> int:
    """An integer from 0 to :data:`MAX_COUNT` (``timeline_events``: 0 turns the output off)."""
    return _integer(v, name, 0, "at least 0", " (got {})")


def workers(v: Any, name: str) -> Optional[int]:
    """A number of workers ≥ 1, or None (the default: min(files, CPUs))."""
    return None if v is None else _integer(v, name, 1, "≥ 1", ", got {}")


def fraction(v: Any, name: str) -> float:
    """A number between 0 and 1."""
    try:
        f = float(v) if isinstance(v, numbers.Real) and not isinstance(v, bool) else math.nan
    except OverflowError:   # an integer too large for a float
        f = math.inf
    if not math.isfinite(f) or not 0.0 <= f <= 1.0:
        raise OptionError(name, f"must be a number between 0 and 1 (got {shown(v)})")
    return f


def switch(v: Any, name: str) -> bool:
    if not isinstance(v, bool):
        raise OptionError(name, f"must be True or False, got {shown(v)}")
    return v


def text(v: Any, name: str) -> Optional[str]:
    """A string; None or "" → None."""
    if v is None:
        return None
    if not isinstance(v, str):
        raise OptionError(name, f"must be a string, got {type(v).__name__}")
    return v or None


def regex(v: Any, name: str) -> Optional[str]:
    """A regular expression (case-insensitive), kept as its text; None or "" → None."""
    t = text(v, name)
    if t is not None:
        try:
            re.compile(t, re.IGNORECASE)
        except re.error as exc:
            raise OptionError(name, f"is not a valid regular expression: {exc}") from None
        except (OverflowError, RecursionError):   # a repeat count past the engine's limit, nesting past Python's
            raise OptionError(name, "is not a valid regular expression: a repeat count or nesting beyond what "
                              "Python's regular expressions take") from None
    return t


def range_name(v: Any, name: str) -> Optional[str]:
    """An NVTX range name that must not be empty when given."""
    if v is not None and v == "":
        raise OptionError(name, "must be a non-empty NVTX range name")
    return text(v, name)


def window(v: Any, name: str) -> Optional[Tuple[int, int]]:
    """``"START_NS:END_NS"`` or a ``(start, end)`` pair (:mod:`config.window`); None or "" → None."""
    if v is None or (isinstance(v, str) and not v):
        return None
    return check_window(v, name)


def phase_map(v: Any, name: str) -> Optional[PhaseMap]:
    """A :class:`PhaseMap`, a JSON file path or a ``{"phase": [...]}`` mapping (:mod:`config.phase_map`); an
    empty one → None (the presets)."""
    if v is None or isinstance(v, PhaseMap):
        return v
    if is_path(v):
        if not str(v):
            return None
        v = read_phase_map_file(v, name)
    elif not isinstance(v, Mapping):
        raise OptionError(name, f"must be a JSON file path or a mapping {PHASE_MAP_FORMAT}, got {type(v).__name__}")
    return build_phase_map(v, name) if v else None


def one_of(choices: Sequence[str]) -> Any:
    """A check for one of ``choices`` (case-insensitive; None → the first)."""
    def check(v: Any, name: str) -> str:
        if v is None:
            return choices[0]
        if not isinstance(v, str) or v.lower() not in choices:
            raise OptionError(name, f"must be one of {', '.join(choices)}, got {shown(v)}")
        return v.lower()
    return check


def file_path(v: Any, name: str) -> Optional[str]:
    """A file path (checked when read); None or "" → None."""
    if v is not None and not is_path(v):
        raise OptionError(name, f"must be a file path, got {type(v).__name__}")
    return str(v) if v is not None and str(v) else None


def rules(v: Any, name: str) -> Union[CategoryRules, str, None]:
    """Parsed :class:`CategoryRules`, or a rules file path (read by :func:`options.options_from_kwargs`)."""
    if v is None or isinstance(v, CategoryRules):
        return v
    if is_path(v):
        return str(v) or None
    raise OptionError(name, f"must be a rules file path or parsed CategoryRules, got {type(v).__name__}")


def names(v: Any, name: str) -> Optional[List[str]]:
    """Names given as ``"a,b,c"`` (the command line) or a sequence (the API); None → None."""
    if v is None:
        return None
    if isinstance(v, str):
        return v.split(",")
    if not isinstance(v, (list, tuple)):
        raise OptionError(name, f"must be a comma-separated string or a sequence of names, got {type(v).__name__}")
    return [str(x) for x in v]
