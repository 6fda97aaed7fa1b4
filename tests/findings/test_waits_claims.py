"""Claims of the waits finding on multi-thread serving traces (helper CA's sweep): a thread said to *work* during
the launching thread's waits must not be blocked itself (numbers worked out in the docstrings)."""

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


def _osrt_finding(rep):
    (f,) = [f for f in rep.findings if f.cause and f.cause[0] == "osrt"]
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
