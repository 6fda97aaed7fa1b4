"""A waiting OS call is charged to `osrt` even inside an NVTX range, and the other threads of
the launcher's process are followed during its waits (scenario launcher_waits_io: numbers recomputed here in plain
Python from the planted intervals)."""

from __future__ import annotations

import random
import re
from pathlib import Path
from typing import Optional

import numpy as np
import pytest
from conftest import built_scenario
from synth import TraceBuilder

from nsys_llm_explainer import analyze
from nsys_llm_explainer.findings.advice import ADVICE
from nsys_llm_explainer.model.intervals import grouped_overlap, union_blocks
from nsys_llm_explainer.vocabulary.os_calls import FILE_IO_CALLS, WAIT_CALLS, os_call_class

ROOT = Path(__file__).resolve().parents[2]
PID = 7


def _union(iv):
    out = []
    for s, e in sorted(iv):
        if e <= s:
            continue
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


def _overlap(a, b):
    """|union(a) ∩ union(b)| by a plain double loop."""
    return sum(max(0, min(e1, e2) - max(s1, s2)) for s1, e1 in _union(a) for s2, e2 in _union(b))


@pytest.fixture(scope="module")
def waits_run(tmp_path_factory):
    p = tmp_path_factory.mktemp("waits") / "w.sqlite"
    facts = built_scenario("launcher_waits_io", str(p))
    return facts, analyze(str(p))


def test_os_call_classes_follow_the_documented_table():
    assert os_call_class("sem_wait") == "wait" and os_call_class("pthread_join") == "wait"
    assert os_call_class("__poll") == "wait" and os_call_class("epoll_wait") == "wait"
    assert os_call_class("open64") == "file_io" and os_call_class("pread64") == "file_io"
    assert os_call_class("read") == "file_io" and os_call_class("ioctl") == "other"
    text = (ROOT / "docs" / "MODEL.md").read_text(encoding="utf-8")
    waits = set(re.findall(r"`([a-z0-9_]+)`", text.split("Waiting calls:", 1)[1].split("\n\n", 1)[0]))
    io = set(re.findall(r"`([a-z0-9_]+)`", text.split("File I/O calls", 1)[1].split("\n\n", 1)[0]))
    assert waits == set(WAIT_CALLS) and set(FILE_IO_CALLS) <= io


def test_grouped_overlap_equals_a_plain_double_loop():
    rng = random.Random(7)
    for _ in range(60):
        w = [(a, a + rng.randint(1, 50)) for a in (rng.randint(0, 400) for _ in range(rng.randint(0, 6)))]
        rows = [(rng.randint(0, 3), a, a + rng.randint(0, 80)) for a in (rng.randint(0, 400) for _ in range(25))]
        u = union_blocks(np.array([s for s, _ in w], np.int64), np.array([e for _, e in w], np.int64))
        got = grouped_overlap(np.array([g for g, _, _ in rows], np.int64), np.array([s for _, s, _ in rows], np.int64),
                              np.array([e for _, _, e in rows], np.int64), 4, u)
        for g in range(4):
            assert got[g] == _overlap([(s, e) for gg, s, e in rows if gg == g], w)
    # timestamps 2^61 apart: the one-key running maximum would overflow, the per-group pass gives the same answer
    big = 1 << 61
    rows = [(0, 0, 10), (1, big, big + 10), (2, 5, big + 5), (3, 3, 4)]
    u = union_blocks(np.array([2, big + 2], np.int64), np.array([8, big + 8], np.int64))
    got = grouped_overlap(np.array([g for g, _, _ in rows], np.int64), np.array([s for _, s, _ in rows], np.int64),
                          np.array([e for _, _, e in rows], np.int64), 4, u)
    assert got.tolist() == [6, 6, 3 + 3, 1]


def test_waits_are_charged_to_the_call_not_the_range(waits_run):
    facts, rep = waits_run
    (dev,) = rep.idle_causes.devices
    planted = facts["idle_by_cause_ns"]
    assert dev.ns_of("osrt", "sem_wait") == planted["osrt"]["sem_wait"] > 0.6 * dev.window_ns
    # the range keeps only the time the thread runs in it (after the join, before the range closes)
    assert dev.ns_of("nvtx", "iterN") == planted.get("nvtx", {}).get("iterN", 0) < 0.05 * dev.window_ns


def test_the_other_threads_are_followed_with_numbers(waits_run):
    facts, rep = waits_run
    w0, w1 = rep.window.start_ns, rep.window.end_ns
    clip = [(max(s, w0), min(e, w1)) for s, e in facts["waits"]]
    wait_ns = sum(e - s for s, e in _union(clip))
    (lw,) = rep.waits.launchers
    assert (lw.tid, lw.thread, lw.wait_ns) == (facts["launcher_tid"], "pt_main_thread", wait_ns)
    assert lw.wait_pct_of_window == pytest.approx(100.0 * wait_ns / (w1 - w0))
    assert [c.name for c in lw.calls] == ["sem_wait"] and lw.calls[0].count == facts["iterations"]
    assert lw.contexts[0].range == "iterN" and lw.contexts[0].ns == wait_ns
    rows = {(r.tid, r.what, r.name): r for r in lw.rows}
    expect = {
        (facts["d2c_tid"], "nvtx", "d2c-N"): facts["worker_ranges"]["d2c"],
        (facts["d2c_tid"], "osrt", "pread"): facts["worker_io"]["pread"],
        (facts["c2d_tid"], "nvtx", "c2d-N"): facts["worker_ranges"]["c2d"],
        (facts["c2d_tid"], "osrt", "write"): facts["worker_io"]["write"],
        (facts["watchdog_tid"], "osrt", "poll"): facts["worker_io"]["poll"],
    }
    assert set(rows) == set(expect)
    for key, iv in expect.items():
        ns = _overlap([(max(s, w0), min(e, w1)) for s, e in iv], clip)
        assert rows[key].ns == ns and rows[key].pct_of_waits == pytest.approx(100.0 * ns / wait_ns), key
    assert rows[(facts["d2c_tid"], "osrt", "pread")].os_class == "file_io"
    top = lw.threads[0]
    assert (top.tid, top.thread) == (facts["d2c_tid"], "d2c_worker")
    # working = NVTX ranges, CUDA calls and OS calls that do not wait; the watchdog only waits
    by_tid = {t.tid: t for t in lw.threads}
    assert by_tid[facts["d2c_tid"]].active_ns == rows[(facts["d2c_tid"], "nvtx", "d2c-N")].ns
    assert by_tid[facts["d2c_tid"]].waiting_ns == 0
    dog = by_tid[facts["watchdog_tid"]]
    assert dog.active_ns == 0 and dog.waiting_ns == rows[(facts["watchdog_tid"], "osrt", "poll")].ns == wait_ns
    assert rows[(facts["watchdog_tid"], "osrt", "poll")].os_class == "wait"
    # GPU idle charged to the waits on this thread = the idle-cause row (one launching thread)
    assert lw.gpu_idle_ns == rep.idle_causes.devices[0].ns_of("osrt", "sem_wait")


def test_the_finding_names_the_wait_the_range_and_the_workers(waits_run):
    facts, rep = waits_run
    f = rep.findings[0]
    assert f.cause == ("osrt", "sem_wait") and f.category == "host_os"
    assert "waits in `sem_wait` inside `iterN`" in f.title and len(f.title) <= 110
    text = " ".join(f.evidence)
    assert f"`d2c_worker` (tid {facts['d2c_tid']}) works 93 %" in text and "watchdog" not in text
    assert "`pread` 74 %, file I/O" in text
    assert "not running" in text
    assert f.recommendation == (ADVICE["wait.io"].text,)
    words = " ".join((f.title,) + f.evidence + f.recommendation)
    assert "launches nothing" not in words and "launches no kernel" not in words and " busy" not in words


def test_a_range_the_thread_reads_in_keeps_the_range_and_says_it_runs(tmp_path):
    """nvtx_host_range: `read` (file I/O, not a wait) inside the range: the range is charged, and the advice says
    the thread runs there and launches no kernel from it (the range encloses no launch, OS calls are traced)."""
    p = tmp_path / "n.sqlite"
    built_scenario("nvtx_host_range", str(p))
    rep = analyze(str(p))
    f = rep.findings[0]
    assert f.cause == ("nvtx", "load_layer_N_weights")
    assert ADVICE["nvtx.overlap"].text in f.recommendation
    assert ADVICE["nvtx.overlap.launching"].text not in f.recommendation


def test_without_attribution_no_range_is_said_to_launch_nothing(tmp_path):
    """--no-nvtx-kernel-map: whether the range launches is not known, so neither 'launches no kernel' nor 'runs
    host code' is said; the neutral line is given."""
    p = tmp_path / "n.sqlite"
    built_scenario("nvtx_host_range", str(p))
    f = analyze(str(p), nvtx_kernel_map=False).findings[0]
    assert f.cause == ("nvtx", "load_layer_N_weights")
    assert f.recommendation == (ADVICE["nvtx.overlap.unchecked"].text,)


def test_waits_on_threads_the_trace_does_not_show_working(tmp_path):
    """The launcher waits the same way, but no other thread works during the waits (only `watchdog`, which sits in
    `poll` itself): the evidence says so, names the waiting thread, and the advice is to find what releases the
    waits — no I/O, copy or CPU advice."""
    from synth.scenarios.waits import launcher_waits_io

    p = tmp_path / "u.sqlite"
    facts = launcher_waits_io(str(p), workers=False)
    f = analyze(str(p)).findings[0]
    assert f.cause == ("osrt", "sem_wait")
    text = " ".join(f.evidence)
    assert "No other thread of its process works" in text
    assert f"`watchdog` (tid {facts['watchdog_tid']}) waits too (in `poll` 100 %)" in text
    assert f.recommendation == (ADVICE["wait.unseen"].text,)


US = 1_000


def _waiting_launcher(call: str, graph_level: bool = False, copier: bool = False,
                      device1_waits: Optional[bool] = None, then_wait: bool = False) -> TraceBuilder:
    """100 periods of 100 µs from 4 µs: thread 1 (`main`) launches a 50 µs kernel at [0, 50) µs of each period
    (its launch call at [−4, −2) µs; with ``graph_level`` a CUDA graph traced at graph level instead: one
    whole-graph row, no kernel row), then sits in OS call ``call`` at [50, 96) µs (with ``then_wait``: at [50, 90)
    µs, then in ``sem_wait`` at [90, 96) µs); the trace is [0, 10 ms). With
    ``copier``: thread 2 (`copier`) is in ``cudaMemcpy`` (no copy row) at the same [50, 96) µs. With
    ``device1_waits`` not None: thread 2 launches a 90 µs kernel on device 1 in each period, and (True) waits in
    ``sem_wait`` at [90, 92) µs (2 % of the window ≥ 1 %: followed). The trace (and the window) ends at the last
    kernel's or CUDA call's end: OS-runtime rows do not extend it."""
    b = TraceBuilder()
    b.process(PID)
    main, other = b.thread(PID, 1, "main"), b.thread(PID, 2, "copier")
    for i in range(100):
        t = 4 * US + i * 100 * US
        if graph_level:
            b.graph_launch(t - 4 * US, t - 2 * US, pid=PID, tid=1, kernels=[(t, t + 50 * US, "gemm")],
                           node_mode=False)
        else:
            b.launch(t - 4 * US, t - 2 * US, t, t + 50 * US, pid=PID, tid=1, name="gemm")
        b.osrt(t + 50 * US, t + (90 if then_wait else 96) * US, tid_g=main, name=call)
        if then_wait:
            b.osrt(t + 90 * US, t + 96 * US, tid_g=main, name="sem_wait")
        if copier:
            b.runtime(t + 50 * US, t + 96 * US, tid_g=other, name="cudaMemcpy_v3020")
        if device1_waits is not None:
            b.launch(t - 4 * US, t - 2 * US, t, t + 90 * US, pid=PID, tid=2, device=1, name="gemm")
            if device1_waits:
                b.osrt(t + 90 * US, t + 92 * US, tid_g=other, name="sem_wait")
    return b


def _analyze(b: TraceBuilder, tmp_path: Path):
    p = tmp_path / "w.sqlite"
    b.write(str(p))
    return analyze(str(p), window=(0, 10_000 * US))


def test_waits_on_a_thread_in_copy_calls_get_the_copy_advice(tmp_path):
    """`main` waits in `sem_wait` 100 × 46 µs = 4.6 ms of the 10 ms window (46.0 %) while `copier` is in
    `cudaMemcpy` all that time (100 % ≥ 25 %, a CUDA call, so not "outside OS and CUDA calls"): the advice is the
    copy line alone."""
    rep = _analyze(_waiting_launcher("sem_wait", copier=True), tmp_path)
    f = rep.findings[0]
    assert f.cause == ("osrt", "sem_wait")
    assert "The launching thread `main` (tid 1) waits in OS calls 46.0 % of the window (`sem_wait` 46.0 %)." \
        in f.evidence
    assert f.evidence[-1] == "Meanwhile: `copier` (tid 2) works 100 % of that time (in `cudaMemcpy` 100 %)."
    assert f.recommendation == (ADVICE["wait.copies"].text,)


def test_a_call_that_does_not_wait_gets_the_generic_advice(tmp_path):
    """`main` is in `read` (file I/O, not a waiting call) at [50, 90) µs of each period, then in `sem_wait` at
    [90, 96) µs. The trace ends with the last kernel at 9 954 µs (OS-runtime rows do not extend it), so the window
    holds 99 of these waits, 594 µs (6 % ≥ 1 %): they are followed, but the `osrt` finding is about the largest call,
    `read` (99 × 40 µs against 99 × 6 µs), which does not wait: no wait story, the generic OS-call line and none of
    the `wait.*` lines."""
    rep = _analyze(_waiting_launcher("read", then_wait=True), tmp_path)
    assert [(w.tid, w.wait_ns) for w in rep.waits.launchers] == [(1, 594 * US)]
    f = rep.findings[0]
    assert f.cause == ("osrt", "read")
    assert f.title.startswith("The launching thread is in `read` (OS runtime) while the GPU idles (")
    assert not any("waits in OS calls" in e or "Meanwhile" in e for e in f.evidence)
    assert f.recommendation == (ADVICE["osrt.find"].text,)


@pytest.mark.parametrize("device1_waits", [False, True])
def test_waits_of_a_thread_that_launched_no_kernel_are_not_followed(tmp_path, device1_waits):
    """Device 0 runs CUDA graphs traced at graph level (no kernel rows), launched by `main`, which waits in
    `sem_wait` between them (46 % of device 0's window); device 1 runs kernels launched by `copier`. The threads
    followed are those that launched kernels: `main` is not one, so the `osrt` finding of device 0 has no wait
    story and the generic advice — whether no thread is followed at all (`copier` does not wait) or `copier` is
    (it waits 2 % of the window, on device 1)."""
    rep = _analyze(_waiting_launcher("sem_wait", graph_level=True, device1_waits=device1_waits), tmp_path)
    if device1_waits:
        assert rep.waits.available and [(w.tid, w.devices) for w in rep.waits.launchers] == [(2, (1,))]
    else:
        assert not rep.waits.available
        assert rep.waits.reason == "no launching thread waits in OS calls for 1 % of the window"
    (f,) = [f for f in rep.findings if f.cause == ("osrt", "sem_wait")]
    assert f.device_id == 0
    assert f.title.startswith("The launching thread is in `sem_wait` (OS runtime) while the GPU idles (")
    assert not any("waits in OS calls" in e or "Meanwhile" in e for e in f.evidence)
    assert f.recommendation == (ADVICE["osrt.find"].text,)


def test_the_waits_section_names_a_tid_once(tmp_path):
    """`main` (pid 7, tid 1) waits in `sem_wait`; another process (pid 8) has a thread `main` of tid 1 too, so the
    launcher's label names both ids: ``main (pid 7, tid 1)``. The waits section writes the label alone (it used to
    add " (tid 1)" a second time); 99 waits of 46 µs inside the window = 4.554 ms (45.8 % of its 9.950 ms)."""
    from nsys_llm_explainer.render import render_all

    b = _waiting_launcher("sem_wait")
    b.process(PID + 1)
    b.osrt(10 * US, 20 * US, tid_g=b.thread(PID + 1, 1, "main"), name="read")
    rep = _analyze(b, tmp_path)
    assert [(w.thread, w.tid) for w in rep.waits.launchers] == [("main (pid 7, tid 1)", 1)]
    render_all(rep, tmp_path / "out")
    md = (tmp_path / "out" / "report.md").read_text()
    assert ("**Waits of the launching thread** `main (pid 7, tid 1)`: 4.554 ms in OS calls that wait (45.8 % of the "
            "window): `sem_wait` 4.554 ms.") in md


def test_points_inside_a_union_are_counted_half_open():
    """`points_inside` on the union of [10, 20) ∪ [15, 30) ∪ [40, 50) = [10, 30) ∪ [40, 50): a time is inside when
    start ≤ t < end — 10, 29, 40 are; 9, 30, 39, 50, 60 are not (checked against the plain definition)."""
    from nsys_llm_explainer.model.intervals import points_inside
    u = union_blocks(np.array([10, 15, 40], np.int64), np.array([20, 30, 50], np.int64))
    t = np.array([9, 10, 29, 30, 39, 40, 50, 60], np.int64)
    assert points_inside(u, t).tolist() == [False, True, True, False, False, True, False, False]
    assert points_inside(union_blocks(np.empty(0, np.int64), np.empty(0, np.int64)), t).tolist() == [False] * 8


def test_wait_samples_are_read_only_inside_the_waits(tmp_path):
    """`model.wait_samples`: thread 8 of process 7 samples at 50, 150, 250 µs, thread 9 of process 9 at 150 µs,
    the CUDA-calling thread 7 waits in `sem_wait` [100, 200) µs: the two samples at 150 µs are inside the waits of a
    CUDA-calling thread — (7, 8) and (9, 9): every process's samples are read (process 9 calls no CUDA, yet the
    launcher may wait for it); the one at 250 µs is inside the GPU's idle gap [90, 310) µs (read too, for the
    `host_cpu` gaps: test_claims_unsampled_launcher_gaps.py); the one at 50 µs is inside the kernel [10, 90) µs: not
    read. `total` = the 4 rows of COMPOSITE_EVENTS. The launcher's waits: 1 sample of its process's thread 8, 1 of
    process 9 (`other`, 50 % of the 2)."""
    from nsys_llm_explainer.pipeline import load_model
    b = TraceBuilder()
    b.process(PID, "engine")
    main = b.thread(PID, PID, "main")
    w8 = b.thread(PID, 8, "w8")
    b.process(9, "other")
    w9 = b.thread(9, 9, "w9")
    b.launch(0, 5_000, 10_000, 90_000, pid=PID, tid=PID, name="k")
    b.osrt(100_000, 200_000, tid_g=main, name="sem_wait")
    b.launch(300_000, 305_000, 310_000, 400_000, pid=PID, tid=PID, name="k")
    for t in (50_000, 150_000, 250_000):
        b.cpu_sample(t, tid_g=w8, frames=[("f", "/a.so")])
    b.cpu_sample(150_000, tid_g=w9, frames=[("f", "/a.so")])
    p = tmp_path / "ws.sqlite"
    b.write(str(p))
    m = load_model(str(p))
    assert m.wait_samples is not None
    assert (m.wait_samples.start.tolist(), sorted(m.wait_samples.gtid.tolist()), m.wait_samples.total) == \
        ([150_000, 150_000, 250_000], sorted([w8, w9, w8]), 4)
    rep = analyze(str(p))
    (lw,) = rep.waits.launchers
    assert lw.samples_in_waits == 1 and [(t.tid, t.sampled) for t in lw.threads] == [(8, 1)]
    assert lw.process_samples == 1 and [(q.pid, q.process, q.sampled, q.pct_of_samples) for q in lw.processes] == \
        [(9, "other", 1, 50.0)]
