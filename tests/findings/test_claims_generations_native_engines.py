"""The native-engine and GPU words (native-host advice, readback words, PDL by GPU, one copy engine, capability "from
the name", the window's start-up / teardown words, compare's host-paced note) under every exporter generation, and the
sentences they make where a name or a GPU is not the usual one. Each trace is built by hand; the truth is worked out in
the docstring."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any, Dict, List, Optional

import pytest
from claims_support import finding_of
from synth import FLAVORS, TraceBuilder, build_scenario

from nsys_llm_explainer.analyses.trace.facts import gpu_fact
from nsys_llm_explainer.cli import main
from nsys_llm_explainer.findings.advice import ADVICE
from nsys_llm_explainer.model.info import GpuInfo
from nsys_llm_explainer.options import options_from_kwargs
from nsys_llm_explainer.pipeline import analyze_path
from nsys_llm_explainer.render.sections.findings import facts_pairs

US = 1_000
MS = 1_000_000
PID = 100
GGML = ("void rms_norm_f32<1024>(const float *, float *, int, float)",
        "quantize_q8_1(const float *, void *, long, long)",
        "void mul_mat_vec_q<(ggml_type)12, 1>(const void *, const void *, float *, int, int, int, int)",
        "void rope_norm<true, float>(const float *, float *, int, int, int, int, const int *, float, float)",
        "void soft_max_f32<true, 0, 0>(const float *, const float *, float *, int, int, float)",
        "void k_bin_bcast<&op_add, float, float, float>(const float *, const float *, float *, int, int)")
H100 = dict(name="NVIDIA H100 80GB HBM3", computeMajor=9, computeMinor=0)
#: a T4 whose export records neither its compute capability nor more than one copy engine
T4_NO_CC = dict(name="Tesla T4", sm_count=40, chipName="TU104", computeMajor=None, computeMinor=None, asyncEngines=1)
PDL = "programmatic dependent launch"
UNLOAD = "cuModuleUnload"


def decode(flavor: str, *, process: str = "llama-server", gpu: Optional[Dict[str, Any]] = None, unloads: int = 0,
           unload_name: str = UNLOAD) -> TraceBuilder:
    """llama.cpp decode (test_claims_native_host_words's): one process ``process`` (thread 1 of that name) on ``gpu``
    (the T4 of :data:`T4_NO_CC` by default); 20 steps, step i at t = 1 ms + 3 ms · i: 10 GGML launches [t + 10 + 10 k, t
    + 15 + 10 k) µs run [t + 20 + 80 k, t + 100 + 80 k) µs (the last ends at t + 820); the logits come back (512,000 B,
    `cudaMemcpyAsync` [t + 110, t + 116) µs, copy [t + 820, t + 850) µs, device → pageable), then
    `cudaStreamSynchronize` [t + 116, t + 852) µs: 20 sync points right after a device-to-host copy (a readback); then
    2.158 ms outside any traced call. The last kernel ends at 58.820 ms (absolute). ``unloads``: that many driver calls
    ``unload_name`` of 80 µs every 100 µs from 61 ms (the last ends at 61 + 0.1 · (n − 1) + 0.08 ms)."""
    b = TraceBuilder(flavor)
    b.process(PID, process)
    g = b.thread(PID, 1, process)
    b.gpu(0, **(gpu or T4_NO_CC))
    for i in range(20):
        t = 1 * MS + i * 3 * MS
        for k in range(10):
            b.launch(t + (10 + 10 * k) * US, t + (15 + 10 * k) * US, t + (20 + 80 * k) * US, t + (100 + 80 * k) * US,
                     pid=PID, tid=1, name=GGML[k % len(GGML)])
        c = b.runtime(t + 110 * US, t + 116 * US, tid_g=g, name="cudaMemcpyAsync_v3020")
        b.memcpy(t + 820 * US, t + 850 * US, pid=PID, bytes=512_000, copy_kind=2, src_kind=2, dst_kind=0, corr=c)
        c = b.runtime(t + 116 * US, t + 852 * US, tid_g=g, name="cudaStreamSynchronize_v3020")
        b.sync(t + 117 * US, t + 851 * US, pid=PID, corr=c)
    for j in range(unloads):
        s = 61 * MS + j * 100 * US
        b.runtime(s, s + 80 * US, tid_g=g, name=unload_name, event_class=1)
    return b


def graph_tokens(flavor: str, gpu: Dict[str, Any]) -> TraceBuilder:
    """llama.cpp with CUDA graphs (test_claims_native_engines's): per token one `cudaGraphLaunch` [t, t + 15 µs) of 200
    GGML kernels of 3 µs, 5 µs apart from t + 20 µs (199 gaps of 2 µs between back-to-back queued kernels), a
    `cudaStreamSynchronize` to 3 µs after the last kernel, then 200 µs of host work; 10 tokens."""
    b = TraceBuilder(flavor)
    b.process(PID, "llama-cli")
    b.gpu(0, **gpu)
    g = b.thread(PID, 1, "llama-cli")
    t = 1 * MS
    for _ in range(10):
        ks = t + 20 * US
        kern = []
        for j in range(200):
            kern.append((ks, ks + 3 * US, GGML[j % len(GGML)]))
            ks += 5 * US
        b.graph_launch(t, t + 15 * US, pid=PID, tid=1, kernels=kern, device=0, graph_exec_id=1)
        c = b.runtime(t + 16 * US, ks + 3 * US, tid_g=g, name="cudaStreamSynchronize_v3020")
        b.sync(t + 17 * US, ks + 2 * US, pid=PID, corr=c, device=0)
        t = ks + 3 * US + 200 * US
    return b


def _report(b: TraceBuilder, tmp_path: Path, name: str = "t.sqlite") -> Any:
    p = tmp_path / name
    b.write(str(p), overwrite=True)
    return analyze_path(str(p), options_from_kwargs())


TEARDOWN = ("Auto-detected window: trimmed 12.160 ms of tail (GPU busy 0.0%; teardown: `cuModuleUnload` × 100 run "
            "during 65.8% of it); the kept window is GPU busy 27.68% ")


@pytest.mark.parametrize("flavor", sorted(FLAVORS))
def test_native_engine_words_are_the_same_under_every_exporter_generation(flavor: str, tmp_path: Path) -> None:
    """(trace: :func:`decode` with 100 `cuModuleUnload` after the last step, on a T4 whose export records no compute
    capability and `asyncEngines` 1) Every generation records what these sentences need (process names, the API
    names, `TARGET_INFO_GPU.name` / `asyncEngines`), so each says the same:
    - the tail [58.820, 70.980) ms = 12.160 ms is trimmed (busy 0); the unloads run during 100 × 80 µs = 8.000 ms of
      it = 65.79 % → "teardown: `cuModuleUnload` × 100 run during 65.8% of it"; the kept window [1.010, 58.820) ms
      holds 200 × 80 µs = 16.000 ms of kernels = 27.68 %;
    - `llama-server` is a native host (no stack recognised, no Python frame): fact `native_host`, and the host-gap
      advice names `nsys --sample=cpu` only (no py-spy);
    - the readbacks are "(a readback of results)" (no PyTorch; their count: :func:`test_the_last_readback_counts`);
    - the facts line: "Tesla T4: Turing (compute capability 7.5, from the name), tensor cores FP16/INT8/INT4"."""
    rep = _report(decode(flavor, unloads=100), tmp_path)
    j = rep.to_dict()
    assert j["window"]["reason"].startswith(TEARDOWN), j["window"]["reason"]
    assert j["facts"]["native_host"] == "llama-server"
    adv = finding_of(j, "idle_host_cpu")["recommendation"]
    assert ADVICE["host_cpu.profile.native"].text in adv and not any("py-spy" in a for a in adv), adv
    ev = finding_of(j, "step_sync")["evidence"][0]
    assert "right after a device-to-host copy (a readback of results); " in ev and ".item()" not in ev, ev
    assert dict(facts_pairs(rep.facts))["GPUs"] == \
        "Tesla T4: Turing (compute capability 7.5, from the name), tensor cores FP16/INT8/INT4"


@pytest.mark.parametrize("flavor", sorted(FLAVORS))
def test_pdl_and_copy_engine_words_under_every_exporter_generation(flavor: str, tmp_path: Path) -> None:
    """(traces: :func:`graph_tokens`; the `h2d_pageable_step` scenario with `asyncEngines` 1) The queued-latency
    finding offers programmatic dependent launch on the H100 (9.0 recorded) and not on the T4 (7.5, from its name:
    PDL needs 9.0); the copy-path finding on a GPU of one copy engine says the two directions take turns. The same
    in every generation (the graph tables differ: node-level `CUDA_GRAPH_EVENTS` up to 2023.4)."""
    for gpu, pdl in ((H100, True), (T4_NO_CC, False)):
        j = _report(graph_tokens(flavor, gpu), tmp_path).to_dict()
        adv = finding_of(j, "idle_queued")["recommendation"]
        assert any(a.startswith("Each kernel boundary costs a few µs") for a in adv), adv
        assert any(a.endswith("remove boundaries; programmatic dependent launch overlaps a kernel's prologue with "
                              "the previous one.") for a in adv) is pdl, (gpu["name"], adv)
        assert any(PDL in a for a in adv) is pdl, adv
    p = tmp_path / "c.sqlite"
    build_scenario("h2d_pageable_step", str(p), flavor=flavor)
    con = sqlite3.connect(p)
    con.execute("UPDATE TARGET_INFO_GPU SET asyncEngines = 1")
    con.commit()
    con.close()
    adv = finding_of(analyze_path(str(p), options_from_kwargs()).to_dict(), "copy_path")["recommendation"]
    assert ADVICE["copy_pace.engines.one"].text in adv and ADVICE["copy_pace.engines"].text not in adv, adv


def launch_bound(flavor: str, steps: int = 40) -> TraceBuilder:
    """Eager launch-bound loop on an H100: ``steps`` NVTX `step` ranges [t, t + 520 µs), t = 1 ms + 600 µs · i; in
    each 50 launches [l, l + 6) µs, l = t + 10 µs · k, of 4 µs kernels [l + 8, l + 12) µs. Between two kernels of a step
    (6 µs): the next launch call runs to l' + 6 = l + 16 (4 µs `launch`), then the kernel waits 2 µs already launched,
    launched only after the one before it started: host-paced `queued`. Between steps the next launch call ends 2 µs
    before its kernel too: per step 49 × 2 + 2 = 100 µs of host-paced `queued` (0.100 ms/step)."""
    b = TraceBuilder(flavor)
    b.process(PID, "python3")
    g = b.thread(PID, 1, "python3")
    b.gpu(0, **H100)
    t = 1 * MS
    for _ in range(steps):
        b.nvtx_push_pop(t, t + 520 * US, "step", tid_g=g)
        for k in range(50):
            ls = t + k * 10 * US
            b.launch(ls, ls + 6 * US, ls + 8 * US, ls + 12 * US, pid=PID, tid=1,
                     name="void elementwise_kernel<float>(float*)")
        t += 600 * US
    return b


def test_compare_s_host_paced_note_between_the_oldest_and_newest_generation(tmp_path: Path) -> None:
    """(trace: :func:`launch_bound` written by the 2021.5 and the 2026.2 exporter) The two exports hold the same
    loop: compare finds no change and its note under the idle table gives each trace's host-paced `queued` time in
    the `launch` row, 0.100 ms/step each (:func:`launch_bound`)."""
    a, b = tmp_path / "old" / "t.sqlite", tmp_path / "new" / "t.sqlite"
    for p, fl in ((a, "2021.5"), (b, "2026.2")):
        p.parent.mkdir()
        launch_bound(fl).write(str(p))
    assert main(["compare", str(a), str(b), "-o", str(tmp_path / "cmp"), "--labels", "old,new", "--quiet"]) == 0
    md = (tmp_path / "cmp" / "compare.md").read_text(encoding="utf-8")
    assert "`new` and `old` do not differ significantly on the median step period: 0.600 ms → 0.600 ms" in md, md
    assert ("the report's own idle-cause table lists it under `queued`): `old` 0.100, `new` 0.100 ms/step of it "
            "(detail `host-paced queued` in tables/part_changes.csv).") in md, md


def test_an_unload_call_whose_name_goes_on_is_teardown(tmp_path: Path) -> None:
    """(trace: :func:`decode` with 100 unload calls named `cuModuleUnloadAll` — any name the rule's prefix
    `cu`/`cuda` + `Module`/`Library` + `Load`/`Unload` takes) The tail of unloads was called "start-up" because
    the largest name did not *end* in `Unload`: what a call is comes from its `Load`/`Unload` part. Tail as in
    :data:`TEARDOWN`: 12.160 ms, the calls during 65.8 % of it."""
    j = _report(decode("2024.2", unloads=100, unload_name="cuModuleUnloadAll"), tmp_path).to_dict()
    r = j["window"]["reason"]
    assert r.startswith("Auto-detected window: trimmed 12.160 ms of tail (GPU busy 0.0%; teardown: "
                        "`cuModuleUnloadAll` × 100 run during 65.8% of it); "), r


#: GPU name → the compute capability NVIDIA's CUDA GPU list gives it (developer.nvidia.com/cuda-gpus)
NAMES: List[tuple] = [
    ("NVIDIA RTX PRO 4500 Blackwell", "12.0"), ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "12.0"),
    ("NVIDIA GeForce RTX 5090", "12.0"), ("NVIDIA B200", "10.0"), ("NVIDIA GB200", "10.0"), ("NVIDIA B300", "10.3"),
    ("NVIDIA H100 80GB HBM3", "9.0"), ("NVIDIA RTX 6000 Ada Generation", "8.9"), ("Quadro RTX 6000", "7.5"),
    ("NVIDIA RTX A6000", "8.6"), ("Tesla T4", "7.5"), ("Tesla V100-SXM2-16GB", "7.0"), ("Tesla P100-PCIE-16GB", "6.0"),
    ("Tesla P40", "6.1"), ("Tesla P4", "6.1"), ("NVIDIA GeForce GTX 1080 Ti", "6.1"), ("NVIDIA TITAN Xp", "6.1"),
    ("NVIDIA TITAN X (Pascal)", "6.1"), ("GeForce GTX TITAN X", "5.2"), ("NVIDIA GeForce GTX 980", "5.2"),
    ("Tesla M40 24GB", "5.2"), ("Tesla M60", "5.2"), ("NVIDIA GeForce GTX 750 Ti", "5.0"), ("Tesla K80", "3.7"),
    ("Tesla K40m", "3.5"), ("NVIDIA TITAN X", None),
]


@pytest.mark.parametrize("name,cc", NAMES)
def test_the_capability_from_the_name_is_the_gpu_s(name: str, cc: Optional[str]) -> None:
    """An export without `computeMajor` / `computeMinor`: the facts line says "(compute capability X, from the name)";
    X must be that GPU's (NVIDIA's list). It read 6.0 for every Pascal name (a GTX 1080, a P40 and a TITAN Xp are
    6.1), 5.0 for every Maxwell one (a GTX 980, an M40, an M60 are 5.2), 3.7 for a K40 (3.5) and 10.0 for an RTX PRO
    Blackwell whose model number is not x000 (12.0). A bare "TITAN X" is a Maxwell (5.2) or a Pascal (6.1) card:
    not known from the name."""
    f = gpu_fact(GpuInfo(id=0, name=name))
    assert f is not None
    assert (f.compute_capability, f.source) == ((cc, "name") if cc else (None, "unknown")), f


def test_the_last_readback_counts(tmp_path: Path) -> None:
    """(trace: :func:`decode` with the unload tail) The auto window ends where the last kernel ends (58.820 ms), the
    instant the last step's logits copy starts ([58.820, 58.850) ms); its `cudaMemcpyAsync` call ([58.110, 58.116)
    ms) and its `cudaStreamSynchronize` ([58.116, 58.852) ms) lie in the window. What a call copied comes from the
    whole capture's copy rows: the 20th sync comes right after a device-to-host copy call (made at 58.110 ms, after
    the step's last launch call [58.100, 58.105) ms) just as the other 19, so the evidence reads "20 blocking calls
    (`cudaStreamSynchronize` 20), 20 right after a device-to-host copy" (it read 19: the window's model had lost the
    copy starting at its end)."""
    j = _report(decode("2024.2", unloads=100), tmp_path).to_dict()
    ev = finding_of(j, "step_sync")["evidence"][0]
    assert "(`cudaStreamSynchronize` 20), 20 right after a device-to-host copy (a readback of results); " in ev, ev


def test_copy_directions_advice_beside_a_one_engine_gpu_is_conditional(tmp_path: Path) -> None:
    """(trace: the `h2d_pageable_step` scenario, its H100 (`asyncEngines` 3) joined by a Tesla T4 listed as GPU 1 with
    `asyncEngines` 1; no `TARGET_INFO_CUDA_DEVICE`) The H2D path sets the pace on CUDA device 0, which may be either
    GPU (CUDA_VISIBLE_DEVICES renumbers). The advice says unconditionally that the two directions "run on separate
    copy engines only when they are issued on different streams" — false if device 0 is the T4. As the PDL advice in
    the same position, the line names its condition: the fact `gpu_one_copy_engine` is "some" (the H100 records 3,
    the T4 1, neither tied to device 0), and `copy_pace.engines.some` says the directions run on separate engines on
    a GPU with two or more copy engines, and take turns on the T4's single one."""
    p = tmp_path / "c.sqlite"
    build_scenario("h2d_pageable_step", str(p), flavor="2024.2")
    con = sqlite3.connect(p)
    cols = [r[1] for r in con.execute("PRAGMA table_info(TARGET_INFO_GPU)")]
    row = dict(zip(cols, con.execute("SELECT * FROM TARGET_INFO_GPU").fetchone()))
    row.update(id=1, name="Tesla T4", computeMajor=7, computeMinor=5, asyncEngines=1, cuDevice=1, uuid="GPU-t4")
    con.execute(f"INSERT INTO TARGET_INFO_GPU ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})",
                tuple(row.values()))
    con.commit()
    con.close()
    adv = finding_of(analyze_path(str(p), options_from_kwargs()).to_dict(), "copy_path")["recommendation"]
    assert ADVICE["copy_pace.engines"].text not in adv and ADVICE["copy_pace.engines.one"].text not in adv, adv
    assert ADVICE["copy_pace.engines.some"].text in adv, adv


def _facts(*gpus: tuple) -> Any:
    """TraceFacts listing GPUs (id, asyncEngines, ran_kernels) and nothing else."""
    from nsys_llm_explainer.analyses.trace.facts import GpuFact, TraceFacts
    return TraceFacts(tuple(GpuFact(i, f"GPU {i}", "9.0", "Hopper", (), "compute capability", ran, ce)
                            for i, ce, ran in gpus), "inference", (), "", (), "", False, "", False, "", False,
                      False, "", False, ())


@pytest.mark.parametrize("gpus,device,want", [
    (((0, 1, None),), 0, True), (((0, 3, None),), 0, False), (((0, None, None),), 0, None),
    (((0, 3, None), (1, 1, None)), 0, "some"),           # an H100 beside a T4, device 0 tied to neither
    (((0, None, None), (1, 1, None)), 0, "some"),        # one records 1, the other nothing: device 0 may be the one
    (((0, 3, None), (1, None, None)), 0, None),          # no GPU records 1: not recorded (the two-engine line)
    (((0, 3, True), (1, 1, False)), 0, False), (((0, 3, False), (1, 1, True)), 1, True),   # tied: that GPU's
    (((0, 3, None), (1, 2, None)), 0, False),
])
def test_one_copy_engine_by_the_gpus_the_device_may_be(gpus: tuple, device: int, want: Any) -> None:
    """`gpu_one_copy_engine` (docs/FINDINGS.md, "Facts"): the GPU of the device where the export ties it to one, else
    every listed GPU: one value when they agree, "some" when one of them records a single copy engine and another
    does not, None when the others are only unrecorded."""
    assert _facts(*gpus).one_copy_engine(device) == want
