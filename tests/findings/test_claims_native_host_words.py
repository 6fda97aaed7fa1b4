"""Native engines' hosts and GPUs: sentences that spoke of a stack or a GPU the trace does not show — PyTorch calls
named on a llama.cpp trace, py-spy offered for a native process, a capability given as recorded when it was inferred
from the GPU's name, copy-direction advice beside the GPU's copy engines. Each trace is built by hand; the truth is in
the docstring."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Optional, Tuple

from claims_support import finding_of
from synth import TraceBuilder

from nsys_llm_explainer.findings.advice import ADVICE
from nsys_llm_explainer.options import options_from_kwargs
from nsys_llm_explainer.pipeline import analyze_path
from nsys_llm_explainer.render.sections.findings import facts_pairs
from nsys_llm_explainer.report import Report

US = 1_000
MS = 1_000_000
PID = 100
GEMV = "void mul_mat_vec_q<(ggml_type)12, 1>(const void *, const void *, float *, int, int, int, int)"
TORCH_GEMV = "void at::native::(anonymous namespace)::gemv_kernel<c10::Half>(int, int, const c10::Half *)"
PY = "/usr/lib/libpython3.11.so"


def _decode(process: str, kernel: str = GEMV, python_samples: bool = False,
            gpu: Optional[Dict[str, Any]] = None) -> TraceBuilder:
    """One process ``process`` (thread 1 of the same name), one GPU (``gpu``: an RTX 4090 by default); 20 decode
    steps, step i at t = 1 ms + 3 ms · i: 10 ``kernel`` launches [t + 10 + 10 k, t + 15 + 10 k) µs run
    [t + 20 + 80 k, t + 100 + 80 k) µs (the last ends at t + 820); the logits come back (512,000 B,
    `cudaMemcpyAsync` [t + 110, t + 116) µs, copy [t + 820, t + 850) µs, device → pageable) and
    `cudaStreamSynchronize` [t + 116, t + 852) µs waits for them: 20 sync points, each right after a
    device-to-host copy call made after the thread's last launch (a readback). Then the thread is outside any traced
    call until the next step's first launch (t + 852 µs to t + 3.010 ms: 2.158 ms, the GPU idle).
    ``python_samples``: one CPU sample per step in that gap, in ``_PyEval_EvalFrameDefault`` (libpython)."""
    b = TraceBuilder()
    b.process(PID, process)
    g = b.thread(PID, 1, process)
    b.gpu(0, **(gpu or dict(name="NVIDIA GeForce RTX 4090", sm_count=128, computeMajor=8, computeMinor=9)))
    for i in range(20):
        t = 1 * MS + i * 3 * MS
        for k in range(10):
            b.launch(t + (10 + 10 * k) * US, t + (15 + 10 * k) * US, t + (20 + 80 * k) * US, t + (100 + 80 * k) * US,
                     pid=PID, tid=1, name=kernel)
        c = b.runtime(t + 110 * US, t + 116 * US, tid_g=g, name="cudaMemcpyAsync_v3020")
        b.memcpy(t + 820 * US, t + 850 * US, pid=PID, bytes=512_000, copy_kind=2, src_kind=2, dst_kind=0, corr=c)
        c = b.runtime(t + 116 * US, t + 852 * US, tid_g=g, name="cudaStreamSynchronize_v3020")
        b.sync(t + 117 * US, t + 851 * US, pid=PID, corr=c)
        if python_samples:
            b.cpu_sample(t + 1500 * US, tid_g=g, frames=[("_PyEval_EvalFrameDefault", PY), ("main", "/usr/bin/x")])
    return b


def _report(b: TraceBuilder, tmp_path: Path) -> Tuple[Report, Dict[str, Any]]:
    p = tmp_path / "t.sqlite"
    b.write(str(p), overwrite=True)
    rep = analyze_path(str(p), options_from_kwargs())
    return rep, rep.to_dict()


def test_step_sync_readback_words_are_pytorch_s_only_on_a_pytorch_trace(tmp_path: Path) -> None:
    """(trace: :func:`_decode`) A llama.cpp `llama-server` step reads its logits back with `cudaMemcpyAsync` before
    each of its 20 `cudaStreamSynchronize` calls: the evidence said "20 right after a device-to-host copy (a
    `.item()` / `.cpu()`-style readback)" — PyTorch calls, on a trace with no PyTorch (stack not recognised,
    framework fact empty). It now says "(a readback of results)". The same steps with PyTorch's kernels (stack and
    framework PyTorch) keep the PyTorch words."""
    _, j = _report(_decode("llama-server"), tmp_path)
    assert j["facts"]["framework"] == ""
    ev = finding_of(j, "step_sync")["evidence"][0]
    assert "(`cudaStreamSynchronize` 20), 20 right after a device-to-host copy (a readback of results); " in ev, ev
    assert ".item()" not in ev and ".cpu()" not in ev, ev
    _, j = _report(_decode("python3", kernel=TORCH_GEMV), tmp_path)
    assert j["facts"]["framework"] == "pytorch"
    ev = finding_of(j, "step_sync")["evidence"][0]
    assert "20 right after a device-to-host copy (a `.item()` / `.cpu()`-style readback); " in ev, ev


def _host_advice(j: Dict[str, Any]) -> Tuple[str, ...]:
    """The host-gap finding's recommendation lines."""
    return tuple(finding_of(j, "idle_host_cpu")["recommendation"])


def test_py_spy_is_offered_only_for_a_python_host(tmp_path: Path) -> None:
    """(trace: :func:`_decode`, no CPU sample in the host gaps) Per step the GPU idles 2.158 ms while the thread
    works outside any traced call: the host-gap finding advised "Profile the host code … (`nsys --sample=cpu`,
    py-spy) and overlap CPU work (scheduling, data preparation, Python)". py-spy samples a Python interpreter:
    for `llama-server` (C++) and `candle-server` (Rust), with no stack recognised and no Python frame sampled, the
    line names `nsys --sample=cpu` only (fact `native_host`: the process names). A `python3` process keeps the
    line, and so does a PyTorch stack under a process name that is not an interpreter's (a script started by its
    own name): PyTorch runs a Python host."""
    for name in ("llama-server", "candle-server"):
        _, j = _report(_decode(name), tmp_path)
        assert j["facts"]["native_host"] == name
        adv = _host_advice(j)
        assert ADVICE["host_cpu.profile.native"].text in adv and ADVICE["host_cpu.profile"].text not in adv, adv
        assert not any("py-spy" in a for a in adv), adv
    _, j = _report(_decode("python3"), tmp_path)
    assert "native_host" not in j["facts"]
    assert ADVICE["host_cpu.profile"].text in _host_advice(j)
    _, j = _report(_decode("vllm-serve", kernel=TORCH_GEMV), tmp_path)     # stack PyTorch: a Python host
    assert "native_host" not in j["facts"] and ADVICE["host_cpu.profile"].text in _host_advice(j)


def test_python_frames_in_the_samples_mean_a_python_host(tmp_path: Path) -> None:
    """(trace: :func:`_decode` of a process named `server`, with one CPU sample per step in `libpython`) The
    samples show the interpreter: the facts do not call the host native."""
    _, j = _report(_decode("server", python_samples=True), tmp_path)
    assert "native_host" not in j["facts"], j["facts"]
    _, j = _report(_decode("server"), tmp_path)
    assert j["facts"]["native_host"] == "server"


def test_facts_line_says_when_the_capability_comes_from_the_name(tmp_path: Path) -> None:
    """A Tesla T4 whose export records no compute capability (`computeMajor` / `computeMinor` NULL, as ≤ 2022.4
    exports often do): the capability 7.5 is inferred from the name (`\\bt4\\b` → Turing), and the facts line read
    "Tesla T4: Turing (compute capability 7.5), …" as if recorded. It now reads "(compute capability 7.5, from the
    name)"; a recorded one keeps "(compute capability 7.5)"."""
    t4 = dict(name="Tesla T4", sm_count=40, chipName="TU104")
    rep, _ = _report(_decode("llama-server", gpu={**t4, "computeMajor": None, "computeMinor": None}), tmp_path)
    gpus = dict(facts_pairs(rep.facts))["GPUs"]
    assert gpus == "Tesla T4: Turing (compute capability 7.5, from the name), tensor cores FP16/INT8/INT4", gpus
    rep, _ = _report(_decode("llama-server", gpu={**t4, "computeMajor": 7, "computeMinor": 5}), tmp_path)
    gpus = dict(facts_pairs(rep.facts))["GPUs"]
    assert gpus == "Tesla T4: Turing (compute capability 7.5), tensor cores FP16/INT8/INT4", gpus


def _copy_pace_advice(tmp_path: Path, engines: Optional[int]) -> Tuple[str, ...]:
    """The copy-path finding's advice on the `h2d_pageable_step` scenario (tests/synth/scenarios/copy_engines.py: 4
    pageable host-to-device copies busy 94 % of each 10 ms step, GEMMs under them, a pinned 12.5 MB device-to-host
    copy per step too) with its GPU's `TARGET_INFO_GPU.asyncEngines` set to ``engines`` (None: NULL)."""
    import sqlite3

    from synth import build_scenario
    p = tmp_path / "c.sqlite"
    build_scenario("h2d_pageable_step", str(p))
    con = sqlite3.connect(p)
    con.execute("UPDATE TARGET_INFO_GPU SET asyncEngines = ?", (engines,))
    con.commit()
    con.close()
    rep = analyze_path(str(p), options_from_kwargs()).to_dict()
    f = finding_of(rep, "copy_path")
    assert f["title"].startswith("The H2D copy path sets the pace on device 0 (busy 94.0 %)"), f["title"]
    return tuple(f["recommendation"])


def test_copy_directions_advice_follows_the_gpu_s_copy_engines(tmp_path: Path) -> None:
    """(trace: :func:`_copy_pace_advice`) The H2D path sets the pace and the device also copies device-to-host: the
    finding advised "Use both copy directions at once: host-to-device and device-to-host copies run on separate copy
    engines only when they are issued on different streams". The export records the GPU's copy engines
    (`asyncEngines`, every export generation; an RTX 5000 Ada laptop GPU of the real traces records 1): with one
    engine the two directions take turns whatever the streams, so that line is false; the line for one engine says
    so. With 2 (or 3, the synthetic default) engines, and where the column is NULL, the line stays."""
    one = ADVICE["copy_pace.engines.one"].text
    both = ADVICE["copy_pace.engines"].text
    adv = _copy_pace_advice(tmp_path, 1)
    assert one in adv and both not in adv, adv
    for n in (2, 3, None):
        adv = _copy_pace_advice(tmp_path, n)
        assert both in adv and one not in adv, (n, adv)
