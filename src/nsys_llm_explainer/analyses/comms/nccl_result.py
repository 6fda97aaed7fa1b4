"""The typed results of the NCCL analysis (:func:`.nccl.analyze_nccl`): collectives by name, per device / PID totals,
custom all-reduce kernels, each rank's arrival figures among the matched collectives and the straggler verdict
(docs/FINDINGS.md, "NCCL")."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Optional, Tuple

from ...jsonable import NONE_AS_EMPTY, NONE_OMITTED, FieldsJson, Outcome
from .matching import MATCH_MIXED, MATCH_TIME


@dataclass(frozen=True)
class NcclCollective(FieldsJson):
    """NCCL kernels of one collective name (:func:`collective_name`)."""

    name: str
    count: int
    total_ns: int


@dataclass(frozen=True)
class NcclShare(FieldsJson):
    """The NCCL kernels of one device or process (module docstring; the key, written first: ``JSON_KEYS``)."""

    count: int
    total_ns: int
    kernel_ns: int
    pct_of_kernel_ns: float
    union_ns: int


@dataclass(frozen=True)
class NcclDeviceRow(NcclShare):
    device_id: int
    JSON_KEYS: ClassVar[Tuple[str, ...]] = ("device_id",)


@dataclass(frozen=True)
class NcclPidRow(NcclShare):
    pid: int
    JSON_KEYS: ClassVar[Tuple[str, ...]] = ("pid",)


@dataclass(frozen=True)
class CustomAllReduce(FieldsJson):
    """Custom all-reduce kernels (module docstring): kernels, summed duration (ns) and their names (sorted)."""

    count: int
    total_ns: int
    names: Tuple[str, ...]


@dataclass(frozen=True)
class NcclRank(FieldsJson):
    """One (process, GPU) running NCCL kernels; its arrival figures among the matched collectives (module
    docstring) only when collectives were matched across ranks (else None, not written)."""

    rank: str                   # "pid P / GPU D", "GPU D" when the pid is unknown (:func:`rank_label`)
    pid: int
    device_id: int
    nccl_count: int
    nccl_total_ns: int
    matched: Optional[int] = field(default=None, metadata=NONE_OMITTED)
    mean_ns: Optional[int] = field(default=None, metadata=NONE_OMITTED)
    p50_ns: Optional[int] = field(default=None, metadata=NONE_OMITTED)
    #: mean start after the earliest rank of the collective
    mean_start_skew_ns: Optional[int] = field(default=None, metadata=NONE_OMITTED)
    #: collectives this rank started last
    last_arrival_count: Optional[int] = field(default=None, metadata=NONE_OMITTED)
    #: Σ over its matched collectives of its wait, the latest start − its start (:mod:`.arrival`)
    wait_ns_total: Optional[int] = field(default=None, metadata=NONE_OMITTED)
    #: the waiting its late arrivals caused: Σ over the collectives it started last of the other ranks' waits
    wait_caused_ns: Optional[int] = field(default=None, metadata=NONE_OMITTED)
    #: Σ of its waits' parts [own start, own start + wait) inside the analysis window (the cluster's definition)
    wait_in_window_ns: Optional[int] = field(default=None, metadata=NONE_OMITTED)


@dataclass(frozen=True)
class NcclStraggler(FieldsJson):
    """The straggler verdict (docs/FINDINGS.md "NCCL"; the rule: :func:`.arrival.late_rank`): the rank that arrives
    late and the other rank that waits the most."""

    waiting_rank: str
    waiting_pid: int
    waiting_device_id: int
    late_rank: str
    late_pid: int
    late_device_id: int
    #: the waiting the late rank caused (its ``wait_caused_ns``): the other ranks' waits where it started last
    wait_ns_total: int
    #: ``wait_ns_total`` / all the waiting at the matched collectives (Σ every rank's ``wait_ns_total``)
    wait_caused_share: float
    #: the matched collectives the late rank started last (``late_share``'s numerator)
    last_arrivals: int
    late_share: float
    matched_collectives: int
    confidence: str           # "high" | "medium"
    #: matched collectives whose kernels all started together (no last arriver; not in ``late_share``); None if 0
    tied_collectives: Optional[int] = field(default=None, metadata=NONE_OMITTED)
    #: ``late_share``'s denominator: the matched collectives the late rank took part in that had a last arriver
    with_last_arriver: int = 0
    #: ``wait_ns_total`` as a % of the other ranks' captured time (:func:`.arrival.caused_pct_of_window`)
    wait_pct_of_window: float = 0.0
    #: over the collectives the late rank started last (its excess idle known): medians of its excess idle (its
    #: GPU's idle since its previous kernel of the name less the earliest rank's, at least 0:
    #: :func:`.arrival.excess_idle`), of how late it started (its start − the earliest) and of
    #: min(excess idle, lateness) / lateness (docs/FINDINGS.md "NCCL"); None (not written) when none is known
    late_idle_before_p50_ns: Optional[int] = field(default=None, metadata=NONE_OMITTED)
    late_by_p50_ns: Optional[int] = field(default=None, metadata=NONE_OMITTED)
    late_idle_share_p50: Optional[float] = field(default=None, metadata=NONE_OMITTED)


@dataclass(frozen=True)
class NcclResult(Outcome):
    nccl_kernel_count: int = 0
    nccl_total_ns: int = 0
    by_name: Tuple[NcclCollective, ...] = ()
    per_device: Tuple[NcclDeviceRow, ...] = ()
    per_pid: Tuple[NcclPidRow, ...] = ()
    custom_allreduce: Optional[CustomAllReduce] = field(default=None, metadata=NONE_AS_EMPTY)
    ranks: Tuple[NcclRank, ...] = ()
    matched_collectives: int = 0
    unmatched_kernels: int = 0
    wait_ns_total: int = 0
    straggler: Optional[NcclStraggler] = None
    straggler_reason: Optional[str] = None
    #: how collectives were matched across ranks, over the names run on >= 2 ranks: MATCH_TIME / MATCH_ORDER /
    #: MATCH_MIXED (None, not written: no such name)
    matching: Optional[str] = field(default=None, metadata=NONE_OMITTED)
    #: the names (sorted) matched by issue order: on some rank no kernel of the name overlaps one of the reference
    #: rank's (None, not written: none)
    order_fallbacks: Optional[Tuple[str, ...]] = field(default=None, metadata=NONE_OMITTED)
    #: matched collectives left out of the arrival figures (skew, waits, last arrivals, the verdict) beside others
    #: that are in them: point-to-point (send / recv) among > 2 ranks (None, not written: none, or every matched one)
    p2p_left_out: Optional[int] = field(default=None, metadata=NONE_OMITTED)

    def how_matched(self) -> str:
        """How the collectives were matched, in words (the report's NCCL section)."""
        if self.matching == MATCH_TIME:
            return "by name and time (the kernels that overlap)"
        if self.matching == MATCH_MIXED:
            n = len(self.order_fallbacks or ())
            return (f"by name and time, in issue order for {n} name(s) whose kernels on some rank never overlap "
                    "another rank's")
        return "by name and issue order, as on some rank no kernel of a name overlaps another rank's"
