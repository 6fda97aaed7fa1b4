"""Claims (start-up and autotuning, waits and step-sync sampling, the top cause, NVTX groups and ONNX Runtime, window
rule 5c and marker pauses, the cluster's late cause, the command line's exit) under every exporter generation the synth
writes (2021.5, 2022.4, 2023.4, 2024.2, 2026.2: table / column layouts of /work/shared/SCHEMA.md §8) and on exports that
lack what a claim reads (ThreadNames, PROCESSES, the memcpy ``bytes`` column, the kernels' global pid). Each trace is
the one of the rule's own test (named in the docstring) written under each generation; the numbers are that test's
hand-computed ones: the same claim where the generation records what it needs. The generation is chosen by the builder's
default flavor (``_flavor``)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Tuple

import pytest
import test_claims_one_time_work as once
import test_claims_rl_post_training as rl_post_training
import test_claims_top_cause_onnx_and_nvtx_groups as top_cause
import test_step_sync_host_sampling as sync_sampling
import test_waits_other_process as other
from claims_support import finding_of
from synth import FLAVORS, TraceBuilder
from synth.scenarios.cluster import AR, BASE_UTC, GEMM
from synth.store import RowStore

import nsys_llm_explainer as nle
from nsys_llm_explainer.analyses.steps.metrics import analyze_steps
from nsys_llm_explainer.findings.advice import ADVICE
from nsys_llm_explainer.options import options_from_kwargs
from nsys_llm_explainer.pipeline import analyze_path, load_model
from nsys_llm_explainer.render import render_all

US = 1_000
MS = 1_000 * US
GENERATIONS = sorted(FLAVORS)
SRC = str(Path(__file__).resolve().parents[2] / "src")


@pytest.fixture(params=GENERATIONS)
def flavor(request: Any) -> Iterator[str]:
    """Every ``TraceBuilder()`` made during the test writes this exporter generation."""
    saved = RowStore.__init__.__defaults__
    RowStore.__init__.__defaults__ = (request.param,)
    try:
        yield request.param
    finally:
        RowStore.__init__.__defaults__ = saved


def _of(gen: str, make: Callable[[], TraceBuilder]) -> TraceBuilder:
    """``make()`` with every ``TraceBuilder()`` in it writing generation ``gen``."""
    saved = RowStore.__init__.__defaults__
    RowStore.__init__.__defaults__ = (gen,)
    try:
        return make()
    finally:
        RowStore.__init__.__defaults__ = saved


def _analyze(b: TraceBuilder, tmp_path: Path, sql: Tuple[str, ...] = (), **options: Any) -> Tuple[Dict[str, Any], str]:
    """``b`` written, ``sql`` run on the export (a table or column taken away), analysed: (report.json dict,
    report.md)."""
    p = tmp_path / "t.sqlite"
    b.write(str(p), overwrite=True)
    if sql:
        con = sqlite3.connect(str(p))
        for q in sql:
            con.execute(q)
        con.commit()
        con.close()
    rep = analyze_path(str(p), options_from_kwargs(**options))
    render_all(rep, tmp_path / "out")
    return rep.to_dict(), (tmp_path / "out" / "report.md").read_text()


def _check(f: Dict[str, Any], metric: str) -> float:
    return next(c["observed"] for c in f["checks"] if c["metric"] == metric)


def _by_cause(rep: Dict[str, Any], kind: str) -> Dict[str, Any]:
    (f,) = [f for f in rep["findings"] if f.get("cause") and f["cause"]["kind"] == kind]
    return f


# ------------------------------------------------------------------------------------------ every generation
@pytest.mark.slow
def test_start_up_and_autotuning_claims_under_every_generation(tmp_path: Path, flavor: str) -> None:
    """(test_claims_one_time_work) cudaHostRegister [0, 300 µs) then 100 kernels from 310 µs, window [0, 1,309 µs): all
    300 µs of `other_api` in the leading gap → "Start-up, not the loop", 100 % of the cause. The autotuning pass (10 ×
    (50 µs cudaMalloc + 5 `redzone_checker` trials)) then 100 warm gemms, window [0, 2,109 µs): trials hold 450 of the
    pass's 450 µs of kernel time → "Autotuning allocations, not the loop". Nothing these read (CUDA API and kernel rows)
    differs between generations."""
    b, g = once._builder()
    b.runtime(0, 300 * US, tid_g=g, name=once.REG)
    once._loop(b, 310 * US, 100)
    rep, _ = _analyze(b, tmp_path, window=(0, 1_309 * US))
    f = _by_cause(rep, "other_api")
    assert f["title"].startswith("Start-up, not the loop: GPU idle in other CUDA API calls (`cudaHostRegister`) "
                                 "before the GPU's first kernel, "), f["title"]
    assert (f["category"], _check(f, "startup_pct_of_cause")) == ("one_time", 100.0)
    b, g = once._builder()
    t = once._autotune_pass(b, g)
    once._loop(b, t + 10 * US, 100)
    rep, _ = _analyze(b, tmp_path, window=(0, 2_109 * US))
    f = _by_cause(rep, "alloc")
    assert f["title"].startswith("Autotuning allocations, not the loop: `cudaMalloc` holds "), f["title"]
    assert (f["category"], _check(f, "autotune_trial_pct")) == ("one_time", 100.0)


@pytest.mark.slow
def test_waits_and_step_sync_sampling_claims_under_every_generation(tmp_path: Path, flavor: str) -> None:
    """(test_waits_other_process._trace) `detokenizer` (pid 200) is sampled 10 times in each of the 19 waits of the
    window: 190 of 190 samples → named, advice `wait.other_process`. (test_step_sync_host_sampling._trace) 19
    steps reading back 256 KiB = 262.14 kB and sending 8 B, 12 samples in `_apply_min_p` per gap: 228 of 228 →
    the GPU-sampling advice. CPU samples, OS runtime rows and memcpy bytes are in every generation's layout (the
    2021.5 / 2022.4 callchains write NULL `kernelMode` / `unresolved`: user frames all the same)."""
    rep, md = _analyze(other._trace(), tmp_path)
    f = finding_of(rep, "idle_osrt")
    assert ("CPU samples of other processes taken during these waits: `detokenizer` (pid 200) sampled running in 190 "
            "of the 190 samples taken inside them (every thread's but the launching thread's).") in f["evidence"]
    assert f["recommendation"] == [ADVICE["wait.other_process"].text]
    assert "**Waits of the launching thread** `EngineCore` (tid 1): 19.760 ms in OS calls" in md
    rep, _ = _analyze(sync_sampling._trace(), tmp_path)
    f = finding_of(rep, "step_sync")
    assert any(e.startswith("On 19 of its 19 steps the thread reads back 262.14 kB (p50) before the sync and sends "
                            "8 B (p50) to the GPU before its next launch, and 100 % of its 228 CPU samples in the gaps "
                            "are in sampling code (`_apply_min_p`)") for e in f["evidence"]), f["evidence"]
    assert f["recommendation"] == [ADVICE["step_sync.gpu_sampling"].text]


@pytest.mark.slow
def test_top_cause_nvtx_groups_and_onnx_claims_under_every_generation(tmp_path: Path, flavor: str) -> None:
    """(test_claims_top_cause_onnx_and_nvtx_groups) The top cause: `alloc` 29.820 ms of device 0's 30.090 ms of idle =
    99.1 %. NVTX groups: 12 ranges under 9 names, 3 groups once numbers read as N (NVTX text inline, no domain rows: the
    same in every layout). ONNX Runtime: 200 × (400 µs SGEMM + 50 µs ORT add): FP32 GEMMs 88.9 % of kernel time, stack
    `onnxruntime`."""
    _, md = _analyze(top_cause._alloc_loop(), tmp_path)
    assert "**Top cause:** `alloc` (largest `cudaMalloc`) — 29.820 ms at stake, 99.1 % of the GPU idle time." in md
    rep, md = _analyze(top_cause._per_op_ranges(), tmp_path)
    assert [(g["name"], g["count"]) for g in rep["nvtx"]["groups"]] == [
        ("step", 4), ("aten::add, seq = N", 4), ("aten::mm, seq = N", 4)]
    assert "12 ranges (whole capture): 9 rows by name and style, 3 once the numbers in the names are read as N" in md
    b = TraceBuilder()
    b.gpu(0, "NVIDIA A100-SXM4-80GB", sm_count=108, computeMajor=8, computeMinor=0)
    b.process(100, "python3")
    b.thread(100, 1)
    t = MS
    for _ in range(200):
        b.launch(t, t + 5 * US, t + 10 * US, t + 410 * US, pid=100, tid=1, name="ampere_sgemm_128x64_nn")
        b.launch(t + 6 * US, t + 11 * US, t + 412 * US, t + 462 * US, pid=100, tid=1, name=top_cause.ORT_ADD)
        t += 500 * US
    rep, _ = _analyze(b, tmp_path)
    assert (rep["kernel_traits"]["stack"], rep["facts"]["framework"]) == ("onnxruntime", "onnxruntime")
    assert finding_of(rep, "fp32_gemm")["title"].endswith("88.9 % of kernel time")


@pytest.mark.slow
def test_window_rule_5c_and_marker_pauses_under_every_generation(tmp_path: Path, flavor: str) -> None:
    """(test_claims_rl_post_training) Two identical RL iterations (CUDA-graph decode, 300 ms reward, training): the
    leading generation repeats later, so nothing is trimmed — graph launches read from the graph tables of each layout
    (node-level CUDA_GRAPH_EVENTS ≤ 2023.4, CUDA_GRAPH_NODE_EVENTS after). (test_phases_steps) 14 marker iterations, the
    interval after marker 7 idle 50.69 ms > 10 × the 1 ms median: 12 steps, 1 pause."""
    b = TraceBuilder()
    b.process(rl_post_training.PID)
    b.thread(rl_post_training.PID, 101, "python3")
    t = 0
    for _ in range(2):
        t = rl_post_training._rl(b, t, decode_steps=100, reward_ns=300 * MS, sampler=False)
    rep, _ = _analyze(b, tmp_path)
    assert rep["window"]["warmup_ns"] == 0, rep["window"]["reason"]
    b = TraceBuilder()
    b.thread(100, 100)
    t = 0
    for i in range(14):
        g = 30_000 * US if i == 4 else 300 * US
        b.kernel(t, t + g, pid=100, name="gemm")
        b.kernel(t + g, t + g + 10 * US, pid=100, name="argmax_kernel")
        t += g + 10 * US + {7: 50_690, 10: 9_690}.get(i, 690) * US
    res = analyze_steps(load_model(b.write(str(tmp_path / "pause.sqlite"))))
    assert (res.method, res.step_count, res.period_pauses) == ("marker", 12, 1)


def _ranks(out: Path, flavor: str, gap_us: Callable[[int, int], int]) -> None:
    """(tests/cli/test_cluster_late_cause._tp) 4 rank files of generation ``flavor``, 10 steps of 1 ms from 50 ms:
    a 300 µs GEMM from T + 10 µs, then the all-reduce ``gap_us(r, s)`` µs after it; every all-reduce ends 20 µs after
    the latest one starts."""
    for r in range(4):
        b = TraceBuilder(flavor, seed=r, utc_epoch_ns=BASE_UTC)
        pid = 5000 + r
        b.process(pid, "python3")
        b.thread(pid, pid, f"rank{r}")
        b.gpu(r)
        for s in range(10):
            t = 50 * MS + s * MS
            ar = [t + (310 + gap_us(q, s)) * US for q in range(4)]
            b.launch(t + 5 * US, t + 6 * US, t + 10 * US, t + 310 * US, pid=pid, tid=pid, device=r, stream=7,
                     name=GEMM)
            b.launch(ar[r] - 5 * US, ar[r] - 4 * US, ar[r], max(ar) + 20 * US, pid=pid, tid=pid, device=r, stream=7,
                     name=AR)
        b.write(str(out / f"rank{r}.sqlite"), overwrite=True)


@pytest.mark.slow
@pytest.mark.parametrize("gen", GENERATIONS)
def test_cluster_late_cause_under_every_generation(tmp_path: Path, gen: str) -> None:
    """(test_cluster_late_cause, first case) rank 2 launches its all-reduce 150 µs (even steps) / 250 µs (odd) late:
    its GPU idle 152 / 252 µs before it (the others' 2 µs), lateness 150 / 250 µs → at steps 1-9 (step 0 has no
    previous all-reduce) 150 / 250 µs more idle than the earliest rank's since the previous one: medians 250 µs and
    250 µs, share 1.0: "Launched late" under every generation (kernel rows only)."""
    _ranks(tmp_path, gen, lambda r, s: 2 + ((150 if s % 2 == 0 else 250) if r == 2 else 0))
    res = nle.analyze_cluster(str(tmp_path), jobs=1)
    (c,) = [c for c in res.claims if c.id == "late_arriver"]
    r2 = {x.rank: x for x in res.collectives.ranks}["rank2"]
    assert (c.rank, r2.late_idle_before_p50_ns, r2.late_by_p50_ns, r2.late_idle_share_p50) == (
        "rank2", 250 * US, 250 * US, 1.0)
    assert c.evidence[-1].startswith("Launched late: at the collectives it arrived last at, its GPU sat idle a "
                                     "median 250.00 µs longer than the earliest rank's since the previous kernel of "
                                     "that collective")


@pytest.mark.slow
def test_the_command_line_exits_0_under_every_generation(tmp_path: Path, flavor: str) -> None:
    """The CLI on the waits trace of each generation: exit 0, nothing on stderr but progress, no traceback."""
    p = tmp_path / "t.sqlite"
    other._trace().write(str(p))
    env = {**os.environ, "PYTHONPATH": SRC}
    r = subprocess.run([sys.executable, "-m", "nsys_llm_explainer", str(p), "--out", str(tmp_path / "o")],
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    assert "`detokenizer` (pid 200) sampled running" in (tmp_path / "o" / "report.md").read_text()


# ------------------------------------------------------------------------------- what an export may lack
@pytest.mark.parametrize("gen", ["2021.5", "2024.2"])
def test_an_unnamed_launching_thread_is_named_by_its_tid_not_thread(tmp_path: Path, gen: str) -> None:
    """The waits trace without its ThreadNames table: the launching thread (tid 1) has no name. The evidence said
    "The launching thread `thread` waits in OS calls" (a placeholder shown as the thread's name, its tid lost) and
    the section "**Waits of the launching thread**  (tid 1)" (an empty name). Now: "tid 1" in both; the 50.9 % is
    19 × 1.040 ms = 19.760 ms of the 38.852 ms window, as with the table."""
    b = _of(gen, other._trace)
    rep, md = _analyze(b, tmp_path, ("DROP TABLE ThreadNames",))
    ev = finding_of(rep, "idle_osrt")["evidence"]
    assert "The launching thread tid 1 waits in OS calls 50.9 % of the window (`pthread_cond_wait` 50.9 %)." in ev
    assert "`thread`" not in " ".join(ev)
    assert "**Waits of the launching thread** tid 1: 19.760 ms in OS calls that wait (50.9 % of the window)" in md


@pytest.mark.parametrize("gen", ["2021.5", "2024.2"])
def test_an_unnamed_other_process_is_named_by_its_pid_not_process(tmp_path: Path, gen: str) -> None:
    """The waits trace without its PROCESSES table: pid 200 has no name. The evidence said "`process` (pid 200)
    sampled running" (a placeholder in code type, as if the process were called `process`); now "pid 200 sampled
    running in 190 of the 190 samples", the advice still `wait.other_process` (the samples say it ran)."""
    b = _of(gen, other._trace)
    rep, _ = _analyze(b, tmp_path, ("DROP TABLE PROCESSES",))
    f = finding_of(rep, "idle_osrt")
    assert ("CPU samples of other processes taken during these waits: pid 200 sampled running in 190 of the 190 "
            "samples taken inside them (every thread's but the launching thread's).") in f["evidence"]
    assert "`process`" not in " ".join(f["evidence"])
    assert f["recommendation"] == [ADVICE["wait.other_process"].text]


def test_copies_without_a_bytes_column_give_no_negative_byte_count(tmp_path: Path) -> None:
    """The step-sync sampling trace without MEMCPY.bytes: 20 D2H + 19 H2D copies, their sizes unknown. The memcpy
    section said "-39 B copied in 695.00 µs of copy time" and a bandwidth of -0.00 GB/s; no byte count may be
    negative (the host-sampling evidence, which needs the bytes, is rightly left out)."""
    rep, md = _analyze(sync_sampling._trace(), tmp_path, ("ALTER TABLE CUPTI_ACTIVITY_KIND_MEMCPY DROP COLUMN bytes",))
    assert not any(e.startswith("On 19 of its 19 steps") for e in finding_of(rep, "step_sync")["evidence"])
    bad: List[str] = [ln for ln in md.splitlines() if " -" in ln and (" B " in ln or " B|" in ln or "B copied" in ln)]
    assert not bad, bad


def _two_ranks_no_kernel_gpid() -> TraceBuilder:
    """(tests/analyses/test_nccl_late_rule._gemm_then_ar) 2 ranks (pid 100 + r on GPU r), 10 collectives 1 ms apart:
    a 300 µs GEMM, then the all-reduce 2 µs (rank 0) / 152 µs (rank 1) after it; written with no kernel globalPid
    (``kernel_has_global_pid=False``): both processes use correlation ids 1 … 20, so no kernel links to its call."""
    b = TraceBuilder("2022.4", kernel_has_global_pid=False)
    for r in range(2):
        b.process(100 + r)
        b.gpu(r)
    for i in range(10):
        t = MS + i * MS
        ar = [t + (302 + 150 * r) * US for r in range(2)]
        for r in range(2):
            b.launch(t - 6 * US, t - 5 * US, t, t + 300 * US, pid=100 + r, tid=101 + r, device=r, name=GEMM)
            b.launch(ar[r] - 6 * US, ar[r] - 5 * US, ar[r], max(ar) + 20 * US, pid=100 + r, tid=101 + r, device=r,
                     name=AR)
    return b


def test_a_rank_whose_pid_is_unknown_is_not_called_pid_minus_1(tmp_path: Path) -> None:
    """The late rank (GPU 1) is found from the kernels alone (10 of 10 late, 1.500 ms of waiting caused, launched
    late: idle 152 µs after its GEMM vs rank 0's 2 µs, 150 µs more, while 150 µs late), but the verdict read "rank
    pid -1 / GPU 0 waits in collectives for late rank pid -1 / GPU 1": -1 is the reader's NULL, not a pid."""
    rep, md = _analyze(_two_ranks_no_kernel_gpid(), tmp_path)
    f = finding_of(rep, "nccl_wait")
    assert any(e.startswith("Launched late: at the collectives it started last, its GPU sat idle a median 150.00 µs")
               for e in f["evidence"]), f["evidence"]
    assert "pid -1" not in md


def test_unlinked_kernels_without_a_global_pid_are_not_blamed_on_correlation_ids(tmp_path: Path) -> None:
    """Same trace: every kernel has its correlationId; what is missing is the kernel's process (globalPid), and both
    processes used ids 1 … 20. The `unknown` finding said "no call of its process has its correlation id" and advised
    "export with an nsys that writes the kernels' `correlationId`" — which this export already does."""
    rep, _ = _analyze(_two_ranks_no_kernel_gpid(), tmp_path)
    f = finding_of(rep, "idle_unknown")
    text = " ".join(f["evidence"] + f["recommendation"])
    assert "globalPid" in text and "writes the kernels' `correlationId`" not in text
