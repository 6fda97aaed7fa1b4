"""What every section builder reads: the report dict plus display settings (no metric is derived here).

A section builder takes a :class:`View` and returns a :class:`..document.Section`, :class:`..document.Omitted`
when its data is unavailable or empty (listed in one line at the end of the report), or ``None`` when it does
not apply at all (e.g. no warnings).
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from ...vocabulary.units import fmt_at
from ..base import ReportView, available
from ..document import Cell, Code, Data, Inline, Omitted, SectionResult, inline

SectionFn = Callable[["View"], SectionResult]


class View(ReportView):
    """The report dict and the settings of one rendering."""

    def at(self, ns: Any) -> str:
        """A timestamp as ms from trace start (``window.full_start_ns``)."""
        return fmt_at(ns, self.t0)

    def span(self, start: Any, end: Any) -> str:
        """``start → end`` as ms from trace start."""
        return f"{fmt_at(start, self.t0, unit=False)} → {fmt_at(end, self.t0)}"

    def rel_ms(self, ns: Any) -> Optional[float]:
        """A timestamp as ms from trace start, for a chart coordinate."""
        t0 = self.t0
        if not isinstance(ns, (int, float)) or isinstance(ns, bool) or not isinstance(t0, (int, float)):
            return None
        return round((ns - t0) / 1e6, 6)

    def device(self, dev: Any) -> Inline:
        """``Device 0`` (with its GPU name when known)."""
        gpu = self.gpu_names.get(dev)
        return inline("Device ", Cell(dev), (" (", Data(gpu), ")") if gpu else None)

    def unavailable(self, key: str, title: str) -> Optional[Omitted]:
        """:class:`Omitted` when ``report[key]`` is missing or ``available`` is false."""
        sec = self.sec(key)
        if available(sec):
            return None
        return Omitted(title, str(sec.get("reason") or "not in this report"))


def capped(shown: int, total: int, csv: str) -> Inline:
    """The note under a capped table: how many rows are shown and where all of them are."""
    if total > shown:
        return (f"Showing {shown} of {total}; all rows in ", Code(f"tables/{csv}"), ".")
    return ("All rows in ", Code(f"tables/{csv}"), ".")
