"""Words of the findings: titles and advice per idle-cause kind, and stack-specific tips (used only when
the trace looks like that stack)."""

from __future__ import annotations

from typing import Dict, List

CAUSE_TEXT: Dict[str, Dict] = {
    "copy": {
        "many": "Copies keep the kernels waiting: {share:.1f} % of the window",
        "title": "Copies keep the kernels waiting: `{what}` copies fill {share:.1f} % of the window",
        "by": "copy kind",
        "advice": ["Overlap copies with compute: issue them on a side stream from pinned memory "
                   "(`pin_memory()`, `non_blocking=True`) and prefetch the next step's data while this step runs.",
                   "Device-to-device copies usually come from `.contiguous()`, `torch.cat`, `.clone()` or layout "
                   "changes: remove them or fuse them into the producing kernel."]},
    "queued_latency": {
        "title": "Back-to-back kernels leave the GPU idle with the next one already queued ({share:.1f} % of "
                 "the window): per-kernel launch latency",
        "advice": ["Each kernel boundary costs a few µs of GPU-side latency even when the work is queued (CUDA "
                   "graphs included): fewer, larger kernels (fusion, `torch.compile`) remove boundaries; "
                   "programmatic dependent launch overlaps a kernel's prologue with the previous one."]},
    "queued": {
        "title": "The GPU waits with work already queued ({share:.1f} % of the window): a stream/event dependency "
                 "or launch latency, not the host",
        "advice": ["Look at the largest gaps: the next kernel was already launched, so it waited on another stream, "
                   "an event (`cudaStreamWaitEvent`) or a copy; reorder the streams or remove the dependency."]},
    "sync": {
        "many": "Host blocks in synchronize calls while the GPU idles ({share:.1f} % of the window)",
        "title": "Host blocks in `{what}` while the GPU idles ({share:.1f} % of the window)",
        "by": "call",
        "advice": ["Remove per-step host synchronization from the loop (`.item()`, `.cpu()`, "
                   "`torch.cuda.synchronize()`), or move the wait after the next step has been launched."]},
    "sync_memcpy": {
        "title": "Synchronous copies (`{what}`) stall the GPU ({share:.1f} % of the window)",
        "by": "call",
        "advice": ["Use `cudaMemcpyAsync` from pinned memory on a side stream (`tensor.to(device, "
                   "non_blocking=True)` after `pin_memory()`), and read results back once per step, not per op."]},
    "pageable_memcpy": {
        "title": "`{what}` from pageable memory blocks the host ({share:.1f} % of the window)",
        "by": "call",
        "advice": ["An async copy from pageable memory is staged by the driver and blocks the calling thread: "
                   "allocate the host buffer pinned (`pin_memory()` / `cudaHostAlloc`) so the copy is truly async."]},
    "alloc": {
        "many": "Allocation in the loop: the host is in alloc/free calls while the GPU idles "
                "({share:.1f} % of the window)",
        "title": "Allocation in the loop: the host is in `{what}` while the GPU idles ({share:.1f} % of the window)",
        "by": "call",
        "advice": ["Allocate once outside the loop or use a caching / stream-ordered allocator "
                   "(`cudaMallocAsync` with a pool); `cudaFree` synchronizes the device."]},
    "module_load": {
        "title": "One-time start-up cost: module loading / first kernel launches (`{what}`) take {share:.1f} % "
                 "of the window",
        "by": "call",
        "advice": ["This is paid once per process (lazy module loading, JIT): leave it out of the steady-state "
                   "capture (`--capture-range=cudaProfilerApi` after warm-up) rather than optimizing it."]},
    "launch": {
        "title": "Launch calls (`{what}`) hold the host while the GPU idles ({share:.1f} % of the window)",
        "by": "call",
        "advice": ["Cut the number of launches per step: CUDA graphs (`torch.compile(mode=\"reduce-overhead\")`, "
                   "`torch.cuda.graphs`), kernel fusion (`torch.compile`, fused norms/activations), larger batches.",
                   "Many tiny elementwise kernels are the usual source: fuse them."]},
    "other_api": {
        "many": "The host is inside other CUDA calls while the GPU idles ({share:.1f} % of the window)",
        "title": "The host is inside `{what}` while the GPU idles ({share:.1f} % of the window)",
        "by": "call",
        "advice": ["Find where this CUDA call is made in the step (nsys call stacks: `--cudabacktrace=all`) and "
                   "move it out of the loop or make it asynchronous."]},
    "nvtx": {
        "many": "The GPU idles while the host is in NVTX ranges ({share:.1f} % of the window)",
        "title": "The GPU idles while the host is in NVTX range `{what}` ({share:.1f} % of the window)",
        "by": "range",
        "advice": ["The host thread that launches the GPU work is busy in this range and launches nothing: overlap "
                   "it with GPU work (prefetch on another thread/stream, async I/O) or shorten it."]},
    "osrt": {
        "many": "The launching thread is blocked in OS calls while the GPU idles ({share:.1f} % of the window)",
        "title": "The launching thread is blocked in `{what}` (OS runtime) while the GPU idles "
                 "({share:.1f} % of the window)",
        "by": "call",
        "advice": ["The thread that feeds the GPU waits on the OS (locks, queues, sleeps, I/O): find what it waits "
                   "for (`nsys --sample=cpu --backtrace`) and keep it off the critical path."]},
    "host_cpu": {
        "title": "Host gaps: the launching thread works outside CUDA calls while the GPU idles "
                 "({share:.1f} % of the window)",
        "noun": "host work",
        "advice": ["Profile the host side of the step (`nsys --sample=cpu`, py-spy) and overlap CPU work "
                   "(scheduling, data preparation, Python) with GPU execution."]},
    "unknown": {
        "title": "Idle with no linked host thread ({share:.1f} % of the window): its cause is unknown",
        "advice": ["Capture with `--trace=cuda` so kernels link to the CUDA calls that launched them."]},
}

STACK_TIPS = {
    "launch_overhead": {
        "vllm": "vLLM: make sure decode runs in CUDA graphs (no `--enforce-eager`; the captured batch sizes "
                "must cover your running batch sizes) and keep torch.compile fusion enabled.",
        "sglang": "SGLang: keep CUDA graphs enabled (no `--disable-cuda-graph`; raise `--cuda-graph-max-bs` to "
                  "cover the running batch sizes).",
        "trtllm": "TensorRT-LLM: enable CUDA graphs for generation steps and in-flight batching.",
    },
    "sync_stall": {
        "vllm": "vLLM: look for `.item()`/`.cpu()`/`.tolist()` on GPU tensors in the step (sampling, logits "
                "processors, stop checks); `--async-scheduling` overlaps output processing with the next step.",
        "sglang": "SGLang: keep the overlap scheduler on (no `--disable-overlap-schedule`) so the CPU prepares "
                  "the next batch while the GPU runs.",
    },
    "host_gap": {
        "vllm": "vLLM: `--async-scheduling` overlaps scheduling and output processing with GPU execution; "
                "CUDA graphs (no `--enforce-eager`) shorten the host work per step.",
        "sglang": "SGLang: keep the overlap scheduler on (no `--disable-overlap-schedule`) and CUDA graphs "
                  "enabled.",
        "trtllm": "TensorRT-LLM: keep the overlap scheduler enabled in the PyTorch backend and use CUDA graphs.",
    },
    "capture_window": {
        "vllm": "vLLM: start/stop the profiler from vLLM itself (`vllm bench serve --profile`) with "
                "`nsys profile --capture-range=cudaProfilerApi`.",
    },
}


def stack_tips(category: str, stack: str) -> List[str]:
    """The tip for ``category`` on ``stack`` (empty when the stack was not recognised)."""
    t = STACK_TIPS.get(category, {}).get(stack)
    return [t] if t else []
