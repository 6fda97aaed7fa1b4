"""Findings rules on hand-built traces: preconditions decide the claim (numbers worked out in docstrings)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from synth import TraceBuilder

from nsys_llm_explainer.findings.advice import ADVICE
from nsys_llm_explainer.options import options_from_kwargs
from nsys_llm_explainer.pipeline import analyze_path
from nsys_llm_explainer.render import render_all

US = 1_000
PID = 7


def _run(b: TraceBuilder, tmp_path: Path, name: str, **options):
    p = tmp_path / name
    b.write(str(p), overwrite=True)
    return analyze_path(str(p), options_from_kwargs(**options))


def _loop(b: TraceBuilder, t0: int, n: int) -> int:
    """n kernels of 9 µs every 10 µs from t0, each launched 8 µs ahead by a 2 µs call."""
    for i in range(n):
        t = t0 + i * 10 * US
        b.launch(t - 8 * US, t - 6 * US, t, t + 9 * US, pid=PID, tid=1, name="gemm")
    return t0 + n * 10 * US


def test_allocator_growth_is_one_time(tmp_path: Path) -> None:
    """cudaMalloc [0, 300 µs) before a 1 ms loop, window set to the whole run [0, 1309 µs): 300 µs of idle,
    all in the first quarter → a low one-time finding, never "allocation in the loop". (The auto window
    trims it as warm-up instead.)"""
    b = TraceBuilder()
    b.process(PID)
    g = b.thread(PID, 1)
    b.runtime(0, 300 * US, tid_g=g, name="cudaMalloc_v3020")
    _loop(b, 310 * US, 100)
    rep = _run(b, tmp_path, "growth.sqlite", window=(0, 1_309 * US))
    alloc = [f for f in rep.findings if f.cause and f.cause[0] == "alloc"]
    assert len(alloc) == 1 and alloc[0].category == "one_time" and alloc[0].severity == "low"
    assert "growth" in alloc[0].title
    assert all(f.category != "allocation" for f in rep.findings)


def test_allocation_in_the_loop(tmp_path: Path) -> None:
    """A 50 µs cudaMalloc before every 10th kernel, all through the window: allocation in the loop."""
    b = TraceBuilder()
    b.process(PID)
    g = b.thread(PID, 1)
    t = 0
    for _ in range(10):
        b.runtime(t, t + 50 * US, tid_g=g, name="cudaMalloc_v3020")
        t = _loop(b, t + 60 * US, 10)
    rep = _run(b, tmp_path, "loop.sqlite")
    top = rep.findings[0]
    assert top.category == "allocation" and top.cause == ("alloc", "cudaMalloc")
    assert top.severity == "high" and top.holds()


def test_no_kernel_claims_when_idle(tmp_path: Path) -> None:
    """One FP32 sgemm kernel type on an idle GPU (9 µs every 400 µs ≈ 2.3 % busy, 2 500 kernels/s: below the
    launch-bound rate): no fp32/GPU-bound claim; the idle is host work outside CUDA calls → host_gap."""
    b = TraceBuilder()
    b.process(PID)
    for i in range(50):
        t = i * 400 * US
        b.launch(t + 380 * US, t + 385 * US, t + 390 * US, t + 399 * US, pid=PID, tid=1,
                 name="ampere_sgemm_128x64_nn")
    rep = _run(b, tmp_path, "idle.sqlite")
    cats = {f.category for f in rep.findings}
    assert "fp32_gemm" not in cats and "gpu_bound" not in cats
    assert rep.findings[0].category == "host_gap"
    assert rep.headline.steady_busy_pct < 10


def test_stray_device_does_not_drive_findings(tmp_path: Path) -> None:
    """Device 0 runs a GPU-bound loop; device 1 gets one 5 µs kernel in the middle (idle ~100 % of the
    window). No idle finding may be about device 1."""
    b = TraceBuilder()
    b.process(PID)
    end = _loop(b, 10 * US, 500)
    b.launch(2_000 * US, 2_001 * US, 2_002 * US, 2_007 * US, pid=PID, tid=1, device=1, name="stray")
    rep = _run(b, tmp_path, "stray.sqlite", window=(0, end))
    assert {d.device_id for d in rep.gpu_time.devices} == {0, 1}
    assert all(f.device_id != 1 for f in rep.findings), [(f.id, f.device_id) for f in rep.findings]


def test_a_thread_label_that_names_its_tid_is_not_given_it_twice():
    """The waits finding names a thread by its label, adding ``(tid N)`` only when the label does not end with it:
    a label that names its process too (``name (pid P, tid N)``: threads of one name and tid in two processes) had
    its tid written a second time."""
    from nsys_llm_explainer.findings.waits import thread_named

    assert thread_named("worker (pid 7, tid 5)", 5) == "`worker (pid 7, tid 5)`"
    assert thread_named("worker (tid 5)", 5) == "`worker (tid 5)`"
    assert thread_named("worker", 5) == "`worker` (tid 5)"
    assert thread_named("", 5) == "tid 5"   # unnamed (no ThreadNames row): its tid, not a `thread` placeholder


@pytest.mark.parametrize("copy_only_device", [False, True])
def test_mixed_idle_names_the_largest_causes_in_the_charging_order(tmp_path: Path, copy_only_device: bool) -> None:
    """100 back-to-back 40 µs kernels; after each of the 2nd, 3rd and 4th of every four, a 10 µs gap in which the
    launching thread is in ``cudaStreamSynchronize`` / ``cudaMalloc`` ([end − 5 µs, end + 6 µs)) or in no call;
    each next kernel's launch call is [start − 3 µs, start − 1 µs). Window [0, 4 740 µs) (the last kernel's end):
    74 gaps, 740 µs idle (15.6 %). Per sync or alloc gap: 6 µs of its call, 1 µs host work, 2 µs launch, 1 µs
    queued; per other gap: 7 µs host work, 2, 1. So host work 24·7 + 50 = 218 µs (4.6 %, the largest kind, below
    5 %), sync 150, alloc 150, launch 148, queued 74: no finding of its own, busy < 90 % → the low ``mixed_idle``
    finding. sync and alloc tie: listed in the charging order (sync first), also when a device that ran no kernel
    (a copy on device 1) is present and the causes are summed over the kernel devices only (they used to be listed
    alphabetically then)."""
    b = TraceBuilder()
    b.process(PID)
    g = b.thread(PID, 1)
    if copy_only_device:
        b.memcpy(100 * US, 120 * US, pid=PID, bytes=1 << 20, device=1)
    t = 0
    for i in range(100):
        b.launch(t - 3 * US, t - 1 * US, t, t + 40 * US, pid=PID, tid=1, name="gemm")
        end = t + 40 * US
        if i % 4 == 0:
            t = end
            continue
        if i % 4 in (1, 2):
            b.runtime(end - 5 * US, end + 6 * US, tid_g=g,
                      name="cudaStreamSynchronize_v3020" if i % 4 == 1 else "cudaMalloc_v3020")
        t = end + 10 * US
    rep = _run(b, tmp_path, "mixed.sqlite", window=(0, t))
    assert [d.device_id for d in rep.idle_causes.devices] == ([0, 1] if copy_only_device else [0])
    (f,) = rep.findings
    assert f.id == "mixed_idle" and f.severity == "low" and f.holds()
    assert f.title == "The GPU is idle 15.6 % of the window set by --window, spread over causes below 5 % each"
    assert f.evidence == ("Largest idle causes: host cpu 218.00 µs; sync `cudaStreamSynchronize` 150.00 µs; "
                          "alloc `cudaMalloc` 150.00 µs; launch `cudaLaunchKernel` 148.00 µs.",)
    assert f.time_at_stake_ns == 740 * US
    worst = f.checks[1]
    assert (worst.metric, worst.scope.kind, worst.scope.device_id) == ("cause_pct_of_window", "host_cpu", 0)
    assert worst.observed == pytest.approx(100 * 218 / 4_740)


def test_a_second_pacing_copy_path_is_named_and_a_memset_path_gets_no_host_advice(tmp_path: Path) -> None:
    """100 periods of 100 µs from t = 100 µs, in the window [100 µs, 10.09 ms) (10.1 ms clipped to the trace's
    end, the last memset's): a 50 µs kernel at [0, 50) µs of each (launched at [−10, −8) µs), a memset at [20, 90)
    µs and a pinned Host-to-Device copy at [30, 88) µs. memset path: busy 7 ms of 9.99 (70.1 %), 30 µs of each 70
    under the kernel (42.9 % ≥ 25); H2D path: busy 58.1 %, 20 µs of each 58 under the kernel (34.5 %): both pace,
    memset first (larger busy share), medium (< 80 %). Each gap [50, 100) µs holds both copies' ends: its [50, 90)
    µs lies inside the memset, which reaches furthest (90 > 88), so the idle-cause table charges 100 × 40 µs = 4 ms
    (40.0 % of the window) to `memset`, all claimed by this finding (held: 40 µs a period for the memset, 38 µs for
    the H2D path). The evidence names the second path; a memset path gets none of the host-link advice
    (copy_pace.host.resident / copy_pace.engines), though H2D copies are in the trace."""
    b = TraceBuilder()
    b.process(PID)
    for i in range(100):
        t = (i + 1) * 100 * US
        b.launch(t - 10 * US, t - 8 * US, t, t + 50 * US, pid=PID, tid=1, name="gemm")
        b.memset(t + 20 * US, t + 90 * US, pid=PID, bytes=1 << 20)
        b.memcpy(t + 30 * US, t + 88 * US, pid=PID, bytes=1 << 20, src_kind=1, dst_kind=2)
    rep = _run(b, tmp_path, "paths.sqlite", window=(100 * US, 10_100 * US))
    (f,) = [f for f in rep.findings if f.id == "copy_path"]
    assert f.cause == ("copy_path", "memset") and f.severity == "medium" and f.holds()
    assert f.title == ("The memset copy path sets the pace on device 0 (busy 70.1 %): 40.0 % of the window "
                       "(4.000 ms) beyond the kernels")
    assert f.evidence[-1] == "Also busy most of the window with kernels under it: Host-to-Device on device 0 (58.1 %)."
    assert f.time_at_stake_ns == 4_000 * US
    assert f.recommendation[-1] == ADVICE["copy_pace.fewer"].text
    assert ADVICE["copy_pace.host.resident"].text not in f.recommendation
    assert ADVICE["copy_pace.engines"].text not in f.recommendation


def test_unfused_attention_is_claimed_on_a_busy_gpu(tmp_path: Path) -> None:
    """100 periods of 100 µs in [0, 10 ms): an FP16 tensor-core GEMM at [40, 80) µs launched at [0, 2) µs, a softmax
    at [80, 100) µs launched at [70, 72) µs: busy 60 % (≥ 50, < 85: no gpu_bound, the kernel findings are low),
    softmax 2 ms of 6 ms of kernel time = 33.3 % ≥ 5 % with a GEMM and no fused attention kernel →
    ``attention_unfused``, low, time at stake 2 ms × 0.6 = 1.2 ms."""
    b = TraceBuilder()
    b.process(PID)
    for i in range(100):
        t = i * 100 * US
        b.launch(t, t + 2 * US, t + 40 * US, t + 80 * US, pid=PID, tid=1,
                 name="ampere_fp16_s16816gemm_fp16_128x128_ldg8_f2f_tn")
        b.launch(t + 70 * US, t + 72 * US, t + 80 * US, t + 100 * US, pid=PID, tid=1,
                 name="void softmax_warp_forward<float, float, float, 10, false>(float*, const float*, int, int, int)")
    rep = _run(b, tmp_path, "attn.sqlite", window=(0, 10_000 * US))
    (f,) = [f for f in rep.findings if f.id == "attention_unfused"]
    assert f.category == "attention_unfused" and f.severity == "low" and f.confidence == "medium" and f.holds()
    assert f.title == "Attention runs unfused (softmax + batched GEMMs): softmax alone is 33.3 % of kernel time"
    assert f.evidence == ("100 softmax kernels (2.000 ms) next to GEMM kernels and no fused (flash/memory-efficient) "
                          "attention kernel in the window.",
                          "Time at stake: their kernel time × the GPU's busy fraction (60.0 %), 1.200 ms — what faster "
                          "(or fused) kernels act on, not time that can be saved outright.")
    assert f.time_at_stake_ns == 1_200 * US
    assert [(c.metric, round(c.observed, 1)) for c in f.checks] == [("busy_pct", 60.0), ("trait_share_pct", 33.3)]
    assert f.recommendation == (ADVICE["attention.fused"].text,)
    assert all(g.id != "gpu_bound" for g in rep.findings)


def test_a_few_stray_kernels_on_another_gpu_are_not_averaged_in(tmp_path: Path) -> None:
    """Device 0 runs 500 back-to-back 10 µs kernels over [10 µs, 5 010 µs) (each launched by a 2 µs call 10 µs
    ahead, the first at 0), device 1 one 5 µs kernel (a library touching a second GPU once). Window [0, 5 010 µs).
    Device 1 ran 1 kernel (< 20) and is busy 5 µs (< 1 ms) while device 0 has a workload: its role is ``few
    kernels`` and it is not counted, so the pooled busy is device 0's 5 000 / 5 010 = 99.8 % and the GPU-bound
    finding holds. (Pooled over both devices it was 5 005 / 10 020 = 49.95 %: no GPU-bound claim, and device 1's
    99.9 % idle failed the "spread over causes below 5 %" check, so the report said "No finding." about a GPU busy
    99.8 % of the time.)"""
    b = TraceBuilder()
    b.process(PID)
    for i in range(500):
        t = 10 * US + i * 10 * US
        b.launch(t - 10 * US, t - 8 * US, t, t + 10 * US, pid=PID, tid=1, name="step_kernel")
    end = 5_010 * US
    b.launch(2_000 * US, 2_001 * US, 2_002 * US, 2_007 * US, pid=PID, tid=1, device=1, name="stray")
    rep = _run(b, tmp_path, "stray.sqlite", window=(0, end))
    assert [(d.device_id, d.role, d.kernel_count) for d in rep.gpu_time.devices] == [(0, "kernels", 500),
                                                                                      (1, "few kernels", 1)]
    assert rep.gpu_time.kernel_devices() == (0,)
    assert rep.headline.steady_busy_pct == pytest.approx(100 * 5_000 / 5_010)
    (f,) = rep.findings
    assert f.id == "gpu_bound" and f.holds() and f.checks[0].scope.devices == (0,)
    assert f.evidence[0] == ("GPU busy 99.8 % of the window set by --window (5.000 ms of 5.010 ms, device 0; "
                             "device 1 ran too "
                             "few kernels to count): kernel speed, not the host, sets the elapsed time.")
    out = tmp_path / "out"
    render_all(rep, out)
    md = (out / "report.md").read_text()
    assert ("**GPU busy 99.8 %** of the analysis window over the devices with a workload (device 0 99.8 %, device 1 "
            "few kernels, not counted).") in md
    assert json.loads((out / "report.json").read_text())["devices"][1]["role"] == "few kernels"


def test_few_kernels_everywhere_are_all_counted(tmp_path: Path) -> None:
    """No device has a workload (device 0: 10 kernels of 10 µs, device 1: one of 5 µs; none reaches 20 kernels or
    1 ms): no device is set apart, both are counted (role ``kernels``) and the gate finding speaks for the trace:
    11 kernels, 105 µs of GPU time."""
    b = TraceBuilder()
    b.process(PID)
    for i in range(10):
        t = 10 * US + i * 10 * US
        b.launch(t - 10 * US, t - 8 * US, t, t + 10 * US, pid=PID, tid=1, name="step_kernel")
    b.launch(50 * US, 51 * US, 52 * US, 57 * US, pid=PID, tid=1, device=1, name="stray")
    rep = _run(b, tmp_path, "few.sqlite")
    assert [d.role for d in rep.gpu_time.devices] == ["kernels", "kernels"]
    assert rep.findings[0].id == "too_little_work"
    assert rep.findings[0].title == "Too little GPU work to diagnose: 11 kernels, 105.00 µs of GPU time in the window"


def test_a_headline_without_findings_says_so() -> None:
    """The headline of an empty finding list (the pipeline reaches it only when nothing holds): "No finding.",
    with the busy % and window method it was given and nothing at stake."""
    from nsys_llm_explainer.findings.rank import headline

    h = headline((), 42.0, "auto")
    assert (h.verdict, h.window_method, h.steady_busy_pct, h.top_finding_id, h.time_at_stake_ns, h.action) == (
        "No finding.", "auto", 42.0, None, 0, None)


def test_a_window_without_kernels_makes_no_capture_window_claim(tmp_path: Path) -> None:
    """30 kernels of 9 µs in [10, 309) µs, then one 100 µs copy at [1 000, 1 100) µs; --window 900:1 200 µs (clipped
    to the trace's end, 1 100 µs) holds the copy only: no device ran a kernel there, so there is no steady busy %
    to compare with the whole capture's and no ``capture_window`` finding; the gate finding says why."""
    b = TraceBuilder()
    b.process(PID)
    for i in range(30):
        t = 10 * US + i * 10 * US
        b.launch(t - 8 * US, t - 6 * US, t, t + 9 * US, pid=PID, tid=1, name="k")
    b.memcpy(1_000 * US, 1_100 * US, pid=PID, bytes=1 << 20)
    rep = _run(b, tmp_path, "copywin.sqlite", window=(900 * US, 1_200 * US))
    assert not rep.window.is_full and rep.gpu_time.pooled() is None
    (f,) = rep.findings
    assert f.id == "too_little_work"
    assert f.title == "Too little GPU work to diagnose: 0 kernels, 0.00 µs of GPU time in the window"
    assert f.evidence[1] == ("No device ran a kernel in the window, so there is no GPU busy % to state; device 0 ran "
                             "only copies (100.00 µs of memcpy/memset) (listed as copies only, not counted in the GPU "
                             "busy %).")


def test_capture_window_of_a_chosen_window_does_not_call_the_rest_warm_up(tmp_path: Path) -> None:
    """One steady loop: a 9 ms kernel every 10 ms over [0, 200 ms), then idle up to a 1 ms kernel at [599, 600) ms.
    ``--window 50ms:100ms`` lies inside the loop: busy 45 of 50 ms (idle 10 %); the whole capture is busy 181 of
    600 ms (idle 69.8 %), 59.8 points idler, so a capture_window finding is due. But [0, 50 ms) runs the same 90 %
    busy loop as the window: it is no warm-up, and the finding must not call the 50 ms before / 500 ms after the
    window "warm-up" / "tail": it names them as left out by the chosen window."""
    b = TraceBuilder()
    b.process(PID)
    b.thread(PID, 1)
    for i in range(20):
        t = i * 10_000 * US
        b.launch(t, t + 5 * US, t + 10 * US, t + 9_010 * US, pid=PID, tid=1, name="gemm")
    b.launch(599_000 * US - 20 * US, 599_000 * US - 15 * US, 599_000 * US, 600_000 * US, pid=PID, tid=1, name="gemm")
    rep = _run(b, tmp_path, "chosen.sqlite", window=(50_000 * US, 100_000 * US))
    cap = [f for f in rep.findings if f.category == "capture_window"]
    assert len(cap) == 1
    text = cap[0].title + " ".join(cap[0].evidence)
    assert "warm-up" not in text.split("whether")[0] and "steady state" not in cap[0].title
    assert cap[0].title == "The whole capture is 60 points idler than the window chosen by --window"
    assert cap[0].evidence[0].startswith("Idle 69.8 % over the whole capture vs 10.0 % in the chosen window "
                                         "(50.000 ms before and 500.000 ms after it left out;")


def test_an_idle_title_quotes_the_time_of_its_own_device(tmp_path: Path) -> None:
    """Two processes, one GPU each, 100 kernels every 50 µs from 10 µs, each launched by a call [start − 3 µs,
    start − 1 µs): 40 µs kernels on device 0, 45 µs on device 1; window 7 → 5 005 µs (the first call to the last
    kernel's end: 4 998 µs). Between two kernels the launching thread is outside any call from the kernel's end to
    the next call: 7 µs on device 0 (99 gaps: 693 µs, 13.9 % of the window; device 0's 5 µs after its last kernel
    lie at the window's edge and are not claimed), 2 µs on device 1 (198 µs, 4.0 %). The host-gap finding speaks
    for device 0: its title pairs device 0's 13.9 % with device 0's
    693.00 µs (it used to add device 1's 198 µs: "13.9 % of the window, 891.00 µs", more than 13.9 % of the window);
    the time at stake stays the sum over both devices, 891 µs."""
    b = TraceBuilder()
    for pid, dev, kern in ((PID, 0, 40), (PID + 1, 1, 45)):
        b.process(pid)
        for i in range(100):
            t = 10 * US + i * 50 * US
            b.launch(t - 3 * US, t - 1 * US, t, t + kern * US, pid=pid, tid=1, device=dev, name="gemm")
    rep = _run(b, tmp_path, "two.sqlite", window=(0, 5_010 * US))
    f = next(f for f in rep.findings if f.id == "idle_host_cpu")
    assert f.device_id == 0 and f.time_at_stake_ns == 891 * US
    assert f.title == ("Host gaps: the launching thread is outside CUDA calls while the GPU idles (13.9 % of the "
                       "window, 693.00 µs)")
    # the devices' idle of this cause, not all their idle ("Device 0: 698.00 µs of idle" read as the device's idle)
    assert f.evidence[:2] == ("Device 0: 698.00 µs of idle charged to `host_cpu` (14.0 % of its 4.998 ms window).",
                              "Device 1: 198.00 µs of idle charged to `host_cpu` (4.0 % of its 4.998 ms window).")
    assert f.evidence[2].startswith("100 idle gaps on device 0 hold `host_cpu`")   # 99 + the edge gap


@pytest.mark.parametrize("steps", [False, True])
def test_gpu_bound_says_step_time_only_where_steps_were_found(tmp_path: Path, steps: bool) -> None:
    """500 kernels of 9 µs every 10 µs (busy 4 500 / 4 999 µs = 90.0 %, of which the idle 10.0 % ≥ 5 %). Without
    NVTX ranges there are no steps, so the kernels set "most of the elapsed time" (it said "the step time" of a
    trace with no steps); with a ``step`` range around each 10 kernels (50 steps) they set "most of the step time"."""
    b = TraceBuilder()
    b.process(PID)
    g = b.thread(PID, 1)
    _loop(b, 10 * US, 500)
    if steps:
        for i in range(50):
            b.nvtx_push_pop(10 * US + i * 100 * US - 9 * US, 10 * US + (i + 1) * 100 * US - 9 * US, "step", tid_g=g)
    rep = _run(b, tmp_path, "loop.sqlite", window=(10 * US, 5_009 * US))
    assert (rep.steps.step_count == 50) is steps
    (f,) = [f for f in rep.findings if f.id == "gpu_bound"]
    assert f.evidence[0].startswith("GPU busy 90.0 % of the window set by --window (4.500 ms of 4.999 ms")
    assert f.evidence[0].endswith(": kernel speed sets most of the " + ("step" if steps else "elapsed")
                                  + " time; the GPU idles the other 10.0 % (where it goes: the idle-cause table).")
