"""Native (non-PyTorch) inference engines and mixed GPU models in one capture: sentences a report made that its trace
contradicts (programmatic-dependent-launch advice before Hopper or on the wrong GPU, the step-sync title under host
sampling, GGML kernels' categories). Each trace is built by hand; the truth is worked out in the docstring."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Dict, List, Optional

from claims_support import finding_of, report_of
from synth import TraceBuilder

US = 1_000
MS = 1_000_000
PID = 100
H100 = dict(name="NVIDIA H100 80GB HBM3", computeMajor=9, computeMinor=0)
RTX4090 = dict(name="NVIDIA GeForce RTX 4090", sm_count=128, computeMajor=8, computeMinor=9, chipName="AD102")
T4 = dict(name="Tesla T4", sm_count=40, computeMajor=7, computeMinor=5, chipName="TU104")
#: llama.cpp (GGML) decode kernels
GGML = ("void rms_norm_f32<1024>(const float *, float *, int, float)",
        "quantize_q8_1(const float *, void *, long, long)",
        "void mul_mat_vec_q<(ggml_type)12, 1>(const void *, const void *, float *, int, int, int, int)",
        "void rope_norm<true, float>(const float *, float *, int, int, int, int, const int *, float, float)",
        "void flash_attn_vec_ext_f16<128, 1, 8, (ggml_type)1, (ggml_type)1, false>(const char *, ...)",
        "void k_bin_bcast<&op_add, float, float, float>(const float *, const float *, float *, int, int)")
PDL = "programmatic dependent launch"


def _graph_tokens(b: TraceBuilder, *, tid: int, device: int, tokens: int = 10, t0: int = 1 * MS) -> None:
    """llama.cpp with CUDA graphs on ``device``: per token one `cudaGraphLaunch` [t, t + 15 µs) of 200 GGML kernels of
    3 µs, 5 µs apart on the GPU from t + 20 µs (199 gaps of 2 µs between back-to-back queued kernels: 398 µs per
    token), a `cudaStreamSynchronize` until 3 µs after the last kernel, then 200 µs of host work."""
    g = b.thread(PID, tid, "llama-cli")
    t = t0
    for _ in range(tokens):
        ks = t + 20 * US
        kern = []
        for j in range(200):
            kern.append((ks, ks + 3 * US, GGML[j % len(GGML)]))
            ks += 5 * US
        b.graph_launch(t, t + 15 * US, pid=PID, tid=tid, kernels=kern, device=device, graph_exec_id=tid)
        c = b.runtime(t + 16 * US, ks + 3 * US, tid_g=g, name="cudaStreamSynchronize_v3020")
        b.sync(t + 17 * US, ks + 2 * US, pid=PID, corr=c, device=device)
        t = ks + 3 * US + 200 * US


def _queued_advice(gpus: Dict[int, Dict[str, object]], tmp_path: Path, *, graph_device: int = 0,
                   map_devices: Optional[Dict[int, int]] = None) -> List[str]:
    """The queued-latency finding's advice on a trace of :func:`_graph_tokens` on ``graph_device`` with the GPUs
    ``gpus`` (GPU id → TARGET_INFO_GPU columns); ``map_devices``: a TARGET_INFO_CUDA_DEVICE map cudaId → gpuId (the
    report's device ids are then GPU ids)."""
    b = TraceBuilder()
    b.process(PID, "llama-cli")
    for gid, cols in gpus.items():
        b.gpu(gid, **cols)
    _graph_tokens(b, tid=1, device=graph_device)
    p = tmp_path / "t.sqlite"
    b.write(str(p), overwrite=True)
    if map_devices is not None:
        con = sqlite3.connect(p)
        con.execute("CREATE TABLE TARGET_INFO_CUDA_DEVICE (gpuId INTEGER, cudaId INTEGER, pid INTEGER, "
                    "uuid TEXT, numMultiprocessors INTEGER)")
        con.executemany("INSERT INTO TARGET_INFO_CUDA_DEVICE VALUES (?, ?, ?, ?, 0)",
                        [(g, c, PID, f"GPU-{g}") for c, g in map_devices.items()])
        con.commit()
        con.close()
    from nsys_llm_explainer.options import options_from_kwargs
    from nsys_llm_explainer.pipeline import analyze_path
    rep = analyze_path(str(p), options_from_kwargs()).to_dict()
    f = finding_of(rep, "idle_queued")
    # 10 tokens × 199 gaps × 2 µs = 3.980 ms between back-to-back kernels, + per token the 5 µs between the end of
    # its graph launch call (t + 15 µs) and its first kernel (t + 20 µs): 4.030 ms
    dev = next(d for d in rep["idle_causes"]["devices"] if d["device_id"] == f["device_id"])
    queued = next(c for c in dev["causes"] if c["kind"] == "queued")
    assert queued["ns"] == 4_030 * US, queued
    assert f["title"].startswith("Per-kernel launch latency: idle between back-to-back queued kernels"), f["title"]
    return list(f["recommendation"])


def test_no_programmatic_dependent_launch_advice_before_hopper(tmp_path: Path) -> None:
    """(trace: :func:`_graph_tokens` on an RTX 4090, compute capability 8.9) The queued-latency finding advised
    "programmatic dependent launch overlaps a kernel's prologue with the previous one": PDL needs compute capability
    9.0 (Hopper) or newer, so on this Ada GPU (and on an A100 or a T4) it is not available. The fusion advice stays;
    on an H100 (9.0) the PDL words stay too."""
    adv = _queued_advice({0: RTX4090}, tmp_path)
    assert any(a.startswith("Each kernel boundary costs a few µs") for a in adv), adv
    assert not any(PDL in a for a in adv), adv
    adv = _queued_advice({0: T4}, tmp_path)
    assert not any(PDL in a for a in adv), adv
    adv = _queued_advice({0: H100}, tmp_path)
    assert any(a.endswith("remove boundaries; programmatic dependent launch overlaps a kernel's prologue with the "
                          "previous one.") for a in adv), adv


def test_pdl_advice_on_a_t4_beside_an_h100_follows_the_finding_s_gpu(tmp_path: Path) -> None:
    """An H100 (GPU 0) and a T4 (GPU 1) in one capture; the tiny-kernel graphs run on CUDA device 1. Without
    `TARGET_INFO_CUDA_DEVICE` the export does not say which GPU device 1 is (CUDA_VISIBLE_DEVICES renumbers), so
    whether PDL is available is not known: the line names its condition (compute capability 9.0 or newer) instead
    of offering it unconditionally. With the map (cudaId 1 → GPU 1, the T4) the finding's GPU is a Turing one: no
    PDL words at all."""
    gpus = {0: H100, 1: T4}
    adv = _queued_advice(gpus, tmp_path, graph_device=1)
    assert any(a.endswith("remove boundaries; on a GPU of compute capability 9.0 (Hopper) or newer, programmatic "
                          "dependent launch overlaps a kernel's prologue with the previous one.") for a in adv), adv
    adv = _queued_advice(gpus, tmp_path, graph_device=1, map_devices={0: 0, 1: 1})
    assert not any(PDL in a for a in adv), adv
    # mapped onto the H100 instead (cudaId 1 → GPU 0): the unconditional line
    adv = _queued_advice(gpus, tmp_path, graph_device=1, map_devices={1: 0, 0: 1})
    assert any(a.endswith("remove boundaries; programmatic dependent launch overlaps a kernel's prologue with the "
                          "previous one.") for a in adv), adv



def _llama_host_sampling(samples: bool) -> TraceBuilder:
    """llama.cpp decode on an RTX 4090, `llama-server`, no NVTX: token i at t = 1 ms + 3 ms · i (20 tokens). The
    token id goes up first (4 B, `cudaMemcpyAsync` [t, t + 6) µs, copy [t + 3, t + 5) µs, pageable → device); 10
    `mul_mat_vec_q` launched [t + 10 + 10 k, t + 15 + 10 k) µs run [t + 20 + 80 k, t + 100 + 80 k) µs (last ends
    t + 820); the logits come back (512,000 B, `cudaMemcpyAsync` [t + 110, t + 116) µs, copy [t + 820, t + 850) µs);
    `cudaStreamSynchronize` [t + 116, t + 852) µs; then the host samples (``samples``: 8 CPU samples of
    `llama_sampler_sample` ← `common_sampler_sample` at t + 900 … t + 2650 µs). Per step the host waits in the sync
    820 − 116 = 704 µs while the GPU works: 19 steps × 704 µs = 13.376 ms could overlap the next step — but only once
    the next token no longer comes from the host."""
    b = TraceBuilder()
    b.process(PID, "llama-server")
    g = b.thread(PID, 1, "llama-server")
    b.gpu(0, **RTX4090)
    for i in range(20):
        t = 1 * MS + i * 3 * MS
        c = b.runtime(t, t + 6 * US, tid_g=g, name="cudaMemcpyAsync_v3020")
        b.memcpy(t + 3 * US, t + 5 * US, pid=PID, bytes=4, copy_kind=1, src_kind=0, dst_kind=2, corr=c)
        for k in range(10):
            b.launch(t + (10 + 10 * k) * US, t + (15 + 10 * k) * US, t + (20 + 80 * k) * US, t + (100 + 80 * k) * US,
                     pid=PID, tid=1, name=GGML[2])
        c = b.runtime(t + 110 * US, t + 116 * US, tid_g=g, name="cudaMemcpyAsync_v3020")
        b.memcpy(t + 820 * US, t + 850 * US, pid=PID, bytes=512_000, copy_kind=2, src_kind=2, dst_kind=0, corr=c)
        c = b.runtime(t + 116 * US, t + 852 * US, tid_g=g, name="cudaStreamSynchronize_v3020")
        b.sync(t + 117 * US, t + 851 * US, pid=PID, corr=c)
        for s in range(8 if samples else 0):
            b.cpu_sample(t + (900 + 250 * s) * US, tid_g=g,
                         frames=[("llama_sampler_sample", "/opt/llama.cpp/libllama.so"),
                                 ("common_sampler_sample", "/opt/llama.cpp/llama-server")])
    return b


def test_step_sync_title_under_host_sampling_does_not_say_the_work_could_simply_overlap(tmp_path: Path) -> None:
    """(trace: :func:`_llama_host_sampling`) The finding's title read "the GPU-idle host work after it could overlap
    the next step: … (13.376 ms)" and its evidence "Done while the GPU runs the next step, 13.376 ms … would be
    hidden", while the same finding showed (and its advice said) that the host samples each next token, so the next
    step "cannot be launched before this step's logits are read": as it stands the work cannot overlap the next
    step. The number stays (it is what GPU sampling one step behind would hide); the title and the evidence now say
    on what condition. Without CPU samples host sampling is not shown, and the title is unchanged."""
    j = report_of(_llama_host_sampling(True), tmp_path)
    (s,) = [s for s in j["step_sync"]["series"] if s["holds"]]
    assert s["overlap_ns"] == 19 * 704 * US and s["host_sampling"]["holds"]
    f = finding_of(j, "step_sync")
    assert f["title"].startswith("Per-step sync: `cudaStreamSynchronize` every 3.000 ms; with sampling moved to the "
                                 "GPU, the GPU-idle host work after it could overlap the next step: "), f["title"]
    assert f["title"].endswith("(13.376 ms)"), f["title"]
    assert "Done while the GPU runs the next step" not in f["evidence"][1], f["evidence"][1]
    assert ("Once sampling runs on the GPU (evidence below) and the next step is launched before this one's tokens "
            "are read, 13.376 ms of it") in f["evidence"][1], f["evidence"][1]
    assert f["recommendation"][0].startswith("The host samples each step's next token")
    j = report_of(_llama_host_sampling(False), tmp_path)
    f = finding_of(j, "step_sync")
    assert "with sampling moved" not in f["title"] and "Done while the GPU runs the next step, 13.376 ms" in \
        f["evidence"][1], (f["title"], f["evidence"])


MMQ = "void mul_mat_q<(ggml_type)12, 64, 8, false>(const char *, const int *, float *, float *, int, int, int, int)"
SOFT_MAX = ("void soft_max_f32<true, 0, 0>(const float *, const float *, float *, int, int, float, float, float, "
            "float, unsigned int)")


def test_ggml_kernels_fall_in_their_categories(tmp_path: Path) -> None:
    """llama.cpp prefill on an H100, GPU-bound: one thread launches (calls of 5 µs every 6 µs) 40 layers of
    `rms_norm_f32` 10 µs, `mul_mat_q` 200 µs, `rope_norm` 10 µs, `soft_max_f32` 20 µs, `mul_mat_q` 100 µs, each kernel
    starting as the previous one ends (the queue stays ahead). Per layer 340 µs: GEMM 300 (88.2 %), softmax 20
    (5.9 %), norm 10 (2.9 %), RoPE 10 (2.9 %). The GPU-bound finding read "Where the busy time goes …: other 94 %,
    norm 6 %": the quantized GEMMs (`mul_mat_q`) fell in `other`, `soft_max_f32` too, and the RoPE kernel
    `rope_norm` (the non-NeoX rotation) counted as a normalization."""
    b = TraceBuilder()
    b.process(PID, "llama-server")
    b.thread(PID, 1, "llama-server")
    b.gpu(0, **H100)
    layer = ((GGML[0], 10), (MMQ, 200), (GGML[3], 10), (SOFT_MAX, 20), (MMQ, 100))
    call, free = 1 * MS, 1 * MS + 7 * US
    for _ in range(40):
        for name, d in layer:
            b.launch(call, call + 5 * US, free, free + d * US, pid=PID, tid=1, name=name)
            call, free = call + 6 * US, free + d * US
    rep = report_of(b, tmp_path)
    cats = {c["category"]: round(c["pct"], 1) for c in rep["categories"]["overall"] if c["pct"]}
    assert cats == {"gemm": 88.2, "softmax": 5.9, "norm": 2.9, "rope": 2.9}, cats
    f = finding_of(rep, "gpu_bound")
    assert any(e.startswith("Where the busy time goes (overlapping kernels share it equally): gemm 88 %, softmax 6 %, "
                            "norm 3 %, rope 3 %") for e in f["evidence"]), f["evidence"]
