"""State of a synthetic export: identities, strings, metadata and correlation ids.

:class:`RowStore` is the base of :class:`~.builder.TraceBuilder`; the row-adding methods live in
``rows_cuda`` / ``rows_graph`` / ``builder`` and the SQLite writer in ``writer``.
"""

from __future__ import annotations

from typing import Any, Dict, Iterator, List, Optional, Tuple

import numpy as np

from .catalog import Col, activity_tables
from .catalog_session import H100_DEFAULTS
from .ids import FLAVORS, KERNEL_TABLE, VM_GLOBAL, global_pid, global_tid, pid_of

__all__ = ["RowStore", "ROW_KEYS"]

ROW_KEYS = (
    "kernel",
    "runtime",
    "memcpy",
    "memset",
    "sync",
    "graph_trace",
    "graph_events",
    "graph_node_events",
    "nvtx",
    "osrt",
    "um_gpu_fault",
    "um_cpu_fault",
)


class RowStore:
    """Rows collected so far plus the identity tables (processes, threads, GPUs, strings, metadata)."""

    def __init__(
        self,
        flavor: str = "2024.2",
        *,
        lazy: bool = True,
        seed: int = 0,
        kernel_table_name: str = KERNEL_TABLE,
        kernel_has_global_pid: bool = True,
        auto_gpu: bool = True,
        shuffle: bool = True,
        utc_epoch_ns: int = 1735732800000000000,
        host: Optional[str] = None,
    ) -> None:
        if flavor not in FLAVORS:
            raise ValueError(f"unknown flavor {flavor!r}; expected one of {sorted(FLAVORS)}")
        self.flavor = flavor
        self.lazy = lazy
        self.seed = seed
        self.kernel_table_name = kernel_table_name
        self.auto_gpu = auto_gpu
        self.shuffle = shuffle
        self.utc_epoch_ns = utc_epoch_ns
        #: TARGET_INFO_SYSTEM_ENV's Hostname row (2022.4 flavors on, as real captures of 2022.x on have it); None (the
        #: default: the shipped demo traces stay as they are) writes no table
        self.host = host
        self._flv = FLAVORS[flavor][3]
        self._strings: Dict[str, int] = {}
        self._string_list: List[Tuple[int, str]] = []
        self._next_string = 0
        self.string("[Unknown]")
        self._rows: Dict[str, List[Dict[str, Any]]] = {k: [] for k in ROW_KEYS}
        self._bulk_kernels: List[Dict[str, np.ndarray]] = []
        self._bulk_runtime: List[Dict[str, np.ndarray]] = []
        self._processes: Dict[int, str] = {}
        self._threads: Dict[int, Optional[str]] = {}
        self._gpus: Dict[int, Dict[str, Any]] = {}
        self._meta: List[Tuple[str, str, str]] = []
        self._next_corr: Dict[int, int] = {}
        self._grid_id = 0
        self._range_id = 0
        self._graph_nodes: Dict[Tuple[int, int], List[int]] = {}
        self._next_node_id = 1
        self._dropped: Dict[str, set] = {}
        #: ``(startTime, stopTime)`` written to ANALYSIS_DETAILS (``duration`` = their difference); None: the
        #: session is min(0, first timestamp) → last timestamp
        self.session: Optional[Tuple[int, int]] = None
        if not kernel_has_global_pid:
            self.drop_column(kernel_table_name, "globalPid")

    # ----------------------------------------------------------------- identities / strings
    def process(self, pid: int, name: str = "python3") -> int:
        """Register a process (PROCESSES row); return its globalPid."""
        self._processes[pid] = name
        return global_pid(pid)

    def thread(self, pid: int, tid: int, name: Optional[str] = None) -> int:
        """Register a thread (ThreadNames row when named); return its globalTid."""
        g = global_tid(pid, tid)
        if pid not in self._processes:
            self._processes[pid] = "python3"
        if name is not None or g not in self._threads:
            self._threads[g] = name
        return g

    def gpu(
        self,
        id: int = 0,  # noqa: A002 - matches the column name
        name: str = "NVIDIA H100 80GB HBM3",
        sm_count: int = 132,
        memory_bandwidth: int = 3352000000000,
        bus: Optional[str] = None,
        total_memory: int = 85045231616,
        **extra: Any,
    ) -> None:
        """Add a TARGET_INFO_GPU row (other columns default to H100-like values)."""
        row = dict(H100_DEFAULTS)
        row.update(
            vmId=VM_GLOBAL,
            id=id,
            name=name,
            smCount=sm_count,
            memoryBandwidth=memory_bandwidth,
            busLocation=bus or f"0000:{0x18 + 0x10 * id:02x}:00.0",
            totalMemory=total_memory,
            uuid=f"GPU-{id:08x}-5e1f-4c1a-9d2b-{id:012x}",
            cuDevice=id,
        )
        row.update(extra)
        self._gpus[id] = row

    def string(self, value: str) -> int:
        """StringIds id of ``value`` (deduplicated)."""
        sid = self._strings.get(value)
        if sid is None:
            sid = self._next_string
            self._next_string += 1
            self._strings[value] = sid
            self._string_list.append((sid, value))
        return sid

    def meta(self, key: str, value: Any, table: Optional[str] = None) -> None:
        """Extra metadata row; goes to META_DATA_CAPTURE where that table exists (>= 2023.4)."""
        if table is None:
            if self._flv >= 2 and not key.startswith("EXPORT_"):
                table = "META_DATA_CAPTURE"
            else:
                table = self._export_meta_table()
        self._meta.append((table, key, str(value)))

    def drop_column(self, table: str, column: str) -> None:
        """Omit ``column`` from ``table`` (to mimic odd exports)."""
        self._dropped.setdefault(table, set()).add(column)

    # ----------------------------------------------------------------- correlation ids
    def _corr(self, pid: int, corr: Optional[int]) -> int:
        nxt = self._next_corr.get(pid, 1)
        if corr is None:
            corr = nxt
        self._next_corr[pid] = max(nxt, corr + 1)
        return corr

    def next_corr(self, pid: int) -> int:
        """Allocate the next correlation id of ``pid`` without writing a row."""
        return self._corr(pid, None)

    # ----------------------------------------------------------------- schema per flavor
    def _export_meta_table(self) -> str:
        return "EXPORT_META_DATA" if self._flv <= 1 else "META_DATA_EXPORT"

    def _activity_tables(self) -> Dict[str, Tuple[str, List[Col]]]:
        return activity_tables(self._flv, self.kernel_table_name)

    def table_columns(self, key: str) -> List[str]:
        """Column names the written table for logical ``key`` (e.g. "kernel") will have."""
        name, cols = self._activity_tables()[key]
        drop = self._dropped.get(name, set())
        return [c[0] for c in cols if c[0] not in drop]

    # ----------------------------------------------------------------- introspection helpers
    def rows(self, key: str) -> List[Dict[str, Any]]:
        """Rows collected so far for logical table ``key`` (read-only use)."""
        return self._rows[key]

    def iter_kernel_intervals(self) -> Iterator[Tuple[int, int, int, int]]:
        """(pid, device, start, end) of every non-bulk kernel row."""
        for r in self._rows["kernel"]:
            yield pid_of(r["globalPid"]), r["deviceId"], r["start"], r["end"]
