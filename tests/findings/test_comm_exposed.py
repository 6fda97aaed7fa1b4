"""Exposed communication (`comm_exposure` in report.json, the `comm_exposed` finding; docs/METRICS.md "Exposed
communication"): per device, the time communication kernels run with no other kernel beside them. Each trace is
built by hand and the truth worked out in the docstring."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Optional

import pytest
from synth import TraceBuilder

from nsys_llm_explainer.analyses.comms.exposure import collective_op
from nsys_llm_explainer.options import options_from_kwargs
from nsys_llm_explainer.pipeline import analyze_path

US = 1_000
MS = 1_000 * US
AR = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
AG = "ncclDevKernel_AllGather_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
CUSTOM_AR = "void vllm::cross_device_reduce_1stage<__nv_bfloat16, 2>(vllm::RankData*, vllm::RankSignals, int)"
FWD = "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_tn"
BWD = "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_nt"
OPT = ("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::FusedAdamMathFunctor<float, "
       "4>>(int)")


def _ddp(tmp_path: Path, ar_at: Optional[int], steps: int = 20) -> Dict[str, Any]:
    """The DDP loop of test_claims_data_parallel_training.py (pid 100, GPU 0; 10 forward GEMMs of 200 µs then 10
    backward GEMMs of 400 µs on stream 7, 2 µs apart, the first 20 µs into the step; a 2.5 ms all-reduce on stream 13;
    Adam 300 µs on stream 7 3 µs after the all-reduce ends; the next step 20 µs after Adam's end; a ``train_step`` range
    to 10 µs after Adam), the all-reduce starting when backward ends (``ar_at`` None) or with GEMM number ``ar_at``
    (0-based)."""
    b = TraceBuilder()
    b.process(100)
    g = b.thread(100, 100, "python3")
    b.gpu(0)
    t = 1 * MS
    for _ in range(steps):
        k = t + 20 * US
        a0 = None
        for i, (name, d) in enumerate([(FWD, 200 * US)] * 10 + [(BWD, 400 * US)] * 10):
            if i == ar_at:
                a0 = k
            b.launch(k - 15 * US, k - 10 * US, k, k + d, pid=100, tid=100, stream=7, name=name)
            k += d + 2 * US
        a0 = k if a0 is None else a0
        b.launch(a0 - 8 * US, a0 - 5 * US, a0, a0 + 2_500 * US, pid=100, tid=100, stream=13, name=AR)
        o0 = max(a0 + 2_500 * US, k) + 3 * US
        b.launch(o0 - 6 * US, o0 - 3 * US, o0, o0 + 300 * US, pid=100, tid=100, stream=7, name=OPT)
        e = o0 + 300 * US
        c = b.runtime(a0, e + 5 * US, tid_g=g, name="cudaStreamSynchronize_v3020")
        b.sync(a0, e + 5 * US, pid=100, stream=7, corr=c)
        b.nvtx_push_pop(t, e + 10 * US, "train_step", tid_g=g)
        t = e + 20 * US
    p = tmp_path / "ddp.sqlite"
    b.write(str(p), overwrite=True)
    return analyze_path(str(p), options_from_kwargs()).to_dict()


def _finding(rep: Dict[str, Any], fid: str) -> Optional[Dict[str, Any]]:
    return next((f for f in rep["findings"] if f["id"] == fid), None)


def test_an_all_reduce_after_backward_is_exposed_and_claimed(tmp_path: Path) -> None:
    """All-reduce after backward: per step 2,500 µs of NCCL with nothing else running (Adam waits 3 µs after it).
    Step period 20 + 6,040 + 2,500 + 3 + 300 + 20 = 8,883 µs; the window is the 20 `train_step` ranges, 20 × 8,883
    − 10 = 177,650 µs. Exposed 20 × 2,500 = 50,000 µs = 28.145 % (≥ 20 %: high); overlapped 0 %. Busy 20 × (6,000
    + 2,500 + 300) = 176,000 µs: gpu_bound's time at stake is 176,000 − 50,000 = 126,000 µs (the exposed ns are
    comm_exposed's, counted once)."""
    rep = _ddp(tmp_path, ar_at=None)
    dev = rep["comm_exposure"]["devices"]
    assert [(d["device_id"], d["comm_count"], d["comm_ns"], d["overlapped_ns"], d["exposed_ns"], d["window_ns"])
            for d in dev] == [(0, 20, 50 * MS, 0, 50 * MS, 177_650 * US)]
    assert dev[0]["exposed_pct"] == pytest.approx(100 * 50_000 / 177_650)
    assert dev[0]["ops"] == [{"op": "all-reduce", "count": 20, "comm_ns": 50 * MS, "exposed_ns": 50 * MS}]
    f = _finding(rep, "comm_exposed")
    assert f is not None and f["severity"] == "high" and f["time_at_stake_ns"] == 50 * MS
    assert f["title"] == ("Exposed communication: the all-reduce runs with no compute beside it for 28.1 % of the "
                          "steady window")
    assert "compute overlaps 0.0 % of their 50.000 ms" in f["evidence"][0]
    assert [c["metric"] for c in f["checks"]] == ["comm_exposed_pct"]
    assert f["checks"][0]["observed"] == pytest.approx(100 * 50_000 / 177_650)
    gb = _finding(rep, "gpu_bound")
    assert gb is not None and gb["time_at_stake_ns"] == 126 * MS
    assert any("50.000 ms of the busy time is communication" in e for e in gb["evidence"])


def test_an_all_reduce_overlapping_backward_is_not_claimed(tmp_path: Path) -> None:
    """The all-reduce starts with the 6th backward GEMM (index 15), as DDP's first bucket would: it spans
    [k0 + 4,030, k0 + 6,530) µs (k0 = 10 × 202 + 5 × 402 = 4,030 µs after the first GEMM); GEMMs 15–19 cover
    [4,030, 6,038) but for 4 gaps of 2 µs: overlapped 2,000 µs, exposed 8 + 492 = 500 µs a step. Adam at 6,533,
    period 20 + 6,833 + 20 = 6,873 µs; window 20 × 6,873 − 10 = 137,450 µs. Exposed 10,000 µs = 7.275 % (< 10 %: no
    claim), overlapped 80 %; gpu_bound keeps the whole busy time at stake."""
    rep = _ddp(tmp_path, ar_at=15)
    (d,) = rep["comm_exposure"]["devices"]
    assert (d["comm_ns"], d["overlapped_ns"], d["exposed_ns"], d["window_ns"]) == \
        (50 * MS, 40 * MS, 10 * MS, 137_450 * US)
    assert d["overlapped_pct"] == pytest.approx(80.0)
    assert d["exposed_pct"] == pytest.approx(100 * 10_000 / 137_450)
    assert _finding(rep, "comm_exposed") is None
    gb = _finding(rep, "gpu_bound")
    assert gb is not None and not any("communication no compute" in e for e in gb["evidence"])


def _tp(tmp_path: Path, layers: int = 200) -> Dict[str, Any]:
    """Tensor-parallel decode on two GPUs (pid 200 on GPU 0, pid 201 on GPU 1; vLLM's custom all-reduce on the compute
    stream 7): per layer a GEMM of 300 µs, then the custom all-reduce of 60 µs, 5 µs apart (the next layer 5 µs after
    it). GPU 1 also runs an NCCL all-gather of 100 µs on stream 13 starting 50 µs into each GEMM (inside it). The
    window is set by --window to [first GEMM start, last all-reduce end]."""
    b = TraceBuilder()
    t0 = 1 * MS
    for pid, dev in ((200, 0), (201, 1)):
        b.process(pid)
        b.thread(pid, pid, "python3")
        b.gpu(dev)
        t = t0
        for _ in range(layers):
            b.launch(t - 10 * US, t - 8 * US, t, t + 300 * US, pid=pid, tid=pid, device=dev, stream=7, name=FWD)
            if dev == 1:
                b.launch(t - 6 * US, t - 4 * US, t + 50 * US, t + 150 * US, pid=pid, tid=pid, device=dev, stream=13,
                         name=AG)
            a = t + 305 * US
            b.launch(t - 4 * US, t - 2 * US, a, a + 60 * US, pid=pid, tid=pid, device=dev, stream=7, name=CUSTOM_AR)
            t = a + 65 * US
    p = tmp_path / "tp.sqlite"
    b.write(str(p), overwrite=True)
    w1 = t0 + layers * 370 * US - 5 * US
    return analyze_path(str(p), options_from_kwargs(window=(t0, w1))).to_dict()


def test_tensor_parallel_all_reduce_exposed_on_both_gpus(tmp_path: Path) -> None:
    """200 layers of 370 µs: window 200 × 370 − 5 = 73,995 µs. Each GPU: custom all-reduce 200 × 60 = 12,000 µs,
    nothing beside it: exposed 12,000 µs = 16.217 % (medium). GPU 1's all-gathers (200 × 100 µs) lie inside its
    GEMMs: overlapped 20,000 µs, exposed 0; its communication union 32,000 µs, overlapped 62.5 %. Pooled: 24,000 of
    147,990 µs = 16.217 %. The title names the all-reduce only (the all-gather exposes nothing)."""
    rep = _tp(tmp_path)
    d0, d1 = rep["comm_exposure"]["devices"]
    assert (d0["device_id"], d0["comm_ns"], d0["overlapped_ns"], d0["exposed_ns"], d0["window_ns"]) == \
        (0, 12 * MS, 0, 12 * MS, 73_995 * US)
    assert (d1["device_id"], d1["comm_count"], d1["comm_ns"], d1["overlapped_ns"], d1["exposed_ns"]) == \
        (1, 400, 32 * MS, 20 * MS, 12 * MS)
    assert d1["overlapped_pct"] == pytest.approx(62.5)
    assert d1["ops"] == [{"op": "all-reduce", "count": 200, "comm_ns": 12 * MS, "exposed_ns": 12 * MS},
                         {"op": "all-gather", "count": 200, "comm_ns": 20 * MS, "exposed_ns": 0}]
    f = _finding(rep, "comm_exposed")
    assert f is not None and f["severity"] == "medium" and f["time_at_stake_ns"] == 24 * MS
    assert f["title"] == ("Exposed communication: the all-reduce runs with no compute beside it for 16.2 % of the "
                          "window set by --window")
    assert ("Exposed by collective: all-reduce 24.000 ms (400 kernels); per device: device 0 16.2 %, device 1 "
            "16.2 %.") in f["evidence"]
    assert f["checks"][0]["observed"] == pytest.approx(100 * 24_000 / 147_990)


@pytest.mark.parametrize("name, category, op", [
    (AR, "nccl", "all-reduce"),
    ("ncclDevKernel_ReduceScatter_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)", "nccl", "reduce-scatter"),
    ("ncclKernel_AllGather_RING_LL_Sum_int8_t(ncclWorkElem)", "nccl", "all-gather"),
    ("ncclDevKernel_SendRecv(ncclDevComm*, unsigned long, ncclWork*)", "nccl", "send/recv"),
    ("ncclDevKernel_Broadcast_RING_LL(ncclDevComm*, unsigned long, ncclWork*)", "nccl", "broadcast"),
    ("ncclDevKernel_Reduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)", "nccl", "reduce"),
    ("ncclDevKernel_Generic(ncclDevComm*, unsigned long, ncclWork*)", "nccl", "other"),
    (CUSTOM_AR, "custom_allreduce", "all-reduce"),
    ("void tensorrt_llm::kernels::lamport_style_kernel<float>()", "custom_allreduce", "all-reduce"),
])
def test_collective_of_a_kernel_name(name: str, category: str, op: str) -> None:
    assert collective_op(name, category) == op


def _late_rank1(path: Path, t0: int, steps: int) -> None:
    """Two ranks (pid 300 on GPU 0, pid 301 on GPU 1), ``steps`` steps of 1,820 µs from ``t0``: a GEMM of 1,000 µs
    (rank 0) / 1,600 µs (rank 1, slow), then an all-reduce from the GEMM's end to 1,800 µs into the step on both."""
    b = TraceBuilder()
    for pid, dev, gemm in ((300, 0, 1_000 * US), (301, 1, 1_600 * US)):
        b.process(pid)
        b.thread(pid, pid, "python3")
        b.gpu(dev)
        for i in range(steps):
            t = t0 + i * 1_820 * US
            b.launch(t - 10 * US, t - 8 * US, t, t + gemm, pid=pid, tid=pid, device=dev, stream=7, name=FWD)
            b.launch(t - 6 * US, t - 4 * US, t + gemm, t + 1_800 * US, pid=pid, tid=pid, device=dev, stream=13,
                     name=AR)
    b.write(str(path), overwrite=True)


def test_the_wait_for_a_late_rank_is_claimed_once(tmp_path: Path) -> None:
    """Two ranks in one trace (pid 300 on GPU 0, pid 301 on GPU 1), 20 steps of 1,820 µs from t0 = 1 ms: a GEMM of
    1,000 µs (rank 0) / 1,600 µs (rank 1, slow), then an all-reduce from the GEMM's end to 1,800 µs into the step
    on both (rank 0's 800 µs, rank 1's 200 µs: ratio 4, rank 1 last every time). The straggler verdict: rank 0
    waits, Σ start skew 20 × 600 = 12,000 µs (the nccl_wait finding's time at stake). Window (--window)
    [t0, t0 + 20 × 1,820 − 20) = 36,380 µs per GPU. Exposed: GPU 0 16,000 µs, GPU 1 4,000 µs, 20,000 of 72,760 µs
    = 27.49 %; less the wait nccl_wait explains (min(12,000, 16,000)): 8,000 µs = 10.995 % ≥ 10: claimed, medium,
    time at stake 8,000 µs."""
    t0, steps = 1 * MS, 20
    p = tmp_path / "late.sqlite"
    _late_rank1(p, t0, steps)
    rep = analyze_path(str(p), options_from_kwargs(window=(t0, t0 + steps * 1_820 * US - 20 * US))).to_dict()
    assert [(d["device_id"], d["exposed_ns"], d["window_ns"]) for d in rep["comm_exposure"]["devices"]] == \
        [(0, 16 * MS, 36_380 * US), (1, 4 * MS, 36_380 * US)]
    w = _finding(rep, "nccl_wait")
    assert w is not None and w["time_at_stake_ns"] == 12 * MS
    f = _finding(rep, "comm_exposed")
    assert f is not None and f["severity"] == "medium" and f["time_at_stake_ns"] == 8 * MS
    assert f["checks"][0]["observed"] == pytest.approx(100 * 8_000 / 72_760)
    assert f["evidence"][0].startswith("20.000 ms of 72.760 ms (27.5 %")
    assert any(e.startswith("Left out: 12.000 ms on device 0") for e in f["evidence"]), f["evidence"]


def test_the_wait_left_out_is_the_part_inside_the_window(tmp_path: Path) -> None:
    """The same trace with the window the last 10 steps, [t0 + 10 × 1,820, t0 + 20 × 1,820 − 20) = 18,180 µs per GPU.
    Exposed there: GPU 0 10 × 800, GPU 1 10 × 200 µs, 10,000 of 36,360 µs = 27.50 %. Rank 0 waits 600 µs a step
    ([t + 1,000, t + 1,600)): 6,000 µs inside the window (``wait_in_window_ns``), 12,000 µs over the capture (the
    nccl_wait finding's, 12,000 / the 36,390 µs GPU 1 captured = 32.98 % ≥ 5). Left out: 6,000 µs, leaving 4,000 µs
    = 11.00 % ≥ 10: claimed. Before, the capture's 12,000 µs (up to GPU 0's 8,000 exposed) was left out of the
    window's 10,000: 2,000 µs, 5.5 %, no finding."""
    t0, steps = 1 * MS, 20
    p = tmp_path / "late.sqlite"
    _late_rank1(p, t0, steps)
    rep = analyze_path(str(p), options_from_kwargs(window=(t0 + 10 * 1_820 * US, t0 + steps * 1_820 * US - 20 * US)))
    assert [(r.wait_ns_total, r.wait_in_window_ns) for r in rep.nccl.ranks] == [(12 * MS, 6 * MS), (0, 0)]
    v = rep.nccl.straggler
    assert v is not None and (v.wait_ns_total, v.wait_pct_of_window) == (12 * MS, 32.98)
    d = rep.to_dict()
    f = _finding(d, "comm_exposed")
    assert f is not None and f["time_at_stake_ns"] == 4 * MS
    assert f["checks"][0]["observed"] == pytest.approx(100 * 4_000 / 36_360)
    assert any(e.startswith("Left out: 6.000 ms on device 0") for e in f["evidence"]), f["evidence"]
