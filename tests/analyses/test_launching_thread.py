"""Which thread is "the launching thread" of the waits section (docs/METRICS.md "Waits of the launching thread"):
the one that launches the work the report is about (≥ 10 % of the window's kernel time on its GPUs), and when
several threads each launch that much on one GPU, the report says so instead of naming one."""

from __future__ import annotations

from pathlib import Path

from synth import TraceBuilder

from nsys_llm_explainer import analyze
from nsys_llm_explainer.analyses.threads.waits import analyze_waits
from nsys_llm_explainer.pipeline import load_model
from nsys_llm_explainer.render import render_markdown

US = 1000
MS = 1000 * US
T0 = 1_000_000
W0, W1 = T0, T0 + 100 * MS


def _vllm(path: str) -> None:
    """A vLLM-V1-like capture: EngineCore (pid 100) launches 3 warm-up kernels of 10 µs on GPU 0 at 50.1, 50.2,
    50.3 ms and sits in `epoll_wait` over [1, 99) ms; workers pid 200 (GPU 0) and 201 (GPU 1) each launch 100
    GEMMs of 500 µs at 1 + 0.9·i ms and wait in `sem_wait` [0.55, 0.85) ms after each (30 ms)."""
    b = TraceBuilder()
    b.process(100, "EngineCore_0")
    gc = b.thread(100, 100, "EngineCore_0")
    b.gpu(0)
    b.gpu(1)
    for i in range(3):
        t = T0 + 50 * MS + 100 * US * (i + 1)
        b.launch(t - 5 * US, t - 1 * US, t, t + 10 * US, pid=100, tid=100, device=0, name="warmup_kernel")
    b.osrt(T0 + 1 * MS, T0 + 99 * MS, tid_g=gc, name="epoll_wait")
    for pid, dev in ((200, 0), (201, 1)):
        b.process(pid, f"VllmWorker-{dev}")
        g = b.thread(pid, pid, f"VllmWorker-{dev}")
        for i in range(100):
            t = T0 + 1 * MS + i * 900 * US
            b.launch(t - 5 * US, t - 1 * US, t, t + 500 * US, pid=pid, tid=pid, device=dev, name="ampere_bf16_gemm")
            b.osrt(t + 550 * US, t + 850 * US, tid_g=g, name="sem_wait")
    b.write(path)


def test_an_engine_core_with_three_warm_up_kernels_is_not_the_launching_thread(tmp_path: Path) -> None:
    """Window [0, 100) ms. GPU 0's kernel time: 100 × 500 µs + 3 × 10 µs = 50.03 ms; EngineCore launched 30 µs of
    it, 0.06 % < 10 %: not followed, although its 98 ms of `epoll_wait` are the largest waits (it was the first
    "Waits of the launching thread"). Worker 0: 50 / 50.03 = 99.94 % of GPU 0, worker 1: 100 % of GPU 1, neither
    with a co-launcher; each waits 100 × 300 µs = 30 ms."""
    p = str(tmp_path / "v.sqlite")
    _vllm(p)
    ws = analyze_waits(load_model(p), W0, W1)
    got = [(w.pid, w.devices, round(w.kernel_pct, 4), w.co_launchers, w.wait_ns) for w in ws.launchers]
    assert got == [(200, (0,), round(100 * 50 / 50.03, 4), 0, 30 * MS), (201, (1,), 100.0, 0, 30 * MS)]
    md = render_markdown(analyze(p))
    assert "EngineCore_0` (tid 100)" not in md.split("## Waits of the launching thread", 1)[1]
    assert "**Waits of the launching thread** `VllmWorker-0` (tid 200): " in md


def test_two_threads_launching_comparable_shares_are_not_one_launching_thread(tmp_path: Path) -> None:
    """One process, one GPU: thread 11 launches 60 kernels of 300 µs (18 ms), thread 12 40 of 300 µs (12 ms), one
    every 1 ms from 1 ms, alternating in blocks; each waits in `pthread_cond_wait` for 500 µs after each of its
    launches. Window [0, 102) ms: thread 11 has 18 / 30 = 60 %, thread 12 40 %: both ≥ 10 %, so each has one
    co-launcher and the report says "a launching thread … (one of 2 threads …; this one 60 %)" rather than "the
    launching thread"."""
    b = TraceBuilder()
    b.process(10)
    g = {11: b.thread(10, 11, "main"), 12: b.thread(10, 12, "autograd")}
    b.gpu(0)
    for i in range(100):
        tid = 11 if i % 5 < 3 else 12
        t = T0 + 1 * MS + i * MS
        b.launch(t - 5 * US, t - 1 * US, t, t + 300 * US, pid=10, tid=tid, device=0, name="ampere_bf16_gemm")
        b.osrt(t + 310 * US, t + 810 * US, tid_g=g[tid], name="pthread_cond_wait")
    p = str(tmp_path / "t.sqlite")
    b.write(p)
    ws = analyze_waits(load_model(p), W0, T0 + 102 * MS)
    got = sorted((w.tid, round(w.kernel_pct, 4), w.co_launchers, w.wait_ns) for w in ws.launchers)
    assert got == [(11, 60.0, 1, 30 * MS), (12, 40.0, 1, 20 * MS)]
    assert ws.launchers[0].shared_with() == ("one of 2 threads that each launched ≥ 10 % of the window's kernel "
                                             "time on GPU 0; this one 60 %")
    md = render_markdown(analyze(p))
    assert "**Waits of a launching thread** `main` (tid 11) (one of 2 threads that each launched ≥ 10 % of" in md
    assert "**Waits of the launching thread** `main`" not in md


def test_launches_spread_over_many_threads_say_so(tmp_path: Path) -> None:
    """Twelve threads of one process (a thread pool) take turns launching one GPU's 120 kernels of 500 µs (thread
    i launches kernels i, i + 12, …: 10 each, 5 ms = 8.3 % of the 60 ms of kernel time, < 10 %) and each waits in
    `sem_wait` between its turns. No thread is "the launching thread": the waits section is omitted, and its reason
    says the launches are spread over many threads (it said no kernel was linked to its launch call, though every
    one is)."""
    b = TraceBuilder()
    b.process(300, "pool")
    b.gpu(0)
    gs = [b.thread(300, 300 + j, f"worker-{j}") for j in range(12)]
    for i in range(120):
        t = T0 + 1 * MS + i * 600 * US
        j = i % 12
        b.launch(t - 5 * US, t - 1 * US, t, t + 500 * US, pid=300, tid=300 + j, device=0, name="ampere_bf16_gemm")
        b.osrt(t + 10 * US, t + 400 * US, tid_g=gs[j], name="sem_wait")
    p = str(tmp_path / "pool.sqlite")
    b.write(p)
    ws = analyze_waits(load_model(p), W0, W1)
    assert not ws.available
    assert ws.reason == ("no thread launched ≥ 10 % of the window's kernel time on its GPUs (the launches are "
                         "spread over many threads)")
