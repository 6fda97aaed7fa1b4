"""Closing sections: trace & capture info, the omitted sections, and how the numbers are computed."""

from __future__ import annotations

from typing import List, Sequence

from ..base import fmt_bool, fmt_bytes, fmt_int, rows_of
from ..escape import md_code, md_name, md_rich, md_text, shorten
from .ctx import Ctx, Lines, Omitted, Result, heading

ROW_COUNT_LABELS = (("kernels", "kernels"), ("cuda_api", "CUDA API calls"), ("nvtx_ranges", "NVTX ranges"),
                    ("memcpy", "memcpy"), ("memset", "memset"), ("sync", "sync records"),
                    ("graph_trace", "graph-trace rows"))


def sec_trace(ctx: Ctx) -> Result:
    t = ctx.sec("trace")
    if not t:
        return Omitted("Trace and capture", "no trace information")
    cap = t.get("capture") if isinstance(t.get("capture"), dict) else {}
    lines = heading("Trace and capture")
    lines.append(f"- File {md_code(t.get('path'))}; Nsight Systems {md_text(t.get('nsys_version'), line_start=False)}"
                 f", export schema {md_text(t.get('export_schema_version'), line_start=False)}"
                 + (f", captured {md_text(cap['EXPORT_TIME_UTC'], line_start=False)} UTC"
                    if cap.get("EXPORT_TIME_UTC") else "")
                 + f"; capture length {ctx.at(ctx.window.get('full_end_ns'))}.")
    gpus = rows_of(t, "gpus")
    if gpus:
        lines.append("- GPUs: " + "; ".join(
            f"{md_text(g.get('id'), line_start=False)}: {md_text(g.get('name'), line_start=False)}"
            f" ({fmt_int(g.get('smCount'))} SMs, {fmt_bytes(g.get('totalMemory'))})" for g in gpus[:16]) + ".")
    procs = rows_of(t, "processes")
    if procs:
        more = f" (+{len(procs) - 8} more)" if len(procs) > 8 else ""
        lines.append("- Processes: " + "; ".join(
            f"pid {md_text(p.get('pid'), line_start=False)} {md_name(p.get('name'), 40)} "
            f"({fmt_int(p.get('kernels'))} kernels, {fmt_int(p.get('cuda_api_calls'))} CUDA API calls)"
            for p in procs[:8]) + more + ".")
    rc = t.get("row_counts") if isinstance(t.get("row_counts"), dict) else {}
    if rc:
        lines.append("- Rows: " + ", ".join(f"{fmt_int(rc[k])} {label}" for k, label in ROW_COUNT_LABELS
                                              if k in rc) + ".")
    mode = t.get("cuda_graph_trace_mode")
    settings = [f"{md_code(k)}={md_code(v)}" for k, v in cap.items() if k != "EXPORT_TIME_UTC"]
    if settings or mode:
        lines.append("- Capture settings: " + ", ".join(settings + ([f"CUDA graph trace {md_code(mode)}"]
                                                                     if mode else [])) + ".")
    lines += [f"- {md_rich(n)}" for n in (t.get("schema_notes") or []) if n]
    return lines


def omitted_line(omitted: Sequence[Omitted]) -> Lines:
    if not omitted:
        return []
    return ["**Not shown (no data):** " + "; ".join(
        f"{o.title} ({md_rich(shorten(o.reason, 160))})" for o in omitted) + "."]


def how_computed(ctx: Ctx) -> Lines:
    ic = ctx.sec("idle_causes")
    prec = " → ".join(md_code(k) for k in (ic.get("precedence") or []))
    memcpy = ctx.sec("gpu_time").get("include_memcpy")
    items: List[str] = [
        "**Time base:** timestamps are ms from capture start (the first captured activity); durations are in "
        "µs, ms or s. `report.json` and `tables/*.csv` keep absolute integer ns.",
        "**Analysis window:** the whole capture, or the steady state left after trimming warm-up and idle tail "
        "(`window` in report.json); every rate, share and finding uses it unless labelled *whole capture*.",
        "**Busy / idle:** busy = union of kernel intervals on a device inside the window (overlapping kernels "
        f"count once; memcpy/memset counted as busy: {fmt_bool(memcpy)}); idle = window − busy, including "
        "before the first and after the last kernel.",
        "**Idle causes:** each idle ns goes to the first cause that holds"
        + (f" ({prec})" if prec else "")
        + ", judged from the host thread that launched the work after the gap.",
        "**Findings:** emitted only when every check on their *Checked* line holds; time at stake is the GPU "
        "time the finding is about.",
        "**Kernel tables:** per kernel name; % = share of summed kernel time, not of wall time; p50/p90 = "
        "percentiles of single-kernel durations.",
        "**Names** longer than 80 characters are shortened with `…` here; full names are in report.json and "
        "the CSV files.",
    ]
    return heading("How these numbers are computed",
                   "Full definitions: `docs/MODEL.md` (window, busy/idle, idle causes, checks) and "
                   "`docs/METRICS.md` (every other metric).") + [f"- {i}" for i in items]
