"""The host side of the trace that every device's gaps are cut against (:mod:`.pieces`): the API rows'
cause kinds and base names, the NVTX tree, the detail strings with their codes, and per host thread its API rows
and, on the partition path, its pieces over the window (host_partition.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Dict, List, Optional, Sequence, Tuple, cast

import numpy as np

from ...model.timeline import DeviceTimeline, rows_by_value
from ...model.trace import TraceModel
from ...vocabulary.cause_kinds import KIND_CODE
from ...vocabulary.os_calls import is_wait
from ..nvtx.tree import NvtxTree
from .host_partition import Partition
from .pieces import Cover, DeviceGaps, index_runs, thread_pieces, touching

_EMPTY = np.empty(0, np.int64)
#: in a partition's (kind, detail) code: the piece lies after a drain (:meth:`HostContext.after_sync`); detail codes
#: stay below it (``DETAIL_MASK``)
AFTER_SYNC_BIT = 1 << 31
DETAIL_MASK = AFTER_SYNC_BIT - 1


@dataclass
class HostContext:
    """The host side of the trace for cutting gaps into pieces (:mod:`.pieces`), shared by every device:
    the API rows' kinds and base names, the NVTX tree, and the detail strings with their codes (registered in
    first-use order, the same on every run)."""

    model: TraceModel
    kinds: np.ndarray           # per API row: kind code (index into KINDS), -1 = not a runtime/driver row
    base_idx: np.ndarray        # per API row: index of its base name
    details: List[str]
    detail_pos: Dict[str, int]
    tree: Optional[NvtxTree]
    nvtx_names: Sequence[str]
    base_names: Sequence[str]
    by_thread: Dict[str, Dict[int, np.ndarray]] = field(default_factory=dict)   # "api"/"nvtx"/"osrt" → thread → rows
    # per API row, max(start, end) over it and all earlier rows; and the API rows with end < start
    reach: Optional[Tuple[np.ndarray, np.ndarray]] = None
    # the partition path (host_partition.py): allowed when nothing reads the pieces' places in time; taken once the
    # pieces cut so far pass ``partition_after``
    partition_ok: bool = False
    partition_after: int = 0
    pieces_cut: int = 0
    partitions: Dict[int, Tuple[Partition, Partition]] = field(default_factory=dict)
    waits: np.ndarray = field(default_factory=lambda: np.zeros(1, bool))   # per detail code so far (+1 slot): waits
    # per host thread: its blocking sync calls' ends, sorted, and per end the start of its next launch call
    # (:meth:`after_sync`)
    drains: Dict[int, Tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)

    def after_sync(self, g: int, t: np.ndarray) -> np.ndarray:
        """Per time ``t``: does it lie after a drain of thread ``g`` — at or after the return of one of its blocking
        sync calls (kind ``sync`` or ``sync_memcpy``), with none of its launch calls (``launch``, ``module_load``)
        started since that return (docs/MODEL.md, "After a drain")? False for an unknown thread (-1)."""
        api = self.model.api
        if g < 0 or api is None or len(api) == 0 or t.shape[0] == 0:
            return np.zeros(t.shape[0], bool)
        got = self.drains.get(g)
        if got is None:
            r = self.thread_rows_of("api", g)
            k = self.kinds[r]
            se = np.sort(api.end[r[(k == KIND_CODE["sync"]) | (k == KIND_CODE["sync_memcpy"])]])
            lr = r[(k == KIND_CODE["launch"]) | (k == KIND_CODE["module_load"])]
            # the first launch call of the thread starting at or after each return: API rows ascend by start, so
            # it is the thread's first launch row at or after the first row starting there
            j = np.searchsorted(lr, np.searchsorted(api.start, se, side="left"), side="left")
            nxt = np.where(j < lr.shape[0], api.start[lr[np.minimum(j, lr.shape[0] - 1)]], np.iinfo(np.int64).max) \
                if lr.shape[0] else np.full(se.shape[0], np.iinfo(np.int64).max)
            got = self.drains[g] = (se, nxt.astype(np.int64))
        se, nxt = got
        if se.shape[0] == 0:
            return np.zeros(t.shape[0], bool)
        i = np.searchsorted(se, t, side="right") - 1            # the last sync call that returned at or before t
        return (i >= 0) & (t < nxt[np.maximum(i, 0)])           # and no launch call started since (docs/MODEL.md)

    def wait_mask(self) -> np.ndarray:
        """Per detail code (and a last False slot): whether the detail names an OS call that waits; each detail is
        classified once, as it is registered (not once per device and thread)."""
        done = self.waits.shape[0] - 1
        if done != len(self.details):
            new = np.array([is_wait(s) for s in self.details[done:]], bool)
            self.waits = np.concatenate([self.waits[:-1], new, np.zeros(1, bool)])
        return self.waits

    def partition(self, g: int, w0: int, w1: int) -> Tuple[Partition, Partition]:
        """Thread ``g``'s pieces over ``[w0, w1)`` (the device pass's window), by (kind, detail) code
        (``kind << 32 | detail``, with :data:`AFTER_SYNC_BIT` set on the pieces after a drain) and by kind; cut
        once per thread, as one gap that is never queued and meets no copy."""
        got = self.partitions.get(g)
        if got is None:
            e = np.empty(0, np.int64)
            stub = SimpleNamespace(copy_start=e, copy_end=e)     # a device timeline without copies
            gaps = DeviceGaps(cast(DeviceTimeline, stub), np.array([w0], np.int64), np.array([w1], np.int64),
                              np.array([w1 + 1], np.int64), Cover(e, e), e)
            _, kind, det, ln, t0, _ = thread_pieces(self, gaps, g, np.zeros(1, np.int64))
            code = (kind.astype(np.int64) << 32) | det.astype(np.int64) | \
                np.where(self.after_sync(g, t0), AFTER_SYNC_BIT, 0)
            got = self.partitions[g] = (Partition(t0, t0 + ln, code), Partition(t0, t0 + ln, kind.astype(np.int64)))
        return got

    def detail_code(self, s: str) -> int:
        j = self.detail_pos.get(s)
        if j is None:
            j = self.detail_pos[s] = len(self.details)
            self.details.append(s)
        return j

    def api_near(self, g: int, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """API rows of thread ``g`` with a kind that touch one of the closed intervals ``[a, b]`` (sorted,
        disjoint), in start order. When the intervals are few, only the rows that can reach them are looked at
        (those between the first whose furthest end so far ≥ a and the last starting ≤ b)."""
        api = self.model.api
        if api is None or len(api) == 0:
            return np.empty(0, np.int64)
        if self.reach is None:
            reach = np.maximum(api.start, api.end)
            np.maximum.accumulate(reach, out=reach)        # furthest end so far
            self.reach = (reach, np.nonzero(api.end < api.start)[0])
        reach, backwards = self.reach
        lo = np.searchsorted(reach, a, side="left")
        hi = np.searchsorted(api.start, b, side="right")
        lo[1:] = np.maximum(lo[1:], hi[:-1])               # runs in ascending order, not overlapping
        n = np.maximum(hi - lo, 0)
        if int(n.sum()) > len(api) // 8:                   # many candidates: all the thread's rows instead
            r = self.thread_rows_of("api", g)
        else:
            cand = index_runs(lo, n)
            cand = np.union1d(cand, backwards) if backwards.shape[0] else cand
            r = cand[(api.gtid[cand] == g) & (self.kinds[cand] >= 0)]
        return r[touching(a, b, api.start[r], api.end[r])]

    def thread_rows_of(self, table: str, g: int) -> np.ndarray:
        """Rows of thread ``g`` in ``table`` (``"api"``: the API rows with a kind; ``"nvtx"``: the tree's nodes;
        ``"osrt"``: the OS runtime rows), ascending; every thread's found in one sort on first use (not one pass per
        thread and device)."""
        idx = self.by_thread.get(table)
        if idx is None and table == "api":
            api, r = self.model.api, np.flatnonzero(self.kinds >= 0)
            assert api is not None                  # asked only when the trace has API rows (api_near)
            if len(api) < 1 << 31:                  # row numbers in half the bytes
                r = r.astype(np.int32)
            idx = self.by_thread[table] = {t: r[x] for t, x in rows_by_value(np.asarray(api.gtid)[r])}
        elif idx is None:
            t = self.tree if table == "nvtx" else self.model.osrt
            idx = self.by_thread[table] = dict(rows_by_value(np.asarray(t.gtid))) if t is not None else {}
        return idx.get(g, _EMPTY)

