"""NCCL collectives matched across the ranks of ONE export by time (docs/FINDINGS.md "NCCL"): ranks whose capture
covers different spans (``--capture-range=cudaProfilerApi`` with cudaProfilerStart at a different step per rank, a
rank whose capture starts late) are paired over the collectives they all captured."""

from __future__ import annotations

from pathlib import Path
from typing import Dict, Iterable, Optional, Tuple

from conftest import as_report, nccl_of
from synth import TraceBuilder

from nsys_llm_explainer.analyses.comms.nccl import rank_label
from nsys_llm_explainer.analyses.comms.nccl_result import NcclResult
from nsys_llm_explainer.pipeline import Options, analyze_path, load_model
from nsys_llm_explainer.render import render_markdown

US = 1000
T0 = 1_000_000
AR = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
AG = "ncclDevKernel_AllGather_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
RANKS = ((100, 0), (101, 1), (102, 2))


def _steps(b: TraceBuilder, name: str, first_step: Dict[int, int], n: int = 10, late_pid: int = 100,
           ranks: Iterable[Tuple[int, int]] = RANKS, offset: int = 0) -> None:
    """Step i at t = T0 + offset + i ms: every rank's ``name`` kernel ends at t + 900 µs; ``late_pid`` starts it
    at t + 800 µs (100 µs), the others at t + 500 µs (400 µs, spinning). A rank's capture starts at
    ``first_step[pid]`` (0 when absent)."""
    for pid, dev in ranks:
        b.process(pid)
        b.gpu(dev)
    for i in range(n):
        t = T0 + offset + i * 1000 * US
        for pid, dev in ranks:
            if i < first_step.get(pid, 0):
                continue
            s = t + (800 if pid == late_pid else 500) * US
            b.launch(s - 6 * US, s - 2 * US, s, t + 900 * US, pid=pid, tid=pid + 1, device=dev, name=name)


def _mixed() -> TraceBuilder:
    """The all-reduces with pid 102 from step 2, plus per step an all-gather of 100 µs at t + 100 µs on pid 100
    and t + 300 µs on pid 101 (never overlapping)."""
    b = TraceBuilder()
    _steps(b, AR, {102: 2})
    for i in range(10):
        t = T0 + i * 1000 * US
        for pid, dev, at in ((100, 0, 100), (101, 1, 300)):
            s = t + at * US
            b.launch(s - 6 * US, s - 2 * US, s, s + 100 * US, pid=pid, tid=pid + 1, device=dev, name=AG)
    return b


def _run(b: TraceBuilder, tmp_path: Path, name: str = "t.sqlite") -> NcclResult:
    p = tmp_path / name
    b.write(str(p))
    return nccl_of(load_model(str(p)))


def _ranks(r: NcclResult) -> list:
    return [(x.pid, x.nccl_count, x.matched, x.p50_ns, x.mean_start_skew_ns, x.last_arrival_count) for x in r.ranks]


def _verdict(r: NcclResult) -> Optional[tuple]:
    v = r.straggler
    return None if v is None else (v.waiting_pid, v.late_pid, v.wait_ns_total, v.wait_caused_share, v.late_share,
                                   v.matched_collectives, v.confidence)


def test_rank_whose_capture_starts_two_steps_later(tmp_path: Path) -> None:
    """3 ranks, 10 steps; pid 102's capture starts at step 2 (8 kernels). In every step pid 100 starts its
    all-reduce at +800 µs, the others at +500 µs, all end at +900 µs. Truth: the 8 steps all three captured are
    the matched collectives (pid 102's k-th kernel is the reference pid 100's (k + 2)-th: shift -2), the 2 first
    steps of pids 100 and 101 are unmatched (4 kernels); in each pid 100 is last, 300 µs after the others:
    wait 8 × 300 µs = 2.4 ms; p50 100 / 400 / 400 µs; mean skew 300 / 0 / 0 µs. Verdict (analyses/comms/arrival):
    late = pid 100, last in 8 of 8, its late arrivals caused the waits of pids 101 and 102, 2 × 2.4 = 4.8 ms, all
    the waiting (share 1.0); waiting = the other rank that waits most, tied at 2.4 ms: the first, pid 101;
    confidence high (share ≥ 0.8).
    Issue order paired pid 102's step k + 2 with the others' step k: pid 102 'last' in all 8, waits of 2 ms
    each (16 ms), and no verdict because the kernels 'do not end together'."""
    b = TraceBuilder()
    _steps(b, AR, {102: 2})
    r = _run(b, tmp_path)
    assert (r.matched_collectives, r.unmatched_kernels, r.wait_ns_total) == (8, 4, 2400 * US)
    assert _ranks(r) == [(100, 10, 8, 100 * US, 300 * US, 8), (101, 10, 8, 400 * US, 0, 0),
                         (102, 8, 8, 400 * US, 0, 0)]
    assert _verdict(r) == (101, 100, 4800 * US, 1.0, 1.0, 8, "high")
    assert r.matching == "time"


def test_ranks_over_the_same_span_keep_the_k_th_with_the_k_th(tmp_path: Path) -> None:
    """The opposite case: all 3 ranks captured over the 10 steps. Every shift is 0, so the matching is the k-th
    kernel with the k-th, as issue order: 10 matched, 0 unmatched, wait 10 × 300 µs = 3 ms, pid 100 last in all
    10; the verdict stands (pid 101 waits, pid 100 caused 2 × 3 ms = 6 ms, all the waiting, share 1.0, high)."""
    b = TraceBuilder()
    _steps(b, AR, {})
    r = _run(b, tmp_path)
    assert (r.matched_collectives, r.unmatched_kernels, r.wait_ns_total, r.matching) == (10, 0, 3000 * US, "time")
    assert _ranks(r) == [(100, 10, 10, 100 * US, 300 * US, 10), (101, 10, 10, 400 * US, 0, 0),
                         (102, 10, 10, 400 * US, 0, 0)]
    assert _verdict(r) == (101, 100, 6000 * US, 1.0, 1.0, 10, "high")
    assert r.order_fallbacks is None


def test_spans_differing_at_both_ends_and_a_late_reference(tmp_path: Path) -> None:
    """(a) pid 101 captured steps 0-7 (stops early), pid 102 steps 2-9 (starts late), pid 100 all 10 (the
    reference: most kernels). Matched: steps 2-7 = 6 collectives, unmatched 10 + 8 + 8 − 18 = 8, wait 6 × 300 µs
    = 1.8 ms, pid 100 last in 6. (b) The late rank itself (pid 100) starts 3 steps late: 7 kernels; pids 101 and
    102 have 10, the reference is pid 101 (first with the most). Matched: steps 3-9 = 7, unmatched 3 + 3 = 6,
    wait 7 × 300 µs = 2.1 ms, pid 100 last in 7 (issue order: pid 100's step k + 3 against the others' step k,
    pid 100 'last' by 3.3 ms each). The waiting pid 100 caused: twice the wait total (pids 101 and 102 each wait
    300 µs per collective): 3.6 ms in (a), 4.2 ms in (b)."""
    b = TraceBuilder()
    for pid, dev in RANKS:
        b.process(pid)
        b.gpu(dev)
    _steps(b, AR, {102: 2}, ranks=((100, 0), (102, 2)))
    _steps(b, AR, {}, n=8, ranks=((101, 1),))
    r = _run(b, tmp_path, "a.sqlite")
    assert (r.matched_collectives, r.unmatched_kernels, r.wait_ns_total) == (6, 8, 1800 * US)
    assert _ranks(r) == [(100, 10, 6, 100 * US, 300 * US, 6), (101, 8, 6, 400 * US, 0, 0),
                         (102, 8, 6, 400 * US, 0, 0)]
    assert _verdict(r) == (101, 100, 3600 * US, 1.0, 1.0, 6, "high")
    b = TraceBuilder()
    _steps(b, AR, {100: 3})
    r = _run(b, tmp_path, "b.sqlite")
    assert (r.matched_collectives, r.unmatched_kernels, r.wait_ns_total, r.matching) == (7, 6, 2100 * US, "time")
    assert [(x.pid, x.matched, x.last_arrival_count) for x in r.ranks] == [(100, 7, 7), (101, 7, 0), (102, 7, 0)]
    assert _verdict(r) == (101, 100, 4200 * US, 1.0, 1.0, 7, "high")


def test_a_name_whose_kernels_never_overlap_falls_back_and_blocks_the_verdict(tmp_path: Path) -> None:
    """Mixed: the all-reduces of the first test (pid 102 from step 2: matched by time, 8) plus an all-gather on
    pids 100 and 101 only (another communicator, e.g. two pipeline stages), 100 µs each at t + 100 µs on pid 100
    and t + 300 µs on pid 101: they never overlap, so they are not one collective; that name is paired in issue
    order (10 instances, pid 101 'last' by 200 µs each: 2 ms) and listed, the result's matching is 'mixed', and no
    straggler verdict is given although the all-reduces alone would give one. Matched 8 + 10 = 18, unmatched 4,
    wait 2.4 + 2 = 4.4 ms."""
    r = _run(_mixed(), tmp_path)
    assert (r.matched_collectives, r.unmatched_kernels, r.wait_ns_total) == (18, 4, 4400 * US)
    assert (r.matching, r.order_fallbacks) == ("mixed", ("ncclDevKernel_AllGather_RING_LL",))
    assert [(x.pid, x.matched, x.last_arrival_count) for x in r.ranks] == [(100, 18, 8), (101, 18, 10),
                                                                           (102, 8, 0)]
    assert r.straggler is None
    assert r.straggler_reason == (
        "on some rank no NCCL kernel of 1 collective name(s) overlaps another rank's "
        "(ncclDevKernel_AllGather_RING_LL): kernels that never run together are not one collective, so they "
        "were paired in issue order; no straggler verdict")
    assert "in issue order for 1 name(s)" in r.how_matched()


def test_old_export_without_global_pid_in_the_kernel_table(tmp_path: Path) -> None:
    """A 2022.4-style export whose kernel table has no globalPid column and several processes: the kernels' pid is
    unknown (-1, docs/MODEL.md), so a rank is a GPU, named "GPU d". The first test's capture (GPU 2 from step 2)
    gives the same answer: 8 matched by time, 4 unmatched, wait 2.4 ms, GPU 0 last in 8, causing 2 × 2.4 = 4.8 ms of
    waiting; GPU 1 waits (the first of the two that wait most)."""
    b = TraceBuilder(flavor="2022.4", kernel_has_global_pid=False)
    _steps(b, AR, {102: 2})
    r = _run(b, tmp_path)
    assert (r.matched_collectives, r.unmatched_kernels, r.wait_ns_total, r.matching) == (8, 4, 2400 * US, "time")
    assert [(x.pid, x.device_id, x.last_arrival_count) for x in r.ranks] == [(-1, 0, 8), (-1, 1, 0), (-1, 2, 0)]
    v = r.straggler
    assert [x.rank for x in r.ranks] == ["GPU 0", "GPU 1", "GPU 2"]      # not "pid -1 / GPU 0": -1 is no pid
    assert v is not None and (v.waiting_rank, v.late_rank, v.wait_ns_total) == ("GPU 1", "GPU 0", 4800 * US)


def test_the_nccl_section_and_report_json_say_how(tmp_path: Path) -> None:
    """report.json's ``nccl.matching`` / ``order_fallbacks`` and the sentence of the NCCL section, for the mixed
    capture above (8 + 10 matched, 4 kernels outside) and for the late-capture one (time, 8 matched, 4 outside;
    no ``order_fallbacks`` key)."""
    b = TraceBuilder()
    _steps(b, AR, {102: 2})
    p = tmp_path / "late.sqlite"
    b.write(str(p))
    data = analyze_path(str(p), Options()).to_dict()
    assert data["nccl"]["matching"] == "time" and "order_fallbacks" not in data["nccl"]
    md = render_markdown(as_report(data))
    assert ("Collectives matched across ranks by name and time (the kernels that overlap): 8 matched, 4 NCCL "
            "kernels outside them.") in md
    p = tmp_path / "mixed.sqlite"
    _mixed().write(str(p))
    data = analyze_path(str(p), Options()).to_dict()
    assert (data["nccl"]["matching"], data["nccl"]["order_fallbacks"]) == ("mixed", ["ncclDevKernel_AllGather_RING_LL"])
    md = render_markdown(as_report(data))
    assert ("Collectives matched across ranks by name and time, in issue order for 1 name(s) whose kernels on some "
            "rank never overlap another rank's: 18 matched, 4 NCCL kernels outside them.") in md
    assert "No straggler: on some rank no NCCL kernel of 1 collective name(s) overlaps another rank's" in md


def test_a_rank_is_named_by_its_pid_and_gpu_or_its_gpu_alone() -> None:
    """The one rank name of the single-file report and the cluster one: "pid 100 / GPU 1" ("pid 100/GPU 1" in a
    cluster file label), "GPU 1" when the pid is the reader's -1 (no kernel globalPid); pid 0 is a pid."""
    assert (rank_label(100, 1), rank_label(0, 3), rank_label(-1, 1)) == ("pid 100 / GPU 1", "pid 0 / GPU 3", "GPU 1")
    assert (rank_label(100, 1, "/"), rank_label(-1, 2, "/")) == ("pid 100/GPU 1", "GPU 2")
