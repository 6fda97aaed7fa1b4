"""NCCL last arrivals in one file (docs/FINDINGS.md "NCCL"): a collective whose kernels all start together has no
last arriver."""

from __future__ import annotations

from pathlib import Path

from synth import TraceBuilder

from nsys_llm_explainer.analyses.comms.nccl import analyze_nccl
from nsys_llm_explainer.pipeline import load_model

US = 1000
T0 = 1_000_000
AR = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"


def test_collectives_that_start_together_count_for_no_last_arriver(tmp_path: Path) -> None:
    """2 ranks (pid 100 / GPU 0, pid 101 / GPU 1), 10 all-reduces 1 ms apart, all ending at t + 200 µs. Even ones:
    both start at t (skew 0, nobody last). Odd ones: pid 101 at t, pid 100 at t + 100 µs (last). So pid 100 is last
    in 5, pid 101 in 0; the wait is 5 × 100 µs = 500 µs. Before: the ties went to the highest rank index, pid 101
    "last to arrive" 5 times."""
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
    r = analyze_nccl(load_model(p))
    assert r.matched_collectives == 10 and r.wait_ns_total == 500 * US
    assert [(x.pid, x.last_arrival_count) for x in r.ranks] == [(100, 5), (101, 0)]
    assert r.straggler is None   # 5 of 10 < 60 %
