"""Vision-language serving, embedding / reranker servers and MIG slices. An embedding server runs one forward per
request and then waits for the next request; the per-step sync finding called that wait "host work after the sync that
could overlap the next step". Each trace is built by hand; the truth is worked out in the docstrings."""

from __future__ import annotations

from pathlib import Path

import pytest
from claims_support import finding_of, report_of
from synth import TraceBuilder

from nsys_llm_explainer.findings.advice import ADVICE

US = 1_000
MS = 1_000 * US
T0 = 10 * MS
PID = 200
PERIOD = 20 * MS


def _embed_server(n: int = 10, wait: bool = True) -> TraceBuilder:
    """An embedding server on thread 1: request i arrives at t = T0 + 20 i ms; ``cudaLaunchKernel`` [t, t + 5) µs
    runs the encoder forward (one kernel, batch of 32 sequences) [t + 10, t + 2010) µs; the embeddings are read back
    by a synchronous ``cudaMemcpy`` [t + 6, t + 2040) µs whose Device-to-Host copy runs [t + 2012, t + 2032) µs;
    then (``wait``) the thread blocks in ``pthread_cond_wait`` [t + 2050 µs, t + 20 ms − 10 µs) until the next
    request (no other thread exists); without ``wait`` that time has no traced call."""
    b = TraceBuilder()
    b.process(PID)
    g = b.thread(PID, 1, "python3")
    for i in range(n):
        t = T0 + i * PERIOD
        b.launch(t, t + 5 * US, t + 10 * US, t + 2010 * US, pid=PID, tid=1, name="bert_encoder_gemm_kernel",
                 short_name="bert_encoder_gemm_kernel")
        c = b.runtime(t + 6 * US, t + 2040 * US, tid_g=g, name="cudaMemcpy_v3020")
        b.memcpy(t + 2012 * US, t + 2032 * US, pid=PID, bytes=32 * 1024 * 4, copy_kind=2, src_kind=2, dst_kind=0,
                 corr=c)
        if wait and i < n - 1:
            b.osrt(t + 2050 * US, t + PERIOD - 10 * US, tid_g=g, name="pthread_cond_wait")
    return b


def test_wait_for_the_next_request_is_no_host_work_to_overlap(tmp_path: Path) -> None:
    """(trace: :func:`_embed_server`, 10 requests) Each `cudaMemcpy` drains the forward (it starts at t + 6 µs,
    before the kernel's end t + 2010 µs, and returns after it): 10 sync points, one per 20 ms period. After each
    return (t + 2040 µs) the GPU idles until the next kernel at t + 20.010 ms: 17.970 ms, of which 17.940 ms
    (99.8 %) the thread sits in `pthread_cond_wait` waiting for the next request — no host work that launching the
    next step earlier could hide (the request is not there yet). Every period holds one such wait, so the 10 ×
    median-period pause rule never fires; before the fix the finding read "Per-step sync: `cudaMemcpy` every
    20.000 ms; the GPU-idle host work after it could overlap the next step" with 9 × min(17.970, 2.004) ms = 18.036
    ms (9.0 %) "overlappable". Now a sync point whose host time is mostly (> 50 %) a waiting OS call is an idle
    pause: every step is one, the series does not hold, no step_sync finding, and the wait stays whole with the
    `osrt` finding: 9 × 17.940 ms = 161.460 ms."""
    rep = report_of(_embed_server(), tmp_path)
    assert not any(f["id"] == "step_sync" for f in rep["findings"]), [f["title"] for f in rep["findings"]]
    (series,) = rep["step_sync"]["series"]
    assert series["holds"] is False
    assert series["reason"].startswith("every step starts after an idle pause"), series["reason"]
    assert series["overlap_ns"] == 0 and series["exposed_ns"] == 0
    f = finding_of(rep, "idle_osrt")
    assert f["title"].startswith("The launching thread waits in `pthread_cond_wait` while the GPU idles"), f["title"]
    assert abs(f["time_at_stake_ns"] - 161_460_000) <= 1_000, f["time_at_stake_ns"]


def test_untraced_host_time_after_each_request_keeps_the_step_sync_claim(tmp_path: Path) -> None:
    """(trace: :func:`_embed_server` without the `pthread_cond_wait` rows) The same 17.970 ms after each sync has
    no traced call: the trace cannot tell host work from a wait for the next request (no OS-runtime rows), so the
    per-step sync rule stands as before: overlappable 9 × min(17.970, 2.004) ms = 18.036 ms; the finding is made."""
    rep = report_of(_embed_server(wait=False), tmp_path)
    f = finding_of(rep, "step_sync")
    assert abs(f["time_at_stake_ns"] - 18_036_000) <= 1_000, f["time_at_stake_ns"]


def test_unseen_wait_advice_does_not_ask_for_the_os_runtime_trace_it_rests_on(tmp_path: Path) -> None:
    """(trace: :func:`_embed_server`) The `osrt` finding exists only because the trace has OS-runtime calls; no other
    thread exists, so its advice is `wait.unseen`. It said "find what releases them (NVTX ranges on the worker
    threads, `--trace=osrt`, …)" — asking for the tracing the trace already has — and never named the plain reading
    of a lone thread blocked between forwards: it waits for work (requests) and the GPU idles for lack of load."""
    rep = report_of(_embed_server(), tmp_path)
    f = finding_of(rep, "idle_osrt")
    assert f["recommendation"] == [ADVICE["wait.unseen"].text], f["recommendation"]
    assert "--trace=osrt" not in f["recommendation"][0]
    assert "requests" in f["recommendation"][0]


@pytest.mark.parametrize("n", [6])
def test_pause_rule_counts_only_waiting_time(tmp_path: Path, n: int) -> None:
    """(trace: :func:`_embed_server` with 6 requests) The waits are 5 × 17.940 ms = 89.700 ms (the last request has
    none); the `osrt` finding's time at stake is all of it: none was handed to the per-step sync finding."""
    rep = report_of(_embed_server(n), tmp_path)
    f = finding_of(rep, "idle_osrt")
    assert abs(f["time_at_stake_ns"] - 89_700_000) <= 1_000, f["time_at_stake_ns"]
