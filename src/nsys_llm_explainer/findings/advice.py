"""Advice as knowledge: every recommendation line a finding may give, with the trace facts it requires
(docs/FINDINGS.md, "Advice and the facts it needs"); :data:`FACT_DOMAINS` lists every value each fact can take.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Dict, Iterable, Mapping, Optional, Tuple

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
    # the gaps' host thread is sampled elsewhere but never inside these gaps (findings/idle._sampled_facts)
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
}

_PT = ("pytorch",)
_PT_OR_UNKNOWN = ("pytorch", "")

#: what one long pause in a capture may be, by the workload fact (the one table of these words; the ``pause.one_gap``
#: lines, docs/FINDINGS.md "One pause"): a training loop's pauses are not a server's
PAUSE_EXAMPLES: Dict[str, str] = {
    "training": "an epoch boundary, an evaluation, a checkpoint, a one-off stall",
    "inference": "a request's tokenization or other pre-processing, the server idle between requests, a one-off "
                 "stall",
    "unknown": "in training an epoch boundary, an evaluation or a checkpoint; in serving a request's tokenization or "
               "the server idle between requests; a one-off stall",
}
#: the ``pause.one_gap`` lines: (id, the PAUSE_EXAMPLES key of its words, the workloads it is given for); an RL job
#: ("training with generation") pauses as a training loop does (evaluations, checkpoints)
_PAUSE_LINES = (("pause.one_gap", "training", ("training", "training with generation")),
                ("pause.one_gap.inference", "inference", ("inference",)),
                ("pause.one_gap.unknown", "unknown", ("unknown",)))


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


def _a(id: str, text: str, **requires: Tuple[FactValue, ...]) -> Advice:
    return Advice(id, text, dict(requires))


#: every advice line of every finding, by id (the one table; findings pick lines by id)
ADVICE: Dict[str, Advice] = {a.id: a for a in (
    # ---- idle causes
    _a("copy.overlap", "Overlap copies with compute: issue them asynchronously (`cudaMemcpyAsync`) on a side stream "
       "and prefetch the next step's data while this step runs.", copies_overlap_kernels=(False, None),
       copies_async_side_stream=(False, None)),
    _a("copy.overlap.torch", "In PyTorch: `.to(device, non_blocking=True)` issued on a side `torch.cuda.Stream`, "
       "with `wait_stream` (or an event) before the consumer uses the tensor.", framework=_PT,
       copies_host=(True,), copies_overlap_kernels=(False, None), copies_async_side_stream=(False, None)),
    _a("copy.prefetch", "These copies already run asynchronously, on streams no kernel uses, yet the kernels wait "
       "for them: start each one earlier (issue the next layer's or step's copy while this one's kernels run, into a "
       "second buffer, and let the consumer wait only on the event of its own copy), move fewer and larger copies, "
       "and keep on the GPU what memory allows instead of copying it every step.", copies_async_side_stream=(True,),
       copies_large=(False, None)),
    _a("copy.prefetch.large", "These copies already run asynchronously, on streams no kernel uses, yet the kernels "
       "wait for them: start each one earlier (issue the next layer's or step's copy while this one's kernels run, "
       "into a second buffer, and let the consumer wait only on the event of its own copy) and keep on the GPU what "
       "memory allows instead of copying it every step; these copies are large (over 1 MiB on average): per-copy "
       "overhead is not what costs, the bytes are.", copies_async_side_stream=(True,), copies_large=(True,)),
    _a("copy.pageable", "Pageable host memory is behind these copies: the driver stages them through its own pinned "
       "buffer (slower, and they cannot overlap compute); allocate the host buffers pinned (`cudaHostAlloc` / "
       "`cudaHostRegister`) once and reuse them.", host_copies_pageable=(True,)),
    _a("copy.batch", "The host issues these small copies one call each, and the GPU waits while it does: issue "
       "fewer, larger copies — gather the pieces on the GPU with one kernel into a contiguous buffer and copy that "
       "once, or submit them together with `cudaMemcpyBatchAsync` (CUDA 12.8 or newer) — so that the next kernel "
       "is launched sooner.", copy_calls_pace=(True,)),
    _a("copy.launch_first", "The launching thread had not launched the next kernel while these copies ran (it was "
       "working on the host: outside CUDA calls, or in NVTX ranges or other calls): the GPU idles for want of launched "
       "work, and faster copies would not shorten it. Shorten the host work between launches or overlap it with GPU "
       "execution, so that the next kernel is queued before the GPU runs dry."),
    # per-op copies of activations are the "usual" source only of small copies: whole buffers (weights synced to a
    # generation engine, caches, optimizer state) move in copies of many MiB (docs/FINDINGS.md, "copy.d2d")
    _a("copy.d2d", "Device-to-device copies usually come from `.contiguous()`, `torch.cat`, `.clone()` or layout "
       "changes: remove them or fuse them into the producing kernel.", framework=_PT_OR_UNKNOWN,
       copies_d2d=(True,), d2d_copies_large=(False,)),
    _a("copy.d2d.large", "These device-to-device copies average over 1 MiB each: besides large per-op copies "
       "(clones or concatenations of big tensors) they may move whole buffers (weights synced to another engine, "
       "caches, optimizer state). `nsys profile --cudabacktrace=memory` (it needs CPU sampling on) records the host "
       "call stack of each copy call; then copy less often what does not change, or let the consumer read the source "
       "buffer instead of a copy.", copies_d2d=(True,), d2d_copies_large=(True,)),
    # ---- a copy path sets the pace (findings/copy_path.py)
    _a("copy_pace.d2d", "Move fewer bytes on the device: device-to-device copies come from layout changes "
       "(transposes, making tensors contiguous), concatenation, clones and buffer shuffles; use views or outputs "
       "written in place, fuse the copy into the kernel that produces or consumes the data, and merge many small "
       "copies into few large ones.", copies_d2d=(True,)),
    _a("copy_pace.d2d.large", "Move fewer bytes on the device: these device-to-device copies average over 1 MiB "
       "each, so they may move whole buffers (weights synced to another engine, caches, optimizer state) as well as "
       "large per-op results; `nsys profile --cudabacktrace=memory` (it needs CPU sampling on) records the host call "
       "stack of each copy call. Copy less often what does not change, and let the consumer read the source buffer "
       "instead of a copy.", copies_d2d=(True,)),
    _a("copy_pace.host.resident", "Fewer bytes over the host link: keep what is streamed every step resident on the "
       "GPU when memory allows (weights, KV blocks), or shrink it before it crosses (8-bit or 4-bit quantized weights "
       "move a half or a quarter of the bytes).", copies_host=(True,), copies_outlast_kernels=(True, None)),
    _a("copy_pace.engines", "Use both copy directions at once: host-to-device and device-to-host copies run on "
       "separate copy engines only when they are issued on different streams; split large transfers into chunks "
       "pipelined with the kernels that consume them.", copies_host=(True,), gpu_one_copy_engine=(False, None)),
    _a("copy_pace.engines.one", "This GPU has one copy engine (`asyncEngines` 1): host-to-device and device-to-host "
       "copies take turns on it whatever their streams, so the two directions add up; split large transfers into "
       "chunks pipelined with the kernels that consume them.", copies_host=(True,), gpu_one_copy_engine=(True,)),
    _a("copy_pace.engines.some", "To use both copy directions at once on a GPU with two or more copy engines, issue "
       "host-to-device and device-to-host copies on different streams (only then do they run on separate engines); "
       "one of the listed GPUs has a single copy engine (`asyncEngines` 1), on which the two directions take turns "
       "whatever their streams, and the export does not say which GPU this device is. Split large transfers into "
       "chunks pipelined with the kernels that consume them.", copies_host=(True,), gpu_one_copy_engine=("some",)),
    _a("copy_pace.fewer", "A saturated copy engine gains from larger, fewer copies (per-copy overhead) and from not "
       "copying what the step does not need; the kernels under it only get faster once the copies take less time."),
    _a("copy_pace.less", "A saturated copy engine gains from not copying what the step does not need (these copies "
       "are large: per-copy overhead is not what costs); the kernels under it only get faster once the copies take "
       "less time."),
    # programmatic dependent launch needs compute capability 9.0 (Hopper) or newer: ``gpu_pdl`` picks the line
    _a("queued_latency.fuse", "Each kernel boundary costs a few µs of GPU-side latency even when the work is queued "
       "(CUDA graphs included): fewer, larger kernels (fusion) remove boundaries; programmatic dependent launch "
       "overlaps a kernel's prologue with the previous one.", gpu_pdl=(True,)),
    _a("queued_latency.fuse.no_pdl", "Each kernel boundary costs a few µs of GPU-side latency even when the work is "
       "queued (CUDA graphs included): fewer, larger kernels (fusion) remove boundaries.", gpu_pdl=(False,)),
    _a("queued_latency.fuse.pdl_unknown", "Each kernel boundary costs a few µs of GPU-side latency even when the work "
       "is queued (CUDA graphs included): fewer, larger kernels (fusion) remove boundaries; on a GPU of compute "
       "capability 9.0 (Hopper) or newer, programmatic dependent launch overlaps a kernel's prologue with the previous "
       "one.", gpu_pdl=(None,)),
    _a("queued_latency.compile", "In PyTorch, `torch.compile` fuses elementwise chains into fewer kernels.",
       framework=_PT, torch_compile=(False,)),
    _a("compiled.graph_breaks", "`torch.compile` is already in use (Inductor's `triton_*` kernels are in the "
       "trace): the small kernels left are eager regions between graph breaks; list the breaks "
       "(`TORCH_LOGS=graph_breaks`, or `fullgraph=True` to fail on the first) and compile those regions too.",
       framework=_PT, torch_compile=(True,)),
    _a("queued.dependency", "Look at the largest gaps: the next kernel was already launched, so it waited on another "
       "stream, an event (`cudaStreamWaitEvent`) or a copy — or, on one stream with none of those, the driver held "
       "the submission back (Windows' WDDM driver batches launches); reorder the streams or remove the dependency."),
    _a("sync.remove", "Remove per-step host synchronization from the loop, or move the wait after the next step has "
       "been launched."),
    _a("sync.remove.torch", "In PyTorch the usual sources are `.item()`, `.cpu()`, `.tolist()`, `print(tensor)` and "
       "`torch.cuda.synchronize()` inside the step.", framework=_PT),
    _a("sync_memcpy.async", "Use `cudaMemcpyAsync` from pinned memory on a side stream, and read results back once "
       "per step, not per op."),
    _a("sync_memcpy.async.torch", "In PyTorch: `tensor.to(device, non_blocking=True)` after `pin_memory()`.",
       framework=_PT),
    _a("pageable.pin", "An async copy from pageable memory is staged by the driver and blocks the calling thread: "
       "allocate the host buffer pinned (`cudaHostAlloc` / `cudaHostRegister`) so the copy is truly async.",
       host_copies_pageable=(True,)),
    _a("pageable.pin.torch", "In PyTorch: `tensor.pin_memory()` (or `pin_memory=True` in the `DataLoader`) before "
       "`.to(device, non_blocking=True)`.", framework=_PT, host_copies_pageable=(True,)),
    _a("alloc.pool", "Allocate once outside the loop or use a caching / stream-ordered allocator (`cudaMallocAsync` "
       "with a pool); `cudaFree` synchronizes the device."),
    *(_a(aid, "Most of this idle time is one pause (the largest gap in the finding's evidence), not a cost paid in "
         f"every step: find what the program did then ({PAUSE_EXAMPLES[w]}) and whether it recurs; to size the cost "
         "the loop pays, capture steady steps away from it (`nsys profile --delay=SECONDS` / `--duration`, or "
         "`--capture-range=cudaProfilerApi`).", workload=tuple(ws)) for aid, w, ws in _PAUSE_LINES),
    _a("pause.torch", "In PyTorch, an epoch boundary starts the `DataLoader`'s worker processes again unless "
       "`persistent_workers=True`, and the first batch of the epoch waits until a worker has prepared it.",
       workload=("training",), framework=_PT),
    _a("startup.once", "This runs once, before the GPU's first kernel or after its last (start-up / shutdown: "
       "initialization, registering or loading buffers, tear-down), not in every step: leave it out of a "
       "steady-state capture (`nsys profile --delay=SECONDS`, or `--capture-range=cudaProfilerApi` with "
       "`cudaProfilerStart()` after start-up and `cudaProfilerStop()` before shutdown), or count it as a fixed cost "
       "per run; shorten it only if start-up time matters."),
    _a("alloc.autotune", "These allocations are the workspaces of the algorithms the autotuner tries, once per new "
       "input shape: a one-time cost. Leave the autotuning pass out of a steady-state capture "
       "(`--capture-range=cudaProfilerApi` after the first steps), and keep input shapes fixed (pad or bucket them) "
       "so that it does not run again."),
    _a("alloc.autotune.tf", "TensorFlow: `TF_CUDNN_USE_AUTOTUNE=0` skips cuDNN's autotuning, at the cost of "
       "running cuDNN's heuristic choice of algorithm instead of the fastest one measured.",
       framework=("tensorflow",)),
    _a("module_load.exclude", "This is paid once per process (lazy module loading, JIT): leave it out of the "
       "steady-state capture (`--capture-range=cudaProfilerApi` after warm-up) rather than optimizing it."),
    _a("module_load.graph_upload", "This is paid once per CUDA graph (its upload on first launch): upload each graph "
       "ahead of its first timed launch (`cudaGraphUpload` after instantiation, or one warm-up replay), or leave it "
       "out of the steady-state capture (`--capture-range=cudaProfilerApi` after warm-up)."),
    _a("launch.graphs", "Cut the number of launches per step with CUDA graphs and kernel fusion, or give each "
       "kernel more work (larger batches).", cuda_graphs=(False,)),
    _a("launch.graphs.torch", "In PyTorch: `torch.compile(mode=\"reduce-overhead\")` or `torch.cuda.graphs` "
       "capture the step; `torch.compile` also fuses small kernels.", framework=_PT, cuda_graphs=(False,),
       torch_compile=(False,)),
    _a("launch.graphs.compiled", "`torch.compile` is in use without CUDA graphs: `mode=\"reduce-overhead\"` (or "
       "`\"max-autotune\"`) captures the compiled step in CUDA graphs and removes most launches.",
       framework=_PT, cuda_graphs=(False,), torch_compile=(True,)),
    _a("launch.graphs.all", "Every kernel already runs inside CUDA graphs: the host time is per graph launch and "
       "between them; put more work into each graph (larger batches, more of the step captured) or prepare the next "
       "launch while the GPU runs the current graph.", cuda_graphs=(True,)),
    _a("launch.graphs.more", "CUDA graphs are already in use: the launches that remain are outside them; capture "
       "more of the step in the graph (or fuse the kernels launched outside it).", cuda_graphs=(True,)),
    _a("launch.fuse", "Many tiny elementwise kernels are the usual source of launches: fuse them."),
    _a("other_api.find", "Find where this CUDA call is made in the step (nsys call stacks: `--cudabacktrace=all`) "
       "and move it out of the loop or make it asynchronous."),
    _a("nvtx.overlap", "The launching thread runs host code in this range (outside CUDA calls and OS calls that "
       "wait) and launches no kernel from it: overlap it with GPU work (prefetch on another thread/stream, async "
       "I/O) or shorten it.", os_runtime=(True,)),
    _a("nvtx.overlap.untraced", "The launching thread is in this range and launches no kernel from it; OS calls "
       "were not traced, so whether it computes or waits there is not known: capture with `--trace=osrt` (and CPU "
       "sampling) to tell, then overlap the work with the GPU or shorten it.", os_runtime=(False,),
       cpu_samples=(False,)),
    _a("nvtx.overlap.untraced.sampled", "The launching thread is in this range and launches no kernel from it; its "
       "CPU samples there (evidence above, `tables/host_samples.csv`) show what it ran, but OS calls were not traced, "
       "so what it blocks in is not known: capture with `--trace=osrt` to see the waits, then overlap the work with "
       "the GPU or shorten it.",
       os_runtime=(False,), cpu_samples=(True,)),
    _a("nvtx.overlap.unchecked", "The launching thread is in this range while the GPU idles (kernels were not "
       "attributed to ranges, so whether it launches from it is not known): overlap that work with GPU work "
       "(another thread or stream, async I/O) or shorten it."),
    _a("nvtx.overlap.launching", "The launching thread also launches kernels from this range: the idle time is the "
       "host work between those launches; move work that does not feed the GPU out of the loop, onto another "
       "thread, or overlap it with the previous step's GPU work."),
    _a("nvtx.op_ranges", "These are PyTorch's per-op ranges (`emit_nvtx` / `record_function`): the idle time in them "
       "is the framework's host work per op (dispatch, argument checks, the launch), not code to move out of the "
       "loop; CUDA graphs (`torch.compile(mode=\"reduce-overhead\")`, `torch.cuda.graphs`) or fewer, fused ops remove "
       "it. `emit_nvtx` itself adds host time to every op: size the overhead again in a capture without it.",
       framework=_PT_OR_UNKNOWN),
    _a("osrt.find", "The thread that feeds the GPU waits on the OS (locks, queues, sleeps, I/O): find what it waits "
       "for (`nsys --sample=cpu --backtrace`) and keep it off the critical path.", cpu_samples=(False,)),
    _a("osrt.samples", "The thread that feeds the GPU waits on the OS (locks, queues, sleeps, I/O): the CPU samples "
       "around these calls (host samples column, `tables/host_samples.csv`) show what it ran before waiting; keep "
       "the wait off the critical path.", cpu_samples=(True,)),
    _a("wait.io", "The threads it waits for read or write files: start those reads earlier (prefetch the next "
       "layer's or shard's weights while the GPU computes this one), read in larger blocks, put the files on faster "
       "storage (local NVMe, page cache; GPUDirect Storage for weights), or use more I/O threads."),
    _a("wait.copies", "The threads it waits for are in CUDA copy calls: the copy findings say whether those copies "
       "come from host memory the driver must stage, already run under the kernels, or set the pace on "
       "their copy path."),
    _a("wait.cpu", "The threads it waits for run code outside OS and CUDA calls: shorten that work or start it "
       "earlier; if they are Python threads they hold the GIL the launching thread needs, so move the work to a "
       "process or to native code that releases the GIL."),
    _a("wait.calls", "The threads it waits for are inside OS or CUDA calls that neither do file I/O nor copy (named "
       "above): find what those calls wait for or do, and start them earlier or take them off the launching "
       "thread's path."),
    _a("wait.unseen", "No other thread of its process is seen working during these waits (their OS calls are "
       "traced): if the thread waits for work from outside (requests, a queue fed by another process), the GPU "
       "idles for lack of load: batch requests or raise the load; else find what releases the waits (NVTX ranges "
       "on the worker threads, CPU sampling of the whole process tree).", workload=("inference", "unknown")),
    _a("wait.unseen.training", "No other thread of its process is seen working during these waits (their OS calls "
       "are traced): in a training loop it may be waiting for its next batch from another process (data-loader "
       "worker processes, a data service) — the GPU idles for want of input data: prepare the batches faster or "
       "further ahead; CPU sampling of the whole process tree and NVTX ranges in the data pipeline show which "
       "process runs through these waits.", workload=("training",)),
    _a("wait.other_process", "Another process ran on a CPU during these waits (named above: it was sampled running "
       "then): the launching thread may be waiting for its output — the step's input, or the previous step's output it "
       "drains. Shorten that process's work per step, or let the engine run the next "
       "step while it works (asynchronous output processing / scheduling); NVTX ranges in that process show which "
       "of its work the waits line up with.", workload=("inference", "unknown")),
    _a("wait.other_process.training", "Another process ran on a CPU during these waits (named above: it was sampled "
       "running then): in a training loop the launching thread may be waiting for the next batch that process "
       "prepares — a data-loader worker reading, decoding, augmenting or tokenizing samples. Make each batch "
       "cheaper to prepare (lighter decoding, decoding on the GPU, pre-processing the data set once, offline) or "
       "prepare more at once (more worker processes while CPU cores are free, batches prepared further ahead); NVTX "
       "ranges in that process show which of its work the waits line up with.", workload=("training",)),
    _a("wait.other_process.torch", "In PyTorch, if that process is a `DataLoader` worker: `num_workers` sets how "
       "many worker processes prepare batches and `prefetch_factor` how many batches each keeps ready ahead.",
       workload=("training",), framework=_PT),
    _a("host_cpu.off_cpu", "The launching thread is off-CPU in these gaps (sampled elsewhere, never inside them): it "
       "sleeps or blocks outside traced calls, so there is no host code here to shorten. If it waits for work "
       "(requests, a queue), the GPU idles for lack of load: batch requests or raise the load; else trace OS calls "
       "(`--trace=osrt`) to see what it blocks in.", host_thread_off_cpu=(True,), workload=("inference", "unknown")),
    _a("host_cpu.off_cpu.training", "The launching thread is off-CPU in these gaps (sampled elsewhere, never inside "
       "them): it sleeps or blocks outside traced calls, so there is no host code here to shorten. In a training loop "
       "it may be waiting for its next batch (from data-loader worker processes or a data service): trace OS calls "
       "(`--trace=osrt`) to see what it blocks in, and see which processes run meanwhile (the whole process tree "
       "sampled) to find what prepares the batches.", host_thread_off_cpu=(True,), workload=("training",)),
    # py-spy samples a Python interpreter only: named for a host known to be one (``native_host`` False), not for a
    # native or unknown one (docs/FINDINGS.md)
    _a("host_cpu.profile", "Profile the host code that runs while the GPU idles (`nsys --sample=cpu`, py-spy) and "
       "overlap CPU work (scheduling, data preparation, Python) with GPU execution.", cpu_samples=(False,),
       host_thread_off_cpu=(False,), native_host=(False,)),
    _a("host_cpu.profile.native", "Profile the host code that runs while the GPU idles (`nsys --sample=cpu`) and "
       "overlap CPU work (scheduling, data preparation) with GPU execution.", cpu_samples=(False,),
       host_thread_off_cpu=(False,), native_host=(True, None)),
    _a("host_cpu.samples", "The CPU samples of the launching thread (evidence above, `tables/host_samples.csv`) name "
       "the code that ran while the GPU idled: shorten it, move it to another thread, or overlap it with GPU "
       "execution.", cpu_samples=(True,)),
    _a("unknown.trace_cuda", "Capture with `--trace=cuda` so kernels link to the CUDA calls that launched them."),
    _a("unknown.unlinked", "Keep the links from the GPU work to its launch calls: capture the launching calls together "
       "with the GPU work (a capture or export range that starts after the launches loses them) and export with an "
       "nsys that writes the kernels' `correlationId`."),
    _a("unknown.no_global_pid", "Keep each kernel's process in the export: export with an nsys whose kernel table "
       "writes `globalPid` (or capture one process per report), so that a kernel links to its own process's launch "
       "call instead of a correlation id several processes used."),
    # ---- stack-specific tips (serving engines: inference only)
    _a("launch.vllm", "vLLM: make sure decode runs in CUDA graphs (no `--enforce-eager`; the captured batch sizes "
       "must cover your running batch sizes) and keep torch.compile fusion enabled.",
       stack=("vllm",), workload=("inference",)),
    _a("launch.sglang", "SGLang: keep CUDA graphs enabled (no `--disable-cuda-graph`; raise `--cuda-graph-max-bs` "
       "to cover the running batch sizes).", stack=("sglang",), workload=("inference",)),
    _a("launch.trtllm", "TensorRT-LLM: enable CUDA graphs for generation steps and in-flight batching.",
       stack=("trtllm",), workload=("inference",), cuda_graphs=(False,)),
    _a("launch.trtllm.graphs", "TensorRT-LLM: CUDA graphs are already in use; in-flight batching puts more requests "
       "into each generation step, so each launch carries more work.", stack=("trtllm",), workload=("inference",),
       cuda_graphs=(True,)),
    _a("sync.vllm", "vLLM: look for `.item()`/`.cpu()`/`.tolist()` on GPU tensors in the step (sampling, logits "
       "processors, stop checks); `--async-scheduling` overlaps output processing with the next step.",
       stack=("vllm",), workload=("inference",)),
    _a("sync.sglang", "SGLang: keep the overlap scheduler on (no `--disable-overlap-schedule`) so the CPU prepares "
       "the next batch while the GPU runs.", stack=("sglang",), workload=("inference",)),
    _a("host_cpu.vllm", "vLLM: `--async-scheduling` overlaps scheduling and output processing with GPU execution; "
       "CUDA graphs (no `--enforce-eager`) shorten the host work per step.",
       stack=("vllm",), workload=("inference",), cuda_graphs=(False,)),
    _a("host_cpu.vllm.graphs", "vLLM: `--async-scheduling` overlaps scheduling and output processing with GPU "
       "execution (CUDA graphs are already in use).", stack=("vllm",), workload=("inference",), cuda_graphs=(True,)),
    _a("host_cpu.sglang", "SGLang: keep the overlap scheduler on (no `--disable-overlap-schedule`) and CUDA graphs "
       "enabled.", stack=("sglang",), workload=("inference",)),
    _a("host_cpu.trtllm", "TensorRT-LLM: keep the overlap scheduler enabled in the PyTorch backend and use CUDA "
       "graphs.", stack=("trtllm",), workload=("inference",), cuda_graphs=(False,)),
    _a("host_cpu.trtllm.graphs", "TensorRT-LLM: keep the overlap scheduler enabled in the PyTorch backend (CUDA "
       "graphs are already in use).", stack=("trtllm",), workload=("inference",), cuda_graphs=(True,)),
    _a("capture.vllm", "vLLM: start/stop the profiler from vLLM itself (`vllm bench serve --profile`) with "
       "`nsys profile --capture-range=cudaProfilerApi`.", stack=("vllm",), workload=("inference",)),
    # ---- capture
    _a("capture.range", "Capture only the steady state: `nsys profile --capture-range=cudaProfilerApi` around a few "
       "steps after warm-up, or `--delay`/`--duration`."),
    _a("capture.iterations", "Capture several iterations after warm-up (steps or requests, each marked with an NVTX "
       "range so the steps are found), not one pass: `nsys profile --capture-range=cudaProfilerApi` around them, or "
       "`--delay`/`--duration`; one pass shows no steady state."),
    _a("capture.range.torch", "In PyTorch: `torch.cuda.profiler.start()` / `stop()` around those steps.",
       framework=_PT),
    _a("graph_trace.node", "Re-capture with `nsys profile --cuda-graph-trace=node` so every kernel inside the graphs "
       "is recorded; until then per-kernel tables and idle causes are unreliable."),
    _a("no_gpu_work.capture", "Capture with `nsys profile --trace=cuda,nvtx` around the GPU part of the program."),
    _a("too_little_work.capture", "Capture a run of the real workload (several steady steps after warm-up)."),
    _a("nccl.balance", "Balance the work before the collective on the late rank (uneven batch split, extra host "
       "work or a slower GPU); check its step timeline."),
    _a("nccl.launched_late", "The late rank's work reaches its GPU late (its collectives or the kernels before them): "
       "look at its GPU idle causes and at what its launching thread waits on before the collective (its input from "
       "another process, data loading, host work, a synchronisation, a GC pause); a faster GPU would not remove this "
       "waiting."),
    _a("nccl.gpu_work", "The late rank's GPU work before the collective takes longer: compare its kernels with a "
       "waiting rank's (more work, or a slower or throttled GPU: check its clocks with `nvidia-smi -q -d "
       "CLOCK,PERFORMANCE`), and balance the work across ranks."),
    _a("nvtx.per_thread", "nsys gives a kernel the NVTX ranges open on its launching thread when the launch call "
       "runs: the thread named first opens ranges, but the uncovered kernels are launched outside them; widen them "
       "(one range around each whole step or phase on that thread)."),
    _a("nvtx.other_thread", "The uncovered kernels are launched by a thread that opens no NVTX range (nsys "
       "attributes ranges per thread): add ranges on that thread, not only on the main one."),
    _a("nvtx.autograd", "The uncovered kernels are the backward pass, launched by PyTorch's autograd thread, which "
       "opens no range of its own: ranges around `loss.backward()` on the main thread cannot cover them; "
       "`torch.autograd.profiler.emit_nvtx()` puts ranges on the autograd thread too.",
       workload=("training",), framework=_PT_OR_UNKNOWN),
    _a("nvtx.add.training", "Add NVTX ranges around forward, backward and the optimizer step to split each "
       "training step's GPU time.", workload=("training",)),
    _a("nvtx.add.inference", "Add NVTX ranges around each prefill and decode step on the thread that launches them "
       "to get per-phase GPU time.", workload=("inference",)),
    _a("mixed.table", "See the idle-cause table: several small causes add up; the largest is the place to start."),
    # ---- kernels
    _a("gpu_bound.kernels", "Optimize the largest categories first (see the kernel table): faster kernels, fewer "
       "bytes moved, or more work per kernel (larger batches)."),
    _a("gpu_bound.comms", "Shorten or hide the collectives: overlap them with compute (DDP bucketed all-reduce "
       "during backward, FSDP prefetch of the next all-gather), fewer or larger messages, and check the other ranks "
       "for a straggler the collectives wait for (`nsys-llm-explain` cluster view over every rank's trace)."),
    _a("comm_exposed.ddp", "DDP overlaps its bucketed all-reduce with backward only when the gradients reach "
       "it during backward: use `DistributedDataParallel` rather than all-reducing the gradients after "
       "`backward()`, try a smaller `bucket_cap_mb` (the first buckets leave earlier) and "
       "`gradient_as_bucket_view=True`; with gradient accumulation, `no_sync()` on all but the last micro-batch.",
       workload=("training",), framework=_PT_OR_UNKNOWN, transformer_engine=(False,)),
    _a("comm_exposed.te", "TransformerEngine layers (Megatron-LM / NeMo): overlap the tensor- / sequence-parallel "
       "all-gathers and reduce-scatters with the GEMMs (`--tp-comm-overlap`, TransformerEngine's userbuffers) and "
       "the data-parallel gradient reduction and parameter all-gather with backward / forward "
       "(`--overlap-grad-reduce`, `--overlap-param-gather` with the distributed optimizer).",
       workload=("training",), transformer_engine=(True,)),
    _a("comm_exposed.fsdp", "FSDP: prefetch the next all-gather while the current layer computes "
       "(`backward_prefetch=BackwardPrefetch.BACKWARD_PRE`, `forward_prefetch=True`; FSDP2: "
       "`set_modules_to_forward_prefetch` / `set_modules_to_backward_prefetch`).", workload=("training",),
       framework=_PT_OR_UNKNOWN, transformer_engine=(False,)),
    _a("comm_exposed.tp", "With tensor parallelism (an all-reduce after each attention and MLP block, on the "
       "critical path): use the engine's custom (one-/two-shot) all-reduce and its fusion with the residual add and "
       "norm, or fewer tensor-parallel GPUs per replica (more replicas) when the model fits.",
       workload=("inference",), custom_allreduce=(False,)),
    _a("comm_exposed.tp.custom", "With tensor parallelism (an all-reduce after each attention and MLP block, on the "
       "critical path): the engine's custom all-reduce already runs (kernels of category `custom_allreduce`); fuse it "
       "with the residual add and norm where the engine offers that fusion, or use fewer tensor-parallel GPUs per "
       "replica (more replicas) when the model fits.", workload=("inference",), custom_allreduce=(True,)),
    _a("comm_exposed.tp.vllm", "vLLM: no custom all-reduce kernel ran (every all-reduce here is NCCL's): check that "
       "`--disable-custom-all-reduce` is not set and that the GPUs have peer-to-peer access (without it, and for "
       "message sizes its kernels do not cover, vLLM falls back to NCCL).", workload=("inference",),
       stack=("vllm",), custom_allreduce=(False,)),
    _a("comm_exposed.tp.sglang", "SGLang: no custom all-reduce kernel ran (every all-reduce here is NCCL's): check "
       "that `--disable-custom-all-reduce` is not set and that the GPUs have peer-to-peer access (without it, and for "
       "message sizes its kernels do not cover, SGLang falls back to NCCL).", workload=("inference",),
       stack=("sglang",), custom_allreduce=(False,)),
    _a("comm_exposed.ep", "Expert parallelism's all-to-all (token dispatch and combine) with no compute beside it: "
       "overlap it with other work (the shared expert, or a second micro-batch: two-batch overlap), balance the "
       "tokens per expert (expert-parallel load balancing: the slowest rank sets each exchange's end), or spread fewer "
       "expert-parallel ranks across nodes (the exchange is fastest inside one NVLink domain)."),
    _a("comm_exposed.pp", "Point-to-point kernels (send / recv) with no compute beside them: with pipeline "
       "parallelism, a stage waiting for its neighbour's activations or gradients (the pipeline bubble); more "
       "micro-batches per step or an interleaved (virtual-stage) 1F1B schedule shrink it, fewer stages remove part of "
       "it.", workload=("training", "unknown")),
    _a("comm_exposed.pp.inference", "Point-to-point kernels (send / recv) with no compute beside them: with pipeline "
       "parallelism, a stage waiting for its neighbour's activations (the pipeline bubble): keep as many batches in "
       "flight as there are stages (enough concurrent requests), or prefer tensor parallelism inside a node; a "
       "KV-cache hand-off between a prefill and a decode engine overlaps compute when sent layer by layer.",
       workload=("inference",)),
    _a("comm_exposed.generic", "Overlap the collectives with independent compute (issue them on a side stream "
       "ahead of the work that does not need their result), send fewer and larger messages, and check the other "
       "ranks for a late peer the collectives wait for (`nsys-llm-explain` cluster view over every rank's trace)."),
    _a("comm_exposed.generic.here", "Overlap the collectives with independent compute (issue them on a side stream "
       "ahead of the work that does not need their result) and send fewer and larger messages; the NCCL section "
       "compares the ranks this trace holds for a late one (ranks captured in other traces: `nsys-llm-explain` "
       "cluster view over every rank's trace)."),
    _a("fp32.tf32", "Let FP32 matmuls use TF32 tensor cores: `torch.backends.cuda.matmul.allow_tf32 = True` / "
       "`torch.set_float32_matmul_precision('high')` (accuracy close to FP32 for most models).",
       gpu_tf32=(True,), framework=_PT_OR_UNKNOWN, fp32_simt_gemm=(True,)),
    _a("fp32.tf32.conv", "Let FP32 convolutions use TF32 tensor cores: `torch.backends.cudnn.allow_tf32 = True` "
       "(PyTorch's default, so it may have been switched off; the matmul settings do not reach cuDNN), and "
       "`torch.backends.cudnn.benchmark = True` so that cuDNN times its algorithms for each input shape.",
       gpu_tf32=(True,), framework=_PT_OR_UNKNOWN, fp32_simt_conv=(True,)),
    _a("fp32.bf16", "Or run the model in bfloat16 (`torch.autocast('cuda', dtype=torch.bfloat16)` or "
       "`model.to(torch.bfloat16)`): tensor cores, half the bytes, no loss scaling.",
       gpu_bf16=(True,), framework=_PT_OR_UNKNOWN),
    _a("fp32.fp16", "This GPU's tensor cores take FP16, not TF32/BF16: run the model in float16 "
       "(`torch.autocast('cuda', dtype=torch.float16)`, which covers matmuls and convolutions).",
       gpu_fp16_tensor_cores=(True,), gpu_tf32=(False,),
       framework=_PT_OR_UNKNOWN),
    _a("fp32.fp16.scaler", "Training in FP16 needs loss scaling (`torch.cuda.amp.GradScaler`) to keep small "
       "gradients.", gpu_fp16_tensor_cores=(True,), gpu_tf32=(False,), workload=("training",),
       framework=_PT_OR_UNKNOWN),
    _a("fp32.generic", "Run these GEMMs / convolutions in a tensor-core precision this GPU supports (see "
       "`facts.gpus`): tensor cores are several times faster than FP32 on CUDA cores.",
       gpu_fp16_tensor_cores=(True, None)),
    # FlashAttention-2 (and SDPA's flash backend) need compute capability ≥ 8.0, the generation that brought BF16
    # tensor cores: ``gpu_bf16`` tells the two lines apart (None: the GPU is not known, or the GPUs differ)
    _a("attention.fused", "Use a fused attention kernel: `torch.nn.functional.scaled_dot_product_attention` "
       "(FlashAttention / memory-efficient backends), FlashAttention or FlashInfer.", framework=_PT_OR_UNKNOWN,
       gpu_bf16=(True, None)),
    _a("attention.fused.pre_ampere", "Use a fused attention kernel: "
       "`torch.nn.functional.scaled_dot_product_attention` (on this GPU its memory-efficient backend) or xformers' "
       "memory-efficient attention; FlashAttention-2 needs compute capability 8.0 or newer (Ampere).",
       framework=_PT_OR_UNKNOWN, gpu_bf16=(False,)),
    _a("attention.fused.jax", "JAX: `jax.nn.dot_product_attention(..., implementation='cudnn')` runs cuDNN's fused "
       "(flash) attention on Ampere or newer; `implementation='xla'` leaves it as GEMMs and a softmax.",
       framework=("jax",), gpu_bf16=(True, None)),
    _a("elementwise.fuse", "Fuse elementwise chains into their producers (fused norm/activation/residual kernels) "
       "and drop needless casts and copies."),
    _a("elementwise.compile", "In PyTorch, `torch.compile` generates fused Triton kernels for such chains.",
       framework=_PT, torch_compile=(False,)),
    # ---- unified memory (findings/unified_memory.py; the copy finding when its largest copy is a Unified one)
    _a("um.prefetch", "Prefetch managed buffers to the GPU before the kernels that read them: "
       "`cudaMemPrefetchAsync` to the device, on the stream of those kernels (or one they wait for), so pages "
       "move in bulk ahead of use instead of on demand through GPU page faults.", unified_memory=(True,),
       um_user_prefetch=(False, None)),
    _a("um.prefetch.more", "The trace already prefetches (`cudaMemPrefetchAsync`); the migrations counted above are "
       "others: prefetch the pages those still move too, earlier (before the kernel that reads them is launched, on "
       "its stream or one it waits on) and in larger ranges; where they are evictions (more managed memory in use than "
       "the GPU holds), prefetching more only evicts sooner: shrink what the kernels touch.", unified_memory=(True,),
       um_user_prefetch=(True,)),
    _a("um.advise", "Tell the driver where managed data should live: `cudaMemAdvise` with "
       "`cudaMemAdviseSetPreferredLocation` (the GPU) for buffers the GPU owns, `cudaMemAdviseSetReadMostly` for "
       "data only read on the GPU (weights), so read copies are kept instead of pages moving back and forth.",
       unified_memory=(True,)),
    _a("um.device_alloc", "Memory that only the GPU uses does not need to be managed: allocate it with "
       "`cudaMalloc` (or `cudaMallocAsync`) and copy the inputs once, explicitly.", unified_memory=(True,)),
    _a("um.torch", "In PyTorch, tensors from the default CUDA caching allocator are plain device memory, not "
       "managed: managed memory comes from a custom allocator (`torch.cuda.memory.CUDAPluggableAllocator` around "
       "`cudaMallocManaged`) or an extension. Keep weights and activations on the default allocator, or prefetch "
       "the managed buffers before each forward pass.", unified_memory=(True,), framework=_PT),
    _a("um.see_finding", "These copies are Unified-Memory page migrations, not explicit copies: pinning host memory "
       "does not apply. The Unified Memory section breaks them down by direction and cause.",
       unified_memory=(True,)),
    # ---- per-step synchronization (findings/step_sync.py)
    _a("step_sync.overlap", "Overlap the per-step host work with the GPU: launch step N+1 before reading step N's "
       "results (double-buffer the outputs), copy the results asynchronously into pinned host memory and wait on an "
       "event recorded after that copy, not on a full stream/device synchronize."),
    _a("step_sync.gpu_sampling", "The host samples each step's next token (evidence above): the next step's input "
       "is that token, so it cannot be launched before this step's logits are read. Sample on the GPU instead — "
       "temperature, top-k / top-p / min-p, penalties and a grammar bitmask applied by kernels — and read back only "
       "the token ids; then the next step can be launched before they are read (one step behind), and the sync per "
       "step goes with the logits readback."),
    _a("step_sync.event_timed", "The thread reads CUDA event timings after its syncs (evidence above): the sync "
       "ends each timed step, the design of a benchmark harness (each repetition timed by its `cudaEventRecord` pair) "
       "or of a per-step timer. In a benchmark the host time between repetitions is outside the events' measurement: "
       "leave the sync. A timer in a real loop costs this idle on every step: time fewer steps, or read each step's "
       "events one step later (`event.query()` / at the next step) instead of synchronizing on them."),
    _a("step_sync.overlap.torch", "In PyTorch: `out.to('cpu', non_blocking=True)` into a pinned buffer, "
       "`torch.cuda.Event().record()` after it and `event.synchronize()` only when the values are needed (one step "
       "later), instead of `.item()` / `.cpu()` / `.tolist()` right after the step.", framework=_PT),
    _a("step_sync.vllm", "vLLM: `--async-scheduling` schedules step N+1 and processes step N's outputs while the "
       "GPU runs.", stack=("vllm",), workload=("inference",)),
    _a("step_sync.sglang", "SGLang: the overlap scheduler runs the CPU work of the next batch while the GPU runs "
       "this one; it is on unless the server was started with `--disable-overlap-schedule`.",
       stack=("sglang",), workload=("inference",)),
    _a("step_sync.trtllm", "TensorRT-LLM (PyTorch backend): keep the overlap scheduler on (the default; "
       "`disable_overlap_scheduler=True` turns it off) so step n+1 is launched before step n's outputs are "
       "processed.", stack=("trtllm",), workload=("inference",)),
)}


#: words of an advice line about a cost paid in every step (findings/idle.py leaves such lines out when one pause
#: holds most of a finding's time)
_PER_STEP = re.compile(r"each step|per step|every step|per-step|next step|each batch|next batch")


def speaks_of_steps(aid: str) -> bool:
    """True when advice line ``aid`` speaks of a cost paid in every step (or batch)."""
    return bool(_PER_STEP.search(ADVICE[aid].text))


def advise(ids: Iterable[str], facts: Mapping[str, FactValue]) -> Tuple[str, ...]:
    """The texts of the lines ``ids`` (in that order) that the facts allow."""
    return tuple(ADVICE[i].text for i in ids if ADVICE[i].allowed(facts))
