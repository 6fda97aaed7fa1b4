"""The per-step synchronization section of ``report.md`` (``report.json`` ``step_sync``; analyses/step_sync.py)."""

from __future__ import annotations

from ..base import available, rows_of
from ..specs import STEP_SYNC
from ..table import md_table
from .ctx import Ctx, Omitted, Result

#: series shown (all rows in the CSV)
SHOWN = 6


def sec_step_sync(ctx: Ctx) -> Result:
    ss = ctx.sec("step_sync")
    rows = rows_of(ss, "series")
    if not available(ss) or not rows:
        return Omitted("Per-step synchronization", str(ss.get("reason") or "no sync point"))
    note = ("Per launching thread and device: blocking calls that waited until the GPU had finished the thread's "
            "work (the most frequent API marks the steps), and the GPU idle while the thread then worked on the "
            "host before its next launch; *overlappable*: the part that doing that work during the next step would "
            "hide. " + ctx.capped(min(SHOWN, len(rows)), len(rows), STEP_SYNC.csv))
    # the table right under the heading (valid GFM; keeps the demo report within its two-minute length)
    return ["## Per-step synchronization"] + md_table(STEP_SYNC.cols, rows[:SHOWN]) + ["", note]
