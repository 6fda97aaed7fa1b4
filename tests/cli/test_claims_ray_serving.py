"""Ray-based multi-process serving (a driver process that schedules, one Ray worker process per GPU that launches that
GPU's kernels, Ray's own processes). Each trace is built by hand (``_ray``); the truth is worked out in the docstrings.
Step i: the driver (pid 1000, `python3`) schedules for ``sched`` µs (an NVTX range `schedule`, one CPU sample per 100
µs), `sendmsg`s 10 µs and waits in `futex`; worker r (pid 2000 + r, `ray::RayWorkerWrapper`, GPU r) waits in
`epoll_wait` until 20 µs after the send (+ ``late_us`` for worker ``late``), `recvmsg`s 10 µs, launches 10 GEMMs back to
back (``gpu`` µs in all, + ``slow_us`` on worker ``slow``), optionally an all-reduce ending on every rank 30 µs after
the last rank's GEMMs end, `cudaStreamSynchronize`s and `sendmsg`s its reply; the next step starts 30 µs after the last
reply."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Optional

import pytest
from claims_support import finding_of
from synth import TraceBuilder

import nsys_llm_explainer as nle
from nsys_llm_explainer.options import options_from_kwargs
from nsys_llm_explainer.pipeline import analyze_path

US = 1_000
MS = 1_000_000
PY = "/usr/lib/libpython3.10.so"
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel"
AR = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"


def _ray(path: Path, *, flavor: str = "2024.2", gpus: int = 2, steps: int = 20, sched: int = 100, gpu: int = 1800,
         late: Optional[int] = None, late_us: int = 0, slow: Optional[int] = None, slow_us: int = 0,
         nccl: bool = False, raylet_busy: bool = False, only: Optional[int] = None, names: int = 1) -> str:
    """The capture of the module docstring; ``raylet_busy``: `raylet` (pid 50) sampled every 100 µs from 30 µs
    after each send to the step's last reply (never inside a worker's `epoll_wait`); ``only``: worker ``only``'s
    process alone (a per-worker export, no driver); ``names``: GEMM k is named ``GEMM_{k % names}``."""
    b = TraceBuilder(flavor, seed=gpus)
    procs = [r for r in range(gpus) if only is None or r == only]
    drv = only is None
    if drv:
        b.process(1000, "python3")
        gd = b.thread(1000, 1000, "MainThread")
        b.process(50, "raylet")
        gr = b.thread(50, 50, "raylet")
        b.process(51, "gcs_server")
    gw = {}
    for r in procs:
        b.process(2000 + r, "ray::RayWorkerWrapper")
        gw[r] = b.thread(2000 + r, 2000 + r, "ray::RayWorkerWrapper")
        b.gpu(r)
    t = 10 * MS
    prev = {r: t - MS for r in range(gpus)}
    for _ in range(steps):
        send = t + sched * US
        if drv:
            b.nvtx_push_pop(t, send, "schedule", tid_g=gd)
            for j in range(0, sched, 100):
                b.cpu_sample(t + (j + 50) * US, tid_g=gd, frames=[("schedule", PY), ("step", PY)])
            b.osrt(send, send + 10 * US, tid_g=gd, name="sendmsg")
        recv = {r: send + 20 * US + (late_us * US if r == late else 0) for r in range(gpus)}
        k_us = {r: (gpu + (slow_us if r == slow else 0)) // 10 for r in range(gpus)}
        cend = {r: recv[r] + 20 * US + 10 * k_us[r] * US for r in range(gpus)}
        ar_end = max(cend.values()) + 30 * US
        end = {r: ar_end if nccl else cend[r] for r in range(gpus)}
        for r in procs:
            pid = 2000 + r
            b.osrt(prev[r], recv[r], tid_g=gw[r], name="epoll_wait")
            b.osrt(recv[r], recv[r] + 10 * US, tid_g=gw[r], name="recvmsg")
            c = recv[r] + 10 * US
            for k in range(10):
                ks = recv[r] + 20 * US + k * k_us[r] * US
                b.launch(c + 10 * k * US, c + (10 * k + 5) * US, ks, ks + k_us[r] * US, pid=pid, tid=pid, device=r,
                         name=GEMM if names == 1 else f"{GEMM}_{k % names}")
            lc = c + 100 * US
            if nccl:
                b.launch(lc, lc + 5 * US, cend[r], ar_end, pid=pid, tid=pid, device=r, name=AR)
            cc = b.runtime(lc + 10 * US, end[r] + 5 * US, tid_g=gw[r], name="cudaStreamSynchronize_v3020")
            b.sync(lc + 11 * US, end[r] + 4 * US, pid=pid, device=r, corr=cc)
            b.osrt(end[r] + 6 * US, end[r] + 16 * US, tid_g=gw[r], name="sendmsg")
        for r in range(gpus):
            prev[r] = end[r] + 16 * US
        done = max(prev.values())
        if drv:
            b.osrt(send + 10 * US, done + 20 * US, tid_g=gd, name="futex")
            if raylet_busy:
                for j in range(int((done - send - 30 * US) // (100 * US))):
                    b.cpu_sample(send + 30 * US + j * 100 * US, tid_g=gr,
                                 frames=[("ray::raylet::NodeManager::HandleRequest", "/usr/bin/raylet")])
        t = done + 30 * US
    return b.write(str(path), overwrite=True)


def _report(path: str) -> Dict[str, Any]:
    return analyze_path(path, options_from_kwargs()).to_dict()


@pytest.mark.parametrize("flavor", ["2024.2", "2022.4"])
def test_slow_driver_idle_is_a_wait_in_epoll_naming_the_driver(tmp_path: Path, flavor: str) -> None:
    """sched 1,500 µs, GEMMs 500 µs: each worker's GPU idles from its GEMMs' end (send + 540 µs) to the next step's
    first GEMM (+ 30 + 1,500 + 40 µs later: 1.586 ms), of which the worker's `epoll_wait` holds 1.550 ms (from its
    reply's end, + 16 µs, to the next receive); the window starts at the first `schedule` range (t0) and ends at the
    last sync (t0 + 19 × 2.086 + 2.045 ms = 41.679 ms); before the first GEMM (t0 + 1.540 ms) the wait holds 1.520
    ms: 19 × 1.550 + 1.520 = 30.970 ms = 74.3 % in `epoll_wait` (not launch overhead), and the driver `python3`
    (pid 1000) is the only process sampled inside the waits: 15 samples per step × 20 = 300 of 300.
    Ray's `raylet` / `gcs_server` are not named (never sampled). Both workers wait alike (74.3 % each): the title
    names both devices, not device 0's thread alone."""
    j = _report(_ray(tmp_path / "t.sqlite", flavor=flavor, sched=1500, gpu=500))
    f = finding_of(j, "idle_osrt")
    assert f["title"] == ("The launching threads of devices 0 and 1 wait in `epoll_wait` while the GPUs idle: 74.3 % "
                          "(30.970 ms) on device 0, 74.3 % on device 1")
    assert ("CPU samples of other processes taken during these waits: `python3` (pid 1000) sampled running in 300 of "
            "the 300 samples taken inside them (every thread's but the launching thread's).") in f["evidence"]
    assert not any("raylet" in e or "gcs_server" in e for e in f["evidence"])
    assert "launch_bound" not in {x["id"] for x in j["findings"]}


def test_raylet_busy_outside_the_waits_is_not_blamed(tmp_path: Path) -> None:
    """sched 1,000 µs, GEMMs 1,000 µs, `raylet` sampled every 100 µs from send + 30 µs on (after every worker's
    `epoll_wait` ended at send + 20 µs) to the step's last reply: none of its samples falls inside a wait, so only
    the driver is named (10 samples per step × 20 = 200 of 200)."""
    j = _report(_ray(tmp_path / "t.sqlite", sched=1000, gpu=1000, raylet_busy=True))
    (w, _) = j["waits"]["launchers"]
    assert w["processes"] == [{"pid": 1000, "process": "python3", "sampled": 200, "pct_of_samples": 100.0}]


def test_straggler_waits_are_left_out_of_exposed_communication_on_every_waiting_device(tmp_path: Path) -> None:
    """4 workers, GEMMs 1,000 µs, worker 2 receives its input 400 µs late each step; the all-reduce ends 30 µs after
    worker 2's GEMMs on every rank. Workers 0, 1, 3 spin 430 µs in each all-reduce (400 µs waiting for worker 2, 30
    µs of transfer), worker 2 30 µs: exposed 3 × 8.6 + 0.6 = 26.4 ms over 4 × 34.279 ms; the three waiting ranks
    wait 8.0 ms each (24.0 ms, the straggler's `wait_ns_total`). Left out before: only device 0's 8.6 ms (its
    exposed ns, wait included the transfer), so the finding claimed 17.8 ms = 13.0 % ("the all-reduce runs with no
    compute beside it for 13.0 %"), 16 ms of it the other two devices' waits the NCCL-wait finding already claims.
    Now all 24 ms are left out: 2.4 ms (the 4 × 20 transfers of 30 µs) = 1.75 % < 10 %: no finding."""
    j = _report(_ray(tmp_path / "t.sqlite", gpus=4, sched=200, gpu=1000, late=2, late_us=400, nccl=True))
    v = j["nccl"]["straggler"]
    assert (v["late_pid"], v["wait_ns_total"]) == (2002, 24 * MS)
    assert [r["wait_ns_total"] for r in j["nccl"]["ranks"]] == [8 * MS, 8 * MS, 0, 8 * MS]
    assert "comm_exposed" not in {x["id"] for x in j["findings"]}


def test_gpu_straggler_is_named_gpu_work(tmp_path: Path) -> None:
    """As above but worker 2 receives on time and its GEMMs take 1,400 µs: at every all-reduce its GPU ran GEMMs up
    to it (the 10 GEMMs back to back, then the all-reduce at their end), 400 µs later than the others, and since the
    previous all-reduce it idled 286 µs as they did (0 µs more): "GPU work ran longer" (share 0 ≤ 0.1) is true."""
    j = _report(_ray(tmp_path / "t.sqlite", gpus=4, sched=200, gpu=1000, slow=2, slow_us=400, nccl=True))
    v = j["nccl"]["straggler"]
    assert (v["late_pid"], v["late_idle_before_p50_ns"], v["late_by_p50_ns"], v["late_idle_share_p50"]) == (
        2002, 0, 400 * US, 0.0)


def test_straggler_by_ipc_is_not_called_gpu_work(tmp_path: Path) -> None:
    """Worker 2 receives its input 400 µs late (its `epoll_wait` ends 400 µs later than the others'); its 10 GEMMs
    take 1,000 µs as on every rank and run back to back up to the all-reduce. Its GPU idled 686 µs between steps
    against 286 µs on the others since the previous all-reduce (16 + 30 + 200 + 20 + 20 µs from its end to the first
    GEMM, + 400 on worker 2): the whole 400 µs of lateness is GPU idle (launched late), none is longer GPU work; at
    the 19 all-reduces with a previous one: extra idle 400 µs, lateness 400 µs, share 1.0. Before: the idle right
    before its all-reduce, 0 → share 0 → "GPU work ran longer … compare its kernels … throttled GPU", which its
    equal kernel times contradict."""
    j = _report(_ray(tmp_path / "t.sqlite", gpus=4, sched=200, gpu=1000, late=2, late_us=400, nccl=True))
    f = finding_of(j, "nccl_wait")
    assert not any(e.startswith("GPU work ran longer") for e in f["evidence"])
    v = j["nccl"]["straggler"]
    assert (v["late_pid"], v["late_idle_before_p50_ns"], v["late_by_p50_ns"], v["late_idle_share_p50"]) == (
        2002, 400 * US, 400 * US, 1.0)
    assert any(e.startswith("Launched late: at the collectives it started last, its GPU sat idle a median 400.00 µs "
                            "longer than the earliest rank's") for e in f["evidence"])


def test_cluster_names_the_slow_to_receive_worker_launched_late(tmp_path: Path) -> None:
    """The same 4 workers exported one file each (no driver): the cluster names w2 the late arriver (100 % of the
    20 all-reduces, 8 ms of waiting per other rank); its cause must be "launched late" (its GPU idled 400 µs longer
    than the others' since the previous all-reduce, its GEMMs ran as long), not "GPU work ran longer"."""
    d = tmp_path / "split"
    d.mkdir()
    for r in range(4):
        _ray(d / f"w{r}.sqlite", gpus=4, sched=200, gpu=1000, late=2, late_us=400, nccl=True, only=r)
    res = nle.analyze_cluster(str(d), jobs=1)
    (c,) = [c for c in res.claims if c.id == "late_arriver"]
    assert c.rank == "w2"
    assert [(k.metric, k.observed, k.op) for k in c.checks][-1] == ("late_idle_share_p50", 1.0, ">=")
    w2 = {x.rank: x for x in res.collectives.ranks}["w2"]
    assert (w2.late_idle_before_p50_ns, w2.late_by_p50_ns, w2.late_idle_share_p50) == (400 * US, 400 * US, 1.0)


def _slower_by_the_driver(res) -> None:
    """The slow-driver pair's verdict, whatever k found the step: periods 1.186 / 2.586 ms over 19 iterations (per GPU:
    the two step in lockstep, docs/COMPARE.md "Noise") and 40 units each, +118.04 %, noise 0, the workers'
    `epoll_wait` the main reason (+1.400 ms per step)."""
    assert [(t.metric.p50_ns, t.metric.count, t.units) for t in res.traces] == [(1186 * US, 19, 40.0),
                                                                                 (2586 * US, 19, 40.0)]
    c = res.comparisons[0]
    assert c.verdict == "slower" and c.noise_pct == 0.0 and round(c.change_pct, 2) == 118.04
    assert c.headline[0] == "`B` is 118.0 % slower than `A` on the median iteration period: 1.186 ms → 2.586 ms."
    assert c.headline[2].startswith("Main reason: GPU idle with the host in an OS call (idle cause `osrt`) +1.400 ms "
                                    "per iteration, of which `epoll_wait` +1.400 ms")


def test_compare_slow_driver_with_healthy_is_not_no_change(tmp_path: Path) -> None:
    """Same GPU work (10 GEMMs of 100 µs, names repeating every 5), the driver schedules 100 µs vs 1,500 µs: a step
    takes 100 + 1,086 = 1,186 µs vs 2,586 µs (the GPU idles 1.4 ms longer per step in `epoll_wait`). The anchor
    (`…_0`, GEMMs 0 and 5 of a step) starts 500 µs apart within a step, then 686 / 2,086 µs across the step's host
    gap: every anchor interval holds 5 kernels (the kernel sequence repeats every instance), but the intervals last
    alike only 2 apart (500 ≥ 0.75 × 686 is false in A, 500 vs 2,086 in B), so an iteration is 2 instances, a step.
    Before, the median over half steps read 0.500 → 0.500 ms, "do not differ significantly". Now: periods 1.186 /
    2.586 ms on both GPUs (20 steps: 40 anchors, 38 periods of 2 per GPU, 19 complete iterations per GPU), +118.0 %
    = 1.4 / 1.186, noise 0 (every period equal), the main reason the workers' `epoll_wait` +1.400 ms per step."""
    a = _ray(tmp_path / "a.sqlite", sched=100, gpu=1000, names=5)
    b = _ray(tmp_path / "b.sqlite", sched=1500, gpu=1000, names=5)
    res = nle.compare([a, b], labels=["A", "B"])
    m = res.metric
    assert (m.name, m.anchor_kernel, m.anchor_repeat) == ("iteration_period_p50", f"{GEMM}_0", 2)
    assert m.reason.endswith("the kernel sequence repeats every 1 instance of the anchor kernel, its timing every 2 "
                             "instances (an anchor interval lasts alike with the one 2 later, not with the one 1 "
                             "later): an iteration is 2 instances")
    _slower_by_the_driver(res)


def test_compare_slow_driver_with_ten_anchors_a_step_is_not_no_change(tmp_path: Path) -> None:
    """10 GEMMs of 100 µs all named alike (``names=1``): the anchor runs 10 times a step, 9 intervals of 100 µs then
    one of 1,186 − 900 = 286 µs (A) / 2,586 − 900 = 1,686 µs (B); 20 steps: 200 anchors per GPU, k searched up to
    200 // 4 = 50. At k = 1 the 19 gap intervals per GPU spoil 38 of 198 pairs: 160 / 198 = 80.8 % last alike (≥ 75
    %, the first k to repeat both ways, and the median period was one GEMM's, 0.100 → 0.100 ms, "no change" for a
    run 2.2 × slower); at k = 10 all 189 pairs do (100 %), beyond noise in each trace (4 × √(0.808 × 0.192 / 396) =
    0.079 < 0.192): k = 10, a step. Periods 1.186 / 2.586 ms (190 per GPU, every one equal), 199 // 10 = 19
    complete iterations per GPU, 400 / 10 = 40 units, +118.0 %, noise 0, main reason `epoll_wait` +1.400 ms per step."""
    a = _ray(tmp_path / "a.sqlite", sched=100, gpu=1000)
    b = _ray(tmp_path / "b.sqlite", sched=1500, gpu=1000)
    res = nle.compare([a, b], labels=["A", "B"])
    m = res.metric
    assert (m.name, m.anchor_kernel, m.anchor_repeat) == ("iteration_period_p50", GEMM, 10)
    assert m.reason.endswith("the kernel sequence repeats every 1 instance of the anchor kernel, its timing every 10 "
                             "instances (100.0 % of the anchor intervals last alike with the one 10 later, 80.8 % "
                             "with the one 1 later, beyond noise): an iteration is 10 instances")
    _slower_by_the_driver(res)


def test_the_driver_and_raylet_are_named_as_processes_without_cuda_calls(tmp_path: Path) -> None:
    """sched 100 µs, GEMMs 1,800 µs, `raylet` busy: the driver (`python3`, pid 1000) has per step one `schedule`
    range, one CPU sample (one per 100 µs of 100 µs) and two OS calls (`sendmsg`, `futex`): 20, 20 and 40 over the
    20 steps; `raylet` (pid 50) is sampled every 100 µs from send + 30 µs to the step's end at send + 1,856 µs
    (recv + 20 µs + 10 GEMMs of 180 µs + 16 µs): ⌊1,826 / 100⌋ = 18 per step, 360 in all, no NVTX nor OS call.
    Most activity first: `raylet` (360) before `python3` (80); `gcs_server` (no activity) and the two workers
    (CUDA calls) are not in the list; before this, the trace section named the workers alone."""
    p = _ray(tmp_path / "t.sqlite", raylet_busy=True)
    rep = analyze_path(p, options_from_kwargs())
    assert rep.to_dict()["trace"]["other_processes"] == [
        {"pid": 50, "name": "raylet", "nvtx_ranges": 0, "cpu_samples": 360, "os_runtime_calls": 0},
        {"pid": 1000, "name": "python3", "nvtx_ranges": 20, "cpu_samples": 20, "os_runtime_calls": 40}]
    assert [p["pid"] for p in rep.to_dict()["trace"]["processes"]] == [2000, 2001]
    md = nle.render_markdown(rep)
    assert ("- Other processes with recorded activity (no CUDA calls): pid 50 `raylet` (360 CPU samples); pid 1000 "
            "`python3` (20 NVTX ranges, 20 CPU samples, 40 OS-runtime calls).") in md.splitlines()
