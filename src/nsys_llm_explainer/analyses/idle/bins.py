"""The analysis window of each device cut into equal integer-edged bins for the timeline charts: per bin its busy ns,
copy-engine busy ns and idle ns per idle-cause kind (busy + Σ idle = bin width exactly: cut at the edges, never
sampled). Definitions: docs/MODEL.md, report.json ``timeline``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Tuple

import numpy as np

from ...jsonable import FieldsJson
from ...model import intervals as iv
from ...model.timeline import DeviceTimeline
from ...model.trace import TraceModel
from ...vocabulary.cause_kinds import KINDS

DEFAULT_BINS = 500
#: bins of all devices together at most (then at least MIN_BINS each): 500 per device up to 64 devices
TOTAL_BINS = 32_000
MIN_BINS = 8


def bins_for(n_devices: int, n_bins: int = DEFAULT_BINS) -> int:
    """Bins per device for a trace with ``n_devices`` devices: ``min(n_bins, max(MIN_BINS, TOTAL_BINS // n))``."""
    return min(n_bins, max(MIN_BINS, TOTAL_BINS // max(int(n_devices), 1)))


def device_count(model: TraceModel, include_memcpy: bool) -> int:
    """Distinct device ids of the activity the timelines are built from (kernels, graph executions, copies)."""
    parts = [model.kernels.device] if model.kernels is not None else []
    ops = [model.graph_trace] + ([model.memcpy, model.memset] if include_memcpy else [])
    parts += [np.asarray(o.device) for o in ops if o is not None and len(o)]
    return int(np.unique(np.concatenate([np.asarray(p, np.int64) for p in parts])).shape[0]) if parts else 0


@dataclass(frozen=True)
class DeviceBins(FieldsJson):
    device_id: int
    start_ns: int
    end_ns: int
    edges_ns: Tuple[int, ...]
    busy_ns: Tuple[int, ...]
    copy_ns: Tuple[int, ...]
    idle_ns_by_kind: Dict[str, Tuple[int, ...]]     # only kinds with any ns


def _per_bin(u: iv.IntervalUnion, edges: np.ndarray) -> Tuple[int, ...]:
    return tuple(np.diff(iv.covered_before(u, edges)).tolist())


def bin_edges(tl: DeviceTimeline, n_bins: int = DEFAULT_BINS) -> np.ndarray:
    """The ``N + 1`` edges ``w0 + (i · W) // N`` of a device's bins, exact for any window up to 2^62 ns."""
    n = int(max(1, min(n_bins, tl.window_ns)))
    w = int(tl.window_ns)
    i = np.arange(n + 1, dtype=np.int64)   # i·W // n = i·(W // n) + i·(W % n) // n: no product reaches 2^63
    return tl.w0 + i * (w // n) + (i * (w % n)) // n


def device_bins(tl: DeviceTimeline, t0: np.ndarray, ln: np.ndarray, kind: np.ndarray,
                n_bins: int = DEFAULT_BINS) -> DeviceBins:
    """Bins of one device from its timeline and the idle pieces ``[t0, t0 + ln)`` in time order (``t0``
    ascending) with their kind codes (indices into :data:`KINDS`; the pieces never overlap)."""
    edges = bin_edges(tl, n_bins)
    return DeviceBins(tl.device_id, tl.w0, tl.w1, tuple(edges.tolist()), _per_bin(tl.busy, edges),
                      _per_bin(tl.copies, edges), _idle_by_kind(edges, t0, ln, kind))


def _idle_by_kind(edges: np.ndarray, t0: np.ndarray, ln: np.ndarray, kind: np.ndarray) -> Dict[str, Tuple[int, ...]]:
    """Idle ns per kind and bin: each piece is first counted whole in the bin where it starts, then the part
    of each piece past an edge it straddles is moved to the next bin (edge by edge, so a piece spanning
    several bins ends up split exactly)."""
    nb, nk = edges.shape[0] - 1, len(KINDS)
    if t0.shape[0] == 0:
        return {}
    # the edges increase and hold every piece: the window lies in [0, 2^62] ns (model/row_checks.py, MAX_TS)
    cell = np.searchsorted(edges, t0, side="right") - 1           # bin of each piece's start
    cell *= nk
    cell += kind
    acc = np.zeros(nb * nk, np.int64)                              # integer sums: exact for any ns
    np.add.at(acc, cell, ln)
    acc = acc.reshape(nb, nk)
    del cell
    inner = edges[1:-1]
    p = np.searchsorted(t0, inner, side="right") - 1               # the piece starting last at/before the edge
    pc = np.maximum(p, 0)
    past = t0[pc] + ln[pc] - inner                                 # its ns past the edge
    cross = np.nonzero((p >= 0) & (t0[pc] < inner) & (past > 0))[0]
    k = kind[pc[cross]].astype(np.int64)
    np.add.at(acc, (cross, k), -past[cross])                       # edge ``inner[j]`` closes bin j
    np.add.at(acc, (cross + 1, k), past[cross])
    present = np.nonzero(np.bincount(kind, minlength=nk))[0]
    return {KINDS[int(k)]: tuple(acc[:, k].tolist()) for k in present.tolist()}
