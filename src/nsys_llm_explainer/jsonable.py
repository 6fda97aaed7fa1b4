"""JSON-ready copies of result values (:func:`json_ready`, :func:`fields_json`: builtins only, non-finite floats
``None``, as strict JSON needs) and the way back by type hints (:func:`from_json`, :func:`dataclass_from_json`); a
class whose ``to_dict()`` renames or reshapes has a ``from_dict`` beside it (docs/DESIGN.md, "Adding an analysis"
and "Loading a report").
"""

from __future__ import annotations

import collections.abc
import dataclasses
import math
import typing
from dataclasses import dataclass
from functools import cache
from types import MappingProxyType
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Type, TypeVar

import numpy as np

from .errors import InputError

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
        return to_dict()   # JSON-ready already (FieldsJson): not copied again
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return fields_json(obj)
    return obj


def fields_json(obj: Any) -> Dict[str, Any]:
    """The one generic encoder of a result: ``{field: JSON-ready value}`` over ``dataclasses.fields`` in declaration
    order (``JSON_KEYS`` first), as each field's ``metadata`` says (:data:`NOT_IN_JSON`, :data:`NONE_AS_EMPTY`,
    :data:`NONE_OMITTED`, :func:`json_name`), then the class's ``JSON_DERIVED`` values (a property, or a method
    called without arguments: ``report.json`` writes them, a loaded result derives them again)."""
    out: Dict[str, Any] = {}
    for name, key, none, rows in _json_fields(obj.__class__):
        v = getattr(obj, name)
        if v is None:
            if none != "omit":
                out[key] = {} if none == "empty" else None
        elif rows:
            out[key] = _keyed(_item(v), rows)
        else:
            out[key] = v if type(v) in _SAME else _item(v)
    for name in getattr(obj, "JSON_DERIVED", ()):
        v = getattr(obj, name)
        out[name] = _item(v() if callable(v) else v)
    return out


def _keyed(v: List[Any], rows: Any) -> Any:
    """The JSON ``v`` of a field declared with ``json_name(rows=…)``: its rows' keys renamed (``rows`` a dict), or
    its tuples (its one tuple) written as objects with the keys ``rows``."""
    if isinstance(rows, Mapping):
        return [{rows.get(k, k): x for k, x in r.items()} for r in v]
    return [dict(zip(rows, r)) for r in v] if not v or isinstance(v[0], list) else dict(zip(rows, v))


@cache
def _json_fields(cls: Any) -> Tuple[Tuple[str, str, str, Any], ...]:
    """(name, JSON key, how a None is written: ``"null"``, ``"empty"`` (``{}``) or ``"omit"`` (no key), the keys of
    its rows (:func:`json_name`)) of the fields of ``cls`` that ``report.json`` carries, in declaration order —
    except the class's ``JSON_KEYS`` (a row's identifying fields, declared in a subclass of a shared statistics
    class), which come first."""
    how = {"none_as_empty": "empty", "none_omitted": "omit"}
    fs = [f for f in dataclasses.fields(cls) if f.metadata.get("json", True) is not False]
    first: Tuple[str, ...] = getattr(cls, "JSON_KEYS", ())
    fs = sorted(fs, key=lambda f: first.index(f.name) if f.name in first else len(first))   # stable
    return tuple((f.name, f.metadata.get("json_name", f.name), how.get(f.metadata.get("json", True), "null"),
                  f.metadata.get("json_rows")) for f in fs)


class FieldsJson:
    """Mixin of a result dataclass whose ``to_dict()`` is :func:`fields_json` (each ``to_dict()``: a new JSON dict)."""

    def to_dict(self) -> Dict[str, Any]:
        return fields_json(self)


@dataclass(frozen=True)
class Outcome(FieldsJson):
    """A result an export may not allow: ``available``, and when it is not, ``reason`` in one line (its fields come
    first, in every result's ``report.json`` object)."""

    available: bool
    reason: Optional[str]


# ------------------------------------------------------------------------------------------ from JSON
#: ``metadata`` of a dataclass field that ``to_dict()`` leaves out (a helper array, the rules applied, …): a value
#: loaded from JSON gets the field's default (:func:`from_json`)
NOT_IN_JSON: Mapping[str, Any] = MappingProxyType({"json": False})
#: ``metadata`` of an ``Optional`` dataclass field that ``to_dict()`` writes as ``{}`` when it is None (the part of
#: a result that had nothing to report is an empty object in ``report.json``); :func:`from_json` reads ``{}`` back
#: as None
NONE_AS_EMPTY: Mapping[str, Any] = MappingProxyType({"json": "none_as_empty"})
#: ``metadata`` of an ``Optional`` dataclass field that ``to_dict()`` leaves out when it is None (a key only some
#: rows of a kind have: the self time of push/pop NVTX ranges); :func:`from_json` reads a missing key as None
NONE_OMITTED: Mapping[str, Any] = MappingProxyType({"json": "none_omitted"})


def json_name(key: Optional[str] = None, rows: Any = None) -> Mapping[str, Any]:
    """``metadata`` of a dataclass field that ``report.json`` writes under the key ``key`` (a Python keyword, the
    name a row's key has in its table); ``rows``: the keys of its rows there — a dict (field → key) renames the keys
    of its dataclass rows, a tuple of keys writes each of its tuples (or its one tuple) as an object."""
    return MappingProxyType({k: v for k, v in (("json_name", key), ("json_rows", rows)) if v is not None})

T = TypeVar("T")
_NONE = type(None)
_NAMES = {float: "a number", int: "an integer", str: "a string", bool: "true or false"}


def dataclass_from_json(cls: Type[T], d: Any, where: str, omitted: Iterable[str] = (), **override: Any) -> T:
    """``cls`` (a dataclass) built from the dict ``d`` field by field, each value converted by its type hint
    (:func:`from_json`; a field's key is its :func:`json_name`), without ``cls.from_dict`` (which calls this).
    ``override``: JSON values that replace (or stand for) keys of ``d``; ``omitted``: fields ``d`` does not carry
    (they keep their defaults), as do fields declared with ``metadata=NOT_IN_JSON`` (a missing ``NONE_OMITTED``
    field is None). Any other field missing from ``d`` is an error; keys of ``d`` that name no field (derived
    values such as ``window_ns``) are ignored."""
    if not isinstance(d, Mapping):
        raise _bad(where, f"expected an object, got {kind_of(d)}")
    src = {**d, **override} if override else d
    c: Any = cls
    hints, skip = _hints(c), set(omitted)
    kw: Dict[str, Any] = {}
    for f in dataclasses.fields(c):
        if not f.init:
            continue
        key = f.metadata.get("json_name", f.name)
        if key in src:
            v, w, rows = src[key], f"{where}.{key}", f.metadata.get("json_rows")
            if rows and v is not None:
                v = _unkeyed(v, rows, hints[f.name], w)
            empty = f.metadata.get("json") == "none_as_empty" and isinstance(v, Mapping) and not v
            kw[f.name] = None if empty else from_json(hints[f.name], v, w)
        elif f.metadata.get("json", True) == "none_omitted":
            kw[f.name] = None
        elif not (f.name in skip or f.metadata.get("json", True) is False):
            raise _bad(where, f"missing key {key!r}")
    return c(**kw)


def _unkeyed(v: Any, rows: Any, tp: Any, where: str) -> Any:
    """The inverse of :func:`_keyed` (``tp``: the field's type)."""
    if isinstance(rows, Mapping):
        back = {j: k for k, j in rows.items()}
        return [{back.get(k, k): x for k, x in r.items()} for r in _objects(v, where)]
    one = [a for a in typing.get_args(tp) if a is not _NONE] if typing.get_origin(tp) is typing.Union else [tp]
    if typing.get_args(one[0])[-1:] != (Ellipsis,):   # one tuple
        return [need(v, k, where) for k in rows]
    return need_rows(v, rows, where)


def _objects(v: Any, where: str) -> List[Mapping[str, Any]]:
    if not isinstance(v, list) or not all(isinstance(r, Mapping) for r in v):
        raise _bad(where, f"expected a list of objects, got {kind_of(v)}")
    return v


#: the largest integer a result value may hold, in magnitude: far above any exact sum of nanosecond durations, and
#: small enough to convert to a float (a value past 1.8e308 cannot be) and to print
INT_LIMIT = 2 ** 127


def check_numbers(d: Any, where: str) -> None:
    """:class:`errors.InputError` naming the key (``report.json kernels[3].total_ns``) of the first number in the
    parsed JSON ``d`` that no result holds: an integer beyond :data:`INT_LIMIT` in magnitude (``json.load`` reads
    a 401-digit one), or a float that is not finite (a result writes ``null`` for those). Walks the whole tree once,
    without recursion."""
    stack: List[Any] = [(d, ())]
    while stack:
        v, path = stack.pop()
        if isinstance(v, (Mapping, list, tuple)):
            items = v.items() if isinstance(v, Mapping) else enumerate(v)
            stack.extend((x, path + (k,)) for k, x in items if type(x) not in _SCALAR_OK)
        elif isinstance(v, int) and not -INT_LIMIT <= v <= INT_LIMIT:
            digits = len(str(abs(v))) if abs(v) < 10 ** 4000 else "over 4000"
            raise _bad(_path(where, path), f"an integer of {digits} digits is out of range (at most 2^127)")
        elif isinstance(v, float) and not math.isfinite(v):
            raise _bad(_path(where, path), f"{v!r} is not a finite number (report values write null for those)")


_SCALAR_OK = frozenset((str, bool, type(None)))


def _path(where: str, path: Sequence[Any]) -> str:
    out = where
    for k in path:
        out += f"[{k}]" if isinstance(k, int) else (f".{str(k)[:40]}" if out != where or " " in where else
                                                     f" {str(k)[:40]}")
    return out


def built(build: Callable[[], T], where: str, what: str) -> T:
    """``build()`` (a result from parsed JSON, ``what``: ``a report``), a value it still cannot hold as one
    :class:`errors.InputError` line: a part nested deeper than Python can walk (no JSON we write is), or a value
    of the right JSON type that a result still cannot hold (the checks of :func:`from_json` name most)."""
    try:
        return build()
    except RecursionError:
        raise InputError(f"{where}: a part is nested too deeply to be {what}") from None
    except (TypeError, ValueError, OverflowError, KeyError, IndexError, AttributeError) as exc:
        raise InputError(f"{where}: a part is malformed ({type(exc).__name__}: {str(exc)[:200]})") from None


def need(d: Any, key: str, where: str) -> Any:
    """``d[key]`` of a JSON object; :class:`errors.InputError` naming ``where`` when ``d`` is no object or lacks
    ``key``."""
    if not isinstance(d, Mapping):
        raise _bad(where, f"expected an object, got {kind_of(d)}")
    if key not in d:
        raise _bad(where, f"missing key {key!r}")
    return d[key]


def check_schema(d: Any, where: str, version: str, what: str, again: str) -> None:
    """:class:`errors.InputError` unless ``d`` is a JSON object with ``schema_version`` ``version`` (``where``: the
    file's name, ``what``: its schema's, ``again``: how to get one of this version) holding no number that no result
    holds (:func:`check_numbers`)."""
    if not isinstance(d, Mapping):
        raise InputError(f"a {where} dict was expected, got {type(d).__name__}")
    v = d.get("schema_version")
    if v != version:
        seen = ("no schema_version" if v is None else f"schema_version {v[:20]!r}" if isinstance(v, str)
                else f"a schema_version that is {kind_of(v)}")
        raise InputError(f"{where} has {seen}: this version of nsys-llm-explainer reads {what} {version} only "
                         f"({again} to get one)")
    check_numbers(d, where)   # a 401-digit integer, an infinity: named by its key


def _bad(where: str, what: str) -> InputError:
    return InputError(f"{where}: {what}")


def kind_of(v: Any) -> str:
    """What a JSON value is, without quoting it (a name in it is user data)."""
    if isinstance(v, (list, tuple)):
        return f"a list of {len(v)} item(s)"
    if isinstance(v, Mapping):
        return f"an object with {len(v)} key(s)"
    return "null" if v is None else _NAMES.get(type(v), f"a {type(v).__name__}")


@cache
def _hints(cls: Any) -> Dict[str, Any]:
    return typing.get_type_hints(cls)


def from_json(tp: Any, v: Any, where: str) -> Any:
    """The value of type ``tp`` whose :func:`json_ready` copy is ``v`` (parsed JSON), driven by the type hints: a
    class with a ``from_dict(d, where)`` classmethod builds itself, any other dataclass is built field by field
    (:func:`dataclass_from_json`); scalars are checked, never converted. A value of the wrong shape or a missing
    key raises :class:`errors.InputError` naming ``where`` (the path so far, ``report.json idle_causes.devices[0]``)."""
    if tp is Any or tp is object:
        return v
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Union:
        opts = [a for a in args if a is not _NONE]
        if v is None and len(opts) < len(args):
            return None
        if len(opts) == 1:
            return from_json(opts[0], v, where)
        return v   # a union of several types: taken as it is
    if origin in (tuple, list):
        if not isinstance(v, (list, tuple)):
            raise _bad(where, f"expected a list, got {kind_of(v)}")
        if origin is list or (len(args) == 2 and args[1] is Ellipsis):
            item = args[0] if args else Any
            items = [from_json(item, x, f"{where}[{i}]") for i, x in enumerate(v)]
            return items if origin is list else tuple(items)
        if not args:
            return tuple(v)
        if len(args) != len(v):
            raise _bad(where, f"expected a list of {len(args)} item(s), got {kind_of(v)}")
        return tuple(from_json(a, x, f"{where}[{i}]") for i, (a, x) in enumerate(zip(args, v)))
    if origin in (dict, Mapping, collections.abc.Mapping):
        if not isinstance(v, Mapping):
            raise _bad(where, f"expected an object, got {kind_of(v)}")
        kt, vt = args or (Any, Any)
        return {_key(kt, k, where): from_json(vt, x, f"{where}[{str(k)[:40]!r}]") for k, x in v.items()}
    if tp is np.ndarray:
        if isinstance(v, np.ndarray):
            return v
        if not isinstance(v, (list, tuple)):
            raise _bad(where, f"expected a list, got {kind_of(v)}")
        return np.asarray(v)
    if not isinstance(tp, type):
        return v
    from_dict = getattr(tp, "from_dict", None)
    if from_dict is not None:
        return from_dict(v, where)
    if dataclasses.is_dataclass(tp):
        return dataclass_from_json(tp, v, where)
    if tp is float:
        if v is None or (isinstance(v, (int, float)) and not isinstance(v, bool)):
            return v
    elif tp is int:
        if isinstance(v, int) and not isinstance(v, bool):
            return v
    elif tp in (str, bool):
        if isinstance(v, tp):
            return v
    else:
        return v
    raise _bad(where, f"expected {_NAMES[tp]}, got {kind_of(v)}")


def _key(tp: Any, k: str, where: str) -> Any:
    """A dict key back from its JSON string."""
    if tp is int:
        try:
            return int(k)
        except ValueError:
            raise _bad(where, "expected integer keys") from None
    return k


def need_rows(v: Any, keys: Sequence[str], where: str) -> List[List[Any]]:
    """The values of ``keys`` (:func:`need`) of each row of ``v``, a list of JSON objects; :class:`errors.InputError`
    naming ``where`` when it is not one."""
    return [[need(r, k, f"{where}[{i}]") for k in keys] for i, r in enumerate(_objects(v, where))]
