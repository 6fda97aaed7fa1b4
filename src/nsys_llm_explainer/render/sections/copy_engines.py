"""Copy paths (``report.json`` ``copy_engines``; analyses/memory/copy_engines.py): the last part of the Memory
copies section — per device and copy direction, how busy the copy path is in the analysis window, the bytes and
rate, and how much of it runs under kernels."""

from __future__ import annotations

from typing import Any, List

from ..base import available, rows_of
from ..document import Em, Strong, TablePart, inline, para
from ..feature_tables import COPY_PATHS
from .ctx import View, capped

#: rows shown (all rows in the CSV)
SHOWN = 12


def copy_path_parts(v: View) -> List[Any]:
    """The copy-path note and table (empty without copies in the window)."""
    ce = v.sec("copy_engines")
    rows = rows_of(ce, "paths")
    if not available(ce) or not rows:
        return []
    note = inline(Strong(("Copy paths",)), " (analysis window), per device and direction: ", Em(("busy",)),
                  " = the union of the direction's copies (concurrent copies count once); bytes prorated to the "
                  "window; GB/s = bytes / busy; ", Em(("under kernels",)), " = the part of busy with a kernel "
                  "running. ", capped(min(SHOWN, len(rows)), len(rows), COPY_PATHS.csv))
    return [para(note), TablePart(COPY_PATHS.cols, rows[:SHOWN], (), "copy-paths")]
