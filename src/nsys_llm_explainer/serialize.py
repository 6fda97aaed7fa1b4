"""The typed :class:`pipeline.Report` → the ``report.json`` dict (builtins only; every duration an integer
``*_ns``). The one place results are serialised; renderers read this dict, findings never do."""

from __future__ import annotations

import dataclasses
from typing import Any, Dict

import numpy as np

SCHEMA_VERSION = "2.0"
_PRIVATE = {"tree", "activity", "kernel_node", "kernel_nodes", "kernel_phase", "node_phase", "arrays",
            "kernel_category", "name_category", "rules"}


def plain(obj: Any) -> Any:
    """Dataclasses/numpy → JSON-ready builtins (private helper fields dropped)."""
    if hasattr(obj, "to_dict") and not isinstance(obj, type) and not isinstance(obj, dict):
        return plain(obj.to_dict())
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: plain(getattr(obj, f.name)) for f in dataclasses.fields(obj) if f.name not in _PRIVATE}
    if isinstance(obj, dict):
        return {str(k): plain(v) for k, v in obj.items() if k not in _PRIVATE}
    if isinstance(obj, (list, tuple)):
        return [plain(v) for v in obj]
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return None if not np.isfinite(obj) else float(obj)
    if isinstance(obj, np.bool_):
        return bool(obj)
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, float) and not np.isfinite(obj):
        return None
    return obj


def report_dict(report) -> Dict[str, Any]:
    t, k, att, nv, dg = report.trace, report.kernels, report.attribution, report.nvtx, report.diagnosis
    steps = plain(dg.steps)
    if dg.steps.available:
        rows = dg.steps.table()
        steps["rows"] = rows[:100_000]
        steps["rows_capped"] = len(rows) > 100_000
    else:
        steps["rows"], steps["rows_capped"] = [], False
    out: Dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "tool_version": report.tool_version,
        "headline": plain(report.headline),
        "window": plain(dg.window),
        "trace": {
            "path": t.path, "nsys_version": t.nsys_version, "export_schema_version": t.export_schema_version,
            "metadata_table": t.metadata_table, "kernel_table": t.kernel_table, "start_ns": t.start_ns,
            "end_ns": t.end_ns, "span_ns": t.span_ns, "gpus": plain(t.gpus), "processes": plain(t.processes),
            "row_counts": plain(t.row_counts), "cuda_graph_trace_mode": t.cuda_graph_trace_mode,
            "capture": plain(t.capture), "schema_notes": list(report.model.notes),
        },
        "options": plain(report.options),
        "warnings": list(report.warnings),
        "findings": [f.to_dict() for f in report.findings],
        "devices": plain(dg.gpu_time.to_dict()),
        "gpu_time": {"available": dg.gpu_time.available, "reason": dg.gpu_time.reason,
                     "include_memcpy": dg.gpu_time.include_memcpy},
        "idle_causes": plain(dg.idle_causes.to_dict()),
        "kernel_traits": plain(dg.traits.to_dict()),
        "kernels": plain(k.by_name_device),
        "kernels_summary": {"available": k.available, "reason": k.reason, "total_kernel_ns": k.total_kernel_ns,
                            "kernel_count": k.kernel_count, "by_name": plain(k.by_name)},
        "pids": {"by_pid": plain(k.by_pid), "kernels_by_pid": plain(k.by_pid_name)},
        "launch": plain(report.launch),
        "sync": plain(report.sync),
        "cuda_api": plain(report.cuda_api),
        "memcpy": plain(report.memcpy),
        "nvtx": {
            "available": nv.available, "reason": nv.reason, "range_count": nv.range_count,
            "unterminated": nv.unterminated, "ranges": plain(nv.ranges), "by_pid": plain(nv.by_pid),
            "attribution": {
                "available": att.available, "reason": att.reason, "coverage": att.coverage,
                "total_kernel_ns": att.total_kernel_ns, "attributed_ns": att.attributed_ns,
                "attributed_kernel_count": att.attributed_count, "linked_kernel_ns": att.linked_kernel_ns,
                "ranges": plain(att.ranges), "by_pid": plain(att.by_pid), "pid_coverage": plain(att.pid_coverage),
                "phases": plain(att.phases),
            },
        },
        "phases": plain(dg.phases),
        "categories": plain(dg.categories),
        "steps": steps,
        "graphs": plain(dg.graphs),
        "memory": plain(dg.memory),
        "nccl": plain(dg.nccl),
        "timings_s": dict(report.timings_s),
    }
    return out
