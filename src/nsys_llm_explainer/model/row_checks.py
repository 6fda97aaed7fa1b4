"""Rows whose times cannot be true (``start`` missing or outside ``[0, 2^62]`` ns, ``end`` outside it, or before
``start``; zero-length rows are kept), and the longest rows of a table whose durations or bytes would total
:data:`SUM_LIMIT` or more, are left out where they enter the model, counted and stated in the warnings
(docs/METRICS.md, "Sums"; docs/SECURITY.md, "5. Values entering the model").
"""

from __future__ import annotations

from typing import Dict, List, Optional

import numpy as np

MAX_TS = 1 << 62
#: a table's durations (and bytes) must total less than this to be summed exactly (2^53: exact in float64 too)
SUM_LIMIT = 1 << 53


def drop_impossible(cols: Dict[str, np.ndarray], table: str, warnings: List[str],
                    has_end: Optional[str] = None) -> Dict[str, np.ndarray]:
    """``cols`` without its impossible rows (a warning added to ``warnings`` when there are some), then, when every
    row has an end (``has_end`` None; else the column of the rows whose ``end`` is known: NVTX), without the rows
    its sums cannot hold (:func:`drop_unsummable`); the same dict, untouched, when every row is kept."""
    if "start" not in cols or "end" not in cols or cols["start"].shape[0] == 0:
        return cols
    start, end = cols["start"], cols["end"]
    known = np.ones(start.shape[0], bool) if has_end is None else cols[has_end].astype(bool)
    out_of_range = (start < 0) | (start > MAX_TS) | (known & ((end < 0) | (end > MAX_TS)))
    backwards = ~out_of_range & known & (end < start)
    n_range, n_back = int(out_of_range.sum()), int(backwards.sum())
    if n_range or n_back:
        parts = [p for n, p in ((n_range, f"{n_range} with a start or end time missing or outside 0 … 2^62 ns"),
                                (n_back, f"{n_back} ending before they start")) if n]
        warnings.append(f"{table}: {n_range + n_back} impossible row(s) left out of every number "
                        f"({'; '.join(parts)}).")
        keep = np.nonzero(~(out_of_range | backwards))[0]
        cols = {k: v[keep] for k, v in cols.items()}
    return cols if has_end else drop_unsummable(cols, table, warnings)


def exact_total(values: np.ndarray) -> int:
    """Σ ``values`` (non-negative int64, each < 2^63) as an exact Python int, whatever the count: the high and low
    32 bits are summed apart (each part stays below 2^63 for fewer than 2^31 rows)."""
    v = np.asarray(values, np.int64)
    return (int((v >> 32).sum()) << 32) + int((v & 0xFFFFFFFF).sum())


def over_sum_limit(values: np.ndarray) -> np.ndarray:
    """Rows (indices, ascending) to leave out so that the rest of ``values`` (non-negative) total less than
    :data:`SUM_LIMIT`: the largest first, equal ones the later rows first. Empty when the total is already below
    (the common case costs one ``max``)."""
    n = values.shape[0]
    if n == 0 or int(values.max()) * n < SUM_LIMIT:
        return np.empty(0, np.int64)
    order = np.argsort(values, kind="stable")             # ascending; ties in table order
    v = values[order]
    k = int(np.searchsorted(np.cumsum(v.astype(np.float64)), float(SUM_LIMIT), side="left"))
    s = int(v[:k].sum())                                    # ≈ below 2^53: no int64 overflow
    while k > 0 and s >= SUM_LIMIT:                         # the float estimate may be off by a row or two
        k -= 1
        s -= int(v[k])
    while k < n and s + int(v[k]) < SUM_LIMIT:
        s += int(v[k])
        k += 1
    return np.sort(order[k:])


def unsummable(vals: np.ndarray, table: str, what: str, warnings: List[str]) -> np.ndarray:
    """The rows of ``vals`` (a table's ``durations`` in ns or its ``bytes``, non-negative) to leave out so that the
    rest total less than :data:`SUM_LIMIT` (:func:`over_sum_limit`), and a warning line when there are some."""
    out = over_sum_limit(vals)
    if out.shape[0]:
        unit, most = ("ns", "longest") if what == "durations" else ("bytes", "largest")
        warnings.append(f"{table}: {out.shape[0]} row(s) left out of every number: their {what} total "
                        f"{exact_total(vals):,} {unit}, more than the 2^53 {unit}"
                        f"{' (about 104 days)' if unit == 'ns' else ''} a table's {what} may total to be summed "
                        f"exactly; the {most} rows were left out, {most} first, until the rest total less.")
    return out


def drop_unsummable(cols: Dict[str, np.ndarray], table: str, warnings: List[str]) -> Dict[str, np.ndarray]:
    """``cols`` (with ``start`` and ``end``) without the rows whose durations (then bytes, where the table has them)
    would total :data:`SUM_LIMIT` or more (:func:`unsummable`); the same dict, untouched, when the totals are
    below."""
    for what in ("durations", "bytes") if "bytes" in cols else ("durations",):
        vals = np.maximum(cols["end"] - cols["start"] if what == "durations" else cols["bytes"], 0)
        out = unsummable(vals, table, what, warnings)
        if out.shape[0]:
            idx = np.delete(np.arange(vals.shape[0]), out)
            cols = {k: v[idx] for k, v in cols.items()}
    return cols
