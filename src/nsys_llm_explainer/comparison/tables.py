"""``tables/*.csv`` of a comparison: table specs over the typed :class:`.result.CompareResult` (every row; a row is a
result row with its parent's fields beside it, :class:`render.table.Joined`), written by the report's CSV writer."""

from __future__ import annotations

from typing import Any, Callable, List, Sequence, Tuple

from ..render.table import Joined, Table, csv_col, each
from .result import CompareResult, Comparison, TraceSummary

TRACE_COLS = ("label", "role", "path", "gpus", "device_count", "window_method", "window_start_ns", "window_end_ns",
              "window_ns", "pooled_window_ns", "busy_ns", "busy_pct", "non_gpu_ns", "units", "metric_p50_ns",
              "metric_p90_ns", "metric_count", "metric_spread", "metric_iqr_ns", "steps_available", "steps_method",
              "step_count", "step_p50_ns", "step_p90_ns", "kernel_count", "total_kernel_ns", "verdict")
COMPARISON_COLS = ("base", "new", "status", "reasons", "similarity", "common_kernel_share", "gpus_match", "metric",
                   "base_p50_ns", "new_p50_ns", "change_pct", "noise_pct", "significant", "verdict", "busy_pct_base",
                   "busy_pct_new", "window_per_unit_base_ns", "window_per_unit_new_ns", "main_reason_component",
                   "main_reason_name", "main_reason_detail", "main_reason_delta_per_unit_ns")
SHARE_COLS = ("trace", "name", "ns", "pct_of_window", "per_unit_ns")
DELTA_COLS = ("base", "new", "component", "level", "name", "detail", "base_ns", "new_ns", "base_per_unit_ns",
              "new_per_unit_ns", "delta_per_unit_ns", "change_pct")
KERNEL_COLS = ("base", "new", "name", "base_count", "new_count", "base_ns", "new_ns", "base_per_unit_ns",
               "new_per_unit_ns", "delta_per_unit_ns", "change_pct")
FINDING_COLS = ("base", "new", "id", "category", "change", "base_severity", "new_severity", "base_time_at_stake_ns",
                "new_time_at_stake_ns", "title")


def _trace_rows(d: CompareResult) -> List[Joined]:
    out = []
    for i, t in enumerate(d.traces):
        m, s = t.metric, t.steps
        out.append(Joined(t, {"role": "base" if i == 0 else "new", "gpus": "; ".join(t.gpus),
                              "metric_p50_ns": m.p50_ns, "metric_p90_ns": m.p90_ns, "metric_count": m.count,
                              "metric_spread": m.spread, "metric_iqr_ns": m.iqr_ns, "steps_available": s.available,
                              "steps_method": s.method, "step_count": s.count, "step_p50_ns": s.p50_ns,
                              "step_p90_ns": s.p90_ns}))
    return out


def _comparison_rows(d: CompareResult) -> List[Joined]:
    out = []
    for c in d.comparisons:
        r = c.main_reason
        out.append(Joined(c, {"reasons": "; ".join(c.reasons), "metric": d.metric.name,
                              "base_p50_ns": c.metric_base.p50_ns, "new_p50_ns": c.metric_new.p50_ns,
                              "main_reason_component": r.component if r else None,
                              "main_reason_name": r.name if r else None, "main_reason_detail": r.detail if r else None,
                              "main_reason_delta_per_unit_ns": r.delta_per_unit_ns if r else None}))
    return out


def _each_trace(rows: Callable[[TraceSummary], Sequence[Any]]) -> Callable[[CompareResult], List[Joined]]:
    """The rows ``rows`` of every trace, with its label beside."""
    return lambda d: each(d.traces, rows, lambda t: {"trace": t.label})


def _each_pair(rows: Callable[[Comparison], Sequence[Any]]) -> Callable[[CompareResult], List[Joined]]:
    """The rows ``rows`` of every pair, with its BASE and NEW labels beside."""
    return lambda d: each(d.comparisons, rows, lambda c: {"base": c.base, "new": c.new})


def _part_changes(d: CompareResult) -> List[Joined]:
    return [Joined(r, {"base": c.base, "new": c.new, "level": level}) for c in d.comparisons
            for rows, level in ((c.category_changes, "category"), (c.idle_changes, "kind"),
                                (c.idle_detail_changes, "detail")) for r in rows]


def _spec(name: str, cols: Sequence[str], rows: Callable[[CompareResult], Sequence[Any]]) -> Table[CompareResult]:
    return Table(name, (csv_col(*cols),), rows)


#: every CSV file of a comparison, in the order written (the report's table specs: :class:`render.table.Table`)
TABLES: Tuple[Table[CompareResult], ...] = (
    _spec("traces.csv", TRACE_COLS, _trace_rows),
    _spec("comparisons.csv", COMPARISON_COLS, _comparison_rows),
    _spec("categories.csv", SHARE_COLS, _each_trace(lambda t: t.categories)),
    _spec("idle_by_kind.csv", SHARE_COLS, _each_trace(lambda t: t.idle_by_kind)),
    _spec("part_changes.csv", DELTA_COLS, _part_changes),
    _spec("kernel_deltas.csv", KERNEL_COLS, _each_pair(lambda c: c.kernel_deltas)),
    _spec("finding_changes.csv", FINDING_COLS, _each_pair(lambda c: c.finding_changes)),
)

