"""The headline metric: one number per trace, lower is better, chosen once for all traces (``step_period_p50`` of
NVTX steps or ``step_time_p50`` of marker-kernel steps, else ``iteration_period_p50`` of an anchor kernel, else none),
and its noise (docs/COMPARE.md, "The headline metric")."""

from __future__ import annotations

import math
from typing import AbstractSet, FrozenSet, List, Optional, Sequence, Tuple

import numpy as np

from ..analyses.common.stats import percentile, round_half_up
from ..analyses.steps.periods import step_periods
from .measure import Facts, RepeatCounts, anchor_periods, repeat_counts, shares, step_sequences, steps_in_window
from .result import MetricSpec, MetricValue

#: the repeat k is searched in 1 … max(MAX_REPEAT, min(MAX_REPEAT_LONG, n // REPEAT_ITERATIONS)), n the anchor
#: instances on a trace's busiest device (the fewest over the traces): up to 128 layers a step, with at least 4
#: iterations of k left per device (docs/COMPARE.md, "The headline metric")
MAX_REPEAT = 8
MAX_REPEAT_LONG = 128
REPEAT_ITERATIONS = 4
REPEAT_SCORE = 0.75
#: a k's timing score is as good as the best k's when within this many standard errors of their difference (the
#: shares' binomial errors in quadrature): noise alone moved k in 2 of 4,200 seeded draws; a gap once in 80
#: intervals (1.5 × the others, ± 10 % noise) was found in 30 of 40 draws over 10 steps, 40 of 40 over 20
TIMING_Z = 4.0


def max_repeat(n: int) -> int:
    """The largest repeat k searched when the busiest device of the trace with the fewest holds ``n`` anchor
    instances."""
    return max(MAX_REPEAT, min(MAX_REPEAT_LONG, n // REPEAT_ITERATIONS))


#: z of the ~95 % half-width of a median, its standard error taken as IQR / √n (exact for uniform noise; for normal,
#: exponential or heavy-tailed noise the error is smaller, so the bound is conservative). McGill's notch 1.58 is made
#: for non-overlap (h1 + h2); in quadrature it called ~10 % of identical pairs different (docs/COMPARE.md, "Noise")
HALF_WIDTH_Z = 1.96

STEP = "step_time_p50"          # marker-kernel steps: they tile each device's timeline, wall = period
PERIOD = "step_period_p50"       # NVTX steps: start to the next step's start in the same process
ITERATION = "iteration_period_p50"


def _steps_common(facts: Sequence[Facts]) -> Optional[str]:
    st = [f.report.steps for f in facts]
    missing = [f.label for f, s in zip(facts, st) if not (s.available and s.step_count > 0)]
    if missing:
        return f"no steps found in {', '.join(missing)}"
    if len({s.method for s in st}) > 1:
        return "steps were found by different methods (" + ", ".join(f"{f.label}: {s.method}" for f, s in
                                                                     zip(facts, st)) + ")"
    if st[0].method == "nvtx" and len({tuple(s.step_ranges) for s in st}) > 1:
        return "the traces delimit steps with different NVTX ranges"
    return None


def harness_names(facts: Sequence[Facts]) -> Optional[FrozenSet[str]]:
    """The kernel names any trace's benchmark harness launched outside every timed region (``Report.harness``,
    :mod:`analyses.kernels.harness`) when every trace is event-timed; None when some trace is not (or its report
    does not say)."""
    hs = [f.report.harness for f in facts]
    if not hs or any(h is None or not h.threads for h in hs):
        return None
    return frozenset(n for h in hs if h is not None for n in h.names)


def _anchor(facts: Sequence[Facts], leave_out: AbstractSet[str] = frozenset()) -> Optional[str]:
    """The kernel name common to every trace whose smallest share of kernel time is largest, ``leave_out`` aside
    (None when no such name is left)."""
    sh = [shares(f) for f in facts]
    common = (set(sh[0]).intersection(*sh[1:]) if sh else set()) - set(leave_out)
    if not common:
        return None
    return max(sorted(common), key=lambda n: min(s[n] for s in sh))


def _plural(k: int) -> str:
    return f"{k} instance{'s' if k > 1 else ''}"


def _shares(part: np.ndarray, pairs: np.ndarray) -> np.ndarray:
    """``part / pairs`` per k, NaN where no pair exists."""
    return np.divide(part, pairs, out=np.full(pairs.shape, np.nan), where=pairs > 0)


def _pct(c: Sequence[RepeatCounts], j: int) -> str:
    """The share of pairs that last alike at index ``j``, over every trace, in %."""
    return f"{100.0 * sum(int(x.alike[j]) for x in c) / sum(int(x.pairs[j]) for x in c):.1f} %"


def _repeat(per_trace: List[list]) -> Tuple[int, str]:
    """(the repeat ``k``: anchor instances per iteration, why). Among the ``k`` ≤ :func:`max_repeat` whose kernel
    sequence and timing both repeat (at least :data:`REPEAT_SCORE` of the anchor intervals, in every trace), the
    smallest whose timing score is, in every trace, within :data:`TIMING_Z` standard errors of that trace's best; when
    none repeats both ways, the smallest whose kernel sequence does (1 when none): a loop whose kernel names repeat
    within a step (5 GEMMs twice, or one GEMM 10 times) has its step's host gap in one anchor interval of a step, and
    a median over parts of a step skips the gap (docs/COMPARE.md, "The headline metric")."""
    n = min((max((a.shape[0] for a, _ in p), default=0) for p in per_trace), default=0)
    ks = range(1, max_repeat(n) + 1)
    counts = [repeat_counts(p, ks) for p in per_trace]
    kernels_ok = np.ones(len(ks), bool)
    both = np.ones(len(ks), bool)
    for c in counts:   # NaN (no pair) compares False
        kernels_ok &= _shares(c.same_count, c.pairs) >= REPEAT_SCORE
        both &= _shares(c.alike, c.pairs) >= REPEAT_SCORE
    both &= kernels_ok
    if not kernels_ok.any():
        return 1, "no repeating kernel sequence found; each anchor instance counts as one iteration"
    by_kernels = int(np.argmax(kernels_ok)) + 1
    why = f"the kernel sequence repeats every {_plural(by_kernels)} of the anchor kernel"
    if not both.any():
        return by_kernels, why
    first = int(np.argmax(both))
    near = kernels_ok.copy()
    for c in counts:
        s = _shares(c.alike, c.pairs)
        b = int(np.argmax(np.where(both, s, -1.0)))
        se = np.sqrt(np.where(kernels_ok, s * (1 - s) / np.maximum(c.pairs, 1), 0.0) + s[b] * (1 - s[b]) / c.pairs[b])
        near &= s >= s[b] - TIMING_Z * se
    j = int(np.argmax(near)) if near.any() else first
    k = j + 1
    if k == by_kernels:
        return k, why
    if j == first:
        return k, (f"{why}, its timing every {_plural(k)} (an anchor interval lasts alike with the one {k} later, not "
                   f"with the one {by_kernels} later): an iteration is {_plural(k)}")
    return k, (f"{why}, its timing every {_plural(k)} ({_pct(counts, j)} of the anchor intervals last alike with the "
               f"one {k} later, {_pct(counts, first)} with the one {first + 1} later, beyond noise): an iteration is "
               f"{_plural(k)}")


def choose_metric(facts: Sequence[Facts]) -> MetricSpec:
    why_not_steps = _steps_common(facts)
    if why_not_steps is None:
        s = facts[0].report.steps
        if s.method == "nvtx":
            return MetricSpec(PERIOD, "median step period (start of a step to the start of the next step of the same "
                              f"process; steps delimited by NVTX range {', '.join(s.step_ranges)})", "step",
                              "every trace has steps found the same way; a step range need not cover the host work "
                              "between steps, so a step is measured start to start", step_method=s.method,
                              step_ranges=tuple(s.step_ranges))
        return MetricSpec(STEP, f"median step time (steps delimited by marker kernels /{s.marker_regex}/)", "step",
                          "every trace has steps found the same way", step_method=s.method,
                          step_ranges=tuple(s.step_ranges))
    harness = harness_names(facts)
    name = _anchor(facts, harness) if harness else None
    if name is None:
        harness, name = None, _anchor(facts)   # no timed kernel in common: the anchor among all kernels
    if name is None:
        return MetricSpec(None, "none: the traces have no kernel name in common", "window_s",
                          f"{why_not_steps}, and no kernel name is common to all traces")
    k, why = _repeat([f.kernel_starts.per_device(name) for f in facts])   # per device: (anchor starts, all starts)
    among = (" timed kernels (every trace is event-timed: the benchmark harness's kernels launched outside every "
             f"timed region, {len(harness)} name{'s' if len(harness) > 1 else ''}, left out)" if harness else "")
    return MetricSpec(ITERATION, f"median iteration period ({k} instance{'s' if k > 1 else ''} of the anchor "
                      "kernel, start to start, same device)", "iteration",
                      f"{why_not_steps}; the anchor is the kernel with the largest share of kernel time common to "
                      f"all traces{among and ' among the' + among}; {why}", anchor_kernel=name, anchor_repeat=k,
                      harness_left_out=tuple(sorted(harness)) if harness else None)


def _value(samples: np.ndarray, count: int, p50: Optional[int] = None, p90: Optional[int] = None) -> MetricValue:
    if samples.shape[0] == 0:
        return MetricValue(None, None, count, None, None)
    p50 = int(round_half_up(np.asarray(percentile(samples, 50)))) if p50 is None else int(p50)
    p90 = int(round_half_up(np.asarray(percentile(samples, 90)))) if p90 is None else int(p90)
    iqr = int(round_half_up(np.asarray(percentile(samples, 75) - percentile(samples, 25))))
    return MetricValue(p50, p90, count, (p90 / p50) if p50 > 0 else None, iqr)


def _devices_summed(units: float, f: Facts, sequences: int) -> float:
    """``units`` counted over ``sequences`` step sequences (processes, devices) run side by side, as units summed over
    the devices counted (the parts are: docs/COMPARE.md "Where the change comes from"): a process that drives two
    GPUs does a step's work on each, as two TP ranks' processes do."""
    return units * f.device_count / sequences if sequences and f.device_count else units


def _per_sequence(n: int, sequences: int) -> int:
    """The samples (or units) ``n`` of ``sequences`` step sequences run side by side, per sequence: TP ranks step in
    lockstep, so each rank's periods are the same steps, counted once in the noise's n (docs/COMPARE.md "Noise")."""
    return n // sequences if sequences > 1 else n


def measure(spec: MetricSpec, f: Facts) -> Tuple[MetricValue, Optional[float]]:
    """(the metric of trace ``f``, units of work in its steady window, summed over the devices counted)."""
    if spec.name == PERIOD:
        st = f.report.steps
        periods = step_periods(st.arrays if st.available else None).samples
        units, seq = (f.span.units if f.span is not None else steps_in_window(f)), step_sequences(f, "pid")
        return _value(periods, _per_sequence(int(periods.shape[0]), seq)), _devices_summed(units, f, seq)
    if spec.name == STEP:
        st = f.report.steps
        wall = st.arrays.wall if st.arrays is not None else np.empty(0, np.int64)
        sm, seq = st.summary, step_sequences(f, "device")
        return (_value(wall, _per_sequence(st.step_count, seq), sm.p50_ns if sm else None, sm.p90_ns if sm else None),
                _devices_summed(f.span.units if f.span is not None else steps_in_window(f), f, seq))
    if spec.name == ITERATION and spec.anchor_kernel is not None and spec.anchor_repeat:
        per_device = f.kernel_starts.per_device(spec.anchor_kernel)
        samples, complete, instances = anchor_periods(per_device, spec.anchor_repeat)
        seq = sum(1 for a, _ in per_device if a.shape[0])
        return _value(samples, _per_sequence(complete, seq)), _devices_summed(instances / spec.anchor_repeat, f, seq)
    return MetricValue(None, None, 0, None, None), f.pooled_window_ns / 1e9


def change(base: MetricValue, new: MetricValue) -> Tuple[Optional[float], Optional[float]]:
    """(change % of NEW against BASE, noise % — the ~95 % half-width of the change, in % of BASE)."""
    if not base.p50_ns or new.p50_ns is None:
        return None, None
    ch = 100.0 * (new.p50_ns - base.p50_ns) / base.p50_ns
    hw = [HALF_WIDTH_Z * (v.iqr_ns or 0) / math.sqrt(v.count) if v.count > 0 else float("inf") for v in (base, new)]
    noise = 100.0 * math.sqrt(hw[0] ** 2 + hw[1] ** 2) / base.p50_ns
    return ch, (noise if math.isfinite(noise) else None)
