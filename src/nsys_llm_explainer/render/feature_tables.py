"""CSV / Markdown table specs of the sections added for signals the trace may lack (Unified Memory, per-step
synchronization): each is a :class:`table.Table` over its ``report.json`` section; :mod:`specs` lists them with
the others in ``CSV_TABLES``."""

from __future__ import annotations

from collections import abc
from typing import List

from ..vocabulary.units import fmt_bool, fmt_bytes, fmt_float, fmt_ms
from .base import Row, rows_of, section
from .document import Rich
from .table import Col, Table, csv_col, dur_col, int_col, name_col, pct_col, raw, text_col, with_fields

# ---- Unified Memory (report.json ``unified_memory``: analyses/memory/unified.py)
UM_WINDOWS = ("steady", "full")
#: ``unified_memory.<window>`` lists of the breakdown CSV: (list key, group label, id key, name key)
UM_GROUPS = (("by_direction", "direction", "copy_kind", "direction"), ("by_cause", "cause", "cause_id", "cause"),
             ("gpu_faults_by_access", "gpu_fault_access", "access_id", "access"),
             ("cpu_faults_by_function", "cpu_fault_function", None, "function"),
             ("cpu_faults_by_module", "cpu_fault_module", None, "module"))


def _um_windows(report: Row) -> List[Row]:
    um = section(report, "unified_memory")
    return [um[w] for w in UM_WINDOWS if isinstance(um.get(w), abc.Mapping)]


def um_device_rows(report: Row) -> List[Row]:
    """``unified_memory.steady.devices`` then ``unified_memory.full.devices``, each with its ``window``."""
    return [r for w in _um_windows(report) for r in with_fields(rows_of(w, "devices"), window=w.get("window"))]


def um_breakdown_rows(report: Row) -> List[Row]:
    """The per-direction, per-cause, per-access-type and CPU-fault lists of both windows, one row each."""
    out: List[Row] = []
    for w in _um_windows(report):
        for key, group, id_key, name_key in UM_GROUPS:
            out += [{**r, "window": w.get("window"), "group": group, "id": r.get(id_key) if id_key else None,
                     "name": r.get(name_key)} for r in rows_of(w, key)]
    return out


UNIFIED_MEMORY = Table("unified_memory.csv", (
    csv_col("window"),
    text_col("device_id", "device_id", "device"),
    int_col("migration_count", "migration_count", "migrations"),
    Col((("migration_bytes", raw("migration_bytes")),), "bytes", lambda r: fmt_bytes(r.get("migration_bytes")), True,
        raw("migration_bytes"), "migration_bytes"),
    dur_col("migration_ns", "migration", "migration time"),
    dur_col("migration_union_ns", "migration_union"),
    dur_col("kernel_busy_ns", "kernel_busy", "kernel time"),
    dur_col("overlap_ns", "overlap", "kernels under migrations"),
    pct_col("overlap_pct", "overlap_pct", "% of kernel time"),
    dur_col("migration_idle_ns", "migration_idle", "migrations with no kernel"),
    int_col("gpu_fault_events", "gpu_fault_events", "GPU fault groups"),
    int_col("gpu_page_faults", "gpu_page_faults", "GPU page faults"),
    dur_col("gpu_fault_union_ns", "gpu_fault_union"),
), um_device_rows)

UNIFIED_MEMORY_BREAKDOWN = Table("unified_memory_breakdown.csv", (
    csv_col("window"),
    text_col("group", "group", "group"),
    csv_col("id"),
    name_col("name", "name", "what"),
    int_col("count", "count", "count"),
    Col((("bytes", raw("bytes")),), "bytes", lambda r: fmt_bytes(r.get("bytes")), True, raw("bytes"), "bytes"),
    Col((("total_ns", raw("total_ns")),), "time (ms)", lambda r: fmt_ms(r.get("total_ns")), True, raw("total_ns"),
        "total_ns"),
    int_col("page_faults", "page_faults", "page faults"),
), um_breakdown_rows)


# ---- copy paths (report.json ``copy_engines``: analyses/memory/copy_engines.py): one row per (device, path)
def copy_path_rows(report: Row) -> List[Row]:
    return rows_of(section(report, "copy_engines"), "paths")


COPY_PATHS = Table("copy_paths.csv", (
    int_col("device_id", "device_id", "device"),
    text_col("path", "path", "path", True),
    csv_col("label"),
    int_col("count", "count", "copies"),
    Col((("bytes", raw("bytes")),), "bytes", lambda r: fmt_bytes(r.get("bytes")), True, raw("bytes"), "bytes"),
    dur_col("busy_ns", "busy", "busy"),
    pct_col("busy_pct", "busy_pct", "% of window"),
    Col((("gb_per_s", raw("gb_per_s")),), "GB/s", lambda r: fmt_float(r.get("gb_per_s"), 1), True,
        raw("gb_per_s"), "gb_per_s"),
    dur_col("kernel_overlap_ns", "kernel_overlap", "under kernels"),
    pct_col("overlap_pct", "overlap_pct", "% under kernels"),
    dur_col("beyond_kernels_ns", "beyond_kernels", "no kernel"),
    int_col("pageable_count", "pageable_count", "pageable"),
    csv_col("pageable_bytes", "steps"),
    pct_col("step_busy_pct_p50", "step_busy_pct_p50", "median step busy %"),
    csv_col("bytes_per_step_p50"),
), copy_path_rows)


# ---- per-step synchronization (analyses/steps/sync.py): one row per (launching thread, device)
STEP_SYNC = Table("step_sync.csv", (
    int_col("device_id", "device_id", "device"),
    csv_col("pid", "tid"),
    name_col("thread_name", "thread_name", "thread", 30),
    Col((("holds", raw("holds")),), "holds", lambda r: fmt_bool(r.get("holds")), False, raw("holds"), "holds"),
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
    Col((("claimed", lambda r: "; ".join(f"{c.get('kind')}:{c.get('detail')}={c.get('ns')}"
                                        for c in rows_of(r, "claimed"))),)),
    Col((("reason", raw("reason")),), "why", lambda r: Rich(r.get("reason")), False, raw("reason"), "reason"),
), lambda rep: rows_of(section(rep, "step_sync"), "series"))


# ---- follow the wait (analyses/threads/waits.py): one row per (launching thread, other thread, what, name)
def wait_rows(report: Row) -> List[Row]:
    """``waits.launchers[].rows`` with the launching thread's own columns beside each row."""
    out: List[Row] = []
    for w in rows_of(section(report, "waits"), "launchers"):
        for r in rows_of(w, "rows"):
            out.append({**r, "launcher_tid": w.get("tid"), "launcher": w.get("thread"),
                        "wait_ns": w.get("wait_ns"), "wait_pct_of_window": w.get("wait_pct_of_window")})
    return out


THREAD_WAITS = Table("thread_waits.csv", (
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
), wait_rows)
