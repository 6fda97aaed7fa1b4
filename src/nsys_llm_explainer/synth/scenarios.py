"""Synthetic vLLM-style inference traces, each with one planted cause.

``build_scenario(name, path, seed=0)`` writes the trace and returns the *planted facts*: the
cause category plus numbers that are known by construction (kernel counts, per-device busy time
as an exact interval union, idle time inside sync/alloc/memcpy calls, ...). Times are ns.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from .builder import TraceBuilder

__all__ = ["SCENARIOS", "build_scenario", "CAUSES", "K"]

US = 1_000
MS = 1_000_000

CAUSES = (
    "launch_overhead",
    "sync_stall",
    "capture_window",
    "dominant_kernel",
    "memcpy",
    "nccl_wait",
    "allocation",
    "host_gap",
    "graph_trace_mode",
    "none",
)


class K:
    """Realistic kernel names (H100 / vLLM flavoured)."""

    GEMM_QKV = (
        "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_"
        "execute_segment_k_off_kernel__5x_cublas"
    )
    GEMM_O = "nvjet_tst_192x192_64x4_2x1_v_bz_coopB_bias_TNN"
    GEMM_UP = (
        "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize256x128x64_warpgroupsize2x1x1_"
        "execute_segment_k_off_kernel__5x_cublas"
    )
    GEMM_DOWN = "nvjet_tst_128x256_64x4_1x2_h_bz_coopA_TNT"
    GEMM_AMPERE = "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_tn"
    LM_HEAD = "nvjet_tst_256x128_64x4_2x1_v_bz_coopA_NNT"
    FLASH = (
        "void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, "
        "cutlass::bfloat16_t, Flash_kernel_traits<128, 128, 64, 4, cutlass::bfloat16_t>>, false, true, "
        "false, false, true, true, false, false>(Flash_fwd_params)"
    )
    FLASH_SPLITKV = (
        "void flash::flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4, false, "
        "false, cutlass::bfloat16_t, Flash_kernel_traits<128, 64, 128, 4, cutlass::bfloat16_t>>, "
        "true, false, false, false, true, true, false, false>(Flash_fwd_params)"
    )
    PAGED_ATTN = (
        "void vllm::paged_attention_v2_kernel<__nv_bfloat16, __nv_bfloat16, 128, 16, 128, "
        "(vllm::Fp8KVCacheDataType)0, false, 512>(float*, float*, __nv_bfloat16*, "
        "const __nv_bfloat16*, const __nv_bfloat16*, const __nv_bfloat16*, int, float, "
        "const int*, const int*, int, const float*, int, int, int, const float*, const float*)"
    )
    RMS_NORM = (
        "void vllm::rms_norm_kernel<c10::BFloat16, 8>(c10::BFloat16*, const c10::BFloat16*, "
        "const c10::BFloat16*, float, int, int)"
    )
    FUSED_ADD_RMS = (
        "void vllm::fused_add_rms_norm_kernel<c10::BFloat16, 8>(c10::BFloat16*, c10::BFloat16*, "
        "const c10::BFloat16*, float, int, int)"
    )
    ACT_MUL = (
        "void vllm::act_and_mul_kernel<c10::BFloat16, &vllm::silu_kernel<c10::BFloat16>, true>"
        "(c10::BFloat16*, const c10::BFloat16*, int)"
    )
    ROTARY = (
        "void vllm::rotary_embedding_kernel<c10::BFloat16, true>(const long*, c10::BFloat16*, "
        "c10::BFloat16*, const c10::BFloat16*, int, long, long, int, int, int)"
    )
    RESHAPE_CACHE = (
        "void vllm::reshape_and_cache_flash_kernel<__nv_bfloat16, __nv_bfloat16, "
        "(vllm::Fp8KVCacheDataType)0>(const __nv_bfloat16*, const __nv_bfloat16*, "
        "__nv_bfloat16*, __nv_bfloat16*, const long*, long, long, long, long, int, int, int, "
        "const float*, const float*)"
    )
    NCCL_AR = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
    CUSTOM_AR = (
        "void vllm::cross_device_reduce_1stage<__nv_bfloat16, 2>(vllm::RankData*, vllm::RankSignals, "
        "vllm::Signal*, __nv_bfloat16*, int, int)"
    )
    ELEMENTWISE = (
        "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<c10::BFloat16>, "
        "std::array<char*, 1ul>>(int, at::native::FillFunctor<c10::BFloat16>, std::array<char*, 1ul>)"
    )
    COPY = (
        "void at::native::vectorized_elementwise_kernel<4, at::native::bfloat16_copy_kernel_cuda"
        "(at::TensorIteratorBase&)::{lambda()#1}::operator()() const::{lambda(float)#1}, "
        "std::array<char*, 2ul>>(int, at::native::bfloat16_copy_kernel_cuda(at::TensorIteratorBase&)"
        "::{lambda()#1}::operator()() const::{lambda(float)#1}, std::array<char*, 2ul>)"
    )
    TRITON = "triton_poi_fused_add_mul_0"
    SOFTMAX = (
        "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, "
        "at::native::(anonymous namespace)::SoftMaxForwardEpilogue>(float*, const float*, int)"
    )
    ARGMAX = (
        "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::ArgMaxOps<float>, "
        "unsigned int, long, 4>>(at::native::ReduceOp<float, at::native::ArgMaxOps<float>, "
        "unsigned int, long, 4>)"
    )
    TOPK_SOFTMAX = (
        "void vllm::moe::topk_softmax<8, 8, 4, 64>(const float*, const bool*, float*, int*, int*, "
        "int, int, int, int)"
    )
    FUSED_MOE = "fused_moe_kernel"
    FP8_QUANT = (
        "void vllm::scaled_fp8_quant_kernel<c10::BFloat16, c10::Float8_e4m3fn>(c10::Float8_e4m3fn*, "
        "const c10::BFloat16*, const float*, long)"
    )


# -------------------------------------------------------------------------------------------------
# interval helpers
# -------------------------------------------------------------------------------------------------
def _union(iv: Sequence[Tuple[int, int]]) -> List[Tuple[int, int]]:
    out: List[Tuple[int, int]] = []
    for s, e in sorted(iv):
        if out and s <= out[-1][1]:
            if e > out[-1][1]:
                out[-1] = (out[-1][0], e)
        else:
            out.append((s, e))
    return out


def _overlap(merged: Sequence[Tuple[int, int]], a: int, b: int) -> int:
    tot = 0
    for s, e in merged:
        if e <= a:
            continue
        if s >= b:
            break
        tot += min(e, b) - max(s, a)
    return tot


def _idle_within(merged: Sequence[Tuple[int, int]], windows: Sequence[Tuple[int, int]]) -> int:
    """GPU idle ns inside the union of ``windows`` given merged busy intervals."""
    return sum((b - a) - _overlap(merged, a, b) for a, b in _union(windows))


# -------------------------------------------------------------------------------------------------
# simulator
# -------------------------------------------------------------------------------------------------
class _Sim:
    def __init__(self, flavor: str, seed: int, t0: int = 40 * MS) -> None:
        self.b = TraceBuilder(flavor, seed=seed)
        self.rng = np.random.default_rng(seed)
        self.t0 = t0
        self.busy: Dict[Tuple[int, int], List[Tuple[int, int]]] = {}
        self.kernel_ns: Dict[Tuple[int, int], int] = {}
        self.kernel_n: Dict[Tuple[int, int], int] = {}
        self.memcpy_iv: Dict[Tuple[int, int], List[Tuple[int, int]]] = {}
        self.windows: Dict[str, List[Tuple[Tuple[int, int], int, int]]] = {}
        self.by_name: Dict[str, int] = {}

    def jit(self, v: float, rel: float = 0.05) -> int:
        return max(1, int(round(v * (1.0 + rel * self.rng.standard_normal()))))

    def uni(self, lo: float, hi: float) -> int:
        return int(self.rng.integers(int(lo), int(hi) + 1))

    def record(
        self, key: Tuple[int, int], s: int, e: int, name: Optional[str] = None, kernel: bool = True
    ) -> None:
        self.busy.setdefault(key, []).append((s, e))
        if kernel:
            self.kernel_ns[key] = self.kernel_ns.get(key, 0) + (e - s)
            self.kernel_n[key] = self.kernel_n.get(key, 0) + 1
            if name is not None:
                self.by_name[name] = self.by_name.get(name, 0) + (e - s)

    def window(self, kind: str, key: Tuple[int, int], a: int, b: int) -> None:
        self.windows.setdefault(kind, []).append((key, a, b))

    def facts(self, cause: str, **extra: Any) -> Dict[str, Any]:
        devices: Dict[str, Any] = {}
        merged_by_key = {k: _union(v) for k, v in self.busy.items()}
        for key in sorted(self.busy):
            merged = merged_by_key[key]
            busy = sum(e - s for s, e in merged)
            first, last = merged[0][0], merged[-1][1]
            devices[f"{key[0]}:{key[1]}"] = {
                "pid": key[0],
                "device": key[1],
                "kernel_count": self.kernel_n.get(key, 0),
                "kernel_sum_ns": self.kernel_ns.get(key, 0),
                "busy_ns": busy,
                "first_start_ns": first,
                "last_end_ns": last,
                "idle_ns": (last - first) - busy,
                "memcpy_ns": 0,
                "memset_ns": 0,
            }
        for kind in ("memcpy", "memset"):
            for r in self.b.rows(kind):
                k = f"{(r['globalPid'] >> 24) & 0xFFFFFF}:{r['deviceId']}"
                if k in devices:
                    devices[k][f"{kind}_ns"] += r["end"] - r["start"]
        rows = self.b.rows
        starts = [
            r["start"]
            for k in ("kernel", "runtime", "memcpy", "memset", "sync", "nvtx", "osrt", "graph_trace")
            for r in rows(k)
        ]
        ends = [
            r["end"] if r.get("end") is not None else r["start"]
            for k in ("kernel", "runtime", "memcpy", "memset", "sync", "nvtx", "osrt", "graph_trace")
            for r in rows(k)
        ]
        idle_in: Dict[str, int] = {}
        for kind, wins in self.windows.items():
            tot = 0
            for key in {w[0] for w in wins}:
                tot += _idle_within(merged_by_key.get(key, []), [(a, b) for k, a, b in wins if k == key])
            idle_in[kind] = tot
        out: Dict[str, Any] = {
            "cause": cause,
            "flavor": self.b.flavor,
            "kernel_count": len(rows("kernel")),
            "runtime_count": len(rows("runtime")),
            "nvtx_count": len(rows("nvtx")),
            "memcpy_count": len(rows("memcpy")),
            "sync_count": len(rows("sync")),
            "graph_trace_count": len(rows("graph_trace")),
            "trace_start_ns": min(starts),
            "trace_end_ns": max(ends),
            "devices": devices,
            "gpu_busy_ns": sum(d["busy_ns"] for d in devices.values()),
            "gpu_idle_ns": sum(d["idle_ns"] for d in devices.values()),
            "kernel_sum_ns": sum(d["kernel_sum_ns"] for d in devices.values()),
            "idle_inside_ns": idle_in,
        }
        out.update(extra)
        return out


class _Rank:
    """One worker process (one device, one main thread) issuing CUDA work in program order."""

    def __init__(
        self, sim: _Sim, pid: int, device: int, *, stream: int = 7, nccl: bool = False, name: str = "python3"
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


# -------------------------------------------------------------------------------------------------
# model step building blocks
# -------------------------------------------------------------------------------------------------
# (name, duration ns at scale 1, grid) -- decode of a ~8B model, TP=2, batch 32 on H100
_SEG1 = [
    (K.RMS_NORM, 2500, (32, 1, 1)),
    (K.GEMM_QKV, 14000, (132, 1, 1)),
    (K.ROTARY, 2200, (32, 1, 1)),
    (K.RESHAPE_CACHE, 2400, (32, 1, 1)),
    (K.FLASH_SPLITKV, 18000, (4, 32, 8)),
    (K.GEMM_O, 8000, (66, 1, 1)),
]
_SEG2 = [
    (K.FUSED_ADD_RMS, 2800, (32, 1, 1)),
    (K.GEMM_UP, 28000, (132, 1, 1)),
    (K.ACT_MUL, 3500, (32, 1, 1)),
    (K.GEMM_DOWN, 16000, (132, 1, 1)),
]
_PREFILL_SEG1 = [
    (K.RMS_NORM, 9000, (2048, 1, 1)),
    (K.GEMM_QKV, 210000, (132, 1, 1)),
    (K.ROTARY, 11000, (2048, 1, 1)),
    (K.RESHAPE_CACHE, 8000, (2048, 1, 1)),
    (K.FLASH, 260000, (16, 32, 1)),
    (K.GEMM_O, 95000, (132, 1, 1)),
]
_PREFILL_SEG2 = [
    (K.FUSED_ADD_RMS, 12000, (2048, 1, 1)),
    (K.GEMM_UP, 420000, (132, 1, 1)),
    (K.ACT_MUL, 30000, (2048, 1, 1)),
    (K.GEMM_DOWN, 210000, (132, 1, 1)),
]
_SAMPLER = [
    (K.RMS_NORM, 2500, (32, 1, 1)),
    (K.LM_HEAD, 45000, (132, 1, 1)),
    (K.SOFTMAX, 6000, (32, 1, 1)),
    (K.ARGMAX, 4000, (32, 1, 1)),
]


def _allreduce(ranks: Sequence[_Rank], comm: int, *, name: str = K.NCCL_AR) -> None:
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


def _segment(r: _Rank, seg: Sequence[Tuple[str, int, Tuple[int, int, int]]], scale: float = 1.0) -> None:
    for name, dur, grid in seg:
        r.launch(name, int(dur * scale), grid=grid)


def _forward(
    ranks: Sequence[_Rank],
    layers: int,
    *,
    prefill: bool = False,
    scale: float = 1.0,
    comm: int = 9000,
    layer_ranges: bool = False,
) -> None:
    seg1, seg2 = (_PREFILL_SEG1, _PREFILL_SEG2) if prefill else (_SEG1, _SEG2)
    if prefill:
        comm *= 12
    for i in range(layers):
        for r in ranks:
            if layer_ranges:
                r.push(f"model.layers.{i}")
            _segment(r, seg1, scale)
        if len(ranks) > 1:
            _allreduce(ranks, comm)
        for r in ranks:
            _segment(r, seg2, scale)
        if len(ranks) > 1:
            _allreduce(ranks, comm)
        if layer_ranges:
            for r in ranks:
                r.pop()


def _sample(ranks: Sequence[_Rank], scale: float = 1.0) -> None:
    for r in ranks:
        _segment(r, _SAMPLER, scale)


def _align(ranks: Sequence[_Rank]) -> None:
    """Ranks start the next step together (the scheduler broadcast)."""
    t = max(r.cpu for r in ranks)
    for r in ranks:
        r.cpu = t + r.sim.uni(0, 8 * US)


def _scheduler(sim: _Sim, pid: int, name: str = "EngineCore") -> int:
    return sim.b.thread(pid, pid + 7, name)


def _sched_step(sim: _Sim, sched_g: int, ranks: Sequence[_Rank], dur: int = 120 * US) -> None:
    t = min(r.cpu for r in ranks)
    sim.b.nvtx_push_pop(t - dur - 30 * US, t - 30 * US, "schedule", tid_g=sched_g)


def _write(sim: _Sim, path: str) -> None:
    sim.b.write(path, overwrite=True)


# -------------------------------------------------------------------------------------------------
# scenarios
# -------------------------------------------------------------------------------------------------
def _demo(path: str, seed: int = 0, flavor: Optional[str] = None) -> Dict[str, Any]:
    sim = _Sim(flavor or "2024.2", seed)
    ranks = [_Rank(sim, 1001, 0, nccl=True), _Rank(sim, 1002, 1, nccl=True)]
    for d in (0, 1):
        sim.b.gpu(d)
    sched = _scheduler(sim, 1001)
    layers, decode_steps = 8, 40
    for step in range(decode_steps + 1):
        prefill = step == 0
        _align(ranks)
        _sched_step(sim, sched, ranks)
        for r in ranks:
            r.push("execute_model")
            r.push("vllm: prefill step" if prefill else "vllm: decode step")
        _forward(ranks, layers, prefill=prefill, layer_ranges=True)
        _sample(ranks)
        for r in ranks:
            r.memcpy_async(256, kind=2, src=2, dst=1)
            r.stream_sync()
            r.pop()
            r.pop()
            r.host(sim.jit(180 * US, 0.2))
    _write(sim, path)
    # ~180 µs of host work after each step's sync leaves the GPU idle with no CUDA call in flight:
    # the realistic per-step CPU overhead of a serving loop, diagnosed as a (medium) host gap.
    return sim.facts(
        "host_gap",
        steps=decode_steps + 1,
        prefill_steps=1,
        decode_steps=decode_steps,
        layers=layers,
        tp=2,
        pids=[1001, 1002],
    )


def _healthy(path: str, seed: int = 0, flavor: Optional[str] = None) -> Dict[str, Any]:
    sim = _Sim(flavor or "2024.2", seed)
    r = _Rank(sim, 2001, 0)
    sim.b.gpu(0)
    sched = _scheduler(sim, 2001)
    layers, steps = 16, 30
    prev: Optional[Tuple[int, int]] = None
    for _ in range(steps):
        _sched_step(sim, sched, [r], 60 * US)
        r.push("execute_model")
        _forward([r], layers, scale=9.0)
        _sample([r], scale=4.0)
        ev = r.event_record()
        if prev is not None:
            r.event_sync(prev)
        prev = ev
        r.pop()
        r.host(40 * US)
    r.event_sync(prev)  # type: ignore[arg-type]
    _write(sim, path)
    merged = _union(sim.busy[r.key])
    gaps = [b[0] - a[1] for a, b in zip(merged, merged[1:])]
    return sim.facts("none", steps=steps, layers=layers, max_gap_ns=max(gaps) if gaps else 0)


def _launch_bound(path: str, seed: int = 0, flavor: Optional[str] = None) -> Dict[str, Any]:
    sim = _Sim(flavor or "2024.2", seed)
    r = _Rank(sim, 3001, 0)
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
        _segment(r, [(K.LM_HEAD, 9000, (66, 1, 1)), (K.ARGMAX, 3000, (8, 1, 1))])
        r.memcpy_async(128, kind=2, src=2, dst=1)
        r.stream_sync()
        r.pop()
        r.pop()
        r.host(60 * US)
    _write(sim, path)
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


def _per_token_sync(path: str, seed: int = 0, flavor: Optional[str] = None) -> Dict[str, Any]:
    sim = _Sim(flavor or "2024.2", seed)
    r = _Rank(sim, 4001, 0)
    sim.b.gpu(0)
    layers, steps = 16, 40
    for _ in range(steps):
        r.push("execute_model")
        r.push("vllm: decode step")
        _forward([r], layers)
        _sample([r])
        r.memcpy_async(256, kind=2, src=2, dst=1)
        # the host blocks in the sync well past the end of GPU work (waits on an event recorded early
        # on a side stream by the output processor), so the GPU sits idle inside the call
        r.stream_sync(extra=sim.uni(800 * US, 1200 * US))
        r.pop()
        r.pop()
        r.host(sim.jit(25 * US))
    _write(sim, path)
    f = sim.facts("sync_stall", steps=steps, layers=layers)
    f["sync_total_ns"] = sum(x["end"] - x["start"] for x in sim.b.rows("sync"))
    f["gpu_idle_inside_sync_ns"] = f["idle_inside_ns"].get("sync", 0)
    return f


def _warmup_tail(path: str, seed: int = 0, flavor: Optional[str] = None) -> Dict[str, Any]:
    sim = _Sim(flavor or "2024.2", seed)
    r = _Rank(sim, 5001, 0)
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
        _forward([r], 16)
        _sample([r])
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
    sched = _scheduler(sim, 5001)
    sim.b.osrt(tail_start + 10 * US, r.cpu, tid_g=sched, name="pthread_cond_wait")
    _write(sim, path)
    f = sim.facts(
        "capture_window",
        steps=steps,
        warmup_end_ns=warmup_end,
        steady_start_ns=steady_start,
        steady_end_ns=steady_end,
        tail_start_ns=tail_start,
        tail_end_ns=r.cpu,
    )
    merged = _union(sim.busy[r.key])
    f["steady_busy_ns"] = _overlap(merged, steady_start, steady_end)
    return f


def _dominant(path: str, seed: int = 0, flavor: Optional[str] = None) -> Dict[str, Any]:
    sim = _Sim(flavor or "2024.2", seed)
    r = _Rank(sim, 6001, 0)
    sim.b.gpu(0)
    layers, steps = 16, 30
    seg1 = [(n, 400_000 if n == K.FLASH_SPLITKV else d * 3, g) for n, d, g in _SEG1]
    seg2 = [(n, d * 3, g) for n, d, g in _SEG2]
    prev: Optional[Tuple[int, int]] = None
    for _ in range(steps):
        r.push("execute_model")
        for _layer in range(layers):
            _segment(r, seg1)
            _segment(r, seg2)
        _sample([r], 2.0)
        ev = r.event_record()
        if prev is not None:
            r.event_sync(prev)
        prev = ev
        r.pop()
    r.event_sync(prev)  # type: ignore[arg-type]
    _write(sim, path)
    tot = sum(sim.by_name.values())
    name, ns = max(sim.by_name.items(), key=lambda kv: kv[1])
    return sim.facts(
        "dominant_kernel", steps=steps, dominant_kernel=name, dominant_kernel_ns=ns, dominant_share=ns / tot
    )


def _pageable_h2d(path: str, seed: int = 0, flavor: Optional[str] = None) -> Dict[str, Any]:
    sim = _Sim(flavor or "2024.2", seed)
    r = _Rank(sim, 7001, 0)
    sim.b.gpu(0)
    steps = 30
    nbytes = 24 << 20
    for _ in range(steps):
        r.push("execute_model")
        r.push("prepare_inputs")
        r.memcpy_sync(nbytes, kind=1, src=0, dst=2, gbps=6.0)
        r.pop()
        _forward([r], 16)
        _sample([r])
        r.memcpy_async(256, kind=2, src=2, dst=1)
        r.stream_sync()
        r.pop()
        r.host(sim.jit(40 * US))
    _write(sim, path)
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


def _nccl_straggler(path: str, seed: int = 0, flavor: Optional[str] = None) -> Dict[str, Any]:
    sim = _Sim(flavor or "2024.2", seed)
    ranks = [_Rank(sim, 8001, 0, nccl=True), _Rank(sim, 8002, 1, nccl=True)]
    ranks[1].slow = 1.9
    for d in (0, 1):
        sim.b.gpu(d)
    layers, steps, comm = 16, 25, 9000
    for _ in range(steps):
        _align(ranks)
        for r in ranks:
            r.push("execute_model")
        _forward(ranks, layers, comm=comm)
        _sample(ranks)
        for r in ranks:
            r.memcpy_async(256, kind=2, src=2, dst=1)
            r.stream_sync()
            r.pop()
            r.host(40 * US)
    _write(sim, path)
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


def _alloc_in_loop(path: str, seed: int = 0, flavor: Optional[str] = None) -> Dict[str, Any]:
    sim = _Sim(flavor or "2024.2", seed)
    r = _Rank(sim, 9001, 0)
    sim.b.gpu(0)
    steps = 30
    for _ in range(steps):
        r.push("execute_model")
        _forward([r], 8)
        # cudaFree synchronizes the device, then a fresh cudaMalloc for the next activations
        a0 = r.cpu
        a1 = max(a0 + 20 * US, r.gpu_done()) + sim.uni(300 * US, 900 * US)
        r.b.runtime(a0, a1, tid_g=r.gtid, name="cudaFree_v2020")
        sim.window("alloc", r.key, a0, a1)
        r.cpu = a1 + 2 * US
        _, m0, m1 = r.api("cudaMalloc_v3020", sim.uni(500 * US, 1500 * US))
        sim.window("alloc", r.key, m0, m1)
        _forward([r], 8)
        _sample([r])
        r.memcpy_async(256, kind=2, src=2, dst=1)
        r.stream_sync()
        r.pop()
        r.host(30 * US)
    _write(sim, path)
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


def _graph_steps(path: str, seed: int, flavor: str, node_mode: bool, cause: str) -> Dict[str, Any]:
    sim = _Sim(flavor, seed)
    r = _Rank(sim, 10001, 0)
    sim.b.gpu(0)
    if not node_mode:
        sim.b.meta("CUDA_GRAPH_TRACE_OPTIONS:MODE", "Graph")
    elif sim.b._flv >= 4:
        sim.b.meta("CUDA_GRAPH_TRACE_OPTIONS:MODE", "Node")
    layers, steps = 16, 40
    # eager prefill
    r.push("execute_model")
    r.push("vllm: prefill step")
    _forward([r], layers, prefill=True)
    _sample([r])
    r.memcpy_async(256, kind=2, src=2, dst=1)
    r.stream_sync()
    r.pop()
    r.pop()
    eager = sim.kernel_n.get(r.key, 0)
    body = [(n, d, g) for _ in range(layers) for n, d, g in _SEG1 + _SEG2] + list(_SAMPLER)
    graph_busy = 0
    for _ in range(steps):
        r.push("execute_model")
        r.push("vllm: decode step")
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
        if node_mode:
            for s, e, n in ks:
                sim.record(r.key, s, e, n)
        else:
            sim.record(r.key, ks[0][0], ks[-1][1], None, kernel=False)
            graph_busy += ks[-1][1] - ks[0][0]
        r.gpu[r.stream] = ks[-1][1]
        r.cpu = a1 + 2 * US
        r.memcpy_async(256, kind=2, src=2, dst=1)
        r.stream_sync()
        r.pop()
        r.pop()
        r.host(sim.jit(40 * US))
    _write(sim, path)
    return sim.facts(
        cause,
        steps=steps + 1,
        graph_launches=steps,
        eager_kernel_count=eager,
        kernels_per_graph=len(body),
        graph_node_mode=node_mode,
        graph_busy_ns=graph_busy,
    )


def _cuda_graph_node(path: str, seed: int = 0, flavor: Optional[str] = None) -> Dict[str, Any]:
    return _graph_steps(path, seed, flavor or "2024.2", True, "none")


def _graph_level(path: str, seed: int = 0, flavor: Optional[str] = None) -> Dict[str, Any]:
    return _graph_steps(path, seed, flavor or "2024.2", False, "graph_trace_mode")


def _overlapping_streams(path: str, seed: int = 0, flavor: Optional[str] = None) -> Dict[str, Any]:
    sim = _Sim(flavor or "2024.2", seed)
    r = _Rank(sim, 11001, 0)
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
    _write(sim, path)
    d = next(iter(sim.facts("none")["devices"].values()))
    return sim.facts(
        "none",
        steps=steps,
        streams=[7, 13],
        busy_union_ns=d["busy_ns"],
        kernel_sum_exceeds_busy=d["kernel_sum_ns"] > d["busy_ns"],
    )


def _host_gap(path: str, seed: int = 0, flavor: Optional[str] = None) -> Dict[str, Any]:
    sim = _Sim(flavor or "2024.2", seed)
    r = _Rank(sim, 12001, 0)
    sim.b.gpu(0)
    steps = 40
    gaps: List[Tuple[int, int]] = []
    for _ in range(steps):
        r.push("execute_model")
        _forward([r], 16)
        _sample([r])
        r.memcpy_async(256, kind=2, src=2, dst=1)
        r.stream_sync()
        r.pop()
        g0 = r.cpu
        r.push("vllm: schedule + prepare_inputs (python)")
        r.host(sim.uni(1800 * US, 2300 * US))
        r.pop()
        gaps.append((g0, r.cpu))
        sim.window("host_gap", r.key, g0, r.cpu)
    _write(sim, path)
    f = sim.facts(
        "host_gap", steps=steps, host_gap_count=len(gaps), host_gap_total_ns=sum(b - a for a, b in gaps)
    )
    f["gpu_idle_inside_host_gap_ns"] = f["idle_inside_ns"].get("host_gap", 0)
    return f


SCENARIOS: Dict[str, Callable[..., Dict[str, Any]]] = {
    "demo": _demo,
    "healthy": _healthy,
    "launch_bound": _launch_bound,
    "per_token_sync": _per_token_sync,
    "warmup_tail": _warmup_tail,
    "dominant_kernel": _dominant,
    "pageable_h2d": _pageable_h2d,
    "nccl_straggler": _nccl_straggler,
    "alloc_in_loop": _alloc_in_loop,
    "cuda_graph_node": _cuda_graph_node,
    "graph_level": _graph_level,
    "overlapping_streams": _overlapping_streams,
    "host_gap": _host_gap,
}


def build_scenario(name: str, path: str, seed: int = 0, flavor: Optional[str] = None) -> Dict[str, Any]:
    """Write scenario ``name`` to ``path`` (overwriting) and return its planted facts."""
    if name not in SCENARIOS:
        raise KeyError(f"unknown scenario {name!r}; known: {', '.join(sorted(SCENARIOS))}")
    facts = SCENARIOS[name](str(path), seed=seed, flavor=flavor)
    facts["scenario"] = name
    return facts
