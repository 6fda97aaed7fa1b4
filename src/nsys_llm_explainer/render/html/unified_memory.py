"""The Unified Memory section of report.html (report.json ``unified_memory``; docs/METRICS.md).

Present only when the trace holds Unified-Memory activity (report.md lists the section among those without
data otherwise): a summary of the steady window, the per-device table (kernel time under migrations) and the
breakdown (per direction, migration cause, GPU fault access type, CPU-fault function and module). Numbers are
the dict's, formatted; names are escaped.
"""

from __future__ import annotations

from collections import abc
from typing import Any, List, Mapping, Optional

from ..base import Row, available, fmt_bytes, fmt_dur, fmt_int, fmt_pct, rows_of
from .ctx import HtmlCtx
from .markup import Col, h, int_col, ms_col, name_col, pct_col, rich, section, table, text_col

SID = "unified-memory"


def _bytes_col(title: str, key: str) -> Col:
    return Col(title, lambda r: h(fmt_bytes(r.get(key))), lambda r: r.get(key), key=key)


def sec_unified_memory(ctx: HtmlCtx) -> Optional[str]:
    um = ctx.sec("unified_memory")
    if not available(um):
        return None
    steady = um.get("steady")
    w: Mapping[str, Any] = steady if isinstance(steady, abc.Mapping) else {}
    body: List[str] = [
        f"<p>{fmt_int(w.get('migration_count'))} Unified-Memory migrations ({h(fmt_bytes(w.get('migration_bytes')))}, "
        f"{h(fmt_dur(w.get('migration_ns')))} of GPU migration time) in the analysis window. Migrations were in "
        f"flight during {h(fmt_dur(w.get('overlap_ns')))} of {h(fmt_dur(w.get('kernel_busy_ns')))} of kernel time "
        f"({fmt_pct(w.get('overlap_pct'))} %); {h(fmt_dur(w.get('migration_idle_ns')))} of migration time ran with no "
        "kernel (idle, under the <code>copy</code> idle cause). Text equivalent: report.json "
        "<code>unified_memory</code>, report.md “Unified Memory”, <code>tables/unified_memory.csv</code> and "
        "<code>tables/unified_memory_breakdown.csv</code>.</p>"]
    dcols = (text_col("device", "device_id"), int_col("migrations", "migration_count"),
             _bytes_col("bytes", "migration_bytes"), ms_col("migration time (ms)", "migration_ns"),
             ms_col("kernel time (ms)", "kernel_busy_ns"), ms_col("kernels under migrations (ms)", "overlap_ns"),
             pct_col("% of kernel time", "overlap_pct"), ms_col("migrations with no kernel (ms)", "migration_idle_ns"),
             int_col("GPU fault groups", "gpu_fault_events"), int_col("GPU page faults", "gpu_page_faults"))
    body.append(table("um-devices", dcols, rows_of(w, "devices"), "Per device, analysis window."))
    rows: List[Row] = []
    for key, group, name in (("by_direction", "direction", "direction"), ("by_cause", "migration cause", "cause"),
                             ("gpu_faults_by_access", "GPU fault access", "access"),
                             ("cpu_faults_by_function", "CPU fault function", "function"),
                             ("cpu_faults_by_module", "CPU fault module", "module")):
        rows += [{**r, "group": group, "name": r.get(name)} for r in rows_of(w, key)]
    bcols = (text_col("group", "group"), name_col("what", "name", 80), int_col("count", "count"),
             _bytes_col("bytes", "bytes"), ms_col("time (ms)", "total_ns"), int_col("page faults", "page_faults"))
    if rows:
        body.append(table("um-breakdown", bcols, rows, "Breakdown, analysis window (count: migrations, fault "
                                                        "groups or CPU faults)."))
    notes = um.get("notes") or []
    if notes:
        body.append("<ul>" + "".join(f"<li>{rich(n)}</li>" for n in notes) + "</ul>")
    return section(SID, "Unified Memory", body)
