"""CUDA activity rows: kernels, runtime/driver API calls, memcpy/memset/sync, and bulk arrays."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, Optional, Tuple

import numpy as np

from .ids import NA_U32, global_pid, global_tid, pid_of, short_kernel_name
from .store import RowStore

if TYPE_CHECKING:  # pragma: no cover
    import numpy.typing as npt

__all__ = ["CudaRows"]


class CudaRows(RowStore):
    """Row-adding methods for the CUPTI activity tables (one call = one row, unless stated)."""

    # ----------------------------------------------------------------- CUDA activity
    def kernel(
        self,
        start: int,
        end: int,
        *,
        pid: int,
        device: int = 0,
        stream: int = 7,
        name: str = "k",
        short_name: Optional[str] = None,
        corr: Optional[int] = None,
        context: int = 1,
        grid: Tuple[int, int, int] = (1, 1, 1),
        block: Tuple[int, int, int] = (128, 1, 1),
        graph_node_id: Optional[int] = None,
        graph_id: Optional[int] = None,
        name_id: Optional[int] = None,
        mangled_name: Optional[str] = None,
        registers: int = 32,
        dynamic_shared: int = 0,
        static_shared: int = 0,
    ) -> int:
        """Add a kernel row; return the correlation id used."""
        corr = self._corr(pid, corr)
        if name_id is not None:
            dn = name_id
            sn = self.string(short_name) if short_name is not None else name_id
        else:
            dn = self.string(name)
            sn = self.string(short_name if short_name is not None else short_kernel_name(name))
        self._grid_id += 1
        self._rows["kernel"].append(
            {
                "start": int(start),
                "end": int(end),
                "deviceId": device,
                "contextId": context,
                "streamId": stream,
                "correlationId": corr,
                "globalPid": global_pid(pid),
                "demangledName": dn,
                "shortName": sn,
                "mangledName": self.string(mangled_name) if mangled_name else None,
                "registersPerThread": registers,
                "gridX": grid[0],
                "gridY": grid[1],
                "gridZ": grid[2],
                "blockX": block[0],
                "blockY": block[1],
                "blockZ": block[2],
                "gridId": self._grid_id,
                "staticSharedMemory": static_shared,
                "dynamicSharedMemory": dynamic_shared,
                "graphNodeId": graph_node_id,
                "graphId": graph_id,
            }
        )
        return corr

    def runtime(
        self,
        start: int,
        end: int,
        *,
        tid_g: int,
        name: str = "cudaLaunchKernel_v7000",
        corr: Optional[int] = None,
        event_class: int = 0,
        return_value: int = 0,
    ) -> int:
        """Add a CUDA runtime (event_class 0) or driver (1) API row; return its correlation id."""
        corr = self._corr(pid_of(tid_g), corr)
        self._rows["runtime"].append(
            {
                "start": int(start),
                "end": int(end),
                "eventClass": event_class,
                "globalTid": tid_g,
                "correlationId": corr,
                "nameId": self.string(name),
                "returnValue": return_value,
            }
        )
        return corr

    @staticmethod
    def _api_class(api: str) -> int:
        return 0 if api.startswith("cuda") else 1

    def launch(
        self,
        api_start: int,
        api_end: int,
        k_start: int,
        k_end: int,
        *,
        pid: int,
        tid: int,
        device: int = 0,
        stream: int = 7,
        name: str = "k",
        api: str = "cudaLaunchKernel_v7000",
        **kernel_kw: Any,
    ) -> int:
        """One launch API row plus its kernel row, sharing a per-process correlation id."""
        g = self.thread(pid, tid) if global_tid(pid, tid) not in self._threads else global_tid(pid, tid)
        corr = self.runtime(api_start, api_end, tid_g=g, name=api, event_class=self._api_class(api))
        self.kernel(k_start, k_end, pid=pid, device=device, stream=stream, name=name, corr=corr, **kernel_kw)
        return corr

    def _gpu_row(self, start: int, end: int, pid: int, device: int, stream: int, corr: int) -> Dict[str, Any]:
        return {
            "start": int(start),
            "end": int(end),
            "deviceId": device,
            "contextId": 1,
            "greenContextId": 0,
            "streamId": stream,
            "correlationId": corr,
            "globalPid": global_pid(pid),
        }

    def memcpy(
        self,
        start: int,
        end: int,
        *,
        pid: int,
        bytes: int,  # noqa: A002 - matches the column name
        copy_kind: int = 1,
        src_kind: int = 0,
        dst_kind: int = 2,
        device: int = 0,
        stream: int = 7,
        corr: Optional[int] = None,
    ) -> int:
        """Add a CUPTI_ACTIVITY_KIND_MEMCPY row; return the correlation id."""
        corr = self._corr(pid, corr)
        row = self._gpu_row(start, end, pid, device, stream, corr)
        row.update(bytes=int(bytes), copyKind=copy_kind, srcKind=src_kind, dstKind=dst_kind, copyCount=1)
        self._rows["memcpy"].append(row)
        return corr

    def um_migration(
        self,
        start: int,
        end: int,
        *,
        pid: int,
        bytes: int,  # noqa: A002 - matches the column name
        copy_kind: int = 11,
        cause: Optional[int] = 2,
        address: int = 0,
        device: int = 0,
    ) -> None:
        """A Unified-Memory page migration: a CUPTI_ACTIVITY_KIND_MEMCPY row with ``copyKind`` 11/12/13, managed
        memory (kind 4) on both ends, ``migrationCause`` (2 = page fault / coherence) and ``virtualAddress``; no
        launching API call (correlationId 0, stream 0)."""
        row = self._gpu_row(start, end, pid, device, 0, 0)
        row.update(bytes=int(bytes), copyKind=copy_kind, srcKind=4, dstKind=4, migrationCause=cause,
                   virtualAddress=address, copyCount=1)
        self._rows["memcpy"].append(row)

    def um_gpu_fault(
        self, start: int, end: int, *, pid: int, device: int = 0, address: int = 0, faults: int = 1, access: int = 1
    ) -> None:
        """A CUDA_UM_GPU_PAGE_FAULT_EVENTS row (a fault group: ``faults`` faults on one page; ``access``:
        ENUM_CUDA_UNIF_MEM_ACCESS_TYPE, 1 read, 2 write, 3 atomic, 4 prefetch)."""
        self._rows["um_gpu_fault"].append({
            "start": int(start), "end": int(end), "globalPid": global_pid(pid), "deviceId": device,
            "address": int(address), "numberOfPageFaults": int(faults), "faultAccessType": int(access)})

    def um_cpu_fault(self, ts: int, *, pid: int, function: str, module: str, address: int = 0) -> None:
        """A CUDA_UM_CPU_PAGE_FAULT_EVENTS row (one fault; function and module through StringIds)."""
        self._rows["um_cpu_fault"].append({
            "start": int(ts), "globalPid": global_pid(pid), "address": int(address), "originalFaultPc": 0,
            "CpuInstruction": self.string(function), "module": self.string(module), "unresolvedFaultPc": 0})

    def memset(
        self,
        start: int,
        end: int,
        *,
        pid: int,
        bytes: int,  # noqa: A002
        mem_kind: int = 2,
        value: int = 0,
        device: int = 0,
        stream: int = 7,
        corr: Optional[int] = None,
    ) -> int:
        """Add a CUPTI_ACTIVITY_KIND_MEMSET row; return the correlation id."""
        corr = self._corr(pid, corr)
        row = self._gpu_row(start, end, pid, device, stream, corr)
        row.update(bytes=int(bytes), value=value, memKind=mem_kind)
        self._rows["memset"].append(row)
        return corr

    def sync(
        self,
        start: int,
        end: int,
        *,
        pid: int,
        sync_type: int = 3,
        device: int = 0,
        stream: int = 7,
        corr: Optional[int] = None,
        event_id: int = NA_U32,
    ) -> int:
        """Add a CUPTI_ACTIVITY_KIND_SYNCHRONIZATION row; return the correlation id."""
        corr = self._corr(pid, corr)
        row = self._gpu_row(start, end, pid, device, stream, corr)
        row.update(syncType=sync_type, eventId=event_id, greenContextId=None, eventSyncId=0)
        self._rows["sync"].append(row)
        return corr

    # ----------------------------------------------------------------- bulk
    def add_kernels_bulk(
        self,
        start: np.ndarray,
        end: np.ndarray,
        device: npt.ArrayLike,
        stream: npt.ArrayLike,
        corr: np.ndarray,
        global_pid: npt.ArrayLike,
        name_id: npt.ArrayLike,
        short_id: npt.ArrayLike,
    ) -> None:  # noqa: A002
        """Queue many kernel rows given as arrays (scalars broadcast); written in shuffled chunks."""
        n = len(start)
        cols = {
            "start": start,
            "end": end,
            "deviceId": device,
            "streamId": stream,
            "correlationId": corr,
            "globalPid": global_pid,
            "demangledName": name_id,
            "shortName": short_id,
        }
        self._bulk_kernels.append(
            {k: np.broadcast_to(np.asarray(v, dtype=np.int64), (n,)) for k, v in cols.items()}
        )
        for gp in np.unique(np.asarray(global_pid)):
            p = pid_of(int(gp))
            self._processes.setdefault(p, "python3")
            if len(corr):
                self._next_corr[p] = max(self._next_corr.get(p, 1), int(np.max(corr)) + 1)

    def add_runtime_bulk(
        self,
        start: np.ndarray,
        end: np.ndarray,
        global_tid: npt.ArrayLike,
        corr: np.ndarray,
        name_id: npt.ArrayLike,
        event_class: npt.ArrayLike,
    ) -> None:  # noqa: A002
        """Queue many CUDA API rows given as arrays (scalars broadcast)."""
        n = len(start)
        cols = {
            "start": start,
            "end": end,
            "globalTid": global_tid,
            "correlationId": corr,
            "nameId": name_id,
            "eventClass": event_class,
        }
        self._bulk_runtime.append(
            {k: np.broadcast_to(np.asarray(v, dtype=np.int64), (n,)) for k, v in cols.items()}
        )
