"""Tests of the synthetic trace builder and scenarios (read back with plain sqlite3)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Dict, List

import numpy as np
import pytest
from conftest import require_traces
from synth import SCENARIOS, TraceBuilder, build_scenario, global_pid, global_tid
from synth.builder import short_kernel_name
from synth.scenarios import CAUSES, NEW_CAUSES


def _ro(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)


def _cols(con: sqlite3.Connection, table: str) -> List[str]:
    return [r[1] for r in con.execute(f"PRAGMA table_info({table})")]


def _tables(con: sqlite3.Connection) -> List[str]:
    return [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]


def _small(flavor: str = "2024.2", **kw: object) -> TraceBuilder:
    b = TraceBuilder(flavor, **kw)  # type: ignore[arg-type]
    b.process(1001, "python3")
    g = b.thread(1001, 1001, "python3")
    b.gpu(0)
    b.nvtx_push_pop(900, 9000, "execute_model", tid_g=g)
    b.launch(
        1000, 1500, 2000, 3000, pid=1001, tid=1001, name="void vllm::rms_norm_kernel<c10::BFloat16, 8>(int)"
    )
    b.launch(1600, 2100, 3100, 5000, pid=1001, tid=1001, name="ncclDevKernel_AllReduce_Sum_bf16_RING_LL(x)")
    c = b.runtime(5100, 5200, tid_g=g, name="cudaStreamSynchronize_v3020")
    b.sync(5100, 5200, pid=1001, corr=c)
    b.memcpy(5300, 5400, pid=1001, bytes=4096, copy_kind=2, src_kind=2, dst_kind=0)
    return b


def test_global_ids_encoding() -> None:
    assert global_pid(1001) == (1 << 48) | (1001 << 24)
    g = global_tid(1001, 1005)
    assert (g >> 24) & 0xFFFFFF == 1001
    assert g & 0xFFFFFF == 1005
    assert (g >> 48) & 0xFF == 1
    assert g & 0xFFFFFFFFFF000000 == global_pid(1001)
    b = TraceBuilder()
    assert b.process(7) == global_pid(7)
    assert b.thread(7, 8, "w") == global_tid(7, 8)


def test_short_kernel_name() -> None:
    assert (
        short_kernel_name("void flash::flash_fwd_kernel<T<1, 2>, false>(Flash_fwd_params)")
        == "flash_fwd_kernel"
    )
    assert (
        short_kernel_name(
            "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float>(float*, int)"
        )
        == "cunn_SoftMaxForward"
    )
    assert short_kernel_name("triton_poi_fused_add_mul_0") == "triton_poi_fused_add_mul_0"


@pytest.mark.parametrize("flavor", ["2021.5", "2022.4", "2023.4", "2024.2", "2026.2"])
def test_flavor_tables_and_columns(tmp_path: Path, flavor: str) -> None:
    p = tmp_path / "t.sqlite"
    _small(flavor).write(str(p))
    con = _ro(p)
    tables = set(_tables(con))
    kcols = _cols(con, "CUPTI_ACTIVITY_KIND_KERNEL")
    if flavor in ("2021.5", "2022.4"):
        assert "EXPORT_META_DATA" in tables and "META_DATA_EXPORT" not in tables
        assert "greenContextId" not in kcols
        assert kcols.index("streamId") == kcols.index("contextId") + 1
    else:
        assert {"META_DATA_EXPORT", "META_DATA_CAPTURE"} <= tables
        assert kcols.index("greenContextId") == kcols.index("contextId") + 1
        assert "greenContextId" in _cols(con, "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION")
    assert any(t.startswith("ENUM_") for t in tables) == (flavor != "2021.5")
    assert ("graphId" in kcols) == (flavor == "2026.2")
    assert _cols(con, "CUPTI_ACTIVITY_KIND_RUNTIME") == [
        "start",
        "end",
        "eventClass",
        "globalTid",
        "correlationId",
        "nameId",
        "returnValue",
        "callchainId",
    ]
    meta = "EXPORT_META_DATA" if flavor < "2023" else "META_DATA_EXPORT"
    ver = dict(con.execute(f"SELECT name, value FROM {meta}"))
    assert ver["EXPORT_PRODUCT_VERSION"].startswith(flavor)
    for t in (
        "StringIds",
        "PROCESSES",
        "ThreadNames",
        "TARGET_INFO_GPU",
        "TARGET_INFO_SESSION_START_TIME",
        "ANALYSIS_DETAILS",
        "NVTX_EVENTS",
        "CUPTI_ACTIVITY_KIND_MEMCPY",
    ):
        assert t in tables
    # lazy: no memset rows -> no memset table
    assert "CUPTI_ACTIVITY_KIND_MEMSET" not in tables
    con.close()


def _real_columns(trace: str, table: str) -> List[str]:
    p = require_traces() / trace / "trace.sqlite"
    assert p.exists(), f"real trace missing: {p} (../shared must sit beside the repository)"
    con = _ro(p)
    try:
        return _cols(con, table)
    finally:
        con.close()


@pytest.mark.parametrize(
    "flavor,trace",
    [
        ("2022.4", "10_abacus_dnn_serving_titanrtx_r1"),
        ("2023.4", "14_nvfuser_v100_nvtx_heavy"),
        ("2026.2", "05_nsysai_mfu_2gpu_before"),
    ],
)
def test_columns_match_real_exports(tmp_path: Path, flavor: str, trace: str) -> None:
    b = _small(flavor, lazy=False)
    p = tmp_path / "t.sqlite"
    b.write(str(p))
    con = _ro(p)
    for t in (
        "CUPTI_ACTIVITY_KIND_KERNEL",
        "CUPTI_ACTIVITY_KIND_RUNTIME",
        "CUPTI_ACTIVITY_KIND_MEMCPY",
        "CUPTI_ACTIVITY_KIND_MEMSET",
        "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
        "NVTX_EVENTS",
        "StringIds",
        "PROCESSES",
        "ThreadNames",
        "TARGET_INFO_SESSION_START_TIME",
        "ANALYSIS_DETAILS",
        "TARGET_INFO_CUDA_STREAM",
    ):
        assert _cols(con, t) == _real_columns(trace, t), t
    if flavor != "2026.2":  # the 2026 fixture has no TARGET_INFO_GPU
        assert _cols(con, "TARGET_INFO_GPU") == _real_columns(trace, "TARGET_INFO_GPU")
    if flavor in ("2022.4", "2023.4"):
        assert _cols(con, "CUDA_GRAPH_EVENTS") == _real_columns(trace, "CUDA_GRAPH_EVENTS")
        assert _cols(con, "OSRT_API") == _real_columns(trace, "OSRT_API")
    con.close()


def test_roundtrip_values(tmp_path: Path) -> None:
    p = tmp_path / "t.sqlite"
    _small().write(str(p))
    con = _ro(p)
    rows = con.execute(
        "SELECT k.start, k.end, k.correlationId, s.value, sh.value, r.start, api.value "
        "FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.demangledName "
        "JOIN StringIds sh ON sh.id = k.shortName "
        "JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = k.correlationId "
        "AND (r.globalTid & 0xFFFFFFFFFF000000) = k.globalPid "
        "JOIN StringIds api ON api.id = r.nameId ORDER BY k.start"
    ).fetchall()
    assert rows == [
        (
            2000,
            3000,
            1,
            "void vllm::rms_norm_kernel<c10::BFloat16, 8>(int)",
            "rms_norm_kernel",
            1000,
            "cudaLaunchKernel_v7000",
        ),
        (
            3100,
            5000,
            2,
            "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(x)",
            "ncclDevKernel_AllReduce_Sum_bf16_RING_LL",
            1600,
            "cudaLaunchKernel_v7000",
        ),
    ]
    (corr, st, typ, ev) = con.execute(
        "SELECT correlationId, streamId, syncType, eventId FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"
    ).fetchone()
    assert (corr, st, typ, ev) == (3, 7, 3, 4294967295)
    assert con.execute(
        "SELECT bytes, copyKind, srcKind, dstKind, correlationId FROM CUPTI_ACTIVITY_KIND_MEMCPY"
    ).fetchone() == (4096, 2, 2, 0, 4)
    assert con.execute("SELECT globalPid, pid, name FROM PROCESSES").fetchall() == [
        (global_pid(1001), 1001, "python3")
    ]
    assert con.execute(
        "SELECT s.value, t.globalTid FROM ThreadNames t JOIN StringIds s ON s.id = t.nameId"
    ).fetchall() == [("python3", global_tid(1001, 1001))]
    assert con.execute("SELECT start, end, eventType, text, textId FROM NVTX_EVENTS").fetchall() == [
        (900, 9000, 59, "execute_model", None)
    ]
    assert con.execute("SELECT smCount, memoryBandwidth FROM TARGET_INFO_GPU").fetchone() == (
        132,
        3352000000000,
    )
    assert con.execute("SELECT duration, startTime, stopTime FROM ANALYSIS_DETAILS").fetchone() == (
        9000,
        0,
        9000,
    )
    con.close()


def test_correlation_ids_per_process(tmp_path: Path) -> None:
    b = TraceBuilder()
    assert b.launch(0, 10, 20, 30, pid=1, tid=1) == 1
    assert b.launch(0, 10, 20, 30, pid=2, tid=2) == 1
    assert b.launch(40, 50, 60, 70, pid=1, tid=1) == 2
    assert b.kernel(100, 200, pid=1, corr=10) == 10
    assert b.kernel(300, 400, pid=1) == 11
    g = b.thread(2, 2)
    assert b.runtime(1, 2, tid_g=g) == 2


def test_nvtx_variants(tmp_path: Path) -> None:
    b = TraceBuilder("2023.4")
    g = b.thread(5, 5, "main")
    g2 = b.thread(5, 6, "other")
    b.nvtx_domain(1, "NCCL", tid_g=g)
    b.nvtx_push_pop(10, 20, "ncclAllReduce", tid_g=g, domain_id=1, registered=True)
    b.nvtx_push_pop(30, None, "never closed", tid_g=g)
    rid = b.nvtx_start_end(40, 90, "request 1", tid_g=g, end_tid_g=g2)
    b.nvtx_mark(50, "mark", tid_g=g)
    b.osrt(60, 70, tid_g=g)
    p = tmp_path / "t.sqlite"
    b.write(str(p))
    con = _ro(p)
    got = con.execute(
        "SELECT start, end, eventType, text, s.value, domainId, rangeId, endGlobalTid "
        "FROM NVTX_EVENTS LEFT JOIN StringIds s ON s.id = textId ORDER BY start"
    ).fetchall()
    assert got == [
        (0, None, 75, "NCCL", None, 1, None, None),
        (10, 20, 59, None, "ncclAllReduce", 1, None, None),
        (30, None, 59, "never closed", None, 0, None, None),
        (40, 90, 60, "request 1", None, 0, rid, g2),
        (50, None, 34, "mark", None, 0, None, None),
    ]
    assert con.execute(
        "SELECT eventClass, s.value FROM OSRT_API JOIN StringIds s ON s.id = nameId"
    ).fetchall() == [(27, "pthread_cond_wait")]
    con.close()


def test_graph_launch_modes(tmp_path: Path) -> None:
    for flavor, node in (("2024.2", True), ("2024.2", False), ("2023.4", False), ("2026.2", True)):
        b = TraceBuilder(flavor)
        ks = [(100, 200, "a"), (210, 300, "b"), (310, 400, "c")]
        corr = b.graph_launch(50, 60, pid=9, tid=9, kernels=ks, graph_id=3, graph_exec_id=4, node_mode=node)
        p = tmp_path / f"g_{flavor}_{node}.sqlite"
        b.write(str(p))
        con = _ro(p)
        tables = set(_tables(con))
        if node:
            rows = con.execute("SELECT correlationId, graphNodeId FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchall()
            assert len(rows) == 3 and {r[0] for r in rows} == {corr}
            assert all(r[1] is not None for r in rows)
            node_tab = "CUDA_GRAPH_NODE_EVENTS" if flavor >= "2024" else "CUDA_GRAPH_EVENTS"
            ids = {r[0] for r in con.execute(f"SELECT graphNodeId FROM {node_tab}")}
            assert {r[1] for r in rows} <= ids
            if flavor == "2026.2":
                assert {r[0] for r in con.execute("SELECT graphId FROM CUPTI_ACTIVITY_KIND_KERNEL")} == {3}
        else:
            assert "CUPTI_ACTIVITY_KIND_KERNEL" not in tables
            if flavor >= "2024":
                assert con.execute(
                    "SELECT start, end, correlationId, graphId, graphExecId "
                    "FROM CUPTI_ACTIVITY_KIND_GRAPH_TRACE"
                ).fetchall() == [(100, 400, corr, 3, 4)]
                assert "graphExecId" in _cols(con, "CUDA_GRAPH_EVENTS")
            else:
                assert "CUPTI_ACTIVITY_KIND_GRAPH_TRACE" not in tables
        con.close()


def test_odd_exports(tmp_path: Path) -> None:
    b = TraceBuilder(
        "2022.4", kernel_has_global_pid=False, kernel_table_name="CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL"
    )
    b.kernel(10, 20, pid=3, name="x")
    b.kernel(30, 40, pid=3, name_id=99999)  # dangling StringIds reference
    p = tmp_path / "odd.sqlite"
    b.write(str(p))
    con = _ro(p)
    assert "CUPTI_ACTIVITY_KIND_KERNEL" not in _tables(con)
    cols = _cols(con, "CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL")
    assert "globalPid" not in cols and "demangledName" in cols
    assert con.execute(
        "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL k "
        "LEFT JOIN StringIds s ON s.id = k.demangledName WHERE s.id IS NULL"
    ).fetchone() == (1,)
    con.close()
    with pytest.raises(FileExistsError):
        b.write(str(p))
    b.write(str(p), overwrite=True)


def test_lazy_false_creates_empty_tables(tmp_path: Path) -> None:
    b = TraceBuilder("2024.2", lazy=False)
    p = tmp_path / "e.sqlite"
    b.write(str(p))
    con = _ro(p)
    tables = set(_tables(con))
    for t in (
        "CUPTI_ACTIVITY_KIND_KERNEL",
        "CUPTI_ACTIVITY_KIND_MEMSET",
        "CUPTI_ACTIVITY_KIND_GRAPH_TRACE",
        "CUDA_GRAPH_NODE_EVENTS",
        "OSRT_API",
    ):
        assert t in tables
        assert con.execute(f"SELECT count(*) FROM {t}").fetchone() == (0,)
    assert dict(con.execute("SELECT name, value FROM META_DATA_EXPORT"))["EXPORT_PARAM_LAZY"] == "false"
    con.close()


def test_meta_and_graph_mode_key(tmp_path: Path) -> None:
    b = TraceBuilder("2026.2")
    b.meta("CUDA_GRAPH_TRACE_OPTIONS:MODE", "Graph")
    p = tmp_path / "m.sqlite"
    b.write(str(p))
    con = _ro(p)
    vals = [
        v
        for k, v in con.execute("SELECT name, value FROM META_DATA_CAPTURE")
        if k == "CUDA_GRAPH_TRACE_OPTIONS:MODE"
    ]
    assert vals == ["Graph"]
    con.close()


def test_rows_not_time_sorted(tmp_path: Path) -> None:
    b = TraceBuilder()
    for i in range(200):
        b.launch(i * 100, i * 100 + 10, i * 100 + 20, i * 100 + 50, pid=1, tid=1)
    p = tmp_path / "s.sqlite"
    b.write(str(p))
    con = _ro(p)
    starts = [r[0] for r in con.execute("SELECT start FROM CUPTI_ACTIVITY_KIND_KERNEL")]
    assert starts != sorted(starts) and sorted(starts) == [i * 100 + 20 for i in range(200)]
    con.close()


@pytest.mark.slow   # writes a large trace
def test_bulk_rows(tmp_path: Path) -> None:
    b = TraceBuilder("2023.4")
    n = 450_000  # > one chunk
    start = np.arange(n, dtype=np.int64) * 1000
    corr = np.arange(1, n + 1, dtype=np.int64)
    nid = b.string("void k<1>(int)")
    sid = b.string("k")
    gp = global_pid(77)
    b.add_kernels_bulk(start + 500, start + 900, 0, 7, corr, gp, nid, sid)
    b.add_runtime_bulk(start, start + 300, global_tid(77, 77), corr, b.string("cudaLaunchKernel_v7000"), 0)
    assert b.kernel(n * 1000 + 10, n * 1000 + 20, pid=77) == n + 1
    p = tmp_path / "b.sqlite"
    b.write(str(p))
    con = _ro(p)
    assert con.execute(
        "SELECT count(*), sum(end - start), min(start), max(end) FROM CUPTI_ACTIVITY_KIND_KERNEL"
    ).fetchone() == (n + 1, n * 400 + 10, 500, n * 1000 + 20)
    assert con.execute(
        "SELECT count(*), count(DISTINCT gridId) FROM CUPTI_ACTIVITY_KIND_KERNEL"
    ).fetchone() == (n + 1, n + 1)
    joined = con.execute(
        "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN CUPTI_ACTIVITY_KIND_RUNTIME r "
        "ON r.correlationId = k.correlationId AND (r.globalTid & 0xFFFFFFFFFF000000) = k.globalPid "
        "WHERE k.start - r.start = 500"
    ).fetchone()[0]
    assert joined == n
    assert con.execute(
        "SELECT returnValue, eventClass FROM CUPTI_ACTIVITY_KIND_RUNTIME LIMIT 1"
    ).fetchone() == (0, 0)
    first = [r[0] for r in con.execute("SELECT start FROM CUPTI_ACTIVITY_KIND_KERNEL LIMIT 5")]
    assert first != sorted(first) or first[0] != 500  # chunks are shuffled
    con.close()


def _union_len(iv: List[tuple]) -> int:
    tot, cur_s, cur_e = 0, None, None
    for s, e in sorted(iv):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                tot += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    return tot + (cur_e - cur_s if cur_e is not None else 0)


@pytest.mark.slow   # a sweep over every scenario
@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_scenarios_build_and_match_facts(tmp_path: Path, name: str) -> None:
    p = tmp_path / f"{name}.sqlite"
    facts = build_scenario(name, str(p), seed=1)
    assert facts["scenario"] == name
    assert facts["cause"] in CAUSES
    con = _ro(p)
    tables = set(_tables(con))
    n_k = (
        con.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
        if "CUPTI_ACTIVITY_KIND_KERNEL" in tables
        else 0
    )
    assert n_k == facts["kernel_count"]
    total_rows = sum(con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in tables)
    assert total_rows < 200_000
    # per-device busy = exact union of kernel (+ graph-trace) intervals
    iv: Dict[str, List[tuple]] = {}
    q = ["SELECT (globalPid >> 24) & 16777215, deviceId, start, end FROM CUPTI_ACTIVITY_KIND_KERNEL"]
    if "CUPTI_ACTIVITY_KIND_GRAPH_TRACE" in tables:
        q.append(
            "SELECT (globalPid >> 24) & 16777215, deviceId, start, end FROM CUPTI_ACTIVITY_KIND_GRAPH_TRACE"
        )
    for sql in q:
        if "KERNEL" in sql and "CUPTI_ACTIVITY_KIND_KERNEL" not in tables:
            continue
        for pid, dev, s, e in con.execute(sql):
            iv.setdefault(f"{pid}:{dev}", []).append((s, e))
    assert set(iv) == set(facts["devices"])
    for key, d in facts["devices"].items():
        assert _union_len(iv[key]) == d["busy_ns"]
    # every kernel has its launch row in the same process, and the launch precedes it
    if n_k:
        bad = con.execute(
            "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k LEFT JOIN CUPTI_ACTIVITY_KIND_RUNTIME r "
            "ON r.correlationId = k.correlationId AND (r.globalTid & 0xFFFFFFFFFF000000) = k.globalPid "
            "WHERE r.start IS NULL OR r.start >= k.start"
        ).fetchone()[0]
        assert bad == 0
    con.close()


def test_causes_are_finding_categories() -> None:
    """Every planted cause is a finding category (``none``: nothing planted, a GPU-bound scenario; there is no
    "no bottleneck" finding)."""

    from nsys_llm_explainer.findings.base import CATEGORIES

    assert "none" in CAUSES and "none" not in CATEGORIES
    planted = set(CAUSES) - {"none"}
    assert planted <= set(CATEGORIES), sorted(planted - set(CATEGORIES))
    assert set(NEW_CAUSES) <= set(CATEGORIES)


def test_scenario_determinism(tmp_path: Path) -> None:
    a = build_scenario("launch_bound", str(tmp_path / "a.sqlite"), seed=3)
    b = build_scenario("launch_bound", str(tmp_path / "b.sqlite"), seed=3)
    assert a == b
    assert (tmp_path / "a.sqlite").read_bytes() == (tmp_path / "b.sqlite").read_bytes()


@pytest.mark.slow
def test_scenario_planted_shapes(tmp_path: Path) -> None:
    f = build_scenario("healthy", str(tmp_path / "h.sqlite"))
    assert f["max_gap_ns"] < 2000
    f = build_scenario("dominant_kernel", str(tmp_path / "d.sqlite"))
    assert f["dominant_share"] > 0.6
    f = build_scenario("per_token_sync", str(tmp_path / "s.sqlite"))
    assert f["gpu_idle_inside_sync_ns"] > 0.5 * f["gpu_idle_ns"]
    f = build_scenario("nccl_straggler", str(tmp_path / "n.sqlite"))
    assert f["nccl_kernel_ns_by_pid"]["8001"] > 3 * f["nccl_kernel_ns_by_pid"]["8002"]
    f = build_scenario("overlapping_streams", str(tmp_path / "o.sqlite"))
    assert f["kernel_sum_ns"] > f["busy_union_ns"]
    f = build_scenario("graph_level", str(tmp_path / "g.sqlite"))
    assert f["graph_trace_count"] == f["graph_launches"] and f["kernel_count"] == f["eager_kernel_count"]
    f = build_scenario("host_gap", str(tmp_path / "hg.sqlite"))
    assert f["gpu_idle_inside_host_gap_ns"] > 0.8 * f["gpu_idle_ns"]


@pytest.mark.parametrize("flavor,trace", [("2023.4", "14_nvfuser_v100_nvtx_heavy"),
                                          ("2026.2", "05_nsysai_mfu_2gpu_before")])
def test_the_host_row_as_real_exports_hold_it(tmp_path: Path, flavor: str, trace: str) -> None:
    """``host=``: ``TARGET_INFO_SYSTEM_ENV`` with the real columns and its ``Hostname`` row (nameEnum 619, as in the
    real exports); a 2021.5 flavor and the default (no host) write no such table."""
    for fl, host in ((flavor, "gpu-a17"), ("2021.5", "gpu-a17"), (flavor, None)):
        p = tmp_path / f"{fl}-{host}.sqlite"
        _small(fl, host=host).write(str(p))
        con = _ro(p)
        if host is None or fl == "2021.5":
            assert "TARGET_INFO_SYSTEM_ENV" not in _tables(con)
        else:
            assert _cols(con, "TARGET_INFO_SYSTEM_ENV") == _real_columns(trace, "TARGET_INFO_SYSTEM_ENV")
            assert con.execute("SELECT name, nameEnum, value FROM TARGET_INFO_SYSTEM_ENV").fetchall() == [
                ("Hostname", 619, "gpu-a17")]
        con.close()
