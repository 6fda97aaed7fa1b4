"""Per-step synchronization finding; its overlappable ns are claimed once (:meth:`StepSyncResult.claimed`, subtracted by
``findings/idle.py``). Definitions: docs/FINDINGS.md, "Findings": "Per-step synchronization" (the pattern and its
numbers: :mod:`analyses.step_sync`)."""

from __future__ import annotations

from typing import AbstractSet, Dict, List, Mapping, Optional, Tuple

from ..analyses.api.classes import normalize
from ..analyses.common.stats import pct
from ..analyses.steps.sync import MAX_PERIOD_SPREAD, MIN_SYNC_POINTS, StepSyncResult, StepSyncSeries
from ..vocabulary.code_spans import code_name
from ..vocabulary.labels import label_shows_tid
from ..vocabulary.units import fmt_bytes, fmt_count
from ..vocabulary.units import fmt_dur as dur
from .base import HIGH_SHARE, MEDIUM_SHARE, Check, Finding, Scope, finding

ADVICE_IDS = ("step_sync.overlap", "step_sync.overlap.torch", "step_sync.vllm", "step_sync.sglang",
              "step_sync.trtllm")
def _device_totals(ss: StepSyncResult, devices: Optional[AbstractSet[int]] = None
                   ) -> Dict[int, Tuple[int, int, int, StepSyncSeries]]:
    """Per device with a holding series (among ``devices``; None: all): (Σ exposed ns, Σ overlappable ns, largest
    step count, main series)."""
    out: Dict[int, Tuple[int, int, int, StepSyncSeries]] = {}
    for s in ss.holding():
        if devices is not None and s.device_id not in devices:
            continue
        x, o, m, main = out.get(s.device_id, (0, 0, 0, s))
        out[s.device_id] = (x + s.exposed_ns, o + s.overlap_ns, max(m, s.step_sync_points), main)
    return out


def step_sync_finding(ss: StepSyncResult, facts: Mapping[str, object],
                      devices: Optional[AbstractSet[int]] = None) -> Optional[Finding]:
    """The per-step sync finding, or None when no device passes its checks. ``devices``: the devices it may speak
    for (those that ran kernels in the window; None: all) — a device that only received copies is never one."""
    if not ss.available:
        return None
    totals = _device_totals(ss, devices)
    held = {dev: (checks, s) for dev, (x, o, m, s) in totals.items()
            for checks in [_checks(dev, x, o, m, s.window_ns)] if all(c.holds() for c in checks)}
    if not held:
        return None
    dev = max(held, key=lambda d: (held[d][0][2].observed, -d))   # the largest overlappable share of its window
    checks, s = held[dev]
    share = checks[2].observed
    stake = sum(t[1] for t in totals.values())
    return finding(
        "step_sync", severity="high" if share >= HIGH_SHARE else "medium",
        title=_title(s, share, totals[dev][1], stake, dev if len(totals) > 1 else None),
        evidence=_evidence(s, ss, dev, facts.get("framework") == "pytorch"),
        advice=_advice_ids(s),
        facts=facts, time_at_stake_ns=stake, checks=checks,
        device_id=dev, cause=("step_sync", s.api))


def _host_samples(s: StepSyncSeries) -> bool:
    """The host samples each step's next token (StepSyncSeries.host_sampling holds, with samples)."""
    return s.host_sampling is not None and s.host_sampling.holds and bool(s.host_sampling.samples)


def _advice_ids(s: StepSyncSeries) -> Tuple[str, ...]:
    """The double-buffer lines, unless "launch step N+1 before reading step N" cannot be done or is not the advice:
    the host samples each step's next token (StepSyncSeries.host_sampling: step N+1 needs what the host computes
    from step N's results), or, else, the thread reads CUDA event timings after its step syncs (timed_steps: the
    sync times the step, in a benchmark harness or a per-step timer)."""
    if s.host_sampling is not None and s.host_sampling.holds:
        return ("step_sync.gpu_sampling",)
    return ("step_sync.event_timed",) if s.timed_steps is not None else ADVICE_IDS


def _checks(dev: int, exposed: int, overlap: int, points: int, window: int) -> Tuple[Check, ...]:
    sc = Scope(device_id=dev)
    return (Check("step_sync_points", float(points), ">=", float(MIN_SYNC_POINTS), sc),
            Check("step_sync_exposed_pct", pct(exposed, window), ">=", MEDIUM_SHARE, sc),
            Check("step_sync_overlap_pct", pct(overlap, window), ">=", MEDIUM_SHARE, sc))


def _title(s: StepSyncSeries, share: float, overlap: int, stake: int, dev: Optional[int]) -> str:
    """What the finding claims: the overlappable host time after the syncs of device ``dev``'s holding series (one
    per launching thread: two engines sharing a GPU are two), as a share of its window (``share``) and in time
    (``overlap``) — one quantity; with ``dev`` (several devices hold) also the time of every device (``stake``).
    The period is the main series'; per-step times are in the evidence."""
    p50, p90 = s.period_p50_ns or 0.0, s.period_p90_ns or 0.0   # a holding series kept steps: both measured
    every = dur(p50) if p90 <= MAX_PERIOD_SPREAD * p50 else \
        f"{dur(s.period_p50_ns)} (p50; p90 {dur(s.period_p90_ns)})"     # steps of unlike GPU work: prefill, decode
    # the host samples each next token: the next step needs it, so the work overlaps only once sampling moves
    moved = "with sampling moved to the GPU, " if _host_samples(s) else ""
    return (f"Per-step sync: {code_name(s.api)} every {every}; {moved}the GPU-idle host work after it could overlap "
            f"the next step: {share:.1f} % ({dur(overlap)}"
            + (f" on device {dev}; {dur(stake)} on all devices)" if dev is not None else ")"))


def _evidence(s: StepSyncSeries, ss: StepSyncResult, dev: int, torch: bool) -> List[str]:
    """``torch``: the framework fact is PyTorch (the readback is then named by its PyTorch calls)."""
    who = f"thread {code_name(s.thread_name)}" if s.thread_name else "thread"
    ids = f"pid {s.pid}" if label_shows_tid(s.thread_name, s.tid) else f"pid {s.pid}, tid {s.tid}"
    rb = (f", {s.readback_points} right after a device-to-host copy ("
          + ("a `.item()` / `.cpu()`-style readback" if torch else "a readback of results") + ")"
          if s.readback_points else "")
    causes = "".join(f"; {k.replace('_', ' ')}{' ' + code_name(d) if d else ''} {dur(ns)}"
                      for k, d, ns in s.exposed_by_cause[:3])
    own = (f" ({100 * s.own_kernels_in_steps / s.device_kernels:.0f} % launched by this thread, the rest by "
           "others)" if s.own_kernels_in_steps < s.kernels_in_steps and s.device_kernels else "")
    others = [x for x in ss.holding() if x is not s]
    also = f" The pattern also holds for {len(others)} other thread/device pair(s) (step-sync table)." \
        if others else ""
    return [f"Device {dev}, {who} ({ids}): {s.sync_points} blocking calls wait until the GPU "
            f"has finished the thread's work ({', '.join(f'{code_name(a)} {n}' for a, n in s.api_counts[:3])}){rb}; "
            f"{code_name(s.api)} ends a step every {dur(s.period_p50_ns)} (p90 {dur(s.period_p90_ns)}); the "
            f"{fmt_count(s.steps, 'step')} from the first to the last sync point hold {100 * s.kernel_share:.0f} % of "
            f"the device's {s.device_kernels:,} kernels in the window" + own + "."
            + also,
            f"Per step (p50): GPU busy {dur(s.gpu_busy_p50_ns)}; the host waits in the sync {dur(s.wait_p50_ns)}; "
            f"then the GPU idles {dur(s.exposed_p50_ns)} (p90 {dur(s.exposed_p90_ns)}) while the host works before "
            f"the next launch: {dur(s.exposed_ns)} in all ({s.exposed_pct_of_window:.1f} % of the window, "
            f"{s.exposed_pct_of_idle:.1f} % of its idle{causes}). "
            + ("Once sampling runs on the GPU (evidence below) and the next step is launched before this one's "
               "tokens are read, " if _host_samples(s) else "Done while the GPU runs the next step, ") +
            f"{dur(s.overlap_ns)} of it ({s.overlap_pct_of_window:.1f} % of the window) would be hidden: per step "
            "the host work up to the time the host then waits for the GPU anyway; longer host work keeps the loop "
            "host-bound and stays with the host findings."] + _sampling(s) + (
                [timed_line(s)] if s.timed_steps is not None else [])


def timed_line(s: StepSyncSeries, lead: str = "On") -> str:
    """The evidence that the thread of ``s`` times its steps with CUDA events (StepSyncSeries.timed_steps set), after
    ``lead`` (this finding's; the ``sync`` idle finding's names the series first)."""
    return (f"{lead} {s.timed_steps} of its {s.steps} steps the thread reads a CUDA event pair's elapsed time "
            "(`cudaEventElapsedTime`) after the sync: the sync ends each timed step, as a benchmark harness or a "
            "per-step timer does.")


def _sampling(s: StepSyncSeries) -> List[str]:
    """The evidence that the host samples each step's next token (only when StepSyncSeries.host_sampling holds)."""
    h = s.host_sampling
    if h is None or not h.holds or not h.samples:
        return []
    return [f"On {h.steps} of its {h.of_steps} steps the thread reads back {fmt_bytes(h.read_bytes)} (p50) before "
            f"the sync and sends {fmt_bytes(h.sent_bytes)} (p50) to the GPU before its next launch, and "
            f"{100 * h.sampler_samples / h.samples:.0f} % of its {h.samples:,} CPU samples in the gaps are in "
            f"sampling code ({code_name(h.sampler_frame)}): the host picks each next token from the step's "
            "logits, so the next step needs what the host computes from this one's results."]


def event_timed_series(step_sync: Optional[StepSyncResult], dev: int, call: str) -> Optional[StepSyncSeries]:
    """The step-sync series of device ``dev`` whose steps end in ``call`` (the ``sync`` finding's named call) when
    every such series is event-timed (``timed_steps`` set: its thread reads ``cudaEventElapsedTime`` after ≥ 80 % of
    its step syncs) — the one with the most steps; None when none is, or when another thread's steps end in the same
    call untimed (docs/FINDINGS.md, "Idle causes → findings": event-timed syncs)."""
    if step_sync is None or not step_sync.available:
        return None
    same = [s for s in step_sync.series if s.device_id == dev and s.api == normalize(call)]
    if not same or any(s.timed_steps is None for s in same):
        return None
    return max(same, key=lambda s: (s.steps, -s.gtid))
