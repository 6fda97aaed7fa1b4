"""Phases (prefill/decode wall + GPU time) and step detection on small hand-computed fixtures."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import built_scenario
from synth import TraceBuilder

from nsys_llm_explainer.analyses.nvtx.attribution import analyze_attribution
from nsys_llm_explainer.analyses.nvtx.tree import build_tree
from nsys_llm_explainer.analyses.steps.metrics import StepMetrics, analyze_steps
from nsys_llm_explainer.analyses.steps.phases import (
    PidWall,
    analyze_phases,
    phase_of_names,
)
from nsys_llm_explainer.config.phase_map import _preset_document, build_phase_map
from nsys_llm_explainer.errors import InputError
from nsys_llm_explainer.pipeline import load_model

US = 1_000
PID = 100
# five decode steps: (start, width)
STARTS = [1_000_000, 1_120_000, 1_260_000, 1_380_000, 1_700_000]
WIDTHS = [100_000, 120_000, 100_000, 300_000, 110_000]


def _decode_trace(path: str) -> str:
    """5 ``decode`` push/pop ranges on the launching thread, each with a ``model.layers.0`` range inside.

    Per step at s: kernel A [s+5us, s+25us), kernel B [s+30us, s+60us). Step 3 has a third kernel
    [s+40us, s+70us) (overlaps B) and a 150 us cudaStreamSynchronize; step 2 has a 10 us memcpy;
    step 4's kernel B runs [s+100us, s+130us), past the step end (s+110us).
    """
    b = TraceBuilder()
    b.process(PID)
    g = b.thread(PID, PID)
    other = b.thread(PID, PID + 1)
    b.gpu(0)
    b.nvtx_push_pop(900_000, 1_900_000, "generate", tid_g=g)
    for i, (s, w) in enumerate(zip(STARTS, WIDTHS)):
        e = s + w
        b.nvtx_push_pop(s, e, "decode", tid_g=g)
        b.nvtx_push_pop(s + 500, s + 10 * US, "model.layers.0", tid_g=g)
        b.launch(s + 1 * US, s + 3 * US, s + 5 * US, s + 25 * US, pid=PID, tid=PID, name="gemm_a")
        kb = (s + 100 * US, s + 130 * US) if i == 4 else (s + 30 * US, s + 60 * US)
        b.launch(s + 4 * US, s + 6 * US, *kb, pid=PID, tid=PID, name="gemm_b")
        if i == 3:
            b.launch(s + 7 * US, s + 9 * US, s + 40 * US, s + 70 * US, pid=PID, tid=PID, name="gemm_c")
            b.runtime(s + 100 * US, s + 250 * US, tid_g=g, name="cudaStreamSynchronize_v3020")
        if i == 2:
            b.memcpy(s + 70 * US, s + 80 * US, pid=PID, bytes=4096, device=0)
        # a non-launching thread with a frequent range: never a step candidate
        b.nvtx_push_pop(s, s + 1000, "poll", tid_g=other)
    b.write(path, overwrite=True)
    return path


@pytest.fixture(scope="module")
def decode_model(tmp_path_factory):
    return load_model(_decode_trace(str(tmp_path_factory.mktemp("steps") / "decode.sqlite")))


def _phases(model, phase_map=None):
    tree = build_tree(model.nvtx)
    att = analyze_attribution(model, tree)
    return analyze_phases(model, build_phase_map(phase_map), tree, att.kernel_nodes), tree, att


def test_nvtx_steps_exact(decode_model):
    pr, tree, att = _phases(decode_model)
    res = analyze_steps(decode_model, pr, tree=tree, kernel_node=att.kernel_node, top=2)
    assert res.available and res.method == "nvtx"
    assert res.step_ranges == ("decode",)
    assert res.confidence == "high"
    a = res.arrays
    assert a.start.tolist() == STARTS
    assert a.wall.tolist() == WIDTHS
    assert a.gpu_busy.tolist() == [50_000, 50_000, 50_000, 60_000, 30_000]
    assert a.gpu_idle.tolist() == [50_000, 70_000, 50_000, 240_000, 80_000]
    assert a.kernel_count.tolist() == [2, 2, 2, 3, 2]
    assert a.sync.tolist() == [0, 0, 0, 150_000, 0]
    assert a.memcpy.tolist() == [0, 0, 10_000, 0, 0]
    assert a.device.tolist() == [0] * 5 and a.pid.tolist() == [PID] * 5
    assert [a.phase_label(i) for i in range(5)] == ["decode"] * 5
    # wall distribution: sorted 100,100,110,120,300 us
    assert res.summary.p50_ns == 110_000
    assert res.summary.p90_ns == 228_000   # 120k + 0.6 * 180k
    assert res.summary.max_ns == 300_000
    assert res.by_phase[0].phase == "decode" and res.by_phase[0].count == 5
    assert res.by_pid[0].pid == PID and res.by_pid[0].gpu_idle_ns == 490_000
    slow = res.slowest[0]
    assert slow.start_ns == STARTS[3]
    assert slow.vs_median == StepMetrics(wall_ns=190_000, gpu_busy_ns=10_000, gpu_idle_ns=170_000, sync_ns=150_000,
                                         memcpy_ns=0, kernel_count=1)
    assert slow.what_differed == ("+190.00 µs wall vs the median decode step: +170.00 µs GPU idle, "
                                     "+150.00 µs sync, +10.00 µs GPU busy, +1 kernels")
    assert res.outliers[0].start_ns == STARTS[3]
    assert res.totals.kernel_count == 11
    assert len(res.arrays.rows()) == 5
    assert "arrays" not in res.to_dict()


def test_step_range_override(decode_model):
    res = analyze_steps(decode_model, step_range="MODEL.LAYERS.0")
    assert res.method == "nvtx" and res.confidence == "high"
    assert res.step_ranges == ("model.layers.0",)
    assert res.arrays.wall.tolist() == [9_500] * 5
    # every launch call (s+1us .. s+9us) lies inside the layer range [s+0.5us, s+10us)
    assert res.arrays.kernel_count.tolist() == [2, 2, 2, 3, 2]
    missing = analyze_steps(decode_model, step_range="no-such-range")
    assert missing.step_ranges == ("decode",) and "no-such-range" in missing.notes[0]


def test_decode_phase(decode_model):
    pr, _, _ = _phases(decode_model)
    assert pr.available and pr.source.startswith("preset:")
    rows = {r.phase: r for r in pr.phases}
    assert list(rows) == ["prefill", "decode", "other", "unmapped"]
    d = rows["decode"]
    assert d.range_count == 5
    assert d.wall_ns == sum(WIDTHS)
    assert d.wall_by_pid == (PidWall(PID, sum(WIDTHS)),)
    assert d.kernel_count == 11
    assert d.gpu_time_ns == 5 * 50_000 + 30_000
    assert d.gpu_busy_ns == 3 * 50_000 + 60_000 + 50_000
    assert rows["unmapped"].kernel_count == 0
    assert pr.kernel_phase.tolist() == [1] * 11


def test_phase_map_override(decode_model):
    pr, _, _ = _phases(decode_model, {"tok": ["decode"], "lay": ["layers"]})
    assert pr.source == "user" and pr.phase_names == ("tok", "lay")
    rows = {r.phase: r for r in pr.phases}
    # the innermost phase-named range enclosing each launch is model.layers.0
    assert rows["lay"].kernel_count == 11 and rows["tok"].kernel_count == 0
    assert rows["lay"].wall_ns == 5 * 9_500
    assert rows["tok"].wall_ns == sum(WIDTHS) - 5 * 9_500   # nested ranges of another phase subtracted
    with pytest.raises(InputError):
        build_phase_map({"x": [1, 2]})


def test_nested_phase_wall(tmp_path):
    b = TraceBuilder()
    g1 = b.thread(1, 1)
    g2 = b.thread(2, 2)
    b.nvtx_push_pop(0, 100_000, "vllm: prefill step", tid_g=g1)
    b.nvtx_push_pop(20_000, 50_000, "decode", tid_g=g1)
    b.nvtx_push_pop(30_000, 40_000, "decode inner", tid_g=g1)   # same phase nested: counted once
    b.nvtx_push_pop(10_000, 60_000, "prefill", tid_g=g2)
    b.launch(25_000, 26_000, 30_000, 31_000, pid=1, tid=1, name="k")
    m = load_model(b.write(str(tmp_path / "nest.sqlite")))
    pr, _, _ = _phases(m)
    rows = {r.phase: r for r in pr.phases}
    assert rows["prefill"].wall_ns == 70_000 + 50_000
    assert rows["prefill"].wall_by_pid == (PidWall(1, 70_000), PidWall(2, 50_000))
    assert rows["decode"].wall_ns == 30_000
    assert rows["decode"].kernel_count == 1 and rows["decode"].gpu_time_ns == 1_000


def test_preset_names():
    names = [
        "vllm: prefill step", "vllm: decode step", "execute_model", "model.LlamaDecoderLayer",
        "[Executor] _forward_step 3: 0 ctx reqs, 8 gen reqs",
        "[Executor] _forward_step 4: 2 ctx reqs, 8 gen reqs",
        "forward_extend", "forward_decode", "vLLM:mixed batch", "profile_run",
        "TensorRT:ExecutionContext::execute",
        "context phase", "generation phase",
    ]
    pm = build_phase_map(None)   # the presets, with their ignore list
    labels = pm.names
    got = [labels[i] if i >= 0 else None for i in phase_of_names(names, pm)[:-1].tolist()]
    assert got == ["prefill", "decode", None, None, "decode", "prefill", "prefill", "decode", "prefill",
                   "other", None, "prefill", "decode"]
    vllm = _preset_document()["frameworks"]["vllm"]
    assert "vllm: decode" in vllm["decode"] and "prefill" in vllm["prefill"]


def _marker_trace(path: str) -> str:
    """No NVTX. Device 0, per iteration at t: gemm [t, t+10us), softmax [t+12, t+14), argmax [t+15, t+17).
    Iteration 3 (t=60us) has top_k [t+14, t+15) right before argmax (a run: counts once).
    A 10 us cudaDeviceSynchronize at [50us, 60us)."""
    b = TraceBuilder()
    g = b.thread(300, 300)
    for t in (0, 30 * US, 60 * US, 90 * US):
        b.kernel(t, t + 10 * US, pid=300, name="gemm")
        b.kernel(t + 12 * US, t + 14 * US, pid=300, name="softmax")
        if t == 60 * US:
            b.kernel(t + 14 * US, t + 15 * US, pid=300, name="topk_kernel")
        b.kernel(t + 15 * US, t + 17 * US, pid=300, name="argmax_kernel")
    b.runtime(50 * US, 60 * US, tid_g=g, name="cudaDeviceSynchronize_v3020")
    return b.write(path, overwrite=True)


def test_marker_steps(tmp_path):
    m = load_model(_marker_trace(str(tmp_path / "marker.sqlite")))
    res = analyze_steps(m)
    assert res.method == "marker" and res.confidence == "low"
    a = res.arrays
    assert a.start.tolist() == [17 * US, 47 * US, 77 * US]
    assert a.end.tolist() == [47 * US, 77 * US, 107 * US]
    assert a.kernel_count.tolist() == [3, 4, 3]
    assert a.gpu_busy.tolist() == [14 * US, 15 * US, 14 * US]
    assert a.gpu_idle.tolist() == [16 * US, 15 * US, 16 * US]
    assert a.sync.tolist() == [0, 10 * US, 0]
    assert [a.phase_label(i) for i in range(3)] == ["unmapped"] * 3
    assert {d.name for d in res.marker_kernels} == {"argmax_kernel", "topk_kernel"}
    # a user regex that matches only the softmax kernels
    res2 = analyze_steps(m, step_marker="softmax")
    assert res2.marker_regex == "softmax" and res2.arrays.start.tolist() == [14 * US, 44 * US, 74 * US]
    with pytest.raises(InputError):
        analyze_steps(m, step_marker="(")


def test_marker_intervals_over_an_idle_pause_are_left_out_and_slow_steps_stay(tmp_path):
    """The idle-pause rule of the step periods applied to marker steps. 14 iterations on device 0, no NVTX: at t_i a
    ``gemm`` [t_i, t_i + g_i) then ``argmax_kernel`` [t_i + g_i, + 10 µs) (the marker); g_i = 300 µs, but 30 ms for
    iteration 4 (a long prefill); iteration i + 1 starts 690 µs after marker i ends, but 9,690 µs after marker 10 (a
    host hiccup) and 50,690 µs after marker 7 (an idle pause). The 13 marker-to-marker intervals: 10 of
    690 + 300 + 10 = 1,000 µs, interval 3 = 690 + 30,000 + 10 = 30,700 µs (GPU idle 690 µs), interval 10 = 10,000 µs
    (GPU idle 9,690 µs), interval 7 = 51,000 µs (GPU idle 50,690 µs). Median interval 1,000 µs: only interval 7
    idles more than 10 × 1,000 µs, so it is no step: 12 steps, 1 pause counted; its two kernels are in no step
    (24 of the 28 kernels are, the first gemm precedes the first marker). The prefill stays a step: the slowest."""
    b = TraceBuilder()
    b.thread(PID, PID)
    t, ends = 0, []
    for i in range(14):
        g = 30_000 * US if i == 4 else 300 * US
        b.kernel(t, t + g, pid=PID, name="gemm")
        b.kernel(t + g, t + g + 10 * US, pid=PID, name="argmax_kernel")
        ends.append(t + g + 10 * US)
        t = ends[-1] + {7: 50_690, 10: 9_690}.get(i, 690) * US
    res = analyze_steps(load_model(b.write(str(tmp_path / "pause.sqlite"))))
    a = res.arrays
    assert res.method == "marker" and res.step_count == 12 and res.period_pauses == 1
    assert a.start.tolist() == ends[:7] + ends[8:13] and a.end.tolist() == ends[1:8] + ends[9:14]
    assert sorted(a.wall.tolist()) == [1_000 * US] * 10 + [10_000 * US, 30_700 * US]
    assert a.kernel_count.tolist() == [2] * 12 and res.totals.kernel_count == 24
    assert a.gpu_idle.tolist() == [690 * US] * 9 + [9_690 * US] + [690 * US] * 2
    assert res.slowest[0].wall_ns == 30_700 * US and res.slowest[0].start_ns == ends[3]
    assert res.notes == ("1 interval between marker kernels left out: GPU idle over 10 × the median interval (an "
                         "idle pause or another phase of the job, not a step)",)


def test_no_steps(tmp_path):
    b = TraceBuilder()
    b.kernel(0, 10, pid=1, name="gemm")
    m = load_model(b.write(str(tmp_path / "none.sqlite")))
    res = analyze_steps(m)
    assert not res.available and res.method == "none" and res.reason
    assert np.asarray(res.to_dict()["slowest"]).size == 0


@pytest.mark.parametrize("scenario, n_steps, phases", [
    ("demo", 82, {"prefill": 2, "decode": 80}),         # 2 ranks × (1 prefill + 40 decode)
    ("graph_level", 41, {"prefill": 1, "decode": 40}),  # decode steps replay a CUDA graph (graph-level rows)
])
def test_scenarios(tmp_path, scenario, n_steps, phases):
    path = str(tmp_path / f"{scenario}.sqlite")
    facts = built_scenario(scenario, path)
    m = load_model(path)
    pr, tree, att = _phases(m)
    res = analyze_steps(m, pr, tree=tree, kernel_node=att.kernel_node)
    assert res.method == "nvtx" and res.confidence == "high" and res.step_ranges == ("execute_model",)
    assert res.step_count == n_steps
    assert {r.phase: r.count for r in res.by_phase} == phases
    assert res.totals.kernel_count == facts["kernel_count"]
    assert (res.arrays.gpu_busy > 0).all()
    assert (res.arrays.gpu_idle >= 0).all()


def test_step_ranges_of_two_domains_use_the_nvtx_tree_lookup(tmp_path):
    """--step-range matching ranges of two NVTX domains that overlap on one thread: a kernel belongs to the
    latest-starting step range that encloses its launch call (nvtx_tree's per-domain enclosing lookup).
    Step A (default domain) [0, 100 us) encloses the launch at 50 us; step B ("D1" domain) [30, 40 us)
    starts later but ends before the launch, so the kernel is A's: kernel counts [1, 0]."""
    b = TraceBuilder()
    b.process(1)
    tg = b.thread(1, 1)
    b.gpu(0)
    b.nvtx_domain(1, "D1", tid_g=tg)
    b.nvtx_push_pop(0, 100 * US, "mystep A", tid_g=tg)
    b.nvtx_push_pop(30 * US, 40 * US, "mystep B", tid_g=tg, domain_id=1)
    b.launch(50 * US, 51 * US, 60 * US, 70 * US, pid=1, tid=1, name="gemm")
    m = load_model(b.write(str(tmp_path / "dom.sqlite")))
    res = analyze_steps(m, step_range="mystep")
    assert res.method == "nvtx" and res.step_ranges == ("D1:mystep B", "mystep A")
    a = res.arrays
    assert a.start.tolist() == [0, 30 * US] and a.end.tolist() == [100 * US, 40 * US]
    assert a.kernel_count.tolist() == [1, 0]
    assert a.gpu_busy.tolist() == [10 * US, 0]
    assert a.device.tolist() == [0, 0]          # B has no work: the process's most used device


def test_phase_map_object_and_no_preset_io_during_analysis(decode_model, monkeypatch):
    """Once config has parsed the phase map, the analyses (phases, steps) read no preset file and give what they
    give while the presets are readable."""
    from nsys_llm_explainer.config import phase_map as cfg

    pm = cfg.build_phase_map({"tok": ["decode"], "lay": ["layers"]})
    tree = build_tree(decode_model.nvtx)
    att = analyze_attribution(decode_model, tree)
    ref = analyze_phases(decode_model, cfg.build_phase_map({"tok": ["decode"], "lay": ["layers"]}), tree,
                         att.kernel_nodes)

    def no_io():
        raise AssertionError("analysis read the phase presets")

    monkeypatch.setattr(cfg, "_preset_document", no_io)
    got = analyze_phases(decode_model, pm, tree, att.kernel_nodes)
    assert got.to_dict() == ref.to_dict() and got.source == "user"
    assert got.kernel_phase.tolist() == [1] * 11          # every launch is inside model.layers.0 → "lay"
    steps = analyze_steps(decode_model, got, tree=tree, kernel_node=att.kernel_node)
    assert steps.step_ranges == ("decode",) and steps.arrays.kernel_count.tolist() == [2, 2, 2, 3, 2]
    assert [steps.arrays.phase_label(i) for i in range(5)] == ["tok"] * 5


def test_unreadable_phase_presets_are_an_input_error_not_another_vocabulary(tmp_path, monkeypatch):
    """A broken install (phases.json missing or without its frameworks) is refused in one line, as an unreadable
    categories preset is; no second, built-in phase vocabulary answers instead."""
    from nsys_llm_explainer.config import phase_map as cfg

    for text in (None, '{"ignore": []}', "{not json"):
        path = tmp_path / "phases.json"
        if text is None:
            path.unlink(missing_ok=True)
        else:
            path.write_text(text)
        monkeypatch.setattr(cfg, "PRESET_FILE", path)
        cfg._preset_document.cache_clear()
        with pytest.raises(InputError, match="phase presets"):
            build_phase_map(None)
    cfg._preset_document.cache_clear()


def _range_steps_trace(path: str, marker_kernels: int) -> str:
    """Thread 1 of process 100 opens an NVTX range ``block`` (not a step-like name) at each t = 0, 100, 200, 300 µs
    for 90 µs and launches two kernels inside it (at [t+1, t+3) µs: ``gemm`` [t+10, t+30) µs; at [t+4, t+6) µs:
    ``elementwise`` [t+40, t+50) µs); after it, in the first ``marker_kernels`` ranges, an ``argmax_kernel``
    [t+92, t+94) µs launched at [t+90, t+91) µs (outside the range)."""
    b = TraceBuilder()
    b.process(PID)
    g = b.thread(PID, 1)
    for i in range(4):
        t = i * 100 * US
        b.nvtx_push_pop(t, t + 90 * US, "block", tid_g=g)
        b.launch(t + 1 * US, t + 3 * US, t + 10 * US, t + 30 * US, pid=PID, tid=1, name="gemm")
        b.launch(t + 4 * US, t + 6 * US, t + 40 * US, t + 50 * US, pid=PID, tid=1, name="elementwise")
        if i < marker_kernels:
            b.launch(t + 90 * US, t + 91 * US, t + 92 * US, t + 94 * US, pid=PID, tid=1, name="argmax_kernel")
    return b.write(path, overwrite=True)


def test_too_few_marker_steps_keep_the_low_confidence_nvtx_steps(tmp_path):
    """Four ``block`` ranges each enclosing two launches: the NVTX choice, of low confidence (the name does not look
    like a step). Marker kernels replace a low-confidence choice only when every device has ≥ 3 marker steps: with
    2 ``argmax_kernel`` (1 step between them) the 4 ``block`` steps stay; with 4 (3 steps) the markers win, and a
    note says so."""
    from nsys_llm_explainer import analyze

    few = analyze(_range_steps_trace(str(tmp_path / "few.sqlite"), 2)).steps
    assert (few.method, few.confidence, few.step_ranges, few.step_count) == ("nvtx", "low", ("block",), 4)
    assert few.notes == ()
    many = analyze(_range_steps_trace(str(tmp_path / "many.sqlite"), 4)).steps
    assert (many.method, many.step_count) == ("marker", 3)
    assert many.notes == ("marker kernels preferred over the NVTX range `block` whose name does not look like a "
                          "model step",)


def test_a_step_range_that_cannot_be_used_is_said_to_be_ignored(tmp_path):
    """--step-range names NVTX ranges to use as steps: ignored, with a note saying why, when the trace has no NVTX
    push/pop range (the marker kernels give the steps) and when a --step-marker is also given (the marker wins)."""
    from nsys_llm_explainer import analyze

    no_nvtx = analyze(_marker_trace(str(tmp_path / "marker.sqlite")), step_range="decode").steps
    assert no_nvtx.method == "marker"
    assert no_nvtx.notes == ("--step-range ignored: the trace has no NVTX push/pop ranges",)
    both = analyze(_range_steps_trace(str(tmp_path / "r.sqlite"), 4), step_range="block",
                   step_marker="argmax").steps
    assert (both.method, both.marker_regex, both.step_count) == ("marker", "argmax", 3)
    assert both.notes == ("--step-range ignored: a --step-marker was given",)


def test_open_step_range_is_not_a_step(tmp_path):
    """A capture that stops mid-step: 4 ``execute_model`` ranges [10 ms·i, 10 ms·i + 8 ms), i = 0..3, with two
    2 ms kernels launched in each; a fifth range opens at 40 ms and has no end (NULL) when the capture stops, its
    kernels run to 43.9 ms. The model ends the open range at the latest NVTX timestamp (40 ms, its own start), so
    it would be a 0 ns step with no kernels (min 0, avg 6.4 ms). Its length is unknown: 4 steps of 8 ms each,
    2 kernels each, and a note saying one open range was left out."""
    b = TraceBuilder()
    g = b.thread(PID, PID)
    for i in range(5):
        s = i * 10_000_000
        b.nvtx_push_pop(s, None if i == 4 else s + 8_000_000, "execute_model", tid_g=g)
        for j in range(2):
            k0 = s + j * 2_000_000
            b.launch(k0, k0 + 5 * US, k0 + 10 * US, k0 + 1_900 * US, pid=PID, tid=PID, name="gemm")
    model = load_model(b.write(str(tmp_path / "open.sqlite")))
    pr, tree, att = _phases(model)
    res = analyze_steps(model, pr, tree=tree, kernel_node=att.kernel_node)
    assert res.method == "nvtx" and res.step_count == 4
    assert res.arrays.wall.tolist() == [8_000_000] * 4
    assert res.arrays.kernel_count.tolist() == [2] * 4
    assert res.summary.min_ns == 8_000_000 and res.summary.avg_ns == 8_000_000
    assert any("1 step range(s) still open" in n for n in res.notes)


def test_step_periods_of_ranges_that_do_not_tile_the_loop(tmp_path) -> None:
    """A serving loop: 12 steps of 1 ms, the ``execute_model`` range only the first 20 µs of each (it launches one
    500 µs kernel; the host schedules outside the range), then a 50 ms pause (waiting for requests) and 8 more steps.
    Step time (the range's wall) p50 20 µs says nothing of the loop; the step period (start to the next start) is
    1 ms for 11 + 7 = 18 periods, and the one period across the pause (50.02 ms of host idle after a 20 µs range,
    > 10 × the 1 ms median) is left out. The report's steps section says both (it read only "Step time p50
    20.00 µs")."""
    from nsys_llm_explainer.options import Options
    from nsys_llm_explainer.pipeline import analyze_path
    from nsys_llm_explainer.render import render_all

    b = TraceBuilder()
    g = b.thread(7, 7)
    starts = [i * 1_000 * US for i in range(12)] + [62_000 * US + i * 1_000 * US for i in range(8)]
    for t in starts:
        b.nvtx_push_pop(t, t + 20 * US, "execute_model", tid_g=g)
        b.launch(t + 5 * US, t + 10 * US, t + 15 * US, t + 515 * US, pid=7, tid=7, name="gemm")
    p = b.write(str(tmp_path / "loop.sqlite"))
    rep = analyze_path(p, Options())
    st = rep.steps
    assert (st.method, st.step_count, st.summary.p50_ns) == ("nvtx", 20, 20 * US)
    assert (st.period.count, st.period.p50_ns, st.period.max_ns, st.period_pauses) == (18, 1_000 * US, 1_000 * US, 1)
    assert st.period_cover_pct == 2.0      # every kept step: a 20 µs range in its 1 ms period
    render_all(rep, tmp_path / "out")
    md = (tmp_path / "out" / "report.md").read_text(encoding="utf-8")
    assert ("Step time p50 20.00 µs, p90 20.00 µs, p99 20.00 µs, max 20.00 µs; step period (start to the next "
            "step's start, same process) p50 1.000 ms, p90 1.000 ms over 18 periods; a step's range covers 2 % of its "
            "period (p50 of range ÷ period per step); 1 period over an idle pause left out.") in md


def test_what_differed_picks_the_unit_of_long_durations():
    """Few, long steps: a 2 s slower prefill step read "+2,000,000.00 µs"; the durations now take the
    unit that fits (``fmt_dur``: µs below 1 ms, ms below 10 s, else s)."""
    from nsys_llm_explainer.analyses.steps.metrics import _what_differed

    delta = {"wall_ns": 2_000_000_000, "gpu_idle_ns": 1_999_500_000, "sync_ns": 0, "gpu_busy_ns": 500,
             "memcpy_ns": 0, "kernel_count": 0}
    assert _what_differed(delta, "prefill") == ("+2,000.000 ms wall vs the median prefill step: +1,999.500 ms GPU "
                                                "idle, +0.50 µs GPU busy")
    delta = {"wall_ns": -12_500_000_000, "gpu_idle_ns": 0, "sync_ns": 12_000_000_000, "gpu_busy_ns": 0,
             "memcpy_ns": 0, "kernel_count": 3}
    assert _what_differed(delta, "decode") == "−12.500 s wall vs the median decode step: +12.000 s sync, +3 kernels"
