"""The ``compare --fail-on-regression PCT`` CI gate: one line per NEW and the exit code; it fails closed
(docs/COMPARE.md, "The CI gate")."""

from __future__ import annotations

import math
from typing import Any, List, Tuple

from ..errors import EXIT_INCOMPARABLE, EXIT_REGRESSION, InputError
from ..vocabulary.units import fmt_dur, fmt_ms, signed_pct
from .diff import count_word, graph_only
from .result import CompareResult, Comparison, MetricSpec, TraceSummary


def check_gate(pct: Any) -> float:
    """The ``--fail-on-regression`` value: a finite percentage ≥ 0."""
    try:
        v = float(pct)
    except (TypeError, ValueError):
        raise InputError(f"--fail-on-regression must be a percentage, got {pct!r}") from None
    if not math.isfinite(v) or v < 0:
        raise InputError(f"--fail-on-regression must be a finite percentage ≥ 0, got {pct!r}")
    return abs(v)   # -0 is 0 (the gate's lines say "limit +0 %", not "+-0 %")


def _trace_faults(role: str, t: TraceSummary, spec: MetricSpec) -> List[str]:
    """What keeps one capture from being compared (empty when it is fine on its own)."""
    if graph_only(t):
        return [f"{role} {t.label} has no kernel in the trace (its GPU work in {t.window_name} is whole CUDA-graph "
                "executions, traced without their kernels)"]
    if t.kernel_count == 0:
        return [f"{role} {t.label} has no GPU work (no kernel in {t.window_name})"]
    short = []
    if spec.name is not None and t.metric.count < spec.min_units:
        unit = count_word(spec)
        short.append(f"{t.metric.count} {unit}{'s' if t.metric.count != 1 else ''} < {spec.min_units}")
    if t.window_ns < spec.min_window_ns:
        short.append(f"{t.window_name} {fmt_dur(t.window_ns)} < {fmt_dur(spec.min_window_ns)}")
    return [f"{role} {t.label} is too short ({'; '.join(short)})"] if short else []


def at_fault(result: CompareResult, c: Comparison) -> str:
    """Which capture keeps the pair ``c`` from being compared, and how (``NEW pr has no GPU work …``)."""
    by_label = {t.label: t for t in result.traces}
    faults: List[str] = []
    for role, label in (("BASE", c.base), ("NEW", c.new)):
        t = by_label.get(label)
        if t is not None:
            faults += _trace_faults(role, t, result.metric)
    return "; ".join(faults) if faults else f"BASE {c.base} and NEW {c.new} differ too much"


def gate(result: CompareResult, pct: float, allow_incomparable: bool = False) -> Tuple[List[str], int]:
    """(one line per NEW, the exit code: 0, :data:`EXIT_REGRESSION` or :data:`EXIT_INCOMPARABLE`) for
    ``--fail-on-regression pct`` (see the module docstring)."""
    spec = result.metric
    what = spec.description.split(" (")[0]
    lines: List[str] = []
    regressed = incomparable = False
    for c in result.comparisons:
        vals = (f"{what}: BASE {c.base} {fmt_ms(c.metric_base.p50_ns, unit=True)}, "
                f"NEW {c.new} {fmt_ms(c.metric_new.p50_ns, unit=True)}"
                + ("" if c.change_pct is None else f", {signed_pct(c.change_pct)}"))
        why = f"{c.status.replace('_', ' ')} to compare: {'; '.join(c.reasons)}"
        if c.status != "comparable" or c.change_pct is None:
            if allow_incomparable:
                lines.append(f"not gated ({why}): {vals}")
            else:
                incomparable = True
                lines.append(f"NOT COMPARABLE, failing (exit {EXIT_INCOMPARABLE}): {at_fault(result, c)} — {why}: "
                             f"{vals} (--allow-incomparable lets it pass)")
        elif c.change_pct > pct and c.significant:
            regressed = True
            lines.append(f"REGRESSION: {vals} (limit +{pct:g} %)")
        elif c.change_pct > pct:
            lines.append(f"not failing, within the noise (±{c.noise_pct:.1f} %): {vals} (limit +{pct:g} %)")
        else:
            lines.append(f"ok: {vals} (limit +{pct:g} %)")
    return lines, EXIT_REGRESSION if regressed else EXIT_INCOMPARABLE if incomparable else 0
