"""Findings about the capture rather than the workload, and the gate findings that withhold every performance
claim (``no_gpu_work``, ``too_little_work``, ``graph_trace_mode``, ``capture_window``, ``nvtx_coverage``,
``nccl_wait``; docs/FINDINGS.md, "Findings": "Gate" and "Capture")."""

from __future__ import annotations

import re
from typing import Any, Mapping, Optional, Sequence, Tuple

from ..analyses.api.graphs import GraphResult
from ..analyses.comms.arrival import (
    GPU_WORK_SHARE,
    LAUNCHED_LATE,
    LAUNCHED_LATE_SHARE,
    MIN_LATE_ARRIVALS,
    MIN_LATE_SHARE,
    MIN_MATCHED,
    MIN_WAIT_PCT,
    late_cause,
)
from ..analyses.comms.nccl_result import NcclResult
from ..analyses.idle.gpu_time import MIN_BUSY_NS, MIN_KERNELS, GpuTimeResult
from ..analyses.kernels.traits import AUTOGRAD_THREAD
from ..analyses.nvtx.attribution import AttributionResult
from ..analyses.trace.window import WindowResult
from ..vocabulary.code_spans import code_name
from ..vocabulary.device_roles import ROLE_COPIES, ROLE_KERNELS
from ..vocabulary.labels import label_shows_tid
from ..vocabulary.units import fmt_count
from ..vocabulary.units import fmt_dur as dur
from .base import Check, Finding, Scope, finding, pooled_scope

WARMUP_IDLE_POINTS = 10.0
#: the "add NVTX ranges around …" advice, and the range names that show the trace has such ranges already
PHASE_RANGES = {"nvtx.add.training": re.compile(r"forward|backward|optimi[sz]er", re.I),
                "nvtx.add.inference": re.compile(r"prefill|decode", re.I)}


def gate_finding(gpu: GpuTimeResult, kernel_count_total: int, kernels_reason: Optional[str],
                 facts: Mapping[str, Any]) -> Optional[Finding]:
    """The finding that withholds performance claims, or None when there is a workload to diagnose. A trace with no
    kernel row whose devices ran whole CUDA graphs (graph-level tracing) has GPU work: it is judged by its busy time
    (the ``graph_trace_mode`` finding says the kernels are missing)."""
    if kernel_count_total == 0 and not any(d.role == ROLE_KERNELS for d in gpu.devices):
        return finding("no_gpu_work", severity="info", title="No GPU kernels in the trace: nothing to diagnose",
                       evidence=(kernels_reason or "The export holds no kernel rows.",) + _copies_only(gpu, True),
                       advice=["no_gpu_work.capture"], facts=facts, time_at_stake_ns=0,
                       checks=(Check("kernel_count", 0, "==", 0, Scope(window="full")),), about_capture=True)
    p = gpu.pooled()
    kc = sum(d.kernel_count for d in gpu.devices)
    if p is None or (kc < MIN_KERNELS and p.busy_ns < MIN_BUSY_NS):
        busy = p.busy_ns if p else 0
        window = p.window_ns if p else (gpu.devices[0].window_ns if gpu.devices else 0)
        ev = (f"{fmt_count(kc, 'kernel')} keep{'s' if kc == 1 else ''} the GPU busy {dur(busy)} of {dur(window)}; the "
              "trace shows start-up and one-off work, so no utilisation or kernel conclusion is drawn.",) \
            + _copies_only(gpu, p is None)
        return finding(
            "too_little_work", severity="info",
            title=f"Too little GPU work to diagnose: {fmt_count(kc, 'kernel')}, {dur(busy)} of GPU time in the window",
            evidence=ev, advice=["too_little_work.capture"], facts=facts,
            time_at_stake_ns=0, checks=(Check("kernel_count", kc, "<", MIN_KERNELS),
                                        Check("busy_ns", busy, "<", MIN_BUSY_NS, pooled_scope(gpu.kernel_devices()))),
            about_capture=True)
    return None


def _copies_only(gpu: GpuTimeResult, none_ran: bool) -> Tuple[str, ...]:
    """The evidence line naming the devices that only ran copies in the window (none: empty)."""
    copies = [d for d in gpu.devices if d.role == ROLE_COPIES]
    if not copies:
        return ()
    lead = "No device ran a kernel in the window, so there is no GPU busy % to state; " if none_ran else ""
    return (lead + "; ".join(f"device {d.device_id} ran only copies ({dur(d.copy_busy_ns)} of memcpy/memset)"
                             for d in copies) + " (listed as copies only, not counted in the GPU busy %).",)


def graph_trace_finding(g: GraphResult, idle_ns: int, facts: Mapping[str, Any]) -> Optional[Finding]:
    if not g.available or not g.graph_level_hidden:
        return None
    return finding(
        "graph_trace_mode", severity="high", title="CUDA graphs were traced at graph level: their kernels are missing",
        evidence=(f"{g.graph_launch_count} CUDA graph launches but no kernel rows linked to them.",
                  f"Capture metadata graph trace mode: {g.capture_graph_trace_mode or 'not recorded'}."),
        advice=["graph_trace.node"], facts=facts, time_at_stake_ns=idle_ns, blocks_analysis=True)


def capture_window_finding(w: WindowResult, gpu: GpuTimeResult, facts: Mapping[str, Any],
                           repeats: bool = True) -> Optional[Finding]:
    """Low: the whole capture is idler than the window by ≥ :data:`WARMUP_IDLE_POINTS`; ``repeats``: the window holds
    repeated steps (``StepResult.repeat_in``) — without, an auto-detected window is not called a steady state and
    the advice is to capture several iterations."""
    if w.is_full or not gpu.available:
        return None
    full, steady = gpu.pooled(full=True), gpu.pooled()
    if full is None or steady is None:
        return None
    change = full.idle_pct - steady.idle_pct
    check = Check("idle_pct_change", change, ">=", WARMUP_IDLE_POINTS, pooled_scope(gpu.kernel_devices()))
    if not check.holds():
        return None
    advice = ["capture.range", "capture.range.later", "capture.range.torch", "capture.vllm"]
    lost = w.details.not_recorded_ns or 0       # capture ranges: the whole capture's figures are of its recorded time
    what, whole, left = ("Warm-up / tail make", "the whole capture",
                         f"{dur(w.warmup_ns)} of warm-up and {dur(w.tail_ns)} of tail trimmed") if not lost else (
        "What the window leaves out makes", "the whole capture's recorded time",
        f"{dur(w.warmup_ns + w.tail_ns - lost)} of recorded time left out: the other capture ranges and any warm-up or "
        f"tail trimmed in the kept one; {dur(lost)} not recorded")
    if w.method == "auto" and not repeats:   # one pass, or no steps detected: no steady state is shown
        title = f"{what} the whole capture look {change:.0f} points idler than the auto-detected window"
        ev = (f"Idle {full.idle_pct:.1f} % over {whole} vs {steady.idle_pct:.1f} % in the auto-detected "
              f"window ({left}), in which no repeated "
              f"steps were found: it may be a single pass, or steps nothing marks; not shown to be a steady state. "
              f"{w.reason}")
        advice[:2] = ["capture.iterations"]
    elif w.method == "auto":
        title = f"{what} the whole capture look {change:.0f} points idler than the steady state"
        ev = (f"Idle {full.idle_pct:.1f} % over {whole} vs {steady.idle_pct:.1f} % in the steady "
              f"window ({left}). {w.reason}")
    else:   # a window the user chose: what it leaves out was not judged to be warm-up or tail
        opt = "--window-nvtx" if w.method == "nvtx" else "--window"
        title = f"The whole capture is {change:.0f} points idler than the window chosen by {opt}"
        ev = (f"Idle {full.idle_pct:.1f} % over the whole capture vs {steady.idle_pct:.1f} % in the chosen window "
              f"({dur(w.warmup_ns)} before and {dur(w.tail_ns)} after it left out; whether that is warm-up or tail "
              f"was not checked). {w.reason}")
    return finding(
        "capture_window", severity="low", title=title, evidence=(ev,),
        advice=advice, facts=facts,
        time_at_stake_ns=w.warmup_ns + w.tail_ns - lost, checks=(check,), about_capture=True)


def nvtx_coverage_finding(att: AttributionResult, threshold: float, facts: Mapping[str, Any],
                          range_names: Sequence[str] = ()) -> Optional[Finding]:
    """Low: NVTX push/pop ranges cover less than ``threshold`` of kernel time, and of the kernel time linked to its
    launch call (none linked: no finding); "add ranges around forward, backward, …" (or prefill / decode) only when
    no range of ``range_names`` is named so already. Evidence and advice: docs/FINDINGS.md, "Capture"."""
    if not att.available or att.coverage >= threshold or att.linked_kernel_ns <= 0:
        return None
    if att.attributed_ns / att.linked_kernel_ns >= threshold:
        return None
    ev = [f"{att.coverage * 100:.1f} % of kernel time ({dur(att.attributed_ns)} of {dur(att.total_kernel_ns)}) is "
          "launched inside an NVTX push/pop range."]
    unlinked = att.total_kernel_ns - att.linked_kernel_ns
    if unlinked > 0:
        ev.append(f"{100.0 * unlinked / att.total_kernel_ns:.1f} % of kernel time ({dur(unlinked)}) is not linked to "
                  "the CUDA call that launched it (no API row with its correlation id): whether a range encloses "
                  f"those launches is not known; of the linked kernel time "
                  f"{100.0 * att.attributed_ns / att.linked_kernel_ns:.1f} % is.")
    se = att.startend_kernel_ns > 0     # start/end ranges enclose launches: "no range covers" would be false
    if se:
        ev.append(f"Start/end ranges on the launching thread enclose the launches of "
                  f"{100.0 * att.startend_kernel_ns / att.total_kernel_ns:.1f} % of kernel time "
                  f"({dur(att.startend_kernel_ns)}); they get their own rows but no phase or innermost-range "
                  "attribution.")
    rows = att.uncovered_by_thread
    if any(r.gtid >= 0 for r in rows):
        ev.append(f"Kernels no {'push/pop ' if se else ''}range covers, by launching thread: " + "; ".join(
            (f"{code_name(r.thread_name)} " if label_shows_tid(r.thread_name, r.tid) else
             f"{code_name(r.thread_name)} (tid {r.tid}) " if r.thread_name else
             f"{code_name('tid ' + str(r.tid))} ") + f"{r.pct_of_uncovered:.1f} %, "
            + (f"{r.thread_ranges} range(s) on that thread" if r.thread_ranges else "no NVTX range on it")
            for r in rows[:3] if r.gtid >= 0) + ".")
    top = rows[0] if rows and rows[0].gtid >= 0 else None      # the thread that launches most of them
    ids = ["nvtx.per_thread"]
    if top is not None and not top.thread_ranges:
        ids = ["nvtx.autograd" if AUTOGRAD_THREAD.search(top.thread_name) else "nvtx.other_thread"]
    ids += [i for i, pattern in PHASE_RANGES.items() if not any(pattern.search(n) for n in range_names)]
    return finding(
        "nvtx_coverage", severity="low",
        title=f"NVTX {'push/pop ' if se else ''}ranges cover little of the GPU time" + (
            f": {top.pct_of_uncovered:.0f} % of the uncovered kernel time is launched by "
            f"{code_name(top.thread_name or 'tid ' + str(top.tid))}" if top is not None else ""),
        evidence=ev, advice=ids, facts=facts, time_at_stake_ns=0, about_capture=True)


def nccl_finding(n: NcclResult, facts: Mapping[str, Any]) -> Optional[Finding]:
    """``nccl_wait``: the single-file straggler verdict (docs/FINDINGS.md "NCCL"; the late-rank rule of
    analyses/comms/arrival.py, the cluster's late-arriver claim's), its checks restated on the late rank; time at
    stake = the waiting the late rank's late arrivals caused on the other ranks."""
    v = n.straggler if n.available else None
    if v is None or v.wait_ns_total <= 0:
        return None
    wait = v.wait_ns_total
    matched = next((r.matched for r in n.ranks if r.rank == v.late_rank), None) or 0
    scope = Scope(window="full", device_id=v.late_device_id)
    checks = [Check("matched", matched, ">=", MIN_MATCHED, scope),
              Check("last_arrivals", v.last_arrivals, ">=", MIN_LATE_ARRIVALS, scope),
              Check("wait_caused_share", v.wait_caused_share, ">=", MIN_LATE_SHARE, scope),
              Check("wait_pct_of_window", v.wait_pct_of_window, ">=", MIN_WAIT_PCT, scope)]
    others = len(n.ranks) - 1
    share = f"{v.late_rank} arrived last in {v.late_share * 100:.0f} % of "
    if v.with_last_arriver == v.matched_collectives:
        share += "them."
    elif v.with_last_arriver + (v.tied_collectives or 0) == v.matched_collectives:   # it took part in all
        share += (f"the {v.with_last_arriver} that had a last arriver (the other {v.tied_collectives} started "
                  "together on every rank).")
    else:
        share += f"the {v.with_last_arriver} it took part in that had a last arriver."
    evidence = [f"Across {v.matched_collectives} matched collectives the late rank's {v.last_arrivals} late "
                f"arrivals cause {dur(wait)} of waiting on the other rank{'' if others == 1 else 's'}: "
                f"{100 * v.wait_caused_share:.0f} % of all the waiting in them.", share]
    advice = ["nccl.balance"]
    cause = late_cause(v.late_idle_share_p50)   # what made it late (analyses/comms/arrival.py, docs/FINDINGS.md)
    if cause is not None:
        idle = (f"at the collectives it started last, its GPU sat idle a median {dur(v.late_idle_before_p50_ns)} "
                "longer than the earliest rank's since the previous kernel of that collective, while it started a "
                f"median {dur(v.late_by_p50_ns)} after the earliest rank (extra idle / lateness: median "
                f"{100 * (v.late_idle_share_p50 or 0.0):.0f} %)")
        if cause == LAUNCHED_LATE:
            checks.append(Check("late_idle_share_p50", v.late_idle_share_p50 or 0.0, ">=", LAUNCHED_LATE_SHARE, scope))
            evidence.append(f"Launched late: {idle} — the delay is on the host side.")
            advice = ["nccl.launched_late"]
        else:
            checks.append(Check("late_idle_share_p50", v.late_idle_share_p50 or 0.0, "<=", GPU_WORK_SHARE, scope))
            evidence.append(f"GPU work ran longer: {idle} — its GPU was busy for the rest of the delay.")
            advice = ["nccl.gpu_work"]
    return finding(
        "nccl_wait", severity="high" if v.confidence == "high" else "medium", confidence=v.confidence,
        title=(f"NCCL wait: rank {v.waiting_rank} waits in collectives for late rank {v.late_rank}" if others == 1
               else f"NCCL wait: {others} ranks wait in collectives for late rank {v.late_rank} (the most: "
               f"{v.waiting_rank})"),
        evidence=evidence, checks=checks, advice=advice, facts=facts, time_at_stake_ns=wait)

