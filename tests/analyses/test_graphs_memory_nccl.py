"""CUDA graphs, memory traffic / allocation and NCCL analyses on hand-built fixtures."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import built_scenario, nccl_of
from synth import TraceBuilder

from nsys_llm_explainer.analyses.api.graphs import (
    FIX_CMD,
    GraphLaunchPid,
    GraphTraceDevice,
    GraphTraceSummary,
    KernelsPerLaunch,
    LaunchSizeCount,
    analyze_graphs,
)
from nsys_llm_explainer.analyses.comms.nccl import collective_name
from nsys_llm_explainer.analyses.comms.nccl_result import CustomAllReduce
from nsys_llm_explainer.analyses.memory.traffic import AllocApi, AllocTotals, CopyTotals, SyncCopyApi, analyze_memory
from nsys_llm_explainer.pipeline import load_model

US = 1000
PID = 100
T0 = 1_000_000


def _load(b: TraceBuilder, tmp_path: Path, name: str = "t.sqlite"):
    p = tmp_path / name
    b.write(str(p), overwrite=True)
    return load_model(str(p))


# ------------------------------------------------------------------------------------------------ graphs


def _graph_fixture(node_mode: bool) -> TraceBuilder:
    """Two graph launches of 3 kernels (10 + 20 + 30 µs each), plus one eager kernel of 40 µs."""
    b = TraceBuilder("2024.2")
    b.process(PID)
    b.gpu(0)
    b.launch(T0, T0 + 5 * US, T0 + 10 * US, T0 + 50 * US, pid=PID, tid=101, name="eager")
    for i in range(2):
        a = T0 + 100 * US + i * 200 * US
        ks = [
            (a + 10 * US, a + 20 * US, "g1"),
            (a + 20 * US, a + 40 * US, "g2"),
            (a + 40 * US, a + 70 * US, "g3"),
        ]
        b.graph_launch(a, a + 8 * US, pid=PID, tid=101, kernels=ks, node_mode=node_mode)
    return b


def test_graph_node_mode(tmp_path: Path) -> None:
    r = analyze_graphs(_load(_graph_fixture(True), tmp_path))
    assert r.available and r.trace_mode == "node"
    assert r.graph_launch_count == 2 and r.graph_launch_host_ns == 16 * US
    assert r.launches_by_pid == (GraphLaunchPid(pid=PID, count=2, host_ns=16 * US),)
    assert r.graph_kernel_count == 6
    assert r.graph_kernel_ns == 120 * US and r.total_kernel_ns == 160 * US
    assert r.graph_kernel_pct == 75.0
    assert r.kernels_per_launch == KernelsPerLaunch(launches=2, min=3, p50=3.0, mean=3.0, max=3)
    assert r.kernels_per_launch_hist == (LaunchSizeCount(kernels=3, launches=2),)
    assert r.launches_without_kernels == 0
    assert not r.graph_level_hidden and r.warning is None and r.fix is None


def test_graph_level_hidden(tmp_path: Path) -> None:
    b = _graph_fixture(False)
    b.meta("CUDA_GRAPH_TRACE_OPTIONS:MODE", "Graph")
    r = analyze_graphs(_load(b, tmp_path))
    assert r.available and r.trace_mode == "graph"
    assert r.graph_level_hidden
    assert r.graph_kernel_count == 0 and r.graph_kernel_ns == 0 and r.total_kernel_ns == 40 * US
    assert r.kernels_per_launch is None and r.launches_without_kernels == 2
    assert r.to_dict()["kernels_per_launch"] == {}
    assert r.kernels_per_launch_hist == (LaunchSizeCount(kernels=0, launches=2),)
    # one GRAPH_TRACE row per launch, spanning first kernel start → last kernel end (60 µs)
    assert r.graph_trace == GraphTraceSummary(
        count=2, total_ns=120 * US,
        by_device=(GraphTraceDevice(device_id=0, count=2, total_ns=120 * US, union_ns=120 * US),))
    assert r.fix == FIX_CMD == "nsys profile --cuda-graph-trace=node"
    assert "unreliable" in r.warning and FIX_CMD in r.warning


def test_no_graphs(tmp_path: Path) -> None:
    b = TraceBuilder()
    b.process(PID)
    b.launch(T0, T0 + 5, T0 + 10, T0 + 20, pid=PID, tid=101)
    r = analyze_graphs(_load(b, tmp_path))
    assert not r.available and r.trace_mode == "none" and not r.graph_level_hidden


def test_graph_scenarios(tmp_path: Path) -> None:
    node = tmp_path / "node.sqlite"
    f = built_scenario("cuda_graph_node", str(node))
    r = analyze_graphs(load_model(str(node)))
    assert r.trace_mode == "node" and not r.graph_level_hidden
    assert r.graph_launch_count == f["graph_launches"]
    assert r.kernels_per_launch is not None
    assert r.kernels_per_launch.min == r.kernels_per_launch.max == f["kernels_per_graph"]
    lvl = tmp_path / "level.sqlite"
    f = built_scenario("graph_level", str(lvl))
    r = analyze_graphs(load_model(str(lvl)))
    assert r.trace_mode == "graph" and r.graph_level_hidden
    assert r.graph_trace is not None and r.graph_trace.total_ns == f["graph_busy_ns"]


# ------------------------------------------------------------------------------------------------ memory


def _memory_fixture() -> TraceBuilder:
    """Step 1 [T0, T0+1000 µs): sync pageable HtoD 4 MiB (call 100 µs, GPU 80 µs) + cudaMalloc 50 µs.
    Step 2 [T0+1000, T0+2000 µs): async pinned DtoH 1 MiB (call 5 µs, GPU 30 µs).
    Outside steps: cudaFree 20 µs, async DtoD 2 MiB (GPU 10 µs)."""
    b = TraceBuilder()
    b.process(PID)
    b.gpu(0)
    g = b.thread(PID, 101)
    c = b.runtime(T0 + 10 * US, T0 + 110 * US, tid_g=g, name="cudaMemcpy_v3020")
    b.memcpy(T0 + 20 * US, T0 + 100 * US, pid=PID, bytes=4 << 20, copy_kind=1, src_kind=0, dst_kind=2, corr=c)
    b.runtime(T0 + 200 * US, T0 + 250 * US, tid_g=g, name="cudaMalloc_v3020")
    c = b.runtime(T0 + 1100 * US, T0 + 1105 * US, tid_g=g, name="cudaMemcpyAsync_v3020")
    b.memcpy(
        T0 + 1110 * US, T0 + 1140 * US, pid=PID, bytes=1 << 20, copy_kind=2, src_kind=2, dst_kind=1, corr=c
    )
    b.runtime(T0 + 2100 * US, T0 + 2120 * US, tid_g=g, name="cudaFree_v3020")
    c = b.runtime(T0 + 2200 * US, T0 + 2202 * US, tid_g=g, name="cudaMemcpyAsync_v3020")
    b.memcpy(
        T0 + 2210 * US, T0 + 2220 * US, pid=PID, bytes=2 << 20, copy_kind=8, src_kind=2, dst_kind=2, corr=c
    )
    return b


def test_memory(tmp_path: Path) -> None:
    m = _load(_memory_fixture(), tmp_path)
    steps = (
        np.array([T0 + 1000 * US, T0]),
        np.array([T0 + 2000 * US, T0 + 1000 * US]),
    )  # unsorted on purpose
    r = analyze_memory(m, steps)
    assert r.available
    assert (r.copy_count, r.copy_bytes, r.copy_ns) == (3, 7 << 20, 120 * US)
    assert [(x.direction, x.count, x.bytes, x.total_ns) for x in r.by_direction] == [
        ("Host-to-Device", 1, 4 << 20, 80 * US),
        ("Device-to-Host", 1, 1 << 20, 30 * US),
        ("Device-to-Device", 1, 2 << 20, 10 * US),
    ]
    k0 = r.by_kind[0]
    assert (k0.src_kind_name, k0.dst_kind_name, k0.bytes) == ("Pageable", "Device", 4 << 20)
    assert r.host_copies == CopyTotals(count=2, bytes=5 << 20, total_ns=110 * US)
    assert r.pageable is not None and (r.pageable.count, r.pageable.bytes, r.pageable.total_ns) == (1, 4 << 20, 80 * US)
    sc = r.sync_copies
    assert sc is not None
    assert (sc.count, sc.calls, sc.host_blocked_ns, sc.bytes, sc.pageable_count) == (
        1,
        1,
        100 * US,
        4 << 20,
        1,
    )
    assert sc.by_api == (SyncCopyApi(name="cudaMemcpy", calls=1, host_blocked_ns=100 * US),)
    ps = r.per_step
    assert ps is not None
    assert ps.step_count == 2 and ps.copies_in_steps == 2
    assert ps.copies_per_step_median == 1.0 and ps.copies_per_step_mean == 1.0
    assert ps.bytes_per_step_median == ps.bytes_per_step_mean == (5 << 20) // 2
    assert ps.copy_ns_per_step_mean == 55 * US
    assert (ps.host_copies_in_steps, ps.pageable_in_steps, ps.sync_copies_in_steps) == (2, 1, 1)
    assert r.alloc == AllocTotals(count=1, total_ns=50 * US, in_steps=1, in_steps_ns=50 * US)
    assert r.free == AllocTotals(count=1, total_ns=20 * US, in_steps=0, in_steps_ns=0)
    assert r.alloc_free_by_api == (
        AllocApi(name="cudaMalloc", api_class="alloc", count=1, total_ns=50 * US, in_steps=1),
        AllocApi(name="cudaFree", api_class="free", count=1, total_ns=20 * US, in_steps=0),
    )
    assert r.to_dict()["alloc_free_by_api"][0] == {"name": "cudaMalloc", "class": "alloc", "count": 1,
                                                   "total_ns": 50 * US, "in_steps": 1}
    # without step bounds: no per-step numbers, "in_steps" unknown
    r2 = analyze_memory(m)
    assert r2.per_step is None and r2.alloc is not None and r2.alloc.in_steps is None


def test_memory_unavailable(tmp_path: Path) -> None:
    b = TraceBuilder()
    b.process(PID)
    b.launch(T0, T0 + 5, T0 + 10, T0 + 20, pid=PID, tid=101)
    r = analyze_memory(_load(b, tmp_path))
    assert not r.available and r.reason


def test_memory_scenarios(tmp_path: Path) -> None:
    p = tmp_path / "pageable.sqlite"
    f = built_scenario("pageable_h2d", str(p))
    r = analyze_memory(load_model(str(p)))
    assert r.pageable is not None
    htod = [x for x in r.pageable.by_direction if x.copy_kind == 1][0]
    assert (htod.count, htod.bytes, htod.total_ns) == (
        f["h2d_count"],
        f["h2d_bytes_total"],
        f["h2d_ns_total"],
    )
    assert r.sync_copies is not None and r.sync_copies.count == f["h2d_count"]
    p = tmp_path / "alloc.sqlite"
    f = built_scenario("alloc_in_loop", str(p))
    r = analyze_memory(load_model(str(p)))
    assert r.alloc is not None and r.free is not None
    assert r.alloc.count + r.free.count == f["alloc_call_count"]
    assert r.alloc.total_ns + r.free.total_ns == f["alloc_api_total_ns"]


# ------------------------------------------------------------------------------------------------ NCCL

AR = "ncclDevKernel_AllReduce_Sum_f16_RING_LL(ncclDevKernelArgsStorage<4096>)"


def _nccl_fixture(n: int = 4, odd_stream: int = 7, late_end: int = 0) -> TraceBuilder:
    """Ranks (pid 100, GPU 0) and (pid 101, GPU 1). Per step: a 500 µs GEMM on rank 0 and 800 µs on
    rank 1, then an all-reduce: rank 0 starts at +500 µs and spins until rank 1 arrives at +800 µs; both
    end at +900 µs (rank 0 kernel 400 µs, rank 1 kernel 100 µs). Rank 1 also runs a 7 µs custom
    all-reduce kernel. ``odd_stream``: the stream of the odd steps' all-reduces (7 = all on one stream);
    ``late_end``: rank 1's all-reduces end this much later than rank 0's."""
    b = TraceBuilder()
    for pid, dev in ((100, 0), (101, 1)):
        b.process(pid)
        b.gpu(dev)
    for i in range(n):
        t = T0 + i * 1000 * US
        for pid, dev, late in ((100, 0, 0), (101, 1, 300 * US)):
            b.launch(
                t - 10 * US, t - 5 * US, t, t + 500 * US + late, pid=pid, tid=pid + 1, device=dev, name="gemm"
            )
            b.launch(
                t - 4 * US,
                t - 2 * US,
                t + 500 * US + late,
                t + 900 * US + (late_end if pid == 101 else 0),
                pid=pid,
                tid=pid + 1,
                device=dev,
                stream=odd_stream if i % 2 else 7,
                name=AR,
            )
    b.launch(
        T0 + 950 * US,
        T0 + 951 * US,
        T0 + 950 * US,
        T0 + 957 * US,
        pid=101,
        tid=102,
        device=1,
        name="void vllm::cross_device_reduce_1stage<half, 2>(...)",
    )
    return b


def test_nccl_straggler(tmp_path: Path) -> None:
    r = nccl_of(_load(_nccl_fixture(4), tmp_path))
    assert r.available
    assert r.nccl_kernel_count == 8 and r.nccl_total_ns == 4 * 500 * US
    assert [(c.name, c.count, c.total_ns) for c in r.by_name] == [
        ("ncclDevKernel_AllReduce_Sum_f16_RING_LL", 8, 2000 * US)]
    assert r.custom_allreduce == CustomAllReduce(count=1, total_ns=7 * US, names=(
        "void vllm::cross_device_reduce_1stage<half, 2>(...)",))
    d0, d1 = r.per_device
    assert (d0.device_id, d0.count, d0.total_ns, d0.kernel_ns, d0.union_ns) == (
        0,
        4,
        1600 * US,
        3600 * US,
        1600 * US,
    )
    assert d0.pct_of_kernel_ns == pytest.approx(100 * 4 / 9)
    assert (d1.device_id, d1.total_ns, d1.kernel_ns) == (1, 400 * US, 3600 * US + 7 * US)
    assert [p.pid for p in r.per_pid] == [100, 101]
    assert r.matched_collectives == 4 and r.unmatched_kernels == 0
    r0, r1 = r.ranks
    assert (r0.pid, r0.device_id, r0.p50_ns, r0.mean_ns, r0.mean_start_skew_ns, r0.last_arrival_count) == (
        100, 0, 400 * US, 400 * US, 0, 0)
    assert (r1.pid, r1.device_id, r1.p50_ns, r1.mean_ns, r1.mean_start_skew_ns, r1.last_arrival_count) == (
        101, 1, 100 * US, 100 * US, 300 * US, 4)
    assert (r0.wait_ns_total, r0.wait_caused_ns, r1.wait_ns_total, r1.wait_caused_ns) == (1200 * US, 0, 0, 1200 * US)
    # 4 matched collectives: fewer than the rule's 5 (analyses/comms/arrival.MIN_MATCHED, the cluster's too)
    assert r.straggler is None
    assert r.straggler_reason == (
        "pid 101 / GPU 1 started last in 100% of collectives, its late arrivals causing 100% of the 1.200 ms of "
        "waiting, but it took part in 4 matched collective(s) only (vs ≥ 5): too few to name a late rank")
    # 5 steps: rank 1 last at all 5, causing rank 0's 5 × 300 µs = 1.5 ms, all the waiting: the verdict
    v = nccl_of(_load(_nccl_fixture(5), tmp_path, "five.sqlite")).straggler
    assert v is not None
    assert (v.waiting_pid, v.waiting_device_id, v.late_pid, v.late_device_id) == (100, 0, 101, 1)
    assert v.waiting_rank == "pid 100 / GPU 0" and v.late_rank == "pid 101 / GPU 1"
    assert (v.wait_ns_total, v.wait_caused_share, v.last_arrivals, v.matched_collectives) == (1500 * US, 1.0, 5, 5)
    assert v.late_share == 1.0 and v.confidence == "high"


def test_nccl_no_verdict_when_the_matching_may_mix_communicators(tmp_path: Path) -> None:
    """The straggler fixture, but (a) every other all-reduce on a second stream (a second communicator), or
    (b) rank 1's kernels ending 250 µs after rank 0's (more than half the 300 µs wait: not one collective):
    the waits are measured as before, no verdict is given, and the reason says why. (c) ending 100 µs later
    (within half the wait) keeps the verdict (5 steps: the rule needs 5 matched collectives)."""
    split = nccl_of(_load(_nccl_fixture(4, odd_stream=9), tmp_path, "split.sqlite"))
    assert split.straggler is None and split.wait_ns_total == 4 * 300 * US
    assert "2 (rank, collective) pair(s) run on several CUDA streams" in split.straggler_reason
    apart = nccl_of(_load(_nccl_fixture(4, late_end=250 * US), tmp_path, "apart.sqlite"))
    assert apart.straggler is None and apart.wait_ns_total == 4 * 300 * US
    assert "do not end together (median end spread 250,000 ns vs median wait 300,000 ns)" in apart.straggler_reason
    close = nccl_of(_load(_nccl_fixture(5, late_end=100 * US), tmp_path, "close.sqlite"))
    assert close.straggler is not None and close.straggler.late_rank == "pid 101 / GPU 1"


def test_nccl_balanced_and_unmatched(tmp_path: Path) -> None:
    b = TraceBuilder()
    for pid in (100, 101):
        b.process(pid)
    for i in range(3):
        t = T0 + i * 1000 * US
        for pid, dev in ((100, 0), (101, 1)):
            b.launch(t - 4 * US, t - 2 * US, t, t + 100 * US, pid=pid, tid=pid + 1, device=dev, name=AR)
    b.launch(
        T0 + 5000 * US, T0 + 5001 * US, T0 + 5002 * US, T0 + 5100 * US, pid=100, tid=101, device=0, name=AR
    )
    r = nccl_of(_load(b, tmp_path))
    assert r.matched_collectives == 3 and r.unmatched_kernels == 1 and r.wait_ns_total == 0
    assert r.straggler is None and r.straggler_reason


def test_nccl_two_ranks_no_common_collective(tmp_path: Path) -> None:
    """Two (pid, GPU) ranks, 3 steps: rank (100, 0) runs an all-reduce, rank (101, 1) an all-gather, both 100 µs: no
    collective name is on both ranks, so nothing is matched (6 kernels unmatched) and there is no straggler, for that
    reason (not the single-rank one)."""
    ag = "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096>)"
    b = TraceBuilder()
    for pid, dev in ((100, 0), (101, 1)):
        b.process(pid)
        b.gpu(dev)
    for i in range(3):
        t = T0 + i * 1000 * US
        for pid, dev, name in ((100, 0, AR), (101, 1, ag)):
            b.launch(t - 4 * US, t - 2 * US, t, t + 100 * US, pid=pid, tid=pid + 1, device=dev, name=name)
    r = nccl_of(_load(b, tmp_path))
    assert [(x.rank, x.nccl_count, x.matched) for x in r.ranks] == [("pid 100 / GPU 0", 3, None),
                                                                     ("pid 101 / GPU 1", 3, None)]
    assert (r.matched_collectives, r.unmatched_kernels, r.straggler) == (0, 6, None)
    assert r.straggler_reason == "no collective could be matched across ranks"


def test_nccl_none(tmp_path: Path) -> None:
    b = TraceBuilder()
    b.process(PID)
    b.launch(T0, T0 + 5, T0 + 10, T0 + 20, pid=PID, tid=101, name="allreduce_fusion_kernel")
    r = nccl_of(_load(b, tmp_path))
    assert not r.available and r.custom_allreduce is not None and r.custom_allreduce.count == 1


def test_nccl_scenario(tmp_path: Path) -> None:
    p = tmp_path / "nccl.sqlite"
    f = built_scenario("nccl_straggler", str(p))
    r = nccl_of(load_model(str(p)))
    assert {str(x.pid): x.total_ns for x in r.per_pid} == f["nccl_kernel_ns_by_pid"]
    assert r.straggler is not None
    assert r.straggler.late_pid == f["straggler_pid"] and r.straggler.waiting_pid == f["waiting_pid"]


def test_collective_name() -> None:
    assert collective_name(AR) == "ncclDevKernel_AllReduce_Sum_f16_RING_LL"
    assert collective_name("void ncclKernel_AllGather_RING(ncclWorkElem)") == "ncclKernel_AllGather_RING"


# ---------------------------------------------------------------------------------------------------------
# shared definitions these analyses use: one percentile (stats), one union (intervals)


def test_stats_median_and_percentile() -> None:
    from nsys_llm_explainer.analyses.common.stats import median, percentile

    assert median(np.array([4, 1, 3, 2])) == 2.5                 # mean of the two middle values
    assert median(np.array([7, 1, 3])) == 3.0
    assert percentile(np.array([50, 10, 40, 20, 30]), 90) == 46.0  # rank 4 × 0.9 = 3.6 → 40 + 0.6 × 10
    assert percentile(np.array([5]), 99) == 5.0
    assert median(np.array([], np.int64)) == 0.0
    assert median(np.array([1, 2, 4, 9])) == float(np.median([1, 2, 4, 9])) == 3.0


def test_union_lean_matches_union() -> None:
    from nsys_llm_explainer.model import intervals as iv

    s = np.array([0, 5, 10, 20, 22], np.int64)
    e = np.array([10, 8, 12, 25, 30], np.int64)          # [0,10) and [10,12) touch: one block
    u = iv.union_lean(s, e)
    assert u.start.tolist() == [0, 20] and u.end.tolist() == [12, 30] and u.length == 22
    full = iv.union(s, e)
    assert full.start.tolist() == u.start.tolist() and full.end.tolist() == u.end.tolist()
    assert u.first_row.shape[0] == 0 and u.last_row.shape[0] == 0
    # [5,21) ∩ blocks = [5,12) + [20,21) = 8; [11,40) ∩ blocks = [11,12) + [20,30) = 11
    assert iv.overlap_length(u, np.array([5, 11]), np.array([21, 40])).tolist() == [8, 11]
    assert len(iv.union_lean(np.empty(0, np.int64), np.empty(0, np.int64))) == 0


def test_copy_rows_sum_bytes_per_kind_with_many_distinct_memory_kinds():
    """Bytes per (copy kind, source kind, destination kind) row with as many distinct kinds as rows (a hostile
    export): one pass over the rows, checked against a plain Python sum per key."""
    from collections import Counter

    from nsys_llm_explainer.analyses.memory.memcpy import MemcpyKindRow, _stats_rows

    rng = np.random.default_rng(7)
    n = 5_000
    keys = {"copy_kind": rng.integers(0, 3, n), "src_kind": rng.integers(0, n, n), "dst_kind": rng.integers(0, 2, n)}
    dur, nbytes = rng.integers(1, 10**6, n), rng.integers(1, 1 << 40, n)
    rows = _stats_rows(MemcpyKindRow, keys, dur, nbytes, direction=("copy_kind", str),
                       src_kind_name=("src_kind", str), dst_kind_name=("dst_kind", str))
    want: Counter = Counter()
    for c, s, d, b in zip(*(keys[k].tolist() for k in keys), nbytes.tolist()):
        want[(c, s, d)] += b
    assert {(r.copy_kind, r.src_kind, r.dst_kind): r.bytes for r in rows} == dict(want)
    assert len(rows) == len(want) > 3_000
