"""CUDA-graph scenarios (node / graph trace mode) and overlapping streams."""

from __future__ import annotations

from typing import Any, Dict, Optional, Sequence, Tuple

from .names import SAMPLER, SEG1, SEG2, K, Shape
from .rank import Rank
from .sim import US, Sim
from .steps import forward, sample, write_trace

__all__ = ["cuda_graph_node", "graph_level", "graph_steps", "overlapping_streams"]


def _replay(r: Rank, body: Sequence[Shape], node_mode: bool) -> int:
    """One ``cudaGraphLaunch`` of ``body``; returns the graph-trace busy time (0 in node mode)."""
    sim = r.sim
    a0 = r.cpu
    a1 = a0 + sim.jit(12 * US, 0.1)
    t = max(a0 + sim.jit(4 * US, 0.1), r.gpu_done() + r._gap())
    ks = []
    for n, d, _g in body:
        dd = sim.jit(d, 0.04)
        ks.append((t, t + dd, n))
        t += dd + sim.uni(400, 900)
    sim.b.graph_launch(
        a0,
        a1,
        pid=r.pid,
        tid=r.tid,
        kernels=ks,
        device=0,
        stream=r.stream,
        graph_id=1,
        graph_exec_id=1,
        node_mode=node_mode,
    )
    busy = 0
    if node_mode:
        for s, e, n in ks:
            sim.record(r.key, s, e, n)
    else:
        sim.record(r.key, ks[0][0], ks[-1][1], None, kernel=False)
        busy = ks[-1][1] - ks[0][0]
    r.gpu[r.stream] = ks[-1][1]
    r.cpu = a1 + 2 * US
    return busy


def graph_steps(path: str, seed: int, flavor: str, node_mode: bool, cause: str) -> Dict[str, Any]:
    sim = Sim(flavor, seed)
    r = Rank(sim, 10001, 0)
    sim.b.gpu(0)
    if not node_mode:
        sim.b.meta("CUDA_GRAPH_TRACE_OPTIONS:MODE", "Graph")
    elif sim.b._flv >= 4:
        sim.b.meta("CUDA_GRAPH_TRACE_OPTIONS:MODE", "Node")
    layers, steps = 16, 40
    # eager prefill
    r.push("execute_model")
    r.push("vllm: prefill step")
    forward([r], layers, prefill=True)
    sample([r])
    r.memcpy_async(256, kind=2, src=2, dst=1)
    r.stream_sync()
    r.pop()
    r.pop()
    eager = sim.kernel_n.get(r.key, 0)
    body = [(n, d, g) for _ in range(layers) for n, d, g in SEG1 + SEG2] + list(SAMPLER)
    graph_busy = 0
    for _ in range(steps):
        r.push("execute_model")
        r.push("vllm: decode step")
        graph_busy += _replay(r, body, node_mode)
        r.memcpy_async(256, kind=2, src=2, dst=1)
        r.stream_sync()
        r.pop()
        r.pop()
        r.host(sim.jit(40 * US))
    write_trace(sim, path)
    return sim.facts(
        cause,
        steps=steps + 1,
        graph_launches=steps,
        eager_kernel_count=eager,
        kernels_per_graph=len(body),
        graph_node_mode=node_mode,
        graph_busy_ns=graph_busy,
    )


def cuda_graph_node(path: str, seed: int = 0, flavor: Optional[str] = None) -> Dict[str, Any]:
    return graph_steps(path, seed, flavor or "2024.2", True, "none")


def graph_level(path: str, seed: int = 0, flavor: Optional[str] = None) -> Dict[str, Any]:
    return graph_steps(path, seed, flavor or "2024.2", False, "graph_trace_mode")


def overlapping_streams(path: str, seed: int = 0, flavor: Optional[str] = None) -> Dict[str, Any]:
    sim = Sim(flavor or "2024.2", seed)
    r = Rank(sim, 11001, 0)
    sim.b.gpu(0)
    steps = 30
    prev: Optional[Tuple[int, int]] = None
    for _ in range(steps):
        r.push("execute_model")
        for _layer in range(8):
            # attention on a side stream overlaps the MLP GEMMs of the previous micro-batch
            r.launch(K.GEMM_UP, 60 * US, stream=7)
            r.launch(K.FLASH, 45 * US, stream=13, grid=(8, 32, 1))
            r.launch(K.GEMM_DOWN, 35 * US, stream=7)
            r.launch(K.ACT_MUL, 8 * US, stream=13)
        ev = r.event_record(stream=7)
        if prev is not None:
            r.event_sync(prev)
        prev = ev
        r.pop()
    r.event_sync(prev)  # type: ignore[arg-type]
    write_trace(sim, path)
    d = next(iter(sim.facts("none")["devices"].values()))
    return sim.facts(
        "none",
        steps=steps,
        streams=[7, 13],
        busy_union_ns=d["busy_ns"],
        kernel_sum_exceeds_busy=d["kernel_sum_ns"] > d["busy_ns"],
    )
