"""Unified Memory scenario: GPT-2 inference on a Turing GPU whose weights live in CUDA managed memory.

Every decode step runs 12 transformer layers of PyTorch-eager FP16 kernels on one stream (GPU-bound, no idle cause
above 5 %). The big GEMMs touch weight pages that are not resident, so Unified Host-to-Device migrations (copy kind
11, managed → managed, cause "page fault" or "speculative prefetch") run underneath them, each preceded by a GPU
page-fault group; one migration per layer spills past the end of its GEMM. After the step the host reads the
logits from managed memory: CPU page faults, a small Unified Device-to-Host migration (cause page fault) and an
eviction (cause 4), both while the GPU is idle.

The facts are computed here, from the planted intervals, with the simulator's own interval helpers (never with
the package's analyses): per direction and per cause count / bytes / ns, GPU fault groups and faults (by access
type), CPU faults (by function), and per device ``|K|``, ``|K ∩ M|`` and ``|M \\ K|`` (``K`` kernel union,
``M`` migration union) over the whole capture.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from .idle_model import model_facts
from .rank import Rank
from .sim import US, Sim, overlap, union
from .steps import write_trace

__all__ = ["unified_memory"]

#: TARGET_INFO_GPU columns of a GeForce RTX 2080 Ti (Turing, sm75: FP16 tensor cores, no TF32/BF16)
TURING: Dict[str, Any] = {
    "name": "NVIDIA GeForce RTX 2080 Ti", "sm_count": 68, "memory_bandwidth": 616000000000,
    "total_memory": 11554717696, "chipName": "TU102", "l2CacheSize": 5767168, "clockRate": 1545000000,
    "computeMajor": 7, "computeMinor": 5, "smMajor": 7, "smMinor": 5,
}


class KU:
    """Kernel names of a PyTorch-eager FP16 GPT-2 forward pass on Turing."""

    GEMM_QKV = "turing_fp16_s1688gemm_fp16_128x128_ldg8_f2f_tn"
    GEMM_PROJ = "turing_fp16_s1688gemm_fp16_64x64_sliced1x4_ldg8_f2f_tn"
    GEMM_FC = "turing_fp16_s1688gemm_fp16_256x128_ldg8_f2f_tn"
    ATTN = "fmha_cutlassF_f16_aligned_64x64_rf_sm75(PyTorchMemEffAttention::AttentionKernel<cutlass::half_t, " \
           "cutlass::arch::Sm75, true, 64, 64, 64, true, true>::Params)"
    LN = "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::Half, float>(int, float, " \
         "c10::Half const*, c10::Half const*, c10::Half const*, float*, float*, c10::Half*)"
    GELU = "void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase" \
           "&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#2}::operator()() const::{lambda(" \
           "c10::Half)#1}, at::detail::Array<char*, 2> >(int, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase" \
           "&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#2}::operator()() const::{lambda(" \
           "c10::Half)#1}, at::detail::Array<char*, 2>)"
    ADD = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::Half>, " \
          "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<c10::Half>, at::detail::Array<char*, 3>)"
    LM_HEAD = "turing_fp16_s1688gemm_fp16_128x256_ldg8_f2f_tn"
    ARGMAX = "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<c10::Half, at::native::ArgMaxOps<" \
             "c10::Half>, unsigned int, long, 4> >(at::native::ReduceOp<c10::Half, at::native::ArgMaxOps<c10::Half>," \
             " unsigned int, long, 4>)"


#: one layer: (kernel, duration ns, migrations planted under it: [(offset from kernel start, duration, bytes,
#: cause)]) — offsets/durations in ns; a migration may end after its kernel (the last one of GEMM_PROJ's 2nd use)
LAYER: List[Tuple[str, int, List[Tuple[int, int, int, int]]]] = [
    (KU.LN, 12 * US, []),
    (KU.GEMM_QKV, 80 * US, [(4 * US, 25 * US, 262_144, 2), (31 * US, 25 * US, 262_144, 3)]),
    (KU.ATTN, 25 * US, []),
    (KU.GEMM_PROJ, 40 * US, []),
    (KU.ADD, 8 * US, []),
    (KU.LN, 12 * US, []),
    (KU.GEMM_FC, 150 * US, [(5 * US, 50 * US, 1_048_576, 2), (60 * US, 50 * US, 1_048_576, 3)]),
    (KU.GELU, 20 * US, []),
    (KU.GEMM_PROJ, 140 * US, [(6 * US, 45 * US, 1_048_576, 2), (115 * US, 45 * US, 1_048_576, 2)]),
    (KU.ADD, 8 * US, []),
]
LAYERS, STEPS = 12, 30
FAULTS_PER_GROUP = 4             # faults of one GPU fault group (one page group read by the GEMM)
CPU_FAULTS = [("at::native::copy_kernel_cuda", "libtorch_cuda.so"),
              ("at::native::copy_kernel_cuda", "libtorch_cuda.so"),
              ("THPVariable_item", "libtorch_python.so")]


def unified_memory(path: str, seed: int = 0, flavor: Optional[str] = None) -> Dict[str, Any]:
    """GPT-2 decode loop on an RTX 2080 Ti with managed weights (module docstring)."""
    sim = Sim(flavor or "2024.2", seed)
    b = sim.b
    r = Rank(sim, 14501, 0)
    b.gpu(0, **TURING)
    mig: List[Dict[str, int]] = []          # planted migrations: start, end, kind, bytes, cause
    faults: List[Tuple[int, int, int, int]] = []   # GPU fault groups: start, end, faults, access
    cpu: List[Tuple[int, str, str]] = []
    addr = 0x7F00_0000_0000

    def migrate(s: int, e: int, kind: int, nbytes: int, cause: int) -> None:
        nonlocal addr
        b.um_migration(s, e, pid=r.pid, bytes=nbytes, copy_kind=kind, cause=cause, address=addr, device=0)
        mig.append({"start": s, "end": e, "kind": kind, "bytes": nbytes, "cause": cause})
        addr += nbytes

    for _ in range(STEPS):
        r.push("gpt2.generate_step")
        for _layer in range(LAYERS):
            for name, dur, under in LAYER:
                ks, _ke = r.launch(name, dur, grid=(68, 1, 1), scale=False)
                for off, d, nbytes, cause in under:
                    s = ks + off
                    if cause == 2:      # demand paging: the fault group is raised just before the migration
                        f0 = s - 3 * US
                        access = 2 if off > 100 * US else 1     # the late fault of the projection: a write
                        b.um_gpu_fault(f0, s, pid=r.pid, device=0, address=addr, faults=FAULTS_PER_GROUP,
                                       access=access)
                        faults.append((f0, s, FAULTS_PER_GROUP, access))
                    migrate(s, s + d, 11, nbytes, cause)
        r.launch(KU.LM_HEAD, 300 * US, grid=(68, 1, 1), scale=False)
        r.launch(KU.ARGMAX, 15 * US, grid=(1, 1, 1), scale=False)
        r.stream_sync()
        # the host reads the next token from managed memory: CPU faults, the page migrates back (GPU idle)
        t = r.cpu
        for i, (func, mod) in enumerate(CPU_FAULTS):
            b.um_cpu_fault(t + i * 2 * US, pid=r.pid, function=func, module=mod, address=addr + i * 4096)
            cpu.append((t + i * 2 * US, func, mod))
        migrate(t + 1 * US, t + 9 * US, 12, 65_536, 2)
        migrate(t + 12 * US, t + 40 * US, 12, 2_097_152, 4)
        r.host(60 * US)
        r.pop()
        r.host(40 * US)
    write_trace(sim, path)

    tables = b._activity_tables()
    gpu_table, cpu_table = "um_gpu_fault" in tables, "um_cpu_fault" in tables
    f = sim.facts("unified_memory", steps=STEPS, layers=LAYERS, gpu_name=TURING["name"])
    f.update(_um_facts(sim, r, mig, faults if gpu_table else [], cpu if cpu_table else []))
    f["gpu_fault_table"], f["cpu_fault_table"] = gpu_table, cpu_table
    model_facts(f, b, r.key, "", "")
    f["cause_kind"], f["cause_detail"] = f["top_idle_kind"], f["top_idle_detail"]   # no idle cause is planted
    return f


def _um_facts(sim: Sim, r: Rank, mig: List[Dict[str, int]], faults: List[Tuple[int, int, int, int]],
              cpu: List[Tuple[int, str, str]]) -> Dict[str, Any]:
    """Hand-computed Unified-Memory numbers of the planted rows (whole capture, device 0)."""
    by_dir: Dict[int, Dict[str, int]] = {}
    by_cause: Dict[int, Dict[str, int]] = {}
    for m in mig:
        for table, k in ((by_dir, m["kind"]), (by_cause, m["cause"])):
            row = table.setdefault(k, {"count": 0, "bytes": 0, "total_ns": 0})
            row["count"] += 1
            row["bytes"] += m["bytes"]
            row["total_ns"] += m["end"] - m["start"]
    kernels = union(sim.busy[r.key])
    m_union = union([(m["start"], m["end"]) for m in mig])
    over = sum(overlap(kernels, a, b) for a, b in m_union)
    k_ns = sum(b - a for a, b in kernels)
    m_ns = sum(b - a for a, b in m_union)
    access: Dict[int, Dict[str, int]] = {}
    for _s, _e, n, acc in faults:
        row = access.setdefault(acc, {"events": 0, "page_faults": 0})
        row["events"] += 1
        row["page_faults"] += n
    funcs: Dict[str, int] = {}
    for _t, func, _mod in cpu:
        funcs[func] = funcs.get(func, 0) + 1
    return {
        "um_migration_count": len(mig),
        "um_migration_bytes": sum(m["bytes"] for m in mig),
        "um_migration_ns": sum(m["end"] - m["start"] for m in mig),
        "um_by_direction": by_dir,
        "um_by_cause": by_cause,
        "um_gpu_fault_events": len(faults),
        "um_gpu_page_faults": sum(x[2] for x in faults),
        "um_gpu_faults_by_access": access,
        "um_gpu_fault_union_ns": sum(b - a for a, b in union([(s, e) for s, e, _, _ in faults])),
        "um_cpu_fault_count": len(cpu),
        "um_cpu_faults_by_function": funcs,
        "um_kernel_busy_ns": k_ns,
        "um_migration_union_ns": m_ns,
        "um_overlap_ns": over,
        "um_overlap_pct": 100.0 * over / k_ns,
        "um_migration_idle_ns": m_ns - over,
    }
