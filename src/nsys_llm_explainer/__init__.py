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

from typing import Any, Optional, Sequence, Union

__version__ = "0.3.0"


def analyze(path: str, **options: Any):
    """Analyze a ``.sqlite`` export and return the typed :class:`report.Report` (no files written).

    ``options`` are the command-line options by their long names with underscores: ``top``, ``phase_map``,
    ``nvtx_coverage_warn_threshold``, ``nvtx_kernel_map``, ``include_memcpy_in_busy``, ``categories_file``,
    ``step_marker``, ``window`` (``(start_ns, end_ns)``), ``window_nvtx``, ``step_range``, ``reader``
    (``auto`` | ``adbc`` | ``sqlite3``: how big tables are fetched; same numbers). Unknown names or bad
    values raise :class:`errors.InputError`.
    """
    from .options import options_from_kwargs
    from .pipeline import analyze_path

    return analyze_path(str(path), options_from_kwargs(**options))


def render_markdown(report: Union[Any, dict]) -> str:
    """``report.md`` text for a :class:`report.Report` (or its ``to_dict()``)."""
    from .render import render_markdown as _md

    return _md(report if isinstance(report, dict) else report.to_dict())


def compare(paths: Sequence[str], labels: Optional[Sequence[str]] = None, **options: Any):
    """Analyze ``.sqlite`` exports and compare them: ``paths[0]`` is BASE, each later one a NEW compared against
    it. Returns the typed :class:`comparison.CompareResult` (``to_dict()`` is ``compare.json``); writes no files.

    ``labels`` name the traces (default: file names); ``options`` are :func:`analyze`'s, applied to every trace.
    Bad paths, labels or options raise :class:`errors.InputError`. The headline metric, its noise and the
    "too short" / "too different" rules are in docs/COMPARE.md.
    """
    from .comparison import compare_paths
    from .options import options_from_kwargs
    from .pipeline import analyze_path

    opts = options_from_kwargs(**options)
    result, _ = compare_paths([str(p) for p in paths], labels, lambda p: analyze_path(p, opts))
    return result


def analyze_cluster(paths: Union[str, Sequence[str]], jobs: Optional[int] = None, scheduler: Optional[str] = None,
                    **options: Any):
    """Analyze several exports (files, directories or globs; e.g. one per rank) and return the typed
    :class:`cluster.ClusterResult` (``to_dict()`` is ``cluster.json``); writes no files.

    Each file is analysed on its own (``options`` as in :func:`analyze`, applied to every file) by a local process
    pool of ``jobs`` workers (default min(files, CPUs)), or on the Dask cluster at ``scheduler`` (``"local"``: a
    ``LocalCluster``; needs ``pip install 'nsys-llm-explainer[dask]'``). Definitions: docs/CLUSTER.md.
    """
    from .cluster import analyze_many
    from .options import options_from_kwargs

    items = [str(paths)] if isinstance(paths, (str, bytes)) or hasattr(paths, "__fspath__") else [str(p) for p in paths]
    return analyze_many(items, options_from_kwargs(**options), jobs, scheduler)


__all__ = ["__version__", "analyze", "analyze_cluster", "compare", "render_markdown"]
