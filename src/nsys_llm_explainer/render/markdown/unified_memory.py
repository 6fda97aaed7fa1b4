"""The Unified Memory section of report.md (report.json ``unified_memory``; definitions in docs/METRICS.md).

Shown when the trace holds Unified-Memory activity; otherwise listed among the omitted sections with its reason
(one line, e.g. "no Unified Memory activity: …"). Formatting only: every number is the dict's.
"""

from __future__ import annotations

from collections import abc
from typing import Any, List, Mapping

from ..base import Row, available, fmt_bytes, fmt_dur, fmt_int, fmt_pct, rows_of
from ..escape import md_name, md_rich, md_text
from ..feature_tables import UNIFIED_MEMORY, UNIFIED_MEMORY_BREAKDOWN
from ..table import md_table
from .ctx import Ctx, Omitted, Result, heading

TITLE = "Unified Memory"
TOP = 3


def _part(um: Mapping[str, Any], key: str) -> Row:
    v = um.get(key)
    return v if isinstance(v, abc.Mapping) else {}


def _lines(w: Row, full: Row, same: bool) -> List[str]:
    out: List[str] = []
    dirs = rows_of(w, "by_direction")
    if dirs:
        out.append("- By direction: " + "; ".join(
            f"{md_text(r.get('direction'), line_start=False)} {fmt_int(r.get('count'))} "
            f"({fmt_bytes(r.get('bytes'))}, {fmt_dur(r.get('total_ns'))})" for r in dirs) + ".")
    causes = [r for r in rows_of(w, "by_cause")]
    if any((r.get("cause_id") or 0) >= 0 for r in causes):
        out.append("- By migration cause: " + "; ".join(
            f"{md_text(r.get('cause'), line_start=False)} {fmt_int(r.get('count'))}" for r in causes) + ".")
    if w.get("gpu_fault_events"):
        out.append(f"- GPU page faults: {fmt_int(w.get('gpu_page_faults'))} in {fmt_int(w.get('gpu_fault_events'))} "
                   "fault groups (" + ", ".join(
                       f"{md_text(r.get('access'), line_start=False)} {fmt_int(r.get('page_faults'))}"
                       for r in rows_of(w, "gpu_faults_by_access")) + ").")
    if w.get("cpu_fault_count"):
        funcs = ", ".join(f"{md_name(r.get('function'), 60)} {fmt_int(r.get('count'))}"
                          for r in rows_of(w, "cpu_faults_by_function")[:TOP])
        mods = ", ".join(f"{md_name(r.get('module'), 60)} {fmt_int(r.get('count'))}"
                         for r in rows_of(w, "cpu_faults_by_module")[:TOP])
        out.append(f"- CPU page faults: {fmt_int(w.get('cpu_fault_count'))}"
                   + (f"; functions {funcs}" if funcs else "") + (f"; modules {mods}" if mods else "") + ".")
    if not same and full:
        out.append(f"- Whole capture: {fmt_int(full.get('migration_count'))} migrations "
                   f"({fmt_bytes(full.get('migration_bytes'))}), under {fmt_pct(full.get('overlap_pct'))} % of kernel "
                   f"time; {fmt_int(full.get('gpu_page_faults'))} GPU and {fmt_int(full.get('cpu_fault_count'))} CPU "
                   "page faults.")
    return out


def sec_unified_memory(ctx: Ctx) -> Result:
    um = ctx.sec("unified_memory")
    if not available(um):
        return Omitted(TITLE, str(um.get("reason") or "no Unified Memory activity"))
    w, full = _part(um, "steady"), _part(um, "full")
    same = (w.get("start_ns"), w.get("end_ns")) == (full.get("start_ns"), full.get("end_ns"))
    where = "the whole capture" if same else "the steady window"
    note = (f"{fmt_int(w.get('migration_count'))} Unified-Memory migrations ({fmt_bytes(w.get('migration_bytes'))}, "
            f"{fmt_dur(w.get('migration_ns'))} of GPU migration time) in {where}. Migrations were in flight during "
            f"{fmt_dur(w.get('overlap_ns'))} of {fmt_dur(w.get('kernel_busy_ns'))} of kernel time "
            f"({fmt_pct(w.get('overlap_pct'))} %); {fmt_dur(w.get('migration_idle_ns'))} of migration time ran with "
            "no kernel (idle, under the `copy` idle cause).")
    lines = heading(TITLE, note)
    devs = [r for r in UNIFIED_MEMORY.rows(ctx.report) if r.get("window") == "steady"]
    if devs:
        lines += md_table(UNIFIED_MEMORY.cols, devs) + [""]
    lines += _lines(w, full, same)
    lines += [f"- {md_rich(n, line_start=False)}" for n in (um.get("notes") or [])]
    lines += ["", f"All rows (both windows) in `tables/{UNIFIED_MEMORY.csv}` and "
                 f"`tables/{UNIFIED_MEMORY_BREAKDOWN.csv}`."]
    return lines
