"""Cluster claims on multi-node jobs where a whole node is late (a claims sweep: 2 nodes × 2 GPUs, one data-parallel
all-reduce across all four ranks per step; docs/CLUSTER.md "Collectives across ranks" and "Per-rank view and claims").

Each rank (node n, local GPU l; pid 4000 + l on both hosts, pids are per host): 10 steps 2 ms apart on the true
clock, a GEMM of 300 µs (+ ``extra_us``) launched 10 µs (+ ``late_us``) into the step, the all-reduce kernel starting
2 µs (+ ``jitter_us``) after the GEMM ends and ending on every rank 60 µs after the latest start. Node B's session
started 2.7 s after node A's (each node's clock on its own base); one export per rank or one per node."""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

from synth import TraceBuilder
from synth.scenarios.cluster import AR, BASE_UTC, GEMM, MS

import nsys_llm_explainer as nle
from nsys_llm_explainer.render.cluster import render_cluster_markdown

US = 1_000
NODE_GAP = 2_700 * MS
TP = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL128(ncclDevComm*, unsigned long, ncclWork*)"


def _job(tmp_path, late_us: Sequence[int], extra_us: Sequence[int], jitter_us: Sequence[int], per_node: bool,
         flavors: Sequence[str] = ("2022.4", "2026.2"), normalized: Sequence[int] = (), tp_us: int = 0,
         steady_from: int = 10) -> None:
    """Ranks 0, 1 on nodeA, 2, 3 on nodeB; per rank its launch delay, extra GEMM time and arrival jitter (µs). With
    ``tp_us``, each node's pair first runs a tensor-parallel all-reduce (its own communicator, kernel name TP on both
    nodes) ending ``tp_us`` after the pair's later arrival; the data-parallel one starts 2 µs after it. The steps
    from ``steady_from`` on are also NVTX ranges named "steady" (``--window-nvtx steady``)."""
    t0 = NODE_GAP + 50 * MS
    ks = {r: [] for r in range(4)}   # per rank: (name, start, end, stream), true clock
    for s in range(10):
        st = t0 + s * 2 * MS
        ready = {}
        for r in range(4):
            a = st + (10 + late_us[r]) * US
            ks[r].append((GEMM, a, a + (300 + extra_us[r]) * US, 7))
            ready[r] = a + (300 + extra_us[r] + 2 + jitter_us[r]) * US
        if tp_us:
            for pair in ((0, 1), (2, 3)):
                z = max(ready[r] for r in pair) + tp_us * US
                for r in pair:
                    ks[r].append((TP, ready[r], z, 13))
                    ready[r] = z + 2 * US
        z = max(ready.values()) + 60 * US
        for r in range(4):
            ks[r].append((AR, ready[r], z, 13))
            ks[r].append(("step", st, z + 8 * US, 0))
    groups = [[0, 1], [2, 3]] if per_node else [[r] for r in range(4)]
    for grp in groups:
        n = grp[0] // 2
        host = "nodeA" if n == 0 else "nodeB"
        utc = BASE_UTC + n * NODE_GAP
        b = TraceBuilder(flavors[n], seed=grp[0], utc_epoch_ns=utc, host=host)
        sh = -n * NODE_GAP + (utc if n in normalized else 0)
        if n in normalized:
            b.meta("EXPORT_PARAM_TIME_NORMALIZE", "true")
        for r in grp:
            pid, dev = 4000 + r % 2, r % 2
            b.process(pid, "python3")
            g = b.thread(pid, pid, "pt_main_thread")
            b.gpu(dev)
            for name, a, z, stream in ks[r]:
                if name == "step":
                    b.nvtx_push_pop(a + sh, z + sh, "train_step", tid_g=g)
                    if a >= t0 + steady_from * 2 * MS:
                        b.nvtx_push_pop(a + sh, z + sh, "steady", tid_g=g)
                else:
                    b.launch(a - 8 * US + sh, a - 4 * US + sh, a + sh, z + sh, pid=pid, tid=pid, device=dev,
                             stream=stream, name=name)
        b.write(str(tmp_path / (f"{host}.sqlite" if per_node else f"{host}-gpu{grp[0] % 2}.sqlite")), overwrite=True)


def _node_b_late(tmp_path, per_node: bool) -> None:
    """Node B's step work launched 150 µs late on both its GPUs (its input, its network link), its GPU 1 arriving
    2 µs after its GPU 0. Per collective (ready − the earliest, µs): A0 0, A1 0, B0 150, B1 152 → waits
    A0 152, A1 152, B0 2, B1 0, skew 152: over 10, 1.52 ms, 1.52 ms, 20 µs, 0."""
    _job(tmp_path, [0, 0, 150, 150], [0, 0, 0, 0], [0, 0, 0, 2], per_node, normalized=(1,))


def test_a_node_late_as_a_whole_is_not_blamed_on_one_rank(tmp_path):
    """Before: 'nodeB-gpu1 is the rank the others wait for … its late arrivals cause 100 % of all the waiting'
    (it is last by 2 µs; had it been on time, the others would still have waited 150 µs for nodeB-gpu0). Now
    nodeB-gpu0 arrived within a quarter of nodeB-gpu1's lateness (2 µs ≤ 152 / 4) at 10 of its 10 late arrivals:
    no late-arriver claim, a warning names the ranks late together, the Findings do not say no rank stands out."""
    _node_b_late(tmp_path, per_node=False)
    res = nle.analyze_cluster(str(tmp_path), jobs=1)
    assert res.alignment.aligned
    assert [c.id for c in res.claims if c.id == "late_arriver"] == []
    rows = {x.rank: x for x in res.collectives.ranks}
    assert {k: (x.wait_ns_total, x.last_arrival_count, x.late_with) for k, x in rows.items()} == {
        "nodeA-gpu0": (1520 * US, 0, None), "nodeA-gpu1": (1520 * US, 0, None),
        "nodeB-gpu0": (20 * US, 0, None), "nodeB-gpu1": (0, 10, ("nodeB-gpu0",))}
    assert [w for w in res.warnings if w.startswith("nodeB-gpu1 arrived last at 10 matched NCCL collectives") and
            "1 other rank(s) arrived within a quarter of its lateness (nodeB-gpu0)" in w]
    assert res.late_group == ("nodeB-gpu1", "nodeB-gpu0")
    assert type(res).from_dict(res.to_dict()).late_group == res.late_group
    md = render_cluster_markdown(res)
    assert "No single rank stands out: nodeB-gpu1, nodeB-gpu0 arrived late together" in md
    assert "No rank stands out" not in md
    many = replace(res, late_group=tuple(f"r{i}" for i in range(12)))   # a 12-rank group: 9 named
    assert "No single rank stands out: r0, r1, r2, r3, r4, r5, r6, r7, r8 and 3 more arrived late together" in \
        render_cluster_markdown(many)


def test_one_export_per_node_with_the_same_pids_keeps_the_ranks_apart(tmp_path):
    """The same job exported once per node (hosts nodeA and nodeB, which the labels name): both files hold pids 4000
    and 4001 on GPUs 0 and 1. Four ranks with the same waits, named by file and GPU (one process per GPU) as the
    devices are (before, "nodeA/pid 4000/GPU 0" in the NCCL table and "nodeA/GPU 0" in the device table); node B's
    pair is late together, no rank is claimed."""
    _node_b_late(tmp_path, per_node=True)
    res = nle.analyze_cluster(str(tmp_path), jobs=1)
    assert not [c for c in res.claims if c.id == "late_arriver"]
    assert {x.rank: (x.pid, x.device_id, x.wait_ns_total, x.late_with) for x in res.collectives.ranks} == {
        "nodeA/GPU 0": (4000, 0, 1520 * US, None), "nodeA/GPU 1": (4001, 1, 1520 * US, None),
        "nodeB/GPU 0": (4000, 0, 20 * US, None), "nodeB/GPU 1": (4001, 1, 0, ("nodeB/GPU 0",))}
    assert [d.rank for d in res.devices] == ["nodeA/GPU 0", "nodeA/GPU 1", "nodeB/GPU 0", "nodeB/GPU 1"]
    assert res.late_group == ("nodeB/GPU 1", "nodeB/GPU 0")


def test_one_slow_gpu_on_a_node_is_still_the_late_rank(tmp_path):
    """Control: only nodeB-gpu1's GEMM is 150 µs longer, nodeB-gpu0 arriving 2 µs after node A. Ready (µs after
    the step): A0 312, A1 312, B0 314, B1 462 → waits per collective 150, 150, 148, 0 (skew 150; nodeB-gpu0's 148 >
    150 / 4: not late with it): 1.50, 1.50, 1.48 ms, 0; the claim names nodeB-gpu1, at stake the others' mean wait
    (1500 + 1500 + 1480) / 3 = 1493.333 µs."""
    _job(tmp_path, [0, 0, 0, 0], [0, 0, 0, 150], [0, 0, 2, 0], per_node=False)
    res = nle.analyze_cluster(str(tmp_path), jobs=1)
    assert {x.rank: (x.wait_ns_total, x.late_with) for x in res.collectives.ranks} == {
        "nodeA-gpu0": (1500 * US, None), "nodeA-gpu1": (1500 * US, None), "nodeB-gpu0": (1480 * US, None),
        "nodeB-gpu1": (0, ())}
    late = [c for c in res.claims if c.id == "late_arriver"]
    assert [(c.rank, c.time_at_stake_ns) for c in late] == [("nodeB-gpu1", 1_493_333)]
    # the waiting it caused, (1,500 + 1,500 + 1,480) µs, over the others' captures (18.530 ms each: the last pop
    # 9 × 2 ms + 522 + 8 µs after the first push): 4,480 / (3 × 18,530) = 8.06 % ≥ 5 %
    assert {c.metric: c.observed for c in late[0].checks}["wait_pct_of_window"] == 8.06
    assert {c.metric: c.observed for c in late[0].checks}["late_with_ranks"] == 0
    assert not [w for w in res.warnings if "late together" in w] and res.late_group is None


def test_a_rank_late_by_launch_jitter_is_not_the_rank_the_others_wait_for(tmp_path):
    """nodeB-gpu1's all-reduce starts 3 µs after the others' at every step (launch jitter): the late-rank rule names
    it (last at 10 of 10, 3 × 3 µs × 10 = 90 µs caused, 100 % of the waiting; nobody within a quarter of its 3 µs),
    but each other rank captured 18.383 ms (the first step's NVTX push at t0 to the last one's pop, 9 × 2 ms + 375 +
    8 µs later): 90 / (3 × 18,383) = 0.16 % < 5 %: no late-arriver claim (docs/FINDINGS.md "NCCL", waiting that
    matters; the old code claimed it, severity high), and the Findings say why (before: "No rank stands out")."""
    _job(tmp_path, [0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 3], per_node=False)
    res = nle.analyze_cluster(str(tmp_path), jobs=1)
    assert {x.rank: (x.wait_ns_total, x.last_arrival_count, x.wait_caused_ns) for x in res.collectives.ranks} == {
        "nodeA-gpu0": (30 * US, 0, 0), "nodeA-gpu1": (30 * US, 0, 0), "nodeB-gpu0": (30 * US, 0, 0),
        "nodeB-gpu1": (0, 10, 90 * US)}
    assert [d.capture_ns for d in res.devices] == [18_383 * US] * 4
    assert [c for c in res.claims if c.id == "late_arriver"] == []
    why = ("nodeB-gpu1 arrives last in 100% (10 of 10) of the matched NCCL collectives, and its late arrivals cause "
           "100 % of all the waiting, but that is a mean 3.00 µs per other rank at each collective it arrived last "
           "at, 0.16 % of the other ranks' captured time (vs ≥ 5 %): too little waiting to name a rank the others "
           "wait for")
    assert res.late_little == why and type(res).from_dict(res.to_dict()).late_little == why
    md = render_cluster_markdown(res)
    assert f"No claim holds: {why} (every claim's preconditions" in md and "No rank stands out" not in md


def test_a_late_rank_s_waiting_counts_against_the_whole_captures_not_the_windows(tmp_path):
    """nodeB-gpu1's GEMM runs 40 µs longer: it arrives 40 µs late at all 10 all-reduces and caused 3 × 40 × 10 =
    1,200 µs, over the whole captures (18.420 ms each: the last pop 9 × 2 ms + 412 + 8 µs after the first push):
    1,200 / (3 × 18,420) = 2.17 % < 5 %: no claim. With each file's window the last 2 steps (``--window-nvtx
    steady``: 2 ms + 420 µs) the waiting is still the captures', and so is the share (before: 1,200 µs over the
    others' 3 × 2.42 ms windows, 16.53 %: a claim putting every step's waiting into two)."""
    _job(tmp_path, [0, 0, 0, 0], [0, 0, 0, 40], [0, 0, 0, 0], per_node=False, steady_from=8)
    res = nle.analyze_cluster(str(tmp_path), jobs=1, window_nvtx="steady")
    assert [(d.window_ns, d.capture_ns) for d in res.devices] == [(2_420 * US, 18_420 * US)] * 4
    assert [c for c in res.claims if c.id == "late_arriver"] == []
    assert res.late_little is not None and ", 2.17 % of the other ranks' captured time" in res.late_little


def test_tensor_parallel_pairs_sharing_a_kernel_name_are_not_no_rank_stands_out(tmp_path):
    """Node B late by 150 µs again, and each node's pair first runs its own tensor-parallel all-reduce (17 µs on node
    A, 19 µs on node B: its later rank arrives 2 µs after the other and the kernels end 15 µs after it) under one
    kernel name on both nodes. Node B's run 150 µs after node A's: on the aligned clocks they never overlap, so the
    name is matched by issue order and no rank is judged late (a warning says so). Before, the Findings read "No rank
    stands out" — node B's ranks make node A wait 150 µs per step; now they say the late rank was not judged, and
    why."""
    _job(tmp_path, [0, 0, 150, 150], [0, 0, 0, 0], [0, 0, 0, 2], per_node=False, tp_us=15)
    res = nle.analyze_cluster(str(tmp_path), jobs=1)
    assert res.collectives.order_fallbacks() == (TP.split("(")[0],)
    assert res.claims == () and res.late_group is None
    assert res.late_unjudged == ("a collective name was matched by issue order, as on the aligned clocks its "
                                 "kernels on some rank never overlap another rank's")
    md = render_cluster_markdown(res)
    assert "No rank stands out" not in md
    assert "No claim holds; whether a rank arrives late at the collectives was not judged (a collective name" in md


def _replicas(tmp_path, gemm_us: Sequence[int], steps: int = 10, period_us: Sequence[int] = (1000,) * 4) -> None:
    """One data-parallel replica per node, no collective across nodes: rank r runs a GEMM of ``gemm_us[r]`` 10 µs
    into each step (no NCCL kernel), steps ``period_us[r]`` apart, each an NVTX ``step`` range from 10 µs before the
    GEMM to 8 µs after it (GEMM + 18 µs)."""
    for r in range(4):
        n = r // 2
        b = TraceBuilder("2024.2", seed=r, utc_epoch_ns=BASE_UTC + n * NODE_GAP, host="nodeB" if n else "nodeA")
        pid = 4000 + r % 2
        b.process(pid, "python3")
        g = b.thread(pid, pid, "pt_main_thread")
        b.gpu(r % 2)
        for s in range(steps):
            a = NODE_GAP + 50 * MS + s * period_us[r] * US + 10 * US - n * NODE_GAP
            b.launch(a - 8 * US, a - 4 * US, a, a + gemm_us[r] * US, pid=pid, tid=pid, device=r % 2, name=GEMM)
            if period_us != (1000,) * 4:
                b.nvtx_push_pop(a - 10 * US, a + (gemm_us[r] + 8) * US, "step", tid_g=g)
        b.write(str(tmp_path / f"{'nodeA' if n == 0 else 'nodeB'}-gpu{r % 2}.sqlite"), overwrite=True)


def test_an_underloaded_replica_is_named_as_a_whole(tmp_path):
    """Node B's replica gets a quarter of the work: GEMMs of 400, 400 µs on node A, 100 and 101 µs on node B. Each
    file's window is its capture, from the first launch call (8 µs before the first GEMM) to the last GEMM's end:
    9,008 µs + the GEMM. Busy: node A 4,000 / 9,408 µs = 42.517 %, nodeB-gpu0 1,000 / 9,108 = 10.979 %, nodeB-gpu1
    1,010 / 9,109 = 11.088 %. Before: 'nodeB-gpu0 keeps its GPU busy less than the other ranks' against a median of
    42.517 % over the others (42.517, 42.517, 11.088), as if nodeB-gpu1 were not as idle. Now nodeB-gpu1 is within a
    quarter of nodeB-gpu0's gap (11.088 − 10.979 ≤ (42.517 − 10.979) / 4): the claim names both, compared with node
    A's median: gap 42.517 − 11.088 = 31.429 points."""
    _replicas(tmp_path, [400, 400, 100, 101])
    res = nle.analyze_cluster(str(tmp_path), jobs=1)
    claims = [c for c in res.claims if c.id == "low_busy_rank"]
    assert [(c.rank, c.title) for c in claims] == [
        ("nodeB-gpu0", "nodeB-gpu0 and nodeB-gpu1 keep their GPUs busy less than the other ranks")]
    gap = round(100 * 4000 / 9408 - 100 * 1010 / 9109, 4)
    assert {c.metric: c.observed for c in claims[0].checks}["busy_pct_gap"] == gap == 31.4291
    assert claims[0].evidence[0].startswith("GPU busy 11.0–11.1% on these 2 devices (each within a quarter of the "
                                            "lowest's gap) vs a median of 42.5% on the 2 other devices")


def test_a_slower_replica_is_not_one_rank_with_the_slowest_steps(tmp_path):
    """Node B's replica runs a longer GEMM (600 and 610 µs vs 300 µs) in 2 ms steps (node A: 1 ms). Step p50 (the
    NVTX range, GEMM + 18 µs): 318, 318, 618, 628 µs. Before: 'nodeB-gpu1 has the slowest steps' (628 / median(318,
    318, 618) = 1.97×, no exact tie), as if nodeB-gpu0 were not as slow. Now nodeB-gpu0 is within a quarter of
    nodeB-gpu1's excess (618 ≥ 628 − (628 − 318) / 4 = 550.5): step_p50_ties 1, no slowest-steps claim."""
    _replicas(tmp_path, [300, 300, 600, 610], period_us=(1000, 1000, 2000, 2000))
    res = nle.analyze_cluster(str(tmp_path), jobs=1)
    assert [d.step_p50_ns for d in res.devices] == [318 * US, 318 * US, 618 * US, 628 * US]
    assert "slow_step_rank" not in [c.id for c in res.claims]
