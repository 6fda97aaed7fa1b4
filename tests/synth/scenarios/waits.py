"""Waiting scenarios of the idle model: the host busy in an NVTX range without CUDA calls, and a GPU that
waits on cross-stream events although every kernel was launched well ahead."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from .idle_model import model_facts
from .names import K, Shape
from .rank import Rank
from .sim import MS, US, Sim
from .steps import segment, write_trace

__all__ = ["launcher_waits_io", "nvtx_host_range", "nvtx_load_launch_bound", "queued_dependency"]

_LAYER_KERNELS: List[Shape] = [
    (K.RMS_NORM, 6000, (32, 1, 1)),
    (K.GEMM_QKV, 22000, (132, 1, 1)),
    (K.ACT_MUL, 7000, (32, 1, 1)),
    (K.GEMM_DOWN, 20000, (132, 1, 1)),
]


def nvtx_host_range(path: str, seed: int = 0, flavor: Optional[str] = None) -> Dict[str, Any]:
    """Layer-by-layer weight streaming: 8 steps × 32 layers; per layer the host opens the NVTX range
    ``load_layer_<i>_weights`` and spends ~1 ms in it without any CUDA call (an OSRT ``read`` inside: the
    thread reads the weights itself — its own work, not a wait), then launches 4 kernels (~55 µs). GPU ≈ 5 %
    busy; the ranges hold most of the idle time."""
    sim = Sim(flavor or "2024.2", seed)
    r = Rank(sim, 13601, 0)
    sim.b.gpu(0)
    steps, layers = 8, 32
    ranges: List[Tuple[int, int]] = []
    for _ in range(steps):
        r.push("execute_model")
        for i in range(layers):
            r.push(f"load_layer_{i}_weights")
            t = r.cpu
            sleep = sim.uni(0.9 * MS, 1.1 * MS)
            sim.b.osrt(t + 3 * US, t + 3 * US + sleep, tid_g=r.gtid, name="read")
            r.host(sleep + sim.uni(5 * US, 8 * US))
            ranges.append(r.pop())
            segment(r, _LAYER_KERNELS)
        r.stream_sync()
        r.pop()
        r.host(sim.jit(100 * US, 0.2))
    write_trace(sim, path)
    f = sim.facts(
        "host_range",
        steps=steps,
        layers=layers,
        range_name_pattern="load_layer_<i>_weights",
        range_count=len(ranges),
        range_ns_total=sum(e - s for s, e in ranges),
        kernels_per_layer=len(_LAYER_KERNELS),
    )
    return model_facts(f, sim.b, r.key, "nvtx", "load_layer_N_weights")


_TINY_LAYER: List[Shape] = [
    (K.RMS_NORM, 2500, (8, 1, 1)),
    (K.GEMM_QKV, 3800, (16, 1, 1)),
    (K.ROTARY, 2000, (8, 1, 1)),
    (K.FLASH_SPLITKV, 3900, (1, 32, 4)),
    (K.GEMM_O, 3000, (16, 1, 1)),
    (K.FUSED_ADD_RMS, 2600, (8, 1, 1)),
    (K.GEMM_UP, 4000, (32, 1, 1)),
    (K.ACT_MUL, 2200, (8, 1, 1)),
    (K.GEMM_DOWN, 3600, (16, 1, 1)),
    (K.ELEMENTWISE, 2000, (8, 1, 1)),
] * 3


def nvtx_load_launch_bound(path: str, seed: int = 0, flavor: Optional[str] = None) -> Dict[str, Any]:
    """Layer-by-layer weight loading inside an otherwise launch-bound loop: 6 steps × 24 layers; per layer
    the host spends 0.4–1.4 ms in the NVTX range ``read_layer_<i>_weights`` (file reads, no CUDA call; most
    of these gaps are shorter than 1 ms), then launches 30 tiny kernels (~3 µs each, ~7 µs of launch call per
    kernel) inside ``decode_step``. The launch-bound pattern holds (busy ≈ 8 %, median kernel ≈ 3 µs,
    > 20 k kernels/s), but the named range holds most of the idle: it must be claimed by the NVTX finding
    (all of it, at the idle-cause table's share) and ranked first; the launch-bound finding claims only the
    launch calls and the host CPU between launches."""
    sim = Sim(flavor or "2024.2", seed)
    r = Rank(sim, 13602, 0)
    r.api_ns, r.cpu_gap, r.lat_ns = 7000, 900, 3500
    sim.b.gpu(0)
    steps, layers = 6, 24
    ranges: List[Tuple[int, int]] = []
    for _ in range(steps):
        r.push("decode_step")
        for i in range(layers):
            r.push(f"read_layer_{i}_weights")
            r.host(sim.uni(0.4 * MS, 1.4 * MS))
            ranges.append(r.pop())
            segment(r, [(n, sim.uni(d * 0.85, d * 1.1), g) for n, d, g in _TINY_LAYER])
        r.stream_sync()
        r.pop()
        r.host(sim.jit(50 * US, 0.2))
    write_trace(sim, path)
    f = sim.facts(
        "host_range",
        steps=steps,
        layers=layers,
        range_count=len(ranges),
        range_ns_total=sum(e - s for s, e in ranges),
        kernels_per_layer=len(_TINY_LAYER),
        short_range_count=sum(1 for s, e in ranges if e - s < MS),
    )
    return model_facts(f, sim.b, r.key, "nvtx", "read_layer_N_weights")


def _wait_event(r: Rank, stream: int, event_id: int) -> None:
    """``cudaStreamWaitEvent``: a short API call plus its stream-wait-event SYNCHRONIZATION row."""
    corr, a0, a1 = r.api("cudaStreamWaitEvent_v3020", r.sim.jit(1800, 0.1))
    r.b.sync(a0, a1, pid=r.pid, sync_type=2, device=r.device, stream=stream, corr=corr, event_id=event_id)


def queued_dependency(path: str, seed: int = 0, flavor: Optional[str] = None) -> Dict[str, Any]:
    """MoE layer with a shared-expert side stream: per step 40 ping-pong pairs (GEMM on stream 7, then
    ``fused_moe_kernel`` on stream 13, each waiting on an event recorded after the other). The host
    launches the whole step at once and syncs at the end; every kernel starts 25–40 µs after the kernel it
    depends on (planted dependency gaps), long after its launch call returned. GPU ≈ 60 % busy."""
    sim = Sim(flavor or "2024.2", seed)
    r = Rank(sim, 13701, 0)
    sim.b.gpu(0)
    steps, pairs = 60, 40
    a_stream, b_stream = 7, 13
    dep_gaps: List[int] = []
    for _ in range(steps):
        r.push("execute_model")
        prev_end: Optional[int] = None
        for i in range(pairs):
            name = K.GEMM_UP if i % 2 == 0 else K.GEMM_DOWN
            nb = 0 if prev_end is None else prev_end + sim.uni(25 * US, 40 * US)
            ks, ke = r.launch(name, 50 * US, stream=a_stream, not_before=nb)
            if prev_end is not None:
                dep_gaps.append(ks - prev_end)
            ev, _ = r.event_record(stream=a_stream)
            _wait_event(r, b_stream, ev)
            gap = sim.uni(25 * US, 40 * US)
            ks2, ke2 = r.launch(K.FUSED_MOE, 45 * US, stream=b_stream, grid=(264, 1, 1), not_before=ke + gap)
            dep_gaps.append(ks2 - ke)
            ev2, _ = r.event_record(stream=b_stream)
            _wait_event(r, a_stream, ev2)
            prev_end = ke2
        r.stream_sync(stream=b_stream)
        r.pop()
        r.host(sim.jit(40 * US, 0.2))
    write_trace(sim, path)
    f = sim.facts(
        "gpu_wait",
        steps=steps,
        pairs_per_step=pairs,
        streams=[a_stream, b_stream],
        dependency_gap_count=len(dep_gaps),
        dependency_gap_ns_total=sum(dep_gaps),
        event_wait_count=len(sim.b.rows("sync")) - steps,
    )
    return model_facts(f, sim.b, r.key, "queued", "")


_ITER_KERNELS: List[Shape] = [
    (K.GEMM_QKV, 180_000, (132, 1, 1)),
    (K.GEMM_O, 160_000, (132, 1, 1)),
    (K.GEMM_UP, 200_000, (132, 1, 1)),
    (K.GEMM_DOWN, 190_000, (132, 1, 1)),
]


def launcher_waits_io(path: str, seed: int = 0, flavor: Optional[str] = None, workers: bool = True
                      ) -> Dict[str, Any]:
    """Weight offloading with I/O worker threads: 40 iterations; per iteration the launching thread
    (``pt_main_thread``) opens NVTX range ``iter<i>``, launches 4 GEMMs (~0.73 ms of GPU work), then joins two
    worker threads of its process in ``sem_wait`` for ~3 ms; meanwhile ``d2c_worker`` is in NVTX range ``d2c-<i>``
    for ~90 % of the wait, most of it in ``pread`` calls (file reads), and ``c2d_worker`` is in ``c2d-<i>`` for
    ~50 % of it, in ``write`` calls; ``watchdog`` sits in ``poll`` all the time (it waits too: never named as
    working). After the join ~40 µs of host work, then the range closes. The GPU idles
    ~80 % of the window, most of it while the launcher waits in ``sem_wait`` inside ``iter<i>``: the time is
    charged to ``osrt`` / ``sem_wait`` (not to the range), and the other threads are named with their share.
    ``workers=False``: the same launcher with no worker rows at all (what it waits for is not in the trace)."""
    sim = Sim(flavor or "2024.2", seed)
    r = Rank(sim, 14201, 0, name="pt_main_thread")
    sim.b.gpu(0)
    d2c = sim.b.thread(r.pid, r.pid + 1, "d2c_worker")
    c2d = sim.b.thread(r.pid, r.pid + 2, "c2d_worker")
    watch = sim.b.thread(r.pid, r.pid + 3, "watchdog")
    iters = 40
    waits: List[Tuple[int, int]] = []
    worker_ranges: Dict[str, List[Tuple[int, int]]] = {"d2c": [], "c2d": []}
    worker_io: Dict[str, List[Tuple[int, int]]] = {"pread": [], "write": [], "poll": []}
    for i in range(iters):
        i0 = r.cpu
        r.push(f"iter{i}")
        segment(r, _ITER_KERNELS)
        w0 = r.cpu + 2 * US
        wait = sim.uni(2.9 * MS, 3.1 * MS)
        w1 = w0 + wait
        sim.b.osrt(w0, w1, tid_g=r.gtid, name="sem_wait")
        waits.append((w0, w1))
        if not workers:
            r.cpu = w1 + 3 * US
            r.host(sim.jit(40 * US, 0.1))
            r.pop()
            r.host(sim.jit(20 * US, 0.1))
            sim.b.osrt(i0, r.cpu, tid_g=watch, name="poll")
            worker_io["poll"].append((i0, r.cpu))
            continue
        # the loader: one range over ~90 % of the wait, 4 file reads filling ~80 % of the range
        a0, a1 = w0 + wait // 50, w1 - wait // 20
        sim.b.nvtx_push_pop(a0, a1, f"d2c-{i}", tid_g=d2c)
        worker_ranges["d2c"].append((a0, a1))
        step = (a1 - a0) // 4
        for j in range(4):
            s0 = a0 + j * step + step // 20
            s1 = s0 + step * 8 // 10
            sim.b.osrt(s0, s1, tid_g=d2c, name="pread")
            worker_io["pread"].append((s0, s1))
        # the writer: one range over the first half of the wait, one write inside
        b0, b1 = w0 + wait // 10, w0 + wait * 6 // 10
        sim.b.nvtx_push_pop(b0, b1, f"c2d-{i}", tid_g=c2d)
        worker_ranges["c2d"].append((b0, b1))
        sim.b.osrt(b0 + 5 * US, b1 - 5 * US, tid_g=c2d, name="write")
        worker_io["write"].append((b0 + 5 * US, b1 - 5 * US))
        r.cpu = w1 + 3 * US
        r.host(sim.jit(40 * US, 0.1))
        r.pop()
        r.host(sim.jit(20 * US, 0.1))
        sim.b.osrt(i0, r.cpu, tid_g=watch, name="poll")       # a thread that only waits: never "works"
        worker_io["poll"].append((i0, r.cpu))
    write_trace(sim, path)
    f = sim.facts(
        "host_os",
        iterations=iters,
        launcher_tid=r.pid,
        d2c_tid=r.pid + 1,
        c2d_tid=r.pid + 2,
        watchdog_tid=r.pid + 3,
        waits=waits,
        worker_ranges=worker_ranges,
        worker_io=worker_io,
    )
    return model_facts(f, sim.b, r.key, "osrt", "sem_wait")
