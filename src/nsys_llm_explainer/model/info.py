"""What the export says about the capture besides its activity rows (:class:`TraceInfo`): versions, the schema's
tables and metadata, its GPUs (:class:`GpuInfo`: the ``TARGET_INFO_GPU`` columns it has), the session
(:class:`SessionRecord`), process names, and the rows of each activity table the model holds (:class:`RowCounts`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Mapping, Optional, Tuple, Union

from ..jsonable import NOT_IN_JSON, dataclass_from_json, from_json, json_ready


@dataclass(frozen=True, eq=False)
class RowCounts(Mapping[str, int]):
    """Rows of each activity table (table → rows; which tables, and so which keys, depends on the export): an
    immutable mapping in insertion order, held as ``(table, rows)`` pairs so that it pickles, hashes and compares
    like the other frozen values; ``report.json`` writes it as an object in that order."""

    pairs: Tuple[Tuple[str, int], ...] = ()

    @classmethod
    def of(cls, counts: Mapping[str, int]) -> RowCounts:
        return cls(tuple((str(k), int(v)) for k, v in counts.items()))

    def __getitem__(self, key: str) -> int:
        return dict(self.pairs)[key]

    def __iter__(self) -> Iterator[str]:
        return (k for k, _ in self.pairs)

    def __len__(self) -> int:
        return len(self.pairs)

    def __hash__(self) -> int:
        return hash(self.pairs)

    def to_dict(self) -> Dict[str, int]:
        return dict(self.pairs)

    @classmethod
    def from_dict(cls, d: Any, where: str = "trace.row_counts") -> RowCounts:
        """The inverse of :meth:`to_dict` (an object of integers)."""
        return cls.of(from_json(Dict[str, int], d, where))


Value = Optional[Union[int, float, str]]


def _json_safe(v: object) -> Value:
    if isinstance(v, (int, float, str)) or v is None:
        return v
    return str(v)


@dataclass(frozen=True)
class GpuInfo:
    """One ``TARGET_INFO_GPU`` row: the columns the export has (``columns``, in this class's field order; a value
    that is no number or string is written as a string). ``report.json`` holds those columns only, so a GPU of an
    export without ``smCount`` has no such key (the field is None)."""

    id: Value = None
    name: Value = None
    chipName: Value = None
    busLocation: Value = None
    uuid: Value = None
    totalMemory: Value = None
    memoryBandwidth: Value = None
    clockRate: Value = None
    smCount: Value = None
    computeMajor: Value = None
    computeMinor: Value = None
    #: copy engines (``asyncEngines``): read for the copy-pace advice, not written to report.json
    asyncEngines: Value = field(default=None, metadata=NOT_IN_JSON)
    columns: Tuple[str, ...] = field(default=(), metadata=NOT_IN_JSON)

    @classmethod
    def of_row(cls, row: Mapping[str, object]) -> GpuInfo:
        """The GPU of a model row (its keys: the table's columns this class knows)."""
        names = tuple(n for n in GPU_COLUMNS if n in row)
        return cls(**{n: _json_safe(row[n]) for n in GPU_READ if n in row}, columns=names)

    def to_dict(self) -> Dict[str, Any]:   # the export's columns only
        return json_ready({c: getattr(self, c) for c in self.columns})

    @classmethod
    def from_dict(cls, d: Any, where: str = "trace.gpus") -> GpuInfo:
        """The inverse of :meth:`to_dict`: ``columns`` are the keys ``d`` has."""
        have = tuple(n for n in GPU_COLUMNS if isinstance(d, Mapping) and n in d)
        return dataclass_from_json(cls, d, where, omitted=set(GPU_COLUMNS) - set(have), columns=have)


#: the ``TARGET_INFO_GPU`` columns report.json holds (those of :class:`GpuInfo`)
GPU_COLUMNS = tuple(f.name for f in dataclasses.fields(GpuInfo) if f.metadata.get("json", True) is not False)
#: the ``TARGET_INFO_GPU`` columns read
GPU_READ = GPU_COLUMNS + ("asyncEngines",)


@dataclass(frozen=True)
class SessionRecord:
    """The session as the export records it (values as stored: readers check their type): ``utc_epoch_ns``
    (``TARGET_INFO_SESSION_START_TIME.utcEpochNs``), ``utc_time``, ``duration_ns`` (``ANALYSIS_DETAILS.duration``,
    else ``stopTime − startTime``), ``host`` (``TARGET_INFO_SYSTEM_ENV`` ``Hostname``); None when not recorded."""

    utc_epoch_ns: object = None
    utc_time: object = None
    duration_ns: object = None
    host: Optional[str] = None


@dataclass(frozen=True)
class TraceInfo:
    path: str
    product_version: Optional[str]
    schema_version: Optional[str]
    meta_table: Optional[str]
    kernel_table: Optional[str]
    tables: Dict[str, List[str]]
    meta: Dict[str, List[str]]
    gpus: Tuple[GpuInfo, ...]
    process_names: Mapping[int, str]      # PROCESSES: pid → name ("" when the export names none)
    session: SessionRecord
    row_counts: RowCounts
    graph_trace_mode: Optional[str]   # "Graph" / "Node" from capture metadata, when recorded
    #: CPU samples (``COMPOSITE_EVENTS`` rows) per process, whole capture (read/fetch_samples.count_samples_by_pid);
    #: empty when the export has no samples
    samples_by_pid: Mapping[int, int] = field(default_factory=dict)
