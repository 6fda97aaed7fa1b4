"""Data-parallel training communication (DDP / FSDP): sentences a report made that its trace contradicts. One rank per
trace (pid 100, GPU 0), compute on stream 7, NCCL on stream 13; each trace is built by hand and the truth worked out in
the docstring."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict

import pytest
from synth import TraceBuilder

from nsys_llm_explainer.options import options_from_kwargs
from nsys_llm_explainer.pipeline import analyze_path

US = 1_000
MS = 1_000 * US
PID = 100
COMP, NCCL_STREAM = 7, 13
AR = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
FWD = "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_tn"
BWD = "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_nt"
OPT = ("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::FusedAdamMathFunctor<float, "
       "4>>(int)")


def _ddp(tmp_path: Path, ar_us: int, steps: int = 20, opt: str = OPT, opt_every: int = 1) -> Dict[str, Any]:
    """DDP whose all-reduce runs after backward: per step 10 forward GEMMs of 200 µs and 10 backward GEMMs of
    400 µs on stream 7 (2 µs apart, first 20 µs into the step), one all-reduce of ``ar_us`` on stream 13 when
    backward ends, the Adam kernel (300 µs) on stream 7 3 µs after the all-reduce ends, a cudaStreamSynchronize
    from the last backward kernel's end to 5 µs after Adam's end, a ``train_step`` range to 10 µs after it; the next
    step 20 µs after Adam's end. Every launch from the main thread. ``opt``: the optimizer kernel's name, launched
    in the steps whose index is a multiple of ``opt_every`` (the others end 3 µs after the all-reduce)."""
    b = TraceBuilder()
    b.process(PID)
    g = b.thread(PID, PID, "python3")
    b.gpu(0)
    t = 1 * MS
    for i in range(steps):
        k = t + 20 * US
        for name, d in [(FWD, 200 * US)] * 10 + [(BWD, 400 * US)] * 10:
            b.launch(k - 15 * US, k - 10 * US, k, k + d, pid=PID, tid=PID, stream=COMP, name=name)
            k += d + 2 * US
        b.launch(k - 8 * US, k - 5 * US, k, k + ar_us * US, pid=PID, tid=PID, stream=NCCL_STREAM, name=AR)
        o0 = k + ar_us * US + 3 * US
        e = o0
        if i % opt_every == 0:
            b.launch(k - 6 * US, k - 3 * US, o0, o0 + 300 * US, pid=PID, tid=PID, stream=COMP, name=opt)
            e = o0 + 300 * US
        c = b.runtime(k, e + 5 * US, tid_g=g, name="cudaStreamSynchronize_v3020")
        b.sync(k, e + 5 * US, pid=PID, stream=COMP, corr=c)
        b.nvtx_push_pop(t, e + 10 * US, "train_step", tid_g=g)
        t = e + 20 * US
    p = tmp_path / "ddp.sqlite"
    b.write(str(p), overwrite=True)
    return analyze_path(str(p), options_from_kwargs()).to_dict()


def _gpu_bound(rep: Dict[str, Any]) -> Dict[str, Any]:
    return next(f for f in rep["findings"] if f["id"] == "gpu_bound")


def test_a_gpu_busy_mostly_in_nccl_is_not_called_kernel_speed_bound(tmp_path: Path) -> None:
    """The all-reduce takes 8.5 ms (a peer is late: the kernel spins). Per step: GEMMs 2,000 + 4,000 µs, gaps
    19 × 2 µs, the all-reduce 8,500 µs alone on the GPU, 3 µs, Adam 300 µs: busy 14.8 ms of each 14.883 ms
    period. Non-overlapped shares of the busy time (nothing overlaps): nccl 8.5 / 14.8 = 57.43 %, gemm 6 / 14.8 =
    40.54 %. The report said "GPU-bound … kernel time sets the pace", "kernel speed, not the host, sets the step
    time" and advised "faster kernels, fewer bytes moved, or more work per kernel": more than half the busy time is
    an NCCL kernel, whose length is the transfer's and the slowest peer's, not its SMs' speed."""
    rep = _ddp(tmp_path, ar_us=8_500)
    f = _gpu_bound(rep)
    assert f["title"] == ("Communication-bound: the GPU is busy 99.4 % of the steady window, 57.4 % of it in "
                          "collectives")
    assert "kernel speed, not the host" not in f["evidence"][0] and "57.4 %" in f["evidence"][0], f["evidence"][0]
    assert not any("faster kernels" in a for a in f["recommendation"]), f["recommendation"]
    assert any("overlap them with compute" in a for a in f["recommendation"]), f["recommendation"]
    comm = next(c for c in f["checks"] if c["metric"] == "comm_nonoverlap_pct")
    assert comm["observed"] == pytest.approx(8.5 / 14.8 * 100, abs=0.01)


def test_a_short_nccl_share_keeps_the_kernel_words(tmp_path: Path) -> None:
    """The same loop with a 2.5 ms all-reduce: busy 8.8 ms a step, nccl 2.5 / 8.8 = 28.4 % (< 50 %): the GEMMs
    (6 / 8.8 = 68.2 %) hold most of the busy time; the finding stays "GPU-bound … kernel time sets the pace" with
    the kernel advice."""
    f = _gpu_bound(_ddp(tmp_path, ar_us=2_500))
    assert f["title"].startswith("GPU-bound: ") and f["title"].endswith("kernel time sets the pace")
    assert any("faster kernels" in a for a in f["recommendation"])
    assert not any(c["metric"] == "comm_nonoverlap_pct" for c in f["checks"])


def test_an_all_reduce_serialized_after_backward_draws_a_claim(tmp_path: Path) -> None:
    """The 2.5 ms all-reduce starts when backward ends and Adam waits for it: per step 2.5 ms of 8.883 ms
    (28.1 %) run NCCL alone while stream 7 (compute) has nothing to do. DDP overlaps the bucketed all-reduce
    with backward; here none of it is. The report's only finding is `gpu_bound` ("kernel time sets the pace").
    Rule I would write (`comm_exposed`, findings/kernels.py): per device, exposed communication = busy time in
    which only communication kernels (category nccl / custom_allreduce) run (a union-minus-union on the device's
    intervals, vectorized as in the non-overlap split); claimed when ≥ 10 % of the window, with a second fact
    "overlapped" = the comm kernels' time that other kernels overlap / their union (0 % here): advice to overlap
    (DDP `bucket_cap_mb`, `gradient_as_bucket_view`, FSDP `backward_prefetch`), time at stake = the exposed ns."""
    rep = _ddp(tmp_path, ar_us=2_500)
    assert any(f["id"] not in ("gpu_bound",) and "all-reduce" in f["title"].lower() for f in rep["findings"]), \
        [f["title"] for f in rep["findings"]]


def test_an_adam_step_every_iteration_is_training(tmp_path: Path) -> None:
    """The 2.5 ms all-reduce loop: Adam (`FusedAdamMathFunctor`, 300 µs) runs once per step (20 times), 6 ms of
    176 ms = 3.4 % of kernel time; the backward GEMMs are cuBLAS names without a backward marker and every launch
    comes from the main thread (no `pt_autograd_*`). The facts read "Workload: inference (optimizer kernels
    3.4 % of kernel time)": inference never runs an optimizer step. Fix I would make: an `optimizer` kernel in
    ≥ half of the steps (or ≥ 1 per 1,000 kernels when no steps) is training evidence by itself, whatever its
    share; `optimizer` names stay as they are (`multi_tensor_apply` also serves `_foreach` ops, hence the
    per-step rule rather than "any")."""
    rep = _ddp(tmp_path, ar_us=2_500)
    assert rep["kernel_traits"]["workload"] == "training", rep["kernel_traits"]["workload_evidence"]


FOREACH = ("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::"
           "TensorListMetadata<2>, at::native::(anonymous namespace)::BinaryOpScalarFunctor<float, 2, 1, 1>, "
           "std::multiplies<float>, float>(T1, T2, T3, T4...)")


def test_a_foreach_step_every_iteration_is_training(tmp_path: Path) -> None:
    """The same loop whose optimizer is PyTorch's foreach Adam, seen as one `_foreach` kernel
    (`multi_tensor_apply_kernel<…BinaryOpScalarFunctor…>`, 300 µs, no optimizer's name) in each of the 20
    `train_step` ranges: 20 of 20 steps (≥ half) → training, that line first in the evidence."""
    rep = _ddp(tmp_path, ar_us=2_500, opt=FOREACH)
    kt = rep["kernel_traits"]
    assert kt["workload"] == "training", kt["workload_evidence"]
    assert kt["workload_evidence"][0] == "optimizer kernels in 20 of 20 steps (≥ half: an optimizer step every " \
                                         "iteration)"


def test_a_foreach_kernel_in_a_quarter_of_the_steps_is_no_training_evidence(tmp_path: Path) -> None:
    """The `_foreach` kernel in steps 0, 4, 8, 12, 16 only: 5 of 20 steps (< half; `_foreach` ops also run outside
    optimizers), 1.5 ms of 171.5 ms of kernel time (< 5 %), no backward name, no autograd thread: inference stays,
    and the evidence counts the steps. (A kernel named for Adam in the same steps reads training.)"""
    kt = _ddp(tmp_path, ar_us=2_500, opt=FOREACH, opt_every=4)["kernel_traits"]
    assert kt["workload"] == "inference", kt["workload_evidence"]
    assert kt["workload_evidence"][-1].endswith("no autograd thread, optimizer kernels in 5 of 20 steps")
    kt = _ddp(tmp_path, ar_us=2_500, opt_every=4)["kernel_traits"]
    assert kt["workload"] == "training", kt["workload_evidence"]
