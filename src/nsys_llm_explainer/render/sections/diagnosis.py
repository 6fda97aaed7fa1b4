"""Host and runtime sections: CPU↔GPU synchronization (with the per-step sync table), the launching thread's waits,
CUDA API, memory copies (with the copy paths), NVTX ranges, CUDA graphs, NCCL."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, List, Optional, Sequence

from ...vocabulary.labels import label_shows_tid
from ...vocabulary.units import fmt_bytes, fmt_count, fmt_dur, fmt_int, fmt_pct
from ..document import (
    Code,
    Data,
    Em,
    HtmlOnly,
    Inline,
    Note,
    Omitted,
    Paragraph,
    Rich,
    Section,
    SectionResult,
    Strong,
    TablePart,
    bullets,
    inline,
    joined,
    para,
    parts,
)
from ..feature_tables import COPY_PATHS, STEP_SYNC, THREAD_WAITS
from ..specs import CUDA_API, MEMCPY, NCCL_RANKS, NVTX_RANGE_GROUPS, NVTX_RANGES, SYNC_APIS
from ..table import field_of
from .ctx import View, capped

if TYPE_CHECKING:
    from ...analyses.memory.traffic import MemoryResult
    from ...analyses.nvtx.ranges import NvtxRangeRow

#: rows of the short tables (sync APIs, per-step sync, CUDA API, NVTX) whatever ``--top`` says; all rows in the CSVs
SHORT = 6
#: rows of the thread-waits table (all rows in the CSV)
WAIT_ROWS = 12
#: copy paths shown (all rows in the CSV): those busy at least MIN_COPY_PCT % of the window, at most COPY_ROWS
COPY_ROWS = 12
MIN_COPY_PCT = 5.0
#: the memory section's copies-per-step line: a copy is counted in the step its CUDA call starts in (not by when it
#: runs on the GPU, as the copy paths' step busy % is)
ISSUED = "Copies issued per step (median; a copy counts in the step its CUDA call starts in)"


def sec_sync(v: View) -> SectionResult:
    sy = v.r.sync
    rows = sy.sync_apis
    if not sy.available or not rows:
        return Omitted("CPU↔GPU synchronization", sy.reason or "no host-blocking synchronize calls")
    calls = "call" if sy.call_count == 1 else "calls"
    note = para(f"{fmt_int(sy.call_count)} host-blocking {calls}, {fmt_dur(sy.total_ns)} in total "
                "(whole capture, all threads). Per process in ", Code("tables/sync_by_pid.csv"), ".")
    body: List[Any] = [note, TablePart(SYNC_APIS.cols, rows[:SHORT], (), "sync-apis")]
    nb = sy.nonblocking_apis
    if nb:
        body.append(para("Non-blocking (not counted as sync): ", joined(
            [inline(Code(field_of(r, "name"), 80), f" ×{fmt_int(field_of(r, 'count'))}") for r in nb[:SHORT]],
            ", "), "."))
    return Section("sync", "CPU↔GPU synchronization", parts(body, step_sync_parts(v)), "Sync")


def step_sync_parts(v: View) -> List[Any]:
    """Per-step synchronization (``step_sync``; analyses/steps/sync.py), the last part of the sync section: the note
    and table (empty when no thread has a sync point); in HTML the exposed host time by cause of the first holding
    series."""
    ss = v.r.step_sync
    rows = ss.series
    if not ss.available or not rows:
        return []
    note = inline(Strong(("Per-step synchronization",)), ", per launching thread and device: blocking calls that "
                  "waited until the GPU had finished the thread's work (the most frequent API marks the steps), and "
                  "the GPU idle while the thread then worked on the host before its next launch; ",
                  Em(("overlappable",)), ": the part that doing that work during the next step would hide. ",
                  capped(min(SHORT, len(rows)), len(rows), STEP_SYNC.csv))
    notes = []
    for r in ss.holding()[:2]:
        causes = r.exposed_by_cause[:4]
        if causes:
            notes.append(para(f"Device {fmt_int(r.device_id)}, tid ", Data(r.tid), ", after ",
                              Code(r.api), ": host time with the GPU idle by cause: ", joined(
                                  [inline(Data(kind), (" ", Code(detail)) if detail else None, f" {fmt_dur(ns)}")
                                   for kind, detail, ns in causes], "; "), "."))
    return [para(note), TablePart(STEP_SYNC.cols, rows[:SHORT], (), "step-sync-series"), HtmlOnly(tuple(notes))]


def sec_waits(v: View) -> SectionResult:
    """Follow the wait (``report.json`` ``waits``): per launching thread that waits in OS calls, its waits and what
    the other threads of its process did meanwhile."""
    ws = v.r.waits
    if not ws.available or not ws.launchers:
        return Omitted("Waits of the launching thread", ws.reason or "no launching thread waits")
    out: List[Any] = []
    for w in ws.launchers[:2]:
        calls = joined([inline(Code(c.name), f" {fmt_dur(c.ns)}") for c in w.calls[:3]], "; ")
        ctx = w.contexts[:1]
        # an unnamed thread (no ThreadNames row) by its tid alone, never an empty name
        tid = (() if label_shows_tid(w.thread, w.tid) else (" (tid ", Data(w.tid), ")")) if w.thread else \
            ("tid ", Data(w.tid))
        shared = w.shared_with()
        out.append(para(Strong(("Waits of a launching thread" if shared else "Waits of the launching thread",)), " ",
                        Code(w.thread) if w.thread else None, *tid, f" ({shared})" if shared else None, ": ",
                        f"{fmt_dur(w.wait_ns)} in OS calls that wait ({w.wait_pct_of_window:.1f} % of the window): ",
                        calls,
                        (inline("; inside NVTX ", Code(ctx[0].range), f" {ctx[0].pct_of_waits:.0f} %") if ctx
                         else None),
                        f". GPU idle charged to these waits: {fmt_dur(w.gpu_idle_ns)}. ",
                        ("What the other threads of its process were in meanwhile (time overlapped with the "
                         "waits):") if w.rows else
                        ("No other thread of its process has an NVTX range, CUDA call or OS call that overlaps "
                         "these waits.")))
    rows = THREAD_WAITS.rows(v.r)
    if rows:    # no empty table under the sentences above
        out += [para(capped(min(WAIT_ROWS, len(rows)), len(rows), THREAD_WAITS.csv)),
                TablePart(THREAD_WAITS.cols, rows[:WAIT_ROWS], (), "thread-waits")]
    return Section("waits", "Waits of the launching thread", tuple(out), "Waits")


def sec_cuda_api(v: View) -> SectionResult:
    ca = v.r.cuda_api
    rows = ca.apis
    if not ca.available or not rows:
        return Omitted("CUDA API", ca.reason or "no CUDA API calls")
    shown = rows[:SHORT]
    note = inline(f"{fmt_count(ca.call_count, 'call')}, {fmt_dur(ca.total_ns)} (whole capture). ",
                  capped(len(shown), len(rows), CUDA_API.csv))
    return Section("cuda-api", "CUDA API", (para(note), TablePart(CUDA_API.cols, shown, (), "cuda-api")))


def _memory_items(m: MemoryResult, sure: bool) -> List[Inline]:
    out: List[Inline] = []
    pg = m.pageable
    if pg is not None and pg.count:
        nb = fmt_bytes(pg.bytes) if pg.bytes is not None else "bytes not recorded by this export"
        out.append((f"Pageable host memory: {fmt_count(pg.count, 'copy', 'copies')}, {nb}, "
                    f"{fmt_dur(pg.total_ns)} (staged by the driver through a pinned bounce buffer).",))
    sc = m.sync_copies
    if sc is not None and sc.calls:
        out.append((f"Synchronous copies: {fmt_count(sc.calls, 'call')} blocked the host "
                    f"{fmt_dur(sc.host_blocked_ns)}.",))
    for a, label in ((m.alloc, "Allocations"), (m.free, "Frees")):
        if a is not None and a.count:
            inside = f", {fmt_int(a.in_steps)} inside steps" if a.in_steps is not None and sure else ""
            out.append((f"{label}: {fmt_count(a.count, 'call')}, {fmt_dur(a.total_ns)}{inside}.",))
    ps = m.per_step if sure else None       # per-step figures over medium / high-confidence steps only
    if ps is not None and ps.step_count and ps.by_pid:      # engines' steps differ in kind: one median each
        out.append((f"{ISSUED}, per process of the steps: " + "; ".join(
            f"pid {r.pid} ({fmt_count(r.step_count, 'step')}): {fmt_int(r.copies_per_step_median)}, "
            f"{fmt_bytes(r.bytes_per_step_median)}" for r in ps.by_pid) + ".",))
    elif ps is not None and ps.step_count:
        out.append((f"{ISSUED}: {fmt_int(ps.copies_per_step_median)}, "
                    f"{fmt_bytes(ps.bytes_per_step_median)}.",))
    return out


def _copied(total_bytes: Optional[int], unrecorded: Optional[int], total_ns: int) -> str:
    """The memory section's first line: bytes copied (those the export records) in the copies' GPU time."""
    if total_bytes is None:
        return f"Bytes not recorded by this export; {fmt_dur(total_ns)} of copy time (whole capture)."
    return (f"{fmt_bytes(total_bytes)} copied in {fmt_dur(total_ns)} of copy time (whole capture)"
            + (f"; the bytes of {fmt_count(unrecorded, 'copy', 'copies')} not recorded by this export."
               if unrecorded else "."))


def sec_memory(v: View) -> SectionResult:
    mc, mem = v.r.memcpy, v.r.memory
    rows = MEMCPY.rows(v.r)
    facts = _memory_items(mem, v.r.steps.sure) if mem.available else []
    if not rows and not facts:
        return Omitted("Memory copies", mc.reason or mem.reason or "no copies")
    note = (_copied(mc.total_bytes, mc.bytes_unrecorded, mc.total_ns) if mc.by_kind else "Whole capture.")
    # the facts are the analysis window's (traffic.py reads the clipped model), the table the whole capture's: a
    # trimmed window says so (trace 10: 1,258 pageable copies in the table, "1 copy, 112 B" in the window)
    scope = (para(Strong(("Analysis window",)), " (the table above is the whole capture):" if rows else ":")
             if facts and not v.r.window.is_full else None)
    return Section("memory", "Memory copies", parts(para(note), TablePart(MEMCPY.cols, rows, (), "memcpy") if rows
                                                    else None, scope, bullets(facts), *copy_path_parts(v)))


def copy_path_parts(v: View) -> List[Any]:
    """Copy paths (``copy_engines``; analyses/memory/copy_engines.py), the last part of the memory section: per
    device and copy direction, how busy the path is in the analysis window, the bytes and rate, and how much runs
    under kernels (empty when no path is busy ``MIN_COPY_PCT`` % of the window)."""
    ce = v.r.copy_engines
    every = ce.paths
    rows = [r for r in every if r.busy_pct >= MIN_COPY_PCT]
    if not ce.available or not rows:
        return []
    note = inline(Strong(("Copy paths",)), " (analysis window), per device and direction: ", Em(("busy",)),
                  " = the union of the direction's copies (concurrent copies count once); bytes prorated to the "
                  "window; GB/s = bytes / busy; ", Em(("under kernels",)), " = the part of busy with a kernel "
                  "running; ", Em(("median step busy %",)), " = the median over the steps of the part of a step's "
                  "time the path is busy, whichever step issued the copies"
                  f"{' (steps found with low confidence)' if v.r.steps.available and not v.r.steps.sure else ''}"
                  ". Paths busy at least "
                  f"{MIN_COPY_PCT:.0f} % of the window; ",
                  capped(min(COPY_ROWS, len(rows)), len(every), COPY_PATHS.csv))
    return [para(note), TablePart(COPY_PATHS.cols, rows[:COPY_ROWS], (), "copy-paths")]


def sec_nvtx(v: View) -> SectionResult:
    nv = v.r.nvtx
    rows = nv.ranges
    if not nv.available or not rows:
        return Omitted("NVTX ranges", nv.reason or "no NVTX ranges")
    shown = rows[:SHORT]
    att = v.r.attribution
    cover = ""
    if att.available and att.coverage is not None:
        cover = f" NVTX ranges enclose the launches of {fmt_pct(100 * att.coverage)} % of kernel time." \
            if not att.startend_kernel_ns or not att.total_kernel_ns else (
                f" NVTX push/pop ranges enclose the launches of {fmt_pct(100 * att.coverage)} % of kernel time, "
                f"start/end ranges (same thread) {fmt_pct(100 * att.startend_kernel_ns / att.total_kernel_ns)} %.")
    groups = nv.groups
    if groups:      # per-op ranges seen once each (`aten::mm, seq = 1234`): one row per op, not per range
        gshown = groups[:SHORT]
        eg = next(g for g in groups if g.name_count > 1)     # the largest group of several names
        note = inline(f"{fmt_count(nv.range_count, 'range')} (whole capture): {fmt_count(len(rows), 'row')} by name "
                      f"and style, {fmt_int(len(groups))} once the numbers in the names are read as N (",
                      Code(eg.name), f" holds {fmt_int(eg.name_count)} names); self = time with no child range."
                      f"{cover} ", capped(len(gshown), len(groups), NVTX_RANGE_GROUPS.csv),
                      " Every name on its own (the ranges as ", Code("nsys stats"), " sums them): ",
                      Code(f"tables/{NVTX_RANGES.csv}"), ".")
        return Section("nvtx", "NVTX ranges", parts(para(note), TablePart(NVTX_RANGE_GROUPS.cols, gshown, (),
                                                                          "nvtx-ranges"), _nested_note(gshown)))
    note = inline(f"{fmt_count(nv.range_count, 'range')} (whole capture); self = time with no child range."
                  f"{cover} ", capped(len(shown), len(rows), NVTX_RANGES.csv))
    return Section("nvtx", "NVTX ranges", parts(para(note), TablePart(NVTX_RANGES.cols, shown, (), "nvtx-ranges"),
                                                _nested_note(shown)))


def _nested_note(rows: Sequence[NvtxRangeRow]) -> Optional[Paragraph]:
    """Under the NVTX table: when a shown row has ranges nested in a range of the same name (``outer_ns``), that its
    total counts the nested time once per level, and each such row's total without them."""
    nested = [r for r in rows if r.outer_ns is not None]
    if not nested:
        return None
    return para("Ranges nested inside a range of the same name on their thread (a recursion, or pushes never popped) "
                "are counted once per level in the total (as ", Code("nsys stats"), " sums them): such a total is not "
                "time spent. Without them: ", joined([inline(Code(r.name), f" {fmt_dur(r.outer_ns)}")
                                                      for r in nested], "; "), " (", Code("outer_ms"), " in the CSV).")


def sec_graphs(v: View) -> SectionResult:
    g = v.r.graphs
    if not g.available:
        return Omitted("CUDA graphs", g.reason or "not in this report")
    kpl = g.kernels_per_launch
    gt = g.graph_trace
    # graph-level tracing: the graphs' kernels ran but were not recorded; "0 kernels ran inside graphs" is false
    inside = (("the kernels inside the graphs were not recorded (graph-level tracing)"
               + (f"; {fmt_count(gt.count, 'whole-graph execution')} took {fmt_dur(gt.total_ns)} of GPU time"
                  if gt is not None else "") + ".") if g.graph_level_hidden else
              f"{fmt_count(g.graph_kernel_count, 'kernel')} ran inside graphs, {fmt_pct(g.graph_kernel_pct)} % of "
              "kernel time" + (f"; {fmt_count(kpl.p50, 'kernel')} per launch (median)." if kpl is not None else "."))
    text = inline("Trace mode ", Code(g.trace_mode), f": {fmt_int(g.graph_launch_count)} graph launches "
                  f"({fmt_dur(g.graph_launch_host_ns)} of host launch time); " + inside)
    warn = Note((Strong(("Warning:",)), " ", Rich(g.warning, lead=True))) if g.warning else None
    return Section("graphs", "CUDA graphs", parts(para(text), warn))


def sec_nccl(v: View) -> SectionResult:
    nc = v.r.nccl
    if not nc.available:
        return Omitted("NCCL", nc.reason or "not in this report")
    per = joined([inline("device ", Data(field_of(r, "device_id")), f" {fmt_dur(field_of(r, 'total_ns'))} "
                         f"({fmt_pct(field_of(r, 'pct_of_kernel_ns'))} % of its kernel time)")
                  for r in nc.per_device], "; ")
    how = ("" if nc.matching is None else f" Collectives matched across ranks {nc.how_matched()}: "
           f"{fmt_int(nc.matched_collectives)} matched, {fmt_int(nc.unmatched_kernels)} NCCL kernels outside them.")
    if nc.p2p_left_out:   # a send/recv among > 2 ranks has one peer: the others' starts are not what it waits for
        how += (f" The {fmt_int(nc.p2p_left_out)} point-to-point (send / recv) ones among {len(nc.ranks)} ranks are "
                "left out of the arrival figures (mean to waits caused) and the straggler verdict: each exchanges "
                "with its own peers (a ring's neighbours, a pipeline pair, or every rank in an all-to-all), which "
                "kernel names do not tell apart.")
    body: List[Any] = [para(f"{fmt_int(nc.nccl_kernel_count)} NCCL kernels, {fmt_dur(nc.nccl_total_ns)} "
                            "(whole capture): ", per, "." + how)]
    if nc.ranks:
        body.append(TablePart(NCCL_RANKS.cols, nc.ranks, (), "nccl-ranks"))
    s = nc.straggler
    if s is not None:
        others = len(nc.ranks) - 1   # the waiting its late arrivals caused, on the other rank(s)
        who = (Data(s.waiting_rank),) if others == 1 else (f"the other {others} ranks",)
        verb = "waits" if others == 1 else "wait"
        total = "" if others == 1 else " in all"
        most = () if others == 1 else ("; the most: ", Data(s.waiting_rank))
        body.append(para(Strong(("Straggler:",)), " ", Data(s.late_rank), " arrives late; ", *who,
                         f" {verb} {fmt_dur(s.wait_ns_total)}{total} for it in collectives "
                         f"({100 * s.wait_caused_share:.0f} % of all the waiting", *most, "; confidence ",
                         Data(s.confidence), ")."))
    elif nc.straggler_reason:
        body.append(para("No straggler: ", Rich(nc.straggler_reason, lead=True)))
    return Section("nccl", "NCCL", parts(body))
