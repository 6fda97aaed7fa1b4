"""The window, pause and harness rules (window rule 6, the one-pause rule, unsampled `host_cpu` stretches naming other
processes, harness kernels of event-timed threads, copy bytes not recorded, mixed start-up findings named "largest in
the loop", the headline's quoted label) under every exporter generation, and an NVTX range pushed with an empty name.

(a) Every generation: each rule's hand-computed test (its numbers in its own docstring) is run again on traces written
as the 2021.5, 2022.4, 2023.4 and 2026.2 exporters write them (the tests' own are 2024.2's; /work/shared/SCHEMA.md: the
generations differ in tables and columns these rules do not read — ENUM tables, the metadata table's name,
`greenContextId`, graph tables —, so each claim must come out the same).
(b) An NVTX range pushed with an empty name was called by the cause's own name: "The GPU idles while the host is in NVTX
range `nvtx`", "largest in the loop `nvtx`", "10 idle gaps on device 0 hold `nvtx`" — no range is named `nvtx`. An empty
name is the unnamed range `[unnamed]`, as one without text (model/names.intern_strings)."""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path
from typing import Callable, List, Tuple

import pytest
from synth import TraceBuilder
from synth.store import RowStore

from nsys_llm_explainer.options import options_from_kwargs
from nsys_llm_explainer.pipeline import analyze_path

US = 1_000
OTHER_GENERATIONS = ("2021.5", "2022.4", "2023.4", "2026.2")
#: the oldest generation in the fast set (the most columns missing); the others with the slow tests (in CI)
GENERATION_PARAMS = [g if g == "2021.5" else pytest.param(g, marks=pytest.mark.slow) for g in OTHER_GENERATIONS]
#: (module, test) of each new rule's hand-computed tests whose only argument is ``tmp_path``
RULE_TESTS: List[Tuple[str, str]] = [
    ("test_claims_unsampled_launcher_gaps", "test_unsampled_launcher_names_the_workers_sampled_in_its_gaps"),
    ("test_claims_unsampled_launcher_gaps", "test_off_cpu_launcher_sampled_only_in_its_launch_bursts"),
    ("test_claims_unsampled_launcher_gaps", "test_one_pause_holding_most_of_the_wait_is_called_a_pause"),
    ("test_claims_unsampled_launcher_gaps", "test_epoch_boundary_of_a_pytorch_training_loop"),
    ("test_claims_one_time_work_titles", "test_mixed_finding_is_titled_after_its_largest_detail_in_the_loop"),
    ("test_claims_one_time_work_titles", "test_autotuning_title_quotes_every_call_of_the_kind"),
    ("test_claims_one_time_work_titles", "test_stake_over_all_details_is_labelled"),
    ("test_claims_benchmark_harnesses", "test_step_sync_of_an_event_timed_harness_is_not_told_to_double_buffer"),
    ("test_claims_benchmark_harnesses", "test_idle_sync_of_an_event_timed_harness_is_not_told_to_remove_the_sync"),
    ("test_claims_benchmark_harnesses", "test_l2_flush_of_a_do_bench_loop_is_not_the_fusion_target"),
    ("test_claims_benchmark_harnesses", "test_timed_elementwise_work_keeps_the_fusion_finding_at_its_timed_share"),
    ("test_claims_rl_post_training", "test_an_rl_job_is_training_with_generation_on_vllm_and_pytorch"),
    ("test_claims_rl_post_training", "test_large_device_to_device_copies_are_not_said_to_come_from_contiguous"),
    ("test_window_autotune", "test_an_autotuning_first_pass_before_warm_steps_is_trimmed"),
    ("test_window_autotune", "test_an_autotuning_pass_with_too_little_after_it_keeps_the_whole_trace"),
    ("test_window_autotune", "test_a_window_without_repeated_steps_is_not_called_a_steady_state"),
    ("test_harness_kernels", "test_flushes_between_pairs_are_harness_kernels"),
    ("test_copy_bytes_unrecorded", "test_some_copies_without_bytes_count_only_the_recorded_ones"),
    ("test_copy_bytes_unrecorded", "test_no_bytes_column_says_bytes_not_recorded"),
]


@pytest.mark.parametrize("flavor", GENERATION_PARAMS)
@pytest.mark.parametrize("module,name", RULE_TESTS, ids=[n for _, n in RULE_TESTS])
def test_each_rule_makes_the_same_claim_on_every_generation(flavor: str, module: str, name: str,
                                                                 tmp_path: Path, monkeypatch) -> None:
    """The rule's test, every `TraceBuilder()` in it writing ``flavor``'s tables and columns: the same numbers and
    sentences (the test's own hand-computed assertions) — no generation-specific column is read by these rules."""
    monkeypatch.setattr(RowStore.__init__, "__defaults__", (flavor,))
    assert TraceBuilder().flavor == flavor
    test: Callable[..., None] = getattr(importlib.import_module(module), name)
    assert list(inspect.signature(test).parameters) == ["tmp_path"]
    test(tmp_path)


# ---------------------------------------------------------------- (b) a range pushed with an empty name

def _two_ranges(first: str, second: str, flavor: str) -> Tuple[TraceBuilder, int]:
    """test_claims_one_time_work_titles's stake trace: one thread (pid 7, tid 1) launching a 9 µs `gemm` every 10 µs
    (each launched 8 µs ahead by a 2 µs call); 20 kernels (10 → 209 µs), then 10 steps of 160 µs from 220 µs: range
    ``first`` 60 µs, range ``second`` 20 µs, 10 kernels from 90 µs after the step's start; 20 kernels at the end.
    Returns the builder and the window's end (2,307 µs: the last kernel's end)."""
    b = TraceBuilder(flavor)
    b.process(7)
    g = b.thread(7, 1)

    def loop(t0: int, n: int) -> int:
        for i in range(n):
            t = t0 + i * 10 * US
            b.launch(t - 8 * US, t - 6 * US, t, t + 9 * US, pid=7, tid=1, name="gemm")
        return t0 + n * 10 * US

    t = loop(10 * US, 20)
    for _ in range(10):
        b.nvtx_push_pop(t, t + 60 * US, first, tid_g=g)
        b.nvtx_push_pop(t + 60 * US, t + 80 * US, second, tid_g=g)
        t = loop(t + 90 * US, 10)
    return b, loop(t, 20) - 1 * US


@pytest.mark.parametrize("flavor", ["2021.5", "2024.2", "2026.2"])
def test_a_range_pushed_with_an_empty_name_is_not_named_after_the_cause(flavor: str, tmp_path: Path) -> None:
    """Both ranges pushed with ``""``: one unnamed range of 20 rows, 10 × 60 + 10 × 20 = 800 µs of `nvtx` idle in
    the 2,307 µs window (34.7 %), 10 gaps. The title said "NVTX range `nvtx`" and the gap line "hold `nvtx`" (the
    empty detail fell back to the kind's name); now both name `[unnamed]`, the ranges table's row too."""
    b, end = _two_ranges("", "", flavor)
    p = tmp_path / "t.sqlite"
    b.write(str(p))
    rep = analyze_path(str(p), options_from_kwargs(window=(0, end))).to_dict()
    f = next(f for f in rep["findings"] if f["id"] == "idle_nvtx")
    assert f["title"] == "The GPU idles while the host is in NVTX range `[unnamed]` (34.7 % of the window, 800.00 µs)"
    assert f["cause"] == {"kind": "nvtx", "detail": "[unnamed]"}
    assert "10 idle gaps on device 0 hold `[unnamed]`; largest at 0.207 → 0.298 ms from trace start (80.00 µs " \
           "of it)." in f["evidence"]
    assert not any("`nvtx`" in s for s in [f["title"], *f["evidence"]][:1] + f["evidence"][1:2])
    assert [(r["name"], r["count"]) for r in rep["nvtx"]["ranges"]] == [("[unnamed]", 20)]


def test_an_empty_name_beside_a_named_range_keeps_both_apart(tmp_path: Path) -> None:
    """`load` (600 µs, 75 % of the 800 µs) and an empty-named range (200 µs): "By range: `load` 600.00 µs;
    `[unnamed]` 200.00 µs." (the empty one was shown as `–`, the mark of "no detail")."""
    b, end = _two_ranges("load", "", "2024.2")
    p = tmp_path / "t.sqlite"
    b.write(str(p))
    rep = analyze_path(str(p), options_from_kwargs(window=(0, end))).to_dict()
    f = next(f for f in rep["findings"] if f["id"] == "idle_nvtx")
    assert "By range: `load` 600.00 µs; `[unnamed]` 200.00 µs." in f["evidence"]


def test_fusion_title_of_a_harness_names_the_timed_kernel_time(tmp_path: Path) -> None:
    """test_claims_benchmark_harnesses's do_bench with a 20 µs add inside each pair: the adds are 2.5 ms of 6.25 ms of
    timed kernel time (40.0 %) but of 16.25 ms of kernel time 15.4 %. The title says "40.0 % of kernel time";
    gpu_bound's evidence says "of the timed kernel time" for the same base: the title should too."""
    import test_claims_benchmark_harnesses as harnesses
    rep = harnesses._run(harnesses._do_bench(timed_add_us=20), tmp_path)
    f = next(f for f in rep["findings"] if f["id"] == "elementwise_fusion")
    assert f["title"] == "Unfused (eager) pointwise kernels take 40.0 % of the timed kernel time"
