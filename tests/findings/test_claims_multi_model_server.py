"""One server process serving several models (Triton Inference Server / ONNX Runtime hosting a BERT encoder beside a
TensorRT LLM engine, each model instance on its own thread and CUDA stream, a dynamic batcher waking on a condition
variable, pinned per-request copies, idle between request bursts). Each trace is built by hand; the truth is worked out
in the docstrings."""

from __future__ import annotations

from pathlib import Path

from claims_support import finding_of, report_of
from synth import TraceBuilder

from nsys_llm_explainer.findings.advice import ADVICE

US = 1_000
MS = 1_000 * US
PID = 100
ORT = ("void onnxruntime::cuda::_BinaryElementWise<float, float, float, onnxruntime::cuda::OP_Add<float, float, "
       "float>, true, true, 256, 4>(int, float const*, float const*, float*)")
TRT_GEMM = "sm80_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize128x128x32_stage4_warpsize2x2x1_tensor16x8x16_kernel_trt"
TRT_CONV = "trt_ampere_fp16x2_hcudnn_fp16x2_128x64_relu_medium_nn_v1"
MYELIN = "__myl_AddMulSum_0x6a4f2b"
TRT_FMHA = "sm80_xmma_fmha_v2_flash_attention_fp16_64_32_S_64_sm80_kernel_nl_trt"
TRT = (TRT_GEMM, TRT_CONV, MYELIN, TRT_FMHA)


def _server() -> TraceBuilder:
    """`tritonserver` (pid 100) on one A100: thread `bert_onnx` (tid 2, stream 13) and thread `llm_trt` (tid 3,
    stream 14); `dyn_batcher` (tid 4) only waits in `pthread_cond_wait`. 5 bursts of 20 ms, 50 ms apart (T = 1 + 50 k
    ms). BERT: 10 requests at t = T + 2 r ms: pinned H2D copy, 6 ORT kernels of 50 µs back to back [t + 40, t + 340)
    µs, D2H copy, `cudaStreamSynchronize` [t + 115, t + 352) µs, then `pthread_cond_wait` [t + 355 µs, next request
    − 2 µs). LLM: 19 decode steps at u = T + 500 µs + s ms: `ExecutionContext::enqueue` [u, u + 60) µs, 8 TensorRT
    kernels of 80 µs back to back [u + 20, u + 660) µs (the 4 names of :data:`TRT` in turn),
    `cudaStreamSynchronize` [u + 70, u + 665) µs, then `pthread_cond_wait` [u + 670 µs, next step − 3 µs): it waits
    for the batcher's next batch."""
    b = TraceBuilder()
    b.gpu(0, "NVIDIA A100-SXM4-80GB", sm_count=108, computeMajor=8, computeMinor=0)
    b.process(PID, "tritonserver")
    gb, gl, gq = b.thread(PID, 2, "bert_onnx"), b.thread(PID, 3, "llm_trt"), b.thread(PID, 4, "dyn_batcher")
    wake = 0
    for k in range(5):
        T = MS + k * 50 * MS
        for r in range(10):
            t = T + r * 2 * MS
            b.osrt(wake, t, tid_g=gq, name="pthread_cond_wait")
            wake = t + 20 * US
            c = b.runtime(t, t + 10 * US, tid_g=gb, name="cudaMemcpyAsync_v3020")
            b.memcpy(t + 15 * US, t + 25 * US, pid=PID, bytes=65536, copy_kind=1, src_kind=1, dst_kind=2, stream=13,
                     corr=c)
            for i in range(6):
                b.launch(t + (30 + 10 * i) * US, t + (36 + 10 * i) * US, t + (40 + 50 * i) * US,
                         t + (90 + 50 * i) * US, pid=PID, tid=2, stream=13, name=ORT)
            c = b.runtime(t + 100 * US, t + 110 * US, tid_g=gb, name="cudaMemcpyAsync_v3020")
            b.memcpy(t + 345 * US, t + 350 * US, pid=PID, bytes=4096, copy_kind=2, src_kind=2, dst_kind=1, stream=13,
                     corr=c)
            c = b.runtime(t + 115 * US, t + 352 * US, tid_g=gb, name="cudaStreamSynchronize_v3020")
            b.sync(t + 116 * US, t + 351 * US, pid=PID, sync_type=3, stream=13, corr=c)
            nxt = t + 2 * MS if r < 9 else T + 50 * MS
            b.osrt(t + 355 * US, nxt - 2 * US, tid_g=gb, name="pthread_cond_wait")
        for s in range(19):
            u = T + 500 * US + s * MS
            b.nvtx_push_pop(u, u + 60 * US, "ExecutionContext::enqueue", tid_g=gl)
            for j in range(8):
                b.launch(u + (5 + 6 * j) * US, u + (10 + 6 * j) * US, u + (20 + 80 * j) * US, u + (100 + 80 * j) * US,
                         pid=PID, tid=3, stream=14, name=TRT[j % 4])
            c = b.runtime(u + 70 * US, u + 665 * US, tid_g=gl, name="cudaStreamSynchronize_v3020")
            b.sync(u + 71 * US, u + 661 * US, pid=PID, sync_type=3, stream=14, corr=c)
            nxt = u + MS if s < 18 else T + 50 * MS + 500 * US
            b.osrt(u + 670 * US, nxt - 3 * US, tid_g=gl, name="pthread_cond_wait")
    return b


def test_tensorrt_conv_and_myelin_kernels_are_named_for_what_they_are(tmp_path: Path) -> None:
    """(trace: :func:`_server`) 190 each of the 4 TensorRT kernels (80 µs: 15.2 ms each). The categories read
    "`activation` 23.4 %, top kernel `trt_ampere_fp16x2_hcudnn_fp16x2_128x64_relu_medium_nn_v1`" — cuDNN's FP16
    (`hcudnn`) convolution / GEMM kernel with its fused ReLU, as `…_scudnn_…` (FP32) already was `gemm` — and
    "`triton` 20.1 %, top kernel `__myl_AddMulSum_0x6a4f2b`": a kernel of TensorRT's Myelin fusion compiler
    (fused pointwise / reduction), no Triton. Fixed: `[hs]cudnn` is `gemm`, `__myl_…` `elementwise` (unless an
    earlier rule's word is in the name). So `gemm` = 190 xmma + 190 hcudnn = 380 kernels, 30.4 ms; `elementwise`
    = 300 ORT adds (50 µs: 15 ms) + 190 Myelin (15.2 ms); `attention` the 190 FMHA; no `triton`, no `activation`."""
    rep = report_of(_server(), tmp_path)
    cats = {c["category"]: c for c in rep["categories"]["overall"] if c["count"]}
    assert "triton" not in cats and "activation" not in cats, sorted(cats)
    assert cats["gemm"]["count"] == 380 and cats["gemm"]["total_ns"] == 30_400 * US
    assert cats["elementwise"]["count"] == 300 + 190
    assert cats["elementwise"]["total_ns"] == 15 * MS + 15_200 * US


def test_wait_for_the_next_batch_beside_another_model_s_kernels_is_an_idle_pause(tmp_path: Path) -> None:
    """(trace: :func:`_server`) After each sync `llm_trt` blocks in `pthread_cond_wait` for the batcher's next batch
    (327 µs of the 335 µs until its next launch). The step-sync table said its pattern holds: "host, GPU idle /
    step 0.165 ms", overlappable 7.425 ms — 6.840 ms of it `pthread_cond_wait`. The idle-pause rule compared the
    thread's waiting in GPU-idle time with the whole host window after the sync: after an odd step the window is
    [T + 2165, T + 2520) µs (355 µs) but BERT's kernels keep the GPU busy until T + 2340, so of the 180 µs of idle
    charged to `llm_trt` 157 µs are the wait (87 %), yet 2 × 157 < 355 and the step was kept as host work. Waiting
    for a batch is no host work the next step could overlap: every step is an idle pause (after an even step the
    window [T + 1165, T + 1520) µs is all GPU idle, 327 µs of it the wait), so the pattern does not hold."""
    rep = report_of(_server(), tmp_path)
    llm = next(s for s in rep["step_sync"]["series"] if s["thread_name"] == "llm_trt")
    assert not llm["holds"] and llm["reason"].startswith("every step starts after an idle pause"), llm["reason"]
    assert llm["overlap_ns"] == 0 and llm["exposed_ns"] == 0
    assert "step_sync" not in {f["id"] for f in rep["findings"]}


def _instances() -> TraceBuilder:
    """Two instances of one ONNX Runtime model (`bert_0` tid 2 on stream 13, `bert_1` tid 3 on stream 14) on GPU 0,
    one request each per ms (no OS-runtime trace). Instance i's request r at t = 1 ms + r ms + 100 i µs: pinned H2D
    copy [t + 10, t + 20) µs, 20 launch calls [a, a + 10) µs, a = t + 10 + 12 k, of 8 µs kernels [a + 12, a + 20) µs
    (the host needs 12 µs per kernel, 10 of them in the call), D2H copy, `cudaStreamSynchronize` [t + 261, t + 268)
    µs. So per request pair the GPU runs [t + 22, t + 358) µs with 16 gaps of 4 µs, then idles 664 µs until the
    next request: 99 × 664 µs = 65.736 ms of the 99.368 ms window is the server between requests, with each thread
    back from its sync — no launch overhead."""
    b = TraceBuilder()
    b.gpu(0, "NVIDIA A100-SXM4-80GB", sm_count=108, computeMajor=8, computeMinor=0)
    b.process(PID, "tritonserver")
    gs = [b.thread(PID, 2 + i, f"bert_{i}") for i in range(2)]
    for r in range(100):
        for i, g in enumerate(gs):
            t, st = MS + r * MS + i * 100 * US, 13 + i
            c = b.runtime(t, t + 8 * US, tid_g=g, name="cudaMemcpyAsync_v3020")
            b.memcpy(t + 10 * US, t + 20 * US, pid=PID, bytes=32768, copy_kind=1, src_kind=1, dst_kind=2, stream=st,
                     corr=c)
            for k in range(20):
                a = t + 10 * US + k * 12 * US
                b.launch(a, a + 10 * US, a + 12 * US, a + 20 * US, pid=PID, tid=2 + i, stream=st, name=ORT)
            c = b.runtime(t + 250 * US, t + 260 * US, tid_g=g, name="cudaMemcpyAsync_v3020")
            b.memcpy(t + 262 * US, t + 266 * US, pid=PID, bytes=4096, copy_kind=2, src_kind=2, dst_kind=1, stream=st,
                     corr=c)
            c = b.runtime(t + 261 * US, t + 268 * US, tid_g=g, name="cudaStreamSynchronize_v3020")
            b.sync(t + 262 * US, t + 267 * US, pid=PID, sync_type=3, stream=st, corr=c)
    return b


def test_idle_between_requests_is_not_launch_overhead(tmp_path: Path) -> None:
    """(trace: :func:`_instances`) The verdict read "Launch-bound: the host needs ~16.54 µs per kernel, the kernels
    ~8.00 µs: 66.6 % of the window (66.163 ms)" with "host CPU between launches (gaps < 1 ms) 63.363 ms": 99 gaps of
    ~640 µs between requests, each after both threads' syncs returned, none between two launches of a request.
    Inside a request the host needs 12 µs per kernel (2.800 ms in launch calls in all, the rest of the
    within-request gaps copies and queued launches). Fixed: `host_cpu` after a drain (docs/MODEL.md, "After a
    drain": after a blocking sync of the gap's thread returned, before its next launch call) is no launch overhead.
    Each gap between requests [t + 358, t + 1022) µs is on `bert_0` (the next kernel's launcher), whose sync
    returned at t + 268 and which launches next at t + 1010: its `host_cpu` [t + 358, t + 362), [t + 366, t + 1000)
    and [t + 1008, t + 1010) µs = 640 µs lie after the drain: 99 × 640 µs = 63.360 ms of the 63.363 ms. What is
    left, 2.800 ms of launch calls and 3 µs of host work, was 2.8 % of the window. Inside a request each gap's 2 µs
    of `queued` after the launch call is host-paced too (docs/MODEL.md "Host-paced queued time": the call returned
    2 µs after the kernel before it ended, so after it started; capped at that kernel's own 2 µs delay): 15 such
    gaps per request pair (the 16th lies under a D2H copy), 100 pairs, less the first kernel's wait (no kernel
    before it): 2.998 ms. The gap [t + 114, t + 118) µs under `bert_1`'s H2D copy [t + 110, t + 120)
    µs is no copy time (the `bert_0` kernel after it starts while that copy still runs: docs/MODEL.md, idle causes
    row 1): its 2 µs in a launch call and 2 µs host-paced `queued` join them, + 100 × 4 µs. The launch-bound
    finding now holds the idle inside requests — 2.800 + 2.998 ms + 3 µs + 0.400 ms = 6.201 ms, 6.2 % (the host
    needs 12 µs per 8 µs kernel there) — and never the time between requests, which the host gap finding holds and
    which stays the verdict."""
    rep = report_of(_instances(), tmp_path)
    hc = next(c for c in rep["idle_causes"]["devices"][0]["causes"] if c["kind"] == "host_cpu")
    assert hc["ns"] == 63_363 * US and hc["after_sync_short_ns"] == 63_360 * US
    assert finding_of(rep, "launch_overhead")["time_at_stake_ns"] == 6_201 * US
    assert finding_of(rep, "idle_host_cpu")["time_at_stake_ns"] > 60 * MS
    assert rep["headline"]["verdict"].startswith("Host gaps"), rep["headline"]["verdict"]


def _graph_instances(wait: str = "cudaStreamSynchronize_v3020") -> TraceBuilder:
    """Two instances of one TensorRT engine captured as a CUDA graph, one per GPU (`bert_0` tid 2 on GPU 0 stream
    13, `bert_1` tid 3 on GPU 1 stream 14), one request each per ms: at t = 1 ms + r ms + 100 i µs a pinned H2D copy,
    one `cudaGraphLaunch` [t + 10, t + 25) µs of 20 tensor-core GEMM nodes of 8 µs [t + 30 + 10 k, t + 38 + 10 k) µs,
    a D2H copy and a `cudaStreamSynchronize` (``wait``: `cudaEventQuery`, a poll that does not block, in its
    place). No elementwise kernel; 200 launch calls for 4,000 kernels."""
    b = TraceBuilder()
    for d in (0, 1):
        b.gpu(d, "NVIDIA A100-SXM4-80GB", sm_count=108, computeMajor=8, computeMinor=0)
    b.process(PID, "tritonserver")
    gs = [b.thread(PID, 2 + i, f"bert_{i}") for i in range(2)]
    gemm = "sm80_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize64x64x64_stage3_warpsize2x2x1_tensor16x8x16_kernel_trt"
    for r in range(100):
        for i, g in enumerate(gs):
            t, st = MS + r * MS + i * 100 * US, 13 + i
            c = b.runtime(t, t + 8 * US, tid_g=g, name="cudaMemcpyAsync_v3020")
            b.memcpy(t + 10 * US, t + 20 * US, pid=PID, bytes=32768, device=i, stream=st, src_kind=1, corr=c)
            ks = [(t + (30 + 10 * k) * US, t + (38 + 10 * k) * US, gemm) for k in range(20)]
            b.graph_launch(t + 10 * US, t + 25 * US, pid=PID, tid=2 + i, kernels=ks, device=i, stream=st,
                           graph_id=1 + i, graph_exec_id=1 + i)
            c = b.runtime(t + 250 * US, t + 260 * US, tid_g=g, name="cudaMemcpyAsync_v3020")
            b.memcpy(t + 262 * US, t + 266 * US, pid=PID, bytes=4096, copy_kind=2, src_kind=2, dst_kind=1,
                     device=i, stream=st, corr=c)
            c = b.runtime(t + 261 * US, t + 268 * US, tid_g=g, name=wait)
            if wait.startswith("cudaStreamSynchronize"):
                b.sync(t + 262 * US, t + 267 * US, pid=PID, sync_type=3, device=i, stream=st, corr=c)
    return b


def test_graph_launched_gemms_are_not_told_to_fuse_elementwise_kernels(tmp_path: Path) -> None:
    """(trace: :func:`_graph_instances`) The verdict read "Launch-bound: the host needs ~37.78 µs per kernel, the
    kernels ~8.00 µs: 76.0 % of the window (151.131 ms)" with the one line "Many tiny elementwise kernels are the
    usual source of launches: fuse them." The kernels are all tensor-core GEMMs (no elementwise kernel), launched
    20 to a graph (200 calls for 4,000 kernels: no per-kernel launch), the idle is the ~640 µs between requests, and
    151.131 ms is both GPUs' time — 152 % of the 99.368 ms window, not 76 %. Fix I would make: `launch.fuse` needs an
    elementwise share (a fact), the per-kernel host time is per launch call when graphs launch the kernels, and the
    title's share is of the summed device windows (as the step-sync title is one quantity, test_claims_shared_gpu.py).
    Fixed: `launch.fuse` only with elementwise kernels in the window; the title's share and time are the chosen
    device's, with every device's time beside them ("… (X ms on device 0; 151.131 ms on all devices)").
    Since the host time after a drain is no launch overhead (`test_idle_between_requests_is_not_launch_overhead`)
    the blocking-sync trace has no launch-bound finding (2.797 ms of launch overhead on device 0: 2.8 %; 3.3 % with
    the 99 × 5 µs of host-paced `queued` between each graph launch's return and its first node, docs/MODEL.md); the
    title and advice are checked with a `cudaEventQuery` poll in the sync's place (no drain: 151.131 ms, and
    152.121 ms with those 2 × 99 × 5 µs host-paced: each graph was launched after the previous graph's last node
    started; 152.116 ms since a graph's first launch is one-time, `module_load`, docs/MODEL.md: device 1's graph
    ran kernel names device 0's graph ran first, and its first call's [t + 20, t + 25) µs, after its copy, idles
    device 1)."""
    rep = report_of(_graph_instances(), tmp_path)
    assert "launch_overhead" not in {f["id"] for f in rep["findings"]}
    f = finding_of(report_of(_graph_instances("cudaEventQuery_v3020"), tmp_path), "launch_overhead")
    assert not any("elementwise" in a for a in f["recommendation"]), f["recommendation"]
    assert "76.0 % of the window (151.131 ms)" not in f["title"], f["title"]
    assert f["title"].endswith(" on all devices)") and "152.116 ms on all devices" in f["title"]
    assert f["recommendation"] == [ADVICE["launch.graphs.all"].text]   # every kernel ran as a graph node
