"""The Unified Memory finding (category ``unified_memory``): the share of kernel time during which Unified-Memory
migrations were in flight, on the worst device with a workload. Definitions: docs/FINDINGS.md, "Findings": "Unified
Memory" (the metric: docs/METRICS.md, "Unified Memory")."""

from __future__ import annotations

from typing import AbstractSet, List, Mapping, Optional

from ..analyses.memory.unified import UmDevice, UmWindow, UnifiedMemoryResult
from ..vocabulary.code_spans import code_name
from ..vocabulary.units import fmt_bytes, fmt_count
from ..vocabulary.units import fmt_dur as dur
from .base import Check, Finding, Scope, finding

MEDIUM_PCT = 10.0
HIGH_PCT = 30.0
METRIC = "um_overlap_pct_of_kernel_time"
ADVICE_IDS = ("um.prefetch", "um.prefetch.more", "um.advise", "um.device_alloc", "um.torch")
def is_unified_detail(detail: str) -> bool:
    """True for an idle-cause ``copy`` detail naming a Unified-Memory copy kind ("Unified Host-to-Device" …)."""
    return str(detail).startswith("Unified ")


def _evidence(w: UmWindow, considered: List[UmDevice], um: UnifiedMemoryResult, where: str) -> List[str]:
    full = um.full if um.full is not None and (um.full.start_ns, um.full.end_ns) != (w.start_ns, w.end_ns) else None
    ev = []
    for d in considered:
        fd = full.device(d.device_id) if full is not None else None
        tail = f"; whole capture {fd.overlap_pct:.1f} %" if fd is not None else ""
        ev.append(f"Device {d.device_id}: Unified-Memory {w.overlap_of()} were in flight during {dur(d.overlap_ns)} "
                  f"of its {dur(d.kernel_busy_ns)} of kernel time ({d.overlap_pct:.1f} %) in {where}{tail}.")
    if w.by_direction:
        ev.append(f"{fmt_count(w.migration_count, 'migration')}, {fmt_bytes(w.migration_bytes)}, "
                  f"{dur(w.migration_ns)} of GPU migration time in the window: " + "; ".join(
                      f"{r.label} {r.count:,} ({fmt_bytes(r.bytes)}, {dur(r.total_ns)})"
                      for r in w.by_direction) + ".")
    if any(r.key >= 0 for r in w.by_cause):
        ev.append("By migration cause: " + "; ".join(
            f"{r.label} {r.count:,}" for r in sorted(w.by_cause, key=lambda r: (-r.count, r.key)))
            + ".")
    if w.overlap_of() != "migrations":
        ev.append("User prefetches (`cudaMemPrefetchAsync`) move pages ahead of the kernels that read them, "
                  "stream-ordered: a kernel does not wait on one it runs beside, so the kernel time under them is not "
                  "counted above.")
    if um.sources.get("gpu_fault_table") and w.gpu_fault_events:
        ev.append(f"{w.gpu_page_faults:,} GPU page faults in {w.gpu_fault_events:,} fault groups (" + ", ".join(
            f"{r.access} {r.page_faults:,}" for r in w.gpu_faults_by_access) + ").")
    if w.cpu_fault_count:
        where = ""
        if w.cpu_faults_by_function:
            top = w.cpu_faults_by_function[0]
            where = f", most in {code_name(top.name)} ({top.count:,})"
        ev.append(f"{w.cpu_fault_count:,} CPU page faults on managed memory{where}: the host touches pages the GPU "
                  "also uses, so they migrate back and forth.")
    idle = sum(d.migration_idle_ns for d in considered)
    if idle:
        ev.append(f"{dur(idle)} of migration time ran with no kernel on the GPU: that is idle time, charged to the "
                  "`copy` idle cause (not claimed here).")
    return ev


def _user_prefetch(w: UmWindow) -> Optional[bool]:
    """Whether the window has user-prefetch migrations; None when the export records no migration cause."""
    if w.overlap_of() != "migrations":
        return True
    return None if all(r.key < 0 for r in w.by_cause) else False


def unified_memory_finding(um: Optional[UnifiedMemoryResult], active: Optional[AbstractSet[int]],
                           facts: Mapping[str, object], where: str = "the steady window") -> Optional[Finding]:
    """The finding when migrations overlap ≥ :data:`MEDIUM_PCT` % of a device's kernel time (module docstring).
    ``active``: the devices with a workload (:meth:`GpuTimeResult.kernel_devices`; ``None``: every device);
    ``where``: the analysis window in words (:func:`vocabulary.windows.window_name`)."""
    if um is None or not um.available or um.steady is None:
        return None
    considered = [d for d in um.steady.devices if d.kernel_busy_ns > 0 and d.migration_count
                  and (active is None or d.device_id in active)]
    if not considered:
        return None
    top = max(considered, key=lambda d: (d.overlap_pct, -d.device_id))
    check = Check(METRIC, top.overlap_pct, ">=", MEDIUM_PCT, Scope(device_id=top.device_id))
    if not check.holds():
        return None
    title = (f"Unified-Memory {um.steady.overlap_of()} run underneath {top.overlap_pct:.1f} % of the kernel time on "
             f"device {top.device_id}: managed memory is moved while kernels run")
    return finding(
        "unified_memory", severity="high" if top.overlap_pct >= HIGH_PCT else "medium", title=title,
        evidence=_evidence(um.steady, considered, um, where), advice=ADVICE_IDS,
        facts={**facts, "um_user_prefetch": _user_prefetch(um.steady)},
        time_at_stake_ns=sum(d.overlap_ns for d in considered), checks=(check,), device_id=top.device_id)
