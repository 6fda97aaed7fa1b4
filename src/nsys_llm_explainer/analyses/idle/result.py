"""Typed results of the idle-cause attribution (:mod:`idle_causes`; docs/MODEL.md)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Dict, Optional, Tuple

import numpy as np

from ...jsonable import NONE_OMITTED, NOT_IN_JSON, FieldsJson, Outcome
from ...vocabulary.cause_kinds import KINDS
from ..common.stats import pct
from .bins import DeviceBins

TABLE_ROWS = 6   # causes listed per device before the rest is folded into ``other``


@dataclass(frozen=True)
class GapExample:
    start_ns: int
    end_ns: int
    ns: int       # ns of this gap charged to the cause


@dataclass(frozen=True)
class IdleCause:
    kind: str
    detail: str
    ns: int
    pct_of_window: float
    pct_of_idle: float
    gap_count: int
    one_time: bool
    short_gap_ns: int = 0                    # part of ``ns`` inside gaps shorter than LONG_GAP_NS
    #: the largest gaps holding it (None in ``totals``: not written there)
    examples: Optional[Tuple[GapExample, ...]] = field(default=None, metadata=NONE_OMITTED)
    first_ns: int = 0                        # start of the first gap holding this cause
    last_ns: int = 0                         # end of the last gap holding this cause
    tiny_gap_ns: int = 0                     # part of ``ns`` inside gaps shorter than 10 µs
    #: ``copy`` causes only (None for the others): the part of ``ns`` in which a kernel waited on the copy
    #: (docs/MODEL.md, "Copies the kernels waited on")
    waiting_ns: Optional[int] = field(default=None, metadata=NONE_OMITTED)
    #: ``copy`` causes only: the part of ``ns`` in which whether a kernel waited is not known; None when there is none
    waiting_unknown_ns: Optional[int] = field(default=None, metadata=NONE_OMITTED)
    #: part of ``short_gap_ns`` after a drain: between the return of a blocking sync call (``sync`` or
    #: ``sync_memcpy`` kind) of the gap's host thread and that thread's next launch call (docs/MODEL.md, "After a
    #: drain"); None when there is none
    after_sync_short_ns: Optional[int] = field(default=None, metadata=NONE_OMITTED)
    #: part of ``ns`` in the gaps where this cause holds under 10 µs (a few µs of ``queued`` after each launch is
    #: launch latency; hundreds of µs of it in a gap is work held back); per device only, not in report.json
    short_piece_ns: int = field(default=0, metadata=NOT_IN_JSON)
    #: part of ``ns`` in the device's leading gap (from the window's start to its first busy activity) and in its
    #: trailing gap (from its last busy activity to the window's end; a gap that is both counts as leading): once per
    #: capture when the window holds the capture's start / end (docs/MODEL.md, "Start-up and shutdown gaps"); per
    #: device only, not in report.json
    lead_gap_ns: int = field(default=0, metadata=NOT_IN_JSON)
    trail_gap_ns: int = field(default=0, metadata=NOT_IN_JSON)
    #: ``queued`` causes only: the part of ``ns`` that is host-paced (docs/MODEL.md, "Host-paced queued time": the
    #: next kernel was launched only after the previous one started, the host's launch interval set the gap); and
    #: its parts inside gaps shorter than 10 µs and in gaps where ``queued`` holds under 10 µs (per device only)
    host_paced_ns: int = field(default=0, metadata=NOT_IN_JSON)
    host_paced_tiny_ns: int = field(default=0, metadata=NOT_IN_JSON)
    host_paced_short_piece_ns: int = field(default=0, metadata=NOT_IN_JSON)


@dataclass(frozen=True)
class IdlePieces:
    """The idle pieces of one device charged to a host-side kind (:data:`vocabulary.cause_kinds.HOST_PIECE_KINDS`),
    in time order: piece ``i`` is ``[start[i], end[i])``, charged to ``(KINDS[kind[i]], details[detail[i]])``, on
    host thread ``gtid[i]`` (the gap's host thread, serialized globalTid; -1 unknown). Analyses that split host-side
    idle further (CPU samples, per-step syncs) read these; Σ (end − start) per (kind, detail) equals the cause's ns."""

    start: np.ndarray
    end: np.ndarray
    kind: np.ndarray      # int8 code into KINDS
    detail: np.ndarray    # index into ``details``
    gtid: np.ndarray
    details: Tuple[str, ...]

    def __len__(self) -> int:
        return int(self.start.shape[0])


@dataclass(frozen=True)
class Other(FieldsJson):
    """The idle causes of a device past its table's first ``after_rows``, folded into one: ``count`` causes, their
    ``ns`` and its share of the window and of idle."""

    after_rows: int
    count: int
    ns: int
    pct_of_window: float
    pct_of_idle: float


@dataclass(frozen=True)
class DeviceCauses(FieldsJson):
    """A device's idle causes; ``report.json`` adds the derived ``other`` (:meth:`other`). Loaded from it, the
    per-gap cause codes are empty (``gap_cause`` gives ``("", "")``; the gaps in :class:`~.gpu_time.GpuTimeResult`
    keep their causes), and so are the host-side pieces (None)."""

    device_id: int
    window_ns: int
    busy_ns: int
    idle_ns: int
    causes: Tuple[IdleCause, ...]            # largest first
    #: per gap (time order): code of the cause with the most ns, -1 none (not serialised)
    gap_cause_code: np.ndarray = field(default_factory=lambda: np.full(0, -1, np.int8), metadata=NOT_IN_JSON)
    cause_of_code: Dict[int, Tuple[str, str]] = field(default_factory=dict, metadata=NOT_IN_JSON)
    # host-side pieces (not serialised); None for the devices past the run's budget of kept pieces
    # (causes.PIECES_KEPT: every device's pieces are used while its turn in the device pass lasts)
    pieces: Optional[IdlePieces] = field(default=None, metadata=NOT_IN_JSON)
    # idle ns charged to an OS call that waits (vocabulary.os_calls "wait" class), per gap host thread (not serialised)
    wait_ns_by_thread: Dict[int, int] = field(default_factory=dict, metadata=NOT_IN_JSON)
    #: every idle piece inside the timeline file's span (:mod:`analyses.timeline`), runs of one cause in one gap
    #: merged, clipped to the span, in time order (``gtid`` -1); None when no span was asked for (not serialised)
    slices: Optional[IdlePieces] = field(default=None, metadata=NOT_IN_JSON)
    JSON_DERIVED: ClassVar[Tuple[str, ...]] = ("other",)   # with the table's rows (TABLE_ROWS)

    def gap_cause(self, i: int) -> Tuple[str, str]:
        """(kind, detail) of the cause holding most of gap ``i`` (time order); ``("", "")`` when none."""
        c = int(self.gap_cause_code[i]) if 0 <= i < len(self.gap_cause_code) else -1
        return self.cause_of_code.get(c, ("", ""))

    def ns_of(self, kind: str, detail: Optional[str] = None) -> int:
        return sum(c.ns for c in self.causes if c.kind == kind and (detail is None or c.detail == detail))

    def other(self, rows: int = TABLE_ROWS) -> Other:
        """The causes after the first ``rows`` (largest first) folded into one (none when at most one cause is
        left over)."""
        rest = self.causes[rows:] if len(self.causes) > rows + 1 else ()
        ns = sum(c.ns for c in rest)
        return Other(rows, len(rest), ns, pct(ns, self.window_ns), pct(ns, self.idle_ns))


@dataclass(frozen=True)
class IdleCausesResult(Outcome):
    precedence: Tuple[str, ...] = KINDS      # the cause kinds in charging order
    devices: Tuple[DeviceCauses, ...] = ()
    totals: Tuple[IdleCause, ...] = ()       # summed over devices, pct of Σ window / Σ idle
    #: per device; report.json keeps them apart, under ``timeline.devices`` (:mod:`serialize` puts them back)
    bins: Tuple[DeviceBins, ...] = field(default=(), metadata=NOT_IN_JSON)
