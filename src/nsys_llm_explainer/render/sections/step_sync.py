"""Per-step synchronization (``report.json`` ``step_sync``; analyses/steps/sync.py): the last part of the
CPU↔GPU synchronization section; in HTML with the exposed host time by cause of the first holding series."""

from __future__ import annotations

from typing import Any, List

from ...vocabulary.units import fmt_dur, fmt_int
from ..document import Code, Data, Em, HtmlOnly, Strong, TablePart, inline, joined, para
from ..feature_tables import STEP_SYNC
from .ctx import View, capped

#: series shown (all rows in the CSV)
SHOWN = 6


def step_sync_parts(v: View) -> List[Any]:
    """The per-step sync note and table (empty when no thread has a sync point)."""
    ss = v.r.step_sync
    rows = ss.series
    if not ss.available or not rows:
        return []
    note = inline(Strong(("Per-step synchronization",)), ", per launching thread and device: blocking calls that "
                  "waited until the GPU had finished the thread's work (the most frequent API marks the steps), and "
                  "the GPU idle while the thread then worked on the host before its next launch; ",
                  Em(("overlappable",)), ": the part that doing that work during the next step would hide. ",
                  capped(min(SHOWN, len(rows)), len(rows), STEP_SYNC.csv))
    notes = []
    for r in ss.holding()[:2]:
        causes = r.exposed_by_cause[:4]
        if causes:
            notes.append(para(f"Device {fmt_int(r.device_id)}, tid ", Data(r.tid), ", after ",
                              Code(r.api), ": host time with the GPU idle by cause: ", joined(
                                  [inline(Data(kind), (" ", Code(detail)) if detail else None, f" {fmt_dur(ns)}")
                                   for kind, detail, ns in causes], "; "), "."))
    return [para(note), TablePart(STEP_SYNC.cols, rows[:SHOWN], (), "step-sync-series"), HtmlOnly(tuple(notes))]

