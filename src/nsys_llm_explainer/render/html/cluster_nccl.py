"""The NCCL part of ``cluster.html``: wait per rank, share of collectives where each rank arrived last, the skew
of every matched collective instance, and the per-rank / per-name tables (``collectives`` of cluster.json).

The three charts compare timestamps of different files, so they are drawn only when the clocks were aligned
(``alignment.aligned`` and ``collectives.timed``); otherwise the section says so and shows the counts only.
At most :data:`MAX_SKEW_POINTS` instances are plotted: when ``collectives.instances`` holds more, every k-th
instance (k = ⌈instances / MAX_SKEW_POINTS⌉, in cluster.json order) plus the :data:`TOP_SKEWS` largest skews,
and the caption says so. Formatting only: every number is the dict's, converted to ms / µs / %.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Mapping, Sequence

from ..base import Row, fmt_dur, fmt_int, fmt_pct, num, rows_of
from .ctx import HtmlCtx, layout, ms, us
from .markup import Col, h, int_col, ms_col, name_col, plot_text, section, table, text_col

#: most collective instances plotted in the skew chart
MAX_SKEW_POINTS = 4000
#: instances with the largest skew always plotted when the chart is thinned
TOP_SKEWS = 100
#: one colour per rank (in ``collectives.ranks`` order), the same in every NCCL chart
RANK_COLORS = ("#1565c0", "#ef6c00", "#2e7d32", "#c62828", "#6a1b9a", "#00838f", "#9e9d24", "#5d4037",
               "#ad1457", "#283593", "#f9a825", "#00695c")


def rank_color(i: int) -> str:
    return RANK_COLORS[i % len(RANK_COLORS)]


def plotted_instances(instances: Sequence[Row]) -> List[Row]:
    """The instances drawn: all up to :data:`MAX_SKEW_POINTS`, else every k-th plus the largest skews."""
    rows = list(instances)
    if len(rows) <= MAX_SKEW_POINTS:
        return rows
    k = -(-len(rows) // MAX_SKEW_POINTS)
    keep = set(range(0, len(rows), k))
    by_skew = sorted(range(len(rows)), key=lambda i: -(num(rows[i].get("skew_ns")) or 0))
    keep.update(by_skew[:TOP_SKEWS])
    return [rows[i] for i in sorted(keep)]


def _rank_bars(ctx: HtmlCtx, fid: str, ranks: Sequence[Row], y: List[Any], hover: List[str], ytitle: str,
               caption: str, **yaxis: Any) -> str:
    idx = list(range(len(ranks)))
    data = [{"type": "bar", "x": idx, "y": y, "marker": {"color": [rank_color(i) for i in idx]},
             "hovertext": hover, "hoverinfo": "text", "showlegend": False}]
    lay = layout(300, "rank", ytitle)
    lay["xaxis"].update({"tickvals": idx, "ticktext": [plot_text(r.get("rank"), 40) for r in ranks],
                         "automargin": True})
    lay["yaxis"].update({"rangemode": "tozero", **yaxis})
    return ctx.figure(fid, data, lay, caption)


def _wait_chart(ctx: HtmlCtx, ranks: Sequence[Row]) -> str:
    hover = [f"{plot_text(r.get('rank'))}<br>waits {h(fmt_dur(r.get('wait_ns_total')))} in total over "
             f"{fmt_int(r.get('matched'))} matched collectives<br>mean {h(fmt_dur(r.get('wait_mean_ns')))} · "
             f"p50 {h(fmt_dur(r.get('wait_p50_ns')))}" for r in ranks]
    cap = ("Time each rank's NCCL kernels waited for the last rank to arrive, summed over the matched "
           "collectives (ms). Text equivalent: cluster.json <code>collectives.ranks[].wait_ns_total</code> "
           "(and <code>wait_mean_ns</code>, <code>wait_p50_ns</code>), the rank table below, cluster.md "
           "“NCCL collectives across ranks”, <code>tables/nccl_ranks.csv</code>.")
    return _rank_bars(ctx, "nccl-wait", ranks, [ms(r.get("wait_ns_total")) for r in ranks], hover,
                      "wait, ms (summed)", cap)


def _late_chart(ctx: HtmlCtx, ranks: Sequence[Row]) -> str:
    hover = [f"{plot_text(r.get('rank'))}<br>last to arrive in {fmt_int(r.get('last_arrival_count'))} of "
             f"{fmt_int(r.get('matched'))} matched collectives" for r in ranks]
    cap = ("Share of the matched collectives where each rank's kernel started last (the rank the others "
           "waited for). Text equivalent: cluster.json <code>collectives.ranks[].last_arrival_share</code> and "
           "<code>last_arrival_count</code>, the rank table below, <code>tables/nccl_ranks.csv</code>.")
    return _rank_bars(ctx, "nccl-last", ranks, [r.get("last_arrival_share") for r in ranks], hover,
                      "share of collectives arrived last", cap, tickformat=".0%", range=[0, 1])


def _skew_chart(ctx: HtmlCtx, coll: Row, ranks: Sequence[Row]) -> str:
    inst = rows_of(coll, "instances")
    shown = plotted_instances(inst)
    color = {str(r.get("rank")): rank_color(i) for i, r in enumerate(ranks)}
    groups: Dict[str, List[Row]] = {}
    for r in shown:  # one pass over the (capped) plotted instances
        groups.setdefault(str(r.get("late_rank")), []).append(r)
    data = []
    for j, (late, rows) in enumerate(groups.items()):
        data.append({
            "type": "scatter", "mode": "markers", "name": f"last: {plot_text(late, 40)}",
            "x": [r.get("seq") for r in rows], "y": [us(r.get("skew_ns")) for r in rows],
            "marker": {"size": 7, "color": color.get(late, rank_color(len(ranks) + j))},
            "hovertext": [f"{plot_text(r.get('name'))} #{fmt_int(r.get('seq'))}<br>skew "
                          f"{h(fmt_dur(r.get('skew_ns')))} · last to arrive: {plot_text(late)}<br>first start "
                          f"{ms(r.get('first_start_ns'))} ms on the aligned clock" for r in rows],
            "hoverinfo": "text"})
    how = (f"all {fmt_int(len(inst))} matched instances" if len(shown) == len(inst) else
           f"{fmt_int(len(shown))} of {fmt_int(len(inst))} matched instances (every "
           f"{-(-len(inst) // MAX_SKEW_POINTS)}-th plus the {TOP_SKEWS} largest skews, to keep the page small)")
    names = len({r.get("name") for r in inst})
    cap = (f"Skew of each matched collective instance (last start − first start across ranks, µs) by its "
           f"sequence number in issue order, coloured by the rank that arrived last; {how}"
           + (f"; {names} collective names share the x axis (hover names them)" if names > 1 else "")
           + ". Text equivalent: cluster.json <code>collectives.instances[]</code>, "
           "<code>tables/nccl_instances.csv</code>; per name: <code>collectives.by_name[]</code>.")
    lay = layout(320, "collective instance (sequence number, issue order)", "skew (µs)")
    lay["yaxis"]["rangemode"] = "tozero"
    return ctx.figure("nccl-skew", data, lay, cap)


def _share(r: Row) -> str:
    v = num(r.get("last_arrival_share"))
    return "–" if v is None else f"{fmt_pct(100 * v, 0)} %"


def _rank_table(coll: Row, link: Callable[[Any], str]) -> str:
    cols: List[Col] = [text_col("rank", "rank"), Col("report", lambda r: link(r.get("file")),
                                                     lambda r: r.get("file"), numeric=False),
                       int_col("pid", "pid"), int_col("GPU", "device_id"), int_col("NCCL kernels", "nccl_count"),
                       ms_col("NCCL time (ms)", "nccl_total_ns"), int_col("matched", "matched")]
    if coll.get("timed"):
        cols += [ms_col("wait total (ms)", "wait_ns_total"), ms_col("wait mean (ms)", "wait_mean_ns"),
                 ms_col("wait p50 (ms)", "wait_p50_ns"), int_col("last to arrive", "last_arrival_count"),
                 Col("share last", _share, lambda r: r.get("last_arrival_share"), key="last_arrival_share")]
    return table("nccl-ranks", cols, rows_of(coll, "ranks"),
                 "Per rank (cluster.json <code>collectives.ranks[]</code>, <code>tables/nccl_ranks.csv</code>).")


def _name_table(coll: Row) -> str:
    cols: List[Col] = [name_col("collective", "name"), int_col("ranks", "ranks"), int_col("kernels", "kernels"),
                       int_col("matched", "matched"), int_col("unmatched kernels", "unmatched_kernels")]
    if coll.get("timed"):
        cols += [ms_col("skew total (ms)", "skew_total_ns"), ms_col("skew p50 (ms)", "skew_p50_ns"),
                 ms_col("skew max (ms)", "skew_max_ns"), ms_col("end spread p50 (ms)", "end_spread_p50_ns"),
                 text_col("most often last", "most_late_rank"),
                 Col("its share", lambda r: "–" if num(r.get("most_late_share")) is None else
                     f"{fmt_pct(100 * r['most_late_share'], 0)} %", lambda r: r.get("most_late_share"),
                     key="most_late_share")]
    return table("nccl-collectives", cols, rows_of(coll, "by_name"),
                 "By collective name (cluster.json <code>collectives.by_name[]</code>, "
                 "<code>tables/nccl_collectives.csv</code>).")


def sec_nccl(ctx: HtmlCtx, d: Mapping[str, Any], link: Callable[[Any], str]) -> str:
    """The NCCL section; ``link`` turns a file label into (escaped) HTML linking its own report."""
    coll = d.get("collectives") if isinstance(d.get("collectives"), Mapping) else {}
    title = "NCCL collectives across ranks"
    if not coll.get("available"):
        return section("nccl", title, [f'<p class="missing">Not available: {h(coll.get("reason") or "no data")}.'
                                       "</p>"])
    ranks = rows_of(coll, "ranks")
    body = [f"<p>{fmt_int(coll.get('matched_collectives'))} matched collectives, "
            f"{fmt_int(coll.get('unmatched_kernels'))} unmatched kernels (the k-th kernel of a collective name on "
            "each rank is matched with the k-th on every other rank; docs/CLUSTER.md).</p>"]
    aligned = bool((d.get("alignment") or {}).get("aligned"))
    if coll.get("timed") and aligned:
        body += [_wait_chart(ctx, ranks), _late_chart(ctx, ranks)]
        if rows_of(coll, "instances"):
            body.append(_skew_chart(ctx, coll, ranks))
    else:
        why = coll.get("reason") or "clocks not aligned"
        body.append(f'<p class="warning"><strong>No cross-rank timing:</strong> {h(why)}. Waits, late '
                    "arrivers and skew are not computed and no timing chart is drawn; the counts below hold.</p>")
    body += [_rank_table(coll, link), _name_table(coll)]
    return section("nccl", title, body)


__all__ = ["MAX_SKEW_POINTS", "TOP_SKEWS", "plotted_instances", "sec_nccl"]
