"""Claims about copies (copy paths, copy idle, memory kinds) on hand-built traces whose truth is known by
construction (numbers worked out in the docstrings)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import pytest
from synth import TraceBuilder

from nsys_llm_explainer.findings.advice import ADVICE
from nsys_llm_explainer.options import options_from_kwargs
from nsys_llm_explainer.pipeline import analyze_path

US = 1_000
PID = 7
T0 = 100 * US   # the first period starts here (its launch call before it)


def _run(b: TraceBuilder, tmp_path: Path, name: str, **options):
    p = tmp_path / name
    b.write(str(p), overwrite=True)
    return analyze_path(str(p), options_from_kwargs(**options))


def test_a_copy_path_hidden_under_the_kernels_does_not_set_the_pace(tmp_path: Path) -> None:
    """100 periods of 100 µs, window [T0, T0 + 10 ms): a 90 µs kernel at [0, 90) µs of each on stream 7 and a pinned
    2 MiB Host-to-Device copy at [10, 60) µs on stream 8, inside the kernel. H2D path busy 50 µs of 100 (50.0 %),
    all of it under a kernel (overlap 100 %), 0 µs beyond the kernels: the kernels (busy 90.0 %) set the pace, the
    copies are hidden. It read "The H2D copy path sets the pace on device 0 (busy 50.0 %): 0.0 % of the window
    (0.00 µs) beyond the kernels" beside the GPU-bound finding ("kernel time sets the pace"). The check
    ``copy_path_beyond_kernels_pct`` = |C \\ K| / window = 0 < 5 now fails; GPU-bound stays."""
    b = TraceBuilder()
    b.process(PID)
    g = b.thread(PID, 1)
    for i in range(100):
        t = T0 + i * 100 * US
        b.launch(t - 3 * US, t - 1 * US, t, t + 90 * US, pid=PID, tid=1, name="gemm_layer")
        c = b.runtime(t + 1 * US, t + 3 * US, tid_g=g, name="cudaMemcpyAsync_v3020")
        b.memcpy(t + 10 * US, t + 60 * US, pid=PID, bytes=2 << 20, src_kind=1, dst_kind=2, stream=8, corr=c)
    rep = _run(b, tmp_path, "hidden.sqlite", window=(T0, T0 + 10_000 * US))
    (h2d,) = rep.copy_engines.paths
    assert (h2d.busy_ns, h2d.kernel_overlap_ns, h2d.beyond_kernels_ns) == (5_000 * US, 5_000 * US, 0)
    ids = [f.id for f in rep.findings]
    assert ids[0] == "gpu_bound" and "copy_path" not in ids and "idle_copy" not in ids, ids
    assert rep.headline.top_finding_id == "gpu_bound"


def test_a_copy_path_with_kernels_under_it_and_idle_beyond_them_still_paces(tmp_path: Path) -> None:
    """100 periods of 100 µs, window [T0, T0 + 10 ms): a 50 µs kernel at [0, 50) µs on stream 7 and a pinned 1 MiB
    Host-to-Device copy at [20, 98) µs on stream 8. H2D busy 78 µs of 100 (78.0 %), 30 µs under the kernel
    (38.5 % ≥ 25), 48 µs beyond it: 4.8 ms, 48.0 % of the window, which ends with the last copy at T0 + 9 998 µs
    (4 800 / 9 998 ≥ 5 %): the copy path sets the pace, medium (< 80 %); it
    claims the 48 µs × 100 = 4.8 ms the idle-cause table charges to Host-to-Device copies."""
    b = TraceBuilder()
    b.process(PID)
    g = b.thread(PID, 1)
    for i in range(100):
        t = T0 + i * 100 * US
        b.launch(t - 3 * US, t - 1 * US, t, t + 50 * US, pid=PID, tid=1, name="gemm")
        c = b.runtime(t + 1 * US, t + 2 * US, tid_g=g, name="cudaMemcpyAsync_v3020")
        b.memcpy(t + 20 * US, t + 98 * US, pid=PID, bytes=1 << 20, src_kind=1, dst_kind=2, stream=8, corr=c)
    rep = _run(b, tmp_path, "pace.sqlite", window=(T0, T0 + 10_000 * US))
    f = rep.findings[0]
    assert f.id == "copy_path" and f.severity == "medium" and f.holds()
    assert f.time_at_stake_ns == 4_800 * US
    beyond = next(c for c in f.checks if c.metric == "copy_path_beyond_kernels_pct")
    assert (beyond.observed, beyond.threshold) == (100.0 * 4_800 / 9_998, 5.0)


def _offload(b: TraceBuilder, n: int = 100) -> None:
    """Weight offloading, n periods of 100 µs from T0: a pinned 1 MiB Host-to-Device copy at [1, 81) µs on stream 8
    (``cudaMemcpyAsync`` at [0, 3) µs), then the layer's kernel at [81, 100) µs on stream 7, which waits on it
    (``cudaStreamWaitEvent`` at [4, 5), launch at [5, 7) µs: queued behind the copy from 7 µs on, 76 of its 80 µs).
    Kernels busy 19 µs per period, copies 80 µs, never under a kernel: the copy is async on a side stream already;
    the GPU waits on it. (The launch was at [70, 72) µs: the host then launched the kernel only after 69 µs of the
    copy had run, and the copies did not keep a launched kernel waiting: tests/findings/test_copy_waiting.py.)"""
    b.process(PID)
    g = b.thread(PID, 1)
    for i in range(n):
        t = T0 + i * 100 * US
        c = b.runtime(t, t + 3 * US, tid_g=g, name="cudaMemcpyAsync_v3020")
        b.memcpy(t + 1 * US, t + 81 * US, pid=PID, bytes=1 << 20, src_kind=1, dst_kind=2, stream=8, corr=c)
        b.runtime(t + 4 * US, t + 5 * US, tid_g=g, name="cudaStreamWaitEvent_v3020")
        b.launch(t + 5 * US, t + 7 * US, t + 81 * US, t + 100 * US, pid=PID, tid=1, name="gemm_layer")


def test_copies_with_no_kernel_running_when_copies_count_as_busy(tmp_path: Path) -> None:
    """Offloading trace, window [T0, T0 + 10 ms), copies counted as busy: busy 99 µs of each 100 (99.0 %), copies
    80 µs per period, none of it under a kernel: 8.000 ms of copies with no kernel running. The device line read
    "copies 8.000 ms (0.00 µs with no kernel running)" (report.json ``copy_only_ns`` 0: |C \\ K| with the copies
    in K)."""
    b = TraceBuilder()
    _offload(b)
    rep = _run(b, tmp_path, "offload.sqlite", window=(T0, T0 + 10_000 * US), include_memcpy_in_busy=True)
    (d,) = rep.gpu_time.devices
    assert (d.busy_ns, d.copy_busy_ns) == (9_900 * US, 8_000 * US)
    assert d.copy_only_ns == 8_000 * US


def test_copy_time_counted_as_busy_is_not_kernel_time_that_sets_the_pace(tmp_path: Path) -> None:
    """Offloading trace with copies counted as busy: busy 99 µs of each 100 µs period (kernel 19 µs + copy 80 µs,
    never overlapping) = 99.0 %, of which the copies 81 % (its own evidence: "memcpy 81 %, gemm 19 %"). It read
    "GPU-bound: ... kernel time sets the pace" and "kernel speed, not the host, sets the step time": with copies
    counted as busy the claim is the GPU's work, kernels and copies."""
    b = TraceBuilder()
    _offload(b)
    rep = _run(b, tmp_path, "offload.sqlite", window=(T0, T0 + 10_000 * US), include_memcpy_in_busy=True)
    top = rep.findings[0]
    assert top.title == ("GPU-bound: the GPU is busy 99.0 % of the window set by --window; kernels and copies set "
                         "the pace")
    assert top.evidence[0] == ("GPU busy 99.0 % of the window set by --window (9.900 ms of 10.000 ms, device 0): "
                               "the GPU's "
                               "kernels and copies (counted as busy: --include-memcpy-in-busy), not the host, set "
                               "the elapsed time.")   # no steps in this trace
    assert top.evidence[2] == "Where the busy time goes (overlapping kernels share it equally): memcpy 81 %, gemm 19 %."


def test_copies_already_async_on_a_side_stream_are_not_told_to_be(tmp_path: Path) -> None:
    """Offloading trace without the flag: copies 80 µs of each 100 µs period with no kernel (80.0 %), the `copy`
    idle finding is first. Every copy was issued with ``cudaMemcpyAsync`` on stream 8, the kernels run on stream 7:
    the advice "issue them asynchronously (`cudaMemcpyAsync`) on a side stream" is what the trace already does
    (what is left is prefetching deeper: the next layer's copy while this layer runs)."""
    b = TraceBuilder()
    _offload(b)
    rep = _run(b, tmp_path, "offload.sqlite", window=(T0, T0 + 10_000 * US))
    top = rep.findings[0]
    assert top.id == "idle_copy"
    assert not any("on a side stream" in r for r in top.recommendation), top.recommendation


def test_unknown_memory_kinds_are_not_called_pinned(tmp_path: Path) -> None:
    """The pacing H2D trace of the test above with srcKind / dstKind NULL in every memcpy row (the memory table
    says "Unknown → Unknown"): the copy path still paces (48 % of the window beyond the kernels), but whether its
    copies are pinned is not known. It read "Every one of these copies is from/to pinned host memory."."""
    import sqlite3

    b = TraceBuilder()
    b.process(PID)
    g = b.thread(PID, 1)
    for i in range(100):
        t = T0 + i * 100 * US
        b.launch(t - 3 * US, t - 1 * US, t, t + 50 * US, pid=PID, tid=1, name="gemm")
        c = b.runtime(t + 1 * US, t + 2 * US, tid_g=g, name="cudaMemcpyAsync_v3020")
        b.memcpy(t + 20 * US, t + 98 * US, pid=PID, bytes=1 << 20, src_kind=1, dst_kind=2, stream=8, corr=c)
    p = tmp_path / "nokind.sqlite"
    b.write(str(p))
    con = sqlite3.connect(p)
    con.execute("UPDATE CUPTI_ACTIVITY_KIND_MEMCPY SET srcKind = NULL, dstKind = NULL")
    con.commit()
    con.close()
    rep = analyze_path(str(p), options_from_kwargs(window=(T0, T0 + 10_000 * US)))
    f = rep.findings[0]
    assert f.id == "copy_path"
    assert not any("pinned" in e for e in f.evidence), f.evidence
    assert rep.facts.advice_facts()["host_copies_pageable"] is None


def test_the_copy_title_quotes_the_time_of_the_copies_it_names(tmp_path: Path) -> None:
    """Two devices, 100 periods of 100 µs from T0: device 0 a kernel [0, 50) µs and a Peer-to-Peer copy [50, 95) µs
    on stream 9; device 1 a memset [0, 5) µs, then a kernel [5, 55) µs. Peer-to-Peer copies hold 45 µs × 100 =
    4.5 ms of device 0's idle; the memsets 0.5 ms of device 1's. The title used to read "`Peer-to-Peer` copies fill
    44.8 % of the window, 4.975 ms": 4.975 ms is every copy of both devices (less the edge bins), more than all the
    Peer-to-Peer copies took. It quotes device 0's claimed time now: 4.5 ms less the 20 µs within one timeline bin
    of the window's edge = 4.480 ms = 44.8 % of the 10 ms window; the time at stake is both devices', 4.975 ms. Each
    copy ends when device 0's next launch call starts (t + 95 µs): no kernel waited on it, the host had not launched
    one (the title said "Copies keep the kernels waiting" before the copy-waiting check, docs/MODEL.md)."""
    b = TraceBuilder()
    b.process(PID)
    g = b.thread(PID, 1)
    for i in range(100):
        t = T0 + i * 100 * US
        b.launch(t - 5 * US, t - 4 * US, t, t + 50 * US, pid=PID, tid=1, name="gemm", device=0)
        b.launch(t - 4 * US, t - 3 * US, t + 5 * US, t + 55 * US, pid=PID, tid=1, name="gemm", device=1)
        c = b.runtime(t + 10 * US, t + 11 * US, tid_g=g, name="cudaMemcpyPeerAsync_v4000")
        b.memcpy(t + 50 * US, t + 95 * US, pid=PID, bytes=8 << 20, copy_kind=10, src_kind=2, dst_kind=2, device=0,
                 stream=9, corr=c)
        c = b.runtime(t + 12 * US, t + 13 * US, tid_g=g, name="cudaMemsetAsync_v3020")
        b.memset(t, t + 5 * US, pid=PID, bytes=1 << 20, device=1, corr=c)
    rep = _run(b, tmp_path, "p2p.sqlite")
    top = rep.findings[0]
    assert top.cause == ("copy", "Peer-to-Peer")
    assert top.title == ("Copies run while the GPU idles, before the next kernel is launched: `Peer-to-Peer` copies "
                         "fill 44.8 % of the window, 4.480 ms")
    assert top.time_at_stake_ns == 4_975 * US


# ------------------------------------------------------------------ copies already async on a side stream (or not)

SIDE = "100.0 % of these copies' time was issued by an asynchronous copy call on a side stream"


def _offload_variant(b: TraceBuilder, *, stream=lambda i: 8, api=lambda i: "cudaMemcpyAsync_v3020",
                     linked: bool = True, pid: int = PID, other_kernel_stream: Optional[int] = None,
                     src_kind: Optional[int] = 1) -> None:
    """The offloading trace of :func:`_offload` with, per period ``i``, the copy on ``stream(i)`` issued by
    ``api(i)`` (``linked`` False: the copy's correlation id matches no call); ``other_kernel_stream``: a second
    process (pid + 1) on the same device runs a 1 µs kernel at [0, 1) µs of each period on that stream;
    ``src_kind``: the copies' srcKind (None: NULL)."""
    b.process(pid)
    g = b.thread(pid, 1)
    if other_kernel_stream is not None:
        b.process(pid + 1)
    for i in range(100):
        t = T0 + i * 100 * US
        c = b.runtime(t, t + 3 * US, tid_g=g, name=api(i))
        b.memcpy(t + 1 * US, t + 81 * US, pid=pid, bytes=1 << 20, src_kind=src_kind, dst_kind=2, stream=stream(i),
                 corr=c if linked else None)
        b.launch(t + 5 * US, t + 7 * US, t + 81 * US, t + 100 * US, pid=pid, tid=1, name="gemm_layer")
        if other_kernel_stream is not None:
            b.launch(t - 2 * US, t - 1 * US, t, t + 1 * US, pid=pid + 1, tid=1, name="other_proc",
                     stream=other_kernel_stream)


def _copy_finding(rep):
    return next(f for f in rep.findings if f.id == "idle_copy")


def test_async_side_stream_copies_get_the_advice_that_is_left(tmp_path: Path) -> None:
    """The offloading trace: 100 copies of 80 µs, every one issued by ``cudaMemcpyAsync`` on stream 8, kernels on
    stream 7 only: 8 000 of 8 000 µs of copy time (100.0 %) async on a side stream ≥ 90 %: the fact holds, trace-wide
    and for the finding; the finding says so and gives the prefetch line, not the overlap lines. The kernels run
    100 × 19 µs = 1.900 ms, less than half the 8 ms of copies: the fewer-bytes line comes first
    (test_claims_weight_offloading.py)."""
    b = TraceBuilder()
    _offload(b)
    rep = _run(b, tmp_path, "side.sqlite", window=(T0, T0 + 10_000 * US))
    assert rep.facts.copies_async_side_stream is True and rep.facts.async_side_pct == 100.0
    (h2d,) = rep.copy_engines.paths
    assert (h2d.copy_time_ns, h2d.call_known_ns, h2d.async_side_ns) == (8_000 * US,) * 3
    f = _copy_finding(rep)
    assert any(e.startswith(SIDE) for e in f.evidence), f.evidence
    assert f.recommendation == (ADVICE["copy_pace.host.resident"].text, ADVICE["copy.prefetch"].text)


def test_async_copies_on_the_kernels_stream_are_told_to_move_to_a_side_stream(tmp_path: Path) -> None:
    """The opposite case: the same ``cudaMemcpyAsync`` copies on stream 7, the kernels' stream (they serialize with
    the kernels): 0 of 8 000 µs async on a side stream (0.0 %): the overlap advice holds and is given, after the
    fewer-bytes line (1.900 ms of kernels, less than half the copies); no prefetch line ("already run asynchronously,
    on streams no kernel uses" would be false)."""
    b = TraceBuilder()
    _offload_variant(b, stream=lambda i: 7)
    rep = _run(b, tmp_path, "same.sqlite", window=(T0, T0 + 10_000 * US))
    assert rep.facts.copies_async_side_stream is False and rep.facts.async_side_pct == 0.0
    f = _copy_finding(rep)
    assert any(e.startswith("0.0 % of these copies' time was issued") for e in f.evidence), f.evidence
    assert f.recommendation == (ADVICE["copy_pace.host.resident"].text, ADVICE["copy.overlap"].text)


def test_synchronous_copies_on_a_side_stream_are_not_async(tmp_path: Path) -> None:
    """``cudaMemcpy`` (synchronous) on stream 8: on a side stream but not issued asynchronously: 0.0 %, the
    overlap advice ("issue them asynchronously") is given."""
    b = TraceBuilder()
    _offload_variant(b, api=lambda i: "cudaMemcpy_v3020")
    rep = _run(b, tmp_path, "sync.sqlite", window=(T0, T0 + 10_000 * US))
    assert (rep.facts.copies_async_side_stream, rep.facts.async_side_pct) == (False, 0.0)
    assert ADVICE["copy.overlap"].text in _copy_finding(rep).recommendation


@pytest.mark.parametrize("src_kind", [0, None])
def test_async_calls_from_pageable_or_unrecorded_memory_are_not_async(tmp_path: Path, src_kind) -> None:
    """``cudaMemcpyAsync`` on stream 8 from pageable memory (srcKind 0: the driver stages it, the call returns when the
    copy is done) or from memory of no recorded kind (NULL: it may be pageable): 0 of 8 000 µs counts as
    asynchronous on a side stream (0.0 %); the prefetch line ("already run asynchronously") is not given."""
    b = TraceBuilder()
    _offload_variant(b, src_kind=src_kind)
    rep = _run(b, tmp_path, "pg.sqlite", window=(T0, T0 + 10_000 * US))
    assert (rep.facts.copies_async_side_stream, rep.facts.async_side_pct) == (False, 0.0)
    assert ADVICE["copy.prefetch"].text not in _copy_finding(rep).recommendation


def test_mixed_copies_below_the_threshold_keep_the_overlap_advice(tmp_path: Path) -> None:
    """75 of the 100 copies async on stream 8, 25 on the kernels' stream 7 (periods i % 4 == 0), 80 µs each: 6 000 of
    8 000 µs = 75.0 % < 90 %: not "already"; the share is stated and the overlap advice kept."""
    b = TraceBuilder()
    _offload_variant(b, stream=lambda i: 7 if i % 4 == 0 else 8)
    rep = _run(b, tmp_path, "mixed.sqlite", window=(T0, T0 + 10_000 * US))
    assert (rep.facts.copies_async_side_stream, rep.facts.async_side_pct) == (False, 75.0)
    f = _copy_finding(rep)
    assert any(e.startswith("75.0 % of these copies' time was issued") for e in f.evidence), f.evidence
    assert ADVICE["copy.overlap"].text in f.recommendation and ADVICE["copy.prefetch"].text not in f.recommendation


def test_copies_not_linked_to_a_call_are_not_known_to_be_async(tmp_path: Path) -> None:
    """The copies' correlation ids match no CUDA call (a capture without their API rows): whether they were issued
    asynchronously is not known: the fact is None, no share is stated, the overlap advice (allowed when unknown)
    stays."""
    b = TraceBuilder()
    _offload_variant(b, linked=False)
    rep = _run(b, tmp_path, "unlinked.sqlite", window=(T0, T0 + 10_000 * US))
    assert (rep.facts.copies_async_side_stream, rep.facts.async_side_pct) == (None, None)
    f = _copy_finding(rep)
    assert not any("issued by an asynchronous copy call" in e for e in f.evidence), f.evidence
    assert ADVICE["copy.overlap"].text in f.recommendation


def test_another_process_s_kernels_on_the_same_stream_id_do_not_make_it_the_compute_stream(tmp_path: Path) -> None:
    """Process 8 runs a kernel on stream id 8 of the same device (its own stream, another context): process 7's
    copies on its stream 8 still share no stream with a kernel of their process: 100.0 % async on a side stream."""
    b = TraceBuilder()
    _offload_variant(b, other_kernel_stream=8)
    rep = _run(b, tmp_path, "twoproc.sqlite", window=(T0, T0 + 10_000 * US))
    assert (rep.facts.copies_async_side_stream, rep.facts.async_side_pct) == (True, 100.0)


# ------------------------------------------------------------------ memory kinds: pinned only where recorded


def _pacing_h2d(tmp_path: Path, name: str, kinds=lambda i: (1, 2), drop_kind_columns: bool = False):
    """The pacing H2D trace (test above) with (srcKind, dstKind) = ``kinds(i)`` for copy ``i`` (None: NULL), or
    without the two columns (an older export)."""
    import sqlite3

    b = TraceBuilder()
    b.process(PID)
    g = b.thread(PID, 1)
    for i in range(100):
        t = T0 + i * 100 * US
        b.launch(t - 3 * US, t - 1 * US, t, t + 50 * US, pid=PID, tid=1, name="gemm")
        c = b.runtime(t + 1 * US, t + 2 * US, tid_g=g, name="cudaMemcpyAsync_v3020")
        src, dst = kinds(i)
        b.memcpy(t + 20 * US, t + 98 * US, pid=PID, bytes=1 << 20, src_kind=src, dst_kind=dst, stream=8, corr=c)
    p = tmp_path / name
    b.write(str(p))
    con = sqlite3.connect(p)
    if drop_kind_columns:
        cols = [r[1] for r in con.execute("PRAGMA table_info(CUPTI_ACTIVITY_KIND_MEMCPY)")
                if r[1] not in ("srcKind", "dstKind")]
        con.execute(f"CREATE TABLE m2 AS SELECT {', '.join(cols)} FROM CUPTI_ACTIVITY_KIND_MEMCPY")
        con.execute("DROP TABLE CUPTI_ACTIVITY_KIND_MEMCPY")
        con.execute("ALTER TABLE m2 RENAME TO CUPTI_ACTIVITY_KIND_MEMCPY")
    con.commit()
    con.close()
    rep = analyze_path(str(p), options_from_kwargs(window=(T0, T0 + 10_000 * US)))
    f = rep.findings[0]
    assert f.id == "copy_path"
    (h2d,) = rep.copy_engines.paths
    return rep, f, h2d


def test_pinned_copies_recorded_as_pinned_are_called_pinned(tmp_path: Path) -> None:
    """The opposite case: srcKind 1 (pinned) → dstKind 2 (device) on every copy: 100 pinned, none pageable or
    unknown: "Every one of these copies is from/to pinned host memory."; host_copies_pageable False, no pinning
    advice."""
    rep, f, h2d = _pacing_h2d(tmp_path, "pinned.sqlite")
    assert (h2d.pinned_count, h2d.pageable_count, h2d.kind_unknown_count) == (100, 0, 0)
    assert "Every one of these copies is from/to pinned host memory." in f.evidence
    assert rep.facts.advice_facts()["host_copies_pageable"] is False
    assert ADVICE["copy.pageable"].text not in f.recommendation


def test_mixed_known_and_unknown_kinds_say_the_unknown_share(tmp_path: Path) -> None:
    """60 copies pinned → device, 40 (i % 5 in {0, 1}) with srcKind / dstKind NULL: 60 pinned, 40 of 100 (40.0 %)
    with no recorded kind: the evidence says both, never "every one … pinned"; pageable unknown (None)."""
    rep, f, h2d = _pacing_h2d(tmp_path, "mixed.sqlite", kinds=lambda i: (None, None) if i % 5 < 2 else (1, 2))
    assert (h2d.pinned_count, h2d.pageable_count, h2d.kind_unknown_count) == (60, 0, 40)
    assert ("60 from/to pinned host memory; the export records no host memory kind for 40 of 100 (40.0 %; srcKind "
            "/ dstKind NULL or unknown): whether those are pageable is not known.") in f.evidence, f.evidence
    assert rep.facts.advice_facts()["host_copies_pageable"] is None


def test_pageable_copies_beside_unknown_ones_are_pageable(tmp_path: Path) -> None:
    """30 copies from pageable memory (srcKind 0, i < 30), 70 with the "unknown" kind 7 on both sides: pageable
    copies exist, so host_copies_pageable is True (pinning advice given), and the 70 (70.0 %) are named unknown."""
    rep, f, h2d = _pacing_h2d(tmp_path, "pg.sqlite", kinds=lambda i: (0, 2) if i < 30 else (7, 7))
    assert (h2d.pinned_count, h2d.pageable_count, h2d.kind_unknown_count) == (0, 30, 70)
    assert rep.facts.advice_facts()["host_copies_pageable"] is True
    assert ADVICE["copy.pageable"].text in f.recommendation
    (line,) = [e for e in f.evidence if "pageable host memory" in e]
    assert line.startswith("30 of these copies (31.46 MB) are from/to pageable host memory; the export records no "
                           "host memory kind for 70 of 100 (70.0 %;"), line


def test_an_export_without_memory_kind_columns_does_not_say_pinned(tmp_path: Path) -> None:
    """An older export whose memcpy table has no srcKind / dstKind: the kinds read as unknown: 100 of 100 with no
    recorded kind, no "pinned" claim, host_copies_pageable None."""
    rep, f, h2d = _pacing_h2d(tmp_path, "nocols.sqlite", drop_kind_columns=True)
    assert (h2d.pinned_count, h2d.pageable_count, h2d.kind_unknown_count) == (0, 0, 100)
    assert not any("pinned" in e for e in f.evidence), f.evidence
    assert rep.facts.advice_facts()["host_copies_pageable"] is None


# ------------------------------------------------------------------ pinning advice only where pageable copies matter


@pytest.mark.parametrize("pageable, advised", [(10, False), (11, True)])
def test_pinning_advice_on_a_pacing_path_needs_pageable_copies_that_matter(tmp_path: Path, pageable: int,
                                                                         advised: bool) -> None:
    """The pacing H2D trace, copies ``i < pageable`` from pageable memory (srcKind 0), the rest pinned. Each copy holds
    the GPU 48 µs beyond its kernel ([50, 98) µs of its period); the window ends with the last copy, 9.998 ms. The
    pageable copies hold 10 × 48 = 480 µs = 4.80 % of the window (under 5 %: not worth pinning — the finding is about
    the 90 pinned copies) or 11 × 48 = 528 µs = 5.28 % (worth it). The pinning line was given for any pageable copy
    (real trace 05: 34 copies, 272 B)."""
    rep, f, h2d = _pacing_h2d(tmp_path, f"pg{pageable}.sqlite", kinds=lambda i: (0, 2) if i < pageable else (1, 2))
    assert (h2d.pinned_count, h2d.pageable_count) == (100 - pageable, pageable)
    assert rep.facts.advice_facts()["host_copies_pageable"] is True
    assert (ADVICE["copy.pageable"].text in f.recommendation) is advised, f.recommendation


def test_pinning_advice_on_the_copy_idle_finding_needs_pageable_copies_that_matter(tmp_path: Path) -> None:
    """100 periods of 100 µs: a 50 µs kernel at [0, 50) µs on stream 7, then a 1 MiB Host-to-Device copy at [55, 95) µs
    on the same stream (the next kernel waits on it); copy 0 from pageable memory, the other 99 pinned. Window [T0,
    T0 + 10 ms). The copies fill 40 µs of every 100 with the GPU idle (the `copy` idle finding; the H2D path is busy
    40 %, under the pacing bar of 50 %); the pageable one holds 40 µs, 0.4 % of the window: the finding gives no
    pinning line (it did, for any pageable copy among its details)."""
    b = TraceBuilder()
    b.process(PID)
    g = b.thread(PID, 1)
    for i in range(100):
        t = T0 + i * 100 * US
        b.launch(t - 3 * US, t - 1 * US, t, t + 50 * US, pid=PID, tid=1, name="gemm")
        c = b.runtime(t + 52 * US, t + 54 * US, tid_g=g, name="cudaMemcpyAsync_v3020")
        b.memcpy(t + 55 * US, t + 95 * US, pid=PID, bytes=1 << 20, src_kind=0 if i == 0 else 1, dst_kind=2, stream=7,
                 corr=c)
    rep = _run(b, tmp_path, "idlecopy.sqlite", window=(T0, T0 + 10_000 * US))
    (f,) = [f for f in rep.findings if f.id == "idle_copy"]
    assert "copy_path" not in [x.id for x in rep.findings]
    details = {c.detail: c.ns for d in rep.idle_causes.devices for c in d.causes if c.kind == "copy"}
    assert details == {"Host-to-Device": 99 * 40 * US, "Host-to-Device (pageable)": 40 * US}, details
    assert ADVICE["copy.pageable"].text not in f.recommendation, f.recommendation
    from nsys_llm_explainer.render import render_markdown

    md = render_markdown(rep)     # the memory section states the fact; advice is the findings' (it said "pin it")
    assert "- Pageable host memory: 1 copy, 1.05 MB, 40.00 µs (staged by the driver through a pinned bounce " \
           "buffer).\n" in md
    assert "pin it" not in md
