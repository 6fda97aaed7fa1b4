"""The cluster report's table specs (``tables/*.csv`` and the shown columns). The document completes the columns that
depend on the run: each file label's link to its own report, the idle kinds present, the timing columns when the
clocks were aligned."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any, Callable, Sequence, Tuple

from ...vocabulary.cause_kinds import KINDS
from ...vocabulary.units import fmt_ms, fmt_pct, num
from ..document import Code, Data, Rich, Spans
from ..table import Col, Table, csv_col, field_of, fmt_col, int_col, name_col, pct_col, raw, show_col, text_col

if TYPE_CHECKING:
    from ...cluster.result import ClusterResult

Linker = Callable[[Any], Spans]


def linked(cols: Sequence[Col], link: Linker) -> Tuple[Col, ...]:
    """The columns with each file label (``file`` / ``label``) linking the file's own report."""
    def cell(key: str) -> Callable[[Any], Spans]:
        return lambda r: link(field_of(r, key))
    return tuple(replace(c, cell=cell(c.key)) if c.key in ("file", "label") else c for c in cols)


def idle_col(kind: str) -> Col:
    """The idle ns of one cause kind: CSV ``idle_<kind>_ns``, shown in ms."""
    return Col(((f"idle_{kind}_ns", idle(kind)),), f"idle {kind} (ms)", lambda r: fmt_ms(idle(kind)(r)), True,
               idle(kind), f"idle_{kind}_ns")


def ns_col(key: str, head: str = "") -> Col:
    """A duration: CSV ``key`` (integer ns), shown ``head (ms)``."""
    return fmt_col(key, key, f"{head} (ms)" if head else "", fmt_ms)


def idle(kind: str) -> Callable[[Any], Any]:
    """The idle ns of one cause kind of a ``devices[]`` row (0 when the kind did not occur)."""
    return lambda r: r.idle_by_kind.get(kind, 0)


def share_col(key: str, head: str) -> Col:
    """A share in [0, 1]: CSV as it is, shown as a whole percentage."""
    return fmt_col(key, key, head, lambda v: "–" if num(v) is None else f"{fmt_pct(100 * v, 0)} %")


def _clock(key: str) -> Callable[[Any], Any]:
    """A field of a ``files[]`` row's clock facts."""
    return lambda r: field_of(r.clock, key)


def _file_col(key: str) -> Col:
    """The file label (its own column, linked by the document; HTML only, with a CSV column)."""
    return show_col("report", lambda r: Data(field_of(r, key)), False, raw(key), key).html().with_csv(key)


RANKS: Table[ClusterResult] = Table("ranks.csv", (
    text_col("rank", "rank", "rank"),
    _file_col("file"),
    int_col("device_id", "device_id", "GPU"),
    ns_col("window_ns", "window").html(), ns_col("busy_ns", "busy").html(),
    pct_col("busy_pct", "busy_pct", "busy %"),
    ns_col("idle_ns", "idle").html(),
    int_col("kernel_count", "kernel_count", "kernels"), int_col("step_count", "step_count", "steps").html(),
    ns_col("step_p50_ns", "step p50"), ns_col("step_p90_ns", "step p90"),
) + tuple(idle_col(k) for k in KINDS), lambda d: d.devices)

NCCL_RANKS: Table[ClusterResult] = Table("nccl_ranks.csv", (
    text_col("rank", "rank", "rank"),
    _file_col("file"),
    int_col("pid", "pid", "pid").html(), int_col("device_id", "device_id", "GPU").html(),
    int_col("nccl_count", "nccl_count", "NCCL kernels"), ns_col("nccl_total_ns", "NCCL time").html(),
    int_col("matched", "matched", "matched"),
    int_col("custom_count", "custom_count", "custom collective kernels"),
    ns_col("custom_total_ns", "custom collective time").html(),
    ns_col("wait_ns_total", "wait total"), ns_col("wait_mean_ns", "wait mean"), ns_col("wait_p50_ns", "wait p50"),
    int_col("last_arrival_count", "last_arrival_count", "last to arrive"),
    share_col("last_arrival_share", "share"),
    ns_col("wait_caused_ns", "waits caused").html(),
), lambda d: d.collectives.ranks)
#: the rank columns of custom all-reduce kernels (shown only when a file has any)
CUSTOM = ("custom_count", "custom_total_ns")
#: the NCCL rank columns that compare timestamps of different files (shown only when the clocks were aligned)
TIMED = ("wait_ns_total", "wait_mean_ns", "wait_p50_ns", "last_arrival_count", "last_arrival_share", "wait_caused_ns",
         "skew_total_ns", "skew_p50_ns", "skew_max_ns", "end_spread_p50_ns", "most_late_rank", "most_late_share")

NCCL_COLLECTIVES: Table[ClusterResult] = Table("nccl_collectives.csv", (
    name_col("name", "name", "collective"), int_col("ranks", "ranks", "ranks"),
    int_col("kernels", "kernels", "kernels").html(), int_col("matched", "matched", "matched"),
    int_col("unmatched_kernels", "unmatched_kernels", "unmatched kernels").html(),
    text_col("matching", "matching", "matching").html(),
    ns_col("skew_total_ns", "skew total").html(), ns_col("skew_p50_ns", "skew p50"), ns_col("skew_max_ns", "skew max"),
    ns_col("end_spread_p50_ns", "end spread p50"),
    text_col("most_late_rank", "most_late_rank", "most often last"),
    share_col("most_late_share", "its share").html(),
), lambda d: d.collectives.by_name)

NCCL_INSTANCES: Table[ClusterResult] = Table("nccl_instances.csv", (
    csv_col("name", "seq", "late_rank", "first_start_ns", "last_start_ns", "skew_ns", "end_spread_ns"),
), lambda d: d.collectives.instances)

CLAIMS: Table[ClusterResult] = Table("claims.csv", (   # rows: RankClaim
    csv_col("id", "rank", "severity", "title", "time_at_stake_ns"),
    Col((("evidence", lambda c: " ".join(c.evidence)),)),
), lambda d: d.claims)

FILES: Table[ClusterResult] = Table("files.csv", (
    show_col("label", lambda r: Data(r.label), False, raw("label"), "label").with_csv("label"),
    show_col("path", lambda r: Code(r.path), False, raw("path"), "path").with_csv("path"),
    Col((("host", _clock("host")),), "host", lambda r: Data(r.clock.host), False, _clock("host"), "host"),
    text_col("nsys_version", "nsys_version", "nsys"), text_col("window_method", "window_method", "window"),
    csv_col("window_start_ns", "window_end_ns"),
    ns_col("offset_ns", "clock offset"),
    Col(tuple((k, _clock(k)) for k in ("utc_epoch_ns", "normalized", "shift_ns"))),
    int_col("nccl_kernels", "nccl_kernels", "NCCL kernels").html().with_csv(),
    show_col("verdict", lambda r: Rich(r.headline), False, raw("headline"), "headline"),
), lambda d: d.files)

#: every CSV file of a cluster report, in the order written
CLUSTER_TABLES = (RANKS, NCCL_RANKS, NCCL_COLLECTIVES, NCCL_INSTANCES, CLAIMS, FILES)
