"""``report.md``: PR-ready GitHub Markdown from the report dict.

Layout: title block · Warnings · What to do next (findings) · Trace & capture info · Top CUDA kernels ·
Top PIDs · Launch storm · CPU↔GPU synchronization · CUDA API summary · Memcpy / memset · GPU idle per
device · NVTX ranges · NVTX→kernel attribution · NVTX per PID · diagnosis sections (any other top-level key,
in report order; :data:`SECTION_RENDERERS` maps a key to a dedicated renderer, otherwise
:func:`render_generic` is used) · Derivation & assumptions.

Every section starts with a "Derived from" and a "Limitations" line and, when its analysis is not
available, says why (the section's ``reason``).

Numbers shown (all computed from the integer ns in the report dict, nothing is re-derived from the trace):

* times: ms = ns / 10⁶ with 3 decimals, µs = ns / 10³ with 2 decimals (:mod:`render.base` formatters);
  percentages with 2 decimals; counts with thousands separators.
* table rows are capped at ``options.top`` (``--top N``); a capped table says "Showing N of M".
* gap start times are shown relative to the trace start (``trace.start_ns``).
* NVTX attribution coverage is shown as a percentage (report value × 100).

All user-controlled text (kernel/NVTX/process names, paths, reasons) goes through :mod:`render.escape`;
names longer than :data:`escape.MD_NAME_LIMIT` characters are truncated in tables, and the section says so.
"""

from __future__ import annotations

import datetime as _dt
import json
import re
from collections import abc
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from .base import (
    DASH,
    Renderer,
    extra_section_keys,
    fmt_bytes,
    fmt_dur,
    fmt_float,
    fmt_int,
    fmt_ms,
    fmt_pct,
    fmt_us,
    rows_of,
    section,
    table_stem,
)
from .escape import MD_NAME_LIMIT, md_cell, md_code, md_rich, md_text, truncate

Row = Mapping[str, Any]
Col = Tuple[str, str]  # (header, "l" | "r")


class Ctx:
    """Per-report rendering context."""

    def __init__(self, report: Mapping[str, Any]) -> None:
        self.report = report
        opts = section(report, "options")
        top = opts.get("top")
        self.top: int = int(top) if isinstance(top, int) and not isinstance(top, bool) and top > 0 else 20
        tr = section(report, "trace")
        self.trace_start: Optional[int] = tr.get("start_ns") if isinstance(tr.get("start_ns"), int) else None
        self.gpu_names: Dict[Any, str] = {g.get("id"): str(g.get("name") or "") for g in rows_of(tr, "gpus")}
        self.pid_names: Dict[Any, str] = {
            p.get("pid"): str(p.get("name") or "") for p in rows_of(tr, "processes")
        }


class Sec:
    """Lines of one section; tracks whether a table truncated a name."""

    def __init__(self, title: str, ctx: Ctx, level: int = 2) -> None:
        self.ctx = ctx
        self.lines: List[str] = [f"{'#' * level} {title}", ""]
        self.truncated = False

    # -- text
    def derived(self, text: str) -> None:
        self.lines += [f"*Derived from:* {text}", ""]

    def limits(self, text: str) -> None:
        self.lines += [f"*Limitations:* {text}", ""]

    def unavailable(self, reason: Any) -> None:
        why = md_rich(reason) if reason else "the analysis reported no reason"
        self.lines += [f"**Not available:** {why}", ""]

    def para(self, text: str) -> None:
        self.lines += [text, ""]

    def sub(self, title: str, level: int = 3) -> None:
        self.lines += [f"{'#' * level} {title}", ""]

    def bullets(self, items: Sequence[str]) -> None:
        if items:
            self.lines += [f"- {t}" for t in items] + [""]

    # -- cells
    def name(self, text: Any) -> str:
        s = "" if text is None else str(text)
        t = truncate(s, MD_NAME_LIMIT)
        if t != s:
            self.truncated = True
        return md_cell(t) if t else DASH

    # -- tables
    def table(
        self,
        cols: Sequence[Col],
        rows: Sequence[Sequence[str]],
        what: str = "rows",
        total: Optional[int] = None,
        csv: Optional[str] = None,
        empty: str = "None.",
    ) -> None:
        """Render ``rows`` (already formatted cells); ``total`` > len(rows) adds the "Showing N of M" note."""
        if not rows:
            self.para(f"*{empty}*")
            return
        head = "| " + " | ".join(h for h, _ in cols) + " |"
        align = "|" + "|".join("---:" if a == "r" else ":---" for _, a in cols) + "|"
        body = ["| " + " | ".join((c if c != "" else DASH) for c in r) + " |" for r in rows]
        self.lines += [head, align] + body + [""]
        if total is not None and total > len(rows):
            where = f"; all rows in `tables/{csv}`" if csv else "; all rows in `report.json`"
            self.para(f"*Showing {len(rows)} of {fmt_int(total)} {what} (`--top {self.ctx.top}`){where}.*")

    def capped(
        self,
        rows: Sequence[Row],
        cols: Sequence[Col],
        fmt: Callable[[Row], Sequence[str]],
        what: str = "rows",
        csv: Optional[str] = None,
        empty: str = "None.",
    ) -> None:
        shown = list(rows[: self.ctx.top])
        self.table(cols, [fmt(r) for r in shown], what=what, total=len(rows), csv=csv, empty=empty)

    def done(self) -> List[str]:
        if self.truncated:
            self.para(
                f"*Names longer than {MD_NAME_LIMIT} characters are truncated with “…” in this "
                "section's tables; `report.json` and `tables/*.csv` keep full names.*"
            )
        return self.lines


def _yn(v: Any) -> str:
    return DASH if v is None else ("yes" if v else "no")


def _avail(sec: Row) -> bool:
    return bool(sec.get("available", True))


def _dev_label(ctx: Ctx, dev: Any) -> str:
    name = ctx.gpu_names.get(dev)
    return f"{dev} ({md_cell(name)})" if name else str(dev)


def _pid_label(ctx: Ctx, pid: Any) -> str:
    name = ctx.pid_names.get(pid)
    return f"{pid} ({md_cell(truncate(name, 60))})" if name else str(pid)


# ------------------------------------------------------------------------------------------- sections
def sec_title(ctx: Ctx) -> List[str]:
    rep = ctx.report
    tr = section(rep, "trace")
    gen = rep.get("generated_at") or _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    opts = section(rep, "options")
    opt_items = [f"`--top {ctx.top}`"]
    for k, flag in (
        ("phase_map", "--phase-map"),
        ("categories_file", "--categories"),
        ("step_marker", "--step-marker"),
        ("window_nvtx", "--window-nvtx"),
    ):
        if opts.get(k):
            v = opts[k] if isinstance(opts[k], str) else json.dumps(opts[k], default=str)
            opt_items.append(f"`{flag}` {md_code(truncate(v, 120))}")
    if opts.get("window"):
        opt_items.append(f"`--window` {md_code(':'.join(str(x) for x in opts['window']))}")
    if opts.get("include_memcpy_in_busy"):
        opt_items.append("`--include-memcpy-in-busy`")
    if opts.get("nvtx_kernel_map") is False:
        opt_items.append("`--no-nvtx-kernel-map`")
    lines = [
        "# Nsight Systems LLM inference report",
        "",
        f"- **Trace:** {md_code(tr.get('path') or 'unknown')}",
        f"- **Generated:** {md_text(gen)} by nsys-llm-explain {md_text(rep.get('tool_version', '?'), False)} "
        f"(report schema {md_text(rep.get('schema_version', '?'), False)})",
        f"- **Options:** {', '.join(opt_items)}",
        "",
        "Machine-readable companions: `report.json` (every number, full names; JSON Schema via "
        "`nsys-llm-explain schema`) and `tables/*.csv` (all rows, uncapped).",
        "",
    ]
    return lines


def sec_warnings(ctx: Ctx) -> List[str]:
    s = Sec("Warnings", ctx)
    s.derived(
        "checks made while reading the export (missing tables, schema quirks, clock issues) and on the "
        "analysis results (e.g. NVTX coverage below `--nvtx-coverage-warn-threshold`)."
    )
    s.limits(
        "only conditions this tool knows to check; an empty list does not prove the capture is complete."
    )
    w = [x for x in (ctx.report.get("warnings") or [])]
    if w:
        s.bullets([md_rich(x) for x in w])
    else:
        s.para("No warnings.")
    return s.done()


def sec_findings(ctx: Ctx) -> List[str]:
    s = Sec("What to do next", ctx)
    s.derived(
        "rules over the analyses below (`findings` in `report.json`), ranked by time at stake, then severity."
    )
    s.limits(
        "time at stake is the measured time of the pattern a finding points at — an upper bound on what "
        "fixing it can save, not a prediction; thresholds are heuristics."
    )
    findings = rows_of(ctx.report, "findings")
    if not findings:
        s.para("No rule fired: nothing in this trace matched a known inefficiency pattern.")
        return s.done()
    for i, f in enumerate(findings, 1):
        sev = str(f.get("severity") or "info").upper()
        s.sub(f"{i}. [{md_text(sev, False)}] {md_text(f.get('title') or f.get('id') or 'finding', False)}")
        meta = [f"category {md_code(f.get('category') or 'none')}"]
        if f.get("confidence"):
            meta.append(f"confidence {md_text(f['confidence'], False)}")
        if f.get("time_at_stake_ns") is not None:
            meta.append(f"time at stake **{fmt_dur(f['time_at_stake_ns'])}**")
        s.para(" · ".join(meta))
        ev = f.get("evidence") or []
        if isinstance(ev, str):
            ev = [ev]
        rec = f.get("recommendation") or []
        if isinstance(rec, str):
            rec = [rec]
        if ev:
            s.para("Evidence:")
            s.bullets([md_rich(e) for e in ev])
        if rec:
            s.para("Recommendation:")
            s.bullets([md_rich(r) for r in rec])
    return s.done()


def sec_trace(ctx: Ctx) -> List[str]:
    tr = section(ctx.report, "trace")
    s = Sec("Trace & capture info", ctx)
    s.derived(
        f"the export metadata table ({md_code(tr.get('metadata_table') or 'META_DATA_EXPORT')}), "
        "`TARGET_INFO_GPU`, `PROCESSES`/`ThreadNames`, and the activity tables' row counts."
    )
    s.limits(
        "GPUs are those the capture host reported, whether or not they ran kernels; the time span covers "
        "the captured activity rows only (first start → last end), not the whole process lifetime."
    )
    span = tr.get("span_ns")
    items = [
        f"Nsight Systems version: {md_code(tr.get('nsys_version') or 'unknown')}",
        f"Export schema version: {md_code(tr.get('export_schema_version') or 'unknown')}",
        f"Kernel table: {md_code(tr.get('kernel_table') or 'none')}",
        f"Time span: {fmt_ms(span)} ms (start {fmt_int(tr.get('start_ns'))} ns → "
        f"end {fmt_int(tr.get('end_ns'))} ns)",
        "CUDA graph trace mode: "
        + md_text(tr.get("cuda_graph_trace_mode") or "not recorded / no graphs", False),
    ]
    s.bullets(items)
    rc = tr.get("row_counts")
    if isinstance(rc, abc.Mapping) and rc:
        s.para("Rows read per activity kind:")
        s.table([("Activity", "l"), ("Rows", "r")], [[md_cell(k), fmt_int(v)] for k, v in rc.items()])
    gpus = rows_of(tr, "gpus")
    s.sub("GPUs")
    s.table(
        [
            ("Id", "r"),
            ("Name", "l"),
            ("Chip", "l"),
            ("SMs", "r"),
            ("Memory", "r"),
            ("Mem bandwidth", "r"),
            ("Compute cap.", "l"),
            ("Bus", "l"),
        ],
        [
            [
                md_cell(g.get("id")),
                s.name(g.get("name")),
                md_cell(g.get("chipName")),
                fmt_int(g.get("smCount")),
                fmt_bytes(g.get("totalMemory")),
                (
                    f"{fmt_float(g['memoryBandwidth'] / 1e9, 1)} GB/s"
                    if isinstance(g.get("memoryBandwidth"), (int, float))
                    else DASH
                ),
                (
                    f"{g.get('computeMajor')}.{g.get('computeMinor')}"
                    if g.get("computeMajor") is not None
                    else DASH
                ),
                md_cell(g.get("busLocation")),
            ]
            for g in gpus
        ],
        empty="No TARGET_INFO_GPU rows in this export.",
    )
    procs = rows_of(tr, "processes")
    s.sub("Processes")
    s.capped(
        procs,
        [("PID", "r"), ("Name", "l"), ("Kernels", "r"), ("CUDA API calls", "r")],
        lambda p: [
            md_cell(p.get("pid")),
            s.name(p.get("name")),
            fmt_int(p.get("kernels")),
            fmt_int(p.get("cuda_api_calls")),
        ],
        what="processes",
        empty="No processes with CUDA activity.",
    )
    cap = tr.get("capture")
    if isinstance(cap, abc.Mapping) and cap:
        s.sub("Capture / export parameters")
        s.table([("Key", "l"), ("Value", "l")], [[md_cell(k), s.name(v)] for k, v in cap.items()])
    notes = tr.get("schema_notes") or []
    if notes:
        s.sub("Schema notes")
        s.bullets([md_rich(n) for n in notes])
    return s.done()


_KCOLS: List[Col] = [
    ("Kernel", "l"),
    ("Calls", "r"),
    ("Total (ms)", "r"),
    ("Avg (µs)", "r"),
    ("p50 (µs)", "r"),
    ("p90 (µs)", "r"),
    ("Max (µs)", "r"),
    ("% kernel time", "r"),
]


def _krow(s: Sec, r: Row) -> List[str]:
    return [
        s.name(r.get("name")),
        fmt_int(r.get("count")),
        fmt_ms(r.get("total_ns")),
        fmt_us(r.get("avg_ns")),
        fmt_us(r.get("p50_ns")),
        fmt_us(r.get("p90_ns")),
        fmt_us(r.get("max_ns")),
        fmt_pct(r.get("pct")),
    ]


def sec_kernels(ctx: Ctx) -> List[str]:
    ks = section(ctx.report, "kernels_summary")
    s = Sec("Top CUDA kernels", ctx)
    s.derived(
        f"{md_code(section(ctx.report, 'trace').get('kernel_table') or 'CUPTI_ACTIVITY_KIND_KERNEL')} "
        "(start, end, deviceId, demangled name via `StringIds`); duration = end − start."
    )
    s.limits(
        "% is the share of summed kernel time (concurrent kernels are each counted), not of wall time; "
        "kernels are grouped by demangled name regardless of grid/block configuration."
    )
    if not _avail(ks):
        s.unavailable(ks.get("reason"))
        return s.done()
    s.para(
        f"{fmt_int(ks.get('kernel_count'))} kernels, {fmt_ms(ks.get('total_kernel_ns'))} ms of kernel time."
    )
    s.sub("All devices, by kernel name")
    s.capped(rows_of(ks, "by_name"), _KCOLS, lambda r: _krow(s, r), what="kernel names", csv="kernels.csv")
    rows = rows_of(ctx.report, "kernels")
    devices = sorted({r.get("device_id") for r in rows}, key=lambda d: (d is None, d))
    for dev in devices:
        s.sub(f"Device {_dev_label(ctx, dev)}")
        s.capped(
            [r for r in rows if r.get("device_id") == dev],
            _KCOLS,
            lambda r: _krow(s, r),
            what="kernel names",
            csv="kernels.csv",
        )
    return s.done()


def sec_pids(ctx: Ctx) -> List[str]:
    pids = section(ctx.report, "pids")
    ks = section(ctx.report, "kernels_summary")
    s = Sec("Top PIDs by kernel time", ctx)
    s.derived("kernel rows grouped by the process (globalPid) that launched them.")
    s.limits("% is of summed kernel time over all processes; a process's kernels may run on several GPUs.")
    if not _avail(ks):
        s.unavailable(ks.get("reason"))
        return s.done()
    by_pid = rows_of(pids, "by_pid")
    s.capped(
        by_pid,
        [("PID", "l"), ("Kernels", "r"), ("Kernel time (ms)", "r"), ("% kernel time", "r")],
        lambda r: [
            _pid_label(ctx, r.get("pid")),
            fmt_int(r.get("count")),
            fmt_ms(r.get("total_ns")),
            fmt_pct(r.get("pct")),
        ],
        what="PIDs",
        csv="kernels_by_pid.csv",
    )
    kbp = rows_of(pids, "kernels_by_pid")
    cols = [
        ("Kernel", "l"),
        ("Device", "r"),
        ("Calls", "r"),
        ("Total (ms)", "r"),
        ("Avg (µs)", "r"),
        ("p50 (µs)", "r"),
        ("% of PID", "r"),
        ("% kernel time", "r"),
    ]
    for p in by_pid[: ctx.top]:
        pid = p.get("pid")
        s.sub(f"Top kernels of PID {_pid_label(ctx, pid)}")
        s.capped(
            [r for r in kbp if r.get("pid") == pid],
            cols,
            lambda r: [
                s.name(r.get("name")),
                md_cell(r.get("device_id")),
                fmt_int(r.get("count")),
                fmt_ms(r.get("total_ns")),
                fmt_us(r.get("avg_ns")),
                fmt_us(r.get("p50_ns")),
                fmt_pct(r.get("pct_of_pid")),
                fmt_pct(r.get("pct")),
            ],
            what="kernels of this PID",
            csv="kernels_by_pid.csv",
        )
    return s.done()


_LCOLS_TAIL: List[Col] = [
    ("Kernels", "r"),
    ("Window (ms)", "r"),
    ("Launches/s", "r"),
    ("p50 (µs)", "r"),
    ("p90 (µs)", "r"),
    ("p99 (µs)", "r"),
    ("% < 5 µs", "r"),
    ("% < 10 µs", "r"),
    ("% < 20 µs", "r"),
    ("Launch storm", "l"),
]


def _lrow(r: Row) -> List[str]:
    return [
        fmt_int(r.get("launches")),
        fmt_ms(r.get("window_ns")),
        fmt_float(r.get("launches_per_s"), 1),
        fmt_us(r.get("p50_ns")),
        fmt_us(r.get("p90_ns")),
        fmt_us(r.get("p99_ns")),
        fmt_pct(r.get("pct_under_5us")),
        fmt_pct(r.get("pct_under_10us")),
        fmt_pct(r.get("pct_under_20us")),
        ("**yes**" if r.get("launch_storm") else _yn(r.get("launch_storm"))),
    ]


def sec_launch(ctx: Ctx) -> List[str]:
    la = section(ctx.report, "launch")
    s = Sec("Launch storm", ctx)
    s.derived(
        "kernel rows per device and per PID: launches/s = kernels / window (first kernel start → last "
        "kernel end); kernel-duration percentiles."
    )
    s.limits(
        "a device or PID is flagged when (≥ 50 000 launches/s and p50 ≤ 10 µs) or (≥ 100 000 launches/s "
        "and p50 ≤ 20 µs); the flag is never evaluated over all GPUs pooled (the overall row shows –). "
        "The rate is averaged over the whole window, so bursts inside it are diluted."
    )
    if not _avail(la):
        s.unavailable(la.get("reason"))
        return s.done()
    ov = la.get("overall")
    if isinstance(ov, abc.Mapping) and ov:
        s.sub("Overall (all devices pooled)")
        s.table([("Scope", "l")] + _LCOLS_TAIL, [["all"] + _lrow(ov)])
    s.sub("Per device")
    s.capped(
        rows_of(la, "per_device"),
        [("Device", "l")] + _LCOLS_TAIL,
        lambda r: [_dev_label(ctx, r.get("device_id"))] + _lrow(r),
        what="devices",
        csv="launch.csv",
    )
    s.sub("Per PID")
    s.capped(
        rows_of(la, "per_pid"),
        [("PID", "l")] + _LCOLS_TAIL,
        lambda r: [_pid_label(ctx, r.get("pid"))] + _lrow(r),
        what="PIDs",
        csv="launch.csv",
    )
    s.sub("Tiny kernels (median duration < 10 µs), most frequent first")
    s.capped(
        rows_of(la, "tiny_kernels"),
        [("Kernel", "l"), ("Calls", "r"), ("Avg (µs)", "r"), ("p50 (µs)", "r")],
        lambda r: [
            s.name(r.get("name")),
            fmt_int(r.get("count")),
            fmt_us(r.get("avg_ns")),
            fmt_us(r.get("p50_ns")),
        ],
        what="tiny kernels",
        empty="No kernel has a median below 10 µs.",
    )
    return s.done()


_SCOLS: List[Col] = [
    ("API", "l"),
    ("Calls", "r"),
    ("Total (ms)", "r"),
    ("Avg (µs)", "r"),
    ("p50 (µs)", "r"),
    ("Max (µs)", "r"),
]


def _srow(s: Sec, r: Row) -> List[str]:
    return [
        s.name(r.get("name")),
        fmt_int(r.get("count")),
        fmt_ms(r.get("total_ns")),
        fmt_us(r.get("avg_ns")),
        fmt_us(r.get("p50_ns")),
        fmt_us(r.get("max_ns")),
    ]


def sec_sync(ctx: Ctx) -> List[str]:
    sy = section(ctx.report, "sync")
    s = Sec("CPU↔GPU synchronization", ctx)
    s.derived(
        "`CUPTI_ACTIVITY_KIND_RUNTIME` calls classified as host-blocking: device/stream/event/context "
        "synchronize and synchronous (non-`Async`) memcpy/memset, runtime and driver API."
    )
    s.limits(
        "total = summed call durations on the calling threads (threads may overlap); wall = union of the "
        "blocked intervals per PID. Time blocked is not necessarily wasted (the GPU may be busy). OS-runtime "
        "waits are not included; non-blocking queries are listed separately and never counted as sync."
    )
    if not _avail(sy):
        s.unavailable(sy.get("reason"))
        return s.done()
    s.para(f"{fmt_int(sy.get('call_count'))} host-blocking calls, {fmt_ms(sy.get('total_ns'))} ms in total.")
    s.sub("Host-blocking sync calls by API")
    s.capped(
        rows_of(sy, "sync_apis"),
        _SCOLS,
        lambda r: _srow(s, r),
        what="APIs",
        csv="sync_apis.csv",
        empty="No host-blocking synchronization calls.",
    )
    s.sub("Per PID")
    s.capped(
        rows_of(sy, "per_pid_totals"),
        [("PID", "l"), ("Calls", "r"), ("Total (ms)", "r"), ("Wall (ms)", "r")],
        lambda r: [
            _pid_label(ctx, r.get("pid")),
            fmt_int(r.get("count")),
            fmt_ms(r.get("total_ns")),
            fmt_ms(r.get("wall_ns")),
        ],
        what="PIDs",
        csv="sync_by_pid.csv",
        empty="No host-blocking synchronization calls.",
    )
    per_pid = rows_of(sy, "per_pid")
    if per_pid:
        s.sub("Per PID and API")
        s.capped(
            per_pid,
            [("PID", "l")] + _SCOLS,
            lambda r: [_pid_label(ctx, r.get("pid"))] + _srow(s, r),
            what="rows",
            csv="sync_by_pid.csv",
        )
    s.sub("Non-blocking query/wait calls (NOT synchronization)")
    s.para(
        "These calls return immediately (e.g. `cudaEventQuery`, `cudaStreamWaitEvent`); they are shown for "
        "completeness and are not counted in any sync total above."
    )
    s.capped(
        rows_of(sy, "nonblocking_apis"),
        _SCOLS,
        lambda r: _srow(s, r),
        what="APIs",
        csv="sync_apis.csv",
        empty="No non-blocking query/wait calls.",
    )
    return s.done()


def sec_cuda_api(ctx: Ctx) -> List[str]:
    ca = section(ctx.report, "cuda_api")
    s = Sec("CUDA API summary", ctx)
    s.derived(
        "`CUPTI_ACTIVITY_KIND_RUNTIME` (runtime and driver API rows; other event classes as separate "
        "rows), grouped by name without the `_v<digits>` suffix; duration = end − start on the CPU thread."
    )
    s.limits(
        "CPU-side call durations only; they say nothing about when the GPU ran the work. Rows of wrapper "
        "event classes can repeat time already counted in the runtime call they wrap."
    )
    if not _avail(ca):
        s.unavailable(ca.get("reason"))
        return s.done()
    s.para(f"{fmt_int(ca.get('call_count'))} calls, {fmt_ms(ca.get('total_ns'))} ms in total.")
    s.capped(
        rows_of(ca, "apis"),
        [
            ("API", "l"),
            ("Class", "l"),
            ("Event class", "r"),
            ("Calls", "r"),
            ("Total (ms)", "r"),
            ("Avg (µs)", "r"),
            ("p50 (µs)", "r"),
            ("Min (µs)", "r"),
            ("Max (µs)", "r"),
            ("% API time", "r"),
        ],
        lambda r: [
            s.name(r.get("name")),
            md_cell(r.get("api_class")),
            md_cell(r.get("event_class")),
            fmt_int(r.get("count")),
            fmt_ms(r.get("total_ns")),
            fmt_us(r.get("avg_ns")),
            fmt_us(r.get("p50_ns")),
            fmt_us(r.get("min_ns")),
            fmt_us(r.get("max_ns")),
            fmt_pct(r.get("pct")),
        ],
        what="APIs",
        csv="cuda_api.csv",
    )
    lc = ca.get("launch_calls")
    if isinstance(lc, abc.Mapping):
        s.sub("Launch-call cost")
        s.table(
            [
                ("Launch calls", "r"),
                ("Total (ms)", "r"),
                ("Avg (µs)", "r"),
                ("p50 (µs)", "r"),
                ("p90 (µs)", "r"),
                ("p99 (µs)", "r"),
                ("Min (µs)", "r"),
                ("Max (µs)", "r"),
            ],
            [
                [
                    fmt_int(lc.get("count")),
                    fmt_ms(lc.get("total_ns")),
                    fmt_us(lc.get("avg_ns")),
                    fmt_us(lc.get("p50_ns")),
                    fmt_us(lc.get("p90_ns")),
                    fmt_us(lc.get("p99_ns")),
                    fmt_us(lc.get("min_ns")),
                    fmt_us(lc.get("max_ns")),
                ]
            ],
        )
    s.sub("Allocation / free churn")
    s.capped(
        rows_of(ca, "alloc_free"),
        [
            ("API", "l"),
            ("Class", "l"),
            ("Calls", "r"),
            ("Total (ms)", "r"),
            ("Avg (µs)", "r"),
            ("Max (µs)", "r"),
        ],
        lambda r: [
            s.name(r.get("name")),
            md_cell(r.get("api_class")),
            fmt_int(r.get("count")),
            fmt_ms(r.get("total_ns")),
            fmt_us(r.get("avg_ns")),
            fmt_us(r.get("max_ns")),
        ],
        what="APIs",
        csv="cuda_api.csv",
        empty="No allocation or free calls.",
    )
    return s.done()


_MCOLS: List[Col] = [
    ("Count", "r"),
    ("Bytes", "r"),
    ("Total (ms)", "r"),
    ("Avg (µs)", "r"),
    ("p50 (µs)", "r"),
    ("Max (µs)", "r"),
    ("Achieved GB/s", "r"),
]


def _mrow(r: Row) -> List[str]:
    return [
        fmt_int(r.get("count")),
        fmt_bytes(r.get("bytes")),
        fmt_ms(r.get("total_ns")),
        fmt_us(r.get("avg_ns")),
        fmt_us(r.get("p50_ns")),
        fmt_us(r.get("max_ns")),
        fmt_float(r.get("gb_per_s"), 2),
    ]


def sec_memcpy(ctx: Ctx) -> List[str]:
    mc = section(ctx.report, "memcpy")
    s = Sec("Memcpy / memset", ctx)
    s.derived(
        "`CUPTI_ACTIVITY_KIND_MEMCPY` and `CUPTI_ACTIVITY_KIND_MEMSET` (GPU-side start/end, bytes, copy "
        "and memory kinds)."
    )
    s.limits(
        "achieved bandwidth = bytes / summed GPU duration (1 byte/ns = 1 GB/s, decimal), not the link "
        "peak; small transfers are latency-bound. Host-side cost of synchronous copies is in the sync "
        "section."
    )
    if not _avail(mc):
        s.unavailable(mc.get("reason"))
        return s.done()
    s.para(f"{fmt_bytes(mc.get('total_bytes'))} moved/set in {fmt_ms(mc.get('total_ns'))} ms of GPU time.")
    s.sub("Memcpy by direction")
    s.capped(
        rows_of(mc, "by_direction"),
        [("Direction", "l")] + _MCOLS,
        lambda r: [md_cell(r.get("direction"))] + _mrow(r),
        what="directions",
        csv="memcpy.csv",
        empty="No memcpy rows.",
    )
    s.sub("Memcpy by direction and memory kind")
    s.capped(
        rows_of(mc, "by_kind"),
        [("Direction", "l"), ("Source", "l"), ("Destination", "l")] + _MCOLS,
        lambda r: (
            [md_cell(r.get("direction")), md_cell(r.get("src_kind_name")), md_cell(r.get("dst_kind_name"))]
            + _mrow(r)
        ),
        what="groups",
        csv="memcpy.csv",
        empty="No memcpy rows.",
    )
    s.sub("Memset by memory kind")
    s.capped(
        rows_of(mc, "memset"),
        [("Memory kind", "l")] + _MCOLS,
        lambda r: [md_cell(r.get("mem_kind_name"))] + _mrow(r),
        what="groups",
        csv="memcpy.csv",
        empty="No memset rows.",
    )
    return s.done()


def _bucket_label(b: Any) -> str:
    return md_cell(str(b or "").replace("us", " µs").replace("ms", " ms").replace("-", "–"))


def sec_idle(ctx: Ctx) -> List[str]:
    idle = section(ctx.report, "idle")
    devices = rows_of(ctx.report, "devices")
    inc = idle.get("include_memcpy")
    s = Sec("GPU idle per device", ctx)
    s.derived(
        "kernel intervals per device"
        + (" plus memcpy/memset intervals (`--include-memcpy-in-busy`)" if inc else "")
        + ": busy = length of their union, window = first start → last end, idle = window − busy."
    )
    s.limits(
        "idle inside the window only (time before the first and after the last kernel of a device is not "
        "counted)"
        + ("" if inc else "; memcpy/memset do not count as busy unless `--include-memcpy-in-busy`")
        + ". Only the largest gaps are kept in the report (see the per-device gap table)."
    )
    if not _avail(idle):
        s.unavailable(idle.get("reason"))
        return s.done()
    s.capped(
        devices,
        [
            ("Device", "l"),
            ("Window (ms)", "r"),
            ("Busy (ms)", "r"),
            ("Idle (ms)", "r"),
            ("Idle %", "r"),
            ("Gaps", "r"),
        ],
        lambda d: [
            _dev_label(ctx, d.get("device_id")),
            fmt_ms(d.get("window_ns")),
            fmt_ms(d.get("busy_ns")),
            fmt_ms(d.get("idle_ns")),
            fmt_pct(d.get("idle_pct")),
            fmt_int(d.get("gap_count")),
        ],
        what="devices",
        csv="gpu_idle.csv",
    )
    win = section(ctx.report, "window")
    steady = [r for r in rows_of(ctx.report, "steady_idle") if isinstance(r, Mapping)]
    if win.get("method") not in (None, "full") and steady:
        lines = ", ".join(f"device {_dev_label(ctx, r.get('device_id'))} {fmt_pct(r.get('idle_pct'))}% idle"
                          for r in steady[: ctx.top])
        s.para(f"These numbers cover the whole capture. In the steady-state window "
               f"({fmt_ms(win.get('start_ns', 0) - (ctx.trace_start or 0))} → "
               f"{fmt_ms(win.get('end_ns', 0) - (ctx.trace_start or 0))} ms from the trace start, "
               f"`{md_cell(win.get('method'))}`): {lines}. See *Analysis window* and *GPU time accounting*.")
    t0 = ctx.trace_start
    for d in devices[: ctx.top]:
        dev = d.get("device_id")
        gaps = rows_of(d, "largest_gaps")
        s.sub(f"Device {_dev_label(ctx, dev)}: largest gaps")
        base = t0 if t0 is not None else d.get("window_start_ns")
        s.capped(
            gaps,
            [
                ("Starts at (ms from trace start)", "r"),
                ("Gap", "r"),
                ("Kernel before", "l"),
                ("Kernel after", "l"),
            ],
            lambda g, base=base: [
                fmt_ms(g["start_ns"] - base)
                if isinstance(g.get("start_ns"), int) and base is not None
                else DASH,
                fmt_dur(g.get("duration_ns")),
                s.name(g.get("kernel_before")),
                s.name(g.get("kernel_after")),
            ],
            what="gaps",
            csv="gpu_idle_gaps.csv",
            empty="No gaps: the device was busy for its whole window.",
        )
        hist = rows_of(d, "gap_histogram")
        if hist:
            idle_ns = d.get("idle_ns") or 0
            s.para(f"Gap-size histogram, device {md_cell(dev)}:")
            s.table(
                [("Gap size", "l"), ("Gaps", "r"), ("Idle (ms)", "r"), ("% of idle", "r")],
                [
                    [
                        _bucket_label(h.get("bucket")),
                        fmt_int(h.get("count")),
                        fmt_ms(h.get("total_ns")),
                        fmt_pct(100.0 * h["total_ns"] / idle_ns)
                        if idle_ns and isinstance(h.get("total_ns"), int)
                        else DASH,
                    ]
                    for h in hist
                ],
            )
    if len(devices) > ctx.top:
        s.para(
            f"*Gap details shown for {ctx.top} of {len(devices)} devices; all in `tables/gpu_idle_gaps.csv`.*"
        )
    return s.done()


_DOMAIN = re.compile(r"^([^:]+):(?!:)")
DEFAULT_DOMAIN = "(default domain)"


def nvtx_domains(ranges: Sequence[Row]) -> List[Dict[str, Any]]:
    """Per NVTX domain: push/pop and start/end range counts and summed durations, by total descending."""
    acc: Dict[str, Dict[str, Any]] = {}
    for r in ranges:  # rows of the per-name summary table, not NVTX events
        dom = r.get("domain")
        if not dom:
            m = _DOMAIN.match(str(r.get("name") or ""))
            dom = m.group(1) if m and "::" not in m.group(1) else DEFAULT_DOMAIN
        d = acc.setdefault(str(dom), {"domain": str(dom), "pushpop": 0, "startend": 0, "total_ns": 0})
        d["startend" if r.get("style") == "StartEnd" else "pushpop"] += int(r.get("count") or 0)
        d["total_ns"] += int(r.get("total_ns") or 0)
    return sorted(acc.values(), key=lambda d: (-d["total_ns"], d["domain"]))


def sec_nvtx(ctx: Ctx) -> List[str]:
    nv = section(ctx.report, "nvtx")
    s = Sec("NVTX ranges", ctx)
    s.derived(
        "`NVTX_EVENTS` push/pop (types 59/70) and start/end (60/71) ranges, names qualified by their domain "
        "(`Domain:name`); duration = end − start on the CPU timeline."
    )
    s.limits(
        "self time (push/pop only) excludes time inside nested push/pop ranges on the same thread, so the "
        "self shares never double-count nesting; “% total” counts each nesting level again, as `nsys stats` "
        "does. These are CPU-side range times, not GPU time (see attribution below). Unterminated ranges are "
        "counted but have no duration."
    )
    if not _avail(nv):
        s.unavailable(nv.get("reason"))
        return s.done()
    s.para(f"{fmt_int(nv.get('range_count'))} ranges; {fmt_int(nv.get('unterminated'))} unterminated.")
    ranges = rows_of(nv, "ranges")
    doms = nvtx_domains(ranges)
    if doms:
        s.sub("By domain")
        s.para(
            "Domain = the row's `domain` field when present, else the text before the first single `:` of "
            "the name (non-default domains are written `Domain:name`); totals sum nesting levels."
        )
        s.capped(
            doms,
            [("Domain", "l"), ("Push/pop ranges", "r"), ("Start/end ranges", "r"), ("Total (ms)", "r")],
            lambda d: [
                s.name(d["domain"]),
                fmt_int(d["pushpop"]),
                fmt_int(d["startend"]),
                fmt_ms(d["total_ns"]),
            ],
            what="domains",
        )
        s.sub("By name")
    s.capped(
        ranges,
        [
            ("Range", "l"),
            ("Style", "l"),
            ("Count", "r"),
            ("Total (ms)", "r"),
            ("Avg (µs)", "r"),
            ("p50 (µs)", "r"),
            ("Max (µs)", "r"),
            ("% total", "r"),
            ("Self (ms)", "r"),
            ("% self", "r"),
        ],
        lambda r: [
            s.name(r.get("name")),
            md_cell(r.get("style")),
            fmt_int(r.get("count")),
            fmt_ms(r.get("total_ns")),
            fmt_us(r.get("avg_ns")),
            fmt_us(r.get("p50_ns")),
            fmt_us(r.get("max_ns")),
            fmt_pct(r.get("pct_total")),
            fmt_ms(r.get("self_ns")) if r.get("style") != "StartEnd" else DASH,
            fmt_pct(r.get("pct_self")) if r.get("style") != "StartEnd" else DASH,
        ],
        what="ranges",
        csv="nvtx_ranges.csv",
    )
    return s.done()


def sec_attribution(ctx: Ctx) -> List[str]:
    att = section(section(ctx.report, "nvtx"), "attribution")
    s = Sec("NVTX → kernel attribution", ctx)
    s.derived(
        "each kernel follows its launch call (same process + correlationId) to the push/pop ranges open on "
        "the launching thread around that call."
    )
    s.limits(
        "inclusive time counts a kernel once per distinct enclosing range name, so it double-counts across "
        "nesting levels; innermost time gives each kernel to exactly one range (Σ innermost = attributed). "
        "Kernels launched outside any range, or with no linked launch call, are unattributed. Start/end "
        "ranges are not used."
    )
    if not _avail(att):
        s.unavailable(att.get("reason"))
        return s.done()
    cov = att.get("coverage")
    s.bullets(
        [
            f"Coverage: **{fmt_pct(cov * 100 if isinstance(cov, (int, float)) else None)}%** of kernel time "
            "has an enclosing NVTX range",
            f"Attributed kernel time: {fmt_ms(att.get('attributed_ns'))} ms of "
            f"{fmt_ms(att.get('total_kernel_ns'))} ms "
            f"({fmt_int(att.get('attributed_kernel_count'))} kernels)",
            f"Kernel time with a linked launch call: {fmt_ms(att.get('linked_kernel_ns'))} ms",
        ]
    )
    s.capped(
        rows_of(att, "ranges"),
        [
            ("Range", "l"),
            ("Kernels", "r"),
            ("Inclusive (ms)", "r"),
            ("Innermost (ms)", "r"),
            ("Innermost kernels", "r"),
            ("% kernel time", "r"),
        ],
        lambda r: [
            s.name(r.get("name")),
            fmt_int(r.get("kernel_count")),
            fmt_ms(r.get("inclusive_ns")),
            fmt_ms(r.get("innermost_ns")),
            fmt_int(r.get("innermost_kernel_count")),
            fmt_pct(r.get("pct_of_kernel_time")),
        ],
        what="ranges",
        csv="nvtx_attribution.csv",
    )
    pc = rows_of(att, "pid_coverage")
    if pc:
        s.sub("Coverage per PID")
        s.capped(
            pc,
            [("PID", "l"), ("Kernel time (ms)", "r"), ("Attributed (ms)", "r"), ("Coverage %", "r")],
            lambda r: [
                _pid_label(ctx, r.get("pid")),
                fmt_ms(r.get("kernel_ns")),
                fmt_ms(r.get("attributed_ns")),
                fmt_pct(r["coverage"] * 100 if isinstance(r.get("coverage"), (int, float)) else None),
            ],
            what="PIDs",
        )
    phases = rows_of(att, "phases")
    if phases:
        s.sub("Phase totals (`--phase-map`)")
        s.para(
            "A kernel's phase is the phase of its innermost enclosing range whose name matches one of the "
            "phase's substrings; kernels with none are `unmapped`."
        )
        s.table(
            [("Phase", "l"), ("Kernels", "r"), ("Kernel time (ms)", "r"), ("% kernel time", "r")],
            [
                [
                    s.name(p.get("phase")),
                    fmt_int(p.get("kernel_count")),
                    fmt_ms(p.get("kernel_ns")),
                    fmt_pct(p.get("pct_of_kernel_time")),
                ]
                for p in phases
            ],
        )
    return s.done()


def sec_nvtx_pid(ctx: Ctx) -> List[str]:
    nv = section(ctx.report, "nvtx")
    att = section(nv, "attribution")
    s = Sec("NVTX per PID", ctx)
    s.derived(
        "NVTX ranges grouped by the process of the thread that opened them, joined with the kernel time "
        "attributed to each range name in that process."
    )
    s.limits(
        "range times are CPU-side; kernel time is inclusive (see attribution limitations); empty kernel "
        "columns mean no kernel was attributed to that range in that process."
    )
    if not _avail(nv):
        s.unavailable(nv.get("reason"))
        return s.done()
    rows = rows_of(nv, "by_pid")
    amap = {(r.get("pid"), r.get("name")): r for r in rows_of(att, "by_pid")}
    pids: List[Any] = []
    for r in rows:  # rows of a per-(pid, name) summary table
        if r.get("pid") not in pids:
            pids.append(r.get("pid"))
    if not pids:
        s.para("*No NVTX ranges with a process.*")
    for pid in pids[: ctx.top]:
        s.sub(f"PID {_pid_label(ctx, pid)}")
        s.capped(
            [r for r in rows if r.get("pid") == pid],
            [
                ("Range", "l"),
                ("Count", "r"),
                ("Total (ms)", "r"),
                ("Kernels", "r"),
                ("Kernel time (ms)", "r"),
            ],
            lambda r, pid=pid: [
                s.name(r.get("name")),
                fmt_int(r.get("count")),
                fmt_ms(r.get("total_ns")),
                fmt_int(amap.get((pid, r.get("name")), {}).get("kernel_count")),
                fmt_ms(amap.get((pid, r.get("name")), {}).get("inclusive_ns")),
            ],
            what="ranges of this PID",
            csv="nvtx_by_pid.csv",
        )
    if len(pids) > ctx.top:
        s.para(f"*Showing {ctx.top} of {len(pids)} PIDs; all in `tables/nvtx_by_pid.csv`.*")
    return s.done()


# -------------------------------------------------------------------------------- generic diagnosis sections
_TITLES = {
    "categories": "Kernel categories",
    "phases": "Phases",
    "steps": "Decode steps",
    "accounting": "GPU time accounting",
    "window": "Analysis window (steady state)",
    "graphs": "CUDA graphs",
    "memory": "Memory",
    "nccl": "NCCL",
}
_META_KEYS = ("available", "reason", "derived_from", "limitations", "note", "notes", "definitions")


def section_title(key: str) -> str:
    return _TITLES.get(key) or md_text(str(key).replace("_", " ").strip().capitalize() or "Section")


def _scalar(v: Any) -> bool:
    return v is None or isinstance(v, (str, int, float, bool))


def _is_timestamp(key: str) -> bool:
    return key == "start_ns" or key == "end_ns" or key.endswith("_start_ns") or key.endswith("_end_ns")


def _fmt_value(key: str, v: Any, parent: str = "") -> str:
    """One generic value; ``key`` (or, when it has no hint, the ``parent`` key) picks the unit:
    ``*_start_ns``/``*_end_ns`` timestamps as integer ns, other ``*_ns`` as a duration, ``pct`` keys as a
    percentage. Dicts of scalars become ``k: v, …``; other containers compact JSON."""
    k = str(key)
    hint = k if (k.endswith("_ns") or "pct" in k) else str(parent)
    if v is None:
        return DASH
    if isinstance(v, bool):
        return _yn(v)
    if isinstance(v, (int, float)):
        if _is_timestamp(k):
            return f"{fmt_int(v)} ns"
        if hint.endswith("_ns"):
            return fmt_dur(v)
        if "pct" in hint or hint.endswith("_percent"):
            return fmt_pct(v)
        if isinstance(v, int):
            return fmt_int(v)
        return fmt_float(v, 4)
    if isinstance(v, str):
        return md_text(truncate(v, 400), False)
    if isinstance(v, abc.Mapping) and all(_scalar(x) for x in v.values()) and len(v) <= 12:
        return ", ".join(f"{md_text(sk, False)}: {_fmt_value(sk, sv, k)}" for sk, sv in v.items())
    return md_code(truncate(json.dumps(v, default=str), 200))


def _generic_table(s: Sec, rows: Sequence[Row], what: str, csv: Optional[str]) -> None:
    keys: Dict[str, None] = {}
    for r in rows:  # rows of a small diagnosis table
        for k in r:
            keys.setdefault(str(k), None)
    cols: List[Col] = []
    fmts: List[Callable[[Any], str]] = []
    for k in keys:
        vals = [r.get(k) for r in rows[: s.ctx.top]]
        nums = [v for v in vals if isinstance(v, (int, float)) and not isinstance(v, bool)]
        right = bool(nums) and len(nums) == len([v for v in vals if v is not None])
        if k.endswith("_ns") and right:
            if _is_timestamp(k):
                cols.append((md_cell(k[:-3] + " (ns)"), "r"))
                fmts.append(fmt_int)
            elif max(abs(v) for v in nums) >= 1e6:
                cols.append((md_cell(k[:-3] + " (ms)"), "r"))
                fmts.append(fmt_ms)
            else:
                cols.append((md_cell(k[:-3] + " (µs)"), "r"))
                fmts.append(fmt_us)
            continue
        cols.append((md_cell(k), "r" if right else "l"))
        if "pct" in k and right:
            fmts.append(fmt_pct)
        elif right:
            fmts.append(lambda v: fmt_int(v) if isinstance(v, int) else fmt_float(v, 4))
        else:
            fmts.append(lambda v, _k=k: s.name(v) if isinstance(v, str) else _fmt_value(_k, v))
    names = list(keys)

    def fmt(r: Row) -> List[str]:
        return [f(r.get(k)) if r.get(k) is not None else DASH for k, f in zip(names, fmts)]

    s.capped(list(rows), cols, fmt, what=what, csv=csv)


def _generic_body(s: Sec, key: str, val: Any, stem: str, depth: int) -> None:
    if isinstance(val, list):
        if val and all(isinstance(r, abc.Mapping) for r in val):
            _generic_table(s, val, "rows", f"{stem}.csv")
        elif val:
            s.bullets([_fmt_value(key, v) for v in val[: s.ctx.top]])
        else:
            s.para("*None.*")
        return
    if not isinstance(val, abc.Mapping):
        s.bullets([_fmt_value(key, val)])
        return
    if val.get("available") is False:
        s.unavailable(val.get("reason"))
        return
    scal = [(k, v) for k, v in val.items() if k not in _META_KEYS and _scalar(v)]
    if scal:
        s.bullets([f"{md_text(k)}: {_fmt_value(k, v, key)}" for k, v in scal])
    for k, v in val.items():
        if k in _META_KEYS or _scalar(v):
            continue
        sub_stem = table_stem(stem, k)
        if isinstance(v, list) and v and not all(isinstance(r, abc.Mapping) for r in v):
            s.bullets(
                [
                    f"{md_text(k)}: "
                    + ", ".join(_fmt_value(k, x) for x in v[: s.ctx.top])
                    + (f" … ({len(v)} in all)" if len(v) > s.ctx.top else "")
                ]
            )
            continue
        if depth >= 3:
            s.bullets([f"{md_text(k)}: {_fmt_value(k, v)}"])
            continue
        s.sub(md_text(str(k).replace("_", " ")), level=min(3 + depth, 6))
        _generic_body(s, k, v, sub_stem, depth + 1)


def render_generic(key: str, val: Any, ctx: Ctx) -> List[str]:
    """Generic diagnosis section: heading from the key, scalars as bullets, lists of row dicts as tables."""
    s = Sec(section_title(key), ctx)
    meta = val if isinstance(val, abc.Mapping) else {}
    derived = meta.get("derived_from")
    s.derived(
        md_rich(derived)
        if derived
        else f"the {md_code(key)} diagnosis analysis ({md_code(key)} in "
        "`report.json`), computed from the same model as the sections above."
    )
    lim = meta.get("limitations")
    s.limits(
        md_rich(lim)
        if lim
        else "see the definitions of this analysis; values are shown as computed, "
        "times converted from integer ns."
    )
    for k in ("note", "notes"):
        n = meta.get(k)
        if isinstance(n, str) and n:
            s.para(md_rich(n))
        elif isinstance(n, list) and n:
            s.bullets([md_rich(x) for x in n])
    if isinstance(meta.get("definitions"), Mapping):
        s.bullets([f"{md_text(k)}: {md_rich(v)}" for k, v in meta["definitions"].items()])
    _generic_body(s, key, val, table_stem(key), 0)
    return s.done()


SectionFn = Callable[[str, Any, Ctx], List[str]]
#: top-level report key → renderer for a diagnosis section; keys not here use :func:`render_generic`
SECTION_RENDERERS: Dict[str, SectionFn] = {}


def section_renderer(key: str) -> Callable[[SectionFn], SectionFn]:
    """Decorator registering a dedicated renderer for the diagnosis section ``key``."""

    def deco(fn: SectionFn) -> SectionFn:
        SECTION_RENDERERS[key] = fn
        return fn

    return deco


#: diagnosis sections shown first, in this order; any other diagnosis key follows in report order
DIAGNOSIS_ORDER = (
    "window", "accounting", "steady_idle", "categories", "phases", "steps", "graphs", "memory", "nccl"
)


def sec_extra(ctx: Ctx) -> List[str]:
    lines: List[str] = []
    keys = extra_section_keys(ctx.report)
    keys.sort(key=lambda k: DIAGNOSIS_ORDER.index(k) if k in DIAGNOSIS_ORDER else len(DIAGNOSIS_ORDER))
    for key in keys:
        fn = SECTION_RENDERERS.get(key, render_generic)
        try:
            lines += fn(key, ctx.report[key], ctx)
        except (
            Exception
        ) as exc:  # a diagnosis section with an unexpected shape must not lose the whole report
            if fn is render_generic:
                raise
            lines += render_generic(key, ctx.report[key], ctx)
            lines += [
                f"*(dedicated renderer failed: {md_text(type(exc).__name__, False)}; shown generically)*",
                "",
            ]
    return lines


_DERIVATION = (
    "**Duration** = end − start in integer ns, on the export's timeline; ms = ns / 10⁶ "
    "(3 decimals), µs = ns / 10³ (2 decimals) in this file; `report.json` and CSVs keep exact ns.",
    "**Statistics**: avg = total / count rounded half up; p50/p90/p99 by linear interpolation between "
    "closest ranks (numpy default; p50 equals `nsys stats` “Med”), rounded half up.",
    "**Kernel %** = share of summed kernel time across all kernels (concurrent kernels each counted).",
    "**Busy** = length of the union of kernel intervals on a device (overlaps counted once; whole-graph "
    "executions of graph-level CUDA-graph tracing count too; memcpy/memset only with "
    "`--include-memcpy-in-busy`); **window** = first start → last end of that activity on the device; "
    "**idle** = window − busy; idle % = idle / window × 100.",
    "**Sync** = host-blocking CUDA calls only (synchronize calls, synchronous memcpy/memset); "
    "non-blocking queries/waits are reported separately and never counted as sync; OS-runtime waits "
    "are excluded.",
    "**Launch join**: a kernel is linked to the CUDA API call with the same correlationId in the same "
    "process (correlation ids are per process).",
    "**NVTX attribution**: a kernel belongs to the push/pop ranges (every domain) open on its launching "
    "thread around the launch call; inclusive = once per distinct enclosing name, innermost = exactly one "
    "range per kernel (the one that started last); coverage = attributed kernel time / total kernel time.",
    "**NVTX self time** = range time not inside a nested push/pop range of the same thread and domain "
    "(never double-counts nesting).",
    "**Steady-state window, time accounting, categories, phases, steps, findings**: see the definitions "
    "in the sections above and docs/FINDINGS.md.",
    "**API names** are shown without the `_v<digits>` version suffix (raw names are kept in `report.json`).",
)


def sec_derivation(ctx: Ctx) -> List[str]:
    s = Sec("Derivation & assumptions", ctx)
    s.derived(
        "the definitions used by every analysis in this tool (module docstrings of "
        "`nsys_llm_explainer.analyses`)."
    )
    s.limits(
        "a report describes one capture; timings include profiler overhead (CUPTI adds a few µs per "
        "launch/API call)."
    )
    s.bullets(
        [
            *_DERIVATION,
            f"**Tables** show at most `--top` = {ctx.top} rows and say “Showing N of M” when capped; CSVs "
            "hold all rows.",
        ]
    )
    return s.done()


CORE_SECTIONS: List[Callable[[Ctx], List[str]]] = [
    sec_title,
    sec_warnings,
    sec_findings,
    sec_trace,
    sec_kernels,
    sec_pids,
    sec_launch,
    sec_sync,
    sec_cuda_api,
    sec_memcpy,
    sec_idle,
    sec_nvtx,
    sec_attribution,
    sec_nvtx_pid,
    sec_extra,
    sec_derivation,
]


def render_markdown(report: Mapping[str, Any]) -> str:
    """The whole ``report.md`` text."""
    ctx = Ctx(report)
    lines: List[str] = []
    for fn in CORE_SECTIONS:
        lines += fn(ctx)
    while lines and lines[-1] == "":
        lines.pop()
    return "\n".join(lines) + "\n"


class MarkdownRenderer(Renderer):
    """``report.md``."""

    name = "markdown"
    filename = "report.md"

    def render(self, report: Mapping[str, Any], out_dir: Path) -> List[Path]:
        out_dir = Path(out_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        path = out_dir / self.filename
        with open(path, "w", encoding="utf-8", errors="replace", newline="\n") as fh:
            fh.write(render_markdown(report))
        return [path]


# dedicated diagnosis renderers register themselves in SECTION_RENDERERS (and their CSV tables) on import
from . import markdown_diagnosis  # noqa: E402,F401
