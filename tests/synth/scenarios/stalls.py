"""Host-side stall scenarios: pageable H2D copies, NCCL straggler, allocation in the loop, host gaps."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from .names import K
from .rank import Rank
from .sim import US, Sim
from .steps import align, forward, sample, write_trace

__all__ = ["alloc_in_loop", "host_gap", "nccl_straggler", "pageable_h2d"]


def pageable_h2d(path: str, seed: int = 0, flavor: Optional[str] = None) -> Dict[str, Any]:
    sim = Sim(flavor or "2024.2", seed)
    r = Rank(sim, 7001, 0)
    sim.b.gpu(0)
    steps = 30
    nbytes = 24 << 20
    for _ in range(steps):
        r.push("execute_model")
        r.push("prepare_inputs")
        r.memcpy_sync(nbytes, kind=1, src=0, dst=2, gbps=6.0)
        r.pop()
        forward([r], 16)
        sample([r])
        r.memcpy_async(256, kind=2, src=2, dst=1)
        r.stream_sync()
        r.pop()
        r.host(sim.jit(40 * US))
    write_trace(sim, path)
    cp = [x for x in sim.b.rows("memcpy") if x["copyKind"] == 1]
    f = sim.facts(
        "memcpy",
        steps=steps,
        h2d_count=len(cp),
        h2d_bytes_total=sum(x["bytes"] for x in cp),
        h2d_ns_total=sum(x["end"] - x["start"] for x in cp),
        h2d_src_kind=0,
    )
    f["gpu_idle_inside_memcpy_ns"] = f["idle_inside_ns"].get("memcpy_call", 0)
    return f


def nccl_straggler(path: str, seed: int = 0, flavor: Optional[str] = None) -> Dict[str, Any]:
    sim = Sim(flavor or "2024.2", seed)
    ranks = [Rank(sim, 8001, 0, nccl=True), Rank(sim, 8002, 1, nccl=True)]
    ranks[1].slow = 1.9
    for d in (0, 1):
        sim.b.gpu(d)
    layers, steps, comm = 16, 25, 9000
    for _ in range(steps):
        align(ranks)
        for r in ranks:
            r.push("execute_model")
        forward(ranks, layers, comm=comm)
        sample(ranks)
        for r in ranks:
            r.memcpy_async(256, kind=2, src=2, dst=1)
            r.stream_sync()
            r.pop()
            r.host(40 * US)
    write_trace(sim, path)
    nccl_id = sim.b.string(K.NCCL_AR)
    per: Dict[str, int] = {}
    count = 0
    for x in sim.b.rows("kernel"):
        if x["demangledName"] == nccl_id:
            key = str((x["globalPid"] >> 24) & 0xFFFFFF)
            per[key] = per.get(key, 0) + x["end"] - x["start"]
            count += 1
    return sim.facts(
        "nccl_wait",
        steps=steps,
        nccl_kernel_ns_by_pid=per,
        nccl_calls_per_rank=count // 2,
        straggler_pid=8002,
        waiting_pid=8001,
        comm_ns_nominal=comm,
    )


def alloc_in_loop(path: str, seed: int = 0, flavor: Optional[str] = None) -> Dict[str, Any]:
    sim = Sim(flavor or "2024.2", seed)
    r = Rank(sim, 9001, 0)
    sim.b.gpu(0)
    steps = 30
    for _ in range(steps):
        r.push("execute_model")
        forward([r], 8)
        # cudaFree synchronizes the device, then a fresh cudaMalloc for the next activations
        a0 = r.cpu
        a1 = max(a0 + 20 * US, r.gpu_done()) + sim.uni(300 * US, 900 * US)
        r.b.runtime(a0, a1, tid_g=r.gtid, name="cudaFree_v2020")
        sim.window("alloc", r.key, a0, a1)
        r.cpu = a1 + 2 * US
        _, m0, m1 = r.api("cudaMalloc_v3020", sim.uni(500 * US, 1500 * US))
        sim.window("alloc", r.key, m0, m1)
        forward([r], 8)
        sample([r])
        r.memcpy_async(256, kind=2, src=2, dst=1)
        r.stream_sync()
        r.pop()
        r.host(30 * US)
    write_trace(sim, path)
    names = {sim.b.string("cudaFree_v2020"), sim.b.string("cudaMalloc_v3020")}
    calls = [x for x in sim.b.rows("runtime") if x["nameId"] in names]
    f = sim.facts(
        "allocation",
        steps=steps,
        alloc_call_count=len(calls),
        alloc_api_total_ns=sum(x["end"] - x["start"] for x in calls),
    )
    f["gpu_idle_inside_alloc_ns"] = f["idle_inside_ns"].get("alloc", 0)
    return f


def host_gap(path: str, seed: int = 0, flavor: Optional[str] = None) -> Dict[str, Any]:
    sim = Sim(flavor or "2024.2", seed)
    r = Rank(sim, 12001, 0)
    sim.b.gpu(0)
    steps = 40
    gaps: List[Tuple[int, int]] = []
    for _ in range(steps):
        r.push("execute_model")
        forward([r], 16)
        sample([r])
        r.memcpy_async(256, kind=2, src=2, dst=1)
        r.stream_sync()
        r.pop()
        g0 = r.cpu
        r.push("vllm: schedule + prepare_inputs (python)")
        r.host(sim.uni(1800 * US, 2300 * US))
        r.pop()
        gaps.append((g0, r.cpu))
        sim.window("host_gap", r.key, g0, r.cpu)
    write_trace(sim, path)
    f = sim.facts(
        "host_gap", steps=steps, host_gap_count=len(gaps), host_gap_total_ns=sum(b - a for a, b in gaps)
    )
    f["gpu_idle_inside_host_gap_ns"] = f["idle_inside_ns"].get("host_gap", 0)
    return f
