"""Exact answers at the edges of the read, on small synthetic exports with hand-computed answers: API names as nsys
prints them, NVTX start/end ranges in kernel attribution, kernels without ``globalPid`` in a multi-process trace, and
the end given to unterminated NVTX ranges."""

from __future__ import annotations

import pytest
from synth import TraceBuilder

from nsys_llm_explainer.analyses.api import classes as ac
from nsys_llm_explainer.model.names import base_api_name
from nsys_llm_explainer.pipeline import Options, analyze_path
from nsys_llm_explainer.render import render_markdown
from nsys_llm_explainer.serialize import report_dict


def run(b: TraceBuilder, tmp_path, name: str = "t.sqlite"):
    p = tmp_path / name
    b.write(str(p))
    rep = analyze_path(str(p), Options())
    return rep, report_dict(rep)


def model_of(tmp_path, name: str = "t.sqlite"):
    """The trace model of the export :func:`run` wrote (the report holds none)."""
    from nsys_llm_explainer.pipeline import load_model

    return load_model(str(tmp_path / name))


# ------------------------------------------------------------------ 1. API names


@pytest.mark.parametrize("raw,shown", [
    ("cudaLaunchKernel_v7000", "cudaLaunchKernel"),
    ("cudaMemcpyAsync_ptsz_v7000", "cudaMemcpyAsync_ptsz"),
    ("cuGetProcAddress", "cuGetProcAddress"),
    ("cuGetProcAddress_v2", "cuGetProcAddress_v2"),
    ("cuMemAlloc_v2", "cuMemAlloc_v2"),
    ("cudaStreamIsCapturing_v10000", "cudaStreamIsCapturing_v10000"),
    ("cudaGetDeviceProperties_v2_v12000", "cudaGetDeviceProperties_v2_v12000"),
    ("cudaGetDeviceProperties_v12000", "cudaGetDeviceProperties_v12000"),
    ("cudaStreamGetCaptureInfo_v2_v11030", "cudaStreamGetCaptureInfo_v2_v11030"),
])
def test_api_display_name_strips_only_what_nsys_strips(raw, shown):
    # the names and what nsys 2022.4 / 2024.2 print for them, read from the oracle CSVs of ../shared/traces
    assert base_api_name(raw) == shown


@pytest.mark.parametrize("raw,cls", [
    ("cuMemAlloc_v2", "alloc"), ("cuMemFree_v2", "free"), ("cuMemsetD32_v2", "sync"),
    ("cudaMemcpyAsync_ptsz_v7000", "other"), ("cudaMemcpy_ptds_v7000", "sync"),
    ("cudaStreamSynchronize_ptsz_v7000", "sync"), ("cudaGraphLaunch_v10000", "launch"),
    ("cudaGetDeviceProperties_v2_v12000", "other"), ("cudaEventQuery_v3020", "nonblocking_sync"),
    ("cuMemcpyDtoHAsync_v2", "other"), ("cudaFreeAsync_v11020", "free"),
])
def test_api_class_sees_through_every_suffix(raw, cls):
    assert ac.api_class(raw) == cls


def test_api_rows_keep_distinct_entry_points(tmp_path):
    b = TraceBuilder()
    b.process(1)
    tg = b.thread(1, 1)
    b.runtime(0, 100, tid_g=tg, name="cuGetProcAddress", event_class=1)
    b.runtime(200, 500, tid_g=tg, name="cuGetProcAddress", event_class=1)
    b.runtime(600, 650, tid_g=tg, name="cuGetProcAddress_v2", event_class=1)
    b.runtime(700, 1700, tid_g=tg, name="cuMemAlloc_v2", event_class=1)
    b.runtime(2000, 2010, tid_g=tg, name="cudaStreamIsCapturing_v10000")
    b.launch(3000, 3020, 3100, 3200, pid=1, tid=1, name="k")
    _, j = run(b, tmp_path)
    rows = {r["name"]: r for r in j["cuda_api"]["apis"]}
    assert set(rows) == {"cuGetProcAddress", "cuGetProcAddress_v2", "cuMemAlloc_v2",
                         "cudaStreamIsCapturing_v10000", "cudaLaunchKernel"}
    g = rows["cuGetProcAddress"]
    assert (g["count"], g["total_ns"], g["min_ns"], g["max_ns"], g["p50_ns"]) == (2, 400, 100, 300, 200)
    g2 = rows["cuGetProcAddress_v2"]
    assert (g2["count"], g2["total_ns"], g2["p50_ns"]) == (1, 50, 50)
    assert rows["cuMemAlloc_v2"]["api_class"] == "alloc"        # classified through the suffix
    assert [r["name"] for r in j["cuda_api"]["alloc_free"]] == ["cuMemAlloc_v2"]
    assert rows["cudaLaunchKernel"]["raw_names"] == ["cudaLaunchKernel_v7000"]
    assert rows["cudaLaunchKernel"]["api_class"] == "launch"


# ------------------------------------------------------------------ 2. NVTX start/end ranges


def test_startend_ranges_on_the_launching_thread_attribute_kernels(tmp_path):
    b = TraceBuilder()
    b.process(1)
    t1, t2 = b.thread(1, 1), b.thread(1, 2)
    b.nvtx_start_end(0, 1000, "fwd", tid_g=t1)
    b.nvtx_start_end(500, 2000, "fwd", tid_g=t1)              # overlaps the first: a kernel counts once per name
    b.nvtx_start_end(0, 5000, "t2_range", tid_g=t2)           # another thread: encloses no launch of its thread
    b.nvtx_start_end(0, 5000, "cross", tid_g=t1, end_tid_g=t2)  # ended on another thread: never counts
    b.nvtx_push_pop(0, 3000, "step", tid_g=t1)
    b.launch(100, 110, 10_000, 10_010, pid=1, tid=1, name="a")      # 10: fwd#1, step
    b.launch(600, 610, 10_100, 10_120, pid=1, tid=1, name="b")      # 20: fwd#1 and fwd#2, step
    b.launch(1500, 1510, 10_200, 10_240, pid=1, tid=1, name="c")    # 40: fwd#2, step
    b.launch(990, 1010, 10_300, 10_380, pid=1, tid=1, name="d")     # 80: ends after fwd#1, inside fwd#2, step
    b.launch(2500, 2510, 10_400, 10_560, pid=1, tid=1, name="e")    # 160: step only
    b.launch(4000, 4010, 10_600, 10_920, pid=1, tid=1, name="f")    # 320: only "cross" (does not count)
    _, j = run(b, tmp_path)
    att = j["nvtx"]["attribution"]
    rows = {(r["name"], r["style"]): r for r in att["ranges"]}
    assert set(rows) == {("fwd", "StartEnd"), ("step", "PushPop")}
    fwd = rows[("fwd", "StartEnd")]
    assert (fwd["kernel_count"], fwd["inclusive_ns"], fwd["innermost_ns"]) == (4, 150, 0)
    assert fwd["pct_of_kernel_time"] == pytest.approx(100 * 150 / 630, abs=0.01)
    step = rows[("step", "PushPop")]
    assert (step["kernel_count"], step["inclusive_ns"], step["innermost_ns"]) == (5, 310, 310)
    assert att["startend_kernel_ns"] == 150
    assert att["attributed_ns"] == 310 and att["coverage"] == pytest.approx(310 / 630, abs=1e-6)
    by_pid = {(r["pid"], r["name"], r["style"]): (r["kernel_count"], r["inclusive_ns"]) for r in att["by_pid"]}
    assert by_pid == {(1, "fwd", "StartEnd"): (4, 150), (1, "step", "PushPop"): (5, 310)}


def test_startend_ranges_alone_make_attribution_available(tmp_path):
    b = TraceBuilder()
    b.process(1)
    t1 = b.thread(1, 1)
    b.nvtx_start_end(0, 100, "load", tid_g=t1)
    b.launch(10, 20, 200, 230, pid=1, tid=1, name="a")      # 30, inside
    b.launch(150, 160, 300, 370, pid=1, tid=1, name="b")    # 70, outside
    _, j = run(b, tmp_path)
    att = j["nvtx"]["attribution"]
    assert att["available"] is True
    assert [(r["name"], r["style"], r["kernel_count"], r["inclusive_ns"]) for r in att["ranges"]] == [
        ("load", "StartEnd", 1, 30)]
    assert att["startend_kernel_ns"] == 30 and att["attributed_ns"] == 0


# ------------------------------------------------------------------ 3. kernels without globalPid


def _two_process_builder() -> TraceBuilder:
    b = TraceBuilder(flavor="2022.4", kernel_has_global_pid=False)
    b.process(1)
    b.process(2)
    return b


def test_no_global_pid_only_one_process_launches(tmp_path):
    b = _two_process_builder()
    t1, t2 = b.thread(1, 1), b.thread(2, 2)
    b.nvtx_push_pop(0, 1000, "layer", tid_g=t1)
    b.launch(100, 110, 2000, 2050, pid=1, tid=1, name="a")      # corr 1 of process 1
    b.launch(200, 210, 2100, 2200, pid=1, tid=1, name="b")      # corr 2 of process 1
    b.runtime(100, 150, tid_g=t2, name="cudaMalloc_v3020")      # corr 1 of process 2: same ids, no GPU work
    b.runtime(300, 320, tid_g=t2, name="cudaGetDevice_v3020")   # corr 2 of process 2
    rep, j = run(b, tmp_path)
    m = model_of(tmp_path)
    k, api = m.kernels, m.api
    assert (k.launch_idx >= 0).all()
    assert sorted(api.pid[k.launch_idx].tolist()) == [1, 1]
    assert sorted(api.start[k.launch_idx].tolist()) == [100, 200]
    att = j["nvtx"]["attribution"]
    assert att["coverage"] == 1.0 and att["attributed_ns"] == 150 and att["linked_kernel_ns"] == 150


def test_no_global_pid_colliding_ids_are_not_guessed(tmp_path):
    b = _two_process_builder()
    t1, t2 = b.thread(1, 1), b.thread(2, 2)
    for tg, pid, corr, a0, k0, dur in [(t1, 1, 1, 100, 2000, 10), (t1, 1, 2, 200, 2100, 20),
                                       (t2, 2, 1, 150, 3000, 40), (t2, 2, 7, 250, 3100, 80)]:
        b.runtime(a0, a0 + 5, tid_g=tg, name="cudaLaunchKernel_v7000", corr=corr)
        b.kernel(k0, k0 + dur, pid=pid, name=f"k{dur}", corr=corr)
    rep, _ = run(b, tmp_path)
    m = model_of(tmp_path)
    k, api = m.kernels, m.api
    got = {int(d): (int(api.pid[i]), int(api.start[i])) if i >= 0 else None
           for d, i in zip(k.dur.tolist(), k.launch_idx.tolist())}
    # corr 1 was used by both processes: unknown; corr 2 only by process 1, corr 7 only by process 2
    assert got == {10: None, 40: None, 20: (1, 200), 80: (2, 250)}
    msg = [w for w in m.warnings if "no globalPid" in w]
    assert len(msg) == 1, m.warnings
    assert "2 of 4 row(s) were linked" in msg[0] and "2 row(s) stay unattributed" in msg[0]
    # the process of a kernel comes from its linked launch call; unlinked kernels stay unknown (-1)
    assert dict(zip(k.dur.tolist(), k.pid.tolist())) == {10: -1, 40: -1, 20: 1, 80: 2}
    # the appendix names the unlinked kernels' row for what it is, not "pid -1" with an empty name
    md = render_markdown(rep)
    assert "rows with no process id in the export (2 kernels, 0 CUDA API calls)" in md and "pid -1" not in md


# ------------------------------------------------------------------ 4. unterminated NVTX ranges


def test_unterminated_range_ends_at_latest_nvtx_row_including_a_later_mark(tmp_path):
    b = TraceBuilder(flavor="2022.4")
    b.process(1)
    tg = b.thread(1, 1)
    b.nvtx_push_pop(0, None, "open", tid_g=tg)
    b.nvtx_push_pop(10, 50, "closed", tid_g=tg)
    b.nvtx_mark(400, "late_mark", tid_g=tg)                    # 2022.4: the open range ends here (400), 2024.2: 50
    b.launch(20, 30, 1000, 1010, pid=1, tid=1, name="a")      # 10: inside open and closed
    b.launch(200, 210, 1100, 1130, pid=1, tid=1, name="b")    # 30: inside open only under the 2022.4 rule
    b.launch(600, 610, 1200, 1300, pid=1, tid=1, name="c")    # 100: after the mark, in no range
    _, j = run(b, tmp_path)
    nv = j["nvtx"]
    assert nv["unterminated"] == 1 and nv["unterminated_end_ns"] == 400
    assert nv["unterminated_end_rule"].startswith("nsys 2022.4")
    ranges = {r["name"]: r["total_ns"] for r in nv["ranges"]}
    assert ranges == {"open": 400, "closed": 40}
    att = {r["name"]: (r["kernel_count"], r["inclusive_ns"]) for r in nv["attribution"]["ranges"]}
    assert att == {"open": (2, 40), "closed": (1, 10)}
    assert any("unterminated" in w and "400 ns" in w and "nsys 2022.4" in w for w in j["warnings"])


def test_no_unterminated_range_reports_null_end(tmp_path):
    b = TraceBuilder()
    b.process(1)
    tg = b.thread(1, 1)
    b.nvtx_push_pop(0, 100, "r", tid_g=tg)
    b.nvtx_mark(400, "m", tid_g=tg)
    _, j = run(b, tmp_path)
    assert j["nvtx"]["unterminated"] == 0 and j["nvtx"]["unterminated_end_ns"] is None
