"""Run the whole flow: read → model → analyses → findings, into a :class:`report.Report`. Rendering happens in
:mod:`render`.

Options are the typed :class:`options.Options` (``options_from_kwargs`` for the Python API).

:func:`analyze_path` returns a typed :class:`Report`; ``report.to_dict()`` is ``report.json``. Every part of
it is immutable; ``display_path`` names the trace in the report when it differs from the file read (the
``.nsys-rep`` a SQLite export was made from, the demo's copy).
"""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional, Tuple

from . import __version__
from .analyses.api.cuda_api import CudaApiResult, analyze_cuda_api, cuda_api_of
from .analyses.api.sync import SyncResult, analyze_sync, sync_of
from .analyses.kernels.summary import analyze_kernels
from .analyses.memory.memcpy import analyze_memcpy
from .analyses.nvtx.attribution import AttributionResult, analyze_attribution
from .analyses.nvtx.ranges import analyze_nvtx
from .analyses.trace.info import analyze_trace_info
from .diagnose import run_diagnosis
from .findings.run import collect_warnings, run_findings
from .model.build import build_model
from .model.trace import TraceModel
from .options import Options
from .read.columnar import resolve_reader
from .read.connection import open_readonly
from .read.schema import probe
from .report import Report

Progress = Callable[[str], None]


def _noop(_: str) -> None:
    return None


def load_model(path: str, progress: Progress = _noop, reader: str = "auto",
               on_api: Optional[Callable[[Any], None]] = None) -> TraceModel:
    """Read and normalize the trace at ``path`` (``reader``: see ``Options.reader``; ``on_api``: see
    :func:`model.build.build_model`)."""
    conn = open_readonly(path, resolve_reader(reader))
    try:
        schema = probe(conn, str(path))
        progress("reading tables")
        return build_model(conn, schema, str(path), on_api)
    finally:
        conn.close()


@dataclass(frozen=True)
class ApiResults:
    """The CUDA API and sync sections, computed from the API table alone while the kernel table was still being
    read (:func:`analyze_path`), and the seconds that took; equal to what :func:`analyze_model` computes."""

    cuda_api: CudaApiResult
    sync: SyncResult
    seconds: float


def analyze_model(model: TraceModel, options: Optional[Options] = None, progress: Progress = _noop,
                  display_path: Optional[str] = None, api_results: Optional[ApiResults] = None) -> Report:
    """The report of a built model; ``api_results``: the CUDA API and sync sections when already computed."""
    opts = options if options is not None else Options()
    timings: Dict[str, float] = {}

    def step(name: str, fn: Callable[..., Any], *a: Any, **kw: Any) -> Any:
        progress(name)
        t = time.perf_counter()
        out = fn(*a, **kw)
        timings[name] = round(time.perf_counter() - t, 4)
        return out

    trace = step("trace info", analyze_trace_info, model, display_path)
    # one extra thread (2 cores busy): independent analyses run beside the main line; numpy releases the GIL
    with ThreadPoolExecutor(1) if (os.cpu_count() or 1) > 1 else nullcontext() as pool:

        def timed(name: str, fn: Callable[..., Any], *a: Any) -> Any:
            t = time.perf_counter()
            out = fn(*a)
            timings[name] = round(time.perf_counter() - t, 4)
            return out

        def basics() -> Tuple[Any, ...]:
            cuda = api_results.cuda_api if api_results is not None else timed("cuda api", analyze_cuda_api, model)
            return timed("kernels", analyze_kernels, model), cuda

        side = pool.submit(basics) if pool is not None else None
        nvtx = step("nvtx", analyze_nvtx, model)
        if opts.nvtx_kernel_map:
            att = step("nvtx attribution", analyze_attribution, model, nvtx.tree)
        else:
            att = AttributionResult(False, "disabled with --no-nvtx-kernel-map")
        sync = api_results.sync if api_results is not None else step("sync", analyze_sync, model)
        memcpy = step("memcpy", analyze_memcpy, model)
        # the diagnosis does not need the kernel/API tables: their thread goes on while it starts
        diag, new_att = step("diagnosis", run_diagnosis, model, opts, nvtx.tree, att, trace.processes, pool)
        kernels, cuda_api = side.result() if side is not None else basics()
    att = new_att or att
    launch = diag.launch
    findings, head = step("findings", run_findings, diag, kernels, att, opts)
    warnings = collect_warnings(model, kernels, att, diag, opts)
    if api_results is not None:
        timings["cuda api + sync (while reading)"] = api_results.seconds
    return Report(__version__, opts, model, trace, kernels, launch, sync, cuda_api, memcpy, nvtx, att, diag,
                  findings, head, warnings, timings)


def analyze_path(path: str, options: Optional[Options] = None, progress: Progress = _noop,
                 display_path: Optional[str] = None) -> Report:
    opts = options if options is not None else Options()
    early: Dict[str, Any] = {}

    def on_api(api: Any) -> None:   # only the API table: the same results as from the finished model
        t = time.perf_counter()
        early["api"], early["results"] = api, (cuda_api_of(api), sync_of(api))
        early["s"] = round(time.perf_counter() - t, 4)

    model = load_model(path, progress, opts.reader, on_api)
    ready = ApiResults(*early["results"], early["s"]) if early and early["api"] is model.api else None
    return analyze_model(model, opts, progress, display_path, ready)
