"""Per-step synchronization scenario: every decode step ends with a device-to-host ``cudaMemcpyAsync`` (pinned)
and ``cudaStreamSynchronize``; then 1–3 ms of host work (plain CPU around a short OS call) runs with the GPU
idle before the next step's launches. The GPU step (~4.8 ms) is longer than that host work and the host
launches far ahead of the GPU, so all of it could overlap the next step (docs/FINDINGS.md, "Per-step
synchronization"; analyses/steps/sync.py).

The facts are the generator's own arithmetic on what it planted (it never calls the package's analyses):
for sync point ``i`` (call ``[s_i, e_i)``, last kernel of its step ending at ``L_i``), the next launch call
``[a_i, a1_i)`` and its kernel start ``k_i``: the GPU is idle over ``[L_i, k_i)`` (one stream, the copy ends
before the sync returns), so the host-side idle after the sync is ``X_i = min(k_i, a1_i) − e_i`` (the part after
the launch call returns, if any, is ``queued``), of which the OS call is ``osrt``, ``min(k_i, a1_i) − a_i``
is ``launch`` and the rest ``host_cpu``; the wait ``W_i = L_i − s_i``; the overlappable part
``R_i = min(X_i, W_{i+1})`` (0 for the last sync point, which is followed by one finalize kernel).
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

from .names import K
from .rank import Rank
from .sim import US, Sim
from .steps import forward, sample, write_trace

__all__ = ["step_sync_host_work", "step_sync_loop"]

OS_CALL = "pthread_mutex_lock"


def _q(x: List[int], p: float) -> float:
    return float(np.percentile(np.asarray(x, np.float64), p)) if x else 0.0


#: ``extra(sim, rank, syncs)``: more rows written with the step-sync loop (other threads of its process), given
#: the sync points ``(s, e, L)``; returns facts added to the scenario's
Extra = Callable[[Sim, Rank, List[Tuple[int, int, int]]], Dict[str, Any]]


def step_sync_host_work(path: str, seed: int = 0, flavor: Optional[str] = None) -> Dict[str, Any]:
    return step_sync_loop(path, seed, flavor)


def step_sync_loop(path: str, seed: int = 0, flavor: Optional[str] = None, *, pid: int = 21001,
                   extra: Optional[Extra] = None) -> Dict[str, Any]:
    """The loop of :func:`step_sync_host_work` by process ``pid``; ``extra`` adds rows before the trace is
    written."""
    sim = Sim(flavor or "2024.2", seed)
    r = Rank(sim, pid, 0)
    sim.b.gpu(0)
    layers, steps = 16, 30
    syncs: List[Tuple[int, int, int]] = []         # (s, e, L) per sync point
    nxt: List[Tuple[int, int, int]] = []           # (a, a1, k) of the first launch after each sync point
    osrt: List[Tuple[int, int]] = []
    step_kernels: List[List[Tuple[int, int]]] = []
    kern_rows = sim.b.rows("kernel")
    api_rows = sim.b.rows("runtime")

    def first_launch_after(n_kernels_before: int, n_api_before: int) -> None:
        k = kern_rows[n_kernels_before]
        launch = next(a for a in api_rows[n_api_before:] if a["correlationId"] == k["correlationId"])
        nxt.append((launch["start"], launch["end"], k["start"]))

    for i in range(steps):
        nk, na = len(kern_rows), len(api_rows)
        forward([r], layers, scale=3.0)
        sample([r], scale=3.0)
        if i > 0:
            first_launch_after(nk, na)
        step_kernels.append([(k["start"], k["end"]) for k in kern_rows[nk:]])
        last = r.gpu_done()
        r.memcpy_async(256, kind=2, src=2, dst=1)     # pinned destination: the copy does not block the host
        s, e = r.stream_sync()
        syncs.append((s, e, last))
        # host work with the GPU idle: CPU, a short OS call, CPU (1–3 ms in all)
        r.host(sim.uni(400 * US, 1400 * US))
        o0 = r.cpu
        r.host(sim.uni(30 * US, 90 * US))
        sim.b.osrt(o0, r.cpu, tid_g=r.gtid, name=OS_CALL)
        osrt.append((o0, r.cpu))
        r.host(sim.uni(500 * US, 1500 * US))
    nk, na = len(kern_rows), len(api_rows)
    r.launch(K.RMS_NORM, 2500, grid=(32, 1, 1))          # a finalize kernel after the last sync (no sync follows)
    first_launch_after(nk, na)
    added = extra(sim, r, syncs) if extra is not None else {}
    write_trace(sim, path)

    n = len(syncs)
    x: List[int] = []
    by_kind: Dict[str, List[int]] = {"host_cpu": [], "osrt": [], "launch": []}
    for (_, e, _), (a, a1, k), (o0, o1) in zip(syncs, nxt, osrt):
        host_end = min(k, a1)
        x.append(host_end - e)
        by_kind["osrt"].append(o1 - o0)
        by_kind["launch"].append(host_end - a)
        by_kind["host_cpu"].append(host_end - e - (o1 - o0) - (host_end - a))
    w = [L - s for s, e, L in syncs]
    budget = w[1:] + [0]
    rr = [min(xi, bi) for xi, bi in zip(x, budget)]
    assert all(ri == xi for ri, xi in zip(rr[:-1], x[:-1])), "the GPU step must outlast the host work"
    ends = [s[1] for s in syncs]
    period = [b - a for a, b in zip(ends, ends[1:])]
    gpu = [sum(ke - ks for ks, ke in ks_) for ks_ in step_kernels[1:]]
    kernels = len(kern_rows)
    f = sim.facts("step_sync", steps=steps, layers=layers)
    f.update(
        sync_api="cudaStreamSynchronize",
        sync_points=n,
        readback_points=n,
        step_count=n - 1,
        kernels_per_step=len(step_kernels[1]),
        kernels_in_steps=sum(len(k) for k in step_kernels[1:]),
        device_kernels=kernels,
        period_p50_ns=_q(period, 50), period_p90_ns=_q(period, 90),
        exposed_ns=sum(x), exposed_p50_ns=_q(x[:-1], 50), exposed_p90_ns=_q(x[:-1], 90),
        wait_p50_ns=_q(w[1:], 50), wait_p90_ns=_q(w[1:], 90),
        overlap_ns=sum(rr),
        gpu_busy_p50_ns=_q(gpu, 50), gpu_busy_p90_ns=_q(gpu, 90),
        exposed_by_kind={k: sum(v) for k, v in by_kind.items()},
        claimed_by_kind={k: sum(v[:-1]) for k, v in by_kind.items()},   # R_i = X_i except the last (0)
        os_call=OS_CALL,
        first_sync_end_ns=ends[0], last_sync_end_ns=ends[-1],
    )
    f.update(added)
    return f
