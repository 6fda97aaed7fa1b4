"""nsys-llm-explainer: exact, actionable reports from Nsight Systems SQLite exports of LLM workloads.

Public API (writes no files)::

    import nsys_llm_explainer as nle
    rep = nle.analyze("trace.sqlite", top=20)     # typed Report
    rep.headline.verdict, rep.findings[0].title, rep.gpu_time.devices[0].busy_pct
    data = rep.to_dict()                          # the report.json dict
    md = nle.render_markdown(rep)                 # the report.md text
    cmp = nle.compare(["base.sqlite", "new.sqlite"])  # typed CompareResult; cmp.to_dict() is compare.json
    df = rep.to_frame("kernels")                  # a pandas DataFrame (pip install nsys-llm-explainer[pandas])
    cl = nle.analyze_cluster(["rank0.sqlite", "rank1.sqlite"])  # typed ClusterResult; cl.to_dict() is cluster.json
"""

from __future__ import annotations

import functools
import os

from .errors import ExplainerError, InputError, OptionError

TYPE_CHECKING = False   # typing is not imported at run time: the command line loads this first (__main__)
if TYPE_CHECKING:
    from typing import Any, Callable, List, Optional, Sequence, TypeVar, Union

    F = TypeVar("F", bound=Callable[..., Any])

    from .cluster import ClusterResult
    from .comparison import CompareResult
    from .report import Report

__version__ = "0.3.0"


def _one_line(fn: F) -> F:
    """The API's errors are one inert line, as the command line's are: a path, label or value quoted in a
    message has its line breaks as spaces and its control / bidi characters as visible escapes
    (:func:`render.escape.visible`), so ``str(exc)`` can be logged or shown as it is."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except ExplainerError as exc:
            from .render.escape import visible

            if isinstance(exc, OptionError):   # worded from its parts (name, detail): the detail only
                if exc.detail:
                    exc.detail = " ".join(visible(exc.detail).split())
                    exc.args = (exc.option, exc.detail, exc.sep)
            elif len(exc.args) == 1 and isinstance(exc.args[0], str):
                exc.args = (" ".join(visible(exc.args[0]).split()),)
            raise

    return wrapper  # type: ignore[return-value]


@_one_line
def analyze(path: str, workers: Optional[int] = None, **options: Any) -> Report:
    """Analyze a ``.sqlite`` export and return the typed :class:`report.Report` (no files written).

    ``workers``: threads for the read and the analysis graph (default 2 on a multi-core machine; ``1`` runs
    every step in order on the calling thread, for debugging); the report is the same either way.

    ``options`` are the fields of :class:`options.Options` (the option table: each is the command-line option
    of the same name with underscores, ``top``, ``step_marker``, ``window=(start_ns, end_ns)``, …; defaults and
    meanings in ``help(nsys_llm_explainer.options.Options)`` or ``nsys-llm-explain --help``). An unknown name
    raises :class:`errors.InputError` listing the known ones; a bad value raises :class:`errors.OptionError`
    (an ``InputError``) whose message and ``option`` name the keyword (``step_marker is not a valid regular
    expression: …``), also when the trace shows it (``window_nvtx 'x': no NVTX range has exactly this name``).
    ``path`` is a ``str``, ``bytes`` or ``os.PathLike``; any other type raises :class:`errors.InputError` naming
    ``path``.
    """
    from .options import check_workers, options_from_kwargs
    from .paths import check_name, path_arg
    from .pipeline import analyze_path

    p = check_name(path_arg(path, "path"))
    return analyze_path(p, options_from_kwargs(**options), workers=check_workers(workers, "workers"))


def _path_list(paths: Any, name: str, single_ok: bool) -> List[str]:
    """``paths`` (a sequence of paths; with ``single_ok`` also one path) as text; :class:`InputError` naming
    ``name`` (or ``name[i]``) for a wrong type."""
    from collections.abc import Iterable

    from .paths import path_arg

    if isinstance(paths, (str, bytes, os.PathLike)):
        if single_ok:
            return [path_arg(paths, name)]
        raise InputError(f"{name} must be a list of trace paths (BASE first, then each NEW), got the "
                         f"{type(paths).__name__} {paths!r}; e.g. compare([BASE, NEW])")
    if not isinstance(paths, Iterable) or isinstance(paths, dict):
        raise InputError(f"{name} must be a list of trace paths, got {type(paths).__name__}")
    return [path_arg(p, f"{name}[{i}]") for i, p in enumerate(paths)]


@_one_line
def render_markdown(report: Union[Any, dict]) -> str:
    """``report.md`` text for a :class:`report.Report` (or its ``to_dict()``); :class:`errors.InputError` naming
    ``report`` for anything else, and naming the key for a dict that is not a report (checked as
    :meth:`report.Report.from_dict` does: shapes, and numbers a result can hold)."""
    from .render import render_markdown as _md
    from .report import Report

    if isinstance(report, dict):
        report = Report.from_dict(report, where="report")
    if not isinstance(report, Report):
        raise InputError(f"report must be a Report or its to_dict() dict, got {type(report).__name__}")
    return _md(report)


@_one_line
def compare(paths: Sequence[str], labels: Optional[Sequence[str]] = None, **options: Any) -> CompareResult:
    """Analyze ``.sqlite`` exports and compare them: ``paths[0]`` is BASE, each later one a NEW compared against
    it. Returns the typed :class:`comparison.CompareResult` (``to_dict()`` is ``compare.json``); writes no files.

    ``labels`` name the traces (default: file names); ``options`` are :func:`analyze`'s, applied to every trace.
    Bad paths, labels or options raise :class:`errors.InputError` (:class:`errors.OptionError` naming the keyword).
    The headline metric, its noise and the "too short" / "too different" rules are in docs/COMPARE.md.
    """
    from .comparison import compare_paths
    from .options import check_option, options_from_kwargs
    from .pipeline import analyze_path

    items = _path_list(paths, "paths", single_ok=False)
    opts = options_from_kwargs(**options)
    names = check_option("labels", labels)
    return compare_paths(items, names, lambda p: analyze_path(p, opts, compare=True))


@_one_line
def analyze_cluster(paths: Union[str, Sequence[str]], jobs: Optional[int] = None, scheduler: Optional[str] = None,
                    **options: Any) -> ClusterResult:
    """Analyze several exports (files, directories or globs; e.g. one per rank) and return the typed
    :class:`cluster.ClusterResult` (``to_dict()`` is ``cluster.json``); writes no files.

    Each file is analysed on its own (``options`` as in :func:`analyze`, applied to every file) by a local process
    pool of ``jobs`` workers (default min(files, CPUs)), or on the Dask cluster at ``scheduler`` (``"local"``: a
    ``LocalCluster``; needs ``pip install 'nsys-llm-explainer[dask]'``). Definitions: docs/CLUSTER.md. ``jobs``
    that is not an integer ≥ 1 raises :class:`errors.OptionError`; ``paths`` empty or of a wrong type, or a
    ``scheduler`` that is not a string, :class:`errors.InputError` naming it. A lost worker or scheduler raises
    :class:`errors.WorkerError` naming the files not analysed (timeouts: :mod:`cluster.workers`).
    """
    from .cluster import analyze_many
    from .options import options_from_kwargs

    items = _path_list(paths, "paths", single_ok=True)
    if not items:
        raise InputError("paths is empty: give at least one trace file, directory or glob pattern")
    if scheduler is not None and not isinstance(scheduler, str):
        raise InputError(f"scheduler must be an address string (or 'local'), got {type(scheduler).__name__}")
    return analyze_many(items, options_from_kwargs(**options), jobs, scheduler or None)   # jobs: checked there


__all__ = ["InputError", "OptionError", "__version__", "analyze", "analyze_cluster", "compare", "render_markdown"]
