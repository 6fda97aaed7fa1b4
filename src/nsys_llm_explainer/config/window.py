"""The ``window`` option (``--window START_NS:END_NS``): the one parser of an analysis-window override."""

from __future__ import annotations

import numbers
from typing import Sequence, Tuple, Union

from ..errors import OptionError

Window = Tuple[int, int]


def parse_window(text: str, option: str = "window") -> Window:
    """``"START_NS:END_NS"`` → ``(start, end)`` (integers, whitespace around each allowed).

    Raises :class:`~nsys_llm_explainer.errors.OptionError` (naming ``option``) when malformed or when end ≤ start."""
    parts = str(text).split(":")
    try:
        if len(parts) != 2:
            raise ValueError
        a, b = int(parts[0].strip()), int(parts[1].strip())
    except ValueError:
        raise OptionError(option, f"expects START_NS:END_NS (integers), got {text!r}") from None
    return check_window((a, b), option)


def check_window(value: Union[str, Sequence[int]], option: str = "window") -> Window:
    """A window given as text (:func:`parse_window`) or as a (start, end) pair of integers, validated."""
    if isinstance(value, str):
        return parse_window(value, option)
    try:
        ok = len(value) == 2 and all(isinstance(x, numbers.Integral) and not isinstance(x, bool) for x in value)
    except TypeError:
        ok = False
    if not ok:
        raise OptionError(option, f"expects START_NS:END_NS or a (start_ns, end_ns) pair of integers, got {value!r}")
    a, b = int(value[0]), int(value[1])
    if b <= a:
        raise OptionError(option, f"end ({b}) must be after its start ({a})")
    return a, b
