"""``report.md``: a report a performance engineer reads in two minutes.

Layout: title and headline (verdict, busy %, window, top cause, first action), warnings, findings, where the
idle time went, then only the sections whose data exists (:data:`SECTIONS`, in order), one line naming the
sections left out, and one closing "How these numbers are computed" section.

The renderer reads the report dict only: it formats, shortens and escapes, and never derives a metric.
Sections live in :mod:`.headline`, :mod:`.findings`, :mod:`.idle`, :mod:`.kernels`, :mod:`.diagnosis` and
:mod:`.appendix`; :data:`SECTIONS` is the one explicit, ordered list of them.
"""

from __future__ import annotations

from typing import Any, List, Mapping, Tuple

from ..base import Renderer
from .appendix import how_computed, omitted_line, sec_trace
from .ctx import Ctx, Omitted, SectionFn
from .diagnosis import sec_cuda_api, sec_graphs, sec_memory, sec_nccl, sec_nvtx, sec_steps, sec_sync
from .findings import sec_findings
from .headline import sec_title, sec_warnings
from .idle import sec_gaps, sec_idle
from .kernels import sec_categories, sec_kernels, sec_launch, sec_traits
from .step_sync import sec_step_sync

#: every section of report.md, in order
SECTIONS: Tuple[SectionFn, ...] = (
    sec_title,
    sec_warnings,
    sec_findings,
    sec_idle,
    sec_kernels,
    sec_traits,
    sec_categories,
    sec_steps,
    sec_launch,
    sec_sync,
    sec_cuda_api,
    sec_memory,
    sec_nvtx,
    sec_graphs,
    sec_nccl,
    sec_gaps,
    sec_trace,
    sec_step_sync,   # per-step synchronization
)


def render_markdown(report: Mapping[str, Any]) -> str:
    """The full ``report.md`` text for a report dict."""
    ctx = Ctx(report)
    blocks: List[List[str]] = []
    omitted: List[Omitted] = []
    for fn in SECTIONS:
        out = fn(ctx)
        if isinstance(out, Omitted):
            omitted.append(out)
        elif out:
            blocks.append(out)
    tail = omitted_line(omitted)
    if tail:
        blocks.append(tail)
    blocks.append(how_computed(ctx))
    return "\n\n".join("\n".join(b) for b in blocks) + "\n"


class MarkdownRenderer(Renderer):
    """``report.md`` (see module docstring)."""

    name = "markdown"
    filename = "report.md"

    def text(self, report: Mapping[str, Any]) -> str:
        return render_markdown(report)


__all__ = ["MarkdownRenderer", "SECTIONS", "render_markdown"]
