"""Synthetic vLLM-style inference traces, each with one planted cause.

``build_scenario(name, path, seed=0)`` writes the trace and returns the *planted facts*: the
cause category plus numbers that are known by construction (kernel counts, per-device busy time
as an exact interval union, idle time inside sync/alloc/memcpy calls, ...). Times are ns.

Scenarios of the idle-cause model (docs/MODEL.md) also return ``cause_kind`` / ``cause_detail`` (the idle
cause expected to dominate the steady-state idle) and ``idle_by_kind_ns`` / ``idle_by_cause_ns`` computed by
the generator from its planted intervals over ``idle_window_ns`` (see ``idle_model``).

Modules: ``names`` / ``names_train`` (kernel names and step shapes), ``sim`` / ``rank`` / ``steps`` (the
simulator), ``idle_model`` (planted idle causes), then the scenarios grouped by theme: ``serving``,
``stalls``, ``graphs``, ``copies``, ``one_time``, ``compute``, ``waits``, ``unified_memory``, ``step_sync``,
``threads``, ``devices``.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Optional, Tuple

from .cluster import CLUSTER_SCENARIOS, build_cluster  # noqa: F401  (multi-file scenarios)
from .compute import compiled_elementwise, fp32_gemm, fp32_gemm_no_tensor_cores, fp32_gemm_turing, training_step
from .copies import async_copies, pageable_async_copy
from .copy_engines import d2d_bound_step, h2d_pageable_step
from .devices import copies_only_gpu
from .graphs import cuda_graph_node, graph_level, overlapping_streams
from .names import K
from .one_time import bursty_warmup, first_launch, warmup_then_busy
from .samples import host_samples
from .serving import demo, dominant_kernel, healthy, launch_bound, per_token_sync, warmup_tail
from .stalls import alloc_in_loop, host_gap, nccl_straggler, pageable_h2d
from .step_sync import step_sync_host_work
from .threads import colliding_thread_names
from .unified_memory import unified_memory
from .waits import launcher_waits_io, nvtx_host_range, nvtx_load_launch_bound, queued_dependency

__all__ = ["SCENARIOS", "build_scenario", "CAUSES", "NEW_CAUSES", "K"]

_LEGACY_CAUSES = (
    "launch_overhead",
    "sync_stall",
    "capture_window",
    "gpu_bound",
    "memcpy",
    "nccl_wait",
    "allocation",
    "host_gap",
    "graph_trace_mode",
    "none",
)
#: causes added with the idle-model scenarios (docs/MODEL.md)
NEW_CAUSES = ("copy_bound", "one_time", "fp32_gemm", "host_range", "gpu_wait", "gpu_bound")
#: causes added with the feature scenarios (Unified Memory, per-step synchronization)
FEATURE_CAUSES = ("unified_memory", "step_sync", "host_os")
CAUSES: Tuple[str, ...] = _LEGACY_CAUSES + NEW_CAUSES + FEATURE_CAUSES

SCENARIOS: Dict[str, Callable[..., Dict[str, Any]]] = {
    "demo": demo,
    "healthy": healthy,
    "launch_bound": launch_bound,
    "per_token_sync": per_token_sync,
    "warmup_tail": warmup_tail,
    "dominant_kernel": dominant_kernel,
    "pageable_h2d": pageable_h2d,
    "nccl_straggler": nccl_straggler,
    "alloc_in_loop": alloc_in_loop,
    "cuda_graph_node": cuda_graph_node,
    "graph_level": graph_level,
    "overlapping_streams": overlapping_streams,
    "host_gap": host_gap,
    "pageable_async_copy": pageable_async_copy,
    "async_copies": async_copies,
    "warmup_then_busy": warmup_then_busy,
    "first_launch": first_launch,
    "fp32_gemm": fp32_gemm,
    "nvtx_host_range": nvtx_host_range,
    "queued_dependency": queued_dependency,
    "training_step": training_step,
    "bursty_warmup": bursty_warmup,
    "nvtx_load_launch_bound": nvtx_load_launch_bound,
    "fp32_gemm_turing": fp32_gemm_turing,
    "fp32_gemm_no_tensor_cores": fp32_gemm_no_tensor_cores,
    "compiled_elementwise": compiled_elementwise,
    "unified_memory": unified_memory,
    "d2d_bound_step": d2d_bound_step,
    "h2d_pageable_step": h2d_pageable_step,
    # CPU samples inside host-side idle (analyses/idle/host_samples.py)
    "host_samples": host_samples,
    "step_sync_host_work": step_sync_host_work,   # per-step synchronization
    # several host threads: a launcher that waits on I/O worker threads
    "launcher_waits_io": launcher_waits_io,
    "copies_only_gpu": copies_only_gpu,   # a second GPU that only receives copies (devices[].role)
    "colliding_thread_names": colliding_thread_names,   # threads sharing a name: labelled `name (tid N)`
}


def build_scenario(name: str, path: str, seed: int = 0, flavor: Optional[str] = None) -> Dict[str, Any]:
    """Write scenario ``name`` to ``path`` (overwriting) and return its planted facts."""
    if name not in SCENARIOS:
        raise KeyError(f"unknown scenario {name!r}; known: {', '.join(sorted(SCENARIOS))}")
    facts = SCENARIOS[name](str(path), seed=seed, flavor=flavor)
    facts["scenario"] = name
    return facts
