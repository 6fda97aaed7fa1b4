"""NVTX ranges, CPU samples and Unified Memory: sentences a report made that its trace contradicts (host_cpu advice
citing samples that miss its gaps, push/pop vs start/end ranges in the coverage claims, UM migrations before or after
the launch). Each trace is built by hand; the truth is worked out in the docstring."""

from __future__ import annotations

from pathlib import Path

from claims_support import finding_of as _finding
from claims_support import report_of as _run
from synth import TraceBuilder

from nsys_llm_explainer.options import options_from_kwargs
from nsys_llm_explainer.pipeline import analyze_path

US = 1_000
MS = 1_000_000
PID = 100
PY = "/usr/lib/libpython3.10.so"


def test_host_cpu_advice_does_not_cite_samples_that_miss_its_gaps(tmp_path: Path) -> None:
    """Thread 1 launches a 300 µs kernel every 1 ms (call [t+50, t+60) µs, kernel [t+100, t+400) µs) and is in the
    push/pop range `prepare` [t+400, t+950) µs, which launches nothing; 5 CPU samples per step, at t+450 … t+850 µs,
    all inside `prepare`. Idle per step: `nvtx` [t+400, t+950) = 550 µs, `host_cpu` [t+950, t+1050) = 100 µs
    (20 steps: 1.95 ms with the 50 µs before the first call, 9.8 % of the 19.95 ms window: a finding). None of the
    100 samples lies in a `host_cpu` piece, so that finding's evidence says so — and its advice must not say
    "the CPU samples ... (evidence above) name the code that ran while the GPU idled"; the `nvtx` finding, whose
    gaps hold all 100 samples, keeps citing them."""
    b = TraceBuilder()
    b.process(PID)
    g1 = b.thread(PID, 1, "main")
    for i in range(20):
        t = i * MS
        b.launch(t + 50 * US, t + 60 * US, t + 100 * US, t + 400 * US, pid=PID, tid=1, name="gemm")
        b.nvtx_push_pop(t + 400 * US, t + 950 * US, "prepare", tid_g=g1)
        for s in range(5):
            b.cpu_sample(t + 450 * US + s * 100 * US, tid_g=g1, frames=[("tokenize", PY), ("main", "/usr/bin/python3")])
    rep = _run(b, tmp_path)
    host = _finding(rep, "idle_host_cpu")
    assert "CPU samples: none of the 100 samples of the gaps' host thread fall inside them." in host["evidence"]
    assert not any("name the code that ran" in a for a in host["recommendation"]), host["recommendation"]
    assert any("Profile the host code that runs while the GPU idles" in a for a in host["recommendation"])
    nvtx = _finding(rep, "idle_nvtx")
    assert any(e.startswith("CPU samples of the launching thread inside these gaps (100 over 11.000 ms")
               for e in nvtx["evidence"])


def _startend_only(tmp_path: Path):
    """vLLM-like: thread 1 (`main`) pushes `step` [10 s, 10 s + 9 ms) for s = 0, 1, 2 and launches nothing; thread 2
    (`worker`) launches 30 kernels of 600 µs (call [i ms, i ms + 10 µs)) inside its own start/end ranges `prefill`
    [0, 10 ms) and `decode` [10, 30 ms). Kernel time 18 ms: push/pop ranges enclose 0 % of it, the start/end ranges
    100 % (`prefill` 6 ms, `decode` 12 ms)."""
    b = TraceBuilder()
    b.process(PID)
    g1, g2 = b.thread(PID, 1, "main"), b.thread(PID, 2, "worker")
    for s in range(3):
        b.nvtx_push_pop(s * 10 * MS, s * 10 * MS + 9 * MS, "step", tid_g=g1)
    for i in range(30):
        t = i * MS
        b.launch(t, t + 10 * US, t + 50 * US, t + 650 * US, pid=PID, tid=2, name="gemm")
    b.nvtx_start_end(0, 10 * MS, "prefill", tid_g=g2)
    b.nvtx_start_end(10 * MS, 30 * MS, "decode", tid_g=g2)
    p = tmp_path / "t.sqlite"
    b.write(str(p), overwrite=True)
    return analyze_path(str(p), options_from_kwargs())


def test_coverage_claims_name_push_pop_when_start_end_ranges_enclose_the_launches(tmp_path: Path) -> None:
    """(trace: :func:`_startend_only`) The report said "NVTX ranges enclose the launches of 0.0 % of kernel time",
    "NVTX ranges cover little of the GPU time" and "Kernels no range covers ...: `worker` 100.0 %, 2 range(s) on that
    thread" — false: the worker's two start/end ranges enclose every launch (18.000 ms of 18.000 ms). Coverage is
    push/pop only (docs/METRICS.md); the sentences must say so and give the start/end share."""
    from nsys_llm_explainer.render import render_all
    rep = _startend_only(tmp_path)
    j = rep.to_dict()
    assert j["nvtx"]["attribution"]["startend_kernel_ns"] == 18 * MS
    f = _finding(j, "nvtx_coverage")
    assert f["title"].startswith("NVTX push/pop ranges cover little of the GPU time")
    assert ("Start/end ranges on the launching thread enclose the launches of 100.0 % of kernel time (18.000 ms); "
            "they get their own rows but no phase or innermost-range attribution.") in f["evidence"]
    assert any(e.startswith("Kernels no push/pop range covers, by launching thread: `worker` (tid 2) 100.0 %")
               for e in f["evidence"])
    assert any(w.startswith("NVTX→kernel attribution covers 0.0% of kernel time with push/pop ranges (< 70.0%); "
                            "start/end ranges enclose the launches of 100.0 %") for w in j["warnings"])
    out = tmp_path / "out"
    out.mkdir()
    render_all(rep, out)
    md = (out / "report.md").read_text()
    assert ("NVTX push/pop ranges enclose the launches of 0.0 % of kernel time, start/end ranges (same thread) "
            "100.0 %.") in md
    assert "NVTX ranges enclose the launches of 0.0 %" not in md


def test_um_migrations_before_the_launch_do_not_keep_kernels_waiting(tmp_path: Path) -> None:
    """Thread 1 launches a 500 µs kernel every 1 ms (call [t, t+10) µs, kernel [t+50, t+550) µs); a 1 MiB Unified
    Host-to-Device migration (cause page fault) runs [t+600, t+900) µs in each gap, with no kernel running and before
    the next launch call at t+1000 µs. No kernel waited for a migration: each next kernel was launched 100 µs after it
    ended and started 50 µs after its call (the GPU idled because the host had not launched it). The report's top
    finding read "Unified-Memory migrations (`Unified Host-to-Device`) keep the kernels waiting: 29.9 % of the
    window" (20 × 300 µs = 6.000 ms of the 20.1 ms window) — the migration time is right, "waiting" is not."""
    b = TraceBuilder()
    b.process(PID)
    b.thread(PID, 1, "main")
    for i in range(20):
        t = i * MS
        b.launch(t, t + 10 * US, t + 50 * US, t + 550 * US, pid=PID, tid=1, name="gemm")
        b.um_migration(t + 600 * US, t + 900 * US, pid=PID, bytes=1 << 20, cause=2)
    b.um_migration(20 * MS, 20 * MS + 100 * US, pid=PID, bytes=65536, copy_kind=12, cause=None)
    rep = _run(b, tmp_path)
    assert rep["unified_memory"]["available"]
    assert not any("keep the kernels waiting" in f["title"] for f in rep["findings"]), [f["title"] for f in
                                                                                       rep["findings"]]
    # every migration (20 × 300 µs + the last 100 µs, after the last kernel) ran with no kernel while the launching
    # thread was outside CUDA calls (shadow `host_cpu`): no kernel waited on them, 0 of 6.100 ms (copy_waiting_pct)
    causes = {(c["kind"], c["detail"]): c for c in rep["idle_causes"]["devices"][0]["causes"]}
    h2d, d2h = causes[("copy", "Unified Host-to-Device")], causes[("copy", "Unified Device-to-Host")]
    assert (h2d["ns"], h2d["waiting_ns"], d2h["ns"], d2h["waiting_ns"]) == (6_000 * US, 0, 100 * US, 0)
    f = _finding(rep, "idle_copy")
    assert f["title"].startswith("Unified-Memory migrations (`Unified Host-to-Device`) run while the GPU idles, "
                                 "before the next kernel is launched: 29.9 % of the window")
    assert ("Of the 6.100 ms of copy time with the GPU idle on device 0, 0.00 µs (0.0 %) had a kernel waiting on the "
            "copies (the next kernel launched, or the launching thread blocked on the GPU, in a launch call or waiting "
            "on another thread); in the rest the launching thread worked on the host and had not launched the next "
            "kernel: the GPU idled for want of launched work, the copies ran meanwhile.") in f["evidence"]
    (c,) = [c for c in f["checks"] if c["metric"] == "copy_waiting_pct"]
    assert (c["observed"], c["op"], c["threshold"]) == (0.0, "<", 50.0)


def test_um_migrations_after_the_launch_keep_kernels_waiting(tmp_path: Path) -> None:
    """The opposite case: kernel i (period t = (i + 1) ms) is launched by a call at [t − 410, t − 400) µs, i.e. before
    the previous period's migration [t − 400, t − 100) µs starts, and runs [t + 50, t + 550) µs. Each migration
    except the last runs while the next kernel is launched and not started: launched 19 × 300 µs = 5.700 ms of the
    20 × 300 µs = 6.000 ms of migration time with no kernel (95.0 %): the kernels do wait, the title says so."""
    b = TraceBuilder()
    b.process(PID)
    b.thread(PID, 1, "main")
    for i in range(20):
        t = (i + 1) * MS
        b.launch(t - 410 * US, t - 400 * US, t + 50 * US, t + 550 * US, pid=PID, tid=1, name="gemm")
        b.um_migration(t + 600 * US, t + 900 * US, pid=PID, bytes=1 << 20, cause=2)
    rep = _run(b, tmp_path)
    (d,) = rep["unified_memory"]["steady"]["devices"]
    assert d["migration_idle_ns"] == 6_000 * US
    # each migration but the last ran after the next kernel's launch call had ended (shadow `queued`): 5.700 ms waited
    (c,) = [c for c in rep["idle_causes"]["devices"][0]["causes"] if c["kind"] == "copy"]
    assert (c["detail"], c["ns"], c["waiting_ns"]) == ("Unified Host-to-Device", 6_000 * US, 5_700 * US)
    f = _finding(rep, "idle_copy")
    assert f["title"].startswith("Unified-Memory migrations (`Unified Host-to-Device`) keep the kernels waiting: ")
    assert ("Of the 6.000 ms of copy time with the GPU idle on device 0, 5.700 ms (95.0 %) had a kernel waiting on the "
            "copies (the next kernel launched, or the launching thread blocked on the GPU, in a launch call or waiting "
            "on another thread); in the rest the launching thread worked on the host and had not launched the next "
            "kernel: the GPU idled for want of launched work, the copies ran meanwhile.") in f["evidence"]
    (c,) = [c for c in f["checks"] if c["metric"] == "copy_waiting_pct"]
    assert (c["observed"], c["op"], c["threshold"]) == (95.0, ">=", 50.0)
