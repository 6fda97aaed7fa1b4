"""Pipeline parallelism: sentences the report or the cluster report made about a GPipe pipeline that its traces
contradict. Each trace is built by hand (:func:`_gpipe`); the truth is worked out in the docstrings."""

from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Sequence, Tuple

from synth import TraceBuilder

import nsys_llm_explainer as nle
from nsys_llm_explainer.options import options_from_kwargs
from nsys_llm_explainer.pipeline import analyze_path

US = 1_000
MS = 1_000_000
BASE_UTC = 1_700_000_000 * 10**9
SR = "ncclDevKernel_SendRecv(ncclDevComm*, unsigned long, ncclWork*)"
Op = Tuple[str, int, int, int, int]   # (F|B, micro-batch, start, end, ready: when its input arrived)


def _schedule(stages: int, mbs: int, fwd: Sequence[int], steps: int) -> List[Tuple[int, Dict[int, List[Op]]]]:
    """GPipe: every stage runs the forwards of micro-batches 0..M-1, then their backwards in reverse order; stage s
    starts an op when its input arrived (20 µs after the neighbour's op ended) and its previous op ended; backward =
    2 × forward; the next step starts 200 µs after the last op of the step (the first stage's backward of mb 0)."""
    out, t = [], 1 * MS
    for _ in range(steps):
        ops: Dict[int, List[Op]] = {s: [] for s in range(stages)}
        fend: Dict[Tuple[int, int], int] = {}
        for m in range(mbs):
            for s in range(stages):
                ready = t if s == 0 else fend[(s - 1, m)] + 20 * US
                a = max(ready, ops[s][-1][3] if ops[s] else t)
                fend[(s, m)] = a + fwd[s]
                ops[s].append(("F", m, a, a + fwd[s], ready))
        bend: Dict[Tuple[int, int], int] = {}
        for m in reversed(range(mbs)):
            for s in reversed(range(stages)):
                ready = ops[s][-1][3] if s == stages - 1 else bend[(s + 1, m)] + 20 * US
                a = max(ready, ops[s][-1][3])
                bend[(s, m)] = a + 2 * fwd[s]
                ops[s].append(("B", m, a, a + 2 * fwd[s], ready))
        out.append((t, ops))
        t = max(o[3] for s in ops for o in ops[s]) + 200 * US
    return out


def _stage(b: TraceBuilder, s: int, stages: int, sched) -> None:
    """Stage ``s`` (pid 100 + s, GPU s). The host launches every kernel at the step's start, 6 µs apart: per op a
    NCCL SendRecv on stream 20 receiving its input (it spins from its launch, or the previous stream-20 kernel's end,
    until the input arrives), the op's GEMM on stream 7, a 20 µs SendRecv sending its output; then `adam_step`
    (30 µs, from 10 µs after the stage's last op or send) and a `cudaDeviceSynchronize` until 45 µs after it; the
    NVTX range `train_step` runs from the step's start to 60 µs after that last op or send."""
    pid = 100 + s
    b.process(pid)
    b.gpu(s)
    g = b.thread(pid, pid, f"stage{s}")
    c20 = 0
    for t, ops in sched:
        h = t + 5 * US
        for kind, _m, a, z, ready in ops[s]:
            if (kind == "F" and s > 0) or (kind == "B" and s < stages - 1):
                st = max(h + 8 * US, c20)
                c20 = max(ready, st + 5 * US)
                b.launch(h, h + 4 * US, st, c20, pid=pid, tid=pid, device=s, stream=20, name=SR)
                h += 6 * US
            b.launch(h, h + 4 * US, a, z, pid=pid, tid=pid, device=s, stream=7, name=f"gemm_{kind.lower()}")
            h += 6 * US
            if (kind == "F" and s < stages - 1) or (kind == "B" and s > 0):
                st = max(z, c20)
                c20 = st + 20 * US
                b.launch(h, h + 4 * US, st, c20, pid=pid, tid=pid, device=s, stream=20, name=SR)
                h += 6 * US
        last = max(ops[s][-1][3], c20)
        b.launch(h, h + 4 * US, last + 10 * US, last + 40 * US, pid=pid, tid=pid, device=s, stream=7, name="adam_step")
        c = b.runtime(h + 6 * US, last + 45 * US, tid_g=g, name="cudaDeviceSynchronize_v3020")
        b.sync(h + 6 * US, last + 45 * US, pid=pid, sync_type=0, device=s, stream=7, corr=c)
        b.nvtx_push_pop(t, last + 60 * US, "train_step", tid_g=g)


FWD_SLOW_MIDDLE = (500 * US, 1000 * US, 500 * US)   # stage 1's layers are 2× slower


def test_pipeline_stage_waiting_in_its_step_range_is_not_the_slowest(tmp_path: Path) -> None:
    """3 stages, one file each (same session start), GPipe with 4 micro-batches, 6 steps; stage 1's forward 1 ms,
    the others' 500 µs (backward 2×). Stage 1 sets every stage's pace: each step lasts 15.080 ms (last op) + 200 µs,
    a step period of 15.280 ms on every rank. Each stage's `train_step` range ends 60 µs after its own last kernel
    (op or send): stage 0 (finishes last: backward of mb 0 ends at 15.080 ms) 15.140 ms, stage 1 (its last send ends
    at 14.080 ms) 14.140 ms, stage 2 (finishes first, 9.060 ms) 9.120 ms.
    The cluster said "rank0 has the slowest steps: step time p50 15.140 ms vs a median of 11.630 ms (1.30×)" —
    false: rank0 is the fastest stage (6 ms of GEMMs a step against rank1's 12 ms); its range is longest because it
    spins in its receives until stage 1's gradients arrive, and every rank's step period is the same 15.280 ms.
    No rank has slower steps (period ratio 1.00 < 1.1): no slow_step_rank claim."""
    sched = _schedule(3, 4, FWD_SLOW_MIDDLE, 6)
    for s in range(3):
        b = TraceBuilder("2024.2", seed=s, utc_epoch_ns=BASE_UTC)
        _stage(b, s, 3, sched)
        b.write(str(tmp_path / f"rank{s}.sqlite"), overwrite=True)
    res = nle.analyze_cluster(str(tmp_path), jobs=1)
    assert {d.rank: d.step_p50_ns for d in res.devices} == {"rank0": 15_140 * US, "rank1": 14_140 * US,
                                                             "rank2": 9_120 * US}
    assert {d.rank: d.step_period_p50_ns for d in res.devices} == {f"rank{s}": 15_280 * US for s in range(3)}
    assert "slow_step_rank" not in [c.id for c in res.claims]


def _one_file(tmp_path: Path):
    sched = _schedule(3, 4, FWD_SLOW_MIDDLE, 6)
    b = TraceBuilder("2024.2")
    for s in range(3):
        _stage(b, s, 3, sched)
    p = tmp_path / "pp.sqlite"
    b.write(str(p), overwrite=True)
    return analyze_path(str(p), options_from_kwargs())


def test_point_to_point_start_skew_is_not_longer_than_a_step(tmp_path: Path) -> None:
    """(trace: the three stages of the test above in one file, pids 100..102 on GPUs 0..2) Stage 1 runs 16 SendRecv
    kernels a step (a receive and a send per op), stages 0 and 2 eight. Every real send/receive pair starts within
    one step (15.280 ms), so no rank's mean start skew can exceed it; the NCCL table printed 28,529.67 µs for
    pid 100 and 36,161.74 µs for pid 102 (kernels of different steps and peers paired). With more than two ranks,
    point-to-point kernels get no arrival figures (skew, last arrivals, wait total): each has one peer, so pairing
    across all ranks compares unrelated kernels; the reason says so. (Matching per pair of peers would give them
    back: not done.)"""
    rep = _one_file(tmp_path)
    ranks = rep.nccl.ranks
    assert ranks and all(r.mean_start_skew_ns is None or r.mean_start_skew_ns <= 15_280 * US for r in ranks), ranks
    assert [r.last_arrival_count for r in ranks] == [None, None, None] and rep.nccl.wait_ns_total == 0
    assert "point-to-point (send / recv) among 3 ranks" in (rep.nccl.straggler_reason or "")
