"""CPU samples planted in host-side idle (analyses/idle/host_samples.py, docs/MODEL.md "What the host ran during
host-side idle").

``host_samples``: 20 steps; per step the main thread opens ``execute_model``, launches 4 kernels, synchronizes,
closes the range, then works on the CPU outside any range or CUDA call for ~1.2 ms (``host_cpu`` idle) and inside
the NVTX range ``prepare_inputs_<i>`` for ~0.6 ms (``nvtx`` idle, detail ``prepare_inputs_N``). CPU samples are
planted with known callchains (templates of :data:`STACKS`, each labelled with the module group, leaf function and
caller the docs define for it):

* on the main thread inside the host-CPU and NVTX intervals (counted), inside the first launch call of steps ≥ 1
  while the GPU is still idle (``launch`` idle, counted), inside the synchronize call after the last kernel ended
  (``sync`` idle: not a host-side kind, not counted), and in the middle of a kernel (GPU busy: not counted);
* on a helper thread that made one CUDA call (so its samples are read) at the same times as the main thread's
  host-CPU samples (not the gap's host thread: not counted);
* on a thread without CUDA calls (not read at all).

The facts give, computed by the generator from what it planted (its own interval logic, not the package's): per
host kind and per cause ``kind|detail``, the samples inside and their counts per module group, module file, leaf
function and caller (``symbol|module file``; an unresolved address shows as ``[unresolved]``), plus the samples
left out per reason, and the planted idle model (:func:`idle_model.model_facts`).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Set, Tuple

from ..builder import TraceBuilder
from .idle_model import model_facts, range_detail
from .names import K, Shape
from .rank import Rank
from .sim import US, Sim
from .steps import segment, write_trace

__all__ = ["host_samples", "STACKS"]

PY = "/usr/lib/x86_64-linux-gnu/libpython3.10.so.1.0"
PYEXE = "/usr/bin/python3.10"
LIBC = "/usr/lib/x86_64-linux-gnu/libc.so.6"
TORCH = "/opt/venv/lib/python3.10/site-packages/torch/lib/libtorch_cpu.so"
CUDART = "/opt/venv/lib/python3.10/site-packages/nvidia/cuda_runtime/lib/libcudart.so.12"
CUBLAS = "/opt/venv/lib/python3.10/site-packages/nvidia/cublas/lib/libcublasLt.so.12"
CUDA = "/usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15"
KERNEL = "[kernel.kallsyms]"
ADDR = "0x{:x}"   # an unresolved frame: nsys stores the address as the symbol text

#: name → (frames leaf first, with "{a}" for a fresh address; expected group, leaf function, caller). Leaf
#: function / caller are ``symbol|module file``; the caller is the first frame outside libc and the OS kernel.
STACKS: Dict[str, Tuple[Sequence[Tuple[str, str, bool]], str, str, str]] = {
    "py_eval": ([("_PyEval_EvalFrameDefault", PY, False), ("_PyFunction_Vectorcall", PY, False),
                 ("main", PYEXE, False)],
                "python", "_PyEval_EvalFrameDefault|libpython3.10.so.1.0",
                "_PyEval_EvalFrameDefault|libpython3.10.so.1.0"),
    "py_dict": ([("dict_lookup", PY, False), ("_PyEval_EvalFrameDefault", PY, False)],
                "python", "dict_lookup|libpython3.10.so.1.0", "dict_lookup|libpython3.10.so.1.0"),
    "malloc": ([("_int_malloc", LIBC, False), ("__libc_malloc", LIBC, False), ("_PyObject_Malloc", PY, False),
                ("_PyEval_EvalFrameDefault", PY, False)],
               "allocator", "_int_malloc|libc.so.6", "_PyObject_Malloc|libpython3.10.so.1.0"),
    "write": ([("{a}", KERNEL, True), ("{a}", KERNEL, True), ("__GI___libc_write", LIBC, False),
               ("_Py_write", PY, False), ("_PyEval_EvalFrameDefault", PY, False)],
              "os_kernel", "[unresolved]|[kernel.kallsyms]", "_Py_write|libpython3.10.so.1.0"),
    "deep_kernel": ([("{a}", KERNEL, True)] * 17 + [("_Py_read", PY, False)],
                    "os_kernel", "[unresolved]|[kernel.kallsyms]", "[unresolved]|[kernel.kallsyms]"),
    "torch_copy": ([("at::native::copy_impl", TORCH, False), ("at::native::copy_", TORCH, False),
                    ("_PyEval_EvalFrameDefault", PY, False)],
                   "framework", "at::native::copy_impl|libtorch_cpu.so", "at::native::copy_impl|libtorch_cpu.so"),
    "memmove": ([("__memmove_avx_unaligned_erms", LIBC, False), ("at::native::copy_impl", TORCH, False)],
                "libc", "__memmove_avx_unaligned_erms|libc.so.6", "at::native::copy_impl|libtorch_cpu.so"),
    "cublas": ([("{a}", CUBLAS, False), ("cublasLtMatmul", CUBLAS, False)],
               "cuda_libs", "[unresolved]|libcublasLt.so.12", "[unresolved]|libcublasLt.so.12"),
    "driver": ([("{a}", CUDA, False), ("{a}", CUDA, False), ("cudaLaunchKernel", CUDART, False)],
               "cuda_driver", "[unresolved]|libcuda.so.550.54.15", "[unresolved]|libcuda.so.550.54.15"),
}
HOST_STACKS = ("py_eval", "py_eval", "py_dict", "malloc", "write", "deep_kernel")
RANGE_STACKS = ("torch_copy", "torch_copy", "memmove", "py_eval", "cublas")
HOST_KINDS = ("launch", "other_api", "nvtx", "osrt", "host_cpu")

_KERNELS: List[Shape] = [
    (K.RMS_NORM, 8000, (32, 1, 1)),
    (K.GEMM_QKV, 30000, (132, 1, 1)),
    (K.ACT_MUL, 9000, (32, 1, 1)),
    (K.GEMM_DOWN, 25000, (132, 1, 1)),
]
_API_KIND = {"cudaLaunchKernel": "launch", "cudaStreamSynchronize": "sync", "cudaGetDeviceCount": "other_api"}


def _mod(path: str) -> str:
    return path.rsplit("/", 1)[-1]


class _Planter:
    """Plants samples and keeps the generator's own expectation of where each one lands."""

    def __init__(self, sim: Sim) -> None:
        self.sim = sim
        self.samples: List[Tuple[int, int, str]] = []   # (time, thread, stack name)

    def plant(self, t: int, g: int, stack: str) -> None:
        frames, _, _, _ = STACKS[stack]
        out = []
        for sym, mod, km in frames:
            if sym == "{a}":
                sym = ADDR.format(0x7F0000000000 + int(self.sim.rng.integers(1 << 30)))
            out.append((sym, mod, km))
        self.sim.b.cpu_sample(t, tid_g=g, frames=out, cpu=int(self.sim.rng.integers(16)))
        self.samples.append((t, g, stack))


def _cause(b: TraceBuilder, main: int, t: int, first_corr: Set[int]) -> Optional[Tuple[str, str]]:
    """(kind, detail) of the idle ns at ``t`` on the main thread's device by the docs/MODEL.md precedence, from the
    planted rows (no copies in this trace; every gap's host thread is the main thread); ``None`` if busy."""
    kernels = sorted((r["start"], r["end"], r["correlationId"]) for r in b.rows("kernel"))
    if any(s <= t < e for s, e, _ in kernels):
        return None
    api = {r["correlationId"]: r for r in b.rows("runtime") if r["globalTid"] == main}
    nxt = next((k for k in kernels if k[0] > t), None)
    if nxt is not None and t >= api[nxt[2]]["end"]:
        return "queued", ""
    names = dict(b._string_list)
    for r in b.rows("runtime"):
        if r["globalTid"] == main and r["start"] <= t < r["end"]:
            base = names[r["nameId"]].split("_v")[0]
            kind = _API_KIND[base]
            if kind == "launch" and r["correlationId"] in first_corr:
                kind = "module_load"
            return kind, base
    inner = None
    for r in b.rows("nvtx"):
        if r["eventType"] == 59 and r["globalTid"] == main and r["start"] <= t < r["end"]:
            if inner is None or r["start"] > inner["start"]:
                inner = r
    if inner is not None:
        return "nvtx", range_detail(inner["text"])
    return "host_cpu", ""


def _count(into: Dict[str, Any], stack: str) -> None:
    _, group, fn, caller = STACKS[stack]
    frames = STACKS[stack][0]
    into["samples"] = into.get("samples", 0) + 1
    for key, val in (("groups", group), ("modules", _mod(frames[0][1])), ("functions", fn), ("callers", caller)):
        d = into.setdefault(key, {})
        d[val] = d.get(val, 0) + 1


def host_samples(path: str, seed: int = 0, flavor: Optional[str] = None) -> Dict[str, Any]:
    sim = Sim(flavor or "2024.2", seed)
    r = Rank(sim, 14001, 0)
    sim.b.gpu(0)
    helper = sim.b.thread(14001, 14002, "pt_data_worker")
    quiet = sim.b.thread(14001, 14003, "pt_autograd_0")
    pl = _Planter(sim)
    sim.b.runtime(r.cpu, r.cpu + 2 * US, tid_g=helper, name="cudaGetDeviceCount_v3020")
    steps, host_ns, range_ns = 20, 1200 * US, 600 * US
    for i in range(steps):
        r.push("execute_model")
        a0 = r.cpu
        ks, ke = r.launch(_KERNELS[0][0], _KERNELS[0][1], grid=_KERNELS[0][2])
        if i >= 1:
            pl.plant(a0 + 500, r.gtid, "driver")              # inside the launch call, GPU still idle
        pl.plant((ks + ke) // 2, r.gtid, "py_eval")            # GPU busy: never counted
        segment(r, _KERNELS[1:])
        done = r.gpu_done()
        r.stream_sync()
        pl.plant(done + 500, r.gtid, "py_dict")                # inside the sync call: kind sync, not counted
        r.pop()
        h0 = r.cpu
        r.host(sim.jit(host_ns, 0.05))
        for j, st in enumerate(HOST_STACKS):                   # host_cpu idle
            t = h0 + (j + 1) * 150 * US + int(sim.rng.integers(0, 50 * US))
            pl.plant(t, r.gtid, st if sim.rng.random() < 0.8 else HOST_STACKS[int(sim.rng.integers(6))])
            if j < 3:
                pl.plant(t + 7, helper, "torch_copy")          # another thread: never counted
        pl.plant(h0 + 10 * US, quiet, "py_eval")               # a thread without CUDA calls: not read
        r.push(f"prepare_inputs_{i}")
        n0 = r.cpu
        r.host(sim.jit(range_ns, 0.05))
        for j, st in enumerate(RANGE_STACKS):                  # nvtx idle
            pl.plant(n0 + (j + 1) * 80 * US + int(sim.rng.integers(0, 30 * US)), r.gtid, st)
        r.pop()
        r.host(sim.jit(30 * US, 0.2))
    write_trace(sim, path)
    first: Dict[int, Tuple[int, int]] = {}
    for k in sim.b.rows("kernel"):
        if k["demangledName"] not in first or k["start"] < first[k["demangledName"]][0]:
            first[k["demangledName"]] = (k["start"], k["correlationId"])
    first_corr = {c for _, c in first.values()}
    by_kind: Dict[str, Dict[str, Any]] = {}
    by_cause: Dict[str, Dict[str, Any]] = {}
    left_out = {"other_thread": 0, "no_cuda_thread": 0, "gpu_busy": 0, "not_host_kind": 0}
    for t, g, stack in pl.samples:
        if g == quiet:
            left_out["no_cuda_thread"] += 1
            continue
        if g != r.gtid:
            left_out["other_thread"] += 1
            continue
        c = _cause(sim.b, r.gtid, t, first_corr)
        if c is None:
            left_out["gpu_busy"] += 1
        elif c[0] not in HOST_KINDS:
            left_out["not_host_kind"] += 1
        else:
            _count(by_kind.setdefault(c[0], {}), stack)
            _count(by_cause.setdefault(f"{c[0]}|{c[1]}", {}), stack)
    f = sim.facts("host_gap", steps=steps, sample_total=len(pl.samples),
                  samples_read=sum(1 for _, g, _ in pl.samples if g != quiet),
                  samples_by_kind=by_kind, samples_by_cause=by_cause, samples_left_out=left_out,
                  main_gtid=r.gtid, helper_gtid=helper, quiet_gtid=quiet)
    return model_facts(f, sim.b, r.key, "host_cpu", "")
