"""The Unified Memory section (report.json ``unified_memory``; definitions in docs/METRICS.md).

Shown when the trace holds Unified-Memory activity; otherwise listed among the omitted sections with its reason
(one line, e.g. "no Unified Memory activity: …"). In HTML with the breakdown table (per direction, migration cause,
GPU fault access type, CPU-fault function and module). Formatting only: every number is the dict's.
"""

from __future__ import annotations

from collections import abc
from typing import Any, List, Mapping

from ...vocabulary.units import fmt_bytes, fmt_dur, fmt_int, fmt_pct
from ..base import Row, available, rows_of
from ..document import (
    Code,
    Data,
    HtmlOnly,
    Inline,
    Omitted,
    Rich,
    Section,
    SectionResult,
    TablePart,
    bullets,
    inline,
    joined,
    para,
    parts,
)
from ..feature_tables import UNIFIED_MEMORY, UNIFIED_MEMORY_BREAKDOWN, um_breakdown_rows
from .ctx import View

TITLE = "Unified Memory"
TOP = 3


def _part(um: Mapping[str, Any], key: str) -> Row:
    v = um.get(key)
    return v if isinstance(v, abc.Mapping) else {}


def _items(w: Row, full: Row, same: bool) -> List[Inline]:
    out: List[Inline] = []
    dirs = rows_of(w, "by_direction")
    if dirs:
        out.append(inline("By direction: ", joined(
            [inline(Data(r.get("direction")), f" {fmt_int(r.get('count'))} ({fmt_bytes(r.get('bytes'))}, "
                    f"{fmt_dur(r.get('total_ns'))})") for r in dirs], "; "), "."))
    causes = rows_of(w, "by_cause")
    if any((r.get("cause_id") or 0) >= 0 for r in causes):
        out.append(inline("By migration cause: ", joined([inline(Data(r.get("cause")), f" {fmt_int(r.get('count'))}")
                                                          for r in causes], "; "), "."))
    if w.get("gpu_fault_events"):
        out.append(inline(f"GPU page faults: {fmt_int(w.get('gpu_page_faults'))} in "
                          f"{fmt_int(w.get('gpu_fault_events'))} fault groups (", joined(
                              [inline(Data(r.get("access")), f" {fmt_int(r.get('page_faults'))}")
                               for r in rows_of(w, "gpu_faults_by_access")], ", "), ")."))
    if w.get("cpu_fault_count"):
        funcs = joined([inline(Code(r.get("function"), 60), f" {fmt_int(r.get('count'))}")
                        for r in rows_of(w, "cpu_faults_by_function")[:TOP]], ", ")
        mods = joined([inline(Code(r.get("module"), 60), f" {fmt_int(r.get('count'))}")
                       for r in rows_of(w, "cpu_faults_by_module")[:TOP]], ", ")
        out.append(inline(f"CPU page faults: {fmt_int(w.get('cpu_fault_count'))}",
                          ("; functions ", funcs) if funcs else None, ("; modules ", mods) if mods else None, "."))
    if not same and full:
        out.append((f"Whole capture: {fmt_int(full.get('migration_count'))} migrations "
                    f"({fmt_bytes(full.get('migration_bytes'))}), under {fmt_pct(full.get('overlap_pct'))} % of kernel "
                    f"time; {fmt_int(full.get('gpu_page_faults'))} GPU and {fmt_int(full.get('cpu_fault_count'))} CPU "
                    "page faults.",))
    return out


def sec_unified_memory(v: View) -> SectionResult:
    um = v.sec("unified_memory")
    if not available(um):
        return Omitted(TITLE, str(um.get("reason") or "no Unified Memory activity"))
    w, full = _part(um, "steady"), _part(um, "full")
    same = (w.get("start_ns"), w.get("end_ns")) == (full.get("start_ns"), full.get("end_ns"))
    where = "the whole capture" if same else "the steady window"
    note = inline(f"{fmt_int(w.get('migration_count'))} Unified-Memory migrations "
                  f"({fmt_bytes(w.get('migration_bytes'))}, {fmt_dur(w.get('migration_ns'))} of GPU migration "
                  f"time) in {where}. Migrations were in flight during {fmt_dur(w.get('overlap_ns'))} of "
                  f"{fmt_dur(w.get('kernel_busy_ns'))} of kernel time "
                  f"({fmt_pct(w.get('overlap_pct'))} %); {fmt_dur(w.get('migration_idle_ns'))} of migration time ran "
                  "with no kernel (idle, under the ", Code("copy"), " idle cause).")
    devs = [r for r in UNIFIED_MEMORY.rows(v.report) if r.get("window") == "steady"]
    breakdown = [r for r in um_breakdown_rows(v.report) if r.get("window") == "steady"]
    body: List[Any] = [
        para(note), TablePart(UNIFIED_MEMORY.cols, devs, (), "um-devices") if devs else None,
        HtmlOnly((TablePart(UNIFIED_MEMORY_BREAKDOWN.cols, breakdown, (), "um-breakdown",
                            ("Breakdown, ", where, " (count: migrations, fault groups or CPU faults)."),),)
                 if breakdown else ()),
        bullets(_items(w, full, same) + [(Rich(n),) for n in (um.get("notes") or [])]),
        para("All rows (both windows) in ", Code(f"tables/{UNIFIED_MEMORY.csv}"), " and ",
             Code(f"tables/{UNIFIED_MEMORY_BREAKDOWN.csv}"), ".")]
    return Section("unified-memory", TITLE, parts(body), "Unified Memory")
