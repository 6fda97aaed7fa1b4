"""Serving-loop scenarios: demo, healthy, launch-bound, per-token sync, warm-up/tail, dominant kernel."""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

from .names import SEG1, SEG2, K
from .rank import Rank
from .sim import MS, US, Sim, overlap, union
from .steps import align, forward, sample, sched_step, scheduler, segment, write_trace

__all__ = ["demo", "dominant_kernel", "healthy", "launch_bound", "per_token_sync", "warmup_tail"]


def demo(path: str, seed: int = 0, flavor: Optional[str] = None) -> Dict[str, Any]:
    sim = Sim(flavor or "2024.2", seed)
    ranks = [Rank(sim, 1001, 0, nccl=True), Rank(sim, 1002, 1, nccl=True)]
    for d in (0, 1):
        sim.b.gpu(d)
    sched = scheduler(sim, 1001)
    layers, decode_steps = 8, 40
    for step in range(decode_steps + 1):
        prefill = step == 0
        align(ranks)
        sched_step(sim, sched, ranks)
        for r in ranks:
            r.push("execute_model")
            r.push("vllm: prefill step" if prefill else "vllm: decode step")
        forward(ranks, layers, prefill=prefill, layer_ranges=True)
        sample(ranks)
        for r in ranks:
            r.memcpy_async(256, kind=2, src=2, dst=1)
            r.stream_sync()
            r.pop()
            r.pop()
            r.host(sim.jit(180 * US, 0.2))
    write_trace(sim, path)
    # ~180 µs of host work after each step's sync leaves the GPU idle with no CUDA call in flight: the
    # realistic per-step CPU overhead of a serving loop. The GPU step (~1 ms) outlasts it and the host launches
    # ahead, so all of it could overlap the next step: a (medium) per-step sync finding, not a host gap.
    return sim.facts(
        "step_sync",
        steps=decode_steps + 1,
        prefill_steps=1,
        decode_steps=decode_steps,
        layers=layers,
        tp=2,
        pids=[1001, 1002],
    )


def healthy(path: str, seed: int = 0, flavor: Optional[str] = None) -> Dict[str, Any]:
    sim = Sim(flavor or "2024.2", seed)
    r = Rank(sim, 2001, 0)
    sim.b.gpu(0)
    sched = scheduler(sim, 2001)
    layers, steps = 16, 30
    prev: Optional[Tuple[int, int]] = None
    for _ in range(steps):
        sched_step(sim, sched, [r], 60 * US)
        r.push("execute_model")
        forward([r], layers, scale=9.0)
        sample([r], scale=4.0)
        ev = r.event_record()
        if prev is not None:
            r.event_sync(prev)
        prev = ev
        r.pop()
        r.host(40 * US)
    r.event_sync(prev)  # type: ignore[arg-type]
    write_trace(sim, path)
    merged = union(sim.busy[r.key])
    gaps = [b[0] - a[1] for a, b in zip(merged, merged[1:])]
    return sim.facts("none", steps=steps, layers=layers, max_gap_ns=max(gaps) if gaps else 0)


def launch_bound(path: str, seed: int = 0, flavor: Optional[str] = None) -> Dict[str, Any]:
    sim = Sim(flavor or "2024.2", seed)
    r = Rank(sim, 3001, 0)
    r.api_ns, r.cpu_gap, r.lat_ns = 7000, 900, 3500
    sim.b.gpu(0)
    layers, steps = 32, 30
    small = [
        (K.RMS_NORM, 2500, (8, 1, 1)),
        (K.GEMM_QKV, 3800, (16, 1, 1)),
        (K.ROTARY, 2000, (8, 1, 1)),
        (K.RESHAPE_CACHE, 2100, (8, 1, 1)),
        (K.FLASH_SPLITKV, 3900, (1, 32, 4)),
        (K.GEMM_O, 3000, (16, 1, 1)),
        (K.TRITON, 2000, (8, 1, 1)),
        (K.FUSED_ADD_RMS, 2600, (8, 1, 1)),
        (K.GEMM_UP, 4000, (32, 1, 1)),
        (K.ACT_MUL, 2200, (8, 1, 1)),
        (K.GEMM_DOWN, 3600, (16, 1, 1)),
        (K.ELEMENTWISE, 2000, (8, 1, 1)),
    ]
    for _ in range(steps):
        r.push("execute_model")
        r.push("vllm: decode step")
        for _layer in range(layers):
            for name, dur, grid in small:
                r.launch(name, sim.uni(dur * 0.85, dur * 1.1), grid=grid)
        segment(r, [(K.LM_HEAD, 9000, (66, 1, 1)), (K.ARGMAX, 3000, (8, 1, 1))])
        r.memcpy_async(128, kind=2, src=2, dst=1)
        r.stream_sync()
        r.pop()
        r.pop()
        r.host(60 * US)
    write_trace(sim, path)
    launches = [x for x in sim.b.rows("runtime") if x["nameId"] == sim.b.string("cudaLaunchKernel_v7000")]
    api_mean = sum(x["end"] - x["start"] for x in launches) / max(1, len(launches))
    return sim.facts(
        "launch_overhead",
        steps=steps,
        layers=layers,
        kernels_per_step=layers * len(small) + 2,
        launch_api_mean_ns=api_mean,
        launch_api_count=len(launches),
    )


def per_token_sync(path: str, seed: int = 0, flavor: Optional[str] = None) -> Dict[str, Any]:
    sim = Sim(flavor or "2024.2", seed)
    r = Rank(sim, 4001, 0)
    sim.b.gpu(0)
    layers, steps = 16, 40
    for _ in range(steps):
        r.push("execute_model")
        r.push("vllm: decode step")
        forward([r], layers)
        sample([r])
        r.memcpy_async(256, kind=2, src=2, dst=1)
        # the host blocks in the sync well past the end of GPU work (waits on an event recorded early
        # on a side stream by the output processor), so the GPU sits idle inside the call
        r.stream_sync(extra=sim.uni(800 * US, 1200 * US))
        r.pop()
        r.pop()
        r.host(sim.jit(25 * US))
    write_trace(sim, path)
    f = sim.facts("sync_stall", steps=steps, layers=layers)
    f["sync_total_ns"] = sum(x["end"] - x["start"] for x in sim.b.rows("sync"))
    f["gpu_idle_inside_sync_ns"] = f["idle_inside_ns"].get("sync", 0)
    return f


def warmup_tail(path: str, seed: int = 0, flavor: Optional[str] = None) -> Dict[str, Any]:
    sim = Sim(flavor or "2024.2", seed)
    r = Rank(sim, 5001, 0)
    sim.b.gpu(0)
    # 1) model load: sparse weight copies + init kernels over ~2.5 s
    r.push("load_model")
    for _ in range(100):
        r.host(sim.jit(24 * MS, 0.2))
        r.memcpy_async(64 << 20, kind=1, src=1, dst=2, gbps=24.0)
        r.launch(K.ELEMENTWISE, 40 * US, grid=(1024, 1, 1))
    r.stream_sync()
    r.pop()
    warmup_end = r.cpu
    # 2) profile run + steady decode
    r.host(5 * MS)
    steady_start = r.cpu
    steps = 40
    for _ in range(steps):
        r.push("execute_model")
        forward([r], 16)
        sample([r])
        r.memcpy_async(256, kind=2, src=2, dst=1)
        r.stream_sync()
        r.pop()
        r.host(sim.jit(30 * US))
    steady_end = r.cpu
    # 3) idle tail: the server waits for requests; a heartbeat kernel every ~300 ms
    tail_start = r.cpu
    for _ in range(6):
        r.host(sim.jit(300 * MS, 0.05))
        r.launch(K.ELEMENTWISE, 3 * US, grid=(1, 1, 1))
        r.stream_sync()
    sched = scheduler(sim, 5001)
    sim.b.osrt(tail_start + 10 * US, r.cpu, tid_g=sched, name="pthread_cond_wait")
    write_trace(sim, path)
    f = sim.facts(
        "capture_window",
        steps=steps,
        warmup_end_ns=warmup_end,
        steady_start_ns=steady_start,
        steady_end_ns=steady_end,
        tail_start_ns=tail_start,
        tail_end_ns=r.cpu,
    )
    merged = union(sim.busy[r.key])
    f["steady_busy_ns"] = overlap(merged, steady_start, steady_end)
    return f


def dominant_kernel(path: str, seed: int = 0, flavor: Optional[str] = None) -> Dict[str, Any]:
    sim = Sim(flavor or "2024.2", seed)
    r = Rank(sim, 6001, 0)
    sim.b.gpu(0)
    layers, steps = 16, 30
    seg1 = [(n, 400_000 if n == K.FLASH_SPLITKV else d * 3, g) for n, d, g in SEG1]
    seg2 = [(n, d * 3, g) for n, d, g in SEG2]
    prev: Optional[Tuple[int, int]] = None
    for _ in range(steps):
        r.push("execute_model")
        for _layer in range(layers):
            segment(r, seg1)
            segment(r, seg2)
        sample([r], 2.0)
        ev = r.event_record()
        if prev is not None:
            r.event_sync(prev)
        prev = ev
        r.pop()
    r.event_sync(prev)  # type: ignore[arg-type]
    write_trace(sim, path)
    tot = sum(sim.by_name.values())
    name, ns = max(sim.by_name.items(), key=lambda kv: kv[1])
    return sim.facts(  # one kernel dominates a GPU-bound loop: the finding is gpu_bound (top kernel named)
        "gpu_bound", steps=steps, dominant_kernel=name, dominant_kernel_ns=ns, dominant_share=ns / tot
    )
