"""Findings: rules over analysis results. Each finding is a dict with a stable ``id``, a ``category``
from :data:`CATEGORIES`, ``severity``, ``confidence``, ``title``, ``evidence`` (list of strings with
numbers), ``recommendation`` (list of strings) and ``time_at_stake_ns``. Findings are ranked by time
at stake."""

from __future__ import annotations

from typing import Dict, List

CATEGORIES = (
    "launch_overhead", "sync_stall", "capture_window", "dominant_kernel", "memcpy", "nccl_wait",
    "allocation", "host_gap", "graph_trace_mode", "nvtx_coverage", "none",
)
SEVERITY_RANK = {"high": 0, "medium": 1, "low": 2, "info": 3}


def ms(ns: float) -> str:
    return f"{ns / 1e6:.3f} ms"


def collect_warnings(report) -> List[str]:
    w = list(report.model.warnings)
    for sec in (report.kernels, report.cuda_api, report.nvtx):
        if not sec.available and sec.reason and "no CUDA kernels" in sec.reason:
            w.append(sec.reason[0].upper() + sec.reason[1:])
    att = report.attribution
    thr = report.options.nvtx_coverage_warn_threshold
    if att.available and att.coverage < thr:
        w.append(f"NVTX→kernel attribution covers {att.coverage * 100:.1f}% of kernel time "
                 f"(< {thr * 100:.1f}%): per-range and per-phase GPU time is partial.")
    return w


def run_rules(report) -> List[Dict]:
    findings: List[Dict] = []
    for rule in RULES:
        out = rule(report)
        if out:
            findings.extend(out if isinstance(out, list) else [out])
    findings.sort(key=lambda f: (-int(f.get("time_at_stake_ns", 0)), SEVERITY_RANK.get(f["severity"], 9), f["id"]))
    return findings


def rule_dominant_kernel(report):
    k = report.kernels
    if not k.available or not k.by_name:
        return None
    top = k.by_name[0]
    if top["pct"] < 50.0:
        return None
    return {
        "id": "dominant_kernel", "category": "dominant_kernel", "severity": "medium", "confidence": "high",
        "title": "One kernel dominates GPU time",
        "evidence": [f"`{top['name']}` is {top['pct']:.1f}% of kernel time ({ms(top['total_ns'])} over "
                     f"{top['count']} calls, avg {top['avg_ns'] / 1e3:.2f} us)."],
        "recommendation": ["Optimize or replace this kernel first (tile/config choice, fused or newer kernel)."],
        "time_at_stake_ns": int(top["total_ns"]),
    }


RULES = [rule_dominant_kernel]
