"""KV-cache management, long context, LoRA and quantized serving (KV blocks swapped to and from pinned host memory on a
side stream, chunked prefill, AWQ / Marlin / FP8 GEMMs, punica LoRA kernels): the copy finding's "fewer, larger copies"
advice follows the copies' sizes. Each trace is built by hand; the truth is worked out in the docstrings."""

from __future__ import annotations

from pathlib import Path

import pytest
from claims_support import finding_of, report_of
from synth import TraceBuilder

from nsys_llm_explainer.findings.advice import ADVICE

US = 1_000
MS = 1_000 * US
T0 = 10 * MS
PID = 100
FEWER = "move fewer and larger copies"


def _swap_in(nbytes: int, n: int = 10) -> TraceBuilder:
    """KV swap-in before each of ``n`` decode steps, one per 2 ms period t = T0 + 2i ms on thread 1: one
    ``cudaMemcpyAsync`` at [t, t + 3) µs issues a Host-to-Device copy of ``nbytes`` from pinned memory on side stream
    8 that runs [t + 1, t + 1001) µs; ``cudaStreamWaitEvent`` at [t + 4, t + 5) µs; the step's kernel, launched by a
    call at [t + 5, t + 7) µs, runs [t + 1001, t + 1901) µs on stream 7 (after the copy). Kernels run on stream 7
    only: the copies are asynchronous on a side stream, and the kernel waits on each."""
    b = TraceBuilder()
    b.process(PID)
    g = b.thread(PID, 1)
    for i in range(n):
        t = T0 + 2 * i * MS
        c = b.runtime(t, t + 3 * US, tid_g=g, name="cudaMemcpyAsync_v3020")
        b.memcpy(t + 1 * US, t + 1001 * US, pid=PID, bytes=nbytes, src_kind=1, dst_kind=2, stream=8, corr=c)
        b.runtime(t + 4 * US, t + 5 * US, tid_g=g, name="cudaStreamWaitEvent_v3020")
        b.launch(t + 5 * US, t + 7 * US, t + 1001 * US, t + 1901 * US, pid=PID, tid=1, name="decode_gemm")
    return b


def test_one_large_swap_copy_per_step_is_not_told_to_use_fewer_larger_copies(tmp_path: Path) -> None:
    """(trace: :func:`_swap_in` with one 32 MiB copy per step) Copy time with the GPU idle: 10 × 1000 µs = 10 ms,
    of which the kernel waited (without the copies: `queued` [t + 7, t + 1001), `launch` [t + 5, t + 7), the first
    launch a one-time `module_load`) ≥ 99 %: "Copies keep the kernels waiting", and 100 % of the copies' time is
    asynchronous on a side stream, so the prefetch line is given. It said "move fewer and larger copies" although
    each step moves one copy of 32 MiB (> 1 MiB, `LARGE_COPY_BYTES`: per-copy overhead is not what costs; the
    copy-path finding already tells the two apart). Now the large-copy variant of the line is given: start each copy
    earlier, keep resident what memory allows, and not the fewer-larger-copies advice."""
    rep = report_of(_swap_in(32 << 20), tmp_path)
    f = finding_of(rep, "idle_copy")
    assert f["title"].startswith("Copies keep the kernels waiting: `Host-to-Device` copies fill "), f["title"]
    assert f["recommendation"] == [ADVICE["copy.prefetch.large"].text], f["recommendation"]
    assert not any(FEWER in a for a in f["recommendation"]), f["recommendation"]
    assert "start each one earlier" in f["recommendation"][0]


def test_many_small_swap_copies_keep_the_fewer_larger_copies_advice(tmp_path: Path) -> None:
    """(trace: :func:`_swap_in` with one 16 KiB copy per step, the size of a KV block) The same timing: 10 copies of
    16 KiB average 16 KiB ≤ 1 MiB, so per-copy overhead may cost: the prefetch line keeps "move fewer and larger
    copies"."""
    rep = report_of(_swap_in(16 << 10), tmp_path)
    f = finding_of(rep, "idle_copy")
    assert f["recommendation"] == [ADVICE["copy.prefetch"].text], f["recommendation"]
    assert FEWER in f["recommendation"][0]


def _kv_retrieve(flavor: str) -> TraceBuilder:
    """LMCache-style KV retrieval on a prefix hit, 4 requests on thread 1 from T0: request r ≥ 1 first retrieves
    500 KV blocks of 64 KiB, one ``cudaMemcpyAsync`` each at [h, h + 5) µs, h = h0 + 7 i µs, issuing a pinned
    Host-to-Device copy on side stream 8 that runs [h + 3, h + 7) µs; then the request's prefill kernel, launched at
    [e, e + 5) µs (e = 10 µs after the last copy call starts), runs [e + 10 µs, e + 10.010 ms) on stream 7, the host in
    ``cudaStreamSynchronize`` until 5 µs after it; the next request starts 50 µs after the kernel."""
    b = TraceBuilder(flavor)
    b.process(PID)
    g = b.thread(PID, 1, "VllmWorker-0")
    t = T0
    for r in range(4):
        if r:
            for i in range(500):
                h = t + 7 * i * US
                c = b.runtime(h, h + 5 * US, tid_g=g, name="cudaMemcpyAsync_v3020")
                b.memcpy(h + 3 * US, h + 7 * US, pid=PID, bytes=64 << 10, src_kind=1, dst_kind=2, stream=8, corr=c)
            t += 499 * 7 * US + 10 * US
        b.launch(t, t + 5 * US, t + 10 * US, t + 10_010 * US, pid=PID, tid=1, name="flash_fwd_kernel")
        b.runtime(t + 6 * US, t + 10_015 * US, tid_g=g, name="cudaStreamSynchronize_v3020")
        t += 10_060 * US
    return b


@pytest.mark.parametrize("flavor", ["2021.5", "2024.2"])
def test_copies_the_launching_thread_issues_one_by_one_are_not_said_unshortenable_by_moving_them(
        tmp_path: Path, flavor: str) -> None:
    """(trace: :func:`_kv_retrieve`) Before each of 3 prefills the GPU idles 499 × 7 µs + 10 µs + 10 µs = 3.513 ms
    while the launching thread issues 500 copies: 500 × 4 µs = 2 ms of copies (6 ms in all) run with no kernel
    launched (the thread is in its next copy call or between calls: no kernel waited, "run while the GPU idles, before
    the next kernel is launched"), and before the first copy and between consecutive ones the thread sits in a
    ``cudaMemcpyAsync`` call with no copy in flight: 3 × (3 µs + 499 × 3 µs) = 4.500 ms of `other_api` idle. The
    host work that idles the GPU is issuing these copies, so the old line "moving or shortening the copies would not
    shorten it" was false of it (moving them to another thread, or into fewer calls, would); what holds is that
    faster copies would not. The copies average 64 KiB and the `other_api` copy-call idle is 8.9 % of the window
    (≥ 5 %): fewer, larger copies (`copy.batch`) come first, then the host line."""
    rep = report_of(_kv_retrieve(flavor), tmp_path)
    causes = {(c["kind"], c["detail"]): c for c in rep["idle_causes"]["devices"][0]["causes"]}
    assert causes[("copy", "Host-to-Device")]["ns"] == 6 * MS
    assert causes[("copy", "Host-to-Device")]["waiting_ns"] == 0
    assert causes[("other_api", "cudaMemcpyAsync")]["ns"] == 4_500 * US
    f = finding_of(rep, "idle_copy")
    assert f["title"].startswith("Copies run while the GPU idles, before the next kernel is launched: "), f["title"]
    assert ("Between these copies the GPU idles a further 4.500 ms (8.9 % of the window) with the host inside copy "
            "calls (`cudaMemcpyAsync`) and no copy running: the host issues the copies one call each, 1,500 copies "
            "averaging 65.54 kB.") in f["evidence"]
    assert f["recommendation"][:2] == [ADVICE["copy.batch"].text, ADVICE["copy.launch_first"].text]
    assert not any("moving or shortening the copies" in a for a in f["recommendation"])
    assert "faster copies would not shorten it" in f["recommendation"][1]
