"""Claims about single ranks of a cluster (:class:`RankClaim`: a single-file :class:`~findings.base.Finding` whose
checks are scoped to a rank, :class:`RankScope`); made only when every check holds. The claims and their checks:
docs/CLUSTER.md, "Per-rank view and claims"."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..analyses.common.stats import median, pct
from ..analyses.comms.arrival import (
    GPU_WORK,
    GPU_WORK_SHARE,
    HIGH_SHARE,
    LATE_TOGETHER_SHARE,
    LAUNCHED_LATE,
    LAUNCHED_LATE_SHARE,
    MIN_LATE_ARRIVALS,
    MIN_LATE_SHARE,
    MIN_MATCHED,
    MIN_WAIT_PCT,
    caused_pct_of_window,
    caused_share,
    late_cause,
    late_rank,
    little_waiting,
)
from ..analyses.comms.nccl import MAX_END_SPREAD_SHARE, NCCL_RE
from ..findings.base import Check, Finding, Scope
from ..jsonable import FieldsJson
from ..vocabulary.units import fmt_dur as dur
from .collectives import CollectivesResult, RankRow, p2p_only

if TYPE_CHECKING:
    from .summary import DeviceRow

#: another device "as low" / "as slow" as the named one: within this share of its gap to the others (the late-rank
#: rule's "late together" share, one definition)
NEAR_SHARE = LATE_TOGETHER_SHARE
#: the late-arriver rule's thresholds (MIN_MATCHED, MIN_LATE_ARRIVALS, MIN_LATE_SHARE) are the single-file
#: verdict's: analyses/comms/arrival.py
MIN_BUSY_GAP_PCT = 10.0
MIN_STEP_RATIO = 1.1
#: each claim's finding category (cluster.json does not carry it)
CATEGORY = {"late_arriver": "nccl_wait", "low_busy_rank": "rank_outlier", "slow_step_rank": "rank_outlier"}


@dataclass(frozen=True)
class RankScope(Scope):
    """The scope of a cluster check: the rank (its name: summary.device_rank) it is about; None: the cluster."""

    rank: Optional[str] = None


@dataclass(frozen=True)
class RankCheck(FieldsJson):
    """``claims[].checks[]``: a single-file :class:`Check` whose scope is a rank (``{"rank": …}``) or the cluster
    (``{}``)."""

    metric: str
    scope: Dict[str, Optional[str]]
    observed: float
    op: str
    threshold: float

    def check(self) -> Check:
        return Check(self.metric, self.observed, self.op, self.threshold, RankScope(rank=self.scope.get("rank")))

    def holds(self) -> bool:
        return self.check().holds()


@dataclass(frozen=True)
class RankClaim(FieldsJson):
    """``claims[]``: a claim about one rank of a cluster, made only when all its checks hold; :attr:`finding` is it as
    a single-file :class:`Finding` (its category its id's, :data:`CATEGORY`; its confidence ``high``)."""

    id: str
    rank: str
    severity: str
    title: str
    evidence: Tuple[str, ...]
    time_at_stake_ns: int
    checks: Tuple[RankCheck, ...]
    advice: Tuple[str, ...]

    @property
    def finding(self) -> Finding:
        return Finding(id=self.id, category=CATEGORY.get(self.id, "cluster"), severity=self.severity,
                       confidence="high", title=self.title, evidence=self.evidence, recommendation=self.advice,
                       time_at_stake_ns=self.time_at_stake_ns, checks=tuple(c.check() for c in self.checks))


def _check(metric: str, observed: Any, op: str, threshold: Any, rank: Optional[str] = None) -> RankCheck:
    return RankCheck(metric, {} if rank is None else {"rank": rank}, observed, op, threshold)


def _claim(rank: str, id: str, severity: str, title: str, evidence: Sequence[str],
           time_at_stake_ns: int, checks: Sequence[RankCheck], advice: str | Sequence[str]) -> RankClaim:
    c = RankClaim(id, rank, severity, title, tuple(evidence), time_at_stake_ns, tuple(checks),
                  (advice,) if isinstance(advice, str) else tuple(advice))
    assert c.finding.holds(), id
    return c


def _late_checks(coll: CollectivesResult) -> Optional[Tuple[int, List[RankCheck], List[RankRow], float, float]]:
    """The rank the late-rank rule names (analyses/comms/arrival.late_rank: the rank whose late arrivals caused the
    most waiting; its index in ``coll.ranks``), the late-arriver claim's checks on it, the other ranks, their mean
    wait and the share of all the waiting it caused; None without ranks or when a name was matched by issue order
    on aligned clocks (its kernels never overlapped: no wait claim)."""
    ranks = list(coll.ranks)
    if not coll.available or not ranks or coll.order_fallbacks():
        return None
    late = late_rank([x.wait_caused_ns or 0 for x in ranks], [x.last_arrival_count or 0 for x in ranks])
    r = ranks[late]
    others = [x for j, x in enumerate(ranks) if j != late]
    mean_wait = float(np.mean([x.wait_ns_total or 0 for x in others])) if others else 0.0
    caused = caused_share(r.wait_caused_ns or 0, sum(x.wait_ns_total or 0 for x in ranks))
    return late, [_check("aligned", int(coll.timed), "==", 1), _check("ranks", len(ranks), ">=", 2),
                  _check("matched", r.matched or 0, ">=", MIN_MATCHED, r.rank),
                  _check("last_arrivals", r.last_arrival_count or 0, ">=", MIN_LATE_ARRIVALS, r.rank),
                  _check("wait_caused_share", caused, ">=", MIN_LATE_SHARE, r.rank),
                  # ranks within a quarter of its lateness (a node late as a whole): the others wait for them too
                  _check("late_with_ranks", len(r.late_with or ()), "==", 0, r.rank),
                  _check("others_mean_wait_ns", int(round(mean_wait)), ">", 0, r.rank),
                  _check("end_spread_p50_ns", coll.end_spread_p50_ns, "<=",
                         int(coll.skew_p50_ns * MAX_END_SPREAD_SHARE)),
                  _check("split_names", len(coll.split_names), "==", 0),
                  _check("point_to_point_only", int(p2p_only(coll)), "==", 0)], others, mean_wait, caused


def late_group(coll: CollectivesResult) -> Tuple[str, ...]:
    """The late rank and the ranks late together with it (its ``late_with``) when that alone withheld the
    late-arriver claim (every other check holds): a group the others waited for; () otherwise."""
    found = _late_checks(coll)
    if found is None:
        return ()
    r = coll.ranks[found[0]]
    failed = {c.metric for c in found[1] if not c.holds()}
    return (r.rank,) + tuple(r.late_with or ()) if failed == {"late_with_ranks"} else ()


#: the late-arriver checks that say whether the matched instances can be judged at all, in words
UNJUDGED = {"end_spread_p50_ns": "the matched kernels do not end together",
            "split_names": "a collective name runs on several CUDA streams of a rank",
            "point_to_point_only": "every matched instance is point-to-point (send / recv)"}


def late_unjudged(coll: CollectivesResult) -> Optional[str]:
    """Why no rank was judged late at the collectives although the clocks were aligned and collectives matched (a
    name matched by issue order, or a failed check of :data:`UNJUDGED`), in words; None when it was judged."""
    if not coll.timed:
        return None
    if coll.order_fallbacks():
        return ("a collective name was matched by issue order, as on the aligned clocks its kernels on some rank "
                "never overlap another rank's")
    found = _late_checks(coll)
    why = [UNJUDGED[c.metric] for c in (found[1] if found else ()) if c.metric in UNJUDGED and not c.holds()]
    return "; ".join(why) or None


def _late_words(coll: CollectivesResult, r: RankRow) -> str:
    """How often the late rank ``r`` arrives last and its share of all the waiting, in words (the claim's evidence,
    the reason it is withheld)."""
    contested = r.with_last_arriver or 0
    kind = coll.kind()
    of = (f"({r.last_arrival_count} of {r.matched}) of the matched {kind} collectives" if contested == r.matched
          else f"({r.last_arrival_count} of the {contested}) of its matched {kind} collectives that had a last "
          f"arriver (in the other {(r.matched or 0) - contested} every rank's kernel ran as long)")
    caused = caused_share(r.wait_caused_ns or 0, sum(x.wait_ns_total or 0 for x in coll.ranks))
    return (f"{r.rank} arrives last in {100.0 * (r.last_arrival_share or 0.0):.0f}% {of}, and its late arrivals "
            f"cause {100 * caused:.0f} % of all the waiting")


def _wait_pct(coll: CollectivesResult, devices: Sequence[DeviceRow], late: int) -> Tuple[float, float]:
    """The waiting the late rank caused as a % of the other ranks' captured time (``wait_pct_of_window``, one scope:
    the collectives matched over the captures, their devices' whole captures) and per other rank at each of its
    late arrivals (ns)."""
    r = coll.ranks[late]
    capture = {(d.file, d.device_id): d.capture_ns for d in devices}
    others = [x for j, x in enumerate(coll.ranks) if j != late]
    pct = caused_pct_of_window(r.wait_caused_ns or 0, [capture.get((x.file, x.device_id), 0) for x in others])
    return pct, (r.wait_caused_ns or 0) / (r.last_arrival_count or 1) / max(len(others), 1)


def late_little(coll: CollectivesResult, devices: Sequence[DeviceRow]) -> Optional[str]:
    """Why no late-arriver claim was made although every other check holds: the waiting the late rank caused is
    under :data:`MIN_WAIT_PCT` of the other ranks' captured time (docs/FINDINGS.md "NCCL"), in words; None
    otherwise."""
    found = _late_checks(coll)
    if found is None or not all(c.holds() for c in found[1]):
        return None
    pct, per = _wait_pct(coll, devices, found[0])
    return f"{_late_words(coll, coll.ranks[found[0]])}, {little_waiting(pct, per)}" if pct < MIN_WAIT_PCT else None


def _late(coll: CollectivesResult, devices: Sequence[DeviceRow]) -> Optional[RankClaim]:
    found = _late_checks(coll)
    if found is None or not all(c.holds() for c in found[1]):
        return None
    late, checks, others, mean_wait, caused = found
    r = coll.ranks[late]
    share = r.last_arrival_share or 0.0
    wait_pct, per_late = _wait_pct(coll, devices, late)
    if wait_pct < MIN_WAIT_PCT:   # waiting that matters (docs/FINDINGS.md "NCCL"): launch jitter is no claim
        return None
    checks.append(_check("wait_pct_of_window", wait_pct, ">=", MIN_WAIT_PCT, r.rank))
    per_coll = mean_wait / (r.matched or 1)
    # the title names the kind of the collectives it arrived last at (a start-up NCCL all-gather on every rank
    # does not make an all-to-all straggler one "at NCCL and custom collectives")
    at = {bool(NCCL_RE.search(i.name)) for i in coll.instances if i.late_rank == r.rank}
    at_kind = "NCCL" if at == {True} else "custom" if at == {False} else "NCCL and custom"
    # the waiting it caused, per other rank and per collective it arrived last at (the mean over every matched
    # collective counts the ones nobody waited at)
    ev = [f"{_late_words(coll, r)}; the other ranks wait {dur(mean_wait)} each in total ({dur(per_coll)} per "
          f"matched collective; {dur(per_late)} for it at each collective it arrived last at)."]
    steps = {(d.file, d.device_id): d.step_count for d in devices}
    per_step = [(x.wait_ns_total or 0) / steps[(x.file, x.device_id)] for x in others
                if steps.get((x.file, x.device_id))]
    if others and len(per_step) == len(others):
        ev.append(f"That is {dur(float(np.mean(per_step)))} of waiting per step on the other ranks "
                  "(mean over them of their wait / their step count).")
    ev += [f"{x.rank} waits {dur(x.wait_ns_total)} over {x.matched} collectives (p50 {dur(x.wait_p50_ns)})."
           for x in others]
    advice = ["Look at what this rank does before its collectives (host work, data loading, a slower GPU or link); "
              "its single-file report is under ranks/."]
    cause = late_cause(r.late_idle_share_p50)
    if cause is not None:
        idle = (f"at the collectives it arrived last at, its GPU sat idle a median {dur(r.late_idle_before_p50_ns)} "
                "longer than the earliest rank's since the previous kernel of that collective (each on its own "
                f"clock) while it was a median {dur(r.late_by_p50_ns)} late (the instance's skew); extra idle / "
                "lateness: median "
                f"{100 * (r.late_idle_share_p50 or 0.0):.0f} %")
        waiter = max(others, key=lambda x: (x.wait_ns_total or 0))
        if cause == LAUNCHED_LATE:
            checks.append(_check("late_idle_share_p50", r.late_idle_share_p50, ">=", LAUNCHED_LATE_SHARE, r.rank))
            ev.append(f"Launched late: {idle} — its GPU waited for work to be launched, so the delay is on the "
                      "host side (the GPU work before the collective was not what made it late).")
            advice = [f"{r.rank}'s work was launched late: in its single-file report (ranks/) look at its GPU idle "
                      "causes and at what its launching thread waited on before the collective (its input from "
                      "another process, data loading, host work, a synchronisation, a GC pause).",
                      "Its GPU was not the bottleneck there: a faster GPU would not remove this waiting."]
        else:
            assert cause == GPU_WORK
            checks.append(_check("late_idle_share_p50", r.late_idle_share_p50, "<=", GPU_WORK_SHARE, r.rank))
            ev.append(f"GPU work ran longer: {idle} — its GPU was busy for the rest of the delay, so its work "
                      "before the collective took longer than the other ranks' (more work, or a slower or throttled "
                      "GPU).")
            advice = [f"Compare {r.rank}'s kernels with another rank's: `nsys-llm-explain compare` on "
                      f"{waiter.file}'s trace and {r.file}'s (which kernels take longer or run more often).",
                      f"Check {r.rank}'s GPU clocks and throttling (`nvidia-smi -q -d CLOCK,PERFORMANCE`) and "
                      "whether it gets more work than the other ranks (uneven batch or expert load)."]
    return _claim(r.rank, "late_arriver", "high" if max(share, caused) >= HIGH_SHARE else "medium",
                  f"{r.rank} is the rank the others wait for at {at_kind} collectives", ev, int(round(mean_wait)),
                  checks, advice)


def _net_busy_pct(coll: CollectivesResult, devices: Sequence[DeviceRow]) -> Optional[List[float]]:
    """Per device: its busy % net of its NCCL wait — 100 · (busy_ns − Σ wait_in_window_ns of its ranks) / window_ns,
    the time its GPU ran kernels less the time its matched collectives' kernels sat waiting for the last rank to
    arrive (a wait the late rank caused, not work this GPU did); None when the clocks were not aligned or no
    collective was matched (no waits known)."""
    if not coll.timed:
        return None
    wait: Dict[Tuple[str, int], int] = {}
    for r in coll.ranks:
        wait[(r.file, r.device_id)] = wait.get((r.file, r.device_id), 0) + (r.wait_in_window_ns or 0)
    return [pct(d.busy_ns - wait.get((d.file, d.device_id), 0), d.window_ns) for d in devices]


def _low_busy(coll: CollectivesResult, devices: Sequence[DeviceRow]) -> Optional[RankClaim]:
    """The device that keeps its GPU busy least, among the devices that ran kernels (a GPU that only received
    copies is not a rank that idles: docs/MODEL.md "Pooled over the devices that ran kernels"), with the devices as
    low as it (within a quarter of its gap, :data:`NEAR_SHARE`: a node or a replica underloaded as a whole; at most
    half the devices), named together and compared with the rest. On aligned clocks with matched collectives the
    gap must also hold net of each device's NCCL wait (the others' kernels spinning while they wait for this rank
    are the late-arriver claim's, not work this GPU leaves undone)."""
    devices = [d for d in devices if d.role == "kernels"]
    if len(devices) < 2:
        return None
    j = min(range(len(devices)), key=lambda i: (devices[i].busy_pct, i))
    d = devices[j]
    busy = [x.busy_pct for x in devices]
    ref = median(np.array([x for i, x in enumerate(busy) if i != j], np.float64))
    grp = [i for i, x in enumerate(busy) if i == j or x <= d.busy_pct + NEAR_SHARE * float(ref - d.busy_pct)]
    if 2 * len(grp) > len(devices):   # most devices as low: the others are the outliers, not a group of low ones
        grp = [j]
    rest = [i for i in range(len(devices)) if i not in grp]
    ref = median(np.array([busy[i] for i in rest], np.float64))
    high = max(busy[i] for i in grp)   # the group's busiest: every member is below the others by the gap
    gap = round(float(ref - high), 4)
    checks = [_check("devices", len(devices), ">=", 2),
              _check("busy_pct_gap", gap, ">=", MIN_BUSY_GAP_PCT, d.rank)]
    net = _net_busy_pct(coll, devices)
    net_ev = ""
    if net is not None:
        net_ref = median(np.array([net[i] for i in rest], np.float64))
        net_high = max(net[i] for i in grp)
        net_gap = round(float(net_ref - net_high), 4)
        checks.append(_check("net_busy_pct_gap", net_gap, ">=", MIN_BUSY_GAP_PCT, d.rank))
        net_ev = (f"Net of each device's wait in matched {coll.kind()} collectives: "
                  + (f"{net[j]:.1f}%" if len(grp) == 1 else f"at most {net_high:.1f}%")
                  + f" vs a median of {net_ref:.1f}%.")
        gap = min(gap, net_gap)
    if not all(c.holds() for c in checks):
        return None
    kinds = sorted(d.idle_by_kind.items(), key=lambda kv: -kv[1])
    top = f"its largest idle cause is {kinds[0][0]} ({dur(kinds[0][1])})" if kinds else ""
    window = sum(devices[i].window_ns for i in grp)
    if len(grp) == 1:
        return _claim(d.rank, "low_busy_rank", "medium", f"{d.rank} keeps its GPU busy less than the other ranks",
                      [f"GPU busy {d.busy_pct:.1f}% vs a median of {ref:.1f}% on the other devices"
                       + (f"; {top}." if top else ".")] + ([net_ev] if net_ev else []),
                      int(round(gap / 100.0 * window)), checks,
                      "Open this rank's report (ranks/) for where its idle time went.")
    names = [devices[i].rank for i in grp]
    span = f"{d.busy_pct:.1f}" if f"{d.busy_pct:.1f}" == f"{high:.1f}" else f"{d.busy_pct:.1f}–{high:.1f}"
    return _claim(d.rank, "low_busy_rank", "medium",
                  f"{', '.join(names[:-1])} and {names[-1]} keep their GPUs busy less than the other ranks",
                  [f"GPU busy {span}% on these {len(grp)} devices (each within a quarter of "
                   f"the lowest's gap) vs a median of {ref:.1f}% on the {len(rest)} other devices"
                   + (f"; {d.rank}'s largest idle cause is {top[len('its largest idle cause is '):]}." if top
                      else ".")] + ([net_ev] if net_ev else []),
                  int(round(gap / 100.0 * window)), checks,
                  "They idle together: look at what they share (their node, their replica's load, an input) and "
                  "at their reports (ranks/) for where the idle time went.")


def _slow_step(devices: Sequence[DeviceRow]) -> Optional[RankClaim]:
    ds = [(d, d.step_p50_ns) for d in devices if d.step_p50_ns]
    if len(ds) < 2:
        return None
    j = max(range(len(ds)), key=lambda i: (ds[i][1], -i))
    d, p50 = ds[j]
    ref = median(np.array([x for i, (_, x) in enumerate(ds) if i != j], np.float64))
    ratio = round(p50 / ref, 4) if ref > 0 else 0.0
    # other devices as slow (within a quarter of its excess, NEAR_SHARE: a node or a pipeline stage): no "slowest"
    ties = sum(1 for i, (_, x) in enumerate(ds) if i != j and x >= p50 - NEAR_SHARE * max(p50 - ref, 0.0))
    checks = [_check("devices_with_steps", len(ds), ">=", 2),
              _check("step_p50_ratio", ratio, ">=", MIN_STEP_RATIO, d.rank),
              _check("step_p50_ties", ties, "==", 0, d.rank)]
    periods = [x.step_period_p50_ns for x, _ in ds]
    if all(periods):   # a longer step range in the same period is time waiting inside it, not a slower loop
        pref = median(np.array([x for i, x in enumerate(periods) if i != j], np.float64))
        checks.append(_check("step_period_p50_ratio", round(float(periods[j] or 0) / pref, 4), ">=", MIN_STEP_RATIO,
                             d.rank))
    if not all(c.holds() for c in checks):
        return None
    return _claim(d.rank, "slow_step_rank", "medium", f"{d.rank} has the slowest steps",
                  [f"step time p50 {dur(p50)} vs a median of {dur(ref)} on the other devices "
                   f"({ratio:.2f}×)."], int(round((p50 - ref) * d.step_count)), checks,
                  "Compare this rank's report (ranks/) with another rank's: `nsys-llm-explain compare`.")


def make_claims(coll: CollectivesResult, devices: Sequence[DeviceRow], disjoint: bool = False) -> List[RankClaim]:
    """The claims whose checks all hold, largest time at stake first (``coll.timed``: the clocks were aligned and
    collectives matched); none when ``disjoint`` (:meth:`.align.Alignment.disjoint`: the files may not be one run,
    so a rank's steps or busy % are not compared with another file's)."""
    if disjoint:
        return []
    out = [c for c in (_late(coll, devices), _low_busy(coll, devices), _slow_step(devices)) if c is not None]
    return sorted(out, key=lambda c: -c.time_at_stake_ns)
