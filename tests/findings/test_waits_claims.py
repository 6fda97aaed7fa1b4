"""Claims of the waits finding on multi-thread serving traces: a thread said to *work* during the launching thread's
waits must not be blocked itself (numbers worked out in the docstrings)."""

from __future__ import annotations

from pathlib import Path

import pytest
from synth import TraceBuilder

from nsys_llm_explainer.findings.advice import ADVICE
from nsys_llm_explainer.options import options_from_kwargs
from nsys_llm_explainer.pipeline import analyze_path

US, MS = 1_000, 1_000_000
PID = 100
ITERS = 20
PERIOD = 3_070 * US


def _tokenizer_trace(tmp_path: Path, blocked_ns: int, name: str):
    """Per iteration i (t = i × 3.07 ms): `MainThread` (tid 100) launches 4 `gemm` kernels of 100 µs
    (t+20 µs → t+420 µs), then waits in `futex` [t+50 µs, t+3.05 ms) (3 ms). `tokenizer` (tid 101) holds NVTX range
    `tokenize-<i>` [t+40 µs, t+3.06 ms) over the whole wait and is blocked in `sem_wait` [t+50 µs, +blocked_ns) of
    it. Window [0, 20 × 3.07 ms)."""
    b = TraceBuilder()
    b.process(PID, "api_server")
    main = b.thread(PID, PID, "MainThread")
    tok = b.thread(PID, PID + 1, "tokenizer")
    for i in range(ITERS):
        t = i * PERIOD
        for j in range(4):
            b.launch(t + j * 10 * US, t + j * 10 * US + 5 * US, t + 20 * US + j * 100 * US,
                     t + 20 * US + (j + 1) * 100 * US, pid=PID, tid=PID, name="gemm")
        w0, w1 = t + 50 * US, t + 3_050 * US
        b.osrt(w0, w1, tid_g=main, name="futex")
        b.nvtx_push_pop(w0 - 10 * US, w1 + 10 * US, f"tokenize-{i}", tid_g=tok)
        b.osrt(w0, w0 + blocked_ns, tid_g=tok, name="sem_wait")
    p = tmp_path / name
    b.write(str(p), overwrite=True)
    return analyze_path(str(p), options_from_kwargs(window=(0, ITERS * PERIOD)))


def _osrt_findings(rep):
    return [f for f in rep.findings if f.cause and f.cause[0] == "osrt"]


def _osrt_finding(rep):
    (f,) = _osrt_findings(rep)
    return f


def test_a_thread_blocked_inside_its_own_range_waits_it_does_not_work(tmp_path: Path) -> None:
    """The tokenizer is in `sem_wait` for all of the launcher's 20 × 3 ms = 60 ms of `futex`: it works 0 ns, waits
    60 ms (100 %). The finding must not say "`tokenizer` works 100 %" nor advise shortening its CPU work
    (`wait.cpu`): no other thread works → "No other thread of its process works …; `tokenizer` waits too (in
    `sem_wait` 100 %)" and `wait.unseen`. (Before the fix: active = |range ∩ waits| = 60 ms, "works 100 %".)"""
    rep = _tokenizer_trace(tmp_path, 3 * MS, "blocked.sqlite")
    (lw,) = rep.waits.launchers
    assert (lw.tid, lw.wait_ns) == (PID, ITERS * 3 * MS)
    (tok,) = lw.threads
    assert (tok.tid, tok.active_ns, tok.waiting_ns) == (PID + 1, 0, ITERS * 3 * MS)
    assert tok.waiting_pct_of_waits == pytest.approx(100.0)
    f = _osrt_finding(rep)
    text = " ".join(f.evidence)
    assert "works 100 %" not in text
    assert "No other thread of its process works" in text
    assert "`tokenizer` (tid 101) waits too (in `sem_wait` 100 %)" in text
    assert f.recommendation == (ADVICE["wait.unseen"].text,)


def test_a_thread_blocked_for_part_of_its_range_works_the_rest(tmp_path: Path) -> None:
    """`sem_wait` covers the first 2 ms of each 3 ms wait: the tokenizer works (range minus its own wait)
    1 ms × 20 = 20 ms = 33.3 % of the 60 ms of waits, and waits 40 ms = 66.7 %. (Before the fix: works 100 %.)"""
    rep = _tokenizer_trace(tmp_path, 2 * MS, "partial.sqlite")
    (lw,) = rep.waits.launchers
    (tok,) = lw.threads
    assert (tok.active_ns, tok.waiting_ns) == (ITERS * MS, ITERS * 2 * MS)
    assert tok.pct_of_waits == pytest.approx(100.0 / 3)
    assert "`tokenizer` (tid 101) works 33 % of that time" in " ".join(_osrt_finding(rep).evidence)


def _engine_pair(tmp_path: Path, worker_call: str, name: str):
    """One process (pid 1000). Per iteration i (t = i × 2 ms): `engine0` (tid 1001) launches a 300 µs kernel on
    GPU 0 (t+10 → t+310 µs) then waits in `sem_wait` [t+320 µs, t+1.82 ms) (1.5 ms); `engine1` (tid 1002) launches
    a 1.815 ms kernel on GPU 1 (t+10 µs → t+1.825 ms) and is in ``worker_call`` [t+10 µs, t+1.83 ms), covering the
    whole wait. Window [0, 40 ms) asked, cut to the traced span (≥ 39.825 ms): all 20 waits lie inside it."""
    b = TraceBuilder()
    b.gpu(0)
    b.gpu(1)
    b.process(1000, "serve")
    e0 = b.thread(1000, 1001, "engine0")
    e1 = b.thread(1000, 1002, "engine1")
    for i in range(20):
        t = i * 2 * MS
        b.launch(t, t + 5 * US, t + 10 * US, t + 310 * US, pid=1000, tid=1001, device=0, name="gemm0")
        b.osrt(t + 320 * US, t + 1_820 * US, tid_g=e0, name="sem_wait")
        b.launch(t, t + 5 * US, t + 10 * US, t + 1_825 * US, pid=1000, tid=1002, device=1, name="gemm1")
        if worker_call.startswith("cuda"):
            b.runtime(t + 10 * US, t + 1_830 * US, tid_g=e1, name=worker_call)
        else:
            b.osrt(t + 10 * US, t + 1_830 * US, tid_g=e1, name=worker_call)
    p = tmp_path / name
    b.write(str(p), overwrite=True)
    return analyze_path(str(p), options_from_kwargs(window=(0, 40 * MS)))


def test_threads_inside_other_os_calls_do_not_get_the_outside_calls_advice(tmp_path: Path) -> None:
    """`engine1` is in `ioctl` (an OS call that does not wait, class `other`) for all of `engine0`'s 20 × 1.5 ms =
    30 ms of waits: it works 100 %, in `ioctl` 100 %. No file I/O, no copy. `wait.cpu` ("run code outside OS and
    CUDA calls") contradicts that line; the advice is `wait.calls`. (Before the fix: `wait.cpu`.)"""
    rep = _engine_pair(tmp_path, "ioctl", "ioctl.sqlite")
    lw = next(w for w in rep.waits.launchers if w.tid == 1001)
    (e1,) = lw.threads
    assert (e1.tid, e1.active_ns, lw.wait_ns) == (1002, 30 * MS, 30 * MS)
    f = next(f for f in _osrt_findings(rep) if f.device_id == 0)
    assert "`engine1` (tid 1002) works 100 % of that time (in `ioctl` 100 %)" in " ".join(f.evidence)
    assert f.recommendation == (ADVICE["wait.calls"].text,)


def test_a_thread_in_a_cuda_synchronize_waits_it_does_not_work(tmp_path: Path) -> None:
    """`engine1` is in `cudaStreamSynchronize` for all of `engine0`'s 30 ms of waits, blocked until its 1.8 ms
    kernel on GPU 1 ends: it waits (30 ms, 100 %) and works 0 ns — a CUDA synchronize call waits, as an OS call
    of the wait class does. It used to read "`engine1` works 100 % (in `cudaStreamSynchronize` 100 %)"; now "No
    other thread of its process works …; `engine1` waits too (in `cudaStreamSynchronize` 100 %)" and
    `wait.unseen`."""
    rep = _engine_pair(tmp_path, "cudaStreamSynchronize_v3020", "sync.sqlite")
    lw = next(w for w in rep.waits.launchers if w.tid == 1001)
    (e1,) = lw.threads
    assert (e1.active_ns, e1.waiting_ns) == (0, 30 * MS)
    f = next(f for f in _osrt_findings(rep) if f.device_id == 0)
    assert ("No other thread of its process works (an NVTX range, a CUDA call or an OS call that does not wait) for "
            "as much as 10 % of these waits") in " ".join(f.evidence)
    assert "`engine1` (tid 1002) waits too (in `cudaStreamSynchronize` 100 %)" in " ".join(f.evidence)
    assert f.recommendation == (ADVICE["wait.unseen"].text,)
