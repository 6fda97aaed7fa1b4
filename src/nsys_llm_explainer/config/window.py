"""The ``--window START_NS:END_NS`` option: the one parser of an analysis-window override."""

from __future__ import annotations

import numbers
from typing import Sequence, Tuple, Union

from ..errors import InputError

Window = Tuple[int, int]


def parse_window(text: str, label: str = "--window") -> Window:
    """``"START_NS:END_NS"`` → ``(start, end)`` (integers, whitespace around each allowed).

    Raises :class:`InputError` (one line, naming ``label``) when malformed or when end ≤ start."""
    parts = str(text).split(":")
    try:
        if len(parts) != 2:
            raise ValueError
        a, b = int(parts[0].strip()), int(parts[1].strip())
    except ValueError:
        raise InputError(f"{label} expects START_NS:END_NS (integers), got {text!r}") from None
    return check_window((a, b), label)


def check_window(value: Union[str, Sequence[int]], label: str = "--window") -> Window:
    """A window given as text (:func:`parse_window`) or as a (start, end) pair of integers, validated."""
    if isinstance(value, str):
        return parse_window(value, label)
    try:
        ok = len(value) == 2 and all(isinstance(x, numbers.Integral) and not isinstance(x, bool) for x in value)
    except TypeError:
        ok = False
    if not ok:
        raise InputError(f"{label} expects START_NS:END_NS or a (start_ns, end_ns) pair of integers, "
                         f"got {value!r}")
    a, b = int(value[0]), int(value[1])
    if b <= a:
        raise InputError(f"{label} end ({b}) must be after its start ({a})")
    return a, b
