"""Captures bounded by the program: `nsys profile --capture-range=cudaProfilerApi` with several capture ranges in one
file. After the program's `cudaProfilerStop` the profiler records nothing until the next range: what the GPU did
then is unknown, so no window spans it and the whole capture's busy / idle is over its recorded time
(docs/FINDINGS.md, "Steady-state window", "Capture ranges"). Before, a 120 s span between two 200 ms ranges was the
report's window: "GPU busy 0.2 %", verdict "Host gaps: … 99.6 % of the window, 119.920 s", 1.66 launches/s.

A decode loop on thread 100 of pid 100, GPU 0: a step from t launches 5 kernels (3,000, 1,500, 300, 2,000 and
200 µs: 7 ms) back to back from t + 50 µs, `cudaStreamSynchronize` to 5 µs after the last, NVTX `execute_model`
[t, t + 7.065 ms); a step every 10 ms."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Optional, Tuple

import pytest
from claims_support import finding_of, report_of
from synth import TraceBuilder
from synth.scenarios.names import K

US, MS, S = 1_000, 1_000_000, 1_000_000_000
KERNELS = ((K.GEMM_QKV, 3000), (K.FLASH, 1500), (K.RMS_NORM, 300), (K.GEMM_O, 2000),
           ("void at::native::sampling_kernel()", 200))


def _loop(b: TraceBuilder, g: int, t: int, n: int) -> int:
    """``n`` steps from ``t`` (module docstring); returns ``t + n × 10 ms``."""
    for _ in range(n):
        api, k = t + 20 * US, t + 50 * US
        for name, d in KERNELS:
            b.launch(api, api + 5 * US, k, k + d * US, pid=100, tid=100, name=name)
            api, k = api + 10 * US, k + d * US
        c = b.runtime(api, k + 5 * US, tid_g=g, name="cudaStreamSynchronize_v3020")
        b.sync(api, k + 5 * US, pid=100, corr=c)
        b.nvtx_push_pop(t, k + 15 * US, "execute_model", tid_g=g)
        t += 10 * MS
    return t


def _builder(flavor: str) -> Tuple[TraceBuilder, int]:
    b = TraceBuilder(flavor)
    b.process(100)
    b.gpu(0)
    return b, b.thread(100, 100, "VllmWorker")


def _two_ranges(flavor: str, outer: bool = False) -> TraceBuilder:
    """Range 1: 10 steps from 1 s, `cudaProfilerStop` [1.100, 1.102] s. Range 2: `cudaProfilerStart` [121.102 s −
    1 µs, 121.102 s], 30 steps from 121.102 s + 100 µs, `cudaProfilerStop` [121.4021, 121.4041] s. ``outer``: an NVTX
    range `benchmark` opened at 1 s and never closed in the export (popped while the profiler was stopped)."""
    b, g = _builder(flavor)
    t = _loop(b, g, 1 * S, 10)
    b.runtime(t, t + 2 * MS, tid_g=g, name="cudaProfilerStop_v4000")
    t2 = t + 2 * MS + 120 * S
    b.runtime(t2 - 1 * US, t2, tid_g=g, name="cudaProfilerStart_v4000")
    t = _loop(b, g, t2 + 100 * US, 30)
    b.runtime(t, t + 2 * MS, tid_g=g, name="cudaProfilerStop_v4000")
    if outer:
        b.nvtx_push_pop(1 * S, None, "benchmark", tid_g=g)
    return b


def _device(rep: Dict[str, Any]) -> Dict[str, Any]:
    return next(d for d in rep["devices"] if d["device_id"] == 0)


@pytest.mark.parametrize("flavor", ["2021.5", "2026.2"])
def test_the_window_is_the_busiest_capture_range_not_the_span_between(tmp_path: Path, flavor: str) -> None:
    """Recorded nothing: from the first range's last end (the stop call's, 1.102 s) to the start call's start
    (121.102 s − 1 µs): 119.999999 s. Range 2 [121.101999, 121.4041] s holds 30 × 7 = 210 ms of busy time, range 1
    70 ms: range 2 is the window (nothing trimmed in it: its lead, 151 µs to the first kernel, is under 10 %):
    302.101 ms, busy 210 / 302.101 = 69.51 %, 150 launches / 0.302101 s = 496.5 /s. The whole capture's recorded
    time: 120.4041 − 1 s span less 119.999999 s = 404.101 ms, busy 280 ms = 69.29 %, idle 124.101 ms."""
    rep = report_of(_two_ranges(flavor), tmp_path)
    w = rep["window"]
    assert (w["method"], w["start_ns"], w["end_ns"]) == ("auto", 121_101_999_000, 121_404_100_000)
    assert (w["details"]["capture_ranges"], w["details"]["not_recorded_ns"]) == (2, 119_999_999_000)
    assert w["reason"].startswith("Auto-detected window: capture range 2 of 2 (the one holding the most GPU busy "
                                  "time, 75.0%); the profiler recorded nothing for 120.000 s between the ranges, "
                                  "after the program stopped it (`cudaProfilerStop`): what the GPU did then is "
                                  "unknown, so the window spans no part of it; in the range, nothing trimmed"), \
        w["reason"]
    d = _device(rep)
    assert (d["window_ns"], d["busy_ns"], d["kernel_count"]) == (302_101_000, 210_000_000, 150)
    assert d["busy_pct"] == pytest.approx(100 * 210 / 302.101)
    assert d["launches_per_s"] == pytest.approx(150 / 0.302101)
    assert (d["full"]["window_ns"], d["full"]["busy_ns"], d["full"]["idle_ns"]) == (
        404_101_000, 280_000_000, 124_101_000)
    ids = {f["id"] for f in rep["findings"]}
    assert not ids & {"idle_host_cpu", "capture_window"}, ids   # no 120 s "host gap", no "warm-up / tail" claim
    assert rep["steps"]["period_pauses"] == 1      # the period across the span is left out


def test_an_unclosed_range_across_the_stop_does_not_hide_the_span(tmp_path: Path) -> None:
    """An NVTX range left open at the first stop ends at the latest NVTX timestamp in the model (docs/METRICS.md);
    it was not recorded over the span, so the span is still found: the same window as above."""
    w = report_of(_two_ranges("2024.2", outer=True), tmp_path)["window"]
    assert (w["start_ns"], w["end_ns"], w["details"].get("not_recorded_ns")) == (
        121_101_999_000, 121_404_100_000, 119_999_999_000)


def test_stop_calls_the_profiler_did_not_honour_change_nothing(tmp_path: Path) -> None:
    """`cudaProfilerStart` / `Stop` around each of 40 steps under a capture without a capture range: recording goes
    on after every stop (the next step's rows follow within 2 ms, under 10 % of the 398 ms span), so no span is
    unrecorded: the whole trace is the window, as without the calls."""
    b, g = _builder("2023.4")
    t: Optional[int] = None
    for i in range(40):
        t = 1 * S + i * 10 * MS
        b.runtime(t, t + 1 * US, tid_g=g, name="cudaProfilerStart_v4000")
        _loop(b, g, t + 2 * US, 1)
        b.runtime(t + 8 * MS, t + 8 * MS + 1 * US, tid_g=g, name="cudaProfilerStop_v4000")
    w = report_of(b, tmp_path)["window"]
    assert (w["method"], w["start_ns"], w["end_ns"]) == ("full", 1 * S, 1 * S + 390 * MS + 8 * MS + 1 * US)
    assert "capture_ranges" not in w["details"]


def test_what_a_capture_range_window_leaves_out_is_recorded_time_not_warm_up(tmp_path: Path) -> None:
    """Range 1 from 1 s: start-up, 20 × (a 15 ms `cuModuleLoadData`, then a 100 µs fill kernel) every 20 ms, then
    5 steps from 1.4 s; `cudaProfilerStop` [1.450, 1.452] s: 452 ms recorded, 2 + 35 = 37 ms busy. 60 s later
    (`cudaProfilerStart` ends at 61.45 s) range 2: 30 steps from 61.4501 s, stop [61.7501, 61.7521] s: the window
    [61.449999, 61.7521] s = 302.101 ms, 210 ms busy: idle 92.101 ms = 30.49 %. Not recorded 61.449999 − 1.452 =
    59.997999 s. The whole capture's recorded time 61.7521 − 1 − 59.997999 = 0.754101 s, busy 247 ms: idle
    507.101 ms = 67.25 %, 36.76 points more. Before: "(60.450 s of warm-up and 0.00 µs of tail trimmed)", at stake
    60.450 s, "Idle 67.2 %" being 99.2 % of the span."""
    b, g = _builder("2022.4")
    t = 1 * S
    for _ in range(20):
        b.runtime(t, t + 15 * MS, tid_g=g, name="cuModuleLoadData", event_class=1)
        b.launch(t + 15 * MS, t + 15 * MS + 5 * US, t + 15 * MS + 10 * US, t + 15 * MS + 110 * US, pid=100, tid=100,
                 name="void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>()")
        t += 20 * MS
    t = _loop(b, g, t, 5)
    b.runtime(t, t + 2 * MS, tid_g=g, name="cudaProfilerStop_v4000")
    t += 60 * S
    b.runtime(t - 1 * US, t, tid_g=g, name="cudaProfilerStart_v4000")
    t = _loop(b, g, t + 100 * US, 30)
    b.runtime(t, t + 2 * MS, tid_g=g, name="cudaProfilerStop_v4000")
    rep = report_of(b, tmp_path)
    assert (rep["window"]["start_ns"], rep["window"]["details"]["not_recorded_ns"]) == (61_449_999_000,
                                                                                        59_997_999_000)
    full = _device(rep)["full"]
    assert (full["window_ns"], full["busy_ns"], full["idle_ns"]) == (754_101_000, 247_000_000, 507_101_000)
    f = finding_of(rep, "capture_window")
    assert f["title"] == "What the window leaves out makes the whole capture look 37 points idler than the steady state"
    assert f["time_at_stake_ns"] == 452_000_000
    assert f["evidence"][0].startswith(
        "Idle 67.2 % over the whole capture's recorded time vs 30.5 % in the steady window (452.000 ms of recorded "
        "time left out: the other capture ranges and any warm-up or tail trimmed in the kept one; 59.998 s not "
        "recorded). Auto-detected window: capture range 2 of 2 (the one holding the most GPU busy time, 85.0%)"), \
        f["evidence"][0]
