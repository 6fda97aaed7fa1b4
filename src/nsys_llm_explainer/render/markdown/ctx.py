"""What every Markdown section reads: the report dict plus display settings (no metric is derived here).

A section function takes a :class:`Ctx` and returns its lines (``## Heading`` first, no trailing blank
line), :class:`Omitted` when its data is unavailable or empty (listed in one line at the end of the
report), or ``None`` when it does not apply at all (e.g. no warnings).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, List, Optional, Union

from ..base import ReportView, available, fmt_at
from ..escape import md_cell, md_text


@dataclass(frozen=True)
class Omitted:
    """A section left out: its title and why (the section's ``reason`` in report.json)."""

    title: str
    reason: str


Lines = List[str]
Result = Union[Lines, Omitted, None]
SectionFn = Callable[["Ctx"], Result]


class Ctx(ReportView):
    """The report dict and the settings of one Markdown rendering."""

    def at(self, ns: Any) -> str:
        """A timestamp as ms from capture start (``window.full_start_ns``)."""
        return fmt_at(ns, self.t0)

    def span(self, start: Any, end: Any) -> str:
        """``start → end`` as ms from capture start."""
        return f"{fmt_at(start, self.t0, unit=False)} → {fmt_at(end, self.t0)}"

    def device(self, dev: Any) -> str:
        """``Device 0`` (with its GPU name when known), escaped."""
        label = f"Device {md_cell(dev)}"
        gpu = self.gpu_names.get(dev)
        return f"{label} ({md_text(gpu, line_start=False)})" if gpu else label

    def unavailable(self, key: str, title: str) -> Optional[Omitted]:
        """:class:`Omitted` when ``report[key]`` is missing or ``available`` is false."""
        sec = self.sec(key)
        if available(sec):
            return None
        return Omitted(title, str(sec.get("reason") or "not in this report"))

    def capped(self, shown: int, total: int, csv: str) -> str:
        """The note under a capped table: how many rows are shown and where all of them are."""
        if total > shown:
            return f"Showing {shown} of {total}; all rows in `tables/{csv}`."
        return f"All rows in `tables/{csv}`."


def heading(title: str, note: str = "") -> Lines:
    """``## title`` plus an optional one-line note under it (the note is already escaped)."""
    return [f"## {title}", ""] + ([note, ""] if note else [])
