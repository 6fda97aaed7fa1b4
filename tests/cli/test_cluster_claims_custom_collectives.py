"""Cluster claims on ranks whose tensor-parallel all-reduce is a custom kernel, not NCCL (the truth by construction in
the docstring)."""

from __future__ import annotations

from synth import TraceBuilder
from synth.scenarios.cluster import AR, BASE_UTC, GEMM, MS

import nsys_llm_explainer as nle
from nsys_llm_explainer.render.cluster import render_cluster_markdown

US = 1_000
VLLM_AR = "void vllm::cross_device_reduce_1stage<__nv_bfloat16, 2>(vllm::RankData*, vllm::RankSignals, int)"


def _ranks(tmp_path, ar: str) -> None:
    """2 ranks (pid 5000 + r on GPU r, sessions 3 ms apart on the common clock), 10 steps of 1 ms from 50 ms: a
    GEMM 10 µs into the step (rank 0 300 µs, rank 1 500 µs), then the all-reduce ``ar`` from 2 µs after the rank's
    GEMM to 20 µs after rank 1's starts (both ranks end together: rank 0 spins 200 µs a step waiting for rank 1),
    a ``cudaStreamSynchronize`` and an ``execute_model`` range per step."""
    for r in range(2):
        sh = -3 * r * MS
        b = TraceBuilder("2024.2", seed=r, utc_epoch_ns=BASE_UTC + 3 * r * MS)
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


def test_nccl_all_reduce_names_the_late_rank(tmp_path):
    """The same ranks with NCCL's all-reduce: rank 1 starts every all-reduce 200 µs after rank 0 (10 of 10 last),
    rank 0 waits 10 × 200 µs = 2 ms: the late-arriver claim names rank 1."""
    _ranks(tmp_path, AR)
    res = nle.analyze_cluster(str(tmp_path), jobs=1)
    assert [(c.id, c.rank) for c in res.claims] == [("late_arriver", "rank1")]


def test_custom_all_reduce_names_the_late_rank(tmp_path):
    """vLLM's custom all-reduce in place of NCCL's: the kernel spins on the peers' flags like NCCL's, so rank 0's
    runs 220 µs (312 → 532 µs into the step) and rank 1's 20 µs (512 → 532 µs), both ending together; rank 1 is
    last in 10 of 10 and rank 0 waits 10 × (220 − 20) µs = 2 ms. The cluster report read "No rank stands out" and
    "NCCL collectives across ranks: no NCCL kernels in any file". Now cluster/collectives.py matches every
    communication kernel (categories exposure.COMM_CATEGORIES; custom ones by name and time like NCCL's) and the
    section says what they are."""
    _ranks(tmp_path, VLLM_AR)
    res = nle.analyze_cluster(str(tmp_path), jobs=1)
    assert [(c.id, c.rank) for c in res.claims] == [("late_arriver", "rank1")]
    coll = res.collectives
    # 10 custom kernels per rank: rank 0's of 220 µs, rank 1's of 20 µs
    assert (coll.custom_kernels, coll.matched_collectives, coll.kind()) == (20, 10, "custom")
    assert {x.rank: (x.nccl_count, x.custom_count, x.custom_total_ns, x.wait_ns_total, x.last_arrival_count)
            for x in coll.ranks} == {"rank0": (0, 10, 2200 * US, 2 * MS, 0), "rank1": (0, 10, 200 * US, 0, 10)}
    assert res.claims[0].title == "rank1 is the rank the others wait for at custom collectives"
    assert [f.nccl_kernels for f in res.files] == [0, 0]
    md = render_cluster_markdown(res)
    assert "## Custom collectives across ranks" in md and "no NCCL kernels" not in md
    assert "custom collective kernels" in md   # the rank table's custom column


def test_deep_ep_all_to_all_names_the_late_rank(tmp_path):
    """DeepEP's intranode dispatch (category ``all_to_all``) in place of the all-reduce: it too waits for every peer,
    so the same timing holds — rank 1 last in 10 of 10, rank 0 waits 10 × 200 µs = 2 ms; the kernels are matched as
    custom collectives."""
    _ranks(tmp_path, "void deep_ep::intranode::dispatch<8, 768, 8192>(int4*, float*, int*)")
    res = nle.analyze_cluster(str(tmp_path), jobs=1)
    assert [(c.id, c.rank) for c in res.claims] == [("late_arriver", "rank1")]
    coll = res.collectives
    assert (coll.custom_kernels, coll.matched_collectives, coll.kind()) == (20, 10, "custom")
    assert {x.rank: (x.wait_ns_total, x.last_arrival_count) for x in coll.ranks} == {
        "rank0": (2 * MS, 0), "rank1": (0, 10)}


def test_nccl_only_cluster_leaves_the_custom_fields_out(tmp_path):
    """NCCL's all-reduce only: no custom_kernels / custom_count in cluster.json, the section keeps its NCCL title and
    the rank table has no custom column."""
    _ranks(tmp_path, AR)
    res = nle.analyze_cluster(str(tmp_path), jobs=1)
    d = res.to_dict()["collectives"]
    assert "custom_kernels" not in d and all("custom_count" not in r for r in d["ranks"])
    md = render_cluster_markdown(res)
    assert "## NCCL collectives across ranks" in md and "custom collective" not in md
