"""Speculative decoding and two-engine steps: which NVTX range is the step when draft and verify steps alternate, idle
pauses and slowest steps that pooled kinds of step, per-step copy figures pooled over two engines. Each trace is built
by hand; the truth is worked out in the docstring."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from synth import TraceBuilder

from nsys_llm_explainer.options import options_from_kwargs
from nsys_llm_explainer.pipeline import analyze_path
from nsys_llm_explainer.render import render_all
from nsys_llm_explainer.report import Report

US = 1_000
MS = 1_000_000
T0 = 10 * MS
DRAFT = "void draft_head_gemv_kernel<64>(__nv_bfloat16*)"
TGT = "void ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_tn"
SAMP = "void at::native::sampling_kernel(float*)"
PRE = "void flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4>>(Flash_fwd_params)"
DEC = "void vllm::paged_attention_v2_kernel<__nv_bfloat16, 128, 16>(...)"


def _spec(tmp_path: Path, draft: str, verify: str, n: int = 30, warmup: Optional[str] = None) -> Report:
    """The report of :func:`spec_trace` written to ``tmp_path``."""
    p = tmp_path / "t.sqlite"
    spec_trace(draft, verify, n, warmup).write(str(p), overwrite=True)
    return analyze_path(str(p), options_from_kwargs())


def spec_trace(draft: str, verify: str, n: int = 30, warmup: Optional[str] = None) -> TraceBuilder:
    """One process (pid 100), one thread, GPU 0; iteration i starts at t = T0 + i·2 ms: k = 4 ranges ``draft``
    [t + 100j, t + 100j + 100) µs, each launching one 60 µs draft kernel [+25, +85) µs; then ``verify``
    [t + 400, t + 700) µs launching the target kernel [t + 425, t + 1325) µs (900 µs) and a sampling kernel
    [t + 1325, t + 1335) µs. GPU time: draft 120 × 60 µs = 7.2 ms, verify 30 × 910 µs = 27.3 ms (79.1 %)."""
    b = TraceBuilder("2024.2")
    b.process(100, "vllm")
    g = b.thread(100, 100, "main")
    b.gpu(0)
    t0 = T0
    if warmup:
        for i in range(3):
            t = T0 + i * 26 * MS
            b.nvtx_push_pop(t, t + 25 * MS, warmup, tid_g=g)
            b.launch(t + 10 * US, t + 20 * US, t + 25 * US, t + 25 * MS - 10 * US, pid=100, tid=100, device=0,
                     name=TGT)
        t0 = T0 + 80 * MS
    for i in range(n):
        t = t0 + i * 2 * MS
        for j in range(4):
            s = t + j * 100 * US
            b.nvtx_push_pop(s, s + 100 * US, draft, tid_g=g)
            b.launch(s + 10 * US, s + 20 * US, s + 25 * US, s + 85 * US, pid=100, tid=100, device=0, name=DRAFT)
        v = t + 400 * US
        b.nvtx_push_pop(v, v + 300 * US, verify, tid_g=g)
        b.launch(v + 10 * US, v + 20 * US, v + 25 * US, v + 925 * US, pid=100, tid=100, device=0, name=TGT)
        b.launch(v + 30 * US, v + 40 * US, v + 925 * US, v + 935 * US, pid=100, tid=100, device=0, name=SAMP)
    return b


def test_speculative_step_is_the_verify_range_not_the_draft_steps(tmp_path: Path) -> None:
    """`draft_step` ×4 then `verify_step` per 2 ms iteration. Both names look like a step, both at depth 0;
    `draft_step` has more instances (120 vs 30) and was the step: step period p50 100 µs, and the 29 gaps from the
    4th draft step's end (t + 400) to the next iteration (t + 2000), which hold the verify kernels (GPU busy
    [t + 425, t + 1335)), were "29 periods over an idle pause left out". The two names interleave (no two
    `verify_step` in a row on the thread): parts of one iteration; the verify ranges enclose the launches of
    27.3 of 34.5 ms GPU time (79 %), so `verify_step` is the step: 30 steps of 300 µs, period 2 ms × 29, no pause;
    confidence medium (it encloses 60 of the thread's 180 launches, 33 %), the reason naming the draft steps."""
    rep = _spec(tmp_path, "draft_step", "verify_step")
    st = rep.steps
    assert st.step_ranges == ("verify_step",)
    assert st.step_count == 30 and st.summary is not None and st.summary.p50_ns == 300 * US
    assert st.period is not None and (st.period.p50_ns, st.period.count) == (2 * MS, 29)
    assert st.period_pauses == 0
    assert st.confidence == "medium"
    assert "`draft_step` ×120 between its instances, parts of one iteration" in st.confidence_reason
    assert "79 % of their GPU time" in st.confidence_reason


def test_speculative_step_named_execute_model_beside_draft_steps(tmp_path: Path) -> None:
    """As above with the verify range named `execute_model` (vLLM's target step): `execute_model` (27.3 ms of GPU
    time) is the step, not `draft_step` (7.2 ms)."""
    st = _spec(tmp_path, "draft_step", "execute_model").steps
    assert st.step_ranges == ("execute_model",) and st.step_count == 30 and st.period_pauses == 0


def test_enclosing_iteration_range_stays_the_step(tmp_path: Path) -> None:
    """Not parts but a warm-up: three `warmup_step` ranges of 25 ms first (their kernels 3 × 24.965 ms = 74.9 ms of
    GPU time, more than the verify steps' 27.3 ms), then the iterations. The warm-up ranges follow one another
    with no other step between them: not parts of the iteration, so they do not take the step for their GPU time;
    `verify_step` (interleaved with `draft_step`) is the step."""
    st = _spec(tmp_path, "draft_step", "verify_step", warmup="warmup_step").steps
    assert st.step_ranges == ("verify_step",) and st.step_count == 30


def test_same_name_draft_and_verify_no_idle_pause_no_slow_steps(tmp_path: Path) -> None:
    """Draft and verify ranges both named `execute_model` (one name: 150 steps, 4 of 100 µs then one of 300 µs per
    iteration). Periods: 120 of 100 µs and 29 of 1.6 ms (verify start t + 400 → next draft t + 2000); median
    100 µs. The gap after a verify range, [t + 700, t + 2000), holds the target and sampling kernels up to
    t + 1335: 635 µs of GPU work, 665 µs idle < 10 × 100 µs, so no idle pause (it said "29 periods over an idle
    pause left out"): period p50 100 µs, p90 1.6 ms over 149. The verify steps (30 of 150, 20 %) are a kind of step
    that recurs, not outliers: the phase's p90 is 300 µs and no step is longer, so no "slowest steps against their
    phase median" (it listed steps 4, 9, 14 at "+200 µs wall vs the median")."""
    rep = _spec(tmp_path, "execute_model", "execute_model")
    st = rep.steps
    assert st.step_count == 150 and st.period_pauses == 0
    assert st.period is not None and (st.period.p50_ns, st.period.p90_ns, st.period.count) == (100 * US, 1_600 * US,
                                                                                             149)
    assert st.by_phase[0].p90_ns == 300 * US and st.outliers == ()
    render_all(rep, tmp_path / "out")
    md = (tmp_path / "out" / "report.md").read_text(encoding="utf-8")
    assert "idle pause" not in md and "Slowest steps" not in md


def _disagg(tmp_path: Path) -> Report:
    """Prefill engine pid 100 on GPU 0, decode engine pid 200 on GPU 1, one request every 2 ms (20): `prefill_step`
    [t, t + 900) µs launching a prefill kernel [t + 10, t + 800) µs and, at t + 20 µs, a 2 MiB KV-cache copy to
    GPU 1 (cudaMemcpyPeerAsync, Peer-to-Peer on GPU 0 [t + 800, t + 850) µs); `decode_step` [t + 1000, t + 1900)
    µs launching a decode kernel [t + 1010, t + 1800) µs."""
    b = TraceBuilder("2024.2")
    b.process(100, "prefill_engine")
    b.process(200, "decode_engine")
    gp = b.thread(100, 100, "prefill")
    gd = b.thread(200, 200, "decode")
    b.gpu(0)
    b.gpu(1)
    for i in range(20):
        t = T0 + i * 2 * MS
        b.nvtx_push_pop(t, t + 900 * US, "prefill_step", tid_g=gp)
        b.launch(t + 5 * US, t + 9 * US, t + 10 * US, t + 800 * US, pid=100, tid=100, device=0, name=PRE)
        c = b.runtime(t + 20 * US, t + 30 * US, tid_g=gp, name="cudaMemcpyPeerAsync_v4000")
        b.memcpy(t + 800 * US, t + 850 * US, pid=100, bytes=2 << 20, copy_kind=10, src_kind=2, dst_kind=2, device=0,
                 stream=8, corr=c)
        b.nvtx_push_pop(t + 1000 * US, t + 1900 * US, "decode_step", tid_g=gd)
        b.launch(t + 1005 * US, t + 1009 * US, t + 1010 * US, t + 1800 * US, pid=200, tid=200, device=1, name=DEC)
    p = tmp_path / "t.sqlite"
    b.write(str(p), overwrite=True)
    return analyze_path(str(p), options_from_kwargs())


def test_copies_per_step_per_engine_not_pooled(tmp_path: Path) -> None:
    """40 steps: 20 prefill steps of pid 100 with one 2 MiB copy each, 20 decode steps of pid 200 with none. The
    memory section said "Copies per step (median): 0.500, 1.05 MB" — the median over both engines' steps, true of
    no step. Per process: pid 100 1 copy, 2,097,152 B (2.10 MB) per step; pid 200 0. The copy path of GPU 0
    counted the 40 steps of both devices (bytes per step p50 1 MiB, step busy p50 2.78 %); over GPU 0's 20 steps
    it is 2 MiB and 50 µs of 900 µs = 5.56 %."""
    rep = _disagg(tmp_path)
    ps = rep.memory.per_step
    assert ps is not None and ps.step_count == 40
    assert ps.by_pid is not None
    assert [(r.pid, r.step_count, r.copies_in_steps, r.copies_per_step_median, r.bytes_per_step_median)
            for r in ps.by_pid] == [(100, 20, 20, 1.0, 2 << 20), (200, 20, 0, 0.0, 0)]
    (path,) = rep.copy_engines.paths
    assert (path.device_id, path.steps, path.bytes_per_step_p50) == (0, 20, 2 << 20)
    assert path.step_busy_pct_p50 is not None and abs(path.step_busy_pct_p50 - 100 * 50 / 900) < 1e-9
    render_all(rep, tmp_path / "out")
    md = (tmp_path / "out" / "report.md").read_text(encoding="utf-8")
    assert ("Copies issued per step (median; a copy counts in the step its CUDA call starts in), per process of the "
            "steps: pid 100 (20 steps): 1, 2.10 MB; pid 200 "
            "(20 steps): 0, 0 B.") in md
    assert "0.500" not in md
