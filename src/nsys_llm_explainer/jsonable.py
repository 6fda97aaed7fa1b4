"""JSON-ready copies of result values: the conversions every ``to_dict()`` applies to its fields.

:func:`json_ready` turns builtins and numpy values into a fresh tree of ``dict`` / ``list`` / ``str`` /
``int`` / ``float`` / ``bool`` / ``None``: tuples and arrays become lists, numpy scalars builtins, dict keys
strings, and non-finite floats ``None`` (``report.json`` is strict JSON). An object with a ``to_dict()`` is
replaced by its (converted) ``to_dict()``. A dataclass without one is an error: every result serialises
itself, there is no generic field walker.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

_SAME = frozenset((str, int, bool, type(None)))   # exact types returned as they are (no call per value)


def _item(v: Any) -> Any:
    t = type(v)
    if t in _SAME:
        return v
    if t is float:
        return v if math.isfinite(v) else None
    return json_ready(v)


def json_ready(obj: Any) -> Any:
    """A JSON-ready copy of ``obj`` (see module docstring); containers are always copied."""
    if obj is None or isinstance(obj, (str, bool, int)):
        return obj
    if isinstance(obj, float):
        return float(obj) if math.isfinite(obj) else None
    if isinstance(obj, dict):   # rows of plain values (the common case) without a recursive call per value
        return {(k if type(k) is str else str(k)): (v if type(v) in _SAME else _item(v)) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [v if type(v) in _SAME else _item(v) for v in obj]
    if isinstance(obj, np.bool_):
        return bool(obj)
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return float(obj) if np.isfinite(obj) else None
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    to_dict = getattr(obj, "to_dict", None)
    if callable(to_dict) and not isinstance(obj, type):
        return json_ready(to_dict())
    if dataclasses.is_dataclass(obj):
        raise TypeError(f"{type(obj).__name__} has no to_dict(): results serialise themselves")
    return obj
