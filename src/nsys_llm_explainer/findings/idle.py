"""Findings from the idle causes: one total mapping from cause kind to finding, the launch-bound composite, one
claim per idle ns, the window's edges left out (docs/FINDINGS.md, "Findings": "Idle causes → findings")."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import replace
from typing import AbstractSet, Any, Dict, List, Mapping, Optional, Tuple

from ..analyses.api.classes import GRAPH_LAUNCH, normalize
from ..analyses.api.cuda_api import CudaApiResult
from ..analyses.idle.causes import IdleCause, IdleCausesResult
from ..analyses.idle.gpu_time import GpuTimeResult
from ..analyses.idle.host_samples import SHOWN_KINDS, UNSAMPLED_KEY, HostSamplesResult, samples_evidence
from ..analyses.idle.result import DeviceCauses
from ..analyses.kernels.traits import KernelTraitsResult
from ..analyses.memory.copy_engines import CopyEnginesResult
from ..analyses.nvtx.attribution import AttributionResult
from ..analyses.steps.sync import StepSyncResult
from ..analyses.threads.waits import WaitsResult
from ..analyses.trace.facts import TraceFacts
from ..analyses.trace.window import WindowResult
from ..vocabulary.cause_kinds import KIND, CauseKind
from ..vocabulary.code_spans import code_name
from ..vocabulary.units import fmt_count, fmt_span
from ..vocabulary.units import fmt_dur as dur
from .advice import speaks_of_steps
from .base import MEDIUM_SHARE, Check, Claims, Finding, Scope, finding
from .idle_claims import SPLIT_SHOWN_POINTS, charge_line, edge_bin_ns, split_claims, title_quoted
from .idle_copy import COPY_VARIANTS, copy_calls_pace, copy_facts, copy_waiting, outlast_kernels, pageable_matters
from .idle_once import (
    AUTOTUNE_MIN_TRIAL_PCT,
    STARTUP_MIN_SHARE,
    autotune_line,
    autotune_passes,
    early_only,
    loop_detail,
    once_gap,
    once_line,
    once_ns,
    once_title,
    pause_line,
)
from .launch_bound import kernel_lines, kind_severity, launch_bound_devices, launch_finding
from .step_sync import event_timed_series, timed_line
from .unified_memory import is_unified_detail
from .waits import OTHER_PROCESS_ADVICE, WaitStory, processes_line, qualifying, source_line, thread_named, wait_story

#: the queued-latency variants' advice (the fusion line in three forms, by the ``gpu_pdl`` fact)
QUEUED_LATENCY_ADVICE = ("queued_latency.fuse", "queued_latency.fuse.no_pdl", "queued_latency.fuse.pdl_unknown",
                         "queued_latency.compile", "compiled.graph_breaks")
#: the variants a kind's finding may take instead of the kind's own words (back-to-back queued kernels; the copy
#: finding's: :mod:`.idle_copy`): titles and the advice they give
VARIANTS: Dict[str, CauseKind] = {
    **COPY_VARIANTS,
    "queued_latency": replace(
        KIND["queued"], title="Per-kernel launch latency: idle between back-to-back queued kernels ({share:.1f} % of "
        "the window)", advice=QUEUED_LATENCY_ADVICE),
    "queued_after_launch": replace(
        KIND["queued"], title="Per-kernel launch latency: each kernel starts a few µs after its launch ({share:.1f} % "
        "of the window)", advice=QUEUED_LATENCY_ADVICE),
    # a graph launch charged as a first launch is its graph's first launch (it uploads the graph), not a module load
    "module_load_graph": replace(
        KIND["module_load"], title="One-time cost: first CUDA-graph launches ({what}) take {share:.1f} % of the window",
        advice=("module_load.graph_upload",)),
}
#: the evidence of a first graph launch (the ``module_load_graph`` variant)
GRAPH_FIRST_LAUNCH = ("{what} here is a CUDA graph's first launch in this process (its graph, or kernels no earlier "
                      "launch ran, run for the first time), which uploads the graph to the GPU (unless "
                      "`cudaGraphUpload` ran before) — a one-time cost of the graph, not of the loop; module loads "
                      "are charged to their own calls.")

#: PyTorch's per-op NVTX ranges (`emit_nvtx`, `record_function` of ops): their host time is the framework's per-op
#: work, not code to move out of the loop (advice ``nvtx.op_ranges``)
TORCH_OP_RANGE = re.compile(r"^(?:aten::|prim::|autograd::|torch::autograd::)|^[A-Z]\w*Backward\d+(?:$|,)")

#: a host thread sampled this often in the trace, with no sample in ≥ OFF_CPU_MIN_NS of its gaps, is off-CPU there
OFF_CPU_MIN_SAMPLES = 20
OFF_CPU_MIN_NS = 100_000_000
#: other processes sampled in the `host_cpu` gaps where the host thread has no sample are named (and given the
#: other-process advice) when those gaps hold at least this % of its `host_cpu` idle on the device: most of it
UNSAMPLED_MIN_PCT = 50.0

def _title(txt: CauseKind, what: str, kind_share: float, main_share: float, ns: int, story: Optional[WaitStory],
           main_ns: int, loop: bool, dev: int = 0) -> Tuple[str, int]:
    """What the finding claims, with its share and time on its device, and that time (``ns``: the share's time, not
    the sum over devices, which is the time at stake; ``main_ns``: the named detail's part of it, quoted when the
    title names that detail alone): named after the largest detail when it holds most of the kind, else after the
    kind with the largest detail beside it; a wait is named with the range around it. ``loop``: ``what`` is the
    largest detail in the loop (the largest of all is mostly start-up / shutdown), ``main_share`` / ``main_ns`` its
    part between kernels, which the title says. When other devices' launching threads wait alike
    (``WaitStory.alike``) the title names them all, its numbers the device ``dev``'s and their shares."""
    named = min(ns, main_ns)
    in_loop = " in the loop" if loop else ""
    who, gpus, on, others = story.waiters(dev) if story is not None else ("", "", "", "")
    if (story is not None or txt.title_many) and main_share < 0.5 * kind_share:     # named after the kind
        head = (f"{who} in OS calls while {gpus}: {kind_share:.1f} % ({dur(ns)}){on}"
                if story is not None else txt.title_many.format(share=kind_share) + f", {dur(ns)}")
        return head + f"; largest{in_loop} {code_name(what)} ({main_share:.1f} %)", ns
    if story is not None:
        inside = f" inside {code_name(story.context)}" if story.context else ""
        return (f"{who} in {code_name(what)}{inside} while {gpus}: {main_share:.1f} % "
                f"({dur(named)}{in_loop}){on}{others}"), named
    return txt.title.format(what=code_name(what), share=main_share).replace(
        " % of the window", f" % of the window, {dur(named)}{in_loop}", 1), named


def _sampled_facts(facts: Mapping[str, Any], samples: Optional[HostSamplesResult], dev: int,
                   kind: str) -> Mapping[str, Any]:
    """The advice facts of one idle finding: ``cpu_samples`` holds only when CPU samples of the gaps' host thread
    fall inside this kind's pieces on ``dev`` (advice citing "the samples above" needs some); ``host_thread_off_cpu``
    when none does although the thread has :data:`OFF_CPU_MIN_SAMPLES` samples and the pieces last
    :data:`OFF_CPU_MIN_NS` (at nsys's lowest rate, 100 Hz, ≥ 10 samples had it run there; docs/FINDINGS.md)."""
    if not facts.get("cpu_samples") or kind not in SHOWN_KINDS or samples is None or not samples.available:
        return facts
    d = samples.device(dev)
    k = d.kind(kind) if d is not None else None
    if k is not None and k.samples > 0:
        return facts
    off = k is not None and d is not None and d.thread_samples >= OFF_CPU_MIN_SAMPLES and k.idle_ns >= OFF_CPU_MIN_NS
    return {**facts, "cpu_samples": False, "host_thread_off_cpu": off and kind == "host_cpu"}


def _ran_elsewhere(samples: Optional[HostSamplesResult], dev: int
                   ) -> Optional[Tuple[Tuple[str, ...], Tuple[Check, ...]]]:
    """The evidence lines (and their checks) of the ``host_cpu`` finding of ``dev`` when its gaps' host thread has no
    CPU sample in pieces holding ≥ :data:`UNSAMPLED_MIN_PCT` % of its ``host_cpu`` idle and other processes were
    sampled running in them (:func:`.waits.qualifying`: the rule of the launching thread's waits); else None."""
    u = samples.unsampled_of(dev) if samples is not None else None
    if u is None or not u.kind_ns:
        return None
    share = 100.0 * u.idle_ns / u.kind_ns
    every = qualifying(u.processes, u.sampled_elsewhere())
    if share < UNSAMPLED_MIN_PCT or not every:
        return None
    gaps = fmt_count(u.pieces, "piece")
    line = (f"No CPU sample of the launching thread {thread_named(u.thread, u.tid)} falls inside {dur(u.idle_ns)} "
            f"of its `host_cpu` idle on device {dev} ({share:.1f} %, {gaps}): it was off the CPU there, or ran too "
            "briefly to be sampled. " + processes_line(every, u.sampled_elsewhere(), "these gaps", UNSAMPLED_KEY))
    sc = Scope(device_id=dev, kind="host_cpu")
    return (line, source_line(every, "these gaps")), (Check("unsampled_pct_of_kind", share, ">=", UNSAMPLED_MIN_PCT,
                                                             sc),)


def _where(c: IdleCause, t0: int, between: Optional[Tuple[int, int]] = None) -> str:
    """Where the largest gap of ``c`` lies; ``between``: (start, end) of the device's window when the title names
    the detail's part in the loop: the largest gap between kernels then, not the leading or trailing gap."""
    ex = [e for e in c.examples or () if between is None or between[0] < e.start_ns and e.end_ns < between[1]]
    if not ex:
        return ""
    e = ex[0]
    return (f"; largest{' between kernels' if between else ''} at {fmt_span(e.start_ns, e.end_ns, t0)} from "
            f"trace start ({dur(e.ns)} of it)")


def idle_findings(idle_causes: IdleCausesResult, gpu_time: GpuTimeResult, window: WindowResult,
                  traits: KernelTraitsResult, facts: TraceFacts, attribution: AttributionResult,
                  host_samples: Optional[HostSamplesResult], waits: Optional[WaitsResult], step_sync_claims: Claims,
                  copy_path_claims: Claims, copy_engines: Optional[CopyEnginesResult] = None,
                  cuda_api: Optional[CudaApiResult] = None, step_sync: Optional[StepSyncResult] = None,
                  window_repeats: bool = True) -> Tuple[Finding, ...]:
    """The idle-cause findings whose checks hold and the launch-bound composite, after the ns the per-step sync and
    copy-path findings claim. ``attribution``: which NVTX ranges enclose kernel launches (not known without it);
    ``host_samples``: CPU samples inside host-side idle, for an evidence line; ``waits``: what other threads did
    while the launching thread waited, for the ``osrt`` finding; ``copy_engines``: the copy paths, whose issuing
    calls and streams decide the ``copy`` finding's overlap advice (:func:`.idle_copy.copy_facts`); ``cuda_api``:
    whether the export holds CUDA API calls at all, which decides what the ``unknown`` finding says is missing;
    ``step_sync``: the per-step sync series, whose event-timed steps decide the ``sync`` finding's advice
    (:func:`.step_sync.event_timed_series`); ``window_repeats``: whether the window holds repeated steps, without which
    one large gap is no pause (:func:`.idle_once.pause_line`)."""
    if not idle_causes.available or not gpu_time.available:
        return ()
    claimed, copy_claimed = step_sync_claims.claimed, copy_path_claims.claimed
    launch_ranges = attribution.launch_range_details() if attribution.available else frozenset()
    advice = facts.advice_facts()
    lb = launch_bound_devices(gpu_time)
    edges = edge_bin_ns(idle_causes)
    win = {d.device_id: d.window_ns for d in gpu_time.devices}
    active, taken = set(gpu_time.kernel_devices()), (claimed, copy_claimed)
    per_kind, merged = split_claims(idle_causes, lb, active, taken, launch_ranges)
    lf = launch_finding(merged, win, lb, gpu_time, traits, advice, host_samples)
    if lf is None and merged:    # no launch-bound finding to claim them: the ns stay with their kinds' findings
        per_kind, merged = split_claims(idle_causes, {}, active, taken, launch_ranges)
    out: List[Finding] = []
    by_dev = {d.device_id: d for d in idle_causes.devices}
    for kind, devs in per_kind.items():
        edge_ns = {dev: min(edges.get(dev, {}).get(kind, 0), sum(v.values())) for dev, v in devs.items()}
        share = {dev: 100.0 * (sum(v.values()) - edge_ns[dev]) / win[dev] for dev, v in devs.items() if win.get(dev)}
        if not share:
            continue
        dev = max(share, key=lambda x: (share[x], -x))
        sev = kind_severity(share[dev], kind)
        if sev is None:
            continue
        details: Counter[str] = sum(map(Counter, devs.values()), Counter())   # every ns > 0 (split_claims)
        top = sorted(details.items(), key=lambda x: (-x[1], x[0]))
        total = sum(details.values()) - sum(edge_ns.values())
        txt = KIND[kind]
        if kind == "queued" and _queued_share(by_dev, set(lb), tiny=True) >= 0.5:
            txt = VARIANTS["queued_latency"]     # mostly sub-10 µs gaps between back-to-back kernels
        elif kind == "queued" and _queued_share(by_dev, set(lb), tiny=False) >= 0.5:
            txt = VARIANTS["queued_after_launch"]     # a few µs at the end of longer gaps: after each launch
        wait_checks: Tuple[Check, ...] = ()
        wait_line = ""
        if kind == "copy":     # "keep the kernels waiting", "before the next kernel is launched" or "not known"
            wait_state, wait_checks, wait_line = copy_waiting(by_dev[dev])
            suffix = {"early": "_early", "unknown": "_unknown"}.get(wait_state or "", "")
            if is_unified_detail(top[0][0]):     # managed-memory migrations: prefetch, not pin_memory
                txt = VARIANTS["copy_unified" + suffix]
            elif suffix:
                txt = VARIANTS["copy" + suffix]
        if kind == "module_load" and normalize(top[0][0]) in GRAPH_LAUNCH:
            txt = VARIANTS["module_load_graph"]
        what = top[0][0] or txt.noun or kind
        main_share = 100.0 * by_dev[dev].ns_of(kind, top[0][0]) / win[dev]      # the idle-cause table's row
        ev = [f"Device {d}: {dur(sum(v.values()))} of idle charged to `{kind}` ({100.0 * sum(v.values()) / win[d]:.1f} "
              f"% of its {dur(win[d])} window)." for d, v in sorted(devs.items())]
        if len(top) > 1 or top[0][0]:   # the details' ns over every device with this kind's idle: say so
            ds = sorted(devs)
            summed = f" (devices {', '.join(str(d) for d in ds[:-1])} and {ds[-1]} summed)" if len(ds) > 1 else ""
            ev.append("By " + (txt.by or "detail") + summed + ": " + "; ".join(
                f"{code_name(det or '–')} {dur(ns)}" for det, ns in top[:4]) + ".")
        growth = kind == "alloc" and early_only(idle_causes, gpu_time, kind)
        once = once_ns(by_dev[dev], kind, window) if not KIND[kind].one_time else (0, 0)   # module_load says so
        kind_ns = by_dev[dev].ns_of(kind)
        kind_dev = sum(devs[dev].values()) - edge_ns[dev]     # the device's claimed ns of the kind
        named_ns = min(kind_dev, devs[dev].get(top[0][0], 0))   # of its largest detail (as _title's)
        once_pct = 100.0 * sum(once) / kind_ns if kind_ns else 0.0
        loop_pct = 100.0 * (kind_ns - sum(once)) / win[dev]
        startup = not growth and once_pct >= STARTUP_MIN_SHARE and loop_pct < MEDIUM_SHARE
        tuned = autotune_passes(idle_causes, traits, set(devs)) \
            if kind == "alloc" and not growth and not startup else None
        in_loop = None if growth or startup or tuned or not sum(once) else \
            loop_detail(by_dev[dev], kind, top[0][0], devs[dev], window)   # a loop finding named after start-up
        named_det = in_loop[0] if in_loop else top[0][0]     # the detail the title names
        main = next((c for c in by_dev[dev].causes if c.kind == kind and c.detail == named_det), None)
        if main is not None:
            holds = "holds" if main.gap_count == 1 else "hold"
            ev.append(f"{fmt_count(main.gap_count, 'idle gap')} on device {dev} {holds} {code_name(named_det or kind)}"
                      f"{_where(main, window.full_start_ns, _window_of(gpu_time, dev) if in_loop else None)}.")
        pause = None if KIND[kind].one_time else pause_line(main, named_ns, dev, kind, window_repeats)
        pause_at = len(ev)      # its line follows the largest gap's (given unless the finding is one-time work)
        table_share = 100.0 * kind_ns / win[dev]      # titles quote the idle-cause table's shares
        split = table_share - share[dev] >= SPLIT_SHOWN_POINTS   # part of the kind is elsewhere: say and check it
        quoted = share[dev] if split else table_share   # titles state what the finding itself claims
        main_quoted = min(main_share, quoted)
        for d in [dev] + sorted(set(devs) - {dev}):   # every device's table charge and claim, one rule
            line = charge_line(d, kind, by_dev[d].ns_of(kind), sum(devs[d].values()) - edge_ns[d], edge_ns[d],
                                win.get(d, 0), (merged, claimed, copy_claimed))
            if line:
                ev.append(line)
        story = wait_story(waits, dev, named_det, {d: 100.0 * by_dev[d].ns_of(kind, named_det) / win[d]
                                                   for d in devs if d != dev}) if kind == "osrt" else None
        if story is not None:
            ev.extend(story.evidence)
        if wait_line:
            ev.append(wait_line)
        if txt is VARIANTS["module_load_graph"]:
            ev.append(GRAPH_FIRST_LAUNCH.format(what=code_name(top[0][0])))
        sampled = samples_evidence(host_samples, dev, kind) if kind in SHOWN_KINDS else None   # what the host ran
        if sampled:
            ev.append(sampled)
        elsewhere_line = _ran_elsewhere(host_samples, dev) if kind == "host_cpu" else None
        if elsewhere_line is not None:
            ev.extend(elsewhere_line[0])
        sc = Scope(device_id=dev, kind=kind)
        checks: Tuple[Check, ...] = (Check("cause_pct_of_window", table_share, ">=", MEDIUM_SHARE, sc),)
        if split:    # part of the kind is another finding's or at the window's edge: check the rest too
            checks += (Check("claimed_pct_of_window", share[dev], ">=", MEDIUM_SHARE, sc),)
        checks += wait_checks   # the title's "keep the kernels waiting", "before the next kernel …" or "not known"
        category = KIND[kind].category
        if startup or in_loop or 100.0 * sum(once) / win[dev] >= MEDIUM_SHARE:
            ev.append(once_line(once, kind_ns, loop_pct, dev, startup))
        if startup:
            checks += (Check("startup_pct_of_cause", once_pct, ">=", STARTUP_MIN_SHARE, sc),
                       Check("loop_pct_of_window", loop_pct, "<", MEDIUM_SHARE, sc))
        if tuned:
            ev.extend(autotune_line(p, window.full_start_ns) for p in tuned)
            checks += tuple(Check("autotune_trial_pct", 100.0 * p.trial_ns / p.kernel_ns, ">=", AUTOTUNE_MIN_TRIAL_PCT,
                                  Scope(device_id=p.device_id, trait="autotune")) for p in tuned)
        if growth or startup or tuned:
            category, sev = "one_time", "low"
        if kind == "copy" and "(pageable)" in top[0][0]:
            category = "memcpy"      # a pageable copy is the host-memory problem of the memcpy finding
        ids = story.advice if story is not None else \
            _advice_ids(kind, txt, details, launch_ranges if attribution.available else None,
                        pageable_matters(devs[dev], win[dev]))
        ids = kernel_lines(ids, traits)
        if pause is not None and once_gap(main, once, gpu_time, dev):
            pause = None     # the largest gap is the start-up / shutdown gap: the once-per-run line speaks for it
        if pause is not None and not (growth or startup or tuned):   # one gap: no line about every step
            ev.insert(pause_at, pause[0])
            checks += pause[1]
        if pause is not None and pause[1] and not (growth or startup or tuned):   # a pause (its check): its advice
            dropped = [i for i in ids if speaks_of_steps(i)]     # and the lines under them (`.torch` of a line)
            # the pause lines of every workload (advice_idle.PAUSE_EXAMPLES): the facts keep the one of this trace's
            ids = ["pause.one_gap", "pause.one_gap.inference", "pause.one_gap.unknown", "pause.torch"] + \
                [i for i in ids if not any(i == d or i.startswith(d + ".") for d in dropped)]
        if elsewhere_line is not None:    # another process ran while it did not: its data, not host code to profile
            ids = [i for i in ids if not i.startswith(("host_cpu.off_cpu", "host_cpu.profile"))] + \
                list(OTHER_PROCESS_ADVICE)
            checks += elsewhere_line[1]
        if startup:
            ids = ["startup.once"]
        elif tuned:
            ids = ["alloc.autotune", "alloc.autotune.tf"]
        api_calls = cuda_api.call_count if cuda_api is not None and cuda_api.available else 0
        if api_calls > 0 and "unknown.trace_cuda" in ids and kind == "copy":   # a copy finding's "not known" title
            ids = [("unknown.unlinked" if i == "unknown.trace_cuda" else i) for i in ids]   # the links are missing
        timed = event_timed_series(step_sync, dev, top[0][0]) if kind == "sync" else None
        if timed is not None:      # the sync ends timed steps: the event-timing line, not "remove the sync"
            ids = [i for i in ids if not i.startswith("sync.")] + ["step_sync.event_timed"]
            who = f"thread {code_name(timed.thread_name)}" if timed.thread_name else "the thread"
            ev.append(timed_line(timed, f"{code_name(timed.api)} ends each step of {who} (pid {timed.pid}, tid "
                                        f"{timed.tid}), and on"))
        if kind == "unknown" and api_calls > 0:    # CUDA was traced: the links, not the calls, are missing
            pidless = facts.pidless_api_processes     # whose call: not recorded
            ids = ["unknown.no_global_pid" if pidless else "unknown.unlinked"]
            ev.append(f"The export holds {api_calls:,} CUDA API calls, but no kernel, copy or memset of device {dev} "
                      "in the window is linked to one" + (
                          ": the kernel rows carry no globalPid (their process is not recorded) and the "
                          f"{pidless} processes with CUDA API calls used the same correlation ids, so a kernel's "
                          "correlation id does not say whose call launched it (not guessed)" if pidless else
                          " (no call of its process has its correlation id)")
                      + ": which thread launched the work, and what it did in these gaps, is not known.")
        kind_facts = _sampled_facts(advice, host_samples, dev, kind)
        if kind == "queued":     # programmatic dependent launch: the finding's GPU (docs/FINDINGS.md, "Facts")
            kind_facts = {**kind_facts, "gpu_pdl": facts.supports_pdl(dev)}
        if kind == "host_cpu":   # py-spy only for a Python host (docs/FINDINGS.md, "Facts")
            kind_facts = {**kind_facts, "native_host": True if facts.native_host else False if facts.python_host
                          else None}
        if kind == "copy":
            kind_facts, side_ev = copy_facts(kind_facts, copy_engines, set(devs), details)
            if txt is VARIANTS["copy_early"]:    # the host had not launched: was it issuing the copies?
                kind_facts, calls_ev = copy_calls_pace(by_dev[dev], kind_facts, copy_engines, set(devs), details)
                side_ev += calls_ev
            outlast, bytes_ev = outlast_kernels(devs[dev], by_dev[dev].busy_ns, dev) if txt is KIND["copy"] \
                else (None, [])     # kernels waited on these explicit copies (not migrations, not host-paced)
            kind_facts = {**kind_facts, "copies_outlast_kernels": outlast}
            ev.extend(side_ev + bytes_ev)
        if in_loop:      # the largest detail in the loop, its part between kernels (docs/FINDINGS.md)
            title_det, title_share = in_loop[0], min(100.0 * in_loop[1] / win[dev], quoted)
            title_det_ns = min(devs[dev].get(in_loop[0], 0), in_loop[1])
        else:
            title_det, title_share, title_det_ns = top[0][0], main_quoted, devs[dev].get(top[0][0], 0)
        if growth:
            title, title_ns = (f"Allocator growth at the start of the window: {code_name(what)} holds "
                               f"{main_quoted:.1f} % of it (a one-time cost)"), None
        elif startup:
            title, title_ns = once_title(kind, top[0][0], once, main_quoted, named_ns), named_ns
        elif tuned:      # the kind's time on the device, as the time at stake (item: one quantity)
            title_ns = kind_dev
            title = ("Autotuning allocations, not the loop: " + (
                f"{code_name(what)} holds {quoted:.1f} % of the window ({dur(kind_dev)})" if len(devs[dev]) == 1 else
                f"allocation calls hold {quoted:.1f} % of the window ({dur(kind_dev)}; largest {code_name(what)} "
                f"{dur(named_ns)})") + ", all during the autotuning trials; no allocation idles the GPU after them")
        else:
            title, title_ns = _title(txt, title_det or txt.noun or kind, quoted, title_share, kind_dev, story,
                                     title_det_ns, loop=in_loop is not None, dev=dev)
        out.append(finding(
            f"idle_{kind}", category=category, severity=sev, confidence="high" if kind != "unknown"
            else "low", title=title,
            evidence=ev, advice=ids, facts=kind_facts, time_at_stake_ns=total,
            checks=checks, device_id=dev, cause=(kind, top[0][0]), loop_detail=in_loop[0] if in_loop else None,
            about_capture=KIND[kind].low_only or growth or startup or bool(tuned),
            quoted=title_quoted(title_ns, total, title_det if title_ns is not None and title_ns < kind_dev else None,
                                 in_loop is not None, txt.by if len(details) > 1 else "", dev, sorted(devs))))
    if lf is not None:
        out.append(lf)
    return tuple(out)


def _window_of(gpu_time: GpuTimeResult, dev: int) -> Optional[Tuple[int, int]]:
    t = gpu_time.device(dev)
    return None if t is None else (t.window_start_ns, t.window_start_ns + t.window_ns)


def _advice_ids(kind: str, txt: CauseKind, details: Mapping[str, int],
                launch_ranges: Optional[AbstractSet[str]], pageable: bool = False) -> List[str]:
    """The advice lines of a kind's finding that its own details call for: the device-to-device line only when
    such copies are among them; the pinned-memory lines when pageable copies hold enough of them (``pageable``:
    :func:`.idle_copy.pageable_matters` on the finding's device); for a range, the "launches no
    kernel" lines only when the largest range encloses no launch (else the line about work between launches); for
    an OS call, the generic lines (the wait lines need the threads followed: :mod:`findings.waits`).
    ``launch_ranges`` None: whether a range launches is not known (no NVTX → kernel attribution)."""
    ids = list(txt.advice)
    if kind == "nvtx":
        top = max(details, key=lambda d: (details[d], d)) if details else ""
        ids = (["nvtx.overlap.unchecked"] if launch_ranges is None else
               ["nvtx.op_ranges" if TORCH_OP_RANGE.search(top) else "nvtx.overlap.launching"]
               if top in launch_ranges else
               ["nvtx.overlap", "nvtx.overlap.untraced", "nvtx.overlap.untraced.sampled"])
    if kind == "osrt":
        ids = [i for i in ids if not i.startswith("wait.")]
    if kind == "unknown":                      # the CUDA-API-present line is chosen by idle_findings
        ids = [i for i in ids if i not in ("unknown.unlinked", "unknown.no_global_pid")]
    if kind == "copy":
        if not any("Device-to-Device" in d for d in details):
            ids = [i for i in ids if i not in ("copy.d2d", "copy.d2d.large")]
        if pageable:
            ids += ["copy.pageable", "pageable.pin.torch"]
    return ids


def _queued_share(by_dev: Mapping[int, DeviceCauses], lb: AbstractSet[int], tiny: bool) -> float:
    """Fraction of the ``queued`` ns (all devices) in gaps shorter than 10 µs (``tiny``: back-to-back kernels), else
    in pieces under 10 µs at the end of longer gaps (the launch latency after the host's launch; a mean hides a few
    gaps where launched kernels were held back hundreds of µs). On the launch-bound devices ``lb``, of the ns that
    are not host-paced (the launch-bound finding's: :func:`.idle_claims.split_claims`)."""
    ns = held = 0
    for c, on_lb in ((c, i in lb) for i, d in by_dev.items() for c in d.causes if c.kind == "queued"):
        part, paced = (c.tiny_gap_ns, c.host_paced_tiny_ns) if tiny else (c.short_piece_ns, c.host_paced_short_piece_ns)
        ns += c.ns - (c.host_paced_ns if on_lb else 0)
        held += part - (paced if on_lb else 0)
    return held / ns if ns else 0.0
