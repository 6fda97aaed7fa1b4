"""Column catalogue of the metadata, session, enum and target-info tables, with default values.

Also renders the exporter-style ``CREATE TABLE`` text (:func:`ddl`).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

from .catalog import Col

__all__ = [
    "ANALYSIS_COLS",
    "ENUMS",
    "ENUM_COLS",
    "GPU_INFO_COLS",
    "H100_DEFAULTS",
    "KERNEL_DEFAULTS",
    "META_COLS",
    "PROCESS_COLS",
    "STREAM_COLS",
    "STRING_COLS",
    "TABLE_COMMENTS",
    "THREAD_COLS",
    "ddl",
    "session_cols",
]

META_COLS: List[Col] = [
    ("name", "TEXT", True, "Name of meta-data record"),
    ("value", "TEXT", False, "Value of meta-data record"),
]

STRING_COLS: List[Col] = [
    ("id", "INTEGER", True, "ID reference value."),
    ("value", "TEXT", True, "String value."),
]

ENUM_COLS: List[Col] = [
    ("id", "INTEGER", True, "Enum numerical value."),
    ("name", "TEXT", False, "Enum symbol name."),
    ("label", "TEXT", False, "Enum human name."),
]

PROCESS_COLS: List[Col] = [
    ("globalPid", "INTEGER", False, "Serialized GlobalId."),
    ("pid", "INTEGER", False, "The process ID."),
    ("name", "TEXT", False, "The process name."),
]

THREAD_COLS: List[Col] = [
    ("nameId", "INTEGER", True, "REFERENCES StringIds(id) -- Thread name"),
    ("priority", "INTEGER", False, "Priority of the thread."),
    ("globalTid", "INTEGER", False, "Serialized GlobalId."),
]

ANALYSIS_COLS: List[Col] = [
    ("globalVid", "INTEGER", True, "Serialized GlobalId."),
    ("duration", "INTEGER", True, "The total time span of the entire trace (ns)."),
    ("startTime", "INTEGER", True, "Trace start timestamp in nanoseconds."),
    ("stopTime", "INTEGER", True, "Trace stop timestamp in nanoseconds."),
]

#: ``TARGET_INFO_SYSTEM_ENV`` (every export; the builder writes the capture's ``Hostname`` row only, nameEnum 619 as in
#: real exports: captures of 2022.x on record it, 2019.6 / 2020.3 ones do not)
SYSTEM_ENV_COLS: List[Col] = [
    ("globalVid", "INTEGER", False, "Serialized GlobalId."),
    ("devStateName", "TEXT", True, "Device state name."),
    ("name", "TEXT", True, "Property name."),
    ("nameEnum", "INTEGER", True, "Property enum value."),
    ("value", "TEXT", True, "Property value."),
]


def session_cols(flv: int) -> List[Col]:
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


GPU_INFO_COLS: List[Col] = [
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

STREAM_COLS: List[Col] = [
    ("streamId", "INTEGER", True, "Stream ID."),
    ("hwId", "INTEGER", True, "Hardware ID."),
    ("vmId", "INTEGER", True, "VM ID."),
    ("processId", "INTEGER", True, "Process ID."),
    ("contextId", "INTEGER", True, "Context ID."),
    ("priority", "INTEGER", True, "Priority of the stream."),
    ("flag", "INTEGER", True, "REFERENCES ENUM_CUPTI_STREAM_TYPE(id)"),
]

TABLE_COMMENTS = {
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

ENUMS: Dict[str, List[Tuple[int, str, str]]] = {
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
KERNEL_DEFAULTS: Dict[str, Any] = {
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

H100_DEFAULTS: Dict[str, Any] = {
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


def ddl(table: str, cols: Sequence[Col], pk: Optional[str] = None) -> str:
    lines = []
    for i, (name, typ, nn, comment) in enumerate(cols):
        cons = "NOT NULL" if nn else ""
        if pk == name:
            cons = "NOT NULL   PRIMARY KEY"
        sep = "," if i < len(cols) - 1 else " "
        body = f"    {name:<27} {typ:<9} {cons}".rstrip() + sep
        lines.append(f"{body:<71}-- {comment}")
    head = f"CREATE TABLE {table} (\n"
    if table in TABLE_COMMENTS:
        head += f"    -- {TABLE_COMMENTS[table]}\n\n"
    return head + "\n".join(lines) + "\n);"
