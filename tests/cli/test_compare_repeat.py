"""The anchor kernel's repeat k (docs/COMPARE.md, "The headline metric"): the smallest k ≤ 8 whose kernel sequence and
timing both repeat, else the smallest whose kernel sequence does. Starts are hand-made: one device, the anchor's
starts ``a`` and every kernel's starts ``allk`` (here the anchor plus 4 kernels after each instance)."""

from __future__ import annotations

from typing import List, Tuple

import numpy as np

from nsys_llm_explainer.comparison.measure import repeat_score, timing_score
from nsys_llm_explainer.comparison.metric import _repeat

US = 1_000


def _device(intervals: List[int]) -> List[Tuple[np.ndarray, np.ndarray]]:
    """One device whose anchor starts are 0 then the running sum of ``intervals`` (µs), each interval holding the
    anchor and 4 more kernels 1 µs apart (5 kernels per interval: the kernel sequence repeats every instance)."""
    a = np.concatenate([[0], np.cumsum(intervals)]).astype(np.int64) * US
    allk = np.sort(np.concatenate([a + j * US for j in range(5)]))
    return [(a, allk)]


def test_alternating_intervals_repeat_in_timing_every_two() -> None:
    """500 / 686 µs alternating, 20 pairs (41 anchors, 40 intervals): every interval holds 5 kernels (count score 1 at
    k = 1); at k = 1 no pair lasts alike (500 < 0.75 × 686 = 514.5), at k = 2 all 38 do: k = 2."""
    dev = _device([500, 686] * 20)
    assert repeat_score(dev, 1) == 1.0
    assert timing_score(dev, 1) == 0.0 and timing_score(dev, 2) == 1.0
    k, why = _repeat([dev])
    assert k == 2 and why == ("the kernel sequence repeats every 1 instance of the anchor kernel, its timing every 2 "
                              "instances (an anchor interval lasts alike with the one 2 later, not with the one 1 "
                              "later): an iteration is 2 instances")


def test_three_quarters_of_the_longer_is_alike() -> None:
    """500 / 666 µs: 500 ≥ 0.75 × 666 = 499.5, alike: the timing repeats at k = 1 and k stays 1 (reason as before)."""
    dev = _device([500, 666] * 20)
    assert timing_score(dev, 1) == 1.0
    assert _repeat([dev]) == (1, "the kernel sequence repeats every 1 instance of the anchor kernel")


def test_timing_is_judged_in_every_trace() -> None:
    """BASE regular (100 µs intervals), NEW alternating 100 / 400 µs: k = 1 fails NEW's timing, k = 2 passes both."""
    assert _repeat([_device([100] * 40), _device([100, 400] * 20)])[0] == 2


def test_noise_alone_moves_no_k() -> None:
    """Intervals 1,000 µs ± up to 20 % (uniform, seeded): any two last alike unless one is under 0.75 × the other
    (800 vs 1,200: 0.667), so k = 1 scores the same as any k in expectation and k stays 1. A spread of the periods
    of k instances would instead shrink with k (sums average the noise out)."""
    rng = np.random.default_rng(7)
    dev = _device([int(x) for x in rng.uniform(800, 1200, 400)])
    scores = [timing_score(dev, k) for k in range(1, 9)]
    assert all(s is not None and s >= 0.75 for s in scores)
    assert max(scores) - min(scores) < 0.05   # k-invariant under noise (single intervals, not sums, are compared)
    assert _repeat([dev])[0] == 1


def test_no_timing_repeat_keeps_the_kernel_repeat() -> None:
    """Intervals 100 µs × 9 then 1,000 µs (the host gap once in 10): at k = 1 pairs (100, 100) last alike 8 times in
    10 (80 % ≥ 75 %) — k = 1. With the gap once in 3 (100, 100, 1,000) k = 1 scores 1/3, k = 2 1/3, k = 3 1:
    k = 3."""
    assert _repeat([_device(([100] * 9 + [1000]) * 10)])[0] == 1
    dev = _device([100, 100, 1000] * 20)
    assert timing_score(dev, 3) == 1.0 and _repeat([dev])[0] == 3


def test_irregular_timing_everywhere_falls_back_to_the_kernel_repeat() -> None:
    """Intervals cycling 100 / 1,000 / 300 / 5,000 µs (the 4 values repeat every 4 instances
    and no two of them last alike, so k ∈ {1, 2, 3} pair none; at k = 4 all pair): k = 4. A sequence of
    intervals growing 1.5 × each (no two alike): no k repeats in timing, k = the kernel sequence's, 1."""
    assert _repeat([_device([100, 1000, 300, 5000] * 10)])[0] == 4
    assert _repeat([_device([int(100 * 1.5 ** i) for i in range(30)])])[0] == 1
