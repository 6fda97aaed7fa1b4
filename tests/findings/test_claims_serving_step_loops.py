"""Serving-engine step loops: vLLM V1 / SGLang-style `execute_model` ranges, CUDA-graph decode steps, prefill steps,
idle pauses between request bursts. Each trace is built by hand; the truth is worked out in the docstring."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Optional

import pytest
from synth import TraceBuilder

from nsys_llm_explainer.options import options_from_kwargs
from nsys_llm_explainer.pipeline import analyze_path
from nsys_llm_explainer.render import render_markdown

US = 1_000
MS = 1_000_000
PID = 100
T0 = 10 * MS
DECODE = (("gemm_qkv", 300), ("flash_fwd_splitkv_kernel", 400), ("rms_norm_kernel", 100), ("gemm_mlp", 500))


def _loop(b: TraceBuilder, steps: int, *, pause_every: int = 0, pause_ms: int = 50, prefill_every: int = 0,
          node_mode: bool = True) -> None:
    """A synchronous serving loop on thread 1 (`EngineCore`) of pid 100. Per step, from host time t: an idle pause
    first when ``pause_every`` divides the step index (i > 0): the thread waits in ``epoll_wait`` [t, t + pause_ms)
    (no request), t += pause_ms; then scheduler host work [t, t + 300 µs) with no CUDA call; then, from s = t +
    300 µs, NVTX `execute_model` [s, e). A decode step: ``cudaGraphLaunch`` [s, s + 10) µs, its 4 kernels back to
    back [s + 20, s + 1320) µs (300 + 400 + 100 + 500 µs); a prefill step (``prefill_every`` divides i): 8 ×
    (``cudaLaunchKernel`` gemm 5 µs, ``cudaLaunchKernel`` flash_fwd 5 µs), kernels gemm 400 µs + flash 300 µs back
    to back from s + 20 µs, ending at s + 5620 µs, the host at s + 80 µs. Then ``argmax`` launched [h, h + 5) µs
    (h: host time), kernel 20 µs right after the step's kernels, ``cudaMemcpyAsync`` [h + 5, h + 10) µs of 4 KiB
    to pinned memory (copy 10 µs after argmax), ``cudaStreamSynchronize`` from h + 10 µs until 5 µs after the copy
    ends = e. Decode: e = s + 1355 µs, period 1.655 ms; prefill: e = s + 5655 µs."""
    b.process(PID)
    g = b.thread(PID, 1, "EngineCore")
    t = T0
    for i in range(steps):
        if pause_every and i and i % pause_every == 0:
            b.osrt(t, t + pause_ms * MS, tid_g=g, name="epoll_wait")
            t += pause_ms * MS
        s = t + 300 * US
        h = s
        if prefill_every and i % prefill_every == 0:
            k = s + 20 * US
            for _ in range(8):
                b.launch(h, h + 5 * US, k, k + 400 * US, pid=PID, tid=1, name="sm90_gemm_prefill")
                b.launch(h + 5 * US, h + 10 * US, k + 400 * US, k + 700 * US, pid=PID, tid=1, name="flash_fwd_kernel")
                h, k = h + 10 * US, k + 700 * US
        else:
            k = s + 20 * US
            kern = []
            for name, d in DECODE:
                kern.append((k, k + d * US, name))
                k += d * US
            b.graph_launch(h, h + 10 * US, pid=PID, tid=1, kernels=kern, node_mode=node_mode)
            h += 10 * US
        b.launch(h, h + 5 * US, k, k + 20 * US, pid=PID, tid=1, name="argmax_kernel")
        c = b.runtime(h + 5 * US, h + 10 * US, tid_g=g, name="cudaMemcpyAsync_v3020")
        b.memcpy(k + 20 * US, k + 30 * US, pid=PID, bytes=4096, copy_kind=2, src_kind=2, dst_kind=1, corr=c)
        e = k + 35 * US
        b.runtime(h + 10 * US, e, tid_g=g, name="cudaStreamSynchronize_v3020")
        b.nvtx_push_pop(s, e, "execute_model", tid_g=g)
        t = e


def _run(b: TraceBuilder, tmp_path: Path, name: str = "t.sqlite", **options: Any):
    p = tmp_path / name
    b.write(str(p), overwrite=True)
    return analyze_path(str(p), options_from_kwargs(**options))


def _finding(rep: Dict[str, Any], fid: str) -> Optional[Dict[str, Any]]:
    return next((f for f in rep["findings"] if f["id"] == fid), None)


def _series(rep: Dict[str, Any]) -> Dict[str, Any]:
    (s,) = rep["step_sync"]["series"]
    return s


@pytest.mark.parametrize("pause_every,pauses", [(10, 2), (5, 5)])
def test_step_sync_leaves_idle_pauses_between_request_bursts_out(tmp_path: Path, pause_every: int, pauses: int
                                                                  ) -> None:
    """30 decode steps (:func:`_loop`), an idle pause of 50 ms in ``epoll_wait`` before every ``pause_every``-th
    step (2 pauses with 10, 5 with 5). 30 sync points, 29 gaps after them. A gap without a pause: the GPU idles
    while the host works 300 µs (`host_cpu`) and launches the graph 10 µs (`launch`; the first graph launch, of step
    0, lies before the first sync); the next sync waits W = 1320 µs (kernels [s + 20, s + 1340) µs from the call at
    s + 20): R = min(310, 1320) = 310 µs. A gap with a pause is no host work of a step: the thread waits for
    requests; its 50 ms are over 10 × the median period (1.655 ms). So: overlappable = exposed = (29 − pauses) ×
    310 µs (27: 8.370 ms; 24: 7.440 ms), of which `host_cpu` (29 − pauses) × 300 µs; the period p50 = p90 =
    1.655 ms over the steps without a pause, and the pattern holds. The report used to count the pause's
    ``epoll_wait`` as host work that "would be hidden" (the first 1.32 ms of each: 8.370 + 2 × 1.320 = 11.010 ms,
    "while the host works … osrt `epoll_wait` 100.000 ms"), and with 5 pauses dropped the finding ("irregular
    period: p90 51.655 ms > 3 × p50"), which compare then read as the problem gone. The finding: 2 pauses, 8.370 ms
    of the 30 × 1.655 + 100 = 149.65 ms window (5.6 % ≥ 5); 5 pauses: 7.440 of 299.65 ms (2.5 % < 5: none); the
    pauses' 50 ms each stay with the `osrt` finding."""
    b = TraceBuilder()
    _loop(b, 30, pause_every=pause_every)
    rep = _run(b, tmp_path).to_dict()
    s = _series(rep)
    kept = 29 - pauses
    assert s["holds"], s["reason"]
    assert (s["period_p50_ns"], s["period_p90_ns"]) == (1_655 * US, 1_655 * US)
    assert (s["exposed_ns"], s["overlap_ns"]) == (kept * 310 * US, kept * 310 * US)
    assert {c["kind"]: c["ns"] for c in s["claimed"]} == {"host_cpu": kept * 300 * US, "launch": kept * 10 * US}
    assert s["reason"].endswith(f"; {pauses} steps with an idle pause (host time after the sync over 10 × the "
                                "median period, or mostly in an OS call that waits) left out"), s["reason"]
    f = _finding(rep, "step_sync")
    if pauses == 2:
        assert f is not None and f["time_at_stake_ns"] == kept * 310 * US
        assert not any("epoll_wait" in e for e in f["evidence"]), f["evidence"]
    else:
        assert f is None
    osrt = _finding(rep, "idle_osrt")          # the pauses' idle stays with the OS-call finding, all of it
    assert osrt is not None and osrt["time_at_stake_ns"] == pauses * 50 * MS


def test_graph_level_trace_does_not_say_no_kernel_ran_inside_graphs(tmp_path: Path) -> None:
    """20 decode steps traced at graph level (one GRAPH_TRACE row per launch, [s + 20, s + 1320) µs: 1.300 ms each,
    26.000 ms in all; no kernel row for the graphs' kernels). The CUDA graphs section said "0 kernels ran inside
    graphs, 0.0 % of kernel time" — the graphs ran 26 ms of GPU work; their kernels were not recorded."""
    b = TraceBuilder("2024.2")
    _loop(b, 20, node_mode=False)
    md = render_markdown(_run(b, tmp_path))
    sec = md.split("## CUDA graphs", 1)[1].split("##", 1)[0]
    assert "0 kernels ran inside graphs" not in sec, sec
    assert ("Trace mode `graph`: 20 graph launches (200.00 µs of host launch time); the kernels inside the graphs "
            "were not recorded (graph-level tracing); 20 whole-graph executions took 26.000 ms of GPU time.") in sec


def test_step_sync_holds_on_a_loop_of_prefill_and_decode_steps(tmp_path: Path) -> None:
    """40 steps, a prefill step every 4th (:func:`_loop`, ``prefill_every=4``): decode period 1.655 ms, prefill
    period 5.955 ms; every step ends in a ``cudaStreamSynchronize`` after a readback and the host then works 300 µs
    with the GPU idle. Periods: 39, 10 of them end a prefill... p90 = 5.955 ms > 3 × 1.655 ms, so the pattern is
    called "irregular period" and no step-sync finding is made; the report then says "GPU-bound … kernel speed, not
    the host, sets the step time" beside a host-gap finding of 10.7 %. Truth: the per-step sync pattern holds on
    every step; 39 gaps of 300 µs host work + launch call (10 µs graph launch before decode, 5 µs kernel launch
    before prefill, the `launch` kind) could overlap the next step."""
    b = TraceBuilder()
    _loop(b, 40, prefill_every=4)
    rep = _run(b, tmp_path).to_dict()
    assert _series(rep)["holds"], _series(rep)["reason"]
    assert _finding(rep, "step_sync") is not None


def _steps(b: TraceBuilder, steps: Any) -> None:
    """A synchronous loop on thread 1 (`main`) of pid 100, one step per ``(host_us, gpu_us)`` of ``steps``: from
    host time t the thread works ``host_us`` with no CUDA call; then from s = t + host_us ``cudaLaunchKernel``
    [s, s + 5) µs launches a kernel [s + 20, s + 20 + gpu_us) µs and ``cudaStreamSynchronize`` [s + 5, e) waits
    for it, e = s + gpu_us + 25 µs (returning 5 µs after the kernel ends); t = e. After the sync of step i the
    GPU idles while the host works ``host_{i+1}`` µs (`host_cpu`) and 5 µs in the launch call (`launch`; then the
    kernel is launched: `queued`, 15 µs): X = host_{i+1} + 5 µs; the next sync waits W = gpu_{i+1} + 15 µs."""
    b.process(PID)
    g = b.thread(PID, 1, "main")
    t = T0
    for host_us, gpu_us in steps:
        s = t + host_us * US
        b.launch(s, s + 5 * US, s + 20 * US, s + (20 + gpu_us) * US, pid=PID, tid=1, name="step_kernel")
        e = s + (gpu_us + 25) * US
        b.runtime(s + 5 * US, e, tid_g=g, name="cudaStreamSynchronize_v3020")
        t = e


def test_step_sync_holds_on_a_regular_period_whatever_the_host_time(tmp_path: Path) -> None:
    """The other way round from the prefill/decode loop: 20 steps of 10 ms of GPU work (:func:`_steps`), the host
    working 300 µs before each step except 1200 µs before every third (i = 3, 6, …, 18). 19 gaps: 13 × X = 305 µs and
    6 × X = 1205 µs (a logging step): host time after the sync p50 305 µs, p90 1205 µs (> 3 × p50: irregular), but
    the period (X + 10.020 ms: 13 × 10.325 ms, 6 × 11.225 ms) has p90/p50 = 11.225 / 10.325 = 1.09: the steps
    recur and the pattern holds, as it did before. Each X is below the next wait (10.015 ms): overlappable =
    exposed = 13 × 305 + 6 × 1205 = 11.195 ms (`host_cpu` 13 × 300 + 6 × 1200 = 11.100 ms, `launch` 19 × 5 =
    95 µs); the title names the period p50 alone."""
    b = TraceBuilder()
    _steps(b, [(1200 if i and i % 3 == 0 else 300, 10_000) for i in range(20)])
    rep = _run(b, tmp_path).to_dict()
    s = _series(rep)
    assert s["holds"], s["reason"]
    assert s["reason"].endswith("period p90/p50 = 1.09"), s["reason"]
    assert (s["period_p50_ns"], s["period_p90_ns"]) == (10_325 * US, 11_225 * US)
    assert (s["exposed_p50_ns"], s["exposed_p90_ns"]) == (305 * US, 1_205 * US)
    assert (s["exposed_ns"], s["overlap_ns"]) == (11_195 * US, 11_195 * US)
    assert {(c["kind"], c["detail"]): c["ns"] for c in s["claimed"]} == {
        ("host_cpu", ""): 11_100 * US, ("launch", "cudaLaunchKernel"): 95 * US}
    f = _finding(rep, "step_sync")
    assert f is not None and f["title"].startswith("Per-step sync: `cudaStreamSynchronize` every 10.325 ms; ")


def test_step_sync_does_not_hold_when_neither_gpu_work_nor_host_time_recurs(tmp_path: Path) -> None:
    """Sync points with no recurring step (an autotuner's trials): 21 steps (:func:`_steps`), step i working on
    the host (100, 200, 400, 800, 1600)[i mod 5] µs and on the GPU (1, 2, 4, 8, 16)[2i mod 5] ms. The 20 gaps hold
    each i mod 5 four times: periods host + GPU + 25 µs = 1.125 (i ≡ 0), 4.225 (1), 16.425 (2), 2.825 (3), 9.625 ms
    (4): p50 4.225 ms, p90 16.425 ms > 3 × p50; host time after the sync X = host + 5 µs: 105, 205, 405, 805,
    1605 µs: p50 405 µs, p90 1.605 ms > 3 × p50. Neither recurs: no per-step pattern, no step-sync finding."""
    b = TraceBuilder()
    _steps(b, [((100, 200, 400, 800, 1600)[i % 5], (1, 2, 4, 8, 16)[2 * i % 5] * 1000) for i in range(21)])
    rep = _run(b, tmp_path).to_dict()
    s = _series(rep)
    assert not s["holds"]
    assert s["reason"] == ("irregular period: p90 16.425 ms > 3 × p50 4.225 ms, and irregular host time after the "
                           "sync: p90 1.605 ms > 3 × p50 405.00 µs"), s["reason"]
    assert _finding(rep, "step_sync") is None


def test_step_sync_on_prefill_and_decode_steps_leaves_idle_pauses_out(tmp_path: Path) -> None:
    """The prefill/decode loop (40 steps, prefill every 4th) with a 50 ms ``epoll_wait`` pause before step 20
    (:func:`_loop`): the median period is still 1.655 ms, so the gap holding the pause (> 16.55 ms) is left out.
    The other 38 gaps: 300 µs host work, then 10 µs graph launch before a decode step (the first graph launch, of
    step 1, is charged to the graph's first launch, not `launch`: X = 300 µs) and 5 µs launch before a prefill step
    (queued after it): decode gaps 1 × 300 + 29 × 310 µs (steps 1–39 less the 10 prefill steps), prefill gaps
    8 × 305 µs (steps 4–36 less 20): exposed = overlappable = 0.300 + 8.990 + 2.440 = 11.730 ms, 7.4 % of the
    158.9 ms window (108.9 + 50). Host time after the sync p50 = p90 = 310 µs: the pattern holds; the title gives
    the period p50 and p90 (1.655 ms, 5.955 ms)."""
    b = TraceBuilder()
    _loop(b, 40, prefill_every=4, pause_every=20)
    rep = _run(b, tmp_path).to_dict()
    s = _series(rep)
    assert s["holds"], s["reason"]
    assert s["reason"].endswith("period p90/p50 = 3.60; host time after the sync p90/p50 = 1.00; 1 step with an "
                                "idle pause (host time after the sync over 10 × the median period, or mostly in an OS "
                                "call that waits) left out")
    assert (s["exposed_ns"], s["overlap_ns"]) == (11_730 * US, 11_730 * US)
    f = _finding(rep, "step_sync")
    assert f is not None and f["time_at_stake_ns"] == 11_730 * US
    assert f["title"] == ("Per-step sync: `cudaStreamSynchronize` every 1.655 ms (p50; p90 5.955 ms); the GPU-idle "
                          "host work after it could overlap the next step: 7.4 % (11.730 ms)"), f["title"]


def test_gpu_bound_does_not_deny_the_host_gaps_beside_it(tmp_path: Path) -> None:
    """The loop of the previous test: GPU busy 95.8 of 108.9 ms = 88.0 % (≥ 85: `gpu_bound`), and 39 gaps of 300 µs
    host work with the GPU idle, 11.700 ms = 10.7 % of the window (`idle_host_cpu`). The evidence "kernel speed, not
    the host, sets the step time" contradicts the host-gap finding: one step in nine waits for the host. (Since the
    per-step sync finding holds on such loops, it claims that host time.)"""
    b = TraceBuilder()
    _loop(b, 40, prefill_every=4)
    rep = _run(b, tmp_path).to_dict()
    # the host work after each sync is the per-step sync finding's (it holds on prefill + decode loops): per gap 300 µs
    # of host work + the launch call before the step's first kernel (10 µs cudaGraphLaunch before the 30 decode
    # steps, 5 µs before the 9 prefill steps after the first), less the first graph launch (a first launch:
    # module_load): 30 × 310 + 9 × 305 − 10 = 12.035 ms
    host = _finding(rep, "step_sync")
    assert host is not None and host["time_at_stake_ns"] == 12_035 * US
    gb = _finding(rep, "gpu_bound")
    assert gb is None or not any("not the host" in e for e in gb["evidence"]), gb["evidence"]
    assert gb["evidence"][0].endswith("kernel speed sets most of the step time; the GPU idles the other 12.0 % "
                                      "(where it goes: the idle-cause table).")
