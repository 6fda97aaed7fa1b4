"""KV-cache management, long context, LoRA and quantized serving (KV blocks swapped to and from pinned host memory on a
side stream, chunked prefill, AWQ / Marlin / FP8 GEMMs, punica LoRA kernels): the copy finding's "fewer, larger copies"
advice follows the copies' sizes. Each trace is built by hand; the truth is worked out in the docstrings."""

from __future__ import annotations

from pathlib import Path

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
