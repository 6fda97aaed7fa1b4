"""The `copy` idle finding says copies "keep the kernels waiting" only when, while they ran with the GPU idle, the
kernels did wait: the next kernel already launched, or the launching thread blocked on the GPU, in a launch call, or
waiting on another thread (docs/MODEL.md, "Copies the kernels waited on"). Each trace is built by hand; the truth is
worked out in the docstring."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict

from synth import TraceBuilder

from nsys_llm_explainer.findings.advice import ADVICE
from nsys_llm_explainer.options import options_from_kwargs
from nsys_llm_explainer.pipeline import analyze_path

US = 1_000
MS = 1_000_000
PID = 100
T0 = 10 * MS
EARLY = "run while the GPU idles, before the next kernel is launched"
WAITING = "keep the kernels waiting"


def _run(b: TraceBuilder, tmp_path: Path, name: str = "t.sqlite", **options: Any) -> Dict[str, Any]:
    p = tmp_path / name
    b.write(str(p), overwrite=True)
    return analyze_path(str(p), options_from_kwargs(**options)).to_dict()


def _finding(rep: Dict[str, Any], fid: str) -> Dict[str, Any]:
    return next(f for f in rep["findings"] if f["id"] == fid)


def _copy_cause(rep: Dict[str, Any], detail: str, dev: int = 0) -> Dict[str, Any]:
    d = next(x for x in rep["idle_causes"]["devices"] if x["device_id"] == dev)
    return next(c for c in d["causes"] if c["kind"] == "copy" and c["detail"] == detail)


def _check(f: Dict[str, Any]) -> Dict[str, Any]:
    (c,) = [c for c in f["checks"] if c["metric"] == "copy_waiting_pct"]
    return c


def _async_output(b: TraceBuilder, *, sync: bool = False, n: int = 20) -> None:
    """vLLM-style async output processing, one step per 1 ms period t = T0 + i ms on thread 1: the step's kernel is
    launched by a call at [t, t + 10) µs and runs [t + 50, t + 550) µs on stream 7; the sampled tokens are copied to
    pinned host memory by ``cudaMemcpyAsync`` at [t + 20, t + 30) µs, a 4 KiB Device-to-Host copy queued behind the
    kernel on stream 7 that runs [t + 550, t + 850) µs with no kernel running. ``sync``: the host then sits in
    ``cudaStreamSynchronize`` at [t + 540, t + 860) µs (it waits for the copy); else it runs Python (no traced call)
    until the next launch at t + 1 ms."""
    b.process(PID)
    g = b.thread(PID, 1, "main")
    for i in range(n):
        t = T0 + i * MS
        b.launch(t, t + 10 * US, t + 50 * US, t + 550 * US, pid=PID, tid=1, name="decode_step")
        c = b.runtime(t + 20 * US, t + 30 * US, tid_g=g, name="cudaMemcpyAsync_v3020")
        b.memcpy(t + 550 * US, t + 850 * US, pid=PID, bytes=4096, copy_kind=2, src_kind=2, dst_kind=1, stream=7,
                 corr=c)
        if sync:
            b.runtime(t + 540 * US, t + 860 * US, tid_g=g, name="cudaStreamSynchronize_v3020")


def test_async_d2h_copy_during_host_work_before_the_next_launch_does_not_keep_kernels_waiting(tmp_path: Path
                                                                                                 ) -> None:
    """Async output processing: window [T0, T0 + 20 ms). Each gap [t + 550, t + 1050) µs (the last, after the last
    kernel, ends the window at the last copy's end, T0 + 19.85 ms): the copy [t + 550, t + 850) µs runs while the
    launching thread is outside CUDA calls (the next launch call starts at t + 1000 µs): without the copy those 300 µs
    would be `host_cpu`, so no kernel waited on the copy. Copy ns 20 × 300 µs = 6.000 ms, of which 0 waited: check
    copy_waiting_pct = 0 < 50; the title says the copies ran while the GPU idled before the next launch (the old
    title said "Copies keep the kernels waiting"), the copy advice (overlap / prefetch the copies) is not given."""
    b = TraceBuilder()
    _async_output(b)
    rep = _run(b, tmp_path)
    c = _copy_cause(rep, "Device-to-Host")
    assert (c["ns"], c["waiting_ns"]) == (6_000 * US, 0)
    f = _finding(rep, "idle_copy")
    assert EARLY in f["title"] and WAITING not in f["title"], f["title"]
    assert f["title"].startswith(f"Copies {EARLY}: `Device-to-Host` copies fill ")
    chk = _check(f)
    assert (chk["observed"], chk["op"], chk["threshold"]) == (0.0, "<", 50.0)
    assert ("Of the 6.000 ms of copy time with the GPU idle on device 0, 0.00 µs (0.0 %) had a kernel waiting on the "
            "copies (the next kernel launched, or the launching thread blocked on the GPU, in a launch call or "
            "waiting on another thread); in the rest the launching thread worked on the host and had not launched "
            "the next kernel: the GPU idled for want of launched work, the copies ran meanwhile.") in f["evidence"]
    assert f["recommendation"] == [ADVICE["copy.launch_first"].text], f["recommendation"]


def test_the_same_copy_while_the_host_sits_in_a_synchronize_keeps_kernels_waiting(tmp_path: Path) -> None:
    """The opposite case: the same trace with the host in ``cudaStreamSynchronize`` at [t + 540, t + 860) µs,
    covering each copy [t + 550, t + 850) µs: without the copy those 300 µs would be `sync` (host blocked on the
    GPU): all 6.000 ms of copy time waited (100.0 % ≥ 50) and the title keeps "keep the kernels waiting"."""
    b = TraceBuilder()
    _async_output(b, sync=True)
    rep = _run(b, tmp_path)
    c = _copy_cause(rep, "Device-to-Host")
    assert (c["ns"], c["waiting_ns"]) == (6_000 * US, 6_000 * US)
    f = _finding(rep, "idle_copy")
    assert f["title"].startswith(f"Copies {WAITING}: `Device-to-Host` copies fill "), f["title"]
    chk = _check(f)
    assert (chk["observed"], chk["op"], chk["threshold"]) == (100.0, ">=", 50.0)
    assert ADVICE["copy.launch_first"].text not in f["recommendation"]
    assert ADVICE["copy.overlap"].text in f["recommendation"], f["recommendation"]


def _offload(b: TraceBuilder, launch_at: int, n: int = 100) -> None:
    """Weight offloading, n periods of 100 µs from T0 on thread 1: ``cudaMemcpyAsync`` at [0, 3) µs issues a pinned
    1 MiB Host-to-Device copy on stream 8 that runs [1, 81) µs, ``cudaStreamWaitEvent`` at [4, 5) µs, then the layer's
    kernel, launched by a call at [launch_at, launch_at + 2) µs, runs [81, 100) µs on stream 7 (after the copy)."""
    b.process(PID)
    g = b.thread(PID, 1)
    for i in range(n):
        t = T0 + i * 100 * US
        c = b.runtime(t, t + 3 * US, tid_g=g, name="cudaMemcpyAsync_v3020")
        b.memcpy(t + 1 * US, t + 81 * US, pid=PID, bytes=1 << 20, src_kind=1, dst_kind=2, stream=8, corr=c)
        b.runtime(t + 4 * US, t + 5 * US, tid_g=g, name="cudaStreamWaitEvent_v3020")
        b.launch(t + launch_at * US, t + (launch_at + 2) * US, t + 81 * US, t + 100 * US, pid=PID, tid=1,
                 name="gemm_layer")


def test_a_copy_with_the_next_kernel_already_launched_keeps_it_waiting(tmp_path: Path) -> None:
    """Offloading with the kernel launched right after the event wait, at [5, 7) µs: per period the copy [1, 81) µs
    is, without the copies, `other_api` in ``cudaMemcpyAsync`` [1, 3), `host_cpu` [3, 4), `other_api` in
    ``cudaStreamWaitEvent`` [4, 5), `launch` [5, 7) and `queued` [7, 81): 2 + 74 = 76 of its 80 µs waited — but in
    the first period the launch call is the kernel's first launch (`module_load`, one-time: it does not wait), 74.
    Window [T0, T0 + 10 ms): 100 × 80 = 8.000 ms of copy, 7.598 ms waited (94.975 % ≥ 50): "keep the kernels
    waiting", with the prefetch advice (the copies already run async on a side stream), after the fewer-bytes line
    (100 × 19 µs = 1.900 ms of kernels, less than half the 8 ms of copies)."""
    b = TraceBuilder()
    _offload(b, launch_at=5)
    rep = _run(b, tmp_path, window=(T0, T0 + 10 * MS))
    c = _copy_cause(rep, "Host-to-Device")
    assert (c["ns"], c["waiting_ns"]) == (8_000 * US, 7_598 * US)
    f = _finding(rep, "idle_copy")
    assert f["title"].startswith(f"Copies {WAITING}: `Host-to-Device` copies fill "), f["title"]
    chk = _check(f)
    assert (chk["op"], chk["threshold"]) == (">=", 50.0) and abs(chk["observed"] - 94.975) < 1e-9
    assert f["recommendation"] == [ADVICE["copy_pace.host.resident"].text, ADVICE["copy.prefetch"].text]


def test_a_copy_mostly_before_a_late_launch_runs_while_the_gpu_idles(tmp_path: Path) -> None:
    """The mixed case: the same offloading trace with the launch at [70, 72) µs. Per period the copy [1, 81) µs is,
    without the copies, `other_api` [1, 3), `host_cpu` [3, 4), `other_api` [4, 5), `host_cpu` [5, 70), `launch`
    [70, 72) and `queued` [72, 81): 2 + 9 = 11 of its 80 µs waited (9 in the first period, whose launch call is the
    kernel's first launch, `module_load`); 100 periods: 1.098 ms of 8.000 ms (13.725 % < 50): the title says the
    copies ran before the next kernel was launched, the advice is the host's."""
    b = TraceBuilder()
    _offload(b, launch_at=70)
    rep = _run(b, tmp_path, window=(T0, T0 + 10 * MS))
    c = _copy_cause(rep, "Host-to-Device")
    assert (c["ns"], c["waiting_ns"]) == (8_000 * US, 1_098 * US)
    f = _finding(rep, "idle_copy")
    assert f["title"].startswith(f"Copies {EARLY}: `Host-to-Device` copies fill "), f["title"]
    chk = _check(f)
    assert (chk["op"], chk["threshold"]) == ("<", 50.0) and abs(chk["observed"] - 13.725) < 1e-9
    assert f["recommendation"] == [ADVICE["copy.launch_first"].text]
    assert ("Of the 8.000 ms of copy time with the GPU idle on device 0, 1.098 ms (13.7 %) had a kernel waiting on "
            "the copies") in " ".join(f["evidence"])


def _loader(b: TraceBuilder, call: str, n: int = 50) -> None:
    """A weight-offloading pipeline, n periods of 200 µs from T0: a loader thread (tid 2) copies the next layer's
    weights with a synchronous ``cudaMemcpy`` at [5, 85) µs, a pinned 4 MiB Host-to-Device copy on stream 8 at
    [10, 80) µs; the launcher (tid 1) is in the OS call ``call`` at [5, 85) µs, then launches the layer's kernel by a
    call at [85, 87) µs; the kernel runs [90, 200) µs on stream 7."""
    b.process(PID)
    launcher, loader = b.thread(PID, 1, "launcher"), b.thread(PID, 2, "loader")
    for i in range(n):
        t = T0 + i * 200 * US
        c = b.runtime(t + 5 * US, t + 85 * US, tid_g=loader, name="cudaMemcpy_v3020")
        b.memcpy(t + 10 * US, t + 80 * US, pid=PID, bytes=4 << 20, src_kind=1, dst_kind=2, stream=8, corr=c)
        b.osrt(t + 5 * US, t + 85 * US, tid_g=launcher, name=call)
        b.launch(t + 85 * US, t + 87 * US, t + 90 * US, t + 200 * US, pid=PID, tid=1, name="gemm_layer")


def test_a_launcher_waiting_on_a_loader_thread_s_copy_keeps_kernels_waiting(tmp_path: Path) -> None:
    """The launcher sits in ``sem_wait`` (an OS call that waits on another thread) while the loader's copy runs: the
    copy [10, 80) µs of each period would, without the copies, be `osrt` in a waiting call on the gap's thread (the
    launcher: it launches the next kernel): all 50 × 70 µs = 3.500 ms of copy time waited (100.0 %): "keep the
    kernels waiting"."""
    b = TraceBuilder()
    _loader(b, "sem_wait")
    rep = _run(b, tmp_path, window=(T0, T0 + 10 * MS))
    c = _copy_cause(rep, "Host-to-Device")
    assert (c["ns"], c["waiting_ns"]) == (3_500 * US, 3_500 * US)
    f = _finding(rep, "idle_copy")
    assert WAITING in f["title"], f["title"]
    assert (_check(f)["observed"], _check(f)["op"]) == (100.0, ">=")


def test_a_launcher_in_a_non_waiting_os_call_during_the_copy_does_not_wait_on_it(tmp_path: Path) -> None:
    """The same pipeline with the launcher in ``read`` (file I/O: it does its own work, it does not wait on another
    thread) during the copy: the copy's shadow is `osrt` in a call that does not wait: 0 of 3.500 ms waited (0.0 %):
    the copies ran before the next kernel was launched."""
    b = TraceBuilder()
    _loader(b, "read")
    rep = _run(b, tmp_path, window=(T0, T0 + 10 * MS))
    c = _copy_cause(rep, "Host-to-Device")
    assert (c["ns"], c["waiting_ns"]) == (3_500 * US, 0)
    assert EARLY in _finding(rep, "idle_copy")["title"]


def test_copies_with_no_linked_host_thread_are_not_said_to_keep_kernels_waiting(tmp_path: Path) -> None:
    """A capture without CUDA API rows (no launch call, no thread: every gap's host thread is unknown): the trace of
    :func:`_async_output` without its runtime rows. Whether the host had launched the next kernel is not known —
    with the rows, the same copies ran while the host worked before the next launch (waiting 0). So neither title
    holds: the copy ns keep the `copy` charge but their shadow `unknown` is kept apart, `waiting_ns` 0 and
    `waiting_unknown_ns` 6.000 ms (100.0 %), and the title says it is not known. (This test used to assert the shadow
    `unknown` counted as waiting and the title "keep the kernels waiting": a claim the export cannot back.)"""
    b = TraceBuilder()
    _async_output(b)
    b.rows("runtime").clear()
    rep = _run(b, tmp_path)
    c = _copy_cause(rep, "Device-to-Host")
    assert (c["ns"], c["waiting_ns"], c["waiting_unknown_ns"]) == (6_000 * US, 0, 6_000 * US)
    (t,) = [t for t in rep["idle_causes"]["totals"] if t["kind"] == "copy"]
    assert (t["waiting_ns"], t["waiting_unknown_ns"]) == (0, 6_000 * US)
    f = _finding(rep, "idle_copy")
    assert f["title"].startswith("Copies run while the GPU idles; whether kernels waited on them is not known (no "
                                 "launch call is linked): `Device-to-Host` copies fill "), f["title"]
    assert [(c["metric"], c["observed"], c["op"], c["threshold"]) for c in f["checks"] if "waiting" in c["metric"]] \
        == [("copy_waiting_pct", 0.0, "<", 50.0), ("copy_waiting_unknown_pct", 100.0, ">=", 50.0)]
    assert ("Of the 6.000 ms of copy time with the GPU idle on device 0, no kernel is known to have waited on the "
            "copies; in 6.000 ms (100.0 %) whether one waited is not known: no host thread is linked to those gaps "
            "(no launch call of the device's work is in the export).") in f["evidence"], f["evidence"]
    assert f["recommendation"] == [ADVICE["unknown.trace_cuda"].text], f["recommendation"]


def test_copies_with_unlinked_launch_calls_are_not_said_to_keep_kernels_waiting(tmp_path: Path) -> None:
    """The CUDA calls are in the export but no kernel or copy carries a matching correlation id (an export range that
    lost the links): the gaps have no host thread, the same 6.000 ms of copy time has shadow `unknown` (waiting 0,
    not known 6.000 ms) and the title says it is not known; the advice is to keep the links (`unknown.unlinked`),
    not to trace CUDA, which was traced."""
    import sqlite3
    b = TraceBuilder()
    _async_output(b)
    p = tmp_path / "t.sqlite"
    b.write(str(p), overwrite=True)
    con = sqlite3.connect(str(p))
    con.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET correlationId = correlationId + 100000")
    con.execute("UPDATE CUPTI_ACTIVITY_KIND_MEMCPY SET correlationId = correlationId + 100000")
    con.commit()
    con.close()
    rep = analyze_path(str(p), options_from_kwargs()).to_dict()
    c = _copy_cause(rep, "Device-to-Host")
    assert (c["ns"], c["waiting_ns"], c["waiting_unknown_ns"]) == (6_000 * US, 0, 6_000 * US)
    f = _finding(rep, "idle_copy")
    assert "whether kernels waited on them is not known" in f["title"] and WAITING not in f["title"], f["title"]
    assert f["recommendation"] == [ADVICE["unknown.unlinked"].text], f["recommendation"]


def test_linked_copies_have_no_unknown_part(tmp_path: Path) -> None:
    """The opposite case: with the launch calls linked (:func:`_async_output` whole) every gap has its host thread:
    no copy ns has shadow `unknown` (`waiting_unknown_ns` omitted), the check list holds `copy_waiting_pct` alone
    (0 < 50: the copies ran before the next launch) and the evidence does not speak of unknown waiting."""
    b = TraceBuilder()
    _async_output(b)
    rep = _run(b, tmp_path)
    c = _copy_cause(rep, "Device-to-Host")
    assert "waiting_unknown_ns" not in c and c["waiting_ns"] == 0
    f = _finding(rep, "idle_copy")
    assert [c["metric"] for c in f["checks"] if "waiting" in c["metric"]] == ["copy_waiting_pct"]
    assert not any("not known" in e for e in f["evidence"]), f["evidence"]


def test_the_partition_path_counts_the_same_waiting_copy_time(tmp_path: Path) -> None:
    """The device pass charged by the host threads' partitions (past the pieces budget) gives the same copy causes,
    waiting ns included, as cutting every gap at every host row, on the traces above (host work, sync, launch,
    queued, waiting and non-waiting OS calls)."""
    from hardening.test_limits import _both_paths

    from nsys_llm_explainer.pipeline import load_model

    builds = [lambda b: _async_output(b), lambda b: _async_output(b, sync=True), lambda b: _offload(b, 70),
              lambda b: _loader(b, "sem_wait"), lambda b: _loader(b, "read")]
    for i, build in enumerate(builds):
        b = TraceBuilder()
        build(b)
        p = tmp_path / f"p{i}.sqlite"
        b.write(str(p))
        cut, part = _both_paths(load_model(str(p)))
        assert cut == part
        waits = [c.waiting_ns for _, causes, _, _ in cut["devices"] for c in causes if c.kind == "copy"]
        assert waits and all(w is not None for w in waits)


def test_unified_memory_migrations_with_no_linked_host_thread_are_not_said_to_keep_kernels_waiting(
        tmp_path: Path) -> None:
    """No CUDA API rows: a 500 µs kernel every 1 ms ([t + 50, t + 550) µs, t = i ms) and a 1 MiB Unified
    Host-to-Device migration [t + 600, t + 900) µs with no kernel running, 20 times: 6.000 ms of migration time with
    the GPU idle, none of it with a host thread (`waiting_unknown_ns` 6.000 ms, `waiting_ns` 0): the Unified-Memory
    title says whether kernels waited is not known."""
    b = TraceBuilder()
    b.process(PID)
    for i in range(20):
        t = (i + 1) * MS
        b.kernel(t + 50 * US, t + 550 * US, pid=PID, name="gemm")
        b.um_migration(t + 600 * US, t + 900 * US, pid=PID, bytes=1 << 20, cause=2)
    rep = _run(b, tmp_path)
    c = _copy_cause(rep, "Unified Host-to-Device")
    assert (c["ns"], c["waiting_ns"], c["waiting_unknown_ns"]) == (6_000 * US, 0, 6_000 * US)
    f = _finding(rep, "idle_copy")
    assert f["title"].startswith("Unified-Memory migrations (`Unified Host-to-Device`) run while the GPU idles; "
                                 "whether kernels waited on them is not known (no launch call is linked): "), f["title"]
