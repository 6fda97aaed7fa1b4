"""Compare verdicts on single-file claims (docs/COMPARE.md): a longer start-up, eager launches replaced by a CUDA graph,
two event-timed benchmark captures. Truth by construction; hand-computed."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import jsonschema
import pytest
from synth import TraceBuilder
from synth.loops import LOOP_KERNELS
from synth.scenarios.names import K

import nsys_llm_explainer as nle
from nsys_llm_explainer.comparison.measure import HOST_PACED, gather
from nsys_llm_explainer.render import load_schema
from nsys_llm_explainer.report import Report

US = 1_000
MS = 1_000_000
FILL = ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, at::detail::Array<char*, 1> "
        ">(int, at::native::FillFunctor<float>, at::detail::Array<char*, 1>)")
ADD = ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctorOnSelf_add<float>, "
       "at::detail::Array<char*, 2> >(int, at::native::CUDAFunctorOnSelf_add<float>, at::detail::Array<char*, 2>)")


def _loop(path: Path, t0: int = MS, init_kernel: bool = False) -> str:
    """40 steps of :func:`synth.loops.synced_loop`'s loop (a 16 µs H2D copy, GEMM 200 µs, FlashAttention 100, RMS
    norm 20, sampler 10 back to back from t + 20 µs, launches 0.5 µs every 0.6 µs from t + 19 µs, a
    `cudaStreamSynchronize` to 5 µs after the last kernel, NVTX `execute_model`; period 1 ms) from ``t0``; with
    ``init_kernel`` a 50 µs fill kernel (launched [0.4, 0.401) ms) runs at 0.5 ms first: a start-up before the loop."""
    b = TraceBuilder()
    b.process(100)
    g = b.thread(100, 100)
    b.gpu(0)
    if init_kernel:
        b.launch(400 * US, 401 * US, 500 * US, 550 * US, pid=100, tid=100, name=FILL)
    t = t0
    for _ in range(40):
        c = b.runtime(t + 1 * US, t + 19 * US, tid_g=g, name="cudaMemcpyAsync_v3020")
        b.memcpy(t + 2 * US, t + 18 * US, pid=100, bytes=65536, copy_kind=1, src_kind=1, dst_kind=2, corr=c)
        api, k = t + 19 * US, t + 20 * US
        for name, d in LOOP_KERNELS:
            b.launch(api, api + 500, k, k + d * US, pid=100, tid=100, name=name)
            api, k = api + 600, k + d * US
        c = b.runtime(api, k + 5 * US, tid_g=g, name="cudaStreamSynchronize_v3020")
        b.sync(api, k + 5 * US, pid=100, sync_type=3, corr=c)
        b.nvtx_push_pop(t, k + 15 * US, "execute_model", tid_g=g)
        t = k + 5 * US + MS - 355 * US
    return b.write(str(path), overwrite=True)


def test_a_longer_start_up_names_no_largest_change_of_a_few_ns(tmp_path: Path) -> None:
    """NEW is BASE's loop (period 1.000 ms) after a 2 s start-up (one init kernel at 0.5 ms, the loop from 2 s).
    Truth: the same loop; no part of it changed. NEW's auto window starts at its first loop kernel (20 µs into the
    first step), so its period span holds 38 periods, BASE's 39. In BASE the span's first launch gap (0.5 µs, the
    GEMM's first launch) is `module_load`; in NEW the init kernel's launch came first, so the same 0.5 µs is `launch`:
    `launch` 19 µs over 39 periods (487 ns) vs over 38 (500 ns) = +13 ns per step, `module_load` −13 ns. The
    headline read "Largest change: GPU idle in kernel launch calls (idle cause `launch`) +0.000 ms per step, of which
    `cudaLaunchKernel` +0.000 ms": a change the line itself prints as none. Fixed: with a "no change" verdict a
    largest change that rounds to 0.000 ms per unit is none (``main_reason`` null, no line)."""
    base, new = _loop(tmp_path / "b.sqlite"), _loop(tmp_path / "n.sqlite", t0=2_000 * MS, init_kernel=True)
    c = nle.compare([base, new], labels=["BASE", "NEW"]).comparisons[0]
    assert (c.metric_base.p50_ns, c.metric_new.p50_ns, c.verdict) == (MS, MS, "no_change")
    kinds = {d.name: d.delta_per_unit_ns for d in c.idle_changes}
    assert (kinds["launch"], kinds["module_load"]) == (13, -13)
    assert c.main_reason is None
    assert not any(h.startswith("Largest change") for h in c.headline), c.headline
    assert c.headline[-1] == "GPU busy 33.5 % → 33.5 % of the steady window."


def _eager_or_graph(path: Path, graph: bool) -> str:
    """120 steps on thread 100, GPU 0, from t = 1 ms: 20 kernels (add 5 µs, RMS norm 5, GEMM 8, FlashAttention 6,
    five times: 120 µs). Eager: 20 `cudaLaunchKernel` calls of 10 µs back to back from t, kernel j starting 2 µs after
    its launch returns (t + 10 j + 12 µs), so each is launched only after the one before it started (host-paced);
    last kernel ends t + 208 µs. Graph: one `cudaGraphLaunch` [t, t + 15) µs, its 20 nodes back to back from t + 20
    µs, ending t + 140 µs. Then `cudaStreamSynchronize` to 5 µs after the last kernel, NVTX `execute_model` [t, that),
    the next step 100 µs after the sync returns: period 313 µs eager, 245 µs graph."""
    kernels = [(ADD, 5), (K.RMS_NORM, 5), (K.GEMM_QKV, 8), (K.FLASH, 6)] * 5
    b = TraceBuilder()
    b.process(100)
    g = b.thread(100, 100)
    b.gpu(0)
    t = MS
    for _ in range(120):
        if graph:
            ks, k = [], t + 20 * US
            for name, d in kernels:
                ks.append((k, k + d * US, name))
                k += d * US
            b.graph_launch(t, t + 15 * US, pid=100, tid=100, kernels=ks)
            api, end = t + 15 * US, k
        else:
            api = t
            for name, d in kernels:
                b.launch(api, api + 10 * US, api + 12 * US, api + (12 + d) * US, pid=100, tid=100, name=name)
                api, end = api + 10 * US, api + (12 + d) * US
        c = b.runtime(api, end + 5 * US, tid_g=g, name="cudaStreamSynchronize_v3020")
        b.sync(api, end + 5 * US, pid=100, sync_type=3, corr=c)
        b.nvtx_push_pop(t, end + 5 * US, "execute_model", tid_g=g)
        t = end + 105 * US
    return b.write(str(path), overwrite=True)


def test_eager_to_cuda_graph_main_reason_is_the_launch_overhead(tmp_path: Path) -> None:
    """Eager → CUDA graph: 313 → 245 µs per step, 21.7 % faster; all of it launch overhead. Per step BASE's GPU idles
    48 µs inside launch calls (`launch`: 20 × 10 µs calls less the kernels running under them) and 40 µs queued
    (20 × 2 µs from a launch's return to its kernel's start, each launched after the one before started:
    host-paced, docs/MODEL.md); BASE's single report counts both as one launch-bound finding ("Launch-bound: ...
    10.542 ms"), which is gone in NEW. NEW: 15 µs `launch` (the graph launch call before its first node), 5 µs queued.
    The headline reads "Main reason: GPU idle with the next kernel already launched (queued) (idle cause `queued`)
    −0.035 ms per step" — half the change, in words the BASE report does not use for that time (it calls it the
    host's launch interval, not GPU-side latency), beside a `launch` row of −0.033. The fix I would make:
    ``comparison.measure.gather`` moves the host-paced ``queued`` ns (``IdleCause.host_paced_ns``) of the devices
    the report found launch-bound to a `launch` detail ("host-paced queued"), so the comparison's parts are the
    report's: main reason `launch` −0.068 ms per step (−0.033 − 0.035).

    Fixed so. Both devices are launch-bound (busy 38 % / 49 %, kernels ≤ 8 µs, 64 k / 82 k launches per s), so each
    side's host-paced `queued` time is a `launch` row: BASE 20 × 2 µs = 40 µs per step, NEW the 5 µs from the graph
    launch's return to its first node (launched after the step before ended) → −35 µs; the launch calls 48 µs
    (`cudaLaunchKernel`) → 15 µs (`cudaGraphLaunch`); `launch` 88 → 20 µs: −68 µs. Not a µs of `queued` is left on
    either side."""
    res = nle.compare([_eager_or_graph(tmp_path / "e.sqlite", False), _eager_or_graph(tmp_path / "g.sqlite", True)],
                      labels=["EAGER", "GRAPH"])
    c = res.comparisons[0]
    assert (c.metric_base.p50_ns, c.metric_new.p50_ns, c.verdict) == (313 * US, 245 * US, "faster")
    fc = {f.id: f.change for f in c.finding_changes}
    assert fc["launch_overhead"] == "gone"
    assert c.main_reason is not None and c.main_reason.name == "launch", c.headline
    assert c.main_reason.delta_per_unit_ns == pytest.approx(-68 * US, abs=US)
    rows = {(d.name, d.detail): (d.base_per_unit_ns, d.new_per_unit_ns) for d in c.idle_detail_changes}
    for key, (b, n) in {("launch", HOST_PACED): (40, 5), ("launch", "cudaLaunchKernel"): (48, 0),
                        ("launch", "cudaGraphLaunch"): (0, 15)}.items():
        assert rows[key] == (pytest.approx(b * US, abs=US), pytest.approx(n * US, abs=US)), (key, rows[key])
    assert all(b < US and n < US for (k, _), (b, n) in rows.items() if k == "queued"), rows
    assert c.headline[2].startswith("Main reason: GPU idle in kernel launch calls and between kernels launched one at "
                                    "a time (launch overhead, idle cause `launch`) −0.068 ms per step, of which "
                                    "`cudaLaunchKernel` −0.048 ms"), c.headline


def test_the_idle_by_cause_table_says_launch_holds_the_host_paced_time(tmp_path: Path) -> None:
    """Eager → CUDA graph, as above: the main reason is `launch` −0.068 ms per step, 0.035 of it host-paced `queued`
    time the comparison counts with the launch calls. The "GPU idle per step by cause" table showed `launch` 0.088 →
    0.020 and `queued` 0.000, and nothing said that 0.040 / 0.005 ms of that `launch` is what each report's own
    idle-cause table lists under `queued` (the detail row was only in tables/part_changes.csv). Now each trace's
    `host_paced_ns` is in compare.json and a note under the table gives it per step. Over the period span (the 119
    step periods from the first step's start to the last one's): EAGER 20 gaps of 2 µs per period = 4,760 µs, less
    the very first kernel's 2 µs (no kernel before it: not host-paced) = 4,758 µs, / 119 = 39.98 µs → 0.040; GRAPH
    5 µs per period = 595 µs less the first 5 = 590 µs, / 119 = 4.96 µs → 0.005 ms/step."""
    from nsys_llm_explainer.comparison.document import compare_document, render_compare_html
    from nsys_llm_explainer.render.markdown import write_markdown

    res = nle.compare([_eager_or_graph(tmp_path / "e.sqlite", False), _eager_or_graph(tmp_path / "g.sqlite", True)],
                      labels=["EAGER", "GRAPH"])
    assert [(t.units, t.host_paced_ns) for t in res.traces] == [(119, 4_758 * US), (119, 590 * US)]
    note = ("`launch` includes the host-paced `queued` time of the devices each report finds launch-bound (each kernel "
            "launched only after the one before it started: launch overhead, as the launch-bound finding counts it; "
            "the report's own idle-cause table lists it under `queued`): `EAGER` 0.040, `GRAPH` 0.005 ms/step of it "
            "(detail `host-paced queued` in tables/part_changes.csv).")
    md = write_markdown(compare_document(res)).splitlines()
    at = md.index("## GPU idle per step by cause")
    assert note in md[at:at + 14], md[at:at + 14]
    assert "<code>host-paced queued</code> in tables/part_changes.csv" in render_compare_html(res)
    d = res.to_dict()
    assert [t["host_paced_ns"] for t in d["traces"]] == [4_758 * US, 590 * US]
    jsonschema.validate(d, load_schema("compare_schema.json"))


def test_the_launch_bound_title_says_the_gpu_waits_per_kernel(tmp_path: Path) -> None:
    """EAGER's own report: the title read "the host needs ~4.39 µs per kernel, the kernels ~5.50 µs", as if the host
    were faster than the kernels while every launch call took 10 µs; 4.39 µs is GPU idle charged to launch overhead
    per kernel. By hand, per step: the gap after kernel j (0…18) is [t + 10 j + 12 + d_j, t + 10 j + 22): `launch`
    (call j + 1 until t + 10 j + 20) 8 − d_j µs, then 2 µs host-paced `queued`; Σ d_j over j ≤ 18 = 120 − 6, so
    19 × 8 − 114 = 38 µs `launch` and 38 µs queued; between steps 10 µs `launch` (the first call after 100 µs of host
    work) and 2 µs queued. 120 steps, 119 gaps between them, less 6 µs of first launches of RMS norm and the GEMM
    (`module_load`: 3 + 3 µs): `launch` 4.560 + 1.190 − 0.006 = 5.744 ms, queued 4.560 + 0.238 = 4.798 ms, 10.542 ms
    over 2,400 kernels = 4.3925 µs; median kernel of 5, 5, 8, 6 µs × 5: (5 + 6) / 2 = 5.50 µs."""
    rep = nle.analyze(_eager_or_graph(tmp_path / "e.sqlite", False))
    f = next(x for x in rep.findings if x.id == "launch_overhead")
    assert f.time_at_stake_ns == 10_542 * US
    assert f.title.startswith("Launch-bound: the GPU waits ~4.39 µs per kernel for its launch; the kernels run "
                              "~5.50 µs: "), f.title
    assert "the GPU waits about 4.39 µs per kernel for its launch (the launch overhead below over its 2,400 " \
           "kernels: GPU idle, not the length of a launch call)." in f.evidence[0], f.evidence[0]
    assert "launch calls `cudaLaunchKernel` 5.744 ms; launched kernels waiting to start after host-paced launches " \
           "(each launched only after the kernel before it started) 4.798 ms" in f.evidence[1], f.evidence[1]


def test_a_report_without_host_paced_time_keeps_it_queued(tmp_path: Path) -> None:
    """``host_paced_ns`` is not in report.json: a report loaded from it (``Report.from_dict``) holds 0, so
    ``gather`` would move nothing and leave the 40 µs per step `queued` (compare refuses such a report anyway:
    tests/render/test_report_roundtrip.py). Given the analysed report's steady window parts, the loaded EAGER
    report's parts are the table's: `queued` 40 µs per step, no `launch` detail ``host-paced queued``; the analysed
    one's move the 40 µs to it."""
    rep = nle.analyze(_eager_or_graph(tmp_path / "e.sqlite", False))
    loaded = replace(Report.from_dict(rep.to_dict()), steady_kernel_starts=rep.steady_kernel_starts,
                     steady_categories=rep.steady_categories)
    steps = rep.steps.step_count    # 120 steps in the window; the parts over the window: 40 µs × 120 queued
    for r, queued, paced in ((loaded, 40, 0), (rep, 0, 40)):
        f = gather(r, "EAGER", "e.sqlite")
        assert f.idle_detail.get(("queued", ""), 0) == pytest.approx(queued * US * steps, abs=20 * US)
        assert f.idle_detail.get(("launch", HOST_PACED), 0) == pytest.approx(paced * US * steps, abs=20 * US)


def _do_bench(path: Path, gemm_us: int, reads: bool = True) -> str:
    """`triton.testing.do_bench` of one GEMM (as tests/findings/test_claims_benchmark_harnesses.py's, 250 repetitions):
    per repetition h = 1.3 ms + i · 20 µs an 80 µs L2-flush fill kernel (launched [h, h+5) µs) outside the event pair,
    `cudaEventRecord` [h+5, h+7), the GEMM of ``gemm_us`` (launched [h+7, h+12)), `cudaEventRecord` [h+14, h+16); the
    GPU runs them back to back from 1.32 ms (a repetition is 80 + 1 + ``gemm_us`` µs); then one `cudaDeviceSynchronize`
    and 200 `cudaEventElapsedTime` reads (none without ``reads``: no event-timed thread)."""
    b = TraceBuilder()
    b.process(7)
    g = b.thread(7, 1, "main")
    b.runtime(MS, MS + 200 * US, tid_g=g, name="cudaMalloc_v3020")
    t = MS + 300 * US
    gpu = t + 20 * US
    for i in range(250):
        h = t + i * 20 * US
        b.launch(h, h + 5 * US, gpu, gpu + 80 * US, pid=7, tid=1, name=FILL)
        b.runtime(h + 5 * US, h + 7 * US, tid_g=g, name="cudaEventRecord_v3020")
        b.launch(h + 7 * US, h + 12 * US, gpu + 81 * US, gpu + (81 + gemm_us) * US, pid=7, tid=1, name=K.GEMM_QKV)
        b.runtime(h + 14 * US, h + 16 * US, tid_g=g, name="cudaEventRecord_v3020")
        gpu += (81 + gemm_us) * US
    h = t + 250 * 20 * US
    b.runtime(h, gpu + 5 * US, tid_g=g, name="cudaDeviceSynchronize_v3020")
    for i in range(200 if reads else 0):
        b.runtime(gpu + (10 + 3 * i) * US, gpu + (12 + 3 * i) * US, tid_g=g, name="cudaEventElapsedTime_v3020")
    return b.write(str(path), overwrite=True)


def test_two_do_bench_captures_are_compared_on_the_timed_kernels(tmp_path: Path) -> None:
    """The GEMM under test 30 → 20 µs (−33.3 %: what `do_bench` reports). Each capture is an event-timed harness:
    the 250 fills (80 µs each, 20 ms, 72 % / 80 % of kernel time) lie outside every event pair, and the single
    reports leave them out of the top kernel's share ("harness kernels outside the timed regions left out"). The
    comparison's metric is the iteration period of the anchor kernel — the heaviest common kernel, the flush fill —
    111 → 101 µs: "9.0 % faster", main reason `gemm` −0.010 ms per iteration, with no word that 80 µs of each 111 µs
    is the benchmark's own cache flush. The fix I would make: the anchor is chosen among the kernels that are not
    harness kernels (``analyses.kernels.harness``) when every trace is event-timed, and the headline says what was
    left out and gives the timed kernels' time per iteration (0.030 → 0.020 ms, −33.3 %).

    Fixed so: 250 GEMMs per capture, one per iteration (250 iterations); the fills 250 × 80 µs = 20 ms in each
    (0.080 ms per iteration), the timed GEMMs 7.5 / 5 ms (0.030 → 0.020 ms per iteration, −33.3 %)."""
    res = nle.compare([_do_bench(tmp_path / "a.sqlite", 30), _do_bench(tmp_path / "b.sqlite", 20)],
                      labels=["A", "B"])
    c = res.comparisons[0]
    assert (c.metric_base.p50_ns, c.metric_new.p50_ns, c.verdict) == (111 * US, 101 * US, "faster")
    assert res.metric.anchor_kernel == K.GEMM_QKV
    assert res.metric.harness_left_out == (FILL,)
    assert [(t.units, t.harness_kernel_ns, t.timed_kernel_ns) for t in res.traces] == [
        (250, 20 * MS, 7_500 * US), (250, 20 * MS, 5 * MS)]
    assert (f"Benchmark harness: every trace is event-timed, so the anchor is a timed kernel; the harness's own "
            f"kernels, launched outside every timed region (`{FILL}`: 0.080 ms per iteration in each), are left out "
            "of it but still in the iteration period; the timed kernels take 0.030 ms → 0.020 ms per iteration "
            "(−33.3 %).") in c.headline, c.headline
    d = res.to_dict()
    assert d["metric"]["harness_left_out"] == [FILL] and d["traces"][1]["timed_kernel_ns"] == 5 * MS
    jsonschema.validate(d, load_schema("compare_schema.json"))


def test_a_capture_not_event_timed_keeps_the_heaviest_common_kernel(tmp_path: Path) -> None:
    """The same two harnesses, B's elapsed times never read (no event-timed thread in B): not every trace is
    event-timed, so the anchor is the heaviest common kernel as before — the fill, whose smallest share of kernel
    time (80 / 110 = 72.7 % in A) beats the GEMM's (20 / 100 = 20 % in B) — and no harness line or field."""
    res = nle.compare([_do_bench(tmp_path / "a.sqlite", 30), _do_bench(tmp_path / "b.sqlite", 20, reads=False)],
                      labels=["A", "B"])
    c = res.comparisons[0]
    assert (res.metric.anchor_kernel, res.metric.harness_left_out) == (FILL, None)
    assert (c.metric_base.p50_ns, c.metric_new.p50_ns) == (111 * US, 101 * US)
    assert not any("harness" in h for h in c.headline), c.headline
    assert "harness_left_out" not in res.to_dict()["metric"]
    assert all(t.harness_kernel_ns is None and t.timed_kernel_ns is None for t in res.traces)

