"""Is NEW the same workload as BASE? Judged by the kernel names the runs share (docs/COMPARE.md, "Too short, too
different"): the smaller of the two runs' shares of kernel time spent in kernel names the other also ran, at least
50 %. The weighted Jaccard of the kernel mixes is reported only.

The loop (``_loop``, exact TraceBuilder rows, no jitter; the loop of test_compare_claims_loop_pairs.py with its kernels
given): per step from its start t a 16 µs H2D copy, then the ``kernels`` back to back from t + 20 µs, a
``cudaStreamSynchronize`` returning 5 µs after the last, an NVTX ``execute_model`` range to 10 µs after that; the next
step starts 645 µs after the sync returns. So the step period is 670 µs + Σ kernel durations (1 ms for the four kernels
of BASE, 330 µs)."""

from __future__ import annotations

import pytest
from synth.loops import synced_loop
from synth.scenarios.names import K

import nsys_llm_explainer as nle
from nsys_llm_explainer.comparison.gate import gate
from nsys_llm_explainer.errors import EXIT_INCOMPARABLE, EXIT_REGRESSION

US = 1_000
MS = 1_000_000
SAMPLER = "void at::native::sampling_kernel()"
FLASH_BWD = "void flash::flash_bwd_dq_dk_dv_loop_kernel<Flash_bwd_kernel_traits<128, 64, 128, 8>>(Flash_bwd_params)"
ADAM = "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<FusedAdamMathFunctor>()"
BASE = ((K.GEMM_QKV, 200), (K.FLASH, 100), (K.RMS_NORM, 20), (SAMPLER, 10))


def _loop(path, kernels=BASE, steps: int = 40) -> str:
    return synced_loop(str(path), kernels, steps)


def test_a_new_kernel_in_new_is_a_change_of_the_loop_while_most_of_new_is_the_old_kernels(tmp_path):
    """NEW runs the loop plus an elementwise kernel of 200 µs per step (a fallback a PR brought in). Truth: the same
    workload, 20 % slower (period 1.000 → 1.200 ms), all of it the new kernel (+0.200 ms per step). Kernel time in
    names the other run also ran: BASE 330 / 330 = 100 %, NEW 330 / 530 = 62.3 %, so 62.3 % ≥ 50 %: comparable
    (the weighted Jaccard, 330/530 / (1 + 200/530) = 330 / 730 = 0.452, said "too different", and
    ``--allow-incomparable`` let the regression through). The gate fails it (exit 3)."""
    base = _loop(tmp_path / "b.sqlite")
    new = _loop(tmp_path / "n.sqlite", BASE[:1] + ((K.ELEMENTWISE, 200),) + BASE[1:])
    res = nle.compare([base, new], labels=["BASE", "NEW"])
    c = res.comparisons[0]
    assert c.similarity == pytest.approx(330 / 730) and c.common_kernel_share == pytest.approx(330 / 530)
    assert (c.status, c.verdict, c.change_pct) == ("comparable", "slower", pytest.approx(20.0))
    assert (c.metric_base.p50_ns, c.metric_new.p50_ns) == (1_000 * US, 1_200 * US)
    assert (c.main_reason.component, c.main_reason.delta_per_unit_ns) == ("category", 200 * US)
    k = {d.name: d for d in c.kernel_deltas}
    assert (k[K.ELEMENTWISE].delta_per_unit_ns, k[K.FLASH].delta_per_unit_ns) == (200 * US, 0)
    lines, code = gate(res, 5.0, allow_incomparable=True)
    assert code == EXIT_REGRESSION and lines[0].startswith("REGRESSION: median step period: BASE BASE 1.000 ms, "
                                                           "NEW NEW 1.200 ms, +20.0 %")


def test_a_new_kernel_that_is_most_of_new_is_too_different(tmp_path):
    """The same with a 400 µs kernel: NEW spends 330 / 730 = 45.2 % of its kernel time in BASE's kernels (< 50 %),
    BASE 100 % in NEW's: too different, the reason naming NEW and 45 % (floored); the gate fails closed (exit 4)."""
    base = _loop(tmp_path / "b.sqlite")
    new = _loop(tmp_path / "n.sqlite", BASE[:1] + ((K.ELEMENTWISE, 400),) + BASE[1:])
    res = nle.compare([base, new], labels=["BASE", "NEW"])
    c = res.comparisons[0]
    assert c.common_kernel_share == pytest.approx(330 / 730)
    assert (c.status, c.verdict) == ("too_different", "not_compared")
    assert c.reasons == ("the runs share little kernel work: NEW spends only 45 % of its kernel time in kernel names "
                         "BASE also ran (< 50 %)",)
    assert gate(res, 5.0)[1] == EXIT_INCOMPARABLE


@pytest.mark.parametrize("kind", ["other_engine", "training"])
def test_another_workload_sharing_some_kernel_names_is_too_different(tmp_path, kind):
    """Names overlap partly. ``other_engine``: another GEMM and attention kernel (nvjet, paged attention), the same
    RMS norm and sampler: each run spends 30 / 330 = 9.1 % of its kernel time in common names (Jaccard
    (30/330) / (2 − 30/330) = 0.048). ``training``: the forward's GEMM, FlashAttention and norm (320 µs) plus a
    backward GEMM 400, FlashAttention backward 250 and an Adam step 100 µs, no sampler: BASE spends 320 / 330 = 97 %
    in common names but the training step only 320 / 1 070 = 29.9 %: the smaller decides, too different."""
    base = _loop(tmp_path / "b.sqlite")
    if kind == "other_engine":
        kernels = ((K.GEMM_O, 200), (K.PAGED_ATTN, 100), (K.RMS_NORM, 20), (SAMPLER, 10))
        share, why = 30 / 330, "BASE and NEW spend only 9 % and 9 % of their kernel time in kernel names the other"
    else:
        kernels = BASE[:3] + ((K.GEMM_UP, 400), (FLASH_BWD, 250), (ADAM, 100))
        share, why = 320 / 1070, "NEW spends only 29 % of its kernel time in kernel names BASE also ran"
    c = nle.compare([base, _loop(tmp_path / "n.sqlite", kernels)], labels=["BASE", "NEW"]).comparisons[0]
    assert c.common_kernel_share == pytest.approx(share)
    assert (c.status, c.verdict) == ("too_different", "not_compared") and why in c.reasons[0]
