"""Well-optimized workloads: what a report on a healthy trace must not claim (copies streaming under queued kernels, a
copy ending in a gap). Each trace is built by hand; the truth is worked out in the docstring."""

from __future__ import annotations

from pathlib import Path

import pytest
from claims_support import report_of
from synth import TraceBuilder

US = 1_000
PID = 100
T = 5_000_000                # first kernel
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1_execute_kernel__5x_cublas"
FA = "void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false>>(Flash_fwd_params)"


def _serving_with_streamed_copies(flavor: str) -> TraceBuilder:
    """A steady serving loop with a pinned H2D stream under it. Stream 7: 1,200 kernels queued 200 µs ahead (launch
    calls of 4 µs), in 40 µs periods from T: a 12 µs GEMM [0, 12), a 1 µs gap, a 24 µs FlashAttention [13, 37), a 3
    µs gap. Stream 14: 200 copies of 1 MiB, pinned Host-to-Device, [T + 120 i + 5, T + 120 i + 115) µs, issued by
    ``cudaMemcpyAsync`` calls 200 µs ahead. Every copy ends at 35 µs into a kernel period, inside a FlashAttention
    kernel: no copy ends in a kernel gap, so no kernel can have waited on one (each kernel after a gap starts while
    the copy in flight still runs)."""
    b = TraceBuilder(flavor)
    b.process(PID, "python3")
    g = b.thread(PID, PID, "python3")
    b.gpu(0)
    for p in range(600):
        t = T + 40 * US * p
        for s, d, name in ((0, 12, GEMM), (13, 24, FA)):
            k = t + s * US
            b.launch(k - 200 * US, k - 196 * US, k, k + d * US, pid=PID, tid=PID, name=name)
    for i in range(200):
        c0 = T + 120 * US * i + 5 * US
        c = b.runtime(c0 - 200 * US, c0 - 199 * US, tid_g=g, name="cudaMemcpyAsync_v3020")
        b.memcpy(c0, c0 + 110 * US, pid=PID, bytes=1 << 20, copy_kind=1, src_kind=1, dst_kind=2, stream=14, corr=c)
    return b


@pytest.mark.parametrize("flavor", ["2024.2", "2021.5"])
def test_copies_streaming_under_queued_kernels_neither_pace_nor_keep_them_waiting(tmp_path: Path,
                                                                                  flavor: str) -> None:
    """Window [T − 200 µs, T + 23,997 µs) (the first launch call to the last kernel's end): 24,197 µs. Idle: the
    leading 200 µs (4 µs in the first launch call, `module_load`; 196 µs queued) + 600 × 4 µs of gaps − the 3 µs
    after the last kernel (outside the window) = 2,597 µs. The copies are in flight in 5 gaps of each 120 µs
    (1 + 3 + 1 + 3 + 1 µs: 9 µs; none in [117, 120)): 1,800 µs of copy time with no kernel running
    (`beyond_kernels_ns`), 7.4 % of the window — but none of it before a copy's end: `held_ns` 0, and those ns are
    `queued` (the kernels were launched 200 µs ahead and started while the copy ran). Queued: 2,597 − 4 = 2,593 µs.

    Charging every copy-in-flight ns to `copy`, the report's verdict read "The H2D copy path sets the
    pace on device 0 (busy 90.9 %): 7.4 % of the window (1.800 ms) beyond the kernels" (HIGH), or, with the
    copy-path finding held back, "Copies keep the kernels waiting" with "100 % had a kernel waiting on the copies" —
    both false: the kernels after those gaps started while the copies still ran."""
    rep = report_of(_serving_with_streamed_copies(flavor), tmp_path)
    assert (rep["window"]["start_ns"], rep["window"]["end_ns"]) == (T - 200 * US, T + 23_997 * US)
    (h2d,) = [p for p in rep["copy_engines"]["paths"] if p["path"] == "H2D"]
    assert (h2d["busy_ns"], h2d["beyond_kernels_ns"], h2d["held_ns"]) == (22_000 * US, 1_800 * US, 0)
    (dev,) = rep["idle_causes"]["devices"]
    causes = {(c["kind"], c["detail"]): c["ns"] for c in dev["causes"]}
    assert not any(k == "copy" for k, _ in causes), causes
    assert causes[("queued", "")] == 2_593 * US
    assert dev["idle_ns"] == 2_597 * US
    ids = [f["id"] for f in rep["findings"]]
    assert "copy_path" not in ids and "idle_copy" not in ids, ids
    assert "copy" not in rep["headline"]["verdict"].lower(), rep["headline"]["verdict"]


def test_a_copy_ending_in_the_gap_is_still_charged_and_held(tmp_path: Path) -> None:
    """The same loop plus a 4 KiB pinned H2D copy on stream 15 at [T + 35, T + 39) µs: it ends 2 µs into the first
    3 µs gap [T + 37, T + 40) µs, before the GEMM at T + 40 µs starts (the streamed copy [T + 5, T + 115) µs runs
    on). The path's union is unchanged (the new copy lies under the streamed one): `beyond_kernels_ns` stays 1,800
    µs; its part up to the copy's end, [T + 37, T + 39) µs, is `held` and `copy` (Host-to-Device): 2 µs; the rest
    of that gap, [T + 39, T + 40) µs, stays queued: 2,593 − 2 = 2,591 µs."""
    b = _serving_with_streamed_copies("2024.2")
    g = b.thread(PID, PID)
    c = b.runtime(T - 150 * US, T - 149 * US, tid_g=g, name="cudaMemcpyAsync_v3020")
    b.memcpy(T + 35 * US, T + 39 * US, pid=PID, bytes=4096, copy_kind=1, src_kind=1, dst_kind=2, stream=15, corr=c)
    rep = report_of(b, tmp_path)
    (h2d,) = [p for p in rep["copy_engines"]["paths"] if p["path"] == "H2D"]
    assert (h2d["beyond_kernels_ns"], h2d["held_ns"]) == (1_800 * US, 2 * US)
    (dev,) = rep["idle_causes"]["devices"]
    causes = {(c["kind"], c["detail"]): c["ns"] for c in dev["causes"]}
    assert causes[("copy", "Host-to-Device")] == 2 * US
    assert causes[("queued", "")] == 2_591 * US
