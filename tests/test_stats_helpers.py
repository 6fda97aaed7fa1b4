"""Small numeric helpers of analyses/stats.py against numpy's own definitions."""

from __future__ import annotations

import numpy as np


def test_top_indices_equals_a_stable_descending_sort():
    from nsys_llm_explainer.analyses.stats import top_indices

    rng = np.random.default_rng(7)
    for n, hi, k in [(0, 5, 3), (5, 5, 10), (1000, 4, 20), (100_000, 50, 20), (100_000, 10**9, 1), (37, 3, 37)]:
        v = rng.integers(0, hi, n)
        want = np.argsort(-v, kind="stable")[:k].tolist()
        assert top_indices(v, k).tolist() == want, (n, hi, k)
