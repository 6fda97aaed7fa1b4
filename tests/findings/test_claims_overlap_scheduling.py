"""Overlap scheduling and concurrent streams (SGLang's overlap scheduler / vLLM's async scheduling: the host launches
step n+1 while the GPU runs step n, then blocks in `cudaEventSynchronize` while the GPU is still busy; a second thread
keeping a side stream busy; copies on a copy stream under compute; tiny kernels launched one at a time). Each trace is
built by hand; the truth is worked out in the docstrings."""

from __future__ import annotations

from pathlib import Path

from claims_support import finding_of, report_of
from synth import TraceBuilder

US = 1_000
MS = 1_000 * US
PID = 100
NAMES = ("sm90_xmma_gemm_bf16", "flash_fwd_kernel", "rms_norm_kernel", "silu_and_mul_kernel")


def _overlap(drain_every: int = 0, steps: int = 30) -> TraceBuilder:
    """SGLang overlap scheduler, thread `sglang::scheduler` (tid 100), one stream. A step is 20 kernels of 100 µs
    back to back (2 ms); launch calls 5 µs, 10 µs apart. Step 0 is launched from 0.7 ms, its kernels run
    [1, 3) ms. Then per step n: the thread launches step n+1 (200 µs of calls; its kernels start when step n ends,
    or 20 µs after the first call if the GPU is already idle), calls `cudaEventSynchronize` on step n's event (it
    returns 5 µs after step n's last kernel ends, or after 4 µs when that has already ended) and works 100 µs on
    the host — 3 ms after every ``drain_every``-th sync. With no drain the queue never empties: the GPU is busy
    30 × 2 = 60 ms of the [0.7, 61.005) ms trace, idle only 300 µs before the first kernel and 5 µs at the end in
    the last sync."""
    b = TraceBuilder()
    b.process(PID, "sglang::scheduler")
    g = b.thread(PID, PID, "sglang::scheduler")

    def launch_step(a: int, k0: int) -> None:
        for j in range(20):
            b.launch(a + j * 10 * US, a + j * 10 * US + 5 * US, k0 + j * 100 * US, k0 + (j + 1) * 100 * US,
                     pid=PID, tid=PID, name=NAMES[j % 4])

    launch_step(700 * US, 1 * MS)
    starts = [1 * MS]
    a = 1 * MS
    for n in range(steps):
        end_n = starts[n] + 2 * MS
        if n + 1 < steps:
            k0 = max(end_n, a + 20 * US)
            launch_step(a, k0)
            starts.append(k0)
            a += 200 * US
        se = max(end_n + 5 * US, a + 4 * US)
        c = b.runtime(a, se, tid_g=g, name="cudaEventSynchronize_v3020")
        b.sync(a + 1 * US, se - 3 * US, pid=PID, sync_type=1, corr=c)
        a = se + (3 * MS if drain_every and n % drain_every == drain_every - 1 else 100 * US)
    return b


def test_overlap_scheduler_sync_while_the_gpu_runs_is_no_finding(tmp_path: Path) -> None:
    """(trace: :func:`_overlap`, no drain) The 30 `cudaEventSynchronize` calls block the host 51.305 ms (29 × 1.7 ms
    + the first 1.9 ms + the last 1.705 ms … summed 51.305 ms) while the GPU runs the next, already queued, step:
    the GPU is busy 60.000 of 60.305 ms (99.5 %). Only the last sync drains the thread's work (1 sync point, < 5:
    no per-step-sync pattern), and only its last 5 µs are GPU idle: no sync finding, the verdict is GPU-bound."""
    rep = report_of(_overlap(), tmp_path)
    d = rep["idle_causes"]["devices"][0]
    assert (d["busy_ns"], d["window_ns"]) == (60 * MS, 60_305 * US)
    assert {f["id"] for f in rep["findings"]} == {"gpu_bound"}
    assert rep["headline"]["verdict"].startswith("GPU-bound: the GPU is busy 99.5 %")
    sync_idle = sum(c["ns"] for c in d["causes"] if c["kind"] == "sync")
    assert sync_idle == 5 * US
    s = rep["step_sync"]["series"][0]
    assert (s["holds"], s["blocking_calls"], s["sync_points"]) == (False, 30, 1)


def test_overlap_scheduler_drain_is_host_work_not_the_sync(tmp_path: Path) -> None:
    """(trace: :func:`_overlap` with a 3 ms host pause after every 5th sync) After such a sync returns (5 µs after
    step n ends) the queued step n+1 runs 2 ms; the host is back 3.005 ms after step n's end, launches step n+2
    (kernels 20 µs after its first call). Each of the 5 drains idles the GPU 1.025 ms: 1.005 ms `host_cpu` (the
    pause), 5 µs `launch`, 15 µs `queued`; the syncs there return at once (4 µs) and hold no idle. The finding
    names host work, 5 × 1.005 = 5.025 ms (7.7 % of the 65.430 ms window), not the sync."""
    rep = report_of(_overlap(drain_every=5), tmp_path)
    f = finding_of(rep, "idle_host_cpu")
    assert f["time_at_stake_ns"] == 5_025 * US
    assert "idle_sync" not in {x["id"] for x in rep["findings"]}
    causes = {(c["kind"], c["detail"]): c["ns"] for c in rep["idle_causes"]["devices"][0]["causes"]}
    assert causes[("host_cpu", "")] == 5_025 * US and causes[("launch", "cudaLaunchKernel")] == 25 * US
    assert causes[("sync", "cudaEventSynchronize")] == 5 * US


def _side_stream_busy() -> TraceBuilder:
    """Thread `scheduler` (tid 100), per step from t = 1 ms, period 1.355 ms, 20 steps: 10 launch calls
    [t + 10 j, +5 µs), kernels of 100 µs back to back on stream 7 [t + 50 µs, t + 1.05 ms), then
    `cudaStreamSynchronize` [t + 100 µs, t + 1.055 ms) (it drains the thread's stream) and 300 µs of host work.
    Thread `prefetch` (tid 101) keeps stream 13 busy with 2 ms kernels back to back from 0.9 ms (launched 20 µs
    apart from 0.8 ms, i.e. far ahead). The GPU is busy from 0.9 ms to the window's end: the thread's host work after
    each sync costs the GPU nothing."""
    b = TraceBuilder()
    b.process(PID, "python3")
    ga = b.thread(PID, 100, "scheduler")
    b.thread(PID, 101, "prefetch")
    t = 1 * MS
    for _ in range(20):
        for j in range(10):
            b.launch(t + j * 10 * US, t + j * 10 * US + 5 * US, t + (50 + 100 * j) * US, t + (150 + 100 * j) * US,
                     pid=PID, tid=100, name=NAMES[0])
        c = b.runtime(t + 100 * US, t + 1055 * US, tid_g=ga, name="cudaStreamSynchronize_v3020")
        b.sync(t + 101 * US, t + 1052 * US, pid=PID, sync_type=3, stream=7, corr=c)
        t += 1355 * US
    k, a = 900 * US, 800 * US
    while k < t:
        b.launch(a, a + 5 * US, k, k + 2 * MS, pid=PID, tid=101, stream=13, name="kv_prefetch_kernel")
        k, a = k + 2 * MS, a + 20 * US
    return b


def test_per_step_sync_with_a_busy_side_stream_exposes_nothing(tmp_path: Path) -> None:
    """(trace: :func:`_side_stream_busy`) The scheduler's 20 syncs each drain its own stream (20 sync points, 19
    steps, period 1.355 ms), but stream 13 runs through every one of its 300 µs host pauses: GPU idle after the
    syncs 0, overlappable 0, no per-step-sync finding. The device's only idle is the 100 µs before the first kernel
    (0.8 → 0.9 ms), so it is GPU-bound at 28.0 of 28.1 ms."""
    rep = report_of(_side_stream_busy(), tmp_path)
    s = next(x for x in rep["step_sync"]["series"] if x["thread_name"] == "scheduler")
    assert (s["sync_points"], s["steps"], s["period_p50_ns"]) == (20, 19, 1_355 * US)
    assert (s["exposed_ns"], s["overlap_ns"]) == (0, 0)
    assert {f["id"] for f in rep["findings"]} == {"gpu_bound"}
    assert rep["idle_causes"]["devices"][0]["idle_ns"] == 100 * US


def _copy_stream() -> TraceBuilder:
    """25 steps of 1 ms from 1 ms: launch [t − 200, −195 µs) of a GEMM on stream 7 [t, t + 1 ms) (back to back);
    `cudaMemcpyAsync` [t − 190, t − 180 µs) of a pinned 4 MiB H2D copy on copy stream 30 [t + 100, t + 400 µs): every
    copy runs entirely under a kernel (7.5 ms of copies, 0 with no kernel)."""
    b = TraceBuilder()
    b.process(PID)
    g = b.thread(PID, PID, "python3")
    for n in range(25):
        t = 1 * MS + n * MS
        b.launch(t - 200 * US, t - 195 * US, t, t + MS, pid=PID, tid=PID, stream=7, name=NAMES[0])
        c = b.runtime(t - 190 * US, t - 180 * US, tid_g=g, name="cudaMemcpyAsync_v3020")
        b.memcpy(t + 100 * US, t + 400 * US, pid=PID, bytes=4 << 20, copy_kind=1, src_kind=1, dst_kind=2, stream=30,
                 corr=c)
    return b


def test_copies_under_compute_are_not_told_to_overlap(tmp_path: Path) -> None:
    """(trace: :func:`_copy_stream`) The copy path H2D is busy 7.5 ms, all of it under kernels (100 %), none with
    no kernel: no copy idle, no `idle_copy` or copy-path finding, no advice about the copies. The GPU is busy from
    1 ms to the end (25 of 25.2 ms)."""
    rep = report_of(_copy_stream(), tmp_path)
    p = next(x for x in rep["copy_engines"]["paths"] if x["path"] == "H2D")
    got = (p["busy_ns"], p["kernel_overlap_ns"], p["beyond_kernels_ns"], p["pinned_count"])
    assert got == (7_500 * US, 7_500 * US, 0, 25)
    ids = {f["id"] for f in rep["findings"]}
    assert ids == {"gpu_bound"}, ids
    advice = " ".join(str(f["recommendation"]) for f in rep["findings"]).lower()
    assert "copy" not in advice and "pin_memory" not in advice, advice


def _host_paced(n: int = 2000) -> TraceBuilder:
    """Eager decoding, one thread, one stream: a `cudaLaunchKernel` call [a, a + 3 µs) every 6 µs from 1 ms; each
    2 µs elementwise kernel starts 4 µs after its call returns ([a + 7, a + 9) µs); a final
    `cudaStreamSynchronize`. Kernel i ends at a_i + 9, kernel i + 1 starts at a_i + 13 µs: a 4 µs gap, and kernel
    i + 1's call ended at a_i + 9, the gap's start, so the idle-cause rule charges all of it to `queued`. But the
    gap is the host's launch interval (6 µs) minus the kernel (2 µs): with no latency at all (kernel i + 1 starting
    when its call returns) the gap would still be 4 µs, now charged to the launch path. The GPU is busy 4 of ~12 ms
    (33 %) because the host issues one kernel per 6 µs: launch-bound (busy < 50 %, median kernel 2 µs ≤ 20 µs,
    ~166,000 launches/s ≥ 5,000), not GPU-side per-kernel latency."""
    b = TraceBuilder()
    b.process(PID)
    g = b.thread(PID, PID, "python3")
    a = 1 * MS
    for _ in range(n):
        b.launch(a, a + 3 * US, a + 7 * US, a + 9 * US, pid=PID, tid=PID, name="vectorized_elementwise_kernel")
        a += 6 * US
    c = b.runtime(a, a + 5 * US, tid_g=g, name="cudaStreamSynchronize_v3020")
    b.sync(a + 1 * US, a + 4 * US, pid=PID, sync_type=3, corr=c)
    return b


def test_host_paced_tiny_kernels_are_launch_bound_not_gpu_latency(tmp_path: Path) -> None:
    """(trace: :func:`_host_paced`) The report's verdict read "Per-kernel launch latency: idle between back-to-back
    queued kernels (… 66 % of the window)" with the advice that each kernel boundary costs GPU-side latency "even
    when the work is queued (CUDA graphs included)" and that programmatic dependent launch would help. Neither
    helps here: the queue is never deeper than the one kernel just launched, and the host's 6 µs per launch bounds
    the GPU at 2 / 6 = 33 % busy. The truth is the launch-bound finding (`launch_overhead`: the host needs ~6 µs per
    kernel, the kernels 2 µs), whose advice (CUDA graphs, fusion) fits. Fixed: a queued gap whose next kernel was
    launched only after the previous one started is host-paced (docs/MODEL.md), and the launch-bound finding
    claims it (tests/findings/test_host_paced.py)."""
    rep = report_of(_host_paced(), tmp_path)
    ids = {f["id"] for f in rep["findings"]}
    assert "launch_overhead" in ids, ids
    assert not rep["headline"]["verdict"].startswith("Per-kernel launch latency"), rep["headline"]["verdict"]


def _two_collective_streams() -> TraceBuilder:
    """FSDP-like, one GPU, 30 steps of 1 ms from 1 ms: an all-gather on stream 20 [t, t + 500 µs), a reduce-scatter
    on stream 21 [t + 100, t + 600 µs) (the two collectives overlap 400 µs), then a GEMM on stream 7
    [t + 600 µs, t + 1 ms). Communication runs 600 µs of each step, none of it beside the GEMM: 18 ms exposed of
    the 30.05 ms window (from the first launch at 0.95 ms), 59.9 %."""
    b = TraceBuilder()
    b.process(PID)
    b.thread(PID, PID, "python3")
    for n in range(30):
        t = 1 * MS + n * MS
        h = t - 50 * US
        b.launch(h, h + 3 * US, t, t + 500 * US, pid=PID, tid=PID, stream=20,
                 name="ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)")
        b.launch(h + 5 * US, h + 8 * US, t + 100 * US, t + 600 * US, pid=PID, tid=PID, stream=21,
                 name="ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)")
        b.launch(h + 10 * US, h + 13 * US, t + 600 * US, t + MS, pid=PID, tid=PID, stream=7, name=NAMES[0])
    return b


def test_exposed_collectives_beside_each_other_are_not_said_alone(tmp_path: Path) -> None:
    """(trace: :func:`_two_collective_streams`) The exposed time is right (18.000 ms of 30.050 ms, 59.9 %; compute
    overlaps 0 % of it), but the evidence said the communication kernels "run with no other kernel beside them":
    for 400 µs of each step the all-gather and the reduce-scatter run beside each other. What is absent is a
    compute kernel (one of another category), which is what the metric measures (docs/METRICS.md). Fixed: the
    evidence says "no compute kernel (one of another category)"."""
    rep = report_of(_two_collective_streams(), tmp_path)
    f = finding_of(rep, "comm_exposed")
    assert f["time_at_stake_ns"] == 18 * MS
    ev = f["evidence"][0]
    assert "no other kernel" not in ev, ev
    assert ev.startswith("18.000 ms of 30.050 ms (59.9 %, device 0): communication kernels (categories `nccl`, "
                         "`custom_allreduce`, `all_to_all`) run with no compute kernel (one of another category) "
                         "beside them"), ev
