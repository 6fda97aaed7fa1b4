"""Column catalogue of the activity tables (CUDA, NVTX, OSRT, CUDA graphs) per exporter flavor.

Column specs are ``(name, type, not_null, comment)`` in the exporter's order; ``flv`` is the flavor's
order index (0 = 2021.5 ... 4 = 2026.2, see :data:`~.ids.FLAVORS`).
"""

from __future__ import annotations

from typing import Dict, List, Tuple

__all__ = [
    "Col",
    "GRAPH_EVENT_COLS",
    "GRAPH_NODE_EVENT_COLS",
    "OSRT_COLS",
    "RUNTIME_COLS",
    "activity_tables",
    "graph_trace_cols",
    "kernel_cols",
    "memcpy_cols",
    "memset_cols",
    "nvtx_cols",
    "sync_cols",
    "um_cpu_fault_cols",
    "um_gpu_fault_cols",
]

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


def kernel_cols(flv: int) -> List[Col]:
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


def memcpy_cols(flv: int) -> List[Col]:
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


def memset_cols(flv: int) -> List[Col]:
    cols = _gpu_head(flv, "REFERENCES CUPTI_ACTIVITY_KIND_RUNTIME(correlationId)")
    cols += [
        ("value", "INTEGER", True, "Value assigned to memory."),
        ("bytes", "INTEGER", True, "Number of bytes set (B)."),
        ("graphNodeId", "INTEGER", False, f"REFERENCES {_graph_ref(flv)}(graphNodeId)"),
        ("memKind", "INTEGER", False, "REFERENCES ENUM_CUDA_MEM_KIND(id)"),
    ]
    return cols


def sync_cols(flv: int) -> List[Col]:
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


def graph_trace_cols(flv: int) -> List[Col]:
    cols = _gpu_head(max(flv, 2), "REFERENCES CUPTI_ACTIVITY_KIND_RUNTIME(correlationId)")
    cols += [
        ("graphId", "INTEGER", False, "REFERENCES CUDA_GRAPH_EVENTS(graphId)"),
        ("graphExecId", "INTEGER", False, "REFERENCES CUDA_GRAPH_EVENTS(graphExecId)"),
    ]
    return cols


RUNTIME_COLS: List[Col] = _SE + [
    ("eventClass", "INTEGER", True, "REFERENCES ENUM_NSYS_EVENT_CLASS(id)"),
    ("globalTid", "INTEGER", False, "Serialized GlobalId."),
    ("correlationId", "INTEGER", False, "ID used to identify events that this function call has triggered."),
    ("nameId", "INTEGER", True, "REFERENCES StringIds(id) -- Function name"),
    ("returnValue", "INTEGER", True, "Return value of the function call."),
    ("callchainId", "INTEGER", False, "REFERENCES CUDA_CALLCHAINS(id)"),
]

GRAPH_NODE_EVENT_COLS: List[Col] = _SE + [
    ("eventClass", "INTEGER", True, "REFERENCES ENUM_NSYS_EVENT_CLASS(id)"),
    ("globalTid", "INTEGER", False, "Serialized GlobalId."),
    ("nameId", "INTEGER", True, "REFERENCES StringIds(id) -- Function name"),
    ("graphNodeId", "INTEGER", True, "REFERENCES CUDA_GRAPH_EVENTS(graphNodeId)"),
    ("originalGraphNodeId", "INTEGER", False, "Reference to the original graph node ID, if cloned node."),
]

GRAPH_EVENT_COLS: List[Col] = _SE + [
    ("eventClass", "INTEGER", True, "REFERENCES ENUM_NSYS_EVENT_CLASS(id)"),
    ("globalTid", "INTEGER", False, "Serialized GlobalId."),
    ("nameId", "INTEGER", True, "REFERENCES StringIds(id) -- Function name"),
    ("graphId", "INTEGER", False, "Graph ID."),
    ("originalGraphId", "INTEGER", False, "Reference to the original graph ID, if cloned graph."),
    ("graphExecId", "INTEGER", False, "Graph exec ID."),
]


def nvtx_cols(flv: int) -> List[Col]:
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


OSRT_COLS: List[Col] = _SE + [
    ("eventClass", "INTEGER", True, "REFERENCES ENUM_NSYS_EVENT_CLASS(id)"),
    ("globalTid", "INTEGER", False, "Serialized GlobalId."),
    ("nameId", "INTEGER", True, "REFERENCES StringIds(id) -- Function name"),
    ("returnValue", "INTEGER", True, "Return value of the function call."),
    ("nestingLevel", "INTEGER", False, "Zero-base index of the nesting level."),
    ("callchainId", "INTEGER", True, "REFERENCES OSRT_CALLCHAINS(id)"),
]


def um_gpu_fault_cols(flv: int) -> List[Col]:
    """``CUDA_UM_GPU_PAGE_FAULT_EVENTS`` (real exports: 2022.2, 2022.4, 2023.4 have these columns; later flavors
    are assumed unchanged — a 2025-era online schema lists the same ones)."""
    return _SE + [
        ("globalPid", "INTEGER", True, "Serialized GlobalId."),
        ("deviceId", "INTEGER", True, "Device ID."),
        ("address", "INTEGER", True, "Virtual address of the page that faulted."),
        ("numberOfPageFaults", "INTEGER", True, "Number of page faults for the same page."),
        ("faultAccessType", "INTEGER", True, "REFERENCES ENUM_CUDA_UNIF_MEM_ACCESS_TYPE(id)"),
    ]


def um_cpu_fault_cols(flv: int) -> List[Col]:
    """``CUDA_UM_CPU_PAGE_FAULT_EVENTS`` as in the real 2022.4 / 2023.4 exports (no ``end``: one row per fault;
    a 2025-era online schema adds ``sourceFile`` / ``sourceLine``, not written here)."""
    return [
        ("start", "INTEGER", True, "Event start timestamp (ns)."),
        ("globalPid", "INTEGER", True, "Serialized GlobalId."),
        ("address", "INTEGER", True, "Virtual address of the page that faulted."),
        ("originalFaultPc", "INTEGER", False, "Program counter of the CPU instruction that caused the page fault."),
        ("CpuInstruction", "INTEGER", True, "REFERENCES StringIds(id) -- Function name"),
        ("module", "INTEGER", True, "REFERENCES StringIds(id) -- Module name"),
        ("unresolvedFaultPc", "INTEGER", False, "True if the program counter was not resolved."),
    ]


def activity_tables(flv: int, kernel_table: str) -> Dict[str, Tuple[str, List[Col]]]:
    """Logical key -> (table name, columns) of every activity table of flavor ``flv``, in write order."""
    t: Dict[str, Tuple[str, List[Col]]] = {
        "kernel": (kernel_table, kernel_cols(flv)),
        "runtime": ("CUPTI_ACTIVITY_KIND_RUNTIME", list(RUNTIME_COLS)),
        "memcpy": ("CUPTI_ACTIVITY_KIND_MEMCPY", memcpy_cols(flv)),
        "memset": ("CUPTI_ACTIVITY_KIND_MEMSET", memset_cols(flv)),
        "sync": ("CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", sync_cols(flv)),
        "nvtx": ("NVTX_EVENTS", nvtx_cols(flv)),
        "osrt": ("OSRT_API", list(OSRT_COLS)),
    }
    if flv >= 3:
        t["graph_trace"] = ("CUPTI_ACTIVITY_KIND_GRAPH_TRACE", graph_trace_cols(flv))
        t["graph_events"] = ("CUDA_GRAPH_EVENTS", list(GRAPH_EVENT_COLS))
        node_cols = [
            c
            if c[0] != "graphNodeId"
            else ("graphNodeId", "INTEGER", True, "REFERENCES CUDA_GRAPH_NODE_EVENTS(graphNodeId)")
            for c in GRAPH_NODE_EVENT_COLS
        ]
        t["graph_node_events"] = ("CUDA_GRAPH_NODE_EVENTS", node_cols)
    else:
        t["graph_node_events"] = ("CUDA_GRAPH_EVENTS", list(GRAPH_NODE_EVENT_COLS))
    if flv >= 1:   # Unified Memory page faults: not written for 2021.5 (its table list is not known here)
        t["um_gpu_fault"] = ("CUDA_UM_GPU_PAGE_FAULT_EVENTS", um_gpu_fault_cols(flv))
        t["um_cpu_fault"] = ("CUDA_UM_CPU_PAGE_FAULT_EVENTS", um_cpu_fault_cols(flv))
    return t
