"""Claims sweep FXT: the headline's top-cause line states one quantity; ONNX Runtime is its own stack; an FP8 KV cache
is recognised; per-op NVTX ranges seen once each are grouped. Each trace is built by hand; the truth is worked out
in the docstrings."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from claims_support import report_of
from synth import TraceBuilder
from test_claims_cao import _server

from nsys_llm_explainer.analyses.kernels.traits import analyze_kernel_traits, detect_stack
from nsys_llm_explainer.findings.advice import ADVICE
from nsys_llm_explainer.options import options_from_kwargs
from nsys_llm_explainer.pipeline import analyze_path
from nsys_llm_explainer.render import render_all

US = 1_000
MS = 1_000 * US


def _alloc_loop() -> TraceBuilder:
    """10 iterations of 4 ms on one thread: ``cudaMalloc`` at [T + 10 µs, T + 3 ms), then a launch at [T + 3 ms,
    T + 3 ms + 5 µs) of a kernel at [T + 3.010 ms, T + 4 ms) (T = 4 ms × i)."""
    b = TraceBuilder()
    b.process(1)
    g = b.thread(1, 1)
    b.gpu(0)
    for i in range(10):
        t = 4 * MS * i
        b.runtime(t + 10 * US, t + 3 * MS, tid_g=g, name="cudaMalloc_v3020")
        b.launch(t + 3 * MS, t + 3 * MS + 5 * US, t + 3 * MS + 10 * US, t + 4 * MS, pid=1, tid=1)
    return b


def test_the_top_cause_line_states_the_findings_stake_and_its_share_of_the_idle_time(tmp_path: Path) -> None:
    """The whole trace is the window (10 kernels): [10 µs, 40 ms), 39.990 ms. Busy: 10 × 0.990 ms = 9.900 ms, so
    idle = 30.090 ms. The idle-cause table charges `alloc` (`cudaMalloc`) 10 × 2.990 ms = 29.900 ms (74.8 % of the
    window); the finding leaves out the idle within one timeline bin of the window's start (39.990 ms / 500 =
    79.98 µs, all of it inside the first `cudaMalloc`) and claims 29.820020 ms. The top-cause line states that claim
    and its share of the idle time, 29.820020 / 30.090 = 99.103 % — not the kind's 74.8 % of the window beside it."""
    p = tmp_path / "t.sqlite"
    _alloc_loop().write(str(p))
    rep = analyze_path(str(p), options_from_kwargs())
    h = rep.headline
    assert (h.top_finding_id, h.top_cause_kind, h.top_cause_detail, h.time_at_stake_ns) == (
        "idle_alloc", "alloc", "cudaMalloc", 29_820_020)
    assert h.top_idle_pct is not None and abs(h.top_idle_pct - 100 * 29_820_020 / 30_090_000) < 1e-9
    render_all(rep, tmp_path)
    line = next(x for x in (tmp_path / "report.md").read_text().splitlines() if x.startswith("**Top cause:**"))
    assert line.rstrip() == ("**Top cause:** `alloc` (largest `cudaMalloc`) — 29.820 ms at stake, 99.1 % of the GPU "
                             "idle time.")
    assert "% of the window" not in line


def test_the_top_cause_share_leaves_out_a_device_that_only_received_a_copy(tmp_path: Path) -> None:
    """:func:`_alloc_loop` plus GPU 1, which only receives one 64 KiB H2D copy [20.010, 20.060) ms (thread 2's
    `cudaMemcpyAsync` [20, 20.1) ms): device 1 idles its whole 39.990 ms window, but no finding speaks for it. The
    share stays 29.820020 / 30.090 ms = 99.103 % of device 0's idle time (not 29.820020 / 70.080 = 42.6 %)."""
    b = _alloc_loop()
    b.gpu(1)
    c = b.runtime(20 * MS, 20 * MS + 100 * US, tid_g=b.thread(1, 2), name="cudaMemcpyAsync_v3020")
    b.memcpy(20 * MS + 10 * US, 20 * MS + 60 * US, pid=1, device=1, bytes=65536, copy_kind=1, src_kind=1, dst_kind=2,
             stream=20, corr=c)
    p = tmp_path / "t.sqlite"
    b.write(str(p))
    rep = analyze_path(str(p), options_from_kwargs())
    assert [(d.device_id, d.idle_ns) for d in rep.idle_causes.devices] == [(0, 30_090_000), (1, 39_990_000)]
    h = rep.headline
    assert (h.top_finding_id, h.time_at_stake_ns) == ("idle_alloc", 29_820_020)
    assert h.top_idle_pct is not None and abs(h.top_idle_pct - 100 * 29_820_020 / 30_090_000) < 1e-9


ORT_ADD = ("void onnxruntime::cuda::_BinaryElementWise<float, float, float, onnxruntime::cuda::OP_Add<float, float, "
           "float>, true, true, 256, 4>(int, float const*, float const*, float*)")
TRT_EP = "sm80_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize128x128x32_stage4_warpsize2x2x1_tensor16x8x16_kernel_trt"


def test_onnx_runtime_is_its_own_stack_and_its_tensorrt_provider_is_named_beside_it() -> None:
    """ONNX Runtime's CUDA EP kernels (`onnxruntime::cuda::…`) make the stack `onnxruntime`; with TensorRT's own
    kernels (`…_kernel_trt`, the TensorRT EP) beside them `onnxruntime + tensorrt` (it was `tensorrt`, ONNX Runtime
    unnamed); an ONNX-node NVTX path, which ONNX Runtime's ranges carry too, is no TensorRT evidence under it."""
    assert detect_stack([ORT_ADD])[0] == "onnxruntime"
    stack, ev = detect_stack([ORT_ADD, TRT_EP])
    assert stack == "onnxruntime + tensorrt" and len(ev) == 2 and "onnxruntime" in ev[0] and "_trt(" in ev[1]
    assert detect_stack([ORT_ADD], nvtx_names=["/model/layers.0/attn/MatMul"])[0] == "onnxruntime"
    assert detect_stack([TRT_EP])[0] == "tensorrt"      # TensorRT alone stays TensorRT


def test_a_triton_server_with_onnx_runtime_and_tensorrt_models_gets_no_other_stacks_advice(tmp_path: Path) -> None:
    """(trace: test_claims_cao._server) `tritonserver` runs ONNX Runtime kernels (`bert_onnx`) and a TensorRT
    engine (`llm_trt`, `ExecutionContext::enqueue`): stack `onnxruntime + tensorrt`, framework `onnxruntime`; no
    recommendation reads as PyTorch, vLLM, SGLang or TensorRT-LLM advice."""
    rep = report_of(_server(), tmp_path)
    assert rep["kernel_traits"]["stack"] == "onnxruntime + tensorrt"
    assert rep["facts"]["framework"] == "onnxruntime"
    given = [a for f in rep["findings"] for a in f["recommendation"]]
    assert given
    picked = [a for a in ADVICE.values() if a.text in given]
    assert not [a.id for a in picked if set(a.requires.get("stack", ())) & {"vllm", "sglang", "trtllm"}
                or a.requires.get("framework") in (("pytorch",), ("pytorch", ""))]


def test_an_onnx_runtime_fp32_gemm_gets_no_pytorch_advice(tmp_path: Path) -> None:
    """One A100, one thread: 200 × (`ampere_sgemm_128x64_nn` 400 µs, then the ONNX Runtime add 50 µs), 500 µs
    apart: FP32 SIMT GEMMs hold 400 / 450 = 88.9 % of kernel time. The stack was not recognised (framework ""), so
    the FP32 finding told this ONNX Runtime user to set `torch.backends.cuda.matmul.allow_tf32` and use
    `torch.autocast`; now the framework is `onnxruntime` and only the generic tensor-core precision line is given."""
    b = TraceBuilder()
    b.gpu(0, "NVIDIA A100-SXM4-80GB", sm_count=108, computeMajor=8, computeMinor=0)
    b.process(100, "python3")
    b.thread(100, 1)
    t = MS
    for _ in range(200):
        b.launch(t, t + 5 * US, t + 10 * US, t + 410 * US, pid=100, tid=1, name="ampere_sgemm_128x64_nn")
        b.launch(t + 6 * US, t + 11 * US, t + 412 * US, t + 462 * US, pid=100, tid=1, name=ORT_ADD)
        t += 500 * US
    rep = report_of(b, tmp_path)
    assert (rep["kernel_traits"]["stack"], rep["facts"]["framework"]) == ("onnxruntime", "onnxruntime")
    f = next(f for f in rep["findings"] if f["id"] == "fp32_gemm")
    assert f["title"].endswith("88.9 % of kernel time")
    assert f["recommendation"] == [ADVICE["fp32.generic"].text]


FP8_KV = ("void vllm::reshape_and_cache_flash_kernel<__nv_bfloat16, unsigned char, (vllm::Fp8KVCacheDataType)1>("
          "__nv_bfloat16 const*, __nv_bfloat16 const*, unsigned char*, unsigned char*, long const*, long, long, long, "
          "long, int, int, int, float const*, float const*)",
          "void flashinfer::BatchDecodeWithPagedKVCacheKernel<(flashinfer::PosEncodingMode)0, 2u, 4u, 8u, 8u, 1u, 16u, "
          "__nv_bfloat16, __nv_fp8_e4m3, __nv_bfloat16, int, flashinfer::DefaultAttention<false, false, false, false> >"
          "(__nv_bfloat16*, flashinfer::paged_kv_t<__nv_fp8_e4m3, int>, flashinfer::kv_partition_info_t<int>, "
          "__nv_bfloat16*, float*, bool*, flashinfer::DefaultAttention<false, false, false, false>::Params)",
          "void vllm::paged_attention_v1_kernel<unsigned short, unsigned char, 128, 16, 128, "
          "(vllm::Fp8KVCacheDataType)1, false>(unsigned short*, unsigned short const*, unsigned char const*, "
          "unsigned char const*, int, float, int const*, int const*, int, float const*, int, int, int, float const*, "
          "float const*)")


def test_fp8_kv_cache_kernels_are_attention_not_fp8_gemms() -> None:
    """An FP8 KV cache (vLLM's `kv_cache_dtype=fp8`: the cache write and paged attention take `unsigned char` and
    `Fp8KVCacheDataType` 1; FlashInfer's decode reads `__nv_fp8_e4m3` pages), one kernel of each, 100 / 200 / 300 ns.
    No advice line suggests an FP8 KV cache (none reads such a fact, so no trait records one); what the kernels must
    not be read as is an FP8 tensor-core GEMM or FP32 work: the two attention kernels are `attention_fused` (500 ns
    of 600, 83.3 %), the cache write no trait, and no GEMM or FP32 trait holds any of them."""
    r = analyze_kernel_traits(list(FP8_KV), np.array([0, 1, 2], np.int64), np.array([100, 200, 300], np.int64))
    assert sorted(r.traits) == ["attention_fused"]
    a = r.traits["attention_fused"]
    assert (a.kernel_count, a.total_ns) == (2, 500) and abs(a.share_pct - 100 * 500 / 600) < 1e-9
    assert (r.stack, r.workload) == ("vllm", "inference")
