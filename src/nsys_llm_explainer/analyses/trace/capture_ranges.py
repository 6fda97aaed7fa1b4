"""Spans a capture did not record (``--capture-range=cudaProfilerApi`` with a second capture range in one file): what
the window rule leaves out of every window and busy/idle figure (docs/FINDINGS.md "Capture ranges")."""

from __future__ import annotations

from typing import List, Tuple

import numpy as np

from ...model.trace import NvtxRanges, TraceModel


def not_recorded(model: TraceModel, full0: int, full1: int, min_share: float) -> List[Tuple[int, int]]:
    """The spans the profiler did not record (``--capture-range=cudaProfilerApi`` with a second capture range): after
    a ``cudaProfilerStop`` / ``cuProfilerStop`` call, from the last end of the rows that start before the next
    recorded row (any CUDA row, NVTX range or OS-runtime call; an NVTX range with no end in the export ends at its
    start here) to that row's start, when longer than ``min_share`` (the window rule's ``TRIM_MIN_SHARE``) of the
    span ``[full0, full1)``; in time order."""
    api = model.api
    if api is None or len(api) == 0:
        return []
    stop = np.array([b in ("cudaProfilerStop", "cuProfilerStop") for b in api.base_names] + [False], bool)
    a = np.unique(np.asarray(api.end, np.int64)[stop[api.name_idx]])
    if a.shape[0] == 0:
        return []
    tabs = [t for t in (*model.cuda_rows, model.nvtx, model.osrt) if t is not None and len(t)]
    st = np.concatenate([np.asarray(t.start, np.int64) for t in tabs])
    o = np.argsort(st, kind="stable")
    st = st[o]
    ends = [np.asarray(np.where(t.closed, t.end, t.start) if isinstance(t, NvtxRanges) else t.end, np.int64)
            for t in tabs]
    reach = np.maximum.accumulate(np.concatenate(ends)[o])
    j = np.searchsorted(st, a, side="left")     # the first row starting at or after the stop call's end
    j = np.unique(j[(j > 0) & (j < st.shape[0])])
    c, b = reach[j - 1], st[j]
    long = b - c > min_share * (full1 - full0)
    return [(int(x), int(y)) for x, y in zip(c[long], b[long])]
