"""The ``window`` option (``--window START_NS:END_NS``): the one parser of an analysis-window override."""

from __future__ import annotations

import numbers
from typing import Sequence, Tuple, Union

from ..errors import OptionError

Window = Tuple[int, int]


def check_window(value: Union[str, Sequence[int]], option: str = "window") -> Window:
    """A window given as ``"START_NS:END_NS"`` (integers, whitespace around each allowed) or as a (start, end) pair
    of integers; :class:`~nsys_llm_explainer.errors.OptionError` (naming ``option``) when malformed or when
    end ≤ start."""
    if isinstance(value, str):
        parts = value.split(":")
        try:
            if len(parts) != 2:
                raise ValueError
            value = (int(parts[0].strip()), int(parts[1].strip()))
        except ValueError:
            raise OptionError(option, f"expects START_NS:END_NS (integers), got {value!r}") from None
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
