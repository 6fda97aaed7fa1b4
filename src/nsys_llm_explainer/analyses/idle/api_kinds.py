"""Which idle-cause kind each CUDA API row is charged as when it covers an idle piece on its thread (docs/MODEL.md):
by its base name (sync, synchronous copy, alloc/free, module load, launch, other), an async copy from pageable memory
as ``pageable_memcpy``, and the launch call of a process's first kernel of a name as ``module_load`` (lazy loading).
"""

from __future__ import annotations

import re
from typing import List, Tuple

import numpy as np

from ...model.timeline import PAGEABLE, few_distinct
from ...model.trace import TraceModel
from ...vocabulary.cause_kinds import KIND_CODE
from ..api import classes as ac

K = KIND_CODE
_MODULE_LOAD = re.compile(r"^(cu|cuda)(Module|Library)Load")


def api_kinds(full: TraceModel, model: TraceModel) -> Tuple[np.ndarray, List[str], np.ndarray]:
    """Per API row of ``model``: kind code (int8 index into :data:`KINDS`, -1 = not a runtime/driver row),
    the base-name list and the row → base-name index. First launches are found on ``full`` (the whole
    capture) and matched to ``model``'s rows by (pid, correlation id). Per-name work is done once per
    distinct name; per-row work is a few gathers."""
    api = model.api
    if api is None or len(api) == 0:
        return np.empty(0, np.int8), [], np.empty(0, np.int64)
    base, uniq, name_to_base = ac.name_bases(api.names)
    per_name = np.array([_name_kind(b) for b in base] + [K["other_api"]], np.int8)
    kinds = per_name[api.name_idx]
    mc = model.memcpy
    if mc is not None and len(mc):
        is_async_copy = np.array([ac.is_async_copy(b) for b in base] + [False], bool)
        pg = (np.asarray(mc.src_kind, np.int64) == PAGEABLE) | (np.asarray(mc.dst_kind, np.int64) == PAGEABLE)
        li = np.asarray(mc.launch_idx, np.int64)[pg]
        li = li[li >= 0]
        kinds[li[is_async_copy[api.name_idx[li]]]] = K["pageable_memcpy"]
    first = _first_launch_keys(full)
    if first.shape[0]:
        key = _pid_corr_key(api.pid, api.corr)
        at = np.minimum(np.searchsorted(first, key), first.shape[0] - 1)
        fl = first[at] == key
        del key, at
        fl &= kinds == K["launch"]
        kinds[fl] = K["module_load"]
    kinds[~api.primary] = -1
    return kinds, uniq, name_to_base[api.name_idx]


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
    """Sorted distinct (pid << 32 | corr) of the launch call of the first kernel of each (process, kernel
    name)."""
    k, api = full.kernels, full.api
    if k is None or len(k) == 0 or api is None or k.launch_idx.shape[0] != len(k):
        return np.empty(0, np.int64)
    first = _first_rows(k.pid, k.name_idx, len(k.names))   # kernels are sorted by start: first = earliest
    li = k.launch_idx[first]
    li = li[li >= 0]
    return np.unique(_pid_corr_key(api.pid[li], api.corr[li]))


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
