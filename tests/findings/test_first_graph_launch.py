"""A CUDA graph's first launch (graph upload on first launch) charged to the one-time kind `module_load` is named
for what it is: "first CUDA-graph launches", not "module loading" — the trace holds no module-load call
(docs/FINDINGS.md, "Idle causes → findings")."""

from __future__ import annotations

from pathlib import Path

import pytest
from claims_support import finding_of
from synth import TraceBuilder

from nsys_llm_explainer.findings.advice import ADVICE
from nsys_llm_explainer.options import options_from_kwargs
from nsys_llm_explainer.pipeline import analyze_path

US, MS = 1_000, 1_000_000
PID = 100


def _token_steps(b: TraceBuilder, g: int, t: int, node_mode: bool = True) -> None:
    """10 token steps from ``t``: one `cudaGraphLaunch` (8 ms the first, 15 µs the others) of 40 kernels of 20 µs,
    25 µs apart (names `decode_kernel_0` … `_7`), a `cudaStreamSynchronize` to 3 µs after the last kernel, then
    200 µs of host work."""
    for i in range(10):
        call = 8 * MS if i == 0 else 15 * US
        ks = t + call + 5 * US
        kern = []
        for j in range(40):
            kern.append((ks, ks + 20 * US, f"decode_kernel_{j % 8}"))
            ks += 25 * US
        b.graph_launch(t, t + call, pid=PID, tid=1, kernels=kern, device=0, graph_exec_id=1, node_mode=node_mode)
        c = b.runtime(t + call + 1 * US, ks + 3 * US, tid_g=g, name="cudaStreamSynchronize_v3020")
        b.sync(t + call + 2 * US, ks + 2 * US, pid=PID, corr=c, device=0)
        t = ks + 3 * US + 200 * US


def _graph_decode(path: Path, flavor: str) -> dict:
    """Graph decode loop: per token one `cudaGraphLaunch` of 40 kernels of 20 µs (25 µs apart; 8 names, each first
    run inside the first launch — the eager warm-up preceded the capture), then `cudaStreamSynchronize` and 200 µs
    of host work; 10 tokens from t = 1 ms. The first launch call lasts 8 ms (the graph's upload), the others 15 µs.
    The first kernel starts at 1 + 8 + 0.005 ms, the last ends at 21.015 ms; the window [0, 30) ms keeps the whole
    capture, [1, 21.015) ms = 20.015 ms (no warm-up trimmed); its first gap [1, 9.005) ms holds 8.000 ms of the first
    launch call = 40.0 % of the window; the finding claims 39.8 % (40 µs lie within one timeline bin of the edge)."""
    b = TraceBuilder(flavor)
    b.process(PID, "python3")
    b.gpu(0)
    g = b.thread(PID, 1, "python3")
    _token_steps(b, g, 1 * MS)
    b.write(str(path), overwrite=True)
    return analyze_path(str(path), options_from_kwargs(window=(0, 30 * MS))).to_dict()


@pytest.mark.parametrize("flavor", ["2022.4", "2024.2"])
def test_first_graph_launch_is_named_a_graph_upload_not_a_module_load(tmp_path: Path, flavor: str) -> None:
    """Before: "One-time cost: module loading / first launches (`cudaGraphLaunch`) take 39.8 % of the window" and
    advice about lazy module loading and JIT, though no module was loaded in the trace."""
    f = finding_of(_graph_decode(tmp_path / "t.sqlite", flavor), "idle_module_load")
    assert f["title"] == ("One-time cost: first CUDA-graph launches (`cudaGraphLaunch`) take 39.8 % of the window, "
                          "7.960 ms")
    assert not any("module load" in x and "charged to their own calls" not in x for x in f["evidence"])
    assert any(x.startswith("`cudaGraphLaunch` here is a CUDA graph's first launch in this process")
               for x in f["evidence"])
    assert f["recommendation"] == [ADVICE["module_load.graph_upload"].text]


def _warm_then_graph(path: Path, flavor: str, node_mode: bool = True) -> dict:
    """Eager warm-up, graph capture, replays (vLLM / torch.compile "reduce-overhead"): 5 eager passes of 40
    `cudaLaunchKernel` calls (10 µs; kernels `decode_kernel_0` … `_7` of 20 µs, 35 µs apart) and a sync, from
    t = 1 ms to 9.1 ms; the capture pass (`cudaStreamBeginCapture`, `EndCapture`, `cudaGraphInstantiate`: no GPU
    work); from 10.1 ms the 10 token steps of :func:`_graph_decode` (same kernel names, already run eagerly). The
    first `cudaGraphLaunch` lasts 8 ms (the upload), wholly while the GPU idles; the other 9 last 15 µs, each after
    200 µs of host work. Window [1, 30.115) ms = 29.115 ms: 8 ms is 27.5 %."""
    b = TraceBuilder(flavor)
    b.process(PID, "python3")
    b.gpu(0)
    g = b.thread(PID, 1, "python3")
    t = 1 * MS
    for _ in range(5):
        for j in range(40):
            b.launch(t, t + 10 * US, t + 11 * US, t + 31 * US, pid=PID, tid=1, name=f"decode_kernel_{j % 8}")
            t += 35 * US
        c = b.runtime(t, t + 20 * US, tid_g=g, name="cudaStreamSynchronize_v3020")
        b.sync(t, t + 19 * US, pid=PID, corr=c, device=0)
        t += 220 * US
    b.runtime(t, t + 50 * US, tid_g=g, name="cudaStreamBeginCapture_v10000")
    b.runtime(t + 60 * US, t + 500 * US, tid_g=g, name="cudaStreamEndCapture_v10000")
    b.runtime(t + 510 * US, t + 900 * US, tid_g=g, name="cudaGraphInstantiate_v10000")
    _token_steps(b, g, t + 1 * MS, node_mode=node_mode)
    b.write(str(path), overwrite=True)
    return analyze_path(str(path), options_from_kwargs(window=(0, 60 * MS))).to_dict()


@pytest.mark.parametrize("flavor,node_mode", [("2022.4", True), ("2024.2", False), ("2026.2", True)])
def test_first_launch_of_a_graph_whose_kernels_ran_eagerly_is_one_time(tmp_path: Path, flavor: str,
                                                                         node_mode: bool) -> None:
    """Before: the first `cudaGraphLaunch` ran no new kernel name, so its 8 ms upload was a launch call: 8.135 ms of
    `launch` on `cudaGraphLaunch` and "Launch-bound: the GPU waits ~18.27 µs per kernel for its launch … 37.6 % of
    the window". Now the first launch of its graph (its node ids; in graph-level tracing its `graphExecId`) is one-time:
    8.000 ms of `module_load`, the 9 others 9 × 15 µs = 135 µs of `launch`."""
    rep = _warm_then_graph(tmp_path / "t.sqlite", flavor, node_mode)
    (d,) = rep["idle_causes"]["devices"]
    got = {(c["kind"], c["detail"]): c["ns"] for c in d["causes"]}
    assert got[("module_load", "cudaGraphLaunch")] == 8 * MS
    assert got[("launch", "cudaGraphLaunch")] == 135 * US
    f = finding_of(rep, "idle_module_load")
    assert f["title"] == ("One-time cost: first CUDA-graph launches (`cudaGraphLaunch`) take 27.5 % of the window, "
                          "8.000 ms")
    assert f["recommendation"] == [ADVICE["module_load.graph_upload"].text]
