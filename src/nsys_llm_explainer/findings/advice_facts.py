"""What an advice line may require: every trace fact advice reads, with the values it can take (:data:`FACT_DOMAINS`),
and one line with the facts it requires (docs/FINDINGS.md, "Advice and the facts it needs")."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Mapping, Optional, Tuple

FactValue = Optional[object]

#: every fact an advice line may read, and the values it can take (``None``: unknown)
FACT_DOMAINS: Dict[str, Tuple[FactValue, ...]] = {
    # "training with generation": both phases ran (an RL job); no phase-specific line is given (docs/FINDINGS.md)
    "workload": ("training", "inference", "unknown", "training with generation"),
    "stack": ("vllm", "sglang", "trtllm", "tensorrt", "tensorflow", "jax", "pytorch", "onnxruntime",
              "onnxruntime + tensorrt", "vllm + pytorch", "sglang + pytorch", "trtllm + pytorch", ""),
    "framework": ("pytorch", "tensorflow", "jax", "tensorrt", "onnxruntime", ""),
    "gpu_fp16_tensor_cores": (True, False, None),
    "gpu_tf32": (True, False, None),
    "gpu_bf16": (True, False, None),
    "gpu_fp8": (True, False, None),
    "cuda_graphs": (True, False),
    "torch_compile": (True, False),
    "cpu_samples": (True, False),
    "unified_memory": (True, False),
    "nvtx": (True, False),
    "os_runtime": (True, False),
    # copies in the analysis window (analyses/trace/facts.py)
    "copies_d2d": (True, False),
    "copies_host": (True, False),
    "host_copies_pageable": (True, False, None),
    "copies_overlap_kernels": (True, False, None),
    "copies_async_side_stream": (True, False, None),
    # the gaps' host thread is sampled elsewhere but never inside these gaps (findings/waits.sampled_facts)
    "host_thread_off_cpu": (True, False),
    # the trace runs custom (non-NCCL) all-reduce kernels (analyses/comms/nccl.py); set by findings/comm_exposed.py
    # only (not in the trace-level advice_facts)
    "custom_allreduce": (True, False),
    # the trace runs TransformerEngine kernels (kernel trait `transformer_engine`); set by findings/comm_exposed.py
    # only
    "transformer_engine": (True, False),
    # the FP32 finding's own kernels (findings/kernels.py): FP32 SIMT GEMMs / convolutions among them
    "fp32_simt_gemm": (True, False),
    "fp32_simt_conv": (True, False),
    # the ``copy`` idle finding's own copies average more than 1 MiB (findings/idle_copy.copy_facts; set there only)
    "copies_large": (True, False, None),
    # the ``copy`` idle finding's own device-to-device / peer copies average more than 1 MiB (None: none, or bytes not
    # recorded; findings/idle_copy.copy_facts; set there only)
    "d2d_copies_large": (True, False, None),
    # the ``copy`` idle finding's host copies of one direction ran with the GPU idle over twice as long as its
    # device's kernels ran (findings/idle_copy.outlast_kernels; set there only: None elsewhere)
    "copies_outlast_kernels": (True, False, None),
    # the queued-latency finding's GPU takes programmatic dependent launch (compute capability ≥ 9.0; None: not known,
    # or the GPUs differ; TraceFacts.supports_pdl, set by findings/idle.py only)
    "gpu_pdl": (True, False, None),
    # the processes that made the CUDA calls are native programs (TraceFacts.native_host), not a Python interpreter
    # (False: TraceFacts.python_host; None: not known, an unnamed process); set by findings/idle.py only
    "native_host": (True, False, None),
    # the ``copy`` idle finding's device idles ≥ 5 % of its window with the host inside asynchronous copy calls and no
    # copy running, and its copies average at most 1 MiB (None: bytes not recorded; findings/idle_copy.copy_calls_pace;
    # set there only)
    "copy_calls_pace": (True, False, None),
    # the Unified Memory finding's window has user-prefetch migrations (``cudaMemPrefetchAsync``, migration cause
    # "user prefetch"; None: the export records no causes); set by findings/unified_memory.py only
    "um_user_prefetch": (True, False, None),
    # the copy-path finding's GPU has one copy engine (``asyncEngines`` 1; "some": the device may be a GPU with one or
    # one with more — the GPUs differ and the export does not tie the device to one; None: not recorded;
    # TraceFacts.one_copy_engine), set by findings/copy_path.py only
    "gpu_one_copy_engine": (True, False, None, "some"),
    # the recording was already bounded inside the session: a start delay, a start trigger or profiler start/stop
    # calls (SessionSpan.bounded_by); set by findings/run.capture_rule only
    "capture_bounded": (True, False),
}

PT = ("pytorch",)
PT_OR_UNKNOWN = ("pytorch", "")


@dataclass(frozen=True)
class Advice:
    """One recommendation line and the facts it requires (fact → allowed values)."""

    id: str
    text: str
    requires: Mapping[str, Tuple[FactValue, ...]] = field(default_factory=dict)

    def allowed(self, facts: Mapping[str, FactValue]) -> bool:
        """True when no fact this line names contradicts it (its value is among the allowed ones)."""
        assert set(self.requires) <= set(FACT_DOMAINS), self.requires
        return all(facts.get(fact) in ok for fact, ok in self.requires.items())


def line(id: str, text: str, **requires: Tuple[FactValue, ...]) -> Advice:
    return Advice(id, text, dict(requires))
