"""Copy scenarios of the idle model: a host blocked in pageable ``cudaMemcpyAsync`` calls, and kernel-idle
time filled by asynchronous pinned HtoD and DtoD copies."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from .idle_model import model_facts
from .names import K
from .rank import Rank
from .sim import MS, US, Sim
from .steps import forward, sample, write_trace

__all__ = ["async_copies", "pageable_async_copy"]


def _pageable_copy(r: Rank, nbytes: int, staging: int, gbps: float) -> Tuple[int, int, int, int]:
    """``cudaMemcpyAsync`` from pageable host memory: the call stages the data on the host for
    ``staging`` ns, then the DMA copy runs (``nbytes / gbps``) and the call returns shortly after it.
    Returns (call start, call end, copy start, copy end)."""
    sim = r.sim
    a0 = r.cpu
    c0 = max(a0 + staging, r.gpu_done(r.stream) + r._gap())
    c1 = c0 + int(nbytes / gbps)
    a1 = c1 + sim.jit(25 * US, 0.1)
    corr = r.b.runtime(a0, a1, tid_g=r.gtid, name="cudaMemcpyAsync_v3020")
    r.b.memcpy(
        c0,
        c1,
        pid=r.pid,
        bytes=nbytes,
        copy_kind=1,
        src_kind=0,
        dst_kind=2,
        device=r.device,
        stream=r.stream,
        corr=corr,
    )
    r.gpu[r.stream] = c1
    r.cpu = a1 + sim.jit(1500, 0.2)
    return a0, a1, c0, c1


def pageable_async_copy(path: str, seed: int = 0, flavor: Optional[str] = None) -> Dict[str, Any]:
    """Each step the host blocks ~5.6 ms in a pageable ``cudaMemcpyAsync`` (16 MiB HtoD): ~4.9 ms of host
    staging, then a ~0.7 ms DMA copy; then an 8-layer decode step (~4 ms of kernels) and a stream sync.
    GPU kernel busy ≈ 40 %; the staging part of the calls is the dominant idle cause."""
    sim = Sim(flavor or "2024.2", seed)
    r = Rank(sim, 13001, 0)
    sim.b.gpu(0)
    steps, layers, nbytes = 40, 8, 16 << 20
    calls: List[Tuple[int, int, int, int]] = []
    for _ in range(steps):
        r.push("execute_model")
        r.push("prepare_inputs")
        calls.append(_pageable_copy(r, nbytes, sim.jit(4.9 * MS, 0.06), gbps=24.0))
        r.pop()
        forward([r], layers, scale=5.0)
        sample([r])
        r.stream_sync()
        r.pop()
        r.host(sim.jit(50 * US, 0.2))
    write_trace(sim, path)
    call_ns = sum(a1 - a0 for a0, a1, _, _ in calls)
    copy_ns = sum(c1 - c0 for _, _, c0, c1 in calls)
    f = sim.facts(
        "memcpy",
        steps=steps,
        layers=layers,
        pageable_call_count=len(calls),
        pageable_call_ns_total=call_ns,
        pageable_copy_ns_total=copy_ns,
        pageable_staging_ns_total=call_ns - copy_ns,
        pageable_bytes_total=nbytes * len(calls),
        copy_kind=1,
        copy_src_kind=0,
        api_name="cudaMemcpyAsync_v3020",
    )
    return model_facts(f, sim.b, r.key, "pageable_memcpy", "cudaMemcpyAsync")


_SWAP_KERNELS = [
    (K.RESHAPE_CACHE, 40 * US, (32, 1, 1)),
    (K.COPY, 40 * US, (64, 1, 1)),
    (K.ELEMENTWISE, 40 * US, (64, 1, 1)),
    (K.ROTARY, 40 * US, (32, 1, 1)),
]


def async_copies(path: str, seed: int = 0, flavor: Optional[str] = None) -> Dict[str, Any]:
    """KV-cache swap-in loop: each ~8 ms step the host issues one pinned HtoD ``cudaMemcpyAsync`` (~4.8 ms
    of copy), four DtoD block copies (~0.7 ms each) and four small kernels (~40 µs each), all on one
    stream, then waits outside any CUDA call until shortly after the GPU has drained. Copies cover ~95 %
    of the window (HtoD ~60 %, DtoD ~35 %), kernels ~2 %."""
    sim = Sim(flavor or "2024.2", seed)
    r = Rank(sim, 13101, 0)
    sim.b.gpu(0)
    steps, h2d_gbps, d2d_gbps = 50, 24.0, 650.0
    for _ in range(steps):
        r.push("swap_in")
        r.memcpy_async(sim.jit(4.8 * MS * h2d_gbps, 0.03), kind=1, src=1, dst=2, gbps=h2d_gbps)
        for _blk in range(4):
            r.memcpy_async(sim.jit(0.7 * MS * d2d_gbps, 0.03), kind=8, src=2, dst=2, gbps=d2d_gbps)
        r.pop()
        r.push("execute_model")
        for name, dur, grid in _SWAP_KERNELS:
            r.launch(name, dur, grid=grid)
        r.pop()
        # the host thread does Python work outside CUDA calls until the next batch is ready
        r.cpu = max(r.cpu + sim.jit(20 * US), r.gpu_done() + sim.uni(150 * US, 350 * US))
    write_trace(sim, path)
    h2d = [x for x in sim.b.rows("memcpy") if x["copyKind"] == 1]
    d2d = [x for x in sim.b.rows("memcpy") if x["copyKind"] == 8]
    f = sim.facts(
        "copy_bound",
        steps=steps,
        h2d_count=len(h2d),
        h2d_ns_total=sum(x["end"] - x["start"] for x in h2d),
        h2d_bytes_total=sum(x["bytes"] for x in h2d),
        h2d_src_kind=1,
        d2d_count=len(d2d),
        d2d_ns_total=sum(x["end"] - x["start"] for x in d2d),
        d2d_bytes_total=sum(x["bytes"] for x in d2d),
    )
    model_facts(f, sim.b, r.key, "copy", "Host-to-Device")
    f["h2d_pct_of_window"] = 100.0 * f["h2d_ns_total"] / f["window_ns"]
    f["d2d_pct_of_window"] = 100.0 * f["d2d_ns_total"] / f["window_ns"]
    return f
