"""One simulated worker process issuing CUDA work in program order (host clock + per-stream GPU clock)."""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from .sim import MS, US, Sim

__all__ = ["Rank"]


class Rank:
    """One worker process (one device, one main thread) issuing CUDA work in program order."""

    def __init__(
        self, sim: Sim, pid: int, device: int, *, stream: int = 7, nccl: bool = False, name: str = "python3"
    ) -> None:
        self.sim, self.b = sim, sim.b
        self.pid, self.tid, self.device, self.stream = pid, pid, device, stream
        self.b.process(pid, name)
        self.gtid = self.b.thread(pid, pid, name if device == 0 else f"VllmWorker-{device}")
        self.cpu = sim.t0 + sim.uni(0, 50 * US)
        self.gpu: Dict[int, int] = {}
        self.stack: List[Tuple[int, str]] = []
        self.slow = 1.0
        self.cpu_gap = 1500
        self.api_ns = 4500
        self.lat_ns = 3500
        self.key = (pid, device)
        self.event_id = 0
        if nccl:
            self.b.nvtx_domain(1, "NCCL", tid_g=self.gtid, ts=sim.t0 - 5 * MS)

    # host side
    def host(self, dt: int) -> None:
        self.cpu += int(dt)

    def push(self, text: str) -> None:
        self.stack.append((self.cpu, text))
        self.cpu += 250

    def pop(self) -> Tuple[int, int]:
        start, text = self.stack.pop()
        self.b.nvtx_push_pop(start, self.cpu, text, tid_g=self.gtid)
        self.cpu += 150
        return start, self.cpu - 150

    # device side
    def _gap(self) -> int:
        return self.sim.uni(600, 1500)

    def launch(
        self,
        name: str,
        dur: int,
        *,
        stream: Optional[int] = None,
        api: str = "cudaLaunchKernel_v7000",
        api_ns: Optional[int] = None,
        grid: Tuple[int, int, int] = (132, 1, 1),
        block: Tuple[int, int, int] = (256, 1, 1),
        not_before: int = 0,
        scale: bool = True,
    ) -> Tuple[int, int]:
        st = self.stream if stream is None else stream
        a0 = self.cpu
        a1 = a0 + (self.sim.jit(self.api_ns, 0.1) if api_ns is None else api_ns)
        ks = max(a0 + self.sim.jit(self.lat_ns, 0.1), self.gpu.get(st, 0) + self._gap(), not_before)
        d = self.sim.jit(dur * (self.slow if scale else 1.0), 0.04)
        ke = ks + d
        self.b.launch(
            a0,
            a1,
            ks,
            ke,
            pid=self.pid,
            tid=self.tid,
            device=self.device,
            stream=st,
            name=name,
            api=api,
            grid=grid,
            block=block,
        )
        self.gpu[st] = ke
        self.cpu = a1 + self.sim.jit(self.cpu_gap, 0.2)
        self.sim.record(self.key, ks, ke, name)
        return ks, ke

    def api(self, name: str, dur: int) -> Tuple[int, int, int]:
        a0 = self.cpu
        a1 = a0 + int(dur)
        corr = self.b.runtime(a0, a1, tid_g=self.gtid, name=name)
        self.cpu = a1 + self.sim.jit(800, 0.2)
        return corr, a0, a1

    def gpu_done(self, stream: Optional[int] = None) -> int:
        if stream is None:
            return max(self.gpu.values(), default=0)
        return self.gpu.get(stream, 0)

    def stream_sync(self, *, extra: int = 0, stream: Optional[int] = None) -> Tuple[int, int]:
        st = self.stream if stream is None else stream
        a0 = self.cpu
        a1 = max(a0 + 1800, self.gpu_done(st) + self.sim.jit(2500, 0.2)) + int(extra)
        corr = self.b.runtime(a0, a1, tid_g=self.gtid, name="cudaStreamSynchronize_v3020")
        self.b.sync(a0, a1, pid=self.pid, sync_type=3, device=self.device, stream=st, corr=corr)
        self.sim.window("sync", self.key, a0, a1)
        self.cpu = a1 + self.sim.jit(1000, 0.2)
        return a0, a1

    def event_record(self, stream: Optional[int] = None) -> Tuple[int, int]:
        """cudaEventRecord; returns (event id, the GPU time the event completes)."""
        self.event_id += 1
        self.api("cudaEventRecord_v3020", self.sim.jit(2200, 0.1))
        return self.event_id, self.gpu_done(self.stream if stream is None else stream)

    def event_sync(self, event: Tuple[int, int]) -> Tuple[int, int]:
        eid, when = event
        a0 = self.cpu
        a1 = max(a0 + 1500, when + self.sim.jit(2500, 0.2))
        corr = self.b.runtime(a0, a1, tid_g=self.gtid, name="cudaEventSynchronize_v3020")
        self.b.sync(
            a0, a1, pid=self.pid, sync_type=1, device=self.device, stream=4294967295, corr=corr, event_id=eid
        )
        self.sim.window("sync", self.key, a0, a1)
        self.cpu = a1 + self.sim.jit(1000, 0.2)
        return a0, a1

    def memcpy_async(
        self, nbytes: int, *, kind: int = 2, src: int = 2, dst: int = 1, gbps: float = 20.0
    ) -> None:
        a0 = self.cpu
        a1 = a0 + self.sim.jit(3500, 0.1)
        corr = self.b.runtime(a0, a1, tid_g=self.gtid, name="cudaMemcpyAsync_v3020")
        ks = max(a0 + self.sim.jit(3000, 0.1), self.gpu_done(self.stream) + self._gap())
        ke = ks + max(1200, int(nbytes / gbps))
        self.b.memcpy(
            ks,
            ke,
            pid=self.pid,
            bytes=nbytes,
            copy_kind=kind,
            src_kind=src,
            dst_kind=dst,
            device=self.device,
            stream=self.stream,
            corr=corr,
        )
        self.gpu[self.stream] = ke
        self.cpu = a1 + self.sim.jit(1000, 0.2)

    def memcpy_sync(
        self, nbytes: int, *, kind: int = 1, src: int = 0, dst: int = 2, gbps: float = 6.0
    ) -> Tuple[int, int]:
        """Blocking cudaMemcpy (pageable); returns the memcpy GPU interval."""
        a0 = self.cpu
        ks = max(a0 + self.sim.jit(9000, 0.1), self.gpu_done(self.stream) + self._gap())
        ke = ks + int(nbytes / gbps)
        a1 = ke + self.sim.jit(4000, 0.1)
        corr = self.b.runtime(a0, a1, tid_g=self.gtid, name="cudaMemcpy_v3020")
        self.b.memcpy(
            ks,
            ke,
            pid=self.pid,
            bytes=nbytes,
            copy_kind=kind,
            src_kind=src,
            dst_kind=dst,
            device=self.device,
            stream=self.stream,
            corr=corr,
        )
        self.gpu[self.stream] = ke
        self.sim.window("memcpy_call", self.key, a0, a1)
        self.cpu = a1 + self.sim.jit(1500, 0.2)
        return ks, ke
