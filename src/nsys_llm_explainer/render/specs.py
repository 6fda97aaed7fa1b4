"""The table specs of the report: one per ``tables/*.csv`` file, whose shown columns the sections reuse. A row
function selects, flattens (a parent's fields beside child rows, :class:`~.table.Joined`) or joins report rows,
never re-derives them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, List, Optional

from ..vocabulary.units import fmt_bool, fmt_bytes, fmt_float, fmt_ms, fmt_num
from .document import Cell, Code, Data, Inline, inline, joined
from .feature_tables import COPY_PATHS, STEP_SYNC, THREAD_WAITS, UNIFIED_MEMORY, UNIFIED_MEMORY_BREAKDOWN
from .host_samples import CAUSE_COL, HOST_SAMPLES, attach
from .table import (
    Col,
    Getter,
    Table,
    csv_col,
    dur_col,
    each,
    field_of,
    fmt_col,
    int_col,
    listed,
    name_col,
    pct_col,
    raw,
    scaled,
    text_col,
    with_fields,
)
from .text import plain

if TYPE_CHECKING:
    from ..findings.base import Check, Finding
    from ..report import Report

OPS = {">=": "≥", "<=": "≤", "==": "=", ">": ">", "<": "<"}


# --------------------------------------------------------------------------------------- row getters
def _device(d: Any) -> Dict[str, Any]:
    return {"device_id": d.device_id}


def category_rows(report: Report) -> List[Any]:
    cat = report.categories
    out: List[Any] = with_fields(cat.overall, scope="all", device_id=None, phase=None, preset=cat.preset)
    for d in cat.devices:  # one iteration per device
        out += with_fields(d.categories, scope="device", device_id=d.device_id, phase=None, preset=None,
                           top_kernels=None)
    for p in cat.phases:  # one iteration per phase
        out += with_fields(p.categories, scope="phase", device_id=None, phase=p.phase, preset=None, top_kernels=None)
    return out


def launch_rows(report: Report) -> List[Any]:
    la = report.launch
    rows: List[Any] = with_fields([la.overall], scope="overall", device_id=None, pid=None) if la.overall else []
    return (rows + with_fields(la.per_device, scope="device", pid=None)
            + with_fields(la.per_pid, scope="pid", device_id=None))


def sync_api_rows(report: Report) -> List[Any]:
    sy = report.sync
    return with_fields(sy.sync_apis, blocking=True) + with_fields(sy.nonblocking_apis, blocking=False)


def memcpy_rows(report: Report) -> List[Any]:
    mc = report.memcpy
    return (with_fields(mc.by_kind, op="memcpy", mem_kind_name=None)
            + with_fields(mc.memset, op="memset", direction=None, src_kind_name=None, dst_kind_name=None))


@dataclass(frozen=True)
class NvtxPidRange:
    """One (process, range name) of ``nvtx_by_pid.csv``: its ranges (``nvtx.by_pid``; None when only kernels were
    attributed to it) and the kernels attributed to it (``nvtx.attribution.by_pid``; None when none were)."""

    pid: int
    name: str
    count: Optional[int]
    total_ns: Optional[int]
    kernel_count: Optional[int]
    inclusive_ns: Optional[int]


def nvtx_by_pid_rows(report: Report) -> List[NvtxPidRange]:
    """``nvtx.by_pid`` joined with ``nvtx.attribution.by_pid`` on (pid, range name)."""
    att = {(a.pid, a.name): a for a in report.attribution.by_pid}
    out: List[NvtxPidRange] = []
    for r in report.nvtx.by_pid:  # one iteration per (pid, range name)
        a = att.pop((r.pid, r.name), None)
        out.append(NvtxPidRange(r.pid, r.name, r.count, r.total_ns, a.kernel_count if a else None,
                                a.inclusive_ns if a else None))
    return out + [NvtxPidRange(a.pid, a.name, None, None, a.kernel_count, a.inclusive_ns) for a in att.values()]


def _field(key: str, field: str) -> Getter:
    """``row.key.field`` (a nested result's value; None when the row has none)."""
    return lambda r: None if field_of(r, key) is None else field_of(field_of(r, key), field)


def _first(key: str, field: str) -> Getter:
    """``row.key[0].field`` (the first element of a nested list; None when it is empty)."""
    return lambda r: field_of(field_of(r, key)[0], field) if field_of(r, key) else None


def _top_name(r: Any) -> Any:
    """The name of the row's first ``top_kernels`` entry (a category's or trait's largest kernel; None when none)."""
    top = field_of(r, "top_kernels")
    return top[0].name if top else None


# ------------------------------------------------------------------------------------ finding checks
def check_spans(c: Check) -> Inline:
    """One finding check as spans: ``metric (scope) observed op threshold``."""
    s = c.scope
    quals: List[Inline] = []
    if s.window == "full":
        quals.append(("full capture",))
    if s.device_id is not None:
        quals.append((Data(f"device {s.device_id}"),))
    for name in (s.kind, s.detail, s.name, s.trait):
        if name:
            quals.append((Code(name, 60),))
    op = OPS.get(c.op)
    return inline(Data(c.metric), (" (", joined(quals, ", "), ")") if quals else None, " ",
                  fmt_num(c.observed), " ", op if op else Data(c.op), " ", fmt_num(c.threshold))


def checks_text(f: Finding) -> str:
    """The finding's checks as plain text (CSV ``checks``): :func:`check_spans` without markup."""
    return "; ".join(plain(check_spans(c)) for c in f.checks)


# -------------------------------------------------------------------------------------------- tables
FINDINGS: Table[Report] = Table("findings.csv", (
    csv_col("id", "severity", "confidence", "category", "title"),
    dur_col("time_at_stake_ns", "time_at_stake"),
    csv_col("device_id"),
    Col((("cause_kind", lambda r: r.cause[0] if r.cause else None),
         ("cause_detail", lambda r: r.cause[1] if r.cause else None))),
    Col((("evidence", listed("evidence", " | ")), ("recommendation", listed("recommendation", " | ")),
         ("checks", checks_text))),
), lambda rep: rep.findings)

DEVICES: Table[Report] = Table("devices.csv", (
    csv_col("device_id", "role", "window_start_ns", "window_end_ns"),
    dur_col("window_ns", "window"), dur_col("busy_ns", "busy"), dur_col("idle_ns", "idle"),
    csv_col("busy_pct", "idle_pct"),
    dur_col("copy_busy_ns", "copy_busy"), dur_col("copy_only_ns", "copy_only"),
    csv_col("kernel_count", "launches_per_s", "kernel_p50_ns", "gap_count"),
    Col(tuple((f"full_{k}", _field("full", k)) for k in ("window_start_ns", "window_end_ns", "window_ns", "busy_ns",
                                                          "idle_ns", "busy_pct", "idle_pct"))),
), lambda rep: rep.gpu_time.devices)

IDLE_CAUSES: Table[Report] = Table("idle_causes.csv", (
    csv_col("device_id"),
    text_col("kind", "kind", "cause", code=True),
    name_col("detail", "detail", "detail", 60),
    Col((("ns", raw("ns")), ("ms", scaled("ns", 6))), "idle (ms)", lambda r: fmt_ms(field_of(r, "ns")), True,
        raw("ns"), "ns"),
    pct_col("pct_of_window", "pct_of_window", "% of window"),
    pct_col("pct_of_idle", "pct_of_idle", "% of idle"),
    int_col("gap_count", "gap_count", "gaps"),
    Col((("one_time", raw("one_time")), ("short_gap_ns", raw("short_gap_ns")))),
    Col(tuple((f"example_{k}", _first("examples", k)) for k in ("start_ns", "end_ns", "ns"))),
    CAUSE_COL,
), lambda rep: each(rep.idle_causes.devices, lambda d: attach(rep, d.device_id, d.causes), _device))

GAPS: Table[Report] = Table("gpu_idle_gaps.csv", (
    csv_col("device_id", "start_ns", "end_ns"),
    dur_col("duration_ns", "duration", "length", unit="us"),
    text_col("cause_kind", "cause_kind", "cause", code=True),
    name_col("cause_detail", "cause_detail", "detail", 40),
    name_col("kernel_before", "kernel_before", "kernel before", 50),
    name_col("kernel_after", "kernel_after", "kernel after", 50),
), lambda rep: each(rep.gpu_time.devices, lambda d: d.largest_gaps, _device))

GAP_HISTOGRAM: Table[Report] = Table("gap_histogram.csv", (
    csv_col("device_id", "bucket", "lo_ns", "hi_ns", "count"), dur_col("total_ns", "total"),
), lambda rep: each(rep.gpu_time.devices, lambda d: d.gap_histogram, _device))

_KERNEL_STATS = (
    int_col("count", "calls", "calls"),
    dur_col("total_ns", "total", "total"),
    pct_col("pct", "pct_kernel_time", "% of kernel time"),
    dur_col("avg_ns", "avg", "avg", unit="us"),
    dur_col("p50_ns", "p50", "p50", unit="us"),
    dur_col("p90_ns", "p90", "p90", unit="us"),
    dur_col("p99_ns", "p99", unit="us"),
    dur_col("min_ns", "min", unit="us"),
    dur_col("max_ns", "max", "max", unit="us"),
)
KERNELS: Table[Report] = Table("kernels.csv", (name_col("name", "kernel_name", "kernel"), csv_col("device_id"))
                + _KERNEL_STATS, lambda rep: rep.kernels.by_name_device)
KERNELS_BY_PID: Table[Report] = Table("kernels_by_pid.csv", (csv_col("pid"), name_col("name", "kernel_name", "kernel"),
                                              csv_col("device_id")) + _KERNEL_STATS + (csv_col("pct_of_pid"),),
                       lambda rep: rep.kernels.by_pid_name)

#: a category's or trait's largest kernel, shortened in monospace
_TOP_KERNEL = Col((("top_kernel", _top_name),), "top kernel",
                  lambda r: (Code(_top_name(r), 60),) if _top_name(r) else (), value=_top_name, key="top_kernel")
KERNEL_TRAITS: Table[Report] = Table("kernel_traits.csv", (
    text_col("trait", "trait", "trait", code=True),
    pct_col("share_pct", "share_pct", "% of kernel time"),
    int_col("kernel_count", "kernel_count", "kernels"),
    dur_col("total_ns", "total", "total"),
    dur_col("p50_ns", "p50", "p50", unit="us"),
    _TOP_KERNEL,
    text_col("meaning", "meaning", "what it is"),
), lambda rep: list(rep.traits.traits.values()))



CATEGORIES: Table[Report] = Table("categories.csv", (
    csv_col("scope", "device_id", "phase"),
    text_col("category", "category", "category", code=True),
    int_col("count", "count", "kernels"),
    dur_col("total_ns", "total", "total"),
    pct_col("pct", "pct_kernel_time", "% of kernel time"),
    dur_col("nonoverlap_ns", "nonoverlap"),
    csv_col("nonoverlap_pct"),
    _TOP_KERNEL,
    csv_col("preset"),
), category_rows)

STEP_COLUMNS = ("index", "start_ns", "end_ns", "wall_ns", "phase", "pid", "device", "gpu_busy_ns",
                "gpu_idle_ns", "kernel_count", "sync_ns", "memcpy_ns")
STEPS: Table[Report] = Table("steps.csv", (csv_col(*STEP_COLUMNS),), lambda rep: rep.steps.rows)

STEPS_BY_PHASE: Table[Report] = Table("steps_by_phase.csv", (
    text_col("phase", "phase", "phase"),
    int_col("count", "steps", "steps"),
    dur_col("p50_ns", "p50", "p50 step"),
    dur_col("p90_ns", "p90", "p90 step"),
    dur_col("p99_ns", "p99"),
    dur_col("max_ns", "max", "max step"),
    dur_col("total_ns", "total", "total"),
    dur_col("gpu_busy_ns", "gpu_busy", "GPU busy"),
    dur_col("gpu_idle_ns", "gpu_idle", "GPU idle"),
    dur_col("sync_ns", "sync", "sync"),
    csv_col("kernel_count", "avg_ns", "min_ns", "memcpy_ns"),
), lambda rep: rep.steps.by_phase)

PHASES: Table[Report] = Table("phases.csv", (
    text_col("phase", "phase", "phase"),
    int_col("range_count", "range_count", "ranges"),
    dur_col("wall_ns", "wall", "wall"),
    int_col("kernel_count", "kernel_count", "kernels"),
    dur_col("gpu_time_ns", "gpu_time", "kernel time"),
    dur_col("gpu_busy_ns", "gpu_busy"),
    pct_col("pct_of_kernel_time", "pct_of_kernel_time", "% of kernel time"),
), lambda rep: rep.phases.phases)

LAUNCH: Table[Report] = Table("launch.csv", (
    csv_col("scope"),
    Col((("device_id", raw("device_id")), ("pid", raw("pid"))), "device",
        lambda r: Cell(field_of(r, "device_id") if field_of(r, "device_id") is not None
                       else f"pid {field_of(r, 'pid')}"),
        value=raw("device_id"), key="device_id"),
    int_col("launches", "launches", "launches"),
    fmt_col("launches_per_s", "launches_per_s", "launches/s", fmt_num),
    dur_col("window_ns", "window"),
    dur_col("p50_ns", "p50", "kernel p50", unit="us"),
    dur_col("p90_ns", "p90", "kernel p90", unit="us"),
    dur_col("p99_ns", "p99", unit="us"),
    pct_col("pct_under_5us", "pct_under_5us", "% < 5 µs"),
    pct_col("pct_under_10us", "pct_under_10us", "% < 10 µs"),
    pct_col("pct_under_20us", "pct_under_20us"),
    fmt_col("launch_storm", "launch_storm", "storm", fmt_bool, right=False),
), launch_rows)

_SYNC_STATS = (
    int_col("count", "calls", "calls"),
    dur_col("total_ns", "total", "total"),
    dur_col("avg_ns", "avg", "avg", unit="us"),
    dur_col("p50_ns", "p50", "p50", unit="us"),
    dur_col("max_ns", "max", "max", unit="us"),
)
SYNC_APIS: Table[Report] = Table("sync_apis.csv", (name_col("name", "api_name", "API"), csv_col("blocking"))
                                 + _SYNC_STATS, sync_api_rows)
SYNC_BY_PID: Table[Report] = Table("sync_by_pid.csv", (csv_col("pid"), name_col("name", "api_name", "API"))
                                   + _SYNC_STATS,
                    lambda rep: rep.sync.per_pid)

CUDA_API: Table[Report] = Table("cuda_api.csv", (
    name_col("name", "api_name", "API"),
    text_col("api_class", "api_class", "class"),
    csv_col("event_class"),
    int_col("count", "calls", "calls"),
    dur_col("total_ns", "total", "total"),
    pct_col("pct", "pct", "% of API time"),
    dur_col("avg_ns", "avg", "avg", unit="us"),
    dur_col("p50_ns", "p50", unit="us"),
    dur_col("min_ns", "min", unit="us"),
    dur_col("max_ns", "max", "max", unit="us"),
    Col((("raw_names", listed("raw_names")),)),
), lambda rep: rep.cuda_api.apis)

MEMCPY: Table[Report] = Table("memcpy.csv", (
    text_col("op", "op", "op"),
    text_col("direction", "direction", "direction"),
    Col((("src_kind", raw("src_kind_name")), ("dst_kind", raw("dst_kind_name")), ("mem_kind", raw("mem_kind_name"))),
        "memory", lambda r: Cell(f"{field_of(r, 'src_kind_name')} → {field_of(r, 'dst_kind_name')}"
                                 if field_of(r, "src_kind_name") else (field_of(r, "mem_kind_name") or ""))),
    int_col("count", "count", "count"),
    fmt_col("bytes", "bytes", "bytes", fmt_bytes),
    dur_col("total_ns", "total", "total"),
    dur_col("avg_ns", "avg", "avg", unit="us"),
    dur_col("p50_ns", "p50", unit="us"),
    dur_col("min_ns", "min", unit="us"),
    dur_col("max_ns", "max", unit="us"),
    fmt_col("gb_per_s", "gb_per_s", "GB/s", lambda v: fmt_float(v, 2)),
), memcpy_rows)

#: the statistics columns of an NVTX range row and of a group of them (after their name and style columns)
_NVTX_STATS = (
    int_col("count", "count", "count"),
    dur_col("total_ns", "total", "total"),
    dur_col("avg_ns", "avg", "avg"),
    dur_col("p50_ns", "p50", unit="us"),
    dur_col("min_ns", "min", unit="us"),
    dur_col("max_ns", "max", "max"),
    csv_col("pct_total"),
    dur_col("self_ns", "self", "self"),
    csv_col("pct_self"),
    dur_col("outer_ns", "outer"),     # total less ranges nested in one of the same name (the report: a note)
)

NVTX_RANGES: Table[Report] = Table("nvtx_ranges.csv", (
    name_col("name", "range_name", "range", 60),
    text_col("style", "style", "style"),
    *_NVTX_STATS,
), lambda rep: rep.nvtx.ranges)

NVTX_RANGE_GROUPS: Table[Report] = Table("nvtx_range_groups.csv", (   # header only when no names group together
    name_col("name", "range_group", "range (digit runs as N)", 60),
    text_col("style", "style", "style"),
    int_col("name_count", "name_count", "names"),
    *_NVTX_STATS,
), lambda rep: rep.nvtx.groups or ())

NVTX_BY_PID: Table[Report] = Table("nvtx_by_pid.csv", (
    csv_col("pid"), name_col("name", "range_name", "range"), csv_col("count"), dur_col("total_ns", "total"),
    csv_col("kernel_count"), dur_col("inclusive_ns", "kernel_inclusive"),
), nvtx_by_pid_rows)

NVTX_ATTRIBUTION: Table[Report] = Table("nvtx_attribution.csv", (
    name_col("name", "range_name", "range"), text_col("style", "style", "style"), csv_col("kernel_count"),
    dur_col("inclusive_ns", "inclusive"), dur_col("innermost_ns", "innermost"),
    csv_col("innermost_kernel_count", "pct_of_kernel_time"),
), lambda rep: rep.attribution.ranges)

NCCL_RANKS: Table[Report] = Table("nccl_ranks.csv", (
    text_col("rank", "rank", "rank"), csv_col("pid", "device_id"),
    int_col("nccl_count", "nccl_count", "NCCL kernels"),   # every NCCL kernel of the rank, matched or not
    dur_col("nccl_total_ns", "nccl_total", "total"),
    dur_col("mean_ns", "mean", "mean", unit="us"),
    dur_col("p50_ns", "p50", "p50", unit="us"),
    dur_col("mean_start_skew_ns", "mean_start_skew", "mean start skew", unit="us"),
    int_col("last_arrival_count", "last_arrival_count", "last to arrive"),
    dur_col("wait_ns_total", "wait", "wait"),
    dur_col("wait_caused_ns", "wait_caused", "waits caused"),
    csv_col("matched"),
), lambda rep: rep.nccl.ranks)   # the arrival figures None for a rank without matched collectives


#: every CSV file, in the order written
CSV_TABLES: List[Table[Report]] = [
    FINDINGS, DEVICES, IDLE_CAUSES, GAPS, GAP_HISTOGRAM, KERNELS, KERNELS_BY_PID, KERNEL_TRAITS, CATEGORIES,
    PHASES, STEPS, STEPS_BY_PHASE, LAUNCH, SYNC_APIS, SYNC_BY_PID, CUDA_API, MEMCPY, NVTX_RANGES, NVTX_RANGE_GROUPS,
    NVTX_BY_PID,
    NVTX_ATTRIBUTION, NCCL_RANKS,
    UNIFIED_MEMORY, UNIFIED_MEMORY_BREAKDOWN,
    HOST_SAMPLES,
    STEP_SYNC,   # per-step synchronization
    THREAD_WAITS,   # what other threads did while the launching thread waited
    COPY_PATHS,  # copy engines as a resource
]
