"""The typed :class:`report.Report` → the ``report.json`` dict (builtins only; every duration an integer
``*_ns``). The one place the report is assembled: each result serialises itself (``to_dict()``), this
module only places the parts under their ``report.json`` keys. Renderers read this dict, findings never do.
"""

from __future__ import annotations

from dataclasses import fields
from typing import TYPE_CHECKING, Any, Dict

from .jsonable import json_ready
from .options import Options, report_options

if TYPE_CHECKING:
    from .report import Report

SCHEMA_VERSION = "2.0"



def options_dict(o: Options) -> Dict[str, Any]:
    """``report.json`` ``options``: the parsed options (the option table decides which, :mod:`options`)."""
    return report_options(o)


def _steady_kernels(report: Report) -> Dict[str, Any]:
    """Kernels by name over the analysis window (clipped to it); ``None`` rows when it is the whole capture
    (then ``kernels_summary`` holds the same numbers)."""
    sk = report.steady_kernels.to_dict()
    same = report.window.is_full
    return {"available": sk["available"] and not same, "reason": "the analysis window is the whole capture"
            if same else sk["reason"], "total_kernel_ns": sk["total_kernel_ns"], "kernel_count": sk["kernel_count"],
            "by_name": [] if same else sk["by_name"]}


#: :class:`report.Report` fields :func:`report_dict` places itself (or leaves out: the models, the timings
#: under ``timings_s``); every other field is written under its own name as its ``to_dict()`` — so a new
#: analysis needs no line here
PLACED = frozenset({
    "tool_version", "options", "model", "steady", "trace", "window", "kernels", "steady_kernels", "launch", "sync",
    "cuda_api", "memcpy", "nvtx", "attribution", "gpu_time", "idle_causes", "traits", "phases", "categories",
    "steps", "graphs", "memory", "nccl", "facts", "step_sync", "unified_memory", "host_samples", "findings",
    "headline", "warnings", "timings_s"})


def report_dict(report: Report) -> Dict[str, Any]:
    """The ``report.json`` dict of ``report``."""
    out = _placed(report)
    for f in fields(report):
        if f.name not in PLACED:
            out[f.name] = json_ready(getattr(report, f.name).to_dict())
    return out


def _placed(report: Report) -> Dict[str, Any]:
    k = report.kernels.to_dict()
    gpu = report.gpu_time
    return {
        "schema_version": SCHEMA_VERSION,
        "tool_version": report.tool_version,
        "headline": json_ready(report.headline.to_dict()),
        "window": report.window.to_dict(),
        "trace": report.trace.to_dict(),
        "options": options_dict(report.options),
        "warnings": list(report.warnings),
        "findings": [f.to_dict() for f in report.findings],
        "devices": json_ready(gpu.to_dict()),
        "gpu_time": {"available": gpu.available, "reason": gpu.reason, "include_memcpy": gpu.include_memcpy},
        "idle_causes": json_ready(report.idle_causes.to_dict()),
        "timeline": {"bins": len(report.idle_causes.bins[0].busy_ns) if report.idle_causes.bins else 0,
                     "devices": [b.to_dict() for b in report.idle_causes.bins]},
        "kernel_traits": json_ready(report.traits.to_dict()),
        "facts": json_ready(report.facts.to_dict()),
        "kernels": k["by_name_device"],
        "kernels_summary": {key: k[key] for key in ("available", "reason", "total_kernel_ns", "kernel_count",
                                                    "by_name")},
        "steady_kernels": _steady_kernels(report),
        "pids": {"by_pid": k["by_pid"], "kernels_by_pid": k["by_pid_name"]},
        "launch": report.launch.to_dict(),
        "sync": report.sync.to_dict(),
        "cuda_api": report.cuda_api.to_dict(),
        "memcpy": report.memcpy.to_dict(),
        "nvtx": {**report.nvtx.to_dict(), "attribution": report.attribution.to_dict()},
        "phases": report.phases.to_dict(),
        "categories": report.categories.to_dict(),
        "steps": report.steps.to_dict(),
        "graphs": report.graphs.to_dict(),
        "memory": report.memory.to_dict(),
        "nccl": report.nccl.to_dict(),
        "timings_s": dict(report.timings_s),
        "unified_memory": report.unified_memory.to_dict(),
        "host_samples": json_ready(report.host_samples.to_dict()),
        "step_sync": json_ready(report.step_sync.to_dict()),   # per-step synchronization (analyses/steps/sync.py)
    }

