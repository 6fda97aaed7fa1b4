"""Per-step synchronization (``step_sync`` of report.json; analyses/steps/sync.py): one table row per launching
thread and device, holding series first, with the same numbers as report.md and ``tables/step_sync.csv``."""

from __future__ import annotations

from typing import Optional

from ..base import available, fmt_dur, fmt_int, rows_of
from .ctx import HtmlCtx
from .markup import Col, code, h, int_col, ms_col, name_col, pct_col, rich, section, table

#: series shown (all rows in the CSV)
SHOWN = 10


def sec_step_sync(ctx: HtmlCtx) -> Optional[str]:
    ss = ctx.sec("step_sync")
    rows = rows_of(ss, "series")
    if not available(ss) or not rows:
        return None
    intro = ("<p>Per launching thread and device: blocking calls that waited until the GPU had finished the "
             "thread's work (<em>sync points</em>; the most frequent API marks the steps), and the GPU idle while "
             "the thread then worked on the host before its next launch (host-side idle causes only). "
             "<em>Overlappable</em>: the part that doing that host work during the next step would hide (per step "
             "at most the time the host then waits in the sync). Text equivalent: report.json "
             "<code>step_sync.series</code>, <code>tables/step_sync.csv</code>, report.md “Per-step "
             "synchronization”.</p>")
    cols = (int_col("device", "device_id"), Col("tid", lambda r: h(r.get("tid")), lambda r: r.get("tid"), key="tid"),
            name_col("thread", "thread_name", 30),
            Col("holds", lambda r: "yes" if r.get("holds") else "no", lambda r: r.get("holds"), numeric=False,
                key="holds"),
            name_col("sync API", "api", 40), int_col("sync points", "step_sync_points"),
            ms_col("period p50 (ms)", "period_p50_ns"), ms_col("GPU busy / step (ms)", "gpu_busy_p50_ns"),
            ms_col("wait in sync / step (ms)", "wait_p50_ns"),
            ms_col("host, GPU idle / step (ms)", "exposed_p50_ns"),
            pct_col("exposed % of window", "exposed_pct_of_window"),
            ms_col("overlappable (ms)", "overlap_ns"), pct_col("overlappable % of window", "overlap_pct_of_window"),
            Col("why", lambda r: rich(r.get("reason")), lambda r: r.get("reason"), numeric=False, key="reason"))
    notes = []
    for r in [x for x in rows if x.get("holds")][:2]:
        causes = rows_of(r, "exposed_by_cause")[:4]
        if causes:
            notes.append(f"<p>Device {h(fmt_int(r.get('device_id')))}, tid {h(r.get('tid'))}, after "
                         f"{code(r.get('api'))}: " + "; ".join(
                             f"{h(c.get('kind'))}{' ' + code(c.get('detail')) if c.get('detail') else ''} "
                             f"{h(fmt_dur(c.get('ns')))}" for c in causes) + ".</p>")
    return section("step-sync", "Per-step synchronization",
                   [intro, table("step-sync-series", cols, rows[:SHOWN])] + notes)
