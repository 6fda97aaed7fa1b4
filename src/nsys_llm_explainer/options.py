"""Analysis options, parsed and validated once into an immutable, typed :class:`Options`.

Two entry points build one: :func:`options_from_kwargs` (the Python API, ``analyze(path, **options)``)
and :func:`options_from_args` (the command line's ``argparse.Namespace``). Both read the option files
(``phase_map``, ``categories``) through :mod:`config` and raise :class:`~nsys_llm_explainer.errors.InputError`
with a one-line message naming the option (``top`` for the API, ``--top`` on the command line) on a bad
value. Analyses receive the parsed values only.
"""

from __future__ import annotations

import argparse
import math
import numbers
import os
import re
from dataclasses import dataclass, fields
from typing import Any, Callable, Dict, Mapping, Optional, Tuple

from .config.categories import CategoryRules, load_rules
from .config.phase_map import FORMAT as PHASE_MAP_FORMAT
from .config.phase_map import PhaseMap, build_phase_map, read_phase_map_file
from .config.window import check_window
from .errors import InputError
from .read.columnar import READERS


@dataclass(frozen=True)
class Options:
    """Parsed analysis options (field names and defaults as the historical ``pipeline.Options``).

    * ``top`` — rows in top tables (≥ 1).
    * ``phase_map`` — user phase map (:class:`~config.phase_map.PhaseMap`, source ``"user"``); None: presets.
    * ``nvtx_coverage_warn_threshold`` — warn when NVTX→kernel attribution covers less than this
      fraction of kernel time (0 … 1).
    * ``nvtx_kernel_map`` — run NVTX→kernel attribution.
    * ``include_memcpy_in_busy`` — count memcpy/memset as GPU busy.
    * ``categories_file`` — path of the user category rules file (None: presets only);
      ``categories`` — the parsed rules (:class:`~config.categories.CategoryRules`, preset ``auto``
      plus the file's rules), None when no rules were given.
    * ``step_marker`` — kernel-name regex marking the end of a step (valid; None: default markers).
    * ``window`` — ``(start_ns, end_ns)`` with end > start, or None (auto-detected steady state).
    * ``window_nvtx`` — NVTX range name whose span is the window, or None.
    * ``step_range`` — NVTX range name that delimits one step, or None (auto-detected).
    * ``reader`` — how big tables are fetched: ``auto`` (columnar ADBC driver when installed, else the
      standard library), ``adbc`` or ``sqlite3`` (:mod:`read.columnar`); the numbers do not depend on it.
    """

    top: int = 20
    phase_map: Optional[PhaseMap] = None
    nvtx_coverage_warn_threshold: float = 0.7
    nvtx_kernel_map: bool = True
    include_memcpy_in_busy: bool = False
    categories_file: Optional[str] = None
    step_marker: Optional[str] = None
    window: Optional[Tuple[int, int]] = None
    window_nvtx: Optional[str] = None
    step_range: Optional[str] = None
    categories: Optional[CategoryRules] = None
    reader: str = "auto"


OPTION_NAMES: Tuple[str, ...] = tuple(f.name for f in fields(Options))

@dataclass(frozen=True)
class Flag:
    """The command-line flag of one analysis option: ``option`` is the :class:`Options` field it sets;
    ``kind`` ``value`` (a string the option's validator parses), ``int`` / ``float`` (parsed by argparse),
    ``on`` (a switch that sets the option) or ``off`` (a switch that clears it)."""

    option: str
    flags: Tuple[str, ...]
    help: str
    metavar: Optional[str] = None
    kind: str = "value"
    choices: Optional[Tuple[str, ...]] = None

    @property
    def dest(self) -> str:
        """The ``argparse.Namespace`` attribute (the first flag's name)."""
        return self.flags[0].lstrip("-").replace("-", "_")


#: every analysis option's flag: one table that builds the main command's and compare's parsers (demo takes
#: ``--top`` only) and names the flags in error messages
FLAGS: Tuple[Flag, ...] = (
    Flag("phase_map", ("--phase-map", "--phases-json"),
         'JSON {"phase": ["substring", ...]} mapping NVTX range names to phases', "FILE"),
    Flag("nvtx_coverage_warn_threshold", ("--nvtx-coverage-warn-threshold",),
         "warn when NVTX→kernel attribution covers less than this fraction of kernel time (default 0.7)", "F",
         "float"),
    Flag("nvtx_kernel_map", ("--no-nvtx-kernel-map",), "skip NVTX→kernel attribution", kind="off"),
    Flag("top", ("--top",), "rows in top tables (default 20)", "N", "int"),
    Flag("include_memcpy_in_busy", ("--include-memcpy-in-busy",),
         "count memcpy/memset as GPU busy in the idle analysis", kind="on"),
    Flag("categories_file", ("--categories",), "kernel category rules (JSON or YAML) extending the presets", "FILE"),
    Flag("step_marker", ("--step-marker",), "kernel-name regex marking the end of a decode step", "REGEX"),
    Flag("step_range", ("--step-range",), "NVTX range name that delimits one step", "NVTX_NAME"),
    Flag("window", ("--window",), "analyze only this time window (steady state)", "START_NS:END_NS"),
    Flag("window_nvtx", ("--window-nvtx",), "steady-state window = span of this NVTX range", "RANGE_NAME"),
    Flag("reader", ("--reader",), "how big tables are read: auto (the columnar ADBC driver when installed), adbc or "
         "sqlite3 (the standard library); the numbers do not depend on it", choices=READERS),
)
FLAG_OF: Dict[str, Flag] = {f.option: f for f in FLAGS}

#: command-line flag of each option (error messages of :func:`options_from_args`)
CLI_FLAGS: Dict[str, str] = {**{f.option: f.flags[0] for f in FLAGS}, "categories": "--categories"}


def add_option_flags(p: argparse.ArgumentParser, only: Optional[Tuple[str, ...]] = None) -> None:
    """Add the flags of :data:`FLAGS` (or of the options ``only``) to ``p``, defaults as :class:`Options`."""
    d = Options()
    for f in FLAGS:
        if only is not None and f.option not in only:
            continue
        if f.kind in ("on", "off"):
            p.add_argument(*f.flags, dest=f.dest, action="store_true", help=f.help)
            continue
        kw: Dict[str, Any] = {"dest": f.dest, "help": f.help}
        if f.kind in ("int", "float"):
            kw.update(type=int if f.kind == "int" else float, default=getattr(d, f.option))
        if f.choices is not None:
            kw.update(choices=f.choices, default=getattr(d, f.option))
        else:
            kw["metavar"] = f.metavar
        p.add_argument(*f.flags, **kw)


# ------------------------------------------------------------------------------------------- validators
def _is_path(v: Any) -> bool:
    return isinstance(v, (str, os.PathLike))


def _top(v: Any, label: str) -> int:
    if isinstance(v, bool) or not isinstance(v, numbers.Integral):
        raise InputError(f"{label} must be an integer, got {v!r}")
    if v < 1:
        raise InputError(f"{label} must be at least 1 (got {v})")
    return int(v)


def _fraction(v: Any, label: str) -> float:
    if isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(float(v)) \
            or not 0.0 <= float(v) <= 1.0:
        raise InputError(f"{label} must be a number between 0 and 1 (got {v!r})")
    return float(v)


def _flag(v: Any, label: str) -> bool:
    if not isinstance(v, bool):
        raise InputError(f"{label} must be True or False, got {v!r}")
    return v


def _text(v: Any, label: str) -> Optional[str]:
    """A string option; None or "" → None."""
    if v is None:
        return None
    if not isinstance(v, str):
        raise InputError(f"{label} must be a string, got {type(v).__name__}")
    return v or None


def _regex(v: Any, label: str) -> Optional[str]:
    text = _text(v, label)
    if text is not None:
        try:
            re.compile(text, re.IGNORECASE)
        except re.error as exc:
            raise InputError(f"{label} is not a valid regular expression: {exc}") from None
    return text


def _phase_map(v: Any, label: str) -> Optional[PhaseMap]:
    if v is None or isinstance(v, PhaseMap):
        return v
    if _is_path(v):
        if not str(v):
            return None
        path = v
        v = read_phase_map_file(path, label)
        label = f"{label} {path}"
    elif not isinstance(v, Mapping):
        raise InputError(f"{label} must be a JSON file path or a mapping {PHASE_MAP_FORMAT}, "
                         f"got {type(v).__name__}")
    return build_phase_map(v, label) if v else None   # empty map: the presets


def _window(v: Any, label: str) -> Optional[Tuple[int, int]]:
    if v is None or (isinstance(v, str) and not v):
        return None
    return check_window(v, label)


def _window_nvtx(v: Any, label: str) -> Optional[str]:
    if v is not None and v == "":
        raise InputError(f"{label} must be a non-empty NVTX range name")
    return _text(v, label)


def _reader(v: Any, label: str) -> str:
    if v is None:
        return "auto"
    if not isinstance(v, str) or v.lower() not in READERS:
        raise InputError(f"{label} must be one of {', '.join(READERS)}, got {v!r}")
    return v.lower()


def _categories(rules: Any, path: Any, label: str, file_label: str) -> Tuple[Optional[CategoryRules],
                                                                               Optional[str]]:
    """(parsed rules, rules file path) from ``categories`` (rules or a path) and ``categories_file``."""
    if path is not None and not _is_path(path):
        raise InputError(f"{file_label} must be a file path, got {type(path).__name__}")
    path = str(path) if path is not None and str(path) else None
    if rules is None:
        return (load_rules(None, path, flag=file_label), path) if path else (None, None)
    if path is not None:
        raise InputError(f"give either {label} or {file_label}, not both")
    if isinstance(rules, CategoryRules):
        return rules, rules.source
    if _is_path(rules):
        p = str(rules)
        return (load_rules(None, p, flag=label), p) if p else (None, None)
    raise InputError(f"{label} must be a rules file path or parsed CategoryRules, got {type(rules).__name__}")


_SIMPLE: Dict[str, Callable[[Any, str], Any]] = {
    "top": _top, "phase_map": _phase_map, "nvtx_coverage_warn_threshold": _fraction, "nvtx_kernel_map": _flag,
    "include_memcpy_in_busy": _flag, "step_marker": _regex, "window": _window, "window_nvtx": _window_nvtx,
    "step_range": _text, "reader": _reader,
}


def _build(values: Mapping[str, Any], labels: Mapping[str, str]) -> Options:
    out: Dict[str, Any] = {}
    for name, check in _SIMPLE.items():
        if name in values:
            out[name] = check(values[name], labels[name])
    out["categories"], out["categories_file"] = _categories(
        values.get("categories"), values.get("categories_file"), labels["categories"], labels["categories_file"])
    return Options(**out)


# ------------------------------------------------------------------------------------------- entry points
def options_from_kwargs(**kw: Any) -> Options:
    """Validate keyword options (names of :class:`Options`; omitted ones take their defaults).

    Values may be given unparsed: ``phase_map`` as a JSON file path or a ``{"phase": [...]}`` mapping,
    ``categories`` / ``categories_file`` as a rules file path (``categories`` also as parsed rules),
    ``window`` as ``"START_NS:END_NS"`` or a ``(start, end)`` pair. Raises :class:`InputError` naming the
    option for an unknown name or a bad value."""
    unknown = sorted(set(kw) - set(OPTION_NAMES))
    if unknown:
        raise InputError(f"unknown option{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))} "
                         f"(known: {', '.join(OPTION_NAMES)})")
    return _build(kw, {n: n for n in OPTION_NAMES})


def options_from_args(ns: argparse.Namespace) -> Options:
    """Options from the command line's parsed arguments (attributes a parser lacks take their defaults);
    messages name the command-line flags (``--top must be at least 1``)."""
    d = Options()
    values: Dict[str, Any] = {}
    for f in FLAGS:
        values[f.option] = (not getattr(ns, f.dest, False)) if f.kind == "off" else \
            getattr(ns, f.dest, getattr(d, f.option))
    return _build(values, CLI_FLAGS)
