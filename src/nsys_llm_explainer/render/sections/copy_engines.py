"""Copy paths (``report.json`` ``copy_engines``; analyses/memory/copy_engines.py): the last part of the Memory
copies section — per device and copy direction, how busy the copy path is in the analysis window, the bytes and
rate, and how much of it runs under kernels."""

from __future__ import annotations

from typing import Any, List

from ..document import Em, Strong, TablePart, inline, para
from ..feature_tables import COPY_PATHS
from .ctx import View, capped

#: rows shown (all rows in the CSV): the paths busy at least MIN_SHOWN_PCT % of the window, at most SHOWN
SHOWN = 12
MIN_SHOWN_PCT = 5.0


def copy_path_parts(v: View) -> List[Any]:
    """The copy-path note and table (empty when no path is busy ``MIN_SHOWN_PCT`` % of the window)."""
    ce = v.r.copy_engines
    every = ce.paths
    rows = [r for r in every if r.busy_pct >= MIN_SHOWN_PCT]
    if not ce.available or not rows:
        return []
    note = inline(Strong(("Copy paths",)), " (analysis window), per device and direction: ", Em(("busy",)),
                  " = the union of the direction's copies (concurrent copies count once); bytes prorated to the "
                  "window; GB/s = bytes / busy; ", Em(("under kernels",)), " = the part of busy with a kernel "
                  f"running. Paths busy at least {MIN_SHOWN_PCT:.0f} % of the window; ",
                  capped(min(SHOWN, len(rows)), len(every), COPY_PATHS.csv))
    return [para(note), TablePart(COPY_PATHS.cols, rows[:SHOWN], (), "copy-paths")]
