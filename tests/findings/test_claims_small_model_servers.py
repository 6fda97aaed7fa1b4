"""Small models and CPU-bound inference (a BERT-style embedding server answering one request at a time, idle between
requests). Each trace is built by hand; the truth is worked out in the docstrings."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict

from synth import TraceBuilder

from nsys_llm_explainer.findings.advice import ADVICE
from nsys_llm_explainer.options import options_from_kwargs
from nsys_llm_explainer.pipeline import analyze_path

US = 1_000
MS = 1_000 * US
PY = "/usr/lib/libpython3.10.so"
LAYER = (("ampere_sgemm_32x32_sliced1x4_tn", 6), ("void at::native::vectorized_elementwise_kernel<4, gelu>()", 2),
         ("void at::native::vectorized_layer_norm_kernel<float, float>()", 3),
         ("fmha_cutlassF_f32_aligned_64x64_rf_sm80", 5), ("ampere_sgemm_32x32_sliced1x4_tn", 6),
         ("void at::native::elementwise_kernel<128, 2>()", 2))


def _server(tmp_path: Path, *, requests: int, gap: int) -> Dict[str, Any]:
    """pid 100: thread 100 runs the model, thread 101 (`uvicorn`) waits in ``epoll_wait`` until each request
    arrives. Request r starts at t (5 ms for r = 0): ``request`` push/pop range from t; three CPU samples
    (``tokenize``) at t+50, t+150, t+250 µs; at t+300 µs a 20 µs ``cudaMemcpyAsync`` of 4 KiB pageable → device
    (copy [t+310, t+312) µs); 12 layers × 6 kernels (6, 2, 3, 5, 6, 2 µs: 24 µs a layer, 288 µs a request),
    launched every 10 µs from t+325 µs (6 µs calls, kernel 5 µs after the call); then a synchronous ``cudaMemcpy``
    of 3 KiB to pageable memory [t+1035, t+1053) µs (copy [t+1050, t+1052) µs); the range ends at t+1103 µs and
    the next request starts ``gap`` after t+1053 µs."""
    b = TraceBuilder()
    b.process(100, "python3")
    gm = b.thread(100, 100, "python3")
    gu = b.thread(100, 101, "uvicorn")
    t = 5 * MS
    for r in range(requests):
        b.osrt(t - gap + 100 * US if r else 0, t, tid_g=gu, name="epoll_wait")
        for s in range(3):
            b.cpu_sample(t + 50 * US + s * 100 * US, tid_g=gm, frames=[("tokenize", PY), ("main", "/usr/bin/python3")])
        h = t + 300 * US
        c = b.runtime(h, h + 20 * US, tid_g=gm, name="cudaMemcpyAsync_v3020")
        b.memcpy(h + 10 * US, h + 12 * US, pid=100, bytes=4096, copy_kind=1, src_kind=0, dst_kind=2, corr=c)
        h += 25 * US
        for _ in range(12):
            for name, d in LAYER:
                b.launch(h, h + 6 * US, h + 5 * US, h + 5 * US + d * US, pid=100, tid=100, name=name)
                h += 10 * US
        k = h + 5 * US
        c = b.runtime(h, k + 3 * US, tid_g=gm, name="cudaMemcpy_v3020")
        b.memcpy(k, k + 2 * US, pid=100, bytes=3072, copy_kind=2, src_kind=2, dst_kind=0, corr=c)
        b.nvtx_push_pop(t, k + 53 * US, "request", tid_g=gm)
        t = k + 3 * US + gap
    p = tmp_path / "server.sqlite"
    b.write(str(p), overwrite=True)
    return analyze_path(str(p), options_from_kwargs()).to_dict()


def test_requests_spread_over_the_trace_are_not_warm_up(tmp_path: Path) -> None:
    """Five identical requests 50 ms apart: request r spans [5 + 51.053 r, 6.103 + 51.053 r) ms, so the trace spans
    5 → 210.315 ms (205.315 ms) with 5 × 288 µs = 1.440 ms of kernels (0.70 %). The densest stretch of bins is a
    single request; the rule trimmed [5, 56.383) ms — request 0 and the pause after it — as "51.383 ms of warm-up
    (GPU busy 0.56%)" (288 µs / 51.383 ms), although the kept part is no busier: 4 × 288 µs / 153.932 ms = 0.75 %.
    Request 0 is the same work as the others: the whole trace is the window (0.56 ≥ half of 0.75)."""
    rep = _server(tmp_path, requests=5, gap=50 * MS)
    w = rep["window"]
    assert (w["full_start_ns"], w["full_end_ns"]) == (5 * MS, 210_315 * US)
    assert w["method"] == "full" and (w["start_ns"], w["end_ns"]) == (5 * MS, 210_315 * US)
    assert w["reason"] == ("Full trace kept: the leading part (GPU busy 0.56%) is not under half as busy as the rest "
                           "(0.75%), so it is treated as part of the workload, not warm-up or tail.")
    assert rep["devices"][0]["busy_ns"] == 1_440 * US


def test_waiting_server_is_not_told_to_overlap_cpu_work(tmp_path: Path) -> None:
    """Thirty requests 20 ms apart (as above): the GPU idles 603.000 ms of the 611.640 ms window (8.640 ms of
    kernels); 578.550 ms of it lies between one request's D2H copy and the next request's range, where the model
    thread is in no CUDA call, range or OS call (``host_cpu``). CPU sampling was on: the model thread has 90 samples,
    3 in each 300 µs tokenization (10 kHz while it runs), and none in the 578.550 ms of ``host_cpu`` gaps (about
    5,800 expected had it run there); the uvicorn thread waits in ``epoll_wait`` throughout them. The thread was
    not running: the GPU idles because no request came, and "overlap CPU work (scheduling, data preparation,
    Python) with GPU execution" is advice the trace contradicts. Fix: when the gaps' thread has CPU samples
    elsewhere but (almost) none inside the gaps, title the finding as idle between requests / the thread off-CPU
    and advise batching or more load instead of overlapping CPU work. Done as advice: with ≥ 20 samples of the
    thread and ≥ 100 ms of gaps holding none (at nsys's lowest rate, 100 Hz, ≥ 10 had it run there) the fact
    ``host_thread_off_cpu`` holds and the line is `host_cpu.off_cpu`. Opposite: 6 requests (18 samples, under 20):
    the thread's sampling is too thin to judge, the profile advice stays."""
    rep = _server(tmp_path, requests=30, gap=20 * MS)
    f = next(f for f in rep["findings"] if f["id"] == "idle_host_cpu")
    assert "CPU samples: none of the 90 samples of the gaps' host thread fall inside them." in f["evidence"]
    assert not any("overlap CPU work" in a for a in f["recommendation"]), f["recommendation"]
    assert f["recommendation"][0] == ADVICE["host_cpu.off_cpu"].text
    rep = _server(tmp_path, requests=6, gap=20 * MS)
    f = next(f for f in rep["findings"] if f["id"] == "idle_host_cpu")
    assert "CPU samples: none of the 18 samples of the gaps' host thread fall inside them." in f["evidence"]
    assert f["recommendation"][0] == ADVICE["host_cpu.profile"].text
