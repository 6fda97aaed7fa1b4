"""Core metrics on small synthetic exports with hand-computed answers (see docs/METRICS.md)."""

from __future__ import annotations

import csv
import json
import re

import pytest
from synth import TraceBuilder

from nsys_llm_explainer.cli import main
from nsys_llm_explainer.pipeline import Options, analyze_path
from nsys_llm_explainer.serialize import report_dict


def report_of(b: TraceBuilder, tmp_path, name="t.sqlite", **opts) -> dict:
    p = tmp_path / name
    b.write(str(p))
    return report_dict(analyze_path(str(p), Options(**opts)))


def by(rows, **kv):
    out = [r for r in rows if all(r.get(k) == v for k, v in kv.items())]
    assert len(out) == 1, (kv, rows)
    return out[0]


@pytest.mark.parametrize("flavor", ["2021.5", "2022.4", "2023.4", "2024.2", "2026.2"])
def test_overlapping_streams_union_and_gaps(tmp_path, flavor):
    b = TraceBuilder(flavor=flavor)
    b.process(10)
    t = b.thread(10, 10)
    b.launch(50, 60, 100, 200, pid=10, tid=10, stream=7, name="A")
    b.launch(60, 70, 150, 300, pid=10, tid=10, stream=13, name="B")
    b.launch(70, 80, 400, 450, pid=10, tid=10, stream=7, name="C")
    b.launch(80, 90, 2000, 3500, pid=10, tid=10, stream=7, name="D")
    del t
    j = report_of(b, tmp_path)
    d = by(j["devices"], device_id=0)
    # union: [100,300) + [400,450) + [2000,3500) = 200 + 50 + 1500, over the capture window [50, 3500)
    # (first API call → last kernel end; docs/MODEL.md: every device is measured over the same window)
    assert d["busy_ns"] == 1750
    assert d["window_start_ns"] == 50 and d["window_end_ns"] == 3500 and d["window_ns"] == 3450
    assert d["idle_ns"] == 3450 - 1750
    assert d["idle_pct"] == pytest.approx(100 * 1700 / 3450, abs=1e-9)
    gaps = d["largest_gaps"]
    assert [(g["start_ns"], g["end_ns"], g["duration_ns"]) for g in gaps] == [(450, 2000, 1550), (300, 400, 100),
                                                                               (50, 100, 50)]
    assert (gaps[0]["kernel_before"], gaps[0]["kernel_after"]) == ("C", "D")
    assert (gaps[1]["kernel_before"], gaps[1]["kernel_after"]) == ("B", "C")
    assert (gaps[2]["kernel_before"], gaps[2]["kernel_after"]) == (None, "A")
    hist = {h["bucket"]: (h["count"], h["total_ns"]) for h in d["gap_histogram"]}
    assert hist["<1 µs"] == (2, 150) and hist["1–5 µs"] == (1, 1550) and hist["≥1 ms"] == (0, 0)
    # kernel sums are not unions: 100 + 150 + 50 + 1500
    assert j["kernels_summary"]["total_kernel_ns"] == 1800


def test_kernel_stats_percentiles_and_zero_duration(tmp_path):
    b = TraceBuilder()
    b.process(1)
    b.thread(1, 1)
    durs = [0, 10, 20, 30, 1000]
    t = 1000
    for d in durs:
        b.launch(t - 50, t - 40, t, t + d, pid=1, tid=1, name="k")
        t += 2000
    j = report_of(b, tmp_path)
    r = by(j["kernels"], name="k", device_id=0)
    assert (r["count"], r["total_ns"], r["min_ns"], r["max_ns"]) == (5, 1060, 0, 1000)
    assert r["avg_ns"] == 212
    assert r["p50_ns"] == 20
    assert r["p90_ns"] == round(30 + 0.6 * 970)  # linear interpolation: pos 3.6
    assert r["pct"] == 100.0


def test_two_processes_colliding_correlation_ids(tmp_path):
    b = TraceBuilder()
    b.process(100)
    b.process(200)
    t1 = b.thread(100, 100)
    t2 = b.thread(200, 200)
    b.nvtx_push_pop(0, 1000, "rank0_step", tid_g=t1)
    b.nvtx_push_pop(0, 1000, "rank1_step", tid_g=t2)
    # both processes use correlation id 1 (ids restart per process)
    c0 = b.launch(100, 110, 200, 300, pid=100, tid=100, device=0, name="k0")
    c1 = b.launch(120, 130, 400, 900, pid=200, tid=200, device=1, name="k1")
    assert c0 == c1  # the same correlation id in both processes
    j = report_of(b, tmp_path)
    att = {r["name"]: r for r in j["nvtx"]["attribution"]["ranges"]}
    assert att["rank0_step"]["inclusive_ns"] == 100 and att["rank0_step"]["kernel_count"] == 1
    assert att["rank1_step"]["inclusive_ns"] == 500 and att["rank1_step"]["kernel_count"] == 1
    assert j["nvtx"]["attribution"]["coverage"] == 1.0
    by_pid = {(r["pid"], r["name"]): r["inclusive_ns"] for r in j["nvtx"]["attribution"]["by_pid"]}
    assert by_pid == {(100, "rank0_step"): 100, (200, "rank1_step"): 500}
    pids = {r["pid"]: r["total_ns"] for r in j["pids"]["by_pid"]}
    assert pids == {100: 100, 200: 500}


def test_nested_nvtx_inclusive_innermost_and_self(tmp_path):
    b = TraceBuilder()
    b.process(1)
    tg = b.thread(1, 1)
    b.nvtx_push_pop(0, 1000, "step", tid_g=tg)
    b.nvtx_push_pop(100, 500, "layer", tid_g=tg)
    b.nvtx_push_pop(200, 300, "layer", tid_g=tg)      # same name nested: counted once
    b.nvtx_push_pop(600, 900, "layer", tid_g=tg)
    b.launch(250, 260, 2000, 2010, pid=1, tid=1, name="a")   # step > layer > layer
    b.launch(550, 560, 2100, 2120, pid=1, tid=1, name="b")   # step only
    b.launch(700, 710, 2200, 2240, pid=1, tid=1, name="c")   # step > layer
    b.launch(1500, 1510, 2300, 2380, pid=1, tid=1, name="d")  # outside any range
    j = report_of(b, tmp_path)
    att = j["nvtx"]["attribution"]
    rows = {r["name"]: r for r in att["ranges"]}
    assert rows["step"]["inclusive_ns"] == 70 and rows["step"]["innermost_ns"] == 20
    assert rows["layer"]["inclusive_ns"] == 50 and rows["layer"]["innermost_ns"] == 50
    assert rows["layer"]["kernel_count"] == 2
    assert att["attributed_ns"] == 70 and att["total_kernel_ns"] == 150
    assert att["coverage"] == pytest.approx(70 / 150, abs=1e-6)
    ranges = {r["name"]: r for r in j["nvtx"]["ranges"]}
    assert ranges["step"]["total_ns"] == 1000 and ranges["step"]["count"] == 1
    assert ranges["layer"]["total_ns"] == 400 + 100 + 300 and ranges["layer"]["count"] == 3
    # self time: step 1000 − 400 − 300 = 300; layer (400 − 100) + 100 + 300 = 700
    assert ranges["step"]["self_ns"] == 300 and ranges["layer"]["self_ns"] == 700
    assert ranges["step"]["pct_self"] == 30.0 and ranges["layer"]["pct_self"] == 70.0
    # outer: layer's total less the [200, 300) nested in the [100, 500) `layer`: 800 − 100; step nests in no `step`
    assert ranges["layer"]["outer_ns"] == 700 and "outer_ns" not in ranges["step"]


def test_unterminated_range_and_domains(tmp_path):
    b = TraceBuilder()
    b.process(1)
    tg = b.thread(1, 1)
    b.nvtx_domain(5, "NCCL", tid_g=tg)
    b.nvtx_push_pop(0, None, "open_forever", tid_g=tg)
    b.nvtx_push_pop(10, 50, "ncclAllReduce", tid_g=tg, domain_id=5, registered=True)
    b.launch(20, 30, 100, 150, pid=1, tid=1, name="k")
    b.launch(5000, 5010, 6000, 6100, pid=1, tid=1, name="k")
    j = report_of(b, tmp_path)
    assert j["nvtx"]["unterminated"] == 1
    ranges = {(r["name"], r["style"]): r for r in j["nvtx"]["ranges"]}
    assert set(ranges) == {("NCCL:ncclAllReduce", "PushPop"), ("open_forever", "PushPop")}
    # as nsys nvtx_sum: the open range ends at the latest NVTX timestamp (50)
    assert ranges[("open_forever", "PushPop")]["total_ns"] == 50
    att = {r["name"]: r for r in j["nvtx"]["attribution"]["ranges"]}
    assert att["open_forever"]["inclusive_ns"] == 50            # only the launch at 20–30 is inside [0, 50]
    assert att["NCCL:ncclAllReduce"]["inclusive_ns"] == 50
    assert any("no end" in w for w in j["warnings"])


def test_sync_classification_and_api_names(tmp_path):
    b = TraceBuilder()
    b.process(1)
    tg = b.thread(1, 1)
    b.runtime(0, 1000, tid_g=tg, name="cudaStreamSynchronize_v3020")
    b.runtime(2000, 2500, tid_g=tg, name="cudaDeviceSynchronize_v3020")
    b.runtime(3000, 3100, tid_g=tg, name="cudaEventQuery_v3020")
    b.runtime(3200, 3300, tid_g=tg, name="cudaStreamWaitEvent_v3020")
    b.runtime(4000, 4700, tid_g=tg, name="cudaMemcpy_v3020")
    b.runtime(5000, 5050, tid_g=tg, name="cudaMemcpyAsync_v3020")
    b.runtime(6000, 6300, tid_g=tg, name="cuCtxSynchronize", event_class=1)
    b.launch(7000, 7010, 7100, 7200, pid=1, tid=1, name="k", api="cudaGraphLaunch_v10000")
    b.osrt(8000, 9000, tid_g=tg, name="pthread_cond_wait")
    j = report_of(b, tmp_path)
    s = j["sync"]
    assert s["total_ns"] == 1000 + 500 + 700 + 300 and s["call_count"] == 4
    assert {r["name"] for r in s["sync_apis"]} == {"cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaMemcpy",
                                                  "cuCtxSynchronize"}
    assert {r["name"] for r in s["nonblocking_apis"]} == {"cudaEventQuery", "cudaStreamWaitEvent"}
    assert by(s["per_pid_totals"], pid=1)["wall_ns"] == 2500
    names = {r["name"]: r for r in j["cuda_api"]["apis"]}
    assert names["cudaGraphLaunch_v10000"]["raw_names"] == ["cudaGraphLaunch_v10000"]   # nsys keeps this suffix
    assert names["cudaMemcpyAsync"]["api_class"] == "other"


def test_launch_storm_per_device_not_pooled(tmp_path):
    """Rates are kernels in the analysis window / its length (the same window for both devices)."""
    b = TraceBuilder()
    b.process(1)
    b.thread(1, 1)
    # device 0: 200 kernels of 2 µs every 5 µs → 200 / 998 µs ≈ 200 k launches/s → storm
    for i in range(200):
        b.launch(i * 5000, i * 5000 + 1000, i * 5000 + 1000, i * 5000 + 3000, pid=1, tid=1, device=0, name="tiny")
    # device 1: 10 kernels of 50 µs every 100 µs → ≈ 10 k launches/s of 50 µs → not a storm
    for i in range(10):
        b.launch(i * 100_000, i * 100_000 + 500, i * 100_000 + 1000, i * 100_000 + 51_000, pid=1, tid=1,
                 device=1, name="big")
    j = report_of(b, tmp_path)
    assert (j["window"]["start_ns"], j["window"]["end_ns"]) == (0, 199 * 5000 + 3000)
    d0 = by(j["launch"]["per_device"], device_id=0)
    d1 = by(j["launch"]["per_device"], device_id=1)
    assert d0["launches"] == 200 and d0["window_ns"] == d1["window_ns"] == 998_000
    assert d0["launches_per_s"] == pytest.approx(200 / 998e-6, rel=1e-9)
    assert d0["launch_storm"] is True and d0["pct_under_5us"] == 100.0
    assert d1["launch_storm"] is False and d1["p50_ns"] == 50_000
    assert j["launch"]["overall"]["launch_storm"] is None
    assert by(j["devices"], device_id=0)["launches_per_s"] == pytest.approx(d0["launches_per_s"])


def test_names_with_markdown_and_html_metacharacters(tmp_path, capsys, monkeypatch):
    evil = "a|b <script>alert(1)</script> & `x`\nsecond line"
    b = TraceBuilder()
    b.process(1)
    tg = b.thread(1, 1)
    b.nvtx_push_pop(0, 100, "range|<b>&\nnext", tid_g=tg)
    b.launch(10, 20, 100, 200, pid=1, tid=1, name=evil)
    p = tmp_path / "evil.sqlite"
    b.write(str(p))
    out = tmp_path / "out"
    monkeypatch.delenv("NSYS_LLM_EXPLAIN_DEBUG", raising=False)
    assert main([str(p), "--out", str(out), "--quiet"]) == 0, capsys.readouterr().err   # in this process
    j = json.loads((out / "report.json").read_text())
    assert j["kernels"][0]["name"] == evil
    md = (out / "report.md").read_text()
    assert "<script>" not in md and "<b>" not in md
    assert "alert(1)" in md
    block: list = []
    for line in md.splitlines() + [""]:
        if line.startswith("|"):
            block.append(len(re.split(r"(?<!\\)\|", line.strip())) - 2)
        elif block:
            assert len(set(block)) == 1, block   # every row of a table has the header's cell count
            block = []
    with open(out / "tables" / "kernels.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert rows[0]["kernel_name"] == evil


def test_kernel_table_without_globalpid_single_process(tmp_path):
    b = TraceBuilder(flavor="2022.4", kernel_has_global_pid=False)
    b.process(7)
    b.thread(7, 7)
    b.launch(0, 10, 20, 120, pid=7, tid=7, name="k")
    j = report_of(b, tmp_path)
    assert by(j["pids"]["by_pid"], pid=7)["total_ns"] == 100
    assert any("globalPid" in n for n in j["trace"]["schema_notes"])


def test_concurrent_kernel_table_name_and_missing_string(tmp_path):
    b = TraceBuilder(flavor="2021.5", kernel_table_name="CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL")
    b.process(7)
    b.thread(7, 7)
    b.launch(0, 10, 20, 120, pid=7, tid=7, name="named")
    b.kernel(200, 260, pid=7, name_id=987654, short_name="shorty")
    b.kernel(300, 330, pid=7, name_id=987655)
    j = report_of(b, tmp_path)
    names = {r["name"]: r["total_ns"] for r in j["kernels"]}
    assert names["named"] == 100
    assert j["trace"]["kernel_table"] == "CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL"
    # demangled name id missing: the short name stands in; with neither, the id is named (docs/MODEL.md)
    assert names["shorty"] == 60 and "[missing StringId 987654]" not in names
    assert names["[missing StringId 987655]"] == 30


def test_ranges_of_different_domains_interleave(tmp_path):
    """Each NVTX domain has its own push/pop stack: an NCCL range may end after the enclosing layer range
    ended; a kernel launched inside both counts for both (as nsys's nvtx_kern_sum does)."""
    b = TraceBuilder()
    b.process(1)
    tg = b.thread(1, 1)
    b.nvtx_domain(3, "NCCL", tid_g=tg)
    b.nvtx_push_pop(0, 1000, "decode step", tid_g=tg)
    b.nvtx_push_pop(100, 500, "layer.7", tid_g=tg)
    b.nvtx_push_pop(400, 520, "ncclAllReduce", tid_g=tg, domain_id=3)  # ends after layer.7 ends
    b.launch(450, 460, 2000, 2300, pid=1, tid=1, name="nccl_kernel")   # inside all three
    b.launch(510, 515, 2400, 2450, pid=1, tid=1, name="after_layer")   # inside step and NCCL only
    j = report_of(b, tmp_path)
    att = {r["name"]: r for r in j["nvtx"]["attribution"]["ranges"]}
    assert att["layer.7"]["inclusive_ns"] == 300 and att["layer.7"]["kernel_count"] == 1
    assert att["NCCL:ncclAllReduce"]["inclusive_ns"] == 350 and att["NCCL:ncclAllReduce"]["innermost_ns"] == 350
    assert att["decode step"]["inclusive_ns"] == 350 and att["decode step"]["innermost_ns"] == 0
    ranges = {r["name"]: r for r in j["nvtx"]["ranges"]}
    assert ranges["decode step"]["self_ns"] == 600 and ranges["layer.7"]["self_ns"] == 400


def test_phase_map_totals(tmp_path):
    b = TraceBuilder()
    b.process(1)
    tg = b.thread(1, 1)
    b.nvtx_push_pop(0, 100, "vllm: prefill step", tid_g=tg)
    b.nvtx_push_pop(200, 300, "vllm: decode step", tid_g=tg)
    b.nvtx_push_pop(210, 250, "model.layers.0", tid_g=tg)
    b.launch(10, 20, 1000, 1400, pid=1, tid=1, name="p")
    b.launch(220, 230, 2000, 2100, pid=1, tid=1, name="d")
    b.launch(400, 410, 3000, 3050, pid=1, tid=1, name="u")
    j = report_of(b, tmp_path, phase_map={"prefill": ["prefill"], "decode": ["decode"]})
    ph = {r["phase"]: (r["kernel_count"], r["kernel_ns"]) for r in j["nvtx"]["attribution"]["phases"]}
    assert ph == {"prefill": (1, 400), "decode": (1, 100), "unmapped": (1, 50)}


def test_unterminated_range_matches_nsys_2022_4(tmp_path):
    """Numbers checked against `nsys stats -r nvtxsum,nvtxkernsum` 2022.4.2 on this exact trace: the open
    range ends at the latest NVTX timestamp (the mark at 70), not at the end of GPU activity."""
    b = TraceBuilder(flavor="2022.4")
    b.process(1)
    tg = b.thread(1, 1)
    b.nvtx_domain(5, "NCCL", tid_g=tg)
    b.nvtx_push_pop(0, None, "open_forever", tid_g=tg)
    b.nvtx_push_pop(10, 50, "ncclAllReduce", tid_g=tg, domain_id=5, registered=True)
    b.nvtx_mark(70, "mark", tid_g=tg)
    b.launch(20, 30, 100, 150, pid=1, tid=1, name="k")
    b.launch(60, 65, 200, 260, pid=1, tid=1, name="k")
    b.launch(5000, 5010, 6000, 6100, pid=1, tid=1, name="k")
    j = report_of(b, tmp_path)
    assert {(r["name"], r["count"], r["total_ns"]) for r in j["nvtx"]["ranges"]} == {
        ("open_forever", 1, 70), ("NCCL:ncclAllReduce", 1, 40)}
    assert {(r["name"], r["kernel_count"], r["inclusive_ns"]) for r in j["nvtx"]["attribution"]["ranges"]} == {
        ("open_forever", 2, 110), ("NCCL:ncclAllReduce", 1, 50)}


def test_memcpy_memset_by_direction_kind_and_bandwidth(tmp_path):
    b = TraceBuilder()
    b.process(1)
    tg = b.thread(1, 1)
    c1 = b.runtime(0, 2000, tid_g=tg, name="cudaMemcpy_v3020")
    b.memcpy(500, 1500, pid=1, bytes=4000, copy_kind=1, src_kind=0, dst_kind=2, corr=c1)      # pageable HtoD
    c2 = b.runtime(3000, 3100, tid_g=tg, name="cudaMemcpyAsync_v3020")
    b.memcpy(3200, 3400, pid=1, bytes=1000, copy_kind=1, src_kind=1, dst_kind=2, corr=c2)     # pinned HtoD
    c3 = b.runtime(4000, 4050, tid_g=tg, name="cudaMemcpyAsync_v3020")
    b.memcpy(4100, 4600, pid=1, bytes=10_000, copy_kind=2, src_kind=2, dst_kind=1, corr=c3)   # DtoH
    c4 = b.runtime(5000, 5010, tid_g=tg, name="cudaMemsetAsync_v3020")
    b.memset(5020, 5120, pid=1, bytes=800, mem_kind=2, corr=c4)
    j = report_of(b, tmp_path)
    m = j["memcpy"]
    h2d = by(m["by_direction"], direction="Host-to-Device")
    assert (h2d["count"], h2d["bytes"], h2d["total_ns"]) == (2, 5000, 1200)
    assert h2d["gb_per_s"] == pytest.approx(5000 / 1200)
    assert by(m["by_kind"], direction="Host-to-Device", src_kind_name="Pageable")["bytes"] == 4000
    assert by(m["by_direction"], direction="Device-to-Host")["gb_per_s"] == pytest.approx(20.0)
    assert by(m["memset"], mem_kind_name="Device")["total_ns"] == 100
    mem = j["memory"]
    assert mem["pageable"]["count"] == 1 and mem["sync_copies"]["count"] == 1
    assert mem["sync_copies"]["host_blocked_ns"] == 2000


def test_idle_split_into_host_caused_and_queued(tmp_path):
    """A gap whose next kernel was already launched (queued behind a dependency) is not the host's doing.
    Window [0,70), busy 25, idle 45: [10,30) queued 20 (k's call ended at 4); [40,65): host outside calls
    [40,50) = host_cpu 10, in the launch call [50,60) = launch 10, queued [60,65) = 5."""
    b = TraceBuilder()
    b.process(1)
    b.thread(1, 1)
    b.launch(0, 1, 0, 10, pid=1, tid=1, name="k")
    b.launch(2, 4, 30, 40, pid=1, tid=1, name="k")
    b.launch(50, 60, 65, 70, pid=1, tid=1, name="k")
    j = report_of(b, tmp_path)
    (d,) = j["idle_causes"]["devices"]
    assert d["idle_ns"] == 45
    assert {(c["kind"], c["detail"]): c["ns"] for c in d["causes"]} == {
        ("queued", ""): 25, ("host_cpu", ""): 10, ("launch", "cudaLaunchKernel"): 10}
    q = next(c for c in d["causes"] if c["kind"] == "queued")
    assert q["gap_count"] == 2 and q["examples"][0] == {"start_ns": 10, "end_ns": 30, "ns": 20}


def test_include_memcpy_in_busy(tmp_path):
    b = TraceBuilder()
    b.process(1)
    tg = b.thread(1, 1)
    b.launch(0, 5, 100, 200, pid=1, tid=1, name="k1")
    c = b.runtime(210, 220, tid_g=tg, name="cudaMemcpyAsync_v3020")
    b.memcpy(250, 350, pid=1, bytes=100, copy_kind=1, src_kind=1, dst_kind=2, corr=c)
    b.launch(300, 310, 400, 500, pid=1, tid=1, name="k2")
    plain = by(report_of(b, tmp_path, name="a.sqlite")["devices"], device_id=0)
    assert (plain["busy_ns"], plain["idle_ns"], plain["window_ns"]) == (200, 300, 500)   # window [0, 500)
    assert (plain["copy_busy_ns"], plain["copy_only_ns"]) == (100, 100)   # the copy overlaps no kernel
    withm = report_of(b, tmp_path, name="b.sqlite", include_memcpy_in_busy=True)
    d = by(withm["devices"], device_id=0)
    assert (d["busy_ns"], d["idle_ns"], d["window_ns"]) == (300, 200, 500)
    assert [(g["kernel_before"], g["kernel_after"]) for g in d["largest_gaps"]] == [
        (None, "k1"), ("k1", "[CUDA memcpy Host-to-Device]"), ("[CUDA memcpy Host-to-Device]", "k2")]
