"""Write a big synthetic Nsight Systems export (>= 5 M kernels) for benchmarks.

Usage: ``python bench/make_big_trace.py --out big.sqlite --kernels 5000000``
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Dict, List

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))   # the generator: tests/synth
from synth.builder import TraceBuilder, global_pid  # noqa: E402

_BASES = [
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize{a}x{b}x64_warpgroupsize1x1x1_execute_segment_k_off_kernel"
    "__5x_cublas",
    "nvjet_tst_{a}x{b}_64x4_2x1_v_bz_coopB_bias_TNN",
    "ampere_bf16_s16816gemm_bf16_{a}x{b}_ldg8_f2f_stages_64x3_tn",
    "void flash::flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<{a}, {b}, 128, 4, false, false, "
    "cutlass::bfloat16_t>, true, false>(Flash_fwd_params)",
    "void vllm::rms_norm_kernel<c10::BFloat16, {a}, {b}>(c10::BFloat16*, const c10::BFloat16*, int)",
    "void vllm::act_and_mul_kernel<c10::BFloat16, {a}, {b}>(c10::BFloat16*, const c10::BFloat16*, int)",
    "triton_poi_fused_add_mul_{a}_{b}",
    "ncclDevKernel_AllReduce_Sum_bf16_RING_LL_{a}x{b}(ncclDevKernelArgsStorage<4096ul>)",
]
_DIMS = [64, 128, 192, 256, 384]


def kernel_names() -> List[str]:
    """~200 distinct kernel names."""
    out = [b.format(a=a, b=c) for b in _BASES for a in _DIMS for c in _DIMS]
    return out[:200]


def make_big_trace(
    path: str, n_kernels: int = 5_000_000, seed: int = 0, flavor: str = "2024.2"
) -> Dict[str, int]:
    """Write ``n_kernels`` kernels (+ one launch API row each) for 2 processes x 1 device; return counts."""
    rng = np.random.default_rng(seed)
    b = TraceBuilder(flavor, seed=seed)
    names = kernel_names()
    name_ids = np.array([b.string(n) for n in names], dtype=np.int64)
    short_ids = np.array(
        [b.string(n.split("<")[0].split("(")[0].replace("void ", "").split("::")[-1]) for n in names],
        dtype=np.int64,
    )
    weights = 1.0 / np.arange(1, len(names) + 1) ** 0.5
    weights /= weights.sum()
    mean_dur = rng.uniform(2_000, 60_000, len(names))
    launch_rt = b.string("cudaLaunchKernel_v7000")
    launch_drv = b.string("cuLaunchKernel")
    triton_name = np.array([n.startswith("triton") for n in names])
    per_step = 400
    counts = {"kernels": 0, "runtime": 0, "nvtx": 0, "sync": 0, "memcpy": 0}
    pids = (4242, 4343)
    for pi, pid in enumerate(pids):
        n = n_kernels // len(pids) + (n_kernels % len(pids) if pi == 0 else 0)
        b.process(pid, "python3")
        gtid = b.thread(pid, pid, "python3")
        which = rng.choice(len(names), size=n, p=weights)
        which[: min(n, len(names))] = np.arange(min(n, len(names)))  # every name appears
        dur = np.maximum(800, (mean_dur[which] * rng.lognormal(0.0, 0.15, n))).astype(np.int64)
        api_dur = rng.integers(3_000, 8_000, n)
        cpu_gap = rng.integers(500, 2_500, n)
        step_end = (np.arange(n) % per_step) == per_step - 1
        cpu_gap[step_end] += 80_000  # room for a sync / memcpy between steps
        a0 = 50_000_000 + np.concatenate(([0], np.cumsum(api_dur + cpu_gap)[:-1]))
        a1 = a0 + api_dur
        lat = rng.integers(2_500, 6_000, n)
        gap = rng.integers(600, 1_500, n)
        prefix = np.concatenate(([0], np.cumsum(dur + gap)[:-1]))
        ks = np.maximum.accumulate(a0 + lat - prefix) + prefix
        ke = ks + dur
        corr = np.arange(1, n + 1, dtype=np.int64)
        is_triton = triton_name[which]
        b.add_kernels_bulk(ks, ke, pi, 7, corr, global_pid(pid), name_ids[which], short_ids[which])
        b.add_runtime_bulk(
            a0, a1, gtid, corr, np.where(is_triton, launch_drv, launch_rt), is_triton.astype(np.int64)
        )
        counts["kernels"] += n
        counts["runtime"] += n
        # NVTX step ranges, plus a sync + small DtoH copy every 25th step
        step_starts = np.arange(0, n, per_step)
        for si, s in enumerate(step_starts.tolist()):
            e = min(n, s + per_step) - 1
            b.nvtx_push_pop(int(a0[s]) - 1_000, int(a1[e]) + 1_000, "execute_model", tid_g=gtid)
            counts["nvtx"] += 1
            if si % 25 == 24 and e + 1 < n:
                t = int(a1[e]) + 3_000
                c = b.runtime(t, t + 8_000, tid_g=gtid, name="cudaMemcpyAsync_v3020")
                b.memcpy(
                    max(t + 4_000, int(ke[e]) + 1_000),
                    max(t + 4_000, int(ke[e]) + 1_000) + 2_000,
                    pid=pid,
                    bytes=512,
                    copy_kind=2,
                    src_kind=2,
                    dst_kind=1,
                    device=pi,
                    corr=c,
                )
                t += 10_000
                c = b.runtime(t, t + 60_000, tid_g=gtid, name="cudaStreamSynchronize_v3020")
                b.sync(t, t + 60_000, pid=pid, device=pi, corr=c)
                counts["runtime"] += 2
                counts["sync"] += 1
                counts["memcpy"] += 1
    b.gpu(0)
    b.gpu(1)
    b.write(path, overwrite=True)
    return counts


def main(argv: List[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--out", required=True)
    p.add_argument("--kernels", type=int, default=5_000_000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--flavor", default="2024.2")
    a = p.parse_args(argv)
    t = time.perf_counter()
    counts = make_big_trace(a.out, a.kernels, a.seed, a.flavor)
    print(f"wrote {a.out}: {counts} in {time.perf_counter() - t:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
