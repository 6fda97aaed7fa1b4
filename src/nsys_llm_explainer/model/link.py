"""Join GPU rows whose process is unknown (an older kernel table without ``globalPid`` in a trace with
several processes) to their launch call on correlationId alone — only where that is unambiguous."""

from __future__ import annotations

from typing import Optional, Tuple

import numpy as np

from .trace import ApiCalls

# Name fragments of the API calls that can produce each GPU table's rows (only used to join GPU rows whose
# process is unknown — a kernel table without ``globalPid`` — on correlation id alone).
GPU_WORK_API = {
    "kernel": ("Launch",), "graph_trace": ("GraphLaunch",), "memcpy": ("Memcpy",), "memset": ("Memset",),
    "sync": ("Synchronize", "WaitEvent"),
}


def link_unknown_pid(corr: np.ndarray, api: ApiCalls, kind: Optional[str] = None) -> Tuple[np.ndarray, np.ndarray]:
    """(API row or -1, ambiguous?) for GPU rows of unknown process, joined on correlationId alone.

    Candidates are runtime/driver calls whose name can produce that GPU work (``kind`` in
    :data:`GPU_WORK_API`, e.g. launch calls for kernels; without ``kind``: any GPU work), so that only the
    processes that issued such calls matter. A row is linked when exactly one process has a candidate call
    with its correlationId; when several do, nothing is guessed: it stays -1 and is flagged ambiguous."""
    n = corr.shape[0]
    out, amb = np.full(n, -1, np.int64), np.zeros(n, bool)
    if n == 0 or len(api) == 0:
        return out, amb
    cand = api.primary & (api.corr >= 0) & (api.pid >= 0)
    words = GPU_WORK_API[kind] if kind in GPU_WORK_API else tuple(w for ws in GPU_WORK_API.values() for w in ws)
    if words:
        fits = np.array([any(w in nm for w in words) and "HostFunc" not in nm for nm in api.names] + [False])
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
                        table: str, kind: Optional[str] = None, column_missing: bool = True) -> Optional[str]:
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
