"""Claims sweep C7's fixes: words the sweeps found unclear or untrue (compare's anchor iteration, the window's
name, the step-sync table of idle pauses, compare's idle rows, the GPU generation's words, the processes of the
trace). Each trace is built by hand; the truth is worked out in the docstring."""

from __future__ import annotations

from pathlib import Path

from test_claims_c6 import H100, decode, graph_tokens

import nsys_llm_explainer as nle


def test_an_anchor_iteration_says_what_it_holds(tmp_path: Path) -> None:
    """(traces: C6's :func:`decode` (eager, T4) as BASE, :func:`graph_tokens` (10 CUDA-graph tokens, H100) as NEW)
    The anchor `quantize_q8_1` runs twice per eager step (GGML[k % 6], k = 0…9: k = 1, 7) and 34 times per graph
    token (j % 6 = 1, j = 0…199); the eager loop's kernel sequence repeats every 2 anchors, so an iteration is 2
    anchor instances in both: 19 complete iterations in BASE (40 anchors), (340 − 1) // 2 = 169 in NEW — 169
    'iterations' of 12 kernels, not tokens. The line now says what an iteration is: 200 kernels / 20 iterations =
    10.0 kernels per iteration in BASE, 2,000 / 170 = 11.8 in NEW."""
    a, b = tmp_path / "a.sqlite", tmp_path / "b.sqlite"
    decode("2024.2").write(str(a))
    graph_tokens("2024.2", H100).write(str(b))
    res = nle.compare([str(a), str(b)], labels=["eager", "graph"])
    assert res.metric.anchor_repeat == 2
    assert res.comparisons[0].headline[1] == (
        "Spread p90/p50 1.00 over 19 iterations vs 1.00 over 169 (an iteration: 2 instances of the anchor kernel; "
        "10.0 kernels per iteration in `eager`, 11.8 in `graph`).")
