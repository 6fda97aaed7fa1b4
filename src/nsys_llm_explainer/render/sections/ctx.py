"""What every section builder reads: the typed report and the display settings of one rendering."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Dict

from ...vocabulary.units import fmt_at, fmt_span
from ..document import Cell, Code, Data, Inline, SectionResult, inline

if TYPE_CHECKING:
    from ...report import Report

SectionFn = Callable[["View"], SectionResult]


class View:
    """The report (``r``) and the settings of one rendering: the rows of top tables (``--top``), the trace start
    (times are shown relative to it) and GPU names by id."""

    def __init__(self, report: Report) -> None:
        self.r = report
        self.top: int = report.options.top
        self.t0: int = report.window.full_start_ns
        self.gpu_names: Dict[Any, str] = dict(report.facts.gpu_names_by_device())

    def at(self, ns: Any) -> str:
        """A timestamp as ms from trace start (``window.full_start_ns``)."""
        return fmt_at(ns, self.t0)

    def span(self, start: Any, end: Any) -> str:
        """``start → end`` as ms from trace start."""
        return fmt_span(start, end, self.t0)

    def rel_ms(self, ns: int) -> float:
        """A timestamp (an integer ns of a typed result: checked when a report is loaded) as ms from trace start,
        for a chart coordinate."""
        return round((ns - self.t0) / 1e6, 6)

    def device(self, dev: Any) -> Inline:
        """``Device 0`` (with its GPU name where the trace ties the device id to a GPU:
        :meth:`~nsys_llm_explainer.analyses.trace.facts.TraceFacts.gpu_names_by_device`)."""
        gpu = self.gpu_names.get(dev)
        return inline("Device ", Cell(dev), (" (", Data(gpu), ")") if gpu else None)


def capped(shown: int, total: int, csv: str) -> Inline:
    """The note under a capped table: how many rows are shown and where all of them are."""
    if total > shown:
        return (f"Showing {shown} of {total}; all rows in ", Code(f"tables/{csv}"), ".")
    return ("All rows in ", Code(f"tables/{csv}"), ".")
