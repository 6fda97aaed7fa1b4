"""A host thread's time cut once into pieces with their idle-cause kind and detail (its *partition*), and exact sums of
it over many intervals without cutting again: what charges a device's host-side gap parts when many devices are fed
by one thread (docs/PERFORMANCE.md, "Many device ids, many NVTX domains").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Tuple

import numpy as np

from ...model.timeline import rows_by_value, run_starts
from .pieces import index_runs

#: an interval covering more pieces than this many times the thread's distinct causes uses the prefix sums
SCAN_FACTOR = 1
#: the prefix sums are used for a call's long intervals only when they cover at least this many pieces per distinct
#: cause of the thread (a Python-level pass per cause costs about as much as scanning a few hundred pieces)
PREFIX_MIN_PIECES_PER_CODE = 256


@dataclass
class Partition:
    """Pieces ``[start[i], end[i])`` of one thread's time (sorted, disjoint), each with an integer ``code`` (the
    caller's: a kind, or kind and detail). Prefix sums per code are built on first use."""

    start: np.ndarray
    end: np.ndarray
    code: np.ndarray
    _prefix: Dict[int, Tuple[np.ndarray, np.ndarray]] = field(default_factory=dict, repr=False)

    def prefix(self) -> Dict[int, Tuple[np.ndarray, np.ndarray]]:
        """Code → (its pieces' indices, cumulative length before each of them and after the last)."""
        if not self._prefix and self.code.shape[0]:
            ln = self.end - self.start
            for c, pos in rows_by_value(self.code):
                self._prefix[c] = (pos, np.concatenate(([0], np.cumsum(ln[pos]))))
        return self._prefix


def interval_sums(p: Partition, a: np.ndarray, b: np.ndarray) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per interval ``[a[i], b[i])`` (sorted, disjoint, inside the partition's span) and code: the ns of the
    partition's pieces of that code inside it, as ``(interval, code, ns)`` with ns > 0, ordered by interval then
    code."""
    e = np.empty(0, np.int64)
    if a.shape[0] == 0 or p.start.shape[0] == 0:
        return e, e, e
    i0 = np.searchsorted(p.end, a, side="right")        # first piece ending after a
    i1 = np.searchsorted(p.start, b, side="left")       # pieces starting before b
    n = np.maximum(i1 - i0, 0)
    n_codes = len(p.prefix()) if int(n.max(initial=0)) > SCAN_FACTOR else 0
    big = n > SCAN_FACTOR * max(n_codes, 1) if n_codes else np.zeros(a.shape[0], bool)
    if n_codes and int(n[big].sum()) < PREFIX_MIN_PIECES_PER_CODE * n_codes:
        big[:] = False               # one pass per code would cost more than scanning these pieces

    parts = []
    small = np.flatnonzero(~big & (n > 0))
    if small.shape[0]:                                   # scan: every covered piece, clipped
        idx = index_runs(i0[small], n[small])
        which = np.repeat(small, n[small])
        ns = np.minimum(p.end[idx], b[which]) - np.maximum(p.start[idx], a[which])
        parts.append((which, p.code[idx].astype(np.int64), ns))
    sel = np.flatnonzero(big)
    if sel.shape[0]:                                     # prefix sums per code, then the two clipped ends
        lo, hi = i0[sel], i1[sel]
        for c, (pos, cum) in p.prefix().items():
            ns = cum[np.searchsorted(pos, hi)] - cum[np.searchsorted(pos, lo)]
            hit = np.flatnonzero(ns)
            if hit.shape[0]:
                parts.append((sel[hit], np.full(hit.shape[0], c, np.int64), ns[hit]))
        first_cut = a[sel] - p.start[lo]                 # > 0: the first piece starts before a
        last_cut = p.end[hi - 1] - b[sel]                # > 0: the last piece ends after b
        parts.append((sel, p.code[lo].astype(np.int64), -np.maximum(first_cut, 0)))
        parts.append((sel, p.code[hi - 1].astype(np.int64), -np.maximum(last_cut, 0)))
    if not parts:
        return e, e, e
    which = np.concatenate([x[0] for x in parts]).astype(np.int64)
    code = np.concatenate([x[1] for x in parts])
    ns = np.concatenate([x[2] for x in parts]).astype(np.int64)
    order = np.lexsort((code, which))
    which, code, ns = which[order], code[order], ns[order]
    new = run_starts(which, code)
    tot = np.add.reduceat(ns, new)
    keep = tot > 0
    return which[new][keep], code[new][keep], tot[keep]
