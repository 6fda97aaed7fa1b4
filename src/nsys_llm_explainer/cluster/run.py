"""Run the per-file analyses (inline, a local process pool, or a Dask cluster) and build the cluster result.

* inputs: files, directories (their ``*.sqlite`` / ``*.nsys-rep`` files) and glob patterns, expanded in a
  natural order (``rank2`` before ``rank10``); labels are file stems, made unique with the parent folder.
* ``scheduler=None``: a local ``ProcessPoolExecutor`` of ``jobs`` workers (default min(files, CPUs); ``jobs=1``
  runs inline). Each worker analyses one file at a time and returns a compact :class:`summary.FileSummary`,
  so memory is bounded by ``jobs`` single-file analyses.
* ``scheduler="ADDRESS"``: ``dask.distributed.Client(ADDRESS)``; ``scheduler="local"``: a ``LocalCluster`` of
  ``jobs`` single-threaded workers. Dask is an optional extra (``pip install 'nsys-llm-explainer[dask]'``).
"""

from __future__ import annotations

import glob
import os
import re
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..errors import InputError, OptionalDependencyError
from ..options import Options, check_option
from .result import ClusterResult, build_result
from .summary import FileSummary, analyze_file

TRACE_SUFFIXES = (".sqlite", ".nsys-rep", ".qdrep")
GLOB_CHARS = re.compile(r"[*?\[]")


def _natural(p: str) -> Tuple[Any, ...]:
    return tuple(int(t) if t.isdigit() else t for t in re.split(r"(\d+)", p))


def expand_inputs(items: Sequence[str]) -> List[str]:
    """Files, directories and globs → trace files (see module docstring). Raises InputError when none."""
    out: List[str] = []
    for it in items:
        p = Path(it)
        if p.is_dir():
            found = [str(x) for x in p.iterdir() if x.is_file() and x.suffix.lower() in TRACE_SUFFIXES]
            if not found:
                raise InputError(f"directory {it} holds no .sqlite / .nsys-rep file")
            out += sorted(found, key=_natural)
        elif p.exists():
            out.append(str(p))
        elif GLOB_CHARS.search(it):
            found = [x for x in glob.glob(it) if Path(x).is_file()]
            if not found:
                raise InputError(f"no file matches {it!r}")
            out += sorted(found, key=_natural)
        else:
            raise InputError(f"{it} does not exist")
    seen, uniq = set(), []
    for x in out:
        k = os.path.realpath(x)
        if k not in seen:
            seen.add(k)
            uniq.append(x)
    return uniq


def make_labels(paths: Sequence[str]) -> List[str]:
    stems = [Path(p).stem for p in paths]
    labels = [s if stems.count(s) == 1 else f"{Path(p).parent.name}_{s}" for p, s in zip(paths, stems)]
    out: List[str] = []
    seen: Dict[str, int] = {}
    for lab in labels:
        lab = re.sub(r"[^A-Za-z0-9._-]+", "_", lab).strip("._") or "trace"
        n = seen.get(lab, 0)
        seen[lab] = n + 1
        out.append(lab if n == 0 else f"{lab}_{n + 1}")
    return out


def _dask_client(scheduler: str, jobs: int) -> Tuple[Any, Any]:
    """(a ``dask.distributed.Client``, the ``LocalCluster`` it runs on or None)."""
    try:
        from dask.distributed import Client, LocalCluster
    except ImportError:
        raise OptionalDependencyError("scheduler needs Dask: pip install 'nsys-llm-explainer[dask]'") from None
    if scheduler == "local":
        cluster = LocalCluster(n_workers=jobs, threads_per_worker=1, processes=True, dashboard_address=None)
        return Client(cluster), cluster
    try:
        return Client(scheduler, timeout="10s"), None
    except (OSError, TimeoutError, ValueError) as exc:
        raise InputError(f"cannot connect to the Dask scheduler {scheduler}: {exc}") from None


def run_files(paths: Sequence[str], labels: Sequence[str], options: Optional[Options], jobs: Optional[int],
              scheduler: Optional[str], rank_root: Optional[str] = None) -> List[FileSummary]:
    """Per-file summaries in input order; with ``rank_root``, each file's report goes to ``rank_root/<label>``."""
    n = len(paths)
    jobs = max(1, min(n, jobs if jobs else (os.cpu_count() or 1)))
    dirs = [str(Path(rank_root) / lab) if rank_root else None for lab in labels]
    args = list(zip(paths, labels, [options] * n, dirs))
    if scheduler:
        client, cluster = _dask_client(scheduler, jobs)
        try:
            futs = [client.submit(analyze_file, *a, pure=False) for a in args]
            return list(client.gather(futs))
        finally:
            client.close()
            if cluster is not None:
                cluster.close()
    if jobs == 1:
        return [analyze_file(*a) for a in args]
    import multiprocessing as mp

    kw: dict = {"max_workers": jobs, "mp_context": mp.get_context("spawn")}
    with ProcessPoolExecutor(**kw) as ex:
        futs = [ex.submit(analyze_file, *a) for a in args]
        return [f.result() for f in futs]


def analyze_many(items: Sequence[str], options: Optional[Options] = None, jobs: Optional[int] = None,
                 scheduler: Optional[str] = None, rank_root: Optional[str] = None) -> ClusterResult:
    jobs = check_option("jobs", jobs)
    paths = expand_inputs(items)
    return build_result(run_files(paths, make_labels(paths), options, jobs, scheduler, rank_root))
