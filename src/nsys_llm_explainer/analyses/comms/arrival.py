"""Last arrivals, waits and the waiting each rank's late arrivals caused at matched collectives, and the rule that
names a late rank from them: one rule for a single file's ranks (:mod:`.nccl`) and a cluster's
(:mod:`nsys_llm_explainer.cluster.collectives`, :mod:`nsys_llm_explainer.cluster.claims`); definition in
docs/FINDINGS.md "NCCL" (the rule, :func:`late_rank`) and docs/CLUSTER.md "Collectives across ranks".

Per matched instance (one kernel per member rank): the **last arriver** is the member whose kernel arrives latest
(ties at the latest arrival: the lowest rank index); an instance whose kernels all arrive together has none and
counts for no rank. A rank's **last-arrival share** = the instances it arrived last at / the instances it took
part in that had a last arriver (instances that blame nobody count in neither part). A member's **wait** = the
instance's latest arrival − its own (0 for the last arriver); a rank's **waiting caused** = Σ over the instances it
arrived last at of the other members' waits. The arrival is the kernel's start where the ranks share one clock
(one export: wait = latest start − own start), and minus its duration where they do not (several files: the
kernels of one collective end together, so the latest to start is the shortest, and wait = own duration − the
instance's shortest: clock-free); the two agree when the ends coincide."""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

import numpy as np

from ...model.intervals import covered_before, union_blocks
from ...model.timeline import rows_by_value
from ...vocabulary.units import fmt_dur
from ..common.stats import median, round_half_up

#: the late rank took part in at least this many matched collectives
MIN_MATCHED = 5
#: … arrived last at no fewer than this many (one stall is an event, not a rank the others keep waiting for)
MIN_LATE_ARRIVALS = 2
#: … and its late arrivals caused at least this share of all the waiting at the matched collectives
MIN_LATE_SHARE = 0.6
#: confidence high (a cluster claim's severity high) when its last-arrival share or its waiting-caused share
#: reaches this
HIGH_SHARE = 0.8


@dataclass(frozen=True)
class Arrivals:
    """Last arrivals and waits over matched instances (module docstring); instances in ascending order of their id."""

    #: per instance: its last arriver's rank index; -1 when all its kernels arrived together (no last arriver)
    late: np.ndarray
    #: per rank: the instances it arrived last at
    last: np.ndarray
    #: per rank: the instances it took part in that had a last arriver (the share's denominator)
    contested: np.ndarray
    #: per input row: its wait (ns), the instance's latest arrival − its own
    wait: np.ndarray
    #: per rank: Σ of its waits (ns)
    waited: np.ndarray
    #: per rank: the waiting it caused (ns), Σ over the instances it arrived last at of the other members' waits
    caused: np.ndarray

    def share(self, r: int) -> float:
        """Rank ``r``'s last-arrival share, last / contested (0.0 when none of its instances had a last arriver)."""
        c = int(self.contested[r])
        return int(self.last[r]) / c if c else 0.0


def last_arrivals(inst: np.ndarray, rank: np.ndarray, arrival: np.ndarray, n_rank: int) -> Arrivals:
    """Arrivals from one row per (matched instance, member rank) kernel: its instance id (any integers), its rank
    index in ``[0, n_rank)`` and its arrival (ns, one scale: its start on one clock, or − its duration; module
    docstring); one sort, no per-row Python."""
    inst = np.asarray(inst, np.int64)
    rank = np.asarray(rank, np.int64)
    start = np.asarray(arrival, np.int64)
    if inst.shape[0] == 0:
        z = np.zeros(n_rank, np.int64)
        return Arrivals(np.empty(0, np.int64), z, z.copy(), np.empty(0, np.int64), z.copy(), z.copy())
    o = np.lexsort((rank, -start, inst))   # per instance: latest start first, ties lowest rank first
    si, sr, ss = inst[o], rank[o], start[o]
    first = np.ones(si.shape[0], bool)
    first[1:] = si[1:] != si[:-1]
    heads = np.nonzero(first)[0]
    latest = ss[heads]
    earliest = np.minimum.reduceat(ss, heads)
    has_last = latest > earliest
    late = np.where(has_last, sr[heads], -1)
    last = np.bincount(late[has_last], minlength=n_rank).astype(np.int64)
    grp = np.cumsum(first) - 1
    contested = np.bincount(sr[has_last[grp]], minlength=n_rank).astype(np.int64)
    w_sorted = latest[grp] - ss
    wait = np.empty_like(w_sorted)
    wait[o] = w_sorted
    waited = np.zeros(n_rank, np.int64)
    np.add.at(waited, sr, w_sorted)
    caused = np.zeros(n_rank, np.int64)
    np.add.at(caused, late[has_last], np.add.reduceat(w_sorted, heads)[has_last])
    return Arrivals(late, last, contested, wait, waited, caused)


def late_rank(caused: Sequence[int], last: Sequence[int]) -> int:
    """The candidate late rank: the one whose late arrivals caused the most waiting (ties: the most last arrivals,
    then the first rank). A rank last by 3 µs at most collectives is not the one the others wait for when another
    is last by 90 µs at the rest, nor is a host stalled 2 ms twice less of a straggler for being last only twice."""
    return max(range(len(caused)), key=lambda j: (int(caused[j]), int(last[j]), -j))


#: "late together": another rank arrived within this share of the last arriver's lateness (its wait ≤ share · the
#: instance's skew). A group late as a whole (a node's ranks launched late by one cause) arrives within launch
#: jitter of each other; lateness passed on by the late rank (a ring neighbour waiting for it) lands part-way (half
#: way in a ring: tests/cli/test_claims_c8.py), and is the late rank's
LATE_TOGETHER_SHARE = 0.25


def late_with(inst: np.ndarray, rank: np.ndarray, arr: Arrivals, n_rank: int) -> np.ndarray:
    """Ranks late together: ``out[L, q]`` = the instances rank L arrived last at where rank q (≠ L) arrived within
    a quarter of L's lateness (q's wait ≤ :data:`LATE_TOGETHER_SHARE` · the instance's skew, its largest wait; a tie
    at the latest arrival included). ``inst``, ``rank``: the rows given to :func:`last_arrivals`, ``arr`` its result.
    When another rank arrives so close to L, the others would have waited for it had L been on time: a group was
    late (a node, its network link, an input they share), not L alone (docs/FINDINGS.md "NCCL")."""
    out = np.zeros((n_rank, n_rank), np.int64)
    if arr.wait.shape[0] == 0:
        return out
    _, k = np.unique(np.asarray(inst, np.int64), return_inverse=True)
    k = k.reshape(-1)
    skew = np.zeros(arr.late.shape[0], np.int64)
    np.maximum.at(skew, k, arr.wait)
    lat, rank = arr.late[k], np.asarray(rank, np.int64)
    near = (lat >= 0) & (rank != lat) & (arr.wait <= LATE_TOGETHER_SHARE * skew[k])
    np.add.at(out, (lat[near], rank[near]), 1)
    return out


def late_together(near: np.ndarray, last: int) -> List[int]:
    """The ranks late together with a rank that arrived last ``last`` times, from its row of :func:`late_with`
    (summed over names where several): those within a quarter of its lateness at half or more of its late
    arrivals."""
    near = np.asarray(near, np.int64)
    return np.flatnonzero((near > 0) & (2 * near >= last)).tolist()


def caused_share(caused: int, all_waiting: int) -> float:
    """The late rank's waiting caused / all the waiting (Σ every rank's waits) at the matched collectives, rounded
    to 4 places (0.0 when nobody waited): checked ≥ :data:`MIN_LATE_SHARE`."""
    return round(caused / all_waiting, 4) if all_waiting else 0.0


#: … and the waiting it caused is at least this % of the other ranks' captured time (:func:`caused_pct_of_window`;
#: the findings' smallest window share, findings.base.MEDIUM_SHARE): waiting that matters
MIN_WAIT_PCT = 5.0


def caused_pct_of_window(caused: int, windows: Sequence[int]) -> float:
    """The late rank's waiting caused (at the collectives matched over the whole capture) as a % of the other ranks'
    captured time: 100 · caused / Σ their devices' recorded time over the whole capture (``windows``: one per other
    rank; one scope for both parts), 2 places (0.0 without a window). A verdict rests on waiting that matters: a rank
    last by launch jitter (3 µs at each collective) costs the others a sliver of their time, so the rule needs this
    ≥ :data:`MIN_WAIT_PCT` (docs/FINDINGS.md "NCCL")."""
    w = sum(int(x) for x in windows)
    return round(100.0 * caused / w, 2) if w > 0 else 0.0


def little_waiting(pct: float, per_arrival_ns: float) -> str:
    """Why the rule names no late rank when the waiting it caused is under :data:`MIN_WAIT_PCT` of the others'
    time (``pct``; ``per_arrival_ns``: its waiting caused / its late arrivals / the other ranks), in the words the
    single-file verdict and the cluster both end with."""
    return (f"but that is a mean {fmt_dur(per_arrival_ns)} per other rank at each collective it arrived last at, "
            f"{pct:.2f} % of the other ranks' captured time (vs ≥ {MIN_WAIT_PCT:.0f} %): too little waiting to name a "
            "rank the others wait for")


# --------------------------------------------------------------------- what made the late rank late
#: "launched late": the median over a rank's late arrivals of :func:`idle_share` reaches this (its GPU sat idle,
#: since its previous collective of that name, longer than the earliest rank's by at least half of how late it was:
#: the work was launched late) — docs/FINDINGS.md "NCCL"
LAUNCHED_LATE_SHARE = 0.5
#: "GPU work ran longer": that median is at most this (its GPU idled no longer than the earliest rank's since the
#: previous collective: the work in between took longer); between the two the trace names no cause
GPU_WORK_SHARE = 0.1
LAUNCHED_LATE = "launched_late"
GPU_WORK = "gpu_work"


def idle_since_previous(start: np.ndarray, end: np.ndarray, device: np.ndarray, rows: np.ndarray,
                        group: np.ndarray) -> np.ndarray:
    """Per kernel of ``rows`` (indices into ``start`` / ``end`` / ``device``: every kernel of the trace, in any
    order) with its ``group`` (an integer key per row of ``rows``: one collective name on one rank): its **idle
    since the previous** (ns) = the time its device ran no kernel (any process's, any stream's) between the end of
    the previous kernel of its group (the one of ``rows`` with the same key just before it in start order) and its
    own start; 0 when that previous kernel ends at or after its start; −1 (unknown) for the first of its group.
    Durations on the device's own clock only. One sort of the queries; per device with a query, the union of its
    kernels and two ``searchsorted`` (the union's length before each end of the stretch)."""
    start, end = np.asarray(start, np.int64), np.asarray(end, np.int64)
    device, rows = np.asarray(device, np.int64), np.asarray(rows, np.int64)
    group = np.asarray(group, np.int64)
    out = np.full(rows.shape[0], -1, np.int64)
    if rows.shape[0] == 0:
        return out
    o = np.lexsort((end[rows], start[rows], group))   # per group in start order
    so = rows[o]
    has_prev = np.zeros(so.shape[0], bool)
    has_prev[1:] = group[o][1:] == group[o][:-1]
    b = start[so]
    a = np.minimum(np.roll(end[so], 1), b)            # the stretch [previous end, own start); empty if it overlaps
    idle = np.full(so.shape[0], -1, np.int64)
    for d, q in rows_by_value(device[so]):           # the devices asked about: few
        q = q[has_prev[q]]
        if q.shape[0] == 0:
            continue
        m = device == d
        u = union_blocks(start[m], end[m])
        busy = covered_before(u, b[q]) - covered_before(u, a[q])
        idle[q] = (b[q] - a[q]) - busy
    out[o] = idle
    return out


def excess_idle(late: np.ndarray, earliest: np.ndarray) -> np.ndarray:
    """Per late arrival: the late rank's :func:`idle_since_previous` less the earliest member's at the same
    collective, at least 0 (−1 where either is unknown): the part of its lateness its GPU spent idle. Both are
    durations on each rank's own clock (clock-free); with the previous collective ending together on both ranks,
    lateness = this difference of idle + the difference of GPU busy time over the stretch."""
    late, earliest = np.asarray(late, np.int64), np.asarray(earliest, np.int64)
    return np.where((late >= 0) & (earliest >= 0), np.maximum(late - earliest, 0), -1)


def idle_share(idle: np.ndarray, late_by: np.ndarray) -> np.ndarray:
    """Per late arrival: min(its :func:`excess_idle`, how late it was) / how late it was, in [0, 1] (NaN where the
    idle is unknown, −1, or it was not late)."""
    idle, late_by = np.asarray(idle, np.float64), np.asarray(late_by, np.float64)
    ok = (idle >= 0) & (late_by > 0)
    out = np.full(idle.shape[0], np.nan)
    out[ok] = np.minimum(idle[ok], late_by[ok]) / late_by[ok]
    return out


def late_idle_medians(idle: np.ndarray, late_by: np.ndarray) -> Tuple[Optional[int], Optional[int], Optional[float]]:
    """Over a rank's late arrivals (its :func:`excess_idle` at each, how late it was at each) whose idle is known
    (≥ 0): the medians of the excess idle (ns, rounded half up), of the lateness (ns, rounded half up) and of
    :func:`idle_share` (4 places); (None, None, None) when none is known."""
    idle, late_by = np.asarray(idle, np.int64), np.asarray(late_by, np.int64)
    known = idle >= 0
    if not known.any():
        return None, None, None
    i, lb = idle[known], late_by[known]
    return (int(round_half_up(np.float64(median(i)))), int(round_half_up(np.float64(median(lb)))),
            round(float(median(idle_share(i, lb))), 4))


def late_cause(share_p50: Optional[float]) -> Optional[str]:
    """:data:`LAUNCHED_LATE` when the median :func:`idle_share` over the late rank's late arrivals is ≥
    :data:`LAUNCHED_LATE_SHARE`, :data:`GPU_WORK` when it is ≤ :data:`GPU_WORK_SHARE`, else (or unknown) None."""
    if share_p50 is None:
        return None
    if share_p50 >= LAUNCHED_LATE_SHARE:
        return LAUNCHED_LATE
    return GPU_WORK if share_p50 <= GPU_WORK_SHARE else None
