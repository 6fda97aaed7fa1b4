"""Serving traces with Python host contention and many host threads: the waits section and the waits finding must not
say more than the trace shows (numbers worked out in the docstrings)."""

from __future__ import annotations

from pathlib import Path

from synth import TraceBuilder

from nsys_llm_explainer.findings.advice import ADVICE
from nsys_llm_explainer.options import options_from_kwargs
from nsys_llm_explainer.pipeline import analyze_path
from nsys_llm_explainer.render.markdown import render_markdown

US, MS = 1_000, 1_000_000
PID = 100
ITERS = 20
PY = ("PyEval_EvalFrameDefault", "/usr/lib/libpython3.10.so")


def _gil_trace(tmp_path: Path, samples: bool, name: str):
    """GIL contention. Per iteration i (t = i × 2 ms): `MainThread` (tid 100) launches 4 `gemm` kernels of 100 µs
    (t+20 µs → t+420 µs), then waits in `pthread_mutex_lock` [t+450 µs, t+1.95 ms) (1.5 ms). `tokenizer`
    (tid 101) has no NVTX range, CUDA call or OS call; with ``samples`` it has a CPU sample (leaf `tokenize_batch`)
    every 100 µs, 20 per iteration: 15 of them inside each wait. Window: the traced span [0, 38.42 ms) (the last
    kernel ends at 19 × 2 ms + 420 µs): 19 waits inside it = 28.5 ms."""
    b = TraceBuilder()
    b.process(PID, "engine")
    main = b.thread(PID, PID, "MainThread")
    tok = b.thread(PID, PID + 1, "tokenizer")
    for i in range(ITERS):
        t = i * 2 * MS
        for j in range(4):
            b.launch(t + j * 10 * US, t + j * 10 * US + 5 * US, t + 20 * US + j * 100 * US,
                     t + 20 * US + (j + 1) * 100 * US, pid=PID, tid=PID, name="gemm")
        b.osrt(t + 450 * US, t + 1_950 * US, tid_g=main, name="pthread_mutex_lock")
        if samples:
            for k in range(20):
                b.cpu_sample(t + k * 100 * US, tid_g=tok, frames=[("tokenize_batch", "/usr/lib/tokenizers.so"), PY])
    p = tmp_path / name
    b.write(str(p), overwrite=True)
    return analyze_path(str(p), options_from_kwargs())


def _osrt_finding(rep):
    (f,) = [f for f in rep.findings if f.cause and f.cause[0] == "osrt"]
    return f


def test_waits_section_has_no_empty_table_when_no_other_thread_shows(tmp_path: Path) -> None:
    """`MainThread` waits 19 × 1.5 ms = 28.5 ms (74.2 % of 38.42 ms) and no other thread has a traced row: the
    section said "What the other threads of its process were in meanwhile (…):" above a table with a header and no
    row, and "All rows in `tables/thread_waits.csv`". Now one sentence says no other thread has a traced row, and
    there is no table."""
    rep = _gil_trace(tmp_path, False, "gil.sqlite")
    (lw,) = rep.waits.launchers
    assert (lw.tid, lw.wait_ns, lw.rows) == (PID, 19 * 1_500 * US, ())
    md = render_markdown(rep)
    sec = md.split("## Waits of the launching thread", 1)[1].split("\n## ", 1)[0]
    assert "28.500 ms in OS calls that wait (74.2 % of the window)" in sec
    assert "No other thread of its process has an NVTX range, CUDA call or OS call that overlaps these waits." in sec
    assert "were in meanwhile" not in sec
    assert "| launching thread |" not in sec and "tables/thread_waits.csv" not in sec


def test_waits_section_keeps_its_table_when_another_thread_shows(tmp_path: Path) -> None:
    """Contrast: a `detok` thread (tid 102) in NVTX `detokenize` [t+500 µs, t+1.5 ms) during each wait overlaps
    all 20 × 1 ms = 20 ms of it. The window is the traced span [0, 39.5 ms) (the last range ends at 38 + 1.5 ms), so
    the waits are 19 × 1.5 ms + [38.45, 39.5) 1.05 ms = 29.55 ms (74.8 % of 39.5 ms) and `detok` overlaps 20 / 29.55
    = 67.7 % of them: the table stays, with that row."""
    b = TraceBuilder()
    b.process(PID, "engine")
    main = b.thread(PID, PID, "MainThread")
    det = b.thread(PID, PID + 2, "detok")
    for i in range(ITERS):
        t = i * 2 * MS
        b.launch(t, t + 5 * US, t + 20 * US, t + 420 * US, pid=PID, tid=PID, name="gemm")
        b.osrt(t + 450 * US, t + 1_950 * US, tid_g=main, name="pthread_mutex_lock")
        b.nvtx_push_pop(t + 500 * US, t + 1_500 * US, "detokenize", tid_g=det)
    p = tmp_path / "detok.sqlite"
    b.write(str(p))
    rep = analyze_path(str(p), options_from_kwargs())
    sec = render_markdown(rep).split("## Waits of the launching thread", 1)[1].split("\n## ", 1)[0]
    assert "were in meanwhile (time overlapped with the waits):" in sec
    assert "| `MainThread` | 74.8 | `detok` | nvtx | `detokenize` | – | 20.000 | 67.7 |" in sec


def test_a_thread_sampled_running_during_the_waits_is_seen_working(tmp_path: Path) -> None:
    """GIL contention with CPU samples: `tokenizer` (tid 101) is sampled running (`tokenize_batch`) 15 times in
    each of the 19 waits of `MainThread` (285 samples, every 100 µs of the 28.5 ms). The finding says "No other
    thread of its process is seen working during these waits: find what releases them (…, CPU sampling of the
    whole process tree)" — false: the trace's CPU samples of the process show `tokenizer` running through all of
    them. Expected: the evidence names `tokenizer` as seen running in CPU samples during the waits, and the advice
    is `wait.cpu` (it runs code outside OS and CUDA calls; a Python thread holding the GIL), not `wait.unseen`.
    Fix: read the samples of the launching threads' processes' other threads inside the waits (read/fetch_samples
    with the process's threads), count per thread the samples inside `W` in analyses/threads/waits.OtherThread
    (`sampled` count), and in findings/waits.wait_story name such threads ("sampled running in N of the waits'
    samples") and choose `wait.cpu` for them."""
    rep = _gil_trace(tmp_path, True, "gil_samples.sqlite")
    f = _osrt_finding(rep)
    assert f.recommendation != (ADVICE["wait.unseen"].text,)
    assert "`tokenizer` (tid 101)" in " ".join(f.evidence)
    (lw,) = rep.waits.launchers
    assert lw.samples_in_waits == 285
    assert [(t.tid, t.sampled, t.active_ns) for t in lw.threads] == [(PID + 1, 285, 0)]
    assert f.recommendation == (ADVICE["wait.cpu"].text,)
    assert ("CPU samples taken during these waits: `tokenizer` (tid 101) sampled running in 285 of the waits' 285 "
            "samples (samples of the other threads of its process).") in f.evidence


def _variant_trace(tmp_path: Path, name: str, sample_ks: range, loader: bool = False, watchdog: bool = False):
    """The GIL trace's iterations (`MainThread` waits in `pthread_mutex_lock` [t+450 µs, t+1.95 ms), 19 waits inside
    the window [0, 38.42 ms): 28.5 ms) with `tokenizer` (tid 101) sampled at t + k × 100 µs for k in ``sample_ks``;
    ``loader``: `loader` (tid 102) in `read` [t+500 µs, t+1.5 ms) each iteration and one sample of `worker`
    (tid 301) of another process (pid 300) at t+1 ms; ``watchdog``: `watchdog` (tid 103) sampled once at t+1 ms."""
    b = TraceBuilder()
    b.process(PID, "engine")
    main = b.thread(PID, PID, "MainThread")
    tok = b.thread(PID, PID + 1, "tokenizer")
    ld = b.thread(PID, PID + 2, "loader")
    wd = b.thread(PID, PID + 3, "watchdog")
    b.process(300, "other")
    other = b.thread(300, 301, "worker")
    for i in range(ITERS):
        t = i * 2 * MS
        for j in range(4):
            b.launch(t + j * 10 * US, t + j * 10 * US + 5 * US, t + 20 * US + j * 100 * US,
                     t + 20 * US + (j + 1) * 100 * US, pid=PID, tid=PID, name="gemm")
        b.osrt(t + 450 * US, t + 1_950 * US, tid_g=main, name="pthread_mutex_lock")
        for k in sample_ks:
            b.cpu_sample(t + k * 100 * US, tid_g=tok, frames=[("tokenize_batch", "/usr/lib/tokenizers.so"), PY])
        if loader:
            b.osrt(t + 500 * US, t + 1_500 * US, tid_g=ld, name="read")
            b.cpu_sample(t + MS, tid_g=other, frames=[PY])
        if watchdog:
            b.cpu_sample(t + MS, tid_g=wd, frames=[("poll", "/usr/lib/libc.so.6")])
    p = tmp_path / name
    b.write(str(p), overwrite=True)
    return analyze_path(str(p), options_from_kwargs())


def test_samples_only_outside_the_waits_leave_the_threads_unseen(tmp_path: Path) -> None:
    """Opposite case: `tokenizer` is sampled at t+0 … t+400 µs only (k = 0..4, 100 samples), all before each wait
    starts at t+450 µs: no sample of another thread falls inside the waits, so `samples_in_waits` is 0, no thread is
    listed, and the advice stays `wait.unseen` — with the evidence saying the trace has samples and none is inside
    the waits (not that sampling is missing)."""
    rep = _variant_trace(tmp_path, "outside.sqlite", range(5))
    (lw,) = rep.waits.launchers
    assert (lw.samples_in_waits, lw.threads) == (0, ())
    f = _osrt_finding(rep)
    assert f.recommendation == (ADVICE["wait.unseen"].text,)
    assert ("No CPU sample of another thread of its process falls inside these waits (the trace has CPU samples): "
            "none was sampled running during them.") in f.evidence
    assert "sampled running in" not in " ".join(f.evidence)


def test_sampled_and_traced_threads_mixed(tmp_path: Path) -> None:
    """Mixed case: in each of the 19 waits `tokenizer` has 15 samples (k = 5..19: 285), `watchdog` 1 (t+1 ms: 19),
    `loader` is in `read` 1 ms (19 ms = 66.7 % of 28.5 ms; its 20th read starts at 38.5 ms, past the window) and
    has no sample; `worker` of process 300 is sampled at t+1 ms but is not of the launcher's process. The waits'
    samples: 285 + 19 = 304; `tokenizer` 285 / 304 = 93.8 % is named, `watchdog` 19 / 304 = 6.2 % < 10 % is not.
    `loader`'s file I/O (66.7 % ≥ 25 %) makes the advice `wait.io` alone (the I/O it waits for comes first)."""
    rep = _variant_trace(tmp_path, "mixed.sqlite", range(20), loader=True, watchdog=True)
    (lw,) = rep.waits.launchers
    assert lw.samples_in_waits == 304
    assert [(t.tid, t.active_ns, t.sampled) for t in lw.threads] == [
        (PID + 2, 19 * MS, 0), (PID + 1, 0, 285), (PID + 3, 0, 19)]
    f = _osrt_finding(rep)
    ev = " ".join(f.evidence)
    assert "`loader` (tid 102) works 67 % of that time (in `read` 67 %, file I/O)" in ev
    assert "`tokenizer` (tid 101) sampled running in 285 of the waits' 304 samples" in ev
    assert "`watchdog`" not in ev and "worker" not in ev
    assert f.recommendation == (ADVICE["wait.io"].text,)


def test_samples_spread_over_many_threads_are_counted_not_named(tmp_path: Path) -> None:
    """12 pool threads (tids 110..121) each sampled once at t+1 ms of every iteration: inside the 19 waits of the
    window, 12 × 19 = 228 samples, each thread 19 / 228 = 8.3 % < 10 %: none is named, the evidence counts them
    ("228 samples of 12 other threads … none with 10 %"), and since threads did run during the waits the advice is
    `wait.cpu`, not `wait.unseen`."""
    b = TraceBuilder()
    b.process(PID, "engine")
    main = b.thread(PID, PID, "MainThread")
    pool = [b.thread(PID, 110 + k, f"pool-{k}") for k in range(12)]
    for i in range(ITERS):
        t = i * 2 * MS
        b.launch(t, t + 5 * US, t + 20 * US, t + 420 * US, pid=PID, tid=PID, name="gemm")
        b.osrt(t + 450 * US, t + 1_950 * US, tid_g=main, name="pthread_mutex_lock")
        for g in pool:
            b.cpu_sample(t + MS, tid_g=g, frames=[PY])
    p = tmp_path / "pool.sqlite"
    b.write(str(p))
    rep = analyze_path(str(p), options_from_kwargs())
    (lw,) = rep.waits.launchers
    assert lw.samples_in_waits == 228 and sorted(t.sampled for t in lw.threads) == [19] * 12
    f = _osrt_finding(rep)
    assert ("CPU samples taken during these waits: 228 samples of 12 other threads of its process, none with 10 % of "
            "them.") in f.evidence
    assert f.recommendation == (ADVICE["wait.cpu"].text,)
