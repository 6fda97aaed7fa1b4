"""vLLM V1 as it really runs (API server and EngineCore processes with no kernels, two tensor-parallel workers with
piecewise CUDA graphs, the attention launched eagerly between the graph pieces, the sampler, a D2H copy of the sampled
ids and a ``cudaStreamSynchronize`` per step): the host-gap advice asks for CUDA graphs only when they are not in use.
Each truth is worked out by hand in the docstrings."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Optional

from synth import TraceBuilder

from nsys_llm_explainer.options import options_from_kwargs
from nsys_llm_explainer.pipeline import analyze_path

US = 1_000
MS = 1_000 * US
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel"
AR = "void vllm::cross_device_reduce_1stage<__nv_bfloat16, 2>(vllm::RankData*, vllm::RankSignals, int)"
RMS = "void vllm::rms_norm_kernel<c10::BFloat16>(c10::BFloat16*, c10::BFloat16 const*, float, int, int)"
ATTN = "kernel_unified_attention_2d"
ARGMAX = "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::ArgMaxOps<float>>>()"
TOPK = "void at::native::sbtopk::gatherTopK<float, unsigned int, 2, false>()"
PIECE = ((GEMM, 60 * US), (AR, 15 * US), (RMS, 5 * US), (GEMM, 70 * US))


def _vllm_v1(tmp_path: Path, *, graphs: bool = True, steps: int = 40, prefill_every: int = 8,
             grammar_every: int = 3) -> Dict[str, Any]:
    """The vLLM V1 process tree, sync scheduling. pid 100 (API server) and pid 200 (``VLLM::EngineCore``) only
    wait in ``epoll_wait`` / ``poll``; workers pid 300 / 301 (GPU 0 / 1), identical. A step starting at t (step
    0 at 10 ms): ``execute_model`` range from t; 150 µs of input preparation, an 8 µs H2D ``cudaMemcpyAsync`` (copy
    of 3 µs from t+155); then from h = t+160 three pieces (graph launch of 8 µs every 10 µs, its 4 kernels
    GEMM 60, custom all-reduce 15, RMS norm 5, GEMM 70 µs, 1 µs apart, starting 5 µs after the call or 2 µs after
    the GPU's last kernel) with an eager attention launch (6 µs call, 40 µs kernel, 2 µs after the GPU) after
    pieces 0 and 1; argmax 10 µs and top-k 15 µs; a D2H copy; ``cudaStreamSynchronize`` to 3 µs after the copy;
    the range ends 5 µs after it, the next step 100 µs after that, 500 µs on every ``grammar_every``-th step (from
    step 0: grammar bitmask work). Every ``prefill_every``-th step (the last of each group) is a chunked prefill,
    launched eagerly (5 µs calls every 7 µs) with 6× longer kernels. With ``graphs=False`` every piece's kernel
    is launched eagerly (5 µs call, every 7 µs), as with ``--enforce-eager``.
    """
    b = TraceBuilder()
    b.process(100, "python3")
    ga = b.thread(100, 100, "python3")
    b.process(200, "VLLM::EngineCore")
    ge = b.thread(200, 200, "VLLM::EngineCore")
    t0, t_end = 10 * MS, 10 * MS
    for w in range(2):
        pid = 300 + w
        b.process(pid, f"VLLM::Worker_TP{w}")
        g = b.thread(pid, pid, f"VLLM::Worker_TP{w}")
        b.gpu(w)
        t, gpu = t0, t0
        for i in range(steps):
            prefill = i % prefill_every == prefill_every - 1
            scale = 6 if prefill else 1
            h = t + 150 * US
            c = b.runtime(h, h + 8 * US, tid_g=g, name="cudaMemcpyAsync_v3020")
            b.memcpy(h + 5 * US, h + 8 * US, pid=pid, bytes=4096, copy_kind=1, src_kind=1, dst_kind=2, device=w,
                     corr=c)
            h += 10 * US
            for p in range(3):
                if graphs and not prefill:
                    k = max(h + 5 * US, gpu + 2 * US)
                    ks = []
                    for name, d in PIECE:
                        ks.append((k, k + d, name))
                        k += d + 1 * US
                    b.graph_launch(h, h + 8 * US, pid=pid, tid=pid, kernels=ks, device=w, graph_id=10 + p,
                                   graph_exec_id=100 + p)
                    gpu, h = ks[-1][1], h + 10 * US
                else:
                    for name, d in PIECE:
                        k = max(h + 4 * US, gpu + 2 * US)
                        b.launch(h, h + 5 * US, k, k + d * scale, pid=pid, tid=pid, device=w, name=name)
                        gpu, h = k + d * scale, h + 7 * US
                if p < 2:
                    k = max(h + 4 * US, gpu + 2 * US)
                    b.launch(h, h + 6 * US, k, k + 40 * US * scale, pid=pid, tid=pid, device=w, name=ATTN)
                    gpu, h = k + 40 * US * scale, h + 8 * US
            for name, d in ((ARGMAX, 10 * US), (TOPK, 15 * US)):
                k = max(h + 4 * US, gpu + 2 * US)
                b.launch(h, h + 5 * US, k, k + d, pid=pid, tid=pid, device=w, name=name)
                gpu, h = k + d, h + 7 * US
            c = b.runtime(h, h + 6 * US, tid_g=g, name="cudaMemcpyAsync_v3020")
            k = max(h + 4 * US, gpu + 1 * US)
            b.memcpy(k, k + 2 * US, pid=pid, bytes=512, copy_kind=2, src_kind=2, dst_kind=1, device=w, corr=c)
            gpu, h = k + 2 * US, h + 7 * US
            se = max(h + 3 * US, gpu + 3 * US)
            c = b.runtime(h, se, tid_g=g, name="cudaStreamSynchronize_v3020")
            b.sync(h, se, pid=pid, device=w, corr=c)
            b.nvtx_push_pop(t, se + 5 * US, "execute_model", tid_g=g)
            t = se + 105 * US + (400 * US if i % grammar_every == 0 else 0)
        t_end = max(t_end, t)
    x = t0 - 2 * MS
    while x < t_end + 1 * MS:
        b.osrt(x, x + 80 * US, tid_g=ge, name="epoll_wait")
        b.osrt(x + 90 * US, x + 180 * US, tid_g=ge, name="poll")
        b.osrt(x, x + 190 * US, tid_g=ga, name="epoll_wait")
        x += 200 * US
    p = tmp_path / "vllm_v1.sqlite"
    b.write(str(p), overwrite=True)
    return analyze_path(str(p), options_from_kwargs()).to_dict()


def _finding(rep: Dict[str, Any], fid: str) -> Optional[Dict[str, Any]]:
    return next((f for f in rep["findings"] if f["id"] == fid), None)


def _host_cpu_ns(rep: Dict[str, Any]) -> List[int]:
    return [sum(c["ns"] for c in d["causes"] if c["kind"] == "host_cpu") for d in rep["idle_causes"]["devices"]]


def test_host_gap_advice_does_not_ask_for_cuda_graphs_already_in_use(tmp_path: Path) -> None:
    """Piecewise CUDA graphs: per decode step (t = its start) piece 0 runs [t+165, t+318) µs, attention [t+320,
    t+360), piece 1 [t+362, t+515), attention [t+517, t+557), piece 2 [t+559, t+712), argmax [t+714, t+724), top-k
    [t+726, t+741), the D2H copy [t+742, t+744), the sync call [t+227, t+747), the range to t+752, the next step at
    t+852 (t+1,252 after a grammar step). The host is outside CUDA calls, NVTX ranges and OS calls from a range's
    end to the next step's start (the same after a prefill step): 100 µs in each of the 39 gaps between the 40
    steps plus 400 µs after steps 0, 3, ..., 36 (13 of them): 3,900 + 5,200 = 9,100 µs per device, 18,200 µs on
    both. Steps with and without grammar work and the prefill steps make the period irregular, so the per-step
    sync finding does not hold and the host-gap finding is emitted. The trace has 2 × 35 × 3 = 210 graph launches:
    the vLLM line must not advise CUDA graphs (``--enforce-eager``), only ``--async-scheduling``. Before the fix it
    read "CUDA graphs (no `--enforce-eager`) shorten the host work per step" on this trace."""
    rep = _vllm_v1(tmp_path)
    assert rep["facts"]["cuda_graphs"] is True and rep["facts"]["stack"] == "vllm"
    assert rep["graphs"]["graph_launch_count"] == 210
    assert _host_cpu_ns(rep) == [9_100 * US, 9_100 * US]
    f = _finding(rep, "idle_host_cpu")
    assert f is not None and f["time_at_stake_ns"] == 18_200 * US
    vllm = [r for r in f["recommendation"] if r.startswith("vLLM:")]
    assert vllm == ["vLLM: `--async-scheduling` overlaps scheduling and output processing with GPU execution (CUDA "
                    "graphs are already in use)."]


def test_host_gap_advice_asks_for_cuda_graphs_when_eager(tmp_path: Path) -> None:
    """The same loop launched eagerly (``--enforce-eager``: no graph launch): the host is still outside CUDA calls
    from one step's range end to the next step's start (9,100 µs per device as above), and the vLLM line keeps its
    CUDA graphs advice."""
    rep = _vllm_v1(tmp_path, graphs=False)
    assert rep["facts"]["cuda_graphs"] is False
    assert _host_cpu_ns(rep) == [9_100 * US, 9_100 * US]
    f = _finding(rep, "idle_host_cpu")
    assert f is not None
    assert "vLLM: `--async-scheduling` overlaps scheduling and output processing with GPU execution; CUDA graphs " \
           "(no `--enforce-eager`) shorten the host work per step." in f["recommendation"]
