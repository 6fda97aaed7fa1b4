"""Last arrivals at matched collectives: one rule for a single file's ranks (:mod:`.nccl`) and a cluster's
(:mod:`nsys_llm_explainer.cluster.collectives`); definition in docs/FINDINGS.md "NCCL" and docs/CLUSTER.md
"Collectives across ranks".

Per matched instance (one kernel per member rank): the **last arriver** is the member whose kernel arrives latest
(ties at the latest arrival: the lowest rank index); an instance whose kernels all arrive together has none and
counts for no rank. A rank's **last-arrival share** = the instances it arrived last at / the instances it took
part in that had a last arriver (instances that blame nobody count in neither part). The arrival is the kernel's
start where the ranks share one clock (one export), and minus its duration where they do not (several files: the
kernels of one collective end together, so the latest to start is the shortest; the two agree when the ends
coincide)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Arrivals:
    """Last arrivals over matched instances (module docstring); instances in ascending order of their id."""

    #: per instance: its last arriver's rank index; -1 when all its kernels arrived together (no last arriver)
    late: np.ndarray
    #: per rank: the instances it arrived last at
    last: np.ndarray
    #: per rank: the instances it took part in that had a last arriver (the share's denominator)
    contested: np.ndarray

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
        return Arrivals(np.empty(0, np.int64), z, z.copy())
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
    row_has = has_last[np.cumsum(first) - 1]
    contested = np.bincount(sr[row_has], minlength=n_rank).astype(np.int64)
    return Arrivals(late, last, contested)
