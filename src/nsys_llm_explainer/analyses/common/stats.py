"""Grouped duration statistics — the single definition used by every table (docs/METRICS.md, "Statistics").
``p50_exact`` keeps the unrounded median; :func:`percentile` / :func:`median` give the same interpolation for
ungrouped values (unrounded; callers round half up with :func:`round_half_up` where they report integer ns).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from functools import cache
from typing import TYPE_CHECKING, Any, Dict, List, Literal, Optional, Sequence, Tuple, Type, TypeVar

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    import numpy.typing as npt

from ...jsonable import FieldsJson
from ...model.timeline import few_distinct, run_starts


def round_half_up(x: npt.ArrayLike) -> np.ndarray:
    return np.floor(np.asarray(x, dtype=np.float64) + 0.5).astype(np.int64)


#: a row field that holds a group's statistic (module docstring) → the :class:`GroupStats` array it is read from
STAT_FIELDS = {"count": "count", "total_ns": "total", "avg_ns": "avg", "min_ns": "min", "max_ns": "max",
               "p50_ns": "p50", "p90_ns": "p90", "p99_ns": "p99"}


R = TypeVar("R")


@cache
def _stat_fields(row: type) -> Tuple[Tuple[str, str], ...]:
    return tuple((f.name, STAT_FIELDS[f.name]) for f in fields(row) if f.name in STAT_FIELDS)


@dataclass
class GroupStats:
    """Per-group statistics; ``keys`` holds one array per key column (aligned with the stats)."""

    keys: Dict[str, np.ndarray]
    count: np.ndarray
    total: np.ndarray
    min: np.ndarray
    max: np.ndarray
    avg: np.ndarray
    p50: np.ndarray
    p90: np.ndarray
    p99: np.ndarray
    p50_exact: np.ndarray

    def __len__(self) -> int:
        return int(self.count.shape[0])

    def row(self, i: int, row: type) -> Dict[str, Any]:
        """The statistics of group ``i`` that the row dataclass ``row`` has a field for (:data:`STAT_FIELDS`)."""
        return {f: int(getattr(self, a)[i]) for f, a in _stat_fields(row)}

    def rows(self, row: Type[R], names: Sequence[str] = (), **columns: Sequence[Any]) -> List[R]:
        """One ``row`` per group, largest total first (:meth:`order_by_total`): its key values (``name`` as
        ``names[key]``), its statistics (:meth:`row`) and ``columns`` (one value per group, by group index; a
        column replaces the key of its name)."""
        out = []
        for i in self.order_by_total().tolist():
            values = {k: names[int(v[i])] if k == "name" else int(v[i]) for k, v in self.keys.items()}
            values.update({c: v[i] for c, v in columns.items()})
            out.append(row(**values, **self.row(i, row)))
        return out

    def order_by_total(self) -> np.ndarray:
        """Indices sorted by total descending (ties: count descending, then first key ascending)."""
        first = next(iter(self.keys.values())) if self.keys else np.zeros_like(self.count)
        return np.lexsort((first, -self.count, -self.total))


def percentile_sorted(values: np.ndarray, starts: np.ndarray, counts: np.ndarray, q: float) -> np.ndarray:
    """Linear-interpolation percentile ``q`` (0–100) of each segment of an already sorted array."""
    if counts.shape[0] == 0:
        return np.empty(0, np.float64)
    pos = (counts - 1) * (q / 100.0)
    lo = np.floor(pos).astype(np.int64)
    hi = np.minimum(lo + 1, counts - 1)
    frac = pos - lo
    vlo = values[starts + lo].astype(np.float64)
    vhi = values[starts + hi].astype(np.float64)
    return vlo + (vhi - vlo) * frac


def percentiles(values: np.ndarray, qs: Sequence[float]) -> List[float]:
    """Percentiles ``qs`` (0–100) of ``values`` (any order) by the same linear interpolation between
    closest ranks as :func:`percentile_sorted` (numpy's default method, unrounded); 0.0 when empty."""
    v = np.asarray(values).reshape(-1)
    n = v.shape[0]
    if n == 0:
        return [0.0] * len(qs)
    pos = [(n - 1) * (q / 100.0) for q in qs]
    lo = [int(np.floor(x)) for x in pos]
    hi = [min(a + 1, n - 1) for a in lo]
    part = np.partition(v, sorted(set(lo + hi)))     # the order statistics needed, no full sort
    return [float(part[a]) + (float(part[b]) - float(part[a])) * (x - a) for x, a, b in zip(pos, lo, hi)]


def percentile(values: np.ndarray, q: float) -> float:
    """:func:`percentiles` of the one ``q``."""
    return percentiles(values, (q,))[0]


def median(values: np.ndarray) -> float:
    """:func:`percentile` 50 (for an even count: the mean of the two middle values, unrounded)."""
    return percentile(values, 50)


#: how :func:`combine_keys` packed each column: (offset, distinct values or None, width)
KeyDecoder = List[Tuple[int, Optional[np.ndarray], int]]


def combine_keys(cols: List[np.ndarray]) -> Tuple[np.ndarray, Optional[KeyDecoder]]:
    """One non-negative int64 key per row whose order equals the lexicographic order of ``cols``,
    plus a decoder (per column: (offset, distinct values or None, width)); decoder is None when the
    key had to be re-factorized (very wide keys)."""
    key = np.zeros(cols[0].shape[0], np.int64)
    span = 1
    dec: Optional[KeyDecoder] = []
    for c in cols:
        c = np.asarray(c)
        if c.dtype.kind not in "iub" or c.dtype == np.uint64:
            c = c.astype(np.int64)
        lo, hi = (int(c.min()), int(c.max())) if c.shape[0] else (0, 0)
        if hi - lo < (1 << 24):
            code, width, u = None, hi - lo + 1, None   # the code is c − lo, added in place below
        else:
            u, code = np.unique(c, return_inverse=True)
            code, width = code.reshape(-1).astype(np.int64), int(u.shape[0])
        if span * width >= (1 << 62):  # too wide: re-factorize what we have so far
            uu, key = np.unique(key, return_inverse=True)
            key, span = key.reshape(-1).astype(np.int64), int(uu.shape[0])
            dec = None
        key *= width                   # in place: no temporaries of the row count
        if code is None:
            key += c
            key -= lo
        else:
            key += code
        span *= width
        if dec is not None:
            dec.append((lo, u, width))
    return key, dec


def _decode(key: np.ndarray, dec: KeyDecoder) -> List[np.ndarray]:
    out = []
    for lo, u, width in reversed(dec):
        code = key % width
        key = key // width
        out.append(u[code] if u is not None else code + lo)
    return out[::-1]


#: a grouping of at least this many rows into at most :data:`FEW_GROUPS` groups takes :func:`_few_groups`
FEW_GROUPS_MIN_ROWS = 100_000
FEW_GROUPS = 8
_QS = (50.0, 90.0, 99.0)


def _few_groups(names: List[str], key: np.ndarray, dec: KeyDecoder, dur: np.ndarray) -> Optional[GroupStats]:
    """The statistics of :func:`group_stats` for a few large groups without sorting: per group, the order
    statistics the percentiles need come from one ``np.partition`` (:func:`percentiles`: the same interpolation
    formula as :func:`percentile_sorted`, so the numbers are identical). ``None`` when there are more groups."""
    uk = few_distinct(key)
    if uk.shape[0] > FEW_GROUPS:
        return None
    rows = []
    for g in uk.tolist():
        v = dur if uk.shape[0] == 1 else dur[key == g]
        rows.append((int(v.shape[0]), int(v.sum()), int(v.min()), int(v.max()), percentiles(v, _QS)))
    count, total, mn, mx = (np.array([r[j] for r in rows], np.int64) for j in range(4))
    p = np.array([r[4] for r in rows], np.float64).reshape(len(rows), len(_QS))
    return _stats(dict(zip(names, _decode(uk.astype(np.int64), dec))), count, total, mn, mx, list(p.T))


def _stats(keys: Dict[str, np.ndarray], count: np.ndarray, total: np.ndarray, mn: np.ndarray, mx: np.ndarray,
           p: Sequence[np.ndarray]) -> GroupStats:
    """:class:`GroupStats` of groups with these counts, totals, extremes and unrounded percentiles :data:`_QS`."""
    p50, p90, p99 = (round_half_up(x) for x in p)
    return GroupStats(keys, count, total, mn, mx, round_half_up(total / count), p50, p90, p99, p[0])


def _from_sorted(sk: np.ndarray, sd: np.ndarray) -> Tuple[np.ndarray, GroupStats]:
    """Statistics of runs of equal ``sk`` (sorted) whose durations ``sd`` are sorted within each run; returns
    (row of each group's first element, stats without keys)."""
    starts = run_starts(sk)
    counts = np.diff(np.append(starts, sd.shape[0]))
    total = np.add.reduceat(sd, starts).astype(np.int64)
    return starts, _stats({}, counts.astype(np.int64), total, sd[starts], sd[starts + counts - 1],
                          [percentile_sorted(sd, starts, counts, q) for q in _QS])


def _packed_sort(key: np.ndarray, dur: np.ndarray, kind: Optional[Literal["stable"]] = None
                 ) -> Optional[Tuple[np.ndarray, np.ndarray]]:
    """(key, duration) sorted by key then duration with one integer sort of ``key << bits | dur − min`` (32-bit
    when it fits); None when the packed value would not fit 62 bits. ``kind="stable"`` for inputs made of
    sorted runs (numpy's stable sort merges runs). ``key`` (int64, made for this call) is packed in place: its
    values are lost unless None is returned."""
    dmin, dmax = int(dur.min()), int(dur.max())
    bits = max(int(dmax - dmin).bit_length(), 1)
    kmax = int(key.max())
    if kmax >= (1 << max(62 - bits, 0)):
        return None
    sp = key
    sp <<= bits
    sp -= dmin
    sp += dur                           # = key << bits | (dur − dmin), as 0 ≤ dur − dmin < 2^bits
    if (kmax << bits) < (1 << 32):      # fits 32 bits: a sort of half the bytes, twice as fast
        sp = sp.astype(np.uint32)
    sp.sort(kind=kind)
    sd = np.bitwise_and(sp, (1 << bits) - 1, dtype=np.int64)
    sd += dmin
    if sp.dtype == np.int64:            # the keys in place of the packed values
        np.right_shift(sp, bits, out=sp)
        return sp, sd
    return np.right_shift(sp, bits, dtype=np.int64), sd


def group_stats(keys: Dict[str, np.ndarray], dur: np.ndarray) -> GroupStats:
    """Statistics of ``dur`` grouped by the combination of ``keys`` (all int arrays of equal length)."""
    names = list(keys.keys())
    n = dur.shape[0]
    if n == 0:
        empty = np.empty(0, np.int64)
        return _stats({k: empty for k in names}, empty, empty, empty, empty, [np.empty(0, np.float64)] * len(_QS))
    cols = [np.asarray(keys[k]) for k in names]
    key, dec = combine_keys(cols)
    dur = np.asarray(dur, dtype=np.int64)
    if dec is not None and n >= FEW_GROUPS_MIN_ROWS:
        few = _few_groups(names, key, dec, dur)
        if few is not None:
            return few
    got = _packed_sort(key, dur) if dec is not None else None
    if got is not None and dec is not None:
        sk, sd = got
        starts, gs = _from_sorted(sk, sd)
        gs.keys = dict(zip(names, _decode(sk[starts], dec)))
        return gs
    order = np.lexsort((dur, key))
    starts, gs = _from_sorted(key[order], dur[order])
    gs.keys = {k: c[order[starts]].astype(np.int64) for k, c in zip(names, cols)}
    return gs


def nested_group_stats(cols: Dict[str, np.ndarray], dur: np.ndarray) -> Optional[Dict[Tuple[str, ...], GroupStats]]:
    """:func:`group_stats` by every prefix of the ordered key columns ``cols`` (``(a,)``, ``(a, b)``, …), from
    one sort by (keys…, duration): a coarser grouping's runs are already sorted by duration, so its sort is a
    merge of sorted runs (or nothing, when it groups the same rows). None when the keys are too wide."""
    names = tuple(cols)
    key, dec = combine_keys([cols[c] for c in names])
    if dec is None or dur.shape[0] == 0:
        return None
    got = _packed_sort(key, dur)
    if got is None:
        return None
    sk, sd = got
    del key, got
    out: Dict[Tuple[str, ...], GroupStats] = {}
    div = 1
    fine_groups = -1
    for depth in range(len(names), 0, -1):
        ck = sk // div if div > 1 else sk
        starts, gs = _from_sorted(ck, sd)
        if fine_groups >= 0 and starts.shape[0] != fine_groups:   # several finer runs per group: merge them
            merged = _packed_sort(ck, sd, kind="stable")
            if merged is None:
                return None
            starts, gs = _from_sorted(*merged)
            ck = merged[0]
        fine_groups = starts.shape[0] if depth == len(names) else fine_groups
        gs.keys = dict(zip(names[:depth], _decode(ck[starts], dec[:depth])))
        out[names[:depth]] = gs
        div *= dec[depth - 1][2]
    return out


def reordered(gs: GroupStats, cols: Tuple[str, ...]) -> GroupStats:
    """``gs`` (grouped by the columns ``cols`` in some order) with its groups and key columns in the order of
    ``cols`` (what :func:`group_stats` on ``cols`` gives)."""
    if tuple(gs.keys) == tuple(cols):
        return gs
    order = np.lexsort(tuple(gs.keys[c] for c in reversed(cols)))
    return GroupStats({c: gs.keys[c][order] for c in cols}, *(getattr(gs, f.name)[order] for f in fields(gs)[1:]))


@dataclass(frozen=True)
class Summary(FieldsJson):
    """Ungrouped statistics of durations (integer ns, module docstring): count, total, average, extremes and
    percentiles."""

    count: int
    total_ns: int
    avg_ns: int
    min_ns: int
    max_ns: int
    p50_ns: int
    p90_ns: int
    p99_ns: int


def summary(dur: np.ndarray) -> Summary:
    """Ungrouped statistics of ``dur`` (all zero when it is empty): those of :func:`group_stats` with one group,
    without a key column (:func:`percentiles` interpolates as :func:`percentile_sorted` does)."""
    v = np.asarray(dur, dtype=np.int64).reshape(-1)
    if v.shape[0] == 0:
        return Summary(0, 0, 0, 0, 0, 0, 0, 0)
    count, total, mn, mx = (np.array([x], np.int64) for x in (v.shape[0], int(v.sum()), int(v.min()), int(v.max())))
    gs = _stats({}, count, total, mn, mx, [np.array([p], np.float64) for p in percentiles(v, _QS)])
    return Summary(**gs.row(0, Summary))


def top_indices(values: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` largest ``values``, largest first, ties in index order — the first ``k`` of a
    stable descending argsort, found in linear time (a partition, then a sort of the candidates only)."""
    n = values.shape[0]
    if k <= 0 or n == 0:
        return np.empty(0, np.int64)
    if n > 4 * k:
        kth = np.partition(values, n - k)[n - k]
        cand = np.nonzero(values >= kth)[0]
    else:
        cand = np.arange(n)
    return cand[np.argsort(-values[cand], kind="stable")[:k]]


def int_sums(idx: np.ndarray, values: npt.ArrayLike, n: int) -> np.ndarray:
    """Σ of ``values`` per index ``idx`` (0 … n − 1) in int64: exact for any ns or bytes (a float ``bincount`` is not
    past 2^53)."""
    out = np.zeros(n, np.int64)
    np.add.at(out, idx, np.asarray(values, np.int64))
    return out


def group_sums(keys: Sequence[np.ndarray], *values: npt.ArrayLike
               ) -> Tuple[np.ndarray, np.ndarray, np.ndarray, List[np.ndarray]]:
    """Per distinct combination of the int arrays ``keys`` (groups in ascending key order): the first row that has
    it; per row its group; per group its row count and the Σ of each of ``values`` (:func:`int_sums`: exact)."""
    key, _ = combine_keys([np.asarray(c, np.int64) for c in keys])
    _, first, inv = np.unique(key, return_index=True, return_inverse=True)
    inv = inv.reshape(-1).astype(np.int64)
    return first, inv, np.bincount(inv, minlength=first.shape[0]), [int_sums(inv, v, first.shape[0]) for v in values]


def pct(part: float, whole: float, digits: Optional[int] = None) -> float:
    """``100 * part / whole`` (full float precision unless ``digits``); 0 when ``whole`` is 0."""
    if not whole:
        return 0.0
    v = 100.0 * part / whole
    return round(v, digits) if digits is not None else v
