"""Cluster claims on ranks exported by different nsys generations: a job's rank files are often exported on different
machines, one with 2022.4 (EXPORT_META_DATA, no ``--ts-normalize``), one with 2024.2 and ``--ts-normalize`` (timestamps
already UTC epoch ns), one with 2026.2 (TARGET_INFO_SESSION_START_TIME with ``systemClockNs``). Every one records the
session's UTC start, so the ranks align and the custom-collective late-arrival claims must read as when all files are
2024.2 (tests/cli/test_cluster_claims_custom_collectives.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional, Sequence

import pytest
from synth import TraceBuilder
from synth.scenarios.cluster import AR, BASE_UTC, GEMM, MS

import nsys_llm_explainer as nle
from nsys_llm_explainer.render.cluster import render_cluster_markdown

US = 1_000
VLLM_AR = "void vllm::cross_device_reduce_1stage<__nv_bfloat16, 2>(vllm::RankData*, vllm::RankSignals, int)"


def _ranks(tmp_path: Path, ar: str, flavors: Sequence[str], normalized: Sequence[int] = (),
           utc: Optional[Sequence[int]] = None) -> None:
    """The ranks of test_cluster_claims_custom_collectives._ranks (rank r: pid 5000 + r on GPU r, session 3 r ms after
    rank 0's; 10 steps of 1 ms from 50 ms on the common clock: a GEMM from 10 µs (rank 0 300 µs, rank 1 500 µs), then
    ``ar`` from 2 µs after the rank's GEMM to 532 µs into the step: rank 0's runs 220 µs, rank 1's 20 µs) with rank r
    written as ``flavors[r]``; a rank in ``normalized`` is exported with ``--ts-normalize`` (its timestamps + its
    utcEpochNs); ``utc``: the session starts written (0: none recorded)."""
    for r, flavor in enumerate(flavors):
        u = BASE_UTC + 3 * r * MS if utc is None else utc[r]
        sh = -3 * r * MS + (u if r in normalized else 0)
        b = TraceBuilder(flavor, seed=r, utc_epoch_ns=u)
        if r in normalized:
            b.meta("EXPORT_PARAM_TIME_NORMALIZE", "true")
        pid = 5000 + r
        b.process(pid)
        g = b.thread(pid, pid, f"rank{r}")
        b.gpu(r)
        for s in range(10):
            st = 50 * MS + s * MS
            gend = st + 10 * US + (500 if r else 300) * US
            end = st + 10 * US + 500 * US + 2 * US + 20 * US
            b.launch(st + sh, st + 5 * US + sh, st + 10 * US + sh, gend + sh, pid=pid, tid=pid, device=r, name=GEMM)
            b.launch(st + 6 * US + sh, st + 9 * US + sh, gend + 2 * US + sh, end + sh, pid=pid, tid=pid, device=r,
                     name=ar)
            c = b.runtime(st + 12 * US + sh, end + 5 * US + sh, tid_g=g, name="cudaStreamSynchronize_v3020")
            b.sync(st + 12 * US + sh, end + 5 * US + sh, pid=pid, device=r, corr=c)
            b.nvtx_push_pop(st + sh, end + 8 * US + sh, "execute_model", tid_g=g)
        b.write(str(tmp_path / f"rank{r}.sqlite"), overwrite=True)


@pytest.mark.parametrize("flavors,normalized", [
    (("2021.5", "2026.2"), ()),
    (("2022.4", "2024.2"), (1,)),      # rank 1 exported with --ts-normalize (2023.4 and later only)
    (("2026.2", "2023.4"), (1,)),
])
@pytest.mark.parametrize("ar", [AR, VLLM_AR])
def test_mixed_generations_name_the_late_rank(tmp_path: Path, flavors: Sequence[str], normalized: Sequence[int],
                                              ar: str) -> None:
    """Aligned on their session starts, rank 1 starts every collective 200 µs after rank 0 (10 of 10 last) and rank 0
    waits 10 × 200 µs = 2 ms, whatever generation wrote each file and whether its timestamps were normalized: the
    late-arriver claim names rank 1, with NCCL's all-reduce and with vLLM's custom one."""
    _ranks(tmp_path, ar, flavors, normalized)
    res = nle.analyze_cluster(str(tmp_path), jobs=1)
    assert res.alignment.aligned
    assert [(c.id, c.rank) for c in res.claims] == [("late_arriver", "rank1")]
    assert {x.rank: (x.wait_ns_total, x.last_arrival_count) for x in res.collectives.ranks} == {
        "rank0": (2 * MS, 0), "rank1": (0, 10)}


@pytest.mark.parametrize("flavors", [("2021.5", "2022.4"), ("2023.4", "2026.2")])
def test_mixed_generations_without_session_starts_make_no_timing_claim(tmp_path: Path,
                                                                       flavors: Sequence[str]) -> None:
    """No rank recorded its session start (utcEpochNs 0), whatever the generation: the files cannot be put on one
    clock, and the collectives are matched in issue order, counts only (docs/CLUSTER.md: no kernel times compared),
    so no wait and no late arriver is stated (rank 1's lateness is not seen). The findings section read "No rank
    stands out", a claim about the ranks' timing that was never compared. Fixed: it says what was not compared."""
    _ranks(tmp_path, VLLM_AR, flavors, utc=(0, 0))
    res = nle.analyze_cluster(str(tmp_path), jobs=1)
    assert not res.alignment.aligned and res.claims == ()
    assert {x.rank: (x.matched, x.wait_ns_total, x.last_arrival_count) for x in res.collectives.ranks} == {
        "rank0": (10, None, None), "rank1": (10, None, None)}
    md = render_cluster_markdown(res)
    assert "No rank stands out" not in md
    assert ("No claim holds of what could be compared; the ranks' timing (collective waits, late arrivers) was not "
            "compared: the clocks are not aligned (" in md)
