"""Findings about the kernels themselves (``gpu_bound``, ``fp32_gemm``, ``attention_unfused``,
``elementwise_fusion``), claimed only when the GPU is busy enough for kernel speed to matter (docs/FINDINGS.md,
"Findings": "Kernels")."""

from __future__ import annotations

from typing import List, Optional, Tuple

from ..analyses.api.graphs import GraphResult
from ..analyses.comms.exposure import COMM_CATEGORIES, CommExposureResult
from ..analyses.comms.nccl_result import NcclResult
from ..analyses.idle.gpu_time import GpuTimeResult
from ..analyses.kernels.categories import CategoryResult
from ..analyses.kernels.harness import HarnessKernels
from ..analyses.kernels.summary import KernelSummary
from ..analyses.kernels.traits import KernelTraitsResult
from ..analyses.steps.metrics import StepResult
from ..analyses.trace.facts import TraceFacts
from ..analyses.trace.window import WindowResult
from ..model.names import short
from ..vocabulary.code_spans import code_name
from ..vocabulary.units import fmt_count
from ..vocabulary.units import fmt_dur as dur
from ..vocabulary.units import fmt_us_unit as us
from ..vocabulary.windows import window_name
from .base import GPU_BOUND_PCT, MEDIUM_SHARE, Check, Finding, Scope, finding, pooled_scope, pooled_words
from .comm_exposed import comm_exposed

KERNEL_CLAIM_MIN_BUSY = 50.0
FP32_MIN_SHARE = 20.0
ATTN_MIN_SHARE = 5.0
ELEMENTWISE_MIN_SHARE = 25.0
#: from this non-overlapped share of the busy time on, communication, not kernel speed, sets the pace
COMM_BOUND_PCT = 50.0


def _tensor_core_words(facts: TraceFacts, kinds: List[str]) -> str:
    """The FP32 finding's line on the GPUs' tensor-core datatypes: one list when the GPUs agree, per GPU model when
    they differ (an A100 beside a T4: TF32 is neither true nor false of "the GPU", :meth:`TraceFacts.supports`)."""
    per = {g.name: "/".join(t for t in ("TF32", "BF16", "FP16") if t in g.tensor_core_types) or "none"
           for g in facts.known_gpus()}
    if len(set(per.values())) > 1:
        return ("The GPUs' tensor cores differ: " + "; ".join(f"{code_name(n)} {v}" for n, v in sorted(per.items()))
                + " (see `facts.gpus`): use a precision each GPU takes.")
    return ("The GPU's tensor cores take " + "/".join(kinds) + " (see `facts.gpus`)." if kinds else
            "The GPU's tensor-core datatypes are not known from the trace.")


def at_stake(total_ns: int, frac: float) -> str:
    """The evidence line of a kernel-trait finding's time at stake (docs/FINDINGS.md, "Kernels")."""
    return (f"Time at stake: their kernel time × the GPU's busy fraction ({100.0 * frac:.1f} %), "
            f"{dur(int(total_ns * frac))} — what faster (or fused) kernels act on, not time that can be saved "
            "outright.")


def kernel_findings(gpu_time: GpuTimeResult, traits: KernelTraitsResult, steady_kernels: KernelSummary,
                    categories: CategoryResult, facts: TraceFacts, graphs: GraphResult,
                    window: WindowResult, window_repeats: bool, steps: StepResult, comm_exposure: CommExposureResult,
                    nccl: NcclResult, harness: Optional[HarnessKernels] = None) -> Tuple[Finding, ...]:
    """Findings about the kernels themselves (GPU-bound, exposed communication, FP32 GEMMs, unfused attention /
    elementwise); the GPUs'
    tensor-core datatypes (``facts``) decide the precision advice; ``window`` names the window (:func:`window_name`,
    with ``window_repeats``: it holds repeated steps);
    the kernels set "the step time" only where ``steps`` were found, else "the elapsed time".
    CUDA graphs traced at graph level hide the kernels inside them: shares of kernel time are then unknown, so no
    share is quoted and no trait finding is made. ``harness``: the kernels an event-timed thread launched outside
    every ``cudaEventRecord`` pair (a benchmark's L2 flush, warm-up): the top kernel and the trait shares are then of
    the other kernels, and an evidence line says what was left out (docs/FINDINGS.md, "Harness kernels")."""
    out: List[Finding] = []
    p = gpu_time.pooled()
    if p is None or not traits.available:
        return ()
    advice = facts.advice_facts()
    scope = pooled_scope(gpu_time.kernel_devices())
    busy = Check("busy_pct", p.busy_pct, ">=", GPU_BOUND_PCT, scope)
    exposed = comm_exposed(comm_exposure, gpu_time, facts, window, window_repeats, nccl, traits)
    claimed = 0   # the busy ns the exposed-communication finding claims: not gpu_bound's time at stake too
    if exposed is not None:
        out.append(exposed)
        claimed = int(exposed.time_at_stake_ns)
    hidden = graphs.available and graphs.graph_level_hidden   # kernel time misses the graphs' kernels
    # "the step time" only for steps the tool trusts: a low-confidence range (a layer's or an op's) is no step
    span = "the step time" if steps.available and steps.step_count and steps.confidence != "low" else \
        "the elapsed time"
    cut = harness if harness is not None and harness.kernel_count and harness.timed_traits is not None else None
    left_out = [] if cut is None else [
        f"{dur(cut.kernel_ns)} of harness kernels outside the timed regions left out: "
        f"{fmt_count(cut.kernel_count, 'kernel')} that an event-timed thread (it reads `cudaEventElapsedTime` for its "
        "`cudaEventRecord` pairs) launched outside every pair — the benchmark's own work (L2 flush, warm-up), not "
        f"what it measures; the share is of the other {dur(cut.timed_kernel_ns)} of kernel time."]
    of_kt = "of the timed kernel time" if cut is not None else "of kernel time"   # the base of the traits' shares
    if busy.holds():
        # with --include-memcpy-in-busy the busy time holds the copies: the claim is about the GPU's work, not kernels
        copies = gpu_time.include_memcpy
        idle = 100.0 - p.busy_pct   # from MEDIUM_SHARE on, the idle may hold a host finding: "not the host" is not said
        who = ("the GPU's kernels and copies (counted as busy: --include-memcpy-in-busy)" if copies else
               "kernel speed")
        where = window_name(window.method, window.details.bins is not None, window_repeats)
        cats = [c for c in (categories.overall if categories.available and not hidden else ()) if c.nonoverlap_ns]
        comm = Check("comm_nonoverlap_pct", sum(c.nonoverlap_pct for c in cats if c.category in COMM_CATEGORIES),
                     ">=", COMM_BOUND_PCT, scope)
        if comm.holds():   # a collective's duration is the links' and the peers' time, not its SMs' speed
            claim = (f"communication kernels hold {comm.observed:.1f} % of it, so the collectives, not compute "
                     f"kernel speed, set most of {span}")
        elif idle < MEDIUM_SHARE:
            claim = f"{who}, not the host, {'set' if copies else 'sets'} {span}"
        else:
            claim = f"{who} {'set' if copies else 'sets'} most of {span}"
        ev = [f"GPU busy {p.busy_pct:.1f} % of {where} ({dur(p.busy_ns)} of {dur(p.window_ns)}, "
              f"{pooled_words(gpu_time)}): " + claim
              + ("." if idle < MEDIUM_SHARE else f"; the GPU idles the other {idle:.1f} % (where it goes: "
                                                 "the idle-cause table).")]
        checks = [busy]
        if hidden:
            ev.append(f"The kernels inside the {graphs.graph_launch_count} CUDA graph launches were not recorded "
                      "(graph-level tracing): which kernels take the busy time is not known.")
        elif cut is not None and cut.top_kernel is not None:    # the top kernel of the timed regions
            k = cut.top_kernel
            ev.append(f"Top kernel {code_name(short(k.name, 90))}: {100.0 * k.total_ns / cut.timed_kernel_ns:.1f} % "
                      f"of the timed kernel time ({fmt_count(k.count, 'call')}, avg {us(k.total_ns / k.count)}).")
            row = next((t for t in steady_kernels.by_name if t.name == k.name), None) \
                if steady_kernels.available else None
            if row is not None:    # the check's metric is the window's share (docs/MODEL.md), which the row holds
                checks.append(Check("kernel_share_pct", float(row.pct), ">", 0.0, Scope(name=row.name)))
        elif steady_kernels.available and steady_kernels.by_name:
            t = steady_kernels.by_name[0]
            ev.append(f"Top kernel {code_name(short(t.name, 90))}: {t.pct:.1f} % of kernel time "
                      f"({fmt_count(t.count, 'call')}, avg {us(t.avg_ns)}).")
            checks.append(Check("kernel_share_pct", float(t.pct), ">", 0.0, Scope(name=t.name)))
        if cats:
            ev.append("Where the busy time goes (overlapping kernels share it equally): " + ", ".join(
                f"{c.category} {c.nonoverlap_pct:.0f} %" for c in cats[:5]) + ".")
        if cut is not None and cut.top_kernel is not None and not hidden:   # after the split, which still holds them
            ev.append(left_out[0].replace("the share is of", "the top kernel's share is of") + " The busy time "
                      "and its split above still count them: the GPU did run them.")
        keys = ["gpu_bound.kernels"]
        if comm.holds():
            ev.append("An NCCL kernel runs for as long as the transfer and the slowest peer take (it spins while it "
                      "waits): this rank's busy % does not say its compute is the bottleneck.")
            checks.append(comm)
            keys = ["gpu_bound.comms"]
        if claimed:
            ev.append(f"{dur(claimed)} of the busy time is communication no compute kernel overlaps: the "
                      "exposed-communication finding claims it (not counted in this finding's time at stake).")
        # the time at stake is the busy time (docs/FINDINGS.md "Kernels"): what faster kernels act on, not a saving
        ev.append(f"Time at stake: the busy time{' left' if claimed else ''}, {dur(p.busy_ns - claimed)} — the time "
                  "faster (or fewer) kernels would shorten, not time that can be saved outright.")
        title = (f"Communication-bound: the GPU is busy {p.busy_pct:.1f} % of {where}, {comm.observed:.1f} % of it "
                 "in collectives" if comm.holds() else f"GPU-bound: the GPU is busy {p.busy_pct:.1f} % of {where}; "
                 + ("kernels and copies set the pace" if copies else "kernel time sets the pace"))
        out.append(finding(
            "gpu_bound", severity="medium", title=title,
            evidence=ev, advice=keys, facts=advice, time_at_stake_ns=p.busy_ns - claimed, checks=checks))
    mid = Check("busy_pct", p.busy_pct, ">=", KERNEL_CLAIM_MIN_BUSY, scope)
    if not mid.holds() or hidden:
        return tuple(out)
    frac = p.busy_pct / 100.0
    sev_k = "medium" if p.busy_pct >= GPU_BOUND_PCT else "low"   # secondary unless kernels set the pace
    if cut is not None and cut.timed_traits is not None:   # the traits of the timed regions' kernels
        traits = cut.timed_traits
    h = traits.traits.get("fp32_gemm_simt")
    tensor_cores = advice.get("gpu_fp16_tensor_cores")
    if h is not None and h.share_pct >= FP32_MIN_SHARE and tensor_cores is not False:
        names = ", ".join(code_name(short(t.name, 60)) for t in h.top_kernels[:2])
        kinds = [k for k, f in (("TF32", "gpu_tf32"), ("BF16", "gpu_bf16"), ("FP16", "gpu_fp16_tensor_cores"))
                 if advice.get(f)]
        c = traits.traits.get("fp32_conv_simt")
        conv_ns = c.total_ns if c is not None else 0   # cuDNN's settings pick the convolutions' math
        fp32 = {**advice, "fp32_simt_conv": conv_ns > 0, "fp32_simt_gemm": conv_ns < h.total_ns}
        what = ("GEMMs" if not conv_ns else "convolutions" if conv_ns == h.total_ns else "GEMMs and convolutions")
        out.append(finding(
            "fp32_gemm", severity="high" if h.share_pct >= 50.0 and p.busy_pct >= GPU_BOUND_PCT else "medium",
            confidence="high" if tensor_cores else "medium",
            title=f"FP32 {what} run on CUDA cores, not tensor cores: {h.share_pct:.1f} % {of_kt}",
            evidence=(f"{h.kernel_count:,} FP32 (SIMT) GEMM/conv kernels take {dur(h.total_ns)}, {h.share_pct:.1f} % "
                      f"{of_kt} in the window: {names}.",
                      f"The GPU is busy {p.busy_pct:.1f} %, " + (f"so these kernels set {span}."
                                                                 if p.busy_pct >= GPU_BOUND_PCT else
                                                                 "so faster GEMMs shorten the busy time."),
                      _tensor_core_words(facts, kinds), *left_out, at_stake(h.total_ns, frac)),
            advice=["fp32.tf32", "fp32.tf32.conv", "fp32.bf16", "fp32.fp16", "fp32.fp16.scaler", "fp32.generic"],
            facts=fp32,
            time_at_stake_ns=int(h.total_ns * frac),
            checks=(busy if busy.holds() else mid,
                    Check("trait_share_pct", h.share_pct, ">=", FP32_MIN_SHARE, Scope(trait="fp32_gemm_simt")))))
    a = traits.traits.get("attention_unfused")
    if a is not None and a.share_pct >= ATTN_MIN_SHARE:
        out.append(finding(
            "attention_unfused", severity=sev_k, confidence="medium",
            title=f"Attention runs unfused (softmax + batched GEMMs): softmax alone is {a.share_pct:.1f} % {of_kt}",
            evidence=(f"{a.kernel_count:,} softmax kernels ({dur(a.total_ns)}) next to GEMM kernels and no fused "
                      "(flash/memory-efficient) attention kernel in the window.", *left_out,
                      at_stake(a.total_ns, frac)),
            advice=["attention.fused", "attention.fused.pre_ampere", "attention.fused.jax"], facts=advice,
            time_at_stake_ns=int(a.total_ns * frac),
            checks=(mid, Check("trait_share_pct", a.share_pct, ">=", ATTN_MIN_SHARE,
                               Scope(trait="attention_unfused")))))
    e = traits.traits.get("eager_pointwise")
    if e is not None and e.share_pct >= ELEMENTWISE_MIN_SHARE:
        out.append(finding(
            "elementwise_fusion", severity=sev_k, confidence="medium",
            title=f"Unfused (eager) pointwise kernels take {e.share_pct:.1f} % {of_kt}",
            evidence=(f"{e.kernel_count:,} eager pointwise / copy / cast kernels (the `eager_pointwise` trait; the "
                      f"kernel category `elementwise` is a different set of names), {dur(e.total_ns)}, median "
                      f"{us(e.p50_ns)}: " + ", ".join(code_name(short(t.name, 50)) for t in e.top_kernels[:3]) + ".",
                      *left_out, at_stake(e.total_ns, frac)),
            advice=["elementwise.fuse", "elementwise.compile", "compiled.graph_breaks"], facts=advice,
            time_at_stake_ns=int(e.total_ns * frac),
            checks=(mid, Check("trait_share_pct", e.share_pct, ">=", ELEMENTWISE_MIN_SHARE,
                               Scope(trait="eager_pointwise")))))
    return tuple(out)
