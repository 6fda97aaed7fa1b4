"""The per-step synchronization section of ``report.md`` (``report.json`` ``step_sync``; analyses/steps/sync.py)."""

from __future__ import annotations

from ..base import available, rows_of
from ..feature_tables import STEP_SYNC
from ..table import md_table
from .ctx import Ctx, Lines

#: series shown (all rows in the CSV)
SHOWN = 6


def step_sync_lines(ctx: Ctx) -> Lines:
    """The per-step sync table, as the last part of the CPU↔GPU synchronization section (empty when no
    thread has a sync point)."""
    ss = ctx.sec("step_sync")
    rows = rows_of(ss, "series")
    if not available(ss) or not rows:
        return []
    note = ("**Per-step synchronization**, per launching thread and device: blocking calls that waited until the "
            "GPU had finished the thread's work (the most frequent API marks the steps), and the GPU idle while the "
            "thread then worked on the host before its next launch; *overlappable*: the part that doing that work "
            "during the next step would hide. " + ctx.capped(min(SHOWN, len(rows)), len(rows), STEP_SYNC.csv))
    return ["", note, ""] + md_table(STEP_SYNC.cols, rows[:SHOWN])
