"""GPU-bound compute scenarios on an A100: an FP32 SIMT GEMM loop, and a small BF16 training loop with
backward kernels launched from the autograd thread."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from .idle_model import model_facts
from .names_train import A100, KT, triton_names
from .rank import Rank
from .sim import US, Sim
from .steps import write_trace

__all__ = ["compiled_elementwise", "fp32_gemm", "fp32_gemm_no_tensor_cores", "fp32_gemm_turing", "training_step"]

Op = Tuple[str, int, Tuple[int, int, int]]


def _ahead_loop(r: Rank, steps: int, body: List[Op], range_name: str) -> None:
    """``steps`` iterations of ``body``; the host stays one step ahead (event record + sync on the last)."""
    prev: Optional[Tuple[int, int]] = None
    for _ in range(steps):
        r.push(range_name)
        for name, dur, grid in body:
            r.launch(name, dur, grid=grid)
        ev = r.event_record()
        if prev is not None:
            r.event_sync(prev)
        prev = ev
        r.pop()
    if prev is not None:
        r.event_sync(prev)


_FP32_BODY: List[Op] = [
    op
    for _ in range(10)
    for op in (
        (KT.SGEMM, 880 * US, (16, 32, 1)),
        (KT.ADD_F32, 40 * US, (4096, 1, 1)),
        (KT.GELU_F32, 50 * US, (4096, 1, 1)),
        (KT.MUL_F32, 30 * US, (4096, 1, 1)),
    )
]


#: TARGET_INFO_GPU of a GeForce RTX 2080 Ti (Turing, compute capability 7.5: FP16/INT8 tensor cores, no TF32/BF16)
RTX_2080_TI: Dict[str, Any] = {"name": "NVIDIA GeForce RTX 2080 Ti", "sm_count": 68, "memory_bandwidth": 616000000000,
                               "total_memory": 11546394624, "chipName": "TU102", "computeMajor": 7, "computeMinor": 5}
#: a GeForce GTX 1660 SUPER: compute capability 7.5 too, but no tensor cores (TU116)
GTX_1660: Dict[str, Any] = {"name": "NVIDIA GeForce GTX 1660 SUPER", "sm_count": 22, "memory_bandwidth": 336000000000,
                            "total_memory": 6442450944, "chipName": "TU116", "computeMajor": 7, "computeMinor": 5}


def fp32_gemm(path: str, seed: int = 0, flavor: Optional[str] = None, gpu: Optional[Dict[str, Any]] = None
              ) -> Dict[str, Any]:
    """An FP32 MLP loop on an A100 (or ``gpu``: TARGET_INFO_GPU values) (50 steps × 10 × [sgemm 880 µs +
    add/gelu/mul 120 µs]): GPU-bound (> 99 % busy) and ``ampere_sgemm_128x64_nn`` takes ~88 % of kernel time
    (no tensor cores)."""
    sim = Sim(flavor or "2024.2", seed)
    r = Rank(sim, 13401, 0)
    g = gpu or A100
    sim.b.gpu(0, **g)
    steps = 50
    _ahead_loop(r, steps, _FP32_BODY, "mlp_step")
    write_trace(sim, path)
    total = sum(sim.by_name.values())
    f = sim.facts(
        "fp32_gemm",
        steps=steps,
        gpu_name=g["name"],
        fp32_gemm_kernel=KT.SGEMM,
        fp32_gemm_count=steps * 10,
        fp32_gemm_ns=sim.by_name[KT.SGEMM],
        fp32_gemm_share=sim.by_name[KT.SGEMM] / total,
        busy_pct_min=99,
    )
    return model_facts(f, sim.b, r.key, "queued", "")


def fp32_gemm_turing(path: str, seed: int = 0, flavor: Optional[str] = None) -> Dict[str, Any]:
    """:func:`fp32_gemm` on a GeForce RTX 2080 Ti (compute capability 7.5): tensor cores take FP16 only, so the
    lever is FP16 autocast, never TF32 or bfloat16."""
    return fp32_gemm(path, seed, flavor, RTX_2080_TI)


def fp32_gemm_no_tensor_cores(path: str, seed: int = 0, flavor: Optional[str] = None) -> Dict[str, Any]:
    """:func:`fp32_gemm` on a GeForce GTX 1660 SUPER (compute capability 7.5 without tensor cores): no
    precision claim can be made; the loop is GPU-bound."""
    f = fp32_gemm(path, seed, flavor, GTX_1660)
    f["cause"] = "gpu_bound"
    return f


def compiled_elementwise(path: str, seed: int = 0, flavor: Optional[str] = None) -> Dict[str, Any]:
    """A forward-only BF16 loop under ``torch.compile`` on an A100 (40 steps × 8 × [GEMM 250 µs + four Inductor
    ``triton_poi_`` / ``triton_red_`` kernels of 30–70 µs]): GPU-bound, the pointwise Triton kernels ~29 % of kernel
    time. ``torch.compile`` is already in use, so no advice may tell the user to adopt it."""
    sim = Sim(flavor or "2024.2", seed)
    r = Rank(sim, 13403, 0)
    sim.b.gpu(0, **A100)
    tri = [n for n in triton_names(6) if "softmax" not in n]        # pointwise and reduction kernels only
    body: List[Op] = [op for _ in range(8) for op in (
        (KT.GEMM_QKV, 250 * US, (24, 16, 1)), (tri[0], 70 * US, (4096, 1, 1)), (tri[1], 40 * US, (2048, 1, 1)),
        (tri[2], 60 * US, (4096, 1, 1)), (tri[3], 30 * US, (2048, 1, 1)))]
    steps = 40
    _ahead_loop(r, steps, body, "forward")
    write_trace(sim, path)
    total = sum(sim.by_name.values())
    f = sim.facts("gpu_bound", steps=steps, triton_kernel_names=tri,
                  triton_share=sum(sim.by_name[n] for n in tri) / total,
                  pointwise_share_pct=100.0 * sum(sim.by_name[n] for n in tri if n.startswith("triton_poi_")) / total,
                  busy_pct_min=95)
    return model_facts(f, sim.b, r.key, "queued", "")


def _layer_fwd(s: float) -> List[Op]:
    return [
        (KT.LAYER_NORM, int(15 * US * s), (2048, 1, 1)),
        (KT.GEMM_QKV, int(180 * US * s), (24, 16, 1)),
        (KT.FLASH_FWD, int(120 * US * s), (16, 32, 4)),
        (KT.GEMM_O, int(60 * US * s), (32, 16, 1)),
        (KT.ADD_BF16, int(10 * US * s), (2048, 1, 1)),
        (KT.LAYER_NORM, int(15 * US * s), (2048, 1, 1)),
        (KT.GEMM_UP, int(240 * US * s), (32, 16, 1)),
        (KT.GELU_BF16, int(30 * US * s), (8192, 1, 1)),
        (KT.GEMM_UP, int(240 * US * s), (16, 16, 1)),
        (KT.ADD_BF16, int(10 * US * s), (2048, 1, 1)),
    ]


def _layer_bwd(s: float) -> List[Op]:
    return [
        (KT.GEMM_DGRAD, int(240 * US * s), (32, 16, 1)),
        (KT.GEMM_WGRAD, int(240 * US * s), (32, 16, 1)),
        (KT.GELU_BWD, int(35 * US * s), (8192, 1, 1)),
        (KT.GEMM_DGRAD, int(240 * US * s), (16, 16, 1)),
        (KT.GEMM_WGRAD, int(240 * US * s), (16, 16, 1)),
        (KT.LAYER_NORM_BWD, int(25 * US * s), (2048, 1, 1)),
        (KT.GAMMA_BETA_BWD, int(20 * US * s), (64, 1, 1)),
        (KT.GEMM_DGRAD, int(60 * US * s), (32, 16, 1)),
        (KT.GEMM_WGRAD, int(60 * US * s), (32, 16, 1)),
        (KT.FLASH_BWD_DOT, int(12 * US * s), (64, 32, 1)),
        (KT.FLASH_BWD, int(260 * US * s), (8, 32, 4)),
        (KT.FLASH_BWD_CONVERT, int(10 * US * s), (64, 32, 1)),
        (KT.GEMM_DGRAD, int(180 * US * s), (24, 16, 1)),
        (KT.GEMM_WGRAD, int(180 * US * s), (24, 16, 1)),
        (KT.LAYER_NORM_BWD, int(25 * US * s), (2048, 1, 1)),
        (KT.GAMMA_BETA_BWD, int(20 * US * s), (64, 1, 1)),
    ]


_LOSS_FWD: List[Op] = [(KT.SOFTMAX_FWD, 90 * US, (4096, 1, 1)), (KT.NLL_FWD, 20 * US, (1, 1, 1))]
_LOSS_BWD: List[Op] = [(KT.NLL_BWD, 20 * US, (4096, 1, 1)), (KT.SOFTMAX_BWD, 90 * US, (4096, 1, 1))]
_OPTIM: List[Op] = [(KT.GRAD_NORM, 80 * US, (320, 1, 1))] + [(KT.ADAM, 300 * US, (320, 1, 1))] * 4


def _backward(r: Rank, ag_tid: int, ag_gtid: int, ag_cpu: int, layers: int) -> int:
    """``loss.backward()``: the autograd thread launches the backward kernels while the main thread waits
    in ``pthread_cond_wait`` (OSRT row); returns the autograd thread's clock afterwards."""
    sim = r.sim
    wait0 = r.cpu
    main = (r.tid, r.gtid)
    r.tid, r.gtid = ag_tid, ag_gtid
    r.cpu = max(ag_cpu, wait0 + sim.jit(15 * US, 0.2))
    for name, dur, grid in _LOSS_BWD + [op for _l in range(layers) for op in _layer_bwd(1.0)]:
        r.launch(name, dur, grid=grid)
    ag_cpu = r.cpu
    r.tid, r.gtid = main
    r.cpu = ag_cpu + sim.jit(12 * US, 0.2)
    sim.b.osrt(wait0 + 2 * US, r.cpu - 2 * US, tid_g=r.gtid, name="pthread_cond_wait")
    return ag_cpu


def training_step(path: str, seed: int = 0, flavor: Optional[str] = None) -> Dict[str, Any]:
    """15 training steps of a 12-layer BF16 transformer on an A100: forward on the main thread, backward
    kernels launched by the autograd thread ``pt_autograd_0`` (the main thread waits in
    ``pthread_cond_wait``), fused-Adam ``multi_tensor_apply_kernel`` optimizer, ``loss.item()`` sync.
    GPU-bound (≥ 95 % busy)."""
    sim = Sim(flavor or "2024.2", seed)
    r = Rank(sim, 13501, 0)
    sim.b.gpu(0, **A100)
    ag_tid = r.pid + 1
    ag_gtid = sim.b.thread(r.pid, ag_tid, "pt_autograd_0")
    ag_cpu = r.cpu
    steps, layers = 15, 12
    counts = {"forward": 0, "backward": 0, "optimizer": 0}
    for _ in range(steps):
        r.push("forward")
        for _layer in range(layers):
            for name, dur, grid in _layer_fwd(1.0):
                r.launch(name, dur, grid=grid)
        for name, dur, grid in _LOSS_FWD:
            r.launch(name, dur, grid=grid)
        r.pop()
        counts["forward"] += layers * len(_layer_fwd(1.0)) + len(_LOSS_FWD)
        r.push("backward")
        ag_cpu = _backward(r, ag_tid, ag_gtid, ag_cpu, layers)
        r.pop()
        counts["backward"] += len(_LOSS_BWD) + layers * len(_layer_bwd(1.0))
        r.push("optimizer.step")
        for name, dur, grid in _OPTIM:
            r.launch(name, dur, grid=grid)
        r.pop()
        counts["optimizer"] += len(_OPTIM)
        r.push("loss.item")
        r.memcpy_async(4, kind=2, src=2, dst=1)
        r.stream_sync()
        r.pop()
        r.host(sim.jit(30 * US, 0.2))
    write_trace(sim, path)
    f = sim.facts(
        "gpu_bound",
        workload="training",
        steps=steps,
        layers=layers,
        autograd_thread="pt_autograd_0",
        autograd_tid=ag_tid,
        forward_kernel_count=counts["forward"],
        backward_kernel_count=counts["backward"],
        optimizer_kernel_count=counts["optimizer"],
        busy_pct_min=95,
    )
    return model_facts(f, sim.b, r.key, "queued", "")
