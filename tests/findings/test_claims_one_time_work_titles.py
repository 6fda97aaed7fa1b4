"""Titles and headline sizes that disagreed with their own evidence (docs/FINDINGS.md, "Start-up and shutdown" —
*Sides*, *Mixed findings named after start-up* —, "Autotuning allocations" and "One quantity per sentence"): real traces
03, 06, 07, 08, 12 and hand-built traces of each class (a kernel of 9 µs every 10 µs launched 8 µs ahead by a 2 µs call,
one thread, window = the whole capture; numbers in the docstrings)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import real_report, real_trace, require_traces
from test_claims_one_time_work import REG, US, _builder, _loop, _one, _run  # the start-up traces' builders

from nsys_llm_explainer.findings.base import Quoted
from nsys_llm_explainer.render import render_all
from nsys_llm_explainer.report import Report


def _real(name: str, fid: str):
    require_traces()
    rep = real_report(real_trace(name))
    return rep, next(f for f in rep.findings if f.id == fid)


# ---------------------------------------------------------------- 1. a loop finding named after start-up work

def test_mixed_finding_is_titled_after_its_largest_detail_in_the_loop(tmp_path: Path) -> None:
    """NVTX range `init` [0, 600 µs), then 10 steps of 140 µs from 610 µs, each a 30 µs range `send` then 10 kernels
    from 40 µs after the step's start (window [0, 2,009 µs); idle-timeline bins (500, analyses/idle/bins.py) of
    4.018 µs). `nvtx` idle: `init` 600 µs, all in
    the leading gap [0, 650 µs); `send` 300 µs, of which the first 30 µs lie in that gap, 270 µs between kernels
    (13.4 % of the window). The kind: 900 µs (44.8 %), 630 µs once (70.0 %), 270 µs = 13.4 % in the loop (≥ 5 %:
    a loop finding). `init` holds 29.9 % ≥ half the kind, so it named the title although all of it is start-up:
    now the title names `send`'s loop part, 13.4 %; the claimed part is 900 − 4.018 (first bin) = 895.982 µs =
    44.6 %."""
    b, g = _builder()
    b.nvtx_push_pop(0, 600 * US, "init", tid_g=g)
    t = 610 * US
    for _ in range(10):
        b.nvtx_push_pop(t, t + 30 * US, "send", tid_g=g)
        t = _loop(b, t + 40 * US, 10)
    f = _one(_run(b, tmp_path, "mixed.sqlite", 2_009), "nvtx")
    assert f.title == ("The GPU idles while the host is in NVTX ranges (44.6 % of the window), 895.98 µs; largest "
                       "in the loop `send` (13.4 %)"), f.title
    assert f.cause == ("nvtx", "init") and f.category == "host_range"     # still the loop finding, its largest row
    assert "10 idle gaps on device 0 hold `send`" in " ".join(f.evidence)
    assert ("630.00 µs of it on device 0 (70.0 %) lies before the GPU's first kernel (start-up / shutdown: once per "
            "run, not in every step); the other 270.00 µs (13.4 % of the window) lies between kernels, in the loop: "
            "this finding is about both.") in f.evidence
    assert f.time_at_stake_ns == 895_982 and f.quoted is None   # the title quotes the stake itself


def test_headline_top_cause_names_the_verdicts_loop_detail(tmp_path: Path) -> None:
    """The trace of the test above: the mixed `nvtx` finding is the top one (HIGH, 895.982 µs at stake = 80.8 % of the
    GPU idle time). Its verdict names `send` (largest in the loop, 270 µs between kernels); the **Top cause** line said
    "`nvtx` (largest `init`)": `init` (600 µs, all before the first kernel) is the largest detail overall, but not the
    one the verdict beside it names. It now names the verdict's: "(largest in the loop `send`)"; the finding's cause
    stays (`nvtx`, `init`), its loop detail is `send`."""
    from nsys_llm_explainer.render import render_markdown

    b, g = _builder()
    b.nvtx_push_pop(0, 600 * US, "init", tid_g=g)
    t = 610 * US
    for _ in range(10):
        b.nvtx_push_pop(t, t + 30 * US, "send", tid_g=g)
        t = _loop(b, t + 40 * US, 10)
    rep = _run(b, tmp_path, "mixed_headline.sqlite", 2_009)
    h = rep.headline
    assert (h.top_finding_id, h.top_cause, h.top_loop_detail) == ("idle_nvtx", "nvtx: init", "send")
    assert rep.findings[0].loop_detail == "send" and rep.findings[0].cause == ("nvtx", "init")
    line = next(x for x in render_markdown(rep).splitlines() if x.startswith("**Top cause:**"))
    assert line.rstrip() == ("**Top cause:** `nvtx` (largest in the loop `send`) — 895.98 µs at stake, 80.8 % of the "
                             "GPU idle time."), line


@pytest.mark.slow
def test_trace08_nvtx_title_names_the_loop_range_not_mpi_init():
    """Trace 08 (saxpy MPI, A100): `nvtx` idle 577.662 ms (28.5 %): `MPI:MPI_Init` 329.250 ms, all in the leading
    gap (0 → 859.804 ms, before the first kernel); `MPI:MPI_Send` 136.343 ms of which 47.485 ms in that gap, 88.858
    ms between kernels = 4.4 % of the 2,023.827 ms window, more than `MPI:MPI_Recv`'s loop part. The HIGH loop finding
    is titled after `MPI:MPI_Send` in the loop, the start-up line kept."""
    _, f = _real("08_pipit_saxpy_mpi_a100", "idle_nvtx")
    assert f.title == ("The GPU idles while the host is in NVTX ranges (28.2 % of the window), 571.579 ms; largest in "
                       "the loop `MPI:MPI_Send` (4.4 %)"), f.title
    assert f.severity == "high" and f.cause == ("nvtx", "MPI:MPI_Init")
    assert any(e.startswith("404.056 ms of it on device 0 (69.9 %) lies before the GPU's first kernel")
               for e in f.evidence), f.evidence


# ---------------------------------------------------------------- 2. the sides named: one rule, title and evidence

def _startup_with_tail(tmp_path: Path, tail_us: int, name: str):
    """cudaHostRegister [0, 300 µs), 100 kernels from 310 µs (last ends 1,309 µs), cudaHostUnregister [1,310,
    1,310 + tail) with the window ending at its end."""
    b, g = _builder()
    b.runtime(0, 300 * US, tid_g=g, name=REG)
    _loop(b, 310 * US, 100)
    b.runtime(1_310 * US, (1_310 + tail_us) * US, tid_g=g, name="cudaHostUnregister_v4000")
    return _one(_run(b, tmp_path, name, 1_310 + tail_us), "other_api")


def test_a_small_shutdown_side_is_not_named(tmp_path: Path) -> None:
    """Tail 2 µs: once-per-run `other_api` = 300 µs before the first kernel + 2 µs after the last; 2 / 302 = 0.7 %
    < 5 %: neither title nor evidence says "after its last" as a side; the evidence gives the 2 µs apart."""
    f = _startup_with_tail(tmp_path, 2, "tail2.sqlite")
    assert f.title.startswith("Start-up, not the loop: GPU idle in other CUDA API calls (`cudaHostRegister`) before "
                              "the GPU's first kernel, "), f.title
    assert ("302.00 µs of it on device 0 (100.0 %) lies before the GPU's first kernel (start-up / shutdown: once per "
            "run, not in every step; 2.00 µs of it, under 5 % of that, lies after its last kernel); the rest, between "
            "kernels, is 0.0 % of the window.") in f.evidence


def test_a_shutdown_side_of_five_percent_is_named_in_both(tmp_path: Path) -> None:
    """Tail 30 µs: 30 / 330 = 9.1 % ≥ 5 %: "Start-up and shutdown … before the GPU's first kernel and after its
    last" in the title and the evidence alike."""
    f = _startup_with_tail(tmp_path, 30, "tail30.sqlite")
    assert f.title.startswith("Start-up and shutdown, not the loop: GPU idle in other CUDA API calls "
                              "(`cudaHostRegister`) before the GPU's first kernel and after its last, "), f.title
    assert ("330.00 µs of it on device 0 (100.0 %) lies before the GPU's first kernel and after its last (start-up / "
            "shutdown: once per run, not in every step); the rest, between kernels, is 0.0 % of the window."
            ) in f.evidence


@pytest.mark.slow
def test_trace07_start_up_title_and_evidence_name_the_same_side():
    """Trace 07 (mock, RTX 3080): `host_cpu` idle before the first kernel 194.559 ms, after the last 49.09 µs (0.03 %
    of the once-per-run 194.608 ms): both title and evidence say "before the GPU's first kernel" only."""
    _, f = _real("07_nsysai_mock_rtx3080", "idle_host_cpu")
    assert "before the GPU's first kernel, 82.4 % of the window" in f.title and "after" not in f.title
    line = next(e for e in f.evidence if e.startswith("194.608 ms of it on device 0"))
    assert ("lies before the GPU's first kernel (start-up / shutdown: once per run, not in every step; 49.09 µs of "
            "it, under 5 % of that, lies after its last kernel)") in line
    assert "before the GPU's first kernel and after its last" not in line


# ---------------------------------------------------------------- 3. autotuning: the title quotes the stake

def test_autotuning_title_quotes_every_call_of_the_kind(tmp_path: Path) -> None:
    """10 rounds of 110 µs: cudaMalloc 40 µs, cudaFree 10 µs, then 5 `redzone_checker` trials from 60 µs (pass ends
    1,100 µs); 100 warm gemm kernels from 1,110 µs (window [0, 2,109 µs), idle-timeline bins of 4.218 µs).
    `alloc` 500 µs (23.7 %): cudaMalloc 400, cudaFree 100; the first bin takes 4.218 µs of cudaMalloc: claimed
    495.782 µs = 23.5 % (the stake). The title quotes that, naming cudaMalloc's 400 µs beside it (the edge bins
    are taken from the kind's total, not from a detail's row)."""
    b, g = _builder()
    t = 0
    for _ in range(10):
        b.runtime(t, t + 40 * US, tid_g=g, name="cudaMalloc_v3020")
        b.runtime(t + 40 * US, t + 50 * US, tid_g=g, name="cudaFree_v3020")
        t = _loop(b, t + 60 * US, 5, name="redzone_checker")
    _loop(b, t + 10 * US, 100)
    f = _one(_run(b, tmp_path, "autotune2.sqlite", 2_109), "alloc")
    assert f.time_at_stake_ns == 495_782
    assert f.title.startswith("Autotuning allocations, not the loop: allocation calls hold 23.5 % of the window "
                              "(495.78 µs; largest `cudaMalloc` 400.00 µs), all during"), f.title
    assert f.quoted is None


# ---------------------------------------------------------------- 4. the headline's two sizes, each labelled

def test_stake_over_all_details_is_labelled(tmp_path: Path) -> None:
    """20 kernels (10 → 209 µs), then 10 steps of 160 µs from 220 µs: range `load` 60 µs, range `log` 20 µs, 10
    kernels from 90 µs after the step's start; 20 kernels at the end (window [0, 2,009 + 200 µs)). `nvtx` idle:
    `load` 600 µs, `log` 200 µs, none near the edges: stake 800 µs over both ranges; the title names `load` (75 %
    of the kind) and quotes its 600 µs: report.md says "800.00 µs at stake in all ranges (600.00 µs of it in
    `load`, the verdict's)"."""
    b, g = _builder()
    t = _loop(b, 10 * US, 20)
    for _ in range(10):
        b.nvtx_push_pop(t, t + 60 * US, "load", tid_g=g)
        b.nvtx_push_pop(t + 60 * US, t + 80 * US, "log", tid_g=g)
        t = _loop(b, t + 90 * US, 10)
    end = _loop(b, t, 20)
    rep = _run(b, tmp_path, "two_ranges.sqlite", end // US - 1)
    f = _one(rep, "nvtx")
    assert f.time_at_stake_ns == 800_000 and "`load`" in f.title and "600.00 µs" in f.title, f.title
    assert f.quoted == Quoted(600_000, "in `load`", "in all ranges")
    assert rep.findings[0] is f and rep.headline.quoted == f.quoted
    render_all(rep, tmp_path / "out")
    md = (tmp_path / "out" / "report.md").read_text()
    assert "— 800.00 µs at stake in all ranges (600.00 µs of it in `load`, the verdict's)" in md
    assert "**At stake:** 800.00 µs in all ranges (600.00 µs of it in `load`, the title's)" in md
    back = Report.from_dict(rep.to_dict())      # the label survives report.json
    assert back.headline.quoted == f.quoted and back.findings[0].quoted == f.quoted


@pytest.mark.slow
def test_trace03_and_06_headlines_label_both_sizes():
    """Trace 03: verdict `ensure_layer_N_weights` 565.002 ms on device 0; stake 597.873 ms over every range.
    Trace 06: verdict 33.596 ms of `nvtx` on device 0; stake 62.049 ms over devices 0 and 1."""
    rep, f = _real("03_llama3_real_inference_simulation", "idle_nvtx")
    assert rep.headline.time_at_stake_ns == 597_873_397
    assert rep.headline.quoted == Quoted(565_002_115, "in `ensure_layer_N_weights`", "in all ranges")
    rep, f = _real("06_nsysai_mfu_2gpu_after", "idle_nvtx")
    assert rep.headline.time_at_stake_ns == 62_049_293 and "33.596 ms" in rep.headline.verdict
    assert rep.headline.quoted is not None
    assert (rep.headline.quoted.what, rep.headline.quoted.stake) == ("on device 0", "on devices 0 and 1")
    assert fmt(rep.headline.quoted.ns) == "33.596 ms"


def fmt(ns: int) -> str:
    from nsys_llm_explainer.vocabulary.units import fmt_dur

    return fmt_dur(ns)
