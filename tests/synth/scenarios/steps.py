"""Model-step building blocks: layer segments, all-reduce, sampler, scheduler ranges."""

from __future__ import annotations

from typing import Sequence, Tuple

from .names import PREFILL_SEG1, PREFILL_SEG2, SAMPLER, SEG1, SEG2, K
from .rank import Rank
from .sim import US, Sim

__all__ = ["align", "allreduce", "forward", "sample", "sched_step", "scheduler", "segment", "write_trace"]


def allreduce(ranks: Sequence[Rank], comm: int, *, name: str = K.NCCL_AR) -> None:
    """All-reduce across ranks: every rank's kernel ends when the last rank arrives + ``comm``."""
    sim = ranks[0].sim
    starts = []
    for r in ranks:
        r.b.nvtx_push_pop(
            r.cpu, r.cpu + r.api_ns + 3000, "ncclAllReduce", tid_g=r.gtid, domain_id=1, registered=True
        )
        r.cpu += 1500
        a0 = r.cpu
        a1 = a0 + sim.jit(r.api_ns, 0.1)
        ks = max(a0 + sim.jit(r.lat_ns, 0.1), r.gpu_done(r.stream) + r._gap())
        starts.append((r, a0, a1, ks))
    done = max(s[3] for s in starts) + sim.jit(comm, 0.05)
    for r, a0, a1, ks in starts:
        r.b.launch(
            a0,
            a1,
            ks,
            done,
            pid=r.pid,
            tid=r.tid,
            device=r.device,
            stream=r.stream,
            name=name,
            grid=(2, 1, 1),
            block=(512, 1, 1),
        )
        r.gpu[r.stream] = done
        r.cpu = a1 + 1500 + sim.jit(r.cpu_gap, 0.2)
        sim.record(r.key, ks, done, name)


def segment(r: Rank, seg: Sequence[Tuple[str, int, Tuple[int, int, int]]], scale: float = 1.0) -> None:
    for name, dur, grid in seg:
        r.launch(name, int(dur * scale), grid=grid)


def forward(
    ranks: Sequence[Rank],
    layers: int,
    *,
    prefill: bool = False,
    scale: float = 1.0,
    comm: int = 9000,
    layer_ranges: bool = False,
) -> None:
    seg1, seg2 = (PREFILL_SEG1, PREFILL_SEG2) if prefill else (SEG1, SEG2)
    if prefill:
        comm *= 12
    for i in range(layers):
        for r in ranks:
            if layer_ranges:
                r.push(f"model.layers.{i}")
            segment(r, seg1, scale)
        if len(ranks) > 1:
            allreduce(ranks, comm)
        for r in ranks:
            segment(r, seg2, scale)
        if len(ranks) > 1:
            allreduce(ranks, comm)
        if layer_ranges:
            for r in ranks:
                r.pop()


def sample(ranks: Sequence[Rank], scale: float = 1.0) -> None:
    for r in ranks:
        segment(r, SAMPLER, scale)


def align(ranks: Sequence[Rank]) -> None:
    """Ranks start the next step together (the scheduler broadcast)."""
    t = max(r.cpu for r in ranks)
    for r in ranks:
        r.cpu = t + r.sim.uni(0, 8 * US)


def scheduler(sim: Sim, pid: int, name: str = "EngineCore") -> int:
    return sim.b.thread(pid, pid + 7, name)


def sched_step(sim: Sim, sched_g: int, ranks: Sequence[Rank], dur: int = 120 * US) -> None:
    t = min(r.cpu for r in ranks)
    sim.b.nvtx_push_pop(t - dur - 30 * US, t - 30 * US, "schedule", tid_g=sched_g)


def write_trace(sim: Sim, path: str) -> None:
    sim.b.write(path, overwrite=True)
