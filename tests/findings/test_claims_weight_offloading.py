"""Weight-offloading / CPU-offload traces: the copy titles quote the copies they name, the copy-path advice to use
both copy directions needs copies in the other direction, and copies that outlast the kernels over twice are told to
move fewer bytes before overlapping (numbers worked out in the docstrings)."""

from __future__ import annotations

from pathlib import Path

import pytest
from synth import TraceBuilder

from nsys_llm_explainer.findings.advice import ADVICE
from nsys_llm_explainer.options import options_from_kwargs
from nsys_llm_explainer.pipeline import analyze_path

US, MS = 1_000, 1_000_000
PID = 100
PINNED, DEVICE = 1, 2
H2D, D2H = 1, 2


def _run(b: TraceBuilder, tmp_path: Path, name: str):
    p = tmp_path / name
    b.write(str(p), overwrite=True)
    return analyze_path(str(p), options_from_kwargs())


def _copy(b: TraceBuilder, g: int, call: int, start: int, end: int, *, kind: int = H2D, stream: int = 8) -> None:
    """A pinned 64 MiB copy issued by ``cudaMemcpyAsync`` at [call, call + 10 µs), run [start, end) on ``stream``."""
    src, dst = (PINNED, DEVICE) if kind == H2D else (DEVICE, PINNED)
    c = b.runtime(call, call + 10 * US, tid_g=g, name="cudaMemcpyAsync_v3020")
    b.memcpy(start, end, pid=PID, bytes=64 << 20, copy_kind=kind, src_kind=src, dst_kind=dst, stream=stream, corr=c)


def test_kv_swap_title_quotes_the_named_direction_s_time_not_both(tmp_path: Path) -> None:
    """KV-cache swap on preemption: 30 decode kernels of 1 ms, each launched at t, run [t + 20, t + 1020) µs, the
    host in `cudaStreamSynchronize` [t + 15, t + 1025) µs, next step at t + 1030 µs. Before step 10 a 5 ms swap-out
    (Device-to-Host, stream 9) runs [t + 20, t + 5020) µs with the host synchronizing on it, before step 20 a 5 ms
    swap-in (Host-to-Device); the next step starts 5040 µs later. Window [first call, last kernel end) =
    30 × 1030 µs − 5 µs (the last step's tail) + 2 × 5040 µs − 20... = 40.975 ms; each copy is idle time charged
    to `copy` (5 ms each, 10 ms together, 24.4 %). The title names `Device-to-Host` (half of the kind: tie broken by
    name) and its share 5 / 40.975 = 12.2 %; it must quote D2H's 5.000 ms, not both directions' 10.000 ms (the old
    title said "fill 12.2 % of the window, 10.000 ms"). Time at stake stays both directions' 10 ms."""
    b = TraceBuilder()
    b.process(PID)
    g = b.thread(PID, PID, "MainThread")
    t = 1 * MS
    for i in range(30):
        if i in (10, 20):
            _copy(b, g, t, t + 20 * US, t + 5_020 * US, kind=D2H if i == 10 else H2D, stream=9)
            b.runtime(t + 15 * US, t + 5_030 * US, tid_g=g, name="cudaStreamSynchronize_v3020")
            t += 5_040 * US
        b.launch(t, t + 10 * US, t + 20 * US, t + 1_020 * US, pid=PID, tid=PID, name="decode")
        b.runtime(t + 15 * US, t + 1_025 * US, tid_g=g, name="cudaStreamSynchronize_v3020")
        t += 1_030 * US
    rep = _run(b, tmp_path, "kvswap.sqlite")
    (f,) = [f for f in rep.findings if f.id == "idle_copy"]
    assert f.title == "Copies keep the kernels waiting: `Device-to-Host` copies fill 12.2 % of the window, 5.000 ms"
    assert "By copy kind: `Device-to-Host` 5.000 ms; `Host-to-Device` 5.000 ms." in f.evidence
    assert f.time_at_stake_ns == 10 * MS


def test_zero_offload_nvtx_title_quotes_the_named_range_s_time(tmp_path: Path) -> None:
    """ZeRO-Offload style training, 3 steps of 130 ms from 1 ms: NVTX `train_step` [t, t + 130 ms) on the launching
    thread; 20 kernels of 990 µs at [t + j ms + 10 µs, t + (j + 1) ms); gradients D2H [t + 20, t + 25) ms (host in
    `cudaStreamSynchronize` [t + 20 ms, t + 25.010 ms)); CPU Adam in NVTX `cpu_adam` [t + 25.020, t + 125) ms with
    no CUDA call; parameters H2D [t + 125.020, t + 129.980) ms (host synchronizing until t + 129.990 ms). Idle in
    `cpu_adam`: 3 × (125 − 25.020) ms = 299.940 ms = 76.9 % of the 390 ms window; `train_step` alone holds 3 × 25 µs
    (the pieces outside `cpu_adam` and every CUDA call: [25.010, 25.020) and [129.990, 130.000) ms + 5 µs in the
    launch gap) = 75 µs. The title names `cpu_adam` and must quote its 299.940 ms, not the `nvtx` kind's 300.005 ms
    (`cpu_adam` + `train_step`, less the edge bins)."""
    b = TraceBuilder()
    b.process(PID)
    g = b.thread(PID, PID, "MainThread")
    for s in range(3):
        t = 1 * MS + s * 130 * MS
        b.nvtx_push_pop(t, t + 130 * MS, "train_step", tid_g=g)
        for j in range(20):
            b.launch(t + j * 10 * US, t + j * 10 * US + 5 * US, t + j * MS + 10 * US, t + (j + 1) * MS, pid=PID,
                     tid=PID, name="fwd_bwd")
        _copy(b, g, t + 19_990 * US, t + 20 * MS, t + 25 * MS, kind=D2H)
        b.runtime(t + 20 * MS, t + 25_010 * US, tid_g=g, name="cudaStreamSynchronize_v3020")
        b.nvtx_push_pop(t + 25_020 * US, t + 125 * MS, "cpu_adam", tid_g=g)
        _copy(b, g, t + 125 * MS, t + 125_020 * US, t + 129_980 * US)
        b.runtime(t + 125_015 * US, t + 129_990 * US, tid_g=g, name="cudaStreamSynchronize_v3020")
    rep = _run(b, tmp_path, "zero.sqlite")
    (f,) = [f for f in rep.findings if f.id == "idle_nvtx"]
    assert f.title == "The GPU idles while the host is in NVTX range `cpu_adam` (76.9 % of the window, 299.940 ms)"


def _streamed_layers(d2h: bool) -> TraceBuilder:
    """20 layers, per layer i (t = 1 ms + 3i ms): a pinned 64 MiB H2D copy [t, t + 3 ms) on stream 8, the layer's
    kernel [t + 3, t + 4) ms on stream 7 and an event sync; with ``d2h`` also a 64 KiB pinned D2H copy
    [t + 3.5, t + 3.6) ms on stream 9."""
    b = TraceBuilder()
    b.process(PID)
    g = b.thread(PID, PID, "MainThread")
    for i in range(20):
        t = 1 * MS + i * 3 * MS
        _copy(b, g, t, t, t + 3 * MS)
        b.launch(t + 20 * US, t + 30 * US, t + 3 * MS, t + 4 * MS, pid=PID, tid=PID, name="layer_fwd")
        b.runtime(t + 40 * US, t + 2_990 * US, tid_g=g, name="cudaEventSynchronize_v3020")
        if d2h:
            c = b.runtime(t + 2_995 * US, t + 2_999 * US, tid_g=g, name="cudaMemcpyAsync_v3020")
            b.memcpy(t + 3_500 * US, t + 3_600 * US, pid=PID, bytes=64 << 10, copy_kind=D2H, src_kind=DEVICE,
                     dst_kind=PINNED, stream=9, corr=c)
    return b


def test_a_one_direction_copy_path_is_not_told_to_use_both_directions(tmp_path: Path) -> None:
    """Layer weights streamed H2D faster than... slower than compute: per layer i (t = 1 ms + 3i ms), a pinned 64 MiB
    H2D copy [t, t + 3 ms) on stream 8 and the layer's kernel [t + 3, t + 4) ms on stream 7 (under copy i + 1).
    H2D path busy 60 ms of the 61 ms window (98.4 %), 19 ms under kernels (31.7 %), 41 ms beyond them (67.2 %): the
    copy path paces. The trace has no Device-to-Host copy at all, so "Use both copy directions at once: host-to-device
    and device-to-host copies run on separate copy engines …" (`copy_pace.engines`) has nothing to act on; keeping
    the weights resident / quantized (`copy_pace.host.resident`) stays. The copies are 64 MiB each: "larger, fewer
    copies (per-copy overhead)" (`copy_pace.fewer`) does not fit them either; `copy_pace.less` is given instead."""
    rep = _run(_streamed_layers(d2h=False), tmp_path, "stream.sqlite")
    (f,) = [f for f in rep.findings if f.id == "copy_path"]
    assert f.title == ("The H2D copy path sets the pace on device 0 (busy 98.4 %): 67.2 % of the window (41.000 ms) "
                       "beyond the kernels")
    assert ADVICE["copy_pace.host.resident"].text in f.recommendation
    assert ADVICE["copy_pace.engines"].text not in f.recommendation
    assert f.recommendation[-1] == ADVICE["copy_pace.less"].text


def test_a_copy_path_with_copies_the_other_way_keeps_the_both_directions_advice(tmp_path: Path) -> None:
    """As above, plus per layer a 64 KiB pinned Device-to-Host copy [t + 3.5, t + 3.6) ms on stream 9 (activations
    offloaded): the other direction has copies on device 0, so `copy_pace.engines` is given."""
    rep = _run(_streamed_layers(d2h=True), tmp_path, "both.sqlite")
    (f,) = [f for f in rep.findings if f.id == "copy_path"]
    assert f.cause == ("copy_path", "Host-to-Device")
    assert ADVICE["copy_pace.engines"].text in f.recommendation


def _accelerate_offload(flavor: str, kernel_us: int) -> TraceBuilder:
    """accelerate ``device_map="auto"`` CPU offload, batch-1 decode: 32 offloaded layers, layer i from
    t = 1 ms + i × (9.068 ms + 6 × ``kernel_us`` µs). Its AlignDevicesHook moves the layer's 3 weight tensors to the
    GPU from pageable host memory on the default stream 7: copy j's ``cudaMemcpyAsync`` [s, s + 3.010 ms) (pageable:
    the call returns when the copy is done), the copy [s + 5 µs, s + 3.005 ms), 3 ms for 30,000,000 B (10 GB/s),
    s = t + 3.020 j ms; then the layer's 6 kernels, launched at [t + 9.060 ms + 6k µs, + 5 µs), run back to back
    from t + 9.068 ms, ``kernel_us`` each, on stream 7 (serialized with the copies)."""
    b = TraceBuilder(flavor)
    b.process(PID)
    g = b.thread(PID, PID, "python3")
    t = 1 * MS
    for _ in range(32):
        for j in range(3):
            s = t + j * 3_020 * US
            c = b.runtime(s, s + 3_010 * US, tid_g=g, name="cudaMemcpyAsync_v3020")
            b.memcpy(s + 5 * US, s + 3_005 * US, pid=PID, bytes=30_000_000, copy_kind=H2D, src_kind=0,
                     dst_kind=DEVICE, stream=7, corr=c)
        for k in range(6):
            k0 = t + 9_068 * US + k * kernel_us * US
            b.launch(t + (9_060 + 6 * k) * US, t + (9_065 + 6 * k) * US, k0, k0 + kernel_us * US, pid=PID, tid=PID,
                     name="void gemv2T_kernel_val<int, int, __half, __half, float, 128, 16, 4, 4, false, false>")
        t += 9_068 * US + 6 * kernel_us * US
    return b


@pytest.mark.parametrize("flavor", ["2021.5", "2026.2"])
def test_weights_copied_far_longer_than_the_kernels_run_are_told_to_move_fewer_bytes_first(tmp_path: Path,
                                                                                           flavor: str) -> None:
    """(trace: :func:`_accelerate_offload`, 30 µs kernels) Copy time with the GPU idle: 32 × 3 × 3 ms = 288 ms of
    pageable Host-to-Device copies; kernels: 32 × 6 × 30 µs = 5.760 ms, less than half of it. Overlapping the copies
    with compute could hide at most those 5.760 ms (2 % of them): the report's "Do first" said "Overlap copies with
    compute …", a lever worth 2 % here. Now the finding says how little overlap can hide, and its first line is to move
    fewer bytes over the host link (keep the layers resident / quantize); the overlap and pinning lines follow."""
    rep = _run(_accelerate_offload(flavor, 30), tmp_path, "accelerate.sqlite")
    (f,) = [f for f in rep.findings if f.id == "idle_copy"]
    assert ("Device 0 ran 5.760 ms of kernels in the window, less than half the 288.000 ms these H2D copies ran with "
            "the GPU idle: overlapping the copies with the kernels could hide at most that much; the rest takes fewer "
            "bytes over the host link or faster copies.") in f.evidence
    assert f.recommendation[0] == ADVICE["copy_pace.host.resident"].text
    assert ADVICE["copy.overlap"].text in f.recommendation and ADVICE["copy.pageable"].text in f.recommendation


def test_weights_copied_no_more_than_twice_as_long_as_the_kernels_run_keep_the_overlap_advice_first(tmp_path: Path
                                                                                                    ) -> None:
    """(trace: :func:`_accelerate_offload`, 800 µs kernels: a larger batch) The same 288 ms of copies beside
    32 × 6 × 800 µs = 153.600 ms of kernels, more than half of them: overlap could hide over half the copy time, so
    overlapping stays the first line and the fewer-bytes line and its evidence are not given."""
    rep = _run(_accelerate_offload("2024.2", 800), tmp_path, "accelerate_batch.sqlite")
    (f,) = [f for f in rep.findings if f.id == "idle_copy"]
    assert f.recommendation[0] == ADVICE["copy.overlap"].text
    assert ADVICE["copy_pace.host.resident"].text not in f.recommendation
    assert not any("less than half" in e for e in f.evidence)


def _zero_inference(copy_ms: int, layer_ms: int, flavor: str, hook: str = "fetch_sub_module") -> TraceBuilder:
    """DeepSpeed ZeRO-Inference style weight streaming, 24 layers: the host issues layer i (NVTX ``hook`` range, 50 µs,
    around it) when layer i − 1's kernels start: a pinned 64 MiB Host-to-Device ``cudaMemcpyAsync`` on side stream 13,
    ``cudaEventRecord``, ``cudaStreamWaitEvent`` on stream 7 and 4 GEMM launches. Copy i runs ``copy_ms`` from max(copy
    i − 1's end, layer i − 2's kernels' end + 10 µs) (two weight buffers); layer i's 4 GEMMs of ``layer_ms`` / 4 each
    run back to back on stream 7 from max(copy i's end, layer i − 1's end); the host ends in ``cudaStreamSynchronize``
    until the last kernel ends."""
    b = TraceBuilder(flavor)
    b.process(PID)
    g = b.thread(PID, PID, "python3")
    gemm = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1_execute_segment_k_off"
    k_start: dict = {}
    k_end: dict = {}
    copy_end, host = 0, 1 * MS
    for i in range(24):
        h = max(host, k_start.get(i - 1, 0))
        b.nvtx_push_pop(h, h + 50 * US, hook, tid_g=g)
        c0 = max(copy_end, k_end.get(i - 2, 0), h + 10 * US)
        copy_end = c0 + copy_ms * MS
        _copy(b, g, h, c0, copy_end, stream=13)
        b.runtime(h + 12 * US, h + 14 * US, tid_g=g, name="cudaEventRecord_v3020")
        b.runtime(h + 15 * US, h + 16 * US, tid_g=g, name="cudaStreamWaitEvent_v3020")
        k_start[i] = k = max(copy_end, k_end.get(i - 1, 0))
        for j in range(4):
            b.launch(h + (20 + 6 * j) * US, h + (24 + 6 * j) * US, k, k + layer_ms * MS // 4, pid=PID, tid=PID,
                     name=gemm)
            k += layer_ms * MS // 4
        k_end[i], host = k, h + 60 * US
    b.runtime(host, k_end[23] + 10 * US, tid_g=g, name="cudaStreamSynchronize_v3020")
    return b


def test_weights_prefetched_under_compute_are_not_called_the_bottleneck(tmp_path: Path) -> None:
    """(trace: :func:`_zero_inference`, 3 ms copies under 8 ms layers) Copy i + 1 runs under layer i's kernels: the
    kernels run back to back from the first copy's end (3.010 ms after the first call) to the end, 192 ms of a
    195.010 ms window (98.5 %), and the copies hold the GPU idle only before the first layer (3 ms, 1.5 % < 5 %): the
    run is GPU-bound and no copy finding names the copies."""
    rep = _run(_zero_inference(3, 8, "2026.2"), tmp_path, "zero_hidden.sqlite")
    assert rep.findings[0].id == "gpu_bound"
    assert not [f for f in rep.findings if f.category == "copy_bound" or f.id in ("idle_copy", "copy_path")]


def test_weights_prefetched_too_late_are_a_copy_path_that_paces_with_fewer_bytes_advice(tmp_path: Path) -> None:
    """(trace: :func:`_zero_inference`, 6 ms copies beside 4 ms layers, 2022.4 exporter) The host issues each prefetch
    when the previous layer's kernels start, right after its copy: the copies run 10 µs apart, copy i from
    1.010 + 6.010 i ms, the last kernel ends at 149.240 ms; the H2D path is busy 24 × 6 = 144 ms of the 148.240 ms
    window (97.1 %); with no kernel running: the first copy's 6 ms and 23 × (6.010 − 4) ms = 52.230 ms (35.2 %), the
    time each layer's kernels wait on their event. The copy path sets the pace. Its copies are already asynchronous
    on a side stream and 64 MiB each: the advice is fewer bytes over the host link and not copying what is not needed,
    not "overlap" nor "fewer, larger copies"."""
    rep = _run(_zero_inference(6, 4, "2022.4"), tmp_path, "zero_late.sqlite")
    f = rep.findings[0]
    assert f.id == "copy_path" and f.cause == ("copy_path", "Host-to-Device")
    assert f.title == ("The H2D copy path sets the pace on device 0 (busy 97.1 %): 35.2 % of the window (52.230 ms) "
                       "beyond the kernels")
    assert f.recommendation == (ADVICE["copy_pace.host.resident"].text, ADVICE["copy_pace.less"].text)


def test_copies_that_ran_before_the_next_launch_are_not_said_to_need_fewer_bytes(tmp_path: Path) -> None:
    """Layer weights copied while the host prepares the next launch: per 1 ms period from 1 ms, a pinned 64 MiB
    Host-to-Device copy issued at [t, t + 10) µs runs [t + 5, t + 805) µs on side stream 8 while the host works
    outside CUDA calls; the kernel is launched at [t + 900, t + 905) µs and runs [t + 910, t + 960) µs on stream 7.
    The copies (800 µs a period) outlast the kernels (50 µs) over twice, but no kernel waited on them: the GPU idled
    for want of a launched kernel ("run while the GPU idles, before the next kernel is launched", advice: the host's).
    The evidence said "the rest takes fewer bytes over the host link or faster copies", which the finding's own
    advice ("faster copies would not shorten it") contradicts; it is not given."""
    b = TraceBuilder()
    b.process(PID)
    g = b.thread(PID, PID, "MainThread")
    for i in range(40):
        t = 1 * MS + i * MS
        _copy(b, g, t, t + 5 * US, t + 805 * US)
        b.launch(t + 900 * US, t + 905 * US, t + 910 * US, t + 960 * US, pid=PID, tid=PID, name="layer_fwd")
    rep = _run(b, tmp_path, "early.sqlite")
    (f,) = [f for f in rep.findings if f.id == "idle_copy"]
    assert f.title.startswith("Copies run while the GPU idles, before the next kernel is launched"), f.title
    assert not any("less than half" in e for e in f.evidence), f.evidence
    assert f.recommendation[0] == ADVICE["copy.launch_first"].text


def _nvme_offload(flavor: str) -> TraceBuilder:
    """ZeRO-Infinity style NVMe offload with libaio, 10 layers, layer i from t = 1 ms + 19.760 i ms: the I/O thread
    ``ds_aio_worker`` (tid 107) reads the layer's weights in 4 blocks, each ``io_submit`` [r, r + 30) µs then
    ``io_getevents`` [r + 40 µs, r + 4 ms), r = t + 4.020 k ms, then waits in ``pthread_cond_wait`` until the next
    layer; the launching thread waits in ``pthread_cond_wait`` [t + 10 µs, t + 16.070 ms), then at h = t + 16.100 ms
    copies the pinned buffer to the GPU (64 MiB, [h + 5 µs, h + 2.605 ms) on stream 7) and launches 4 GEMMs that run
    back to back from h + 2.610 ms, 250 µs each, synchronizing until h + 3.615 ms."""
    b = TraceBuilder(flavor)
    b.process(PID)
    g = b.thread(PID, PID, "python3")
    io = b.thread(PID, PID + 7, "ds_aio_worker")
    for i in range(10):
        t = 1 * MS + i * 19_760 * US
        for k in range(4):
            r = t + k * 4_020 * US
            b.osrt(r, r + 30 * US, tid_g=io, name="io_submit")
            b.osrt(r + 40 * US, r + 4 * MS, tid_g=io, name="io_getevents")
        b.osrt(t + 16_060 * US, t + 19_760 * US, tid_g=io, name="pthread_cond_wait")
        b.osrt(t + 10 * US, t + 16_070 * US, tid_g=g, name="pthread_cond_wait")
        h = t + 16_100 * US
        _copy(b, g, h, h + 5 * US, h + 2_605 * US, stream=7)
        for j in range(4):
            k0 = h + 2_610 * US + j * 250 * US
            b.launch(h + (12 + 6 * j) * US, h + (16 + 6 * j) * US, k0, k0 + 250 * US, pid=PID, tid=PID, name="gemm")
        b.runtime(h + 40 * US, h + 3_615 * US, tid_g=g, name="cudaStreamSynchronize_v3020")
    return b


@pytest.mark.parametrize("flavor", ["2022.4", "2026.2"])
def test_an_nvme_offload_thread_waiting_on_libaio_reads_is_file_io(tmp_path: Path, flavor: str) -> None:
    """(trace: :func:`_nvme_offload`) While the launching thread waits (16.060 ms a layer), the I/O thread is in
    ``io_getevents`` 4 × 3.960 = 15.840 ms (98.6 %) and ``io_submit`` 110 µs: it waits for its own reads to complete,
    file I/O as a blocking ``pread`` is. The report said "No other thread of its process is seen working during these
    waits … the GPU idles for lack of load: batch requests or raise the load" (``io_getevents`` was a call that waits
    on another thread); it now says the I/O thread works 99 % of the waits in file I/O and gives the I/O advice."""
    rep = _run(_nvme_offload(flavor), tmp_path, "nvme.sqlite")
    (f,) = [f for f in rep.findings if f.id == "idle_osrt"]
    assert f"Meanwhile: `ds_aio_worker` (tid {PID + 7}) works 99 % of that time (in `io_getevents` 99 %, file I/O)." \
        in f.evidence, f.evidence
    assert f.recommendation[0] == ADVICE["wait.io"].text
