"""Context and sequence parallelism: NCCL send/recv kernel-name spellings across NCCL and exporter generations, Ulysses
sequence parallelism (an all-to-all run as NCCL SendRecv on 4 ranks, one slow rank), and the exposed-communication share
of a pipeline pair on 2 of 4 GPUs. Builders: tests/cli/test_claims_context_parallel_p2p.py."""

from __future__ import annotations

from pathlib import Path
from typing import List, Sequence, Tuple

import pytest
from test_claims_context_parallel_p2p import AR, GEMM, SLOW2, SR, US, Plan, _cluster, _pairs, _ring, _single

from nsys_llm_explainer.render.cluster import render_cluster_markdown

ATT = "flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4>>(Flash_fwd_params)"
MS = 1_000_000
NCCL27 = "ncclSendRecvKernel_copy_i8(ncclWorkElem)"                                   # NCCL 2.7 - 2.8
NCCL29 = "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)"   # 2.9 - 2.18
MANGLED = "_Z22ncclDevKernel_SendRecv24ncclDevKernelArgsStorageILm4096EE"            # left undemangled


def _rename(plan: Plan, name: str) -> Plan:
    """``plan`` with its SendRecv kernels named ``name``."""
    return {r: [(t, [(s, name if nm == SR else nm, a, z) for s, nm, a, z in ks]) for t, ks in st]
            for r, st in plan.items()}


def _ulysses(n: int, gemm: Sequence[int], steps: int = 10) -> Plan:
    """Ulysses sequence parallelism, the all-to-all as NCCL SendRecv (every rank to every rank): per step (T =
    step start), a GEMM of ``gemm[r]`` from T+10 µs; the first all-to-all posted 2 µs after it, its transfer starting
    once every rank has posted and ending on every rank 100 µs later (E1); attention 300 µs from E1 + 3 µs; the
    second all-to-all posted 2 µs after it on every rank (together), ending 100 µs later (E2); a 200 µs GEMM from
    E2 + 3 µs; next step 503 µs after E2."""
    out: Plan = {r: [] for r in range(n)}
    t = 50 * MS
    for _ in range(steps):
        post = {r: t + 12 * US + gemm[r] for r in range(n)}
        e1 = max(post.values()) + 100 * US
        p2 = e1 + 305 * US
        e2 = p2 + 100 * US
        for r in range(n):
            ks: List[Tuple[int, str, int, int]] = [
                (7, GEMM, t + 10 * US, t + 10 * US + gemm[r]), (20, SR, post[r], e1),
                (7, ATT, e1 + 3 * US, p2 - 2 * US), (20, SR, p2, e2), (7, GEMM, e2 + 3 * US, e2 + 203 * US)]
            out[r].append((t, ks))
        t = e2 + 503 * US
    return out


@pytest.mark.parametrize("name,flavor", [(NCCL27, "2021.5"), (NCCL27, "2024.2"), (MANGLED, "2023.4"),
                                         (NCCL29, "2021.5"), (NCCL29, "2023.4")])
def test_send_recv_spellings_are_point_to_point(tmp_path: Path, name: str, flavor: str) -> None:
    """(trace: the 4-rank ring of test_claims_context_parallel_p2p.py, rank 2's attention 600 µs, the SendRecv spelled
    as older NCCL / an undemangled export writes it) ``ncclSendRecvKernel_copy_i8`` (NCCL 2.7, no ``_`` before SendRecv)
    and the mangled ``…ncclDevKernel_SendRecv24ncclDevKernelArgs…`` (a digit after it) were not point-to-point: the
    ring's SendRecvs were judged as collectives of all 4 ranks and rank 0 — two hops from the straggler, never waiting
    at them — was charged 11.9 ms (590 + 200 + 400 µs a step) instead of 5.9 ms. As the ring's own test: 30 left out;
    over the 10 all-reduces waits 5.9 / 2.95 / 0 / 2.95 ms; rank 2 late, rank 0 waits most, 11.8 ms caused."""
    nc = _single(tmp_path, _rename(_ring(4, SLOW2), name), flavor).nccl
    assert (nc.matched_collectives, nc.p2p_left_out) == (40, 30)
    assert [r.wait_ns_total for r in nc.ranks] == [5_900 * US, 2_950 * US, 0, 2_950 * US]
    s = nc.straggler
    assert s is not None and (s.late_rank, s.waiting_rank, s.wait_ns_total) == (
        "pid 102 / GPU 2", "pid 100 / GPU 0", 11_800 * US)


def test_cluster_nccl27_ring_names_no_last_arriver_at_send_recv(tmp_path: Path) -> None:
    """(trace: the slow-rank ring, NCCL 2.7's ``ncclSendRecvKernel_copy_i8``, one file per rank) As the ring's cluster
    test: the SendRecv name on 4 ranks names no last arriver; over the 10 all-reduces rank 2 is last at all 10."""
    res = _cluster(tmp_path, _rename(_ring(4, SLOW2), NCCL27))
    assert [(r.rank, r.last_arrival_count, r.wait_ns_total) for r in res.collectives.ranks] == [
        ("rank0", 0, 5_900 * US), ("rank1", 0, 2_950 * US), ("rank2", 10, 0), ("rank3", 0, 2_950 * US)]
    late = [x for x in res.claims if x.id == "late_arriver"]
    assert [x.rank for x in late] == ["rank2"] and "100% (10 of 10)" in late[0].evidence[0]


SLOW_U = (300 * US, 300 * US, 500 * US, 300 * US)   # rank 2's GEMM before the first all-to-all 200 µs longer


def test_ulysses_all_to_all_reason_does_not_say_one_peer(tmp_path: Path) -> None:
    """(trace: :func:`_ulysses`, 4 ranks, rank 2's GEMM 500 µs, the others' 300) Each SendRecv exchanges with all 3
    other ranks; ranks 0, 1, 3 wait 200 µs a step for rank 2 at the first all-to-all. The reason said "each has one
    peer" — false of an all-to-all. No verdict (a hand-off looks the same), the reason names the all-to-all case.
    Exposed: ranks 0, 1, 3: (300 + 100) µs a step, rank 2 (100 + 100) µs: 14 ms over 4 devices × 10 steps."""
    rep = _single(tmp_path, _ulysses(4, SLOW_U))
    nc = rep.nccl
    assert nc.straggler is None and nc.matched_collectives == 20
    why = nc.straggler_reason or ""
    assert "one peer" not in why and "every rank in an all-to-all" in why, why
    assert [d.exposed_ns for d in rep.comm_exposure.devices] == [4 * MS, 4 * MS, 2 * MS, 4 * MS]


def test_cluster_ulysses_warning_names_the_all_to_all(tmp_path: Path) -> None:
    """(trace: the Ulysses run, one file per rank) No late-arriver claim (every matched instance is point-to-point:
    see the next test for why the kernels' ending together cannot restore it); the warning no longer says each
    send/recv has one peer."""
    res = _cluster(tmp_path, _ulysses(4, SLOW_U))
    assert "late_arriver" not in [x.id for x in res.claims]
    w = [x for x in res.warnings if "point-to-point (send / recv) collective name" in x]
    assert len(w) == 1 and "one peer" not in w[0] and "every rank in an all-to-all" in w[0], w


def _with_all_reduce(plan: Plan) -> Plan:
    """``plan`` with a data-parallel all-reduce closing every step: on every rank from 2 µs after its last kernel
    (ranks in lockstep after the second all-to-all: they start together) to 60 µs after it."""
    return {r: [(t, ks + [(21, AR, ks[-1][3] + 2 * US, ks[-1][3] + 60 * US)]) for t, ks in st]
            for r, st in plan.items()}


def test_ulysses_with_a_data_parallel_all_reduce_says_what_was_judged(tmp_path: Path) -> None:
    """(trace: the Ulysses run, rank 2's GEMM 200 µs longer, each step closed by an all-reduce that all 4 ranks start
    together) The others wait 200 µs a step for rank 2 at the first all-to-all, run as SendRecv and not judged (20
    point-to-point instances left out); the 10 all-reduces judged have no last arriver. Before: "no rank arrives late:
    in every matched collective the kernels started together" (the 20 SendRecvs were matched and did not) and, in the
    cluster, "No rank stands out"; now both say which collectives were judged."""
    plan = _with_all_reduce(_ulysses(4, SLOW_U))
    (tmp_path / "one").mkdir()
    (tmp_path / "ranks").mkdir()
    nc = _single(tmp_path / "one", plan).nccl
    assert (nc.matched_collectives, nc.p2p_left_out, nc.straggler) == (30, 20, None)
    assert nc.straggler_reason == (
        "no rank arrives late at the 10 matched collectives judged: in every one the kernels started together on "
        "every rank (the 20 point-to-point ones, where each rank waits for its own peers, are not judged)")
    res = _cluster(tmp_path / "ranks", plan)
    assert res.claims == () and res.p2p_left_out == (SR.split("(")[0],) and res.late_unjudged is None
    md = render_cluster_markdown(res)
    assert "No rank stands out (" not in md
    assert ("No rank stands out at the collectives judged; the waits at the point-to-point (send / recv) name(s) "
            f"{SR.split('(')[0]} were not judged (each kernel waits for its own peers: a ring's neighbours, a pipeline "
            "pair, or every rank in an all-to-all; see the warnings).") in md


def test_cluster_lockstep_pipeline_pairs_end_together_yet_are_not_one_collective(tmp_path: Path) -> None:
    """(decision: an "instance ends together" rule to restore the late-arriver claim for an all-to-all run as
    SendRecv) Two pipeline pairs 0→1 (GEMM 400 µs) and 2→3 (GEMM 300 µs) on one SendRecv name: per step the
    receivers post at T+15, the senders at T+412 / T+312; ends T+432 / T+332: end spread 100 µs, skew 397 µs — within
    the tolerance the code uses (spread ≤ ½ skew), as an all-to-all's (spread 0) is. Such a rule would name rank 0
    late and ranks 2, 3 waiting for it, which they never do: kernel timing cannot tell the two apart, so no claim."""
    res = _cluster(tmp_path, _pairs(4, [(0, 1), (2, 3)], {0: 400 * US, 2: 300 * US}))
    row = res.collectives.by_name[0]
    assert (row.matched, row.skew_p50_ns, row.end_spread_p50_ns) == (10, 397 * US, 100 * US)
    assert "late_arriver" not in [x.id for x in res.claims]


def test_exposed_share_is_of_the_devices_that_communicate(tmp_path: Path) -> None:
    """(trace: the pipeline pair 0→1 on 4 GPUs, ranks 2, 3 run a 300 µs GEMM a step and no NCCL) Exposed: rank 0's
    send 20 µs + rank 1's receive [T+15, T+432] 417 µs a step, 4.37 ms over 10 steps. Over devices 0-3 the title
    said 12.1 % (devices 2, 3's windows counted, holding no communication); over the 2 that communicate it is
    4.37 ms / (2 × window) = 24.1 %: scope devices (0, 1), the evidence names 2 and 3 as not counted."""
    rep = _single(tmp_path, _pairs(4, [(0, 1)], {0: 400 * US}))
    ce = rep.comm_exposure
    win = ce.window_end_ns - ce.window_start_ns
    f = next(x for x in rep.findings if x.id == "comm_exposed")
    (chk,) = f.checks
    assert chk.scope.devices == (0, 1)
    assert chk.observed == pytest.approx(100 * 4_370 * US / (2 * win))
    assert f.title.endswith(f"{chk.observed:.1f} % of the steady window") and "24.1 %" in f.title, f.title
    assert "devices 0, 1 summed" in f.evidence[0] and "device 2, device 3 ran none" in f.evidence[0], f.evidence[0]
