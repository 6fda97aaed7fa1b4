"""NCCL collectives across GPUs / processes, and straggler (late rank) detection: per device / PID totals,
collectives matched across ranks by name and time (the index shift per rank that makes its kernels overlap the
reference rank's, :mod:`.matching`; issue order when no kernel overlaps), and the verdict (docs/FINDINGS.md, "NCCL").
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from ...model.timeline import rows_by_value, spans_by
from ...model.trace import Kernels, TraceModel
from ...vocabulary.units import fmt_dur
from ..common.stats import group_sums, median, pct, round_half_up
from ..idle.gpu_time import GpuTimeResult
from .arrival import (
    HIGH_SHARE,
    MIN_LATE_ARRIVALS,
    MIN_LATE_SHARE,
    MIN_MATCHED,
    MIN_WAIT_PCT,
    caused_pct_of_window,
    caused_share,
    excess_idle,
    idle_since_previous,
    last_arrivals,
    late_idle_medians,
    late_rank,
    late_together,
    late_with,
    little_waiting,
)
from .matching import MATCH_MIXED, MATCH_ORDER, MATCH_TIME, member_shifts, overall_matching
from .nccl_result import (
    CustomAllReduce,
    NcclCollective,
    NcclDeviceRow,
    NcclPidRow,
    NcclRank,
    NcclResult,
    NcclStraggler,
)

NCCL_RE = re.compile(r"nccl", re.IGNORECASE)
COLL_RE = re.compile(r"nccl\w*", re.IGNORECASE)
#: point-to-point NCCL kernels (send / recv), by their collective name (:func:`collective_name`): a receiver that
#: waits for its sender waits on the data it receives (a pipeline stage, a prefill-to-decode KV hand-off), not on a
#: late rank of a collective, so they take no part in the straggler verdict. Spellings: ``ncclDevKernel_SendRecv``,
#: ``ncclDevKernel_Send`` / ``_Recv`` (NCCL >= 2.19), ``ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t`` (2.9 - 2.18),
#: ``ncclSendRecvKernel_copy_i8`` (2.7 - 2.8), and a mangled name left undemangled
#: (``_Z22ncclDevKernel_SendRecv24ncclDevKernelArgs...``: the length of the next name follows)
P2P_RE = re.compile(r"(?:^nccl|_)(?:SendRecv|Send|Recv)(?=_|Kernel|\d|$)", re.IGNORECASE)
CUSTOM_AR_RE = re.compile(r"cross_device_reduce|all_?reduce", re.IGNORECASE)
#: matched kernels "end together" when their median end spread is at most this share of the median wait / skew
#: (the one definition, also used by the cluster's late-arriver claim)
MAX_END_SPREAD_SHARE = 0.5


def rank_label(pid: int, device: int, sep: str = " / ") -> str:
    """The name of a rank (a process on a GPU): "pid P / GPU D"; "GPU D" when the pid is unknown (-1: the kernel
    table has no ``globalPid``, docs/MODEL.md). ``sep``: between the two (the cluster report's "pid P/GPU D")."""
    return f"GPU {device}" if pid < 0 else f"pid {pid}{sep}GPU {device}"


def collective_name(kernel_name: str) -> str:
    m = COLL_RE.search(kernel_name)
    return m.group(0) if m else kernel_name


def nccl_collectives(k: Kernels, custom: Optional[np.ndarray] = None) -> Tuple[np.ndarray, np.ndarray, List[str]]:
    """(per kernel: is it NCCL, or of a ``custom`` name (a mask over ``k.names``); per such kernel, in start order:
    its collective id; the collective names by id), with Python work per distinct kernel name only."""
    named = np.array([bool(NCCL_RE.search(n)) for n in k.names] + [False], bool)
    if custom is not None:
        named[:-1] |= custom
    nm = named[k.name_idx]
    coll_of_name = np.zeros(len(k.names) + 1, np.int64)
    lookup: Dict[str, int] = {}
    for j in np.unique(k.name_idx[nm]).tolist():
        coll_of_name[j] = lookup.setdefault(collective_name(k.names[j]), len(lookup))
    return nm, coll_of_name[k.name_idx[nm]], list(lookup)


def _per_key(key: np.ndarray, nm: np.ndarray, start: np.ndarray, end: np.ndarray, label: str
             ) -> List[Dict[str, Any]]:
    """The fields of each key value's row (the key under ``label``): :class:`NcclDeviceRow` / :class:`NcclPidRow`."""
    key = np.asarray(key)
    kernel_ns = {v: int((end[r] - start[r]).sum()) for v, r in rows_by_value(key)}
    return [{label: v, "count": n, "total_ns": t, "kernel_ns": kernel_ns[v], "pct_of_kernel_ns": pct(t, kernel_ns[v]),
             "union_ns": u} for v, n, t, u in spans_by(key[nm], start[nm], end[nm])]


def _shifts(of_pair: List[Tuple[int, np.ndarray]], n_coll: int, n_rank: int, start: np.ndarray, end: np.ndarray
            ) -> Tuple[np.ndarray, List[str], List[int]]:
    """Per (rank, name) key ``rank * n_coll + name``: the index shift of its kernels against the name's reference
    rank by time (:func:`.matching.member_shifts`, one clock in one export; all 0, issue order, when it finds none);
    also the matching of each name run on >= 2 ranks and the names that fell back to issue order. ``of_pair``: each
    key's kernels in start order. Python work per (rank, name) only."""
    shift = np.zeros(n_rank * n_coll, np.int64)
    by_name: Dict[int, List[Tuple[int, np.ndarray]]] = {}
    for key, rows in of_pair:            # keys ascending: ranks in rank order within a name
        by_name.setdefault(key % n_coll, []).append((key, rows))
    methods: List[str] = []
    fallbacks: List[int] = []
    for c in sorted(by_name):
        mem = by_name[c]
        if len(mem) < 2:
            continue
        found = member_shifts([start[r] for _, r in mem], [end[r] for _, r in mem])
        if found is not None:
            methods.append(MATCH_TIME)
            for (key, _), d in zip(mem, found):
                shift[key] = d
        else:
            methods.append(MATCH_ORDER)
            fallbacks.append(c)
    return shift, methods, fallbacks


def analyze_nccl(model: TraceModel, gpu_time: GpuTimeResult) -> NcclResult:
    """The NCCL figures and the straggler verdict of the whole capture; ``gpu_time``: its devices' recorded time
    over the whole capture (``full``), the denominator of the waiting that matters (:mod:`.arrival`)."""
    k = model.kernels
    if k is None or len(k) == 0:
        return NcclResult(False, "no CUDA kernels were captured")
    nm, coll, coll_names = nccl_collectives(k)
    cm = np.array([(not NCCL_RE.search(n)) and bool(CUSTOM_AR_RE.search(n)) for n in k.names] + [False],
                  bool)[k.name_idx]
    dur = k.dur
    cnames = sorted({k.names[j] for j in np.unique(k.name_idx[cm]).tolist()})
    custom = CustomAllReduce(count=int(cm.sum()), total_ns=int(dur[cm].sum()), names=tuple(cnames))
    if not nm.any():
        return NcclResult(False, "no NCCL kernels in the trace", custom_allreduce=custom)
    per_device = tuple(NcclDeviceRow(**r) for r in _per_key(k.device, nm, k.start, k.end, "device_id"))
    per_pid = tuple(NcclPidRow(**r) for r in _per_key(k.pid, nm, k.start, k.end, "pid"))

    rows = np.nonzero(nm)[0]                        # start order
    s, d, e = k.start[rows], dur[rows], k.end[rows]
    n_coll = len(coll_names)
    cc = np.bincount(coll, minlength=n_coll)
    ct = np.bincount(coll, weights=d, minlength=n_coll)
    by_name = tuple(sorted((NcclCollective(coll_names[i], int(cc[i]), int(round(ct[i]))) for i in range(n_coll)),
                           key=lambda r: (-r.total_ns, r.name)))

    rfirst, rank, r_cnt, (r_ns,) = group_sums([k.pid[rows], k.device[rows]], d)   # ranks: (pid, device)
    n_rank = rfirst.shape[0]
    rank_pid, rank_dev = k.pid[rows][rfirst], k.device[rows][rfirst]
    # sequence index of each kernel within its (rank, collective name), in start order
    g = rank * n_coll + coll
    seq = np.empty(g.shape[0], np.int64)
    of_pair = rows_by_value(g)             # one sort; Python work per (rank, name) only
    for _, of_g in of_pair:
        seq[of_g] = np.arange(of_g.shape[0])
    shift, methods, fallbacks = _shifts(of_pair, n_coll, n_rank, s.astype(np.int64), e.astype(np.int64))
    # the reference rank's index of each kernel's collective: its (k + d)-th kernel is the reference's k-th
    seq -= shift[g]
    seq -= int(seq.min())
    # ranks per collective name; a (name, seq) collective is matched when every such rank has it
    pairs = np.unique(coll * n_rank + rank)
    ranks_per_coll = np.bincount(pairs // n_rank, minlength=n_coll)
    n_seq = int(seq.max()) + 1
    ucid, cinv, ccount = np.unique(coll * n_seq + seq, return_inverse=True, return_counts=True)
    cinv = cinv.reshape(-1)
    c_coll = ucid // n_seq
    matched_c = (ccount == ranks_per_coll[c_coll]) & (ccount >= 2)
    mrow = matched_c[cinv]
    matched = int(matched_c.sum())
    base_rank = [NcclRank(rank_label(int(rank_pid[r]), int(rank_dev[r])), int(rank_pid[r]), int(rank_dev[r]),
                          int(r_cnt[r]), int(r_ns[r])) for r in range(n_rank)]
    head = NcclResult(True, None, nccl_kernel_count=int(nm.sum()), nccl_total_ns=int(dur[nm].sum()),
                      by_name=by_name, per_device=per_device, per_pid=per_pid, custom_allreduce=custom,
                      ranks=tuple(base_rank), matched_collectives=matched, unmatched_kernels=int((~mrow).sum()),
                      matching=overall_matching(methods),
                      order_fallbacks=tuple(sorted(coll_names[c] for c in fallbacks)) or None)
    if n_rank < 2:
        return replace(head, straggler_reason="NCCL kernels on a single (pid, GPU) rank: nothing to compare")
    if matched == 0:
        return replace(head, straggler_reason="no collective could be matched across ranks")
    p2p = np.array([bool(P2P_RE.search(n)) for n in coll_names], bool)
    if n_rank > 2 and p2p[c_coll[matched_c]].all():   # a send/recv has one peer: order across all ranks pairs others
        return replace(head, straggler_reason=(
            f"the matched NCCL kernels are point-to-point (send / recv) among {n_rank} ranks: each exchanges with its "
            "own peers (a ring's neighbours, a pipeline pair, or every rank in an all-to-all), which kernel names do "
            "not tell apart, so pairing them across all ranks may compare kernels of different peers (and steps); "
            "no arrival figures and no straggler verdict"))

    # arrival figures over the matched collectives that are not point-to-point among > 2 ranks (a send/recv has one
    # peer: the latest start of all ranks is not what a rank of a ring or of another pair waits for)
    judged_c = matched_c & ~p2p[c_coll] if n_rank > 2 else matched_c
    judged = int(judged_c.sum())
    p2p_out = matched - judged   # point-to-point among > 2 ranks: not judged
    # per matched collective: earliest start, latest start, last-arriving rank
    mi = np.nonzero(judged_c[cinv])[0]
    mc = cinv[mi]
    o = np.lexsort((rank[mi], s[mi], mc))
    mi, mc = mi[o], mc[o]
    first = np.ones(mi.shape[0], bool)
    first[1:] = mc[1:] != mc[:-1]
    starts = np.nonzero(first)[0]
    ends = np.append(starts[1:], mi.shape[0]) - 1
    cmin = s[mi][starts]
    cmax = s[mi][ends]
    wait_ns_total = int((cmax - cmin).sum())
    ce = e[mi]
    spread = np.maximum.reduceat(ce, starts) - np.minimum.reduceat(ce, starts)   # per matched collective
    wait_p50, spread_p50 = median(cmax - cmin), median(spread)
    st = k.stream[rows].astype(np.int64)
    st -= int(st.min())
    width = int(st.max()) + 1
    pair_g = np.unique(g * width + st) // width      # (rank, name) of each distinct (rank, name, stream)
    split_n = int((np.bincount(pair_g) > 1).sum())   # (rank, name) pairs on several streams
    grp = np.cumsum(first) - 1
    skew = s[mi] - cmin[grp]
    arr = last_arrivals(mc, rank[mi], s[mi], n_rank)   # the one rule (.arrival), shared with the cluster
    last_cnt = arr.last
    ranks: List[NcclRank] = []
    rank_mi, d_mi = rank[mi], d[mi]
    win = {dt.device_id: (dt.window_start_ns, dt.window_end_ns) for dt in gpu_time.devices}
    w0, w1 = (np.array([win.get(int(x), (0, 0))[i] for x in rank_dev], np.int64)[rank_mi] for i in (0, 1))
    in_win = np.bincount(rank_mi, np.maximum(np.minimum(s[mi] + arr.wait, w1) - np.maximum(s[mi], w0), 0), n_rank)
    of_rank = dict(rows_by_value(rank_mi))   # each rank's matched kernels in one sort (no mask per rank)
    empty = np.empty(0, np.int64)
    for r in range(n_rank):   # loop over ranks only
        m = of_rank.get(r, empty)
        dd = d_mi[m]
        ranks.append(replace(
            base_rank[r], matched=int(m.shape[0]), mean_ns=int(round_half_up(dd.mean())) if dd.shape[0] else 0,
            p50_ns=int(round_half_up(median(dd))),
            mean_start_skew_ns=int(round_half_up(skew[m].mean())) if dd.shape[0] else 0,
            last_arrival_count=int(last_cnt[r]), wait_ns_total=int(arr.waited[r]), wait_caused_ns=int(arr.caused[r]),
            wait_in_window_ns=int(in_win[r])))

    late = late_rank(arr.caused.tolist(), last_cnt.tolist())   # the rank whose late arrivals caused the most waiting
    all_wait = int(arr.waited.sum())
    caused = caused_share(int(arr.caused[late]), all_wait)
    has_last = int((arr.late >= 0).sum())   # collectives with a last arriver (not all started together)
    contested = int(arr.contested[late])    # those the late rank took part in: the share's denominator
    share = arr.share(late)
    lt = ranks[late]
    full = {d.device_id: d.full.window_ns for d in gpu_time.devices if d.full is not None}
    wait_pct = caused_pct_of_window(int(arr.caused[late]), [full.get(x.device_id, 0) for j, x in enumerate(ranks)
                                                                if j != late])
    together = late_together(late_with(mc, rank[mi], arr, n_rank)[late], int(last_cnt[late]))
    lt_matched = int(lt.matched or 0)
    if lt_matched == judged:
        of_what = ((f"of the {judged} collectives judged" if p2p_out else "of collectives") if contested == judged
                   else f"of the {contested} collectives with a last arriver")
    else:
        of_what = f"of the {contested} collectives with a last arriver it took part in"
    late_words = (f"{lt.rank} started last in {100 * share:.0f}% {of_what}, its late arrivals causing "
                  f"{100 * caused:.0f}% of the {fmt_dur(all_wait)} of waiting")
    straggler = None
    reason = None
    by = {MATCH_TIME: "time", MATCH_MIXED: "time or issue order"}.get(head.matching or MATCH_ORDER, MATCH_ORDER)
    if p2p[c_coll[judged_c]].all():
        reason = ("the matched NCCL kernels are point-to-point (send / recv): a receiver waits for its sender's "
                  "data, in a one-way hand-off (a pipeline stage, a KV-cache transfer) or in an all-to-all exchange "
                  "of send/recv pairs (MoE expert parallelism), which kernel names do not tell apart; no straggler "
                  "verdict" + (f" ({late_words}: in an exchange, its work before the send/recv sets the wait)"
                               if has_last else ""))
    elif split_n:
        reason = (f"{split_n} (rank, collective) pair(s) run on several CUDA streams: the collective name is shared "
                  f"by several communicators, which the export does not name, so matching by name and {by} "
                  "may mix them; no straggler verdict")
    elif fallbacks:
        reason = (f"on some rank no NCCL kernel of {len(fallbacks)} collective name(s) overlaps another rank's "
                  f"({', '.join(head.order_fallbacks or ())}): kernels that never run together are not one "
                  "collective, so they were paired in issue order; no straggler verdict")
    elif spread_p50 > wait_p50 * MAX_END_SPREAD_SHARE:
        reason = (f"the matched NCCL kernels do not end together (median end spread {spread_p50:,.0f} ns vs median "
                  f"wait {wait_p50:,.0f} ns): matching by name and {by} may pair kernels of different "
                  "communicators; no straggler verdict")
    elif not has_last:
        reason = ("no rank arrives late: in every matched collective the kernels started together on every rank"
                  if not p2p_out else
                  f"no rank arrives late at the {judged} matched collectives judged: in every one the kernels started "
                  f"together on every rank (the {p2p_out} point-to-point ones, where each rank waits for its own "
                  "peers, are not judged)")
    elif lt_matched < MIN_MATCHED:
        reason = (f"{late_words}, but it took part in {lt_matched} matched collective(s) only (vs ≥ {MIN_MATCHED}): "
                  "too few to name a late rank")
    elif caused < MIN_LATE_SHARE:
        reason = (f"no rank's late arrivals cause ≥ {100 * MIN_LATE_SHARE:.0f}% of the waiting (the most: "
                  f"{late_words})")
    elif int(last_cnt[late]) < MIN_LATE_ARRIVALS:
        reason = (f"{late_words}, but at {int(last_cnt[late])} collective only (vs ≥ {MIN_LATE_ARRIVALS}): one "
                  "stall is an event, not a rank the others keep waiting for")
    elif together:
        reason = (f"{late_words}, but {', '.join(ranks[q].rank for q in together)} started within a quarter of "
                  "its lateness at half or more of those collectives: those ranks were late together (the others would "
                  f"have waited for them had {lt.rank} been on time), not {lt.rank} alone; no straggler verdict")
    elif wait_pct < MIN_WAIT_PCT:
        per = int(arr.caused[late]) / max(int(last_cnt[late]), 1) / (n_rank - 1)
        reason = f"{late_words}, {little_waiting(wait_pct, per)}; no straggler verdict"
    else:
        waiting = max((r for r in range(n_rank) if r != late), key=lambda r: (int(arr.waited[r]), -r))
        w = ranks[waiting]
        at = np.flatnonzero((rank_mi == late) & (arr.late[grp] == late))   # its kernels where it started last
        # what made it late: its idle since its previous kernel of the name less the earliest member's (the first
        # of its collective in (start, rank) order), against its lateness (.arrival, docs/FINDINGS.md "NCCL")
        since = idle_since_previous(k.start, k.end, k.device, rows, g)[mi]
        ip, lp, sp = late_idle_medians(excess_idle(since[at], since[starts][grp[at]]), skew[at])
        straggler = NcclStraggler(
            waiting_rank=w.rank, waiting_pid=w.pid, waiting_device_id=w.device_id, late_rank=lt.rank,
            late_pid=lt.pid, late_device_id=lt.device_id, wait_ns_total=int(arr.caused[late]),
            wait_caused_share=caused, last_arrivals=int(last_cnt[late]), late_share=round(float(share), 4),
            matched_collectives=judged, confidence="high" if max(share, caused) >= HIGH_SHARE else "medium",
            tied_collectives=(judged - has_last) or None, with_last_arriver=contested, wait_pct_of_window=wait_pct,
            late_idle_before_p50_ns=ip, late_by_p50_ns=lp, late_idle_share_p50=sp)
    return replace(head, ranks=tuple(ranks), wait_ns_total=wait_ns_total, straggler=straggler,
                   straggler_reason=reason, p2p_left_out=p2p_out or None)
