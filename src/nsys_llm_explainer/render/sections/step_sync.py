"""Per-step synchronization (``report.json`` ``step_sync``; analyses/steps/sync.py): the last part of the
CPU↔GPU synchronization section; in HTML with the exposed host time by cause of the first holding series."""

from __future__ import annotations

from typing import Any, List

from ...vocabulary.units import fmt_dur, fmt_int
from ..document import Code, Data, Em, HtmlOnly, Strong, TablePart, inline, joined, para
from ..feature_tables import STEP_SYNC, THREAD_WAITS, wait_rows
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
    for r in [x for x in rows if x.holds][:2]:
        causes = r.exposed_by_cause[:4]
        if causes:
            notes.append(para(f"Device {fmt_int(r.device_id)}, tid ", Data(r.tid), ", after ",
                              Code(r.api), ": host time with the GPU idle by cause: ", joined(
                                  [inline(Data(kind), (" ", Code(detail)) if detail else None, f" {fmt_dur(ns)}")
                                   for kind, detail, ns in causes], "; "), "."))
    return [para(note), TablePart(STEP_SYNC.cols, rows[:SHOWN], (), "step-sync-series"), HtmlOnly(tuple(notes))]


def waits_parts(v: View) -> List[Any]:
    """Follow the wait: per launching thread that waits in OS calls, its waits and what the other threads of its
    process did meanwhile (empty when no launching thread waits)."""
    ws = v.r.waits
    if not ws.available or not ws.launchers:
        return []
    out: List[Any] = []
    for w in ws.launchers[:2]:
        calls = joined([inline(Code(c.name), f" {fmt_dur(c.ns)}") for c in w.calls[:3]], "; ")
        ctx = w.contexts[:1]
        out.append(para(Strong(("Waits of the launching thread",)), " ", Code(w.thread), " (tid ",
                        Data(w.tid), "): ", f"{fmt_dur(w.wait_ns)} in OS calls that wait "
                        f"({w.wait_pct_of_window:.1f} % of the window): ", calls,
                        (inline("; inside NVTX ", Code(ctx[0].range), f" {ctx[0].pct_of_waits:.0f} %") if ctx
                         else None),
                        f". GPU idle charged to these waits: {fmt_dur(w.gpu_idle_ns)}. What the other "
                        "threads of its process were in meanwhile (time overlapped with the waits):"))
    rows = wait_rows(v.r)
    return out + [para(capped(min(SHOWN * 2, len(rows)), len(rows), THREAD_WAITS.csv)),
                  TablePart(THREAD_WAITS.cols, rows[:SHOWN * 2], (), "thread-waits")]
