"""Advice as knowledge: every recommendation line a finding may give, with the trace facts it requires
(docs/FINDINGS.md, "Advice and the facts it needs"): the idle-cause findings' lines (:mod:`.advice_idle`) and every
other finding's; the facts and their values: :mod:`.advice_facts`.
"""

from __future__ import annotations

import re
from typing import Dict, Iterable, Mapping, Tuple

from .advice_facts import PT, PT_OR_UNKNOWN, Advice, FactValue
from .advice_facts import line as _a
from .advice_idle import IDLE_LINES

#: every advice line of every finding, by id (the one table; findings pick lines by id)
ADVICE: Dict[str, Advice] = {a.id: a for a in (
    *IDLE_LINES,
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
    _a("copy_pace.host.resident", "Fewer bytes over the host link: keep what is streamed again and again resident "
       "on the GPU when memory allows (weights, KV blocks), or shrink it before it crosses (8-bit or 4-bit quantized "
       "weights move a half or a quarter of the bytes).", copies_host=(True,), copies_outlast_kernels=(True, None)),
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
       "copying what the kernels do not read; the kernels under it only get faster once the copies take less time."),
    _a("copy_pace.less", "A saturated copy engine gains from not copying what the kernels do not read (these copies "
       "are large: per-copy overhead is not what costs); the kernels under it only get faster once the copies take "
       "less time."),
    _a("capture.vllm", "vLLM: start/stop the profiler from vLLM itself (`vllm bench serve --profile`) with "
       "`nsys profile --capture-range=cudaProfilerApi`.", stack=("vllm",), workload=("inference",)),
    # ---- capture
    _a("capture.range", "Capture only the steady state: `nsys profile --capture-range=cudaProfilerApi` around a few "
       "steps after warm-up, or `--delay`/`--duration`.", capture_bounded=(False,)),
    _a("capture.range.later", "The recording is already bounded (a start delay, a start trigger or profiler start/stop "
       "calls) yet holds what the window leaves out: start it later or stop it sooner, so it holds only a few steps "
       "after warm-up.", capture_bounded=(True,)),
    _a("capture.iterations", "Capture several iterations after warm-up (steps or requests, each marked with an NVTX "
       "range so the steps are found), not one pass: `nsys profile --capture-range=cudaProfilerApi` around them, or "
       "`--delay`/`--duration`; one pass shows no steady state."),
    _a("capture.range.torch", "In PyTorch: `torch.cuda.profiler.start()` / `stop()` around those steps.",
       framework=PT),
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
       workload=("training",), framework=PT_OR_UNKNOWN),
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
       workload=("training",), framework=PT_OR_UNKNOWN, transformer_engine=(False,)),
    _a("comm_exposed.te", "TransformerEngine layers (Megatron-LM / NeMo): overlap the tensor- / sequence-parallel "
       "all-gathers and reduce-scatters with the GEMMs (`--tp-comm-overlap`, TransformerEngine's userbuffers) and "
       "the data-parallel gradient reduction and parameter all-gather with backward / forward "
       "(`--overlap-grad-reduce`, `--overlap-param-gather` with the distributed optimizer).",
       workload=("training",), transformer_engine=(True,)),
    _a("comm_exposed.fsdp", "FSDP: prefetch the next all-gather while the current layer computes "
       "(`backward_prefetch=BackwardPrefetch.BACKWARD_PRE`, `forward_prefetch=True`; FSDP2: "
       "`set_modules_to_forward_prefetch` / `set_modules_to_backward_prefetch`).", workload=("training",),
       framework=PT_OR_UNKNOWN, transformer_engine=(False,)),
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
       gpu_tf32=(True,), framework=PT_OR_UNKNOWN, fp32_simt_gemm=(True,)),
    _a("fp32.tf32.conv", "Let FP32 convolutions use TF32 tensor cores: `torch.backends.cudnn.allow_tf32 = True` "
       "(PyTorch's default, so it may have been switched off; the matmul settings do not reach cuDNN), and "
       "`torch.backends.cudnn.benchmark = True` so that cuDNN times its algorithms for each input shape.",
       gpu_tf32=(True,), framework=PT_OR_UNKNOWN, fp32_simt_conv=(True,)),
    _a("fp32.bf16", "Or run the model in bfloat16 (`torch.autocast('cuda', dtype=torch.bfloat16)` or "
       "`model.to(torch.bfloat16)`): tensor cores, half the bytes, no loss scaling.",
       gpu_bf16=(True,), framework=PT_OR_UNKNOWN),
    _a("fp32.fp16", "This GPU's tensor cores take FP16, not TF32/BF16: run the model in float16 "
       "(`torch.autocast('cuda', dtype=torch.float16)`, which covers matmuls and convolutions).",
       gpu_fp16_tensor_cores=(True,), gpu_tf32=(False,),
       framework=PT_OR_UNKNOWN),
    _a("fp32.fp16.scaler", "Training in FP16 needs loss scaling (`torch.cuda.amp.GradScaler`) to keep small "
       "gradients.", gpu_fp16_tensor_cores=(True,), gpu_tf32=(False,), workload=("training",),
       framework=PT_OR_UNKNOWN),
    _a("fp32.generic", "Run these GEMMs / convolutions in a tensor-core precision this GPU supports (see "
       "`facts.gpus`): tensor cores are several times faster than FP32 on CUDA cores.",
       gpu_fp16_tensor_cores=(True, None)),
    # FlashAttention-2 (and SDPA's flash backend) need compute capability ≥ 8.0, the generation that brought BF16
    # tensor cores: ``gpu_bf16`` tells the two lines apart (None: the GPU is not known, or the GPUs differ)
    _a("attention.fused", "Use a fused attention kernel: `torch.nn.functional.scaled_dot_product_attention` "
       "(FlashAttention / memory-efficient backends), FlashAttention or FlashInfer.", framework=PT_OR_UNKNOWN,
       gpu_bf16=(True, None)),
    _a("attention.fused.pre_ampere", "Use a fused attention kernel: "
       "`torch.nn.functional.scaled_dot_product_attention` (on this GPU its memory-efficient backend) or xformers' "
       "memory-efficient attention; FlashAttention-2 needs compute capability 8.0 or newer (Ampere).",
       framework=PT_OR_UNKNOWN, gpu_bf16=(False,)),
    _a("attention.fused.jax", "JAX: `jax.nn.dot_product_attention(..., implementation='cudnn')` runs cuDNN's fused "
       "(flash) attention on Ampere or newer; `implementation='xla'` leaves it as GEMMs and a softmax.",
       framework=("jax",), gpu_bf16=(True, None)),
    _a("elementwise.fuse", "Fuse elementwise chains into their producers (fused norm/activation/residual kernels) "
       "and drop needless casts and copies."),
    _a("elementwise.compile", "In PyTorch, `torch.compile` generates fused Triton kernels for such chains.",
       framework=PT, torch_compile=(False,)),
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
       "the managed buffers before each forward pass.", unified_memory=(True,), framework=PT),
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
       "later), instead of `.item()` / `.cpu()` / `.tolist()` right after the step.", framework=PT),
    _a("step_sync.vllm", "vLLM: `--async-scheduling` schedules step N+1 and processes step N's outputs while the "
       "GPU runs.", stack=("vllm",), workload=("inference",)),
    _a("step_sync.sglang", "SGLang: the overlap scheduler runs the CPU work of the next batch while the GPU runs "
       "this one; it is on unless the server was started with `--disable-overlap-schedule`.",
       stack=("sglang",), workload=("inference",)),
    _a("step_sync.trtllm", "TensorRT-LLM (PyTorch backend): keep the overlap scheduler on (the default; "
       "`disable_overlap_scheduler=True` turns it off) so step n+1 is launched before step n's outputs are "
       "processed.", stack=("trtllm",), workload=("inference",)),
)}


#: words of an advice line about a cost paid in every step or again and again (findings/idle.py leaves such lines
#: out when one pause holds most of a finding's time)
_PER_STEP = re.compile(r"each step|per step|every step|per-step|next step|each batch|next batch|again and again")


def speaks_of_steps(aid: str) -> bool:
    """True when advice line ``aid`` speaks of a cost paid in every step (or batch)."""
    return bool(_PER_STEP.search(ADVICE[aid].text))


def advise(ids: Iterable[str], facts: Mapping[str, FactValue]) -> Tuple[str, ...]:
    """The texts of the lines ``ids`` (in that order) that the facts allow."""
    return tuple(ADVICE[i].text for i in ids if ADVICE[i].allowed(facts))
