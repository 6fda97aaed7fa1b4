"""Copy-engine scenarios: a copy path sets the pace while the GEMMs run under it.

Every interval is exact (no jitter), so each number the tests check is computed by hand from the layout below.
One process, one launching thread, device 0; ``STEPS`` steps of ``P`` = 10 ms starting at ``t = T0 + k·P``:

* ``d2d_bound_step`` — the pacing path is D2D: 4 device-to-device copies on stream 20, back to back,
  ``[t, t + 9.4 ms)`` (2.35 ms and 470 MB each: 200 GB/s); 3 GEMMs on stream 7 at ``[t+0.5, t+3.0)``,
  ``[t+3.1, t+5.6)``, ``[t+5.7, t+8.2)`` ms (75 % of the step); a pinned HtoD copy ``[t+1.0, t+2.0)`` ms (25 MB)
  and a pinned DtoH copy ``[t+4.0, t+4.5)`` ms (12.5 MB) on stream 21, both under the GEMMs. Per step: D2D busy
  9.4 ms (94 %), kernels under it 7.5 ms (79.8 % of it), 1.9 ms of it beyond the kernels (all idle GPU time; the
  1.2 ms up to the last copy's end, in the gap where it ends, charged to ``copy`` / Device-to-Device, the 0.7 ms
  before GEMMs that start while the copy still runs ``queued``); the host copies are 100 % under kernels.
* ``h2d_pageable_step`` — the same step, with the 4 copies HtoD from pageable memory (28.2 MB each: 12 GB/s;
  pacing path H2D, with the pinned 25 MB HtoD under the first of them) and no DtoD copy; the pinned DtoH stays.

The host thread issues step ``k`` in ``[t − 0.2, t − 0.07)`` ms (9 copy / launch calls of 10 µs, 5 µs apart), then
waits in ``cudaStreamSynchronize`` from ``t − 0.05`` to ``t + 9.45`` ms, then runs Python work until the next issue;
the NVTX range ``step`` spans ``[t − 0.2, t + 9.79)`` ms (the steps).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from .names import K
from .rank import Rank
from .sim import MS, US, Sim
from .steps import write_trace

__all__ = ["d2d_bound_step", "h2d_pageable_step"]

STEPS = 20
P = 10 * MS
T0 = 50 * MS
D2D_COPIES = [(0, 2_350_000), (2_350_000, 4_700_000), (4_700_000, 7_050_000), (7_050_000, 9_400_000)]
PACE_BYTES = 470_000_000                  # per D2D copy: 470 MB in 2.35 ms = 200 GB/s
PAGEABLE_BYTES = 28_200_000               # per pageable H2D copy: 28.2 MB in 2.35 ms = 12 GB/s
GEMMS = [(500_000, 3_000_000), (3_100_000, 5_600_000), (5_700_000, 8_200_000)]
H2D = (1_000_000, 2_000_000, 25_000_000)  # start, end, bytes (25 GB/s)
D2H = (4_000_000, 4_500_000, 12_500_000)
GEMM_NAMES = (K.GEMM_QKV, K.GEMM_UP, K.GEMM_QKV)
STEP_END = 9_790_000                      # the NVTX range ``step`` of step k: [t − 0.2 ms, t + 9.79 ms)


def _step(r: Rank, t: int, pace_kind: int, pace_src: int, pace_dst: int, pace_bytes: int
          ) -> List[Tuple[int, int, str]]:
    """Issue one step at GPU time ``t``; return its GPU rows (start, end, what)."""
    b, pid, g = r.b, r.pid, r.gtid
    a = t - 200 * US
    b.nvtx_push_pop(a, t + STEP_END, "step", tid_g=g)
    rows: List[Tuple[int, int, str]] = []

    def call() -> Tuple[int, int]:
        nonlocal a
        span = (a, a + 10 * US)
        a += 15 * US
        return span

    for s, e in D2D_COPIES:
        a0, a1 = call()
        corr = b.runtime(a0, a1, tid_g=g, name="cudaMemcpyAsync_v3020")
        b.memcpy(t + s, t + e, pid=pid, bytes=pace_bytes, copy_kind=pace_kind, src_kind=pace_src, dst_kind=pace_dst,
                 device=0, stream=20, corr=corr)
        rows.append((t + s, t + e, "pace"))
    for (s, e, nb), kind, src, dst in ((H2D, 1, 1, 2), (D2H, 2, 2, 1)):
        a0, a1 = call()
        corr = b.runtime(a0, a1, tid_g=g, name="cudaMemcpyAsync_v3020")
        b.memcpy(t + s, t + e, pid=pid, bytes=nb, copy_kind=kind, src_kind=src, dst_kind=dst, device=0, stream=21,
                 corr=corr)
        rows.append((t + s, t + e, "H2D" if kind == 1 else "D2H"))
    for (s, e), name in zip(GEMMS, GEMM_NAMES):
        a0, a1 = call()
        b.launch(a0, a1, t + s, t + e, pid=pid, tid=r.tid, device=0, stream=7, name=name, grid=(132, 1, 1),
                 block=(256, 1, 1))
        r.sim.record(r.key, t + s, t + e, name)
        rows.append((t + s, t + e, "kernel"))
    b.runtime(t - 50 * US, t + 9_450_000, tid_g=g, name="cudaStreamSynchronize_v3020")
    return rows


def _build(path: str, seed: int, flavor: Optional[str], cause_detail: str, pace: Tuple[int, int, int, int]
           ) -> Dict[str, Any]:
    sim = Sim(flavor or "2024.2", seed)
    r = Rank(sim, 21001, 0)
    sim.b.gpu(0)
    rows: List[Tuple[int, int, str]] = []
    for k in range(STEPS):
        rows += _step(r, T0 + k * P, *pace)
    write_trace(sim, path)
    f = sim.facts("copy_bound", steps=STEPS, step_ns=P, gpu_rows=rows, pace_bytes_per_copy=pace[3])
    f["cause_kind"] = "copy_path"
    f["cause_detail"] = cause_detail
    return f


def d2d_bound_step(path: str, seed: int = 0, flavor: Optional[str] = None) -> Dict[str, Any]:
    """The D2D path sets the pace; pinned host copies run under the GEMMs (module docstring)."""
    return _build(path, seed, flavor, "Device-to-Device", (8, 2, 2, PACE_BYTES))


def h2d_pageable_step(path: str, seed: int = 0, flavor: Optional[str] = None) -> Dict[str, Any]:
    """The H2D path (pageable host memory) sets the pace; the GEMMs run under it (module docstring)."""
    return _build(path, seed, flavor, "Host-to-Device", (1, 0, 2, PAGEABLE_BYTES))
