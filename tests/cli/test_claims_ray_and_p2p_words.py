"""Words that were unclear on multi-process and point-to-point traces: the other-process advice on a Ray driver, a
cluster ring of send/recv only (not measured, not zero), send and recv split across ranks, the GPU-bound finding's time
at stake. The traces are the Ray serving ones (``_ray``, test_claims_ray_serving.py) and the rings and pipeline pairs
(``_ring``, ``_pairs``, test_claims_context_parallel_p2p.py); the truth is worked out in the docstrings."""

from __future__ import annotations

from pathlib import Path

from claims_support import finding_of, report_of
from synth import TraceBuilder
from test_claims_context_parallel_p2p import AR, SR, US, Plan, _cluster, _pairs, _ring
from test_claims_ray_serving import _ray, _report

from nsys_llm_explainer.findings.advice import ADVICE

C3_PID, C3_T = 100, 5_000_000
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1_execute_kernel__5x_cublas"
FA = "void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false>>(Flash_fwd_params)"

SEND = "ncclDevKernel_Send(ncclDevComm*, unsigned long, ncclWork*)"
RECV = "ncclDevKernel_Recv(ncclDevComm*, unsigned long, ncclWork*)"


def test_other_process_advice_names_the_driver_not_a_guessed_role(tmp_path: Path) -> None:
    """(test_claims_ray_serving.py's slow driver: sched 1,500 µs, GEMMs 500 µs) the driver `python3` (pid 1000) is
    sampled in 300 of the 300 samples inside the launching thread's waits. The advice said "a tokenizer, detokenizer,
    scheduler or API-server process" although the trace names the process: the evidence now names it as the one the
    step's input may come from, and the advice speaks of "that process", no guessed role."""
    f = finding_of(_report(_ray(tmp_path / "t.sqlite", sched=1500, gpu=500)), "idle_osrt")
    assert ("The process that ran during these waits: `python3` (pid 1000) — the step's input may come from there "
            "(the samples show that it ran then, not that the wait was for it).") in f["evidence"]
    assert ADVICE["wait.other_process"].text in f["recommendation"]
    rec = " ".join(f["recommendation"])
    assert "tokenizer" not in rec and "API-server" not in rec


def _no_ar(plan: Plan) -> Plan:
    return {r: [(t, [k for k in ks if k[1] != AR]) for t, ks in steps] for r, steps in plan.items()}


def test_cluster_ring_of_send_recv_only_is_not_measured_not_zero(tmp_path: Path) -> None:
    """The 4-rank ring of test_claims_context_parallel_p2p.py without its all-reduce (SendRecv only, 30 instances): a
    send/recv name on more than two ranks is matched (by_name 30) but left out of the ranks' matched counts, waits and
    last arrivals. The table said "matched 0, wait total 0.000" for every rank — "nobody waited" — although rank 1 spins
    200 + 295 µs a step (the ring's 7,900 µs less its all-reduce's 2,950; rank 0 6,950 − 5,900 = 1,050 µs); now those
    columns are not measured (None, "–"), the spinning still in wait_in_window_ns."""
    res = _cluster(tmp_path, _no_ar(_ring(4, (400 * US, 400 * US, 600 * US, 400 * US))))
    c = res.collectives
    assert [(r.name.split("(")[0], r.matched) for r in c.by_name] == [("ncclDevKernel_SendRecv", 30)]
    assert [(r.matched, r.wait_ns_total, r.wait_p50_ns, r.last_arrival_count, r.wait_caused_ns) for r in c.ranks] \
        == [(None, None, None, None, None)] * 4
    assert [r.wait_in_window_ns for r in c.ranks] == [1_050 * US, 4_950 * US, 0, 4_950 * US]
    assert "late_arriver" not in [x.id for x in res.claims]


def test_cluster_send_and_recv_split_across_ranks_say_why_nothing_matched(tmp_path: Path) -> None:
    """Rank 0 sends (`ncclDevKernel_Send`), rank 1 receives (`ncclDevKernel_Recv`): no name runs on two ranks, so
    nothing is matched; the reason said only "no collective could be matched across ranks"."""
    plan = _pairs(2, [(0, 1)], {0: 400 * US})
    plan = {r: [(t, [(s, (SEND if r == 0 else RECV) if n == SR else n, a, z) for s, n, a, z in ks])
                 for t, ks in steps] for r, steps in plan.items()}
    c = _cluster(tmp_path, plan).collectives
    assert c.reason == ("no collective could be matched across ranks: the ranks' kernel names differ "
                        "(ncclDevKernel_Recv on rank1, ncclDevKernel_Send on rank0): a send on one rank and its "
                        "receive on another are kernels of different names, and instances are matched by name")


def test_gpu_bound_says_its_time_at_stake_is_the_kernel_time(tmp_path: Path) -> None:
    """600 periods of 40 µs from T: a 12 µs GEMM [0, 12), a 24 µs FlashAttention [13, 37)
    (test_claims_well_optimized.py's healthy loop without its copies), launched 200 µs ahead. Busy 600 × 36 = 21,600 µs
    of the window [T, T + 23,997 µs) = 90.0 % ≥ 85: `gpu_bound`, its time at stake the busy time (docs/FINDINGS.md
    "Kernels"), 21.600 ms — which read as time to save; the evidence now says what it is."""
    b = TraceBuilder("2024.2")
    b.process(C3_PID, "python3")
    b.thread(C3_PID, C3_PID, "python3")
    b.gpu(0)
    for p in range(600):
        t = C3_T + 40 * US * p
        for s, d, name in ((0, 12, GEMM), (13, 24, FA)):
            k = t + s * US
            b.launch(k - 200 * US, k - 196 * US, k, k + d * US, pid=C3_PID, tid=C3_PID, name=name)
    f = finding_of(report_of(b, tmp_path), "gpu_bound")
    assert f["time_at_stake_ns"] == 21_600 * US
    assert ("Time at stake: the busy time, 21.600 ms — the time faster (or fewer) kernels would shorten, not time "
            "that can be saved outright.") in f["evidence"]
