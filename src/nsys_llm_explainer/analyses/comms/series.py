"""The NCCL kernel instances of a trace per (pid, device, collective name), in issue (start) order on the export
timeline: what a cluster matches across files (:mod:`cluster.collectives`, docs/CLUSTER.md). A kernel is NCCL
when its name matches :data:`.nccl.NCCL_RE`; its collective name is :func:`.nccl.collective_name`. Not in
``report.json``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Tuple

import numpy as np

from ...model.trace import TraceModel
from .nccl import nccl_collectives


@dataclass(frozen=True)
class NcclSeries:
    """NCCL kernels of one collective name on one (pid, device), in issue (start) order; export timeline."""

    pid: int
    device_id: int
    name: str
    start: np.ndarray     # int64 ns, export timeline
    end: np.ndarray       # int64 ns
    stream: np.ndarray    # int64 CUDA stream id


def nccl_series(model: TraceModel) -> Tuple[NcclSeries, ...]:
    """The series of ``model``, ordered by (pid, device, name); () when it has no NCCL kernel."""
    k = model.kernels
    if k is None or len(k) == 0:
        return ()
    nm, cc, cnames = nccl_collectives(k)
    rows = np.nonzero(nm)[0]
    if rows.shape[0] == 0:
        return ()
    pid, dev = k.pid[rows].astype(np.int64), k.device[rows].astype(np.int64)
    order = np.lexsort((k.end[rows], k.start[rows], cc, dev, pid))   # groups by (pid, device, name); issue order
    ix, pid, dev, cc = rows[order], pid[order], dev[order], cc[order]
    start, end = k.start[ix].astype(np.int64), k.end[ix].astype(np.int64)
    stream = np.asarray(k.stream[ix], np.int64)
    cut = np.nonzero((np.diff(pid) != 0) | (np.diff(dev) != 0) | (np.diff(cc) != 0))[0] + 1
    bounds = [0] + cut.tolist() + [ix.shape[0]]
    out = [NcclSeries(int(pid[a]), int(dev[a]), cnames[int(cc[a])], start[a:b], end[a:b], stream[a:b])
           for a, b in zip(bounds[:-1], bounds[1:])]   # one per (pid, device, name): Python work per group only
    out.sort(key=lambda x: (x.pid, x.device_id, x.name))
    return tuple(out)
