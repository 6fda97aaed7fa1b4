"""Compare claims over two captures of one workload taken with different nsys options (docs/COMPARE.md): with and
without OS-runtime calls, NVTX, CPU samples; CUDA graphs traced at node or graph level; an old exporter against a new
one. The workload did not change, so no difference may be attributed to it. Truth by construction; every answer
hand-computed.

The loop (``_loop``, exact TraceBuilder rows, no jitter): 40 steps of a decode engine, one every 1 ms from t = 6 ms,
on thread 100 of pid 100, GPU 0. Per step from its start t: an ``epoll_wait`` (waits) [t, t + 300) µs, Python until
t + 400 µs, then the NVTX range ``execute_model`` from t + 400 µs to 15 µs after the last kernel; in it an ``ioctl``
(does not wait) [t + 410, t + 430) µs when ``ioctl``, a ``pthread_mutex_lock`` (waits) [t + 450, t + 500) µs, a
``cudaGraphLaunch`` [t + 500, t + 508) µs whose graph runs the ``GRAPHED`` kernels back to back from t + 510 µs (GEMM
150, attention 80, norm 20, GEMM 100: to t + 860 µs), a sampler launched eagerly [t + 509, t + 514) µs running
[t + 860, t + 870) µs, ``cudaStreamSynchronize`` [t + 515, t + 875) µs. The GPU idles 1 000 − 360 = 640 µs a step,
from the sampler's end to the next GEMM's start, its host thread: in the sync 5 µs (`sync`), in the range after it
10 (`nvtx`), Python 115 (`host_cpu`), ``epoll_wait`` 300 (`osrt`), Python 100 (`host_cpu`), in the range 50 (`nvtx`;
the ``ioctl``'s 20 µs too: the range comes before an OS call that does not wait), ``pthread_mutex_lock`` 50 (`osrt`),
the graph launch 8 (`launch`), the graph's first kernel launched 2 (`queued`): host_cpu 215, osrt 350, nvtx 60. The
steps are NVTX steps: the metric is the median step period, 1.000 ms, the parts over the 39 whole periods."""

from __future__ import annotations

from pathlib import Path
from typing import Dict

import pytest
from synth import TraceBuilder
from synth.scenarios.names import K

import nsys_llm_explainer as nle
from nsys_llm_explainer.comparison.document import compare_document
from nsys_llm_explainer.comparison.gate import gate
from nsys_llm_explainer.render.markdown import write_markdown

US = 1_000
MS = 1_000_000
SAMPLER = "void at::native::sampling_kernel()"
GRAPHED = ((K.GEMM_QKV, 150), (K.FLASH, 80), (K.RMS_NORM, 20), (K.GEMM_O, 100))
PY = (("_PyEval_EvalFrameDefault", "/usr/bin/python3.10"), ("schedule", "/usr/bin/python3.10"))
#: idle per step by cause (ns) with every option on, over the 39 whole periods: the first graph launch is a first
#: launch (`module_load`, 8 µs / 39), the other 38 are `launch` (8 µs × 38 / 39)
FULL = {"host_cpu": 215 * US, "osrt": 350 * US, "nvtx": 60 * US, "launch": 7_795, "module_load": 205, "sync": 5 * US,
        "queued": 2 * US}


def _loop(path: Path, *, osrt: bool = True, nvtx: bool = True, samples: bool = True, node: bool = True,
          ioctl: bool = False, waits: bool = True, flavor: str = "2024.2", period: int = MS, first: int = 0,
          last: int = 40, cold: int = 0, startup: bool = False) -> str:
    """The loop of the module docstring; ``samples``: a CPU sample every 50 µs of the host work outside CUDA calls;
    ``node``: the graph's kernels recorded (``--cuda-graph-trace=node``), else one graph-level row per launch;
    ``waits``: the ``epoll_wait`` and ``pthread_mutex_lock`` recorded where OS calls are (else the host runs); steps
    ``first`` to ``last`` − 1 of a loop whose step i starts at 6 ms + i × ``period``, its first ``cold`` steps' graph
    kernels 3 times as long; ``startup``: a ``cuModuleLoadData`` [1, 4) ms and a ``cudaMalloc`` [4, 5) ms before."""
    b = TraceBuilder(flavor=flavor)
    b.process(100)
    g = b.thread(100, 100)
    b.gpu(0, name="NVIDIA H100 80GB HBM3")
    if startup:
        b.runtime(MS, 4 * MS, tid_g=g, name="cuModuleLoadData")
        b.runtime(4 * MS, 5 * MS, tid_g=g, name="cudaMalloc_v3020")
    for i in range(first, last):
        t = 6 * MS + i * period
        for a, e in ((t + 300 * US, t + 450 * US), (t + 885 * US, t + MS)) if samples else ():
            for x in range(a + 25 * US, e, 50 * US):
                b.cpu_sample(x, tid_g=g, frames=PY)
        if osrt and waits:
            b.osrt(t, t + 300 * US, tid_g=g, name="epoll_wait")
            b.osrt(t + 450 * US, t + 500 * US, tid_g=g, name="pthread_mutex_lock")
        if osrt:
            if ioctl:
                b.osrt(t + 410 * US, t + 430 * US, tid_g=g, name="ioctl")
        k, ks = t + 510 * US, []
        for name, dur in GRAPHED:
            dur *= 3 if i < cold else 1
            ks.append((k, k + dur * US, name))
            k += dur * US
        b.graph_launch(t + 500 * US, t + 508 * US, pid=100, tid=100, kernels=ks, node_mode=node)
        b.launch(t + 509 * US, t + 514 * US, k, k + 10 * US, pid=100, tid=100, name=SAMPLER)
        c = b.runtime(t + 515 * US, k + 15 * US, tid_g=g, name="cudaStreamSynchronize_v3020")
        b.sync(t + 515 * US, k + 15 * US, pid=100, corr=c)
        if nvtx:
            b.nvtx_push_pop(t + 400 * US, k + 25 * US, "execute_model", tid_g=g)
    return b.write(str(path), overwrite=True)


def _idle(t: nle.comparison.result.TraceSummary) -> Dict[str, int]:
    return {s.name: s.per_unit_ns for s in t.idle_by_kind}


@pytest.mark.parametrize("flavor", ["2022.4", "2026.2"])
def test_a_capture_without_os_runtime_calls_moves_no_host_time_between_causes(tmp_path: Path, flavor: str) -> None:
    """BASE captured with ``--trace=osrt``, NEW without (NVTX in both). Truth: the same loop. NEW cannot see the OS
    calls: its ``epoll_wait`` (outside the range) is `host_cpu`, its ``pthread_mutex_lock`` (inside) `nvtx`: host_cpu
    515, nvtx 110 µs a step. The headline read "Largest change: GPU idle with the host outside CUDA, NVTX and OS calls
    (idle cause `host_cpu`) +0.300 ms per step", and the finding changes "idle_osrt gone": a wait NEW could not record.
    Now, some trace lacking OS-runtime calls, `osrt`, `nvtx` and `host_cpu` count as `host_cpu` in every trace (a
    wait inside a range goes to the range, one outside to `host_cpu`: only their sum is known): 625 µs a step in
    both, no part changed, no such line; the trace notes say why, and `idle_osrt` is "untraced" (the other capture
    cannot show it), not gone. Its other findings are each report's own, so the findings table first says the captures
    differ (``capture_differences``)."""
    base, new = _loop(tmp_path / "b.sqlite", flavor=flavor), _loop(tmp_path / "n.sqlite", osrt=False, flavor=flavor)
    res = nle.compare([base, new], labels=["OSRT", "PLAIN"])
    c, (b, n) = res.comparisons[0], res.traces
    assert (res.metric.name, c.verdict, c.metric_base.p50_ns, c.metric_new.p50_ns) == (
        "step_period_p50", "no_change", MS, MS)
    one = {"host_cpu": 625 * US, "launch": 7_795, "module_load": 205, "sync": 5 * US, "queued": 2 * US}
    assert _idle(b) == _idle(n) == one
    assert c.main_reason is None and not any("change:" in x for x in c.headline)
    why = ("counted as host_cpu: PLAIN recorded no OS-runtime call (--trace=osrt), so no trace's host time outside "
           "CUDA calls is split by OS call or range")
    assert b.notes == ("idle causes nvtx (the host inside NVTX ranges) and osrt (the host in an OS call) " + why,)
    assert n.notes == ("idle cause nvtx (the host inside NVTX ranges) " + why,)
    assert {f.id: f.change for f in c.finding_changes}["idle_osrt"] == "untraced"
    # PLAIN's report finds a per-step sync whose host work after it holds the `epoll_wait` it could not see: the
    # findings table says the captures differ before it lists "new"
    assert {f.id: f.change for f in c.finding_changes}["step_sync"] == "new"
    assert c.capture_differences == ("PLAIN recorded no OS-runtime call (--trace=osrt)",)
    md = write_markdown(compare_document(res))
    assert ("The captures differ: PLAIN recorded no OS-runtime call (--trace=osrt). Each report's findings read what "
            "its own capture records, so a finding new, gone or of another severity here may be the capture's "
            "difference, not the code's.") in md


def test_a_capture_without_os_runtime_calls_keeps_the_range_split_when_the_other_records_no_wait(
        tmp_path: Path) -> None:
    """The loop without its two waits (the host runs there), an ``ioctl`` (does not wait) inside the range; BASE with
    OS-runtime calls, NEW without. BASE holds no idle in an OS call: the range comes before the ``ioctl``, and no call
    waits. So no wait of NEW's can hide in its range or its `host_cpu` unless the loop changed: nothing is folded, and
    the range's time stays `nvtx` (110 µs a step: 100 before the launch, 10 after the sync; `host_cpu` 515) in both.
    Folding every host place whenever a capture lacks OS calls lost the range split of one loop for nothing (real
    trace 14 against itself without its OS calls: its `nvtx` 88 % of the window became `host_cpu`)."""
    base = _loop(tmp_path / "b.sqlite", waits=False, ioctl=True)
    new = _loop(tmp_path / "n.sqlite", waits=False, ioctl=True, osrt=False)
    res = nle.compare([base, new], labels=["OSRT", "PLAIN"])
    c, (b, n) = res.comparisons[0], res.traces
    assert [(x["host_cpu"], x["nvtx"], "osrt" in x) for x in (_idle(b), _idle(n))] == [(515 * US, 110 * US, False)] * 2
    assert b.notes == n.notes == () and c.main_reason is None
    assert c.capture_differences == ("PLAIN recorded no OS-runtime call (--trace=osrt)",)


@pytest.mark.parametrize("flavor", ["2021.5", "2024.2"])
def test_a_capture_without_nvtx_folds_the_os_calls_a_range_would_have_held(tmp_path: Path, flavor: str) -> None:
    """BASE with NVTX, NEW without (OS calls in both), an ``ioctl`` of 20 µs inside the range. In BASE the range
    holds it (`nvtx` before an OS call that does not wait); NEW, with no range, charges it to `osrt`: host_cpu 215 +
    60 − 20 = 255 µs, osrt 350 + 20 = 370 µs a gap. Counting only `nvtx` as `host_cpu` left BASE 20 µs more
    `host_cpu` a gap than NEW and NEW 20 µs more `osrt` (`ioctl`): "Largest change: GPU idle with the host outside
    CUDA, NVTX and OS calls (idle cause `host_cpu`) −0.021 ms per iteration". Now the places a
    range decides (`nvtx`, OS calls that do not wait, `host_cpu`) count as `host_cpu`: 275 µs a gap in both; the waits
    (``epoll_wait``, ``pthread_mutex_lock``, 350 µs) come before any range and stay `osrt`. No steps are found alike
    (NVTX against marker kernels): the metric is the anchor GEMM's period, 40 iterations in each window, and the parts
    are over the windows, which start and end elsewhere (the anchor metric's edge, docs/COMPARE.md). By hand: BASE's
    window runs from step 0's range start (t0 + 400 µs) to the last range's end, so it holds step 0's 50 µs of range
    before the mutex, the mutex (50), 39 gaps of 275 µs `host_cpu` and the last range's 10 µs after the sync: host_cpu
    50 + 39 × 275 + 10 = 10 785 µs, osrt 50 + 39 × 350 = 13 700 µs; BARE's from step 0's graph launch to the last sync's
    end: 39 × 275 = 10 725 µs, 39 × 350 = 13 650 µs. The `ioctl` is in neither (folded), `nvtx` in neither."""
    base = _loop(tmp_path / "b.sqlite", ioctl=True, flavor=flavor)
    new = _loop(tmp_path / "n.sqlite", ioctl=True, nvtx=False, flavor=flavor)
    res = nle.compare([base, new], labels=["NVTX", "BARE"])
    c, (b, n) = res.comparisons[0], res.traces
    assert (res.metric.name, c.verdict, b.units, n.units) == ("iteration_period_p50", "no_change", 40, 40)
    assert [{s.name: s.ns for s in t.idle_by_kind if s.name in ("host_cpu", "osrt", "nvtx")} for t in (b, n)] == [
        {"host_cpu": 10_785 * US, "osrt": 13_700 * US}, {"host_cpu": 10_725 * US, "osrt": 13_650 * US}]
    assert {d.detail for d in c.idle_detail_changes if d.name == "osrt"} == {"epoll_wait", "pthread_mutex_lock"}
    assert c.capture_differences == ("BARE recorded no NVTX range",)
    assert b.notes == ("idle cause nvtx (the host inside NVTX ranges) counted as host_cpu: BARE recorded no NVTX "
                       "range, so no trace's host time outside CUDA calls is split by range",)
    assert n.notes == ("idle cause osrt (the host in an OS call that does not wait) counted as host_cpu: BARE "
                       "recorded no NVTX range, so no trace's host time outside CUDA calls is split by range",)


def test_cpu_samples_change_nothing_compared(tmp_path: Path) -> None:
    """BASE with CPU sampling, NEW without: samples split no idle cause, so every part and finding is the same."""
    res = nle.compare([_loop(tmp_path / "b.sqlite"), _loop(tmp_path / "n.sqlite", samples=False)],
                      labels=["SAMPLED", "UNSAMPLED"])
    c, (b, n) = res.comparisons[0], res.traces
    assert _idle(b) == _idle(n) == FULL
    assert c.verdict == "no_change" and c.main_reason is None
    assert {f.change for f in c.finding_changes} == {"same"} and b.notes == n.notes == () == c.capture_differences


@pytest.mark.parametrize("flavor", ["2024.2", "2026.2"])
def test_graphs_traced_at_graph_level_in_one_capture_are_said_not_comparable(tmp_path: Path, flavor: str) -> None:
    """BASE traced its CUDA graph's kernels (``--cuda-graph-trace=node``), NEW at graph level (nsys's default): NEW
    has one busy interval per graph launch, 350 µs, and the sampler's 10 µs as its only kernel. Truth: the same loop.
    The reason read "the runs share little kernel work: BASE spends only 2 % of its kernel time in kernel names NEW
    also ran" (10 / 360), false of one loop. Now it says what differs: NEW's capture hides its graphs' kernels,
    350 / 360 = 97 % of its busy time; the gate fails closed (exit 4)."""
    base = _loop(tmp_path / "b.sqlite", flavor=flavor)
    new = _loop(tmp_path / "n.sqlite", node=False, flavor=flavor)
    res = nle.compare([base, new], labels=["NODE", "GRAPH"])
    c = res.comparisons[0]
    assert (c.status, c.verdict, c.metric_base.p50_ns, c.metric_new.p50_ns) == ("too_different", "not_compared",
                                                                               MS, MS)
    assert c.reasons == ("GRAPH was captured without its CUDA graphs' kernels (nsys --cuda-graph-trace=graph, the "
                         "default): 97 % of its GPU busy time in the steady window is whole-graph executions, which "
                         "NODE's capture records kernel by kernel (capture both with --cuda-graph-trace=node)",)
    assert gate(res, 5.0)[1] == 4
    both = nle.compare([new, _loop(tmp_path / "n2.sqlite", node=False, flavor=flavor)], labels=["G1", "G2"])
    assert both.comparisons[0].status == "comparable"   # both captures hide them alike: the busy time is compared


def test_an_old_exporter_against_a_new_one_changes_nothing(tmp_path: Path) -> None:
    """The loop exported by nsys 2021.5 (schema 2.7.1: another kernel table, no graph events) and by 2026.2: every
    part, idle cause and finding is the same."""
    res = nle.compare([_loop(tmp_path / "o.sqlite", flavor="2021.5"), _loop(tmp_path / "n.sqlite", flavor="2026.2")],
                      labels=["OLD", "NEW"])
    c, (b, n) = res.comparisons[0], res.traces
    assert _idle(b) == _idle(n) == FULL
    assert c.verdict == "no_change" and c.main_reason is None and {f.change for f in c.finding_changes} == {"same"}


@pytest.mark.parametrize("flavor", ["2022.4", "2026.2"])
def test_a_whole_run_against_a_profiler_range_is_compared_over_the_warm_loop(tmp_path: Path, flavor: str) -> None:
    """One loop of 60 steps, 2 ms apart, its first 3 steps cold (the graph's kernels 3 times as long: 1 050 µs, the
    period still 2 ms: the host paces the loop). BASE captured the whole run — a module load and an allocation before
    the loop, every step; NEW with ``--capture-range=cudaProfilerApi`` from step 20 on (40 steps). Truth: the same
    loop. Both medians are 2.000 ms; the cold periods are no longer than the rest, so the warm-up rule by period kept
    them in BASE's span, and its parts were over 59 periods with 3 cold ones: `gemm` (3 × 750 + 56 × 250) / 59 =
    275.4 µs a step against 250, `host_cpu` (the cold kernels fill 700 µs of its idle) lower: "Largest change: GPU idle
    with the host outside CUDA, NVTX and OS calls (idle cause `host_cpu`) +0.036 ms per step", a capture's warm-up
    read as a change. Now a leading (or trailing) run of periods whose GPU work is over 2 × the process's median is
    warm-up too (1 060 µs against 360): BASE's span is steps 3 → 59, 56 periods, each part as NEW's 39."""
    base = _loop(tmp_path / "b.sqlite", flavor=flavor, period=2 * MS, last=60, cold=3, startup=True)
    new = _loop(tmp_path / "n.sqlite", flavor=flavor, period=2 * MS, first=20, last=60)
    res = nle.compare([base, new], labels=["WHOLE", "RANGE"])
    c, (b, n) = res.comparisons[0], res.traces
    assert (c.verdict, c.metric_base.p50_ns, c.metric_new.p50_ns, b.units, n.units) == ("no_change", 2 * MS, 2 * MS,
                                                                                       56, 39)
    assert {d.name: (d.base_per_unit_ns, d.delta_per_unit_ns) for d in c.category_changes} == {
        "gemm": (250 * US, 0), "attention": (80 * US, 0), "norm": (20 * US, 0), "sampling": (10 * US, 0),
        "non_gpu": (1_640 * US, 0)}
    assert c.main_reason is None and not any("change:" in x for x in c.headline)
