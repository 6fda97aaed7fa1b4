"""The software stack a trace ran, read from the names of its kernels, NVTX ranges, processes and threads: the
first stack rule with evidence wins (docs/FINDINGS.md, "Kernel traits, workload and stack")."""

from __future__ import annotations

import re
from typing import Dict, List, Optional, Sequence, Tuple

from ...config.patterns import match_text
from ...model.names import short

_I = re.IGNORECASE
#: XLA's generated fusion kernels (``loop_add_fusion``, ``input_reduce_fusion_1``, ``fusion_12``, ``wrapped_convert``):
#: their names never say forward or backward (the generic category preset's XLA rule is this regex)
XLA_FUSION = r"^(?:(?:loop|input)_[a-z0-9_]*)?fusion(?:[._]\d+)*$|^wrapped_[a-z0-9_]+$"
#: stacks whose kernel names would show a backward pass (PyTorch's autograd) or that only serve inference: an XLA
#: fusion beside them does not make the workload unknown
ONNXRUNTIME = "onnxruntime"
NAMED_STACKS = ("vllm", "sglang", "trtllm", "tensorrt", "pytorch", ONNXRUNTIME, ONNXRUNTIME + " + tensorrt")
#: TensorRT's own kernels (`trt_…`, `…_execute_kernel_trt`)
TRT_KERNEL = r"(?<![a-z])trt_|_trt(?![a-z])"
# (stack, {source: regex}); sources: kernel, nvtx, process, thread. The first stack with evidence wins.
_SRC = ("kernel", "nvtx", "process", "thread")
_STACK_RULES: List[Tuple[str, Dict[str, Tuple[str, int]]]] = [   # (stack, {source: (regex, flags)})
    # ONNX Runtime's CUDA execution provider names its kernels in its namespace (`onnxruntime::cuda::…`,
    # `onnxruntime::contrib::cuda::…`): first, so that a TensorRT kernel its TensorRT EP runs, or an attention kernel
    # it took from TensorRT-LLM, does not make the trace a TensorRT or TensorRT-LLM one (:data:`ORT_TENSORRT`)
    (ONNXRUNTIME, {"kernel": (r"onnxruntime", _I), "nvtx": (r"onnxruntime", _I), "process": (r"onnxruntime", _I),
                   "thread": (r"onnxruntime", _I)}),
    ("vllm", {"kernel": (r"vllm|paged_attention_v\d|reshape_and_cache", _I), "nvtx": (r"vllm", _I),
              "process": (r"vllm", _I), "thread": (r"vllm", _I)}),
    ("sglang", {src: (r"sglang|sgl_kernel", _I) for src in _SRC}),
    ("trtllm", {**{src: (r"tensorrt_llm|trtllm|tllm", _I) for src in _SRC},
                "kernel": (r"tensorrt_llm|trtllm|tllm|xqa|mmha", _I)}),
    # TensorRT's own kernels carry `trt` (`trt_…`, `…_execute_kernel_trt`); an `sm80_xmma_…_execute…` name alone is
    # no evidence: cuBLAS and cuDNN name their kernels so too (`…_execute_kernel__5x_cublas`), under any framework
    ("tensorrt", {"kernel": (TRT_KERNEL, _I),
                  "nvtx": (r"(?i:tensorrt|executioncontext|^onnx::)|^(?:/[\w.:-]+)+/[A-Z][A-Za-z]*(?:_\d+)?$",
                           0),
                  "process": (r"trtexec|tensorrt", _I)}),
    ("tensorflow", {"kernel": (r"tensorflow|eigen::", _I), "nvtx": (r"tensorflow", _I),
                    "process": (r"tensorflow", _I), "thread": (r"tensorflow", _I)}),
    ("jax", {src: (r"jax|xla", _I) for src in _SRC}),
    # XLA's autotuner and the `tf_…` threads of XLA's runtime: JAX runs them too, so only after the JAX rule
    ("tensorflow", {"kernel": (r"redzone_checker", _I), "thread": (r"^tf_", _I)}),
    # `triton_` (Inductor's and user Triton kernels) but not XLA's Triton fusions (`triton_gemm_…`, `triton_softmax_…`)
    ("pytorch", {"kernel": (r"at::native|aten::|c10::|triton_(?!gemm|softmax)|torch", _I),
                 "nvtx": (r"aten::|torch", _I), "process": (r"torch", _I), "thread": (r"^pt_|autograd|torch", _I)}),
    # XLA-compiled kernels with no other evidence: XLA's fusions (JAX's compiler on GPU; TensorFlow's XLA traces carry
    # the `tensorflow` / `tf_` evidence above)
    ("jax", {"kernel": (rf"{XLA_FUSION}|^triton_(?:gemm|softmax)_", _I)}),
]
#: ONNX Runtime with TensorRT's own kernels (`trt_…`, `…_trt`) or NVTX ranges (`ExecutionContext…`, `TensorRT…`)
#: beside its kernels: its TensorRT execution provider (or a TensorRT engine served beside it) runs part of the
#: model. Not the TensorRT rule's ONNX-node NVTX names (`onnx::…`, `/model/layers.0/MatMul`): ONNX Runtime's own
#: ranges carry them too.
ORT_TENSORRT = ONNXRUNTIME + " + tensorrt"
_TRT_UNDER_ORT: Dict[str, Tuple[str, re.Pattern[str]]] = {
    src: (rx, re.compile(rx, _I)) for src, rx in (("kernel", TRT_KERNEL),
                                                  ("nvtx", r"tensorrt|executioncontext"))}
#: (stack, {source: (the rule as shown, compiled)})
_STACKS: List[Tuple[str, Dict[str, Tuple[str, re.Pattern[str]]]]] = [
    (s, {src: (rx, re.compile(rx, flags)) for src, (rx, flags) in d.items()}) for s, d in _STACK_RULES]
#: serving engines: they run inference (generation) only and no backward pass, so their kernels beside training
#: evidence are a generation phase in the same job (an RL post-training loop: the workload ``training with generation``)
SERVING_ENGINES: Dict[str, str] = {"vllm": "vLLM", "sglang": "SGLang", "trtllm": "TensorRT-LLM"}
#: the stack beside a serving engine when the workload is ``training with generation``: the framework that runs
#: the training (the serving engine runs no backward pass)
TRAINING_STACK = "pytorch"


def detect_stack(kernel_names: Sequence[str], nvtx_names: Sequence[str] = (), process_names: Sequence[str] = (),
                 thread_names: Sequence[str] = ()) -> Tuple[str, Tuple[str, ...]]:
    """First stack of ``_STACKS`` with evidence; evidence = one example per source that matched."""
    sources = dict(zip(_SRC, (kernel_names, nvtx_names, process_names, thread_names)))
    for stack, rxs in _STACKS:
        ev = _evidence(rxs, sources)
        if ev and stack == ONNXRUNTIME:     # its TensorRT execution provider's kernels too: both are named
            trt = _evidence(_TRT_UNDER_ORT, sources)
            return (ORT_TENSORRT, tuple(ev + trt)) if trt else (stack, tuple(ev))
        if ev:
            return stack, tuple(ev)
    return "", ()


def _rules(stack: str) -> Dict[str, Tuple[str, re.Pattern[str]]]:
    """The first rule set of ``stack`` in :data:`_STACKS`."""
    return next(rxs for s, rxs in _STACKS if s == stack)


def engine_kernels(kernel_names: Sequence[str]) -> Optional[Tuple[str, str]]:
    """(serving engine, evidence line) for the first serving engine (:data:`SERVING_ENGINES`, in stack-rule order)
    whose kernel rule names one of ``kernel_names``; None when none does."""
    for stack, what in SERVING_ENGINES.items():
        rx = _rules(stack)["kernel"][1]
        hits = [str(n) for n in kernel_names if n and rx.search(match_text(n))]
        if hits:
            return stack, (f"{len(hits)} {what} kernel name(s), e.g. '{short(hits[0], 80)}' (a serving engine: it "
                           "generates and runs no backward pass)")
    return None


def stack_beside_engine(stack: str, kernel_names: Sequence[str], nvtx_names: Sequence[str] = (),
                        process_names: Sequence[str] = (), thread_names: Sequence[str] = ()
                        ) -> Optional[Tuple[str, List[str]]]:
    """For a serving-engine ``stack`` (:data:`SERVING_ENGINES`): ``engine + pytorch`` and PyTorch's evidence when the
    PyTorch rule matches a name that the engine's own rule does not (vLLM's kernels are named with ``c10::`` types:
    those are the engine's evidence, not a second stack's); None otherwise."""
    if stack not in SERVING_ENGINES:
        return None
    own = _rules(stack)
    named = zip(_SRC, (kernel_names, nvtx_names, process_names, thread_names))
    sources: Dict[str, Sequence[str]] = {
        src: [n for n in names if not (src in own and n and own[src][1].search(match_text(n)))] for src, names in named}
    ev = _evidence(_rules(TRAINING_STACK), sources)
    return (f"{stack} + {TRAINING_STACK}", ev) if ev else None


def _evidence(rxs: Dict[str, Tuple[str, re.Pattern[str]]], sources: Dict[str, Sequence[str]]) -> List[str]:
    """One line per source with a name that matches its rule: the count and one example."""
    ev: List[str] = []
    for src, (shown, rx) in rxs.items():
        hits = [str(n) for n in sources[src] if n and rx.search(match_text(n))]
        if hits:
            ev.append(f"{len(hits)} {src} name(s) match /{shown}/, e.g. '{short(hits[0], 80)}'")
    return ev
