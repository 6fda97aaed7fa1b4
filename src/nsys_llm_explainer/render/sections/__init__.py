"""The report's sections, built once from the report dict as document parts (:mod:`..document`); report.md
(:mod:`..markdown`) and report.html (:mod:`..html`) lay out the same sections.

Order: title and headline (verdict, busy %, window, top cause, first action), warnings, findings (and the
facts their advice rests on), the per-device timeline (HTML only: charts), where the idle time went, then
the sections whose data exists (:data:`SECTIONS`, in order), one line naming the sections left out, and
"How these numbers are computed". Builders read the report dict only: they format and never derive a metric.
"""

from __future__ import annotations

from typing import Any, List, Mapping, Tuple

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


def build_document(report: Mapping[str, Any]) -> Document:
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
    tail = omitted_section(omitted)
    if tail is not None:
        sections.append(tail)
    method = how_computed(v)
    assert isinstance(method, Section)
    sections.append(method)
    return Document(f"Nsight Systems LLM report: {trace_name(v)}", tuple(sections))


__all__ = ["SECTIONS", "build_document"]
