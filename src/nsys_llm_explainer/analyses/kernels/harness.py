"""Harness kernels: the kernels of the analysis window that an event-timed thread launched outside every one of its
``cudaEventRecord`` pairs — a benchmark harness's own work (``triton.testing.do_bench``'s L2-flush ``cache.zero_()``
between the timed repetitions, warm-up runs, set-up), not what the program measures; and the window's kernel traits
and top kernel without them, which the kernel-speed findings quote. Definitions: docs/FINDINGS.md, "Harness kernels".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional, Tuple

import numpy as np

from ...model.timeline import rows_by_value
from ...model.trace import ApiCalls, TraceModel
from ..api.classes import name_set_mask
from .summary import TopKernel
from .traits import KernelTraitsResult, analyze_kernel_traits

#: an event-timed thread reads the elapsed time of at least this share of its record pairs (the step-sync series'
#: EVENT_TIMED_SHARE: nearly every timed repetition is read) ...
READ_SHARE = 0.8
#: ... of at least this many pairs (the step-sync series' MIN_SYNC_POINTS: fewer are no repeated measurement)
MIN_PAIRS = 5
_RECORD = {"cudaEventRecord", "cudaEventRecordWithFlags", "cuEventRecord", "cuEventRecordWithFlags"}
_ELAPSED = {"cudaEventElapsedTime", "cuEventElapsedTime"}


@dataclass(frozen=True)
class HarnessKernels:
    """The harness kernels of the window (module docstring): ``threads`` the event-timed threads (serialized
    globalTid), ``kernel_count`` / ``kernel_ns`` the kernels they launched outside every record pair and their summed
    duration; ``timed_traits`` the window's kernel traits over the other kernels and ``top_kernel`` the largest of
    them by summed duration, of ``timed_kernel_ns`` in all (None / 0 when there is no harness kernel: the window's own
    traits and top kernel stand); ``names`` the kernel names with a harness kernel among their instances (sorted),
    which compare leaves out of its anchor kernel (docs/COMPARE.md, "The headline metric")."""

    threads: Tuple[int, ...] = ()
    kernel_count: int = 0
    kernel_ns: int = 0
    timed_traits: Optional[KernelTraitsResult] = None
    top_kernel: Optional[TopKernel] = None
    timed_kernel_ns: int = 0
    names: Tuple[str, ...] = ()


def event_timed_threads(api: ApiCalls) -> Dict[int, np.ndarray]:
    """Per event-timed thread (serialized globalTid), the start times of its ``cudaEventRecord`` calls in time order:
    the thread records ≥ :data:`MIN_PAIRS` pairs (consecutive records 2k, 2k+1) and calls ``cudaEventElapsedTime``
    at least :data:`READ_SHARE` × its pairs and at most once per pair (more reads than pairs: its events are chained
    or shared, and consecutive records are no start/end pair)."""
    if len(api) == 0:
        return {}
    rec = np.flatnonzero(name_set_mask(api.names, api.name_idx, _RECORD) & api.primary)
    el = np.flatnonzero(name_set_mask(api.names, api.name_idx, _ELAPSED) & api.primary)
    if rec.shape[0] < 2 * MIN_PAIRS or el.shape[0] == 0:
        return {}
    reads = dict(zip(*[a.tolist() for a in np.unique(api.gtid[el], return_counts=True)]))
    out: Dict[int, np.ndarray] = {}
    for g, r in rows_by_value(api.gtid[rec]):
        pairs = r.shape[0] // 2
        n = reads.get(int(g), 0)
        if pairs >= MIN_PAIRS and READ_SHARE * pairs <= n <= pairs:
            out[int(g)] = np.sort(api.start[rec[r]])
    return out


def harness_kernels(model: TraceModel, steady: TraceModel) -> HarnessKernels:
    """The harness kernels of the window's kernels (``steady``), the threads and their record calls taken from the
    whole capture (``model``: a pair opened before the window still brackets a kernel in it)."""
    api, sa, sk = model.api, steady.api, steady.kernels
    if api is None or sa is None or sk is None or len(sk) == 0:
        return HarnessKernels()
    timed = event_timed_threads(api)
    if not timed:
        return HarnessKernels()
    li = np.asarray(sk.launch_idx, np.int64)
    harness = np.zeros(len(sk), bool)
    linked = np.flatnonzero(li >= 0)
    if linked.shape[0]:
        gt, ls = sa.gtid[li[linked]], sa.start[li[linked]]
        for g, rs in timed.items():
            m = np.flatnonzero(gt == g)
            # records before the launch: even → between pairs (or before the first / after the last)
            harness[linked[m]] = np.searchsorted(rs, ls[m], side="right") % 2 == 0
    n = int(harness.sum())
    if n == 0:
        return HarnessKernels(tuple(sorted(timed)))
    dur = np.asarray(sk.dur, np.int64)
    keep = ~harness
    all_ni = np.asarray(sk.name_idx, np.int64)
    names = tuple(sorted({str(sk.names[i] or "") for i in np.unique(all_ni[harness]).tolist()}))
    ni, d = all_ni[keep], dur[keep]
    traits = analyze_kernel_traits(sk.names, ni, d)
    top: Optional[TopKernel] = None
    if d.shape[0]:
        tot = np.bincount(ni, weights=d, minlength=len(sk.names)).round().astype(np.int64)
        cnt = np.bincount(ni, minlength=len(sk.names))
        cand = np.flatnonzero(cnt > 0)
        i = min(cand.tolist(), key=lambda j: (-int(tot[j]), -int(cnt[j]), str(sk.names[j] or "")))
        top = TopKernel(str(sk.names[i] or ""), int(cnt[i]), int(tot[i]))
    return HarnessKernels(tuple(sorted(timed)), n, int(dur[harness].sum()), traits, top, int(d.sum()), names)


__all__ = ["HarnessKernels", "event_timed_threads", "harness_kernels"]
