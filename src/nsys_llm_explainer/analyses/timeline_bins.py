"""The analysis window of each device cut into equal bins, for timeline charts (docs/MODEL.md).

Bin ``i`` of a device covers ``[edges_ns[i], edges_ns[i+1])`` with ``edges_ns[i] = start + (i · W) // N``
(``W`` = window length, ``N`` = bins; integer edges, so the bins tile the window exactly). Per bin:
``busy_ns`` = busy time inside it (the timeline's busy union), ``copy_ns`` = copy-engine busy time inside it,
``idle_ns_by_kind[kind]`` = idle ns inside it charged to that idle-cause kind. Per bin
``busy_ns + Σ idle_ns_by_kind = bin width`` exactly: the series are the timeline and the idle causes cut
at the bin edges, never sampled.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Tuple

import numpy as np

from ..model import intervals as iv
from ..model.timeline import DeviceTimeline
from .idle_cause_result import KINDS

DEFAULT_BINS = 500


@dataclass(frozen=True)
class DeviceBins:
    device_id: int
    start_ns: int
    end_ns: int
    edges_ns: Tuple[int, ...]
    busy_ns: Tuple[int, ...]
    copy_ns: Tuple[int, ...]
    idle_ns_by_kind: Dict[str, Tuple[int, ...]]     # only kinds with any ns

    def to_dict(self) -> Dict[str, object]:
        return {"device_id": self.device_id, "start_ns": self.start_ns, "end_ns": self.end_ns,
                "edges_ns": list(self.edges_ns), "busy_ns": list(self.busy_ns), "copy_ns": list(self.copy_ns),
                "idle_ns_by_kind": {k: list(v) for k, v in self.idle_ns_by_kind.items()}}


def _per_bin(u: iv.Union, edges: np.ndarray) -> Tuple[int, ...]:
    return tuple(int(x) for x in np.diff(iv.covered_before(u, edges)))


def device_bins(tl: DeviceTimeline, t0: np.ndarray, ln: np.ndarray, kind: np.ndarray,
                n_bins: int = DEFAULT_BINS) -> DeviceBins:
    """Bins of one device from its timeline and the idle pieces ``[t0, t0 + ln)`` with their kind codes
    (indices into :data:`KINDS`; the pieces of one kind never overlap)."""
    n = int(max(1, min(n_bins, tl.window_ns)))
    edges = tl.w0 + (np.arange(n + 1, dtype=np.int64) * tl.window_ns) // n
    by_kind: Dict[str, Tuple[int, ...]] = {}
    for k in np.unique(kind).tolist():
        m = kind == k
        order = np.argsort(t0[m], kind="stable")
        s = t0[m][order]
        by_kind[KINDS[int(k)]] = _per_bin(iv.union_lean(s, s + ln[m][order]), edges)
    return DeviceBins(tl.device_id, tl.w0, tl.w1, tuple(int(e) for e in edges), _per_bin(tl.busy, edges),
                      _per_bin(tl.copies, edges), by_kind)
