"""Facts about the trace, derived once, that advice depends on (``report.json`` ``facts``; docs/FINDINGS.md).

* **GPUs** — per NVIDIA GPU of ``TARGET_INFO_GPU``: the architecture and the datatypes its tensor cores
  take, from the compute capability (``computeMajor.computeMinor``) when the export records it, else from the
  GPU name. Tensor-core datatypes by compute capability, from NVIDIA's CUDA C++ Programming Guide ("Warp
  Matrix Functions": FP16 from 7.0, INT8 from 7.2, BF16 and TF32 from 8.0) and the architecture whitepapers
  (FP8 on Ada 8.9 and Hopper 9.0; FP4/FP6 on Blackwell 10.x/12.x): :data:`ARCHITECTURES`. Turing parts
  without tensor cores (GeForce GTX 16xx, MX, the TU117 Quadro T-series) report compute capability 7.5 too, so
  a name that says so overrides it. GPUs with compute capability 0 (an integrated non-NVIDIA adapter) and
  names that are not NVIDIA's are left out.
* **Per datatype, pooled** (``gpu_tf32`` …): True when every listed GPU supports it, False when one does
  not, None when no GPU is known.
* **workload** / **stack** — from :mod:`kernel_traits` (kernel, NVTX, process and thread names), with the
  evidence; **framework** — the framework under the stack (vLLM and SGLang run on PyTorch; TensorRT-LLM can run
  either its PyTorch or its TensorRT backend, so it names none).
* **cuda_graphs** — a CUDA graph launch call or a kernel executed as a graph node exists.
* **unified_memory** — a Unified (managed-memory) copy kind (11–13) or a UM page-fault row exists.
* **nvtx** — the trace holds NVTX ranges; ``nvtx_threads``: the threads that opened them (name, ranges).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any, Dict, List, Mapping, Optional, Tuple

import numpy as np

from ..model.trace import TraceModel
from .graphs import GraphResult
from .kernel_traits import KernelTraitsResult
from .unified_memory import UM_COPY_KINDS

#: compute-capability major (and minor where it matters) → (architecture, tensor-core datatypes)
ARCHITECTURES: Tuple[Tuple[Tuple[int, int], Tuple[int, int], str, Tuple[str, ...]], ...] = (
    # (first cc, last cc) inclusive, architecture, datatypes
    ((1, 0), (6, 9), "pre-Volta (Kepler/Maxwell/Pascal)", ()),
    ((7, 0), (7, 1), "Volta", ("FP16",)),
    ((7, 2), (7, 4), "Volta (Xavier)", ("FP16", "INT8")),
    ((7, 5), (7, 9), "Turing", ("FP16", "INT8", "INT4")),
    ((8, 0), (8, 8), "Ampere", ("FP16", "BF16", "TF32", "INT8")),
    ((8, 9), (8, 9), "Ada", ("FP16", "BF16", "TF32", "INT8", "FP8")),
    ((9, 0), (9, 9), "Hopper", ("FP16", "BF16", "TF32", "INT8", "FP8")),
    ((10, 0), (12, 9), "Blackwell", ("FP16", "BF16", "TF32", "INT8", "FP8", "FP6", "FP4")),
)
#: GPU names whose compute capability says 7.5 but that have no tensor cores (TU116/TU117)
_NO_TENSOR_CORES = re.compile(r"gtx 16\d0|\bt(?:400|550|600|1000|1200|2000)\b|\bmx\d{3}\b", re.I)
#: name → compute capability, for exports that do not record it (first match wins)
_NAME_CC: Tuple[Tuple[re.Pattern[str], Tuple[int, int]], ...] = tuple((re.compile(rx, re.I), cc) for rx, cc in (
    (r"rtx 50[5-9]0|rtx pro \d000 blackwell", (12, 0)), (r"\bg?b[123]00\b|blackwell", (10, 0)),
    (r"\bg?h[12]00\b|\bh800\b|\bh20\b|hopper", (9, 0)),
    (r"\bada\b|rtx 40\d0|\bl4\b|\bl40s?\b|\bl20\b", (8, 9)),
    (r"\ba100\b|\ba800\b|\ba30\b", (8, 0)), (r"orin", (8, 7)),
    (r"rtx 30\d0|\ba10g?\b|\ba16\b|\ba2\b|\ba40\b|rtx a\d{3,4}|ampere", (8, 6)),
    (r"titan rtx|quadro rtx|rtx 20\d0|\bt4\b|gtx 16\d0|\bt(?:400|550|600|1000|1200|2000)\b|turing", (7, 5)),
    (r"xavier", (7, 2)), (r"v100|titan v\b|volta", (7, 0)),
    (r"p100|p40\b|p4\b|gtx 10\d0|titan x", (6, 0)), (r"gtx 9\d0|m40|m60|maxwell", (5, 0)),
    (r"k80|k40|kepler", (3, 7)),
))
DATATYPES = ("FP16", "BF16", "TF32", "INT8", "FP8")
_FRAMEWORK = {"vllm": "pytorch", "sglang": "pytorch", "pytorch": "pytorch", "tensorflow": "tensorflow",
              "jax": "jax", "tensorrt": "tensorrt", "trtllm": ""}


@dataclass(frozen=True)
class GpuFact:
    """One NVIDIA GPU: ``compute_capability`` "major.minor" (None when neither recorded nor known from the
    name), ``architecture``, ``tensor_core_types`` (empty: no tensor cores), ``source`` of the capability
    ("compute capability", "name", "unknown")."""

    id: Optional[int]
    name: str
    compute_capability: Optional[str]
    architecture: str
    tensor_core_types: Tuple[str, ...]
    source: str


@dataclass(frozen=True)
class NvtxThread:
    """A thread that opened NVTX ranges: its serialized globalTid, name and number of ranges."""

    gtid: int
    name: str
    ranges: int


@dataclass(frozen=True)
class TraceFacts:
    """The facts advice may depend on (module docstring); :meth:`advice_facts` is the flat mapping
    :func:`findings.advice.advise` reads."""

    gpus: Tuple[GpuFact, ...]
    workload: str
    workload_evidence: Tuple[str, ...]
    stack: str
    stack_evidence: Tuple[str, ...]
    framework: str
    cuda_graphs: bool
    cuda_graphs_evidence: str
    unified_memory: bool
    unified_memory_evidence: str
    nvtx: bool
    nvtx_threads: Tuple[NvtxThread, ...]

    def supports(self, dtype: str) -> Optional[bool]:
        """Whether every known GPU's tensor cores take ``dtype`` (None: no GPU known)."""
        known = [g for g in self.gpus if g.source != "unknown"]
        if not known:
            return None
        return all(dtype in g.tensor_core_types for g in known)

    def advice_facts(self) -> Dict[str, Any]:
        return {"workload": self.workload, "stack": self.stack, "framework": self.framework,
                "gpu_fp16_tensor_cores": self.supports("FP16"), "gpu_tf32": self.supports("TF32"),
                "gpu_bf16": self.supports("BF16"), "gpu_fp8": self.supports("FP8"),
                "cuda_graphs": self.cuda_graphs, "unified_memory": self.unified_memory, "nvtx": self.nvtx}

    def to_dict(self) -> Dict[str, Any]:
        d = asdict(self)
        d["advice_facts"] = self.advice_facts()
        return d


def _cc(g: Mapping[str, object]) -> Optional[Tuple[int, int]]:
    try:
        major, minor = int(g.get("computeMajor")), int(g.get("computeMinor"))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return (major, minor) if major > 0 else None


def gpu_fact(g: Mapping[str, object]) -> Optional[GpuFact]:
    """The facts of one ``TARGET_INFO_GPU`` row; None for a non-NVIDIA adapter (cc 0, or a name from another
    vendor)."""
    name = str(g.get("name") or "")
    major = g.get("computeMajor")
    if major is not None and str(major) == "0" or re.search(r"intel|amd|radeon|microsoft|basic render", name, re.I):
        return None
    gid = g.get("id")
    cc, source = _cc(g), "compute capability"
    if cc is None:
        cc = next((c for rx, c in _NAME_CC if rx.search(name)), None)
        source = "name" if cc is not None else "unknown"
    if cc is None:
        return GpuFact(int(gid) if isinstance(gid, int) else None, name, None, "unknown", (), "unknown")
    arch, types = "unknown", ()
    for lo, hi, a, t in ARCHITECTURES:
        if lo <= cc <= hi:
            arch, types = a, t
    if _NO_TENSOR_CORES.search(name):
        arch, types = arch + " (no tensor cores)", ()
    return GpuFact(int(gid) if isinstance(gid, int) else None, name, f"{cc[0]}.{cc[1]}", arch, tuple(types), source)


def analyze_facts(model: TraceModel, traits: KernelTraitsResult, graphs: GraphResult) -> TraceFacts:
    gpus = tuple(f for f in (gpu_fact(g) for g in model.info.gpus) if f is not None)
    graph_ev = ""
    uses_graphs = False
    if graphs.available and (graphs.graph_launch_count or graphs.graph_kernel_count):
        uses_graphs = True
        graph_ev = (f"{graphs.graph_launch_count} graph launch call(s), {graphs.graph_kernel_count} kernel(s) "
                    "executed as graph nodes")
    um, um_ev = _unified_memory(model)
    threads: List[NvtxThread] = []
    nv = model.nvtx
    if nv is not None and len(nv):
        g, n = np.unique(nv.gtid, return_counts=True)
        for gt, cnt in sorted(zip(g.tolist(), n.tolist()), key=lambda x: (-x[1], x[0])):
            threads.append(NvtxThread(int(gt), model.thread_names.get(int(gt), ""), int(cnt)))
    stack = traits.stack
    return TraceFacts(gpus, traits.workload, traits.workload_evidence, stack, traits.stack_evidence,
                      _FRAMEWORK.get(stack, ""), uses_graphs, graph_ev, um, um_ev, bool(threads), tuple(threads))


def _unified_memory(model: TraceModel) -> Tuple[bool, str]:
    parts: List[str] = []
    mc = model.memcpy
    if mc is not None and len(mc) and "copy_kind" in mc.cols:
        n = int(np.isin(np.asarray(mc["copy_kind"]), UM_COPY_KINDS).sum())
        if n:
            parts.append(f"{n:,} Unified-Memory migration(s) (copy kinds 11–13)")
    for attr, what in (("um_gpu_faults", "GPU page-fault row(s)"), ("um_cpu_faults", "CPU page-fault row(s)")):
        ops = getattr(model, attr, None)
        if ops is not None and len(ops):
            parts.append(f"{len(ops):,} UM {what}")
    return bool(parts), "; ".join(parts)
