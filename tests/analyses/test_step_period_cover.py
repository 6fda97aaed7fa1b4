"""How much of its period a step's NVTX range covers (docs/FINDINGS.md, "Steps": `period_cover_pct`): the median of
range ÷ period over the steps that have a next step, hand-computed."""

from __future__ import annotations

from typing import Optional

import numpy as np

from nsys_llm_explainer.analyses.steps.periods import step_periods

US = 1_000


class _Steps:
    """The columns of StepArrays that step_periods reads."""

    def __init__(self, start: list, end: list, pid: Optional[list] = None) -> None:
        self.start, self.end = np.array(start, np.int64), np.array(end, np.int64)
        self.pid = np.array(pid if pid is not None else [1] * len(start), np.int64)
        self.gap_busy = None

    def __len__(self) -> int:
        return int(self.start.shape[0])


def test_cover_is_the_median_of_per_step_ratios() -> None:
    """6 steps every 1 ms, ranges 100, 200, …, 600 µs: 5 periods of 1 ms covered 10, 20, 30, 40, 50 % → 30 %
    (the last step has no period; p50 of the 6 ranges over p50 of the periods would be 350 / 1000 = 35 %)."""
    s = [i * 1000 * US for i in range(6)]
    p = step_periods(_Steps(s, [t + (i + 1) * 100 * US for i, t in enumerate(s)]))
    assert np.allclose(p.cover, [0.1, 0.2, 0.3, 0.4, 0.5])
    assert p.cover_p50_pct() == 30.0


def test_cover_never_exceeds_100_and_skips_paused_periods() -> None:
    """Ranges 0.9 ms in periods of 1 ms, except one of 40 ms whose 39.1 ms gap exceeds 10 × the median period (an
    idle pause): left out of the periods and of the cover; the other 4 periods cover 90 % each → 90 %."""
    s = [0, 1, 2, 42, 43, 44]
    p = step_periods(_Steps([t * 1000 * US for t in s], [t * 1000 * US + 900 * US for t in s]))
    assert p.paused == 1 and p.cover.shape[0] == 4
    assert p.cover_p50_pct() == 90.0


def test_no_period_no_cover() -> None:
    """One step: no period, no cover."""
    assert step_periods(_Steps([0], [100])).cover_p50_pct() is None
