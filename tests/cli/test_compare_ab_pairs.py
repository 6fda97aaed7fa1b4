"""Compare claims over the A/B pairs an inference engineer compares (docs/COMPARE.md): tensor parallel on two GPUs
against one however the processes and step ranges are laid out, TP ranks' noise, a capture without NVTX, cold steps
in one capture. Truth by construction; every answer hand-computed.

The loop (``_loop``, exact TraceBuilder rows, no jitter): 40 steps (``steps``) from t = 1 ms, one every ``period``.
Per step and GPU ``d`` the kernels run back to back from t + 20 µs + 5 µs·d, launched 0.5 µs calls every 0.6 µs from
t + 19 µs on the thread of the process driving the GPU (one process may drive both: its second GPU's launches follow
the first's); each process then calls ``cudaStreamSynchronize`` until 5 µs after its last kernel ends, inside an NVTX
``execute_model`` range from t to 10 µs after that (in the processes ``nvtx`` names)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Optional, Sequence, Tuple, Union

import pytest
from synth import TraceBuilder
from synth.scenarios.names import K

import nsys_llm_explainer as nle
from nsys_llm_explainer.comparison.document import compare_document
from nsys_llm_explainer.errors import OptionError
from nsys_llm_explainer.render.markdown import write_markdown

US = 1_000
MS = 1_000_000
SAMPLER = "void at::native::sampling_kernel()"
ONE_GPU = ((K.GEMM_QKV, 200), (K.FLASH, 100), (K.RMS_NORM, 20), (SAMPLER, 10))        # 330 µs
SM80_GEMM = "sm80_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x32_stage5_warpsize2x2x1_tensor16x8x16_kernel"
FA3 = ("void cutlass::device_kernel<flash::enable_sm90_or_later<flash::FlashAttnFwdSm90<"
       "flash::CollectiveMainloopFwdSm90<2, cute::tuple<cute::C<1>, cute::C<1>, cute::C<1> >, "
       "cute::tuple<cute::C<128>, cute::C<128>, cute::C<128> >, 128, cutlass::bfloat16_t, float, cutlass::arch::Sm90, "
       "true, false, false, true, true, false, false, true> > > >(flash::FlashAttnFwdSm90<...>::Params)")
TP2 = ((K.GEMM_QKV, 100), (K.FLASH, 50), (K.NCCL_AR, 20), (K.RMS_NORM, 20), (SAMPLER, 10))   # 200 µs per GPU


def _loop(path: Path, kernels: Sequence[Tuple[str, int]], period: Union[int, Sequence[int]], gpus: int = 1,
          one_process: bool = True, nvtx: Optional[Sequence[int]] = None, flavor: str = "2024.2",
          steps: int = 40, warm: int = 0, gpu: str = "NVIDIA H100 80GB HBM3", skip: int = 0) -> str:
    """The loop of the module docstring; ``period``: one period, or periods step i takes in turn (i modulo their
    count); the first ``warm`` steps run each kernel 3 times as long; the first step's first ``skip`` kernels (and
    their launches) are not in the capture, as when it starts inside a step."""
    periods = [period] if isinstance(period, int) else list(period)
    b = TraceBuilder(flavor=flavor)
    pids = [100] if one_process else [100 + d for d in range(gpus)]
    threads = {p: (b.process(p), b.thread(p, p))[1] for p in pids}
    for d in range(gpus):
        b.gpu(d, name=gpu)
    t = MS
    for i in range(steps):
        api = {p: t + 19 * US for p in pids}
        last = {p: 0 for p in pids}
        for d in range(gpus):
            p = pids[0] if one_process else pids[d]
            k = t + (20 + 5 * d) * US
            for j, (name, dur) in enumerate(kernels):
                dur *= 3 if i < warm else 1
                if i == 0 and j < skip:
                    api[p], k = api[p] + 600, k + dur * US
                    continue
                b.launch(api[p], api[p] + 500, k, k + dur * US, pid=p, tid=p, device=d, name=name)
                api[p], k = api[p] + 600, k + dur * US
            last[p] = max(last[p], k)
        for p in pids:
            c = b.runtime(api[p], last[p] + 5 * US, tid_g=threads[p], name="cudaStreamSynchronize_v3020")
            b.sync(api[p], last[p] + 5 * US, pid=p, corr=c)
            if nvtx is None or p in nvtx:
                b.nvtx_push_pop(t, last[p] + 15 * US, "execute_model", tid_g=threads[p])
        t += periods[i % len(periods)]
    return b.write(str(path), overwrite=True)


@pytest.mark.parametrize("layout, one_process, nvtx, flavor", [
    ("one process drives both GPUs", True, None, "2022.4"),
    ("a process per GPU, step ranges in rank 0 only", False, (100,), "2026.2"),
    ("a process per GPU, step ranges in each", False, None, "2024.2"),
])
def test_tp2_against_one_gpu_is_per_gpu_whoever_marks_the_steps(tmp_path: Path, layout: str, one_process: bool,
                                                                 nvtx: Optional[Sequence[int]], flavor: str) -> None:
    """BASE: one GPU, 330 µs of kernels a step, period 1.000 ms. NEW: the layers split over two GPUs (GEMM 100 µs,
    attention 50 µs on each), an all-reduce of 20 µs on each, period 0.870 ms. Truth: 13.0 % faster; per GPU and
    step, over the 39 whole periods from the first step's start to the last's (both GPUs' kernels lie in them):
    `gemm` 200 → 100 µs, `attention` 100 → 50, `nccl` 0 → 20, norm 20 and sampling 10 as they were, non-GPU time
    1 000 − 330 = 670 → 870 − 200 = 670 µs. So the main reason is `gemm` −0.100 ms per step (`nccl` +0.020 is under a
    quarter of it: no "offset by"), and the window time per step is the period, 1.000 → 0.870 ms. The units are
    summed over the GPUs (39 periods × 2 = 78), as the parts are. Where one process drives both GPUs, or only rank 0
    has step ranges, the step periods counted were 39 against parts summed over two GPUs: "window time per step
    1.000 ms → 1.740 ms" and a main reason of +0.670 ms of host idle per step in a run 13 % faster. The Traces table
    heads the units "step periods in span, devices summed" when a trace has several devices (78 beside 40 steps)."""
    base = _loop(tmp_path / "b.sqlite", ONE_GPU, MS)
    new = _loop(tmp_path / "n.sqlite", TP2, 870 * US, gpus=2, one_process=one_process, nvtx=nvtx, flavor=flavor)
    res = nle.compare([base, new], labels=["TP1", "TP2"])
    c, (b, n) = res.comparisons[0], res.traces
    assert (c.verdict, c.metric_base.p50_ns, c.metric_new.p50_ns) == ("faster", MS, 870 * US)
    assert (b.units, n.units, n.device_count) == (39, 78, 2)
    assert (c.window_per_unit_base_ns, c.window_per_unit_new_ns) == (MS, 870 * US)
    assert {d.name: (d.base_per_unit_ns, d.new_per_unit_ns) for d in c.category_changes} == {
        "gemm": (200 * US, 100 * US), "attention": (100 * US, 50 * US), "nccl": (0, 20 * US),
        "norm": (20 * US, 20 * US), "sampling": (10 * US, 10 * US), "non_gpu": (670 * US, 670 * US)}
    assert c.headline[2] == ("Main reason: non-overlapped GPU time in `gemm` kernels −0.100 ms per step (window time "
                             "per step 1.000 ms → 0.870 ms).")
    # the Traces table heads the units as summed over the devices: 78 of them beside "40 (nvtx)" steps
    md = write_markdown(compare_document(res))
    assert "| GPU busy % | kernels | step periods in span, devices summed | steps |" in md


@pytest.mark.parametrize("flavor", ["2021.5", "2026.2"])
def test_a_capture_without_nvtx_moves_no_host_time_between_causes(tmp_path: Path, flavor: str) -> None:
    """BASE: the one-GPU loop with its step ranges; NEW: the same loop captured without NVTX (no range at all).
    Truth: the same loop, period 1.000 ms, no change. Neither trace has steps found alike, so the metric is the
    anchor GEMM's period, 1 instance an iteration, 40 in each window. The GPU idles 670 µs a step; BASE's host is in
    `execute_model` for 19 µs before the first launch and 10 µs after the sync returns, so the report charges 29 µs
    of it to `nvtx` — time NEW, having no range, can only charge to `host_cpu`. The headline read "Largest change: GPU
    idle with the host inside NVTX ranges (idle cause `nvtx`) −0.029 ms per iteration, of which `execute_model`
    −0.029 ms": no host work went away. Now `nvtx` counts as `host_cpu` in every trace of the comparison. By hand,
    over the full windows (BASE from the first range's start to the last range's end, 39 ms + 365 µs; NEW from the
    first launch call to the last sync's end, 39 ms + 336 µs): BASE host_cpu 39 × 635 µs + 40 × (19 + 10) µs =
    25 925 µs, 648.125 µs an iteration; NEW 39 × 664 µs = 25 896 µs, 647.4 µs. The −0.725 µs left is where the
    captures start and end (docs/COMPARE.md: the anchor metric's edge), under 0.001 ms."""
    base = _loop(tmp_path / "b.sqlite", ONE_GPU, MS, flavor=flavor)
    new = _loop(tmp_path / "n.sqlite", ONE_GPU, MS, nvtx=(), flavor=flavor)
    res = nle.compare([base, new], labels=["NVTX", "BARE"])
    c, (b, n) = res.comparisons[0], res.traces
    assert (c.verdict, res.metric.name, b.units, n.units) == ("no_change", "iteration_period_p50", 40, 40)
    kinds = [{s.name: s.per_unit_ns for s in t.idle_by_kind} for t in (b, n)]
    assert ("nvtx" in kinds[0], "nvtx" in kinds[1], kinds[0]["host_cpu"], kinds[1]["host_cpu"]) == (
        False, False, 648_125, 647_400)
    assert c.headline[2] == ("Largest change: GPU idle with the host outside CUDA, NVTX and OS calls (idle cause "
                             "`host_cpu`) −0.001 ms per iteration (window time per iteration 0.984 ms → 0.983 ms).")
    assert b.notes == ("idle cause nvtx (the host inside NVTX ranges) counted as host_cpu: BARE recorded no NVTX "
                       "range, so no trace's host time outside CUDA calls is split by range",)
    assert not any("counted as host_cpu" in x for x in n.notes)   # NEW had no `nvtx` time to count


@pytest.mark.parametrize("one_process, gpus, iqr_us", [(False, 2, 17.5), (True, 2, 15), (False, 1, 15)])
def test_tp_ranks_in_lockstep_count_each_step_once_in_the_noise(tmp_path: Path, one_process: bool, gpus: int,
                                                                iqr_us: float) -> None:
    """Two runs of one TP=2 config (A/A), the step periods 1.000, 1.010, 1.020, 1.030 ms in turn: 39 periods a
    process, 10 of 1.000, 10 of 1.010, 10 of 1.020, 9 of 1.030 ms — median 1.010 ms, p90 1.030 ms (spread 1.02), p25
    1.005 ms (between the 10th and 11th), p75 1.020 ms: IQR 15 µs (17.5 µs over two ranks' 78 periods, the 20th and
    21st of which hold p25: 1.0025 ms). The noise is 1.96 × IQR / √n per trace, in quadrature, over BASE: with n = 39,
    √2 × 1.96 × 15 / √39 / 1 010 = 0.659 % (0.769 % with the IQR of 17.5 µs). Where each TP rank's process marks its
    steps, the two ranks' 78 periods are the same 39 steps twice; they counted as n = 78 (0.544 %), so identical
    configs were called different more often than the ~5 % the noise promises (normal noise of 2 %, 4 000 seeded
    pairs: 4.2 % for one rank, 14.2 % for two, 27.3 % for four) and the gate could fail a run for its rank count.
    Now n is the periods per process, 39, however the ranks are laid out."""
    periods = [1_000 * US, 1_010 * US, 1_020 * US, 1_030 * US]
    a, b = (_loop(tmp_path / f"{x}.sqlite", TP2, periods, gpus=gpus, one_process=one_process) for x in "ab")
    c = nle.compare([a, b], labels=["A", "B"]).comparisons[0]
    assert (c.metric_base.count, c.metric_base.p50_ns, c.metric_base.iqr_ns) == (39, 1_010 * US, iqr_us * US)
    assert c.noise_pct == pytest.approx(100 * math.sqrt(2) * 1.96 * iqr_us / math.sqrt(39) / 1_010)
    assert (c.verdict, c.headline[1]) == ("no_change", "Spread p90/p50 1.02 over 39 step periods vs 1.02 over 39; "
                                          f"noise ±{0.7 if iqr_us == 15 else 0.8} %: the change is within the noise.")


@pytest.mark.parametrize("flavor", ["2022.4", "2026.2"])
def test_warm_up_steps_in_one_capture_are_not_a_change_of_the_loop(tmp_path: Path, flavor: str) -> None:
    """BASE: the one-GPU loop, 60 steps of 1 ms, captured after warm-up. NEW: the same loop captured from its start,
    its first 2 steps cold — each kernel 3 times as long (990 µs a step), 3 ms apart — then 58 steps as BASE's.
    Truth: the loop did not change. The medians agree (1.000 ms: 2 of NEW's 59 periods are 3 ms); the cold steps
    are as busy as the rest (33 %), so the window rule keeps them in the steady window. The parts were over all 59
    periods: window (2 × 3 + 57) / 59 = 1.068 ms a step against 1.000, busy (2 × 990 + 57 × 330) / 59 = 352.4 µs, so
    `non_gpu` 715.4 µs against 670 and `gemm` (2 × 600 + 57 × 200) / 59 = 213.6 µs against 200: "Largest change: GPU
    idle with the host outside CUDA, NVTX and OS calls (idle cause `host_cpu`) +0.045 ms per step (window time per
    step 1.000 ms → 1.068 ms)" on a verdict of no change. Now each process's leading (and trailing) run of
    periods over 2 × its median is left out of the span the parts are over: NEW's span is steps 2 → 59, 57 periods
    of 1 ms, each 330 µs of kernels and 670 µs idle as in BASE, so no part changed and the headline names none."""
    base = _loop(tmp_path / "b.sqlite", ONE_GPU, MS, flavor=flavor, steps=60)
    new = _loop(tmp_path / "n.sqlite", ONE_GPU, [3 * MS] * 2 + [MS] * 58, flavor=flavor, steps=60, warm=2)
    res = nle.compare([base, new], labels=["STEADY", "COLD"])
    c, (b, n) = res.comparisons[0], res.traces
    assert (c.verdict, c.metric_base.p50_ns, c.metric_new.p50_ns, c.metric_new.count) == ("no_change", MS, MS, 59)
    assert (b.units, n.units, n.pooled_window_ns, n.busy_ns) == (59, 57, 57 * MS, 57 * 330 * US)
    assert (c.window_per_unit_base_ns, c.window_per_unit_new_ns) == (MS, MS)
    assert {d.name: d.delta_per_unit_ns for d in c.category_changes} == {
        "gemm": 0, "attention": 0, "norm": 0, "sampling": 0, "non_gpu": 0}
    assert c.main_reason is None and len(c.headline) == 3 and not any("change:" in x for x in c.headline)


def test_another_gpu_is_said_and_its_renamed_kernels_are_not_called_other_work(tmp_path: Path) -> None:
    """BASE on an H100; NEW the same loop on an A100: cuBLAS picks an `sm80_` GEMM for the `sm90_` one, every kernel
    takes 1.5 times as long (period 1.165 ms). Truth: the same work on another GPU. Not compared (different GPUs),
    which the reasons say first; the GEMM — 200 of 330 µs in BASE, 300 of 495 µs in NEW — has another name, so each
    run spends 130 / 330 = 195 / 495 = 39 % of its kernel time in names the other ran. The second reason read "the
    runs share little kernel work", false of one model on two GPUs; it now says what the names show."""
    a100 = ((SM80_GEMM, 300), (K.FLASH, 150), (K.RMS_NORM, 30), (SAMPLER, 15))
    base = _loop(tmp_path / "h.sqlite", ONE_GPU, MS)
    new = _loop(tmp_path / "a.sqlite", a100, 1_165 * US, gpu="NVIDIA A100-SXM4-80GB")
    c = nle.compare([base, new], labels=["H100", "A100"]).comparisons[0]
    assert (c.status, c.verdict, c.gpus_match) == ("too_different", "not_compared", False)
    assert c.reasons == ("different GPUs (NVIDIA H100 80GB HBM3 vs NVIDIA A100-SXM4-80GB)",
                         "the runs share few kernel names: H100 and A100 spend only 39 % and 39 % of their kernel "
                         "time in kernel names the other also ran (< 50 %); each ran gemm kernels the other did not "
                         "(kernels are matched by name, not by kind: the same work under another library, version or "
                         "GPU is not matched)")


@pytest.mark.parametrize("flavor", ["2021.5", "2024.2"])
def test_a_capture_started_inside_a_step_moves_no_part_of_marker_steps(tmp_path: Path, flavor: str) -> None:
    """No NVTX: steps run from one sampling kernel's end to the next's (marker-kernel steps, `step_time_p50`). BASE:
    40 steps of the one-GPU loop, 1 ms apart; NEW: the same, its capture started inside the first step, after its
    GEMM and attention kernels. Truth: the same loop. The steps tile each device from the first sampler's end
    (t0 + 350 µs) to the last's: 39 steps of 1 ms, each 330 µs of kernels (the next step's GEMM … sampler) and 670 µs
    idle, in both. The parts were over the window, which also holds the kernels before the first sampler (BASE all 4
    of step 0, NEW its norm and sampler): BASE (40 × 200) / 39 = 205.1 µs of `gemm` a step, NEW 200 µs: "Largest
    change: non-overlapped GPU time in `gemm` kernels −0.005 ms per step" of a loop where no kernel changed. Now the
    parts are over the steps' own span, like the step periods': no part changed, no such line."""
    base = _loop(tmp_path / "b.sqlite", ONE_GPU, MS, nvtx=(), flavor=flavor)
    new = _loop(tmp_path / "n.sqlite", ONE_GPU, MS, nvtx=(), flavor=flavor, skip=2)
    res = nle.compare([base, new], labels=["WHOLE", "CUT"])
    c, (b, n) = res.comparisons[0], res.traces
    assert (res.metric.name, c.verdict, c.metric_base.p50_ns, c.metric_new.p50_ns) == ("step_time_p50", "no_change",
                                                                                     MS, MS)
    assert [(t.units, t.pooled_window_ns, t.busy_ns) for t in (b, n)] == [(39, 39 * MS, 39 * 330 * US)] * 2
    assert {d.name: d.delta_per_unit_ns for d in c.category_changes} == {
        "gemm": 0, "attention": 0, "norm": 0, "sampling": 0, "non_gpu": 0}
    assert c.main_reason is None and len(c.headline) == 3


def test_an_nvtx_window_that_one_trace_cannot_have_names_that_trace(tmp_path: Path) -> None:
    """`--window-nvtx execute_model` over BASE with its step ranges and NEW captured without NVTX: NEW cannot have the
    window. The error said "the trace has no NVTX ranges" of a comparison of two traces, BASE having them; it now
    names the trace it means."""
    base = _loop(tmp_path / "b.sqlite", ONE_GPU, MS)
    new = _loop(tmp_path / "n.sqlite", ONE_GPU, MS, nvtx=())
    with pytest.raises(OptionError) as e:
        nle.compare([base, new], labels=["NVTX", "BARE"], window_nvtx="execute_model")
    assert str(e.value) == f"window_nvtx 'execute_model': the trace has no NVTX ranges (trace BARE: {new})"


def test_flash_attention_2_to_3_on_an_attention_heavy_step_is_said_to_rename_attention(tmp_path: Path) -> None:
    """A long-context step, attention most of it: BASE FlashAttention-2 (`flash::flash_fwd_kernel`, 600 µs) beside a
    200 µs GEMM, RMS norm 20 and sampler 10 (830 µs, period 1.500 ms); NEW FlashAttention-3 (`FlashAttnFwdSm90`,
    420 µs; period 1.320 ms). Kernel time in names the other ran: BASE 230 / 830 = 27.7 %, NEW 230 / 650 = 35.4 %,
    under 50 %: not compared, as for any kernel library swap (docs/COMPARE.md). The reason said "the runs share little
    kernel work" — false of one attention layer under another kernel's name; it now says what the names show: few
    names in common, and attention kernels each run ran that the other did not, kinds not being matched."""
    base = _loop(tmp_path / "fa2.sqlite", ((K.GEMM_QKV, 200), (K.FLASH, 600), (K.RMS_NORM, 20), (SAMPLER, 10)),
                 1_500 * US)
    new = _loop(tmp_path / "fa3.sqlite", ((K.GEMM_QKV, 200), (FA3, 420), (K.RMS_NORM, 20), (SAMPLER, 10)), 1_320 * US)
    c = nle.compare([base, new], labels=["FA2", "FA3"]).comparisons[0]
    assert (c.status, c.verdict, c.common_kernel_share) == ("too_different", "not_compared", pytest.approx(230 / 830))
    assert c.reasons == ("the runs share few kernel names: FA2 and FA3 spend only 27 % and 35 % of their kernel time "
                         "in kernel names the other also ran (< 50 %); each ran attention kernels the other did not "
                         "(kernels are matched by name, not by kind: the same work under another library, version or "
                         "GPU is not matched)",)
