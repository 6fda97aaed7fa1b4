"""Multi-file scenarios: one export per rank of a tensor-parallel job, with a planted straggler.

``build_cluster(name, out_dir, seed=0)`` writes ``rank0.sqlite`` … into ``out_dir`` and returns the planted
facts: per rank the all-reduce kernel starts (common clock), its wait (Σ over all-reduces of last arrival start
− its own start), how often it arrives last, and the expected late arriver — all exact, no jitter.

``cluster_straggler``: 4 ranks (pid 5000 + r, GPU r), 10 steps of 1 ms. A step: an NVTX ``execute_model``
range; a GEMM of ``300 + 10·r`` µs (+200 µs on rank 3 in steps 0–7, +250 µs on rank 1 in steps 8–9) launched
10 µs after the step start; the all-reduce kernel starts 2 µs after the GEMM ends and ends on every rank 20 µs
after the last one started; then ``cudaStreamSynchronize``. Rank r's profiling session started ``5·r`` ms after
rank 0's (``utcEpochNs``), so its timestamps are ``common − 5·r`` ms; with ``normalized=(2,)`` rank 2 is
exported with ``--ts-normalize`` (timestamps + utcEpochNs); ``no_session=True`` writes ``utcEpochNs = 0``
(not alignable); ``second_stream=True`` runs the odd steps' all-reduces on stream 9 (as a second communicator
would). Hand-computed answers (µs): waits r0 2360, r1 1760, r2 2160, r3 460; rank 3 last in 8 of 10.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Dict, List, Sequence

from ..builder import TraceBuilder, global_tid

__all__ = ["CLUSTER_SCENARIOS", "build_cluster", "cluster_straggler", "cluster_two_comms"]

US = 1_000
MS = 1_000_000
BASE_UTC = 1_735_732_800_000_000_000
AR = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel"


def _gemm_us(r: int, s: int) -> int:
    extra = 200 if (r == 3 and s < 8) else 250 if (r == 1 and s >= 8) else 0
    return 300 + 10 * r + extra


def cluster_straggler(out_dir: str, seed: int = 0, ranks: int = 4, steps: int = 10, flavor: str = "2024.2",
                      normalized: Sequence[int] = (), no_session: bool = False,
                      second_stream: bool = False) -> Dict[str, Any]:
    os.makedirs(out_dir, exist_ok=True)
    t0 = 50 * MS
    ar_start = [[t0 + s * MS + 10 * US + _gemm_us(r, s) * US + 2 * US for s in range(steps)] for r in range(ranks)]
    ar_end = [max(ar_start[r][s] for r in range(ranks)) + 20 * US for s in range(steps)]
    paths: List[str] = []
    for r in range(ranks):
        utc = BASE_UTC + 5 * r * MS
        b = TraceBuilder(flavor, seed=seed + r, utc_epoch_ns=0 if no_session else utc)
        shift = -5 * r * MS + (utc if r in normalized else 0)   # export timestamp = common + shift
        if r in normalized:
            b.meta("EXPORT_PARAM_TIME_NORMALIZE", "true")
        pid = 5000 + r
        b.process(pid, "python3")
        g = b.thread(pid, pid, f"VllmWorker-{r}")
        b.gpu(r)
        assert g == global_tid(pid, pid)
        for s in range(steps):
            st = t0 + s * MS
            gs = st + 10 * US
            b.launch(st + shift, st + 5 * US + shift, gs + shift, gs + _gemm_us(r, s) * US + shift, pid=pid, tid=pid,
                     device=r, stream=7, name=GEMM)
            a = ar_start[r][s]
            b.launch(st + 6 * US + shift, st + 9 * US + shift, a + shift, ar_end[s] + shift, pid=pid, tid=pid,
                     device=r, stream=9 if (second_stream and s % 2) else 7, name=AR, grid=(2, 1, 1),
                     block=(512, 1, 1))
            y0, y1 = st + 12 * US, ar_end[s] + 5 * US
            corr = b.runtime(y0 + shift, y1 + shift, tid_g=g, name="cudaStreamSynchronize_v3020")
            b.sync(y0 + shift, y1 + shift, pid=pid, sync_type=3, device=r, stream=7, corr=corr)
            b.nvtx_push_pop(st + shift, y1 + 3 * US + shift, "execute_model", tid_g=g)
        p = os.path.join(out_dir, f"rank{r}.sqlite")
        b.write(p, overwrite=True)
        paths.append(p)
    last = [max(ar_start[r][s] for r in range(ranks)) for s in range(steps)]
    late = [_latest(ar_start, s) for s in range(steps)]
    waits = {r: sum(last[s] - ar_start[r][s] for s in range(steps)) for r in range(ranks)}
    return {"paths": paths, "ranks": ranks, "steps": steps, "late_rank": max(range(ranks), key=late.count),
            "late_count": {r: late.count(r) for r in range(ranks)}, "wait_ns": waits,
            "skew_ns": [last[s] - min(ar_start[r][s] for r in range(ranks)) for s in range(steps)],
            "ar_start_common_ns": ar_start, "utc_epoch_ns": [BASE_UTC + 5 * r * MS for r in range(ranks)]}


def cluster_two_comms(out_dir: str, seed: int = 0, steps: int = 10, flavor: str = "2024.2") -> Dict[str, Any]:
    """4 ranks in two tensor-parallel pairs — communicators {0, 1} and {2, 3}, the same all-reduce kernel name —
    whose steps are 300 µs apart (pair 2–3 starts later); rank 1 is 50 µs late in its pair in every step. The
    kernels of one pair end together (20 µs after the pair's last start), the two pairs' kernels do not: matched
    across all four ranks by name and issue order, the k-th kernels start 300 µs apart (610 − 310) and end 250 µs
    apart (630 − 380). Skew (clock-free, docs/CLUSTER.md): the longest kernel (rank 0's 70 µs) − the shortest (20 µs)
    = 50 µs. Clocks aligned (one session start)."""
    os.makedirs(out_dir, exist_ok=True)
    t0 = 50 * MS
    start = [[t0 + s * MS + (300 * US if r >= 2 else 0) + 310 * US + (50 * US if r == 1 else 0)
              for s in range(steps)] for r in range(4)]
    end = [[max(start[q][s] for q in range(4) if q // 2 == r // 2) + 20 * US for s in range(steps)] for r in range(4)]
    paths: List[str] = []
    for r in range(4):
        b = TraceBuilder(flavor, seed=seed + r, utc_epoch_ns=BASE_UTC)
        pid = 6000 + r
        b.process(pid, "python3")
        b.thread(pid, pid, f"rank{r}")
        b.gpu(r)
        for s in range(steps):
            a = start[r][s]
            b.launch(a - 20 * US, a - 15 * US, a, end[r][s], pid=pid, tid=pid, device=r, stream=7, name=AR)
        p = os.path.join(out_dir, f"rank{r}.sqlite")
        b.write(p, overwrite=True)
        paths.append(p)
    spread = [max(end[r][s] for r in range(4)) - min(end[r][s] for r in range(4)) for s in range(steps)]
    dur = [[end[r][s] - start[r][s] for s in range(steps)] for r in range(4)]
    skew = [max(dur[r][s] for r in range(4)) - min(dur[r][s] for r in range(4)) for s in range(steps)]
    return {"paths": paths, "ranks": 4, "steps": steps, "end_spread_ns": spread, "skew_ns": skew}


def _latest(ar_start: Sequence[Sequence[int]], s: int) -> int:
    """The rank whose all-reduce of step ``s`` starts last (ties: the lowest rank)."""
    return max(range(len(ar_start)), key=lambda r: (ar_start[r][s], -r))


CLUSTER_SCENARIOS: Dict[str, Callable[..., Dict[str, Any]]] = {
    "cluster_straggler": cluster_straggler, "cluster_two_comms": cluster_two_comms}


def build_cluster(name: str, out_dir: str, seed: int = 0, **kw: Any) -> Dict[str, Any]:
    """Write multi-file scenario ``name`` into ``out_dir`` (one file per rank) and return its planted facts."""
    if name not in CLUSTER_SCENARIOS:
        raise KeyError(f"unknown cluster scenario {name!r}; known: {', '.join(sorted(CLUSTER_SCENARIOS))}")
    facts = CLUSTER_SCENARIOS[name](out_dir, seed=seed, **kw)
    facts["scenario"] = name
    return facts
