"""Table specs of Unified Memory, copy paths, per-step synchronization and thread waits (listed in
:data:`.specs.CSV_TABLES`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, List, Optional

from ..vocabulary.units import fmt_bool, fmt_bytes, fmt_float, fmt_ms
from .document import Rich
from .table import Col, Table, csv_col, dur_col, each, fmt_col, int_col, name_col, pct_col, raw, text_col

if TYPE_CHECKING:
    from ..report import Report


@dataclass(frozen=True)
class UmBreakdownRow:
    """One row of ``unified_memory.csv``: an entry of a window's per-direction, per-cause, GPU-fault-access or
    CPU-fault list (``group``), the numbers that list has (the others None)."""

    window: str
    group: str
    id: Any
    name: str
    count: int
    bytes: Optional[int] = None
    total_ns: Optional[int] = None
    page_faults: Optional[int] = None

# ---- Unified Memory (report.json ``unified_memory``: analyses/memory/unified.py)
def _um_windows(report: Report) -> List[Any]:
    um = report.unified_memory
    return [w for w in (um.steady, um.full) if w is not None]


def um_breakdown_rows(report: Report) -> List[UmBreakdownRow]:
    """The per-direction, per-cause, per-access-type and CPU-fault lists of both windows, one row each."""
    out: List[UmBreakdownRow] = []
    for w in _um_windows(report):
        for group, moves in (("direction", w.by_direction), ("cause", w.by_cause)):
            out += [UmBreakdownRow(w.window, group, g.key, g.label, g.count, g.bytes, g.total_ns) for g in moves]
        out += [UmBreakdownRow(w.window, "gpu_fault_access", f.access_id, f.access, f.count, page_faults=f.page_faults)
                for f in w.gpu_faults_by_access]
        for group, sites in (("cpu_fault_function", w.cpu_faults_by_function),
                             ("cpu_fault_module", w.cpu_faults_by_module)):
            out += [UmBreakdownRow(w.window, group, None, c.name, c.count) for c in sites]
    return out


#: ``unified_memory.steady.devices`` then ``unified_memory.full.devices``, each with its ``window``
UNIFIED_MEMORY: Table[Report] = Table("unified_memory.csv", (
    csv_col("window"),
    text_col("device_id", "device_id", "device"),
    int_col("migration_count", "migration_count", "migrations"),
    fmt_col("migration_bytes", "migration_bytes", "bytes", fmt_bytes),
    dur_col("migration_ns", "migration", "migration time"),
    dur_col("migration_union_ns", "migration_union"),
    dur_col("kernel_busy_ns", "kernel_busy", "kernel time"),
    dur_col("overlap_ns", "overlap", "kernels under migrations"),
    pct_col("overlap_pct", "overlap_pct", "% of kernel time"),
    dur_col("migration_idle_ns", "migration_idle", "migrations with no kernel"),
    int_col("gpu_fault_events", "gpu_fault_events", "GPU fault groups"),
    int_col("gpu_page_faults", "gpu_page_faults", "GPU page faults"),
    dur_col("gpu_fault_union_ns", "gpu_fault_union"),
), lambda rep: each(_um_windows(rep), lambda w: w.devices, lambda w: {"window": w.window}))

UNIFIED_MEMORY_BREAKDOWN: Table[Report] = Table("unified_memory_breakdown.csv", (
    csv_col("window"),
    text_col("group", "group", "group"),
    csv_col("id"),
    name_col("name", "name", "what"),
    int_col("count", "count", "count"),
    fmt_col("bytes", "bytes", "bytes", fmt_bytes),
    fmt_col("total_ns", "total_ns", "time (ms)", fmt_ms),
    int_col("page_faults", "page_faults", "page faults"),
), um_breakdown_rows)


# ---- copy paths (report.json ``copy_engines``: analyses/memory/copy_engines.py): one row per (device, path)
COPY_PATHS: Table[Report] = Table("copy_paths.csv", (
    int_col("device_id", "device_id", "device"),
    text_col("path", "path", "path", True),
    csv_col("label"),
    int_col("count", "count", "copies"),
    fmt_col("bytes", "bytes", "bytes", fmt_bytes),
    dur_col("busy_ns", "busy", "busy"),
    pct_col("busy_pct", "busy_pct", "% of window"),
    fmt_col("gb_per_s", "gb_per_s", "GB/s", lambda v: fmt_float(v, 1)),
    dur_col("kernel_overlap_ns", "kernel_overlap", "under kernels"),
    pct_col("overlap_pct", "overlap_pct", "% under kernels"),
    dur_col("beyond_kernels_ns", "beyond_kernels", "no kernel"),
    int_col("pageable_count", "pageable_count", "pageable"),
    csv_col("pageable_bytes", "steps"),
    pct_col("step_busy_pct_p50", "step_busy_pct_p50", "median step busy %"),
    csv_col("bytes_per_step_p50"),
), lambda rep: rep.copy_engines.paths)


# ---- per-step synchronization (analyses/steps/sync.py): one row per (launching thread, device)
STEP_SYNC: Table[Report] = Table("step_sync.csv", (
    int_col("device_id", "device_id", "device"),
    csv_col("pid", "tid"),
    name_col("thread_name", "thread_name", "thread", 30),
    fmt_col("holds", "holds", "holds", fmt_bool, right=False),
    name_col("api", "api", "sync API", 40),
    int_col("step_sync_points", "step_sync_points"),
    csv_col("sync_points", "blocking_calls", "readback_points", "readback", "steps", "kernels_in_steps",
            "device_kernels", "kernel_share", "kernels_per_step_p50"),
    dur_col("period_p50_ns", "period_p50", "period p50"),
    dur_col("period_p90_ns", "period_p90"),
    dur_col("gpu_busy_p50_ns", "gpu_busy_p50", "GPU busy / step"),
    dur_col("wait_p50_ns", "wait_p50", "wait in sync / step"),
    dur_col("exposed_p50_ns", "exposed_p50", "host, GPU idle / step"),
    dur_col("exposed_p90_ns", "exposed_p90"),
    dur_col("exposed_ns", "exposed"),
    pct_col("exposed_pct_of_window", "exposed_pct_of_window", "exposed % of window"),
    csv_col("exposed_pct_of_idle"),
    dur_col("overlap_ns", "overlap", "overlappable"),
    pct_col("overlap_pct_of_window", "overlap_pct_of_window", "overlappable % of window"),
    csv_col("overlap_pct_of_idle"),
    Col((("claimed", lambda r: "; ".join(f"{kind}:{detail}={ns}" for kind, detail, ns in r.claimed)),)),
    Col((("reason", raw("reason")),), "why", lambda r: Rich(r.reason), False, raw("reason"), "reason"),
), lambda rep: rep.step_sync.series)


# ---- follow the wait (analyses/threads/waits.py): one row per (launching thread, other thread, what, name):
# ``waits.launchers[].rows`` with the launching thread's own columns beside each row
THREAD_WAITS: Table[Report] = Table("thread_waits.csv", (
    csv_col("launcher_tid"),
    name_col("launcher", "launcher", "launching thread", 30),
    pct_col("wait_pct_of_window", "wait_pct_of_window", "waits % of window"),
    csv_col("wait_ns"),
    csv_col("tid"),
    name_col("thread", "thread", "other thread", 30),
    text_col("what", "what", "in"),
    name_col("name", "name", "range / call", 40),
    text_col("os_class", "os_class", "class"),
    dur_col("ns", "overlap", "during the waits"),
    pct_col("pct_of_waits", "pct_of_waits", "% of the waits"),
), lambda rep: each(rep.waits.launchers, lambda w: w.rows, lambda w: {
    "launcher_tid": w.tid, "launcher": w.thread, "wait_ns": w.wait_ns, "wait_pct_of_window": w.wait_pct_of_window}))
