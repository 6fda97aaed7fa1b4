"""The launch-bound composite takes no host time after a drain (docs/FINDINGS.md, "Launch-bound pattern";
docs/MODEL.md, "After a drain"): the `host_cpu` ns between the return of a blocking sync call of the gap's thread and
that thread's next launch call are the step's host work, not per-kernel launch overhead. Traces built by hand;
answers worked out in the docstrings."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict

from claims_support import finding_of, report_of
from synth import TraceBuilder

US = 1_000
MS = 1_000 * US
PID = 100
ADD = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>(int, float*)"


def _loop(steps: int, per_step: int, item: bool) -> TraceBuilder:
    """One thread (pid 100, tid 1), stream 7. Step s, kernel k at a = 300 s + 20 k µs: `cudaLaunchKernel` [a, a + 5)
    µs, a 5 µs elementwise kernel [a + 7, a + 12) µs. With ``item`` the step's last launch is followed by a
    `cudaStreamSynchronize` [a + 5, a + 13) µs that returns after its kernel (the `.item()` of a training loss)."""
    b = TraceBuilder()
    b.gpu(0, "NVIDIA A100-SXM4-80GB", sm_count=108, computeMajor=8, computeMinor=0)
    b.process(PID, "python3")
    g = b.thread(PID, 1, "python3")
    for s in range(steps):
        for k in range(per_step):
            a = s * 300 * US + k * 20 * US
            b.launch(a, a + 5 * US, a + 7 * US, a + 12 * US, pid=PID, tid=1, stream=7, name=ADD)
        if item:
            c = b.runtime(a + 5 * US, a + 13 * US, tid_g=g, name="cudaStreamSynchronize_v3020")
            b.sync(a + 6 * US, a + 12 * US, pid=PID, sync_type=3, stream=7, corr=c)
    return b


def _cause(rep: Dict[str, Any], kind: str) -> Dict[str, Any]:
    return next(c for c in rep["idle_causes"]["devices"][0]["causes"] if c["kind"] == kind)


def test_eager_loop_without_syncs_keeps_every_short_host_gap(tmp_path: Path) -> None:
    """One step of 225 kernels 20 µs apart (``_loop(1, 225)``): 224 gaps of 15 µs [a + 12, a + 27): `host_cpu`
    [a + 12, a + 20) 8 µs, `launch` [a + 20, a + 25) 5 µs, `queued` 2 µs — host-paced (docs/MODEL.md: the call
    returned at a + 25, after kernel k started at a + 7; capped at kernel k's own 2 µs delay: all of it). No sync
    call: nothing lies after a drain, the launch overhead is 224 × 15 µs = 3.360 ms, over 225 kernels 14.93 µs per
    kernel (it read 224 × 13 µs, 12.94 µs, before host-paced queued time counted)."""
    rep = report_of(_loop(1, 225, item=False), tmp_path)
    assert "after_sync_short_ns" not in _cause(rep, "host_cpu")
    f = finding_of(rep, "launch_overhead")
    assert f["time_at_stake_ns"] == 224 * 15 * US
    assert f["title"].startswith("Launch-bound: the GPU waits ~14.93 µs per kernel for its launch; the kernels run "
                                  "~5.00 µs: "), f["title"]


def test_per_step_item_keeps_launch_overhead_inside_the_step(tmp_path: Path) -> None:
    """50 steps of 10 kernels (``_loop(50, 10)``), each step's last launch followed by a `cudaStreamSynchronize`
    returning at a9 + 13 µs, a9 = 300 s + 180 µs. Inside a step: 9 gaps of 15 µs, 8 µs `host_cpu` + 5 µs `launch`
    + 2 µs queued. Between steps: the gap [a9 + 12, 300 (s + 1) + 7) µs = 115 µs: `sync` 1 µs, then `host_cpu`
    [a9 + 13, 300 (s + 1)) = 107 µs after the drain (the thread launched nothing since its sync returned), `launch`
    5 µs, queued 2 µs. So `host_cpu` = 50 × 9 × 8 + 49 × 107 = 3.600 + 5.243 = 8.843 ms, 5.243 ms of it after a drain;
    launch overhead = 499 launch gaps × 5 µs + 499 host-paced queued 2 µs (each call returned after the kernel
    before it started; docs/MODEL.md "Host-paced queued time") + 3.600 ms = 2.495 + 0.998 + 3.600 = 7.093 ms (it
    read 11.338 ms with the between-step host work, 6.095 ms before host-paced queued time counted), 14.19 µs per
    kernel over 500 kernels; the 5.243 ms stay `host_cpu`'s own."""
    rep = report_of(_loop(50, 10, item=True), tmp_path)
    hc = _cause(rep, "host_cpu")
    assert hc["ns"] == 8_843 * US and hc["after_sync_short_ns"] == 5_243 * US
    f = finding_of(rep, "launch_overhead")
    assert f["time_at_stake_ns"] == 7_093 * US
    assert f["title"].startswith("Launch-bound: the GPU waits ~14.19 µs per kernel for its launch"), f["title"]
    assert "host CPU between launches (gaps < 1 ms) 3.600 ms" in f["evidence"][1], f["evidence"][1]
