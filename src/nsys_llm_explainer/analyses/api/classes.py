"""Classification of CUDA runtime/driver API names (the one place these lists live): sync, non-blocking sync,
launch, alloc and free. Names are compared without every ``_v<digits>`` suffix and ``_ptsz`` / ``_ptds``, wider than
the display name (docs/METRICS.md, "Reading the export": ``cuMemAlloc_v2`` is classified as ``cuMemAlloc``).
"""

from __future__ import annotations

import re
from typing import List, Sequence, Tuple

import numpy as np

from ...model.trace import ApiCalls

SYNC_WAIT = {
    "cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize", "cudaThreadSynchronize",
    "cuCtxSynchronize", "cuStreamSynchronize", "cuEventSynchronize",
}
SYNC_MEMCPY = {
    "cudaMemcpy", "cudaMemcpy2D", "cudaMemcpy3D", "cudaMemcpyPeer", "cudaMemcpy3DPeer", "cudaMemcpyToSymbol",
    "cudaMemcpyFromSymbol", "cudaMemcpyToArray", "cudaMemcpyFromArray", "cudaMemcpy2DToArray",
    "cudaMemcpy2DFromArray", "cudaMemcpyArrayToArray", "cudaMemcpy2DArrayToArray",
    "cudaMemset", "cudaMemset2D", "cudaMemset3D",
    "cuMemcpy", "cuMemcpyHtoD", "cuMemcpyDtoH", "cuMemcpyDtoD", "cuMemcpyHtoA", "cuMemcpyAtoH", "cuMemcpyAtoD",
    "cuMemcpyDtoA", "cuMemcpyAtoA", "cuMemcpy2D", "cuMemcpy2DUnaligned", "cuMemcpy3D", "cuMemcpyPeer",
    "cuMemcpy3DPeer", "cuMemsetD8", "cuMemsetD16", "cuMemsetD32", "cuMemsetD2D8", "cuMemsetD2D16",
    "cuMemsetD2D32",
}
SYNC = SYNC_WAIT | SYNC_MEMCPY
SYNC_COPY = {n for n in SYNC_MEMCPY if "Memset" not in n}     # synchronous copies (no memsets)
NONBLOCKING_SYNC = {
    "cudaEventQuery", "cudaStreamWaitEvent", "cudaStreamQuery", "cuEventQuery", "cuStreamWaitEvent",
    "cuStreamQuery",
}
LAUNCH = {
    "cudaLaunchKernel", "cudaLaunchKernelExC", "cudaLaunchCooperativeKernel",
    "cudaLaunchCooperativeKernelMultiDevice", "cudaLaunch", "cudaLaunchDevice", "cudaGraphLaunch",
    "cuLaunchKernel", "cuLaunchKernelEx", "cuLaunchCooperativeKernel", "cuLaunchCooperativeKernelMultiDevice",
    "cuLaunchGrid", "cuLaunchGridAsync", "cuLaunch", "cuGraphLaunch",
}
GRAPH_LAUNCH = {"cudaGraphLaunch", "cuGraphLaunch"}
ALLOC = {
    "cudaMalloc", "cudaMallocAsync", "cudaMallocFromPoolAsync", "cudaMallocHost", "cudaHostAlloc",
    "cudaMallocManaged", "cudaMallocPitch", "cudaMalloc3D", "cudaMallocArray", "cudaMalloc3DArray",
    "cuMemAlloc", "cuMemAllocAsync", "cuMemAllocFromPoolAsync", "cuMemAllocHost", "cuMemHostAlloc",
    "cuMemAllocManaged", "cuMemAllocPitch", "cuMemCreate", "cuMemMap", "cuMemAddressReserve",
}
FREE = {
    "cudaFree", "cudaFreeAsync", "cudaFreeHost", "cudaFreeArray", "cuMemFree", "cuMemFreeAsync",
    "cuMemFreeHost", "cuMemRelease", "cuMemUnmap", "cuMemAddressFree",
}

_SUFFIX = re.compile(r"(_v\d+)?(_ptsz|_ptds)?(_v\d+)?$")


def normalize(name: str) -> str:
    """Base API name used for classification (``cudaMemcpy_ptds_v7000`` → ``cudaMemcpy``)."""
    return _SUFFIX.sub("", name)


def api_class(name: str) -> str:
    """One of ``sync``, ``nonblocking_sync``, ``launch``, ``alloc``, ``free``, ``other``."""
    b = normalize(name)
    return next((c for c, s in (("sync", SYNC), ("nonblocking_sync", NONBLOCKING_SYNC), ("launch", LAUNCH),
                                ("alloc", ALLOC), ("free", FREE)) if b in s), "other")


def is_async_copy(base: str) -> bool:
    """An asynchronous copy call (``cudaMemcpyAsync``, ``cuMemcpyHtoDAsync``, …) by its base name."""
    return "Memcpy" in base and "Async" in base


def name_bases(names: Sequence[str]) -> Tuple[List[str], List[str], np.ndarray]:
    """Per raw API name its base name (:func:`normalize`); the distinct base names, sorted; and raw-name index →
    base-name index (one more slot, 0, for an unknown name: index -1)."""
    base = [normalize(n) for n in names]
    uniq = sorted(set(base))
    pos = {b: i for i, b in enumerate(uniq)}
    return base, uniq, np.array([pos[b] for b in base] + [0], np.int32)


def class_mask(api: ApiCalls, cls: str) -> np.ndarray:
    """Rows of :class:`ApiCalls` ``api`` in class ``cls`` — runtime/driver rows only (work per distinct name)."""
    hit = np.array([api_class(n) == cls for n in api.names] + [False], dtype=bool)
    return (hit[api.name_idx] & api.primary) if len(api) else np.zeros(0, bool)


def name_set_mask(names: List[str], name_idx: np.ndarray, base_names: set) -> np.ndarray:
    hit = np.array([normalize(n) in base_names for n in names] + [False], dtype=bool)
    return hit[name_idx] if name_idx.shape[0] else np.zeros(0, bool)
