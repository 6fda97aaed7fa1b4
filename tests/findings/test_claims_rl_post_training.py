"""Colocated RL post-training: one process alternates a vLLM-like generation phase (CUDA-graph decode steps), a CPU-only
reward phase (GPU idle) and a training phase (forward / backward / Adam kernels). Sentences the report made that such a
trace contradicts; each trace is built by hand, the truth worked out in the docstring."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict

from claims_support import report_of as _run
from synth import TraceBuilder

US = 1_000
MS = 1_000_000
PID = 100
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x64x64"
GEN = [("void vllm::rms_norm_kernel<c10::BFloat16>", 20), (GEMM, 150),
       ("void vllm::paged_attention_v2_kernel<__nv_bfloat16>", 120),
       ("void vllm::act_and_mul_kernel<c10::BFloat16>", 30), (GEMM, 180)]
ARGMAX = ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::ArgMaxOps<float>>>", 8)
TRAIN = [("ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_tn", 900), ("flash_fwd_kernel<Flash_fwd_traits>", 600)] * 4 \
    + [("ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_nn", 1500), ("flash_bwd_dq_dk_dv_kernel<Flash_bwd>", 1200)] * 4 \
    + [("void at::native::multi_tensor_apply_kernel<FusedAdamMathFunctor<float>>", 2000)]


def _rl(b: TraceBuilder, t: int, *, decode_steps: int, reward_ns: int, sampler: bool) -> int:
    """One RL iteration from ``t`` on thread 101 / device 0; returns its end. Generation: ``decode_steps`` decode
    steps of 2 ms, each one CUDA-graph launch (call [t+10, t+40) µs) of 5 kernels — plus the argmax kernel when
    ``sampler`` — from t+100 µs, 2 µs apart (508 µs of kernels, 516 µs with argmax); then ``reward_ns`` with no CUDA
    call and no kernel (reward scoring on the CPU); then 3 training iterations of 17 kernels (4 × (900 + 600) µs
    forward, 4 × (1,500 + 1,200) µs backward, 2,000 µs Adam; each launched 20 µs before it starts, 30 µs apart:
    57.26 ms of kernels in 58.07 ms)."""
    for _ in range(decode_steps):
        ks, k = [], t + 100 * US
        for name, d in GEN + ([ARGMAX] if sampler else []):
            ks.append((k, k + d * US, name))
            k += d * US + 2 * US
        b.graph_launch(t + 10 * US, t + 40 * US, pid=PID, tid=101, kernels=ks)
        t += 2 * MS
    t += reward_ns
    for _ in range(3):
        for name, d in TRAIN:
            b.launch(t, t + 8 * US, t + 20 * US, t + 20 * US + d * US, pid=PID, tid=101, name=name)
            t += d * US + 30 * US
    return t


def _iterations(tmp_path: Path, n: int, *, decode_steps: int = 100, sampler: bool = False) -> Dict[str, Any]:
    b = TraceBuilder()
    b.process(PID)
    b.thread(PID, 101, "python3")
    t = 0
    for _ in range(n):
        t = _rl(b, t, decode_steps=decode_steps, reward_ns=300 * MS, sampler=sampler)
    return _run(b, tmp_path)


def test_identical_rl_iterations_have_no_warm_up(tmp_path: Path) -> None:
    """Two identical RL iterations (:func:`_rl`, 100 decode steps, 300 ms reward). A decode step holds 500 µs of
    kernels; a training phase 3 × (6,000 + 10,800 + 2,000) = 56.4 ms of kernels in 3 × 19.31 = 57.93 ms. Iteration 1:
    generation [0, 200) ms (50 ms busy), reward [200, 500) ms, training [500.02, 557.92) ms; iteration 2 the same
    557.93 ms later, ending at 1,115.85 ms. The densest stretch is the first training phase, the auto rule's
    candidate; the leading part [0.01, 500.02) ms holds the first generation: 50 ms busy of 500.01 ms = 10.0 %, under
    half the kept window's [500.02, 1,115.85) ms: (56.4 + 50 + 56.4) / 615.83 = 26.44 %, so the report said "trimmed
    500.010 ms of warm-up (GPU busy 10.0%)" (and beside a shorter second reward phase a `capture_window` finding,
    "Warm-up / tail make the whole capture look N points idler"). It is no warm-up: the kept window's own generation
    + reward stretch [557.93, 1,057.93) ms holds the same kernels (50 ms, 10.0 %), and what follows the candidate,
    [557.92, 1,115.85) ms, is 106.4 / 557.93 = 19.07 % busy, whose half (9.54 %) the leading part exceeds. Nothing
    may be trimmed at the start and no warm-up sentence made.

    Fixed by the auto rule's (5c) (docs/FINDINGS.md, "Steady-state window"): the part after the candidate holds
    106.4 / 212.8 = 50 % > 25 % of the busy time (workload) and is at least as long as the lead; its first 500.01 ms,
    [557.92, 1,057.93) ms, run the lead's kernel names (100 % of its kernel time) at 50 ms = 10.0 % busy, and the lead
    is at least half as busy, so it is kept: a periodic job whose period is longer than its densest phase puts the
    same sparse phases on both sides of it."""
    rep = _iterations(tmp_path, 2)
    w = rep["window"]
    assert w["warmup_ns"] == 0, w["reason"]
    assert "warm-up" not in w["reason"] or "not warm-up" in w["reason"], w["reason"]


def test_marker_steps_do_not_pool_the_training_phase_into_a_decode_step(tmp_path: Path) -> None:
    """Two RL iterations (:func:`_rl`) with 20 decode steps each, every decode step ending with an argmax kernel
    (the default step marker), 2 µs after the step's 5 kernels: it ends 618 µs into the step. Decode steps are the
    marker-to-marker intervals inside a generation phase: 19 per phase, 38 in all, each 2.000 ms. The interval from
    the last argmax of generation 1 (ends at 38.618 ms) to the first of generation 2 (557.93 + 0.618 = 398.548 ms
    after the 300 ms reward and the 57.93 ms training phase, so generation 2 starts at 397.93 ms) holds the reward
    phase and the whole training phase (51 kernels, none a marker): 359.930 ms, 57 kernels. The report said "39
    steps … p99 223.917 ms" and listed it as the slowest step: "step 19 (unmapped) … 359.930 ms; +357,930.00 µs wall
    vs the median unmapped step: +301,530.00 µs GPU idle, +56,400.00 µs GPU busy, +51 kernels". That interval is no
    decode step: the steps are the 38 decode steps, and no slowest-step line may describe the training phase.

    Fixed by the NVTX periods' idle-pause rule applied to marker steps (docs/FINDINGS.md, "Steps"): that interval's
    GPU idle, 359.930 − 56.908 (the 51 training kernels' 56.4 ms and generation 2's first step, 508 µs of kernels)
    = 303.022 ms, exceeds 10 × the 2 ms median interval: it is left out and counted (`period_pauses`)."""
    rep = _iterations(tmp_path, 2, decode_steps=20, sampler=True)
    st = rep["steps"]
    assert st["method"] == "marker"
    assert st["step_count"] == 38, st["summary"]
    assert st["period_pauses"] == 1
    assert all(o["kernel_count"] <= 6 for o in st["outliers"]), [(o["index"], o["kernel_count"])
                                                                 for o in st["outliers"]]


def test_identical_rl_iterations_with_a_short_generation_have_no_warm_up(tmp_path: Path) -> None:
    """The trace of the test above (20 decode steps of 508 µs of kernels a generation): iteration 1's generation
    [0, 40) ms, reward [40, 340) ms, training [340.02, 397.92) ms; iteration 2 from 397.93 ms, ending at 795.85 ms.
    The candidate is the first training phase; the leading part [0.01, 340.02) ms holds 20 × 0.508 = 10.16 ms:
    2.99 %, under half of what it would leave, [340.02, 795.85) ms = (56.4 + 10.16 + 56.4) / 455.83 = 26.97 % (rule
    5b trims it), and under half of the whole part after the candidate (66.56 / 397.93 = 16.73 %). But that part
    holds 50 % of the busy time, and its first 340.01 ms, [397.92, 737.93) ms, are generation 2 and reward 2: the
    same kernel names (100 % of the lead's kernel time), 10.16 ms = 2.99 % busy — rule 5c keeps the lead."""
    rep = _iterations(tmp_path, 2, decode_steps=20, sampler=True)
    w = rep["window"]
    assert w["warmup_ns"] == 0 and w["tail_ns"] == 0, w["reason"]
    assert w["reason"] == ("Full trace kept: the leading part (GPU busy 2.99%) repeats the same length on the other "
                           "side of the densest stretch (GPU busy 2.99%): 100.0% of its kernel time is of kernel "
                           "names running there, and it is not under half as busy, so it is treated as part of the "
                           "workload, not warm-up or tail.")
    assert not any(f["id"] == "capture_window" for f in rep["findings"])


def test_an_rl_job_is_training_with_generation_on_vllm_and_pytorch(tmp_path: Path) -> None:
    """Two RL iterations (:func:`_rl`): backward kernels 4 × 1,200 µs (`flash_bwd…`, `…_nn` is no backward name) of
    each training iteration's 18,800 µs of kernel time — plus the generation's — hold ≥ 5 % (training), and vLLM's
    kernels (`vllm::rms_norm_kernel`, `paged_attention_v2`, `act_and_mul`) ran: vLLM only generates. The report said
    "Workload: training" and "Stack: vllm". Now `training with generation`, stack `vllm + pytorch` (the fused-Adam
    `at::native::multi_tensor_apply_kernel` is PyTorch's, a name vLLM's rule does not match), framework pytorch, and
    no finding is given a line that needs a workload (`nvtx.add.training` / `nvtx.add.inference`, the vLLM lines, the
    training-loop lines) or that is written for an unknown one."""
    from nsys_llm_explainer.findings.advice import ADVICE
    rep = _iterations(tmp_path, 2)
    f = rep["facts"]
    assert f["workload"] == "training with generation"
    assert "3 vLLM kernel name(s), e.g. 'void vllm::" in f["workload_evidence"][0]
    assert (f["stack"], f["framework"]) == ("vllm + pytorch", "pytorch")
    phase = {a.text for a in ADVICE.values() if "workload" in a.requires}
    given = [t for x in rep["findings"] for t in x["recommendation"]]
    assert given and not phase & set(given), phase & set(given)


D2D_USUALLY = "Device-to-device copies usually come from `.contiguous()`"
D2D_LARGE = "These device-to-device copies average over 1 MiB each"


def _weight_sync(tmp_path: Path, nbytes: int) -> Dict[str, Any]:
    """10 steps of 4 ms on thread 101 / device 0 from t = 0: a 1,000 µs GEMM (launched [t, t+10) µs, runs
    [t+20, t+1,020) µs), then a synchronous `cudaMemcpy` [t+1,030, t+2,080) µs of one device-to-device copy of
    ``nbytes`` running [t+1,040, t+2,040) µs (the GPU idles under it, the thread waits in the call: the kernels wait on
    the copy), then the next GEMM launched [t+2,090, t+2,100) µs, running [t+2,110, t+3,110) µs. Per step 1,000 µs of
    copy with no kernel: 40 % of the 10 × 4 ms window — the `copy` idle finding, with a Device-to-Device detail."""
    b = TraceBuilder()
    b.process(PID)
    g = b.thread(PID, 101, "python3")
    for i in range(10):
        t = i * 4 * MS
        b.launch(t, t + 10 * US, t + 20 * US, t + 1020 * US, pid=PID, tid=101, name=GEMM)
        c = b.next_corr(PID)
        b.runtime(t + 1030 * US, t + 2080 * US, tid_g=g, name="cudaMemcpy_v3020", corr=c)
        b.memcpy(t + 1040 * US, t + 2040 * US, pid=PID, bytes=nbytes, copy_kind=8, src_kind=2, dst_kind=2, corr=c)
        b.launch(t + 2090 * US, t + 2100 * US, t + 2110 * US, t + 3110 * US, pid=PID, tid=101, name=GEMM)
    return _run(b, tmp_path)


def test_large_device_to_device_copies_are_not_said_to_come_from_contiguous(tmp_path: Path) -> None:
    """One 256 MiB device-to-device copy per step (a weight sync to the generation engine): 256 MiB > 1 MiB average.
    The report said "Device-to-device copies usually come from `.contiguous()`, `torch.cat`, `.clone()` … fuse them
    into the producing kernel": per-op layout copies are not the usual source of 256 MiB copies. Now the copy
    finding gives `copy.d2d.large` (the copies' size, and how to find what issues them) instead."""
    from claims_support import finding_of
    f = finding_of(_weight_sync(tmp_path, 256 << 20), "idle_copy")
    recs = list(f["recommendation"])
    assert not any(r.startswith(D2D_USUALLY) for r in recs), recs
    assert any(r.startswith(D2D_LARGE) for r in recs), recs


def test_small_device_to_device_copies_keep_the_contiguous_line(tmp_path: Path) -> None:
    """The same trace with 512 KiB copies (≤ 1 MiB average, an activation-sized copy): `copy.d2d` is given, not the
    large-copy line."""
    from claims_support import finding_of
    f = finding_of(_weight_sync(tmp_path, 512 << 10), "idle_copy")
    recs = list(f["recommendation"])
    assert any(r.startswith(D2D_USUALLY) for r in recs), recs
    assert not any(r.startswith(D2D_LARGE) for r in recs), recs


def test_a_pacing_device_to_device_path_of_large_copies_gets_the_large_line() -> None:
    """The copy-path finding's advice for a D2D / P2P path: `copy_pace.d2d` ("come from layout changes … merge many
    small copies") only when the path's copies average ≤ 1 MiB; above, `copy_pace.d2d.large`."""
    from nsys_llm_explainer.findings.copy_path import advice_ids
    assert advice_ids("D2D", False, False, True)[0] == "copy_pace.d2d.large"
    assert advice_ids("P2P", False, False, False)[0] == "copy_pace.d2d"
