"""Words that said less or other than what they hold: compare's anchor iteration, the window's name on the timeline, the
step-sync table of a series of idle pauses, the GPU generation's parenthesis. Each trace is built by hand; the truth is
worked out in the docstring."""

from __future__ import annotations

from pathlib import Path

from synth import TraceBuilder
from test_claims_embedding_servers import _embed_server
from test_claims_generations_native_engines import H100, decode, graph_tokens

import nsys_llm_explainer as nle
from nsys_llm_explainer.analyses.trace.facts import gpu_fact
from nsys_llm_explainer.model.info import GpuInfo
from nsys_llm_explainer.options import options_from_kwargs
from nsys_llm_explainer.pipeline import analyze_path
from nsys_llm_explainer.render import render_markdown
from nsys_llm_explainer.render.sections.findings import facts_pairs

US = 1_000
MS = 1_000_000


def test_an_anchor_iteration_says_what_it_holds(tmp_path: Path) -> None:
    """(traces: :func:`decode` of test_claims_generations_native_engines.py (eager, T4) as BASE, :func:`graph_tokens`
    (10 CUDA-graph tokens, H100) as NEW) The anchor `quantize_q8_1` runs twice per eager step (GGML[k % 6], k = 0…9: k =
    1, 7) and 34 times per graph token (j % 6 = 1, j = 0…199); the eager loop's kernel sequence repeats every 2 anchors,
    so an iteration is 2 anchor instances in both: 19 complete iterations in BASE (40 anchors), (340 − 1) // 2 = 169 in
    NEW — 169 'iterations' of 12 kernels, not tokens. The line now says what an iteration is: 200 kernels / 20
    iterations = 10.0 kernels per iteration in BASE, 2,000 / 170 = 11.8 in NEW."""
    a, b = tmp_path / "a.sqlite", tmp_path / "b.sqlite"
    decode("2024.2").write(str(a))
    graph_tokens("2024.2", H100).write(str(b))
    res = nle.compare([str(a), str(b)], labels=["eager", "graph"])
    assert res.metric.anchor_repeat == 2
    assert res.comparisons[0].headline[1] == (
        "Spread p90/p50 1.00 over 19 iterations vs 1.00 over 169 (an iteration: 2 instances of the anchor kernel; "
        "10.0 kernels per iteration in `eager`, 11.8 in `graph`).")


def _one_pass(path: Path) -> None:
    """One kernel [10, 20) µs, then one pass of 200 distinct kernels: launch i [t, t + 5) µs, kernel [t + 10, t + 100)
    µs, t = 50 ms + 100 µs · i. The auto window trims the 50 ms warm-up: [50.010, 70.000) ms, 19,990,000 ns, and holds
    no repeated step (distinct names, no sync): "the auto-detected window". Rows: 201 kernels + 201 launches = 402;
    inside: 200 kernels + launches 1…199 = 399; outside: 3."""
    b = TraceBuilder("2024.2")
    b.process(100, "python3")
    b.thread(100, 1, "python3")
    b.gpu(0)
    b.launch(0, 5 * US, 10 * US, 20 * US, pid=100, tid=1, name="warmup_kernel")
    for i in range(200):
        t = 50 * MS + i * 100 * US
        b.launch(t, t + 5 * US, t + 10 * US, t + 100 * US, pid=100, tid=1, name=f"gemm_{i}")
    b.write(str(path))


def test_the_timeline_span_names_the_window_as_the_report_does(tmp_path: Path) -> None:
    """(trace: :func:`_one_pass`) --timeline-events 400 keeps the window's 399 rows; 300 keeps its start: rows
    starting before t = 65.010 ms are kernels 0…149 and launches 1…150, 300, so 15,000,000 ns of 19,990,000. The
    span's words said "steady window" where every other sentence says "the auto-detected window". The window rule
    trimmed 50.010 ms of warm-up and no tail (tail_ns 0): the 3 rows outside read "(warm-up and tail)", now "(what
    the window rule trimmed)"."""
    p = tmp_path / "t.sqlite"
    p = tmp_path / "t.sqlite"
    _one_pass(p)
    r = analyze_path(str(p), options_from_kwargs(timeline_events=400))
    assert (r.window.method, r.window_repeats) == ("auto", False)
    assert r.window.tail_ns == 0
    assert r.timeline_file.span.left_out == ("the 3 rows outside the auto-detected window (what the window rule "
                                             "trimmed) are left out (the capture has 402 rows, over "
                                             "--timeline-events 400)")
    r = analyze_path(str(p), options_from_kwargs(timeline_events=300))
    assert r.timeline_file.span.left_out == (
        "only the first 15,000,000 ns of the 19,990,000 ns auto-detected window are kept (300 of its 399 rows, "
        "--timeline-events 300); the 3 rows outside the auto-detected window")
    md = render_markdown(r)
    assert "Timeline file `timeline.pftrace` (open it in ui.perfetto.dev): the start of the auto-detected window, " \
           "300 rows; left out: only the first 15,000,000 ns" in md, md
    assert "steady" not in md.split("Timeline file")[1].split("\n")[0]


def test_a_step_sync_series_of_idle_pauses_shows_no_per_step_value(tmp_path: Path) -> None:
    """(trace: test_claims_embedding_servers's :func:`_embed_server`, 10 requests 20 ms apart, each followed by a
    `pthread_cond_wait` that fills > 50 % of the host time after the sync) Every one of the 9 steps is an idle pause
    and left out: no step is measured, so the period, GPU busy, wait and host time per step have no value — the
    table showed "0.000" in each, as if measured; now "–" (null in report.json)."""
    p = tmp_path / "t.sqlite"
    _embed_server().write(str(p))
    r = analyze_path(str(p), options_from_kwargs())
    (s,) = r.step_sync.series
    assert (s.holds, s.steps) == (False, 9)
    assert (s.period_p50_ns, s.period_p90_ns, s.gpu_busy_p50_ns, s.wait_p50_ns, s.exposed_p50_ns,
            s.exposed_p90_ns) == (None,) * 6
    assert "| 0 | `python3` | no | `cudaMemcpy` | – | – | – | – | 0.0 | 0.000 | 0.0 | every step starts after an " \
           "idle pause" in render_markdown(r)



def test_a_gpu_without_tensor_cores_has_one_parenthesis(tmp_path: Path) -> None:
    """A GTX 1650 (compute capability 7.5 read from the name: the export records none) is Turing without tensor cores:
    the facts line read "Turing (no tensor cores) (compute capability 7.5, from the name)", two parentheses in a
    row; now "Turing, no tensor cores (compute capability 7.5, from the name)". (trace: :func:`decode` on it)"""
    g = gpu_fact(GpuInfo(id=0, name="NVIDIA GeForce GTX 1650"))
    assert (g.architecture, g.compute_capability, g.source) == ("Turing, no tensor cores", "7.5", "name")
    p = tmp_path / "t.sqlite"
    decode("2024.2", gpu=dict(name="NVIDIA GeForce GTX 1650", computeMajor=None, computeMinor=None)).write(str(p))
    gpus = dict(facts_pairs(analyze_path(str(p), options_from_kwargs()).facts))["GPUs"]
    assert gpus == "NVIDIA GeForce GTX 1650: Turing, no tensor cores (compute capability 7.5, from the name), " \
                   "tensor cores none", gpus
