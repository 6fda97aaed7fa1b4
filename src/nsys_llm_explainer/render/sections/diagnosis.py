"""Host and runtime sections: CPU↔GPU synchronization (with the per-step sync table), CUDA API, memory copies,
NVTX ranges, CUDA graphs, NCCL."""

from __future__ import annotations

from typing import Any, List

from ...vocabulary.units import fmt_bytes, fmt_dur, fmt_int, fmt_pct, num
from ..base import Row, available, rows_of, section
from ..document import (
    Code,
    Data,
    Inline,
    Note,
    Omitted,
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
from ..specs import CUDA_API, MEMCPY, NCCL_RANKS, NVTX_RANGES, SYNC_APIS
from .copy_engines import copy_path_parts
from .ctx import View, capped
from .step_sync import step_sync_parts, waits_parts

#: rows of the short tables (CUDA API, NVTX) whatever ``--top`` says; all rows are in the CSV files
SHORT = 6


def sec_sync(v: View) -> SectionResult:
    sy = v.sec("sync")
    rows = rows_of(sy, "sync_apis")
    if not available(sy) or not rows:
        return Omitted("CPU↔GPU synchronization", str(sy.get("reason") or "no host-blocking synchronize calls"))
    note = para(f"{fmt_int(sy.get('call_count'))} host-blocking calls, {fmt_dur(sy.get('total_ns'))} in total "
                "(whole capture, all threads). Per process in ", Code("tables/sync_by_pid.csv"), ".")
    body: List[Any] = [note, TablePart(SYNC_APIS.cols, rows[:SHORT], (), "sync-apis")]
    nb = rows_of(sy, "nonblocking_apis")
    if nb:
        body.append(para("Non-blocking (not counted as sync): ", joined(
            [inline(Code(r.get("name"), 80), f" ×{fmt_int(r.get('count'))}") for r in nb[:SHORT]], ", "), "."))
    return Section("sync", "CPU↔GPU synchronization", parts(body, step_sync_parts(v)), "Sync")


def sec_waits(v: View) -> SectionResult:
    """Follow the wait (``report.json`` ``waits``)."""
    body = waits_parts(v)
    if not body:
        ws = v.sec("waits")
        return Omitted("Waits of the launching thread", str(ws.get("reason") or "no launching thread waits"))
    return Section("waits", "Waits of the launching thread", tuple(body), "Waits")


def sec_cuda_api(v: View) -> SectionResult:
    ca = v.sec("cuda_api")
    rows = rows_of(ca, "apis")
    if not available(ca) or not rows:
        return Omitted("CUDA API", str(ca.get("reason") or "no CUDA API calls"))
    shown = rows[:SHORT]
    note = inline(f"{fmt_int(ca.get('call_count'))} calls, {fmt_dur(ca.get('total_ns'))} (whole capture). ",
                  capped(len(shown), len(rows), CUDA_API.csv))
    return Section("cuda-api", "CUDA API", (para(note), TablePart(CUDA_API.cols, shown, (), "cuda-api")))


def _memory_items(m: Row) -> List[Inline]:
    out: List[Inline] = []
    pg = section(m, "pageable")
    if num(pg.get("count")):
        out.append((f"Pageable host memory: {fmt_int(pg.get('count'))} copies, {fmt_bytes(pg.get('bytes'))}, "
                    f"{fmt_dur(pg.get('total_ns'))} (staged through a bounce buffer; pin it to overlap).",))
    sc = section(m, "sync_copies")
    if num(sc.get("calls")):
        out.append((f"Synchronous copies: {fmt_int(sc.get('calls'))} calls blocked the host "
                    f"{fmt_dur(sc.get('host_blocked_ns'))}.",))
    for key, label in (("alloc", "Allocations"), ("free", "Frees")):
        a = section(m, key)
        if num(a.get("count")):
            inside = f", {fmt_int(a['in_steps'])} inside steps" if num(a.get("in_steps")) is not None else ""
            out.append((f"{label}: {fmt_int(a.get('count'))} calls, {fmt_dur(a.get('total_ns'))}{inside}.",))
    ps = section(m, "per_step")
    if num(ps.get("step_count")):
        out.append((f"Copies per step (median): {fmt_int(ps.get('copies_per_step_median'))}, "
                    f"{fmt_bytes(ps.get('bytes_per_step_median'))}.",))
    return out


def sec_memory(v: View) -> SectionResult:
    mc, mem = v.sec("memcpy"), v.sec("memory")
    rows = MEMCPY.rows(v.report)
    facts = _memory_items(mem) if available(mem) else []
    if not rows and not facts:
        return Omitted("Memory copies", str(mc.get("reason") or mem.get("reason") or "no copies"))
    note = (f"{fmt_bytes(mc.get('total_bytes'))} copied in {fmt_dur(mc.get('total_ns'))} of copy time "
            "(whole capture)." if rows_of(mc, "by_kind") else "Whole capture.")
    return Section("memory", "Memory copies", parts(para(note), TablePart(MEMCPY.cols, rows, (), "memcpy") if rows
                                                    else None, bullets(facts), *copy_path_parts(v)))


def sec_nvtx(v: View) -> SectionResult:
    nv = v.sec("nvtx")
    rows = rows_of(nv, "ranges")
    if not available(nv) or not rows:
        return Omitted("NVTX ranges", str(nv.get("reason") or "no NVTX ranges"))
    shown = rows[:SHORT]
    att = section(nv, "attribution")
    cover = ""
    if att.get("available") and num(att.get("coverage")) is not None:
        cover = f" NVTX ranges enclose the launches of {fmt_pct(100 * att['coverage'])} % of kernel time."
    note = inline(f"{fmt_int(nv.get('range_count'))} ranges (whole capture); self = time with no child range."
                  f"{cover} ", capped(len(shown), len(rows), NVTX_RANGES.csv))
    return Section("nvtx", "NVTX ranges", (para(note), TablePart(NVTX_RANGES.cols, shown, (), "nvtx-ranges")))


def sec_graphs(v: View) -> SectionResult:
    g = v.sec("graphs")
    gone = v.unavailable("graphs", "CUDA graphs")
    if gone:
        return gone
    kpl = section(g, "kernels_per_launch")
    text = inline("Trace mode ", Code(g.get("trace_mode")), f": {fmt_int(g.get('graph_launch_count'))} graph launches "
                  f"({fmt_dur(g.get('graph_launch_host_ns'))} of host launch time); "
                  f"{fmt_int(g.get('graph_kernel_count'))} kernels ran inside graphs, "
                  f"{fmt_pct(g.get('graph_kernel_pct'))} % of kernel time"
                  + (f"; {fmt_int(kpl.get('p50'))} kernels per launch (median)." if kpl else "."))
    warn = Note((Strong(("Warning:",)), " ", Rich(g["warning"], lead=True))) if g.get("warning") else None
    return Section("graphs", "CUDA graphs", parts(para(text), warn))


def sec_nccl(v: View) -> SectionResult:
    nc = v.sec("nccl")
    gone = v.unavailable("nccl", "NCCL")
    if gone:
        return gone
    per = joined([inline("device ", Data(r.get("device_id")), f" {fmt_dur(r.get('total_ns'))} "
                         f"({fmt_pct(r.get('pct_of_kernel_ns'))} % of its kernel time)")
                  for r in rows_of(nc, "per_device")], "; ")
    body: List[Any] = [para(f"{fmt_int(nc.get('nccl_kernel_count'))} NCCL kernels, {fmt_dur(nc.get('nccl_total_ns'))} "
                            "(whole capture): ", per, ".")]
    if rows_of(nc, "ranks"):
        body.append(TablePart(NCCL_RANKS.cols, rows_of(nc, "ranks"), (), "nccl-ranks"))
    s = section(nc, "straggler") or None
    if s:
        body.append(para(Strong(("Straggler:",)), " ", Data(s.get("late_rank")), " arrives late; ",
                         Data(s.get("waiting_rank")), f" waits {fmt_dur(s.get('wait_ns_total'))} in collectives "
                         "(confidence ", Data(s.get("confidence")), ")."))
    elif nc.get("straggler_reason"):
        body.append(para("No straggler: ", Rich(nc["straggler_reason"], lead=True)))
    return Section("nccl", "NCCL", parts(body))
