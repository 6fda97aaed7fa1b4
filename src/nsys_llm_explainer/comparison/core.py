"""Build a :class:`CompareResult` from typed reports (or from trace paths, analyzing each one)."""

from __future__ import annotations

import stat
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Dict, List, Optional, Sequence, Tuple

from .. import __version__
from ..analyses.common.stats import pct
from ..analyses.steps.periods import PAUSE, step_periods
from ..errors import CWD_GONE, InputError, OptionError, cwd_gone
from ..paths import check_name, stat_or_none
from ..vocabulary.windows import window_name
from .diff import compare_pair, per_unit
from .measure import HOST_PACED, NON_GPU, UNSEEN, UNSEEN_TEXT, Facts, fold_unseen, gather, host_place, unseen
from .metric import PERIOD, STEP, choose_metric, measure
from .result import CompareResult, FindingBrief, MetricSpec, Share, StepInfo, TraceSummary

if TYPE_CHECKING:
    from ..report import Report

Analyzer = Callable[[str], "Report"]


def default_labels(paths: Sequence[str]) -> List[str]:
    """File stems; the parent folder's name where stems repeat (``run1/trace.sqlite``); else numbered."""
    ps = [Path(str(p)) for p in paths]
    labels = [p.stem for p in ps]
    if len(set(labels)) < len(labels):
        labels = [p.parent.name or p.stem for p in ps]
    if len(set(labels)) < len(labels):
        labels = [f"{i}:{p.stem}" for i, p in enumerate(ps)]
    return labels


def check_labels(labels: Optional[Sequence[str]], paths: Sequence[str]) -> List[str]:
    if labels is None:
        return default_labels(paths)
    labels = [str(x).strip() for x in labels]
    if len(labels) != len(paths):
        raise OptionError("labels", f"has {len(labels)} label{'s' if len(labels) != 1 else ''} for {len(paths)} "
                          "traces; give one per trace")
    if any(not x for x in labels):
        raise OptionError("labels", "a label is empty", ": ")
    if len(set(labels)) < len(labels):
        raise OptionError("labels", "labels must be distinct", ": ")
    return labels


def _steps(rep: Report) -> StepInfo:
    s = rep.steps
    p50, p90 = (s.summary.p50_ns, s.summary.p90_ns) if s.summary else (None, None)
    return StepInfo(bool(s.available and s.step_count), s.reason, s.method, s.confidence, int(s.step_count),
                    p50, p90, (p90 / p50) if p50 and p90 is not None else None)


def summarize(spec: MetricSpec, f: Facts) -> TraceSummary:
    mv, units = measure(spec, f)
    w = f.pooled_window_ns
    idle, cats = (tuple(Share(k, ns, pct(ns, w), per_unit(ns, units))
                        for k, ns in sorted(d.items(), key=lambda kv: (-kv[1], kv[0])))
                  for d in (f.idle_kind, f.categories))
    cats += (Share(NON_GPU, f.non_gpu_ns, pct(f.non_gpu_ns, w), per_unit(f.non_gpu_ns, units)),)
    rep = f.report
    steps = _steps(rep)
    notes = [] if steps.available else [f"no steps found: {steps.reason or 'the steps analysis found none'}"]
    if spec.name == PERIOD:
        sp = step_periods(rep.steps.arrays if rep.steps.available else None)
        if sp.paused:
            lost = " or a span the profiler did not record" if rep.window.details.not_recorded_ns else ""
            notes.append(f"{sp.paused} step period{'s' if sp.paused != 1 else ''} spanning an idle pause (the idle — "
                         f"no step range, no GPU work — between a step's end and the next step's start over {PAUSE} × "
                         f"the median step period){lost} not counted in the headline metric")
        if sp.overlapped:
            notes.append(f"{sp.overlapped} pair{'s' if sp.overlapped != 1 else ''} of consecutive steps of one "
                         "process overlap (step ranges on several threads): no period measured between them")
    if f.not_counted:
        notes.append("; ".join(f"device {d} ran no kernel in the window ({role})" for d, role in f.not_counted)
                     + ": not counted in busy, idle or the window")
    findings = tuple(FindingBrief(x.id, x.category, x.severity, x.title, int(x.time_at_stake_ns))
                     for x in rep.findings)
    win, sk = rep.window, rep.steady_kernels
    return TraceSummary(
        label=f.label, path=f.path, gpus=tuple(sorted({str(g.name or "") for g in rep.trace.gpus} - {""})),
        device_count=f.device_count, window_method=win.method,
        window_name=window_name(win.method, win.details.bins is not None, rep.window_repeats),
        window_start_ns=int(win.start_ns),
        window_end_ns=int(win.end_ns), window_ns=int(win.end_ns - win.start_ns), pooled_window_ns=w,
        busy_ns=f.busy_ns, busy_pct=f.busy_pct, non_gpu_ns=f.non_gpu_ns, units=units, metric=mv, steps=steps,
        idle_by_kind=idle, categories=cats, kernel_count=int(sk.kernel_count) if sk.available else 0,
        total_kernel_ns=int(sk.total_kernel_ns) if sk.available else 0, verdict=rep.headline.verdict,
        findings=findings, notes=tuple(notes), host_paced_ns=f.idle_detail.get(("launch", HOST_PACED)) or None,
        **_harness_ns(spec, rep))


def _harness_ns(spec: MetricSpec, rep: Report) -> Dict[str, int]:
    """``harness_kernel_ns`` and ``timed_kernel_ns`` of a trace when the anchor left harness kernels out (every
    trace event-timed): the steady window's kernel time launched outside every timed region and the rest."""
    h = rep.harness
    if spec.harness_left_out is None or h is None:
        return {}
    sk = rep.steady_kernels
    timed = int(h.timed_kernel_ns) if h.kernel_count else int(sk.total_kernel_ns) if sk.available else 0
    return {"harness_kernel_ns": int(h.kernel_ns), "timed_kernel_ns": timed}


def _fold_unseen(facts: List[Facts]) -> Tuple[List[Facts], List[str]]:
    """The facts with the host places some capture cannot show counted as ``host_cpu`` (:func:`.measure.fold_unseen`:
    from the first place that an evidence — OS-runtime calls, NVTX ranges — some trace lacks decides and that holds idle
    in a trace that has it), and per trace the note saying so ("" when its idle did not move): docs/COMPARE.md, "Where
    the change comes from"."""
    blind = [unseen(f.report) for f in facts]
    firsts = {u[0]: min((i for f, b in zip(facts, blind) if u[0] not in b for k, ns in f.idle_detail.items() if ns
                         for i in (host_place(*k),) if i in u[1]), default=None) for u in UNSEEN}
    lack = [(f.label, [u for u in UNSEEN if u[0] in b and firsts[u[0]] is not None]) for f, b in zip(facts, blind)]
    lack = [(label, us) for label, us in lack if us]
    if not lack:
        return facts, [""] * len(facts)
    first = min(firsts[u[0]] or 0 for _, us in lack for u in us)
    why = "; ".join(f"{label} recorded no {' and no '.join(u[2] for u in us)}" for label, us in lack) + \
        ", so no trace's host time outside CUDA calls is split by " + \
        " or ".join(u[3] for u in UNSEEN if min(u[1]) >= first or any(u in us for _, us in lack))
    out, notes = [], []
    for f in facts:
        g = fold_unseen(f, first)
        kinds = sorted({k for k, d in f.idle_detail if k != "host_cpu" and host_place(k, d) in range(first, 3)}) \
            if g is not f else []
        out.append(g)
        notes.append(f"idle cause{'s' if len(kinds) > 1 else ''} " + " and ".join(
            f"{k} ({UNSEEN_TEXT[k] if first == 0 or k == 'nvtx' else UNSEEN_TEXT[k] + ' that does not wait'})"
            for k in kinds) + f" counted as host_cpu: {why}" if kinds else "")
    return out, notes


def compare_reports(reports: Sequence[Report], labels: Optional[Sequence[str]] = None,
                    paths: Optional[Sequence[str]] = None) -> CompareResult:
    """Compare typed reports: ``reports[0]`` is BASE, each later one a NEW compared against it."""
    t0 = time.perf_counter()
    if len(reports) < 2:
        raise InputError(f"compare needs at least two traces (BASE NEW), got {len(reports)}")
    for r in reports:   # the steady window's kernel starts and categories: not in a loaded report.json
        if r.steady_kernel_starts is None or r.steady_categories is None:
            raise InputError("compare needs the trace itself, and this report was loaded from report.json "
                             "(Report.from_dict), which does not carry what it reads: analyze the trace again")
    paths = [str(p) for p in (paths or [r.trace.path for r in reports])]
    labels = check_labels(labels, paths)
    facts = [gather(r, lab, p) for r, lab, p in zip(reports, labels, paths)]
    spec = choose_metric(facts)
    if spec.name in (PERIOD, STEP):   # the parts over whole steps (docs/COMPARE.md, "Where the change comes from")
        facts = [gather(r, lab, p, periods=True) for r, lab, p in zip(reports, labels, paths)]
    facts, notes = _fold_unseen(facts)
    sums = [summarize(spec, f) for f in facts]
    sums = [replace(s, notes=s.notes + (n,)) if n else s for s, n in zip(sums, notes)]
    comps = tuple(compare_pair(spec, facts[0], facts[i], sums[0], sums[i]) for i in range(1, len(facts)))
    warnings = tuple(f"{lab}: {w}" for r, lab in zip(reports, labels) for w in r.warnings)
    return CompareResult(__version__, spec, tuple(sums), comps, warnings,
                         {"compare": round(time.perf_counter() - t0, 4)})


def compare_paths(paths: Sequence[str], labels: Optional[Sequence[str]], analyze: Analyzer) -> CompareResult:
    """Analyze each trace with ``analyze`` (the API: :func:`pipeline.analyze_path`; the command line also exports a
    ``.nsys-rep``) and compare them; every path is checked before any analysis runs."""
    if len(paths) < 2:
        raise InputError(f"compare needs at least two traces (BASE NEW), got {len(paths)}")
    paths = [str(p) for p in paths]
    for p in paths:
        pp = Path(p)
        st = stat_or_none(p)
        if st is None:
            raise InputError(f"trace not found: {pp}" + (f" ({CWD_GONE})" if cwd_gone(p) else ""))
        if stat.S_ISDIR(st.st_mode):
            raise InputError(f"{pp} is a directory, not a trace file")
        check_name(str(pp))
    labels = check_labels(labels, paths)
    t0 = time.perf_counter()
    reports = []
    for p, lab in zip(paths, labels):
        try:
            reports.append(analyze(p))
        except OptionError as e:   # an option this trace cannot meet (--window-nvtx NAME, no such range): say which
            if type(e) is not OptionError:
                raise
            raise OptionError(e.option, f"{e.detail} (trace {lab}: {p})", e.sep) from None
    t_analyze = round(time.perf_counter() - t0, 4)
    res = compare_reports(reports, labels, paths)
    return replace(res, timings_s={"analyze": t_analyze, **res.timings_s})
