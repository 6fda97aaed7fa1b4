"""The Unified Memory section (``unified_memory``; definitions: docs/METRICS.md), omitted with its reason when the
trace has no Unified-Memory activity; in HTML with the breakdown table."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, List, Optional

from ...vocabulary.units import fmt_bytes, fmt_count, fmt_dur, fmt_int, fmt_pct
from ...vocabulary.windows import window_name
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

if TYPE_CHECKING:
    from ...analyses.memory.unified import UmWindow

TITLE = "Unified Memory"
TOP = 3


def _items(w: UmWindow, full: Optional[UmWindow], same: bool) -> List[Inline]:
    out: List[Inline] = []
    if w.by_direction:
        out.append(inline("By direction: ", joined(
            [inline(Data(r.label), f" {fmt_int(r.count)} ({fmt_bytes(r.bytes)}, {fmt_dur(r.total_ns)})")
             for r in w.by_direction], "; "), "."))
    if any(r.key >= 0 for r in w.by_cause):
        out.append(inline("By migration cause: ", joined([inline(Data(r.label), f" {fmt_int(r.count)}")
                                                          for r in w.by_cause], "; "), "."))
    if w.gpu_fault_events:
        out.append(inline(f"GPU page faults: {fmt_int(w.gpu_page_faults)} in "
                          f"{fmt_int(w.gpu_fault_events)} fault groups (", joined(
                              [inline(Data(r.access), f" {fmt_int(r.page_faults)}")
                               for r in w.gpu_faults_by_access], ", "), ")."))
    if w.cpu_fault_count:
        funcs = joined([inline(Code(r.name, 60), f" {fmt_int(r.count)}") for r in w.cpu_faults_by_function[:TOP]],
                       ", ")
        mods = joined([inline(Code(r.name, 60), f" {fmt_int(r.count)}") for r in w.cpu_faults_by_module[:TOP]], ", ")
        out.append(inline(f"CPU page faults: {fmt_int(w.cpu_fault_count)}",
                          ("; functions ", funcs) if funcs else None, ("; modules ", mods) if mods else None, "."))
    if not same and full is not None:
        them = "those other than user prefetches " if full.overlap_of() != "migrations" else ""
        out.append((f"Whole capture: {fmt_count(full.migration_count, 'migration')} "
                    f"({fmt_bytes(full.migration_bytes)}), {them}under {fmt_pct(full.overlap_pct)} % of kernel "
                    f"time; {fmt_int(full.gpu_page_faults)} GPU and {fmt_int(full.cpu_fault_count)} CPU "
                    "page faults.",))
    return out


def sec_unified_memory(v: View) -> SectionResult:
    um = v.r.unified_memory
    w, full = um.steady, um.full
    if not um.available or w is None:
        return Omitted(TITLE, um.reason or "no Unified Memory activity")
    same = full is not None and (w.start_ns, w.end_ns) == (full.start_ns, full.end_ns)
    rw = v.r.window
    where = "the whole capture" if same else window_name(rw.method, rw.details.bins is not None, v.r.window_repeats)
    note = inline(f"{fmt_int(w.migration_count)} Unified-Memory migrations "
                  f"({fmt_bytes(w.migration_bytes)}, {fmt_dur(w.migration_ns)} of GPU migration "
                  f"time) in {where}. {w.overlap_of().capitalize()} were in flight during {fmt_dur(w.overlap_ns)} of "
                  f"{fmt_dur(w.kernel_busy_ns)} of kernel time "
                  f"({fmt_pct(w.overlap_pct)} %); {fmt_dur(w.migration_idle_ns)} of migration time ran "
                  "with no kernel (idle, under the ", Code("copy"), " idle cause).")
    devs = [r for r in UNIFIED_MEMORY.rows(v.r) if r.window == "steady"]
    breakdown = [r for r in um_breakdown_rows(v.r) if r.window == "steady"]
    body: List[Any] = [
        para(note), TablePart(UNIFIED_MEMORY.cols, devs, (), "um-devices") if devs else None,
        HtmlOnly((TablePart(UNIFIED_MEMORY_BREAKDOWN.cols, breakdown, (), "um-breakdown",
                            ("Breakdown, ", where, " (count: migrations, fault groups or CPU faults)."),),)
                 if breakdown else ()),
        bullets(_items(w, full, same) + [(Rich(n),) for n in um.notes]),
        para("All rows (both windows) in ", Code(f"tables/{UNIFIED_MEMORY.csv}"), " and ",
             Code(f"tables/{UNIFIED_MEMORY_BREAKDOWN.csv}"), ".")]
    return Section("unified-memory", TITLE, parts(body), "Unified Memory")
