"""``tables/*.csv`` of a comparison: every row of ``compare.json`` (never capped), full names, exact integer
ns, a header row even when a table is empty (the CSV conventions of :mod:`render.csv_tables`). Each file is a
table spec (:class:`render.table.Table`) written by the report's CSV writer."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Mapping, Sequence, Tuple

from ..render.csv_tables import write_csv
from ..render.table import Table, csv_col

Row = Mapping[str, Any]

TRACE_COLS = ("label", "role", "path", "gpus", "device_count", "window_method", "window_start_ns", "window_end_ns",
              "window_ns", "pooled_window_ns", "busy_ns", "busy_pct", "non_gpu_ns", "units", "metric_p50_ns",
              "metric_p90_ns", "metric_count", "metric_spread", "metric_iqr_ns", "steps_available", "steps_method",
              "step_count", "step_p50_ns", "step_p90_ns", "kernel_count", "total_kernel_ns", "verdict")
COMPARISON_COLS = ("base", "new", "status", "reasons", "similarity", "gpus_match", "metric", "base_p50_ns",
                   "new_p50_ns", "change_pct", "noise_pct", "significant", "verdict", "busy_pct_base",
                   "busy_pct_new", "window_per_unit_base_ns", "window_per_unit_new_ns", "main_reason_component",
                   "main_reason_name", "main_reason_detail", "main_reason_delta_per_unit_ns")
SHARE_COLS = ("trace", "name", "ns", "pct_of_window", "per_unit_ns")
DELTA_COLS = ("base", "new", "component", "level", "name", "detail", "base_ns", "new_ns", "base_per_unit_ns",
              "new_per_unit_ns", "delta_per_unit_ns", "change_pct")
KERNEL_COLS = ("base", "new", "name", "base_count", "new_count", "base_ns", "new_ns", "base_per_unit_ns",
               "new_per_unit_ns", "delta_per_unit_ns", "change_pct")
FINDING_COLS = ("base", "new", "id", "category", "change", "base_severity", "new_severity", "base_time_at_stake_ns",
                "new_time_at_stake_ns", "title")


def _trace_rows(d: Row) -> Iterable[Dict[str, Any]]:
    for i, t in enumerate(d["traces"]):
        m, s = t["metric"], t["steps"]
        yield {**t, "role": "base" if i == 0 else "new", "gpus": "; ".join(t["gpus"]), "metric_p50_ns": m["p50_ns"],
               "metric_p90_ns": m["p90_ns"], "metric_count": m["count"], "metric_spread": m["spread"],
               "metric_iqr_ns": m["iqr_ns"], "steps_available": s["available"], "steps_method": s["method"],
               "step_count": s["count"], "step_p50_ns": s["p50_ns"], "step_p90_ns": s["p90_ns"]}


def _comparison_rows(d: Row) -> Iterable[Dict[str, Any]]:
    for c in d["comparisons"]:
        r = c["main_reason"] or {}
        yield {**c, "reasons": "; ".join(c["reasons"]), "metric": d["metric"]["name"],
               "base_p50_ns": c["metric_base"]["p50_ns"], "new_p50_ns": c["metric_new"]["p50_ns"],
               "main_reason_component": r.get("component"), "main_reason_name": r.get("name"),
               "main_reason_detail": r.get("detail"), "main_reason_delta_per_unit_ns": r.get("delta_per_unit_ns")}


def _share_rows(key: str) -> Callable[[Row], Iterable[Dict[str, Any]]]:
    def rows(d: Row) -> Iterable[Dict[str, Any]]:
        for t in d["traces"]:
            for s in t[key]:
                yield {**s, "trace": t["label"]}
    return rows


def _delta_rows(d: Row) -> Iterable[Dict[str, Any]]:
    for c in d["comparisons"]:
        for key, level in (("category_changes", "category"), ("idle_changes", "kind"),
                           ("idle_detail_changes", "detail")):
            for r in c[key]:
                yield {**r, "base": c["base"], "new": c["new"], "level": level}


def _pair_rows(key: str) -> Callable[[Row], Iterable[Dict[str, Any]]]:
    def rows(d: Row) -> Iterable[Dict[str, Any]]:
        for c in d["comparisons"]:
            for r in c[key]:
                yield {**r, "base": c["base"], "new": c["new"]}
    return rows


def _spec(name: str, cols: Sequence[str], rows: Callable[[Row], Iterable[Dict[str, Any]]]) -> Table:
    return Table(name, (csv_col(*cols),), lambda d: list(rows(d)))


#: every CSV file of a comparison, in the order written (the report's table specs: :class:`render.table.Table`)
TABLES: Tuple[Table, ...] = (
    _spec("traces.csv", TRACE_COLS, _trace_rows),
    _spec("comparisons.csv", COMPARISON_COLS, _comparison_rows),
    _spec("categories.csv", SHARE_COLS, _share_rows("categories")),
    _spec("idle_by_kind.csv", SHARE_COLS, _share_rows("idle_by_kind")),
    _spec("part_changes.csv", DELTA_COLS, _delta_rows),
    _spec("kernel_deltas.csv", KERNEL_COLS, _pair_rows("kernel_deltas")),
    _spec("finding_changes.csv", FINDING_COLS, _pair_rows("finding_changes")),
)


def write_compare_tables(d: Row, out_dir: Path) -> List[Path]:
    tdir = Path(out_dir) / "tables"
    tdir.mkdir(parents=True, exist_ok=True)
    return [write_csv(tdir / t.csv, t.csv_header(), t.csv_rows(d)) for t in TABLES]
