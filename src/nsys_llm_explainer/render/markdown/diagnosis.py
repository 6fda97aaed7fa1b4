"""Host and runtime sections: phases & steps, sync, CUDA API, memory, NVTX, CUDA graphs, NCCL."""

from __future__ import annotations

from typing import List

from ..base import Row, available, fmt_bytes, fmt_dur, fmt_int, fmt_pct, num, rows_of
from ..escape import md_code, md_name, md_rich, md_text
from ..specs import CUDA_API, MEMCPY, NCCL_RANKS, NVTX_RANGES, PHASES, STEPS, STEPS_BY_PHASE, SYNC_APIS
from ..table import md_table
from .ctx import Ctx, Lines, Omitted, Result, heading
from .step_sync import step_sync_lines

#: rows of the short tables (CUDA API, NVTX) whatever ``--top`` says; all rows are in the CSV files
SHORT = 6


def _steps(ctx: Ctx) -> Lines:
    st = ctx.sec("steps")
    s = st.get("summary") if isinstance(st.get("summary"), dict) else {}
    if st.get("method") == "nvtx":
        how = "NVTX range " + ", ".join(md_name(n) for n in (st.get("step_ranges") or []))
    else:
        how = f"marker kernels matching {md_code(st.get('marker_regex'))}"
    conf = f"confidence {md_text(st.get('confidence'), line_start=False)}"
    if st.get("confidence_reason"):
        conf += f": {md_rich(st['confidence_reason'])}"
    lines = [f"**{fmt_int(st.get('step_count'))} steps** from {how} ({conf}).  ",
             f"Step time p50 {fmt_dur(s.get('p50_ns'))}, p90 {fmt_dur(s.get('p90_ns'))}, "
             f"p99 {fmt_dur(s.get('p99_ns'))}, max {fmt_dur(s.get('max_ns'))}.", ""]
    if rows_of(st, "by_phase"):
        lines += md_table(STEPS_BY_PHASE.cols, rows_of(st, "by_phase")) + [""]
    slow = rows_of(st, "outliers")[:3]
    if slow:
        lines.append("Slowest steps against their phase median:")
        lines += [f"- step {md_text(r.get('index'), line_start=False)} ({md_text(r.get('phase'), line_start=False)}"
                  f", device {md_text(r.get('device'), line_start=False)}) at {ctx.at(r.get('start_ns'))}: "
                  f"{fmt_dur(r.get('wall_ns'))}; {md_rich(r.get('what_differed'), line_start=False)}" for r in slow]
        lines.append("")
    lines.append(f"Every step in `tables/{STEPS.csv}`.")
    return lines


def sec_steps(ctx: Ctx) -> Result:
    st, ph = ctx.sec("steps"), ctx.sec("phases")
    phases = [r for r in rows_of(ph, "phases") if r.get("range_count") or r.get("kernel_count")]
    if not available(st) and not (available(ph) and phases):
        reasons = "; ".join(str(x.get("reason")) for x in (st, ph) if x.get("reason"))
        return Omitted("Phases and steps", reasons or "no steps or phases")
    lines = heading("Phases and steps")
    if available(st):
        lines += _steps(ctx) + [""]
    if available(ph) and phases:
        lines += [f"Phases from NVTX range names (map: {md_text(ph.get('source'), line_start=False)}); "
                  "kernel time is whole capture.", ""] + md_table(PHASES.cols, phases) + [""]
    return lines[:-1]


def sec_sync(ctx: Ctx) -> Result:
    sy = ctx.sec("sync")
    rows = rows_of(sy, "sync_apis")
    if not available(sy) or not rows:
        return Omitted("CPU↔GPU synchronization", str(sy.get("reason") or "no host-blocking synchronize calls"))
    note = (f"{fmt_int(sy.get('call_count'))} host-blocking calls, {fmt_dur(sy.get('total_ns'))} in total "
            f"(whole capture, all threads). Per process in `tables/sync_by_pid.csv`.")
    lines = heading("CPU↔GPU synchronization", note) + md_table(SYNC_APIS.cols, rows[:SHORT])
    nb = rows_of(sy, "nonblocking_apis")
    if nb:
        lines += ["", "Non-blocking (not counted as sync): " + ", ".join(
            f"{md_name(r.get('name'))} ×{fmt_int(r.get('count'))}" for r in nb[:SHORT]) + "."]
    return lines + step_sync_lines(ctx)


def sec_cuda_api(ctx: Ctx) -> Result:
    ca = ctx.sec("cuda_api")
    rows = rows_of(ca, "apis")
    if not available(ca) or not rows:
        return Omitted("CUDA API", str(ca.get("reason") or "no CUDA API calls"))
    shown = rows[:SHORT]
    note = (f"{fmt_int(ca.get('call_count'))} calls, {fmt_dur(ca.get('total_ns'))} (whole capture). "
            + ctx.capped(len(shown), len(rows), CUDA_API.csv))
    return heading("CUDA API", note) + md_table(CUDA_API.cols, shown)


def _memory_lines(m: Row) -> List[str]:
    out: List[str] = []
    pg = m.get("pageable") if isinstance(m.get("pageable"), dict) else {}
    if num(pg.get("count")):
        out.append(f"- Pageable host memory: {fmt_int(pg.get('count'))} copies, {fmt_bytes(pg.get('bytes'))}, "
                   f"{fmt_dur(pg.get('total_ns'))} (staged through a bounce buffer; pin it to overlap).")
    sc = m.get("sync_copies") if isinstance(m.get("sync_copies"), dict) else {}
    if num(sc.get("calls")):
        out.append(f"- Synchronous copies: {fmt_int(sc.get('calls'))} calls blocked the host "
                   f"{fmt_dur(sc.get('host_blocked_ns'))}.")
    for key, label in (("alloc", "Allocations"), ("free", "Frees")):
        a = m.get(key) if isinstance(m.get(key), dict) else {}
        if num(a.get("count")):
            inside = f", {fmt_int(a['in_steps'])} inside steps" if num(a.get("in_steps")) is not None else ""
            out.append(f"- {label}: {fmt_int(a.get('count'))} calls, {fmt_dur(a.get('total_ns'))}{inside}.")
    ps = m.get("per_step") if isinstance(m.get("per_step"), dict) else {}
    if num(ps.get("step_count")):
        out.append(f"- Copies per step (median): {fmt_int(ps.get('copies_per_step_median'))}, "
                   f"{fmt_bytes(ps.get('bytes_per_step_median'))}.")
    return out


def sec_memory(ctx: Ctx) -> Result:
    mc, mem = ctx.sec("memcpy"), ctx.sec("memory")
    rows = MEMCPY.rows(ctx.report)
    facts = _memory_lines(mem) if available(mem) else []
    if not rows and not facts:
        return Omitted("Memory copies", str(mc.get("reason") or mem.get("reason") or "no copies"))
    note = (f"{fmt_bytes(mc.get('total_bytes'))} copied in {fmt_dur(mc.get('total_ns'))} of copy time "
            "(whole capture)." if rows_of(mc, "by_kind") else "Whole capture.")
    lines = heading("Memory copies", note)
    if rows:
        lines += md_table(MEMCPY.cols, rows) + ([""] if facts else [])
    return lines + facts


def sec_nvtx(ctx: Ctx) -> Result:
    nv = ctx.sec("nvtx")
    rows = rows_of(nv, "ranges")
    if not available(nv) or not rows:
        return Omitted("NVTX ranges", str(nv.get("reason") or "no NVTX ranges"))
    shown = rows[:SHORT]
    att = nv.get("attribution") if isinstance(nv.get("attribution"), dict) else {}
    cover = ""
    if att.get("available") and num(att.get("coverage")) is not None:
        cover = f" NVTX ranges enclose the launches of {fmt_pct(100 * att['coverage'])} % of kernel time."
    note = (f"{fmt_int(nv.get('range_count'))} ranges (whole capture); self = time with no child range."
            f"{cover} " + ctx.capped(len(shown), len(rows), NVTX_RANGES.csv))
    return heading("NVTX ranges", note) + md_table(NVTX_RANGES.cols, shown)


def sec_graphs(ctx: Ctx) -> Result:
    g = ctx.sec("graphs")
    gone = ctx.unavailable("graphs", "CUDA graphs")
    if gone:
        return gone
    kpl = g.get("kernels_per_launch") if isinstance(g.get("kernels_per_launch"), dict) else {}
    lines = heading("CUDA graphs")
    lines.append(f"Trace mode {md_code(g.get('trace_mode'))}: {fmt_int(g.get('graph_launch_count'))} graph launches "
                 f"({fmt_dur(g.get('graph_launch_host_ns'))} of host launch time); "
                 f"{fmt_int(g.get('graph_kernel_count'))} kernels ran inside graphs, "
                 f"{fmt_pct(g.get('graph_kernel_pct'))} % of kernel time"
                 + (f"; {fmt_int(kpl.get('p50'))} kernels per launch (median)." if kpl else "."))
    if g.get("warning"):
        lines += ["", f"> **Warning:** {md_rich(g['warning'])}"]
    return lines


def sec_nccl(ctx: Ctx) -> Result:
    nc = ctx.sec("nccl")
    gone = ctx.unavailable("nccl", "NCCL")
    if gone:
        return gone
    per = "; ".join(f"device {md_text(r.get('device_id'), line_start=False)} {fmt_dur(r.get('total_ns'))} "
                    f"({fmt_pct(r.get('pct_of_kernel_ns'))} % of its kernel time)" for r in rows_of(nc, "per_device"))
    lines = heading("NCCL", f"{fmt_int(nc.get('nccl_kernel_count'))} NCCL kernels, {fmt_dur(nc.get('nccl_total_ns'))} "
                            f"(whole capture): {per}.")
    if rows_of(nc, "ranks"):
        lines += md_table(NCCL_RANKS.cols, rows_of(nc, "ranks")) + [""]
    s = nc.get("straggler") if isinstance(nc.get("straggler"), dict) else None
    if s:
        lines.append(f"**Straggler:** {md_text(s.get('late_rank'), line_start=False)} arrives late; "
                     f"{md_text(s.get('waiting_rank'), line_start=False)} waits {fmt_dur(s.get('wait_ns_total'))} "
                     f"in collectives (confidence {md_text(s.get('confidence'), line_start=False)}).")
    elif nc.get("straggler_reason"):
        lines.append(f"No straggler: {md_rich(nc['straggler_reason'])}")
    return lines if lines[-1] else lines[:-1]
