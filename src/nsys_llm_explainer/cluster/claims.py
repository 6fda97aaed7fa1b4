"""Findings-like claims about single ranks of a cluster, each with the preconditions it was made under.

A claim is made only when every check holds (docs/CLUSTER.md):

* ``late_arriver`` — the rank most often last to arrive at matched NCCL collectives (ties: first in rank
  order). Checks: clocks aligned (``aligned == 1``), ``ranks >= 2``, its ``matched >= 5``, its
  ``last_arrival_share >= 0.6``, the other ranks' mean ``wait_ns_total > 0``, and the matched kernels end
  together: median ``end_spread`` ``<=`` half the median ``skew``, and no rank runs a collective name on
  several streams (``split_names == 0``: else the name is shared by communicators; :mod:`.collectives`).
* ``low_busy_rank`` — the device with the lowest steady busy %; checks ``devices >= 2`` and
  ``busy_pct_gap`` (median busy % of the other devices − its busy %) ``>= 10`` percentage points.
* ``slow_step_rank`` — the device with the highest step p50; checks ``devices_with_steps >= 2`` and
  ``step_p50_ratio`` (its p50 / median p50 of the others) ``>= 1.1``.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from ..analyses.common.stats import median
from ..analyses.comms.nccl import MAX_END_SPREAD_SHARE
from .collectives import CollectivesResult

Row = Dict[str, Any]
MIN_MATCHED = 5
MIN_LATE_SHARE = 0.6
MIN_BUSY_GAP_PCT = 10.0
MIN_STEP_RATIO = 1.1


def _check(metric: str, observed: Any, op: str, threshold: Any, **scope: Any) -> Row:
    return {"metric": metric, "scope": scope, "observed": observed, "op": op, "threshold": threshold}


def _holds(c: Row) -> bool:
    o, t = c["observed"], c["threshold"]
    return {">=": o >= t, ">": o > t, "<=": o <= t, "<": o < t, "==": o == t}[c["op"]]


def _ms(ns: float) -> str:
    return f"{ns / 1e6:.3f} ms" if abs(ns) >= 1e6 else f"{ns / 1e3:.1f} µs"


def _late(coll: CollectivesResult, devices: Sequence[Row], aligned: bool) -> Optional[Row]:
    ranks = list(coll.ranks)
    if not coll.available or not ranks:
        return None
    timed = coll.timed and aligned
    late = max(range(len(ranks)), key=lambda j: (ranks[j].get("last_arrival_count", 0), -j))
    r = ranks[late]
    others = [x for j, x in enumerate(ranks) if j != late]
    mean_wait = float(np.mean([x.get("wait_ns_total", 0) for x in others])) if others else 0.0
    checks = [_check("aligned", int(timed), "==", 1), _check("ranks", len(ranks), ">=", 2),
              _check("matched", r["matched"], ">=", MIN_MATCHED, rank=r["rank"]),
              _check("last_arrival_share", r.get("last_arrival_share", 0.0), ">=", MIN_LATE_SHARE, rank=r["rank"]),
              _check("others_mean_wait_ns", int(round(mean_wait)), ">", 0, rank=r["rank"]),
              _check("end_spread_p50_ns", coll.end_spread_p50_ns, "<=", int(coll.skew_p50_ns * MAX_END_SPREAD_SHARE)),
              _check("split_names", len(coll.split_names), "==", 0)]
    if not all(_holds(c) for c in checks):
        return None
    pct = 100.0 * r["last_arrival_share"]
    per_coll = mean_wait / r["matched"]
    ev = [f"{r['rank']} arrives last in {pct:.0f}% ({r['last_arrival_count']} of {r['matched']}) of the matched "
          f"NCCL collectives; the other ranks wait {_ms(mean_wait)} each in total ({_ms(per_coll)} per collective)."]
    steps = {(d["file"], d["device_id"]): d["step_count"] for d in devices}
    per_step = [x["wait_ns_total"] / steps[(x["file"], x["device_id"])] for x in others
                if steps.get((x["file"], x["device_id"]))]
    if others and len(per_step) == len(others):
        ev.append(f"That is {_ms(float(np.mean(per_step)))} of waiting per step on the other ranks "
                  "(mean over them of their wait / their step count).")
    for x in others:
        ev.append(f"{x['rank']} waits {_ms(x['wait_ns_total'])} over {x['matched']} collectives "
                  f"(p50 {_ms(x['wait_p50_ns'])}).")
    return {"id": "late_arriver", "rank": r["rank"], "severity": "high" if pct >= 80 else "medium",
            "title": f"{r['rank']} is the rank the others wait for at NCCL collectives",
            "evidence": ev, "time_at_stake_ns": int(round(mean_wait)), "checks": checks,
            "advice": ["Look at what this rank does before its collectives (host work, data loading, a slower "
                       "GPU or link); its single-file report is under ranks/."]}


def _low_busy(devices: Sequence[Row]) -> Optional[Row]:
    if len(devices) < 2:
        return None
    j = min(range(len(devices)), key=lambda i: (devices[i]["busy_pct"], i))
    d = devices[j]
    ref = median(np.array([x["busy_pct"] for i, x in enumerate(devices) if i != j], np.float64))
    gap = round(float(ref - d["busy_pct"]), 4)
    checks = [_check("devices", len(devices), ">=", 2),
              _check("busy_pct_gap", gap, ">=", MIN_BUSY_GAP_PCT, rank=d["rank"])]
    if not all(_holds(c) for c in checks):
        return None
    kinds = sorted(d["idle_by_kind"].items(), key=lambda kv: -kv[1])
    top = f"; its largest idle cause is {kinds[0][0]} ({_ms(kinds[0][1])})" if kinds else ""
    return {"id": "low_busy_rank", "rank": d["rank"], "severity": "medium",
            "title": f"{d['rank']} keeps its GPU busy less than the other ranks",
            "evidence": [f"GPU busy {d['busy_pct']:.1f}% vs a median of {ref:.1f}% on the other devices{top}."],
            "time_at_stake_ns": int(round(gap / 100.0 * d["window_ns"])), "checks": checks,
            "advice": ["Open this rank's report (ranks/) for where its idle time went."]}


def _slow_step(devices: Sequence[Row]) -> Optional[Row]:
    ds = [d for d in devices if d.get("step_p50_ns")]
    if len(ds) < 2:
        return None
    j = max(range(len(ds)), key=lambda i: (ds[i]["step_p50_ns"], -i))
    d = ds[j]
    ref = median(np.array([x["step_p50_ns"] for i, x in enumerate(ds) if i != j], np.float64))
    ratio = round(d["step_p50_ns"] / ref, 4) if ref > 0 else 0.0
    checks = [_check("devices_with_steps", len(ds), ">=", 2),
              _check("step_p50_ratio", ratio, ">=", MIN_STEP_RATIO, rank=d["rank"])]
    if not all(_holds(c) for c in checks):
        return None
    return {"id": "slow_step_rank", "rank": d["rank"], "severity": "medium",
            "title": f"{d['rank']} has the slowest steps",
            "evidence": [f"step time p50 {_ms(d['step_p50_ns'])} vs a median of {_ms(ref)} on the other devices "
                         f"({ratio:.2f}×)."],
            "time_at_stake_ns": int(round((d["step_p50_ns"] - ref) * d["step_count"])), "checks": checks,
            "advice": ["Compare this rank's report (ranks/) with another rank's: `nsys-llm-explain compare`."]}


def make_claims(coll: CollectivesResult, devices: Sequence[Row], aligned: bool) -> List[Row]:
    out = [c for c in (_late(coll, devices, aligned), _low_busy(devices), _slow_step(devices)) if c is not None]
    return sorted(out, key=lambda c: -c["time_at_stake_ns"])
