"""DeepSpeed ZeRO traces: DeepSpeed's NVTX ranges around one layer's parameter fetch (`fetch_sub_module`) or a
collective (`allgather_fn`) and its ZeRO optimizer's `step` are parts of an iteration, never the steps; per-step copy
figures are quoted only over steps the report is confident of (numbers worked out in the docstrings)."""

from __future__ import annotations

from pathlib import Path

import pytest
from synth import TraceBuilder
from test_claims_weight_offloading import PID, _run, _zero_inference

from nsys_llm_explainer.render.markdown import render_markdown

US, MS = 1_000, 1_000_000


def test_zero_inference_layer_fetch_ranges_are_not_steps(tmp_path: Path) -> None:
    """(trace: test_claims_weight_offloading's ZeRO-Inference stream, 6 ms copies beside 4 ms layers) The only NVTX
    range is DeepSpeed's `fetch_sub_module`, 50 µs around each of the 24 layers' prefetch and launches, one layer
    every 6.010 ms. It was taken as the step (confidence low: "its name does not look like a model step"), and the
    copy-path evidence quoted "median step: busy 80.0 %, 67.11 MB" — the copy engine's share of a 50 µs fetch range
    (40 µs), not of any step. No range here marks a step and no sampling kernel ran: the report says so (method
    `none`), and the evidence gives the window's figures only: 24 × 64 MiB = 1.61 GB in 144 ms = 11.2 GB/s."""
    rep = _run(_zero_inference(6, 4, "2022.4"), tmp_path, "zero_late.sqlite")
    assert rep.steps.method == "none"
    assert rep.steps.reason.startswith("no NVTX range repeats once per step"), rep.steps.reason
    (f,) = [f for f in rep.findings if f.id == "copy_path"]
    assert f.evidence[0] == ("Device 0: 24 Host-to-Device copies keep the copy path busy 144.000 ms (97.1 % of the "
                             "window), 1.61 GB at 11.2 GB/s.")
    # no step was found, so the host-link line says no "every step": the 24 layers' weights cross again and again
    assert f.recommendation[0].startswith("Fewer bytes over the host link: keep what is streamed again and again "
                                          "resident on the GPU when memory allows (weights, KV blocks)")
    assert not any("step" in line for line in f.recommendation), f.recommendation


def _zero3_training(flavor: str) -> TraceBuilder:
    """ZeRO-3 training, 5 iterations from t = 1 ms + 20 i ms on one thread: `DeepSpeedEngine.forward` [t, t + 6 ms)
    holding per layer j (h = t + 1.5 j ms, 4 layers) `PartitionedParameterCoordinator.fetch_sub_module`
    [h, h + 50 µs) with an `allgather_fn` [h + 5, h + 45) µs inside launching an all-gather, then the layer's GEMM
    launched at h + 60 µs; `DeepSpeedEngine.backward` [t + 6, t + 16) ms with 12 launches 800 µs apart; the ZeRO
    optimizer's `DeepSpeedZeroOptimizer_Stage3.step` [t + 16, t + 19) ms with 2 Adam launches. Each kernel runs
    200 µs from 10 µs after its launch."""
    b = TraceBuilder(flavor)
    b.process(PID)
    g = b.thread(PID, PID, "python3")

    def launch(at: int, name: str) -> None:
        b.launch(at, at + 5 * US, at + 10 * US, at + 210 * US, pid=PID, tid=PID, name=name)

    for i in range(5):
        t = 1 * MS + i * 20 * MS
        b.nvtx_push_pop(t, t + 6 * MS, "DeepSpeedEngine.forward", tid_g=g)
        for j in range(4):
            h = t + j * 1_500 * US
            b.nvtx_push_pop(h, h + 50 * US, "PartitionedParameterCoordinator.fetch_sub_module", tid_g=g)
            b.nvtx_push_pop(h + 5 * US, h + 45 * US, "allgather_fn", tid_g=g)
            launch(h + 10 * US, "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)")
            launch(h + 60 * US, "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_32x5_tn")
        b.nvtx_push_pop(t + 6 * MS, t + 16 * MS, "DeepSpeedEngine.backward", tid_g=g)
        for j in range(12):
            launch(t + 6 * MS + j * 800 * US + 20 * US, "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_32x5_nn")
        b.nvtx_push_pop(t + 16 * MS, t + 19 * MS, "DeepSpeedZeroOptimizer_Stage3.step", tid_g=g)
        for j in range(2):
            launch(t + 16 * MS + j * MS + 20 * US, "multi_tensor_apply_kernel<TensorListMetadata<4>, AdamFunctor>")
    return b


@pytest.mark.parametrize("flavor", ["2021.5", "2026.2"])
def test_zero3_optimizer_step_and_fetch_ranges_are_not_the_step(tmp_path: Path, flavor: str) -> None:
    """(trace: :func:`_zero3_training`) `DeepSpeedZeroOptimizer_Stage3.step` contains "step" and was taken as the step
    (3 ms of a 20 ms iteration; the optimizer's own `step`, as `Optimizer.step#AdamW.step` is); the per-layer fetch
    and all-gather ranges are no steps either. No range encloses a whole iteration: the outermost repeating range with
    the most kernels, `DeepSpeedEngine.backward` (12 launches against the forward's 8), is used with confidence low,
    its name not looking like a step."""
    rep = _run(_zero3_training(flavor), tmp_path, "zero3.sqlite")
    assert rep.steps.method == "nvtx"
    assert rep.steps.step_ranges == ("DeepSpeedEngine.backward",)
    assert rep.steps.confidence == "low"
    assert rep.steps.step_count == 5


def test_per_step_copy_figures_are_not_quoted_over_low_confidence_steps(tmp_path: Path) -> None:
    """The same ZeRO-Inference stream with its 50 µs per-layer range named `layer_prefetch` (a user's hook range,
    not a known library name): it stays the step, confidence low. The copy-path evidence quoted "median step: busy
    80.0 %, 67.11 MB" over those 50 µs ranges (40 µs of copy in each); a per-step figure over steps the report is not
    confident of is not quoted. Nor in the memory section: it read "Copies issued per step (median; …): 1, 67.11 MB"
    (the one copy issued inside each 50 µs range)."""
    rep = _run(_zero_inference(6, 4, "2026.2", hook="layer_prefetch"), tmp_path, "zero_hook.sqlite")
    assert rep.steps.method == "nvtx" and rep.steps.confidence == "low"
    (f,) = [f for f in rep.findings if f.id == "copy_path"]
    assert f.evidence[0] == ("Device 0: 24 Host-to-Device copies keep the copy path busy 144.000 ms (97.1 % of the "
                             "window), 1.61 GB at 11.2 GB/s.")
    assert rep.memory.per_step is not None and rep.memory.per_step.copies_per_step_median == 1   # the data stays
    assert "per step" not in render_markdown(rep).split("## Memory copies", 1)[1].split("\n## ", 1)[0]
