"""Join GPU rows to the API call that issued them: same process and correlationId (:func:`link_to_api`), or —
for GPU rows whose process is unknown (an older kernel table without ``globalPid`` in a trace with several
processes) — on correlationId alone, only where that is unambiguous (:func:`link_unknown_pid`)."""

from __future__ import annotations

from typing import Optional, Tuple

import numpy as np

from .timeline import run_starts
from .trace import ApiCalls

# Name fragments of the API calls that can produce each GPU table's rows (only used to join GPU rows whose
# process is unknown — a kernel table without ``globalPid`` — on correlation id alone).
GPU_WORK_API = {
    "kernel": ("Launch",), "graph_trace": ("GraphLaunch",), "memcpy": ("Memcpy",), "memset": ("Memset",),
    "sync": ("Synchronize", "WaitEvent"),
}


def link_unknown_pid(corr: np.ndarray, api: ApiCalls, kind: str) -> Tuple[np.ndarray, np.ndarray]:
    """(API row or -1, ambiguous?) for GPU rows of unknown process, joined on correlationId alone among the calls
    that can produce that GPU work (``kind`` in :data:`GPU_WORK_API`); the rule: docs/METRICS.md, "Launch link"."""
    n = corr.shape[0]
    out, amb = np.full(n, -1, np.int64), np.zeros(n, bool)
    if n == 0 or len(api) == 0:
        return out, amb
    cand = api.primary & (api.corr >= 0) & (api.pid >= 0)
    fits = np.array([any(w in nm for w in GPU_WORK_API[kind]) and "HostFunc" not in nm for nm in api.names] + [False])
    cand &= fits[api.name_idx]
    rows = np.nonzero(cand)[0]
    if rows.shape[0] == 0:
        return out, amb
    c = api.corr[rows].astype(np.int64)
    o = np.lexsort((api.pid[rows], c))
    rows, c = rows[o], c[o]
    p = api.pid[rows].astype(np.int64)
    lo, hi = np.searchsorted(c, corr, "left"), np.searchsorted(c, corr, "right")
    found = hi > lo
    first, last = np.minimum(lo, rows.shape[0] - 1), np.maximum(hi - 1, 0)
    one_pid = found & (p[first] == p[last])      # sorted by pid within a corr: first == last ⇔ one process
    out[one_pid] = rows[first[one_pid]]
    amb[found & ~one_pid] = True
    return out, amb


def unknown_pid_message(pid: np.ndarray, corr: np.ndarray, launch_idx: np.ndarray, api: Optional[ApiCalls],
                        table: str, kind: str, column_missing: bool) -> Optional[str]:
    """One warning line for GPU rows of unknown process (no ``globalPid``): how many were linked to their
    call on correlationId alone and how many were left unlinked because several processes used the id."""
    unknown = pid < 0
    if api is None or not unknown.any():
        return None
    linked = int((launch_idx[unknown] >= 0).sum())
    amb = int(link_unknown_pid(corr[unknown], api, kind)[1].sum())
    why = ("has no globalPid column and the trace has several processes" if column_missing else
           f"has {int(unknown.sum())} row(s) whose globalPid is NULL (process unknown; rows kept)")
    msg = (f"{table} {why}: {linked} of {int(unknown.sum())} row(s) were linked to their launch call on "
           "correlationId alone (one process used that id)")
    if amb:
        msg += (f"; {amb} row(s) stay unattributed because several processes used the same correlationId "
                "(not guessed)")
    return msg + "."


def pid_from_launch(pid: np.ndarray, launch_idx: np.ndarray, api: Optional[ApiCalls]) -> np.ndarray:
    """``pid`` with unknown entries (-1) taken from the linked launch call's process."""
    if api is None or not (pid < 0).any():
        return pid
    fill = (pid < 0) & (launch_idx >= 0)
    return np.where(fill, api.pid[np.maximum(launch_idx, 0)], pid) if len(api) else pid


def corr_key(pid: np.ndarray, corr: np.ndarray) -> np.ndarray:
    """Combined (process, correlationId) key; correlation ids restart in every process."""
    return (pid.astype(np.int64) << 32) | (corr.astype(np.int64) & 0xFFFFFFFF)


#: a direct table is used when it has at most this many cells per API row, or at most MIN_DENSE_CELLS cells
#: (else a sorted index)
DENSE_CELLS_PER_ROW = 4
MIN_DENSE_CELLS = 1 << 16


class ApiIndex:
    """(pid, correlationId) → API row, built once for every GPU table's launch join. Among rows sharing a
    key the runtime/driver row wins over wrapper event classes, then the earliest row.

    A direct table (one cell per process × correlationId in the API's range) when that is small — no sort,
    O(1) per lookup; else the rows sorted by key, looked up by binary search. Same answers either way."""

    def __init__(self, api: Optional[ApiCalls]) -> None:
        self.order = np.empty(0, np.int64)
        self.keys = np.empty(0, np.int64)
        self.table: Optional[np.ndarray] = None
        if api is None or len(api) == 0:
            return
        valid = (api.corr >= 0) & (api.pid >= 0)
        if self._dense(api, valid):
            return
        akey = corr_key(api.pid, api.corr)
        order = np.lexsort((~api.primary, akey))
        self.order = order[valid[order]]
        self.keys = akey[self.order]

    def _dense(self, api: ApiCalls, valid: np.ndarray) -> bool:
        rows = np.flatnonzero(valid)
        if rows.shape[0] == 0:
            return False
        pid, corr = api.pid[rows].astype(np.int64), api.corr[rows].astype(np.int64)
        self.pids = np.unique(pid[:: max(1, pid.shape[0] // 4096)])
        at = np.minimum(np.searchsorted(self.pids, pid), self.pids.shape[0] - 1)
        if int(corr.max()) > 0xFFFFFFFF or bool((self.pids[at] != pid).any()):
            return False                      # a process the sample missed, or ids beyond 32 bits: sorted index
        self.c0 = int(corr.min())
        self.span = int(corr.max()) - self.c0 + 1
        if self.pids.shape[0] * self.span > max(DENSE_CELLS_PER_ROW * rows.shape[0], MIN_DENSE_CELLS):
            return False
        code = at * self.span + (corr - self.c0)
        del pid, corr, at
        table = np.full(self.pids.shape[0] * self.span, -1, np.int64)
        counts = np.bincount(code, minlength=table.shape[0])
        single = counts[code] == 1
        table[code[single]] = rows[single]           # keys with one row: no ambiguity
        dup = np.flatnonzero(~single)
        if dup.shape[0]:                             # shared keys: the primary row first, then the earliest
            dr, dc = rows[dup], code[dup]
            o = np.lexsort((dr, ~api.primary[dr], dc))
            first = o[run_starts(dc[o])]
            table[dc[first]] = dr[first]
        self.table = table
        return True

    def lookup(self, pid: np.ndarray, corr: np.ndarray) -> np.ndarray:
        """API row of each (pid, corr) pair (-1: no such call, or pid / corr negative)."""
        out = np.full(pid.shape[0], -1, np.int64)
        if self.table is not None:
            c = np.asarray(corr, np.int64) & 0xFFFFFFFF
            p = np.asarray(pid, np.int64)
            p0, p1 = int(self.pids[0]), int(self.pids[-1])
            if p1 - p0 < 1 << 16:                    # process → its block of the table by a small lookup table
                pcode = np.full(p1 - p0 + 1, -1, np.int64)
                pcode[self.pids - p0] = np.arange(self.pids.shape[0])
                inr = (p >= p0) & (p <= p1)
                at = np.where(inr, pcode[np.clip(p - p0, 0, p1 - p0)], -1)
                ok = at >= 0
            else:
                at = np.minimum(np.searchsorted(self.pids, p), self.pids.shape[0] - 1)
                ok = self.pids[at] == p
            ok &= (corr >= 0) & (c >= self.c0) & (c < self.c0 + self.span)
            cell = at[ok] * self.span + (c[ok] - self.c0)
            out[ok] = self.table[cell]
            return out
        skey, order = self.keys, self.order
        if skey.shape[0] == 0:
            return out
        gkey = corr_key(pid, corr)
        pos = np.searchsorted(skey, gkey)
        pos_c = np.minimum(pos, skey.shape[0] - 1)
        ok = (pos < skey.shape[0]) & (corr >= 0) & (pid >= 0) & (skey[pos_c] == gkey)
        out[ok] = order[pos_c[ok]]
        return out


def link_to_api(pid: np.ndarray, corr: np.ndarray, api: Optional[ApiCalls], index: ApiIndex, kind: str) -> np.ndarray:
    """Row of the API call that launched each GPU row (module docstring), or -1."""
    if api is None or len(api) == 0 or pid.shape[0] == 0:
        return np.full(pid.shape[0], -1, np.int64)
    out = index.lookup(pid, corr)
    unknown = (pid < 0) & (corr >= 0)
    if unknown.any():
        out[unknown] = link_unknown_pid(corr[unknown], api, kind)[0]
    return out
