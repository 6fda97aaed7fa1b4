"""Several processes sharing one GPU (two engines time-sliced or under MPS, a training job beside an inference job, a
monitoring process launching a few tiny kernels on the GPU another process owns). Each trace is built by hand; the truth
is worked out in the docstrings."""

from __future__ import annotations

from pathlib import Path

from claims_support import finding_of, report_of
from synth import TraceBuilder

US = 1_000
MS = 1_000 * US


def _cycle(b: TraceBuilder, pid: int, T: int, name: str) -> None:
    """Thread ``pid`` (tid = pid) of process ``pid``: 10 launch calls [T + 10 i, T + 10 i + 6) µs; their kernels back
    to back [T + 20 + 90 i, T + 110 + 90 i) µs (the last ends at T + 920 µs); then ``cudaStreamSynchronize``
    [T + 100, T + 925) µs (the sync record [T + 102, T + 922) µs)."""
    g = b.thread(pid, pid)
    for i in range(10):
        a = T + i * 10 * US
        b.launch(a, a + 6 * US, T + (20 + 90 * i) * US, T + (110 + 90 * i) * US, pid=pid, tid=pid, name=name)
    c = b.runtime(T + 100 * US, T + 925 * US, tid_g=g, name="cudaStreamSynchronize_v3020")
    b.sync(T + 102 * US, T + 922 * US, pid=pid, sync_type=3, corr=c)


def _two_engines() -> TraceBuilder:
    """Two engines time-sliced on GPU 0: pid 100 (`VLLM::EngineCore`) runs :func:`_cycle` at T = 1 + 2c ms and pid
    200 (`sglang::scheduler`) at T + 1 ms, c = 0 … 49: the window is [1, 100.925) ms (99.925 ms), the GPU busy
    90.000 ms, idle 100 µs before every step of either engine."""
    b = TraceBuilder()
    b.process(100, "VLLM::EngineCore")
    b.thread(100, 100, "VLLM::EngineCore")
    b.process(200, "sglang::scheduler")
    b.thread(200, 200, "sglang::scheduler")
    for c in range(50):
        T = 1 * MS + c * 2 * MS
        _cycle(b, 100, T, "vllm_gemm")
        _cycle(b, 200, T + 1 * MS, "sgl_gemm")
    return b


def test_step_sync_title_share_and_time_are_one_quantity(tmp_path: Path) -> None:
    """(trace: :func:`_two_engines`) Both engines hold the per-step sync pattern. Engine A's sync returns at
    T + 925 µs; the gap before its next step, [T + 1920, T + 2020) µs, is charged to it (its next kernel closes it):
    80 µs `host_cpu` + 6 µs `launch` (the call [T + 2000, T + 2006)) + 14 µs `queued`: 86 µs of host work, all of it
    overlappable (under the 820 µs it then waits in the next sync), on 49 steps: 4.214 ms; engine B the same, 4.214 ms.
    Device 0's holding series overlap 8.428 ms = 8.43 % of 99.925 ms (the `step_sync_overlap_pct` check). The title
    read "… could overlap the next step: 4.2 % (8.428 ms)": one engine's share beside both engines' time; it must
    say 8.4 % (8.428 ms)."""
    rep = report_of(_two_engines(), tmp_path)
    f = finding_of(rep, "step_sync")
    assert [s["overlap_ns"] for s in rep["step_sync"]["series"]] == [4_214 * US, 4_214 * US]
    assert f["time_at_stake_ns"] == 8_428 * US
    assert f["title"] == ("Per-step sync: `cudaStreamSynchronize` every 2.000 ms; the GPU-idle host work after it "
                          "could overlap the next step: 8.4 % (8.428 ms)")


def test_step_sync_kernel_share_is_not_another_process_s_kernels(tmp_path: Path) -> None:
    """(trace: :func:`_two_engines`) Engine A's 49 steps (its 50 syncs, 1.925 → 99.925 ms) span 980 of the device's
    1,000 kernels, but A launched 490 of them (49 %): the other 490 are engine B's. The evidence reads "49 steps
    holding 98 % of the device's kernels" and "Per step (p50): GPU busy 1.800 ms" — A's own kernels keep the GPU busy
    900 µs a step. The sentence must not present B's kernels as A's steps' work. Fixed: the series counts the
    thread's own kernels in its steps (``own_kernels_in_steps`` 490) and the sentence says "(49 % launched by this
    thread, the rest by others)"."""
    rep = report_of(_two_engines(), tmp_path)
    ev = finding_of(rep, "step_sync")["evidence"][0]
    assert ("the 49 steps from the first to the last sync point hold 98 % of the device's 1,000 kernels in the window "
            "(49 % launched by this thread, the rest by others).") in ev
    series = [s for s in rep["step_sync"]["series"] if s["holds"]]
    assert sorted((s["kernels_in_steps"], s["own_kernels_in_steps"]) for s in series) == [(980, 490), (980, 490)]


def _monitored(b: TraceBuilder, monitor_pid: int = 300) -> TraceBuilder:
    """pid 100 (`python3`) owns GPU 0: :func:`_cycle` every 1 ms from T = 1 ms (c = 0 … 49), its next launch call
    75 µs after its sync returns. pid 300 (`gpu_monitor`) sleeps in `nanosleep` and wakes once per cycle (c < 49) to
    launch one 2 µs probe into the owner's gap: call [T + 1000, T + 1005) µs, kernel [T + 1010, T + 1012) µs (49
    kernels, 98 µs: 0.2 % of kernel time)."""
    b.process(100, "python3")
    b.thread(100, 100, "python3")
    if monitor_pid != 100:
        b.process(monitor_pid, "gpu_monitor")
    gm = b.thread(monitor_pid, 300, "gpu_monitor")
    prev = 0
    for c in range(50):
        T = 1 * MS + c * MS
        _cycle(b, 100, T, "gemm")
        if c < 49:
            a = T + 1000 * US
            b.osrt(prev, a, tid_g=gm, name="nanosleep")
            b.launch(a, a + 5 * US, a + 10 * US, a + 12 * US, pid=monitor_pid, tid=300, name="probe_kernel",
                     stream=13)
            prev = a + 5 * US
    return b


def test_monitor_probe_does_not_make_its_sleep_the_idle_cause(tmp_path: Path) -> None:
    """(trace: :func:`_monitored`) The owner's gap [T + 920, T + 1020) µs is split by the monitor's probe: the idle
    [T + 920, T + 1010) µs is judged from the monitor's thread, in `nanosleep` until T + 1000: 49 × 80 µs = 3.920 ms
    charged to `osrt` and the finding "The launching thread waits in `nanosleep` while the GPU idles: 7.9 % (3.920 ms)"
    (the thread `gpu_monitor`), with advice to find what releases its waits. False: the monitor launched 0.2 % of the
    kernel time; the GPU idles because the owner's thread works on the host between its sync and its next launch
    (without the probes: `host_cpu` and a per-step sync finding of 49 × 81 µs = 3.969 ms). The monitor's sleep is no
    idle cause. Fixed: a process holding under 1 % of the device's launched kernel time (``BYSTANDER_SHARE``) is a
    bystander, and a gap its kernel closes is judged from the next kernel another process launched: the owner's."""
    rep = report_of(_monitored(TraceBuilder()), tmp_path)
    assert not any(f["id"] == "idle_osrt" for f in rep["findings"]), [f["title"] for f in rep["findings"]]
    assert finding_of(rep, "step_sync")["time_at_stake_ns"] == 3_969 * US
    assert not any(c["kind"] == "osrt" for d in rep["idle_causes"]["devices"] for c in d["causes"])


def test_a_thread_of_the_workload_s_own_process_is_no_bystander(tmp_path: Path) -> None:
    """The same probes launched by a thread (tid 300) of the owner's own process (pid 100): the thread's kernels are
    part of that process's work, so the gap its kernel closes stays its own: [T + 920, T + 1000) µs in `nanosleep`
    (80 µs × 49 = 3.920 ms of `osrt`), as before the bystander rule."""
    rep = report_of(_monitored(TraceBuilder(), monitor_pid=100), tmp_path)
    (osrt,) = [c for c in rep["idle_causes"]["devices"][0]["causes"] if c["kind"] == "osrt"]
    assert (osrt["detail"], osrt["ns"], osrt["gap_count"]) == ("nanosleep", 3_920 * US, 49)
