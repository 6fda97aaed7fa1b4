"""torch.compile / Inductor: sentences a report made that its trace contradicts (compiled kernels called eager, graph
breaks blamed where none show, launches said to remain outside the graphs). Each trace is built by hand; the truth is
worked out in the docstring."""

from __future__ import annotations

from pathlib import Path

import pytest
from claims_support import finding_of as _finding
from claims_support import report_of as _run
from synth import TraceBuilder

US = 1_000
PID = 100
INDUCTOR = ("triton_poi_fused_add_mul_0", "triton_poi_fused_cat_1", "triton_red_fused_sum_2")
EAGER = "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>>"
BREAKS = "eager regions between graph breaks"


def _launch_bound(names) -> TraceBuilder:
    """Thread 1 launches 2,000 kernels of 3 µs, one every 30 µs (`cuLaunchKernel` [30i, 30i+25) µs, kernel
    [30i+27, 30i+30) µs), names cycling through ``names``: GPU busy 10 %, the host ~25 µs per kernel: launch-bound."""
    b = TraceBuilder()
    b.process(PID)
    b.thread(PID, 1, "python3")
    for i in range(2000):
        c = i * 30 * US
        b.launch(c, c + 25 * US, c + 27 * US, c + 30 * US, pid=PID, tid=1, name=names[i % len(names)],
                 api="cuLaunchKernel")
    return b


def test_launch_bound_compiled_model_is_not_told_its_small_kernels_are_eager(tmp_path: Path) -> None:
    """Every kernel is an Inductor kernel (`triton_poi_…`, `triton_red_…`): torch.compile generated all 2,000 of
    them, no eager elementwise kernel ran. The launch-bound finding said "`torch.compile` is already in use …: the
    small kernels left are eager regions between graph breaks" — false here: the small kernels are the compiled
    ones (the remedy is CUDA graphs, the `launch.graphs.compiled` line, which stays)."""
    rep = _run(_launch_bound(INDUCTOR), tmp_path)
    lf = _finding(rep, "launch_overhead")
    assert not any(BREAKS in a for a in lf["recommendation"]), lf["recommendation"]
    assert any("is in use without CUDA graphs" in a for a in lf["recommendation"])


def test_launch_bound_compiled_model_with_eager_kernels_keeps_the_graph_break_line(tmp_path: Path) -> None:
    """Half of the kernels are Inductor's, half eager `at::native` elementwise kernels (1,000 of 2,000): eager
    small kernels run beside the compiled ones, so the graph-break line holds and is given."""
    rep = _run(_launch_bound((INDUCTOR[0], EAGER)), tmp_path)
    lf = _finding(rep, "launch_overhead")
    assert any(BREAKS in a for a in lf["recommendation"]), lf["recommendation"]


def _back_to_back(names) -> TraceBuilder:
    """Thread 1 launches 1,000 kernels of 20 µs up front (call [5i, 5i+4) µs), the GPU runs them back to back with
    3 µs between them (kernel i at [23i+10, 23i+30) µs): every gap is `queued` (next kernel already launched) and
    under 10 µs; queued idle 999 × 3 µs = 2.997 ms of the 23 ms window, 13 %: the `queued` latency finding."""
    b = TraceBuilder()
    b.process(PID)
    b.thread(PID, 1, "python3")
    for i in range(1000):
        k = i * 23 * US + 10 * US
        b.launch(i * 5 * US, i * 5 * US + 4 * US, k, k + 20 * US, pid=PID, tid=1, name=names[i % len(names)],
                 api="cuLaunchKernel")
    return b


def test_queued_latency_of_compiled_kernels_is_not_blamed_on_graph_breaks(tmp_path: Path) -> None:
    """(trace: :func:`_back_to_back`, Inductor kernels only) The queued-latency finding must not say the small
    kernels left are eager regions between graph breaks: no eager kernel ran."""
    rep = _run(_back_to_back(INDUCTOR), tmp_path)
    q = _finding(rep, "idle_queued")
    assert not any(BREAKS in a for a in q["recommendation"]), q["recommendation"]


def test_queued_latency_with_eager_kernels_keeps_the_graph_break_line(tmp_path: Path) -> None:
    """(trace: :func:`_back_to_back`, half the kernels eager `at::native` elementwise ones) The line holds."""
    rep = _run(_back_to_back((INDUCTOR[0], EAGER)), tmp_path)
    q = _finding(rep, "idle_queued")
    assert any(BREAKS in a for a in q["recommendation"]), q["recommendation"]


@pytest.mark.parametrize("eager", [False, True])
def test_all_kernels_in_graphs_is_not_told_launches_remain_outside_them(tmp_path: Path, eager: bool) -> None:
    """torch.compile "reduce-overhead": 500 `cudaGraphLaunch` calls ([150i, 150i+10) µs), each replaying 20 Inductor
    kernels of 2 µs (3 µs apart from 150i+12 µs); no kernel is launched outside a graph (10,000 of 10,000 are graph
    nodes). The launch-bound finding (133,474 kernels/s, p50 2 µs, busy 26.7 %) said "CUDA graphs are already in use:
    the launches that remain are outside them; capture more of the step in the graph (or fuse the kernels launched
    outside it)" — false: no launch remains outside a graph; the idle is the host's ~138 µs between replays
    (``kernel_traits.graph_node_kernels`` 10,000 of 10,000). With ``eager``, one eager kernel per replay launched
    outside the graph (500 of 10,500 kernels are not graph nodes), the line stays."""
    b = TraceBuilder()
    b.process(PID)
    b.thread(PID, 1, "python3")
    for i in range(500):
        s = i * 150 * US
        ks = [(s + 12 * US + j * 3 * US, s + 14 * US + j * 3 * US, INDUCTOR[j % 3]) for j in range(20)]
        b.graph_launch(s, s + 10 * US, pid=PID, tid=1, kernels=ks)
        if eager:
            b.launch(s + 100 * US, s + 104 * US, s + 106 * US, s + 108 * US, pid=PID, tid=1, name="eager_fill")
    rep = _run(b, tmp_path)
    assert (rep["kernel_traits"]["kernel_count"], rep["kernel_traits"]["graph_node_kernels"]) == (
        10_500 if eager else 10_000, 10_000)
    lf = _finding(rep, "launch_overhead")
    assert any("the launches that remain are outside them" in a for a in lf["recommendation"]) is eager, \
        lf["recommendation"]
