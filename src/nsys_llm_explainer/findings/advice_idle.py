"""The advice lines of the idle-cause findings (docs/FINDINGS.md, "Idle causes → findings"), the serving engines'
tips among them, and the words of one pause by workload (:data:`PAUSE_EXAMPLES`)."""

from __future__ import annotations

from typing import Dict, Tuple

from .advice_facts import PT, PT_OR_UNKNOWN, Advice
from .advice_facts import line as _a

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

#: the idle-cause findings' lines (:data:`.advice.ADVICE` holds them with every other finding's)
IDLE_LINES: Tuple[Advice, ...] = (
    # ---- idle causes
    _a("copy.overlap", "Overlap copies with compute: issue them asynchronously (`cudaMemcpyAsync`) on a side stream "
       "and prefetch the next step's data while this step runs.", copies_overlap_kernels=(False, None),
       copies_async_side_stream=(False, None)),
    _a("copy.overlap.torch", "In PyTorch: `.to(device, non_blocking=True)` issued on a side `torch.cuda.Stream`, "
       "with `wait_stream` (or an event) before the consumer uses the tensor.", framework=PT,
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
       "changes: remove them or fuse them into the producing kernel.", framework=PT_OR_UNKNOWN,
       copies_d2d=(True,), d2d_copies_large=(False,)),
    _a("copy.d2d.large", "These device-to-device copies average over 1 MiB each: besides large per-op copies "
       "(clones or concatenations of big tensors) they may move whole buffers (weights synced to another engine, "
       "caches, optimizer state). `nsys profile --cudabacktrace=memory` (it needs CPU sampling on) records the host "
       "call stack of each copy call; then copy less often what does not change, or let the consumer read the source "
       "buffer instead of a copy.", copies_d2d=(True,), d2d_copies_large=(True,)),
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
       framework=PT, torch_compile=(False,)),
    _a("compiled.graph_breaks", "`torch.compile` is already in use (Inductor's `triton_*` kernels are in the "
       "trace): the small kernels left are eager regions between graph breaks; list the breaks "
       "(`TORCH_LOGS=graph_breaks`, or `fullgraph=True` to fail on the first) and compile those regions too.",
       framework=PT, torch_compile=(True,)),
    _a("queued.dependency", "Look at the largest gaps: the next kernel was already launched, so it waited on another "
       "stream, an event (`cudaStreamWaitEvent`) or a copy — or, on one stream with none of those, the driver held "
       "the submission back (Windows' WDDM driver batches launches); reorder the streams or remove the dependency."),
    _a("sync.remove", "Remove per-step host synchronization from the loop, or move the wait after the next step has "
       "been launched."),
    _a("sync.remove.torch", "In PyTorch the usual sources are `.item()`, `.cpu()`, `.tolist()`, `print(tensor)` and "
       "`torch.cuda.synchronize()` inside the step.", framework=PT),
    _a("sync_memcpy.async", "Use `cudaMemcpyAsync` from pinned memory on a side stream, and read results back once "
       "per step, not per op."),
    _a("sync_memcpy.async.torch", "In PyTorch: `tensor.to(device, non_blocking=True)` after `pin_memory()`.",
       framework=PT),
    _a("pageable.pin", "An async copy from pageable memory is staged by the driver and blocks the calling thread: "
       "allocate the host buffer pinned (`cudaHostAlloc` / `cudaHostRegister`) so the copy is truly async.",
       host_copies_pageable=(True,)),
    _a("pageable.pin.torch", "In PyTorch: `tensor.pin_memory()` (or `pin_memory=True` in the `DataLoader`) before "
       "`.to(device, non_blocking=True)`.", framework=PT, host_copies_pageable=(True,)),
    _a("alloc.pool", "Allocate once outside the loop or use a caching / stream-ordered allocator (`cudaMallocAsync` "
       "with a pool); `cudaFree` synchronizes the device."),
    *(_a(aid, "Most of this idle time is one pause (the largest gap in the finding's evidence), not a cost paid in "
         f"every step: find what the program did then ({PAUSE_EXAMPLES[w]}) and whether it recurs; to size the cost "
         "the loop pays, capture steady steps away from it (`nsys profile --delay=SECONDS` / `--duration`, or "
         "`--capture-range=cudaProfilerApi`).", workload=tuple(ws)) for aid, w, ws in _PAUSE_LINES),
    _a("pause.torch", "In PyTorch, an epoch boundary starts the `DataLoader`'s worker processes again unless "
       "`persistent_workers=True`, and the first batch of the epoch waits until a worker has prepared it.",
       workload=("training",), framework=PT),
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
       "capture the step; `torch.compile` also fuses small kernels.", framework=PT, cuda_graphs=(False,),
       torch_compile=(False,)),
    _a("launch.graphs.compiled", "`torch.compile` is in use without CUDA graphs: `mode=\"reduce-overhead\"` (or "
       "`\"max-autotune\"`) captures the compiled step in CUDA graphs and removes most launches.",
       framework=PT, cuda_graphs=(False,), torch_compile=(True,)),
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
       framework=PT_OR_UNKNOWN),
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
       workload=("training",), framework=PT),
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
)
