"""Non-overlapped kernel time per category: each instant of a device's busy time is shared equally among
the categories running then, rounded per device by the largest remainder (the ``nonoverlap_ns`` of
:mod:`categories`; docs/FINDINGS.md, "Kernel categories").
"""

from __future__ import annotations

from math import gcd
from typing import Dict, Tuple

import numpy as np

from ...model import intervals as iv
from ...model.timeline import rows_by_value, run_starts


def nonoverlap_split(start: np.ndarray, end: np.ndarray, cat: np.ndarray,
                     n_cat: int) -> Tuple[np.ndarray, int]:
    """(nonoverlap_ns per category, busy_ns) for the intervals of ONE device (docs/FINDINGS.md, "Kernel categories").

    Memory is O(intervals): per category the union of its intervals is built; the number of active
    categories per elementary segment comes from one cumsum over all union-block boundaries; for each
    distinct active-count k, a prefix sum of the segment lengths with that k gives each category's
    length at that k. Exact shares Σ_k len(c, k) / k are rounded by the largest remainder.
    """
    out = np.zeros(n_cat, np.int64)
    n = int(start.shape[0])
    if n == 0:
        return out, 0
    start = np.asarray(start, np.int64)
    end = np.maximum(np.asarray(end, np.int64), start)
    cat = np.asarray(cat)
    in_order = n < 2 or bool((start[1:] >= start[:-1]).all())
    if in_order and (n < 2 or bool((start[1:] >= np.maximum.accumulate(end)[:-1]).all())):
        # no two intervals overlap (each starts at or after every earlier end — one serial stream): every
        # instant runs one category, so each category's share is exactly its own time, and busy is their sum
        dur = end - start
        out = np.bincount(np.asarray(cat, np.int64), weights=dur.astype(np.float64), minlength=n_cat)
        out = np.rint(out).astype(np.int64)            # exact: sums of integer ns below 2**53
        return out, int(dur.sum())
    if in_order:
        # already sorted by start: a stable sort by category (radix sort on a small int type) suffices
        small = cat.astype(np.int16, copy=False) if n_cat < (1 << 15) else cat
        order = np.argsort(small, kind="stable")
    else:
        order = np.lexsort((start, cat))
    s, e, c = start[order], end[order], cat[order]
    lo = run_starts(c)
    hi = np.append(lo[1:], n)
    bs_l, be_l, bc_l = [], [], []
    for a, b in zip(lo.tolist(), hi.tolist()):
        u = iv.union_lean(s[a:b], e[a:b])   # rows of one category, sorted by start
        keep = u.end > u.start
        if keep.any():
            bs_l.append(u.start[keep])
            be_l.append(u.end[keep])
            bc_l.append(int(c[a]))
    if not bs_l:
        return out, 0
    sizes = np.array([x.shape[0] for x in bs_l], np.int64)
    bs, be = np.concatenate(bs_l), np.concatenate(be_l)
    block_first = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    # active-category count per elementary segment
    t = np.concatenate((bs, be))
    o = np.argsort(t, kind="stable")
    ts = t[o]
    del t
    ds = np.where(o < bs.shape[0], np.int8(1), np.int8(-1))   # +1 at a block start, −1 at its end
    del o
    pos = run_starts(ts)
    tu = ts[pos]
    del ts
    k_seg = np.cumsum(np.add.reduceat(ds.astype(np.int32), pos))[:-1]
    del ds, pos
    length = np.diff(tu)
    busy = int(length[k_seg > 0].sum())
    i0 = np.searchsorted(tu, bs)
    i1 = np.searchsorted(tu, be)
    ks = [int(k) for k in np.unique(k_seg[k_seg > 0]).tolist()]
    # len_ck[c][k]: length of segments with k active categories inside category c's blocks
    len_ck: Dict[int, Dict[int, int]] = {cc: {} for cc in bc_l}
    for k in ks:
        prefix = np.concatenate(([0], np.cumsum(np.where(k_seg == k, length, 0))))
        per_block = prefix[i1] - prefix[i0]
        per_cat = np.add.reduceat(per_block, block_first)
        for cc, v in zip(bc_l, per_cat.tolist()):
            if v:
                len_ck[cc][k] = int(v)
    lcm = 1
    for k in ks:
        lcm = lcm * k // gcd(lcm, k)
    numer = {cc: sum(v * (lcm // k) for k, v in len_ck[cc].items()) for cc in bc_l}
    floors = {cc: numer[cc] // lcm for cc in bc_l}
    deficit = busy - sum(floors.values())
    ranked = sorted(bc_l, key=lambda cc: (-(numer[cc] % lcm), cc))
    for cc in ranked[:deficit]:
        floors[cc] += 1
    for cc, v in floors.items():
        out[cc] = v
    return out, busy


def device_split(start: np.ndarray, end: np.ndarray, cat: np.ndarray, dev_code: np.ndarray, n_dev: int,
                 n_cat: int) -> Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per (device, category): count, total, nonoverlap; per device: busy. Rows are in start order; each
    device's rows are gathered one device at a time (only one device's copy is alive at once)."""
    key = dev_code.astype(np.int64) * n_cat + cat
    count = np.bincount(key, minlength=n_dev * n_cat).reshape(n_dev, n_cat).astype(np.int64)
    total = np.rint(np.bincount(key, weights=(end - start).astype(np.float64), minlength=n_dev * n_cat))
    total = total.astype(np.int64).reshape(n_dev, n_cat)
    del key
    nonov = np.zeros((n_dev, n_cat), np.int64)
    busy = np.zeros(n_dev, np.int64)
    for j, idx in rows_by_value(dev_code, np.arange(n_dev)):   # each device's rows ascending: in start order
        nonov[j], busy[j] = nonoverlap_split(start[idx], end[idx], cat[idx], n_cat)
    return count, total, nonov, busy
