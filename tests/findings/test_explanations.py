"""Explanations that hold on traces never seen (facts first, advice that declares what it needs, one
claim per cause, window edges to the bin, NVTX coverage explained).

* The advice table is checked as a table: every advice line × every combination of the facts it reads (and
  the facts its words imply), against rules read off the *text* of the line — a line that names TF32 needs a
  GPU with TF32, a vLLM flag needs vLLM serving, prefill/decode needs inference, and so on.
* GPU facts against NVIDIA's compute-capability table, on names and capabilities the project has no trace of.
* Planted scenarios (numbers by construction) and the real traces for the rest.
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest
from conftest import SHARED_TRACES, real_report, scenario_report
from synth.scenarios import SCENARIOS

from nsys_llm_explainer.analyses.trace.facts import gpu_fact
from nsys_llm_explainer.findings.advice import ADVICE
from nsys_llm_explainer.findings.advice_facts import FACT_DOMAINS, Advice
from nsys_llm_explainer.findings.idle import VARIANTS
from nsys_llm_explainer.model.info import GpuInfo
from nsys_llm_explainer.vocabulary.cause_kinds import CAUSE_KINDS, KINDS

SRC = Path(__file__).resolve().parents[2] / "src" / "nsys_llm_explainer"

# ---------------------------------------------------------------------------------------------- the advice table

#: (pattern in the advice text, fact, values for which the line may be given) — written from what the words
#: claim, independently of the ``requires`` each line declares
TEXT_RULES = [
    (r"allow_tf32|set_float32_matmul_precision|TF32 tensor cores", "gpu_tf32", {True}),
    (r"bfloat16", "gpu_bf16", {True}),
    (r"torch\.float16|GradScaler", "gpu_fp16_tensor_cores", {True}),
    (r"torch\.float16|GradScaler", "gpu_tf32", {False}),
    (r"\bvLLM\b|vllm ", "stack", {"vllm"}),
    (r"SGLang", "stack", {"sglang"}),
    (r"TensorRT-LLM", "stack", {"trtllm"}),
    (r"--enforce-eager|--async-scheduling|--disable-cuda-graph|--disable-overlap-schedule|in-flight batching",
     "workload", {"inference"}),
    (r"prefill|decode", "workload", {"inference"}),
    (r"backward pass|optimizer step|GradScaler|autograd", "workload", {"training"}),
    # a serving engine's load and output processing, not a training loop's (test_claims_input_pipeline_training.py);
    # a training loop's batches
    (r"lack of load|batch requests|API-server|asynchronous output processing", "workload", {"inference", "unknown"}),
    (r"training loop|data-loader worker", "workload", {"training"}),
    (r"In PyTorch", "framework", {"pytorch"}),
    (r"\btorch\.|PyTorch|pin_memory|\.item\(\)", "framework", {"pytorch", ""}),
    (r"CUDA graphs are already in use", "cuda_graphs", {True}),
    (r"enable CUDA graphs|and use CUDA graphs", "cuda_graphs", {False}),   # "adopt CUDA graphs" (TensorRT-LLM lines)
    (r"--sample=cpu", "cpu_samples", {False}),
    (r"CPU samples", "cpu_samples", {True}),
    (r"is off-CPU", "host_thread_off_cpu", {True}),
    (r"overlap CPU work", "host_thread_off_cpu", {False}),
    (r"custom all-reduce already runs", "custom_allreduce", {True}),
    (r"use the engine's custom", "custom_allreduce", {False}),
    (r"In PyTorch, `torch\.compile`|`torch\.compile` also fuses", "torch_compile", {False}),
    (r"`torch\.compile` is (already )?in use", "torch_compile", {True}),
    (r"with CUDA graphs and kernel fusion|capture the step", "cuda_graphs", {False}),
    (r"outside CUDA calls and OS calls that wait", "os_runtime", {True}),
    (r"OS calls were not traced", "os_runtime", {False}),
    # copies: pinning only where host copies are pageable, overlap only where copies do not overlap the
    # kernels already, device-to-device words only for such copies, host-link words only with host copies
    (r"[Pp]ageable|cudaHostAlloc|cudaHostRegister|pin_memory=True", "host_copies_pageable", {True}),
    (r"Overlap copies with compute|on a side `torch\.cuda\.Stream`", "copies_overlap_kernels", {False, None}),
    (r"[Dd]evice-to-device copies", "copies_d2d", {True}),
    (r"issue them asynchronously \(`cudaMemcpyAsync`\) on a side stream|issued on a side `torch\.cuda\.Stream`",
     "copies_async_side_stream", {False, None}),
    (r"already run asynchronously", "copies_async_side_stream", {True}),
    (r"host link|host-to-device and device-to-host|non_blocking=True\)` issued", "copies_host", {True}),
    # the copy finding's prefetch line: "fewer and larger copies" only for copies that average ≤ 1 MiB
    # (test_claims_kv_cache_swap.py)
    # the copy finding's host-link line: only where its copies outlast the kernels over twice
    # (test_claims_weight_offloading.py); the copy-path finding leaves the fact unknown
    (r"Fewer bytes over the host link", "copies_outlast_kernels", {True, None}),
    (r"move fewer and larger copies", "copies_large", {False, None}),
    (r"these copies are large \(over 1 MiB", "copies_large", {True}),
    # the device-to-device line: "usually from `.contiguous()` …" only for copies that average ≤ 1 MiB
    # (test_claims_rl_post_training.py)
    (r"copies usually come from `\.contiguous\(\)`", "d2d_copies_large", {False}),
    (r"These device-to-device copies average over 1 MiB", "d2d_copies_large", {True}),
    # the FP32 finding: matmul settings for FP32 GEMMs, cuDNN's for FP32 convolutions
    # (test_claims_encoder_decoder_diffusion.py)
    (r"FP32 matmuls|matmul\.allow_tf32", "fp32_simt_gemm", {True}),
    (r"FP32 convolutions|cudnn\.allow_tf32", "fp32_simt_conv", {True}),
    # programmatic dependent launch needs compute capability 9.0 or newer: unconditional only on such a GPU, named with
    # its condition where the GPU is not known (test_claims_native_engines.py)
    (r"; programmatic dependent launch", "gpu_pdl", {True}),
    (r"programmatic dependent launch", "gpu_pdl", {True, None}),
    # copy directions on separate engines: unconditional only where no GPU the device may be records one copy engine
    # (None: not recorded — today's words kept), with its condition where one of the listed GPUs has one
    # (test_claims_generations_native_engines.py)
    (r"copies run on separate copy engines only when", "gpu_one_copy_engine", {False, None}),
    (r"on a GPU with two or more copy engines", "gpu_one_copy_engine", {"some"}),
    (r"This GPU has one copy engine", "gpu_one_copy_engine", {True}),
]


#: the framework each stack runs on (TensorRT-LLM: either backend); a combination against it cannot occur
STACK_FRAMEWORK = {"vllm": "pytorch", "sglang": "pytorch", "pytorch": "pytorch", "tensorflow": "tensorflow",
                   "jax": "jax", "tensorrt": "tensorrt", "trtllm": ""}


def _possible(env) -> bool:
    st, fw = env.get("stack"), env.get("framework")
    return st is None or fw is None or st not in STACK_FRAMEWORK or STACK_FRAMEWORK[st] == fw


def _read_facts(a: Advice):
    facts = set(a.requires)
    for rx, fact, _ in TEXT_RULES:
        if re.search(rx, a.text):
            facts.add(fact)
    return sorted(facts)


@pytest.mark.parametrize("aid", sorted(ADVICE))
def test_every_advice_line_x_every_combination_of_its_facts(aid):
    a = ADVICE[aid]
    facts = _read_facts(a)
    assert all(f in FACT_DOMAINS for f in facts)
    rules = [(fact, ok) for rx, fact, ok in TEXT_RULES if re.search(rx, a.text)]
    given = 0
    for combo in itertools.product(*(FACT_DOMAINS[f] for f in facts)):
        env = dict(zip(facts, combo))
        if not _possible(env):
            continue
        if a.allowed(env):
            given += 1
            bad = [(fact, env[fact]) for fact, ok in rules if env[fact] not in ok]
            assert not bad, f"{aid} is given although the trace's {bad} contradict its words: {a.text!r}"
    assert given > 0, f"{aid} can never be given"


def test_every_advice_id_used_exists_and_every_line_is_used():
    used = {a for k in CAUSE_KINDS for a in k.advice}
    for txt in VARIANTS.values():
        used.update(txt.advice)
    code = "\n".join(p.read_text(encoding="utf-8") for p in (SRC / "findings").glob("*.py")
                     if not p.name.startswith("advice"))     # the table's modules: not a finding giving a line
    used.update(re.findall(r'"([a-z_0-9]+\.[a-z_0-9.]+)"', code))
    used = {u for u in used if u in ADVICE or "." in u and not u.endswith((".py", ".json"))}
    missing = {u for u in used if u not in ADVICE and re.fullmatch(r"[a-z_0-9]+(\.[a-z_0-9]+)+", u)}
    assert not missing, missing
    assert not set(ADVICE) - used, f"advice lines no finding gives: {sorted(set(ADVICE) - used)}"


# ---------------------------------------------------------------------------------------------- GPU facts

@pytest.mark.parametrize("row,arch,types", [
    ({"name": "NVIDIA GeForce RTX 2080 Ti", "computeMajor": 7, "computeMinor": 5}, "Turing", {"FP16", "INT8"}),
    ({"name": "GeForce GTX 1650", "computeMajor": 7, "computeMinor": 5}, "Turing, no tensor cores", set()),
    ({"name": "GeForce GTX 1650"}, "Turing, no tensor cores", set()),
    ({"name": "TITAN RTX"}, "Turing", {"FP16", "INT8"}),
    ({"name": "Tesla V100-SXM2-16GB", "computeMajor": 7, "computeMinor": 0}, "Volta", {"FP16"}),
    ({"name": "NVIDIA A100-SXM4-80GB", "computeMajor": 8, "computeMinor": 0}, "Ampere", {"TF32", "BF16", "FP16"}),
    ({"name": "NVIDIA GeForce RTX 4060 Ti", "computeMajor": 8, "computeMinor": 9}, "Ada", {"FP8", "TF32"}),
    ({"name": "NVIDIA H100 80GB HBM3", "computeMajor": 9, "computeMinor": 0}, "Hopper", {"FP8", "BF16"}),
    ({"name": "NVIDIA B200", "computeMajor": 10, "computeMinor": 0}, "Blackwell", {"FP4", "FP6", "FP8"}),
    ({"name": "NVIDIA GeForce RTX 5090", "computeMajor": 12, "computeMinor": 0}, "Blackwell", {"FP4", "FP8"}),
    ({"name": "Tesla P100-PCIE-16GB", "computeMajor": 6, "computeMinor": 0}, "pre-Volta (Kepler/Maxwell/Pascal)",
     set()),
])
def test_gpu_facts_from_compute_capability_or_name(row, arch, types):
    f = gpu_fact(GpuInfo.of_row(row))
    assert f is not None and f.architecture == arch
    assert types <= set(f.tensor_core_types) and (types or not f.tensor_core_types)
    if arch.startswith("Turing"):
        assert "TF32" not in f.tensor_core_types and "BF16" not in f.tensor_core_types


@pytest.mark.parametrize("gpu,expected", [
    ("GeForce GTX 1650", (False, False)), ("NVIDIA GeForce GTX 1660 Ti", (False, False)),
    ("A100-SXM4-80GB", (True, True)), ("NVIDIA A100-SXM4-80GB", (True, True)),
    ("Tesla V100-SXM2-16GB", (True, False)), ("TITAN RTX", (True, False)), ("Tesla T4", (True, False)),
    ("Quadro RTX 5000", (True, False)), ("NVIDIA GeForce RTX 2080 Ti", (True, False)), ("TITAN V", (True, False)),
    ("NVIDIA RTX 5000 Ada Generation Laptop GPU", (True, True)), ("NVIDIA GeForce RTX 4060 Ti", (True, True)),
    ("NVIDIA GeForce RTX 3090", (True, True)), ("NVIDIA RTX A5000", (True, True)), ("NVIDIA A10G", (True, True)),
    ("NVIDIA A30", (True, True)), ("NVIDIA A40", (True, True)), ("NVIDIA L4", (True, True)),
    ("NVIDIA L40S", (True, True)), ("NVIDIA H100 80GB HBM3", (True, True)), ("NVIDIA H200", (True, True)),
    ("NVIDIA GH200 480GB", (True, True)), ("NVIDIA B200", (True, True)), ("NVIDIA GB200", (True, True)),
    ("NVIDIA GeForce RTX 5090", (True, True)), ("Tesla P100-PCIE-16GB", (False, False)),
    ("GeForce GTX 1080 Ti", (False, False)), ("Tesla K80", (False, False)), ("Quadro T1000", (False, False)),
    ("Tesla M60", (False, False)), ("Some Future GPU", (None, None)),
])
def test_gpu_facts_from_the_name_alone(gpu, expected):
    """Exports without compute capability (≤ 2022.4 often): (FP16 tensor cores, TF32) from the name."""
    f = gpu_fact(GpuInfo.of_row({"name": gpu}))
    assert f is not None
    got = (None, None) if f.source == "unknown" else ("FP16" in f.tensor_core_types, "TF32" in f.tensor_core_types)
    assert got == expected


def test_pooled_datatypes_follow_the_gpus_that_ran_kernels():
    """A machine with an idle A100 beside a Turing card that ran the kernels: the pooled facts are the Turing's
    (no TF32), but only when the export maps CUDA devices to GPUs; unmapped, every listed GPU counts (and where they
    differ the fact is unknown)."""
    from types import SimpleNamespace

    import numpy as np

    from nsys_llm_explainer.analyses.trace.facts import TraceFacts, _with_kernels

    class Kernels:
        def __init__(self, devices):
            self.device = np.array(devices)

        def __len__(self):
            return int(self.device.shape[0])

    note = "Device ids are physical GPU ids mapped through TARGET_INFO_CUDA_DEVICE (pid, cudaId → gpuId)."
    gpus = (gpu_fact(GpuInfo(id=0, name="NVIDIA A100-SXM4-80GB", computeMajor=8, computeMinor=0)),
            gpu_fact(GpuInfo(id=1, name="NVIDIA GeForce RTX 2080 Ti", computeMajor=7, computeMinor=5)))

    def facts(gs, devices, notes):
        marked = _with_kernels(gs, SimpleNamespace(kernels=Kernels(devices), notes=notes))
        return TraceFacts(marked, "inference", (), "", (), "", False, "", False, "", False, False, "", False, ())

    on = facts(gpus, [1, 1], [note])
    assert [g.ran_kernels for g in on.gpus] == [False, True]
    assert (on.supports("TF32"), on.supports("FP16")) == (False, True)
    a100 = facts(gpus, [0, 0], [note])
    assert [g.ran_kernels for g in a100.gpus] == [True, False] and a100.supports("TF32") is True
    off = facts(gpus, [0, 0], [])                  # unmapped: a CUDA id need not be a GPU id
    # every listed GPU counts, and they differ: TF32 is neither true nor false of "the GPU"; FP16 both take
    assert [g.ran_kernels for g in off.gpus] == [None, None]
    assert (off.supports("TF32"), off.supports("FP16")) == (None, True)
    one = facts(gpus[:1], [0], [])                 # one listed GPU: it ran them
    assert one.gpus[0].ran_kernels is True and one.supports("TF32") is True


def test_non_nvidia_adapters_are_not_gpus():
    assert gpu_fact(GpuInfo(name="Intel(R) Iris(R) Xe Graphics", computeMajor=0, computeMinor=0)) is None
    assert gpu_fact(GpuInfo.of_row({"name": "Microsoft Basic Render Driver", "computeMajor": 0})) is None
    unk = gpu_fact(GpuInfo.of_row({"name": "Some Future Accelerator"}))
    assert unk is not None and unk.source == "unknown" and unk.compute_capability is None


_CACHE: dict = {}


def _scenario(name, tmp_path_factory):
    if name not in _CACHE:
        facts, _, rep = scenario_report(name, tmp_path_factory)
        _CACHE[name] = (facts, rep)
    return _CACHE[name]


def _real(prefix):
    key = "real" + prefix
    if key not in _CACHE:
        d = next(p for p in sorted(SHARED_TRACES.iterdir()) if p.name.startswith(prefix + "_"))
        _CACHE[key] = real_report(d / "trace.sqlite")
    return _CACHE[key]


@pytest.mark.slow
def test_real_trace_facts():
    """12: GTX 1650 without compute capability in the export → no tensor cores; 24: the Intel and Microsoft
    adapters are not GPUs; 23: A100 (8.0) with TF32; 05: no TARGET_INFO_GPU → GPU facts unknown."""
    f12 = _real("12").facts
    assert [g.tensor_core_types for g in f12.gpus] == [()] and f12.advice_facts()["gpu_fp16_tensor_cores"] is False
    f24 = _real("24").facts
    assert len(f24.gpus) == 1 and f24.gpus[0].architecture == "Ada"
    f23 = _real("23").facts
    assert f23.advice_facts()["gpu_tf32"] is True and f23.workload == "inference" and f23.nvtx
    f10 = _real("10").facts                     # TITAN RTX, no compute capability: Turing by name
    assert f10.gpus[0].source == "name" and f10.advice_facts()["gpu_tf32"] is False
    assert f10.advice_facts()["gpu_fp16_tensor_cores"] is True
    f14 = _real("14").facts                     # 8 × V100 (7.0): FP16 only
    assert len(f14.gpus) == 8 and {g.architecture for g in f14.gpus} == {"Volta"}
    f05 = _real("05").facts
    assert f05.gpus == () and f05.advice_facts()["gpu_tf32"] is None and f05.workload == "training"
    d = _real("23").to_dict()["facts"]
    assert d["gpus"][0]["compute_capability"] == "8.0" and d["advice_facts"]["gpu_bf16"] is True


# ---------------------------------------------------------------------------------------------- advice on traces

def _advice(rep, category):
    return " ".join(a for f in rep.findings if f.category == category for a in f.recommendation)


def test_fp32_gemm_on_turing_advises_fp16_never_tf32(tmp_path_factory):
    _, rep = _scenario("fp32_gemm_turing", tmp_path_factory)
    assert rep.findings[0].category == "fp32_gemm"
    text = _advice(rep, "fp32_gemm")
    assert "torch.float16" in text
    assert not re.search(r"allow_tf32|set_float32_matmul_precision|bfloat16", text), text


def test_fp32_gemm_on_ampere_advises_tf32(tmp_path_factory):
    _, rep = _scenario("fp32_gemm", tmp_path_factory)
    text = _advice(rep, "fp32_gemm")
    assert "allow_tf32" in text and "bfloat16" in text and "torch.float16" not in text


def test_no_precision_claim_without_tensor_cores(tmp_path_factory):
    _, rep = _scenario("fp32_gemm_no_tensor_cores", tmp_path_factory)
    assert rep.findings[0].category == "gpu_bound"
    assert not any(f.category == "fp32_gemm" for f in rep.findings)


def test_training_nvtx_coverage_names_the_autograd_thread(tmp_path_factory):
    """training_step: backward kernels launched by ``pt_autograd_0`` (no NVTX range on it); the coverage
    finding names that thread and never gives serving (prefill/decode) advice."""
    _, rep = _scenario("training_step", tmp_path_factory)
    f = next(f for f in rep.findings if f.category == "nvtx_coverage")
    assert "pt_autograd" in f.title
    text = " ".join(f.recommendation)
    assert "autograd" in text and not re.search(r"prefill|decode|vLLM|SGLang", text)
    rows = rep.attribution.uncovered_by_thread
    assert rows[0].thread_name.startswith("pt_autograd") and rows[0].thread_ranges == 0


def test_compiled_model_is_never_told_to_adopt_torch_compile(tmp_path_factory):
    """compiled_elementwise: Inductor's pointwise kernels are ~29 % of kernel time (planted) but already fused:
    no "unfused elementwise" claim, and no advice to adopt torch.compile anywhere; the fact says why."""
    facts, rep = _scenario("compiled_elementwise", tmp_path_factory)
    assert rep.facts.torch_compile and "Inductor" in rep.facts.torch_compile_evidence
    assert not any(f.category == "elementwise_fusion" for f in rep.findings)
    hit = rep.traits.traits["inductor_pointwise"]
    assert hit.share_pct == pytest.approx(facts["pointwise_share_pct"], abs=0.01) and hit.share_pct > 25
    for f in rep.findings:
        for a in f.recommendation:
            assert not re.search(r"In PyTorch, `torch\.compile`|`torch\.compile` also fuses", a), (f.id, a)
    _, lb = _scenario("launch_bound", tmp_path_factory)        # its step has an Inductor kernel too
    text = _advice(lb, "launch_overhead")
    assert "reduce-overhead" in text and "graph breaks" in text and "also fuses small kernels" not in text


def test_no_serving_advice_on_training_traces(tmp_path_factory):
    for rep in (_scenario("training_step", tmp_path_factory)[1], _real("05"), _real("06")):
        for f in rep.findings:
            for a in f.recommendation:
                assert not re.search(r"prefill|decode|vLLM|SGLang|TensorRT-LLM|--enforce-eager", a), (f.id, a)


# ---------------------------------------------------------------------------------------------- one claim per cause

def test_named_range_outranks_the_launch_bound_composite(tmp_path_factory):
    """The weight-reading NVTX range holds most idle (planted); the launch-bound pattern holds too. The range's
    finding is first and claims the idle-cause table's share exactly; the composite claims only launch calls
    and host CPU between launches, never the range's ns."""
    facts, rep = _scenario("nvtx_load_launch_bound", tmp_path_factory)
    top = rep.findings[0]
    assert (top.category, top.cause) == ("host_range", ("nvtx", "read_layer_N_weights"))
    (dev,) = rep.idle_causes.devices
    table_ns = dev.ns_of("nvtx", "read_layer_N_weights")
    assert table_ns == facts["idle_by_cause_ns"]["nvtx"]["read_layer_N_weights"]
    assert top.checks[0].metric == "cause_pct_of_window"       # the table's nvtx rows, all ranges
    assert top.checks[0].observed == pytest.approx(100.0 * dev.ns_of("nvtx") / dev.window_ns)
    # the title states what the finding claims: the range's share, capped by the kind's claimed part
    claimed = next((c.observed for c in top.checks if c.metric == "claimed_pct_of_window"), None)
    own = min(100.0 * table_ns / dev.window_ns, claimed if claimed is not None else 100.0)
    assert f"({own:.1f} % of the window, " in top.title and len(top.title) <= 120
    if claimed is not None:    # the table's share is stated in the evidence
        assert any(f"charges {100.0 * dev.ns_of('nvtx') / dev.window_ns:.1f} % of device" in e for e in top.evidence)
    lb = next(f for f in rep.findings if f.category == "launch_overhead")
    assert lb.time_at_stake_ns <= dev.ns_of("launch") + dev.ns_of("host_cpu") + dev.ns_of("nvtx", "decode_step")
    assert top.time_at_stake_ns + lb.time_at_stake_ns <= dev.idle_ns
    assert top.time_at_stake_ns > lb.time_at_stake_ns


@pytest.mark.slow
def test_split_claim_names_the_table_and_who_holds_the_rest():
    """14 (nvFuser, launch-bound): NVTX idle inside ranges that enclose the launches is launch overhead; the
    ranges that launch nothing (`return`, `allocOutput`, …) keep their own finding, whose title quotes the part it
    claims; its evidence states the table's share and names the launch-bound finding for the rest; launch overhead
    stays first."""
    rep = _real("14")
    assert rep.findings[0].category == "launch_overhead"
    f = next(f for f in rep.findings if f.category == "host_range")
    (d,) = [x for x in rep.idle_causes.devices if x.device_id == f.device_id]
    table = f"charges {100.0 * d.ns_of('nvtx') / d.window_ns:.1f} % of device {d.device_id}'s window to `nvtx`"
    line = next(e for e in f.evidence if table in e)     # the table's share and who holds the rest: evidence
    assert "the launch-bound finding" in line and "the launch-bound finding" not in f.title
    assert line.endswith("; the launch-bound finding and the window's edges account for the rest."), line
    claimed = next(c for c in f.checks if c.metric == "claimed_pct_of_window")
    assert f"{claimed.observed:.1f} % of the window" in f.title or f"{claimed.observed:.1f} %" in f.title
    assert f.cause[1] not in rep.attribution.launch_range_details()
    lb = rep.findings[0]
    assert lb.time_at_stake_ns + f.time_at_stake_ns <= d.idle_ns


def _idle_claims_fit(rep):
    idle = sum(d.idle_ns for d in rep.idle_causes.devices) if rep.idle_causes.available else 0
    claims = [f for f in rep.findings if f.cause is not None]
    assert sum(f.time_at_stake_ns for f in claims) <= idle, [(f.id, f.time_at_stake_ns) for f in claims]
    per_kind: dict = {}
    for f in claims:
        if f.cause[0] in KINDS:      # composites (launch overhead, per-step sync) span several kinds
            per_kind[f.cause[0]] = per_kind.get(f.cause[0], 0) + f.time_at_stake_ns
    for kind, ns in per_kind.items():
        assert ns <= sum(d.ns_of(kind) for d in rep.idle_causes.devices), kind


def _titles_quote_the_table(rep):
    """Each idle-kind finding's title quotes the share it claims: the idle-cause table's row (its kind's or its
    detail's on the finding's device, one decimal), or — when a more specific finding or the window's edges hold part
    of the kind — its claimed part (``claimed_pct_of_window``, capped by its detail's row), with the table's share in
    an evidence line."""
    by_dev = {d.device_id: d for d in rep.idle_causes.devices} if rep.idle_causes.available else {}
    for f in rep.findings:
        if f.cause is None or f.cause[0] not in KINDS or f.category == "one_time":
            continue
        d = by_dev[f.device_id]
        kind, detail = f.cause
        shares = {f"{100.0 * d.ns_of(kind) / d.window_ns:.1f} %",
                  f"{100.0 * d.ns_of(kind, detail) / d.window_ns:.1f} %"}
        claimed = [c.observed for c in f.checks if c.metric == "claimed_pct_of_window"]
        if claimed:   # the title states what the finding claims; the table's share is evidence
            shares = {f"{min(claimed[0], 100.0 * d.ns_of(kind, detail) / d.window_ns):.1f} %"}
            if "largest in the loop" in f.title:   # named after its loop detail: the kind's claimed share
                shares = {f"{claimed[0]:.1f} % of the window"}
            table = f"charges {100.0 * d.ns_of(kind) / d.window_ns:.1f} % of device {d.device_id}'s window"
            assert any(table in e for e in f.evidence), (f.evidence, table)
        assert any(x in f.title for x in shares), (f.title, shares)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_idle_findings_never_claim_more_than_idle_scenarios(name, tmp_path_factory):
    rep = _scenario(name, tmp_path_factory)[1]
    _idle_claims_fit(rep)
    _titles_quote_the_table(rep)


@pytest.mark.slow
@pytest.mark.parametrize("prefix", ["01", "03", "05", "06", "08", "10", "12", "14", "16", "23", "24"])
def test_idle_findings_never_claim_more_than_idle_real(prefix):
    _idle_claims_fit(_real(prefix))
    _titles_quote_the_table(_real(prefix))


# ---------------------------------------------------------------------------------------------- window edges

def test_bursty_warmup_is_cut_to_the_bin(tmp_path_factory):
    """40 warm-up bursts closer than the hole tolerance, then a > 99 % busy loop: the window starts at the
    loop's first kernel exactly (planted), the kept window is > 99 % busy and the cut part's busy % is stated."""
    facts, rep = _scenario("bursty_warmup", tmp_path_factory)
    w = rep.window
    assert w.method == "auto" and w.start_ns == facts["steady_start_ns"]
    assert rep.headline.steady_busy_pct == pytest.approx(facts["steady_busy_pct"], abs=0.01)
    warm = facts["warmup_busy_ns"] / (facts["steady_start_ns"] - w.full_start_ns) * 100
    assert f"GPU busy {round(warm, 2)}%" in w.reason
    assert not any(f.severity in ("high", "medium") and f.category.startswith("host") for f in rep.findings)
