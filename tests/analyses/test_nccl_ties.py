"""NCCL last arrivals in one file (docs/FINDINGS.md "NCCL"): a collective whose kernels all start together has no
last arriver."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from conftest import nccl_of
from synth import TraceBuilder

from nsys_llm_explainer.analyses.comms.arrival import last_arrivals
from nsys_llm_explainer.pipeline import load_model

US = 1000
T0 = 1_000_000
AR = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"


def test_collectives_that_start_together_count_for_no_last_arriver(tmp_path: Path) -> None:
    """2 ranks (pid 100 / GPU 0, pid 101 / GPU 1), 10 all-reduces 1 ms apart, all ending at t + 200 µs. Even ones:
    both start at t (skew 0, nobody last). Odd ones: pid 101 at t, pid 100 at t + 100 µs (last). So pid 100 is last
    in 5, pid 101 in 0; the wait is 5 × 100 µs = 500 µs. Before: the ties went to the highest rank index, pid 101
    "last to arrive" 5 times. The verdict (the cluster's rule, analyses/comms/arrival.py): pid 100's late arrivals
    caused all 500 µs of the waiting (100 % ≥ 60 %), at 5 ≥ 2 collectives, of 10 matched ≥ 5: pid 100 is late, pid
    101 waits, share 5 / 5 (the 5 tied ones blame nobody). (The old p50-ratio rule gave none: p50 durations 150 vs
    200 µs, ratio 1.33 < 1.5, although pid 101 waits 100 µs for pid 100 at half the collectives.)"""
    b = TraceBuilder()
    for pid in (100, 101):
        b.process(pid)
    for i in range(10):
        t = T0 + i * 1000 * US
        for pid, dev in ((100, 0), (101, 1)):
            s = t + (100 * US if (pid == 100 and i % 2) else 0)
            b.launch(t - 4 * US, t - 2 * US, s, t + 200 * US, pid=pid, tid=pid + 1, device=dev, name=AR)
    p = str(tmp_path / "t.sqlite")
    b.write(p)
    r = nccl_of(load_model(p))
    assert r.matched_collectives == 10 and r.wait_ns_total == 500 * US
    assert [(x.pid, x.last_arrival_count) for x in r.ranks] == [(100, 5), (101, 0)]
    assert [(x.pid, x.wait_ns_total, x.wait_caused_ns) for x in r.ranks] == [(100, 0, 500 * US), (101, 500 * US, 0)]
    v = r.straggler
    assert v is not None
    assert (v.late_pid, v.waiting_pid, v.wait_ns_total, v.wait_caused_share, v.last_arrivals, v.late_share,
            v.with_last_arriver, v.tied_collectives, v.confidence) == (100, 101, 500 * US, 1.0, 5, 1.0, 5, 5, "high")


def test_last_arrivals_one_rule() -> None:
    """Instances 7 (ranks 0, 1, 2 at 10, 30, 30), 3 (ranks 1, 2 at 5, 5) and 9 (ranks 0, 2 at 8, 4), in ascending
    id order 3, 7, 9: instance 3 started together (no last arriver); 7's latest start 30 is tied by ranks 1 and 2
    (the lowest rank index, 1, is last); 9's last is rank 0. last = [1, 1, 0]; contested (instances with a last
    arriver each took part in): rank 0 in 7, 9 → 2; rank 1 in 7 → 1 (3 blames nobody); rank 2 in 7, 9 → 2. Shares
    1 / 2, 1 / 1, 0 / 2; a rank in no instance has share 0.0. Waits (latest arrival − own): instance 7: 20, 0, 0;
    3: 0, 0; 9: 0, 4 → per row in input order [20, 0, 0, 0, 0, 0, 4], per rank [20, 0, 4, 0]; waiting caused: rank
    1 (last at 7) 20 + 0 = 20, rank 0 (last at 9) 4 → [4, 20, 0, 0]."""
    a = last_arrivals(np.array([7, 7, 7, 3, 3, 9, 9]), np.array([0, 1, 2, 1, 2, 0, 2]),
                      np.array([10, 30, 30, 5, 5, 8, 4]), 4)
    assert a.late.tolist() == [-1, 1, 0]
    assert (a.last.tolist(), a.contested.tolist()) == ([1, 1, 0, 0], [2, 1, 2, 0])
    assert [a.share(r) for r in range(4)] == [0.5, 1.0, 0.0, 0.0]
    assert (a.wait.tolist(), a.waited.tolist(), a.caused.tolist()) == ([20, 0, 0, 0, 0, 0, 4], [20, 0, 4, 0],
                                                                       [4, 20, 0, 0])


def test_a_tie_at_the_latest_start_goes_to_the_lowest_rank_as_in_the_cluster(tmp_path: Path) -> None:
    """3 ranks (pid 100 / GPU 0, 101 / GPU 1, 102 / GPU 2), 10 all-reduces 1 ms apart ending at t + 200 µs: pid 101
    starts at t, pids 100 and 102 at t + 100 µs (tied latest start). The one rule (the cluster's): the lowest rank
    index, pid 100, is last in all 10 (share 10 / 10) and caused all the waiting: pid 101's 10 × 100 µs = 1 ms
    (100 %). Before: ties at the latest start went to the highest index (pid 102), unlike the cluster's rank order.
    But pid 102 started with it (wait 0 ≤ a quarter of the 100 µs lateness) at all 10: the two were late together,
    and had pid 100 been on time pid 101 would still have waited 100 µs for pid 102, so no straggler is named (it
    was "late pid 100"); the reason names pid 102."""
    b = TraceBuilder()
    for pid in (100, 101, 102):
        b.process(pid)
    for i in range(10):
        t = T0 + i * 1000 * US
        for pid, dev in ((100, 0), (101, 1), (102, 2)):
            s = t + (0 if pid == 101 else 100 * US)
            b.launch(t - 4 * US, t - 2 * US, s, t + 200 * US, pid=pid, tid=pid + 1, device=dev, name=AR)
    p = str(tmp_path / "t.sqlite")
    b.write(p)
    r = nccl_of(load_model(p))
    assert [(x.pid, x.last_arrival_count) for x in r.ranks] == [(100, 10), (101, 0), (102, 0)]
    assert [x.wait_caused_ns for x in r.ranks] == [1000 * US, 0, 0]
    assert r.straggler is None
    assert "but pid 102 / GPU 2 started within a quarter of its lateness" in (r.straggler_reason or "")
