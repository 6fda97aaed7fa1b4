"""The anchor kernel's repeat k (docs/COMPARE.md, "The headline metric"): among the k ≤ max(8, min(128, n // 4))
whose kernel sequence repeats, the smallest whose timing score is within 4 standard errors of the best score of a k
whose kernel sequence and timing both repeat; the smallest whose kernel sequence repeats when none repeats both ways.
Starts are hand-made: one device, the anchor's starts ``a`` and every kernel's starts ``allk`` (here the anchor plus
4 kernels after each instance)."""

from __future__ import annotations

from typing import List, Optional, Tuple

import numpy as np

from nsys_llm_explainer.comparison.measure import repeat_counts
from nsys_llm_explainer.comparison.metric import _repeat, max_repeat

US = 1_000


def repeat_score(per_device: List[Tuple[np.ndarray, np.ndarray]], k: int) -> Optional[float]:
    """Share of anchor intervals whose kernel count equals that of the interval ``k`` later (same device), from
    :func:`repeat_counts`: 1.0 when the kernel sequence repeats every ``k`` anchor instances; None without a pair."""
    c = repeat_counts(per_device, (k,))
    return int(c.same_count[0]) / int(c.pairs[0]) if c.pairs[0] else None


def timing_score(per_device: List[Tuple[np.ndarray, np.ndarray]], k: int) -> Optional[float]:
    """Share of anchor intervals that last alike (``measure.ALIKE``) with the interval ``k`` later (same device), from
    :func:`repeat_counts`: 1.0 when the timing repeats every ``k`` anchor instances; None without a pair."""
    c = repeat_counts(per_device, (k,))
    return int(c.alike[0]) / int(c.pairs[0]) if c.pairs[0] else None


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


def test_a_gap_once_in_three_is_k_3() -> None:
    """Intervals 100, 100, 1,000 µs × 20: k = 1 scores 1/3, k = 2 1/3, k = 3 1 (and every multiple of 3): k = 3."""
    dev = _device([100, 100, 1000] * 20)
    assert timing_score(dev, 3) == 1.0 and _repeat([dev])[0] == 3


def test_a_gap_once_in_ten_is_k_10_beyond_noise() -> None:
    """Intervals 100 µs × 9 then 1,000 µs (the host gap once in 10), 10 times: 101 anchors, k searched up to
    max(8, 101 // 4 = 25). k = 1: 99 pairs, the 10 gaps (positions 9, 19, … 99) spoil 2 pairs each but the last 1:
    19, so 80 / 99 = 80.8 % last alike — at least 75 %, the first k to repeat both ways. k = 10: 90 pairs all alike
    (100 %), the best. Standard error of the difference √(0.808 × 0.192 / 99 + 0) = 0.0396; 4 × 0.0396 = 0.158 <
    1 − 0.808 = 0.192: k = 1 is not as good as the best beyond noise; k = 2…9 score lower still (k = 9: the gap
    pairs with a 100): k = 10, one step."""
    dev = _device(([100] * 9 + [1000]) * 10)
    assert (timing_score(dev, 1), timing_score(dev, 10)) == (80 / 99, 1.0)
    assert _repeat([dev]) == (10, "the kernel sequence repeats every 1 instance of the anchor kernel, its timing every "
                                  "10 instances (100.0 % of the anchor intervals last alike with the one 10 later, "
                                  "80.8 % with the one 1 later, beyond noise): an iteration is 10 instances")


def test_a_gap_once_in_ten_over_four_steps_is_not_told_from_noise() -> None:
    """The same loop over 4 steps (40 intervals, 41 anchors, k ≤ max(8, 10)): k = 1 scores 32 / 39 = 0.821 (7
    pairs spoilt: 2 + 2 + 2 + 1), k = 10 30 / 30. 4 × √(0.821 × 0.179 / 39) = 0.246 > 0.179: within noise, k stays
    1 (the reason as before the timing test)."""
    dev = _device(([100] * 9 + [1000]) * 4)
    assert timing_score(dev, 1) == 32 / 39 and timing_score(dev, 10) == 1.0
    assert _repeat([dev]) == (1, "the kernel sequence repeats every 1 instance of the anchor kernel")


def test_the_search_leaves_four_iterations_per_device() -> None:
    """k is searched up to max(8, min(128, n // 4)), n the anchor instances on the busiest device of the trace with
    the fewest. A gap once in 12 intervals over 10 steps (121 anchors, k ≤ 30): k = 1 scores 100 / 119 = 0.840 (19
    pairs spoilt), k = 12 108 / 108; 4 × √(0.840 × 0.160 / 119) = 0.134 < 0.160: k = 12. Compared with a trace of 41
    anchors 100 µs apart, k ≤ 10: 12 is not searched, and k = 1 (the best of 1…10 in both traces) stays."""
    assert [max_repeat(n) for n in (0, 7, 43, 44, 100, 512, 513, 10_000)] == [8, 8, 10, 11, 25, 128, 128, 128]
    gap12 = _device(([100] * 11 + [1000]) * 10)
    assert timing_score(gap12, 1) == 100 / 119 and _repeat([gap12])[0] == 12
    assert _repeat([gap12, _device([100] * 40)])[0] == 1


def test_counts_by_hand() -> None:
    """Anchors at 0, 100, 200, 1,200, 1,300 µs (intervals 100, 100, 1,000, 100), each followed by 4 kernels (5 per
    interval): k = 1 has 3 pairs, all with 5 kernels each, 1 alike ((100, 100)); k = 2 2 pairs, 1 alike ((100,
    1,000) no, (100, 100) yes); k = 4 none."""
    c = repeat_counts(_device([100, 100, 1000, 100]), (1, 2, 4))
    assert (c.pairs.tolist(), c.same_count.tolist(), c.alike.tolist()) == ([3, 2, 0], [3, 2, 0], [1, 1, 0])
    assert repeat_score(_device([100, 100, 1000, 100]), 4) is None


def test_noise_around_three_quarters_moves_no_k() -> None:
    """Intervals 1,000 µs ± up to 30 % (uniform, seed 1, 200 intervals): about 3 in 4 pairs last alike at every k, so
    by chance k = 1 scores 0.709 (under 75 %) and k = 2 0.783: the first k to repeat both ways would be 2 (the rule
    before the noise margin), but 0.709 is within 4 standard errors of the best score (0.796): k stays 1."""
    rng = np.random.default_rng(1)
    dev = _device([int(x) for x in rng.uniform(700, 1300, 200)])
    s1, s2 = timing_score(dev, 1), timing_score(dev, 2)
    assert s1 is not None and s2 is not None and round(s1, 3) == 0.709 and round(s2, 3) == 0.783
    assert round(max(timing_score(dev, k) or 0.0 for k in range(1, 51)), 3) == 0.796
    assert _repeat([dev])[0] == 1


def test_irregular_timing_everywhere_falls_back_to_the_kernel_repeat() -> None:
    """Intervals cycling 100 / 1,000 / 300 / 5,000 µs (the 4 values repeat every 4 instances
    and no two of them last alike, so k ∈ {1, 2, 3} pair none; at k = 4 all pair): k = 4. A sequence of
    intervals growing 1.5 × each (no two alike): no k repeats in timing, k = the kernel sequence's, 1."""
    assert _repeat([_device([100, 1000, 300, 5000] * 10)])[0] == 4
    assert _repeat([_device([int(100 * 1.5 ** i) for i in range(30)])])[0] == 1
