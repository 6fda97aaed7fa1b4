"""NVTX ranges nested inside ranges of the same name (pushes never popped, a recursion): the total stays the one
`nsys stats` prints, and the report says that it counts the nested time once per level and gives the total without
it (docs/METRICS.md, "NVTX ranges": ``outer_ns``)."""

from __future__ import annotations

import pytest
from conftest import real_report, real_trace, require_traces
from synth import TraceBuilder

from nsys_llm_explainer.options import options_from_kwargs
from nsys_llm_explainer.pipeline import analyze_path
from nsys_llm_explainer.render import render_markdown

US = 1_000


def test_pushes_never_popped_are_not_read_as_time_spent(tmp_path):
    """Thread 1 pushes `test` at 0, 100, 200, 300 and 400 µs and never pops (a benchmark loop that pushes each
    iteration); thread 2 holds one `test` range [0, 1000) µs, so the unterminated ranges end at 1000 µs (the latest
    NVTX timestamp). Total (as `nsys stats` sums it): 1000 + 900 + 800 + 700 + 600 + 1000 = 5000 µs, in a 1 ms
    capture. Thread 1's last four nest in its first: 900 + 800 + 700 + 600 = 3000 µs nested; outer = 2000 µs (the
    two threads' outermost ranges, 1000 µs each). The table printed 5.000 ms with nothing to say it is not time
    spent."""
    b = TraceBuilder()
    b.process(1)
    t1, t2 = b.thread(1, 1), b.thread(1, 2)
    for i in range(5):
        b.nvtx_push_pop(i * 100 * US, None, "test", tid_g=t1)
        b.launch(i * 100 * US + 10 * US, i * 100 * US + 20 * US, i * 100 * US + 30 * US, i * 100 * US + 40 * US,
                 pid=1, tid=1, name="fused_kernel")
    b.nvtx_push_pop(0, 1000 * US, "test", tid_g=t2)
    b.nvtx_push_pop(10 * US, 20 * US, "step", tid_g=t2)
    p = tmp_path / "pushes.sqlite"
    b.write(str(p))
    rep = analyze_path(str(p), options_from_kwargs())
    rows = {r.name: r for r in rep.nvtx.ranges}
    assert (rows["test"].count, rows["test"].total_ns, rows["test"].outer_ns) == (6, 5000 * US, 2000 * US)
    assert rows["step"].outer_ns is None
    md = render_markdown(rep)
    assert ("Ranges nested inside a range of the same name on their thread (a recursion, or pushes never popped) are "
            "counted once per level in the total (as `nsys stats` sums them): such a total is not time spent. Without "
            "them: `test` 2.000 ms (`outer_ms` in the CSV).") in md


@pytest.mark.slow
def test_trace14_nested_test_ranges_total_is_said_not_to_be_time_spent():
    """Real trace 14 (nvFuser benchmark, 3.8 s capture): 1,000 `test` pushes, 999 never popped, all closing at the
    capture's end. Their total, 447,884.967 ms, is `nsys stats`'s (oracle nvtx_sum) and stays; the one `test` range
    that nests in no other spans 673.609 ms (its max), the total without the nested ones (SOURCE.md: "would be wrong
    to claim that `test` lasts 448 s")."""
    require_traces()
    rep = real_report(real_trace("14_nvfuser_v100_nvtx_heavy"))
    (row,) = [r for r in rep.nvtx.ranges if r.name == "test"]
    assert (row.count, row.total_ns, row.outer_ns, row.max_ns) == (1000, 447_884_967_031, 673_608_619, 673_608_619)
    md = render_markdown(rep)
    assert "such a total is not time spent. Without them: `test` 673.609 ms" in md
