"""Matching the kernels of one NCCL collective name across ranks by time, one definition for one export (the
single-file NCCL section, :mod:`.nccl`) and for several files on aligned clocks (the cluster,
``cluster/collectives.py``): the index shift per rank that makes its kernels overlap the reference rank's, issue order
(shift 0) as the fallback (docs/FINDINGS.md "NCCL", docs/CLUSTER.md "Collectives across ranks")."""

from __future__ import annotations

from typing import List, Optional, Sequence

import numpy as np

#: ``matching`` values: by time (index shifts that make the kernels overlap), by issue order (the k-th kernel of a
#: name on every rank: clocks not aligned, or no kernel overlaps), or some names each way
MATCH_TIME, MATCH_ORDER, MATCH_MIXED = "time", "issue order", "mixed"


def best_shift(ref_start: np.ndarray, ref_end: np.ndarray, start: np.ndarray, end: np.ndarray) -> Optional[int]:
    """The index shift ``d`` pairing the reference rank's k-th kernel with another rank's (k + d)-th that most often
    overlap in time (one clock; both series in start order), or None when no kernel overlaps one of the other's.
    Each reference kernel votes for the shift of the other rank's kernel, among the two latest starting no later than
    its end, that overlaps it the longest (``min(ends) − max(starts) >= 0``); ties between shifts: the smaller
    ``|d|``, then the smaller ``d``. O((N + M) log M), no N × M comparison."""
    if ref_start.shape[0] == 0 or start.shape[0] == 0:
        return None
    hi = np.searchsorted(start, ref_end, side="right")     # kernels of the other rank starting <= each reference end
    best_i = np.full(ref_start.shape[0], -1, np.int64)
    best_ov = np.full(ref_start.shape[0], -1, np.int64)
    for back in (1, 2):
        i = hi - back
        ok = i >= 0
        ic = np.where(ok, i, 0)
        ov = np.minimum(ref_end, end[ic]) - np.maximum(ref_start, start[ic])
        better = ok & (ov >= 0) & (ov > best_ov)
        best_i, best_ov = np.where(better, i, best_i), np.where(better, ov, best_ov)
    hit = best_i >= 0
    if not hit.any():
        return None
    vals, counts = np.unique(best_i[hit] - np.flatnonzero(hit), return_counts=True)
    return int(vals[np.lexsort((vals, np.abs(vals), -counts))[0]])


def member_shifts(starts: Sequence[np.ndarray], ends: Sequence[np.ndarray]) -> Optional[List[int]]:
    """The index shift of each member rank's kernels of one name (start order, one clock) against the reference
    member — the one with the most kernels, the first such on ties — by :func:`best_shift` (0 for the reference);
    None when on some member no kernel overlaps one of the reference's (the caller falls back to issue order)."""
    lens = [s.shape[0] for s in starts]
    ref = lens.index(max(lens))
    found = [0 if j == ref else best_shift(starts[ref], ends[ref], starts[j], ends[j]) for j in range(len(starts))]
    return None if any(d is None for d in found) else [int(d or 0) for d in found]


def overall_matching(methods: Sequence[str]) -> Optional[str]:
    """The matching of a whole result from its names' (those on >= 2 ranks): None when there is none, the one
    method when all agree, else :data:`MATCH_MIXED`."""
    return None if not methods else methods[0] if len(set(methods)) == 1 else MATCH_MIXED
