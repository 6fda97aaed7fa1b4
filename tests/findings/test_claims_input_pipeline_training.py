"""Input-pipeline-bound training: a training loop whose launching thread waits for its next batch while the GPU idles
was told the serving engine's story — "a tokenizer, detokenizer, scheduler or API-server process … let the engine run
the next step … (asynchronous output processing / scheduling)" when its data-loader workers were sampled running through
the waits, "the GPU idles for lack of load: batch requests or raise the load" when nothing else was seen. The advice
lines that speak of requests, load and engines need the workload `inference` (or `unknown`); a training workload gets
the input-data lines. Each trace is built by hand; the truth is worked out in the docstrings. Rule: docs/FINDINGS.md,
"Follow the wait" and the `host_cpu` facts."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Tuple

from claims_support import finding_of, report_of
from synth import TraceBuilder

from nsys_llm_explainer.findings.advice import ADVICE

US = 1_000
MS = 1_000_000
PY = "/usr/lib/libpython3.10.so"
T0 = 50 * MS
SERVING = ("tokenizer, detokenizer", "API-server", "asynchronous output processing", "lack of load",
           "batch requests")


def _loader_loop(*, osrt: bool = True, workers: Tuple[int, ...] = (300, 301), main_sampled: bool = False,
                 n: int = 20, training: bool = True) -> TraceBuilder:
    """A PyTorch training loop fed by data-loader worker processes, one step per 10 ms, s = T0 + 8 ms + 10 i ms.

    pid 100: the pin-memory thread 3 calls `cudaHostAlloc` at [T0 − 5, T0 − 4) ms (the trace's first CUDA call:
    the window is the whole trace, [T0 − 5 ms, last kernel end)). Main thread 1 waits for the batch in `poll`
    [s − 8 ms, s) (``osrt``; thread 3 in `pthread_cond_wait` meanwhile), then `cudaMemcpyAsync` [s, s + 10 µs) of a
    12 MiB pinned batch, Host-to-Device [s + 20, s + 520) µs on stream 7; launches 10 forward GEMMs of 200 µs
    (s + 520 µs …); autograd thread 2 (`pt_autograd_0`) launches 10 `convolution_backward_kernel`s of 300 µs; thread
    1 the Adam kernel of 400 µs: the GPU runs [s + 520 µs, s + 5.92 ms), idle 4.6 ms to the next step's first
    kernel, 4.08 ms of it while thread 1 sits in the next `poll`. Workers ``workers`` (process `pt_data_worker`) are
    sampled running `decode_jpeg` in turn every 250 µs from 100 µs into each wait: 32 samples per wait.
    ``main_sampled``: thread 1 is sampled 4 times in each launch burst (never inside a gap). ``training`` False: the
    backward and Adam kernels are named `gemm_b` / `gemm_c` and thread 2 `python3` (no backward, no optimizer, no
    autograd thread: an inference workload)."""
    b = TraceBuilder()
    pid = 100
    b.process(pid, "python3")
    g = b.thread(pid, 1, "python3")
    b.thread(pid, 2, "pt_autograd_0" if training else "python3")
    gp = b.thread(pid, 3, "python3")
    gws = []
    for w in workers:
        b.process(w, "pt_data_worker")
        gws.append(b.thread(w, w, "pt_data_worker"))
    b.runtime(T0 - 5 * MS, T0 - 4 * MS, tid_g=gp, name="cudaHostAlloc_v3020")
    back = "convolution_backward_kernel" if training else "gemm_b"
    adam = "void multi_tensor_apply_kernel<AdamFunctor<float>>(int)" if training else "gemm_c"
    for i in range(n):
        t = T0 + i * 10 * MS
        s = t + 8 * MS
        if osrt:
            b.osrt(t, s, tid_g=g, name="poll")
            b.osrt(t, s, tid_g=gp, name="pthread_cond_wait")
        for j, ts in enumerate(range(t + 100 * US, s, 250 * US)):
            if gws:
                b.cpu_sample(ts, tid_g=gws[j % len(gws)], frames=[("decode_jpeg", "/usr/lib/libjpeg.so"),
                                                                   ("__getitem__", PY)])
        if main_sampled:
            for q in range(4):
                b.cpu_sample(s + 30 * US + 100 * q * US, tid_g=g, frames=[("cudaLaunchKernel", "libcudart.so"),
                                                                          ("forward", PY)])
        c = b.runtime(s, s + 10 * US, tid_g=g, name="cudaMemcpyAsync_v3020")
        b.memcpy(s + 20 * US, s + 520 * US, pid=pid, bytes=12 << 20, copy_kind=1, src_kind=1, dst_kind=2, corr=c)
        k0 = s + 520 * US
        for k in range(10):
            b.launch(s + 20 * US + 10 * k * US, s + 25 * US + 10 * k * US, k0 + 200 * k * US, k0 + 200 * (k + 1) * US,
                     pid=pid, tid=1, name="ampere_sgemm_128x64_nn")
        k1 = k0 + 2 * MS
        for k in range(10):
            b.launch(s + 200 * US + 20 * k * US, s + 205 * US + 20 * k * US, k1 + 300 * k * US,
                     k1 + 300 * (k + 1) * US, pid=pid, tid=2, name=back)
        k2 = k1 + 3 * MS
        b.launch(s + 450 * US, s + 455 * US, k2, k2 + 400 * US, pid=pid, tid=1, name=adam)
    return b


def _advice(rep: Dict[str, Any], fid: str) -> str:
    return " ".join(finding_of(rep, fid)["recommendation"])


def test_data_loader_workers_sampled_in_the_waits_get_input_advice_not_serving_advice(tmp_path: Path) -> None:
    """Window [T0 − 5 ms, T0 + 203.92 ms) = 208.92 ms; `poll` idle: the first gap's 8 ms + 19 × 4.08 ms = 85.52 ms
    (40.93 %). All 20 waits lie in the window: 20 × 32 = 640 samples inside them, 320 of each worker (50 % ≥ 10 %,
    ≥ 10 samples): both named. Backward kernels 60 of 108 ms (55.6 %): training. The advice is the input-data line
    and the `DataLoader` line (framework pytorch), not the engine's (tokenizer / detokenizer / API server,
    asynchronous output processing)."""
    rep = report_of(_loader_loop(), tmp_path)
    assert rep["facts"]["workload"] == "training"
    f = finding_of(rep, "idle_osrt")
    assert f["title"] == "The launching thread waits in `poll` while the GPU idles: 40.9 % (85.520 ms)"
    assert ("CPU samples of other processes taken during these waits: `pt_data_worker` (pid 300) sampled running in "
            "320 of the 640 samples taken inside them; `pt_data_worker` (pid 301) sampled running in 320 of the 640 "
            "samples taken inside them (every thread's but the launching thread's).") in f["evidence"]
    assert f["recommendation"] == [ADVICE["wait.other_process.training"].text, ADVICE["wait.other_process.torch"].text]
    text = _advice(rep, "idle_osrt")
    assert not any(w in text for w in SERVING), text


def test_same_loop_as_inference_keeps_the_engine_line(tmp_path: Path) -> None:
    """The same trace with the backward and Adam kernels renamed (`gemm_b`, `gemm_c`) and thread 2 `python3`: no
    backward, no optimizer, no autograd thread, GEMMs present: inference; the other-process line is the engine's
    `wait.other_process`, unchanged."""
    rep = report_of(_loader_loop(training=False), tmp_path)
    assert rep["facts"]["workload"] == "inference"
    assert finding_of(rep, "idle_osrt")["recommendation"] == [ADVICE["wait.other_process"].text]


def test_training_loop_with_no_one_seen_working_is_not_told_lack_of_load(tmp_path: Path) -> None:
    """No worker process (num_workers = 0 unseen, or the workers not sampled) and no CPU sample: thread 3 waits too,
    nothing works during the waits, so the trace cannot tell what `poll` waits for. A training loop has no requests
    to batch: the line is `wait.unseen.training` (its next batch, prepared faster or further ahead), not
    `wait.unseen` ("lack of load: batch requests or raise the load")."""
    rep = report_of(_loader_loop(workers=()), tmp_path)
    assert rep["facts"]["workload"] == "training"
    f = finding_of(rep, "idle_osrt")
    assert f["recommendation"] == [ADVICE["wait.unseen.training"].text]
    assert not any(w in _advice(rep, "idle_osrt") for w in SERVING)


def test_off_cpu_launcher_of_a_training_loop_is_not_told_lack_of_load(tmp_path: Path) -> None:
    """OS calls not traced, 30 steps: the idle between steps is `host_cpu` (thread 1 outside any traced call). Thread 1
    has 4 × 30 = 120 samples, all in its launch bursts, none in the gaps (≥ 20 samples, gaps ≥ 100 ms): off-CPU
    there. Training: `host_cpu.off_cpu.training` (its next batch; trace OS calls), not "lack of load: batch
    requests". No worker process: with workers sampled in the gaps the finding names them instead
    (test_claims_unsampled_launcher_gaps.py)."""
    rep = report_of(_loader_loop(osrt=False, main_sampled=True, n=30, workers=()), tmp_path)
    assert rep["facts"]["workload"] == "training"
    f = finding_of(rep, "idle_host_cpu")
    assert ("CPU samples: the gaps' host thread has 120 CPU samples in the traced span, none inside its host-side "
            "idle pieces on this device.") in f["evidence"]
    assert f["recommendation"] == [ADVICE["host_cpu.off_cpu.training"].text]
    assert not any(w in _advice(rep, "idle_host_cpu") for w in SERVING)


def test_four_data_loader_workers_are_all_accounted_for(tmp_path: Path) -> None:
    """`num_workers=4`: workers 300 … 303 sampled in turn, 32 samples per wait, 20 waits in the window: 640 samples,
    160 of each (25 % ≥ 10 %, ≥ 10): all four qualify. The sentence names three (most samples first, ties by pid:
    300, 301, 302) and used to drop the fourth silently — as if pid 303, with the same 25 %, had not run; it now
    counts it: "1 more process with 160 of them, each ≥ 10 %"."""
    rep = report_of(_loader_loop(workers=(300, 301, 302, 303)), tmp_path)
    (w,) = rep["waits"]["launchers"]
    assert [(p["pid"], p["sampled"]) for p in w["processes"]] == [(300, 160), (301, 160), (302, 160), (303, 160)]
    f = finding_of(rep, "idle_osrt")
    assert ("CPU samples of other processes taken during these waits: `pt_data_worker` (pid 300) sampled running in "
            "160 of the 640 samples taken inside them; `pt_data_worker` (pid 301) sampled running in 160 of the 640 "
            "samples taken inside them; `pt_data_worker` (pid 302) sampled running in 160 of the 640 samples taken "
            "inside them; 1 more process with 160 of them, each ≥ 10 % (all in report.json `waits`) (every thread's "
            "but the launching thread's).") in f["evidence"]
