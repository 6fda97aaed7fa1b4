"""Device-role scenarios: a second GPU that runs no kernel and only receives copies (docs/MODEL.md, "Pooled over
the devices that ran kernels")."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from .idle_model import model_facts
from .names import K
from .rank import Rank
from .sim import MS, US, Sim, union
from .steps import write_trace

__all__ = ["copies_only_gpu"]

#: the second GPU's stream (the copies are issued there: nsys lists them on GPU 1)
GPU1_STREAM = 21
#: (API, copyKind, srcKind, dstKind, bytes, GB/s): per step, GPU 0's activations sent peer-to-peer to GPU 1 and a
#: pinned host buffer copied to GPU 1
GPU1_COPIES: Tuple[Tuple[str, int, int, int, int, float], ...] = (
    ("cudaMemcpyPeerAsync_v4000", 10, 2, 2, 64 << 20, 40.0),
    ("cudaMemcpyAsync_v3020", 1, 1, 2, 32 << 20, 24.0),
)


def _copy_to_gpu1(r: Rank, gpu1_done: int, api: str, kind: int, src: int, dst: int, nbytes: int,
                  gbps: float) -> Tuple[int, int]:
    """One asynchronous copy issued on GPU 1's stream (recorded on device 1, after the stream's previous copy);
    returns its GPU interval and advances the host by the call."""
    sim = r.sim
    a0 = r.cpu
    a1 = a0 + sim.jit(4 * US, 0.1)
    corr = r.b.runtime(a0, a1, tid_g=r.gtid, name=api)
    c0 = max(a0 + sim.jit(3 * US, 0.1), gpu1_done + sim.uni(600, 1500))
    c1 = c0 + int(nbytes / gbps)
    r.b.memcpy(c0, c1, pid=r.pid, bytes=nbytes, copy_kind=kind, src_kind=src, dst_kind=dst, device=1,
               stream=GPU1_STREAM, corr=corr)
    r.cpu = a1 + sim.jit(1000, 0.2)
    return c0, c1


def copies_only_gpu(path: str, seed: int = 0, flavor: Optional[str] = None) -> Dict[str, Any]:
    """Two H100s, one process. Each of 40 steps the host prepares the batch on the CPU for ~2.5 ms inside the NVTX
    range ``prepare_batch`` (no CUDA call), launches six GEMMs (~1.1 ms each) on GPU 0, sends a 64 MiB
    peer-to-peer copy (GPU 0 → GPU 1, ~1.6 ms) and a 32 MiB pinned host-to-device copy (~1.4 ms) to GPU 1 on GPU
    1's stream, then waits for GPU 0 (``cudaStreamSynchronize``). GPU 0 is ~72 % busy; the range holds most of its
    idle time (the per-step sync finding claims it). GPU 1 runs no kernel, it only receives copies (~34 % of the
    window): it must be listed as ``copies only``, not averaged into the GPU busy % at 0 %, and none of its idle
    may be claimed."""
    sim = Sim(flavor or "2024.2", seed)
    r = Rank(sim, 13801, 0)
    sim.b.gpu(0)
    sim.b.gpu(1)
    steps, gemms = 40, 6
    gpu1: List[Tuple[int, int]] = []
    ranges: List[Tuple[int, int]] = []
    done1 = 0
    for _ in range(steps):
        r.push("step")
        r.push("prepare_batch")
        r.host(sim.jit(2.5 * MS, 0.04))
        ranges.append(r.pop())
        for _g in range(gemms):
            r.launch(K.GEMM_QKV, 1100 * US, grid=(132, 1, 1))
        for api, kind, src, dst, nbytes, gbps in GPU1_COPIES:
            c = _copy_to_gpu1(r, done1, api, kind, src, dst, nbytes, gbps)
            gpu1.append(c)
            done1 = c[1]
        r.stream_sync()
        r.pop()
    write_trace(sim, path)
    f = sim.facts(
        "step_sync",
        steps=steps,
        gemms_per_step=gemms,
        gpu1_copy_count=len(gpu1),
        gpu1_copy_ns_total=sum(e - s for s, e in gpu1),
        gpu1_copy_union_ns=sum(e - s for s, e in union(gpu1)),
        gpu1_bytes_total=steps * sum(c[4] for c in GPU1_COPIES),
        range_count=len(ranges),
        range_ns_total=sum(e - s for s, e in ranges),
    )
    # the planted idle of GPU 0 is the range (top_idle_kind / top_idle_detail); the finding that claims it is the
    # per-step sync (a sync on every step, then host work with the GPU idle)
    return model_facts(f, sim.b, r.key, "step_sync", "cudaStreamSynchronize")
