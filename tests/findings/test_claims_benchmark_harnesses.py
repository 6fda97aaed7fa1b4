"""Kernel benchmarks and timing harnesses (event-timed loops, `triton.testing.do_bench`'s L2 flush, shape sweeps):
sentences a report made that its trace contradicts. Each trace is built by hand; the truth is worked out in the
docstring."""

from __future__ import annotations

from pathlib import Path

import pytest
from claims_support import finding_of as _finding
from claims_support import report_of as _run
from synth import TraceBuilder

from nsys_llm_explainer.findings.advice import ADVICE

US = 1_000
MS = 1_000_000
PID = 100
FILL = ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<int>, "
        "at::detail::Array<char*, 1> >(int, at::native::FillFunctor<int>, at::detail::Array<char*, 1>)")
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel"
DOUBLE_BUFFER = "double-buffer the outputs"


def _event_timed_reps(b: TraceBuilder, *, n: int = 20, elapsed: bool = True) -> None:
    """An nvbench / `torch.utils.benchmark`-style harness on thread 1, one timed repetition per 50 µs period
    t = 1 ms + i · 50 µs: `cudaEventRecord` [t, t+3) µs, the launch [t+3, t+8) µs of a 4 µs kernel [t+10, t+14) µs,
    `cudaEventRecord` [t+8, t+11) µs, `cudaEventSynchronize` [t+11, t+20) µs (it waits for the kernel), and (with
    ``elapsed``) `cudaEventElapsedTime` [t+21, t+23) µs."""
    b.process(PID)
    g = b.thread(PID, 1, "main")
    for i in range(n):
        t = 1 * MS + i * 50 * US
        b.runtime(t, t + 3 * US, tid_g=g, name="cudaEventRecord_v3020")
        b.launch(t + 3 * US, t + 8 * US, t + 10 * US, t + 14 * US, pid=PID, tid=1, name="rmsnorm_kernel")
        b.runtime(t + 8 * US, t + 11 * US, tid_g=g, name="cudaEventRecord_v3020")
        b.runtime(t + 11 * US, t + 20 * US, tid_g=g, name="cudaEventSynchronize_v3020")
        if elapsed:
            b.runtime(t + 21 * US, t + 23 * US, tid_g=g, name="cudaEventElapsedTime_v3020")


def test_step_sync_of_an_event_timed_harness_is_not_told_to_double_buffer(tmp_path: Path) -> None:
    """20 repetitions: each `cudaEventSynchronize` [t+11, t+20) µs waits for the kernel [t+10, t+14) µs, so 20 step
    sync points, 19 steps (one per 50 µs period); in every step [t+20, t+70) µs the thread calls
    `cudaEventElapsedTime` (at t+21 µs): timed_steps = 19 of 19 (≥ 80 %). The sync is what times each repetition:
    "launch step N+1 before reading step N's results (double-buffer the outputs)" would break the measurement, so
    the finding gives `step_sync.event_timed` alone and says why (evidence: "On 19 of its 19 steps ...")."""
    b = TraceBuilder()
    _event_timed_reps(b)
    rep = _run(b, tmp_path)
    (s,) = [x for x in rep["step_sync"]["series"] if x["holds"]]
    assert (s["steps"], s["timed_steps"]) == (19, 19)
    f = _finding(rep, "step_sync")
    assert list(f["recommendation"]) == [ADVICE["step_sync.event_timed"].text]
    assert not any(DOUBLE_BUFFER in a for a in f["recommendation"])
    assert ("On 19 of its 19 steps the thread reads a CUDA event pair's elapsed time (`cudaEventElapsedTime`) after "
            "the sync") in f["evidence"][-1]


def test_step_sync_without_event_timing_keeps_the_double_buffer_advice(tmp_path: Path) -> None:
    """The same loop without `cudaEventElapsedTime`: nothing says the sync times the step; `timed_steps` is absent
    and the double-buffer line (`step_sync.overlap`) is given."""
    b = TraceBuilder()
    _event_timed_reps(b, elapsed=False)
    rep = _run(b, tmp_path)
    (s,) = [x for x in rep["step_sync"]["series"] if x["holds"]]
    assert "timed_steps" not in s
    f = _finding(rep, "step_sync")
    assert ADVICE["step_sync.overlap"].text in f["recommendation"]


def test_too_few_timed_steps_keep_the_double_buffer_advice(tmp_path: Path) -> None:
    """`cudaEventElapsedTime` after only the first 10 of 20 repetitions (steps 0–9 of 19 hold one): 10 < 0.8 × 19
    = 15.2, so the thread does not time its steps: `timed_steps` absent, `step_sync.overlap` given."""
    b = TraceBuilder()
    _event_timed_reps(b, elapsed=False)
    g = b.thread(PID, 1)
    for i in range(10):
        t = 1 * MS + i * 50 * US
        b.runtime(t + 21 * US, t + 23 * US, tid_g=g, name="cudaEventElapsedTime_v3020")
    rep = _run(b, tmp_path)
    (s,) = [x for x in rep["step_sync"]["series"] if x["holds"]]
    assert "timed_steps" not in s
    assert ADVICE["step_sync.overlap"].text in _finding(rep, "step_sync")["recommendation"]


def test_idle_sync_of_an_event_timed_harness_is_not_told_to_remove_the_sync(tmp_path: Path) -> None:
    """200 repetitions of the harness above (so that `sync` idle is ≥ 5 % of the window: per 50 µs period the GPU
    idles [t+14, t+20) µs in `cudaEventSynchronize`, 6 µs = 12 %): the `idle_sync` finding said "Remove per-step
    host synchronization from the loop" — but each sync ends a timed repetition (`cudaEventElapsedTime` right
    after it, 199 of 199 steps): removing it breaks what the program measures. The thread's step-sync series (the
    only one on device 0, steps ending in `cudaEventSynchronize`, the finding's call) has timed_steps = 199: the
    finding gives `step_sync.event_timed` instead of the `sync.*` lines and says why."""
    b = TraceBuilder()
    _event_timed_reps(b, n=200)
    rep = _run(b, tmp_path)
    f = _finding(rep, "idle_sync")
    assert list(f["recommendation"]) == [ADVICE["step_sync.event_timed"].text], f["recommendation"]
    assert f["evidence"][-1] == (
        "`cudaEventSynchronize` ends each step of thread `main` (pid 100, tid 1), and on 199 of its 199 steps the "
        "thread reads a CUDA event pair's elapsed time (`cudaEventElapsedTime`) after the sync: the sync ends each "
        "timed step, as a benchmark harness or a per-step timer does.")


def test_idle_sync_of_an_untimed_loop_keeps_remove_the_sync(tmp_path: Path) -> None:
    """The same 200 repetitions without `cudaEventElapsedTime` (events recorded for other reasons, e.g. stream
    ordering): no step is timed (timed_steps absent), so the sync is the loop's own and `sync.remove` stays."""
    b = TraceBuilder()
    _event_timed_reps(b, n=200, elapsed=False)
    rep = _run(b, tmp_path)
    f = _finding(rep, "idle_sync")
    assert f["recommendation"][0] == ADVICE["sync.remove"].text
    assert ADVICE["step_sync.event_timed"].text not in f["recommendation"]
    assert not any("CUDA event pair's elapsed time" in e for e in f["evidence"])


def test_idle_sync_stays_when_another_thread_syncs_untimed_in_the_same_call(tmp_path: Path) -> None:
    """Thread 1 the timed harness (200 repetitions, 1–11 ms, timed_steps 199, 6 µs of `cudaEventSynchronize` idle
    per repetition = 1.2 ms); then thread 2 on the same GPU, from 12 ms, 100 steps of 50 µs: launch [t, t+5) µs, a
    4 µs kernel [t+7, t+11) µs, `cudaEventSynchronize` [t+5, t+20) µs (9 µs of sync idle each, 0.9 ms), and no
    elapsed-time read (thread 1's steps still hold 199 of the 300 kernels, ≥ 50 %). Thread 2's series ends its
    steps in the same call untimed, so the finding's `cudaEventSynchronize` idle is not all a harness's:
    `sync.remove` stays and no event-timing line is given."""
    b = TraceBuilder()
    _event_timed_reps(b, n=200)
    g2 = b.thread(PID, 2, "worker")
    for i in range(100):
        t = 12 * MS + i * 50 * US
        b.launch(t, t + 5 * US, t + 7 * US, t + 11 * US, pid=PID, tid=2, name="other_kernel")
        b.runtime(t + 5 * US, t + 20 * US, tid_g=g2, name="cudaEventSynchronize_v3020")
    rep = _run(b, tmp_path)
    timed = {x["tid"]: x.get("timed_steps") for x in rep["step_sync"]["series"]
             if x["api"] == "cudaEventSynchronize"}
    assert timed == {1: 199, 2: None}, timed
    f = _finding(rep, "idle_sync")
    assert f["recommendation"][0] == ADVICE["sync.remove"].text
    assert not any("CUDA event pair's elapsed time" in e for e in f["evidence"])


ADD = ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctorOnSelf_add<float>, "
       "at::detail::Array<char*, 2> >(int, at::native::CUDAFunctorOnSelf_add<float>, at::detail::Array<char*, 2>)")
LEFT_OUT = "of harness kernels outside the timed regions left out"


def _do_bench(*, reads: int = 100, timed_add_us: int = 0) -> TraceBuilder:
    """`triton.testing.do_bench`: after a 200 µs `cudaMalloc`, 125 repetitions at h = 1.3 ms + i · 20 µs, each
    `cache.zero_()` (an 80 µs FillFunctor kernel over the 256 MB L2-flush buffer, launched [h, h+5) µs),
    `cudaEventRecord` [h+5, h+7) µs, the 30 µs GEMM under test (launched [h+7, h+12) µs), with ``timed_add_us`` an
    elementwise add of that length after it inside the pair (launched [h+12, h+14) µs), `cudaEventRecord`
    [h+14, h+16) µs; the GPU runs them back to back from 1.32 ms. One `cudaDeviceSynchronize` at the end and
    ``reads`` `cudaEventElapsedTime` calls (3 µs apart) after it."""
    b = TraceBuilder()
    b.process(PID)
    g = b.thread(PID, 1, "main")
    t = 1 * MS
    b.runtime(t, t + 200 * US, tid_g=g, name="cudaMalloc_v3020")
    t += 300 * US
    gpu = t + 20 * US
    a = timed_add_us * US
    for i in range(125):
        h = t + i * 20 * US
        b.launch(h, h + 5 * US, gpu, gpu + 80 * US, pid=PID, tid=1, name=FILL)
        b.runtime(h + 5 * US, h + 7 * US, tid_g=g, name="cudaEventRecord_v3020")
        b.launch(h + 7 * US, h + 12 * US, gpu + 81 * US, gpu + 111 * US, pid=PID, tid=1, name=GEMM)
        if a:
            b.launch(h + 12 * US, h + 14 * US, gpu + 111 * US, gpu + 111 * US + a, pid=PID, tid=1, name=ADD)
        b.runtime(h + 14 * US, h + 16 * US, tid_g=g, name="cudaEventRecord_v3020")
        gpu += 111 * US + a
    h = t + 125 * 20 * US
    b.runtime(h, gpu + 5 * US, tid_g=g, name="cudaDeviceSynchronize_v3020")
    for i in range(reads):
        b.runtime(gpu + 10 * US + i * 3 * US, gpu + 12 * US + i * 3 * US, tid_g=g, name="cudaEventElapsedTime_v3020")
    return b


def test_l2_flush_of_a_do_bench_loop_is_not_the_fusion_target(tmp_path: Path) -> None:
    """The fill is 125 × 80 = 10 ms of 13.75 ms kernel time (72.7 %), but it lies outside every event pair: the
    harness's, not the measured workload. "Unfused (eager) pointwise kernels take 72.7 % of kernel time ... Fuse
    elementwise chains into their producers" advised fusing the cache flush. The thread records 250 events (125
    pairs) and reads 100 elapsed times (≥ 0.8 × 125 = 100, ≤ 125): event-timed; its 125 fills are launched after
    an even number of records (0, 2, …, 248: between pairs), its GEMMs after an odd one (inside). Left out: 125
    kernels, 10 ms; the timed kernels are the 125 GEMMs, 3.75 ms: no elementwise kernel among them, no
    `elementwise_fusion`; `gpu_bound`'s top kernel is the GEMM, 100.0 % of the timed kernel time."""
    rep = _run(_do_bench(), tmp_path)
    assert not any(f["id"] == "elementwise_fusion" for f in rep["findings"]), [f["title"] for f in rep["findings"]]
    ev = _finding(rep, "gpu_bound")["evidence"]
    assert ev[1].startswith("Top kernel `sm90_xmma_gemm_bf16bf16") and ev[1].endswith(
        ": 100.0 % of the timed kernel time (125 calls, avg 30.00 µs)."), ev[1]
    assert ev[-2] == (
        "10.000 ms of harness kernels outside the timed regions left out: 125 kernels that an event-timed thread (it "
        "reads `cudaEventElapsedTime` for its `cudaEventRecord` pairs) launched outside every pair — the benchmark's "
        "own work (L2 flush, warm-up), not what it measures; the top kernel's share is of the other 3.750 ms of "
        "kernel time. The busy time and its split above still count them: the GPU did run them.")


def test_timed_elementwise_work_keeps_the_fusion_finding_at_its_timed_share(tmp_path: Path) -> None:
    """The same harness with a 20 µs elementwise add after the GEMM inside each pair: timed kernel time 125 × 50 µs
    = 6.25 ms, of which the adds 2.5 ms = 40.0 % (≥ 25 %): `elementwise_fusion` holds, on the timed regions' share
    (not (10 + 2.5) / 16.25 = 76.9 % with the flush), and its evidence says what was left out."""
    rep = _run(_do_bench(timed_add_us=20), tmp_path)
    f = _finding(rep, "elementwise_fusion")
    assert f["title"] == "Unfused (eager) pointwise kernels take 40.0 % of the timed kernel time"
    assert f["evidence"][0].startswith("125 eager pointwise / copy / cast kernels (the `eager_pointwise` trait; the "
                                       "kernel category `elementwise` is a different set of names), 2.500 ms, median "
                                       "20.00 µs: "), f["evidence"]
    assert f["evidence"][-2].startswith("10.000 ms " + LEFT_OUT + ": 125 kernels ")
    assert f["evidence"][-2].endswith("the share is of the other 6.250 ms of kernel time.")
    top = _finding(rep, "gpu_bound")["evidence"][1]
    assert top.endswith(": 60.0 % of the timed kernel time (125 calls, avg 30.00 µs)."), top


def test_events_without_elapsed_reads_keep_the_fill_in_the_shares(tmp_path: Path) -> None:
    """The same loop with no `cudaEventElapsedTime` (events recorded for ordering, as a serving loop does): no thread
    is event-timed, nothing is left out: today's findings stand — the fill is 72.7 % of kernel time (10 of 13.75
    ms), `elementwise_fusion` holds and `gpu_bound`'s top kernel is the fill."""
    rep = _run(_do_bench(reads=0), tmp_path)
    f = _finding(rep, "elementwise_fusion")
    assert f["title"] == "Unfused (eager) pointwise kernels take 72.7 % of kernel time"
    ev = _finding(rep, "gpu_bound")["evidence"]
    assert "FillFunctor" in ev[1] and ev[1].endswith(": 72.7 % of kernel time (125 calls, avg 80.00 µs).")
    assert not any(LEFT_OUT in e for x in rep["findings"] for e in x["evidence"])


@pytest.mark.parametrize("reads", [99, 126])
def test_too_few_or_too_many_elapsed_reads_are_no_event_timed_thread(tmp_path: Path, reads: int) -> None:
    """99 reads of 125 pairs (< 0.8 × 125 = 100: most pairs unread) or 126 (> 125: more reads than pairs — chained
    or shared events, whose consecutive records are no start/end pair): no thread is event-timed; the fill stays in
    the shares (72.7 %)."""
    rep = _run(_do_bench(reads=reads), tmp_path)
    title = _finding(rep, "elementwise_fusion")["title"]
    assert title == "Unfused (eager) pointwise kernels take 72.7 % of kernel time"
    assert not any(LEFT_OUT in e for x in rep["findings"] for e in x["evidence"])


def test_shape_sweep_ranges_do_not_cover_more_than_their_period(tmp_path: Path) -> None:
    """A shape sweep: one NVTX range `M=n,N=n,K=n` per shape, 6 shapes, each 5 repetitions of fill (80 µs) + event
    + GEMM (d µs, d = 10, 40, 150, 500, 1000, 2000) + event + `cudaEventSynchronize` + `cudaEventElapsedTime`, a
    repetition lasting 121 + d µs; 200 µs between shapes. Ranges: 0.655, 0.805, 1.355, 3.105, 5.605, 10.605 ms;
    periods (start to next start): range + 0.2 ms = 0.855, 1.005, 1.555, 3.305, 5.805 ms. Each range covers
    0.655/0.855 = 77 % … 5.605/5.805 = 97 % of its period, yet the report says "the ranges cover 143 % of it"
    (p50 of the 6 ranges, 2.230 ms, over p50 of the 5 periods, 1.555 ms): a coverage above 100 % is false. Now the
    median over the 5 steps with a next step of range ÷ period: 0.766, 0.801, 0.871, 0.939, 0.966 → 87 %."""
    import re

    from nsys_llm_explainer.options import options_from_kwargs
    from nsys_llm_explainer.pipeline import analyze_path
    from nsys_llm_explainer.render import render_markdown

    b = TraceBuilder()
    b.process(PID)
    g = b.thread(PID, 1, "main")
    t = 1 * MS
    for s, d in enumerate((10, 40, 150, 500, 1000, 2000)):
        n = 64 * 2 ** s
        start = t
        for _ in range(5):
            b.launch(t, t + 5 * US, t + 10 * US, t + 90 * US, pid=PID, tid=1, name=FILL)
            b.runtime(t + 5 * US, t + 7 * US, tid_g=g, name="cudaEventRecord_v3020")
            ks = t + 91 * US
            b.launch(t + 7 * US, t + 12 * US, ks, ks + d * US, pid=PID, tid=1, name="cutlass_gemm_kernel",
                     grid=(n, n, 1))
            b.runtime(t + 12 * US, t + 14 * US, tid_g=g, name="cudaEventRecord_v3020")
            e = ks + d * US
            b.runtime(t + 14 * US, e + 5 * US, tid_g=g, name="cudaEventSynchronize_v3020")
            b.runtime(e + 6 * US, e + 8 * US, tid_g=g, name="cudaEventElapsedTime_v3020")
            t = e + 30 * US
        b.nvtx_push_pop(start, t, f"M={n},N={n},K={n}", tid_g=g)
        t += 200 * US
    p = tmp_path / "t.sqlite"
    b.write(str(p), overwrite=True)
    md = render_markdown(analyze_path(str(p), options_from_kwargs()))
    assert "the ranges cover" not in md
    m = re.search(r"; a step's range covers (\d+) % of its period \(p50 of range ÷ period per step\)", md)
    assert m is not None and int(m.group(1)) == 87, m and m.group(0)
