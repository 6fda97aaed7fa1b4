"""Typed results of a comparison (frozen dataclasses); ``to_dict()`` gives ``compare.json``. Integer ns;
``*_per_unit_ns`` per unit of work (:attr:`MetricSpec.basis`); change % = (new − base) / base × 100, positive:
NEW slower (docs/COMPARE.md)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Optional, Tuple

from ..jsonable import NONE_OMITTED, FieldsJson, Outcome

COMPARE_SCHEMA_VERSION = "1.0"


@dataclass(frozen=True)
class MetricSpec(FieldsJson):
    """The headline metric, chosen once for all traces of the comparison (docs/COMPARE.md)."""

    name: Optional[str]              # "step_period_p50" | "step_time_p50" | "iteration_period_p50" | None
    description: str
    basis: str                       # unit of work: "step" | "iteration" | "window_s"
    reason: str                      # why this metric was chosen
    step_method: Optional[str] = None
    step_ranges: Tuple[str, ...] = ()
    anchor_kernel: Optional[str] = None
    anchor_repeat: Optional[int] = None   # anchor instances per iteration
    min_units: int = 10                  # fewer steps / iterations than this in a trace: too short to compare
    min_window_ns: int = 20_000_000      # a steady window shorter than 20 ms: too short to compare
    #: either trace spends less than this share of its kernel time in kernel names the other also ran: too different
    min_common_kernel_share: float = 0.5
    #: every trace is event-timed (a benchmark harness): the kernel names its harness launched outside every timed
    #: region (``analyses.kernels.harness``), left out of the anchor kernel's choice; None otherwise
    harness_left_out: Optional[Tuple[str, ...]] = field(default=None, metadata=NONE_OMITTED)


@dataclass(frozen=True)
class MetricValue(FieldsJson):
    """The headline metric of one trace: median and p90 of its samples and how many units they cover."""

    p50_ns: Optional[int]
    p90_ns: Optional[int]
    count: int                        # complete steps / iterations measured
    spread: Optional[float]           # p90 / p50
    iqr_ns: Optional[int]             # interquartile range of the samples (noise estimate)


@dataclass(frozen=True)
class StepInfo(Outcome):
    method: str
    confidence: str
    count: int
    p50_ns: Optional[int]
    p90_ns: Optional[int]
    spread: Optional[float]


@dataclass(frozen=True)
class Share(FieldsJson):
    """A part of the steady window (summed over devices): a kernel category's non-overlapped busy time,
    ``non_gpu`` (window − busy), or an idle-cause kind."""

    name: str
    ns: int
    pct_of_window: float
    per_unit_ns: Optional[int]


@dataclass(frozen=True)
class FindingBrief(FieldsJson):
    id: str
    category: str
    severity: str
    title: str
    time_at_stake_ns: int


@dataclass(frozen=True)
class TraceSummary(FieldsJson):
    """One trace, measured for the comparison (all over its steady window, devices summed; for the metric
    ``step_period_p50`` the parts — pooled window, busy, non-GPU, shares, units — over whole step periods, first step's
    start to the last step's start: docs/COMPARE.md, "Over whole step periods")."""

    label: str
    path: str
    gpus: Tuple[str, ...]
    device_count: int
    window_method: str
    window_name: str                  # the window in words (findings.base.window_name): "the steady window", …
    window_start_ns: int
    window_end_ns: int
    window_ns: int                    # steady window length (one device)
    pooled_window_ns: int             # Σ over devices (of the period span for step_period_p50)
    busy_ns: int
    busy_pct: float
    non_gpu_ns: int                   # pooled window − busy
    units: Optional[float]            # units of work in it (step_period_p50: the step periods of the span)
    metric: MetricValue
    steps: StepInfo
    idle_by_kind: Tuple[Share, ...]
    categories: Tuple[Share, ...]     # non-overlapped busy per category, then ``non_gpu``
    kernel_count: int
    total_kernel_ns: int
    verdict: str
    findings: Tuple[FindingBrief, ...]
    notes: Tuple[str, ...] = ()
    #: with ``MetricSpec.harness_left_out``: the steady window's kernel time of the harness kernels (launched outside
    #: every timed region) and of the others, the timed kernels (None otherwise)
    harness_kernel_ns: Optional[int] = field(default=None, metadata=NONE_OMITTED)
    timed_kernel_ns: Optional[int] = field(default=None, metadata=NONE_OMITTED)
    #: the host-paced ``queued`` ns of launch-bound devices that ``idle_by_kind``'s ``launch`` holds (detail
    #: ``measure.HOST_PACED``, docs/COMPARE.md "Launch overhead as the report counts it"); None when there are none
    host_paced_ns: Optional[int] = field(default=None, metadata=NONE_OMITTED)


@dataclass(frozen=True)
class Delta(FieldsJson):
    """One part of the time per unit of work in BASE and NEW (a category, an idle cause, a kernel name)."""

    component: str                    # "category" | "idle" | "non_gpu" | "kernel"
    name: str
    detail: str
    base_ns: int                      # total over the steady window
    new_ns: int
    base_per_unit_ns: Optional[int]
    new_per_unit_ns: Optional[int]
    delta_per_unit_ns: Optional[int]
    change_pct: Optional[float]
    base_count: int = 0               # kernels: instances
    new_count: int = 0


@dataclass(frozen=True)
class FindingChange(FieldsJson):
    id: str
    category: str
    change: str                       # "new" | "gone" | "severity" | "same" | "untraced" (the other capture lacks
    #                                   the finding's evidence: docs/COMPARE.md)
    base_severity: Optional[str]
    new_severity: Optional[str]
    title: str
    base_time_at_stake_ns: Optional[int]
    new_time_at_stake_ns: Optional[int]


@dataclass(frozen=True)
class Comparison(FieldsJson):
    """BASE against one NEW."""

    base: str
    new: str
    status: str                       # "comparable" | "too_short" | "too_different" (compared only when comparable)
    reasons: Tuple[str, ...]          # why not comparable (empty when comparable)
    similarity: float                 # kernel-time-weighted Jaccard of kernel names (reported only)
    #: the smaller of BASE's and NEW's share of kernel time in kernel names the other also ran, or that a precision
    #: change renamed (decides "too different")
    common_kernel_share: float
    gpus_match: Optional[bool]        # None when a trace names no GPU
    metric_base: MetricValue
    metric_new: MetricValue
    change_pct: Optional[float]
    noise_pct: Optional[float]        # half-width of the ~95 % interval of the change, in % of BASE
    significant: Optional[bool]
    verdict: str                      # "faster" | "slower" | "no_change" | "not_compared"
    headline: Tuple[str, ...]         # 3–5 lines (plain text; names in backticks)
    main_reason: Optional[Delta]
    busy_pct_base: float
    busy_pct_new: float
    window_per_unit_base_ns: Optional[int]
    window_per_unit_new_ns: Optional[int]
    idle_changes: Tuple[Delta, ...] = ()       # by idle-cause kind
    idle_detail_changes: Tuple[Delta, ...] = ()  # by (kind, detail), largest |Δ| first
    category_changes: Tuple[Delta, ...] = ()   # per category and non_gpu
    kernel_deltas: Tuple[Delta, ...] = ()      # by kernel name, largest |Δ| first
    finding_changes: Tuple[FindingChange, ...] = ()
    #: what one capture of the pair records and the other does not ("PLAIN recorded no OS-runtime call
    #: (--trace=osrt)"): the host places folded (docs/COMPARE.md), and each report's findings read only its own capture
    capture_differences: Tuple[str, ...] = ()


@dataclass(frozen=True)
class CompareResult(FieldsJson):
    """Everything :func:`nsys_llm_explainer.compare` found. ``to_dict()`` is ``compare.json``."""

    schema_version: str = field(default=COMPARE_SCHEMA_VERSION, init=False)
    kind: str = field(default="compare", init=False)
    tool_version: str
    metric: MetricSpec
    traces: Tuple[TraceSummary, ...]
    comparisons: Tuple[Comparison, ...]      # traces[0] (BASE) against each later trace
    warnings: Tuple[str, ...] = ()
    timings_s: Dict[str, float] = field(default_factory=dict)

    @property
    def base(self) -> TraceSummary:
        return self.traces[0]
