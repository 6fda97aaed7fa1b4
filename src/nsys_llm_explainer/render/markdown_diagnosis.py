"""Dedicated Markdown renderers (and CSV tables) for the diagnosis sections of ``report.md``.

Registered with :func:`render.markdown.section_renderer` for the top-level report keys ``window``,
``accounting`` (with ``steady_idle``), ``categories``, ``phases``, ``steps``, ``graphs``, ``memory`` and
``nccl``. A value without the expected shape (not a dict; ``accounting`` without ``steady``) is handed
to :func:`render.markdown.render_generic`. Nothing is re-derived from the trace; the few numbers computed
here are defined as follows (all from the integer ns of ``report.json``):

* **% of window** (accounting) = part ns / the device's ``window_ns`` × 100 (the JSON's
  ``idle_parts_pct`` is of idle, not of window).
* **Identity check** (accounting) = ``busy_ns`` + Σ ``idle_parts`` compared with ``window_ns`` exactly (ns).
* **Dominant idle cause** = the ``idle_parts`` entry with the most ns (ties: priority order sync, launch,
  alloc, other API, no CUDA call, unknown).
* **Relative start** (steps) = ``start_ns`` − ``trace.start_ns``, in ms.
* **GPU busy %** of a step group = ``gpu_busy_ns`` / ``total_ns`` (Σ step wall) × 100.
* **Kernels / step** of a step group = ``kernel_count`` / ``count`` (2 decimals).
* **Effective bandwidth** (memory) = bytes / GPU copy time, GB/s (10⁹ bytes per s).
* **Last-arrival share** (NCCL) = ``last_arrival_count`` / ``matched_collectives`` × 100.

CSV tables added to :data:`render.csv_tables.CSV_TABLES` (header always written):

* ``steps.csv`` — ``steps.rows`` (one row per detected step, at most ``MAX_STEP_ROWS`` of them).
* ``categories.csv`` — ``categories.overall`` plus the top kernel of each category.
* ``accounting.csv`` — ``accounting.steady.devices`` with ``idle_parts`` flattened into ``idle_<part>_ns``.
"""

from __future__ import annotations

from collections import abc
from typing import Any, Dict, List, Mapping, Optional, Sequence

from .base import DASH, fmt_bytes, fmt_dur, fmt_float, fmt_int, fmt_ms, fmt_pct, fmt_us, rows_of, section
from .csv_tables import CSV_TABLES, Spec, ms, raw
from .escape import md_cell, md_code, md_rich, md_text, truncate
from .markdown import SECTION_RENDERERS, Ctx, Sec, render_generic

Row = Mapping[str, Any]

#: idle parts in the accounting's priority order, with their column titles
IDLE_PARTS = (
    ("sync", "sync"),
    ("launch", "launch"),
    ("alloc", "alloc"),
    ("other_api", "other API"),
    ("no_cuda_call", "no CUDA call"),
    ("unknown", "unknown"),
)

#: what a dominant idle part usually means, for the reading line under the accounting table
IDLE_MEANING = {
    "sync": "the host was blocked in a synchronize call / synchronous copy while the GPU had nothing "
    "queued: remove per-step syncs (`.item()`, `.cpu()`, blocking copies) or overlap them",
    "launch": "the host was inside kernel-launch calls: the GPU is launch-bound — fewer, larger kernels "
    "(fusion) or CUDA graphs",
    "alloc": "the host was allocating/freeing device memory: keep allocations out of the loop "
    "(caching allocator, pre-allocated buffers)",
    "other_api": "the host was in other CUDA calls (queries, events, attribute calls)",
    "no_cuda_call": "the host was outside any CUDA call (Python, scheduler, tokenizer, CPU work): "
    "CPU overhead between launches — CUDA graphs, async scheduling, or moving CPU work off the critical path",
    "unknown": "no launching thread could be linked to this device, so the host state is not known",
}

NO_MEMCPY_NOTE = "memcpy/memset are not busy time (`--include-memcpy-in-busy`); "

TITLES = {
    "window": "Analysis window (steady state)",
    "accounting": "GPU time accounting",
    "steady_idle": "GPU idle within the steady-state window",
    "categories": "Kernel categories",
    "phases": "Phases (prefill / decode)",
    "steps": "Model steps",
    "graphs": "CUDA graphs",
    "memory": "Memory traffic & allocation",
    "nccl": "NCCL",
}


# ------------------------------------------------------------------------------------------- helpers
def _num(v: Any) -> Optional[float]:
    if v is None or isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v)


def _int(v: Any) -> int:
    n = _num(v)
    return int(n) if n is not None else 0


def _pct_of(part: Any, whole: Any) -> Optional[float]:
    p, w = _num(part), _num(whole)
    if p is None or w is None or w <= 0:
        return None
    return p / w * 100.0


def _ms_pct(ns: Any, whole: Any) -> str:
    """``1.234 (5.67%)`` — ms with the share of ``whole``."""
    if _num(ns) is None:
        return DASH
    p = _pct_of(ns, whole)
    return fmt_ms(ns) if p is None else f"{fmt_ms(ns)} ({fmt_pct(p)}%)"


def _dev(ctx: Ctx, dev: Any) -> str:
    name = ctx.gpu_names.get(dev)
    return f"{md_cell(dev)} ({md_cell(name)})" if name else (md_cell(dev) if dev is not None else DASH)


def _pid(ctx: Ctx, pid: Any) -> str:
    name = ctx.pid_names.get(pid)
    if name:
        return f"{md_cell(pid)} ({md_cell(truncate(name, 60))})"
    return md_cell(pid) if pid is not None else DASH


def _rel_ms(ctx: Ctx, t: Any) -> str:
    if _num(t) is None:
        return DASH
    if ctx.trace_start is None:
        return f"{fmt_int(t)} ns"
    return fmt_ms(int(t) - ctx.trace_start)


def _notes(s: Sec, val: Row) -> None:
    for k in ("note", "notes"):
        n = val.get(k)
        if isinstance(n, str) and n:
            s.para(md_rich(n))
        elif isinstance(n, list) and n:
            s.bullets([md_rich(x) for x in n])


def _unavailable(s: Sec, val: Row) -> bool:
    """Print the reason and return True when the section's analysis is not available."""
    if val.get("available", True) is False:
        s.unavailable(val.get("reason"))
        return True
    return False


def _register(key: str):  # noqa: ANN202 - decorator factory
    def deco(fn):  # noqa: ANN001, ANN202
        REGISTERED[key] = fn
        SECTION_RENDERERS[key] = fn
        return fn

    return deco


#: the renderers of this module (so tests or callers can re-install them with :func:`register`)
REGISTERED: Dict[str, Any] = {}


def register() -> None:
    """(Re-)install this module's renderers in :data:`SECTION_RENDERERS` and its CSV tables."""
    SECTION_RENDERERS.update(REGISTERED)
    have = {name for name, _, _ in CSV_TABLES}
    for entry in DIAGNOSIS_CSV_TABLES:
        if entry[0] not in have:
            CSV_TABLES.append(entry)


# -------------------------------------------------------------------------------------------- window
@_register("window")
def render_window(key: str, val: Any, ctx: Ctx) -> List[str]:
    if not isinstance(val, abc.Mapping):
        return render_generic(key, val, ctx)
    s = Sec(TITLES["window"], ctx)
    s.derived(
        "pooled GPU busy time (union of all kernels, all devices) in equal time bins over the capture "
        "(first → last captured activity); the densest stretch is kept and sparse warm-up / idle tail "
        "trimmed when they exceed 10 % of the span (`window` in `report.json`)."
    )
    s.limits(
        "a density heuristic: a long but sparse real workload phase can be trimmed and a dense warm-up "
        "(e.g. CUDA-graph capture) kept — check the window against your NVTX ranges and override when needed."
    )
    if _unavailable(s, val):
        return s.done()
    method = str(val.get("method") or "full")
    start, end = val.get("start_ns"), val.get("end_ns")
    fs, fe = val.get("full_start_ns"), val.get("full_end_ns")
    win = val.get("window_ns")
    if win is None and _num(start) is not None and _num(end) is not None:
        win = int(end) - int(start)
    span = int(fe) - int(fs) if _num(fs) is not None and _num(fe) is not None else None
    frac = _num(val.get("steady_fraction"))
    method_text = {
        "full": "`full` — nothing trimmed, the whole capture is analysed",
        "auto": "`auto` — warm-up / tail trimmed automatically",
        "override": "`override` — set with `--window START_NS:END_NS`",
        "nvtx": "`nvtx` — set with `--window-nvtx NAME`",
    }.get(method, md_code(method))
    items = [
        f"**Window:** {fmt_int(start)} → {fmt_int(end)} ns (trace-relative {_rel_ms(ctx, start)} → "
        f"{_rel_ms(ctx, end)} ms), **{fmt_dur(win)}**"
        + (f" = {fmt_pct(frac * 100)}% of the {fmt_dur(span)} capture" if frac is not None else ""),
        f"**Method:** {method_text}",
        f"**Why:** {md_text(val.get('reason') or 'no reason recorded', False)}",
        f"**Warm-up trimmed:** {fmt_dur(val.get('warmup_ns'))} · "
        f"**tail trimmed:** {fmt_dur(val.get('tail_ns'))}",
    ]
    det = val.get("details")
    if isinstance(det, abc.Mapping) and det and method == "auto":
        items.append(
            f"Density: warm-up GPU busy {fmt_pct(det.get('warmup_busy_pct'))}% "
            f"({fmt_pct(det.get('warmup_share_of_busy_pct'))}% of all busy time), steady "
            f"{fmt_pct(det.get('steady_busy_pct'))}%, tail {fmt_pct(det.get('tail_busy_pct'))}% "
            f"({fmt_pct(det.get('tail_share_of_busy_pct'))}% of busy); {fmt_int(det.get('bins'))} bins of "
            f"{fmt_dur(det.get('bin_ns'))}, active when ≥ {fmt_pct(det.get('active_threshold_pct'))}% busy"
        )
    s.bullets(items)
    scoped = (
        "**Scope:** the steady-state window applies to *GPU time accounting* (steady-state table), "
        "*GPU idle within the steady-state window* and *Memory traffic*; kernels, categories, phases, "
        "steps, CUDA graphs and NCCL cover the whole capture."
    )
    s.para(scoped)
    s.para(
        "**Override:** `--window START_NS:END_NS` (export timeline ns, e.g. "
        f"`--window {fmt_int(start).replace(',', '')}:{fmt_int(end).replace(',', '')}`) or "
        "`--window-nvtx NAME` (first start → last end of the NVTX ranges named exactly NAME)."
    )
    return s.done()


# ---------------------------------------------------------------------------------------- accounting
def identity_line(ctx: Ctx, d: Row) -> str:
    """``busy + Σ idle parts = window`` for one device, in exact ns, with a check mark or the difference."""
    parts = d.get("idle_parts") if isinstance(d.get("idle_parts"), abc.Mapping) else {}
    busy = _int(d.get("busy_ns"))
    psum = sum(_int(parts.get(k)) for k, _ in IDLE_PARTS)
    win = _int(d.get("window_ns"))
    total = busy + psum
    terms = " + ".join(f"{fmt_int(_int(parts.get(k)))} {t}" for k, t in IDLE_PARTS)
    head = (
        f"Device {_dev(ctx, d.get('device_id'))}: busy {fmt_int(busy)} + idle ({terms}) = "
        f"{fmt_int(total)} ns"
    )
    if total == win:
        return head + f" = window {fmt_int(win)} ns ✓"
    return head + f" ≠ window {fmt_int(win)} ns (off by {fmt_int(total - win)} ns) ✗"


def dominant_part(d: Row) -> Optional[str]:
    parts = d.get("idle_parts") if isinstance(d.get("idle_parts"), abc.Mapping) else {}
    best: Optional[str] = None
    best_ns = 0
    for k, _ in IDLE_PARTS:
        v = _int(parts.get(k))
        if v > best_ns:
            best, best_ns = k, v
    return best


def _accounting_table(s: Sec, acc: Row, csv: Optional[str]) -> None:
    devs = rows_of(acc, "devices")
    cols = [("Device", "l"), ("Window (ms)", "r"), ("Busy ms (%)", "r"), ("Idle ms (%)", "r")] + [
        (f"idle: {t}" if i == 0 else t, "r") for i, (_, t) in enumerate(IDLE_PARTS)
    ]

    def fmt(d: Row) -> List[str]:
        parts = d.get("idle_parts") if isinstance(d.get("idle_parts"), abc.Mapping) else {}
        w = d.get("window_ns")
        return [
            _dev(s.ctx, d.get("device_id")),
            fmt_ms(w),
            _ms_pct(d.get("busy_ns"), w),
            _ms_pct(d.get("idle_ns"), w),
        ] + [_ms_pct(parts.get(k), w) for k, _ in IDLE_PARTS]

    tot = acc.get("totals")
    if len(devs) > 1 and isinstance(tot, abc.Mapping) and tot and len(devs) <= s.ctx.top:
        s.table(cols, [fmt(d) for d in devs] + [["**Σ all devices**"] + fmt(tot)[1:]], csv=csv)
    else:
        s.capped(devs, cols, fmt, what="devices", csv=csv, empty="No device ran kernels in this scope.")
    if devs:
        s.para("Identity check per device (exact ns; busy + Σ idle parts must equal the window):")
        s.bullets([identity_line(s.ctx, d) for d in devs[: s.ctx.top]])
        reading = []
        for d in devs[: s.ctx.top]:
            k = dominant_part(d)
            if k is None:
                reading.append(f"Device {_dev(s.ctx, d.get('device_id'))}: no idle time.")
                continue
            parts = d["idle_parts"]
            title = dict(IDLE_PARTS)[k]
            reading.append(
                f"Device {_dev(s.ctx, d.get('device_id'))}: idle {fmt_pct(d.get('idle_pct'))}% of the "
                "window; "
                f"largest cause **{title}** ({fmt_ms(parts.get(k))} ms, "
                f"{fmt_pct(_pct_of(parts.get(k), d.get('idle_ns')))}% of idle) — {IDLE_MEANING[k]}."
            )
        s.para("Reading:")
        s.bullets(reading)
        hc = [d for d in devs if isinstance(d.get("idle_host_caused_parts"), abc.Mapping)]
        if hc:
            s.para("Host-caused vs queued idle (the findings use the host-caused part only): *queued* = the next "
                   "kernel had already been launched when the gap began (GPU-side latency or a stream "
                   "dependency); *host-caused* = the GPU waited for the host to launch it.")

            def hc_row(d: Row) -> List[str]:
                w = d.get("window_ns")
                parts = d["idle_host_caused_parts"]
                return [_dev(s.ctx, d.get("device_id")), _ms_pct(d.get("idle_queued_ns"), w)] + [
                    _ms_pct(parts.get(k), w) for k, _ in IDLE_PARTS]

            s.capped(hc, [("Device", "l"), ("Queued ms (%)", "r")] + [
                (f"host-caused: {t}" if i == 0 else t, "r") for i, (_, t) in enumerate(IDLE_PARTS)],
                hc_row, what="devices")


def _launch_stats(s: Sec, acc: Row) -> None:
    ls = acc.get("launch_stats") if isinstance(acc.get("launch_stats"), abc.Mapping) else {}
    devs = rows_of(acc, "devices")
    if not ls and not devs:
        return
    s.sub("Launch overhead and short gaps")
    lc = ls.get("launch_call") if isinstance(ls.get("launch_call"), abc.Mapping) else {}
    lt = ls.get("launch_to_start") if isinstance(ls.get("launch_to_start"), abc.Mapping) else {}
    items = []
    if lc:
        items.append(
            f"Launch call duration (CPU, {fmt_int(lc.get('count'))} calls): "
            f"p50 {fmt_us(lc.get('p50_ns'))} µs, p90 {fmt_us(lc.get('p90_ns'))} µs"
        )
    if lt:
        items.append(
            f"Launch → kernel start, all devices ({fmt_int(lt.get('count'))} linked calls): p50 "
            f"{fmt_us(lt.get('p50_ns'))} µs, p90 {fmt_us(lt.get('p90_ns'))} µs, "
            f"p99 {fmt_us(lt.get('p99_ns'))} µs"
        )
    s.bullets(items)
    per = {r.get("device_id"): r for r in rows_of(ls, "launch_to_start_per_device")}
    s.capped(
        devs,
        [
            ("Device", "l"),
            ("Launch→start p50 (µs)", "r"),
            ("p90 (µs)", "r"),
            ("p99 (µs)", "r"),
            ("Gaps", "r"),
            ("Gaps < 100 µs", "r"),
            ("Idle in gaps < 100 µs, ms (% of idle)", "r"),
        ],
        lambda d: [
            _dev(s.ctx, d.get("device_id")),
            fmt_us(per.get(d.get("device_id"), {}).get("p50_ns")),
            fmt_us(per.get(d.get("device_id"), {}).get("p90_ns")),
            fmt_us(per.get(d.get("device_id"), {}).get("p99_ns")),
            fmt_int(d.get("gap_count")),
            fmt_int(d.get("short_gap_count")),
            (
                f"{fmt_ms(d.get('idle_in_short_gaps_ns'))} ({fmt_pct(d.get('idle_in_short_gaps_pct'))}%)"
                if d.get("idle_in_short_gaps_ns") is not None
                else DASH
            ),
        ],
        what="devices",
    )
    s.para(
        "A large launch→start latency means kernels queue behind earlier work (the GPU is ahead of the "
        "host: fine); a small one with much idle in short gaps means the GPU waits for each launch "
        "(launch-bound: CUDA graphs or fusion help)."
    )


def _steady_idle_table(s: Sec, rows: Sequence[Row]) -> None:
    s.capped(
        list(rows),
        [
            ("Device", "l"),
            ("Window start → end (ms, trace-relative)", "l"),
            ("Window (ms)", "r"),
            ("Busy (ms)", "r"),
            ("Idle (ms)", "r"),
            ("Idle %", "r"),
            ("Gaps", "r"),
            ("Largest gap", "r"),
        ],
        lambda d: [
            _dev(s.ctx, d.get("device_id")),
            f"{_rel_ms(s.ctx, d.get('window_start_ns'))} → {_rel_ms(s.ctx, d.get('window_end_ns'))}",
            fmt_ms(d.get("window_ns")),
            fmt_ms(d.get("busy_ns")),
            fmt_ms(d.get("idle_ns")),
            fmt_pct(d.get("idle_pct")),
            fmt_int(d.get("gap_count")),
            fmt_dur(max((_int(g.get("duration_ns")) for g in rows_of(d, "largest_gaps")), default=None)),
        ],
        what="devices",
        csv="steady_idle.csv",
        empty="No device ran kernels inside the steady-state window.",
    )


@_register("accounting")
def render_accounting(key: str, val: Any, ctx: Ctx) -> List[str]:
    if not isinstance(val, abc.Mapping) or not isinstance(val.get("steady"), abc.Mapping):
        return render_generic(key, val, ctx)
    steady = val["steady"]
    full = val.get("full") if isinstance(val.get("full"), abc.Mapping) else {}
    win = section(ctx.report, "window")
    trimmed = bool(win) and str(win.get("method") or "full") != "full"
    s = Sec(TITLES["accounting"], ctx)
    mem = " and memcpy/memset" if steady.get("include_memcpy") else ""
    s.derived(
        f"per device, busy = union of kernel{mem} intervals and idle = the gaps between them over the "
        "device's window (first → last kernel); every idle ns is charged to what the device's launching "
        "threads were doing (CUDA runtime/driver calls), by priority sync > launch > alloc > other API > "
        "no CUDA call (`accounting` in `report.json`)."
    )
    s.limits(
        "host state comes from CUDA API calls only: *no CUDA call* lumps Python, scheduling, tokenization "
        "and any other CPU work; a device's idle is charged to its own launching threads only; "
        + ("" if steady.get("include_memcpy") else NO_MEMCPY_NOTE)
        + "percentages are of each device's window."
    )
    first = "Steady state" if trimmed else "Whole trace (no warm-up or tail trimmed)"
    scopes = [(first, steady, "accounting.csv")]
    if trimmed:
        scopes.append(("Full trace (before trimming)", full, None))
    for title, acc, csv in scopes:
        s.sub(title)
        if _unavailable(s, acc):
            continue
        _accounting_table(s, acc, csv)
        if acc is steady:
            sm = [d for d in rows_of(acc, "devices") if _int(d.get("idle_in_sync_memcpy_ns")) > 0]
            if sm:
                s.bullets(
                    [
                        f"Device {_dev(ctx, d.get('device_id'))}: "
                        f"{fmt_ms(d.get('idle_in_sync_memcpy_ns'))} ms of the sync idle was inside "
                        "synchronous memcpy/memset calls"
                        for d in sm
                    ]
                )
        _notes(s, acc)
    if _avail(steady):
        _launch_stats(s, steady)
    si = ctx.report.get("steady_idle")
    if isinstance(si, list):
        s.sub("GPU idle within the steady-state window")
        _steady_idle_table(s, [r for r in si if isinstance(r, abc.Mapping)])
    return s.done()


def _avail(v: Row) -> bool:
    return bool(v.get("available", True))


@_register("steady_idle")
def render_steady_idle(key: str, val: Any, ctx: Ctx) -> List[str]:
    """Shown inside the accounting section; a section of its own only when accounting is not there."""
    acc = ctx.report.get("accounting")
    if isinstance(acc, abc.Mapping) and isinstance(acc.get("steady"), abc.Mapping) and SECTION_RENDERERS.get(
        "accounting"
    ) is render_accounting:
        return []
    if not isinstance(val, list):
        return render_generic(key, val, ctx)
    s = Sec(TITLES["steady_idle"], ctx)
    s.derived(
        "per device, the union of kernel intervals inside the steady-state window and the gaps between them."
    )
    s.limits("kernels only; the window is the device's first → last kernel inside the steady-state window.")
    _steady_idle_table(s, [r for r in val if isinstance(r, abc.Mapping)])
    return s.done()


# ---------------------------------------------------------------------------------------- categories
_CAT_COLS = [
    ("Category", "l"),
    ("Kernels", "r"),
    ("Kernel time (ms)", "r"),
    ("% kernel time", "r"),
    ("Non-overlapped (ms)", "r"),
    ("% busy", "r"),
]


def _cat_row(r: Row) -> List[str]:
    return [
        md_cell(r.get("category")) or DASH,
        fmt_int(r.get("count")),
        fmt_ms(r.get("total_ns")),
        fmt_pct(r.get("pct")),
        fmt_ms(r.get("nonoverlap_ns")),
        fmt_pct(r.get("nonoverlap_pct")),
    ]


@_register("categories")
def render_categories(key: str, val: Any, ctx: Ctx) -> List[str]:
    if not isinstance(val, abc.Mapping):
        return render_generic(key, val, ctx)
    s = Sec(TITLES["categories"], ctx)
    s.derived(
        "demangled kernel names matched case-insensitively against the ordered regex rules of a category "
        "preset (first match wins; `--categories FILE` adds rules); *non-overlapped* time splits each "
        "instant of device busy time equally among the categories running then (`categories` in "
        "`report.json`)."
    )
    s.limits(
        "classification is by kernel name only (a fused or custom kernel lands wherever its name matches); "
        "% kernel time counts concurrent kernels each, % busy is of the union of kernel time."
    )
    if _unavailable(s, val):
        return s.done()
    preset = val.get("preset") or "generic"
    lines = [
        f"**Preset:** {md_code(preset)} — {md_text(val.get('preset_reason') or 'no reason recorded', False)}"
        + (f"; {fmt_int(val.get('rule_count'))} rules" if val.get("rule_count") is not None else ""),
        f"**Unclassified (`other`):** {fmt_ms(val.get('other_ns'))} ms = {fmt_pct(val.get('other_pct'))}% of "
        f"{fmt_ms(val.get('total_kernel_ns'))} ms kernel time ({fmt_int(val.get('kernel_count'))} kernels)",
    ]
    if val.get("rules_file"):
        lines.append(
            f"User rules: {md_code(truncate(val['rules_file'], 120))}"
            + (" (replacing the preset)" if val.get("rules_replaced") else " (before the preset's)")
        )
    s.bullets(lines)
    overall = [r for r in rows_of(val, "overall") if _int(r.get("count")) > 0 or _int(r.get("total_ns")) > 0]
    s.sub("All devices")
    s.capped(
        overall,
        _CAT_COLS + [("Top kernel", "l")],
        lambda r: _cat_row(r)
        + [s.name((rows_of(r, "top_kernels") or [{}])[0].get("name"))],
        what="categories",
        csv="categories.csv",
        empty="No kernels.",
    )
    devs = rows_of(val, "devices")
    if len(devs) > 1:
        for d in devs[: ctx.top]:
            s.sub(f"Device {_dev(ctx, d.get('device_id'))} — busy {fmt_ms(d.get('busy_ns'))} ms")
            s.capped(
                [r for r in rows_of(d, "categories") if _int(r.get("count")) > 0],
                _CAT_COLS,
                _cat_row,
                what="categories",
                csv="categories_devices.csv",
            )
    phases = [p for p in rows_of(val, "phases") if _int(p.get("kernel_count")) > 0]
    for p in phases[: ctx.top]:
        name = p.get("phase") if p.get("phase") is not None else "unmapped"
        s.sub(f"Phase {md_code(name)} — {fmt_ms(p.get('total_kernel_ns'))} ms kernel time")
        s.capped(
            [r for r in rows_of(p, "categories") if _int(r.get("count")) > 0],
            _CAT_COLS,
            _cat_row,
            what="categories",
            csv="categories_phases.csv",
        )
    other = rows_of(val, "other_top_kernels")
    if other:
        s.sub("Largest unclassified kernels (candidates for `--categories` rules)")
        s.capped(
            other,
            [("Kernel", "l"), ("Calls", "r"), ("Kernel time (ms)", "r")],
            lambda r: [s.name(r.get("name")), fmt_int(r.get("count")), fmt_ms(r.get("total_ns"))],
            what="kernels",
        )
    _notes(s, val)
    return s.done()


# -------------------------------------------------------------------------------------------- phases
@_register("phases")
def render_phases(key: str, val: Any, ctx: Ctx) -> List[str]:
    if not isinstance(val, abc.Mapping):
        return render_generic(key, val, ctx)
    s = Sec(TITLES["phases"], ctx)
    s.derived(
        "NVTX push/pop range names mapped to phases by substring (longest match wins; `--phase-map` "
        "replaces the preset); a kernel's phase is that of the innermost phase-named range enclosing its "
        "launch call (`phases` in `report.json`)."
    )
    s.limits(
        "needs NVTX ranges from the serving engine; kernels launched outside any phase-named range are "
        "`unmapped`; wall time is CPU-side range time, summed over processes."
    )
    if _unavailable(s, val):
        return s.done()
    pm = val.get("phase_map") if isinstance(val.get("phase_map"), abc.Mapping) else {}
    counts = ", ".join(
        f"{md_text(k, False)}: {len(v) if isinstance(v, list) else 1} substrings" for k, v in pm.items()
    )
    s.para(
        f"**Phase map:** {md_code(val.get('source') or 'unknown')}"
        + (f" ({counts}; full lists in `report.json` → `phases.phase_map`)" if counts else "")
    )
    s.capped(
        rows_of(val, "phases"),
        [
            ("Phase", "l"),
            ("NVTX ranges", "r"),
            ("Wall (ms)", "r"),
            ("Kernels", "r"),
            ("Kernel time (ms)", "r"),
            ("GPU busy (ms)", "r"),
            ("% kernel time", "r"),
        ],
        lambda r: [
            md_code(r.get("phase")) or DASH,
            fmt_int(r.get("range_count")),
            fmt_ms(r.get("wall_ns")),
            fmt_int(r.get("kernel_count")),
            fmt_ms(r.get("gpu_time_ns")),
            fmt_ms(r.get("gpu_busy_ns")),
            fmt_pct(r.get("pct_of_kernel_time")),
        ],
        what="phases",
    )
    names = rows_of(val, "range_names")
    if names:
        s.sub("Range names that matched a phase")
        s.capped(
            names,
            [("Range", "l"), ("Phase", "l"), ("Count", "r")],
            lambda r: [s.name(r.get("name")), md_code(r.get("phase")) or DASH, fmt_int(r.get("count"))],
            what="range names",
            csv="phases_range_names.csv",
        )
    _notes(s, val)
    return s.done()


# --------------------------------------------------------------------------------------------- steps
_DIST_COLS = [
    ("Steps", "r"),
    ("p50 (ms)", "r"),
    ("p90 (ms)", "r"),
    ("p99 (ms)", "r"),
    ("Max (ms)", "r"),
    ("GPU busy %", "r"),
    ("Sync (ms)", "r"),
    ("Kernels / step", "r"),
]


def _dist_row(r: Row) -> List[str]:
    n = _int(r.get("count"))
    kps = _int(r.get("kernel_count")) / n if n else None
    return [
        fmt_int(r.get("count")),
        fmt_ms(r.get("p50_ns")),
        fmt_ms(r.get("p90_ns")),
        fmt_ms(r.get("p99_ns")),
        fmt_ms(r.get("max_ns")),
        fmt_pct(_pct_of(r.get("gpu_busy_ns"), r.get("total_ns"))),
        fmt_ms(r.get("sync_ns")),
        fmt_float(kps, 2),
    ]


def _step_table(s: Sec, rows: Sequence[Row], what: str) -> None:
    s.capped(
        list(rows),
        [
            ("Step", "r"),
            ("Phase", "l"),
            ("PID", "l"),
            ("Device", "r"),
            ("Start (ms)", "r"),
            ("Wall (ms)", "r"),
            ("GPU busy (ms)", "r"),
            ("GPU idle (ms)", "r"),
            ("Sync (ms)", "r"),
            ("Kernels", "r"),
            ("What differed (vs phase median)", "l"),
        ],
        lambda r: [
            fmt_int(r.get("index")),
            md_code(r.get("phase")) or DASH,
            _pid(s.ctx, r.get("pid")),
            md_cell(r.get("device")),
            _rel_ms(s.ctx, r.get("start_ns")),
            fmt_ms(r.get("wall_ns")),
            fmt_ms(r.get("gpu_busy_ns")),
            fmt_ms(r.get("gpu_idle_ns")),
            fmt_ms(r.get("sync_ns")),
            fmt_int(r.get("kernel_count")),
            md_cell(r.get("what_differed")) or DASH,
        ],
        what=what,
        csv="steps.csv",
    )


@_register("steps")
def render_steps(key: str, val: Any, ctx: Ctx) -> List[str]:
    if not isinstance(val, abc.Mapping):
        return render_generic(key, val, ctx)
    s = Sec(TITLES["steps"], ctx)
    method = str(val.get("method") or "")
    if method == "marker":
        how = (
            "marker kernels (sampling / argmax, or `--step-marker`): a step runs from one marker kernel's "
            "end to the next on the same device"
        )
    else:
        how = (
            "one NVTX push/pop range per step (a step-like range name on the launching threads, or "
            "`--step-range`), with the kernels launched inside it"
        )
    s.derived(
        f"{how}; per step, GPU busy = union of kernel intervals on the step's device within the step, "
        "sync = union of host-blocking CUDA calls of the step's process (`steps` in `report.json`)."
    )
    s.limits(
        "wall time is CPU-side for NVTX steps (host launch-ahead shifts work into the next step); GPU "
        "busy/idle is measured on the step's main device only; the whole capture is used (not the steady "
        "window)."
    )
    if _unavailable(s, val):
        return s.done()
    ranges = [x for x in (val.get("step_ranges") or []) if x]
    detect = md_code(method or "unknown")
    if ranges:
        detect += " on range " + ", ".join(md_code(truncate(x, 80)) for x in ranges[:5])
    if val.get("marker_regex"):
        detect += f" (marker regex {md_code(truncate(val['marker_regex'], 80))})"
    summ = val.get("summary") if isinstance(val.get("summary"), abc.Mapping) else {}
    tot = val.get("totals") if isinstance(val.get("totals"), abc.Mapping) else {}
    s.bullets(
        [
            f"**Detection:** {detect} · "
            f"**confidence {md_text(val.get('confidence') or 'unknown', False)}** — "
            f"{md_text(val.get('confidence_reason') or 'no reason recorded', False)}",
            f"**{fmt_int(val.get('step_count'))} steps**, wall p50 {fmt_ms(summ.get('p50_ns'))} ms · p90 "
            f"{fmt_ms(summ.get('p90_ns'))} ms · p99 {fmt_ms(summ.get('p99_ns'))} ms · max "
            f"{fmt_ms(summ.get('max_ns'))} ms",
            f"Over all steps: wall {fmt_ms(tot.get('wall_ns'))} ms, "
            f"GPU busy {fmt_ms(tot.get('gpu_busy_ns'))} ms "
            f"({fmt_pct(_pct_of(tot.get('gpu_busy_ns'), tot.get('wall_ns')))}%), GPU idle "
            f"{fmt_ms(tot.get('gpu_idle_ns'))} ms, host sync {fmt_ms(tot.get('sync_ns'))} ms, memcpy "
            f"{fmt_ms(tot.get('memcpy_ns'))} ms, {fmt_int(tot.get('kernel_count'))} kernels",
        ]
    )
    s.sub("Step time by phase")
    s.capped(
        rows_of(val, "by_phase"),
        [("Phase", "l")] + _DIST_COLS,
        lambda r: [md_code(r.get("phase")) or DASH] + _dist_row(r),
        what="phases",
        csv="steps_by_phase.csv",
    )
    by_pid = rows_of(val, "by_pid")
    if by_pid:
        s.sub("Step time by process")
        s.capped(
            by_pid,
            [("PID", "l")] + _DIST_COLS,
            lambda r: [_pid(ctx, r.get("pid"))] + _dist_row(r),
            what="PIDs",
            csv="steps_by_pid.csv",
        )
    slow = rows_of(val, "slowest")
    if slow:
        s.sub("Slowest steps")
        _step_table(s, slow, "steps")
    out = rows_of(val, "outliers")
    if out and [r.get("index") for r in out] == [r.get("index") for r in slow]:
        s.para("*The steps with the largest excess over their phase median are the same steps, in the same order.*")
    elif out:
        s.sub("Largest excess over the phase median")
        _step_table(s, out, "steps")
    s.para(
        f"*Start is relative to the trace start. All {fmt_int(len(rows_of(val, 'rows')))} per-step rows "
        "are in "
        "`tables/steps.csv`"
        + (" (capped; see `steps.rows_capped`)" if val.get("rows_capped") else "")
        + ".*"
    )
    _notes(s, val)
    return s.done()


# -------------------------------------------------------------------------------------------- graphs
@_register("graphs")
def render_graphs(key: str, val: Any, ctx: Ctx) -> List[str]:
    if not isinstance(val, abc.Mapping):
        return render_generic(key, val, ctx)
    s = Sec(TITLES["graphs"], ctx)
    s.derived(
        "`cudaGraphLaunch` / `cuGraphLaunch` calls, kernels with a graph node id or launched by a graph "
        "launch (correlation id), and `CUDA_GRAPH_TRACE` rows (`graphs` in `report.json`)."
    )
    s.limits(
        "with graph-level tracing (`--cuda-graph-trace=graph`) the kernels inside graphs are not recorded: "
        "kernel tables, categories and launch statistics miss them."
    )
    if _unavailable(s, val):
        return s.done()
    mode = str(val.get("trace_mode") or "none")
    if val.get("graph_level_hidden") or val.get("warning"):
        warn = val.get("warning") or "kernels inside CUDA graphs were not traced."
        s.para(f"> **Warning:** {md_rich(warn)}")
        if val.get("fix"):
            s.para(f"Fix: {md_code(val['fix'])}")
    kpl = val.get("kernels_per_launch") if isinstance(val.get("kernels_per_launch"), abc.Mapping) else {}
    items = [
        f"Trace mode: {md_code(mode)}"
        + (
            f" (capture setting {md_code(val['capture_graph_trace_mode'])})"
            if val.get("capture_graph_trace_mode")
            else ""
        ),
        f"Graph launches: {fmt_int(val.get('graph_launch_count'))} (host time in launch calls "
        f"{fmt_ms(val.get('graph_launch_host_ns'))} ms)",
        f"Kernels from graphs: {fmt_int(val.get('graph_kernel_count'))} = "
        f"{fmt_ms(val.get('graph_kernel_ns'))} ms, "
        f"**{fmt_pct(val.get('graph_kernel_pct'))}%** of kernel time",
    ]
    if kpl:
        items.append(
            f"Kernels per graph launch: min {fmt_int(kpl.get('min'))}, p50 {fmt_float(kpl.get('p50'), 1)}, "
            f"mean {fmt_float(kpl.get('mean'), 1)}, max {fmt_int(kpl.get('max'))} "
            f"(over {fmt_int(kpl.get('launches'))} launches)"
        )
    if _int(val.get("launches_without_kernels")):
        items.append(f"Graph launches with no traced kernel: {fmt_int(val.get('launches_without_kernels'))}")
    s.bullets(items)
    lbp = rows_of(val, "launches_by_pid")
    if lbp:
        s.sub("Graph launches by process")
        s.capped(
            lbp,
            [("PID", "l"), ("Launches", "r"), ("Host time (ms)", "r")],
            lambda r: [_pid(ctx, r.get("pid")), fmt_int(r.get("count")), fmt_ms(r.get("host_ns"))],
            what="PIDs",
        )
    gt = val.get("graph_trace") if isinstance(val.get("graph_trace"), abc.Mapping) else None
    if gt:
        s.sub("Whole-graph executions (graph-level trace)")
        s.para(f"{fmt_int(gt.get('count'))} graph executions, {fmt_ms(gt.get('total_ns'))} ms in all.")
        s.capped(
            rows_of(gt, "by_device"),
            [("Device", "l"), ("Executions", "r"), ("Total (ms)", "r"), ("Union (ms)", "r")],
            lambda r: [
                _dev(ctx, r.get("device_id")),
                fmt_int(r.get("count")),
                fmt_ms(r.get("total_ns")),
                fmt_ms(r.get("union_ns")),
            ],
            what="devices",
        )
    _notes(s, val)
    return s.done()


# -------------------------------------------------------------------------------------------- memory
def _gbps(r: Row) -> str:
    b, t = _num(r.get("bytes")), _num(r.get("total_ns"))
    if b is None or t is None or t <= 0:
        return DASH
    return fmt_float(b / t, 2)  # bytes/ns == GB/s


@_register("memory")
def render_memory(key: str, val: Any, ctx: Ctx) -> List[str]:
    if not isinstance(val, abc.Mapping):
        return render_generic(key, val, ctx)
    s = Sec(TITLES["memory"], ctx)
    s.derived(
        "`CUPTI_ACTIVITY_KIND_MEMCPY` rows (direction from copyKind, memory kinds from srcKind/dstKind), the "
        "API call that issued each copy (synchronous vs `*Async`), and CUDA alloc/free calls; steady-state "
        "window only (`memory` in `report.json`)."
    )
    s.limits(
        "GPU-side copy time and bytes only; allocations served by a caching allocator make no CUDA call and "
        "are invisible; per-step numbers need detected steps."
    )
    if _unavailable(s, val):
        return s.done()
    pg = val.get("pageable") if isinstance(val.get("pageable"), abc.Mapping) else {}
    sc = val.get("sync_copies") if isinstance(val.get("sync_copies"), abc.Mapping) else {}
    s.bullets(
        [
            f"Copies: {fmt_int(val.get('copy_count'))}, {fmt_bytes(val.get('copy_bytes'))}, "
            f"{fmt_ms(val.get('copy_ns'))} ms of GPU copy time",
            f"Pageable host copies (staged, cannot overlap): **{fmt_int(pg.get('count'))}**, "
            f"{fmt_bytes(pg.get('bytes'))}, {fmt_ms(pg.get('total_ns'))} ms",
            f"Synchronous copies (host blocked): **{fmt_int(sc.get('calls'))} calls**, host blocked "
            f"{fmt_ms(sc.get('host_blocked_ns'))} ms "
            f"({fmt_int(sc.get('pageable_count'))} of their copies pageable)",
        ]
    )
    s.sub("Copies by direction and memory kind")
    s.capped(
        rows_of(val, "by_kind"),
        [
            ("Direction", "l"),
            ("Source", "l"),
            ("Destination", "l"),
            ("Copies", "r"),
            ("Bytes", "r"),
            ("GPU time (ms)", "r"),
            ("GB/s", "r"),
        ],
        lambda r: [
            md_cell(r.get("direction")) or DASH,
            md_cell(r.get("src_kind_name")) or DASH,
            md_cell(r.get("dst_kind_name")) or DASH,
            fmt_int(r.get("count")),
            fmt_bytes(r.get("bytes")),
            fmt_ms(r.get("total_ns")),
            _gbps(r),
        ],
        what="kinds",
        csv="memory_by_kind.csv",
        empty="No memcpy rows in the window.",
    )
    by_api = rows_of(sc, "by_api")
    if by_api:
        s.sub("Synchronous copy calls")
        s.capped(
            by_api,
            [("API", "l"), ("Calls", "r"), ("Host blocked (ms)", "r")],
            lambda r: [s.name(r.get("name")), fmt_int(r.get("calls")), fmt_ms(r.get("host_blocked_ns"))],
            what="APIs",
        )
    ps = val.get("per_step") if isinstance(val.get("per_step"), abc.Mapping) else None
    if ps:
        s.sub("Per step")
        s.bullets(
            [
                f"{fmt_int(ps.get('copies_in_steps'))} copies inside {fmt_int(ps.get('step_count'))} steps: "
                f"median {fmt_float(ps.get('copies_per_step_median'), 1)} copies / "
                f"{fmt_bytes(ps.get('bytes_per_step_median'))} per step "
                f"(mean {fmt_float(ps.get('copies_per_step_mean'), 2)} / "
                f"{fmt_bytes(ps.get('bytes_per_step_mean'))}), "
                f"{fmt_dur(ps.get('copy_ns_per_step_mean'))} copy time per step on average",
                f"Inside steps: {fmt_int(ps.get('host_copies_in_steps'))} host copies, "
                f"{fmt_int(ps.get('pageable_in_steps'))} pageable, "
                f"{fmt_int(ps.get('sync_copies_in_steps'))} synchronous",
            ]
        )
        kinds = [r for r in (ps.get("by_kind_per_step") or []) if isinstance(r, abc.Mapping)]
        if kinds:
            s.capped(
                kinds,
                [("Direction", "l"), ("Source", "l"), ("Destination", "l"), ("Copies / step", "r"),
                 ("Bytes / step", "r"), ("GPU time / step", "r")],
                lambda r: [s.name(r.get("direction")), s.name(r.get("src_kind_name")), s.name(r.get("dst_kind_name")),
                           fmt_float(r.get("copies_per_step"), 2), fmt_bytes(r.get("bytes_per_step")),
                           fmt_dur(r.get("copy_ns_per_step"))],
                what="copy kinds",
            )
    al = val.get("alloc") if isinstance(val.get("alloc"), abc.Mapping) else {}
    fr = val.get("free") if isinstance(val.get("free"), abc.Mapping) else {}
    s.sub("Allocation")

    def alloc_line(what: str, r: Row) -> str:
        line = f"{what} calls: {fmt_int(r.get('count'))} ({fmt_ms(r.get('total_ns'))} ms)"
        if r.get("in_steps") is None:
            return line + "; no steps detected, so none can be placed in the loop"
        return line + f", {fmt_int(r.get('in_steps'))} inside steps ({fmt_ms(r.get('in_steps_ns'))} ms)"

    s.bullets([alloc_line("Alloc", al), alloc_line("Free", fr)])
    afa = rows_of(val, "alloc_free_by_api")
    if afa:
        s.capped(
            afa,
            [("API", "l"), ("Class", "l"), ("Calls", "r"), ("Total (ms)", "r"), ("In steps", "r")],
            lambda r: [
                s.name(r.get("name")),
                md_cell(r.get("class")) or DASH,
                fmt_int(r.get("count")),
                fmt_ms(r.get("total_ns")),
                fmt_int(r.get("in_steps")),
            ],
            what="APIs",
        )
    _notes(s, val)
    return s.done()


# ---------------------------------------------------------------------------------------------- nccl
_NCCL_COLS = [
    ("NCCL kernels", "r"),
    ("NCCL time (ms)", "r"),
    ("% of kernel time", "r"),
    ("Union (ms)", "r"),
]


def _nccl_row(r: Row) -> List[str]:
    return [
        fmt_int(r.get("count")),
        fmt_ms(r.get("total_ns")),
        fmt_pct(r.get("pct_of_kernel_ns")),  # a percentage despite its name
        fmt_ms(r.get("union_ns")),
    ]


@_register("nccl")
def render_nccl(key: str, val: Any, ctx: Ctx) -> List[str]:
    if not isinstance(val, abc.Mapping):
        return render_generic(key, val, ctx)
    s = Sec(TITLES["nccl"], ctx)
    s.derived(
        "kernels whose name contains `nccl`, per device and process; the k-th kernel of a collective on "
        "each rank (pid, GPU) is matched across ranks to measure start skew and who arrives last "
        "(`nccl` in `report.json`)."
    )
    s.limits(
        "NCCL kernel time includes waiting for the slowest rank, so a long NCCL kernel usually marks an "
        "*early* arriver, not a slow link; matching by order assumes every rank issues the same collectives; "
        "needs ≥ 2 ranks in one capture."
    )
    if _unavailable(s, val):
        return s.done()
    st = val.get("straggler") if isinstance(val.get("straggler"), abc.Mapping) else None
    if st:
        s.para(
            f"**Straggler: {md_text(st.get('late_rank'), False)}** arrives last in "
            f"{fmt_pct(_pct_of(st.get('late_share'), 1))}% "
            f"of {fmt_int(st.get('matched_collectives'))} matched collectives; "
            f"{md_text(st.get('waiting_rank'), False)}'s NCCL kernels take "
            f"{fmt_float(st.get('duration_ratio'), 2)}× the others' p50 because they wait for it "
            f"(Σ wait {fmt_ms(st.get('wait_ns_total'))} ms; "
            f"confidence {md_text(st.get('confidence'), False)}). "
            "Look at what the late rank does before each collective (host work, extra kernels, sync)."
        )
    else:
        s.para(f"**No straggler:** {md_text(val.get('straggler_reason') or 'no verdict recorded', False)}")
    ca = val.get("custom_allreduce") if isinstance(val.get("custom_allreduce"), abc.Mapping) else {}
    items = [
        f"NCCL kernels: {fmt_int(val.get('nccl_kernel_count'))}, {fmt_ms(val.get('nccl_total_ns'))} ms; "
        f"matched collectives {fmt_int(val.get('matched_collectives'))}, unmatched kernels "
        f"{fmt_int(val.get('unmatched_kernels'))}, Σ wait {fmt_ms(val.get('wait_ns_total'))} ms",
    ]
    if _int(ca.get("count")):
        names = ", ".join(md_code(truncate(n, 60)) for n in (ca.get("names") or [])[:5])
        items.append(
            f"Custom all-reduce kernels (not NCCL): {fmt_int(ca.get('count'))}, "
            f"{fmt_ms(ca.get('total_ns'))} ms"
            + (f" ({names})" if names else "")
        )
    s.bullets(items)
    ranks = rows_of(val, "ranks")
    matched = val.get("matched_collectives")
    if ranks:
        s.sub("Ranks")
        s.capped(
            ranks,
            [
                ("Rank", "l"),
                ("NCCL kernels", "r"),
                ("Matched", "r"),
                ("Mean (µs)", "r"),
                ("p50 (µs)", "r"),
                ("Mean start skew (µs)", "r"),
                ("Last to arrive", "r"),
            ],
            lambda r: [
                md_cell(r.get("rank")) or DASH,
                fmt_int(r.get("nccl_count")),
                fmt_int(r.get("matched")),
                fmt_us(r.get("mean_ns")),
                fmt_us(r.get("p50_ns")),
                fmt_us(r.get("mean_start_skew_ns")),
                f"{fmt_int(r.get('last_arrival_count'))} "
                f"({fmt_pct(_pct_of(r.get('last_arrival_count'), matched))}%)",
            ],
            what="ranks",
            csv="nccl_ranks.csv",
        )
    s.sub("Per device")
    s.capped(
        rows_of(val, "per_device"),
        [("Device", "l")] + _NCCL_COLS,
        lambda r: [_dev(ctx, r.get("device_id"))] + _nccl_row(r),
        what="devices",
        csv="nccl_per_device.csv",
    )
    pp = rows_of(val, "per_pid")
    if pp:
        s.sub("Per process")
        s.capped(
            pp,
            [("PID", "l")] + _NCCL_COLS,
            lambda r: [_pid(ctx, r.get("pid"))] + _nccl_row(r),
            what="PIDs",
            csv="nccl_per_pid.csv",
        )
    bn = rows_of(val, "by_name")
    if bn:
        s.sub("Collectives")
        s.capped(
            bn,
            [("Collective kernel", "l"), ("Kernels", "r"), ("Total (ms)", "r")],
            lambda r: [s.name(r.get("name")), fmt_int(r.get("count")), fmt_ms(r.get("total_ns"))],
            what="collectives",
            csv="nccl_by_name.csv",
        )
    _notes(s, val)
    return s.done()


# ----------------------------------------------------------------------------------------------- CSV
STEP_COLUMNS = (
    "index",
    "start_ns",
    "end_ns",
    "wall_ns",
    "phase",
    "pid",
    "device",
    "gpu_busy_ns",
    "gpu_idle_ns",
    "kernel_count",
    "sync_ns",
    "memcpy_ns",
)
STEPS_SPEC: Spec = tuple((c, raw(c)) for c in STEP_COLUMNS)

CATEGORIES_SPEC: Spec = (
    ("category", raw("category")),
    ("count", raw("count")),
    ("total_ms", ms("total_ns")),
    ("pct_kernel_time", raw("pct")),
    ("nonoverlap_ms", ms("nonoverlap_ns")),
    ("nonoverlap_pct", raw("nonoverlap_pct")),
    ("total_ns", raw("total_ns")),
    ("nonoverlap_ns", raw("nonoverlap_ns")),
    ("top_kernel", lambda r: (rows_of(r, "top_kernels") or [{}])[0].get("name")),
    ("top_kernel_ns", lambda r: (rows_of(r, "top_kernels") or [{}])[0].get("total_ns")),
    ("preset", raw("preset")),
)


def _part(name: str):  # noqa: ANN202 - getter factory
    def get(r: Row) -> Any:
        p = r.get("idle_parts")
        return p.get(name) if isinstance(p, abc.Mapping) else None

    return get


ACCOUNTING_SPEC: Spec = (
    ("scope", raw("scope")),
    ("device_id", raw("device_id")),
    ("window_start_ns", raw("window_start_ns")),
    ("window_end_ns", raw("window_end_ns")),
    ("window_ns", raw("window_ns")),
    ("busy_ns", raw("busy_ns")),
    ("idle_ns", raw("idle_ns")),
    ("busy_pct", raw("busy_pct")),
    ("idle_pct", raw("idle_pct")),
    *((f"idle_{k}_ns", _part(k)) for k, _ in IDLE_PARTS),
    ("idle_in_sync_memcpy_ns", raw("idle_in_sync_memcpy_ns")),
    ("gap_count", raw("gap_count")),
    ("short_gap_count", raw("short_gap_count")),
    ("idle_in_short_gaps_ns", raw("idle_in_short_gaps_ns")),
    ("idle_in_short_gaps_pct", raw("idle_in_short_gaps_pct")),
)


def _steps_rows(report: Row) -> List[Row]:
    return rows_of(section(report, "steps"), "rows")


def _categories_rows(report: Row) -> List[Row]:
    cat = section(report, "categories")
    return [{**r, "preset": cat.get("preset")} for r in rows_of(cat, "overall")]


def _accounting_rows(report: Row) -> List[Row]:
    acc = section(report, "accounting")
    steady = acc.get("steady") if isinstance(acc.get("steady"), abc.Mapping) else {}
    return [{**d, "scope": acc.get("scope")} for d in rows_of(steady, "devices")]


DIAGNOSIS_CSV_TABLES = [
    ("steps.csv", STEPS_SPEC, _steps_rows),
    ("categories.csv", CATEGORIES_SPEC, _categories_rows),
    ("accounting.csv", ACCOUNTING_SPEC, _accounting_rows),
]

register()
