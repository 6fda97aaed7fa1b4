"""Normalized, columnar trace model shared by every analysis.

All times are integer nanoseconds on the export's timeline. Ids are decoded once here:
``pid = (globalPid >> 24) & 0xFFFFFF``, ``tid = globalTid & 0xFFFFFF`` (SCHEMA.md §2.3).
Arrays of one table have equal length; ``-1`` means "unknown / NULL".
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, List, Mapping, Optional, Tuple

import numpy as np

from .info import RowCounts, TraceInfo

if TYPE_CHECKING:  # pragma: no cover
    from .samples import CpuSamples, SampleTimes

PID_SHIFT = 24
ID_MASK = 0xFFFFFF


def pid_of(global_id: np.ndarray) -> np.ndarray:
    """PID from a serialized globalPid/globalTid (bits 24–47); -1 stays -1."""
    g = np.asarray(global_id, dtype=np.int64)
    out = ((g >> PID_SHIFT) & ID_MASK).astype(np.int32)
    return np.where(g < 0, np.int32(-1), out)


def tid_of(global_tid: np.ndarray) -> np.ndarray:
    """TID from a serialized globalTid (low 24 bits); -1 stays -1."""
    g = np.asarray(global_tid, dtype=np.int64)
    return np.where(g < 0, np.int32(-1), (g & ID_MASK).astype(np.int32))


@dataclass(frozen=True)
class Rows:
    """Rows of one table of the model, each a span ``[start, end)`` (ns on the export's timeline); every other
    array of a subclass holds one value per row, or none while unset (``launch_idx``, ``read_pos``, ``domain``):
    model/clip.py takes them all alike."""

    start: np.ndarray
    end: np.ndarray

    def __len__(self) -> int:
        return int(self.start.shape[0])


@dataclass(frozen=True)
class Kernels(Rows):
    """One row per kernel execution, sorted by ``start``."""

    device: np.ndarray        # device id (physical GPU id when the export maps it, else CUDA deviceId)
    stream: np.ndarray
    corr: np.ndarray          # correlationId (per process; int32 when every id fits)
    pid: np.ndarray           # -1 when the export has no globalPid column
    name_idx: np.ndarray      # index into ``names``
    graph_node: np.ndarray    # graphNodeId when the kernel ran as a CUDA-graph node, else -1
    names: List[str]
    launch_idx: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))  # row in ApiCalls or -1
    #: where each kernel was in the kernel table: the read returned every row, the k-th row read has rowid
    #: ``rowid_base + k`` (rowids consecutive), and kernel i is row ``read_pos[i]`` read (empty: row i, the read
    #: order kept); ``rowid_base`` None: unknown (a clipped model, an export whose rowids have gaps)
    rowid_base: Optional[int] = None
    read_pos: np.ndarray = field(default_factory=lambda: np.empty(0, np.int32))

    @property
    def dur(self) -> np.ndarray:
        return self.end - self.start

    def rowids(self, rows: np.ndarray) -> Optional[np.ndarray]:
        """The kernel table's rowid of each of ``rows`` (int64), None when unknown (``rowid_base``)."""
        if self.rowid_base is None:
            return None
        pos = np.asarray(rows, np.int64) if self.read_pos.shape[0] == 0 else self.read_pos[rows].astype(np.int64)
        return pos + self.rowid_base


@dataclass(frozen=True)
class ApiCalls(Rows):
    """CUDA runtime + driver API calls (``CUPTI_ACTIVITY_KIND_RUNTIME``), sorted by ``start``."""

    gtid: np.ndarray
    pid: np.ndarray
    tid: np.ndarray
    corr: np.ndarray
    name_idx: np.ndarray      # index into ``names`` (raw names, e.g. cudaLaunchKernel_v7000)
    event_class: np.ndarray   # 0 runtime, 1 driver
    names: List[str]
    base_names: List[str]     # display names as nsys stats prints them (docs/METRICS.md: a trailing ``_vNNNN`` removed)

    @property
    def primary(self) -> np.ndarray:
        """Rows of the CUDA runtime (eventClass 0) or driver (1) API — not wrapper classes such as the
        eventClass-67 duplicates some MPI/OpenACC captures record around the same call."""
        return (self.event_class == 0) | (self.event_class == 1) | (self.event_class < 0)


@dataclass(frozen=True)
class NvtxRanges(Rows):
    """NVTX push/pop (59, 70) and start/end (60, 71) ranges, sorted by ``start``.

    ``end`` of an unterminated range (NULL in the export) is set by the rule in docs/METRICS.md (nsys 2022.4:
    the latest NVTX timestamp); ``closed`` is False.
    Names are domain-qualified (``NCCL:ncclAllReduce``) when the range is in a non-default domain.
    """

    closed: np.ndarray        # bool
    event_type: np.ndarray
    gtid: np.ndarray
    pid: np.ndarray
    tid: np.ndarray
    end_gtid: np.ndarray
    name_idx: np.ndarray
    names: List[str]
    domain: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))  # domainId (0 = default), per process

    @property
    def is_push_pop(self) -> np.ndarray:
        return (self.event_type == 59) | (self.event_type == 70)


@dataclass(frozen=True)
class GpuRows(Rows):
    """Rows of one activity table besides kernels, API calls and NVTX: ``start``/``end`` (ns) and ``pid`` (decoded,
    the process's when the export left it out). Each kind below adds its own columns; a column the export lacks
    reads as ``-1`` (read/fetch.py), so every field is always an array of ``len(self)`` rows."""

    pid: np.ndarray


@dataclass(frozen=True)
class GpuActivity(GpuRows):
    """GPU activity launched by a CUDA API call (memcpy, memset, synchronization, graph launches)."""

    device: np.ndarray        # device id, mapped like the kernels' (physical GPU id when the export maps it)
    stream: np.ndarray
    corr: np.ndarray          # correlationId
    gpid: np.ndarray          # globalPid as read
    launch_idx: np.ndarray    # row in ApiCalls of the launching call, or -1


@dataclass(frozen=True)
class Memcpy(GpuActivity):
    """``CUPTI_ACTIVITY_KIND_MEMCPY``, sorted by ``start``."""

    bytes: np.ndarray
    copy_kind: np.ndarray     # copyKind (ENUM_CUDA_MEMCPY_OPER)
    src_kind: np.ndarray      # srcKind (ENUM_CUDA_MEM_KIND)
    dst_kind: np.ndarray      # dstKind
    graph_node: np.ndarray    # graphNodeId, -1 when not a graph node
    migration_cause: np.ndarray   # migrationCause (Unified Memory copies)


@dataclass(frozen=True)
class Memset(GpuActivity):
    """``CUPTI_ACTIVITY_KIND_MEMSET``, sorted by ``start``."""

    bytes: np.ndarray
    mem_kind: np.ndarray      # memKind (ENUM_CUDA_MEM_KIND)
    graph_node: np.ndarray


@dataclass(frozen=True)
class SyncRows(GpuActivity):
    """``CUPTI_ACTIVITY_KIND_SYNCHRONIZATION``, sorted by ``start``."""

    sync_type: np.ndarray     # syncType (ENUM_CUPTI_SYNC_TYPE)


@dataclass(frozen=True)
class GraphTrace(GpuActivity):
    """``CUPTI_ACTIVITY_KIND_GRAPH_TRACE`` (one row per graph launch, graph-level tracing), sorted by ``start``."""

    graph_id: np.ndarray
    graph_exec_id: np.ndarray


@dataclass(frozen=True)
class OsCalls(GpuRows):
    """``OSRT_API``: OS-runtime calls of the CPU threads, sorted by ``start``."""

    gtid: np.ndarray          # serialized globalTid
    name_id: np.ndarray       # StringIds id of the call's name
    name_idx: np.ndarray      # index into ``names``
    names: List[str]


@dataclass(frozen=True)
class UmGpuFaults(GpuRows):
    """``CUDA_UM_GPU_PAGE_FAULT_EVENTS``, sorted by ``start``."""

    device: np.ndarray
    gpid: np.ndarray
    faults: np.ndarray        # numberOfPageFaults
    access: np.ndarray        # faultAccessType


@dataclass(frozen=True)
class UmCpuFaults(GpuRows):
    """``CUDA_UM_CPU_PAGE_FAULT_EVENTS``: point events (``end`` = ``start``), sorted by ``start``."""

    gpid: np.ndarray
    func_idx: np.ndarray      # index into ``names`` (CpuInstruction)
    module_idx: np.ndarray    # index into ``names`` (module)
    names: List[str]


def sql_int(v: object) -> int:
    """``int(v)`` of a value read from SQLite (an info-table cell): ``TypeError`` for NULL or a non-number type,
    ``ValueError`` for text that is not a number — as ``int()`` itself."""
    if isinstance(v, (int, float, str, bytes)):
        return int(v)
    raise TypeError(f"not a number: {v!r}")


@dataclass(frozen=True)
class TraceModel:
    """Everything the analyses need, read once; frozen: a model of another window is a new one (model/clip.py),
    sharing the arrays and names it does not change."""

    info: TraceInfo
    kernels: Optional[Kernels]
    api: Optional[ApiCalls]
    nvtx: Optional[NvtxRanges]
    memcpy: Optional[Memcpy]
    memset: Optional[Memset]
    sync: Optional[SyncRows]
    graph_trace: Optional[GraphTrace]
    osrt: Optional[OsCalls]
    thread_names: Mapping[int, str]
    #: label of every named thread (:func:`names.thread_labels`), computed once by model/build.py; a clipped model
    #: keeps its source's, so every window names a thread alike
    thread_labels: Mapping[int, str] = field(repr=False)
    warnings: Tuple[str, ...] = ()
    notes: Tuple[str, ...] = ()   # schema quirks handled (stated in the report)
    # ---- Unified Memory page faults (None when the export has no such table; docs/METRICS.md "Unified Memory")
    um_gpu_faults: Optional[UmGpuFaults] = None
    um_cpu_faults: Optional[UmCpuFaults] = None
    samples: Optional[CpuSamples] = None   # CPU samples of the CUDA-calling threads (model/samples.py)
    #: time and thread of the samples of every process's threads inside the CUDA-calling threads' waits or a time
    #: when a device idles between its kernels (model/samples.build_wait_samples)
    wait_samples: Optional[SampleTimes] = None

    def thread_label(self, gtid: int) -> str:
        """How every output names thread ``gtid`` (serialized globalTid): its :attr:`thread_labels` entry, ``""``
        for a thread without a name (the output keeps its own fallback)."""
        return self.thread_labels.get(int(gtid), "")

    def with_row_counts(self) -> TraceModel:
        """This model with ``info.row_counts`` holding the rows of each of its activity tables (0: absent)."""
        tables = {"kernels": self.kernels, "cuda_api": self.api, "nvtx_ranges": self.nvtx, "memcpy": self.memcpy,
                  "memset": self.memset, "sync": self.sync, "graph_trace": self.graph_trace}
        counts = RowCounts.of({k: 0 if t is None else len(t) for k, t in tables.items()})
        return dataclasses.replace(self, info=dataclasses.replace(self.info, row_counts=counts))

    @property
    def cuda_rows(self) -> Tuple[Optional[Rows], ...]:
        """The tables of CUDA activity: kernels, API calls, memcpy, memset, sync, graph launches."""
        return self.kernels, self.api, self.memcpy, self.memset, self.sync, self.graph_trace

    @property
    def trace_start(self) -> Optional[int]:
        return trace_edge(min, *self.cuda_rows, self.nvtx)

    @property
    def trace_end(self) -> Optional[int]:
        return trace_edge(max, *self.cuda_rows, self.nvtx)


def active_threads(api: Optional[ApiCalls], nvtx: Optional[NvtxRanges], osrt: Optional[OsCalls],
                   distinct: Callable[[np.ndarray], np.ndarray] = np.unique) -> List[int]:
    """The threads (serialized globalTid) with CUDA API calls, NVTX ranges or OS-runtime calls: those a report can
    name side by side (:func:`names.thread_labels`); ``distinct``: sorted distinct values of an array."""
    out: List[int] = []
    for g in (None if api is None else api.gtid, None if nvtx is None else nvtx.gtid,
              None if osrt is None else osrt.gtid):
        if g is not None and g.shape[0]:
            out += distinct(np.asarray(g, np.int64)).tolist()
    return out


def trace_edge(fn: Callable[[List[int]], int], *tables: Optional[Rows]) -> Optional[int]:
    """The first start (``fn`` = ``min``) or the last end (``max``) over the given tables; ``None`` when all
    are empty."""
    vals = [int(p.start.min()) if fn is min else int(p.end.max()) for p in tables if p is not None and len(p)]
    return fn(vals) if vals else None
