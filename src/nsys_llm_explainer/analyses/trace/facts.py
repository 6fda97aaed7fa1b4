"""Facts about the trace, derived once, that advice depends on (``report.json`` ``facts``): the GPUs' tensor-core
datatypes (:data:`ARCHITECTURES`), workload, stack and framework, CUDA graphs, ``torch.compile``, CPU samples,
Unified Memory, NVTX, OS-runtime calls and the copies. Definitions: docs/FINDINGS.md, "Facts".
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any, ClassVar, Dict, List, Optional, Tuple, Union

import numpy as np

from ...jsonable import NONE_OMITTED, NOT_IN_JSON, FieldsJson
from ...model.info import GpuInfo
from ...model.samples import GROUP_KEYS
from ...model.trace import TraceModel
from ..api.graphs import GraphResult
from ..kernels.traits import KernelTraitsResult
from ..memory.copy_engines import (
    HOST_PATHS,
    CopyEnginesResult,
    async_side_share,
    copies_async_side_stream,
    host_copies_pageable,
)
from ..memory.unified import um_rows

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
    (r"rtx 50[5-9]0|rtx pro \d{4} blackwell", (12, 0)), (r"\bg?b300\b", (10, 3)), (r"\bg?b[12]00\b|blackwell", (10, 0)),
    (r"\bg?h[12]00\b|\bh800\b|\bh20\b|hopper", (9, 0)),
    (r"\bada\b|rtx 40\d0|\bl4\b|\bl40s?\b|\bl20\b", (8, 9)),
    (r"\ba100\b|\ba800\b|\ba30\b", (8, 0)), (r"orin", (8, 7)),
    (r"rtx 30\d0|\ba10g?\b|\ba16\b|\ba2\b|\ba40\b|rtx a\d{3,4}|ampere", (8, 6)),
    (r"titan rtx|quadro rtx|rtx 20\d0|\bt4\b|gtx 16\d0|\bt(?:400|550|600|1000|1200|2000)\b|turing", (7, 5)),
    (r"xavier", (7, 2)), (r"v100|titan v\b|volta", (7, 0)),
    (r"p100", (6, 0)), (r"p40\b|p4\b|gtx 10\d0|titan xp|titan x \(pascal\)", (6, 1)),
    (r"gtx 9[5-8]0|gtx titan x\b|m40|m60", (5, 2)), (r"gtx 9\d0|gtx 75\d|maxwell", (5, 0)),
    (r"k80|kepler", (3, 7)), (r"k40|k20", (3, 5)),
))
#: programmatic dependent launch (``cudaLaunchAttributeProgrammaticStreamSerialization``) needs this compute capability
PDL_MIN_CC = (9, 0)
#: share (%) of copy busy time under kernels from which copies "already overlap kernels"
COPY_OVERLAP_PCT = 50.0
#: :meth:`TraceFacts.one_copy_engine` where the device may be a GPU with one copy engine or one with more
SOME_ONE_COPY_ENGINE = "some"
_FRAMEWORK = {"vllm": "pytorch", "sglang": "pytorch", "pytorch": "pytorch", "tensorflow": "tensorflow",
              "jax": "jax", "tensorrt": "tensorrt", "trtllm": "", "onnxruntime": "onnxruntime",
              "onnxruntime + tensorrt": "onnxruntime",
              # a serving engine's generation beside PyTorch's training (workload "training with generation"); a
              # finding is not known to be of either phase, so TensorRT-LLM's beside PyTorch's is no one framework
              "vllm + pytorch": "pytorch", "sglang + pytorch": "pytorch", "trtllm + pytorch": ""}


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
    ran_kernels: Optional[bool] = None    # None: the export does not let kernels be matched to this GPU
    #: copy engines (``TARGET_INFO_GPU.asyncEngines``; None: not recorded): read by the copy-pace advice only
    copy_engines: Optional[int] = field(default=None, metadata=NOT_IN_JSON)


@dataclass(frozen=True)
class NvtxThread:
    """A thread that opened NVTX ranges: its serialized globalTid, label and number of ranges."""

    gtid: int
    name: str            # its label (model/names.thread_labels: ``name (tid N)`` where names collide); "" unnamed
    ranges: int


@dataclass(frozen=True)
class TraceFacts(FieldsJson):
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
    torch_compile: bool
    torch_compile_evidence: str
    cpu_samples: bool
    unified_memory: bool
    unified_memory_evidence: str
    nvtx: bool
    nvtx_threads: Tuple[NvtxThread, ...]
    os_runtime: bool = False
    copies_d2d: bool = False
    copies_host: bool = False
    host_copies_pageable: Optional[bool] = None
    copies_overlap_kernels: Optional[bool] = None
    copy_overlap_pct: Optional[float] = None     # Σ |C ∩ K| / Σ |C| · 100 behind copies_overlap_kernels
    copies_async_side_stream: Optional[bool] = None
    async_side_pct: Optional[float] = None       # share of the copies' time behind copies_async_side_stream
    #: the processes with CUDA API calls when a kernel whose process the export does not record (no ``globalPid``)
    #: carries a correlation id calls of ≥ 2 processes carry (so the id does not say whose call it is); None
    #: otherwise (:func:`pidless_api_processes`)
    pidless_api_processes: Optional[int] = field(default=None, metadata=NONE_OMITTED)
    #: the processes that made the CUDA calls (", "-joined) when the trace says they are native programs, not a
    #: Python interpreter (:func:`host_language`); None otherwise
    native_host: Optional[str] = field(default=None, metadata=NONE_OMITTED)
    #: the trace says the processes that made the CUDA calls run a Python interpreter (:func:`host_language`); with
    #: neither this nor ``native_host`` the host's language is not known (an unnamed process)
    python_host: bool = field(default=False, metadata=NOT_IN_JSON)
    JSON_DERIVED: ClassVar[Tuple[str, ...]] = ("advice_facts",)

    def known_gpus(self) -> List[GpuFact]:
        """The GPUs whose capability is known and that ran kernels (every known GPU, when kernels cannot be
        matched to GPUs)."""
        return [g for g in self.gpus if g.source != "unknown" and g.ran_kernels is not False]

    def supports(self, dtype: str) -> Optional[bool]:
        """Whether the tensor cores of the known GPUs that ran kernels (:meth:`known_gpus`) take ``dtype``; None
        when no GPU is known or they differ (an A100 beside a T4: TF32 is neither true nor false of "the GPU")."""
        vals = {dtype in g.tensor_core_types for g in self.known_gpus()}
        return vals.pop() if len(vals) == 1 else None

    def supports_pdl(self, device: Optional[int] = None) -> Optional[bool]:
        """Whether programmatic dependent launch (compute capability ≥ :data:`PDL_MIN_CC`) is available: on the GPU
        of CUDA device ``device`` where the export ties the device to a GPU (``ran_kernels`` known), else on every
        known GPU that ran kernels (:meth:`known_gpus`); None when no GPU is known or they differ (an H100 beside
        a T4)."""
        gpus = self.known_gpus()
        tied = [g for g in gpus if g.ran_kernels is not None and g.id == device]
        vals = {_cc_pair(g.compute_capability) >= PDL_MIN_CC for g in tied or gpus}
        return vals.pop() if len(vals) == 1 else None

    def one_copy_engine(self, device: Optional[int] = None) -> Union[bool, str, None]:
        """Whether the GPU has a single copy engine (``asyncEngines`` 1: host-to-device and device-to-host copies take
        turns), false with two or more; judged as :meth:`supports_pdl` (the GPU of CUDA device ``device`` where the
        export ties the device to a GPU, else every listed GPU); :data:`SOME_ONE_COPY_ENGINE` when the device may be
        a GPU with one copy engine or one with more or unrecorded (an H100 beside a T4 recording 1, the export not
        tying the device to either); None when not recorded (NULL or 0), alone or beside GPUs of two or more."""
        tied = [g for g in self.gpus if g.ran_kernels is not None and g.id == device]
        vals = {None if not g.copy_engines else g.copy_engines == 1 for g in tied or self.gpus}
        if len(vals) == 1:
            return vals.pop()
        return SOME_ONE_COPY_ENGINE if True in vals else None

    def gpu_names_by_device(self) -> Dict[int, str]:
        """The GPU name to show beside each device id: by ``TARGET_INFO_GPU`` id where a device id is known to be
        that GPU (``ran_kernels`` known: the export maps CUDA devices to GPUs, or lists one GPU) or where every listed
        GPU has the same name; else none. A CUDA ordinal need not be the GPU id (``CUDA_VISIBLE_DEVICES``; CUDA
        numbers the fastest GPU first by default), so beside an A100 and an H100 "device 0" may be either."""
        named = [g for g in self.gpus if g.id is not None and g.name]
        if len({g.name for g in named}) > 1 and all(g.ran_kernels is None for g in named):
            return {}
        return {int(g.id): g.name for g in named if g.id is not None}

    def advice_facts(self) -> Dict[str, Any]:
        return {"workload": self.workload, "stack": self.stack, "framework": self.framework,
                "gpu_fp16_tensor_cores": self.supports("FP16"), "gpu_tf32": self.supports("TF32"),
                "gpu_bf16": self.supports("BF16"), "gpu_fp8": self.supports("FP8"),
                "cuda_graphs": self.cuda_graphs, "torch_compile": self.torch_compile, "cpu_samples": self.cpu_samples,
                "unified_memory": self.unified_memory, "nvtx": self.nvtx, "os_runtime": self.os_runtime,
                "copies_d2d": self.copies_d2d,
                "copies_host": self.copies_host, "host_copies_pageable": self.host_copies_pageable,
                "copies_overlap_kernels": self.copies_overlap_kernels,
                "copies_async_side_stream": self.copies_async_side_stream,
                "host_thread_off_cpu": False}   # per finding: findings/waits.sampled_facts


def _cc_pair(cc: Optional[str]) -> Tuple[int, int]:
    """A GpuFact's "major.minor" as a pair ((0, 0) when not known)."""
    major, _, minor = (cc or "0.0").partition(".")
    return int(major), int(minor or 0)


def _cc(g: GpuInfo) -> Optional[Tuple[int, int]]:
    try:
        major, minor = int(str(g.computeMajor)), int(str(g.computeMinor))
    except (TypeError, ValueError):
        return None
    return (major, minor) if major > 0 else None


def gpu_fact(g: GpuInfo) -> Optional[GpuFact]:
    """The facts of one ``TARGET_INFO_GPU`` row; None for a non-NVIDIA adapter (cc 0, or a name from another
    vendor)."""
    name = str(g.name or "")
    major = g.computeMajor
    if major is not None and str(major) == "0" or re.search(r"intel|amd|radeon|microsoft|basic render", name, re.I):
        return None
    gid = int(g.id) if isinstance(g.id, int) else None
    cc, source = _cc(g), "compute capability"
    if cc is None:
        cc = next((c for rx, c in _NAME_CC if rx.search(name)), None)
        source = "name" if cc is not None else "unknown"
    engines = g.asyncEngines if isinstance(g.asyncEngines, int) else None
    if cc is None:
        return GpuFact(gid, name, None, "unknown", (), "unknown", copy_engines=engines)
    arch, types = "unknown", ()   # type: Tuple[str, Tuple[str, ...]]
    for lo, hi, a, t in ARCHITECTURES:
        if lo <= cc <= hi:
            arch, types = a, t
    if _NO_TENSOR_CORES.search(name):
        arch, types = arch + ", no tensor cores", ()   # one parenthesis after it: the capability's
    return GpuFact(gid, name, f"{cc[0]}.{cc[1]}", arch, tuple(types), source, copy_engines=engines)


def copy_facts(ce: Optional[CopyEnginesResult]) -> Dict[str, Any]:
    """The copy facts of the analysis window (module docstring), as :class:`TraceFacts` fields."""
    if ce is None or not ce.available:
        return {}
    paths = ce.paths
    host = [p for p in paths if p.path in HOST_PATHS and p.count]
    with_k = [d for d in ce.devices if d.kernel_busy_ns > 0 and d.copy_busy_ns > 0]
    busy = sum(d.copy_busy_ns for d in with_k)
    pct = 100.0 * sum(d.copy_overlap_ns for d in with_k) / busy if busy else None
    return {"copies_d2d": any(p.path in ("D2D", "P2P") and p.count for p in paths),
            "copies_host": bool(host),
            "host_copies_pageable": host_copies_pageable(paths),
            "copies_overlap_kernels": None if pct is None else pct >= COPY_OVERLAP_PCT,
            "copy_overlap_pct": pct, "copies_async_side_stream": copies_async_side_stream(paths),
            "async_side_pct": async_side_share(paths)}


def analyze_facts(model: TraceModel, traits: KernelTraitsResult, graphs: GraphResult,
                  copy_engines: Optional[CopyEnginesResult] = None) -> TraceFacts:
    gpus = _with_kernels(tuple(f for f in (gpu_fact(g) for g in model.info.gpus) if f is not None), model)
    uses_graphs = graphs.available and bool(graphs.graph_launch_count or graphs.graph_kernel_count)
    graph_ev = (f"{graphs.graph_launch_count} graph launch call(s), {graphs.graph_kernel_count} kernel(s) "
                "executed as graph nodes") if uses_graphs else ""
    um, um_ev = _unified_memory(model)
    nv = model.nvtx
    g, n = np.unique(nv.gtid, return_counts=True) if nv is not None else (np.empty(0, np.int64), np.empty(0, np.int64))
    threads = [NvtxThread(int(gt), model.thread_label(int(gt)), int(cnt))
               for gt, cnt in sorted(zip(g.tolist(), n.tolist()), key=lambda x: (-x[1], x[0]))]
    stack = traits.stack
    compiled, compiled_ev = _inductor(model)
    native, python = host_language(model, stack)
    return TraceFacts(gpus, traits.workload, traits.workload_evidence, stack, traits.stack_evidence,
                      _FRAMEWORK.get(stack, ""), uses_graphs, graph_ev, compiled, compiled_ev,
                      bool(model.samples is not None and len(model.samples)), um, um_ev, bool(threads),
                      tuple(threads), bool(model.osrt is not None and len(model.osrt)), **copy_facts(copy_engines),
                      pidless_api_processes=pidless_api_processes(model), native_host=native, python_host=python)


#: a Python interpreter's process name (``python``, ``python3.11``, ``/usr/bin/python3``, ``ipython``)
_PYTHON_PROCESS = re.compile(r"(?:^|/)i?python[\d.]*$", re.I)
#: the stacks whose host may be a native program: none recognised, TensorRT, ONNX Runtime (their C++ APIs); every
#: other stack runs a Python host (vLLM, SGLang and TensorRT-LLM serve from Python, PyTorch, TensorFlow, JAX)
_NATIVE_STACKS = ("", "tensorrt", "onnxruntime", "onnxruntime + tensorrt")


def host_language(model: TraceModel, stack: str) -> Tuple[Optional[str], bool]:
    """Whether the processes that made CUDA calls (those of the kernels where no call is recorded) are native
    programs or a Python interpreter. Native (their names, ", "-joined; a llama.cpp ``llama-server``, a Rust
    ``candle`` server) when the stack is one of :data:`_NATIVE_STACKS`, every such process is named and none as a
    Python interpreter, and no CPU sample of a CUDA thread is in the Python interpreter. Python (True) when the stack
    is another (a Python framework), a process is named as a Python interpreter or such a sample is. Neither when a
    process is unnamed (the export records no name: nothing said of its language) and nothing else tells. A Python
    script started by its own name, with no framework evidence, reads as native: docs/FINDINGS.md "Facts"."""
    rows = model.api if model.api is not None and len(model.api) else model.kernels
    if stack not in _NATIVE_STACKS or rows is None or not len(rows):
        return None, stack not in _NATIVE_STACKS
    names = [model.info.process_names.get(int(p), "") for p in np.unique(rows.pid).tolist()]
    smp = model.samples
    if any(_PYTHON_PROCESS.search(n) for n in names) or (
            smp is not None and bool(np.any(smp.frame_group == GROUP_KEYS.index("python")))):
        return None, True
    return (", ".join(sorted(set(names))) if all(names) else None), False


def pidless_api_processes(model: TraceModel) -> Optional[int]:
    """The processes with CUDA API calls when a kernel's process is still unknown (-1: the kernel table has no
    ``globalPid`` and no call could be linked on correlationId alone, docs/MODEL.md) and calls of ≥ 2 processes carry
    that kernel's correlation id; else None."""
    k, api = model.kernels, model.api
    if k is None or api is None or len(k) == 0 or len(api) == 0:
        return None
    unknown = k.pid < 0
    if not bool(unknown.any()):
        return None
    pairs = np.unique(np.stack([np.asarray(api.corr, np.int64), np.asarray(api.pid, np.int64)]), axis=1)
    corr, n_pid = np.unique(pairs[0], return_counts=True)        # per correlation id: the processes using it
    if not bool(np.isin(np.asarray(k.corr, np.int64)[unknown], corr[n_pid >= 2]).any()):
        return None
    return int(np.unique(api.pid).shape[0])


def _with_kernels(gpus: Tuple[GpuFact, ...], model: TraceModel) -> Tuple[GpuFact, ...]:
    """Mark which GPUs ran kernels when the kernels' device ids are GPU ids of ``TARGET_INFO_GPU`` (the model maps
    CUDA device ids to GPU ids through ``TARGET_INFO_CUDA_DEVICE`` when the export has it); otherwise leave
    ``ran_kernels`` unknown (a CUDA device id need not be a GPU id under ``CUDA_VISIBLE_DEVICES``)."""
    k = model.kernels
    ids = {g.id for g in gpus}
    if k is None or len(k) == 0 or None in ids:
        return gpus
    used = set(np.unique(k.device).tolist())
    mapped = any("TARGET_INFO_CUDA_DEVICE" in n for n in model.notes)
    if not used <= ids or not (mapped or len(ids) == 1):
        return gpus
    return tuple(dataclasses.replace(g, ran_kernels=g.id in used) for g in gpus)


_INDUCTOR = re.compile(r"(?<![A-Za-z0-9])triton_(?:poi|red|per|tem)_")


def _inductor(model: TraceModel) -> Tuple[bool, str]:
    """Whether kernels generated by PyTorch Inductor ran (names are matched once per distinct name)."""
    k = model.kernels
    if k is None or len(k) == 0:
        return False, ""
    used = np.zeros(len(k.names) + 1, bool)
    used[k.name_idx] = True
    hits = [n for i, n in enumerate(k.names) if used[i] and _INDUCTOR.search(str(n)[:512])]
    if not hits:
        return False, ""
    return True, f"{len(hits)} Inductor-generated kernel name(s), e.g. '{str(hits[0])[:80]}'"


def _unified_memory(model: TraceModel) -> Tuple[bool, str]:
    n = um_rows(model.memcpy).shape[0]
    parts = [f"{n:,} Unified-Memory migration(s) (copy kinds 11–13)"] if n else []
    for attr, what in (("um_gpu_faults", "GPU page-fault row(s)"), ("um_cpu_faults", "CPU page-fault row(s)")):
        ops = getattr(model, attr, None)
        if ops is not None and len(ops):
            parts.append(f"{len(ops):,} UM {what}")
    return bool(parts), "; ".join(parts)
