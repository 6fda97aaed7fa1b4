"""Every option, defined once: the table that builds the command-line parsers, checks the Python API's keywords,
holds the defaults of :class:`Options` and writes ``report.json``'s ``options`` (docs/DESIGN.md, "One definition
per vocabulary"; README "Development").
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field, fields, replace
from typing import Any, Callable, Dict, Mapping, Optional, Sequence, Tuple, TypeVar

from .config import values as v
from .config.categories import CategoryRules, load_rules
from .config.phase_map import PhaseMap
from .errors import EXIT_INCOMPARABLE, EXIT_REGRESSION, InputError, OptionConflict
from .jsonable import NOT_IN_JSON, FieldsJson
from .read.columnar import READERS

T = TypeVar("T")
#: ``check(value, name) -> parsed``; raises :class:`~nsys_llm_explainer.errors.OptionError` naming ``name``
Check = Callable[[Any, str], Any]
#: the commands that write an output: the main command (one trace, or several: a cluster), compare, demo
RUNS = ("main", "compare", "demo")
#: the commands whose parsers the table builds: those and ``schema``
COMMANDS = RUNS + ("schema",)
ANALYSIS = ("main", "compare")      # the commands that take every analysis option
KINDS = ("value", "int", "float", "on", "off")
#: ``Option.choices`` of an option whose choices the command knows (demo's scenarios: :mod:`demo_traces`)
CHOSEN_BY_COMMAND: Tuple[str, ...] = ("<given by the command>",)


@dataclass(frozen=True)
class Option:
    """One option. ``kind``: ``value`` (argparse keeps the string; ``check`` parses it), ``int`` / ``float``
    (argparse converts, ``check`` validates), ``on`` (a switch that sets the option) or ``off`` (a switch that
    clears it). ``choices``: the values allowed (:data:`CHOSEN_BY_COMMAND`: given by the command to
    :func:`add_flags`). ``help`` may use argparse's ``%(default)s`` / ``%(choices)s``; ``help_for`` replaces it
    for some commands. ``check=None``: the command checks the value itself. ``in_report``: written to
    ``report.json`` ``options`` (``Options.to_dict()``: a parsed value serialises itself)."""

    name: str
    flags: Tuple[str, ...]
    help: str
    default: Any = None
    check: Optional[Check] = None
    metavar: Optional[str] = None
    kind: str = "value"
    choices: Optional[Tuple[str, ...]] = None
    commands: Tuple[str, ...] = ANALYSIS
    required: bool = False
    help_for: Tuple[Tuple[str, Optional[str]], ...] = ()
    in_report: bool = True
    after: bool = False                 # a run option listed after the analysis options in --help

    @property
    def flag(self) -> str:
        """The flag that names the option in messages: the first long one (``--out`` of ``-o, --out``); an
        option without flags (``categories``, API only) by its name in the flag style."""
        longs = [f for f in self.flags if f.startswith("--")]
        return longs[0] if longs else "--" + self.name.replace("_", "-")

    @property
    def dest(self) -> str:
        """The ``argparse.Namespace`` attribute (argparse's own choice: the first long flag)."""
        return self.flag[2:].replace("-", "_")

    def help_in(self, command: str) -> Optional[str]:
        return dict(self.help_for).get(command, self.help)


def option(default: T, *flags: str, help: str, check: Check, metavar: Optional[str] = None, kind: str = "value",
           choices: Optional[Tuple[str, ...]] = None, commands: Tuple[str, ...] = ANALYSIS,
           in_report: bool = True) -> T:
    """An :class:`Options` field: its default, and its :class:`Option` (named after the field by :data:`OPTIONS`)."""
    spec = Option("", flags, help, default, check, metavar, kind, choices, commands, in_report=in_report)
    return field(default=default, metadata={"option": spec, **({} if in_report else NOT_IN_JSON)})


@dataclass(frozen=True)
class Options(FieldsJson):
    """Parsed analysis options, one field per option (order: ``report.json`` ``options``)."""

    top: int = option(20, "--top", help="rows in top tables (1 to 10^9; default %(default)s)", metavar="N", kind="int",
                      check=v.positive_int, commands=RUNS)
    #: user phase map (source ``"user"``); None: the presets
    phase_map: Optional[PhaseMap] = option(
        None, "--phase-map", "--phases-json", help='JSON {"phase": ["substring", ...]} mapping NVTX range names '
        "to phases", metavar="FILE", check=v.phase_map)
    nvtx_coverage_warn_threshold: float = option(
        0.7, "--nvtx-coverage-warn-threshold", help="warn when NVTX→kernel attribution covers less than this "
        "fraction of kernel time (default %(default)s)", metavar="F", kind="float", check=v.fraction)
    nvtx_kernel_map: bool = option(True, "--no-nvtx-kernel-map", help="skip NVTX→kernel attribution", kind="off",
                                   check=v.switch)
    include_memcpy_in_busy: bool = option(False, "--include-memcpy-in-busy", kind="on", check=v.switch,
                                          help="count memcpy/memset as GPU busy in the idle analysis")
    #: path of the user category rules file (None: presets only)
    categories_file: Optional[str] = option(None, "--categories", metavar="FILE", check=v.file_path,
                                            help="kernel category rules (JSON or YAML) extending the presets")
    #: kernel-name regex marking the end of a step (None: the default markers)
    step_marker: Optional[str] = option(None, "--step-marker", metavar="REGEX", check=v.regex,
                                        help="kernel-name regex marking the end of a decode step")
    #: ``(start_ns, end_ns)`` with end > start; None: the steady state is detected
    window: Optional[Tuple[int, int]] = option(None, "--window", metavar="START_NS:END_NS", check=v.window,
                                               help="analyze only this time window (steady state)")
    window_nvtx: Optional[str] = option(None, "--window-nvtx", metavar="RANGE_NAME", check=v.range_name,
                                        help="steady-state window = span of this NVTX range")
    step_range: Optional[str] = option(None, "--step-range", metavar="NVTX_NAME", check=v.text,
                                       help="NVTX range name that delimits one step")
    #: the parsed rules (preset ``auto`` plus the file's rules); the API also takes them here (or a rules file
    #: path) instead of ``categories_file``; None when no rules were given
    categories: Optional[CategoryRules] = option(None, help="", check=v.rules, commands=())
    #: trace rows the timeline file (timeline.pftrace) may hold (analyses/timeline/span.py); 0: no timeline file
    timeline_events: int = option(50_000, "--timeline-events", metavar="N", kind="int", check=v.count,
                                  commands=("main", "demo"),
                                  help="rows (kernels, copies, API calls, NVTX ranges, ...) timeline.pftrace may hold: "
                                       "the whole capture, else the steady window, else its start (default "
                                       "%(default)s; 0: no timeline file)")
    #: how big tables are fetched (:mod:`read.columnar`); the numbers do not depend on it, so report.json
    #: leaves it out
    reader: str = option("auto", "--reader", choices=READERS, check=v.one_of(READERS), in_report=False,
                         help="how big tables are read: auto (the columnar ADBC driver when installed), adbc or "
                              "sqlite3 (the standard library); the numbers do not depend on it")


#: the analysis options, from the fields of :class:`Options`
OPTIONS: Tuple[Option, ...] = tuple(replace(f.metadata["option"], name=f.name) for f in fields(Options))
OPTION_NAMES: Tuple[str, ...] = tuple(o.name for o in OPTIONS)


FORCE_HELP = ("write beside files this tool did not write in --out (they are never changed; a file of theirs at a "
              "path the tool writes, or the input, is still refused), or replace another kind of output")
_OUT = "output directory (new, empty, or holding a previous "

#: the options of a run (where the output goes, how the work is spread, how BASE and NEW are named)
RUN_OPTIONS: Tuple[Option, ...] = (
    Option("out", ("-o", "--out"), _OUT + "report)", required=True, commands=RUNS,
           help_for=(("demo", _OUT + "demo)"), ("compare", _OUT + "comparison)"))),
    Option("force", ("--force",), FORCE_HELP, False, kind="on", commands=RUNS,
           help_for=(("demo", FORCE_HELP + " (e.g. a report of a real trace)"),)),
    Option("scenario", ("--scenario",), "synthetic scenario to analyze (default: %(default)s; one of %(choices)s)",
           "demo", metavar="NAME", choices=CHOSEN_BY_COMMAND, commands=("demo",)),
    Option("labels", ("--labels",), "comma-separated names of the traces (default: file names)", check=v.names,
           metavar="A,B,...", commands=("compare",)),
    Option("fail_on_regression", ("--fail-on-regression",),   # checked by comparison.gate.check_gate
           f"exit {EXIT_REGRESSION} when a NEW trace is slower than BASE by more than PCT %% on the headline metric "
           f"(and by more than the noise); exit {EXIT_INCOMPARABLE} when a pair cannot be compared",
           metavar="PCT", commands=("compare",)),
    Option("allow_incomparable", ("--allow-incomparable",), "with --fail-on-regression: let a pair that cannot be "
           f"compared (no GPU work, too short, too different) pass as 'not gated' instead of exit {EXIT_INCOMPARABLE}",
           False, kind="on", commands=("compare",)),
    Option("jobs", ("--jobs",), "several traces: analyse N files at a time (default: min(files, CPU count))",
           check=v.workers, metavar="N", kind="int", commands=("main",), after=True),
    Option("scheduler", ("--scheduler",), "several traces: run the per-file analyses on this Dask scheduler "
           "(`local`: a LocalCluster); needs the dask extra", metavar="ADDRESS", commands=("main",), after=True),
    Option("compare_schema", ("--compare",), "print the JSON Schema of compare.json instead of report.json's", False,
           kind="on", commands=("schema",), after=True),
    Option("quiet", ("-q", "--quiet"), "no stdout summary, no progress", False, kind="on", commands=RUNS,
           help_for=(("compare", "print only the gate line(s)"), ("demo", None)), after=True),
)

#: every option, in ``--help`` order
TABLE: Tuple[Option, ...] = (tuple(o for o in RUN_OPTIONS if not o.after) + OPTIONS
                             + tuple(o for o in RUN_OPTIONS if o.after))
BY_NAME: Dict[str, Option] = {o.name: o for o in TABLE}


def flag_of(name: str) -> str:
    """How the command line names option ``name`` (``step_marker`` → ``--step-marker``)."""
    o = BY_NAME.get(name)
    return o.flag if o is not None else "--" + name.replace("_", "-")


def add_flags(p: argparse.ArgumentParser, command: str, choices: Optional[Mapping[str, Sequence[str]]] = None) -> None:
    """Add to ``p`` the flag of every option of :data:`TABLE` that ``command`` takes, defaults as the table's;
    ``choices``: those of the options whose choices the command knows (:data:`CHOSEN_BY_COMMAND`)."""
    assert command in COMMANDS, command
    for o in TABLE:
        if command not in o.commands:
            continue
        assert o.kind in KINDS, (o.name, o.kind)
        if o.kind in ("on", "off"):
            p.add_argument(*o.flags, dest=o.dest, action="store_true", help=o.help_in(command))
            continue
        kw: Dict[str, Any] = {"dest": o.dest, "help": o.help_in(command), "default": o.default, "metavar": o.metavar,
                              "required": o.required, "type": {"int": int, "float": float}.get(o.kind)}
        if o.choices == CHOSEN_BY_COMMAND:
            kw["choices"] = list((choices or {})[o.name])
        elif o.choices is not None:   # case-insensitive, as the API's check (config/values.one_of)
            kw["choices"], kw["type"] = o.choices, str.lower
        p.add_argument(*o.flags, **kw)


def check_option(name: str, value: Any) -> Any:
    """``value`` of option ``name`` checked and parsed by the table's check (unchanged when it has none)."""
    o = BY_NAME[name]
    return o.check(value, name) if o.check is not None else value


def check_workers(value: Any, name: str = "workers") -> Optional[int]:
    """A number of workers (``analyze(path, workers=N)``): an integer ≥ 1 or None; the error names ``name``
    (the package root reaches config only through this module: tests/structure)."""
    return v.workers(value, name)


def _build(given: Mapping[str, Any]) -> Options:
    out = {o.name: check_option(o.name, given[o.name]) for o in OPTIONS if o.name in given}
    # categories (rules, or a rules file path) and categories_file (a path) are one thing: the parsed rules
    rules, path = out.get("categories"), out.get("categories_file")
    if rules is not None and path is not None:
        raise OptionConflict("categories", "categories_file")
    if isinstance(rules, str):
        out["categories"], out["categories_file"] = load_rules(None, rules, option="categories"), rules
    elif rules is not None:
        out["categories_file"] = rules.source
    elif path is not None:
        out["categories"] = load_rules(None, path, option="categories_file")
    return Options(**out)


# ------------------------------------------------------------------------------------------- entry points
def options_from_kwargs(**kw: Any) -> Options:
    """Check keyword options (:data:`OPTION_NAMES`; omitted ones take their defaults), given parsed or as the
    command line gives them (a path, ``"START_NS:END_NS"``); :class:`InputError` for an unknown name (listing the
    known ones), :class:`~nsys_llm_explainer.errors.OptionError` naming the keyword for a bad value."""
    unknown = sorted(set(kw) - set(OPTION_NAMES))
    if unknown:
        raise InputError(f"unknown option{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))} "
                         f"(known: {', '.join(OPTION_NAMES)})")
    return _build(kw)


def options_from_args(ns: argparse.Namespace) -> Options:
    """Options from the command line's parsed arguments (options a parser lacks take their defaults); a bad
    value raises :class:`~nsys_llm_explainer.errors.OptionError` (the command line words it with
    :func:`flag_of`)."""
    return _build({o.name: not getattr(ns, o.dest) if o.kind == "off" else getattr(ns, o.dest)
                   for o in OPTIONS if o.flags and hasattr(ns, o.dest)})
