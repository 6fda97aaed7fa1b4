"""Run the per-file analyses of a cluster (inline, a local process pool, or Dask: :mod:`.workers`) and build the
cluster result. Inputs, labels and schedulers: docs/CLUSTER.md."""

from __future__ import annotations

import glob
import os
import re
import stat
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..errors import CWD_GONE, InputError, cwd_gone
from ..options import Options, check_option
from ..paths import check_name, shown, stat_or_none
from .result import ClusterResult, build_result
from .summary import FileSummary, analyze_file
from .workers import run_dask, run_pool

TRACE_SUFFIXES = (".sqlite", ".nsys-rep", ".qdrep")
GLOB_CHARS = re.compile(r"[*?\[]")


def _natural(p: str) -> Tuple[Any, ...]:
    return tuple(int(t) if t.isdigit() else t for t in re.split(r"(\d+)", p))


def expand_inputs(items: Sequence[str]) -> List[str]:
    """Files, directories and globs → trace files, in natural order. Raises InputError when none, and for a
    file name that is not valid UTF-8 (:func:`paths.check_name`)."""
    out: List[str] = []
    for it in items:
        p = Path(it)
        st = stat_or_none(it)
        if st is not None and stat.S_ISDIR(st.st_mode):
            try:
                found = [str(x) for x in p.iterdir() if x.is_file() and x.suffix.lower() in TRACE_SUFFIXES]
            except OSError as exc:
                raise InputError(f"cannot list the directory {shown(it)}: {exc.strerror or exc}") from None
            if not found:
                raise InputError(f"directory {it} holds no .sqlite / .nsys-rep file")
            out += sorted(found, key=_natural)
        elif st is not None:
            out.append(str(p))
        elif GLOB_CHARS.search(it):
            found = [x for x in glob.glob(it) if Path(x).is_file()]
            if not found:
                raise InputError(f"no file matches {it!r}")
            out += sorted(found, key=_natural)
        else:
            raise InputError(f"{it} does not exist" + (f": {CWD_GONE}" if cwd_gone(it) else ""))
    first: Dict[str, str] = {}   # each file once (its real path), named as first given
    for x in out:
        first.setdefault(os.path.realpath(check_name(x)), x)
    uniq = list(first.values())
    if not uniq:
        raise InputError("no trace given: name files, directories or glob patterns")
    return uniq


#: longest label kept (characters; ``ranks/<label>/`` must stay a valid file name with a ``_N`` suffix)
LABEL_MAX = 120


def make_labels(paths: Sequence[str]) -> List[str]:
    """One unique label per file (``ranks/<label>/``): the file stem, made unique as docs/CLUSTER.md says."""
    stems = [Path(p).stem for p in paths]
    labels = [s if stems.count(s) == 1 else f"{Path(p).parent.name}_{s}" for p, s in zip(paths, stems)]
    clean = [(re.sub(r"[^A-Za-z0-9._-]+", "_", lab).strip("._") or "trace")[:LABEL_MAX] for lab in labels]
    out: List[str] = []
    taken: set = set()
    for lab in clean:
        cand, n = lab, 1
        while cand.casefold() in taken:
            n += 1
            cand = f"{lab}_{n}"
        taken.add(cand.casefold())
        out.append(cand)
    return out


def run_files(paths: Sequence[str], labels: Sequence[str], options: Optional[Options], jobs: Optional[int],
              scheduler: Optional[str], rank_root: Optional[str] = None) -> List[FileSummary]:
    """Per-file summaries in input order; with ``rank_root``, each file's report goes to ``rank_root/<label>``.
    Faults (a lost worker, an unresponsive scheduler) and interrupts end as :mod:`.workers` says."""
    n = len(paths)
    jobs = max(1, min(n, jobs if jobs else (os.cpu_count() or 1)))
    dirs = [os.path.abspath(Path(rank_root) / lab) if rank_root else None for lab in labels]
    # absolute here, up front: a worker process may start elsewhere (workers.spawnable_cwd); a relative path with
    # the working directory deleted never gets here (expand_inputs refuses it: paths.check_name)
    args = list(zip([os.path.abspath(p) for p in paths], labels, [options] * n, dirs, range(n)))
    if scheduler:
        return run_dask(args, jobs, scheduler)
    if jobs == 1:
        return [analyze_file(*a) for a in args]
    return run_pool(args, jobs)


def analyze_many(items: Sequence[str], options: Optional[Options] = None, jobs: Optional[int] = None,
                 scheduler: Optional[str] = None, rank_root: Optional[str] = None) -> ClusterResult:
    jobs = check_option("jobs", jobs)
    paths = expand_inputs(items)
    return build_result(run_files(paths, make_labels(paths), options, jobs, scheduler, rank_root))
