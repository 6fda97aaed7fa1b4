"""CSV tables (``tables/*.csv``): every row of the report dict, never capped by ``--top``, full names.

Written with the :mod:`csv` module (``QUOTE_MINIMAL``, ``\\r\\n`` line ends, UTF-8): names holding commas,
quotes or newlines round-trip through :func:`csv.reader`. Every file has its header row even when the
table is empty. Missing values are empty cells.

Column conventions (integer ns are exact; derived units are exact decimal renderings of them):

* ``*_ns`` — integer nanoseconds as in ``report.json``; ``*_ms`` = ns / 10⁶ (6 decimals),
  ``*_us`` = ns / 10³ (3 decimals): same number, another unit, no rounding.
* ``calls`` / ``count`` — number of intervals in the group; ``pct_*`` — percentages as in ``report.json``.

Files (rows come from the named report.json fields):

* ``kernels.csv`` — ``kernels`` (per kernel name and device): ``kernel_name,device_id,total_ms,calls,avg_us,
  p50_us,p90_us,pct_kernel_time,total_ns,avg_ns,p50_ns,p90_ns,min_ns,max_ns``.
* ``kernels_by_pid.csv`` — ``pids.kernels_by_pid``; ``pct_of_pid`` = share of that PID's kernel time.
* ``nvtx_ranges.csv`` — ``nvtx.ranges`` (name, style, durations, self time).
* ``nvtx_by_pid.csv`` — ``nvtx.by_pid`` joined with ``nvtx.attribution.by_pid`` on (pid, range name):
  range count/time and attributed kernel count/inclusive kernel time (empty when not attributed).
* ``nvtx_attribution.csv`` — ``nvtx.attribution.ranges``.
* ``gpu_idle.csv`` — ``devices`` (window, busy, idle per device).
* ``gpu_idle_gaps.csv`` — ``devices[].largest_gaps`` (the largest gaps the analysis kept).
* ``gap_histogram.csv`` — ``devices[].gap_histogram``; ``hi_ns`` empty = unbounded.
* ``launch.csv`` — ``launch.overall`` / ``per_device`` / ``per_pid`` with a ``scope`` column.
* ``sync_by_pid.csv`` — ``sync.per_pid`` (host-blocking calls only).
* ``sync_apis.csv`` — ``sync.sync_apis`` (``blocking=true``) and ``sync.nonblocking_apis`` (``false``).
* ``cuda_api.csv`` — ``cuda_api.apis``; ``raw_names`` joined with ``;``.
* ``memcpy.csv`` — ``memcpy.by_kind`` rows (``op=memcpy``) and ``memcpy.memset`` rows (``op=memset``).
* Diagnosis sections (top-level keys not listed above): each list of row dicts at ``report[key][field]``
  becomes ``<key>_<field>.csv`` (``<key>.csv`` when the section itself is a list), columns = union of row
  keys in first-seen order, nested values as compact JSON.
"""

from __future__ import annotations

import csv
import json
from collections import abc
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Mapping, Sequence, Tuple

from .base import Renderer, extra_section_keys, rows_of, section, table_stem

Row = Mapping[str, Any]
Getter = Callable[[Row], Any]
Spec = Sequence[Tuple[str, Getter]]


def _exact(ns: Any, digits: int) -> str:
    """Integer ns / 10**digits as an exact decimal string ('' for missing)."""
    if ns is None or isinstance(ns, bool):
        return ""
    if isinstance(ns, float):
        if ns != ns or ns in (float("inf"), float("-inf")):
            return ""
        if ns != int(ns):
            return f"{ns / 10**digits:.{digits + 3}f}"
    n = int(ns)
    sign = "-" if n < 0 else ""
    q, r = divmod(abs(n), 10**digits)
    return f"{sign}{q}.{r:0{digits}d}"


def ms(key: str) -> Getter:
    return lambda r: _exact(r.get(key), 6)


def us(key: str) -> Getter:
    return lambda r: _exact(r.get(key), 3)


def raw(key: str) -> Getter:
    return lambda r: r.get(key)


def _cell(v: Any) -> Any:
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (list, tuple, dict)):
        return json.dumps(v, separators=(",", ":"), allow_nan=False, default=str)
    return v


def write_csv(path: Path, header: Sequence[str], rows: Iterable[Sequence[Any]]) -> Path:
    """Write one CSV file (header row always present)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8", errors="replace") as fh:
        w = csv.writer(fh, quoting=csv.QUOTE_MINIMAL)
        w.writerow(list(header))
        for row in rows:
            w.writerow([_cell(v) for v in row])
    return path


def write_spec(path: Path, spec: Spec, rows: Iterable[Row]) -> Path:
    return write_csv(path, [c for c, _ in spec], ([g(r) for _, g in spec] for r in rows))


# ---------------------------------------------------------------------------------------------- specs
KERNEL_SPEC: Spec = (
    ("kernel_name", raw("name")),
    ("device_id", raw("device_id")),
    ("total_ms", ms("total_ns")),
    ("calls", raw("count")),
    ("avg_us", us("avg_ns")),
    ("p50_us", us("p50_ns")),
    ("p90_us", us("p90_ns")),
    ("pct_kernel_time", raw("pct")),
    ("total_ns", raw("total_ns")),
    ("avg_ns", raw("avg_ns")),
    ("p50_ns", raw("p50_ns")),
    ("p90_ns", raw("p90_ns")),
    ("min_ns", raw("min_ns")),
    ("max_ns", raw("max_ns")),
)
KERNEL_BY_PID_SPEC: Spec = (
    ("pid", raw("pid")),
    ("kernel_name", raw("name")),
    ("device_id", raw("device_id")),
    ("total_ms", ms("total_ns")),
    ("calls", raw("count")),
    ("avg_us", us("avg_ns")),
    ("p50_us", us("p50_ns")),
    ("p90_us", us("p90_ns")),
    ("pct_kernel_time", raw("pct")),
    ("pct_of_pid", raw("pct_of_pid")),
    ("total_ns", raw("total_ns")),
    ("avg_ns", raw("avg_ns")),
    ("p50_ns", raw("p50_ns")),
    ("p90_ns", raw("p90_ns")),
    ("p99_ns", raw("p99_ns")),
    ("min_ns", raw("min_ns")),
    ("max_ns", raw("max_ns")),
)
NVTX_SPEC: Spec = (
    ("range_name", raw("name")),
    ("style", raw("style")),
    ("count", raw("count")),
    ("total_ms", ms("total_ns")),
    ("avg_us", us("avg_ns")),
    ("p50_us", us("p50_ns")),
    ("min_us", us("min_ns")),
    ("max_us", us("max_ns")),
    ("pct_total", raw("pct_total")),
    ("self_ms", ms("self_ns")),
    ("pct_self", raw("pct_self")),
    ("total_ns", raw("total_ns")),
    ("avg_ns", raw("avg_ns")),
    ("p50_ns", raw("p50_ns")),
    ("min_ns", raw("min_ns")),
    ("max_ns", raw("max_ns")),
    ("self_ns", raw("self_ns")),
)
NVTX_BY_PID_SPEC: Spec = (
    ("pid", raw("pid")),
    ("range_name", raw("name")),
    ("count", raw("count")),
    ("total_ms", ms("total_ns")),
    ("total_ns", raw("total_ns")),
    ("kernel_count", raw("kernel_count")),
    ("kernel_inclusive_ms", ms("inclusive_ns")),
    ("kernel_inclusive_ns", raw("inclusive_ns")),
)
ATTRIBUTION_SPEC: Spec = (
    ("range_name", raw("name")),
    ("kernel_count", raw("kernel_count")),
    ("inclusive_ms", ms("inclusive_ns")),
    ("innermost_ms", ms("innermost_ns")),
    ("innermost_kernel_count", raw("innermost_kernel_count")),
    ("pct_of_kernel_time", raw("pct_of_kernel_time")),
    ("inclusive_ns", raw("inclusive_ns")),
    ("innermost_ns", raw("innermost_ns")),
)
IDLE_SPEC: Spec = (
    ("device_id", raw("device_id")),
    ("window_start_ns", raw("window_start_ns")),
    ("window_end_ns", raw("window_end_ns")),
    ("window_ms", ms("window_ns")),
    ("busy_ms", ms("busy_ns")),
    ("idle_ms", ms("idle_ns")),
    ("idle_pct", raw("idle_pct")),
    ("busy_pct", raw("busy_pct")),
    ("gap_count", raw("gap_count")),
    ("window_ns", raw("window_ns")),
    ("busy_ns", raw("busy_ns")),
    ("idle_ns", raw("idle_ns")),
)
GAP_SPEC: Spec = (
    ("device_id", raw("device_id")),
    ("start_ns", raw("start_ns")),
    ("end_ns", raw("end_ns")),
    ("duration_ns", raw("duration_ns")),
    ("kernel_before", raw("kernel_before")),
    ("kernel_after", raw("kernel_after")),
)
HIST_SPEC: Spec = (
    ("device_id", raw("device_id")),
    ("bucket", raw("bucket")),
    ("lo_ns", raw("lo_ns")),
    ("hi_ns", raw("hi_ns")),
    ("count", raw("count")),
    ("total_ms", ms("total_ns")),
    ("total_ns", raw("total_ns")),
)
LAUNCH_SPEC: Spec = (
    ("scope", raw("scope")),
    ("device_id", raw("device_id")),
    ("pid", raw("pid")),
    ("launches", raw("launches")),
    ("window_ms", ms("window_ns")),
    ("launches_per_s", raw("launches_per_s")),
    ("p50_us", us("p50_ns")),
    ("p90_us", us("p90_ns")),
    ("p99_us", us("p99_ns")),
    ("pct_under_5us", raw("pct_under_5us")),
    ("pct_under_10us", raw("pct_under_10us")),
    ("pct_under_20us", raw("pct_under_20us")),
    ("launch_storm", raw("launch_storm")),
    ("window_ns", raw("window_ns")),
    ("p50_ns", raw("p50_ns")),
    ("p90_ns", raw("p90_ns")),
    ("p99_ns", raw("p99_ns")),
)
_SYNC_TIMES: Spec = (
    ("calls", raw("count")),
    ("total_ms", ms("total_ns")),
    ("avg_us", us("avg_ns")),
    ("p50_us", us("p50_ns")),
    ("max_us", us("max_ns")),
    ("total_ns", raw("total_ns")),
    ("avg_ns", raw("avg_ns")),
    ("p50_ns", raw("p50_ns")),
    ("max_ns", raw("max_ns")),
)
SYNC_BY_PID_SPEC: Spec = (("pid", raw("pid")), ("api_name", raw("name"))) + _SYNC_TIMES
SYNC_API_SPEC: Spec = (("api_name", raw("name")), ("blocking", raw("blocking"))) + _SYNC_TIMES
CUDA_API_SPEC: Spec = (
    ("api_name", raw("name")),
    ("api_class", raw("api_class")),
    ("event_class", raw("event_class")),
    ("calls", raw("count")),
    ("total_ms", ms("total_ns")),
    ("avg_us", us("avg_ns")),
    ("p50_us", us("p50_ns")),
    ("min_us", us("min_ns")),
    ("max_us", us("max_ns")),
    ("pct", raw("pct")),
    ("total_ns", raw("total_ns")),
    ("avg_ns", raw("avg_ns")),
    ("p50_ns", raw("p50_ns")),
    ("min_ns", raw("min_ns")),
    ("max_ns", raw("max_ns")),
    ("raw_names", lambda r: ";".join(str(x) for x in (r.get("raw_names") or []))),
)
MEMCPY_SPEC: Spec = (
    ("op", raw("op")),
    ("direction", raw("direction")),
    ("src_kind", raw("src_kind_name")),
    ("dst_kind", raw("dst_kind_name")),
    ("mem_kind", raw("mem_kind_name")),
    ("count", raw("count")),
    ("bytes", raw("bytes")),
    ("total_ms", ms("total_ns")),
    ("avg_us", us("avg_ns")),
    ("p50_us", us("p50_ns")),
    ("min_us", us("min_ns")),
    ("max_us", us("max_ns")),
    ("gb_per_s", raw("gb_per_s")),
    ("total_ns", raw("total_ns")),
    ("avg_ns", raw("avg_ns")),
    ("p50_ns", raw("p50_ns")),
    ("min_ns", raw("min_ns")),
    ("max_ns", raw("max_ns")),
)


def _with(rows: Iterable[Row], **extra: Any) -> List[Dict[str, Any]]:
    return [{**r, **extra} for r in rows]


def _device_rows(report: Row, field: str) -> List[Dict[str, Any]]:
    out: List[Dict[str, Any]] = []
    for d in rows_of(report, "devices"):  # one iteration per device
        out.extend(_with(rows_of(d, field), device_id=d.get("device_id")))
    return out


def _nvtx_by_pid(report: Row) -> List[Dict[str, Any]]:
    nv = section(report, "nvtx")
    att = nv.get("attribution") if isinstance(nv.get("attribution"), Mapping) else {}
    att_map = {(r.get("pid"), r.get("name")): r for r in rows_of(att, "by_pid")}
    out = []
    seen = set()
    for r in rows_of(nv, "by_pid"):
        k = (r.get("pid"), r.get("name"))
        seen.add(k)
        a = att_map.get(k, {})
        out.append({**r, "kernel_count": a.get("kernel_count"), "inclusive_ns": a.get("inclusive_ns")})
    for k, a in att_map.items():  # attributed ranges with no duration row (should not happen; kept, not lost)
        if k not in seen:
            out.append(
                {
                    "pid": k[0],
                    "name": k[1],
                    "kernel_count": a.get("kernel_count"),
                    "inclusive_ns": a.get("inclusive_ns"),
                }
            )
    return out


def _launch_rows(report: Row) -> List[Dict[str, Any]]:
    la = section(report, "launch")
    rows: List[Dict[str, Any]] = []
    if isinstance(la.get("overall"), Mapping) and la["overall"]:
        rows.append({**la["overall"], "scope": "overall"})
    rows += _with(rows_of(la, "per_device"), scope="device")
    rows += _with(rows_of(la, "per_pid"), scope="pid")
    return rows


def _memcpy_rows(report: Row) -> List[Dict[str, Any]]:
    mc = section(report, "memcpy")
    return _with(rows_of(mc, "by_kind"), op="memcpy") + _with(rows_of(mc, "memset"), op="memset")


def _sync_api_rows(report: Row) -> List[Dict[str, Any]]:
    sy = section(report, "sync")
    return _with(rows_of(sy, "sync_apis"), blocking=True) + _with(
        rows_of(sy, "nonblocking_apis"), blocking=False
    )


#: (file name, column spec, rows of the report dict) — the fixed tables
CSV_TABLES: List[Tuple[str, Spec, Callable[[Row], List[Row]]]] = [
    ("kernels.csv", KERNEL_SPEC, lambda rep: rows_of(rep, "kernels")),
    ("kernels_by_pid.csv", KERNEL_BY_PID_SPEC, lambda rep: rows_of(section(rep, "pids"), "kernels_by_pid")),
    ("nvtx_ranges.csv", NVTX_SPEC, lambda rep: rows_of(section(rep, "nvtx"), "ranges")),
    ("nvtx_by_pid.csv", NVTX_BY_PID_SPEC, _nvtx_by_pid),
    (
        "nvtx_attribution.csv",
        ATTRIBUTION_SPEC,
        lambda rep: rows_of(section(section(rep, "nvtx"), "attribution"), "ranges"),
    ),
    ("gpu_idle.csv", IDLE_SPEC, lambda rep: rows_of(rep, "devices")),
    ("gpu_idle_gaps.csv", GAP_SPEC, lambda rep: _device_rows(rep, "largest_gaps")),
    ("gap_histogram.csv", HIST_SPEC, lambda rep: _device_rows(rep, "gap_histogram")),
    ("launch.csv", LAUNCH_SPEC, _launch_rows),
    ("sync_by_pid.csv", SYNC_BY_PID_SPEC, lambda rep: rows_of(section(rep, "sync"), "per_pid")),
    ("sync_apis.csv", SYNC_API_SPEC, _sync_api_rows),
    ("cuda_api.csv", CUDA_API_SPEC, lambda rep: rows_of(section(rep, "cuda_api"), "apis")),
    ("memcpy.csv", MEMCPY_SPEC, _memcpy_rows),
]


def _generic_tables(report: Row) -> List[Tuple[str, List[Row]]]:
    """(file stem, rows) for every list of row dicts in the diagnosis sections, nested up to 3 levels
    (the same stems the Markdown generic sections point to)."""
    out: List[Tuple[str, List[Row]]] = []

    def walk(val: Any, stem: str, depth: int) -> None:
        if isinstance(val, list):
            if val and all(isinstance(r, abc.Mapping) for r in val):
                out.append((stem, list(val)))
            return
        if isinstance(val, abc.Mapping) and depth <= 3:
            for field, v in val.items():  # fields of one section dict, not table rows
                if isinstance(v, (list, abc.Mapping)):
                    walk(v, table_stem(stem, field), depth + 1)

    for key in extra_section_keys(report):
        walk(report[key], table_stem(key), 0)
    return out


def generic_columns(rows: Sequence[Row]) -> List[str]:
    cols: Dict[str, None] = {}
    for r in rows:  # rows of a small diagnosis summary table
        for k in r:
            cols.setdefault(str(k), None)
    return list(cols)


class CsvRenderer(Renderer):
    """``tables/*.csv`` (see module docstring)."""

    name = "csv"
    subdir = "tables"

    def render(self, report: Mapping[str, Any], out_dir: Path) -> List[Path]:
        tdir = Path(out_dir) / self.subdir
        tdir.mkdir(parents=True, exist_ok=True)
        written: List[Path] = []
        fixed = {name for name, _, _ in CSV_TABLES}
        for name, spec, get_rows in CSV_TABLES:
            written.append(write_spec(tdir / name, spec, get_rows(report)))
        for stem, rows in _generic_tables(report):
            fname = f"{stem}.csv"
            if fname in fixed or (tdir / fname) in written:
                fname = f"{stem}_extra.csv"
            cols = generic_columns(rows)
            written.append(write_csv(tdir / fname, cols, ([r.get(c) for c in cols] for r in rows)))
        return written


def read_table(path: Path) -> Tuple[List[str], List[List[str]]]:
    """Read a CSV written here back (header, rows) — used by tests and tools."""
    with open(path, newline="", encoding="utf-8") as fh:
        data = list(csv.reader(fh))
    return (data[0] if data else []), data[1:]


__all__ = ["CsvRenderer", "CSV_TABLES", "write_csv", "read_table", "generic_columns"]
