"""Typed findings: a claim, the preconditions it was emitted under (``checks``: a metric of docs/MODEL.md's
vocabulary, observed value, threshold; emitted only when all hold), evidence and advice (docs/FINDINGS.md,
"Findings").
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping, Optional, Sequence, Tuple

from ..jsonable import NONE_OMITTED, FieldsJson, json_name
from .advice import advise

if TYPE_CHECKING:
    from ..analyses.idle.gpu_time import GpuTimeResult

SEVERITY_RANK = {"high": 0, "medium": 1, "low": 2, "info": 3}
#: the closed vocabulary of ``Finding.category`` (docs/FINDINGS.md)
CATEGORIES = (
    "copy_bound", "gpu_wait", "sync_stall", "memcpy", "allocation", "one_time", "launch_overhead", "cuda_api",
    "host_range", "host_os", "host_gap", "unknown_host", "gpu_bound", "fp32_gemm", "attention_unfused",
    "elementwise_fusion", "no_gpu_work", "too_little_work", "graph_trace_mode", "capture_window", "nvtx_coverage",
    "nccl_wait", "mixed_idle",
    "unified_memory",
    "step_sync",   # per-step synchronization (findings/step_sync.py)
    "comm_exposed",   # communication no compute kernel overlaps (findings/kernels.py)
    "rank_outlier",   # cluster claims about one rank (cluster/claims.py; the late arriver is nccl_wait)
)
HIGH_SHARE = 20.0         # % of the window: a cause this large is high severity
MEDIUM_SHARE = 5.0        # % of the window: smaller causes yield no finding
GPU_BOUND_PCT = 85.0      # busy % from which kernels, not the host, set the step time
NO_BOTTLENECK_PCT = 90.0  # busy % below which a GPU idle over small causes is a finding (mixed_idle)
METRICS = ("busy_pct", "idle_pct", "cause_pct_of_window", "idle_pct_change", "kernel_share_pct", "kernel_count",
           "comm_nonoverlap_pct", "comm_exposed_pct",
           "launch_rate_per_s", "trait_share_pct", "kernel_p50_ns", "host_overhead_pct", "busy_ns",
           "claimed_pct_of_window", "um_overlap_pct_of_kernel_time", "copy_waiting_pct", "copy_waiting_unknown_pct",
           # start-up / shutdown idle and autotuning allocations (findings/idle.py)
           "startup_pct_of_cause", "loop_pct_of_window", "autotune_trial_pct",
           # the host thread unsampled in its `host_cpu` gaps while other processes ran (findings/idle.py)
           "unsampled_pct_of_kind",
           # one gap holds most of an idle finding's time: a pause (findings/idle.py)
           "largest_gap_pct_of_claimed",
           # per-step synchronization (findings/step_sync.py)
           "step_sync_points", "step_sync_exposed_pct", "step_sync_overlap_pct",
           # a copy path sets the pace (findings/copy_path.py)
           "copy_path_busy_pct", "copy_path_overlap_pct", "copy_path_step_busy_pct", "copy_path_beyond_kernels_pct",
           "copy_path_held_pct",
           # cluster claims about one rank (cluster/claims.py; docs/CLUSTER.md)
           "aligned", "ranks", "matched", "last_arrivals", "wait_caused_share", "wait_pct_of_window", "late_with_ranks",
           "others_mean_wait_ns", "end_spread_p50_ns", "late_idle_share_p50",
           "split_names", "point_to_point_only", "devices", "busy_pct_gap", "net_busy_pct_gap", "devices_with_steps",
           "step_p50_ratio", "step_period_p50_ratio", "step_p50_ties")
_OPS = {">=": operator.ge, ">": operator.gt, "<=": operator.le, "<": operator.lt, "==": operator.eq}


@dataclass(frozen=True)
class Scope:
    window: str = "steady"                 # "steady" | "full"
    device_id: Optional[int] = None        # None: all devices pooled
    kind: Optional[str] = None             # idle-cause kind
    detail: Optional[str] = None           # idle-cause detail
    name: Optional[str] = None             # kernel name
    trait: Optional[str] = None            # kernel-name trait
    devices: Optional[Tuple[int, ...]] = None   # device_id None: the devices pooled (those that ran kernels)


def pooled_scope(devices: Sequence[int]) -> Scope:
    """The scope of a metric pooled over ``devices`` (the devices that ran kernels in the steady window,
    :meth:`analyses.idle.gpu_time.GpuTimeResult.kernel_devices`)."""
    return Scope(devices=tuple(int(d) for d in devices))


def pooled_words(gpu: GpuTimeResult) -> str:
    """Over which devices the pooled busy % is measured, in words (the devices that ran the workload's kernels)."""
    ids = gpu.kernel_devices()
    text = f"device {ids[0]}" if len(ids) == 1 else "devices " + ", ".join(str(i) for i in ids) + " summed"
    for few, why in ((True, " ran too few kernels to count"), (False, " ran no kernel and is not counted")):
        rest = [d.device_id for d in gpu.devices if d.device_id not in ids and (d.kernel_count > 0) == few]
        if rest:
            text += "; " + ", ".join(f"device {i}" for i in rest) + why
    return text


@dataclass(frozen=True)
class Check:
    """``observed op threshold`` for ``metric`` over ``scope``."""

    metric: str
    observed: float
    op: str
    threshold: float
    scope: Scope = field(default_factory=Scope)

    def holds(self) -> bool:
        assert self.metric in METRICS, self.metric
        return bool(_OPS[self.op](self.observed, self.threshold))


@dataclass(frozen=True)
class Quoted(FieldsJson):
    """The time a finding's title quotes when its time at stake is another quantity (docs/FINDINGS.md, "One quantity
    per sentence"): ``ns`` (a part of the time at stake); ``what`` that part is, in words ("in `X` on device 0");
    ``stake``: what the time at stake covers ("in all ranges on devices 0 and 1")."""

    ns: int
    what: str
    stake: str


@dataclass(frozen=True)
class Finding(FieldsJson):
    id: str
    category: str
    severity: str
    confidence: str
    title: str
    evidence: Tuple[str, ...]
    recommendation: Tuple[str, ...]
    time_at_stake_ns: int
    checks: Tuple[Check, ...] = ()
    device_id: Optional[int] = None
    # (kind, detail) of the idle cause it reports; ("host_overhead", "") for the launch-bound composite
    # (docs/FINDINGS.md)
    cause: Optional[Tuple[str, str]] = field(default=None, metadata=json_name(rows=("kind", "detail")))
    blocks_analysis: bool = False               # invalidates the other numbers: ranked first
    about_capture: bool = False                 # about how the trace was taken, not the workload
    # the title's time and what the time at stake covers, when they differ (None: the title quotes the time at stake
    # or no time)
    quoted: Optional[Quoted] = field(default=None, metadata=NONE_OMITTED)
    # the detail the title names when it is not cause's: a loop finding named after start-up work names its largest
    # detail in the loop (findings/idle_once.loop_detail)
    loop_detail: Optional[str] = field(default=None, metadata=NONE_OMITTED)

    def holds(self) -> bool:
        assert self.category in CATEGORIES, self.category
        return all(c.holds() for c in self.checks)


def finding(id: str, *, severity: str, title: str, evidence: Sequence[str], advice: Sequence[str],
            facts: Mapping[str, Any], time_at_stake_ns: int, checks: Sequence[Check] = (), category: str = "",
            confidence: str = "high", **more: Any) -> Finding:
    """A rule's finding: its category its id unless given, its recommendation the lines ``advice`` that the trace's
    ``facts`` allow (:func:`advice.advise`)."""
    return Finding(id, category or id, severity, confidence, title, tuple(evidence), advise(advice, facts),
                   time_at_stake_ns, tuple(checks), **more)


@dataclass(frozen=True)
class Claims:
    """A rule's finding (None when its checks do not hold) and the idle ns it claims per device and (kind, detail),
    which the idle findings leave out (no ns is the evidence of two findings)."""

    finding: Optional[Finding]
    claimed: Mapping[int, Mapping[Tuple[str, str], int]]
