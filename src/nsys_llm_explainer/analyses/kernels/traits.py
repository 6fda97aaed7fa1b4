"""What an expert reads from kernel names: precision/tensor-core use, fused attention, training vs inference,
the software stack, and whether the GPU has tensor cores at all.

Every distinct (demangled) kernel name is matched, lower-cased, against the regexes below (``re.search``; a name
over 8,192 characters by its two ends: :func:`config.patterns.match_text`); one name may hit several traits. Only
distinct names are matched; per-row work is numpy. Every rule runs in time linear in the name's length, whatever the
name (rules written ``X\\w*Y`` below are matched in an equivalent form that cannot backtrack quadratically:
docs/SECURITY.md, "Bounded matching").

Traits (key — meaning — rule):

* ``fp32_gemm_simt`` — GEMM/conv running on CUDA cores (FP32 SIMT math), not tensor cores —
  ``sgemm|cgemm|scudnn|xmma\\w*f32f32_f32f32_f32|(gemv|gemmsn)\\w*<.*float`` (ampere/volta/turing_sgemm,
  cutlass_80_simt_sgemm, implicit/explicit_convolve_sgemm — also with ``__half`` data —, complex
  cgemm/gcgemm, [volta_fp16_]scudnn) and matching neither ``_TC_MARK`` (h884, h1688, h16816, s884, s1688,
  s16816, i8816, i16832, hmma, imma, gmma/wgmma, tensorop, tensorNxNxN) nor ``tf32|f16|fp8|e4m3|e5m2``
  (so ``…tf32…`` / ``…bf16…`` names are never SIMT).
* ``tensor_core_gemm`` — GEMM/conv using tensor cores — ``_TC_MARK`` or ``nvjet|sm9\\d_xmma|tcgen05``,
  ``(bf16|tf32|fp8|e4m3)\\w*gemm``, or ``xmma`` gemm/fprop/dgrad/wgrad names with ``f16|tf32|fp8|e4m3|i8i8|int8``.
* ``attention_fused`` — flash/fused attention — ``flash_fwd|flash_bwd|flash::|flash_?attn|flashinfer|fmha|
  paged_attention|cutlass[fb]_|efficient_attention|mmha|xqa|fused_attention|sdpa|flashmla|
  multihead_attention``.
* ``softmax`` — ``softmax`` kernels that are not ``attention_fused``.
* ``attention_unfused`` — not a name rule: set when ``softmax`` kernels exist, some GEMM runs in the same
  window (``gemm|bmm|gemv|nvjet|matmul`` or a GEMM trait above; not bare ``batched``, which also names
  CatArrayBatchedCopy) and no ``attention_fused`` kernel exists.
  Its numbers are those of the ``softmax`` kernels (the visible part of a matmul–softmax–matmul attention).
* ``elementwise`` — eager (not yet fused) kernels: ``elementwise_kernel|cudafunctor|copy_kernel|fill_?kernel|
  fillfunctor|cast|where_kernel|eigenmetakernel``.
* ``inductor_pointwise`` — ``triton_poi_``: pointwise kernels ``torch.compile`` already fused (never counted as
  unfused elementwise).
* ``tiny_elementwise`` — ``elementwise`` names whose own median duration (over the window) is < 10 µs.
* ``norm`` — ``layer_?norm|rms_?norm|batch_?norm|group_?norm|instance_?norm|bn_fw|bn_bw``.
* ``reduce`` — ``reduce_kernel`` (not ``splitKreduce_kernel``, a GEMM epilogue).
* ``backward`` — ``backward|_bwd|bwd_|bn_bw|dgrad|wgrad|grad_?input|grad_?weight``.
* ``optimizer`` — ``adam|multi_tensor_apply|sgd|lamb`` (not lambda) ``|optimizer``.
* ``nccl`` — ``nccl``.
* ``conv`` — ``convol|conv[123]d|conv_|winograd|im2col|scudnn|\\d{3,5}cudnn|fprop|dgrad|wgrad|nhwckrsc|
  cudnn::cnn|flip_filter`` and cuDNN FFT conv (``fft[12]d_[rc]2[rc]|dse::…fft``).
* ``autotune`` — ``redzone_checker`` (cuDNN/TF autotuning), plus, when ``redzone_checker`` is in the window,
  the FFT-conv trial kernels (FFT conv above, ``cgemm``, ``compute_gemm_pointers``, complex transposes):
  one-time work, not a steady hot spot.
* ``layout_transform`` — ``nchwtonhwc|nhwctonchw|transpose|permut|shuffleintensor|swapdimension|reformat``.

Numbers per trait (:class:`TraitHit`, integer ns): ``kernel_count``, ``total_ns`` (Σ duration),
``share_pct`` (``total_ns`` / total kernel ns of the window × 100), ``p50_ns`` (median duration, linear
interpolation as in :mod:`stats`, rounded half up), ``top_kernels`` (≤ 3 ``(name, count, total_ns)``,
largest total first; ties: count, then name).

``workload`` — ``training`` when ``backward`` ∪ ``optimizer`` kernels hold ≥ 5 % of kernel time, or a
thread named like ``pt_autograd_*``/``autograd`` exists (PyTorch's autograd engine creates these threads
only when backward runs); ``inference`` when the window otherwise holds a model's forward-pass kernels (a GEMM,
convolution, attention, softmax or normalization trait); ``unknown`` otherwise (no kernels, or kernels of no
recognisable model such as an MPI saxpy), with the evidence.

``stack`` — first of ``_STACKS`` with evidence in the kernel, NVTX, process or thread names, in the order
vllm, sglang, trtllm, tensorrt, tensorflow, jax, pytorch (``redzone_checker`` alone, which JAX's XLA
autotuner also runs, says tensorflow only after jax found nothing). Pass only
the names of the processes that ran kernels: system-wide thread lists may name unrelated programs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from ...config.patterns import for_matching, match_text
from ...jsonable import FieldsJson
from ...model.trace import TraceModel
from ..common.stats import GroupStats, group_stats, median, pct, round_half_up
from ..trace.info import TraceInfoResult
from .stats import KernelStats
from .summary import TopKernel

TRAITS: Dict[str, str] = {
    "fp32_gemm_simt": "GEMM/conv on CUDA cores (FP32 SIMT math), not tensor cores",
    "tensor_core_gemm": "GEMM/conv kernels that use tensor cores (FP16/BF16/TF32/INT8/FP8)",
    "attention_fused": "fused (flash / memory-efficient / paged) attention kernels",
    "softmax": "stand-alone softmax kernels",
    "attention_unfused": "attention done as GEMM + separate softmax (these are its softmax kernels)",
    "elementwise": "eager elementwise / copy / fill / cast kernels (memory-bound, fusion candidates)",
    "inductor_pointwise": "pointwise Triton kernels generated by torch.compile (Inductor): already fused",
    "tiny_elementwise": "elementwise kernels whose median duration is under 10 µs (launch-bound)",
    "norm": "normalization kernels (layer / RMS / batch / group norm)",
    "reduce": "generic reduction kernels (reduce_kernel)",
    "backward": "backward-pass kernels (gradients)",
    "optimizer": "optimizer-step kernels (Adam, SGD, LAMB, multi_tensor_apply)",
    "nccl": "NCCL collective / point-to-point communication kernels",
    "conv": "convolution kernels (implicit GEMM, Winograd, FFT, im2col)",
    "autotune": "cuDNN/TF autotuning trials (redzone_checker, FFT trials): one-time work",
    "layout_transform": "layout transposes / permutes / NCHW<->NHWC reformat kernels",
}

TINY_ELEMENTWISE_NS = 10_000
#: kernels of a neural network's forward pass: without any, a trace is not called inference
_MODEL_TRAITS = ("fp32_gemm_simt", "tensor_core_gemm", "gemm_any", "conv", "attention_fused", "softmax", "norm")
TRAINING_SHARE_PCT = 5.0

_I = re.IGNORECASE
# Bounded matching (docs/SECURITY.md): a rule ``X\w*Y`` is written ``X(?:(?!X)\w)*Y`` — the same names match
# (no occurrence of X can overlap the start of Y in these rules), but the scan after one X stops at the next X, so
# a name repeating X thousands of times costs linear time, not quadratic (``X\S*Y`` likewise).
_TC_MARK = r"h884|h1688|h16816|s884|s1688|s16816|i8816|i16832|hmma|imma|gmma|tensorop|tensor\d+x\d+x\d+"
_LOWP = r"tf32|f16|fp8|e4m3|e5m2"
_FFT_CONV = r"fft[12]d_[rc]2[rc]|dse::\w*fft|flip_filter|cudnn(?:(?!cudnn)\S)*fft"
_FFT_TRIAL = _FFT_CONV + r"|cgemm|compute_gemm_pointers|transpose(?:(?!transpose)\w)*<float2"
_XMMA_GEMM = (r"xmma(?:(?!xmma)\w)*(?:gemm|fprop|dgrad|wgrad)(?:(?!gemm|fprop|dgrad|wgrad)\w)*"
              r"(?:f16|tf32|fp8|e4m3|i8i8|int8)")
_RX: Dict[str, re.Pattern[str]] = {k: re.compile(v, _I) for k, v in {
    "simt": r"sgemm|cgemm|scudnn|xmma(?:(?!xmma)\w)*f32f32_f32f32_f32",   # + :func:`_gemv_float`
    "gemv_lt": r"(?:gemv|gemmsn)(?:(?!gemv|gemmsn)\w)*<",
    "float": r"float",
    "not_simt": _TC_MARK + "|" + _LOWP,
    "tensor_core_gemm": _TC_MARK + r"|nvjet|sm9\d_xmma|tcgen05|(?:bf16|tf32|fp8|e4m3)(?:(?!bf16|tf32|fp8|e4m3)\w)*gemm"
                        r"|" + _XMMA_GEMM,
    "attention_fused": r"flash_fwd|flash_bwd|flash::|flash_?attn|flashinfer|fmha|paged_attention|cutlass[fb]_"
                       r"|efficient_attention|mmha|xqa|fused_attention|sdpa|flashmla|multihead_attention",
    "softmax": r"softmax",
    "gemm_any": r"gemm|bmm|gemv|nvjet|matmul",
    "elementwise": r"elementwise_kernel|cudafunctor|copy_kernel|fill_?kernel|fillfunctor"
                   r"|(?<![a-z])(?<!static_)cast|where_kernel|eigenmetakernel",
    "inductor_pointwise": r"(?<![a-z0-9])triton_poi_",
    "norm": r"layer_?norm|rms_?norm|batch_?norm|group_?norm|instance_?norm|bn_fw|bn_bw",
    "reduce": r"(?<![a-z])reduce_kernel",
    "backward": r"backward|_bwd|bwd_|bn_bw|dgrad|wgrad|grad_?input|grad_?weight",
    "optimizer": r"adam|multi_tensor_apply|sgd|(?<![a-z])lamb(?!da)|optimizer",
    "nccl": r"nccl",
    "conv": r"convol|conv[123]d|(?<![a-z])conv_|winograd|im2col|scudnn|\d{3,5}cudnn|fprop|dgrad|wgrad"
            r"|nhwckrsc|cudnn::cnn|" + _FFT_CONV,
    "redzone": r"redzone_checker",
    "fft_trial": _FFT_TRIAL,
    "layout_transform": r"nchwtonhwc|nhwctonchw|transpose|permut|shuffleintensor|swapdimension|reformat",
}.items()}

# (stack, {source: regex}); sources: kernel, nvtx, process, thread. The first stack with evidence wins.
_SRC = ("kernel", "nvtx", "process", "thread")
_STACK_RULES: List[Tuple[str, Dict[str, Tuple[str, int]]]] = [   # (stack, {source: (regex, flags)})
    ("vllm", {"kernel": (r"vllm|paged_attention_v\d|reshape_and_cache", _I), "nvtx": (r"vllm", _I),
              "process": (r"vllm", _I), "thread": (r"vllm", _I)}),
    ("sglang", {src: (r"sglang|sgl_kernel", _I) for src in _SRC}),
    ("trtllm", {**{src: (r"tensorrt_llm|trtllm|tllm", _I) for src in _SRC},
                "kernel": (r"tensorrt_llm|trtllm|tllm|xqa|mmha", _I)}),
    ("tensorrt", {"kernel": (r"(?<![a-z])trt_|_trt(?![a-z])|sm\d+_xmma_\w*execute", _I),   # see _LINEAR
                  "nvtx": (r"(?i:tensorrt|executioncontext|^onnx::)|^(?:/[\w.:-]+)+/[A-Z][A-Za-z]*(?:_\d+)?$",
                           0),
                  "process": (r"trtexec|tensorrt", _I)}),
    ("tensorflow", {"kernel": (r"tensorflow|eigen::", _I), "nvtx": (r"tensorflow", _I),
                    "process": (r"tensorflow", _I), "thread": (r"^tf_|tensorflow", _I)}),
    ("jax", {src: (r"jax|xla", _I) for src in _SRC}),
    ("tensorflow", {"kernel": (r"redzone_checker", _I)}),     # XLA's autotuner: JAX runs it too
    ("pytorch", {"kernel": (r"at::native|aten::|c10::|triton_|torch", _I), "nvtx": (r"aten::|torch", _I),
                 "process": (r"torch", _I), "thread": (r"^pt_|autograd|torch", _I)}),
]
#: stack rules matched in an equivalent linear-time form (the evidence shows the rule as written above)
_LINEAR = {r"(?<![a-z])trt_|_trt(?![a-z])|sm\d+_xmma_\w*execute":
           r"(?<![a-z])trt_|_trt(?![a-z])|sm\d+_xmma_(?:(?!sm\d+_xmma_)\w)*execute"}
#: (stack, {source: (the rule as shown, its compiled linear-time form)})
_STACKS: List[Tuple[str, Dict[str, Tuple[str, re.Pattern[str]]]]] = [
    (s, {src: (rx, re.compile(_LINEAR.get(rx, rx), flags)) for src, (rx, flags) in d.items()}) for s, d in _STACK_RULES]
AUTOGRAD_THREAD = re.compile(r"pt_autograd|autograd", _I)

@dataclass(frozen=True)
class TraitHit(FieldsJson):
    """Kernels of one trait in the window (see module docstring for what each number means); ``meaning``: the
    trait's description (:data:`TRAITS`, derived from ``trait``)."""

    trait: str
    meaning: str = field(init=False)
    kernel_count: int
    total_ns: int
    share_pct: float
    p50_ns: int
    top_kernels: Tuple[TopKernel, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "meaning", TRAITS.get(self.trait, ""))


@dataclass(frozen=True)
class KernelTraitsResult(FieldsJson):
    """Traits of the window's kernels, the workload kind and the software stack (the GPUs' capabilities are
    facts: :mod:`facts`)."""

    available: bool
    reason: Optional[str]
    kernel_count: int
    total_kernel_ns: int
    traits: Dict[str, TraitHit]
    workload: str
    workload_evidence: Tuple[str, ...]
    stack: str
    stack_evidence: Tuple[str, ...]


def _short(s: str, n: int = 80) -> str:
    return s if len(s) <= n else s[: n - 1] + "…"


def detect_stack(kernel_names: Sequence[str], nvtx_names: Sequence[str] = (), process_names: Sequence[str] = (),
                 thread_names: Sequence[str] = ()) -> Tuple[str, Tuple[str, ...]]:
    """First stack of ``_STACKS`` with evidence; evidence = one example per source that matched."""
    sources = dict(zip(_SRC, (kernel_names, nvtx_names, process_names, thread_names)))
    for stack, rxs in _STACKS:
        ev: List[str] = []
        for src, (shown, rx) in rxs.items():
            hits = [str(n) for n in sources[src] if n and rx.search(match_text(n))]
            if hits:
                ev.append(f"{len(hits)} {src} name(s) match /{shown}/, e.g. '{_short(hits[0])}'")
        if ev:
            return stack, tuple(ev)
    return "", ()


def _gemv_float(s: str) -> bool:
    """``(?:gemv|gemmsn)\\w*<.*float`` in linear time: only the first ``gemv…<`` of a line needs the scan for
    ``float`` (a later one on the same line sees a part of what the first one sees)."""
    pos = 0
    while True:
        m = _RX["gemv_lt"].search(s, pos)
        if m is None:
            return False
        eol = s.find("\n", m.end())
        eol = len(s) if eol < 0 else eol
        if _RX["float"].search(s, m.end(), eol):
            return True
        pos = eol + 1


def classify_names(names: Sequence[str]) -> Dict[str, np.ndarray]:
    """Per name-level trait (all except ``tiny_elementwise``/``attention_unfused``): bool mask over ``names``."""
    n = len(names)
    keys = ("fp32_gemm_simt", "tensor_core_gemm", "attention_fused", "softmax", "gemm_any", "elementwise",
            "inductor_pointwise", "norm",
            "reduce", "backward", "optimizer", "nccl", "conv", "redzone", "fft_trial", "layout_transform")
    m = {k: np.zeros(n, bool) for k in keys}
    for i, s in enumerate(for_matching(names)):
        for k in keys:
            if k == "fp32_gemm_simt":
                m[k][i] = bool(_RX["simt"].search(s) or _gemv_float(s)) and not _RX["not_simt"].search(s)
            elif k == "softmax":
                m[k][i] = bool(_RX["softmax"].search(s)) and not _RX["attention_fused"].search(s)
            else:
                m[k][i] = bool(_RX[k].search(s))
    return m


def _hit(trait: str, mask: np.ndarray, name_idx: np.ndarray, dur: np.ndarray, names: Sequence[str],
         cnt: np.ndarray, tot: np.ndarray, total_all: int) -> Optional[TraitHit]:
    d = dur[mask[name_idx]]
    if d.shape[0] == 0:
        return None
    total = int(d.sum())
    p50 = int(round_half_up(np.array([median(d)]))[0])
    idx = np.nonzero(mask & (cnt > 0))[0]
    order = sorted(idx.tolist(), key=lambda i: (-int(tot[i]), -int(cnt[i]), str(names[i] or "")))[:3]
    top = tuple(TopKernel(str(names[i] or ""), int(cnt[i]), int(tot[i])) for i in order)
    return TraitHit(trait, int(d.shape[0]), total, pct(total, total_all), p50, top)


def analyze_kernel_traits(names: Sequence[str], name_idx: np.ndarray, dur: np.ndarray,
                          nvtx_names: Sequence[str] = (),
                          thread_names: Sequence[str] = (), process_names: Sequence[str] = (),
                          name_stats: Optional[GroupStats] = None) -> KernelTraitsResult:
    """Traits of the kernels ``names[name_idx]`` with durations ``dur`` (ns), plus workload and stack.
    ``name_stats``: :func:`stats.group_stats` of ``dur`` by ``name_idx`` when already computed."""
    name_idx = np.asarray(name_idx, dtype=np.int64)
    dur = np.asarray(dur, dtype=np.int64)
    cnt = np.zeros(len(names), np.int64)
    tot = np.zeros(len(names), np.int64)
    med = np.zeros(len(names), np.float64)
    if dur.shape[0]:
        gs = name_stats if name_stats is not None else group_stats({"name": name_idx}, dur)
        k = gs.keys["name"]
        cnt[k], tot[k], med[k] = gs.count, gs.total, gs.p50_exact
    present = np.nonzero(cnt > 0)[0]
    present_names = [str(names[i] or "") for i in present.tolist()]
    stack, stack_ev = detect_stack(present_names, nvtx_names, process_names, thread_names)
    if dur.shape[0] == 0:
        return KernelTraitsResult(False, "no kernels in the analysis window", 0, 0, {}, "unknown",
                                  ("no kernels in the analysis window",), stack, stack_ev)
    sub = classify_names(present_names)
    m = {key: np.zeros(len(names), bool) for key in sub}
    for key, v in sub.items():
        m[key][present] = v
    m["tiny_elementwise"] = m["elementwise"] & (med < TINY_ELEMENTWISE_NS)
    any_gemm = bool((m["gemm_any"] | m["fp32_gemm_simt"] | m["tensor_core_gemm"]).any())
    unfused = m["softmax"].any() and any_gemm and not m["attention_fused"].any()
    m["attention_unfused"] = m["softmax"] if unfused else np.zeros(len(names), bool)
    autotune = m["redzone"].copy()
    if autotune.any():
        autotune |= m["fft_trial"]
    m["autotune"] = autotune
    total_all = int(dur.sum())
    traits: Dict[str, TraitHit] = {}
    for trait in TRAITS:
        h = _hit(trait, m[trait], name_idx, dur, names, cnt, tot, total_all)
        if h is not None:
            traits[trait] = h
    workload, w_ev = _workload(m, name_idx, dur, total_all, thread_names)
    return KernelTraitsResult(True, None, int(dur.shape[0]), total_all, traits, workload, w_ev, stack, stack_ev)


def _workload(m: Dict[str, np.ndarray], name_idx: np.ndarray, dur: np.ndarray, total_all: int,
              thread_names: Sequence[str]) -> Tuple[str, Tuple[str, ...]]:
    ev: List[str] = []
    share = {}
    for key in ("backward", "optimizer"):
        share[key] = pct(int(dur[m[key][name_idx]].sum()), total_all)
        if share[key] > 0:
            ev.append(f"{key} kernels {share[key]:.1f} % of kernel time")
    both = pct(int(dur[(m["backward"] | m["optimizer"])[name_idx]].sum()), total_all)
    threads = sorted({str(t) for t in thread_names if t and AUTOGRAD_THREAD.search(str(t))})
    if threads:
        ev.append(f"autograd thread(s) {', '.join(repr(t) for t in threads[:3])} (backward ran in this process)")
    if both >= TRAINING_SHARE_PCT or threads:
        return "training", tuple(ev)
    ev.append(f"backward + optimizer kernels {both:.1f} % of kernel time (< {TRAINING_SHARE_PCT:g} %), "
              "no autograd thread")
    model = np.zeros_like(m["norm"])
    for key in _MODEL_TRAITS:
        model |= m[key]
    if not model[name_idx].any():
        ev.append("no GEMM, convolution, attention, softmax or normalization kernel: not a recognisable model")
        return "unknown", tuple(ev)
    return "inference", tuple(ev)


def kernel_traits(model: TraceModel, steady: TraceModel, trace: TraceInfoResult,
                  steady_kernel_stats: Optional[KernelStats]) -> KernelTraitsResult:
    """Traits of the steady window's kernels, with the names of the processes that launched kernels and of their
    threads (the stack's evidence); the capture's kernel names alone when the window has no kernels."""
    k = model.kernels
    pids = set(np.unique(k.pid).tolist()) if k is not None and len(k) else set()
    threads = [n for g, n in model.thread_names.items() if ((int(g) >> 24) & 0xFFFFFF) in pids]
    procs = [p.name for p in trace.processes if p.pid in pids]
    nv = model.nvtx.names if model.nvtx is not None else []
    sk = steady.kernels
    if sk is None or len(sk) == 0 or steady_kernel_stats is None:
        empty = np.empty(0, np.int64)
        return analyze_kernel_traits(k.names if k is not None else [], empty, empty, nv, threads, procs)
    return analyze_kernel_traits(sk.names, sk.name_idx, sk.dur, nv, threads, procs, steady_kernel_stats.by("name"))
