"""Structured output / CPU-side sampling / host work between decode steps: a decode loop whose host does real work
between GPU steps (logits read back, sampled on the CPU, the token sent back; a grammar bitmask filled on the CPU;
detokenization in another process). Each trace is built by hand; the truth is worked out in the docstring."""

from __future__ import annotations

from pathlib import Path

import pytest
from claims_support import finding_of as _finding
from claims_support import report_of as _run
from synth import TraceBuilder

US = 1_000
MS = 1_000_000
PID = 100
T0 = 5 * MS
PY = "/usr/lib/libpython3.10.so"


def _cpu_sampling(b: TraceBuilder, *, samples: bool = True, n: int = 20) -> None:
    """Decode step i at t = T0 + 4 i ms on thread 1 (`EngineCore`): 10 forward kernels, call k [t + 10k, t + 10k + 5)
    µs, kernel k [t + 20 + 80k, t + 100 + 80k) µs (busy [t + 20, t + 820) µs); the logits (256 KiB) read back by
    `cudaMemcpyAsync` [t + 100, t + 110) µs into pageable memory, copy [t + 820, t + 850) µs;
    `cudaStreamSynchronize` [t + 110, t + 852) µs; then 3 ms of Python sampling with no CUDA call ([t + 852,
    t + 3852) µs; ``samples``: a CPU sample every 250 µs from t + 900 µs, leaf `_apply_min_p` under `sample`); the
    chosen token (8 B) goes back by a synchronous `cudaMemcpy` [T − 20, T − 5) µs, copy [T − 15, T − 10) µs, before
    the next step at T = t + 4 ms."""
    b.process(PID)
    g = b.thread(PID, 1, "EngineCore")
    for i in range(n):
        t = T0 + i * 4 * MS
        for k in range(10):
            b.launch(t + 10 * k * US, t + 10 * k * US + 5 * US, t + 20 * US + 80 * k * US,
                     t + 100 * US + 80 * k * US, pid=PID, tid=1, name=f"layer_gemm_{k % 3}")
        c = b.runtime(t + 100 * US, t + 110 * US, tid_g=g, name="cudaMemcpyAsync_v3020")
        b.memcpy(t + 820 * US, t + 850 * US, pid=PID, bytes=256 * 1024, copy_kind=2, src_kind=2, dst_kind=0,
                 corr=c)
        c = b.runtime(t + 110 * US, t + 852 * US, tid_g=g, name="cudaStreamSynchronize_v3020")
        b.sync(t + 112 * US, t + 851 * US, pid=PID, sync_type=3, corr=c)
        s = t + 900 * US
        while samples and s < t + 3752 * US:
            b.cpu_sample(s, tid_g=g, frames=[("_apply_min_p", PY), ("sample", PY), ("execute_model", PY)])
            s += 250 * US
        nt = t + 4 * MS
        if i < n - 1:
            c = b.runtime(nt - 20 * US, nt - 5 * US, tid_g=g, name="cudaMemcpy_v3020")
            b.memcpy(nt - 15 * US, nt - 10 * US, pid=PID, bytes=8, copy_kind=1, src_kind=0, dst_kind=2, corr=c)


@pytest.mark.parametrize("samples", [True, False])
def test_cpu_sampling_gap_is_host_work_not_launch_overhead(tmp_path: Path, samples: bool) -> None:
    """(trace: :func:`_cpu_sampling`) Window [T0, T0 + 76.852 ms) (the last step's sync returns at t + 852 µs).
    Each of the 19 inter-step gaps [t + 820 µs, T + 20 µs) = 3.200 ms: D2H copy 30 µs, in the sync 2 µs, host
    [t + 852, T − 20) = 3.128 ms, the synchronous token copy 15 µs (copy 5, `sync_memcpy` 10), host [T − 5, T) 5 µs,
    launch 5 µs, queued 15 µs. `host_cpu` = 19 × 3.133 ms = 59.527 ms (77.5 %); launch calls 19 × 5 µs = 95 µs.
    The 3 ms of Python between the steps is host work: the verdict names host gaps, no finding calls it launch
    overhead or advises CUDA graphs (the gaps are not launch calls), and with samples the evidence names the
    sampled code (228 samples: 12 per gap, t + 900 … t + 3650 µs)."""
    b = TraceBuilder()
    _cpu_sampling(b, samples=samples)
    rep = _run(b, tmp_path)
    (d,) = rep["idle_causes"]["devices"]
    causes = {(c["kind"], c["detail"]): c["ns"] for c in d["causes"]}
    assert causes[("host_cpu", "")] == 59_527 * US
    assert causes[("launch", "cudaLaunchKernel")] == 95 * US
    assert rep["headline"]["verdict"].startswith("Host gaps: the launching thread is outside CUDA calls while the "
                                                 "GPU idles")
    assert not any(f["id"].startswith("idle_launch") for f in rep["findings"]), [f["id"] for f in rep["findings"]]
    text = " ".join([f["title"] for f in rep["findings"]] + [a for f in rep["findings"] for a in f["recommendation"]])
    assert "CUDA graph" not in text and "launch overhead" not in text.lower(), text
    host = _finding(rep, "idle_host_cpu")
    if samples:
        assert any(e.startswith("CPU samples of the launching thread inside these gaps (228 over 59.527 ms of idle)")
                   and "`_apply_min_p`" in e for e in host["evidence"]), host["evidence"]
    else:
        assert any("the trace has no CPU samples" in e for e in host["evidence"])


def test_step_sync_advice_names_gpu_sampling_when_the_host_samples_each_step(tmp_path: Path) -> None:
    """(trace: :func:`_cpu_sampling`, with samples) Every step reads back 256 KiB (the logits), blocks in
    `cudaStreamSynchronize` until it lands, runs 3 ms of Python whose CPU samples are all in `sample` /
    `_apply_min_p`, and sends 8 B (the chosen token) back before launching the next step: the next step consumes
    what the host computed from this step's results. The per-step sync finding (overlappable 19 × 710 µs = 13.490 ms:
    the wait in the sync, t + 110 → t + 820 µs, of each next step) says "Done while the GPU runs the next step,
    13.490 ms of it would be hidden" and advises "launch step N+1 before reading step N's results (double-buffer the
    outputs)" — impossible here: the sync per step is inherent to sampling on the CPU; what removes it is sampling on
    the GPU (logits processors / penalties / a grammar bitmask applied by kernels, only the token ids read back, one
    step behind). (Was a strict xfail.) Fixed: `StepSyncSeries.host_sampling` — on 19 of the 19 steps a readback
    before the sync (256 KiB) and a host-to-device copy by the same thread after its return and before its next
    launch (8 B): 32,768× ≥ 256×; all 228 CPU samples in the gaps have a frame in sampling code (`_apply_min_p`,
    ≥ 50 %) — so the finding says the host samples each step's token and gives `step_sync.gpu_sampling` instead
    of the double-buffer lines; without samples it keeps them (tests/findings/test_step_sync_host_sampling.py)."""
    b = TraceBuilder()
    _cpu_sampling(b)
    rep = _run(b, tmp_path)
    f = _finding(rep, "step_sync")
    (s,) = [s for s in rep["step_sync"]["series"] if s["holds"]]
    assert s["overlap_ns"] == 19 * 710 * US
    assert any("GPU" in a and "sampl" in a for a in f["recommendation"]), f["recommendation"]
    assert not any("launch step N+1 before reading step N's results" in a for a in f["recommendation"])


def _detokenizer(b: TraceBuilder, n: int = 20) -> None:
    """Engine thread 1 of pid 100 (period 2 ms, t = T0 + 2 i ms): forward [t + 20, t + 820) µs as in
    :func:`_cpu_sampling`; a 64 B token readback (`cudaMemcpyAsync` [t + 100, t + 110) µs, copy [t + 820, t + 822)
    µs) and `cudaStreamSynchronize` [t + 110, t + 852) µs; then it hands the token to the detokenizer process and
    waits for its reply in `pthread_cond_wait` [t + 860, t + 1900) µs (OS runtime traced). The detokenizer, pid 200
    thread 201 (another process), sits in `recv` [t, t + 850) µs and is sampled running `detokenize` every 100 µs
    at t + 900 … t + 1800 µs: 10 samples inside each wait."""
    b.process(PID)
    g = b.thread(PID, 1, "EngineCore")
    b.process(200, "detokenizer")
    gd = b.thread(200, 201, "detok")
    for i in range(n):
        t = T0 + i * 2 * MS
        for k in range(10):
            b.launch(t + 10 * k * US, t + 10 * k * US + 5 * US, t + 20 * US + 80 * k * US,
                     t + 100 * US + 80 * k * US, pid=PID, tid=1, name=f"layer_gemm_{k % 3}")
        c = b.runtime(t + 100 * US, t + 110 * US, tid_g=g, name="cudaMemcpyAsync_v3020")
        b.memcpy(t + 820 * US, t + 822 * US, pid=PID, bytes=64, copy_kind=2, src_kind=2, dst_kind=1, corr=c)
        c = b.runtime(t + 110 * US, t + 852 * US, tid_g=g, name="cudaStreamSynchronize_v3020")
        b.sync(t + 112 * US, t + 851 * US, pid=PID, corr=c)
        b.osrt(t + 860 * US, t + 1900 * US, tid_g=g, name="pthread_cond_wait")
        b.osrt(t, t + 850 * US, tid_g=gd, name="recv")
        for s in range(900, 1900, 100):
            b.cpu_sample(t + s * US, tid_g=gd, frames=[("detokenize", PY), ("run", PY)])


def test_detokenizer_waits_numbers(tmp_path: Path) -> None:
    """(trace: :func:`_detokenizer`) Window [T0, T0 + 38.852 ms) (the last sync returns at t + 852 µs; the last wait
    lies after it). 19 waits in the window, each [t + 860, t + 1900) µs = 1.040 ms, all with the GPU idle (the next
    kernel starts at t + 2.02 ms): `osrt` `pthread_cond_wait` 19 × 1.040 = 19.760 ms (50.9 % of 38.852 ms); the
    verdict says the launching thread waits; the evidence says, truly, that no other thread of *its* process works
    or is sampled during them."""
    b = TraceBuilder()
    _detokenizer(b)
    rep = _run(b, tmp_path)
    f = _finding(rep, "idle_osrt")
    assert f["title"] == "The launching thread waits in `pthread_cond_wait` while the GPU idles: 50.9 % (19.760 ms)"
    assert ("No CPU sample of another thread of its process falls inside these waits (the trace has CPU samples): "
            "none was sampled running during them.") in f["evidence"]


def test_waits_advice_does_not_blame_load_while_another_process_is_sampled_running(tmp_path: Path) -> None:
    """(trace: :func:`_detokenizer`) During each of the 19 waits in the window the detokenizer process (pid 200) is
    sampled running `detokenize` 10 times (t + 900 … t + 1800 µs inside [t + 860, t + 1900) µs): 190 samples, the
    whole wait but its first 40 and last 100 µs. The `osrt` finding advises "No other thread of its process is seen
    working ...: if the thread waits for work from outside ..., the GPU idles for lack of load: batch requests or
    raise the load; else find what releases the waits (..., CPU sampling of the whole process tree)" — the trace
    has that CPU sampling and it shows another process running through every wait: the engine waits for the
    detokenizer's reply, not for load. (Was a strict xfail.) Fixed: `build_wait_samples` reads the samples of every
    process in the waits' span, `LauncherWaits` has `process_samples` / `processes` (pid, name, samples inside the
    waits), the evidence names a process with ≥ 10 % of the samples inside the waits and ≥ 10 of them
    ("`detokenizer` (pid 200) sampled running in 190 of the 190 samples taken inside them"), and
    `wait.other_process` replaces `wait.unseen` (tests/findings/test_waits_other_process.py: the thresholds, no
    samples, a hostile name)."""
    b = TraceBuilder()
    _detokenizer(b)
    rep = _run(b, tmp_path)
    f = _finding(rep, "idle_osrt")
    assert not any("lack of load" in a for a in f["recommendation"]), f["recommendation"]
    assert any("detokenizer" in e and "190" in e for e in f["evidence"]), f["evidence"]
