"""Idle that is not a per-step cost: start-up and shutdown (the device's leading and trailing gaps, once per run),
a loop finding named after start-up work, autotuning passes, allocator growth early in the window, and one pause
holding most of a finding (docs/FINDINGS.md, "Start-up and shutdown", "One pause", "Autotuning allocations")."""

from __future__ import annotations

from typing import AbstractSet, Mapping, Optional, Tuple

from ..analyses.idle.causes import IdleCause, IdleCausesResult
from ..analyses.idle.gpu_time import GpuTimeResult
from ..analyses.idle.result import DeviceCauses
from ..analyses.kernels.traits import AutotunePass, KernelTraitsResult
from ..analyses.trace.window import WindowResult
from ..vocabulary.cause_kinds import KIND
from ..vocabulary.code_spans import code_name
from ..vocabulary.units import fmt_at, fmt_count
from ..vocabulary.units import fmt_dur as dur
from .base import Check, Scope

GROWTH_WINDOW_SHARE = 0.25   # alloc idle only inside the first quarter of the window: allocator growth
#: a kind's idle with at least this share of its device's ns in the start-up / shutdown gaps (and the rest under
#: MEDIUM_SHARE of the window) is one-time work, not loop work (docs/FINDINGS.md, "Start-up and shutdown")
STARTUP_MIN_SHARE = 50.0
#: the start-up / shutdown words name a side (before the first kernel, after the last) only when it holds at least
#: this share of the once-per-run ns, in the title and the evidence alike (docs/FINDINGS.md, "Start-up and shutdown")
ONCE_SIDE_MIN_SHARE = 5.0
#: alloc idle that ends within an autotuning pass whose trials hold at least this share of its kernel time is
#: autotuning's, not the loop's (docs/FINDINGS.md, "Autotuning allocations")
AUTOTUNE_MIN_TRIAL_PCT = 50.0
#: one gap holding at least this % of the time a finding claims of its named cause is a pause (examples by workload:
#: advice_idle.PAUSE_EXAMPLES), not a per-step cost: the finding says so and gives no advice about every step
PAUSE_MIN_PCT = 50.0


def loop_detail(d: DeviceCauses, kind: str, top: str, claimed: Mapping[str, int],
                 window: WindowResult) -> Optional[Tuple[str, int]]:
    """(detail, ns between kernels) of the detail of ``kind`` on device ``d`` with the most idle ns in the loop,
    when the kind's largest detail ``top`` holds ≥ :data:`STARTUP_MIN_SHARE` % of its ns before the device's first
    kernel or after its last (a start-up call names a loop finding otherwise); None when it does not, or when no
    detail of the finding (``claimed``: its ns per detail on ``d``) has ns in the loop."""
    rows = [c for c in d.causes if c.kind == kind]
    main = next((c for c in rows if c.detail == top), None)
    if main is None or not main.ns or 100.0 * sum(once_of(main, window)) < STARTUP_MIN_SHARE * main.ns:
        return None
    loop = [(c.ns - sum(once_of(c, window)), c.detail) for c in rows if claimed.get(c.detail, 0) > 0]
    ns, det = min(loop, key=lambda x: (-x[0], x[1]), default=(0, ""))
    return (det, ns) if ns > 0 else None


def pause_line(c: Optional[IdleCause], claimed: int, dev: int, kind: str, repeats: bool = True
               ) -> Optional[Tuple[str, Tuple[Check, ...]]]:
    """The evidence line (and its check) when the largest gap of the finding's named cause ``c`` holds ≥
    :data:`PAUSE_MIN_PCT` % of the ns the finding claims of it on ``dev`` (``claimed``): a pause, not a per-step
    cost, when the window holds repeated steps (``repeats``: the report's ``window_repeats``); without them no step
    is known and the line says whether the pass pays it every time is not known, with no check (no pause claimed);
    else None."""
    if c is None or not c.examples or claimed <= 0:
        return None
    e = c.examples[0]
    share = 100.0 * min(e.ns, claimed) / claimed
    if share < PAUSE_MIN_PCT:
        return None
    rest = (f"; the other {fmt_count(c.gap_count - 1, 'gap')} {'hold' if c.gap_count > 2 else 'holds'} "
            f"{dur(max(claimed - e.ns, 0))}" if c.gap_count > 1 else "")
    if not repeats:
        return (f"One gap of {dur(e.ns)} holds {share:.1f} % of it{rest}; the window holds no repeated steps, so "
                "whether each pass pays it is not known.", ())
    return (f"One gap of {dur(e.ns)} holds {share:.1f} % of it: a pause, not a per-step cost{rest}.",
            (Check("largest_gap_pct_of_claimed", share, ">=", PAUSE_MIN_PCT, Scope(device_id=dev, kind=kind)),))


def once_gap(c: Optional[IdleCause], once: Tuple[int, int], gpu: GpuTimeResult, dev: int) -> bool:
    """True when the largest gap of cause ``c`` is the device's leading gap counted as start-up (``once[0]``) or its
    trailing gap counted as shutdown (``once[1]``)."""
    t = gpu.device(dev)
    if c is None or not c.examples or t is None:
        return False
    e = c.examples[0]
    return bool(once[0] and e.start_ns <= t.window_start_ns) or \
        bool(once[1] and e.end_ns >= t.window_start_ns + t.window_ns)


def early_only(causes: IdleCausesResult, gpu: GpuTimeResult, kind: str) -> bool:
    """True when every gap holding ``kind`` ends within the first quarter of its device's window."""
    for d in causes.devices:
        t = gpu.device(d.device_id)
        for c in d.causes:
            if c.kind == kind and t is not None and \
                    c.last_ns > t.window_start_ns + GROWTH_WINDOW_SHARE * t.window_ns:
                return False
    return True


def once_of(c: IdleCause, window: WindowResult) -> Tuple[int, int]:
    """(start-up ns, shutdown ns) of one cause row: its ns in the device's leading gap when the window starts at the
    capture's start, in its trailing gap when it ends at the capture's end (else 0)."""
    return (c.lead_gap_ns if window.start_ns <= window.full_start_ns else 0,
            c.trail_gap_ns if window.end_ns >= window.full_end_ns else 0)


def once_ns(d: DeviceCauses, kind: str, window: WindowResult) -> Tuple[int, int]:
    """(start-up ns, shutdown ns) of ``kind`` on device ``d`` (:func:`once_of` of its rows): idle before the device's
    first kernel or after its last in the capture, paid once per run."""
    parts = [once_of(c, window) for c in d.causes if c.kind == kind]
    return sum(p[0] for p in parts), sum(p[1] for p in parts)


def named_sides(once: Tuple[int, int]) -> Tuple[bool, bool]:
    """Which sides of the window the start-up / shutdown words name: a side holding at least
    :data:`ONCE_SIDE_MIN_SHARE` % of the once-per-run ns (title and evidence alike; docs/FINDINGS.md)."""
    n = sum(once)
    lead, trail = (n > 0 and 100.0 * x >= ONCE_SIDE_MIN_SHARE * n for x in once)
    return (lead, trail) if lead or trail else (once[0] >= once[1], once[0] < once[1])


def where_once(sides: Tuple[bool, bool]) -> str:
    return ("before the GPU's first kernel and after its last" if sides[0] and sides[1] else
            "before the GPU's first kernel" if sides[0] else "after the GPU's last kernel")


def once_line(once: Tuple[int, int], kind_ns: int, loop_pct: float, dev: int, startup: bool) -> str:
    """The evidence line of the start-up / shutdown part of a kind's idle on ``dev`` (``kind_ns``: all of it); a side
    under :data:`ONCE_SIDE_MIN_SHARE` % of the once-per-run ns is not named, its time given apart."""
    n = sum(once)
    sides = named_sides(once)
    small = [(ns, w) for ns, named, w in zip(once, sides, ("before the GPU's first kernel", "after its last kernel"))
             if ns and not named]
    head = (f"{dur(n)} of it on device {dev} ({100.0 * n / kind_ns:.1f} %) lies {where_once(sides)} "
            "(start-up / shutdown: once per run, not in every step"
            + "".join(f"; {dur(ns)} of it, under {ONCE_SIDE_MIN_SHARE:.0f} % of that, lies {w}" for ns, w in small)
            + ")")
    if startup:
        return head + f"; the rest, between kernels, is {loop_pct:.1f} % of the window."
    return head + (f"; the other {dur(kind_ns - n)} ({loop_pct:.1f} % of the window) lies between kernels, in the "
                   "loop: this finding is about both.")


def once_title(kind: str, detail: str, once: Tuple[int, int], main_share: float, ns: int) -> str:
    """The start-up / shutdown title, naming the sides its evidence names (:func:`named_sides`)."""
    sides = named_sides(once)
    what = f" ({code_name(detail)})" if detail else ""
    head = "Start-up and shutdown" if all(sides) else "Start-up" if sides[0] else "Shutdown"
    return (f"{head}, not the loop: {KIND[kind].idle_text}{what} "
            f"{where_once(sides)}, {main_share:.1f} % of the window ({dur(ns)}, once)")


def autotune_passes(causes: IdleCausesResult, traits: KernelTraitsResult,
                     devices: AbstractSet[int]) -> Tuple[AutotunePass, ...]:
    """The autotuning passes of ``devices`` when every one of them holds an autotuning pass whose ``autotune`` trials
    hold ≥ :data:`AUTOTUNE_MIN_TRIAL_PCT` of its kernel time and every gap of the device holding ``alloc`` idle ends
    by the pass's end (the first kernel after its last trial; kernels follow it); else ()."""
    passes = {p.device_id: p for p in traits.autotune_passes}
    out = []
    for d in causes.devices:
        if d.device_id not in devices:
            continue
        p = passes.get(d.device_id)
        if p is None or not p.kernel_ns or 100.0 * p.trial_ns / p.kernel_ns < AUTOTUNE_MIN_TRIAL_PCT or \
                any(c.kind == "alloc" and c.last_ns > p.until_ns for c in d.causes):
            return ()
        out.append(p)
    return tuple(out)


def autotune_line(p: AutotunePass, t0: int) -> str:
    return (f"Device {p.device_id} runs autotuning trials (kernel trait `autotune`: {code_name('redzone_checker')}, "
            f"FFT trials) until {fmt_at(p.until_ns, t0)} from trace start, where the first kernel after its last trial "
            f"starts: they hold {100.0 * p.trial_ns / p.kernel_ns:.1f} % of its {dur(p.kernel_ns)} of kernel time "
            f"up to then; every idle gap with an allocation ends by then, and none idles the GPU among the "
            f"{fmt_count(p.after_count, 'kernel')} after it (one-time workspace for the algorithms tried, not "
            "allocation in the loop).")
