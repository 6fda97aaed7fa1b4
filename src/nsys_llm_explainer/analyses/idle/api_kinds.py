"""Which idle-cause kind each CUDA API row is charged as when it covers an idle piece on its thread (docs/MODEL.md):
by its base name (sync, synchronous copy, alloc/free, module load, launch, other), an async copy from pageable memory
as ``pageable_memcpy``, and the launch call of a process's first kernel of a name or a graph's first launch as
``module_load`` (lazy loading, graph upload) where the capture shows the process's start
(:func:`..trace.session.started_mid_run`). A call the name lists do not know (``other_api``) that a kernel or graph
launch links is a launch call; one whose name is missing from StringIds is also told by what else links it (a copy
or memset, a synchronization).
"""

from __future__ import annotations

import re
from typing import List, Tuple

import numpy as np

from ...model.names import MISSING
from ...model.timeline import PAGEABLE, few_distinct
from ...model.trace import ApiCalls, TraceModel
from ...vocabulary.cause_kinds import KIND_CODE
from ..api import classes as ac
from ..trace.session import started_mid_run

K = KIND_CODE
#: CUPTI syncType of a cudaStreamWaitEvent row (it links a call that does not block the host)
SYNC_STREAM_WAIT_EVENT = 2
_MODULE_LOAD = re.compile(r"^(cu|cuda)(Module|Library)Load")


def api_kinds(full: TraceModel, model: TraceModel) -> Tuple[np.ndarray, List[str], np.ndarray]:
    """Per API row of ``model``: kind code (int8 index into :data:`KINDS`, -1 = not a runtime/driver row),
    the base-name list and the row → base-name index. First launches are found on ``full`` (the whole
    capture) and matched to ``model``'s rows by (pid, correlation id)."""
    api = model.api
    if api is None or len(api) == 0:
        return np.empty(0, np.int8), [], np.empty(0, np.int64)
    base, uniq, name_to_base = ac.name_bases(api.names)
    per_name = np.array([_name_kind(b) for b in base] + [K["other_api"]], np.int8)
    kinds = per_name[api.name_idx]
    missing = np.array([n.startswith(MISSING) for n in api.names] + [False], bool)[api.name_idx]
    _by_links(full, api, kinds, missing)
    mc = model.memcpy
    if mc is not None and len(mc):
        is_async_copy = np.array([ac.is_async_copy(b) for b in base] + [False], bool)
        pg = (np.asarray(mc.src_kind, np.int64) == PAGEABLE) | (np.asarray(mc.dst_kind, np.int64) == PAGEABLE)
        li = np.asarray(mc.launch_idx, np.int64)[pg]
        li = li[li >= 0]
        # an async copy call by its name, or a call with a missing name left other_api (it returned before its copy)
        li = li[is_async_copy[api.name_idx[li]] | (missing[li] & (kinds[li] == K["other_api"]))]
        kinds[li] = K["pageable_memcpy"]
    first = _first_launch_keys(full)
    if first.shape[0]:
        kinds[_in(first, _pid_corr_key(api.pid, api.corr)) & (kinds == K["launch"])] = K["module_load"]
    kinds[~api.primary] = -1
    return kinds, uniq, name_to_base[api.name_idx]


def _linked(full: TraceModel, tables: Tuple[str, ...]) -> np.ndarray:
    """Per row of ``full.api``: a row of one of ``tables`` of ``full`` links it (its launch_idx; a stream-wait-event
    synchronization row does not count: cudaStreamWaitEvent does not block the host)."""
    api = full.api
    hit = np.zeros(len(api) if api is not None else 0, bool)
    for table in tables:
        t = getattr(full, table)
        if t is None or len(t) == 0 or t.launch_idx.shape[0] != len(t) or not hit.shape[0]:
            continue
        li = np.asarray(t.launch_idx, np.int64)
        keep = li >= 0
        if table == "sync":
            keep &= np.asarray(t.sync_type, np.int64) != SYNC_STREAM_WAIT_EVENT
        hit[li[keep]] = True
    return hit


def _in(keys: np.ndarray, key: np.ndarray) -> np.ndarray:
    """Per ``key``: it is one of the sorted ``keys``."""
    if keys.shape[0] == 0:
        return np.zeros(key.shape[0], bool)
    at = np.minimum(np.searchsorted(keys, key), keys.shape[0] - 1)
    return keys[at] == key


def _by_links(full: TraceModel, api: ApiCalls, kinds: np.ndarray, missing: np.ndarray) -> None:
    """In place, by what links an ``other_api`` call (module docstring): a kernel or graph launch → ``launch``; for a
    call whose name is missing (``missing``), a synchronization row (not a stream wait) → ``sync``, a copy or memset
    it waited for → ``sync_memcpy``. Links are read on the whole capture (``full``) and matched to ``api``'s rows by
    (pid, correlation id)."""
    fa = full.api
    other = kinds == K["other_api"]
    if fa is None or len(fa) == 0 or not other.any():
        return
    f_names = np.array([_name_kind(ac.normalize(n)) == K["other_api"] for n in fa.names] + [True], bool)
    f_other = f_names[fa.name_idx]
    f_missing = np.array([n.startswith(MISSING) for n in fa.names] + [False], bool)[fa.name_idx] & f_other
    launched = np.flatnonzero(_linked(full, ("kernels", "graph_trace")) & f_other)
    rows = np.flatnonzero(other)
    key = _pid_corr_key(api.pid[rows], api.corr[rows])
    if f_missing.any():
        m = missing[rows]
        synced = np.flatnonzero(_linked(full, ("sync",)) & f_missing)
        kinds[rows[m & _in(np.unique(_pid_corr_key(fa.pid[synced], fa.corr[synced])), key)]] = K["sync"]
        waited = _copies_waited(full, f_missing)
        kinds[rows[m & _in(np.unique(_pid_corr_key(fa.pid[waited], fa.corr[waited])), key)]] = K["sync_memcpy"]
    kinds[rows[_in(np.unique(_pid_corr_key(fa.pid[launched], fa.corr[launched])), key)]] = K["launch"]


def _copies_waited(full: TraceModel, cand: np.ndarray) -> np.ndarray:
    """Rows of ``full.api`` among ``cand`` (a bool per row) that a memcpy or memset links and that ended at or after
    the last such row's end (the call waited for its work: a synchronous copy)."""
    api = full.api
    assert api is not None
    last = np.full(len(api), -1, np.int64)
    for t in (full.memcpy, full.memset):
        if t is None or len(t) == 0 or t.launch_idx.shape[0] != len(t):
            continue
        li = np.asarray(t.launch_idx, np.int64)
        ok = li >= 0
        np.maximum.at(last, li[ok], np.asarray(t.end, np.int64)[ok])
    return np.flatnonzero(cand & (last >= 0) & (api.end >= last))


def _pid_corr_key(pid: np.ndarray, corr: np.ndarray) -> np.ndarray:
    """``pid << 32 | (corr & 0xFFFFFFFF)``: a call's identity across models of one capture."""
    key = pid.astype(np.int64)
    key <<= 32
    key += np.asarray(corr, np.int64) & 0xFFFFFFFF
    return key


def _name_kind(b: str) -> int:
    if b in ac.SYNC_WAIT:
        return K["sync"]
    if b in ac.SYNC_MEMCPY:
        return K["sync_memcpy"]
    if b in ac.ALLOC or b in ac.FREE:
        return K["alloc"]
    if _MODULE_LOAD.search(b):
        return K["module_load"]
    if b in ac.LAUNCH:
        return K["launch"]
    return K["other_api"]


def _first_launch_keys(full: TraceModel) -> np.ndarray:
    """Sorted distinct (pid << 32 | corr) of the launch call of the first kernel of each (process, kernel name),
    and of each CUDA graph's first launch: the first kernel of each (process, graph node id) — a node id belongs to
    one executable graph — or the first whole-graph row of each (process, graphExecId), where the export has them."""
    k, g, api = full.kernels, full.graph_trace, full.api
    if api is None:
        return np.empty(0, np.int64)
    parts = [np.empty(0, np.int64)]         # rows are sorted by start: the first of each key is the earliest
    if k is not None and len(k) and k.launch_idx.shape[0] == len(k):
        parts.append(k.launch_idx[_first_rows(k.pid, k.name_idx, len(k.names))])
        parts.append(_first_of(k.launch_idx, k.pid, k.graph_node))
    if g is not None and len(g) and g.launch_idx.shape[0] == len(g):
        parts.append(_first_of(g.launch_idx, g.pid, g.graph_exec_id))
    li = np.concatenate(parts)
    li = li[li >= 0]
    li = li[~np.isin(api.pid[li], started_mid_run(full))]
    return np.unique(_pid_corr_key(api.pid[li], api.corr[li]))


def _first_of(launch_idx: np.ndarray, pid: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """``launch_idx`` of the first row of each distinct (pid, id) among the rows with an id (≥ 0)."""
    at = np.flatnonzero(np.asarray(ids) >= 0)
    pairs = np.stack([np.asarray(pid, np.int64)[at], np.asarray(ids, np.int64)[at]])
    return np.asarray(launch_idx, np.int64)[at[np.unique(pairs, axis=1, return_index=True)[1]]]


def _first_rows(pid: np.ndarray, name_idx: np.ndarray, n_names: int) -> np.ndarray:
    """Row of the first occurrence of each distinct (pid, name index), in order of (pid, name index).
    Dense codes and one ``minimum.at`` when the (distinct pids × names) table is small, else a sort."""
    n = pid.shape[0]
    pids = few_distinct(pid)
    cells = pids.shape[0] * (n_names + 1)
    if cells > max(4 * n, 1 << 20):
        key = pid.astype(np.int64) * (n_names + 1) + name_idx + 1
        return np.unique(key, return_index=True)[1]
    code = np.searchsorted(pids, pid).astype(np.int64)
    code *= n_names + 1
    code += name_idx
    code += 1                                           # name index -1 (unknown) gets its own cell
    first = np.full(cells, n, np.int64)
    np.minimum.at(first, code, np.arange(n, dtype=np.int64))
    return first[first < n]
