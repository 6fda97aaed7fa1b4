"""Names of the model: API display names as nsys stats prints them, thread display labels, and string ids
interned into dense indices (one name list per table, ``name_idx`` per row)."""

from __future__ import annotations

from collections import Counter
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

import numpy as np


def base_api_name(name: str) -> str:
    """API display name exactly as ``nsys stats`` (cudaapisum 2022.4, cuda_api_sum 2024.2) prints it: a
    trailing ``_v`` + four characters is removed (``cudaLaunchKernel_v7000`` → ``cudaLaunchKernel``), every
    other suffix is kept (``cuGetProcAddress_v2``, ``cudaStreamIsCapturing_v10000`` are distinct entry
    points). Classification (:mod:`analyses.api.classes`) strips all variants separately."""
    return name[:-6] if len(name) >= 6 and name[-6:-4] == "_v" else name


def thread_labels(names: Mapping[int, str], shown: Iterable[int] = ()) -> Dict[int, str]:
    """The display label of every named thread (serialized globalTid → label), the one rule every output uses
    (docs/MODEL.md "Thread labels"); ``shown``: the threads a report can name side by side (CUDA API calls, NVTX
    ranges or OS-runtime calls). A thread without a name (absent, or ``""``) gets no label."""
    seen = {int(g) for g in shown}
    groups: Dict[str, List[int]] = {}
    for g, n in names.items():
        if n:
            groups.setdefault(n, []).append(int(g))
    out: Dict[int, str] = {}
    for n, gs in groups.items():                    # linear in the threads of each name (no pairwise search)
        procs = Counter(g >> 24 for g in gs)
        n_shown = sum(1 for g in gs if g in seen)
        proc_tid = Counter((g >> 24, g & 0xFFFFFF) for g in gs)
        shown_tid = Counter(g & 0xFFFFFF for g in gs if g in seen)
        for g in gs:
            if procs[g >> 24] < 2 and not (g in seen and n_shown > 1):
                out[g] = n
                continue
            tid = g & 0xFFFFFF
            same_tid = proc_tid[(g >> 24, tid)] > 1 or (g in seen and shown_tid[tid] > 1)
            out[g] = f"{n} (pid {(g >> 24) & 0xFFFFFF}, tid {tid})" if same_tid else f"{n} (tid {tid})"
    return out


def short(name: str, n: int) -> str:
    """``name`` cut to ``n`` characters, the last one ``…``, when longer (a name inside a finding's text)."""
    return name if len(name) <= n else name[: n - 1] + "…"


#: how a name whose id StringIds lacks begins (:func:`missing_name`)
MISSING = "[missing StringId "


def missing_name(string_id: int) -> str:
    return f"{MISSING}{string_id}]"


def distinct_small(ids: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """(sorted distinct values, inverse) for int ids — O(n) with a lookup table from ``min(ids, 0)`` when the id
    range is small (StringIds ids, devices, phases are), else ``np.unique``. The table is never larger than a few
    times the number of rows, so one sparse huge id does not allocate per possible id."""
    lo, hi = (min(int(ids.min()), 0), int(ids.max())) if ids.shape[0] else (0, 0)
    if ids.shape[0] and hi - lo < min(50_000_000, max(1 << 20, 4 * ids.shape[0])):
        off = ids - lo if lo else ids                   # negative ids shifted (in the ids' type: the result fits)
        present = np.zeros(hi - lo + 1, bool)
        present[off] = True
        uniq = np.nonzero(present)[0]
        lut = np.zeros(present.shape[0], np.int64)
        lut[uniq] = np.arange(uniq.shape[0])
        return uniq + lo, lut[off]
    uniq, inv = np.unique(ids, return_inverse=True)
    return uniq, inv.reshape(-1)


def intern_ids(ids: np.ndarray, strings: Dict[int, str], fallback: Optional[np.ndarray] = None,
               empty: str = "") -> Tuple[np.ndarray, List[str]]:
    """Map StringIds ids to (row → index into names, names); rows whose id is not in StringIds use
    ``fallback`` ids, then ``[missing StringId N]``; an empty (or NULL) string is ``empty``. Python work is per
    distinct id, not per row."""
    n = ids.shape[0]
    if n == 0:
        return np.empty(0, np.int32), []
    ids = ids.astype(np.int64)
    uniq, inv = distinct_small(ids)
    index: Dict[str, int] = {}      # name → its index: the names in first-use order
    map_arr = np.empty(uniq.shape[0], np.int32)
    missing = []
    for i, primary in enumerate(uniq.tolist()):
        if primary in strings:
            map_arr[i] = index.setdefault(strings[primary] or empty, len(index))
        else:
            map_arr[i] = -1
            missing.append(i)
    out = map_arr[inv]
    if missing:
        rows = np.nonzero(out < 0)[0]
        fb = fallback[rows] if fallback is not None else np.full(rows.shape[0], -1, np.int64)
        key = np.stack([ids[rows], fb.astype(np.int64)], axis=1)
        pairs, pinv = np.unique(key, axis=0, return_inverse=True)
        pmap = np.empty(pairs.shape[0], np.int32)
        for j, (prim, f) in enumerate(pairs.tolist()):
            pmap[j] = index.setdefault((strings[f] or empty) if f >= 0 and f in strings else missing_name(prim),
                                       len(index))
        out[rows] = pmap[pinv.reshape(-1)]
    return out, list(index)


#: the name of a kernel or NVTX range whose name is empty or NULL (never the empty string, which reads as no value)
UNNAMED = "[unnamed]"


def intern_strings(values: Sequence[Optional[str]], placeholder: str = UNNAMED) -> Tuple[np.ndarray, List[str]]:
    """Intern a list of strings (e.g. NVTX text) into (index array, names); a missing or empty string is
    ``placeholder`` (an NVTX range pushed with ``""`` has no name, as one without text: never the cause's name)."""
    index: Dict[str, int] = {}
    idx = [index.setdefault(v if v else placeholder, len(index)) for v in values]
    return np.asarray(idx, dtype=np.int32).reshape(-1), list(index.keys())
