"""The NCCL section of the cluster report: the per-rank and per-name tables; in HTML, when the clocks were aligned,
the wait per rank, the share of collectives each rank arrived last and the skew of every matched instance (at most
:data:`MAX_SKEW_POINTS` plotted: docs/CLUSTER.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Dict, List, Sequence

from ...vocabulary.units import fmt_dur, fmt_int, ms_value, num, us_value
from ..charts import layout, plot_text
from ..document import (
    Chart,
    Code,
    Data,
    Figure,
    HtmlOnly,
    Inline,
    Note,
    Section,
    Spans,
    Strong,
    TablePart,
    inline,
    para,
    parts,
)
from ..table import Table
from .tables import CUSTOM, NCCL_COLLECTIVES, NCCL_RANKS, TIMED, linked

if TYPE_CHECKING:
    from ...cluster.collectives import CollectivesResult, InstanceRow, RankRow
    from ...cluster.result import ClusterResult

#: most collective instances plotted in the skew chart
MAX_SKEW_POINTS = 4000
#: instances with the largest skew always plotted when the chart is thinned
TOP_SKEWS = 100
#: one colour per rank (in ``collectives.ranks`` order), the same in every NCCL chart
RANK_COLORS = ("#1565c0", "#ef6c00", "#2e7d32", "#c62828", "#6a1b9a", "#00838f", "#9e9d24", "#5d4037",
               "#ad1457", "#283593", "#f9a825", "#00695c")


def rank_color(i: int) -> str:
    return RANK_COLORS[i % len(RANK_COLORS)]


def plotted_instances(instances: Sequence[InstanceRow]) -> List[InstanceRow]:
    """The instances drawn: all up to :data:`MAX_SKEW_POINTS`, else every k-th plus the largest skews."""
    rows = list(instances)
    if len(rows) <= MAX_SKEW_POINTS:
        return rows
    k = -(-len(rows) // MAX_SKEW_POINTS)
    keep = set(range(0, len(rows), k))
    by_skew = sorted(range(len(rows)), key=lambda i: -(num(rows[i].skew_ns) or 0))
    keep.update(by_skew[:TOP_SKEWS])
    return [rows[i] for i in sorted(keep)]


def _rank_bars(fid: str, ranks: Sequence[RankRow], y: List[Any], hover: List[str], ytitle: str, caption: Inline,
               **yaxis: Any) -> Figure:
    idx = list(range(len(ranks)))
    data = [{"type": "bar", "x": idx, "y": y, "marker": {"color": [rank_color(i) for i in idx]},
             "hovertext": hover, "hoverinfo": "text", "showlegend": False}]
    lay = layout(300, "rank", ytitle)
    lay["xaxis"].update({"tickvals": idx, "ticktext": [plot_text(r.rank, 40) for r in ranks],
                         "automargin": True})
    lay["yaxis"].update({"rangemode": "tozero", **yaxis})
    return Figure(fid, data, lay, caption)


def _title(coll: CollectivesResult) -> str:
    """The section's title: what its kernels are (NCCL, custom or both)."""
    kind = coll.kind()
    return f"{kind[0].upper()}{kind[1:]} collectives across ranks"


def _wait_chart(coll: CollectivesResult, ranks: Sequence[RankRow]) -> Figure:
    hover = [f"{plot_text(r.rank)}<br>waits {fmt_dur(r.wait_ns_total)} in total over "
             f"{fmt_int(r.matched)} matched collectives<br>mean {fmt_dur(r.wait_mean_ns)} · "
             f"p50 {fmt_dur(r.wait_p50_ns)}" for r in ranks]
    cap = inline(f"Time each rank's {coll.kind()} kernels waited for the last rank to arrive (a kernel's duration "
                 "less the shortest kernel of its instance: the kernels of one collective end together), summed "
                 "over the matched collectives (ms). Text equivalent: cluster.json ",
                 Code("collectives.ranks[].wait_ns_total"), " (and ", Code("wait_mean_ns"), ", ", Code("wait_p50_ns"),
                 f"), the rank table below, cluster.md “{_title(coll)}”, ", Code("tables/nccl_ranks.csv"), ".")
    return _rank_bars("nccl-wait", ranks, [ms_value(r.wait_ns_total) for r in ranks], hover,
                      "wait, ms (summed)", cap)


def _late_chart(ranks: Sequence[RankRow]) -> Figure:
    hover = [f"{plot_text(r.rank)}<br>last to arrive in {fmt_int(r.last_arrival_count)} of "
             f"{fmt_int(r.matched)} matched collectives" for r in ranks]
    cap = inline("Share of the matched collectives where each rank arrived last (the rank the others waited for: "
                 "its kernel ran the shortest, as the kernels of one collective end together). Text equivalent: "
                 "cluster.json ", Code("collectives.ranks[].last_arrival_share"), " and ", Code("last_arrival_count"),
                 ", the rank table below, ", Code("tables/nccl_ranks.csv"), ".")
    return _rank_bars("nccl-last", ranks, [r.last_arrival_share for r in ranks], hover,
                      "share of collectives arrived last", cap, tickformat=".0%", range=[0, 1])


def _skew_chart(coll: CollectivesResult, ranks: Sequence[RankRow]) -> Figure:
    inst = coll.instances
    shown = plotted_instances(inst)
    color = {str(r.rank): rank_color(i) for i, r in enumerate(ranks)}
    groups: Dict[str, List[InstanceRow]] = {}
    for r in shown:  # one pass over the (capped) plotted instances
        groups.setdefault(r.late_rank or "", []).append(r)   # "": no last arriver (every kernel ran as long)
    data = [{"type": "scatter", "mode": "markers",
             "name": f"last: {plot_text(late, 40)}" if late else "no last arriver",
             "x": [r.seq for r in rows], "y": [us_value(r.skew_ns) for r in rows],
             "marker": {"size": 7, "color": color.get(late, rank_color(len(ranks) + j))},
             "hovertext": [f"{plot_text(r.name)} #{fmt_int(r.seq)}<br>skew "
                           f"{fmt_dur(r.skew_ns)} · last to arrive: {plot_text(late) if late else 'none'}"
                           f"<br>first start "
                           f"{ms_value(r.first_start_ns)} ms on the aligned clock" for r in rows],
             "hoverinfo": "text"} for j, (late, rows) in enumerate(groups.items())]
    how = (f"all {fmt_int(len(inst))} matched instances" if len(shown) == len(inst) else
           f"{fmt_int(len(shown))} of {fmt_int(len(inst))} matched instances (every "
           f"{-(-len(inst) // MAX_SKEW_POINTS)}-th plus the {TOP_SKEWS} largest skews, to keep the page small)")
    names = len({r.name for r in inst})
    cap = inline(f"Skew of each matched collective instance (its longest kernel − its shortest across ranks, µs: "
                 "the longest wait) by its "
                 f"sequence number in issue order, coloured by the rank that arrived last; {how}"
                 + (f"; {names} collective names share the x axis (hover names them)" if names > 1 else "")
                 + ". Text equivalent: cluster.json ", Code("collectives.instances[]"), ", ",
                 Code("tables/nccl_instances.csv"), "; per name: ", Code("collectives.by_name[]"), ".")
    lay = layout(320, "collective instance (sequence number, issue order)", "skew (µs)")
    lay["yaxis"]["rangemode"] = "tozero"
    return Figure("nccl-skew", data, lay, cap)


def _table(spec: Table[ClusterResult], d: ClusterResult, link: Callable[[Any], Spans], tid: str,
           caption: Inline) -> TablePart:
    cols = [c for c in spec.cols if (d.collectives.timed or c.key not in TIMED)
            and (d.collectives.custom_kernels or c.key not in CUSTOM)]
    return TablePart(linked(cols, link), spec.rows(d), (), tid, caption)


def sec_nccl(d: ClusterResult, link: Callable[[Any], Spans]) -> Section:
    """The NCCL section; ``link`` turns a file label into spans linking its own report (HTML)."""
    coll = d.collectives
    title = _title(coll)
    body: List[Any] = []
    if not coll.available or coll.reason:
        body.append(para(Data(coll.reason or "")))
    if coll.available:
        body.append(para(f"{fmt_int(coll.matched_collectives)} matched collectives, "
                         f"{fmt_int(coll.unmatched_kernels)} unmatched kernels (matched per collective name, "
                         f"{coll.how_matched()})."))
        ranks = coll.ranks
        if coll.timed:   # the clocks were aligned (CollectivesResult.timed)
            body += [Chart(lambda: _wait_chart(coll, ranks)), Chart(lambda: _late_chart(ranks))]
            if coll.instances:
                body.append(Chart(lambda: _skew_chart(coll, ranks)))
        else:
            why = coll.reason or "clocks not aligned"
            body.append(HtmlOnly((Note((Strong(("No cross-rank timing:",)), " ", Data(why), ". Waits, late arrivers "
                                        "and skew are not computed and no timing chart is drawn; the counts below "
                                        "hold.")),)))
        body += [_table(NCCL_RANKS, d, link, "nccl-ranks", ("Per rank (cluster.json ", Code("collectives.ranks[]"),
                                                               ", ", Code("tables/nccl_ranks.csv"), ").")),
                 _table(NCCL_COLLECTIVES, d, link, "nccl-collectives",
                        ("By collective name (cluster.json ", Code("collectives.by_name[]"), ", ",
                         Code("tables/nccl_collectives.csv"), ")."))]
    return Section("nccl", title, parts(body), "NCCL" if coll.kind() == "NCCL" else "Collectives")


__all__ = ["MAX_SKEW_POINTS", "TOP_SKEWS", "plotted_instances", "sec_nccl"]
