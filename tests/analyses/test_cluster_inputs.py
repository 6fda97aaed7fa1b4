"""What a cluster reads of each trace, made by the analysis graph (``Report.clock``, ``Report.nccl_series``; not in
report.json): the clock facts and the NCCL kernel series of the planted straggler, hand-computed from
synth/scenarios/cluster.py; a report loaded from report.json has neither, and a cluster summary of it says so; the
host each real export records."""

from __future__ import annotations

import json

import pytest
from conftest import built_scenario, real_trace, require_traces
from synth.scenarios import build_cluster
from synth.scenarios.cluster import BASE_UTC, MS, US

from nsys_llm_explainer.analyses.trace.session import ClockInfo
from nsys_llm_explainer.cluster.summary import summarize
from nsys_llm_explainer.errors import InputError
from nsys_llm_explainer.pipeline import analyze_path
from nsys_llm_explainer.read.connection import open_readonly
from nsys_llm_explainer.read.fetch import fetch_host
from nsys_llm_explainer.read.schema import probe
from nsys_llm_explainer.report import Report

AR = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL"    # the collective name of the scenario's all-reduce kernel


def test_clock_and_nccl_series_of_each_rank(tmp_path) -> None:
    """3 ranks × 4 steps, rank 2 exported normalised to UTC, every other all-reduce on stream 9. Rank r's session
    starts at BASE_UTC + 5r ms; its export timestamps are the common ones shifted by −5r ms (plus its session start
    when normalised); its activity runs from the first step's NVTX push / launch call (t0 = 50 ms) to the last
    step's NVTX pop (last all-reduce end + 8 µs)."""
    facts = build_cluster("cluster_straggler", str(tmp_path), ranks=3, steps=4, normalized=(2,), second_stream=True)
    ar = facts["ar_start_common_ns"]
    ar_end = [max(ar[r][s] for r in range(3)) + 20 * US for s in range(4)]   # all end 20 µs after the last start
    for r, path in enumerate(facts["paths"]):
        rep = analyze_path(path, workers=1)
        utc = BASE_UTC + 5 * r * MS
        shift = -5 * r * MS + (utc if r == 2 else 0)
        assert rep.clock == ClockInfo(utc, r == 2, 0, 50 * MS + shift, ar_end[3] + 8 * US + shift)
        assert [(x.pid, x.device_id, x.name, x.start.tolist(), x.end.tolist(), x.stream.tolist())
                for x in rep.nccl_series] == [(5000 + r, r, AR, [a + shift for a in ar[r]],
                                               [e + shift for e in ar_end], [7, 9, 7, 9])]
        d = rep.to_dict()
        assert "clock" not in d and "nccl_series" not in d
        loaded = Report.from_dict(json.loads(json.dumps(d)))
        assert loaded.clock is None and loaded.nccl_series is None
        with pytest.raises(InputError, match="^a cluster summary needs the trace itself.*loaded from report.json"):
            summarize(loaded, "rank")
        s = summarize(rep, f"rank{r}")
        assert s.clock is rep.clock and s.nccl is rep.nccl_series


def test_no_nccl_kernel_no_series(tmp_path) -> None:

    p = tmp_path / "t.sqlite"
    built_scenario("launch_bound", str(p))
    rep = analyze_path(str(p), workers=1)
    assert rep.nccl_series == ()
    assert rep.clock is not None and rep.clock.normalized is False and rep.clock.shift_ns == 0


@pytest.mark.parametrize(("name", "host"), [
    ("01_llama3_demo", "roger-System-Product-Name"),     # nsys 2024.6
    ("08_pipit_saxpy_mpi_a100", "nid001608"),             # a 2022.2 capture (EXPORT_META_DATA)
    ("05_nsysai_mfu_2gpu_before", "modal"),               # 2026.2
    ("10_abacus_dnn_serving_titanrtx_r1", None),          # a 2020.3 capture: no Hostname row
    ("12_gartangh_keras_gtx1650", None),                  # a 2019.6 capture
])
def test_the_host_a_real_export_records(name, host) -> None:
    """``TARGET_INFO_SYSTEM_ENV``'s ``Hostname`` row, as ``sqlite3`` shows it (docs/CLUSTER.md "Names")."""
    require_traces()
    conn = open_readonly(real_trace(name))
    try:
        assert fetch_host(conn, probe(conn)) == host
    finally:
        conn.close()
