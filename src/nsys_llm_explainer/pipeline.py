"""Run the whole flow: read → model → analyses → findings, into a :class:`report.Report`. Rendering happens in
:mod:`render`.

Options are the typed :class:`options.Options` (``options_from_kwargs`` for the Python API).

:func:`analyze_path` returns a typed :class:`Report`; ``report.to_dict()`` is ``report.json``. Every part of
it is immutable; ``display_path`` names the trace in the report when it differs from the file read (the
``.nsys-rep`` a SQLite export was made from, the demo's copy).
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import fields
from pathlib import Path
from typing import Any, Dict, Optional

from . import __version__
from .graph import STEPS
from .model.build import build_model
from .model.trace import TraceModel
from .options import Options
from .read.columnar import resolve_reader
from .read.connection import open_readonly
from .read.nsys_export import export_report, is_report
from .read.schema import probe
from .report import Report
from .runner import Progress, run_graph
from .serialize import NOT_CARRIED

#: the analysis graph's values that are not :class:`Report` fields (intermediate values)
_NOT_IN_REPORT = ("tool_version", "timings_s")
#: what only a comparison reads (a second idle attribution over whole step periods): made when ``compare`` is True
COMPARE_ONLY = ("period_parts",)


def _noop(_: str) -> None:
    return None


def default_workers() -> int:
    """Threads the analysis graph runs on by default: 2 when the machine has more than one core, else 1."""
    return 2 if (os.cpu_count() or 1) > 1 else 1


def load_model(path: str, progress: Progress = _noop, reader: str = "auto", workers: Optional[int] = None
               ) -> TraceModel:
    """Read and normalize the trace at ``path`` (``reader``: see ``Options.reader``; ``workers``: threads, default
    :func:`default_workers`)."""
    conn = open_readonly(path, resolve_reader(reader))
    try:
        schema = probe(conn, str(path))
        progress("reading tables")
        return build_model(conn, schema, str(path), workers or default_workers())
    finally:
        conn.close()


def analyze_model(model: TraceModel, options: Optional[Options] = None, progress: Progress = _noop,
                  display_path: Optional[str] = None, workers: Optional[int] = None, extras: bool = True,
                  compare: bool = False) -> Report:
    """The report of a built model: the analysis graph (:data:`graph.STEPS`) run on ``workers`` threads
    (default :func:`default_workers`; 1 runs every step in order on this thread). ``extras`` False: what only a
    comparison or a cluster reads (:data:`serialize.NOT_CARRIED`: not in report.json) is left None and its steps
    do not run; ``compare`` False: neither does what only a comparison reads (:data:`COMPARE_ONLY`)."""
    opts = options if options is not None else Options()
    given: Dict[str, Any] = {"model": model, "options": opts, "display_path": display_path}
    keep = [f.name for f in fields(Report) if f.name not in _NOT_IN_REPORT and (extras or f.name not in NOT_CARRIED)
            and (compare or f.name not in COMPARE_ONLY)]
    values, timings = run_graph(STEPS, given, keep, workers or default_workers(), progress)
    values.update((name, None) for name in NOT_CARRIED if name not in values)
    return Report(tool_version=__version__, timings_s=timings, **values)


def analyze_path(path: str, options: Optional[Options] = None, progress: Progress = _noop,
                 display_path: Optional[str] = None, workers: Optional[int] = None, extras: bool = True,
                 compare: bool = False) -> Report:
    """The report of the trace at ``path`` (see :func:`analyze_model`; ``workers=1``: no second thread at all,
    neither while reading nor in the analysis graph)."""
    opts = options if options is not None else Options()
    return analyze_model(load_model(path, progress, opts.reader, workers), opts, progress, display_path, workers,
                         extras, compare)


def analyze_any(path: str, options: Optional[Options] = None, progress: Progress = _noop,
                display_path: Optional[str] = None, workers: Optional[int] = None, extras: bool = True,
                compare: bool = False) -> Report:
    """:func:`analyze_path` of an SQLite export, or of an Nsight Systems report (``.nsys-rep``/``.qdrep``) exported
    first with ``nsys`` into a temporary directory that is removed afterwards (:class:`errors.InputError`, one line,
    when ``nsys`` is missing or fails). The report names ``display_path``, else the file the user gave — never a
    temporary export. The one place a report file is exported before it is analysed (command line, compare,
    cluster workers)."""
    src = Path(path)
    if not is_report(src):
        return analyze_path(path, options, progress, display_path, workers, extras, compare)
    with tempfile.TemporaryDirectory(prefix="nsys-llm-explain-export-") as td:
        progress(f"exporting {src.name} to SQLite with nsys")
        exported = export_report(src, Path(td))
        return analyze_path(str(exported), options, progress, display_path or path, workers, extras, compare)
