"""The headline's top-cause line states one quantity; ONNX Runtime is its own stack; an FP8 KV cache is recognised;
per-op NVTX ranges seen once each are grouped. Each trace is built by hand; the truth is worked out in the
docstrings."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from claims_support import report_of
from synth import TraceBuilder
from test_claims_multi_model_server import _server

from nsys_llm_explainer.analyses.kernels.stack import detect_stack
from nsys_llm_explainer.analyses.kernels.traits import analyze_kernel_traits
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
    """(trace: test_claims_multi_model_server._server) `tritonserver` runs ONNX Runtime kernels (`bert_onnx`) and a
    TensorRT engine (`llm_trt`, `ExecutionContext::enqueue`): stack `onnxruntime + tensorrt`, framework `onnxruntime`;
    no recommendation reads as PyTorch, vLLM, SGLang or TensorRT-LLM advice."""
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


def _per_op_ranges() -> TraceBuilder:
    """One thread, 4 steps 1 ms apart (T = 1 + i ms): `step` [T, T + 100) µs holding `aten::mm, seq = 2i`
    [T + 10, T + 30) µs and `aten::add, seq = 2i+1` [T + 40, T + 50 + 10 i) µs; one kernel launched inside the mm
    range. So 12 ranges under 9 names, 8 of them seen once."""
    b = TraceBuilder()
    b.process(1)
    g = b.thread(1, 1)
    b.gpu(0)
    for i in range(4):
        t = MS + i * MS
        b.nvtx_push_pop(t, t + 100 * US, "step", tid_g=g)
        b.nvtx_push_pop(t + 10 * US, t + 30 * US, f"aten::mm, seq = {2 * i}", tid_g=g)
        b.nvtx_push_pop(t + 40 * US, t + (50 + 10 * i) * US, f"aten::add, seq = {2 * i + 1}", tid_g=g)
        b.launch(t + 12 * US, t + 20 * US, t + 25 * US, t + 35 * US, pid=1, tid=1)
    return b


def test_per_op_nvtx_ranges_seen_once_are_grouped_by_their_name_without_numbers(tmp_path: Path) -> None:
    """(trace: :func:`_per_op_ranges`) The NVTX table listed 9 rows, 8 of them count 1. Grouped by the name with
    digit runs as N: `step` 4 × 100 µs (self 4 × (100 − 20 − 10 − 10 i) = 220 µs); `aten::add, seq = N` 4 names,
    4 ranges of 10 / 20 / 30 / 40 µs: total 100 µs, p50 25 µs, self 100 µs; `aten::mm, seq = N` 4 × 20 µs = 80 µs.
    Σ totals 580 µs (as the 9 ungrouped rows, which stay: `nsys stats` sums those): `step` 68.97 %, add 17.24 %, mm
    13.79 %. The report's table shows the 3 groups; `tables/nvtx_range_groups.csv` holds them."""
    p = tmp_path / "t.sqlite"
    _per_op_ranges().write(str(p))
    rep = analyze_path(str(p), options_from_kwargs())
    nv = rep.nvtx
    assert len(nv.ranges) == 9 and sum(r.count == 1 for r in nv.ranges) == 8
    assert nv.groups is not None
    got = [(g.name, g.name_count, g.count, g.total_ns, g.p50_ns, g.min_ns, g.max_ns, g.self_ns) for g in nv.groups]
    assert got == [("step", 1, 4, 400 * US, 100 * US, 100 * US, 100 * US, 220 * US),
                   ("aten::add, seq = N", 4, 4, 100 * US, 25 * US, 10 * US, 40 * US, 100 * US),
                   ("aten::mm, seq = N", 4, 4, 80 * US, 20 * US, 20 * US, 20 * US, 80 * US)]
    assert [round(g.pct_total, 2) for g in nv.groups] == [68.97, 17.24, 13.79]
    assert sum(g.total_ns for g in nv.groups) == sum(r.total_ns for r in nv.ranges) == 580 * US
    render_all(rep, tmp_path)
    md = (tmp_path / "report.md").read_text()
    sec = md[md.index("## NVTX ranges"):]
    sec = sec[:sec.index("\n## ", 4)]
    assert "12 ranges (whole capture): 9 rows by name and style, 3 once the numbers in the names are read as N" in sec
    assert "| `aten::add, seq = N` | PushPop | 4 | 4 | 0.100 |" in sec and "seq = 7" not in sec
    csv = (tmp_path / "tables" / "nvtx_range_groups.csv").read_text().splitlines()
    assert len(csv) == 4 and csv[2].startswith('"aten::add, seq = N",PushPop,4,4,')
    assert len((tmp_path / "tables" / "nvtx_ranges.csv").read_text().splitlines()) == 10


def test_nvtx_names_that_do_not_group_keep_the_ungrouped_table(tmp_path: Path) -> None:
    """Names that differ in more than their numbers (`step`, `h2d_copy`, `layer_3` once each) group nothing:
    no `groups` key, the table lists the names, the groups' CSV has its header only."""
    b = TraceBuilder()
    b.process(1)
    g = b.thread(1, 1)
    b.gpu(0)
    for i, name in enumerate(("step", "h2d_copy", "layer_3")):
        t = MS + i * MS
        b.nvtx_push_pop(t, t + 100 * US, name, tid_g=g)
        b.launch(t + 12 * US, t + 20 * US, t + 25 * US, t + 35 * US, pid=1, tid=1)
    p = tmp_path / "t.sqlite"
    b.write(str(p))
    rep = analyze_path(str(p), options_from_kwargs())
    assert rep.nvtx.groups is None and "groups" not in rep.to_dict()["nvtx"]
    render_all(rep, tmp_path)
    assert "3 ranges (whole capture); self = time" in (tmp_path / "report.md").read_text()
    assert len((tmp_path / "tables" / "nvtx_range_groups.csv").read_text().splitlines()) == 1
