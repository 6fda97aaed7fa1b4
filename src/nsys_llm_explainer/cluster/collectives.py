"""Collectives (NCCL and custom collective kernels) matched across the ranks of several files: ranks, matching by
collective name and time (the index shift that makes each rank's kernels overlap the reference rank's; issue order
when the clocks are not aligned or nothing overlaps), waits (clock-free: a kernel's duration less the instance's
shortest), skew, end spread, late arrivers, split names (definitions: docs/CLUSTER.md, "Collectives across ranks").
Without aligned clocks only counts are given."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..analyses.common.stats import median, round_half_up
from ..analyses.comms.arrival import Arrivals, excess_idle, last_arrivals, late_idle_medians, late_together, late_with
from ..analyses.comms.matching import MATCH_MIXED, MATCH_ORDER, MATCH_TIME, member_shifts, overall_matching
from ..analyses.comms.nccl import P2P_RE, rank_label
from ..jsonable import NONE_OMITTED, FieldsJson, Outcome
from .align import Alignment
from .summary import FileSummary, device_rank, file_names


def _timed() -> Any:
    """A field only rows on aligned clocks have (left out of cluster.json when None)."""
    return field(default=None, metadata=NONE_OMITTED)


@dataclass(frozen=True)
class RankRow(FieldsJson):
    """``collectives.ranks[]``: one rank's communication kernels (NCCL and custom all-reduce); the wait columns when
    the clocks were aligned."""

    rank: str
    file: str                         # the file label
    pid: int
    device_id: int
    nccl_count: int                   # its NCCL kernels
    nccl_total_ns: int                # Σ (end − start) of its NCCL kernels
    #: its kernels in matched instances; None (not measured) when its every name is a point-to-point one on > 2 ranks
    #: (:func:`p2p_many`: left out of the matched counts, waits and last arrivals), as are its wait columns below
    matched: Optional[int]
    #: its custom all-reduce kernels and their Σ (end − start); None (not written) when no file has any
    custom_count: Optional[int] = field(default=None, metadata=NONE_OMITTED)
    custom_total_ns: Optional[int] = field(default=None, metadata=NONE_OMITTED)
    wait_ns_total: Optional[int] = _timed()
    wait_mean_ns: Optional[int] = _timed()
    wait_p50_ns: Optional[int] = _timed()
    last_arrival_count: Optional[int] = _timed()
    #: last_arrival_count / with_last_arriver (analyses/comms/arrival: the single-file verdict's rule)
    last_arrival_share: Optional[float] = _timed()
    #: its matched instances that had a last arriver (not all kernels ran as long): the share's denominator
    with_last_arriver: Optional[int] = _timed()
    #: Σ of its matched kernels' waiting part [own start, own start + wait) inside its file's steady window
    wait_in_window_ns: Optional[int] = _timed()
    #: the waiting it caused: Σ over the matched instances it arrived last at of the other members' waits
    wait_caused_ns: Optional[int] = _timed()
    #: over the matched instances it arrived last at whose excess idle is known (docs/CLUSTER.md "What made the
    #: late rank late"): medians of its excess idle (its GPU's idle since its previous kernel of the name less the
    #: earliest member's, at least 0: analyses/comms/arrival ``excess_idle``), of how late it was (the instance's
    #: skew) and of min(excess idle, lateness) / lateness; None (not written) when it arrived last nowhere or no
    #: such idle is known
    late_idle_before_p50_ns: Optional[int] = _timed()
    late_by_p50_ns: Optional[int] = _timed()
    late_idle_share_p50: Optional[float] = _timed()
    #: the ranks late together with it (analyses/comms/arrival ``late_with``): at half or more of the instances it
    #: arrived last at, each arrived within a quarter of its lateness; () none; None (not written) when it arrived
    #: last nowhere
    late_with: Optional[Tuple[str, ...]] = _timed()


@dataclass(frozen=True)
class NameRow(FieldsJson):
    """``collectives.by_name[]``: one collective name over the ranks running it; the skew columns when the clocks
    were aligned and an instance was matched."""

    name: str
    ranks: int
    matched: int                      # matched instances
    kernels: int
    unmatched_kernels: int
    matching: Optional[str] = field(default=None, metadata=NONE_OMITTED)   # MATCH_TIME / MATCH_ORDER; None: one rank
    skew_total_ns: Optional[int] = _timed()
    skew_p50_ns: Optional[int] = _timed()
    skew_max_ns: Optional[int] = _timed()
    most_late_rank: Optional[str] = _timed()
    most_late_share: Optional[float] = _timed()
    end_spread_p50_ns: Optional[int] = _timed()


@dataclass(frozen=True)
class InstanceRow(FieldsJson):
    """``collectives.instances[]``: one matched instance on the aligned clock."""

    name: str
    seq: int                          # k: the name's k-th matched instance (issue order on every member rank)
    late_rank: Optional[str]          # its last arriver; None when every member's kernel ran as long (skew 0)
    first_start_ns: int
    last_start_ns: int
    skew_ns: int
    end_spread_ns: int


@dataclass(frozen=True)
class SplitName(FieldsJson):
    """``collectives.split_names[]``: a (rank, collective name) pair whose kernels run on several streams."""

    rank: str
    name: str
    streams: Tuple[int, ...]


@dataclass(frozen=True)
class CollectivesResult(Outcome):
    timed: bool                       # waits / late arrivers computed (clocks aligned)
    ranks: Tuple[RankRow, ...] = ()
    by_name: Tuple[NameRow, ...] = ()
    instances: Tuple[InstanceRow, ...] = ()   # one row per matched instance
    matched_collectives: int = 0
    unmatched_kernels: int = 0
    skew_p50_ns: int = 0              # over all matched instances (timed only)
    end_spread_p50_ns: int = 0        # over all matched instances (timed only)
    split_names: Tuple[SplitName, ...] = ()   # (rank, name, streams) run on several streams
    # MATCH_TIME / MATCH_ORDER / MATCH_MIXED over the names run on >= 2 ranks (None: no such name)
    matching: Optional[str] = field(default=None, metadata=NONE_OMITTED)
    #: custom all-reduce kernels among them (not NCCL: vLLM's cross_device_reduce, TensorRT-LLM's one- / two-shot);
    #: None (not written) when no file has any
    custom_kernels: Optional[int] = field(default=None, metadata=NONE_OMITTED)

    def kind(self) -> str:
        """What the kernels are, in words: "NCCL", "custom" (custom all-reduce / all-to-all kernels: categories
        ``custom_allreduce``, ``all_to_all``) or "NCCL and custom"."""
        if not self.custom_kernels:
            return "NCCL"
        return "NCCL and custom" if any(r.nccl_count for r in self.ranks) else "custom"

    def order_fallbacks(self) -> Tuple[str, ...]:
        """The names matched by issue order although the clocks were aligned: on some rank no kernel of the name
        overlaps one of the reference rank's."""
        return tuple(r.name for r in self.by_name if self.timed and r.matching == MATCH_ORDER)

    def how_matched(self) -> str:
        """How the instances were matched, in words (the cluster report's NCCL section and warnings)."""
        if self.matching == MATCH_TIME:
            return "by time: the kernels that overlap on the aligned clocks"
        if self.matching == MATCH_MIXED:
            n = len(self.order_fallbacks())
            return (f"by time where the kernels overlap on the aligned clocks, in issue order for {n} name(s) whose "
                    "kernels on some rank never overlap another rank's")
        if self.timed:
            return "in issue order, as on some rank no kernel of a name overlaps another rank's on the aligned clocks"
        return "in issue order"


def p2p_many(name: str, ranks: int) -> bool:
    """A point-to-point collective name (send / recv: ``analyses/comms/nccl.P2P_RE``) run on more than two ranks:
    its instances name no last arriver (each kernel has one peer, not every rank running the name)."""
    return ranks > 2 and bool(P2P_RE.search(name))


def p2p_only(coll: CollectivesResult) -> bool:
    """Every matched instance is of a point-to-point name (send / recv): the single-file NCCL verdict's rule, no
    late arriver (docs/FINDINGS.md "NCCL", docs/CLUSTER.md)."""
    names = [r.name for r in coll.by_name if r.matched]
    return bool(names) and all(P2P_RE.search(n) for n in names)


def rank_names(files: Sequence[FileSummary]) -> Dict[Tuple[int, int, int], str]:
    """(file index, pid, device) → rank name (docs/CLUSTER.md): its device's (:func:`summary.device_rank`), with the
    pid when several processes run collectives on that device."""
    out: Dict[Tuple[int, int, int], str] = {}
    for i, (f, name) in enumerate(zip(files, file_names(files))):
        keys = sorted({(s.pid, s.device_id) for s in f.nccl})
        devs = {d.device_id for d in f.device_rows} | {dev for _, dev in keys}
        for pid, dev in keys:
            shared = sum(d == dev for _, d in keys) > 1
            out[(i, pid, dev)] = f"{name}/{rank_label(pid, dev, '/')}" if shared else device_rank(name, len(devs), dev)
    return out


def _half_up(x: float) -> int:
    return int(round_half_up(np.float64(x)))


def _indices(lens: Sequence[int], shifts: Sequence[int]) -> Tuple[int, int]:
    """[lo, hi): the reference indices k whose k + shift lies within every member's series."""
    lo = max([0] + [-d for d in shifts])
    hi = min(n - d for n, d in zip(lens, shifts))
    return lo, max(lo, hi)


def match_collectives(files: Sequence[FileSummary], al: Alignment) -> CollectivesResult:
    names = rank_names(files)
    if not names:
        return CollectivesResult(False, "no NCCL or custom collective kernels in any file", False)
    order = sorted(names)
    rix = {k: j for j, k in enumerate(order)}
    series: Dict[str, Dict[int, Any]] = {}   # name → rank index → (its series of that name, file index)
    for i, f in enumerate(files):
        for s in f.nccl:
            series.setdefault(s.name, {})[rix[(i, s.pid, s.device_id)]] = (s, i)
    timed = al.aligned
    n = len(order)
    n_custom = sum(len(s.start) for f in files for s in f.nccl if s.custom)
    waits: List[List[np.ndarray]] = [[] for _ in range(n)]
    in_window = np.zeros(n, np.int64)     # per rank: its waiting inside its file's steady window (aligned clock)
    matched_per = np.zeros(n, np.int64)
    last_cnt = np.zeros(n, np.int64)
    contested = np.zeros(n, np.int64)    # per rank: its matched instances that had a last arriver
    caused = np.zeros(n, np.int64)       # per rank: the others' waits at the instances it arrived last at
    together = np.zeros((n, n), np.int64)   # [L, q]: L's late arrivals with q within a quarter of its lateness
    waited = np.zeros(n, np.int64)       # per rank: Σ of its waits
    late_idle: List[List[np.ndarray]] = [[] for _ in range(n)]   # per rank: its excess idle, where it was last
    late_by: List[List[np.ndarray]] = [[] for _ in range(n)]     # … and how late it was there (the skew)
    by_name: List[NameRow] = []
    instances: List[InstanceRow] = []
    all_skew: List[np.ndarray] = []
    all_spread: List[np.ndarray] = []
    for cname in sorted(series):
        ser = series[cname]
        members = sorted(ser)
        lens = [len(ser[r][0].start) for r in members]
        shifts = [0] * len(members)
        method: Optional[str] = None
        if len(members) >= 2:
            method = MATCH_ORDER
            if timed:   # by time: each member's shift against the member with the most kernels (first such)
                offs = [int(al.offsets_ns[ser[r][1]] or 0) for r in members]
                st, en = ([np.asarray(getattr(ser[r][0], a), np.int64) + o for r, o in zip(members, offs)]
                          for a in ("start", "end"))
                found = member_shifts(st, en)
                if found is not None:
                    method, shifts = MATCH_TIME, found
        lo, hi = _indices(lens, shifts) if len(members) >= 2 else (0, 0)
        m = hi - lo
        mem = np.array(members, np.int64)
        # a point-to-point name among > 2 ranks: each send/recv has one peer (a ring's neighbours, another pipeline
        # pair), so an instance is not one collective of its members: matched (by_name), but not in the ranks'
        # matched count, waits or last arrivals; its waiting parts stay in each rank's wait_in_window_ns (time
        # spinning, net busy) (docs/CLUSTER.md)
        many = p2p_many(cname, len(members))
        if not many:
            matched_per[mem] += m
        row = NameRow(cname, len(members), m, sum(lens), sum(lens) - m * len(members), method)
        if timed and m:
            # starts[j, k]: aligned start of member j's kernel of the k-th matched instance of this name
            starts, ends = (np.stack([x[lo + d:hi + d] for x, d in zip(arr, shifts)]) for arr in (st, en))
            spread = ends.max(axis=0) - ends.min(axis=0)
            all_spread.append(spread)
            last, first = starts.max(axis=0), starts.min(axis=0)
            # clock-free: the kernels of one collective end together, so a kernel's wait is its duration less the
            # instance's shortest (no host clock compared: docs/CLUSTER.md "Collectives across ranks")
            durs = ends - starts
            # the one rule (analyses/comms/arrival), the arrival = − duration: the last arriver ran the shortest
            # kernel, a member's wait = its duration − the instance's shortest; an instance whose kernels all ran
            # as long has no last arriver and counts for nobody, in neither part
            inst_k, rank_k = np.tile(np.arange(m), len(members)), np.repeat(mem, m)
            arr = last_arrivals(inst_k, rank_k, -durs.reshape(-1), n)
            if many:   # the shortest kernel is not the one every member waited for: no last arriver
                z = np.zeros_like(arr.last)
                arr = Arrivals(np.full_like(arr.late, -1), z, z, arr.wait, z, z)
            together += late_with(inst_k, rank_k, arr, n)
            wait = arr.wait.reshape(len(members), m)
            sk = wait.max(axis=0)
            last_cnt += arr.last
            contested += arr.contested
            caused += arr.caused   # the waiting each last arriver caused: the others' waits where it was last
            waited += arr.waited
            late_j = np.searchsorted(mem, np.maximum(arr.late, mem[0]))   # member position (0 for a tied instance)
            late_c = arr.last[mem]
            has = arr.late >= 0
            n_late = int(has.sum())
            idle = np.stack([np.asarray(ser[r][0].idle_since, np.int64)[lo + d:hi + d]
                             for r, d in zip(members, shifts)])
            # the earliest member of each instance: the longest kernel (ties: the first member), clock-free
            idle_first = idle[np.argmax(durs, axis=0), np.arange(m)]
            kk = np.flatnonzero(has)
            for j in range(len(members)):
                if not many:
                    waits[members[j]].append(wait[j])
                at = kk[late_j[kk] == j]   # the instances member j arrived last at
                late_idle[members[j]].append(excess_idle(idle[j, at], idle_first[at]))
                late_by[members[j]].append(sk[at])
                f = files[ser[members[j]][1]]
                w0, w1 = f.window_start_ns + offs[j], f.window_end_ns + offs[j]
                lo_w, hi_w = np.maximum(starts[j], w0), np.minimum(starts[j] + wait[j], w1)
                in_window[members[j]] += int(np.maximum(hi_w - lo_w, 0).sum())
            all_skew.append(sk)
            late_names = [names[order[r]] for r in members]
            instances.extend(InstanceRow(cname, k, late_names[lj] if h else None, f0, l0, s0, e0)
                             for k, (lj, h, f0, l0, s0, e0) in enumerate(zip(late_j.tolist(), has.tolist(),
                                                                             first.tolist(), last.tolist(),
                                                                             sk.tolist(), spread.tolist())))
            top = max(range(len(members)), key=lambda j: (int(late_c[j]), -members[j]))
            # most often last: one rank only; ranks tied at the top count (a straggler that moves) name nobody
            sole = late_c[top] > 0 and int((late_c == late_c[top]).sum()) == 1
            row = replace(row, skew_total_ns=int(sk.sum()), skew_p50_ns=_half_up(median(sk)),
                          skew_max_ns=int(sk.max()), most_late_rank=late_names[top] if sole else None,
                          most_late_share=round(int(late_c[top]) / n_late, 4) if n_late else 0.0,
                          end_spread_p50_ns=_half_up(median(spread)))
        by_name.append(row)
    arrivals = Arrivals(np.empty(0, np.int64), last_cnt, contested, np.empty(0, np.int64), waited, caused)
    ranks: List[RankRow] = []
    for j, key in enumerate(order):
        i, pid, dev = key
        own = [x[j][0] for x in series.values() if j in x]   # its series, one per name
        cnt = {c: sum(len(s.start) for s in own if s.custom == c) for c in (False, True)}
        tot = {c: sum(int((np.asarray(s.end, np.int64) - np.asarray(s.start, np.int64)).sum())
                      for s in own if s.custom == c) for c in (False, True)}
        # only send/recv names left out of the figures (p2p_many): nothing measured, not "nobody waited"
        measured = any(not p2p_many(nm, len(x)) for nm, x in series.items() if j in x)
        rrow = RankRow(names[key], files[i].label, pid, dev, cnt[False], tot[False],
                       int(matched_per[j]) if measured else None,
                       cnt[True] if n_custom else None, tot[True] if n_custom else None)
        if timed:
            w = np.concatenate(waits[j]) if waits[j] else np.empty(0, np.int64)
            rrow = replace(rrow, wait_ns_total=int(w.sum()), wait_mean_ns=_half_up(w.mean()) if w.shape[0] else 0,
                           wait_p50_ns=_half_up(median(w)) if w.shape[0] else 0, last_arrival_count=int(last_cnt[j]),
                           last_arrival_share=round(arrivals.share(j), 4), with_last_arriver=int(contested[j]),
                           wait_in_window_ns=int(in_window[j]), wait_caused_ns=int(caused[j]))
            if not measured:     # its waiting parts stay in wait_in_window_ns (time spinning, net busy)
                rrow = replace(rrow, wait_ns_total=None, wait_mean_ns=None, wait_p50_ns=None,
                               last_arrival_count=None, last_arrival_share=None, with_last_arriver=None,
                               wait_caused_ns=None)
            li, lb = (np.concatenate(x[j]) if x[j] else np.empty(0, np.int64) for x in (late_idle, late_by))
            ip, lp, sp = late_idle_medians(li, lb)
            rrow = replace(rrow, late_idle_before_p50_ns=ip, late_by_p50_ns=lp, late_idle_share_p50=sp)
            if last_cnt[j]:   # the ranks within a quarter of its lateness at half or more of its late arrivals
                rrow = replace(rrow, late_with=tuple(names[order[q]] for q in late_together(together[j],
                                                                                          int(last_cnt[j]))))
        ranks.append(rrow)
    matched_total = sum(r.matched for r in by_name)
    reason = None if timed else f"clocks not aligned: {al.reason}"
    if matched_total == 0:
        what = "NCCL" if not n_custom else "custom collective" if not any(r.nccl_count for r in ranks) \
            else "communication"
        reason = "no collective could be matched across ranks" if n >= 2 else f"{what} kernels on a single rank"
        alone = [(nm, names[order[next(iter(x))]]) for nm, x in sorted(series.items()) if len(x) == 1]
        if n >= 2 and len(alone) == len(series) and any(P2P_RE.search(nm) for nm, _ in alone):
            # a pair split across ranks: the send is one kernel name, the receive another (no name on two ranks)
            on = ", ".join(f"{nm.split('(')[0]} on {rk}" for nm, rk in alone[:4])
            reason += (f": the ranks' kernel names differ ({on}" + (f", {len(alone) - 4} more" if len(alone) > 4
                                                                    else "") + "): a send on one rank and its "
                       "receive on another are kernels of different names, and instances are matched by name")
    streams = [(names[(i, s.pid, s.device_id)], s.name, np.unique(np.asarray(s.stream, np.int64)))
               for i, f in enumerate(files) for s in f.nccl]   # one entry per (rank, name) series
    split = tuple(SplitName(r, nm, tuple(st.tolist())) for r, nm, st in streams if st.shape[0] > 1)
    sk_p50 = _half_up(median(np.concatenate(all_skew))) if all_skew else 0
    es_p50 = _half_up(median(np.concatenate(all_spread))) if all_spread else 0
    how = overall_matching([r.matching for r in by_name if r.matching is not None])   # the names on >= 2 ranks
    return CollectivesResult(True, reason, timed and matched_total > 0, tuple(ranks), tuple(by_name),
                             tuple(instances), matched_total, sum(r.unmatched_kernels for r in by_name), sk_p50,
                             es_p50, split, how, n_custom or None)
