"""The window, pause, compare and harness words under every exporter generation. `window_repeats` and "the auto-detected
window", the one-pause line's workload examples, compare's "step periods in span" column, the host-paced `launch` row,
the benchmark-harness headline line and the launch-bound title "the GPU waits ~X µs per kernel for its launch": each
test that pins them (its numbers hand-computed in its own docstring) is run again with every `TraceBuilder()` in it
writing the 2021.5, 2022.4, 2023.4 and 2026.2 exporters' tables and columns (the tests' own are 2024.2's;
/work/shared/SCHEMA.md: the generations differ in tables and columns these rules do not read — ENUM tables, the metadata
table's name, `greenContextId`, graph tables —, so each claim must come out the same). Compare runs also mix
generations: an old export against a new one (and the reverse) must give the same verdict, harness line, host-paced row
and window words as two exports of one generation."""

from __future__ import annotations

import importlib
import inspect
import re
import sqlite3
from pathlib import Path
from typing import Callable, List, Tuple

import pytest
import test_compare_claims_graphs_and_benchmarks as graphs_benchmarks
from synth import TraceBuilder
from synth.scenarios.names import K
from synth.store import RowStore
from test_names_inert_pause_and_harness_sentences import HIDDEN, HOSTILE, csv_cells_inert

import nsys_llm_explainer as nle
from nsys_llm_explainer.cli import main
from nsys_llm_explainer.comparison.measure import HOST_PACED

US = 1_000
MS = 1_000_000
OTHER_GENERATIONS = ("2021.5", "2022.4", "2023.4", "2026.2")
#: (module, test) of the hand-computed tests of these words whose only argument is ``tmp_path``
RULE_TESTS: List[Tuple[str, str]] = [
    ("test_claims_long_prefill_steps", "test_sync_delimited_prefill_steps_are_repeated_steps"),
    ("test_claims_long_prefill_steps", "test_single_pass_window_is_not_called_the_steady_window"),
    ("test_compare_claims_long_steps", "test_traces_table_does_not_call_step_periods_steps_in_window"),
    ("test_compare_claims_graphs_and_benchmarks", "test_eager_to_cuda_graph_main_reason_is_the_launch_overhead"),
    ("test_compare_claims_graphs_and_benchmarks", "test_the_launch_bound_title_says_the_gpu_waits_per_kernel"),
    ("test_compare_claims_graphs_and_benchmarks", "test_two_do_bench_captures_are_compared_on_the_timed_kernels"),
    ("test_compare_claims_graphs_and_benchmarks", "test_a_capture_not_event_timed_keeps_the_heaviest_common_kernel"),
    ("test_claims_unsampled_launcher_gaps", "test_one_pause_holding_most_of_the_wait_is_called_a_pause"),
    ("test_claims_unsampled_launcher_gaps", "test_epoch_boundary_of_a_pytorch_training_loop"),
    ("test_claims_generations_and_empty_range_names", "test_fusion_title_of_a_harness_names_the_timed_kernel_time"),
]


@pytest.mark.slow
@pytest.mark.parametrize("flavor", OTHER_GENERATIONS)
@pytest.mark.parametrize("module,name", RULE_TESTS, ids=[n for _, n in RULE_TESTS])
def test_each_compare_sentence_is_the_same_on_every_generation(flavor: str, module: str, name: str,
                                                           tmp_path: Path, monkeypatch) -> None:
    """The test's own hand-computed assertions, its traces written as ``flavor``'s exporter writes them."""
    monkeypatch.setattr(RowStore.__init__, "__defaults__", (flavor,))
    assert TraceBuilder().flavor == flavor
    test: Callable[..., None] = getattr(importlib.import_module(module), name)
    assert list(inspect.signature(test).parameters) == ["tmp_path"]
    test(tmp_path)


def _as(flavor: str, make: Callable[[], str], monkeypatch) -> str:
    """``make()`` with every `TraceBuilder()` in it writing ``flavor``'s export."""
    with monkeypatch.context() as m:
        m.setattr(RowStore.__init__, "__defaults__", (flavor,))
        return make()


PAIRS = [("2021.5", "2026.2"), ("2026.2", "2021.5"), ("2022.4", "2024.2")]


@pytest.mark.slow
@pytest.mark.parametrize("old,new", PAIRS)
def test_do_bench_compare_across_generations(old: str, new: str, tmp_path: Path, monkeypatch) -> None:
    """test_compare_claims_graphs_and_benchmarks's two `do_bench` captures (GEMM 30 → 20 µs, 250 fills of 80 µs outside
    every event pair), A written by ``old``'s exporter, B by ``new``'s: the same answer as one generation — 111 → 101 µs
    per iteration, anchor the GEMM, fill left out (0.080 ms per iteration in each), timed kernels 0.030 → 0.020 ms
    (−33.3 %); compare.md carries the harness line; exit 0."""
    a = _as(old, lambda: graphs_benchmarks._do_bench(tmp_path / "a.sqlite", 30), monkeypatch)
    b = _as(new, lambda: graphs_benchmarks._do_bench(tmp_path / "b.sqlite", 20), monkeypatch)
    res = nle.compare([a, b], labels=["A", "B"])
    c = res.comparisons[0]
    assert (c.metric_base.p50_ns, c.metric_new.p50_ns, c.verdict) == (111 * US, 101 * US, "faster")
    assert (res.metric.anchor_kernel, res.metric.harness_left_out) == (K.GEMM_QKV, (graphs_benchmarks.FILL,))
    assert [(t.harness_kernel_ns, t.timed_kernel_ns) for t in res.traces] == [(20 * MS, 7_500 * US), (20 * MS, 5 * MS)]
    assert main(["compare", a, b, "-o", str(tmp_path / "cmp")]) == 0
    md = (tmp_path / "cmp" / "compare.md").read_text(encoding="utf-8")
    assert "Benchmark harness: every trace is event-timed, so the anchor is a timed kernel;" in md
    assert "the timed kernels take 0.030 ms → 0.020 ms per iteration (−33.3 %)." in md


@pytest.mark.slow
@pytest.mark.parametrize("old,new", PAIRS)
def test_eager_to_graph_compare_across_generations(old: str, new: str, tmp_path: Path, monkeypatch) -> None:
    """test_compare_claims_graphs_and_benchmarks's eager → CUDA-graph pair (313 → 245 µs per step), EAGER written by
    ``old``, GRAPH by ``new``: main reason `launch` −0.068 ms per step; host-paced queued 40 → 5 µs per step; exit 0 and
    the `host-paced queued` row in tables/part_changes.csv (compare.md shows causes, not details)."""
    e = _as(old, lambda: graphs_benchmarks._eager_or_graph(tmp_path / "e.sqlite", False), monkeypatch)
    g = _as(new, lambda: graphs_benchmarks._eager_or_graph(tmp_path / "g.sqlite", True), monkeypatch)
    c = nle.compare([e, g], labels=["EAGER", "GRAPH"]).comparisons[0]
    assert (c.metric_base.p50_ns, c.metric_new.p50_ns, c.verdict) == (313 * US, 245 * US, "faster")
    assert c.main_reason is not None and c.main_reason.name == "launch"
    assert c.main_reason.delta_per_unit_ns == pytest.approx(-68 * US, abs=US)
    rows = {(d.name, d.detail): (d.base_per_unit_ns, d.new_per_unit_ns) for d in c.idle_detail_changes}
    assert rows[("launch", HOST_PACED)] == (pytest.approx(40 * US, abs=US), pytest.approx(5 * US, abs=US))
    assert main(["compare", e, g, "-o", str(tmp_path / "cmp")]) == 0
    assert HOST_PACED in (tmp_path / "cmp" / "tables" / "part_changes.csv").read_text(encoding="utf-8")


# ---------------------------------------------------------------- (b) hostile names in compare's new lines


def _inert(text: str, md: bool) -> None:
    """No hidden control / bidi character, no raw HTML, no Markdown link (in the .md), no 100 KB name."""
    text = re.sub(r"<script>.*?</script>", "", text, flags=re.S)   # our own scripts (html)
    bad = HIDDEN.search(text)
    assert bad is None, repr(text[max(0, bad.start() - 60): bad.end() + 20])
    for raw in ("<script>alert", "<img src") + (("](http://evil",) if md else ()):
        assert raw not in text, (raw, text[max(0, text.find(raw) - 300): text.find(raw) + 60])
    assert "L" * 5000 not in text


@pytest.mark.slow
@pytest.mark.parametrize("hostile", sorted(HOSTILE))
def test_harness_line_and_compare_tables_keep_hostile_kernel_names_inert(hostile: str, tmp_path: Path,
                                                                        capsys) -> None:
    """The `do_bench` pair (GEMM 30 → 20 µs) with the fill (the harness line's left-out kernel) and the GEMM (the
    anchor) renamed hostile in both exports: the same answer (9.0 % faster, fill left out, timed kernels
    0.030 → 0.020 ms); compare.md / compare.html / the terminal summary stay inert; no tables/*.csv
    cell starts a formula (the CSVs keep names as data, docs/SECURITY.md)."""
    paths = []
    for n, us in (("a", 30), ("b", 20)):
        p = graphs_benchmarks._do_bench(tmp_path / f"{n}.sqlite", us)
        con = sqlite3.connect(p)
        for old in (graphs_benchmarks.FILL, K.GEMM_QKV):
            con.execute("UPDATE StringIds SET value = ? WHERE value = ?", (HOSTILE[hostile].replace("NAME", old), old))
        con.commit()
        con.close()
        paths.append(p)
    assert main(["compare", *paths, "-o", str(tmp_path / "cmp")]) == 0
    out, err = capsys.readouterr()
    assert not HIDDEN.search(out + err), repr(out + err)
    assert "L" * 5000 not in out + err
    d = tmp_path / "cmp"
    md = (d / "compare.md").read_text(encoding="utf-8")
    assert "`b` is 9.0 % faster than `a`" in md
    assert "the timed kernels take 0.030 ms → 0.020 ms per iteration (−33.3 %)." in md
    _inert(md, True)
    _inert((d / "compare.html").read_text(encoding="utf-8"), False)
    csv_cells_inert(d / "tables")

# ---------------------------------------------------------------- a whole window without repeated steps


def _single_pass() -> TraceBuilder:
    """test_claims_long_prefill_steps's single pass without its 300 ms of tokenization: at T0 one prefill chunk (4 × 50
    ms kernels, launched by 10 µs calls from T0, the first starting T0 + 15 µs, back to back) and its
    `cudaStreamSynchronize`, 1 ms later one decode step (20 × 1 ms), no NVTX. The window rule finds no warm-up or tail
    to trim (method `full`); nothing shows repeated steps (no NVTX, 2 sync points < 5): `window_repeats` false."""
    import test_claims_long_prefill_steps as long_prefill
    b = TraceBuilder()
    b.process(long_prefill.PID)
    g = b.thread(long_prefill.PID, 1, "main")
    b.gpu(0)
    t = long_prefill._step(b, g, long_prefill.T0, [("flash_attn_prefill", 50 * MS), ("gemm_mlp", 50 * MS),
                                                   ("gemm_qkv", 50 * MS), ("gemm_out", 50 * MS)], False, "") + MS
    long_prefill._step(b, g, t, [("decode_gemv", MS)] * 20, False, "")
    return b


def test_a_whole_window_without_repeated_steps_is_not_called_steady(tmp_path: Path) -> None:
    """The window is the whole trace, 221.045 ms (the report's own window line); busy 4 × 50 + 20 × 1 = 220 ms:
    220 / 221.045 = 99.53 % → 99.5 %. The verdict read "GPU-bound: the GPU is busy 99.5 % of the steady window"
    beside a window line that says only "whole trace" and no repeated step in it; the window is the whole capture
    and nothing showed it steady: "the whole capture" (as a window kept whole for too little GPU activity)."""
    from claims_support import finding_of, report_of
    rep = report_of(_single_pass(), tmp_path)
    assert (rep["window"]["method"], rep["window_repeats"]) == ("full", False)
    f = finding_of(rep, "gpu_bound")
    assert f["title"] == "GPU-bound: the GPU is busy 99.5 % of the whole capture; kernel time sets the pace"
    assert "steady window" not in rep["headline"]["verdict"] + " ".join(f["evidence"])
