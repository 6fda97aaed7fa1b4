"""Typed results of the idle-cause attribution (:mod:`idle_causes`; docs/MODEL.md)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Dict, Optional, Tuple

import numpy as np

from ...jsonable import NOT_IN_JSON, FieldsJson, dataclass_from_json, need_rows
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
    examples: Tuple[GapExample, ...] = ()
    first_ns: int = 0                        # start of the first gap holding this cause
    last_ns: int = 0                         # end of the last gap holding this cause
    tiny_gap_ns: int = 0                     # part of ``ns`` inside gaps shorter than 10 µs


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
class DeviceCauses:
    device_id: int
    window_ns: int
    busy_ns: int
    idle_ns: int
    causes: Tuple[IdleCause, ...]            # largest first
    gap_cause_code: np.ndarray               # per gap (time order): code of the cause with the most ns, -1 none
    cause_of_code: Dict[int, Tuple[str, str]]
    # host-side pieces (not serialised); None for the devices past the run's budget of kept pieces
    # (causes.PIECES_KEPT: every device's pieces are used while its turn in the device pass lasts)
    pieces: Optional[IdlePieces] = field(default=None, metadata=NOT_IN_JSON)
    # idle ns charged to an OS call that waits (vocabulary.os_calls "wait" class), per gap host thread (not serialised)
    wait_ns_by_thread: Dict[int, int] = field(default_factory=dict, metadata=NOT_IN_JSON)
    #: every idle piece inside the timeline file's span (:mod:`analyses.timeline`), runs of one cause in one gap
    #: merged, clipped to the span, in time order (``gtid`` -1); None when no span was asked for (not serialised)
    slices: Optional[IdlePieces] = field(default=None, metadata=NOT_IN_JSON)

    @classmethod
    def from_dict(cls, d: Any, where: str = "device causes") -> DeviceCauses:
        """A device of :meth:`IdleCausesResult.to_dict` (its derived ``other`` ignored). The per-gap cause codes are
        not serialised: loaded, they are empty (``gap_cause`` gives ``("", "")``; the gaps in
        :class:`~.gpu_time.GpuTimeResult` keep their causes), and so are the host-side pieces (None)."""
        return dataclass_from_json(cls, d, where, gap_cause_code=np.full(0, -1, np.int8), cause_of_code={})

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
class IdleCausesResult:
    available: bool
    reason: Optional[str]
    devices: Tuple[DeviceCauses, ...] = ()
    totals: Tuple[IdleCause, ...] = ()       # summed over devices, pct of Σ window / Σ idle
    bins: Tuple[DeviceBins, ...] = ()        # per device (report.json "timeline")

    def to_dict(self) -> Dict[str, object]:
        devs = [{"device_id": d.device_id, "window_ns": d.window_ns, "busy_ns": d.busy_ns, "idle_ns": d.idle_ns,
                 "causes": [asdict(c) for c in d.causes], "other": d.other().to_dict()}   # not the per-gap cause codes
                for d in self.devices]
        tots = [{k: v for k, v in asdict(c).items() if k != "examples"} for c in self.totals]
        return {"available": self.available, "reason": self.reason, "precedence": list(KINDS),
                "devices": devs, "totals": tots}

    @classmethod
    def from_dict(cls, d: Any, where: str = "idle_causes") -> IdleCausesResult:
        """The inverse of :meth:`to_dict` with the bins under ``bins`` (``report.json`` keeps them apart, under
        ``timeline.devices``: :mod:`serialize` puts them back); the derived keys (``precedence``, each device's
        ``other``) are ignored. ``totals`` carry no examples (``to_dict()`` leaves them out): ``()``."""
        totals = [{**t, "examples": []} for t in need_rows(d, "totals", where)]
        return dataclass_from_json(cls, d, where, totals=totals)
