"""Diagnosis analyses run after the core report (steady-state window, time accounting, kernel
categories, phases, steps, CUDA graphs, memory traffic, NCCL). Results land in ``report.extra`` under
the JSON key each section is written to.

Order: window (full vs steady state) → clip the model to the steady window → accounting on both →
phases (NVTX) → categories (per phase) → steps → graphs → memory (steady state, per step) → NCCL.
"""

from __future__ import annotations

from typing import Any, Dict

import numpy as np

from .analyses import intervals as iv
from .analyses.accounting import analyze_accounting, host_caused_end, launching_threads, state_parts_streaming
from .analyses.api_classes import SYNC_MEMCPY, normalize
from .analyses.categories import analyze_categories, load_rules
from .analyses.graphs import analyze_graphs
from .analyses.idle import analyze_idle, device_activity
from .analyses.memory import analyze_memory
from .analyses.nccl import analyze_nccl
from .analyses.phases import analyze_phases, resolve_phase_map
from .analyses.steps import analyze_steps
from .analyses.window import detect_window
from .model.clip import clip_model
from .model.trace import TraceModel

MAX_STEP_ROWS = 100_000  # per-step rows kept in report.json / tables/steps.csv


def sync_memcpy_idle(model: TraceModel, acct_devices, include_memcpy: bool) -> Dict[int, int]:
    """Per device: host-caused idle ns (see accounting) during which a launching thread was inside a
    synchronous memcpy/memset call — a subset of the host-caused ``sync`` part."""
    api = model.api
    out: Dict[int, int] = {}
    if api is None or len(api) == 0:
        return out
    is_sm = np.array([normalize(n) in SYNC_MEMCPY for n in api.names] + [False], dtype=bool)
    codes = np.where(is_sm[api.name_idx] & api.primary, 0, -1).astype(np.int64)
    threads = launching_threads(model)
    acts = device_activity(model, include_memcpy)
    for d in acct_devices:
        dev = d["device_id"]
        if dev not in acts or dev not in threads:
            continue
        gs, ge, _, ba = iv.gaps(acts[dev].union)
        hce = host_caused_end(model, acts[dev], gs, ge, ba)
        parts = state_parts_streaming(model, threads[dev], codes, gs, hce)
        out[dev] = int(parts["sync"].sum())
    return out


def run_diagnosis(report) -> None:
    """Populate ``report.extra`` (see module docstring)."""
    model: TraceModel = report.model
    opts = report.options
    extra: Dict[str, Any] = report.extra

    window = detect_window(model, opts.window, opts.window_nvtx)
    steady = model if window.is_full else clip_model(model, window.start_ns, window.end_ns)
    extra["window"] = window.to_dict()

    acct_full = analyze_accounting(model, opts.include_memcpy_in_busy)
    acct = acct_full if window.is_full else analyze_accounting(steady, opts.include_memcpy_in_busy)
    sm_idle = sync_memcpy_idle(steady, acct.devices, opts.include_memcpy_in_busy) if acct.available else {}
    for d in acct.devices:
        d["idle_in_sync_memcpy_ns"] = sm_idle.get(d["device_id"], 0)
    extra["accounting"] = {"scope": "steady_state" if not window.is_full else "full", "steady": acct,
                           "full": acct_full}
    if not window.is_full:
        extra["steady_idle"] = analyze_idle(steady, opts.include_memcpy_in_busy, opts.top).devices
    # the per-device timelines are not needed any more: free them before the memory-heavy steps
    model.cache.clear()
    steady.cache.clear()

    phase_map, phase_source = resolve_phase_map(opts.phase_map)
    tree = report.nvtx.tree
    att = report.attribution
    # phases: every NVTX domain stack counts; steps: the default domain's ranges (framework step ranges),
    # falling back to the innermost over all domains
    phase_nodes = att.kernel_nodes if att.kernel_nodes else att.kernel_node
    kernel_node = att.kernel_nodes.get(0, att.kernel_node) if att.kernel_nodes else att.kernel_node
    phases = analyze_phases(model, phase_map, tree, phase_nodes, source=phase_source)
    extra["phases"] = phases.to_dict()
    if opts.phase_map and phases.available and att.available:
        # NVTX→kernel phase totals of the core report use the same kernel → phase rule as the phases section
        att.phases = [{"phase": r["phase"], "kernel_count": r["kernel_count"], "kernel_ns": r["gpu_time_ns"],
                       "pct_of_kernel_time": r["pct_of_kernel_time"]} for r in phases.phases]
    kernel_phase = phases.kernel_phase if phases.available else None
    phase_names = phases.phase_names if phases.available else None

    rules = load_rules(None, opts.categories_file)
    extra["categories"] = analyze_categories(model, rules, kernel_phase, phase_names,
                                             opts.include_memcpy_in_busy).to_dict()

    steps = analyze_steps(model, phases, step_marker=opts.step_marker, step_range=opts.step_range,
                          top=min(opts.top, 10), tree=tree, kernel_node=kernel_node)
    extra["steps"] = steps.to_dict()
    extra["steps"]["rows"] = steps.table()[:MAX_STEP_ROWS] if steps.available else []
    extra["steps"]["rows_capped"] = bool(steps.available and steps.step_count > MAX_STEP_ROWS)
    extra["graphs"] = analyze_graphs(model)
    bounds = (steps.arrays.start, steps.arrays.end) if steps.available and steps.arrays is not None else None
    extra["memory"] = analyze_memory(steady, bounds)
    extra["nccl"] = analyze_nccl(model)
