"""BASE against one NEW: status, the change of the headline metric and its noise, per-unit deltas (categories, idle
causes, kernels), finding changes, the main reason and the headline lines (docs/COMPARE.md, "Where the change
comes from")."""

from __future__ import annotations

from dataclasses import replace
from typing import List, Optional, Sequence, Tuple

from ..analyses.common.stats import pct
from ..findings.base import SEVERITY_RANK
from ..vocabulary.cause_kinds import KIND
from ..vocabulary.code_spans import code_name
from ..vocabulary.units import fmt_dur, fmt_ms, signed_ms, signed_pct
from .measure import (
    GRAPH_UNTRACED,
    HOST_PACED,
    NON_GPU,
    NOT_RENAMED,
    UNSEEN,
    Facts,
    Renamed,
    kernel_time_in_common,
    precision_renamed,
    renamed_kinds,
    unseen,
    weighted_jaccard,
)
from .metric import ITERATION, PERIOD, change
from .result import Comparison, Delta, FindingChange, MetricSpec, TraceSummary

NO_CHANGE_PCT = 0.5     # |change| below this is reported as no change even when it is above the noise
IDLE_DETAIL_ROWS = 20

UNIT_WORD = {"step": "step", "iteration": "iteration", "window_s": "s of window"}


def count_word(spec: MetricSpec) -> str:
    """What the headline metric's samples (``MetricValue.count``) are: step periods (a trace of n steps in one process
    has n − 1), else the unit of work."""
    return "step period" if spec.name == PERIOD else UNIT_WORD.get(spec.basis, spec.basis)


def per_unit(ns: int, units: Optional[float]) -> Optional[int]:
    return int(round(ns / units)) if units else None


def _delta(component: str, name: str, detail: str, b: int, n: int, ub: Optional[float], un: Optional[float],
           bc: int = 0, nc: int = 0) -> Delta:
    pb, pn = per_unit(b, ub), per_unit(n, un)
    d = pn - pb if pb is not None and pn is not None else None
    ch = 100.0 * d / pb if d is not None and pb else None
    return Delta(component, name, detail, b, n, pb, pn, d, ch, bc, nc)


def _by_abs(rows: List[Delta]) -> Tuple[Delta, ...]:
    return tuple(sorted(rows, key=lambda r: (-abs(r.delta_per_unit_ns or 0), -(r.base_ns + r.new_ns), r.name,
                                             r.detail)))


def _finding_changes(b: TraceSummary, n: TraceSummary, blind: Tuple[Sequence[str], Sequence[str]]
                     ) -> Tuple[FindingChange, ...]:
    """By finding id; ``blind``: the idle kinds BASE's and NEW's captures cannot show (:func:`.measure.unseen`): the
    finding of such a kind in one report only is ``untraced``, not ``new`` or ``gone``."""
    fb = {f.id: f for f in b.findings}
    fn = {f.id: f for f in n.findings}
    out = []
    for fid in list(fb) + [i for i in fn if i not in fb]:
        x, y = fb.get(fid), fn.get(fid)
        kind = "new" if x is None else "gone" if y is None else "same" if x.severity == y.severity else "severity"
        if kind in ("new", "gone") and fid in {f"idle_{k}" for k in blind[kind == "gone"]}:
            kind = "untraced"
        ref = y or x
        assert ref is not None
        out.append(FindingChange(fid, ref.category, kind, x.severity if x else None, y.severity if y else None,
                                 ref.title, x.time_at_stake_ns if x else None, y.time_at_stake_ns if y else None))
    order = {"new": 0, "severity": 1, "gone": 2, "untraced": 3, "same": 4}
    return tuple(sorted(out, key=lambda c: (order[c.change], SEVERITY_RANK.get(c.new_severity or c.base_severity
                                                                               or "info", 9), c.id)))


def graph_only(t: TraceSummary) -> bool:
    """The trace's GPU was busy in its window but recorded no kernel: whole CUDA-graph executions of a graph-level
    trace (category ``graph_untraced``), not a capture with no GPU work."""
    return t.kernel_count == 0 and _untraced(t) > 0


def _untraced(t: TraceSummary) -> int:
    """The trace's busy ns that no kernel explains (category ``graph_untraced``: whole CUDA-graph executions of a
    graph-level capture)."""
    return sum(s.ns for s in t.categories if s.name == GRAPH_UNTRACED)


def _status(spec: MetricSpec, common: Tuple[float, float], b: TraceSummary, n: TraceSummary,
            kinds: Sequence[str] = ()) -> Tuple[str, Tuple[str, ...], Optional[bool]]:
    """(status, reasons, GPUs alike); ``kinds``: the kernel categories of which each run ran names the other did not
    (:func:`.measure.renamed_kinds`), said when the runs share few kernel names."""
    different: List[str] = []
    short: List[str] = []
    gpus_match = None if not (b.gpus and n.gpus) else b.gpus == n.gpus
    if gpus_match is False:
        different.append(f"different GPUs ({', '.join(b.gpus)} vs {', '.join(n.gpus)})")
    graphs = [t for t in (b, n) if graph_only(t)]
    for t in graphs:   # busy, but no kernel recorded: not "no kernel ran" (docs/COMPARE.md "Too short, too different")
        different.append(f"the kernels of {t.label} are not in the trace: its GPU work in {t.window_name} is whole "
                         "CUDA-graph executions traced without their kernels (nsys --cuda-graph-trace=node records "
                         "them)")
    hidden = [(t, _untraced(t)) for t in (b, n) if _untraced(t)]
    if len(hidden) == 1 and not graphs:   # one capture hides its graphs' kernels, the other records every kernel
        (t, ns), = hidden
        graphs.append(t)
        different.append(f"{t.label} was captured without its CUDA graphs' kernels (nsys --cuda-graph-trace=graph, "
                         f"the default): {pct(ns, t.busy_ns):.0f} % of its GPU busy time in {t.window_name} is whole-"
                         f"graph executions, which {(n if t is b else b).label}'s capture records kernel by kernel "
                         "(capture both with --cuda-graph-trace=node)")
    empty = [t.label for t in (b, n) if t.kernel_count == 0 and not graph_only(t)]
    if empty:
        words = {t.window_name for t in (b, n) if t.label in empty}
        different.append("no kernel ran in " + (f"{words.pop()} of {' and '.join(empty)}" if len(words) == 1 else
                                                " and ".join(f"{t.window_name} of {t.label}" for t in (b, n)
                                                             if t.label in empty)))
    elif not graphs and min(common) < spec.min_common_kernel_share:
        low = [(t, x) for t, x in zip((b, n), common) if x < spec.min_common_kernel_share]
        who = " and ".join(t.label for t, _ in low)
        pcts = " and ".join(f"{int(100 * x)} %" for _, x in low)   # floored: 49.6 % reads 49 %, not 50
        other = "the other" if len(low) > 1 else (n if low[0][0] is b else b).label
        what = ("few kernel names" if kinds else "few kernel names (libraries name kernels per GPU: on other GPUs "
                "this does not show other work)" if gpus_match is False else "little kernel work")
        names = " and ".join(x for x in (", ".join(kinds[:-1]), kinds[-1] if kinds else "") if x)
        tail = (f"; each ran {names} kernels the other did not (kernels are matched by name, not by kind: the same "
                "work under another library, version or GPU is not matched)" if kinds else "")
        different.append(f"the runs share {what}: {who} spend{'s' if len(low) == 1 else ''} only {pcts} "
                         f"of {'its' if len(low) == 1 else 'their'} kernel time in kernel names {other} also ran "
                         f"(< {100 * spec.min_common_kernel_share:.0f} %){tail}")
    if spec.name is None:
        different.append("no common unit of work (no common steps and no common kernel)")
    unit = count_word(spec)
    for t in (b, n):
        if spec.name is not None and t.metric.count < spec.min_units:
            short.append(f"{t.label} has {t.metric.count} {unit}{'s' if t.metric.count != 1 else ''} "
                         f"(< {spec.min_units})")
        if t.window_ns < spec.min_window_ns:
            short.append(f"{t.window_name} of {t.label} is {fmt_dur(t.window_ns)} (< {fmt_dur(spec.min_window_ns)})")
    status = "too_different" if different else "too_short" if short else "comparable"
    return status, tuple(different + short), gpus_match


def _main_reason(cats: Sequence[Delta], kinds: Sequence[Delta], details: Sequence[Delta],
                 total: Optional[int]) -> Optional[Delta]:
    if total is None:
        return None
    sign = 1 if total >= 0 else -1
    parts = [c for c in cats if c.name != NON_GPU] + list(kinds)
    parts = [p for p in parts if p.delta_per_unit_ns is not None]
    if not parts:
        return None
    best = max(parts, key=lambda p: (sign * (p.delta_per_unit_ns or 0), p.name))
    if not best.delta_per_unit_ns:   # no category or idle cause changed: there is no largest change to name
        return None
    if best.component == "idle":
        sub = [d for d in details if d.name == best.name and d.delta_per_unit_ns is not None]
        if sub:
            top = max(sub, key=lambda d: (sign * (d.delta_per_unit_ns or 0), d.detail))
            return Delta("idle", best.name, top.detail, best.base_ns, best.new_ns, best.base_per_unit_ns,
                         best.new_per_unit_ns, best.delta_per_unit_ns, best.change_pct)
    return best


#: a kernel category moving the other way offsets the main reason when its delta is at least this part of the main
#: reason's (work moved between categories: NCCL's all-to-all replaced by DeepEP's, eager kernels by fused ones)
OFFSET_SHARE = 0.25


def _offset(cats: Sequence[Delta], r: Delta) -> Optional[Delta]:
    """The kernel category whose delta per unit has the opposite sign of the main reason ``r``'s, the largest such,
    when it is at least :data:`OFFSET_SHARE` of ``r``'s (docs/COMPARE.md, "main reason")."""
    m = r.delta_per_unit_ns
    if r.component != "category" or not m:
        return None
    opp = [d for d in cats if d.component == "category" and d.delta_per_unit_ns and d.delta_per_unit_ns * m < 0]
    best = max(opp, key=lambda d: (abs(d.delta_per_unit_ns or 0), d.name), default=None)
    return best if best is not None and abs(best.delta_per_unit_ns or 0) >= OFFSET_SHARE * abs(m) else None


def reason_text(r: Delta, host_paced: bool = False) -> str:
    """The main reason ``r`` in words; ``host_paced``: the comparison's ``launch`` rows hold a launch-bound device's
    host-paced ``queued`` time (detail :data:`.measure.HOST_PACED`), so ``launch`` is the launch overhead the
    report's launch-bound finding counts, not only the launch calls."""
    if r.component == "category":
        return f"non-overlapped GPU time in {code_name(r.name)} kernels"
    if r.name == "launch" and host_paced:
        return ("GPU idle in kernel launch calls and between kernels launched one at a time (launch overhead, "
                f"idle cause {code_name(r.name)})")
    return (KIND[r.name].idle_text if r.name in KIND else f"GPU idle ({r.name})") + f" (idle cause {code_name(r.name)})"


def _renamed_line(r: Renamed, b: TraceSummary, n: TraceSummary, unit: str) -> str:
    """The headline's line on kernels a precision change renamed (``r``), which the pair was compared across."""
    fb, fn = (" / ".join(sorted(t)) for t in r.types)    # the formats each side's names name ("" when none)
    cats = " and ".join(code_name(c) for c in r.categories)
    side = f"{n.label}'s {fn + ' ' if fn else ''}{cats} kernels replace {b.label}'s" + (f" {fb} ones" if fb else "")
    quant = " and ".join(f"{t.label}'s" for t, q in zip((b, n), r.quantize) if q)
    tail = f", {quant} `quantize` kernels counted with them" if quant else ""
    la, lb = (f"{x:.3g}" for x in r.launches)
    each = (f"{la} launch{'' if la == '1' else 'es'} per {unit} in each" if la == lb
            else f"{la} and {lb} launches per {unit}")
    return f"Compared across a precision change: {side} ({each}){tail}."


def _harness_line(names: Sequence[str], b: TraceSummary, n: TraceSummary, unit: str) -> str:
    """The headline's line on a benchmark harness (every trace event-timed): which kernels the anchor left out, their
    time per ``unit`` and the timed kernels' (docs/COMPARE.md, "The headline metric")."""
    what = code_name(names[0]) if len(names) == 1 else f"{len(names)} kernel names"
    hb, hn = per_unit(b.harness_kernel_ns or 0, b.units), per_unit(n.harness_kernel_ns or 0, n.units)
    tb, tn = per_unit(b.timed_kernel_ns or 0, b.units), per_unit(n.timed_kernel_ns or 0, n.units)
    each = (f"{fmt_ms(hb, unit=True)} per {unit} in each" if hb == hn else
            f"{fmt_ms(hb, unit=True)} → {fmt_ms(hn, unit=True)} per {unit}")
    timed = f"the timed kernels take {fmt_ms(tb, unit=True)} → {fmt_ms(tn, unit=True)} per {unit}"
    if tb and tn is not None:
        timed += f" ({signed_pct(100.0 * (tn - tb) / tb)})"
    return (f"Benchmark harness: every trace is event-timed, so the anchor is a timed kernel; the harness's own "
            f"kernels, launched outside every timed region ({what}: {each}), are left out of it but still in the "
            f"{unit} period; {timed}.")


def _iteration_words(spec: MetricSpec, b: TraceSummary, n: TraceSummary) -> str:
    """What an anchor iteration is, after its count: the anchor instances it holds and its kernels in each trace
    (kernels in the steady window / iterations in it). An iteration is the same work in both traces only where the
    kernel sequence is: a CUDA-graph token of 200 kernels whose anchor runs 34 times counts 17 iterations a token, a
    step of 12 kernels, against an eager step of 10 (docs/COMPARE.md, "The headline metric")."""
    if spec.name != ITERATION or not spec.anchor_repeat:
        return ""
    per = [f"{t.kernel_count / t.units:,.1f}" if t.units else "–" for t in (b, n)]
    return (f" (an iteration: {_instances(spec.anchor_repeat)} of the anchor kernel; {per[0]} kernels per iteration "
            f"in {code_name(b.label)}, {per[1]} in {code_name(n.label)})")


def _instances(k: int) -> str:
    return f"{k} instance{'s' if k > 1 else ''}"


def _headline(spec: MetricSpec, c: Comparison, details: Sequence[Delta], b: TraceSummary,
              n: TraceSummary, renamed: Renamed = NOT_RENAMED) -> Tuple[str, ...]:
    """The headline lines of ``c`` (``details``: every (kind, detail) delta, not only the rows ``c`` keeps;
    ``renamed``: kernels a precision change renamed, counted as work in common)."""
    unit = UNIT_WORD[spec.basis]
    mb, mn = b.metric, n.metric
    what = spec.description.split(" (")[0]
    ch, noise, verdict = c.change_pct, c.noise_pct, c.verdict
    b_ms, n_ms = fmt_ms(mb.p50_ns, unit=True), fmt_ms(mn.p50_ns, unit=True)
    if verdict == "not_compared" or ch is None:
        first = (f"{code_name(n.label)} vs {code_name(b.label)}: not compared — {c.status.replace('_', ' ')} to "
                 "compare: " + "; ".join(c.reasons) + ".")
    elif verdict == "no_change" and not c.significant:
        first = (f"{code_name(n.label)} and {code_name(b.label)} do not differ significantly on the {what}: {b_ms} → "
                 f"{n_ms} ({signed_pct(ch)}, within the noise).")
    elif verdict == "no_change":
        first = (f"{code_name(n.label)} performs like {code_name(b.label)} on the {what}: {b_ms} → {n_ms} "
                 f"({signed_pct(ch)}).")
    else:
        first = (f"{code_name(n.label)} is {abs(ch):.1f} % {verdict} than {code_name(b.label)} on the {what}: "
                 f"{b_ms} → {n_ms}.")
    lines = [first]
    if spec.name is not None:
        sp = [f"{v.spread:.2f}" if v.spread is not None else "–" for v in (mb, mn)]
        # a pair not compared gets no verdict on its change: its noise (of too few samples, or of another
        # workload) and any part's change say nothing about NEW (docs/COMPARE.md "Too short, too different")
        tail = "" if noise is None or verdict == "not_compared" else f"; noise ±{noise:.1f} %: " + (
            "the change is larger than the noise" if c.significant else "the change is within the noise")
        lines.append(f"Spread p90/p50 {sp[0]} over {mb.count} {count_word(spec)}s vs {sp[1]} over {mn.count}"
                     f"{_iteration_words(spec, b, n)}{tail}.")
    r = c.main_reason
    wb, wn = c.window_per_unit_base_ns, c.window_per_unit_new_ns
    if r is not None and wb is not None and wn is not None and verdict != "not_compared":
        lead = "Main reason" if verdict in ("faster", "slower") else "Largest change"
        paced = any(d.name == "launch" and d.detail == HOST_PACED for d in details)
        text = f"{lead}: {reason_text(r, paced)} {signed_ms(r.delta_per_unit_ns, unit=True)} per {unit}"
        sub = [d for d in details if d.name == r.name and d.detail == r.detail]
        if r.component == "idle" and r.detail and sub:
            text += f", of which {code_name(r.detail)} {signed_ms(sub[0].delta_per_unit_ns, unit=True)}"
        back = _offset(c.category_changes, r)
        if back is not None:
            text += f", offset by {code_name(back.name)} kernels {signed_ms(back.delta_per_unit_ns, unit=True)}"
        lines.append(text + f" (window time per {unit} {fmt_ms(wb, unit=True)} → {fmt_ms(wn, unit=True)}).")
    if spec.harness_left_out and verdict != "not_compared":
        lines.append(_harness_line(spec.harness_left_out, b, n, unit))
    own = [w[len("the "):] if w.startswith("the ") else w for w in (b.window_name, n.window_name)]   # not "'s the"
    where = b.window_name if b.window_name == n.window_name else f"BASE's {own[0]} / NEW's {own[1]}"
    lines.append(f"GPU busy {b.busy_pct:.1f} % → {n.busy_pct:.1f} % of {where}.")
    if renamed and verdict != "not_compared":
        lines.append(_renamed_line(renamed, b, n, unit))
    return tuple(lines)


def compare_pair(spec: MetricSpec, fb: Facts, fn: Facts, b: TraceSummary, n: TraceSummary) -> Comparison:
    ub, un = b.units, n.units
    # no unit of work in common (units: window seconds), no launches per unit to match renamed kernels by
    renamed = precision_renamed(fb, fn, ub, un, spec.min_common_kernel_share) if spec.name is not None else NOT_RENAMED
    sim, common = weighted_jaccard(fb, fn), kernel_time_in_common(fb, fn, renamed)
    status, reasons, gpus_match = _status(spec, common, b, n, renamed_kinds(fb, fn))
    ch, noise = change(b.metric, n.metric)
    significant = None if ch is None else (noise is None or abs(ch) > noise)
    if status != "comparable" or ch is None:
        verdict = "not_compared"
    elif not significant or abs(ch) < NO_CHANGE_PCT:
        verdict = "no_change"
    else:
        verdict = "slower" if ch > 0 else "faster"
    cat_names = list(dict.fromkeys(list(fb.categories) + list(fn.categories)))
    cats = _by_abs([_delta("category", k, "", fb.categories.get(k, 0), fn.categories.get(k, 0), ub, un)
                    for k in cat_names])
    cats = cats + (_delta("non_gpu", NON_GPU, "", fb.non_gpu_ns, fn.non_gpu_ns, ub, un),)
    kinds = _by_abs([_delta("idle", k, "", fb.idle_kind.get(k, 0), fn.idle_kind.get(k, 0), ub, un)
                     for k in dict.fromkeys(list(fb.idle_kind) + list(fn.idle_kind))])
    details = _by_abs([_delta("idle", k[0], k[1], fb.idle_detail.get(k, 0), fn.idle_detail.get(k, 0), ub, un)
                       for k in dict.fromkeys(list(fb.idle_detail) + list(fn.idle_detail))])
    kern = _by_abs([_delta("kernel", k, "", fb.kernels.get(k, (0, 0))[1], fn.kernels.get(k, (0, 0))[1], ub, un,
                           fb.kernels.get(k, (0, 0))[0], fn.kernels.get(k, (0, 0))[0])
                    for k in dict.fromkeys(list(fb.kernels) + list(fn.kernels))])
    wb, wn = per_unit(fb.pooled_window_ns, ub), per_unit(fn.pooled_window_ns, un)
    main = _main_reason(cats, kinds, details, (wn - wb) if wb is not None and wn is not None else None)
    if verdict == "no_change" and main is not None and fmt_ms(abs(main.delta_per_unit_ns or 0)) == fmt_ms(0):
        main = None   # a largest change that reads "+0.000 ms" (a window edge moving a few ns per unit) is none
    blind = (unseen(fb.report), unseen(fn.report))
    c = Comparison(
        base=b.label, new=n.label, status=status, reasons=reasons, similarity=sim,
        common_kernel_share=min(common), gpus_match=gpus_match,
        metric_base=b.metric, metric_new=n.metric, change_pct=ch, noise_pct=noise, significant=significant,
        verdict=verdict, headline=(), main_reason=main, busy_pct_base=b.busy_pct,
        busy_pct_new=n.busy_pct, window_per_unit_base_ns=wb, window_per_unit_new_ns=wn, idle_changes=kinds,
        idle_detail_changes=details[:IDLE_DETAIL_ROWS], category_changes=cats, kernel_deltas=kern,
        finding_changes=_finding_changes(b, n, blind),
        capture_differences=tuple(f"{t.label} recorded no {what}" for t, x, y in ((b, *blind), (n, *blind[::-1]))
                                  for kind, _, what, _ in UNSEEN if kind in x and kind not in y))
    return replace(c, headline=_headline(spec, c, details, b, n, renamed))
