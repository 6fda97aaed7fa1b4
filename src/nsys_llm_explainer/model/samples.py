"""CPU samples of the threads that made CUDA calls, normalized (``TraceModel.samples``): per sample its time,
thread (serialized globalTid), leaf frame and caller frame; frames interned with their display symbol, module file
name and **module group** (:data:`GROUPS`, once per distinct frame by :func:`frame_group`). Definitions:
docs/MODEL.md, "What the host ran during host-side idle". And the time and thread of the samples of every thread of
those processes taken while a CUDA-calling thread waits in an OS call (``TraceModel.wait_samples``): docs/MODEL.md,
"CPU samples during the waits".
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

import numpy as np

from ..read import fetch_samples as FS
from ..read.connection import TraceConnection
from ..read.schema import Schema
from ..vocabulary.os_calls import waits_of
from .intervals import IntervalUnion, points_inside, union_blocks
from .names import distinct_small, missing_name
from .timeline import few_distinct
from .trace import Kernels, OsCalls

#: module groups (key, label shown in reports); the rules are :func:`frame_group`'s regexes below, in words in
#: docs/MODEL.md, "Module groups".
GROUPS: Tuple[Tuple[str, str], ...] = (
    ("python", "Python interpreter"),
    ("framework", "PyTorch / framework"),
    ("cuda_driver", "CUDA driver"),
    ("cuda_libs", "CUDA runtime / libraries"),
    ("allocator", "allocator (malloc/free)"),
    ("os_kernel", "OS kernel"),
    ("libc", "libc / C runtime"),
    ("profiler", "profiler (Nsight Systems)"),
    ("other", "application / other"),
)
GROUP_KEYS = tuple(k for k, _ in GROUPS)
GROUP_LABEL = dict(GROUPS)
G = {k: i for i, k in enumerate(GROUP_KEYS)}
#: groups whose frames are skipped when looking for the caller
SYSTEM_GROUPS = ("os_kernel", "libc")
#: placeholder "modules" nsys writes into callchains (never real code)
PLACEHOLDERS = ("[Max depth]", "[Unknown]", "[Broken backtraces]")
UNRESOLVED = "[unresolved]"

_KERNEL_MOD = re.compile(r"^(\[kernel[^\]]*\]|vmlinux.*|\[vdso\])$")
_ALLOC_MOD = re.compile(r"^lib(jemalloc|tcmalloc|mimalloc)")
_ALLOC_SYM = re.compile(
    r"^(?:__GI_)?_*(?:libc_)?(?:malloc|free|calloc|realloc|memalign|posix_memalign|aligned_alloc|valloc|pvalloc|"
    r"cfree|int_malloc|int_free|int_realloc|int_memalign|malloc_consolidate|sysmalloc|tcache_\w+|unlink_chunk|"
    r"(?:je|tc|mi)_\w+)$|^(?:tcmalloc|jemalloc)::|^operator (?:new|delete)")
_MODULE_RULES: Tuple[Tuple[str, re.Pattern[str]], ...] = (
    ("python", re.compile(r"^(libpython\d|python(\d(\.\d+)?)?$)")),
    ("framework", re.compile(r"^(libtorch|libc10|_C[.\w-]*\.so|libtensorflow|_pywrap_tensorflow|xla_extension)")),
    ("cuda_driver", re.compile(r"^(libcuda\.so|libnvidia-)")),
    ("cuda_libs", re.compile(r"^(libcudart|libcublas|libcudnn|libnccl|libcufft|libcurand|libcusparse|libcusolver|"
                             r"libnvrtc|libnvJitLink|libnvToolsExt)")),
    ("profiler", re.compile(r"^(libToolsInjection|libcupti)")),
    ("libc", re.compile(r"^(libc[.-]|libpthread[.-]|libm[.-]|libdl[.-]|librt[.-]|ld-linux|ld-\d|ld\.so|"
                        r"libstdc\+\+|libgcc_s)")),
)


def module_file(path: str) -> str:
    """The file name of a module path (``/usr/lib/x86_64-linux-gnu/libc.so.6`` → ``libc.so.6``)."""
    return path.rsplit("/", 1)[-1]


def module_group(path: str) -> str:
    """Group key of a module path by its file name alone (``other`` when no rule matches)."""
    f = module_file(path)
    if _KERNEL_MOD.match(f):
        return "os_kernel"
    if _ALLOC_MOD.match(f):
        return "allocator"
    for key, rx in _MODULE_RULES:
        if rx.match(f):
            return key
    return "other"


def frame_group(symbol: str, module: str, kernel_mode: bool) -> str:
    """Group key of one frame (rules in :data:`GROUPS`)."""
    if kernel_mode:
        return "os_kernel"
    g = module_group(module)
    if g == "os_kernel":
        return g
    if _ALLOC_SYM.search(symbol):
        return "allocator"
    return g


def is_system_module(path: str) -> bool:
    """True for the modules skipped when looking for a sample's caller (system groups and placeholders)."""
    return (path.startswith("[") and path.endswith("]")) or module_group(path) in SYSTEM_GROUPS   # placeholders too


@dataclass(frozen=True)
class CpuSamples:
    """CPU samples of the threads that made CUDA calls, sorted by ``start`` (see module docstring)."""

    start: np.ndarray            # int64 ns
    gtid: np.ndarray             # int64 serialized globalTid
    leaf: np.ndarray             # int32 index into the frame tables
    caller: np.ndarray           # int32 index into the frame tables
    frame_symbol: List[str]      # display symbol of each distinct frame
    frame_module: List[str]      # module file name of each distinct frame
    frame_group: np.ndarray      # int8 index into GROUPS of each distinct frame
    total: int                   # rows of COMPOSITE_EVENTS (every thread)
    threads_read: Tuple[int, ...] = ()      # the threads whose samples were read
    requested: Optional[bool] = None        # capture metadata: CPU IP/backtrace sampling on (None: not recorded)
    caller_depth: int = FS.CALLER_DEPTH
    per_thread: Dict[int, int] = field(default_factory=dict)   # samples read per thread

    def __len__(self) -> int:
        return int(self.start.shape[0])


def _frames(keys: np.ndarray, strings: Dict[int, str]) -> Tuple[np.ndarray, List[str], List[str], np.ndarray]:
    """Intern frame keys (rows of symbol id, module id, kernel, unresolved; symbol -1 = no callchain):
    (row → frame index, display symbols, module file names, group per frame). Python work per distinct frame."""
    if keys.shape[0] == 0:
        return np.empty(0, np.int32), [], [], np.empty(0, np.int8)
    # one packed integer per row (dense codes of the symbol and module ids, then the two flags): a 1-D unique
    usym, sym_code = distinct_small(keys[:, 0] + 1)
    umod, mod_code = distinct_small(keys[:, 1] + 1)
    packed = (sym_code.astype(np.int64) * umod.shape[0] + mod_code) * 4 + keys[:, 2] * 2 + keys[:, 3]
    upacked, inv = np.unique(packed, return_inverse=True)
    flag = upacked % 4
    pair = upacked // 4
    uniq = np.stack([usym[pair // umod.shape[0]] - 1, umod[pair % umod.shape[0]] - 1, flag >> 1, flag & 1], axis=1)
    syms: List[str] = []
    mods: List[str] = []
    groups = np.empty(uniq.shape[0], np.int8)
    for j, (sid, mid, km, unres) in enumerate(uniq.tolist()):
        if sid < 0:
            sym, mod, g = "[no callchain]", "", "other"
        else:
            sym = strings.get(sid, missing_name(sid))
            mod_path = strings.get(mid, missing_name(mid))
            mod = module_file(mod_path)
            if unres and mod_path not in PLACEHOLDERS:
                sym = UNRESOLVED
            g = frame_group(sym, mod, bool(km))
        groups[j] = G[g]
        syms.append(sym)
        mods.append(mod)
    return inv.reshape(-1).astype(np.int32), syms, mods, groups


def system_module_ids(strings: Dict[int, str]) -> List[int]:
    """StringIds ids whose value is a system module path or a placeholder (one regex per candidate string:
    only values that look like a module — a path, a bracketed name, a shared object — are tested)."""
    return [i for i, v in strings.items()
            if v and (v[0] in "/[" or ".so" in v) and len(v) < 4096 and is_system_module(v)]


def build_samples(conn: TraceConnection, schema: Schema, strings: Dict[int, str],
                  api_gtid: Optional[np.ndarray], lo: Optional[int] = None, hi: Optional[int] = None
                  ) -> Optional[CpuSamples]:
    """The samples taken in ``[lo, hi]`` (the trace's activity span: idle gaps never lie outside it) of the
    threads in ``api_gtid`` (the CUDA API rows' threads; see module docstring); ``None`` when the export has no
    sample tables and the capture metadata does not say sampling was on. Costs one schema lookup when there are
    no sample tables, one ``count(*)`` when they are empty."""
    requested = FS.capture_requested(schema)
    if not FS.has_samples_tables(schema):
        if requested:
            e = np.empty(0, np.int64)
            return CpuSamples(e, e, np.empty(0, np.int32), np.empty(0, np.int32), [], [], np.empty(0, np.int8), 0,
                              requested=requested)
        return None
    total = FS.count_samples(conn, schema)
    threads = [int(t) for t in few_distinct(api_gtid).tolist() if int(t) >= 0] \
        if total and api_gtid is not None and api_gtid.shape[0] else []
    s = FS.fetch_samples(conn, schema, threads, system_module_ids(strings) if threads else [], lo,
                         None if hi is None else hi + 1)
    assert s is not None
    n = s["start"].shape[0]
    flags = s["flags"]
    leaf_key = np.stack([s["leaf_symbol"], s["leaf_module"], flags & 1, (flags >> 1) & 1], axis=1)
    caller_key = np.stack([s["caller_symbol"], s["caller_module"], np.zeros_like(flags), (flags >> 2) & 1], axis=1)
    # caller: the first non-system user frame; none found → the leaf
    keys = np.concatenate((leaf_key, np.where((s["caller_symbol"] >= 0)[:, None], caller_key, leaf_key)))
    idx, syms, mods, groups = _frames(keys, strings)
    leaf, caller = idx[:n], idx[n:]
    start, gtid = s["start"], s["gtid"]
    if n > 1 and not bool((start[1:] >= start[:-1]).all()):
        o = np.argsort(start, kind="stable")
        start, gtid, leaf, caller = start[o], gtid[o], leaf[o], caller[o]
    uniq, counts = np.unique(gtid, return_counts=True)
    return CpuSamples(start=start, gtid=gtid, leaf=leaf, caller=caller, frame_symbol=syms, frame_module=mods,
                      frame_group=groups, total=total, threads_read=tuple(threads), requested=requested,
                      per_thread={int(g): int(k) for g, k in zip(uniq.tolist(), counts.tolist())})


@dataclass(frozen=True)
class SampleTimes:
    """Time (``start``, int64 ns, ascending) and thread (``gtid``, serialized globalTid) of CPU samples; ``total``:
    rows of ``COMPOSITE_EVENTS`` (every thread, the whole capture)."""

    start: np.ndarray
    gtid: np.ndarray
    total: int

    def __len__(self) -> int:
        return int(self.start.shape[0])

    def clip(self, w0: int, w1: int) -> SampleTimes:
        """The samples taken in ``[w0, w1)``."""
        a, b = np.searchsorted(self.start, [w0, w1], side="left").tolist()
        return SampleTimes(self.start[a:b], self.gtid[a:b], self.total)


def _idle_somewhere(kernels: Optional[Kernels], lo: int, hi: int) -> Optional[IntervalUnion]:
    """The times in ``[lo, hi)`` when at least one device that ran a kernel runs none: the union over devices of the
    complement of its kernels' union (a superset of every device's idle gaps, whatever the copies count for); None
    when there is no kernel."""
    if kernels is None or len(kernels) == 0 or hi <= lo:
        return None
    ks, ke = np.asarray(kernels.start, np.int64), np.asarray(kernels.end, np.int64)
    dev = np.asarray(kernels.device, np.int64)
    starts, ends = [], []
    for d in np.unique(dev).tolist():      # per device (few)
        m = dev == d
        u = union_blocks(ks[m], ke[m])
        starts.append(np.concatenate(([lo], u.end)))
        ends.append(np.concatenate((u.start, [hi])))
    s = np.clip(np.concatenate(starts), lo, hi)
    e = np.clip(np.concatenate(ends), lo, hi)
    keep = e > s
    return union_blocks(s[keep], e[keep])


def build_wait_samples(conn: TraceConnection, schema: Schema, api_gtid: Optional[np.ndarray],
                       osrt: Optional[OsCalls], lo: Optional[int], hi: Optional[int],
                       kernels: Optional[Kernels] = None) -> Optional[SampleTimes]:
    """Time and thread of the samples of every thread of every process (the CUDA-calling ones and the others: a
    tokenizer, detokenizer, scheduler or data-loader process the launcher may wait for) taken in ``[lo, hi]``
    inside the union of the CUDA-calling threads' (``api_gtid``) waiting OS calls (the waits analysis then keeps
    those inside one launching thread's waits) or inside a time when a device idles between its ``kernels``
    (:func:`_idle_somewhere`: the idle-cause analysis keeps those inside one device's ``host_cpu`` gaps). ``None``
    when the export has no samples table; no read when the table is empty, or no CUDA-calling thread waits in an OS
    call and no device idles. Memory: two int64 per sample in those times' span while reading, per sample inside
    them after."""
    if not all(schema.has(FS.EVENTS, c) for c in ("start", "globalTid")):
        return None
    total = FS.count_samples(conn, schema)
    e = np.empty(0, np.int64)
    if not total or api_gtid is None or api_gtid.shape[0] == 0:
        return SampleTimes(e, e, total)
    parts: List[IntervalUnion] = []
    if osrt is not None and len(osrt) > 0:
        threads = few_distinct(np.asarray(api_gtid, np.int64))
        threads = threads[threads >= 0]
        o_s, o_e = np.asarray(osrt.start, np.int64), np.asarray(osrt.end, np.int64)
        rows = np.flatnonzero(waits_of(osrt.names)[np.asarray(osrt.name_idx, np.int64)] & (o_e > o_s)
                              & np.isin(np.asarray(osrt.gtid, np.int64), threads))
        if rows.shape[0]:
            parts.append(union_blocks(o_s[rows], o_e[rows]))       # rows sorted by start (OsCalls are)
    if lo is not None and hi is not None:
        idle = _idle_somewhere(kernels, int(lo), int(hi) + 1)
        if idle is not None and len(idle):
            parts.append(idle)
    if not parts:
        return SampleTimes(e, e, total)
    w = parts[0] if len(parts) == 1 else union_blocks(np.concatenate([p.start for p in parts]),
                                                      np.concatenate([p.end for p in parts]))
    a = int(w.start[0]) if lo is None else max(int(w.start[0]), int(lo))
    b = int(w.end[-1]) if hi is None else min(int(w.end[-1]), int(hi) + 1)
    got = FS.fetch_sample_times(conn, schema, None, a, b)
    if got is None:
        return SampleTimes(e, e, total)
    start, gtid = got["start"], got["gtid"]
    keep = points_inside(w, start)
    start, gtid = start[keep], gtid[keep]
    if start.shape[0] > 1 and not bool((start[1:] >= start[:-1]).all()):
        o = np.argsort(start, kind="stable")
        start, gtid = start[o], gtid[o]
    return SampleTimes(start, gtid, total)


__all__ = ["CpuSamples", "GROUPS", "GROUP_KEYS", "GROUP_LABEL", "SYSTEM_GROUPS", "SampleTimes", "build_samples",
           "build_wait_samples", "frame_group", "is_system_module", "module_file", "module_group", "system_module_ids"]
