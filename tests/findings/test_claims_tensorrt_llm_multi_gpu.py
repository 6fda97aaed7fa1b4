"""TensorRT-LLM engines and one process driving several GPUs: sentences a report made that its trace contradicts. Each
trace is built by hand; the truth is worked out in the docstring."""

from __future__ import annotations

from pathlib import Path

from synth import TraceBuilder

from nsys_llm_explainer.analyses.kernels.stack import detect_stack
from nsys_llm_explainer.options import options_from_kwargs
from nsys_llm_explainer.pipeline import analyze_path
from nsys_llm_explainer.render import render_all

US = 1_000
MS = 1_000_000
PID = 100
#: cuBLAS's Hopper GEMM as PyTorch runs it (`torch.matmul` in bf16 on an H100): a library kernel, not TensorRT's
CUBLAS = ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_"
          "kernel__5x_cublas")
ELT = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>>(int, ...)"
XQA = "xqa_kernel_dt_bf16_d_128_beam_1_kvt_bf16_nqpkv_8_m_8_sm_90"
TOPK = "void tensorrt_llm::kernels::topKStage1<__nv_bfloat16>(...)"
A100 = "NVIDIA A100-SXM4-80GB"


def _report(b: TraceBuilder, tmp_path: Path):
    p = tmp_path / "t.sqlite"
    b.write(str(p), overwrite=True)
    return analyze_path(str(p), options_from_kwargs())


def _md(rep, tmp_path: Path) -> str:
    out = tmp_path / "out"
    out.mkdir()
    render_all(rep, out)
    return (out / "report.md").read_text()


def test_cublas_xmma_kernels_are_not_tensorrt() -> None:
    """cuBLAS names its Hopper/Ampere GEMMs `sm90_xmma_gemm_…_execute_segment_k_off_kernel__5x_cublas` /
    `sm80_xmma_gemm_…_execute_kernel__5x_cublas` (every PyTorch bf16 matmul on an H100/A100). The TensorRT kernel rule
    `sm\\d+_xmma_\\w*execute` took them for TensorRT, ahead of the PyTorch rule: a PyTorch trace read "Stack:
    tensorrt", framework tensorrt, and lost its PyTorch advice. TensorRT's own tactics carry `trt`
    (`…_execute_kernel_trt`, `trt_…`): those stay TensorRT."""
    assert detect_stack([CUBLAS, ELT])[0] == "pytorch"
    assert detect_stack([CUBLAS])[0] == ""
    assert detect_stack(["sm80_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize128x256x64_stage3_warpsize2x4x1_tensor16x8x16_"
                         "execute_kernel__5x_cublas"])[0] == ""
    assert detect_stack(["sm80_xmma_fprop_implicit_gemm_f16f16_f16f16_f16_nhwckrsc_nhwc_tilesize128x32x64_stage1_"
                         "warpsize4x1x1_g1_tensor16x8x16_execute_kernel_trt"])[0] == "tensorrt"


def test_pytorch_trace_with_cublas_gemms_reads_pytorch(tmp_path: Path) -> None:
    """One thread launches a cuBLAS GEMM (800 µs) and a PyTorch add (100 µs) every 1 ms, 20 steps. Nothing in it is
    TensorRT: the facts say stack `pytorch`, framework `pytorch` (the report said "Stack: tensorrt")."""
    b = TraceBuilder()
    b.process(PID)
    b.thread(PID, PID, "python3")
    for i in range(20):
        t = i * MS
        b.launch(t + 10 * US, t + 20 * US, t + 30 * US, t + 830 * US, pid=PID, tid=PID, name=CUBLAS)
        b.launch(t + 22 * US, t + 28 * US, t + 835 * US, t + 935 * US, pid=PID, tid=PID, name=ELT)
    j = _report(b, tmp_path).to_dict()
    assert (j["facts"]["stack"], j["facts"]["framework"]) == ("pytorch", "pytorch")


def _trtllm_graphs(tmp_path: Path, graphs: bool):
    """TensorRT-LLM generation loop (process `trtllm-serve`, thread `executor`): each 1 ms step the executor opens
    `executor_step` [t, t+900) µs, launches the step's 4 kernels (GEMM 200 µs, XQA 100 µs, GEMM 200 µs, top-k 45 µs
    from t+40 µs) with one `cudaGraphLaunch` [t+20, t+30) µs — or, ``graphs=False``, with 4 `cudaLaunchKernel`
    calls [t+20+5k, t+24+5k) µs — and spends the rest of the range on the host. Stack `trtllm` (XQA, `tensorrt_llm::`
    kernels). With graphs, the trace shows 30 graph launches: no advice line may tell it to *use* or *enable* CUDA
    graphs ("TensorRT-LLM: keep the overlap scheduler enabled in the PyTorch backend and use CUDA graphs." was
    given)."""
    b = TraceBuilder()
    b.process(PID, "trtllm-serve")
    b.gpu(0)
    b.thread(PID, PID, "python3")
    ex = b.thread(PID, 11, "executor")
    for i in range(30):
        t = i * MS
        ks = [(t + 40 * US, t + 240 * US, CUBLAS), (t + 245 * US, t + 345 * US, XQA),
              (t + 350 * US, t + 550 * US, CUBLAS), (t + 555 * US, t + 600 * US, TOPK)]
        if graphs:
            b.graph_launch(t + 20 * US, t + 30 * US, pid=PID, tid=11, kernels=ks)
        else:
            for k, (s, e, name) in enumerate(ks):
                b.launch(t + (20 + 5 * k) * US, t + (24 + 5 * k) * US, s, e, pid=PID, tid=11, name=name)
        b.nvtx_push_pop(t, t + 900 * US, "executor_step", tid_g=ex)
    return _report(b, tmp_path).to_dict()


def test_trtllm_with_cuda_graphs_is_not_told_to_use_them(tmp_path: Path) -> None:
    """(trace: :func:`_trtllm_graphs`, graphs) Idle per step: [600, 1040) µs = 440 µs, of it [600, 900) in
    `executor_step` (`nvtx`), [900, 1000) outside any range (`host_cpu`, 100 µs × 29 = 2.900 ms, 9.7 % of the
    29.900 ms window: a finding), then the next range and launch. The `host_cpu` finding advises the TensorRT-LLM
    overlap scheduler without "use CUDA graphs"."""
    j = _trtllm_graphs(tmp_path, graphs=True)
    assert (j["facts"]["stack"], j["facts"]["cuda_graphs"]) == ("trtllm", True)
    f = next(f for f in j["findings"] if f["id"] == "idle_host_cpu")
    assert f["time_at_stake_ns"] == 2_900 * US
    assert "TensorRT-LLM: keep the overlap scheduler enabled in the PyTorch backend (CUDA graphs are already in use)." \
        in f["recommendation"]
    advice = [a for g in j["findings"] for a in g["recommendation"]]
    assert not any("use CUDA graphs" in a or "enable CUDA graphs" in a for a in advice), advice


def test_trtllm_without_cuda_graphs_is_told_to_use_them(tmp_path: Path) -> None:
    """(trace: :func:`_trtllm_graphs`, no graphs) The same loop launched kernel by kernel: no graph launch, so the
    TensorRT-LLM line keeps "use CUDA graphs" (host_cpu idle [900, 1000) µs per step as above, 2.900 ms)."""
    j = _trtllm_graphs(tmp_path, graphs=False)
    assert (j["facts"]["stack"], j["facts"]["cuda_graphs"]) == ("trtllm", False)
    f = next(f for f in j["findings"] if f["id"] == "idle_host_cpu")
    assert f["time_at_stake_ns"] == 2_900 * US
    assert ("TensorRT-LLM: keep the overlap scheduler enabled in the PyTorch backend and use CUDA graphs."
            in f["recommendation"])


def _two_models(tmp_path: Path, mapped: bool):
    """The box lists an A100 (GPU id 0) and an H100 (GPU id 1); one process launches a Hopper GEMM
    (`sm90_xmma_…`, 800 µs) every 1 ms on its CUDA device 0. CUDA numbers the fastest GPU first by default, and
    `CUDA_VISIBLE_DEVICES` renumbers: without `TARGET_INFO_CUDA_DEVICE` the export does not say which GPU device 0
    is — here the kernel is an sm90 one, so it is the H100, yet the report titled it "Device 0
    (NVIDIA A100-SXM4-80GB)". ``mapped``: the export maps (pid, cudaId 0) → gpuId 1."""
    b = TraceBuilder()
    b.process(PID)
    b.gpu(0, name=A100, sm_count=108, computeMajor=8, computeMinor=0)
    b.gpu(1)
    b.thread(PID, PID, "python3")
    for i in range(20):
        t = i * MS
        b.launch(t + 10 * US, t + 20 * US, t + 30 * US, t + 830 * US, pid=PID, tid=PID, device=0, name=CUBLAS)
    p = tmp_path / "t.sqlite"
    b.write(str(p), overwrite=True)
    if mapped:
        import sqlite3
        con = sqlite3.connect(p)
        con.execute("CREATE TABLE TARGET_INFO_CUDA_DEVICE (gpuId INTEGER, cudaId INTEGER, pid INTEGER, "
                    "uuid TEXT, numMultiprocessors INTEGER)")
        con.execute("INSERT INTO TARGET_INFO_CUDA_DEVICE VALUES (1, 0, ?, 'GPU-1', 132)", (PID,))
        con.commit()
        con.close()
    return analyze_path(str(p), options_from_kwargs())


def test_device_is_not_named_after_a_gpu_the_export_does_not_tie_it_to(tmp_path: Path) -> None:
    """(trace: :func:`_two_models`, unmapped) Device 0 is shown without a GPU name; the GPU list of the capture
    section still lists both (by GPU id)."""
    md = _md(_two_models(tmp_path, mapped=False), tmp_path)
    assert "**Device 0:** busy 16.000 ms (80.7 %)" in md, md
    assert "Device 0 (NVIDIA A100" not in md and "Device 0 (NVIDIA H100" not in md
    assert "- GPUs: 0: NVIDIA A100-SXM4-80GB (108 SMs, 85.05 GB); 1: NVIDIA H100 80GB HBM3" in md


def test_mapped_device_is_named_after_its_gpu(tmp_path: Path) -> None:
    """(trace: :func:`_two_models`, mapped) With the export's map, the kernels' device is GPU id 1, the H100
    (busy 20 × 800 µs = 16.000 ms of the 19.820 ms window, 80.7 %)."""
    md = _md(_two_models(tmp_path, mapped=True), tmp_path)
    assert "**Device 1 (NVIDIA H100 80GB HBM3):** busy 16.000 ms (80.7 %)" in md, md


def test_fp32_advice_on_an_a100_beside_a_t4_does_not_say_this_gpu_lacks_tf32(tmp_path: Path) -> None:
    """An A100 (GPU 0, cc 8.0: TF32/BF16/FP16) and a T4 (GPU 1, cc 7.5: FP16/INT8) each run an FP32 SIMT GEMM
    (`ampere_sgemm_128x64_tn`, 900 µs) every 1 ms from their own thread: 100 % of kernel time is FP32 on CUDA
    cores on both. The facts pool datatypes over both GPUs (TF32 false, FP16 true), and the finding says "This GPU's
    tensor cores take FP16, not TF32/BF16" — false of the A100, which should be told TF32/BF16 while the T4 is told
    FP16. The fix I would make: when the GPUs that ran the FP32 GEMMs (per device, the kernels' devices; unmapped,
    every listed GPU) differ in datatypes, the evidence names each model with its datatypes and the advice lines
    are given per model ("On the NVIDIA A100-SXM4-80GB: … TF32 …; on the Tesla T4: … float16 …")."""
    b = TraceBuilder()
    b.process(PID)
    b.gpu(0, name=A100, sm_count=108, computeMajor=8, computeMinor=0)
    b.gpu(1, name="Tesla T4", sm_count=40, computeMajor=7, computeMinor=5)
    for d in (0, 1):
        b.thread(PID, 10 + d, f"w{d}")
        for i in range(20):
            t = i * MS
            b.launch(t + 10 * US, t + 20 * US, t + 30 * US, t + 930 * US, pid=PID, tid=10 + d, device=d,
                     name="ampere_sgemm_128x64_tn")
    j = _report(b, tmp_path).to_dict()
    f = next(f for f in j["findings"] if f["id"] == "fp32_gemm")
    assert not any(a.startswith("This GPU's tensor cores take FP16, not TF32/BF16") for a in f["recommendation"])
    # the datatypes differ: neither "TF32" nor "not TF32" is true of "the GPU"; the evidence names each model
    assert (j["facts"]["advice_facts"]["gpu_tf32"], j["facts"]["advice_facts"]["gpu_fp16_tensor_cores"]) == (None, True)
    assert f["evidence"][2] == (f"The GPUs' tensor cores differ: `{A100}` TF32/BF16/FP16; `Tesla T4` FP16 (see "
                                "`facts.gpus`): use a precision each GPU takes.")
