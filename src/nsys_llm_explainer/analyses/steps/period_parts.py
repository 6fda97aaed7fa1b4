"""What a comparison splits per step period: busy per kernel category, idle per cause and kernel time per name over
whole step periods — from the first step's start to the last step's start — so that a capture's length does not
move the per-step parts (docs/COMPARE.md, "Where the change comes from"; not in report.json)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ...model.clip import clip_model
from ...model.timeline import iter_timelines
from ...model.trace import TraceModel
from ..idle.causes import analyze_idle_causes
from ..idle.result import IdleCausesResult
from ..kernels.categories import CategoryResult, analyze_categories
from ..kernels.summary import KernelSummary, analyze_kernels
from ..nvtx.tree import NvtxTree
from ..trace.window import WindowResult
from .metrics import StepResult
from .periods import PeriodSpan, period_span, tiled_span


@dataclass(frozen=True)
class PeriodParts:
    """The parts over :attr:`span` (each device's timeline clipped to it): idle causes (docs/MODEL.md), kernel
    categories' non-overlapped busy time, kernels by name; ``idle_causes.devices[i].window_ns`` is the span."""

    span: PeriodSpan
    idle_causes: IdleCausesResult
    categories: CategoryResult
    kernels: KernelSummary


def analyze_period_parts(model: TraceModel, steady: TraceModel, window: WindowResult, steps: StepResult,
                         tree: Optional[NvtxTree], categories: CategoryResult, include_memcpy: bool
                         ) -> Optional[PeriodParts]:
    """The parts over the whole step periods of NVTX steps (:func:`.periods.period_span`) or over the marker-kernel
    steps, which tile the timeline (:func:`.periods.tiled_span`); None without steps or when none lies in the
    window."""
    if not steps.available or steps.method not in ("nvtx", "marker"):
        return None
    span = (period_span if steps.method == "nvtx" else tiled_span)(steps.arrays, window.start_ns, window.end_ns)
    if span is None:
        return None
    sub = clip_model(steady, span.start_ns, span.end_ns)
    idle = analyze_idle_causes(model, sub, iter_timelines(sub, span.start_ns, span.end_ns, include_memcpy), tree,
                               pieces_needed=False)
    rules = categories.rules if categories.available else None
    cats = analyze_categories(sub, rules, include_memcpy=include_memcpy) if rules is not None else categories
    return PeriodParts(span, idle, cats, analyze_kernels(sub, None))
