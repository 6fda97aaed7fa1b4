"""Kernel claims (``gpu_bound``, trait findings) on CUDA-graph traces: a share of kernel time is only claimed when the
trace recorded the kernels it is a share of (numbers worked out in docstrings)."""

from __future__ import annotations

from pathlib import Path

from synth import TraceBuilder

from nsys_llm_explainer.options import options_from_kwargs
from nsys_llm_explainer.pipeline import analyze_path

US = 1_000
PID = 7
EW = ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
      "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)")


def _graph_level_trace(path: Path) -> str:
    """50 steps of 230 µs from 0: a graph launch call [t, t+5) µs whose graph runs [t+10, t+210) µs (one GRAPH_TRACE
    row: graph-level tracing, its ten FP32 GEMM kernels are not recorded), then 5 eager elementwise kernels of 2 µs at
    [t+211+4i, t+213+4i) µs, each launched by a 1 µs call at t+205+4i."""
    b = TraceBuilder(flavor="2024.2")
    b.process(PID)
    b.gpu(0)
    for s in range(50):
        t = s * 230 * US
        ks = [(t + 10 * US + j * 20 * US, t + 10 * US + (j + 1) * 20 * US, "ampere_sgemm_128x64_nn") for j in range(10)]
        b.graph_launch(t, t + 5 * US, pid=PID, tid=1, kernels=ks, node_mode=False)
        for i in range(5):
            a = t + 205 * US + 4 * i * US
            b.launch(a, a + US, a + 6 * US, a + 8 * US, pid=PID, tid=1, name=EW)
    b.write(str(path), overwrite=True)
    return str(path)


def test_graph_level_tracing_quotes_no_share_of_kernel_time(tmp_path: Path) -> None:
    """Window [0, 11.5 ms): busy 50 × (200 µs of graph + 5 × 2 µs of kernels) = 10.5 ms = 91.30 % (≥ 85: gpu_bound).
    The only recorded kernels are the 250 elementwise ones (0.5 ms), so they are 100 % of *recorded* kernel time but
    at most 0.5 / 10.5 = 4.8 % of the GPU's work: the old report said "Top kernel `…elementwise…`: 100.0 % of kernel
    time", "Where the busy time goes (non-overlapped): elementwise 100 %" and "Unfused elementwise kernels take
    100.0 % of kernel time" (elementwise_fusion), all false. Now: gpu_bound says the graphs' kernels are unknown,
    quotes no kernel share, and no trait finding is made; graph_trace_mode leads."""
    path = _graph_level_trace(tmp_path / "graph_level.sqlite")
    rep = analyze_path(path, options_from_kwargs(window=(0, 11_500 * US)))
    ids = [f.id for f in rep.findings]
    assert ids[0] == "graph_trace_mode"
    assert "elementwise_fusion" not in ids and "fp32_gemm" not in ids
    (g,) = [f for f in rep.findings if f.id == "gpu_bound"]
    assert g.title == "GPU-bound: the GPU is busy 91.3 % of the window set by --window; kernel time sets the pace"
    assert g.evidence[1:] == ("The kernels inside the 50 CUDA graph launches were not recorded (graph-level tracing): "
                              "which kernels take the busy time is not known.",
                              "Time at stake: the busy time, 10.500 ms — the time faster (or fewer) kernels would "
                              "shorten, not time that can be saved outright.")
    assert not any("of kernel time" in e or "busy time goes" in e for e in g.evidence)
    assert [c.metric for c in g.checks] == ["busy_pct"]
