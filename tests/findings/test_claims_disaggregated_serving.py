"""Disaggregated prefill/decode serving (the KV cache handed off by NCCL send/recv): sentences a report made that its
trace contradicts. Each trace is built by hand; the truth is worked out in the docstring."""

from __future__ import annotations

from pathlib import Path

from synth import TraceBuilder

from nsys_llm_explainer.options import options_from_kwargs
from nsys_llm_explainer.pipeline import analyze_path

US = 1_000
MS = 1_000_000
T0 = 10 * MS
PRE = "void flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4>>(Flash_fwd_params)"
DEC = "void vllm::paged_attention_v2_kernel<__nv_bfloat16, 128, 16>(...)"
SR = "ncclDevKernel_SendRecv(ncclDevComm*, unsigned long, ncclWork*)"


def test_kv_handoff_by_nccl_sendrecv_has_no_straggler(tmp_path: Path) -> None:
    """Disaggregated serving: a prefill engine (pid 100, GPU 0) and a decode engine (pid 200, GPU 1), one request
    every 2 ms, 20 requests. Prefill runs [t + 10, t + 800) µs, then sends the KV cache with an NCCL SendRecv kernel
    [t + 800, t + 1100) µs; the decode engine posts its receive early, its SendRecv kernel runs [t + 30, t + 1100)
    µs, then decode [t + 1150, t + 1900) µs. The 20 SendRecv pairs overlap and match (skew 770 µs, the receiver's
    p50 1,070 µs vs the sender's 300 µs): the receiver waits for the data the prefill produces, which is the
    hand-off itself, not a late rank of a collective. The report said "NCCL wait: rank pid 200 / GPU 1 waits in
    collectives for late rank pid 100 / GPU 0" with the advice "Balance the work before the collective on the late
    rank"; now: no straggler, the reason says the kernels are point-to-point, no `nccl_wait` finding."""
    b = TraceBuilder("2024.2")
    b.process(100, "prefill_engine")
    b.process(200, "decode_engine")
    gd = b.thread(200, 200, "decode")
    b.thread(100, 100, "prefill")
    b.gpu(0)
    b.gpu(1)
    for i in range(20):
        t = T0 + i * 2 * MS
        b.launch(t, t + 5 * US, t + 10 * US, t + 800 * US, pid=100, tid=100, device=0, name=PRE)
        b.launch(t + 6 * US, t + 9 * US, t + 800 * US, t + 1100 * US, pid=100, tid=100, device=0, stream=9, name=SR)
        b.launch(t + 20 * US, t + 25 * US, t + 30 * US, t + 1100 * US, pid=200, tid=200, device=1, stream=9, name=SR)
        b.osrt(t + 30 * US, t + 1110 * US, tid_g=gd, name="sem_wait")
        b.launch(t + 1110 * US, t + 1120 * US, t + 1150 * US, t + 1900 * US, pid=200, tid=200, device=1, name=DEC)
    p = tmp_path / "t.sqlite"
    b.write(str(p), overwrite=True)
    rep = analyze_path(str(p), options_from_kwargs())
    n = rep.nccl
    assert n.matched_collectives == 20
    assert {(r.pid, r.p50_ns, r.mean_start_skew_ns, r.last_arrival_count) for r in n.ranks} == {
        (100, 300 * US, 770 * US, 20), (200, 1_070 * US, 0, 0)}
    assert n.straggler is None
    assert n.straggler_reason is not None and n.straggler_reason.startswith(
        "the matched NCCL kernels are point-to-point (send / recv)")
    assert "nccl_wait" not in {f.id for f in rep.findings}
