"""The report's sections (:data:`SECTIONS`, in order), built once from the typed report as document parts; report.md
and report.html lay out the same sections. Builders format, never derive a metric."""

from __future__ import annotations

from typing import TYPE_CHECKING, List, Tuple

from ..document import Document, Omitted, Section
from .appendix import how_computed, omitted_section, sec_trace
from .ctx import SectionFn, View
from .diagnosis import sec_cuda_api, sec_graphs, sec_memory, sec_nccl, sec_nvtx, sec_sync, sec_waits
from .findings import sec_findings
from .headline import sec_title, sec_warnings, trace_name
from .idle import sec_gaps, sec_idle
from .kernels import sec_categories, sec_kernels, sec_launch, sec_traits
from .steps import sec_steps
from .timeline import sec_timeline
from .unified_memory import sec_unified_memory

if TYPE_CHECKING:
    from ...report import Report

#: every section of the report, in order (the omitted-sections line and "How these numbers are computed" follow)
SECTIONS: Tuple[SectionFn, ...] = (
    sec_title,
    sec_warnings,
    sec_findings,
    sec_timeline,
    sec_idle,
    sec_kernels,
    sec_traits,
    sec_categories,
    sec_steps,
    sec_launch,
    sec_sync,
    sec_waits,
    sec_cuda_api,
    sec_memory,
    sec_nvtx,
    sec_graphs,
    sec_nccl,
    sec_gaps,
    sec_trace,
    sec_unified_memory,
)


def build_document(report: Report) -> Document:
    """The report's document: every section with data, the omitted ones named in one line, then the method."""
    v = View(report)
    sections: List[Section] = []
    omitted: List[Omitted] = []
    for fn in SECTIONS:
        out = fn(v)
        if isinstance(out, Omitted):
            omitted.append(out)
        elif out is not None:
            sections.append(out)
    if omitted:
        sections.append(omitted_section(omitted))
    sections.append(how_computed(v))
    return Document(f"Nsight Systems LLM report: {trace_name(v)}", tuple(sections))


__all__ = ["SECTIONS", "build_document"]
