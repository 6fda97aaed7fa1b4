"""Write Nsight-Systems-shaped SQLite exports with our own code.

`TraceBuilder` collects rows through small methods (``kernel``, ``runtime``, ``nvtx_push_pop`` ...)
and writes a database whose table and column names follow the real exporter of the chosen
*flavor* (see ``/work/shared/SCHEMA.md``). Rows are written in a shuffled order because real
exports are not time-ordered.
"""

from __future__ import annotations

import os
import sqlite3
from typing import Any, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

import numpy as np

__all__ = ["TraceBuilder", "FLAVORS", "global_pid", "global_tid", "short_kernel_name"]

VM_ID = 1
VM_GLOBAL = VM_ID << 48
NA_U32 = 4294967295

# flavor -> (product version, schema version, checksum text, order index)
FLAVORS: Dict[str, Tuple[str, str, str, int]] = {
    "2021.5": ("2021.5.1.117", "2.7.1", "2816540463 93867", 0),
    "2022.4": ("2022.4.2.1", "3.0.0", "4042420554 115894", 1),
    "2023.4": ("2023.4.4.54", "3.7.2", "2307844469 139029", 2),
    "2024.2": ("2024.2.3.38", "3.11.1", "1402331367 146290", 3),
    "2026.2": ("2026.2.1.210", "3.25.0", "306658267 182758", 4),
}

KERNEL_TABLE = "CUPTI_ACTIVITY_KIND_KERNEL"
OLD_KERNEL_TABLE = "CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL"


def global_pid(pid: int, vm: int = VM_ID, hw: int = 0) -> int:
    """Serialized globalPid: <HW:8><VM:8><PID:24><TID:24=0>."""
    return (hw << 56) | (vm << 48) | ((pid & 0xFFFFFF) << 24)


def global_tid(pid: int, tid: int, vm: int = VM_ID, hw: int = 0) -> int:
    """Serialized globalTid: <HW:8><VM:8><PID:24><TID:24>."""
    return global_pid(pid, vm, hw) | (tid & 0xFFFFFF)


def _pid_of(g: int) -> int:
    return (g >> 24) & 0xFFFFFF


def short_kernel_name(name: str) -> str:
    """Bare function name as nsys puts it in ``shortName`` (no namespace, templates or args)."""
    s = name.strip()
    if s.startswith("void "):
        s = s[5:]
    out: List[str] = []
    i = 0
    while i < len(s):
        if s.startswith("(anonymous namespace)", i):
            out.append("(anonymous namespace)")
            i += len("(anonymous namespace)")
            continue
        c = s[i]
        if c in "<(":
            break
        out.append(c)
        i += 1
    base = "".join(out).strip()
    if "::" in base:
        base = base.rsplit("::", 1)[1]
    return base or name


# ---------------------------------------------------------------------------------------------
# Column specs: (name, type, not_null, comment). Order matters: it is the exporter's order.
# ---------------------------------------------------------------------------------------------
Col = Tuple[str, str, bool, str]

_SE: List[Col] = [
    ("start", "INTEGER", True, "Event start timestamp (ns)."),
    ("end", "INTEGER", True, "Event end timestamp (ns)."),
]
_GPU_HEAD: List[Col] = _SE + [
    ("deviceId", "INTEGER", True, "Device ID."),
    ("contextId", "INTEGER", True, "Context ID."),
]
_GREEN: Col = ("greenContextId", "INTEGER", False, "Green context ID.")


def _graph_ref(flv: int) -> str:
    return "CUDA_GRAPH_NODE_EVENTS" if flv >= 3 else "CUDA_GRAPH_EVENTS"


def _gpu_head(flv: int, corr_comment: str) -> List[Col]:
    cols = list(_GPU_HEAD)
    if flv >= 2:
        cols.append(_GREEN)
    cols += [
        ("streamId", "INTEGER", True, "Stream ID."),
        ("correlationId", "INTEGER", False, corr_comment),
        ("globalPid", "INTEGER", False, "Serialized GlobalId."),
    ]
    return cols


def _kernel_cols(flv: int) -> List[Col]:
    cols = _gpu_head(flv, "REFERENCES CUPTI_ACTIVITY_KIND_RUNTIME(correlationId)")
    launch_enum = "ENUM_CUDA_KRENEL_LAUNCH_TYPE" if flv <= 1 else "ENUM_CUDA_KERNEL_LAUNCH_TYPE"
    cols += [
        ("demangledName", "INTEGER", True, "REFERENCES StringIds(id) -- Kernel function name w/ templates"),
        ("shortName", "INTEGER", True, "REFERENCES StringIds(id) -- Base kernel function name"),
        ("mangledName", "INTEGER", False, "REFERENCES StringIds(id) -- Raw C++ mangled kernel function name"),
        ("launchType", "INTEGER", False, f"REFERENCES {launch_enum}(id)"),
        ("cacheConfig", "INTEGER", False, "REFERENCES ENUM_CUDA_FUNC_CACHE_CONFIG(id)"),
        (
            "registersPerThread",
            "INTEGER",
            True,
            "Number of registers required for each thread executing the kernel.",
        ),
        ("gridX", "INTEGER", True, "X-dimension grid size."),
        ("gridY", "INTEGER", True, "Y-dimension grid size."),
        ("gridZ", "INTEGER", True, "Z-dimension grid size."),
        ("blockX", "INTEGER", True, "X-dimension block size."),
        ("blockY", "INTEGER", True, "Y-dimension block size."),
        ("blockZ", "INTEGER", True, "Z-dimension block size."),
        ("staticSharedMemory", "INTEGER", True, "Static shared memory allocated for the kernel (B)."),
        ("dynamicSharedMemory", "INTEGER", True, "Dynamic shared memory reserved for the kernel (B)."),
        ("localMemoryPerThread", "INTEGER", True, "Amount of local memory reserved for each thread (B)."),
        ("localMemoryTotal", "INTEGER", True, "Total amount of local memory reserved for the kernel (B)."),
        ("gridId", "INTEGER", True, "Unique grid ID of the kernel assigned at runtime."),
        ("sharedMemoryExecuted", "INTEGER", False, "Shared memory size set by the driver."),
        ("graphNodeId", "INTEGER", False, f"REFERENCES {_graph_ref(flv)}(graphNodeId)"),
        ("sharedMemoryLimitConfig", "INTEGER", False, "REFERENCES ENUM_CUDA_SHARED_MEM_LIMIT_CONFIG(id)"),
    ]
    if flv >= 4:
        cols += [
            ("qmdBulkReleaseDone", "INTEGER", False, "QMD bulk release done timestamp from CWD events."),
            ("qmdPreexitDone", "INTEGER", False, "QMD pre-exit done timestamp from CWD events."),
            ("qmdLastCtaDone", "INTEGER", False, "QMD last CTA done timestamp from CWD events."),
            ("graphId", "INTEGER", False, "Kernel graph ID."),
            ("clusterX", "INTEGER", False, "Cluster X dimension."),
            ("clusterY", "INTEGER", False, "Cluster Y dimension."),
            ("clusterZ", "INTEGER", False, "Cluster Z dimension."),
            ("clusterSchedulingPolicy", "INTEGER", False, "Cluster scheduling policy."),
            ("maxPotentialClusterSize", "INTEGER", False, "Maximum potential cluster size."),
            ("maxActiveClusters", "INTEGER", False, "Maximum active clusters."),
            ("sharedMemoryRequestedPercentage", "INTEGER", False, "Shared memory requested percentage."),
            (
                "tensorSizeMinusOneElements",
                "TEXT",
                True,
                "TMA descriptor tensor size minus one elements array.",
            ),
        ]
    return cols


def _memcpy_cols(flv: int) -> List[Col]:
    cols = _gpu_head(flv, "REFERENCES CUPTI_ACTIVITY_KIND_RUNTIME(correlationId)")
    cols += [
        ("bytes", "INTEGER", True, "Number of bytes transferred (B)."),
        ("copyKind", "INTEGER", True, "REFERENCES ENUM_CUDA_MEMCPY_OPER(id)"),
        ("deprecatedSrcId", "INTEGER", False, "Deprecated, use srcDeviceId instead."),
        ("srcKind", "INTEGER", False, "REFERENCES ENUM_CUDA_MEM_KIND(id)"),
        ("dstKind", "INTEGER", False, "REFERENCES ENUM_CUDA_MEM_KIND(id)"),
        ("srcDeviceId", "INTEGER", False, "Source device ID."),
        ("srcContextId", "INTEGER", False, "Source context ID."),
        ("dstDeviceId", "INTEGER", False, "Destination device ID."),
        ("dstContextId", "INTEGER", False, "Destination context ID."),
        ("migrationCause", "INTEGER", False, "REFERENCES ENUM_CUDA_UNIF_MEM_MIGRATION(id)"),
        ("graphNodeId", "INTEGER", False, f"REFERENCES {_graph_ref(flv)}(graphNodeId)"),
        ("virtualAddress", "INTEGER", False, "Virtual base address of the page/s being transferred."),
    ]
    if flv >= 4:
        cols.append(
            ("copyCount", "INTEGER", False, "The total number of memcopy operations traced in this record.")
        )
    return cols


def _memset_cols(flv: int) -> List[Col]:
    cols = _gpu_head(flv, "REFERENCES CUPTI_ACTIVITY_KIND_RUNTIME(correlationId)")
    cols += [
        ("value", "INTEGER", True, "Value assigned to memory."),
        ("bytes", "INTEGER", True, "Number of bytes set (B)."),
        ("graphNodeId", "INTEGER", False, f"REFERENCES {_graph_ref(flv)}(graphNodeId)"),
        ("memKind", "INTEGER", False, "REFERENCES ENUM_CUDA_MEM_KIND(id)"),
    ]
    return cols


def _sync_cols(flv: int) -> List[Col]:
    cols = _gpu_head(flv, "Correlation ID of the synchronization API to which this result is associated.")
    if flv >= 4:
        cols.append(
            (
                "deprecatedSyncType",
                "INTEGER",
                False,
                "Deprecated, use syncType instead. For older report, REFERENCES ENUM_CUPTI_SYNC_TYPE(id)",
            )
        )
    cols += [
        ("syncType", "INTEGER", True, "REFERENCES ENUM_CUPTI_SYNC_TYPE(id)"),
        ("eventId", "INTEGER", True, "Event ID for which the synchronization API is called."),
    ]
    if flv >= 4:
        cols.append(
            (
                "eventSyncId",
                "INTEGER",
                False,
                "CUDA Event Sync ID to link the synchronization API to associated event record API.",
            )
        )
    return cols


def _graph_trace_cols(flv: int) -> List[Col]:
    cols = _gpu_head(max(flv, 2), "REFERENCES CUPTI_ACTIVITY_KIND_RUNTIME(correlationId)")
    cols += [
        ("graphId", "INTEGER", False, "REFERENCES CUDA_GRAPH_EVENTS(graphId)"),
        ("graphExecId", "INTEGER", False, "REFERENCES CUDA_GRAPH_EVENTS(graphExecId)"),
    ]
    return cols


_RUNTIME_COLS: List[Col] = _SE + [
    ("eventClass", "INTEGER", True, "REFERENCES ENUM_NSYS_EVENT_CLASS(id)"),
    ("globalTid", "INTEGER", False, "Serialized GlobalId."),
    ("correlationId", "INTEGER", False, "ID used to identify events that this function call has triggered."),
    ("nameId", "INTEGER", True, "REFERENCES StringIds(id) -- Function name"),
    ("returnValue", "INTEGER", True, "Return value of the function call."),
    ("callchainId", "INTEGER", False, "REFERENCES CUDA_CALLCHAINS(id)"),
]

_GRAPH_NODE_EVENT_COLS: List[Col] = _SE + [
    ("eventClass", "INTEGER", True, "REFERENCES ENUM_NSYS_EVENT_CLASS(id)"),
    ("globalTid", "INTEGER", False, "Serialized GlobalId."),
    ("nameId", "INTEGER", True, "REFERENCES StringIds(id) -- Function name"),
    ("graphNodeId", "INTEGER", True, "REFERENCES CUDA_GRAPH_EVENTS(graphNodeId)"),
    ("originalGraphNodeId", "INTEGER", False, "Reference to the original graph node ID, if cloned node."),
]

_GRAPH_EVENT_COLS: List[Col] = _SE + [
    ("eventClass", "INTEGER", True, "REFERENCES ENUM_NSYS_EVENT_CLASS(id)"),
    ("globalTid", "INTEGER", False, "Serialized GlobalId."),
    ("nameId", "INTEGER", True, "REFERENCES StringIds(id) -- Function name"),
    ("graphId", "INTEGER", False, "Graph ID."),
    ("originalGraphId", "INTEGER", False, "Reference to the original graph ID, if cloned graph."),
    ("graphExecId", "INTEGER", False, "Graph exec ID."),
]


def _nvtx_cols(flv: int) -> List[Col]:
    cols: List[Col] = [
        ("start", "INTEGER", True, "Event start timestamp (ns)."),
        ("end", "INTEGER", False, "Event end timestamp (ns)."),
        ("eventType", "INTEGER", True, "REFERENCES ENUM_NSYS_EVENT_TYPE(id)"),
        ("rangeId", "INTEGER", False, "Correlation ID returned from a nvtxRangeStart call."),
        ("category", "INTEGER", False, "User-controlled ID that can be used to group events."),
        ("color", "INTEGER", False, "Encoded ARGB color value."),
        ("text", "TEXT", False, "Optional text message for non registered strings."),
        ("globalTid", "INTEGER", False, "Serialized GlobalId."),
        ("endGlobalTid", "INTEGER", False, "Serialized GlobalId."),
        ("textId", "INTEGER", False, "REFERENCES StringIds(id) -- Registered NVTX domain"),
        ("domainId", "INTEGER", False, "User-controlled ID that can be used to group events."),
        ("uint64Value", "INTEGER", False, "One of possible payload value union members."),
        ("int64Value", "INTEGER", False, "One of possible payload value union members."),
        ("doubleValue", "REAL", False, "One of possible payload value union members."),
        ("uint32Value", "INTEGER", False, "One of possible payload value union members."),
        ("int32Value", "INTEGER", False, "One of possible payload value union members."),
        ("floatValue", "REAL", False, "One of possible payload value union members."),
        ("jsonTextId", "INTEGER", False, "One of possible payload value union members."),
        ("jsonText", "TEXT", False, "One of possible payload value union members."),
    ]
    if flv >= 4:
        cols.append(("binaryData", "TEXT", False, "Binary payload. See docs for format."))
    return cols


_OSRT_COLS: List[Col] = _SE + [
    ("eventClass", "INTEGER", True, "REFERENCES ENUM_NSYS_EVENT_CLASS(id)"),
    ("globalTid", "INTEGER", False, "Serialized GlobalId."),
    ("nameId", "INTEGER", True, "REFERENCES StringIds(id) -- Function name"),
    ("returnValue", "INTEGER", True, "Return value of the function call."),
    ("nestingLevel", "INTEGER", False, "Zero-base index of the nesting level."),
    ("callchainId", "INTEGER", True, "REFERENCES OSRT_CALLCHAINS(id)"),
]

_META_COLS: List[Col] = [
    ("name", "TEXT", True, "Name of meta-data record"),
    ("value", "TEXT", False, "Value of meta-data record"),
]

_STRING_COLS: List[Col] = [
    ("id", "INTEGER", True, "ID reference value."),
    ("value", "TEXT", True, "String value."),
]

_ENUM_COLS: List[Col] = [
    ("id", "INTEGER", True, "Enum numerical value."),
    ("name", "TEXT", False, "Enum symbol name."),
    ("label", "TEXT", False, "Enum human name."),
]

_PROCESS_COLS: List[Col] = [
    ("globalPid", "INTEGER", False, "Serialized GlobalId."),
    ("pid", "INTEGER", False, "The process ID."),
    ("name", "TEXT", False, "The process name."),
]

_THREAD_COLS: List[Col] = [
    ("nameId", "INTEGER", True, "REFERENCES StringIds(id) -- Thread name"),
    ("priority", "INTEGER", False, "Priority of the thread."),
    ("globalTid", "INTEGER", False, "Serialized GlobalId."),
]

_ANALYSIS_COLS: List[Col] = [
    ("globalVid", "INTEGER", True, "Serialized GlobalId."),
    ("duration", "INTEGER", True, "The total time span of the entire trace (ns)."),
    ("startTime", "INTEGER", True, "Trace start timestamp in nanoseconds."),
    ("stopTime", "INTEGER", True, "Trace stop timestamp in nanoseconds."),
]


def _session_cols(flv: int) -> List[Col]:
    cols: List[Col] = [
        ("utcEpochNs", "INTEGER", False, "UTC Epoch timestamp at start of the capture (ns)."),
        ("utcTime", "TEXT", False, "Start of the capture in UTC."),
        ("localTime", "TEXT", False, "Start of the capture in local time of target."),
    ]
    if flv >= 4:
        cols.append(
            ("systemClockNs", "INTEGER", False, "Target system clock timestamp at start of the capture (ns).")
        )
    return cols


_GPU_INFO_COLS: List[Col] = [
    ("vmId", "INTEGER", True, "Serialized GlobalId."),
    ("id", "INTEGER", True, "Device ID."),
    ("name", "TEXT", False, "Device name."),
    ("busLocation", "TEXT", False, "PCI bus location."),
    ("isDiscrete", "INTEGER", False, "True if discrete, false if integrated."),
    ("l2CacheSize", "INTEGER", False, "Size of L2 cache (B)."),
    ("totalMemory", "INTEGER", False, "Total amount of memory on the device (B)."),
    ("memoryBandwidth", "INTEGER", False, "Amount of memory transferred (B)."),
    ("clockRate", "INTEGER", False, "Clock frequency (Hz)."),
    ("smCount", "INTEGER", False, "Number of multiprocessors on the device."),
    ("pwGpuId", "INTEGER", False, "PerfWorks GPU ID."),
    ("uuid", "TEXT", False, "Device UUID."),
    ("luid", "INTEGER", False, "Device LUID."),
    ("chipName", "TEXT", False, "Chip name."),
    ("cuDevice", "INTEGER", False, "CUDA device ID."),
    ("ctxswDevPath", "TEXT", False, "GPU context switch device node path."),
    ("ctrlDevPath", "TEXT", False, "GPU control device node path."),
    ("revision", "INTEGER", False, "Revision number."),
    ("nodeMask", "INTEGER", False, "Device node mask."),
    ("constantMemory", "INTEGER", False, "Memory available on device for __constant__ variables (B)."),
    ("maxIPC", "INTEGER", False, "Maximum instructions per count."),
    ("maxRegistersPerBlock", "INTEGER", False, "Maximum number of 32-bit registers available per block."),
    ("maxShmemPerBlock", "INTEGER", False, "Maximum optin shared memory per block."),
    ("maxShmemPerBlockOptin", "INTEGER", False, "Maximum optin shared memory per block."),
    ("maxShmemPerSm", "INTEGER", False, "Maximum shared memory available per multiprocessor (B)."),
    (
        "maxRegistersPerSm",
        "INTEGER",
        False,
        "Maximum number of 32-bit registers available per multiprocessor.",
    ),
    ("threadsPerWarp", "INTEGER", False, "Warp size in threads."),
    ("asyncEngines", "INTEGER", False, "Number of asynchronous engines."),
    ("maxWarpsPerSm", "INTEGER", False, "Maximum number of warps per multiprocessor."),
    ("maxBlocksPerSm", "INTEGER", False, "Maximum number of blocks per multiprocessor."),
    ("maxThreadsPerBlock", "INTEGER", False, "Maximum number of threads per block."),
    ("maxBlockDimX", "INTEGER", False, "Maximum X-dimension of a block."),
    ("maxBlockDimY", "INTEGER", False, "Maximum Y-dimension of a block."),
    ("maxBlockDimZ", "INTEGER", False, "Maximum Z-dimension of a block."),
    ("maxGridDimX", "INTEGER", False, "Maximum X-dimension of a grid."),
    ("maxGridDimY", "INTEGER", False, "Maximum Y-dimension of a grid."),
    ("maxGridDimZ", "INTEGER", False, "Maximum Z-dimension of a grid."),
    ("computeMajor", "INTEGER", False, "Major compute capability version number."),
    ("computeMinor", "INTEGER", False, "Minor compute capability version number."),
    ("smMajor", "INTEGER", False, "Major multiprocessor version number."),
    ("smMinor", "INTEGER", False, "Minor multiprocessor version number."),
]

_STREAM_COLS: List[Col] = [
    ("streamId", "INTEGER", True, "Stream ID."),
    ("hwId", "INTEGER", True, "Hardware ID."),
    ("vmId", "INTEGER", True, "VM ID."),
    ("processId", "INTEGER", True, "Process ID."),
    ("contextId", "INTEGER", True, "Context ID."),
    ("priority", "INTEGER", True, "Priority of the stream."),
    ("flag", "INTEGER", True, "REFERENCES ENUM_CUPTI_STREAM_TYPE(id)"),
]

_TABLE_COMMENTS = {
    "StringIds": "Consolidation of repetitive string values.",
    "EXPORT_META_DATA": "information about nsys export process",
    "META_DATA_EXPORT": "information about nsys export process",
    "META_DATA_CAPTURE": "information about nsys capture parameters",
    "ANALYSIS_DETAILS": "Details about the analysis session.",
    "PROCESSES": "Names and identifiers of processes captured in the report.",
    "OSRT_API": "OS runtime libraries traced to gather information about low-level userspace APIs.",
    "ENUM_CUDA_MEMCPY_OPER": "CUDA memcpy operation labels",
    "ENUM_CUDA_MEM_KIND": "CUDA memory kind labels",
    "ENUM_CUPTI_SYNC_TYPE": "CUPTI synchronization type labels",
    "ENUM_NSYS_EVENT_CLASS": "Nsys event class labels",
    "ENUM_CUDA_KERNEL_LAUNCH_TYPE": "CUDA kernel launch type labels",
    "ENUM_CUDA_KRENEL_LAUNCH_TYPE": "CUDA kernel launch type labels",
    "ENUM_CUPTI_STREAM_TYPE": "CUPTI stream type labels",
}

_ENUMS: Dict[str, List[Tuple[int, str, str]]] = {
    "ENUM_CUDA_MEMCPY_OPER": [
        (0, "CUDA_MEMCPY_KIND_UNKNOWN", "Unknown"),
        (1, "CUDA_MEMCPY_KIND_HTOD", "Host-to-Device"),
        (2, "CUDA_MEMCPY_KIND_DTOH", "Device-to-Host"),
        (3, "CUDA_MEMCPY_KIND_HTOA", "Host-to-Array"),
        (4, "CUDA_MEMCPY_KIND_ATOH", "Array-to-Host"),
        (5, "CUDA_MEMCPY_KIND_ATOA", "Array-to-Array"),
        (6, "CUDA_MEMCPY_KIND_ATOD", "Array-to-Device"),
        (7, "CUDA_MEMCPY_KIND_DTOA", "Device-to-Array"),
        (8, "CUDA_MEMCPY_KIND_DTOD", "Device-to-Device"),
        (9, "CUDA_MEMCPY_KIND_HTOH", "Host-to-Host"),
        (10, "CUDA_MEMCPY_KIND_PTOP", "Peer-to-Peer"),
        (11, "CUDA_MEMCPY_KIND_UVM_HTOD", "Unified Host-to-Device"),
        (12, "CUDA_MEMCPY_KIND_UVM_DTOH", "Unified Device-to-Host"),
        (13, "CUDA_MEMCPY_KIND_UVM_DTOD", "Unified Device-to-Device"),
    ],
    "ENUM_CUDA_MEM_KIND": [
        (0, "CUDA_MEMOPR_MEMORY_KIND_PAGEABLE", "Pageable"),
        (1, "CUDA_MEMOPR_MEMORY_KIND_PINNED", "Pinned"),
        (2, "CUDA_MEMOPR_MEMORY_KIND_DEVICE", "Device"),
        (3, "CUDA_MEMOPR_MEMORY_KIND_ARRAY", "Array"),
        (4, "CUDA_MEMOPR_MEMORY_KIND_MANAGED", "Managed"),
        (5, "CUDA_MEMOPR_MEMORY_KIND_DEVICE_STATIC", "Device Static"),
        (6, "CUDA_MEMOPR_MEMORY_KIND_MANAGED_STATIC", "Managed Static"),
        (7, "CUDA_MEMOPR_MEMORY_KIND_UNKNOWN", "Unknown"),
    ],
    "ENUM_CUPTI_SYNC_TYPE": [
        (0, "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_UNKNOWN", "Unknown"),
        (1, "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE", "Event sync"),
        (2, "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT", "Stream wait sync"),
        (3, "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE", "Stream sync"),
        (4, "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE", "Context sync"),
    ],
    "ENUM_NSYS_EVENT_CLASS": [
        (0, "TRACE_PROCESS_EVENT_CUDA_RUNTIME", "CUDA runtime"),
        (1, "TRACE_PROCESS_EVENT_CUDA_DRIVER", "CUDA driver"),
        (27, "TRACE_PROCESS_EVENT_OS_RUNTIME", "OSRT runtime"),
        (28, "TRACE_PROCESS_EVENT_CUDNN", "cuDNN"),
        (29, "TRACE_PROCESS_EVENT_CUBLAS", "cuBLAS"),
        (77, "TRACE_PROCESS_EVENT_CUDA_GRAPH_NODE_CREATION", "CUDA graph node creation"),
        (94, "TRACE_PROCESS_EVENT_CUDA_GRAPHEXEC_CREATION", "CUDA graph exec creation"),
        (95, "TRACE_PROCESS_EVENT_CUDA_GRAPH_CREATION", "CUDA graph creation"),
        (96, "TRACE_PROCESS_EVENT_CUDA_GRAPH_CLONE", "CUDA graph clone"),
    ],
    "ENUM_CUDA_KERNEL_LAUNCH_TYPE": [
        (0, "CUDA_KERNEL_LAUNCH_TYPE_UNKNOWN", "Unknown"),
        (1, "CUDA_KERNEL_LAUNCH_TYPE_REGULAR", "Regular"),
        (2, "CUDA_KERNEL_LAUNCH_TYPE_COOPERATIVE_SINGLE_DEVICE", "Cooperative single device"),
        (3, "CUDA_KERNEL_LAUNCH_TYPE_COOPERATIVE_MULTI_DEVICE", "Cooperative multi-device"),
    ],
    "ENUM_CUPTI_STREAM_TYPE": [
        (0, "CUPTI_ACTIVITY_STREAM_CREATE_FLAG_UNKNOWN", "Unknown"),
        (1, "CUPTI_ACTIVITY_STREAM_CREATE_FLAG_DEFAULT", "Default"),
        (2, "CUPTI_ACTIVITY_STREAM_CREATE_FLAG_NON_BLOCKING", "Non-blocking"),
        (3, "CUPTI_ACTIVITY_STREAM_CREATE_FLAG_NULL", "Null"),
    ],
}

# logical table key -> default values for NOT NULL / usual columns
_KERNEL_DEFAULTS: Dict[str, Any] = {
    "contextId": 1,
    "greenContextId": 0,
    "launchType": 1,
    "cacheConfig": 1,
    "registersPerThread": 32,
    "gridX": 1,
    "gridY": 1,
    "gridZ": 1,
    "blockX": 128,
    "blockY": 1,
    "blockZ": 1,
    "staticSharedMemory": 0,
    "dynamicSharedMemory": 0,
    "localMemoryPerThread": 0,
    "localMemoryTotal": 0,
    "sharedMemoryExecuted": 0,
    "sharedMemoryLimitConfig": 0,
    "clusterX": 0,
    "clusterY": 0,
    "clusterZ": 0,
    "clusterSchedulingPolicy": 0,
    "maxPotentialClusterSize": 1,
    "maxActiveClusters": 0,
    "tensorSizeMinusOneElements": "[]",
}

_H100_DEFAULTS: Dict[str, Any] = {
    "isDiscrete": 1,
    "l2CacheSize": 52428800,
    "clockRate": 1980000000,
    "pwGpuId": 0,
    "luid": 0,
    "chipName": "GH100",
    "revision": 161,
    "nodeMask": 0,
    "constantMemory": 65536,
    "maxIPC": 4,
    "maxRegistersPerBlock": 65536,
    "maxShmemPerBlock": 49152,
    "maxShmemPerBlockOptin": 232448,
    "maxShmemPerSm": 233472,
    "maxRegistersPerSm": 65536,
    "threadsPerWarp": 32,
    "asyncEngines": 3,
    "maxWarpsPerSm": 64,
    "maxBlocksPerSm": 32,
    "maxThreadsPerBlock": 1024,
    "maxBlockDimX": 1024,
    "maxBlockDimY": 1024,
    "maxBlockDimZ": 64,
    "maxGridDimX": 2147483647,
    "maxGridDimY": 65535,
    "maxGridDimZ": 65535,
    "computeMajor": 9,
    "computeMinor": 0,
    "smMajor": 9,
    "smMinor": 0,
}

_CHUNK = 200_000


def _ddl(table: str, cols: Sequence[Col], pk: Optional[str] = None) -> str:
    lines = []
    for i, (name, typ, nn, comment) in enumerate(cols):
        cons = "NOT NULL" if nn else ""
        if pk == name:
            cons = "NOT NULL   PRIMARY KEY"
        sep = "," if i < len(cols) - 1 else " "
        body = f"    {name:<27} {typ:<9} {cons}".rstrip() + sep
        lines.append(f"{body:<71}-- {comment}")
    head = f"CREATE TABLE {table} (\n"
    if table in _TABLE_COMMENTS:
        head += f"    -- {_TABLE_COMMENTS[table]}\n\n"
    return head + "\n".join(lines) + "\n);"


class TraceBuilder:
    """Collect rows and write an Nsight-Systems-shaped SQLite export.

    ``flavor`` picks the exporter generation ("2021.5", "2022.4", "2023.4", "2024.2", "2026.2").
    ``lazy=True`` only creates activity tables that have rows (the exporter's default).
    """

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
        self._flv = FLAVORS[flavor][3]
        self._strings: Dict[str, int] = {}
        self._string_list: List[Tuple[int, str]] = []
        self._next_string = 0
        self.string("[Unknown]")
        self._rows: Dict[str, List[Dict[str, Any]]] = {
            k: []
            for k in (
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
            )
        }
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
        row = dict(_H100_DEFAULTS)
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
        corr = self._corr(_pid_of(tid_g), corr)
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

    def graph_launch(
        self,
        api_start: int,
        api_end: int,
        *,
        pid: int,
        tid: int,
        kernels: Sequence[Tuple[int, int, str]],
        device: int = 0,
        stream: int = 7,
        graph_id: int = 1,
        graph_exec_id: int = 1,
        node_mode: bool = True,
        api: str = "cudaGraphLaunch_v10000",
    ) -> int:
        """A graph launch API row plus node kernels (node mode) or one GRAPH_TRACE row (graph mode)."""
        g = global_tid(pid, tid)
        if g not in self._threads:
            self.thread(pid, tid)
        corr = self.runtime(api_start, api_end, tid_g=g, name=api, event_class=self._api_class(api))
        key = (pid, graph_exec_id)
        if key not in self._graph_nodes:
            self._create_graph(pid, g, api_start, graph_id, graph_exec_id, [k[2] for k in kernels])
        nodes = self._graph_nodes[key]
        if node_mode:
            for i, (ks, ke, kname) in enumerate(kernels):
                node = nodes[i] if i < len(nodes) else None
                self.kernel(
                    ks,
                    ke,
                    pid=pid,
                    device=device,
                    stream=stream,
                    name=kname,
                    corr=corr,
                    graph_node_id=node,
                    graph_id=graph_id,
                )
        elif self._flv >= 3 and kernels:
            self._rows["graph_trace"].append(
                {
                    "start": int(min(k[0] for k in kernels)),
                    "end": int(max(k[1] for k in kernels)),
                    "deviceId": device,
                    "contextId": 1,
                    "greenContextId": 0,
                    "streamId": stream,
                    "correlationId": corr,
                    "globalPid": global_pid(pid),
                    "graphId": graph_id,
                    "graphExecId": graph_exec_id,
                }
            )
        return corr

    def _create_graph(
        self, pid: int, g: int, before: int, graph_id: int, exec_id: int, names: Sequence[str]
    ) -> None:
        """Capture-time node rows + instantiation rows, placed just before the first launch."""
        n = len(names)
        t = max(0, int(before) - 2000 * (n + 2))
        exec_nodes: List[int] = []
        node_rows = self._rows["graph_node_events"]
        cap = self.string("cudaLaunchKernel_v7000")
        inst = self.string("cudaGraphInstantiate_v12000")
        for _ in names:
            orig = self._next_node_id
            self._next_node_id += 1
            node_rows.append(
                {
                    "start": t,
                    "end": t + 800,
                    "eventClass": 77,
                    "globalTid": g,
                    "nameId": cap,
                    "graphNodeId": orig,
                    "originalGraphNodeId": None,
                }
            )
            t += 1000
        for _ in range(n):
            node = self._next_node_id
            self._next_node_id += 1
            node_rows.append(
                {
                    "start": t,
                    "end": t + 500,
                    "eventClass": 77,
                    "globalTid": g,
                    "nameId": inst,
                    "graphNodeId": node,
                    "originalGraphNodeId": node - n,
                }
            )
            exec_nodes.append(node)
        t += 500
        if self._flv >= 3:
            ge = self._rows["graph_events"]
            ge.append(
                {
                    "start": t,
                    "end": t + 300,
                    "eventClass": 95,
                    "globalTid": g,
                    "nameId": self.string("cudaStreamEndCapture_v10000"),
                    "graphId": graph_id,
                    "originalGraphId": None,
                    "graphExecId": None,
                }
            )
            ge.append(
                {
                    "start": t + 400,
                    "end": t + 900,
                    "eventClass": 94,
                    "globalTid": g,
                    "nameId": inst,
                    "graphId": graph_id,
                    "originalGraphId": None,
                    "graphExecId": exec_id,
                }
            )
        self._graph_nodes[(pid, exec_id)] = exec_nodes

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

    # ----------------------------------------------------------------- NVTX / OSRT
    def nvtx_push_pop(
        self,
        start: int,
        end: Optional[int],
        text: str,
        *,
        tid_g: int,
        domain_id: int = 0,
        registered: bool = False,
        color: Optional[int] = None,
        category: Optional[int] = None,
    ) -> None:
        """Push/pop range (eventType 59); ``registered`` stores the text via StringIds/textId."""
        self._rows["nvtx"].append(
            {
                "start": int(start),
                "end": None if end is None else int(end),
                "eventType": 59,
                "text": None if registered else text,
                "textId": self.string(text) if registered else None,
                "globalTid": tid_g,
                "domainId": domain_id,
                "color": color,
                "category": category,
            }
        )

    def nvtx_start_end(
        self,
        start: int,
        end: Optional[int],
        text: str,
        *,
        tid_g: int,
        end_tid_g: Optional[int] = None,
        domain_id: int = 0,
        range_id: Optional[int] = None,
    ) -> int:
        """Start/end range (eventType 60); returns its rangeId."""
        if range_id is None:
            self._range_id += 1
            range_id = self._range_id
        self._rows["nvtx"].append(
            {
                "start": int(start),
                "end": None if end is None else int(end),
                "eventType": 60,
                "rangeId": range_id,
                "text": text,
                "globalTid": tid_g,
                "endGlobalTid": end_tid_g if end_tid_g != tid_g else None,
                "domainId": domain_id,
            }
        )
        return range_id

    def nvtx_mark(self, ts: int, text: str, *, tid_g: int, domain_id: int = 0) -> None:
        """NVTX mark (eventType 34, end NULL)."""
        self._rows["nvtx"].append(
            {
                "start": int(ts),
                "end": None,
                "eventType": 34,
                "text": text,
                "globalTid": tid_g,
                "domainId": domain_id,
            }
        )

    def nvtx_domain(self, domain_id: int, name: str, *, tid_g: int, ts: int = 0) -> None:
        """Domain creation row (eventType 75; domain ids are per process)."""
        self._rows["nvtx"].append(
            {
                "start": int(ts),
                "end": None,
                "eventType": 75,
                "text": name,
                "globalTid": tid_g,
                "domainId": domain_id,
            }
        )

    def osrt(
        self, start: int, end: int, *, tid_g: int, name: str = "pthread_cond_wait", return_value: int = 0
    ) -> None:
        """OS runtime API row (eventClass 27)."""
        self._rows["osrt"].append(
            {
                "start": int(start),
                "end": int(end),
                "eventClass": 27,
                "globalTid": tid_g,
                "nameId": self.string(name),
                "returnValue": return_value,
                "nestingLevel": 0,
                "callchainId": 0,
            }
        )

    # ----------------------------------------------------------------- bulk
    def add_kernels_bulk(
        self,
        start: np.ndarray,
        end: np.ndarray,
        device: Any,
        stream: Any,
        corr: np.ndarray,
        global_pid: Any,
        name_id: Any,
        short_id: Any,
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
            p = _pid_of(int(gp))
            self._processes.setdefault(p, "python3")
            if len(corr):
                self._next_corr[p] = max(self._next_corr.get(p, 1), int(np.max(corr)) + 1)

    def add_runtime_bulk(
        self,
        start: np.ndarray,
        end: np.ndarray,
        global_tid: Any,
        corr: np.ndarray,
        name_id: Any,
        event_class: Any,
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

    # ----------------------------------------------------------------- schema per flavor
    def _export_meta_table(self) -> str:
        return "EXPORT_META_DATA" if self._flv <= 1 else "META_DATA_EXPORT"

    def _activity_tables(self) -> Dict[str, Tuple[str, List[Col]]]:
        f = self._flv
        t: Dict[str, Tuple[str, List[Col]]] = {
            "kernel": (self.kernel_table_name, _kernel_cols(f)),
            "runtime": ("CUPTI_ACTIVITY_KIND_RUNTIME", list(_RUNTIME_COLS)),
            "memcpy": ("CUPTI_ACTIVITY_KIND_MEMCPY", _memcpy_cols(f)),
            "memset": ("CUPTI_ACTIVITY_KIND_MEMSET", _memset_cols(f)),
            "sync": ("CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", _sync_cols(f)),
            "nvtx": ("NVTX_EVENTS", _nvtx_cols(f)),
            "osrt": ("OSRT_API", list(_OSRT_COLS)),
        }
        if f >= 3:
            t["graph_trace"] = ("CUPTI_ACTIVITY_KIND_GRAPH_TRACE", _graph_trace_cols(f))
            t["graph_events"] = ("CUDA_GRAPH_EVENTS", list(_GRAPH_EVENT_COLS))
            node_cols = [
                c
                if c[0] != "graphNodeId"
                else ("graphNodeId", "INTEGER", True, "REFERENCES CUDA_GRAPH_NODE_EVENTS(graphNodeId)")
                for c in _GRAPH_NODE_EVENT_COLS
            ]
            t["graph_node_events"] = ("CUDA_GRAPH_NODE_EVENTS", node_cols)
        else:
            t["graph_node_events"] = ("CUDA_GRAPH_EVENTS", list(_GRAPH_NODE_EVENT_COLS))
        return t

    def table_columns(self, key: str) -> List[str]:
        """Column names the written table for logical ``key`` (e.g. "kernel") will have."""
        name, cols = self._activity_tables()[key]
        drop = self._dropped.get(name, set())
        return [c[0] for c in cols if c[0] not in drop]

    # ----------------------------------------------------------------- write
    def _time_bounds(self) -> Tuple[int, int]:
        lo: Optional[int] = None
        hi: Optional[int] = None
        for rows in self._rows.values():
            for r in rows:
                s = r["start"]
                e = r.get("end")
                lo = s if lo is None or s < lo else lo
                top = s if e is None else e
                hi = top if hi is None or top > hi else hi
        for group in self._bulk_kernels + self._bulk_runtime:
            if len(group["start"]):
                s0, e1 = int(group["start"].min()), int(group["end"].max())
                lo = s0 if lo is None else min(lo, s0)
                hi = e1 if hi is None else max(hi, e1)
        return (0 if lo is None else min(lo, 0)), (0 if hi is None else hi)

    def _order(self, n: int, salt: int) -> Iterable[int]:
        if not self.shuffle or n < 2:
            return range(n)
        return np.random.default_rng(self.seed * 1000003 + salt).permutation(n).tolist()

    def write(self, path: str, *, overwrite: bool = False) -> str:
        """Write the database to ``path``; refuses to replace an existing file unless ``overwrite``."""
        path = os.fspath(path)
        if os.path.exists(path):
            if not overwrite:
                raise FileExistsError(path)
            os.remove(path)
        con = sqlite3.connect(path)
        try:
            con.execute("PRAGMA journal_mode=OFF")
            con.execute("PRAGMA synchronous=OFF")
            self._write_all(con)
            con.commit()
        finally:
            con.close()
        return path

    def _create(
        self, con: sqlite3.Connection, table: str, cols: Sequence[Col], pk: Optional[str] = None
    ) -> List[str]:
        drop = self._dropped.get(table, set())
        kept = [c for c in cols if c[0] not in drop]
        con.execute(_ddl(table, kept, pk))
        return [c[0] for c in kept]

    def _insert(
        self, con: sqlite3.Connection, table: str, names: Sequence[str], rows: Iterable[Sequence[Any]]
    ) -> None:
        q = f"INSERT INTO {table} ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})"
        con.executemany(q, rows)

    def _write_all(self, con: sqlite3.Connection) -> None:
        f = self._flv
        lo, hi = self._time_bounds()
        product, schema, cksum, _ = FLAVORS[self.flavor]

        # --- metadata
        meta_table = self._export_meta_table()
        major, minor, micro = schema.split(".")
        export_rows: List[Tuple[str, str]] = [
            ("EXPORT_PRODUCT_NAME", "NVIDIA Nsight Systems"),
            ("EXPORT_PRODUCT_VERSION", product),
            ("EXPORT_PRODUCT_DATE", self.flavor),
            ("EXPORT_SCHEMA_VERSION", schema),
            ("EXPORT_SCHEMA_VERSION_MAJOR", major),
            ("EXPORT_SCHEMA_VERSION_MINOR", minor),
            ("EXPORT_SCHEMA_VERSION_MICRO", micro),
            ("EXPORT_SCHEMA_VERSION_CKSUM", cksum),
            ("EXPORT_PLATFORM", "linux-desktop"),
            ("EXPORT_ARCH", "x64"),
            ("EXPORT_TIME_UTC", "2025-01-01T12:30:00"),
            ("EXPORT_HOST", "synth"),
            ("EXPORT_USER", ""),
        ]
        if f <= 1:
            export_rows += [
                ("EXPORT_INPUT_FILE", "report1.nsys-rep"),
                ("EXPORT_OUTUPT_FILE", "report1.sqlite"),
                ("EXPORT_OVERWRITE", "true"),
                ("EXPORT_LAZY", "true" if self.lazy else "false"),
            ]
        else:
            out_key = "EXPORT_PARAM_OUTPUT_FILE" if f >= 4 else "EXPORT_PARAM_OUTUPT_FILE"
            export_rows += [
                ("EXPORT_PARAM_EXPORT_TYPE", "SQLite"),
                ("EXPORT_PARAM_INPUT_FILE", "report1.nsys-rep"),
                (out_key, "report1.sqlite"),
                ("EXPORT_PARAM_OVERWRITE", "true"),
                ("EXPORT_PARAM_LAZY", "true" if self.lazy else "false"),
                ("EXPORT_PARAM_TIME_NORMALIZE", "false"),
                ("EXPORT_PARAM_TIME_SHIFT", "0"),
                ("EXPORT_PARAM_TABLES_TO_EXPORT", ""),
                ("EXPORT_PARAM_TIMES_TO_EXPORT", ""),
                ("EXPORT_CONFIG_TIME_SHIFT", "0"),
            ]
        user_export = {k: v for t, k, v in self._meta if t == meta_table}
        export_rows = [(k, user_export.pop(k, v)) for k, v in export_rows] + list(user_export.items())
        names = self._create(con, meta_table, _META_COLS)
        self._insert(con, meta_table, names, export_rows)
        if f >= 2:
            user_cap = [(k, v) for t, k, v in self._meta if t == "META_DATA_CAPTURE"]
            user_keys = {k for k, _ in user_cap}
            cap: List[Tuple[str, str]] = [
                ("CAPTURE_EVENT_TYPE", "Cuda"),
                ("CAPTURE_EVENT_TYPE", "NvtxEvents"),
            ]
            if self._rows["osrt"]:
                cap.append(("CAPTURE_EVENT_TYPE", "OSRuntime"))
            cap += [
                ("CUDA_SKIP_SOME_API_CALLS", "true"),
                ("CUDA_TRACE_SCOPE", "ProcessTree"),
                ("PROCESS_0:COMMAND", "python3"),
                ("PROCESS_0:ARGUMENT_0", "-m"),
                ("PROCESS_0:ARGUMENT_1", "vllm.entrypoints.openai.api_server"),
                ("START_DELAY_MS", "0"),
                ("RUN_DURATION_MS", str(max(0, (hi - lo) // 1_000_000))),
            ]
            if f >= 4:
                cap.append(("CUDA_GRAPH_TRACE_OPTIONS:MODE", "Node"))
            cap = [kv for kv in cap if kv[0] not in user_keys or kv[0] == "CAPTURE_EVENT_TYPE"] + user_cap
            names = self._create(con, "META_DATA_CAPTURE", _META_COLS)
            self._insert(con, "META_DATA_CAPTURE", names, cap)
        for t in {t for t, _, _ in self._meta} - {meta_table, "META_DATA_CAPTURE"}:
            names = self._create(con, t, _META_COLS)
            self._insert(con, t, names, [(k, v) for tt, k, v in self._meta if tt == t])

        # --- session / analysis
        names = self._create(con, "TARGET_INFO_SESSION_START_TIME", _session_cols(f))
        sess = [self.utc_epoch_ns, "2025-01-01T12:00:00", "2025-01-01T12:00:00", 28254349605]
        self._insert(con, "TARGET_INFO_SESSION_START_TIME", names, [sess[: len(names)]])
        names = self._create(con, "ANALYSIS_DETAILS", _ANALYSIS_COLS)
        self._insert(con, "ANALYSIS_DETAILS", names, [(VM_GLOBAL, hi - lo, lo, hi)])

        # --- enums
        if f >= 1:
            for ename, rows in _ENUMS.items():
                tname = ename
                if ename == "ENUM_CUDA_KERNEL_LAUNCH_TYPE" and f <= 1:
                    tname = "ENUM_CUDA_KRENEL_LAUNCH_TYPE"
                if ename == "ENUM_CUPTI_STREAM_TYPE" and f <= 1:
                    continue
                names = self._create(con, tname, _ENUM_COLS, pk="id")
                self._insert(con, tname, names, rows)

        # --- activity tables
        tables = self._activity_tables()
        for salt, (key, (tname, cols)) in enumerate(tables.items()):
            rows = self._rows.get(key, [])
            bulk = self._bulk_kernels if key == "kernel" else self._bulk_runtime if key == "runtime" else []
            if self.lazy and not rows and not any(len(b["start"]) for b in bulk):
                continue
            names = self._create(con, tname, cols)
            defaults = _KERNEL_DEFAULTS if key == "kernel" else {"returnValue": 0} if key == "runtime" else {}
            if rows:
                order = self._order(len(rows), salt)
                data = [tuple(rows[i].get(c, defaults.get(c)) for c in names) for i in order]
                for i in range(0, len(data), _CHUNK):
                    self._insert(con, tname, names, data[i : i + _CHUNK])
            if bulk:
                self._write_bulk(con, tname, names, bulk, defaults, salt)

        # --- processes, threads, strings, GPUs, streams
        pids = set(self._processes)
        for r in self._rows["kernel"] + self._rows["memcpy"] + self._rows["sync"]:
            if r.get("globalPid") is not None:
                pids.add(_pid_of(r["globalPid"]))
        for r in self._rows["runtime"] + self._rows["nvtx"]:
            pids.add(_pid_of(r["globalTid"]))
        procs = [(global_pid(p), p, self._processes.get(p, "python3")) for p in sorted(pids)]
        trows = []
        for g, tname_ in sorted(self._threads.items()):
            if tname_ is None:
                pid = _pid_of(g)
                tname_ = self._processes.get(pid, "python3") if (g & 0xFFFFFF) == pid else None
            if tname_ is not None:
                trows.append((self.string(tname_), 20, g))
        names = self._create(con, "PROCESSES", _PROCESS_COLS)
        self._insert(con, "PROCESSES", names, procs)
        names = self._create(con, "ThreadNames", _THREAD_COLS)
        self._insert(con, "ThreadNames", names, trows)
        names = self._create(con, "StringIds", _STRING_COLS, pk="id")
        self._insert(con, "StringIds", names, self._string_list)
        gpus = dict(self._gpus)
        if self.auto_gpu:
            devs = {
                r["deviceId"]
                for k in ("kernel", "memcpy", "memset", "sync", "graph_trace")
                for r in self._rows[k]
            }
            for b in self._bulk_kernels:
                devs.update(int(d) for d in np.unique(b["deviceId"]))
            for d in sorted(devs - set(gpus)):
                self.gpu(d)
                gpus[d] = self._gpus[d]
        names = self._create(con, "TARGET_INFO_GPU", _GPU_INFO_COLS)
        self._insert(
            con, "TARGET_INFO_GPU", names, [tuple(g.get(c) for c in names) for _, g in sorted(gpus.items())]
        )
        streams = set()
        for k in ("kernel", "memcpy", "memset"):
            for r in self._rows[k]:
                streams.add((_pid_of(r["globalPid"]), r.get("contextId", 1), r["streamId"]))
        for b in self._bulk_kernels:
            pairs = np.unique(np.stack([b["globalPid"], b["streamId"]], axis=1), axis=0)
            for gp, st in pairs.tolist():
                streams.add((_pid_of(gp), 1, st))
        if streams or not self.lazy:
            names = self._create(con, "TARGET_INFO_CUDA_STREAM", _STREAM_COLS)
            self._insert(
                con,
                "TARGET_INFO_CUDA_STREAM",
                names,
                [(s, 0, VM_ID, p, c, 0, 3 if s == 7 else 2) for p, c, s in sorted(streams)],
            )

    def _write_bulk(
        self,
        con: sqlite3.Connection,
        tname: str,
        names: Sequence[str],
        groups: List[Dict[str, np.ndarray]],
        defaults: Dict[str, Any],
        salt: int,
    ) -> None:
        """Insert array groups chunk by chunk (chunks in shuffled order); constants go inline in SQL."""
        varying = [c for c in names if c in groups[0]]
        if "gridId" in names:
            varying.append("gridId")
        consts = [c for c in names if c not in varying]
        lits = []
        for c in consts:
            v = defaults.get(c)
            lits.append("NULL" if v is None else (repr(v) if isinstance(v, str) else str(int(v))))
        q = (
            f"INSERT INTO {tname} ({', '.join(varying + consts)}) VALUES "
            f"({', '.join(['?'] * len(varying) + lits)})"
        )
        chunks: List[Tuple[int, int, int]] = []
        for gi, g in enumerate(groups):
            n = len(g["start"])
            chunks += [(gi, i, min(n, i + _CHUNK)) for i in range(0, n, _CHUNK)]
        for ci in self._order(len(chunks), salt + 100):
            gi, a, b = chunks[ci]
            g = groups[gi]
            cols = [g[c][a:b].tolist() for c in varying if c != "gridId"]
            if "gridId" in varying:
                base = self._grid_id + sum(len(x["start"]) for x in groups[:gi])
                cols.append(range(base + a + 1, base + b + 1))
            con.executemany(q, zip(*cols))

    # ----------------------------------------------------------------- introspection helpers
    def rows(self, key: str) -> List[Dict[str, Any]]:
        """Rows collected so far for logical table ``key`` (read-only use)."""
        return self._rows[key]

    def iter_kernel_intervals(self) -> Iterator[Tuple[int, int, int, int]]:
        """(pid, device, start, end) of every non-bulk kernel row."""
        for r in self._rows["kernel"]:
            yield _pid_of(r["globalPid"]), r["deviceId"], r["start"], r["end"]
