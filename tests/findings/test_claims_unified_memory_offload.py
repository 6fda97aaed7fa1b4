"""Unified-Memory weight offload (`cudaMallocManaged` weights paged in with `cudaMemPrefetchAsync`): the Unified
Memory finding counts the kernel time under migrations a kernel may wait on, not under the user prefetches that run
ahead of the kernels by design. Each trace is built by hand; the truth is worked out in the docstrings."""

from __future__ import annotations

from pathlib import Path

import pytest
from claims_support import report_of
from synth import TraceBuilder

from nsys_llm_explainer.findings.advice import ADVICE

US = 1_000
MS = 1_000 * US
T0 = 1 * MS
PID = 100
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1_execute_segment_k_off_kernel"


def _prefetched_layers(flavor: str, faults: bool) -> TraceBuilder:
    """10 layers, layer i at t = T0 + 3.030 i ms on thread 1: ``cudaMemPrefetchAsync`` [t, t + 10) µs of the next
    layer's managed weights: 20 user-prefetch migrations (cause 1, Unified Host-to-Device, 2 MiB) back to back over
    [t + 20, t + 2020) µs on the copy engine; the layer's GEMM launched [t + 10, t + 15) µs runs [t + 20, t + 3020) µs
    on stream 7 (the host in ``cudaStreamSynchronize`` [t + 16, t + 3025) µs). With ``faults``, the GEMM still faults
    on 10 pages the prefetch did not cover: per page a GPU fault group and a 64 KiB page-fault migration (cause 2)
    [t + 2500 + 50 f, t + 2540 + 50 f) µs, f = 0 … 9, all under the GEMM and after the prefetches."""
    b = TraceBuilder(flavor)
    b.process(PID)
    g = b.thread(PID, 1, "python3")
    for i in range(10):
        t = T0 + i * 3_030 * US
        b.runtime(t, t + 10 * US, tid_g=g, name="cudaMemPrefetchAsync_v8000")
        for c in range(20):
            s = t + (20 + 100 * c) * US
            b.um_migration(s, s + 100 * US, pid=PID, bytes=2 << 20, copy_kind=11, cause=1, address=(64 * i + c) << 21)
        b.launch(t + 10 * US, t + 15 * US, t + 20 * US, t + 3_020 * US, pid=PID, tid=1, name=GEMM)
        b.runtime(t + 16 * US, t + 3_025 * US, tid_g=g, name="cudaStreamSynchronize_v3020")
        for f in range(10 if faults else 0):
            s, a = t + (2_500 + 50 * f) * US, ((64 * i + 40) << 21) | (f << 16)
            b.um_gpu_fault(s - 5 * US, s + 40 * US, pid=PID, address=a, faults=2)
            b.um_migration(s, s + 40 * US, pid=PID, bytes=64 << 10, copy_kind=11, cause=2, address=a)
    return b


@pytest.mark.parametrize("flavor", ["2022.4", "2026.2"])
def test_user_prefetches_under_the_kernels_are_not_kernel_time_under_migrations(tmp_path: Path, flavor: str) -> None:
    """(trace: :func:`_prefetched_layers` with faults) Kernel time 10 × 3 ms = 30 ms. The user prefetches run under
    10 × 2 ms of it, ahead of the layer that reads them: no kernel waits on them. The page-fault migrations run under
    10 × 10 × 40 µs = 4 ms (13.3 %). The finding said "Unified-Memory migrations run underneath 80.0 % of the kernel
    time" (prefetches counted: 24 ms, HIGH), the overlap the prefetch exists to make; it now says 13.3 % (MEDIUM),
    of the migrations other than user prefetches, and says why the prefetches are not counted."""
    rep = report_of(_prefetched_layers(flavor, faults=True), tmp_path)
    (f,) = [f for f in rep["findings"] if f["id"] == "unified_memory"]
    assert f["title"] == ("Unified-Memory migrations other than user prefetches run underneath 13.3 % of the kernel "
                          "time on device 0: managed memory is moved while kernels run")
    assert f["severity"] == "medium" and f["time_at_stake_ns"] == 4 * MS
    assert f["evidence"][0] == ("Device 0: Unified-Memory migrations other than user prefetches were in flight during "
                                "4.000 ms of its 30.000 ms of kernel time (13.3 %) in the whole capture.")
    assert any(e.startswith("User prefetches (`cudaMemPrefetchAsync`) move pages ahead of the kernels") for e in
               f["evidence"])
    (d,) = rep["unified_memory"]["steady"]["devices"]
    assert (d["overlap_ns"], d["kernel_busy_ns"], d["migration_idle_ns"]) == (4 * MS, 30 * MS, 0)


def test_prefetches_that_run_under_the_kernels_alone_make_no_unified_memory_finding(tmp_path: Path) -> None:
    """(trace: :func:`_prefetched_layers` without faults) Every migration is a user prefetch under the kernels: the
    ZeRO-Inference-style prefetch hidden under compute. The finding said "Unified-Memory migrations run underneath
    66.7 % of the kernel time" (20 of 30 ms, HIGH) and told the user to prefetch, which the trace already does; no
    kernel waits on a migration, so there is no finding (0 % < 10 %), and the GPU-bound reading stands."""
    rep = report_of(_prefetched_layers("2024.2", faults=False), tmp_path)
    assert not [f for f in rep["findings"] if f["id"] == "unified_memory"]
    (d,) = rep["unified_memory"]["steady"]["devices"]
    assert (d["overlap_ns"], d["overlap_pct"], d["migration_union_ns"]) == (0, 0.0, 20 * MS)
    assert rep["findings"][0]["id"] == "gpu_bound"


def test_a_trace_that_already_prefetches_is_told_what_its_prefetches_miss(tmp_path: Path) -> None:
    """(trace: :func:`_prefetched_layers` with faults, 2026.2) The finding told the user "Prefetch managed buffers to
    the GPU before the kernels that read them: `cudaMemPrefetchAsync` …", which every layer already does (200 user-
    prefetch migrations). The migrations it counts are the 100 page-fault migrations of pages the prefetches do not
    cover: the advice is to prefetch those pages too, earlier and in larger ranges, not to start prefetching."""
    rep = report_of(_prefetched_layers("2026.2", faults=True), tmp_path)
    (f,) = [f for f in rep["findings"] if f["id"] == "unified_memory"]
    assert ADVICE["um.prefetch"].text not in f["recommendation"]
    assert f["recommendation"][0] == ADVICE["um.prefetch.more"].text


def test_a_trace_without_user_prefetches_keeps_the_prefetch_advice(tmp_path: Path) -> None:
    """Only on-demand migrations: per 3.030 ms layer (10 layers) a GEMM [t + 20, t + 3020) µs faulting on 10 pages, each
    a 64 KiB page-fault migration (cause 2) under it (4 ms of 30 ms kernel time, 13.3 %) and no `cudaMemPrefetchAsync`:
    "Prefetch managed buffers …" is the first line and the already-prefetching line is not given."""
    b = TraceBuilder("2026.2")
    b.process(PID)
    g = b.thread(PID, 1, "python3")
    for i in range(10):
        t = T0 + i * 3_030 * US
        b.launch(t + 10 * US, t + 15 * US, t + 20 * US, t + 3_020 * US, pid=PID, tid=1, name=GEMM)
        b.runtime(t + 16 * US, t + 3_025 * US, tid_g=g, name="cudaStreamSynchronize_v3020")
        for f in range(10):
            s, a = t + (2_500 + 50 * f) * US, ((64 * i + 40) << 21) | (f << 16)
            b.um_gpu_fault(s - 5 * US, s + 40 * US, pid=PID, address=a, faults=2)
            b.um_migration(s, s + 40 * US, pid=PID, bytes=64 << 10, copy_kind=11, cause=2, address=a)
    rep = report_of(b, tmp_path)
    (f,) = [f for f in rep["findings"] if f["id"] == "unified_memory"]
    assert f["recommendation"][0] == ADVICE["um.prefetch"].text
    assert ADVICE["um.prefetch.more"].text not in f["recommendation"]
