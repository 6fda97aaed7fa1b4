"""The idle-cause kinds: one table that every analysis, finding, renderer, comparison and the JSON schema read
(docs/MODEL.md defines each kind's condition).

Each row: ``name``; its place in the precedence (the table's order: each idle ns takes the first kind whose
condition holds); ``category`` of the finding that reports it; ``meaning``, one phrase for the report's legend;
``idle_text``, the comparison's wording; ``color`` of the charts; ``one_time`` (paid once per process);
``api`` (charged from a class of CUDA API call on the gap's host thread); ``host_side`` (time the launching
thread spends on the host: the pieces later analyses split further); ``low_only`` (its finding is at most low:
one-time or unknowable); ``advice``, the ids of the advice lines (:data:`findings.advice.ADVICE`) its finding
may give, each filtered by the trace's facts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Tuple


@dataclass(frozen=True)
class CauseKind:
    name: str
    category: str
    meaning: str
    idle_text: str
    color: str
    one_time: bool = False
    api: bool = False
    host_side: bool = False
    low_only: bool = False
    advice: Tuple[str, ...] = ()
    title: str = ""          # its finding's title: ``{what}`` the largest detail, ``{share}`` % of the window
    title_many: str = ""     # the title when no detail holds half of the kind (``{share}`` only)
    by: str = ""             # what the details are, in "By <by>: …" evidence ("call", "range", "copy kind")
    noun: str = ""           # the detail's stand-in when it is empty ("host work")


#: every kind, in precedence order
CAUSE_KINDS: Tuple[CauseKind, ...] = (
    CauseKind("copy", "copy_bound", "a memcpy/memset was in flight", "GPU idle while a copy ran", "#00838f",
              advice=("copy_pace.host.resident", "copy.overlap", "copy.overlap.torch", "copy.prefetch",
                      "copy.prefetch.large", "copy.d2d", "copy.d2d.large"),
              title="Copies keep the kernels waiting: {what} copies fill {share:.1f} % of the window",
              title_many="Copies keep the kernels waiting: {share:.1f} % of the window",
              by="copy kind"),
    CauseKind("queued", "gpu_wait", "the next kernel was already launched (stream/event dependency or launch latency)",
              "GPU idle with the next kernel already launched (queued)", "#9e9d24", advice=("queued.dependency",),
              title="The GPU waits with work already queued ({share:.1f} % of the window): a stream/event dependency "
                    "or "
                    "launch latency, not the host"),
    CauseKind("sync", "sync_stall", "the launching thread was blocked in a synchronize call",
              "GPU idle with the host blocked in a sync call", "#c62828", api=True,
              advice=("sync.remove", "sync.remove.torch", "sync.vllm", "sync.sglang"),
              title="Host blocks in {what} while the GPU idles ({share:.1f} % of the window)",
              title_many="Host blocks in synchronize calls while the GPU idles ({share:.1f} % of the window)",
              by="call"),
    CauseKind("sync_memcpy", "memcpy", "the launching thread was in a synchronous memcpy/memset",
              "GPU idle in a synchronous copy call", "#ad1457", api=True,
              advice=("sync_memcpy.async", "sync_memcpy.async.torch"),
              title="Synchronous copies ({what}) stall the GPU ({share:.1f} % of the window)",
              by="call"),
    CauseKind("pageable_memcpy", "memcpy", "the launching thread was in an async memcpy from pageable memory",
              "GPU idle in a pageable async copy call", "#6a1b9a", api=True,
              advice=("pageable.pin", "pageable.pin.torch"),
              title="{what} from pageable memory blocks the host ({share:.1f} % of the window)",
              by="call"),
    CauseKind("alloc", "allocation", "the launching thread was in an allocation / free",
              "GPU idle in an allocation call", "#4527a0", api=True, advice=("alloc.pool",),
              title="Allocation in the loop: the host is in {what} while the GPU idles ({share:.1f} % of the window)",
              title_many="Allocation in the loop: the host is in alloc/free calls while the GPU idles ({share:.1f} % "
                         "of the window)",
              by="call"),
    CauseKind("module_load", "one_time", "the launching thread loaded modules or first-launched a kernel (one-time)",
              "GPU idle in module loading / first launches", "#283593", one_time=True, api=True, low_only=True,
              advice=("module_load.exclude",),
              title="One-time cost: module loading / first launches ({what}) take {share:.1f} % of the window",
              by="call"),
    CauseKind("launch", "launch_overhead", "the launching thread was inside a launch call",
              "GPU idle in kernel launch calls", "#ef6c00", api=True, host_side=True,
              advice=("launch.graphs", "launch.graphs.torch", "launch.graphs.compiled", "launch.graphs.more",
                      "launch.graphs.all",
                      "launch.fuse", "compiled.graph_breaks", "launch.vllm", "launch.sglang", "launch.trtllm",
                      "launch.trtllm.graphs"),
              title="Launch calls ({what}) hold the host while the GPU idles ({share:.1f} % of the window)",
              by="call"),
    CauseKind("other_api", "cuda_api", "the launching thread was inside another CUDA API call",
              "GPU idle in other CUDA API calls", "#5d4037", api=True, host_side=True, advice=("other_api.find",),
              title="The host is inside {what} while the GPU idles ({share:.1f} % of the window)",
              title_many="The host is inside other CUDA calls while the GPU idles ({share:.1f} % of the window)",
              by="call"),
    CauseKind("osrt", "host_os", "the launching thread was inside this OS runtime call (one that waits: also "
              "inside an NVTX range)",
              "GPU idle with the host in an OS call", "#00695c", host_side=True,
              advice=("osrt.find", "osrt.samples", "wait.io", "wait.copies", "wait.cpu", "wait.calls", "wait.unseen",
                      "wait.unseen.training", "wait.other_process", "wait.other_process.training",
                      "wait.other_process.torch"),
              title="The launching thread is in {what} (OS runtime) while the GPU idles ({share:.1f} % of the "
                    "window)",
              title_many="The launching thread is in OS calls while the GPU idles ({share:.1f} % of the window)",
              by="call"),
    CauseKind("nvtx", "host_range", "the launching thread was inside this NVTX range, outside CUDA calls and "
              "waiting OS calls",
              "GPU idle with the host inside NVTX ranges", "#1565c0", host_side=True,
              advice=("nvtx.overlap", "nvtx.overlap.untraced", "nvtx.overlap.untraced.sampled",
                      "nvtx.overlap.launching", "nvtx.overlap.unchecked", "nvtx.op_ranges"),
              title="The GPU idles while the host is in NVTX range {what} ({share:.1f} % of the window)",
              title_many="The GPU idles while the host is in NVTX ranges ({share:.1f} % of the window)",
              by="range"),
    CauseKind("host_cpu", "host_gap", "the launching thread was outside CUDA calls, NVTX ranges and traced OS calls",
              "GPU idle with the host outside CUDA, NVTX and OS calls", "#f9a825", host_side=True,
              advice=("host_cpu.off_cpu", "host_cpu.off_cpu.training", "host_cpu.profile", "host_cpu.profile.native",
                      "host_cpu.samples",
                      "host_cpu.vllm",
                      "host_cpu.vllm.graphs",
                      "host_cpu.sglang", "host_cpu.trtllm", "host_cpu.trtllm.graphs"),
              title="Host gaps: the launching thread is outside CUDA calls while the GPU idles ({share:.1f} % of the "
                    "window)",
              noun="host work"),
    CauseKind("unknown", "unknown_host", "no host thread could be linked to the gap",
              "GPU idle with no host thread linked", "#9e9e9e", low_only=True,
              advice=("unknown.trace_cuda", "unknown.unlinked"),
              title="Idle with no linked host thread ({share:.1f} % of the window): its cause is unknown"),
)

KINDS: Tuple[str, ...] = tuple(k.name for k in CAUSE_KINDS)
KIND: Dict[str, CauseKind] = {k.name: k for k in CAUSE_KINDS}
#: each kind's code: its index in :data:`KINDS` (= its precedence; arrays of kinds hold these)
KIND_CODE: Dict[str, int] = {k: i for i, k in enumerate(KINDS)}
#: kinds charged from a CUDA API call class, in precedence order
API_KINDS: Tuple[str, ...] = tuple(k.name for k in CAUSE_KINDS if k.api)
#: kinds whose pieces :class:`analyses.idle.result.IdlePieces` keeps (the launching thread on the host side)
HOST_PIECE_KINDS: Tuple[str, ...] = tuple(k.name for k in CAUSE_KINDS if k.host_side)
ONE_TIME: frozenset = frozenset(k.name for k in CAUSE_KINDS if k.one_time)

#: causes of findings that span several idle kinds (``Finding.cause[0]``), with what each claims
COMPOSITE_CAUSES: Dict[str, str] = {
    "host_overhead": "per-launch host overhead: launch calls and short host gaps between launches (launch-bound)",
    "step_sync": "host work after per-step synchronizations that could overlap the next step",
    "copy_path": "GPU idle a copy path holds beyond the kernels while it sets the pace",
}
#: every cause a finding may name: the kinds in precedence order, then the composites
FINDING_CAUSES: Tuple[str, ...] = KINDS + tuple(COMPOSITE_CAUSES)
