"""Step periods: the start of a step to the start of the next step of the same process — what a step costs when its
NVTX range does not cover the host work between steps (docs/METRICS.md, "Steps"; compare's headline metric,
docs/COMPARE.md)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Optional

import numpy as np

from ..common.stats import percentile

if TYPE_CHECKING:
    from .metrics import StepArrays

PAUSE = 10   # idle between two steps longer than this many median step periods: a pause, not a step
#: a process's leading or trailing run of step periods over this many of its median periods, or whose GPU work is over
#: this many times its median, is warm-up or wind-down: outside the span the comparison splits into parts
#: (docs/COMPARE.md)
WARMUP = 2


@dataclass(frozen=True)
class StepPeriods:
    """The step periods of one trace's steps."""

    samples: np.ndarray   # start of the next step − start of the step, consecutive steps of one process (ns)
    paused: int           # periods left out: the idle after the step (no step range, no GPU work) exceeds PAUSE
    #                       median periods
    overlapped: int       # pairs left out: the next step starts before the step ends (ranges on several threads)
    #: per period of ``samples``: the step's range (end − start) ÷ its period, in [0, 1] (the pair does not overlap)
    cover: np.ndarray = field(default_factory=lambda: np.empty(0, np.float64))

    def cover_p50_pct(self) -> Optional[float]:
        """The median over the periods of range ÷ period, × 100: how much of its period a step's range covers (the
        host work between the ranges is the rest); None without periods. A median of per-step ratios, never above
        100 % (not the median range over the median period: different steps, and more ranges than periods)."""
        return 100.0 * float(np.median(self.cover)) if self.cover.shape[0] else None


def step_periods(a: Optional[StepArrays]) -> StepPeriods:
    """Per process (pid), steps in start order: step i's period is start[i+1] − start[i] (the last step of a process
    has none); left out: a period over an idle pause (:func:`pauses` of its gap end[i] → start[i+1] less the GPU work
    on the step's device inside it, ``a.gap_busy``) and an overlapping pair (docs/FINDINGS.md, "Steps")."""
    if a is None or len(a) < 2:
        return StepPeriods(np.empty(0, np.int64), 0, 0)
    o = np.lexsort((a.start, a.pid))
    s, e, pid = a.start[o], a.end[o], a.pid[o]
    same = pid[1:] == pid[:-1]
    busy = a.gap_busy[o][:-1] if a.gap_busy is not None else np.zeros(s.shape[0] - 1, np.int64)
    per, gap, wall = (s[1:] - s[:-1])[same], (s[1:] - e[:-1])[same], (e[:-1] - s[:-1])[same]
    idle = gap - busy[same]
    ok = gap >= 0
    per, idle, wall = per[ok], idle[ok], wall[ok]
    overlapped = int((~ok).sum())
    if per.shape[0] == 0:
        return StepPeriods(per, 0, overlapped)
    paused = pauses(per, idle)
    keep = ~paused
    cover = np.where(per[keep] > 0, wall[keep] / np.maximum(per[keep], 1), 1.0)   # a zero period: both start at once
    return StepPeriods(per[keep], int(paused.sum()), overlapped, cover)


def pauses(period: np.ndarray, idle: np.ndarray) -> np.ndarray:
    """The idle-pause rule, one for NVTX step periods and marker steps: per period, whether its ``idle`` (ns with no
    step and no GPU work on the step's device) exceeds :data:`PAUSE` × the median of all ``period`` (ns)."""
    return idle > PAUSE * float(percentile(period, 50)) if period.shape[0] else np.zeros(0, np.bool_)


@dataclass(frozen=True)
class PeriodSpan:
    """Whole step periods of one trace inside its analysis window: ``[start_ns, end_ns)`` runs from the first step's
    start to the last step's start (over all processes; warm-up and wind-down periods left out: :func:`period_span`),
    and ``units`` counts the periods (start of a step to the next step's start, same process; every one lies inside
    it) — N − 1 for the N steps of one process (docs/COMPARE.md, "Where the change comes from")."""

    start_ns: int
    end_ns: int
    units: float


def period_span(a: Optional[StepArrays], w0: int, w1: int) -> Optional[PeriodSpan]:
    """The :class:`PeriodSpan` of the steps starting inside ``[w0, w1]``, each process's leading and trailing run of
    periods over :data:`WARMUP` × its median period or GPU work in the period (``gpu_busy`` + ``gap_busy``) over
    :data:`WARMUP` × its median (warm-up, wind-down: cold kernels in a loop the host paces) left out; None when it holds
    no period (fewer than two steps of one process)."""
    if a is None or len(a) < 2:
        return None
    inside = (a.start >= w0) & (a.start <= w1)
    s, pid = a.start[inside], a.pid[inside]
    if s.shape[0] < 2:
        return None
    o = np.lexsort((s, pid))
    s, pid = s[o], pid[o]
    busy = (a.gpu_busy + (a.gap_busy if a.gap_busy is not None else 0))[inside][o][:-1]   # GPU work in the period
    same = (pid[1:] == pid[:-1]) & (s[1:] > s[:-1])
    per = s[1:] - s[:-1]
    firsts, lasts, n = [], [], 0
    for p in np.unique(pid[1:][same]).tolist():   # per process (a handful), not per step
        j = np.flatnonzero(same & (pid[1:] == p))
        typical = j[(per[j] <= WARMUP * float(np.median(per[j]))) & (busy[j] <= WARMUP * float(np.median(busy[j])))]
        typical = typical if typical.shape[0] else j[per[j] <= WARMUP * float(np.median(per[j]))]
        j = j[(j >= typical[0]) & (j <= typical[-1])]
        firsts.append(int(s[j[0]]))
        lasts.append(int(s[j[-1] + 1]))
        n += j.shape[0]
    lo, hi = (min(firsts), max(lasts)) if n else (0, 0)
    return PeriodSpan(lo, hi, float(n)) if n and hi > lo else None


def tiled_span(a: Optional[StepArrays], w0: int, w1: int) -> Optional[PeriodSpan]:
    """Marker-kernel steps, which tile each device's timeline (one marker kernel's end to the next's): the
    :class:`PeriodSpan` from the first start to the last end of the steps inside ``[w0, w1]``; ``units`` the steps and
    the intervals between them left out over an idle pause (the period span counts a period over a pause too). None
    when no step lies inside."""
    if a is None or len(a) == 0:
        return None
    inside = (a.start >= w0) & (a.end <= w1)
    s, e, dev = a.start[inside], a.end[inside], a.device[inside]
    if s.shape[0] == 0:
        return None
    o = np.lexsort((s, dev))
    s, e, dev = s[o], e[o], dev[o]
    gaps = int(((dev[1:] == dev[:-1]) & (s[1:] > e[:-1])).sum())
    lo, hi = int(s.min()), int(e.max())
    return PeriodSpan(lo, hi, float(s.shape[0] + gaps)) if hi > lo else None
