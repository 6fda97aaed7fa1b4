"""The communication kernel instances of a trace per (pid, device, collective name), in issue (start) order on the
export timeline: what a cluster matches across files (:mod:`cluster.collectives`, docs/CLUSTER.md). A kernel is
NCCL when its name matches :data:`.nccl.NCCL_RE`, a custom collective when it is not NCCL and its category is
``custom_allreduce`` or ``all_to_all`` (:data:`.exposure.COMM_CATEGORIES`: vLLM's ``cross_device_reduce``,
TensorRT-LLM's one- / two-shot, Lamport kernels; DeepEP's dispatch / combine); its collective name is
:func:`.nccl.collective_name` (a custom kernel's whole name).
Not in ``report.json``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Tuple

import numpy as np

from ...model.trace import TraceModel
from ..kernels.categories import CategoryResult
from .arrival import idle_since_previous
from .exposure import COMM_CATEGORIES
from .nccl import NCCL_RE, nccl_collectives

#: the communication categories other than NCCL's whose kernels are matched across ranks like NCCL's (the one list
#: of communication categories is :data:`.exposure.COMM_CATEGORIES`)
CUSTOM_CATEGORIES = tuple(c for c in COMM_CATEGORIES if c != "nccl")


@dataclass(frozen=True)
class NcclSeries:
    """Communication kernels of one collective name on one (pid, device), in issue (start) order; export timeline."""

    pid: int
    device_id: int
    name: str
    start: np.ndarray     # int64 ns, export timeline
    end: np.ndarray       # int64 ns
    stream: np.ndarray    # int64 CUDA stream id
    #: int64 ns: per kernel, its device's idle time since the end of the series' previous kernel
    #: (:func:`.arrival.idle_since_previous`; −1 for the first)
    idle_since: np.ndarray
    custom: bool = False  # a custom collective kernel's series (not NCCL)


def nccl_series(model: TraceModel, categories: CategoryResult) -> Tuple[NcclSeries, ...]:
    """The series of ``model``, ordered by (pid, device, name); () when it has no communication kernel.
    ``categories``: the trace's kernel categories (``name_category`` indexing ``model.kernels.names``)."""
    k = model.kernels
    if k is None or len(k) == 0:
        return ()
    nc = categories.name_category
    codes = [i for i, c in enumerate(categories.categories) if c in CUSTOM_CATEGORIES]
    custom = np.isin(nc, codes) if categories.available and nc is not None and nc.shape[0] == len(k.names) \
        and codes else None
    nm, cc, cnames = nccl_collectives(k, custom)
    is_custom = np.array([not NCCL_RE.search(n) for n in cnames], bool)
    rows = np.nonzero(nm)[0]
    if rows.shape[0] == 0:
        return ()
    pid, dev = k.pid[rows].astype(np.int64), k.device[rows].astype(np.int64)
    order = np.lexsort((k.end[rows], k.start[rows], cc, dev, pid))   # groups by (pid, device, name); issue order
    ix, pid, dev, cc = rows[order], pid[order], dev[order], cc[order]
    start, end = k.start[ix].astype(np.int64), k.end[ix].astype(np.int64)
    stream = np.asarray(k.stream[ix], np.int64)
    cut = np.nonzero((np.diff(pid) != 0) | (np.diff(dev) != 0) | (np.diff(cc) != 0))[0] + 1
    series_of = np.zeros(ix.shape[0], np.int64)
    series_of[cut] = 1
    # over every kernel of the device, not only the series'
    idle = idle_since_previous(k.start, k.end, k.device, ix, np.cumsum(series_of))
    bounds = [0] + cut.tolist() + [ix.shape[0]]
    out = [NcclSeries(int(pid[a]), int(dev[a]), cnames[int(cc[a])], start[a:b], end[a:b], stream[a:b],
                      idle[a:b], bool(is_custom[int(cc[a])]))
           for a, b in zip(bounds[:-1], bounds[1:])]   # one per (pid, device, name): Python work per group only
    out.sort(key=lambda x: (x.pid, x.device_id, x.name))
    return tuple(out)
