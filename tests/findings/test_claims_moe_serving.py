"""Mixture-of-Experts serving (gating softmax, router top-k kernels, all-to-all dispatch, expert-parallel send/recv):
sentences a report made that its trace contradicts. Each trace is built by hand; the truth is worked out in the
docstring."""

from __future__ import annotations

from pathlib import Path

from synth import TraceBuilder

from nsys_llm_explainer.options import options_from_kwargs
from nsys_llm_explainer.pipeline import analyze_path

US = 1_000
MS = 1_000_000
T0 = 10 * MS
ROUTER = "ampere_bf16_s16816gemm_bf16_64x64_sliced1x2_ldg8_f2f_tn"
TOPK = ("void vllm::moe::topkGatingSoftmax<8, 128, 4, 16, int>(const float*, const bool*, float*, int, int*, int*, "
        "int, int, int)")
FUSED = "fused_moe_kernel"
ARGMAX = "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::ArgMaxOps<float>>>(...)"
GROUPED = ("void cutlass::Kernel<cutlass::gemm::kernel::GemmGrouped<cutlass::gemm::threadblock::MmaMultistage<>, "
           "cutlass::epilogue::threadblock::Epilogue<>, false>>(cutlass::gemm::kernel::GemmGrouped<>::Params)")
A2A = "ncclDevKernel_AllToAll_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"


def _moe_decode(path: Path, steps: int, sampler: bool) -> None:
    """One GPU, ``steps`` decode steps of 4 MoE layers; per layer a router GEMM (12 µs), `topkGatingSoftmax` (6 µs)
    and `fused_moe_kernel` (40 µs), 20 µs apart; with ``sampler`` an argmax kernel (5 µs) ends each step."""
    b = TraceBuilder("2024.2")
    b.process(100, "vllm")
    b.thread(100, 100, "VllmWorker")
    b.gpu(0)
    t = T0
    for _ in range(steps):
        for _ in range(4):
            for name, d in ((ROUTER, 12), (TOPK, 6), (FUSED, 40)):
                b.launch(t, t + 5 * US, t + 8 * US, t + (8 + d) * US, pid=100, tid=100, name=name)
                t += (d + 20) * US
        if sampler:
            b.launch(t, t + 5 * US, t + 8 * US, t + 13 * US, pid=100, tid=100, name=ARGMAX)
            t += 30 * US
        t += 100 * US
    b.write(str(path), overwrite=True)


def test_moe_gating_softmax_is_not_unfused_attention(tmp_path: Path) -> None:
    """The MoE router's `topkGatingSoftmax` (80 × 6 µs of 80 × 58 + 20 × 5 µs = 480 of 4,740 µs = 10.1 % of kernel
    time) picks experts; it is no attention softmax. The report said "Attention runs unfused (softmax + batched
    GEMMs): softmax alone is 10.1 % of kernel time" with the advice to use FlashAttention, and listed it under the
    `softmax` / `attention_unfused` traits; now neither trait nor finding (it stays in the `moe` category)."""
    p = tmp_path / "t.sqlite"
    _moe_decode(p, 20, sampler=True)
    rep = analyze_path(str(p), options_from_kwargs())
    assert "attention_unfused" not in {f.id for f in rep.findings}
    assert "softmax" not in rep.traits.traits and "attention_unfused" not in rep.traits.traits
    moe = next(c for c in rep.to_dict()["categories"]["overall"] if c["category"] == "moe")
    assert moe["total_ns"] == 20 * 4 * (6 + 40) * US


def test_moe_router_topk_kernels_do_not_split_steps(tmp_path: Path) -> None:
    """20 decode steps, each 4 MoE layers and one argmax sampler. The default step marker
    `argmax|sampl|top_?k|top_?p|topp` also matched `topkGatingSoftmax` (once per layer): the report said "99 steps"
    (4 × 20 + 20 markers − 1) at a p50 of one layer. The router kernels are left out of the default marker: 19 steps
    between the 20 argmax kernels, each one step long: 4 × (12+20 + 6+20 + 40+20) µs + 30 + 100 = 602 µs, and a note
    names the kernels left out."""
    p = tmp_path / "t.sqlite"
    _moe_decode(p, 20, sampler=True)
    rep = analyze_path(str(p), options_from_kwargs()).to_dict()
    st = rep["steps"]
    assert st["method"] == "marker"
    assert st["step_count"] == 19
    assert [m["name"] for m in st["marker_kernels"]] == [ARGMAX]
    assert (st["summary"]["p50_ns"], st["summary"]["max_ns"]) == (602 * US, 602 * US)
    assert any(n.startswith("MoE router kernels left out of the default step marker") and "(80)" in n
               for n in st["notes"])


def test_moe_router_alone_gives_no_steps(tmp_path: Path) -> None:
    """Without a sampler kernel the only default-marker matches are the 80 router `topkGatingSoftmax` kernels: no
    steps (before: 79 "steps", each one MoE layer); the reason says the router kernels were left out."""
    p = tmp_path / "t.sqlite"
    _moe_decode(p, 20, sampler=False)
    st = analyze_path(str(p), options_from_kwargs()).to_dict()["steps"]
    assert st["method"] == "none"
    assert "MoE router kernels left out of the default step marker" in st["reason"]


def test_alltoall_late_rank_named_when_dispatch_starts_together(tmp_path: Path) -> None:
    """Expert parallelism over 2 GPUs (pid 100 / GPU 0, pid 101 / GPU 1), 20 layers 1 ms apart. Dispatch all-to-all:
    both ranks [t + 66, t + 100) µs (start together: no last arriver). Experts (grouped GEMM): rank 0 100 µs, rank 1
    300 µs (3× the tokens). Combine all-to-all: rank 0 [t + 200, t + 430), rank 1 [t + 400, t + 430) µs. p50 in the
    collectives: rank 0 median of 20 × 34 and 20 × 230 = 132 µs, rank 1 median of 34 / 30 = 32 µs: ratio 4.125.
    Rank 1 is last in all 20 combines, and no rank in the 20 tied dispatches. The report said "No straggler: no
    significant imbalance (p50 duration ratio 4.12 ...; most frequent last arriver in 50% of collectives)": the tied
    dispatches were counted in the share. Now the share is 20 / 20 = 100 %: verdict rank 0 waits for rank 1, wait
    20 × 200 µs = 4 ms, and the evidence names the share of the 20 collectives that had a last arriver."""
    b = TraceBuilder("2024.2")
    b.gpu(0)
    b.gpu(1)
    for r in (0, 1):
        b.process(100 + r, f"rank{r}")
    for i in range(20):
        t = T0 + i * MS
        for r in (0, 1):
            p = 100 + r
            ex = 300 if r else 100
            b.launch(t, t + 2 * US, t + 66 * US, t + 100 * US, pid=p, tid=p, device=r, stream=9, name=A2A)
            b.launch(t + 3 * US, t + 5 * US, t + 100 * US, t + (100 + ex) * US, pid=p, tid=p, device=r, name=GROUPED)
            b.launch(t + 6 * US, t + 8 * US, t + (100 + ex) * US, t + 430 * US, pid=p, tid=p, device=r, stream=9,
                     name=A2A)
    path = tmp_path / "t.sqlite"
    b.write(str(path), overwrite=True)
    rep = analyze_path(str(path), options_from_kwargs())
    n = rep.nccl
    assert n.matched_collectives == 40
    assert [(r.pid, r.p50_ns, r.last_arrival_count) for r in n.ranks] == [(100, 132 * US, 0), (101, 32 * US, 20)]
    s = n.straggler
    assert s is not None and (s.waiting_pid, s.late_pid) == (100, 101)
    assert (s.late_share, s.tied_collectives, s.wait_ns_total) == (1.0, 20, 4 * MS)
    f = next(f for f in rep.findings if f.id == "nccl_wait")
    assert f.evidence[1] == ("pid 101 / GPU 1 arrived last in 100 % of the 20 that had a last arriver (the other 20 "
                             "started together on every rank).")


def test_imbalance_without_a_late_rank_is_not_called_no_imbalance(tmp_path: Path) -> None:
    """3 EP ranks (pid 100 + r / GPU r), 20 all-to-alls 1 ms apart, all ending at t + 300 µs. Rank 0 (light experts)
    starts at t; ranks 1 and 2 take turns being last: rank 1 starts at t + 200 µs in the even ones and t + 190 µs in
    the odd ones, rank 2 the other way round. p50 in the collective: rank 0 300 µs, ranks 1 and 2 (100, 110) ->
    105 µs: ratio 300 / 105 = 2.86 ≥ 1.5; last arriver rank 1 in 10, rank 2 in 10: 50 % < 60 %, no verdict. The reason
    said "no significant imbalance (p50 duration ratio 2.86 ...)" although rank 0 waits ~200 µs in every one. The
    rule (analyses/comms/arrival): per collective rank 0 waits 200 µs and the one of ranks 1, 2 that is not last
    10 µs: 20 × 210 µs = 4.2 ms of waiting, each of ranks 1 and 2 caused 10 × 210 µs = 2.1 ms (50 % < 60 %): no
    late rank, and the reason says so with the figures of the first of the two."""
    b = TraceBuilder("2024.2")
    for r in range(3):
        b.gpu(r)
        b.process(100 + r)
    for i in range(20):
        t = T0 + i * MS
        b.launch(t - 5 * US, t - 3 * US, t, t + 300 * US, pid=100, tid=100, device=0, name=A2A)
        for r in (1, 2):
            s1 = t + (200 if (i + r) % 2 == 1 else 190) * US
            b.launch(t - 5 * US, t - 3 * US, s1, t + 300 * US, pid=100 + r, tid=100 + r, device=r, name=A2A)
    path = tmp_path / "t.sqlite"
    b.write(str(path), overwrite=True)
    n = analyze_path(str(path), options_from_kwargs()).nccl
    assert n.straggler is None
    assert [(r.pid, r.p50_ns, r.last_arrival_count) for r in n.ranks] == [
        (100, 300 * US, 0), (101, 105 * US, 10), (102, 105 * US, 10)]
    assert [(r.wait_ns_total, r.wait_caused_ns) for r in n.ranks] == [(4000 * US, 0), (100 * US, 2100 * US),
                                                                      (100 * US, 2100 * US)]
    assert n.straggler_reason == (
        "no rank's late arrivals cause ≥ 60% of the waiting (the most: pid 101 / GPU 1 started last in 50% of "
        "collectives, its late arrivals causing 50% of the 4.200 ms of waiting)")


SR = "ncclDevKernel_SendRecv(ncclDevComm*, unsigned long, ncclWork*)"


def test_expert_parallel_sendrecv_exchange_is_not_called_a_hand_off(tmp_path: Path) -> None:
    """Expert parallelism over 2 GPUs whose all-to-all is NCCL send/recv pairs (vLLM's EP path): each of 20 layers
    1 ms apart, a dispatch SendRecv on both ranks [t + 66, t + 100) µs, experts rank 0 100 µs / rank 1 300 µs (3×
    the tokens), a combine SendRecv rank 0 [t + 200, t + 430), rank 1 [t + 400, t + 430) µs. Both ranks send and
    receive in every exchange; rank 0 waits 200 µs per layer for rank 1's experts. The reason says "a receiver waits
    for the data its sender sends (a pipeline stage, a KV-cache hand-off), not for a late rank of a collective": here
    it is exactly a late rank of an exchange. The reason now names both (kernel names cannot tell an exchange from a
    one-way hand-off, so still no verdict) and the rank that started last: rank 1 in 20 of the 20 combines (the
    20 dispatches start together on both ranks: no last arriver)."""
    b = TraceBuilder("2024.2")
    b.gpu(0)
    b.gpu(1)
    for r in (0, 1):
        b.process(100 + r)
    for i in range(20):
        t = T0 + i * MS
        for r in (0, 1):
            p = 100 + r
            ex = 300 if r else 100
            b.launch(t, t + 2 * US, t + 66 * US, t + 100 * US, pid=p, tid=p, device=r, stream=9, name=SR)
            b.launch(t + 3 * US, t + 5 * US, t + 100 * US, t + (100 + ex) * US, pid=p, tid=p, device=r, name=GROUPED)
            b.launch(t + 6 * US, t + 8 * US, t + (100 + ex) * US, t + 430 * US, pid=p, tid=p, device=r, stream=9,
                     name=SR)
    path = tmp_path / "t.sqlite"
    b.write(str(path), overwrite=True)
    n = analyze_path(str(path), options_from_kwargs()).nccl
    assert [(r.pid, r.last_arrival_count) for r in n.ranks] == [(100, 0), (101, 20)]
    assert n.straggler is None and "all-to-all exchange of send/recv pairs" in (n.straggler_reason or "")
    assert (f"({n.ranks[1].rank} started last in 100% of the 20 collectives with a last arriver, its late arrivals "
            "causing 100% of the 4.000 ms of waiting: in an exchange") in (n.straggler_reason or "")
