"""One-time-cost scenarios: a sparse warm-up (lazy module loading) before a GPU-bound loop, and a short
program made only of first launches and module loads."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Set, Tuple

from .idle_model import full_window, idle_facts, model_facts
from .names import SAMPLER, SEG1, SEG2, K, Shape
from .names_train import triton_names
from .rank import Rank
from .sim import MS, US, Sim, overlap, union
from .steps import forward, sample, write_trace

__all__ = ["bursty_warmup", "first_launch", "warmup_then_busy"]


def _launch_once(
    r: Rank, name: str, dur: int, seen: Set[str], *, grid: Tuple[int, int, int] = (132, 1, 1), api: str = ""
) -> int:
    """Launch ``name``; its first launch in the process is a lazy-loading call of 2–15 ms (the kernel
    starts as the call returns). Returns the launch call's duration."""
    sim = r.sim
    api = api or "cudaLaunchKernel_v7000"
    if name in seen:
        api_ns = sim.jit(5 * US, 0.1)
        r.launch(name, dur, grid=grid, api=api, api_ns=api_ns)
        return api_ns
    seen.add(name)
    api_ns = sim.uni(2 * MS, 15 * MS) if api.startswith("cuda") else sim.uni(60 * US, 250 * US)
    r.launch(name, dur, grid=grid, api=api, api_ns=api_ns, not_before=r.cpu + api_ns - 2 * US)
    return api_ns


def _module_load(r: Rank, name: str, lo: int, hi: int) -> int:
    """A driver module / library load call (``cuModuleLoadData``, ``cuLibraryLoadData``) of lo–hi ns."""
    dur = r.sim.uni(lo, hi)
    a0 = r.cpu
    r.b.runtime(a0, a0 + dur, tid_g=r.gtid, name=name, event_class=1)
    r.cpu = a0 + dur + r.sim.jit(20 * US, 0.2)
    return dur


def _sparse_warmup(r: Rank, n: int) -> List[int]:
    """``n`` kernels ~4.5 ms apart cycling over the decode-step kernel names (lazy first launches), with a
    ``cuModuleLoadData`` every 75 kernels; returns the first-launch call durations."""
    sim = r.sim
    shapes: List[Shape] = SEG1 + SEG2 + SAMPLER
    seen: Set[str] = set()
    first_ns: List[int] = []
    r.push("model_warmup")
    for i in range(n):
        if i % 75 == 0:
            _module_load(r, "cuModuleLoadData", 3 * MS, 6 * MS)
        r.host(sim.jit(4.5 * MS, 0.2))
        name, dur, grid = shapes[i % len(shapes)]
        new = name not in seen
        api_ns = _launch_once(r, name, dur, seen, grid=grid)
        if new:
            first_ns.append(api_ns)
    r.stream_sync()
    r.pop()
    return first_ns


def _busy_loop(r: Rank, until: int) -> int:
    """GPU-bound decode steps (host one step ahead behind an event sync) until the GPU reaches ``until``."""
    prev: Optional[Tuple[int, int]] = None
    steps = 0
    while r.gpu_done() < until:
        r.push("execute_model")
        forward([r], 16, scale=20.0)
        sample([r], scale=4.0)
        ev = r.event_record()
        if prev is not None:
            r.event_sync(prev)
        prev = ev
        r.pop()
        steps += 1
    r.event_sync(prev)  # type: ignore[arg-type]
    return steps


def warmup_then_busy(path: str, seed: int = 0, flavor: Optional[str] = None) -> Dict[str, Any]:
    """~1.5 s of sparse warm-up (300 kernels ~4.5 ms apart; the first launch of each of the 13 kernel names
    takes 2–15 ms; four ``cuModuleLoadData`` calls of 3–6 ms), then ~1 s of a GPU-bound decode loop
    (> 99 % busy, the host one step ahead behind an event sync). Healthy once the warm-up is trimmed."""
    sim = Sim(flavor or "2024.2", seed)
    r = Rank(sim, 13201, 0)
    sim.b.gpu(0)
    first_ns = _sparse_warmup(r, 300)
    warmup_kernels = sim.kernel_n.get(r.key, 0)
    warmup_end = r.cpu
    r.host(40 * MS)  # server start-up between the warm-up and the loop (longer than a window bin)
    steps = _busy_loop(r, warmup_end + 40 * MS + 1000 * MS)
    write_trace(sim, path)
    steady = union(sim.busy[r.key][warmup_kernels:])
    s0, s1 = steady[0][0], steady[-1][1]
    f = sim.facts(
        "none",
        steps=steps,
        warmup_kernel_count=warmup_kernels,
        warmup_end_ns=warmup_end,
        first_launch_count=len(first_ns),
        first_launch_api_ns_total=sum(first_ns),
        steady_start_ns=s0,
        steady_end_ns=s1,
        steady_busy_pct_min=99,
    )
    f["steady_busy_ns"] = overlap(union(sim.busy[r.key]), s0, s1)
    f["steady_busy_pct"] = 100.0 * f["steady_busy_ns"] / (s1 - s0)
    # steady-state idle: from the loop's first kernel to the end of the capture (no idle tail is planted)
    model_facts(f, sim.b, r.key, "queued", "", window=(s0, full_window(sim.b)[1]))
    fw0, fw1 = f["full_idle_window_ns"]
    f.update(idle_facts(sim.b, r.pid, r.device, fw0, fw1, prefix="full_"))
    return f


def bursty_warmup(path: str, seed: int = 0, flavor: Optional[str] = None) -> Dict[str, Any]:
    """~4 s of bursty warm-up (40 bursts of ~8 ms of decode steps, each followed by ~85 ms of host idle:
    ~10 % busy, bursts closer than the window's hole tolerance), then ~2.5 s of a GPU-bound decode loop
    (> 99 % busy). The steady window must start at the loop's first kernel, not inside the warm-up."""
    sim = Sim(flavor or "2024.2", seed)
    r = Rank(sim, 13202, 0)
    sim.b.gpu(0)
    for _ in range(40):
        for name in (K.GEMM_QKV, K.FLASH, K.GEMM_UP, K.GEMM_DOWN):
            r.launch(name, sim.uni(1800 * US, 2200 * US), grid=(132, 1, 1))
        r.stream_sync()
        r.host(sim.uni(80 * MS, 90 * MS))
    warmup_kernels = sim.kernel_n.get(r.key, 0)
    warmup_busy = union(sim.busy[r.key][:warmup_kernels])
    steps = _busy_loop(r, r.cpu + 2500 * MS)
    write_trace(sim, path)
    steady = union(sim.busy[r.key][warmup_kernels:])
    s0, s1 = steady[0][0], steady[-1][1]
    f = sim.facts("none", steps=steps, warmup_kernel_count=warmup_kernels, steady_start_ns=s0, steady_end_ns=s1,
                  warmup_busy_ns=sum(e - s for s, e in warmup_busy), warmup_start_ns=warmup_busy[0][0],
                  steady_busy_pct_min=99)
    f["steady_busy_ns"] = overlap(union(sim.busy[r.key]), s0, s1)
    f["steady_busy_pct"] = 100.0 * f["steady_busy_ns"] / (s1 - s0)
    return model_facts(f, sim.b, r.key, "queued", "", window=(s0, full_window(sim.b)[1]))


_FIRST_LAUNCH_KERNELS = [
    (K.RMS_NORM, 8 * US, (32, 1, 1)),
    (K.GEMM_QKV, 60 * US, (132, 1, 1)),
    (K.ROTARY, 8 * US, (32, 1, 1)),
    (K.RESHAPE_CACHE, 9 * US, (32, 1, 1)),
    (K.FLASH, 90 * US, (16, 32, 1)),
    (K.FLASH_SPLITKV, 40 * US, (4, 32, 8)),
    (K.PAGED_ATTN, 35 * US, (32, 32, 1)),
    (K.GEMM_O, 30 * US, (66, 1, 1)),
    (K.FUSED_ADD_RMS, 9 * US, (32, 1, 1)),
    (K.GEMM_UP, 110 * US, (132, 1, 1)),
    (K.ACT_MUL, 12 * US, (32, 1, 1)),
    (K.GEMM_DOWN, 60 * US, (132, 1, 1)),
    (K.LM_HEAD, 90 * US, (132, 1, 1)),
    (K.SOFTMAX, 15 * US, (32, 1, 1)),
    (K.ARGMAX, 10 * US, (32, 1, 1)),
    (K.ELEMENTWISE, 5 * US, (64, 1, 1)),
    (K.COPY, 6 * US, (64, 1, 1)),
    (K.TOPK_SOFTMAX, 12 * US, (32, 1, 1)),
    (K.FP8_QUANT, 10 * US, (64, 1, 1)),
    (K.GEMM_AMPERE, 70 * US, (108, 1, 1)),
]


def first_launch(path: str, seed: int = 0, flavor: Optional[str] = None) -> Dict[str, Any]:
    """A short program (~0.3 s, no steady loop): 30 kernel names launched once or twice each. The first
    ``cudaLaunchKernel`` of each of the 20 CUDA-C++ kernels takes 2–15 ms (lazy module loading), later
    launches ~5 µs; each of the 10 Triton kernels is preceded by a ``cuModuleLoadData`` of 3–8 ms and
    launched with ``cuLaunchKernel``; one ``cuLibraryLoadData`` of 5–9 ms opens the program."""
    sim = Sim(flavor or "2024.2", seed)
    r = Rank(sim, 13301, 0)
    sim.b.gpu(0)
    seen: Set[str] = set()
    module_ns = [_module_load(r, "cuLibraryLoadData", 5 * MS, 9 * MS)]
    first_ns: List[int] = []
    later_ns: List[int] = []
    program: List[Tuple[str, int, Tuple[int, int, int], str]] = [
        (n, d, g, "cudaLaunchKernel_v7000") for n, d, g in _FIRST_LAUNCH_KERNELS
    ]
    for i, name in enumerate(triton_names(10)):
        program.insert(2 + 2 * i, (name, 10 * US + 2 * US * i, (256, 1, 1), "cuLaunchKernel"))
    for name, dur, grid, api in program:
        if api == "cuLaunchKernel":
            module_ns.append(_module_load(r, "cuModuleLoadData", 3 * MS, 8 * MS))
        r.host(sim.jit(40 * US, 0.2))
        first_ns.append(_launch_once(r, name, dur, seen, grid=grid, api=api))
        if sim.rng.random() < 0.5:
            r.host(sim.jit(30 * US, 0.2))
            later_ns.append(_launch_once(r, name, dur, seen, grid=grid, api=api))
    r.stream_sync()
    write_trace(sim, path)
    f = sim.facts(
        "one_time",
        kernel_names=len(program),
        first_launch_count=len(first_ns),
        first_launch_api_ns_total=sum(first_ns),
        first_cuda_launch_api_ns_total=sum(ns for ns, p in zip(first_ns, program) if p[3].startswith("cuda")),
        later_launch_count=len(later_ns),
        later_launch_api_ns_max=max(later_ns, default=0),
        module_load_call_count=len(module_ns),
        module_load_api_ns_total=sum(module_ns),
    )
    return model_facts(f, sim.b, r.key, "module_load", "cudaLaunchKernel")
