"""`nsys-llm-explain compare`, the regression gate, `nsys_llm_explainer.compare()` and `Report.to_frame()`.

Real before/after pair: 05 (before) vs 06 (after) of ../shared/traces — SOURCE.md of 06: same job, slower
(median block period 19.3 ms vs 16.7 ms), busy falls, FSDP::pre_forward host stalls rise, flash_fwd unchanged.
Synthetic pairs are written with the scenario simulator (``synth.scenarios``) from the same seed, so the two
traces draw the same random numbers and differ only by what is planted.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import re
import sys
from pathlib import Path
from typing import Callable, Optional

import jsonschema
import numpy as np
import pytest
from conftest import SHARED_TRACES, as_report, built_scenario, one_line_error, run_cli
from synth import TraceBuilder
from synth.scenarios.names import K
from synth.scenarios.rank import Rank
from synth.scenarios.sim import US, Sim
from synth.scenarios.steps import forward, sample, write_trace

import nsys_llm_explainer as nle
from nsys_llm_explainer.comparison import CompareResult
from nsys_llm_explainer.comparison.document import compare_document, render_compare_html
from nsys_llm_explainer.comparison.gate import gate
from nsys_llm_explainer.comparison.result import MetricValue
from nsys_llm_explainer.errors import EXIT_INCOMPARABLE, EXIT_REGRESSION, InputError, OptionalDependencyError
from nsys_llm_explainer.render import load_schema
from nsys_llm_explainer.render.markdown import write_markdown

BEFORE = SHARED_TRACES / "05_nsysai_mfu_2gpu_before" / "trace.sqlite"
AFTER = SHARED_TRACES / "06_nsysai_mfu_2gpu_after" / "trace.sqlite"
MS = 1_000_000


def _json(result: CompareResult) -> dict:
    return json.loads(json.dumps(result.to_dict(), allow_nan=False))


def _validate(d: dict) -> None:
    schema = load_schema("compare_schema.json")
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.validate(d, schema)


def _lines(text: str):
    return [ln for ln in text.splitlines() if ln.strip()]


# ------------------------------------------------------------------------------------------ synthetic traces
def decode_loop(path: Path, steps: int = 60, host_extra: int = 0, lm_head_extra: int = 0, nvtx: bool = True,
                gpu: str = "NVIDIA H100 80GB HBM3", host_jitter: int = 0, seed: int = 3) -> Path:
    """A one-GPU decode loop: per step (NVTX ``execute_model`` when ``nvtx``) 4 layers, the sampler (or, without
    NVTX, 4 plain layers and no sampler: no step can be found), an LM-head GEMM, a stream sync, then host work.

    Planted: ``host_extra`` ns of host work inside each step after the sync (the GPU is drained, so every step is
    exactly that much longer); ``lm_head_extra`` ns more per LM-head kernel; ``host_jitter``: a further uniform
    0…host_jitter ns of host work per step from its own generator (same in both traces of a pair)."""
    sim = Sim("2024.2", seed)
    r = Rank(sim, 4101, 0)
    sim.b.gpu(0, name=gpu)
    jitter = np.random.default_rng(99)
    for _ in range(steps):
        if nvtx:
            r.push("execute_model")
            forward([r], 4)
            sample([r])
        else:
            for _layer in range(4):
                for name, dur in ((K.RMS_NORM, 2500), (K.GEMM_QKV, 14000), (K.FLASH, 30000), (K.GEMM_UP, 28000)):
                    r.launch(name, dur)
        r.launch(K.LM_HEAD, 45000 + lm_head_extra)
        r.stream_sync()
        r.host(40 * US + host_extra + (int(jitter.integers(0, host_jitter)) if host_jitter else 0))
        if nvtx:
            r.pop()
        r.host(30 * US)
    write_trace(sim, str(path))
    return path


@pytest.fixture(scope="module")
def synth_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("compare_synth")


@pytest.fixture(scope="module")
def base_trace(synth_dir) -> Path:
    return decode_loop(synth_dir / "base.sqlite")


@pytest.fixture(scope="module")
def base_report(base_trace):
    """``nle.analyze(base_trace)`` with the default options, once for this module (a Report is immutable)."""
    return nle.analyze(str(base_trace))


@pytest.fixture(scope="module")
def host_trace(synth_dir) -> Path:
    return decode_loop(synth_dir / "host.sqlite", host_extra=400 * US)


# ------------------------------------------------------------------------------------------ the real pair
@pytest.fixture(scope="module")
def real(shared_traces) -> CompareResult:
    assert BEFORE.exists() and AFTER.exists(), f"../shared/traces is required: {shared_traces}"
    return nle.compare([str(BEFORE), str(AFTER)], labels=["before", "after"])


@pytest.mark.slow
def test_real_pair_after_is_slower_for_the_reason_source_md_gives(real):
    m = real.metric
    assert m.name == "iteration_period_p50"                      # 05/06 have no steps: the anchor-kernel period
    assert "flash_fwd_kernel" in (m.anchor_kernel or "") and m.anchor_repeat == 2   # 2 flash kernels per block
    b, a = real.traces
    assert not b.steps.available and "no steps found" in b.notes[0]
    c = real.comparisons[0]
    assert (c.status, c.verdict, c.significant) == ("comparable", "slower", True)
    # SOURCE.md reads the median block period by hand as 16.7 ms before, 19.3 ms after (another anchor point
    # of the block): ours is within 0.3 / 0.5 ms of it and moves the same way
    assert abs(b.metric.p50_ns - 16.7 * MS) < 0.3 * MS
    assert abs(a.metric.p50_ns - 19.3 * MS) < 0.5 * MS
    assert c.change_pct == pytest.approx(100 * (a.metric.p50_ns - b.metric.p50_ns) / b.metric.p50_ns)
    assert 8 < c.change_pct < 20 and c.change_pct > c.noise_pct
    assert b.metric.count >= 10 and a.metric.count >= 10 and c.similarity > 0.9
    assert c.busy_pct_new < c.busy_pct_base                                # busy falls
    # the main reason: host stalls inside NVTX ranges, FSDP::pre_forward the largest of them
    r = c.main_reason
    assert (r.component, r.name) == ("idle", "nvtx") and r.detail.startswith("FSDP::pre_forward")
    fsdp = [d for d in c.idle_detail_changes if d.detail.startswith("FSDP::pre_forward")]
    assert fsdp and fsdp[0].delta_per_unit_ns > 0
    # flash_fwd unchanged (≤ 1 % per block): it would be wrong to claim it got faster or slower
    flash = next(k for k in c.kernel_deltas if k.name == m.anchor_kernel)
    assert abs(flash.change_pct) < 1.0
    assert {f.id: f.change for f in c.finding_changes}["gpu_bound"] == "gone"
    assert "slower" in c.headline[0] and "FSDP::pre_forward" in c.headline[2]
    assert 3 <= len(c.headline) <= 5


@pytest.mark.slow
def test_real_pair_parts_add_up(real):
    """Per unit of work: Σ categories + non-GPU = window; non-GPU = Σ idle causes (docs/MODEL.md)."""
    for t in real.traces:
        assert sum(s.ns for s in t.categories) == t.pooled_window_ns
        assert sum(s.ns for s in t.idle_by_kind) == t.non_gpu_ns == t.pooled_window_ns - t.busy_ns
    d = _json(real)
    _validate(d)
    assert d["schema_version"] == "1.0" and d["kind"] == "compare"


@pytest.mark.slow
def test_real_pair_cli_gate_and_outputs(tmp_path, shared_traces):
    out = tmp_path / "cmp"
    proc = run_cli("compare", str(BEFORE), str(AFTER), "--out", str(out), "--labels", "before,after",
                   "--fail-on-regression", "5", "--quiet")
    assert proc.returncode == EXIT_REGRESSION == 3, proc.stderr
    lines = _lines(proc.stderr)
    assert len(lines) == 1 and not proc.stdout, proc.stderr     # the failing gate's one line, on stderr
    line = lines[0]
    d = json.loads((out / "compare.json").read_text())
    c = d["comparisons"][0]
    for part in ("REGRESSION", "median iteration period", "before", "after",
                 f"{c['metric_base']['p50_ns'] / 1e6:.3f} ms", f"{c['metric_new']['p50_ns'] / 1e6:.3f} ms",
                 f"{c['change_pct']:+.1f} %"):
        assert part in line, (part, line)
    _validate(d)
    md = (out / "compare.md").read_text()
    assert md.splitlines()[2].startswith("`after` is ") and "slower" in md.splitlines()[2]
    for table in ("traces", "comparisons", "categories", "idle_by_kind", "part_changes", "kernel_deltas",
                  "finding_changes"):
        with open(out / "tables" / f"{table}.csv", newline="", encoding="utf-8") as fh:
            rows = list(csv.reader(fh))
        assert rows and rows[0], table
    html = (out / "compare.html").read_text()
    assert "stack-categories" in html and "Content-Security-Policy" in html
    # a limit above the change passes, printing one "ok" line; the output directory is reused
    proc = run_cli("compare", str(BEFORE), str(AFTER), "--out", str(out), "--fail-on-regression", "50", "--quiet")
    assert proc.returncode == 0, proc.stderr
    assert len(_lines(proc.stdout)) == 1 and "ok:" in proc.stdout


# ------------------------------------------------------------------------------------------ planted changes
def test_planted_host_delay_per_step_is_measured_exactly(base_trace, host_trace):
    res = nle.compare([str(base_trace), str(host_trace)])
    assert res.metric.name == "step_period_p50" and res.metric.step_ranges == ("execute_model",)
    c = res.comparisons[0]
    assert c.status == "comparable" and c.verdict == "slower"
    # same seed: each step of NEW is the step of BASE plus exactly 400 µs (the GPU is drained before the host work),
    # so every later step starts 400 µs later and the median period moves by exactly that
    # (±1 ns for the half-up rounding of an interpolated median)
    assert abs((c.metric_new.p50_ns - c.metric_base.p50_ns) - 400 * US) <= 1
    assert abs(c.window_per_unit_new_ns - c.window_per_unit_base_ns - 400 * US) <= 400 * US * 0.02
    assert c.main_reason.component == "idle" and c.main_reason.delta_per_unit_ns == pytest.approx(400 * US, rel=0.02)
    assert all(abs(k.delta_per_unit_ns) <= 1 for k in c.kernel_deltas)    # no kernel changed
    lines, code = gate(res, 10.0)
    assert code == EXIT_REGRESSION and lines[0].startswith("REGRESSION: median step period")


def test_planted_kernel_slowdown_is_the_top_kernel_delta(synth_dir, base_trace):
    slow = decode_loop(synth_dir / "lmhead.sqlite", lm_head_extra=100 * US)
    c = nle.compare([str(base_trace), str(slow)]).comparisons[0]
    top = c.kernel_deltas[0]
    # 2 per step, 1 slowed; over the 59 whole periods of 60 steps (first step's start to the last one's)
    assert top.name == K.LM_HEAD and (top.base_count, top.new_count) == (118, 118)
    # planted +100 µs per step; kernel durations carry ±4 % multiplicative jitter (Rank.launch), the same draws
    # in both traces, so the delta is 100 µs × mean(1 + 0.04 z) over 59 instances: sd 0.5 %; 3 % is > 5 sd
    assert top.delta_per_unit_ns == pytest.approx(100 * US, rel=0.03)
    assert c.main_reason.component == "category" and c.main_reason.name == "gemm"
    assert c.verdict == "slower"
    # the step is GPU-bound at its end (stream sync), so the step time grows by the same amount
    assert c.metric_new.p50_ns - c.metric_base.p50_ns == pytest.approx(100 * US, rel=0.05)


def test_no_steps_uses_the_anchor_kernel_period(synth_dir):
    a = decode_loop(synth_dir / "plain_a.sqlite", nvtx=False)
    b = decode_loop(synth_dir / "plain_b.sqlite", nvtx=False, host_extra=300 * US)
    res = nle.compare([str(a), str(b)])
    m = res.metric
    assert m.name == "iteration_period_p50" and m.anchor_kernel == K.FLASH and m.anchor_repeat == 4
    c = res.comparisons[0]
    assert c.status == "comparable" and abs(c.metric_new.p50_ns - c.metric_base.p50_ns - 300 * US) <= 1
    assert res.traces[0].units == pytest.approx(60.0)      # 240 flash kernels / 4 per iteration
    _validate(_json(res))


def test_same_scenario_other_seed_is_no_change_and_passes_the_gate(tmp_path):
    """A/A: per_token_sync with seeds 0 and 2 differ only by noise (random sync stalls): no verdict, and a gate
    tighter than that noise does not fail."""
    a, b = tmp_path / "a.sqlite", tmp_path / "b.sqlite"
    built_scenario("per_token_sync", str(a), seed=0)
    built_scenario("per_token_sync", str(b), seed=2)
    res = nle.compare([str(a), str(b)])
    c = res.comparisons[0]
    assert c.status == "comparable" and c.verdict == "no_change" and not c.significant
    assert 0 < c.change_pct < c.noise_pct
    lines, code = gate(res, 0.5)
    assert code == 0 and lines[0].startswith("not failing, within the noise")


def test_new_finding_shows_in_finding_changes(tmp_path):
    a, b = tmp_path / "healthy.sqlite", tmp_path / "sync.sqlite"
    built_scenario("healthy", str(a))
    built_scenario("per_token_sync", str(b))
    c = nle.compare([str(a), str(b)]).comparisons[0]
    new = {f.category for f in c.finding_changes if f.change == "new"}
    assert "sync_stall" in new
    # per_token_sync plants a stall of uniform(800, 1200) µs inside each step's stream sync: the sync idle per
    # step rises by its mean, 1 ms (sd of a 40-step mean: 18 µs; 6 % is > 3 sd plus the µs of sync overhead)
    sync = next(d for d in c.idle_changes if d.name == "sync")
    assert sync.delta_per_unit_ns == pytest.approx(1 * MS, rel=0.06)


# ------------------------------------------------------------------------------------------ exact hand-built traces
def exact_loop(path: Path, steps: int = 30, nvtx: bool = True, step_extra: int = 0, sampler: bool = True,
               graph: bool = False, fillers: Optional[Callable[[int], int]] = None, period: int = MS) -> str:
    """A one-GPU loop without jitter (TraceBuilder rows: every number exact). Step s starts at 1 ms + s × ``period``
    (1 ms by default): an NVTX
    ``execute_model`` range of 500 µs + ``step_extra`` (when ``nvtx``), ``gemm_kernel`` at +20…+220 µs,
    ``sampling_kernel`` at +220…+240 µs (when ``sampler``; a default step marker: without NVTX the marker method
    finds the steps), ``graph``: a graph-level-traced CUDA graph running +320…+400 µs (no kernel rows),
    ``fillers(s)``: so many 5 µs ``elementwise_kernel`` 20 µs apart from +300 µs. The capture runs from the first
    step's start (1 ms) to the last row's end."""
    b = TraceBuilder()
    b.process(100)
    g = b.thread(100, 100)
    b.gpu(0)
    for s in range(steps):
        t = MS + s * period
        if nvtx:
            b.nvtx_push_pop(t, t + 500 * US + step_extra, "execute_model", tid_g=g)
        b.launch(t + 10 * US, t + 15 * US, t + 20 * US, t + 220 * US, pid=100, tid=100, name="gemm_kernel")
        if sampler:
            b.launch(t + 16 * US, t + 19 * US, t + 220 * US, t + 240 * US, pid=100, tid=100, name="sampling_kernel")
        if graph:
            b.graph_launch(t + 300 * US, t + 310 * US, pid=100, tid=100, node_mode=False,
                           kernels=[(t + 320 * US, t + 350 * US, "gemm_kernel"), (t + 350 * US, t + 400 * US, "k2")])
        for j in range(fillers(s) if fillers else 0):
            u = t + 300 * US + j * 20 * US
            b.launch(u, u + 5 * US, u + 10 * US, u + 15 * US, pid=100, tid=100, name="elementwise_kernel")
    return b.write(str(path), overwrite=True)


def test_a_change_above_zero_noise_but_under_half_a_percent_performs_like(tmp_path):
    """BASE: 30 NVTX steps starting every 1 000 µs; NEW: every 1 002 µs. 29 periods each (the last step has none),
    IQR 0 in both, so the noise is 1.58·0/√29 = 0 %; the change (1 002 − 1 000)/1 000 = +0.2 % is above that noise
    (significant) but under 0.5 %: no_change, and the headline says NEW performs like BASE (not "do not differ
    significantly", not "slower")."""
    base, new = exact_loop(tmp_path / "b.sqlite"), exact_loop(tmp_path / "n.sqlite", period=1_002 * US)
    res = nle.compare([base, new], labels=["BASE", "NEW"])
    assert res.base.label == "BASE" and res.base.metric.p50_ns == 1_000 * US     # traces[0]
    c = res.comparisons[0]
    assert (c.status, c.verdict, c.significant, c.noise_pct) == ("comparable", "no_change", True, 0.0)
    assert c.change_pct == pytest.approx(0.2)
    assert (c.metric_base.p50_ns, c.metric_new.p50_ns, c.metric_new.count, c.metric_new.iqr_ns) == (
        1_000 * US, 1_002 * US, 29, 0)
    first = "`NEW` performs like `BASE` on the median step period: 1.000 ms → 1.002 ms (+0.2 %)."
    assert c.headline[:2] == (first, "Spread p90/p50 1.00 over 29 step periods vs 1.00 over 29; noise ±0.0 %: the "
                                     "change is larger than the noise.")
    assert write_markdown(compare_document(res)).splitlines()[2].rstrip() == first   # compare.md's headline


def test_a_negative_change_has_one_minus_sign_in_headline_and_table(tmp_path):
    """BASE: 30 NVTX steps every 1 000 µs; NEW: every 998 µs: change (998 − 1 000)/1 000 = −0.2 %, the step period
    0.002 ms shorter. The headline and the metric table's change cell write it "−0.2 %" (U+2212, as the Δ ms cells'
    "−0.002"), not "-0.2 %" (compare.md mixed "−0.063 | -100.0 %" in one kernel row)."""
    base, new = exact_loop(tmp_path / "b.sqlite"), exact_loop(tmp_path / "n.sqlite", period=998 * US)
    res = nle.compare([base, new], labels=["BASE", "NEW"])
    assert res.comparisons[0].headline[0] == ("`NEW` performs like `BASE` on the median step period: 1.000 ms → "
                                              "0.998 ms (−0.2 %).")
    md = write_markdown(compare_document(res))
    row = next(x for x in md.splitlines() if x.startswith("| `NEW` |"))
    assert "| −0.2 % |" in row, row
    assert not re.search(r"(?<![\w`])-\d", md), re.findall(r".{20}(?<![\w`])-\d.{10}", md)


def test_a_stray_kernel_on_another_gpu_is_in_no_category(tmp_path):
    """Device 0: 500 gemm_kernel of 9 µs every 10 µs from 10 µs (window 0 → 5 009 µs); device 1: one 5 µs
    elementwise_kernel (role ``few kernels``, not counted). The pooled window splits exactly into device 0's
    categories and its non-GPU time: gemm 4 500 µs + non_gpu 509 µs = 5 009 µs (9 µs + 1.018 µs per iteration);
    device 1's kernel is in no category (it used to add an ``elementwise`` 5 µs, so the parts summed to more than the
    window)."""
    b = TraceBuilder()
    b.process(100)
    for i in range(500):
        t = 10 * US + i * 10 * US
        b.launch(t - 10 * US, t - 8 * US, t, t + 9 * US, pid=100, tid=100, name="gemm_kernel")
    b.launch(2_000 * US, 2_001 * US, 2_002 * US, 2_007 * US, pid=100, tid=100, device=1, name="elementwise_kernel")
    p = b.write(str(tmp_path / "stray.sqlite"))
    t = nle.compare([p, p], labels=["BASE", "NEW"]).traces[0]
    assert (t.pooled_window_ns, t.units) == (5_009 * US, 500.0)
    assert [(s.name, s.ns, s.per_unit_ns) for s in t.categories] == [("gemm", 4_500 * US, 9 * US),
                                                                      ("non_gpu", 509 * US, 1_018)]


def test_identical_runs_name_no_largest_change(tmp_path):
    """A trace compared with itself: every category and idle-cause delta per step is 0, so there is no main reason
    and no "Largest change: … +0.000 ms" line (it used to name the alphabetically last of the zero deltas); the
    headline is the verdict, the spread and GPU busy (kernels in the 29.5 ms window: 30 × (200 + 20 µs)
    = 6.6 ms → 22.4 %)."""
    p = exact_loop(tmp_path / "t.sqlite")
    c = nle.compare([p, p], labels=["BASE", "NEW"]).comparisons[0]
    assert (c.verdict, c.change_pct, c.main_reason) == ("no_change", 0.0, None)
    assert c.headline == (
        "`NEW` and `BASE` do not differ significantly on the median step period: 1.000 ms → 1.000 ms (+0.0 %, within "
        "the noise).",
        "Spread p90/p50 1.00 over 29 step periods vs 1.00 over 29; noise ±0.0 %: the change is within the noise.",
        "GPU busy 22.4 % → 22.4 % of the steady window.")


def test_steps_found_by_different_methods_fall_back_to_the_anchor_kernel(tmp_path):
    """BASE has NVTX steps, NEW the same loop without NVTX (its steps come from the sampling marker kernels): the
    step times are not comparable, so the metric is the period of the anchor kernel, gemm_kernel (200 µs of the 220
    µs of kernel time per step, common to both), whose instances are each followed by one sampler: the sequence
    repeats every instance; 30 gemm starts exactly 1 ms apart give 29 periods of 1.000 ms in both."""
    base, new = exact_loop(tmp_path / "b.sqlite"), exact_loop(tmp_path / "n.sqlite", nvtx=False)
    res = nle.compare([base, new], labels=["BASE", "NEW"])
    m = res.metric
    assert (m.name, m.anchor_kernel, m.anchor_repeat) == ("iteration_period_p50", "gemm_kernel", 1)
    assert m.reason == ("steps were found by different methods (BASE: nvtx, NEW: marker); the anchor is the kernel "
                        "with the largest share of kernel time common to all traces; the kernel sequence repeats "
                        "every 1 instance of the anchor kernel")
    assert [(t.steps.method, t.metric.p50_ns, t.metric.count) for t in res.traces] == [("nvtx", MS, 29),
                                                                                        ("marker", MS, 29)]
    assert res.comparisons[0].change_pct == 0.0


def test_no_repeating_kernel_sequence_counts_each_anchor_instance(tmp_path):
    """No steps (no NVTX, no marker kernel); after the i-th gemm_kernel run i mod 9 elementwise kernels, so the kernel
    count between consecutive anchors (1 + i mod 9) repeats only every 9 instances, beyond the 8 tried: no k
    reaches the 0.75 repeat score (it is 0 for every k ≤ 8), and each anchor instance is one iteration (30 starts
    1 ms apart: 29 periods of 1.000 ms)."""
    p = exact_loop(tmp_path / "t.sqlite", nvtx=False, sampler=False, fillers=lambda s: s % 9)
    res = nle.compare([p, p], labels=["BASE", "NEW"])
    m = res.metric
    assert (m.name, m.anchor_kernel, m.anchor_repeat) == ("iteration_period_p50", "gemm_kernel", 1)
    assert m.reason == ("no steps found in BASE, NEW; the anchor is the kernel with the largest share of kernel time "
                        "common to all traces; no repeating kernel sequence found; each anchor instance counts as "
                        "one iteration")
    assert (res.traces[0].metric.p50_ns, res.traces[0].metric.count) == (MS, 29)


def test_an_anchor_kernel_that_runs_once_has_no_period(tmp_path):
    """One 25 ms gemm_kernel (the anchor: the largest share) then ten 5 µs elementwise kernels: one anchor instance
    gives no start-to-start period (no samples: p50, p90, spread, IQR none) and 0 complete iterations, so the pair
    is too short to compare and not compared."""
    b = TraceBuilder()
    b.process(100)
    b.gpu(0)
    b.launch(MS, MS + 5 * US, MS + 10 * US, 26 * MS, pid=100, tid=100, name="gemm_kernel")
    for i in range(10):
        t = 27 * MS + i * 100 * US
        b.launch(t, t + 5 * US, t + 10 * US, t + 15 * US, pid=100, tid=100, name="elementwise_kernel")
    p = b.write(str(tmp_path / "once.sqlite"))
    res = nle.compare([p, p], labels=["BASE", "NEW"])
    assert (res.metric.anchor_kernel, res.metric.anchor_repeat) == ("gemm_kernel", 1)
    assert res.traces[0].metric == MetricValue(None, None, 0, None, None) and res.traces[0].units == 1.0
    c = res.comparisons[0]
    assert (c.status, c.verdict, c.change_pct, c.noise_pct) == ("too_short", "not_compared", None, None)
    assert c.headline[:2] == ("`NEW` vs `BASE`: not compared — too short to compare: BASE has 0 iterations (< 10); "
                              "NEW has 0 iterations (< 10).",
                              "Spread p90/p50 – over 0 iterations vs – over 0 (an iteration: 1 instance of the anchor "
                              "kernel; 11.0 kernels per iteration in `BASE`, 11.0 in `NEW`).")   # 1 GEMM + 10 others


def test_windows_without_kernels_have_no_main_reason(tmp_path):
    """--window over the gap 1.6–1.9 ms between step 0 (NVTX 1.0–1.5 ms, kernels end 1.24 ms) and step 1 (2 ms): no
    step in it (0.0 units of work), so no per-step window time and no main reason. Over 1.000–1.015 ms: 15 µs of step
    0's 500 µs, 0.03 steps, window time per step 15 µs / 0.03 = 500 µs, but no kernel ran (the gemm starts at 1.020
    ms): no category or idle cause changed, so still no main reason. Both: not compared (no kernel, window < 20 ms),
    and the headline has no "Largest change" line."""
    p = exact_loop(tmp_path / "t.sqlite")
    for (w0, w1), win, units, per_unit in (((1600 * US, 1900 * US), "300.00 µs", 0.0, None),
                                           ((MS, MS + 15 * US), "15.00 µs", 0.03, 500 * US)):
        res = nle.compare([p, p], labels=["BASE", "NEW"], window=(w0, w1))
        c = res.comparisons[0]
        assert res.traces[0].units == pytest.approx(units)
        assert (c.window_per_unit_base_ns, c.window_per_unit_new_ns, c.main_reason) == (per_unit, per_unit, None)
        # the reasons name the window as chosen (--window), not as "the steady window"
        assert c.reasons == ("no kernel ran in the window set by --window of BASE and NEW",
                             f"the window set by --window of BASE is {win} (< 20.000 ms)",
                             f"the window set by --window of NEW is {win} (< 20.000 ms)")
        # the window was the user's (--window): nothing judged it steady
        assert len(c.headline) == 3 and c.headline[2] == "GPU busy 0.0 % → 0.0 % of the window set by --window."


def test_graph_level_executions_are_the_graph_untraced_category(tmp_path):
    """A graph-level trace has no kernel rows for a graph's kernels: its 80 µs executions (+320…+400 µs) are busy
    time no kernel category explains. Per trace over whole step periods (the 30 steps' starts 1.0 → 30.0 ms: 29
    periods of 1 ms, docs/COMPARE.md "Over whole step periods"): gemm 29 × 200 µs = 5.8 ms, sampling 29 × 20 µs =
    0.58 ms, graph_untraced 29 × 80 µs = 2.32 ms, non_gpu 29 − 8.7 = 20.3 ms, 700 µs per step."""
    p = exact_loop(tmp_path / "g.sqlite", graph=True)
    t = nle.compare([p, p], labels=["BASE", "NEW"]).traces[0]
    assert t.pooled_window_ns == 29 * MS and t.units == 29.0
    assert [(s.name, s.ns, s.per_unit_ns) for s in t.categories] == [
        ("gemm", 5800 * US, 200 * US), ("graph_untraced", 2320 * US, 80 * US), ("sampling", 580 * US, 20 * US),
        ("non_gpu", 20_300 * US, 700 * US)]


# ------------------------------------------------------------------------------------------ not comparable
@pytest.mark.slow   # the command line in a subprocess
def test_too_short(tmp_path, base_trace):
    short = decode_loop(tmp_path / "short.sqlite", steps=5, host_extra=2 * MS)
    proc = run_cli("compare", str(base_trace), str(short), "--out", str(tmp_path / "o"), "--quiet",
                   "--fail-on-regression", "0")
    assert proc.returncode == EXIT_INCOMPARABLE == 4, proc.stderr      # the gate fails closed
    line = _lines(proc.stderr)                                          # why it fails: on stderr
    assert len(line) == 1 and line[0].startswith("nsys-llm-explain: NOT COMPARABLE, failing (exit 4): NEW short "
                                                 "is too short (4 step periods < 10; the steady window 13.086 ms < "
                                                 "20.000 ms) — too short to compare: short has 4 step periods "
                                                 "(< 10)"), line
    proc = run_cli("compare", str(base_trace), str(short), "--out", str(tmp_path / "o"), "--quiet",
                   "--fail-on-regression", "0", "--allow-incomparable")
    assert proc.returncode == 0, proc.stderr
    line = _lines(proc.stdout)
    assert len(line) == 1 and "not gated (too short to compare" in line[0] and "4 step periods (< 10)" in line[0]
    d = json.loads((tmp_path / "o" / "compare.json").read_text())
    assert d["comparisons"][0]["status"] == "too_short" and d["comparisons"][0]["verdict"] == "not_compared"


def test_too_different_gpus_and_kernels(tmp_path, base_trace):
    other_gpu = decode_loop(tmp_path / "a100.sqlite", gpu="NVIDIA A100-SXM4-80GB", host_extra=MS)
    c = nle.compare([str(base_trace), str(other_gpu)]).comparisons[0]
    assert c.status == "too_different" and c.gpus_match is False and "different GPUs" in c.reasons[0]
    train = tmp_path / "train.sqlite"
    built_scenario("training_step", str(train))
    res = nle.compare([str(base_trace), str(train)])
    c = res.comparisons[0]
    assert c.status == "too_different" and c.similarity < 0.5
    # the training scenario runs on an A100: on other GPUs the names alone show no other work (libraries name kernels
    # per GPU), so the reason says what they show (docs/COMPARE.md "Too short, too different")
    assert any("share few kernel names" in r for r in c.reasons), c.reasons
    lines, code = gate(res, 0.0)
    assert code == EXIT_INCOMPARABLE and lines[0].startswith(
        "NOT COMPARABLE, failing (exit 4): BASE base and NEW train differ too much — too different to compare")
    lines, code = gate(res, 0.0, allow_incomparable=True)
    assert code == 0 and lines[0].startswith("not gated (too different to compare")


def test_three_traces_compare_each_new_with_base(tmp_path, base_trace, host_trace):
    res = nle.compare([str(base_trace), str(base_trace), str(host_trace)], labels=["b", "same", "slow"])
    assert [(c.base, c.new) for c in res.comparisons] == [("b", "same"), ("b", "slow")]
    assert res.comparisons[0].verdict == "no_change" and res.comparisons[0].change_pct == 0
    lines, code = gate(res, 5.0)
    assert code == EXIT_REGRESSION and lines[0].startswith("ok:") and lines[1].startswith("REGRESSION:")


# ------------------------------------------------------------------------------------------ CLI errors
@pytest.mark.parametrize("args, needle", [
    (["ONE"], "at least two traces"),
    (["ONE", "MISSING"], "not found"),
    (["ONE", "ONE", "--labels", "a"], "--labels"),
    (["ONE", "ONE", "--fail-on-regression", "fast"], "--fail-on-regression"),
    (["ONE", "ONE", "--bogus"], "unrecognized arguments"),
])
@pytest.mark.slow   # the command line in a subprocess
def test_cli_errors_are_one_line_exit_2(tmp_path, base_trace, args, needle):
    args = [str(base_trace) if a == "ONE" else str(tmp_path / "nope.sqlite") if a == "MISSING" else a
            for a in args]
    out = tmp_path / "o"
    proc = run_cli("compare", *args, "--out", str(out))
    assert proc.returncode == 2
    assert needle in one_line_error(proc)
    assert not out.exists()


@pytest.mark.parametrize("given, says", [
    ("a,", "a label is empty"), ("a, ", "a label is empty"),
    ("a,a", "labels must be distinct"), ("a, a ", "labels must be distinct"),   # labels are stripped first
])
def test_labels_empty_or_repeated_are_one_line_exit_2(tmp_path, capsys, demo_trace, given, says):
    """``--labels`` with one label per trace, but an empty or a repeated one: exit 2 with the one line
    ``--labels: <why>`` before any analysis (no output); the API: OptionError ``labels: <why>``."""
    from nsys_llm_explainer.cli import main
    from nsys_llm_explainer.errors import OptionError

    out = tmp_path / "o"
    assert main(["compare", str(demo_trace), str(demo_trace), "--out", str(out), "--labels", given]) == 2
    err = capsys.readouterr().err
    assert err == f"nsys-llm-explain: error: --labels: {says}\n" and not out.exists()
    with pytest.raises(OptionError) as ei:
        nle.compare([str(demo_trace), str(demo_trace)], labels=given.split(","))
    assert ei.value.option == "labels" and str(ei.value) == f"labels: {says}"


def test_a_directory_given_as_a_trace_is_one_line_exit_2(tmp_path, capsys, demo_trace):
    """A directory as BASE or NEW: exit 2, ``<dir> is a directory, not a trace file`` (compare takes files; a
    directory of ranks is the cluster command's input); the API raises the same InputError."""
    from nsys_llm_explainer.cli import main

    d, out = tmp_path / "runs", tmp_path / "o"
    d.mkdir()
    for pair in ([d, demo_trace], [demo_trace, d]):
        assert main(["compare", *map(str, pair), "--out", str(out)]) == 2
        assert capsys.readouterr().err == f"nsys-llm-explain: error: {d} is a directory, not a trace file\n"
        with pytest.raises(InputError, match=f"^{d} is a directory, not a trace file$"):
            nle.compare([str(p) for p in pair])
    assert not out.exists()


@pytest.mark.parametrize("pct", ["nan", "inf", "-inf", "1e999", "-1", "-0.5"])
def test_gate_limit_must_be_a_finite_percentage_not_below_0(tmp_path, capsys, demo_trace, pct):
    """``--fail-on-regression`` is a number but not a finite one ≥ 0 (``1e999`` reads as inf; ``=`` keeps argparse
    from reading ``-inf`` as a flag): exit 2, one line quoting the value as given, before any analysis."""
    from nsys_llm_explainer.cli import main

    out = tmp_path / "o"
    assert main(["compare", str(demo_trace), str(demo_trace), "--out", str(out), f"--fail-on-regression={pct}"]) == 2
    assert capsys.readouterr().err == ("nsys-llm-explain: error: --fail-on-regression must be a finite percentage "
                                       f"≥ 0, got '{pct}'\n")
    assert not out.exists()


def test_gate_limit_minus_zero_is_zero(tmp_path, capsys, demo_trace):
    """``--fail-on-regression -0`` is the limit 0 (float('-0') == 0, which is ≥ 0): a trace against itself changes by
    +0.0 %, which is not above 0, so the gate passes, and its line says ``(limit +0 %)``, not ``+-0``."""
    from nsys_llm_explainer.cli import main

    out = tmp_path / "o"
    assert main(["compare", str(demo_trace), str(demo_trace), "--out", str(out), "--labels", "a,b", "--quiet",
                 "--fail-on-regression", "-0"]) == 0
    lines = _lines(capsys.readouterr().out)
    assert len(lines) == 1 and lines[0].startswith("nsys-llm-explain: ok: ") and lines[0].endswith(
        "NEW b 1.314 ms, +0.0 % (limit +0 %)"), lines


def test_compare_reports_needs_two_reports(demo_trace):
    """The documented ``comparison.compare_reports`` given fewer than two reports: InputError naming how many."""
    from nsys_llm_explainer.comparison import compare_reports

    rep = nle.analyze(str(demo_trace))
    for reports in ([rep], []):
        with pytest.raises(InputError) as ei:
            compare_reports(reports)
        assert str(ei.value) == f"compare needs at least two traces (BASE NEW), got {len(reports)}"


@pytest.mark.slow   # the command line in a subprocess
def test_cli_refuses_foreign_out_dir(tmp_path, base_trace, host_trace):
    out = tmp_path / "o"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    proc = run_cli("compare", str(base_trace), str(host_trace), "--out", str(out), "--quiet")
    assert proc.returncode == 2 and "--force" in one_line_error(proc)
    proc = run_cli("compare", str(base_trace), str(host_trace), "--out", str(out), "--quiet", "--force")
    assert proc.returncode == 0 and (out / "notes.txt").read_text() == "mine" and (out / "compare.md").exists()
    assert proc.stdout == ""                                    # --quiet without the gate prints nothing


@pytest.mark.slow   # the command line in a subprocess
def test_nsys_rep_without_nsys_is_one_line(tmp_path, base_trace):
    rep = tmp_path / "new.nsys-rep"
    rep.write_bytes(b"\x00" * 64)
    proc = run_cli("compare", str(base_trace), str(rep), "--out", str(tmp_path / "o"),
                   env_extra={"PATH": str(tmp_path)})                   # no nsys on PATH
    assert proc.returncode == 2 and "nsys export --type sqlite" in one_line_error(proc)
    assert not (tmp_path / "o").exists()


def test_schema_subcommand(capsys):
    from nsys_llm_explainer.cli import main

    assert main(["schema", "--compare"]) == 0   # in this process (test_cli_demo_schema runs `schema` as a command)
    assert json.loads(capsys.readouterr().out) == load_schema("compare_schema.json")


# ------------------------------------------------------------------------------------------ Python API
def test_api_is_typed_frozen_and_writes_nothing(tmp_path, base_trace, host_trace, monkeypatch):
    monkeypatch.chdir(tmp_path)
    res = nle.compare([str(base_trace), str(host_trace)], labels=["x", "y"], top=5)
    assert isinstance(res, CompareResult) and callable(nle.compare)        # still the function after a call
    with pytest.raises(dataclasses.FrozenInstanceError):
        res.metric = None  # type: ignore[misc]
    assert list(tmp_path.iterdir()) == []
    _validate(_json(res))
    with pytest.raises(InputError):
        nle.compare([str(base_trace)])
    with pytest.raises(InputError):
        nle.compare([str(base_trace), str(host_trace)], bogus=1)


def test_compare_reads_typed_report_fields_only(base_trace, host_trace, base_report):
    """The comparison needs no trace model: the analysis graph keeps what it reads (the steady window's kernel starts
    and categories), so reports with the model dropped compare the same. Over a window that is not the whole capture
    (the middle half, --window) the categories are the window's own: with idle they add up to the pooled window."""
    from nsys_llm_explainer.comparison import compare_reports

    full = base_report
    assert full.window.is_full and full.steady_categories is full.categories   # nothing recomputed
    w0, w1 = full.window.full_start_ns, full.window.full_end_ns
    win = (w0 + (w1 - w0) // 4, w1 - (w1 - w0) // 4)
    reps = [nle.analyze(str(p), window=win) for p in (base_trace, host_trace)]
    r0 = reps[0]
    assert r0.steady_categories is not r0.categories and r0.steady_kernel_starts is not None
    assert r0.steady_categories.busy_ns < r0.categories.busy_ns
    assert len(r0.steady_kernel_starts) == r0.steady_kernels.kernel_count   # every kernel of the window
    assert not {"model", "steady"} & {f.name for f in dataclasses.fields(r0)}   # no trace model in a report
    b = compare_reports(reps, ["a", "b"])
    for t in b.traces:
        assert t.window_method == "override" and t.window_ns == win[1] - win[0]
        assert sum(s.ns for s in t.categories) == t.pooled_window_ns
        assert sum(s.ns for s in t.idle_by_kind) == t.non_gpu_ns


def test_anchor_starts_per_device_by_hand():
    """Per device that ran the anchor: its sorted starts, and the sorted starts of all that device's kernels."""
    from nsys_llm_explainer.analyses.kernels.starts import KernelStarts

    ks = KernelStarts(("a", "b"), np.array([0, 1, 0, 1, 0, 1]), np.array([0, 0, 1, 0, 0, 2]),
                      np.array([10, 20, 5, 30, 40, 1]))
    got = ks.per_device("a")
    assert [(x.tolist(), y.tolist()) for x, y in got] == [([10, 40], [10, 20, 30, 40]), ([5], [5])]
    assert [x.tolist() for x, _ in ks.per_device("b")] == [[20, 30], [1]]
    assert ks.per_device("c") == [] and len(ks) == 6


def test_html_escapes_names_and_loads_nothing(base_trace, host_trace):
    evil = '<script>alert("x")</script>&'
    page = render_compare_html(nle.compare([str(base_trace), str(host_trace)], labels=[evil, "new</script>"]), js="")
    assert "<script>alert" not in page and "new</script>" not in page
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&amp;" in page
    assert "src=" not in page and "http://" not in page and "https://" not in page   # nothing to load
    assert "default-src &#x27;none&#x27;" in page          # the CSP (attribute-escaped)


# ------------------------------------------------------------------------------------------ Report.to_frame
def test_to_frame(base_report):
    pd = pytest.importorskip("pandas")
    rep = base_report
    d = rep.to_dict()
    k = rep.to_frame("kernels")
    assert isinstance(k, pd.DataFrame) and len(k) == len(d["kernels"]) and {"name", "total_ns"} <= set(k.columns)
    assert int(k["total_ns"].sum()) == sum(r["total_ns"] for r in d["kernels"])
    assert len(rep.to_frame("steps")) == d["steps"]["step_count"] == 60
    assert {"device_id", "kind", "detail", "ns"} <= set(rep.to_frame("idle_causes").columns)
    assert "full.busy_ns" in rep.to_frame("devices").columns
    for name in ("findings", "categories"):
        assert len(rep.to_frame(name)) > 0
    with pytest.raises(ValueError, match="known"):
        rep.to_frame("nope")


def test_to_frame_holds_the_rows_of_each_csv(base_report, tmp_path):
    """One registry of tables: every tables/*.csv is a frame of the same name with the same rows."""
    pytest.importorskip("pandas")
    from conftest import read_table

    from nsys_llm_explainer.render import render_all

    rep = base_report
    render_all(as_report(rep.to_dict()), tmp_path)
    csvs = sorted(p.stem for p in (tmp_path / "tables").glob("*.csv"))
    assert len(csvs) >= 20
    for name in csvs:
        _, rows = read_table(tmp_path / "tables" / f"{name}.csv")
        assert len(rep.to_frame(name)) == len(rows), name
    idle = rep.to_frame("idle_causes")
    assert int(idle["ns"].sum()) == sum(d.idle_ns for d in rep.gpu_time.devices)


def test_to_frame_without_pandas(base_report, monkeypatch):
    rep = base_report
    monkeypatch.setitem(sys.modules, "pandas", None)            # `import pandas` now raises ImportError
    with pytest.raises(ImportError) as exc:
        rep.to_frame("kernels")
    assert isinstance(exc.value, OptionalDependencyError)
    assert "pip install 'nsys-llm-explainer[pandas]'" in str(exc.value)


def _ranged_loop(path: Path, range_ns: int) -> str:
    """30 iterations every 10 ms; each launches two 1.9 ms kernels at +10 µs and +2.01 ms, then the host works
    until the next iteration. The ``execute_model`` range covers the first ``range_ns`` of each iteration."""
    b = TraceBuilder()
    g = b.thread(7, 7)
    for i in range(30):
        t = i * 10_000 * US
        b.nvtx_push_pop(t, t + range_ns, "execute_model", tid_g=g)
        for j in range(2):
            k0 = t + j * 2_000 * US
            b.launch(k0, k0 + 5 * US, k0 + 10 * US, k0 + 1_910 * US, pid=7, tid=7, name="gemm")
    return b.write(str(path))


def test_a_longer_step_range_over_the_same_loop_is_not_slower(tmp_path):
    """BASE and NEW run the same loop (an iteration every 10 ms, the same kernels at the same times); only the
    ``execute_model`` range is 8 ms in BASE and 9 ms in NEW (the host work after the kernels is inside the range).
    Time per iteration is 10 ms in both, so NEW is not slower; the step-wall median says 8 → 9 ms (+12.5 %,
    noise 0: 'slower', and a --fail-on-regression gate fails)."""
    base = _ranged_loop(tmp_path / "b.sqlite", 8_000 * US)
    new = _ranged_loop(tmp_path / "n.sqlite", 9_000 * US)
    c = nle.compare([base, new], labels=["BASE", "NEW"]).comparisons[0]
    assert c.verdict == "no_change"
    assert (c.metric_base.p50_ns, c.metric_new.p50_ns, c.metric_new.count, c.change_pct) == (10 * MS, 10 * MS, 29,
                                                                                              0.0)
    assert gate(nle.compare([base, new], labels=["BASE", "NEW"]), 5.0)[1] == 0


def _loops(path: Path, starts: dict, range_ns: int) -> str:
    """Per process ``pid`` (on device pid − 7) an ``execute_model`` range of ``range_ns`` at each start of
    ``starts[pid]``, enclosing two 1.9 ms gemm kernels at +10 µs and +2.01 ms; the host works until the next start."""
    b = TraceBuilder()
    for pid, ts in starts.items():
        g = b.thread(pid, pid)
        for t in ts:
            b.nvtx_push_pop(t, t + range_ns, "execute_model", tid_g=g)
            for j in range(2):
                k0 = t + j * 2_000 * US
                b.launch(k0, k0 + 5 * US, k0 + 10 * US, k0 + 1_910 * US, pid=pid, tid=pid, device=pid - 7, name="gemm")
    return b.write(str(path))


def test_more_host_work_between_unchanged_step_ranges_is_slower(tmp_path):
    """The reverse of the test above: the ``execute_model`` range is 8 ms in both, but NEW's scheduler work between
    ranges takes 3 ms instead of 2 ms, so an iteration comes every 11 ms instead of 10 ms (30 each): NEW is
    (11 − 10)/10 = +10.0 % slower (IQR 0, noise 0), and a 5 % gate fails. The range's wall (8 → 8 ms) saw nothing."""
    base = _loops(tmp_path / "b.sqlite", {7: [i * 10 * MS for i in range(30)]}, 8 * MS)
    new = _loops(tmp_path / "n.sqlite", {7: [i * 11 * MS for i in range(30)]}, 8 * MS)
    res = nle.compare([base, new], labels=["BASE", "NEW"])
    c = res.comparisons[0]
    assert (res.metric.name, c.metric_base.p50_ns, c.metric_new.p50_ns, c.change_pct, c.noise_pct, c.verdict) == (
        "step_period_p50", 10 * MS, 11 * MS, pytest.approx(10.0), 0.0, "slower")
    lines, code = gate(res, 5.0)
    assert code == EXIT_REGRESSION and lines[0] == ("REGRESSION: median step period: BASE BASE 10.000 ms, NEW NEW "
                                                    "11.000 ms, +10.0 % (limit +5 %)")


def test_ranges_that_tile_the_loop_keep_their_step_time(tmp_path):
    """Where the old claim was true it stays: ranges that cover the whole iteration (10 ms every 10 ms in BASE, 11 ms
    every 11 ms in NEW) — the period equals the range's wall, 10 → 11 ms, +10.0 %, over 29 step periods each (30
    steps; the last has no next start); the steps per window (units) stay the step count, 30."""
    base = _loops(tmp_path / "b.sqlite", {7: [i * 10 * MS for i in range(30)]}, 10 * MS)
    new = _loops(tmp_path / "n.sqlite", {7: [i * 11 * MS for i in range(30)]}, 11 * MS)
    res = nle.compare([base, new], labels=["BASE", "NEW"])
    c = res.comparisons[0]
    assert (c.metric_base.p50_ns, c.metric_new.p50_ns, c.metric_base.count, c.change_pct, c.verdict) == (
        10 * MS, 11 * MS, 29, pytest.approx(10.0), "slower")
    assert res.base.steps.p50_ns == 10 * MS and res.base.units == 29.0   # the step periods of 30 steps


def test_each_process_is_its_own_step_sequence(tmp_path):
    """Two tensor-parallel ranks (pids 7 and 8, devices 0 and 1), each an ``execute_model`` every 10 ms for 30
    iterations, rank 8 3 ms behind rank 7; NEW the same with rank 8 4 ms behind. Start to start over both ranks in
    time order would give 3 / 7 ms (4 / 6 ms) periods and a median that moves with the offset; per process every
    period is 10 ms: 2 × 29 = 58 periods in both, no change; 29 a process, the noise's n (the ranks step in lockstep:
    docs/COMPARE.md "Noise")."""
    base = _loops(tmp_path / "b.sqlite", {7: [i * 10 * MS for i in range(30)],
                                          8: [3 * MS + i * 10 * MS for i in range(30)]}, 8 * MS)
    new = _loops(tmp_path / "n.sqlite", {7: [i * 10 * MS for i in range(30)],
                                         8: [4 * MS + i * 10 * MS for i in range(30)]}, 8 * MS)
    c = nle.compare([base, new], labels=["BASE", "NEW"]).comparisons[0]
    assert (c.metric_base.p50_ns, c.metric_new.p50_ns, c.metric_base.count, c.metric_new.count, c.verdict) == (
        10 * MS, 10 * MS, 29, 29, "no_change")


def test_a_period_spanning_an_idle_pause_is_not_a_step(tmp_path):
    """A serving loop: 10 bursts of 4 steps (an ``execute_model`` of 8 ms every 10 ms), 500 ms without requests
    between bursts (BASE) or 200 ms (NEW). 39 periods: 30 of 10 ms inside bursts, 9 spanning a pause (the idle after
    the step, 502 / 202 ms, is over 10 × the median period, 100 ms); those 9 are left out: 30 periods of 10 ms,
    p90 10 ms (with them p90 would be a pause), no change, and each trace's notes say so."""
    def bursts(pause: int) -> list:
        return [b * (30 * MS + pause + 10 * MS) + i * 10 * MS for b in range(10) for i in range(4)]
    base = _loops(tmp_path / "b.sqlite", {7: bursts(500 * MS)}, 8 * MS)
    new = _loops(tmp_path / "n.sqlite", {7: bursts(200 * MS)}, 8 * MS)
    res = nle.compare([base, new], labels=["BASE", "NEW"])
    c = res.comparisons[0]
    assert (c.metric_base.p50_ns, c.metric_base.p90_ns, c.metric_base.count, c.metric_new.p90_ns, c.change_pct,
            c.verdict) == (10 * MS, 10 * MS, 30, 10 * MS, 0.0, "no_change")
    note = ("9 step periods spanning an idle pause (the idle — no step range, no GPU work — between a step's end "
            "and the next step's start over 10 × the median step period) not counted in the headline metric")
    assert all(note in t.notes for t in res.traces)


def test_marker_steps_tile_the_loop_and_keep_the_step_time(tmp_path):
    """Without NVTX the steps run from one sampling kernel's end to the next (30 samplers every 1 ms: 29 steps of
    exactly 1 ms): they tile each device's timeline, so the metric stays the median step time, 1 ms over 29 steps."""
    p = exact_loop(tmp_path / "m.sqlite", nvtx=False)
    res = nle.compare([p, p], labels=["BASE", "NEW"])
    assert (res.metric.name, res.metric.step_method) == ("step_time_p50", "marker")
    assert (res.base.metric.p50_ns, res.base.metric.count) == (MS, 29)
    assert res.comparisons[0].headline[1].startswith("Spread p90/p50 1.00 over 29 steps vs 1.00 over 29")


def test_overlapping_user_ranges_of_one_process_give_no_period(tmp_path):
    """``--step-range execute_model`` picks ranges on two threads of one process that overlap (thread 7 at 0, 10,
    20 … ms, thread 8 at 5, 15 … ms, each 8 ms): consecutive steps of the process overlap, so no start-to-start
    period is measured between them (59 pairs); the trace's note says so and the pair is too short to compare."""
    b = TraceBuilder()
    for tid, off in ((7, 0), (8, 5 * MS)):
        g = b.thread(7, tid)
        for i in range(30):
            t = off + i * 10 * MS
            b.nvtx_push_pop(t, t + 8 * MS, "execute_model", tid_g=g)
            b.launch(t, t + 5 * US, t + 10 * US, t + 1_910 * US, pid=7, tid=tid, name="gemm")
    p = b.write(str(tmp_path / "t.sqlite"))
    res = nle.compare([p, p], labels=["BASE", "NEW"], step_range="execute_model")
    assert res.metric.name == "step_period_p50" and res.base.steps.count == 60
    assert res.base.metric.count == 0 and res.comparisons[0].status == "too_short"
    assert ("59 pairs of consecutive steps of one process overlap (step ranges on several threads): no period "
            "measured between them") in res.base.notes
