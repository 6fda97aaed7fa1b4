"""Collect every finding whose checks hold, rank them, and write the headline (docs/FINDINGS.md, "Findings":
"Ranking")."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Sequence, Tuple

from ..analyses.idle.causes import IdleCausesResult, cause_totals
from ..jsonable import NONE_OMITTED, FieldsJson
from ..vocabulary.code_spans import code_name
from ..vocabulary.units import fmt_dur as dur
from .base import (
    MEDIUM_SHARE,
    NO_BOTTLENECK_PCT,
    SEVERITY_RANK,
    Check,
    Finding,
    Quoted,
    Scope,
    finding,
    pooled_scope,
)


@dataclass(frozen=True)
class Headline(FieldsJson):
    """The 3–5 lines a reader sees first."""

    verdict: str
    window_method: str
    steady_busy_pct: Optional[float]
    top_finding_id: Optional[str]
    top_cause: Optional[str]                 # "kind: detail" of the top finding's idle cause
    time_at_stake_ns: int
    action: Optional[str]
    top_cause_kind: Optional[str] = None
    top_cause_detail: Optional[str] = None
    top_idle_pct: Optional[float] = None     # a top finding's time_at_stake_ns, % of the GPU idle time
    # the top finding's: the verdict's time and what the time at stake covers, when they differ (Finding.quoted)
    quoted: Optional[Quoted] = field(default=None, metadata=NONE_OMITTED)
    # the top finding's Finding.loop_detail: the "Top cause" line names it, as the verdict does, not the largest detail
    top_loop_detail: Optional[str] = field(default=None, metadata=NONE_OMITTED)


def rank(findings: Sequence[Finding], gate: Optional[Finding], busy_pct: Optional[float],
         causes: IdleCausesResult, facts: Mapping[str, Any], devices: Sequence[int],
         where: str = "the steady window") -> Tuple[Finding, ...]:
    """``busy_pct``: pooled over ``devices`` (the devices that ran kernels, :meth:`GpuTimeResult.pooled`), the only
    devices ``mixed_idle`` speaks for; ``where``: the window in words (:func:`base.window_name`)."""
    held = [f for f in findings if f.holds()]
    if gate is not None:
        keep = [f for f in held if f.blocks_analysis or f.category in ("one_time", "nvtx_coverage")]
        return tuple([gate] + sorted(keep, key=_key))
    work = [f for f in held if not f.about_capture and not f.blocks_analysis]
    if not any(f.severity in ("high", "medium") for f in work) and busy_pct is not None:
        extra = _mixed(busy_pct, causes, facts, tuple(devices), where)
        if extra.holds():
            held.append(extra)
    return tuple(sorted(held, key=_key))


def _key(f: Finding) -> Tuple[bool, bool, int, int, str]:
    return (not f.blocks_analysis, f.about_capture, SEVERITY_RANK[f.severity], -int(f.time_at_stake_ns), f.id)


def _mixed(busy_pct: float, causes: IdleCausesResult, facts: Mapping[str, Any], ids: Tuple[int, ...],
           where: str) -> Finding:
    """``mixed_idle``: the devices that ran kernels idle over 10 % of the window, no cause reaching 5 % of it; their
    largest causes. (From 85 % busy up the medium ``gpu_bound`` finding speaks instead.)"""
    scope = pooled_scope(ids)
    devs = [d for d in causes.devices if d.device_id in ids] if causes.available else []
    top = cause_totals(devs)[:4]
    idle = sum(d.idle_ns for d in devs)
    worst = max(((100.0 * d.ns_of(k) / d.window_ns if d.window_ns else 0.0, d.device_id, k)
                 for d in devs for k in {c.kind for c in d.causes}), default=(0.0, None, None))
    return finding(
        "mixed_idle", severity="low", confidence="medium",
        title=f"The GPU is idle {100 - busy_pct:.1f} % of {where}, spread over causes below 5 % each",
        evidence=("Largest idle causes: " + "; ".join(
            f"{c.kind.replace('_', ' ')}{' ' + code_name(c.detail) if c.detail else ''} {dur(c.ns)}" for c in top)
            + ".",) if top else (), advice=["mixed.table"], facts=facts,
        time_at_stake_ns=idle, checks=(Check("busy_pct", busy_pct, "<", NO_BOTTLENECK_PCT, scope),
                                       Check("cause_pct_of_window", worst[0], "<", MEDIUM_SHARE,
                                             Scope(device_id=worst[1], kind=worst[2]))))


def headline(ranked: Sequence[Finding], busy_pct: Optional[float], method: str, idle_ns: int = 0) -> Headline:
    """The headline of ``ranked`` (best first); ``idle_ns``: the idle time of the devices that ran kernels (Σ their
    idle-cause ``idle_ns``), which the top cause's time at stake is a part of (every finding with a cause claims idle
    ns of those devices)."""
    if not ranked:
        return Headline("No finding.", method, busy_pct, None, None, 0, None)
    top = ranked[0]
    cause = kind = detail = None
    if top.cause:
        kind, detail = top.cause
        cause = kind + (f": {detail}" if detail else "")
    share = 100.0 * top.time_at_stake_ns / idle_ns if top.cause and idle_ns > 0 else None
    return Headline(top.title, method, busy_pct, top.id, cause, int(top.time_at_stake_ns),
                    top.recommendation[0] if top.recommendation else None, kind, detail, share, top.quoted,
                    top.loop_detail)


