"""Independent reference implementation of docs/MODEL.md (test-only oracle).

Nothing here imports the package: every number is recomputed from the SQLite export with plain SQL
and simple Python loops, following MODEL.md literally:

* per device, the kernel-busy set ``K`` (kernels + ``CUPTI_ACTIVITY_KIND_GRAPH_TRACE`` rows) and the
  copy set ``C`` (memcpy + memset rows), clipped to the window ``[w0, w1)``;
* ``busy_ns = |K|``, ``idle_ns = window_ns - busy_ns``, idle gaps = maximal intervals of
  ``[w0, w1) \\ K`` (leading and trailing gaps included);
* every idle ns charged to one ``(kind, detail)`` by the 13-kind precedence of MODEL.md;
* a device's role: ``kernels`` when a kernel or graph row intersects the window (``few kernels`` when it ran fewer
  than 20 kernels and is busy under 1 ms while another device is not), else ``copies only`` when a
  memcpy/memset row does; metrics with no device (``busy_pct``, ``idle_pct``, ``busy_ns``,
  ``idle_pct_change``) pool Σ busy / Σ window over the devices whose role is ``kernels`` in the steady window;
* the metric vocabulary of ``findings[].checks``.

Entry points: :func:`load` (read a trace once), :func:`device_timelines`, :func:`idle_causes`,
:func:`full_window` and the metric helpers at the end.
"""

from __future__ import annotations

import bisect
import re
import sqlite3
import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

PRECEDENCE = (
    "copy", "queued", "sync", "sync_memcpy", "pageable_memcpy", "alloc", "module_load",
    "launch", "other_api", "osrt", "nvtx", "host_cpu", "unknown",
)
RANK = {k: i for i, k in enumerate(PRECEDENCE)}
HOST_SEGMENT_KINDS = ("launch", "other_api", "osrt", "nvtx", "host_cpu")

# ----------------------------------------------------------------------------- OS calls that wait

def _documented_waits() -> frozenset:
    """The waiting OS calls as docs/MODEL.md lists them ("Waiting calls: `sem_wait`, …"), read from the text."""
    from pathlib import Path
    text = (Path(__file__).resolve().parents[1] / "docs" / "MODEL.md").read_text(encoding="utf-8")
    block = text.split("Waiting calls:", 1)[1].split("\n\n", 1)[0]
    return frozenset(re.findall(r"`([a-z0-9_]+)`", block))


WAITS = _documented_waits()


def is_wait(name: str) -> bool:
    """MODEL.md: a name waits when, without leading underscores and a trailing ``64``, it is listed."""
    n = name.strip().lstrip("_")
    return n in WAITS or (n.endswith("64") and n[:-2] in WAITS)


# ----------------------------------------------------------------------------- API name classes

_SUFFIX = re.compile(r"(_v\d+|_ptsz|_ptds)$")


def base_api_name(name: Optional[str]) -> str:
    """``cudaMemcpyAsync_ptsz_v7000`` -> ``cudaMemcpyAsync`` (suffixes stripped until none is left)."""
    s = name or ""
    while True:
        t = _SUFFIX.sub("", s)
        if t == s:
            return s
        s = t


SYNC_APIS = {
    "cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize", "cudaThreadSynchronize",
    "cuCtxSynchronize", "cuStreamSynchronize", "cuEventSynchronize",
}
LAUNCH_PREFIXES = (
    "cudaLaunchKernel", "cudaLaunchCooperativeKernel", "cuLaunchKernel", "cuLaunchCooperativeKernel",
    "cuLaunchGrid",
)
LAUNCH_EXACT = {"cudaGraphLaunch", "cuGraphLaunch", "cudaLaunch", "cuLaunch"}
ALLOC_PREFIXES = ("cudaMalloc", "cudaFree", "cuMemAlloc", "cuMemFree")
ALLOC_EXACT = {
    "cudaHostAlloc", "cuMemHostAlloc", "cuMemCreate", "cuMemMap", "cuMemRelease", "cuMemUnmap",
    "cuMemAddressReserve", "cuMemAddressFree",
}
COPY_PREFIXES = ("cudaMemcpy", "cudaMemset", "cuMemcpy", "cuMemset")


def is_sync(base: str) -> bool:
    return base in SYNC_APIS


def is_copy_api(base: str) -> bool:
    return base.startswith(COPY_PREFIXES)


def is_sync_copy_api(base: str) -> bool:
    return is_copy_api(base) and not base.endswith("Async")


def is_async_memcpy_api(base: str) -> bool:
    return base.startswith(("cudaMemcpy", "cuMemcpy")) and base.endswith("Async")


def is_alloc(base: str) -> bool:
    return base in ALLOC_EXACT or base.startswith(ALLOC_PREFIXES)


#: the program's profiler calls (they bound the recording under --capture-range=cudaProfilerApi) and the calls a
#: process makes once, when it initializes CUDA (docs/MODEL.md, kind 7)
PROFILER_CALLS = {"cudaProfilerStart", "cudaProfilerStop", "cuProfilerStart", "cuProfilerStop"}
INIT_CALLS = {"cuInit", "cuModuleGetLoadingMode", "cuDevicePrimaryCtxRetain", "cuCtxCreate"}


def is_module_load_name(base: str) -> bool:
    return "ModuleLoad" in base or "LibraryLoad" in base


def is_launch(base: str) -> bool:
    return base in LAUNCH_EXACT or base.startswith(LAUNCH_PREFIXES)


def normalize_nvtx(text: Optional[str]) -> str:
    """MODEL.md: a digit run becomes ``N`` unless it sits between two letters/digits (``h2d``, ``c10d`` kept)."""
    return re.sub(r"(?<![A-Za-z0-9])\d+|\d+(?![A-Za-z0-9])", "N", text or "")


# ----------------------------------------------------------------------------- loading

COPY_KIND_NAMES = {
    0: "Unknown", 1: "Host-to-Device", 2: "Device-to-Host", 3: "Host-to-Array", 4: "Array-to-Host",
    5: "Array-to-Array", 6: "Array-to-Device", 7: "Device-to-Array", 8: "Device-to-Device",
    9: "Host-to-Host", 10: "Peer-to-Peer", 11: "Unified Host-to-Device", 12: "Unified Device-to-Host",
    13: "Unified Device-to-Device",
}


@dataclass
class Api:
    start: int
    end: int
    tid: int
    pid: int
    corr: Optional[int]
    name: str          # base name


@dataclass
class Gpu:
    start: int
    end: int
    device: int
    pid: Optional[int]
    corr: Optional[int]
    name: Optional[str] = None       # demangled kernel name (None for graph-trace rows)
    short: Optional[str] = None
    launch: Optional[Api] = None
    graph: Optional[int] = None      # graphNodeId of a kernel, graphExecId of a whole-graph row (None: none)


@dataclass
class Copy:
    start: int
    end: int
    device: int
    pid: Optional[int]
    corr: Optional[int]
    detail: str
    pageable: bool
    user_prefetch: bool = False     # a Unified-Memory migration of migrationCause 1 (cudaMemPrefetchAsync)


@dataclass
class Trace:
    path: str
    kernels: List[Gpu] = field(default_factory=list)      # kernel table only
    graphs: List[Gpu] = field(default_factory=list)       # whole-graph executions
    copies: List[Copy] = field(default_factory=list)
    apis: List[Api] = field(default_factory=list)
    nvtx: List[Tuple[int, int, int, str]] = field(default_factory=list)   # start, end, tid, name
    osrt: List[Tuple[int, int, int, str]] = field(default_factory=list)
    other_ts: List[int] = field(default_factory=list)      # sync-row timestamps (full window only)
    nvtx_full_ts: List[int] = field(default_factory=list)  # NVTX range timestamps (full window only)
    nvtx_domains: set = field(default_factory=set)         # names of NVTX domains (eventType 75)
    pageable_calls: set = field(default_factory=set)       # (pid, corr) of copies with pageable memory
    d2h_calls: set = field(default_factory=set)            # (pid, corr) of device-to-host copies
    pageable_d2h_calls: set = field(default_factory=set)   # … of those into pageable memory
    first_launches: set = field(default_factory=set)       # id() of Api rows launching a first kernel
    mid_run: set = field(default_factory=set)              # pids whose capture began while they ran (MODEL.md, 7)

    @property
    def activity(self) -> List[Gpu]:
        return self.kernels + self.graphs

    @property
    def devices(self) -> List[int]:
        return sorted({g.device for g in self.activity})


def connect(path: str) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)


def _tables(conn) -> set:
    return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table','view')")}


def _cols(conn, table: str) -> set:
    return {r[1] for r in conn.execute(f"PRAGMA table_info({table})")}


def _pid_of_tid(g: int) -> int:
    return (g >> 24)


def load(path: str) -> Trace:
    """Read every row the model needs from the export (once)."""
    tr = Trace(str(path))
    conn = connect(str(path))
    try:
        tables = _tables(conn)
        strings: Dict[int, str] = {}
        if "StringIds" in tables:
            strings = dict(conn.execute("SELECT id, value FROM StringIds"))

        def s(i):
            return None if i is None else strings.get(i)

        # --- CUDA runtime / driver API rows (eventClass 0/1, NULL, or no column)
        if "CUPTI_ACTIVITY_KIND_RUNTIME" in tables:
            cols = _cols(conn, "CUPTI_ACTIVITY_KIND_RUNTIME")
            ec = "eventClass" if "eventClass" in cols else "NULL"
            nm = "name" if "name" in cols else "NULL"
            q = (f"SELECT start, end, globalTid, correlationId, nameId, {nm}, {ec} "
                 "FROM CUPTI_ACTIVITY_KIND_RUNTIME")
            for st, en, tid, corr, name_id, name_txt, cls in conn.execute(q):
                if cls not in (None, 0, 1) or st is None or en is None:
                    continue
                name = s(name_id) or name_txt
                tr.apis.append(Api(st, en, tid, _pid_of_tid(tid), corr, base_api_name(name)))

        by_key: Dict[Tuple[Optional[int], int], List[Api]] = defaultdict(list)
        by_corr: Dict[int, List[Api]] = defaultdict(list)
        for a in tr.apis:
            by_key[(a.pid, a.corr)].append(a)
            by_corr[a.corr].append(a)

        def link(pid, corr) -> Optional[Api]:
            if corr is None:
                return None
            cands = by_key.get((pid, corr), []) if pid is not None else by_corr.get(corr, [])
            if not cands:
                return None
            return min(cands, key=lambda a: (a.start, -a.end))

        # --- kernels and whole-graph executions
        if "CUPTI_ACTIVITY_KIND_KERNEL" in tables:
            cols = _cols(conn, "CUPTI_ACTIVITY_KIND_KERNEL")
            gp = "globalPid" if "globalPid" in cols else "NULL"
            dn = "demangledName" if "demangledName" in cols else "NULL"
            sn = "shortName" if "shortName" in cols else "NULL"
            gn = "graphNodeId" if "graphNodeId" in cols else "NULL"
            q = f"SELECT start, end, deviceId, {gp}, correlationId, {dn}, {sn}, {gn} FROM CUPTI_ACTIVITY_KIND_KERNEL"
            for st, en, dev, gpid, corr, dname, sname, node in conn.execute(q):
                pid = None if gpid is None else _pid_of_tid(gpid)
                short = s(sname)
                name = s(dname) or short
                tr.kernels.append(Gpu(st, en, dev, pid, corr, name, short, link(pid, corr), node))
        if "CUPTI_ACTIVITY_KIND_GRAPH_TRACE" in tables:
            cols = _cols(conn, "CUPTI_ACTIVITY_KIND_GRAPH_TRACE")
            gp = "globalPid" if "globalPid" in cols else "NULL"
            ge = "graphExecId" if "graphExecId" in cols else "NULL"
            q = f"SELECT start, end, deviceId, {gp}, correlationId, {ge} FROM CUPTI_ACTIVITY_KIND_GRAPH_TRACE"
            for st, en, dev, gpid, corr, exe in conn.execute(q):
                pid = None if gpid is None else _pid_of_tid(gpid)
                tr.graphs.append(Gpu(st, en, dev, pid, corr, None, None, link(pid, corr), exe))

        # --- copies
        if "CUPTI_ACTIVITY_KIND_MEMCPY" in tables:
            cols = _cols(conn, "CUPTI_ACTIVITY_KIND_MEMCPY")
            gp = "globalPid" if "globalPid" in cols else "NULL"
            mc = "migrationCause" if "migrationCause" in cols else "NULL"
            q = (f"SELECT start, end, deviceId, {gp}, correlationId, copyKind, srcKind, dstKind, {mc} "
                 "FROM CUPTI_ACTIVITY_KIND_MEMCPY")
            for st, en, dev, gpid, corr, ck, sk, dk, cause in conn.execute(q):
                pid = None if gpid is None else _pid_of_tid(gpid)
                pageable = sk == 0 or dk == 0
                detail = COPY_KIND_NAMES.get(ck, f"copyKind {ck}") + (" (pageable)" if pageable else "")
                tr.copies.append(Copy(st, en, dev, pid, corr, detail, pageable, cause == 1))
                if pageable:
                    tr.pageable_calls.add((pid, corr))
                if ck == 2:
                    tr.d2h_calls.add((pid, corr))
                    if dk == 0:
                        tr.pageable_d2h_calls.add((pid, corr))
        if "CUPTI_ACTIVITY_KIND_MEMSET" in tables:
            cols = _cols(conn, "CUPTI_ACTIVITY_KIND_MEMSET")
            gp = "globalPid" if "globalPid" in cols else "NULL"
            q = f"SELECT start, end, deviceId, {gp}, correlationId FROM CUPTI_ACTIVITY_KIND_MEMSET"
            for st, en, dev, gpid, corr in conn.execute(q):
                pid = None if gpid is None else _pid_of_tid(gpid)
                tr.copies.append(Copy(st, en, dev, pid, corr, "memset", False))
        # --- processes whose recording began while they ran (their first launches in it may not be their first)
        bounded = any(a.name in PROFILER_CALLS for a in tr.apis)
        if "META_DATA_CAPTURE" in tables:
            meta = dict(conn.execute("SELECT name, value FROM META_DATA_CAPTURE"))
            bounded = bounded or int(meta.get("START_DELAY_MS") or 0) > 0 or \
                (meta.get("START_TRIGGER") or "Immediate").strip() not in ("", "Immediate")
        gpu_rows = [(k.pid, k.start, k.launch) for k in tr.kernels] + \
            [(c.pid, c.start, link(c.pid, c.corr)) for c in tr.copies]
        inf = float("inf")
        first_call: Dict[int, float] = defaultdict(lambda: inf)
        for _, _, a in gpu_rows:
            if a is not None:
                first_call[a.pid] = min(first_call[a.pid], a.start)
        first_init: Dict[int, float] = defaultdict(lambda: inf)
        for a in tr.apis:
            if a.name in INIT_CALLS:
                first_init[a.pid] = min(first_init[a.pid], a.start)
        lead = {p for p, st, a in gpu_rows if a is None and st < first_call[p]}
        tr.mid_run = {p for p in {a.pid for a in tr.apis}
                      if first_init[p] > first_call[p] and (bounded or p in lead)}
        if "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION" in tables:
            for st, en in conn.execute("SELECT start, end FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"):
                tr.other_ts += [t for t in (st, en) if t is not None]

        # --- NVTX push/pop ranges (59; 70 = NVTXT import)
        if "NVTX_EVENTS" in tables:
            cols = _cols(conn, "NVTX_EVENTS")
            tid_col = "textId" if "textId" in cols else "NULL"
            max_ts = conn.execute(
                "SELECT max(max(coalesce(start, 0)), max(coalesce(end, 0))) FROM NVTX_EVENTS").fetchone()[0]
            q = f"SELECT start, end, eventType, globalTid, text, {tid_col} FROM NVTX_EVENTS"
            for st, en, et, tid, text, text_id in conn.execute(q):
                if et == 75 and text:
                    tr.nvtx_domains.add(text)
                if et in (59, 60, 70, 71) and st is not None:
                    tr.nvtx_full_ts += [st, en if en is not None else max_ts]
                if et not in (59, 70) or st is None or tid is None:
                    continue
                en = max_ts if en is None else en
                name = text if text is not None else s(text_id)
                tr.nvtx.append((st, en, tid, normalize_nvtx(name)))

        # --- OS runtime calls
        if "OSRT_API" in tables:
            for st, en, tid, name_id in conn.execute("SELECT start, end, globalTid, nameId FROM OSRT_API"):
                if st is None or en is None or tid is None:
                    continue
                tr.osrt.append((st, en, tid, s(name_id) or ""))
    finally:
        conn.close()

    # --- the launch call of the first kernel (by start) of each kernel name in its process, and of each graph's
    # first launch (the first kernel of each graph node id, the first whole-graph row of each graphExecId)
    first: Dict[Tuple[Optional[int], object], Gpu] = {}
    for k in sorted(tr.kernels, key=lambda k: (k.start, k.end, k.corr or 0)):
        first.setdefault((k.pid, k.name), k)
        if isinstance(k.graph, int) and k.graph >= 0:
            first.setdefault((k.pid, ("node", k.graph)), k)
    for k in sorted(tr.graphs, key=lambda k: (k.start, k.end, k.corr or 0)):
        if isinstance(k.graph, int) and k.graph >= 0:
            first.setdefault((k.pid, ("graph", k.graph)), k)
    tr.first_launches = {id(k.launch) for k in first.values()
                         if k.launch is not None and k.launch.pid not in tr.mid_run}
    return tr


# ----------------------------------------------------------------------------- intervals

def clip(ivs: Iterable[Tuple[int, int]], w0: int, w1: int) -> List[Tuple[int, int]]:
    out = []
    for a, b in ivs:
        a, b = max(a, w0), min(b, w1)
        if b > a:
            out.append((a, b))
    return out


def union(ivs: Iterable[Tuple[int, int]]) -> List[Tuple[int, int]]:
    out: List[List[int]] = []
    for a, b in sorted(ivs):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


def total(ivs: Iterable[Tuple[int, int]]) -> int:
    return sum(b - a for a, b in ivs)


def complement(blocks: Sequence[Tuple[int, int]], w0: int, w1: int) -> List[Tuple[int, int]]:
    """Maximal intervals of [w0, w1) not covered by the sorted disjoint ``blocks``."""
    gaps, t = [], w0
    for a, b in blocks:
        if a > t:
            gaps.append((t, a))
        t = max(t, b)
    if t < w1:
        gaps.append((t, w1))
    return gaps


class _Sweep:
    """All intervals overlapping [a, b) for a sequence of queries with non-decreasing ``a``."""

    def __init__(self, items: Iterable[tuple]):
        self.items = sorted((x for x in items if x[1] > x[0]), key=lambda x: (x[0], x[1]))
        self.i = 0
        self.active: List[tuple] = []
        self.last = None

    def query(self, a: int, b: int) -> List[tuple]:
        assert self.last is None or a >= self.last, "queries must move forward"
        self.last = a
        while self.i < len(self.items) and self.items[self.i][0] < b:
            self.active.append(self.items[self.i])
            self.i += 1
        self.active = [x for x in self.active if x[1] > a]
        return [x for x in self.active if x[0] < b]


# ----------------------------------------------------------------------------- busy / idle

@dataclass
class DeviceTimeline:
    device_id: int
    w0: int
    w1: int
    blocks: List[Tuple[int, int]]
    gaps: List[Tuple[int, int]]
    busy_ns: int
    copy_busy_ns: int
    copy_only_ns: int
    ran_kernels: bool = True      # a kernel or whole-graph row of the workload intersects the window
    has_copies: bool = False      # a memcpy/memset row intersects the window
    few: bool = False             # its kernels are too few to count (not ran_kernels: see device_timelines)

    @property
    def window_ns(self) -> int:
        return self.w1 - self.w0

    @property
    def role(self) -> str:
        return ("kernels" if self.ran_kernels else "few kernels" if self.few else "copies only" if self.has_copies
                else "idle")

    @property
    def idle_ns(self) -> int:
        return self.window_ns - self.busy_ns


def _meets(start: int, end: int, w0: int, w1: int) -> bool:
    """A row intersects [w0, w1): it starts before w1 and ends after w0 (a zero-length one: starts inside)."""
    return start < w1 and (end > w0 or (end == start and start >= w0))


def _copy_meets(start: int, end: int, w0: int, w1: int) -> bool:
    """A copy row is in [w0, w1): it starts before w1 and ends (or, zero-length, starts) after w0."""
    return start < w1 and max(start, end) > w0


def device_timelines(tr: Trace, w0: int, w1: int, devices: Optional[Sequence[int]] = None
                     ) -> Dict[int, DeviceTimeline]:
    """Per device (default: every device with kernels or graph rows, and every device with a copy in the
    window — one that only received copies is a device too)."""
    if devices is None:
        devices = sorted(set(tr.devices) | {x.device for x in tr.copies if _copy_meets(x.start, x.end, w0, w1)})
    out = {}
    for d in devices:
        k = union(clip(((g.start, g.end) for g in tr.activity if g.device == d), w0, w1))
        c = union(clip(((x.start, x.end) for x in tr.copies if x.device == d), w0, w1))
        copy_only = total(union(c + k)) - total(k)          # |C \ K| = |C u K| - |K|
        ran = any(g.device == d and _meets(g.start, g.end, w0, w1) for g in tr.activity)
        copies = any(x.device == d and _copy_meets(x.start, x.end, w0, w1) for x in tr.copies)
        out[d] = DeviceTimeline(d, w0, w1, k, complement(k, w0, w1), total(k), total(c), copy_only, ran, copies)
    # a device that ran kernels but fewer than 20 and under 1 ms busy, while another has more, has no workload: its
    # few kernels are not counted (role "few kernels")
    work = {d for d, t in out.items() if t.ran_kernels and (len(kernels_in(tr, w0, w1, d)) >= 20
                                                             or t.busy_ns >= 1_000_000)}
    if work:
        for d, t in out.items():
            if t.ran_kernels and d not in work:
                t.ran_kernels, t.few = False, True
    return out


# ----------------------------------------------------------------------------- idle causes

def classify_api(tr: Trace, a: Api) -> str:
    n = a.name
    if is_sync(n):
        return "sync"
    if is_sync_copy_api(n):
        return "sync_memcpy"
    if is_async_memcpy_api(n) and (a.pid, a.corr) in tr.pageable_calls:
        return "pageable_memcpy"
    if is_alloc(n):
        return "alloc"
    if is_module_load_name(n) or id(a) in tr.first_launches:
        return "module_load"
    if is_launch(n):
        return "launch"
    return "other_api"


@dataclass
class DeviceCauses:
    device_id: int
    window_ns: int
    busy_ns: int
    idle_ns: int
    causes: Dict[Tuple[str, str], int]
    gap_counts: Dict[Tuple[str, str], int]
    short_causes: Dict[Tuple[str, str], int]   # the part of ``causes`` inside gaps shorter than 1 ms
    threads_used: Counter            # how the gaps' host threads were found (opener/closer/fallback/none)
    host_segments: List[Tuple[int, int, Optional[int], Tuple[str, str]]] = field(default_factory=list)
    #   (start, end, gap's host thread, cause) of every elementary idle segment with a host-side kind
    copy_waiting: Dict[Tuple[str, str], int] = field(default_factory=dict)
    #   per copy cause: the ns whose shadow (the cause without the copies) is a waiting kind (MODEL.md)
    copy_waiting_unknown: Dict[Tuple[str, str], int] = field(default_factory=dict)
    #   per copy cause: the ns whose shadow is `unknown` (no host thread: whether a kernel waited is not known)
    after_sync_short: Dict[Tuple[str, str], int] = field(default_factory=dict)
    #   the part of ``short_causes`` after a drain of the gap's thread (MODEL.md "After a drain")
    lead: Dict[Tuple[str, str], int] = field(default_factory=dict)
    #   the part of ``causes`` in the gap starting at the window's start (MODEL.md "Start-up and shutdown gaps")
    trail: Dict[Tuple[str, str], int] = field(default_factory=dict)
    #   the part in the gap ending at the window's end (unless it also starts at the window's start)
    host_paced: int = 0
    #   the host-paced part of the `queued` ns (MODEL.md "Host-paced queued time")

    def kind_ns(self) -> Dict[str, int]:
        out: Dict[str, int] = defaultdict(int)
        for (k, _d), ns in self.causes.items():
            out[k] += ns
        return dict(out)


def _pick(cands: List[Gpu]) -> Optional[Gpu]:
    """One activity among several tied ones: prefer a linked launch call, then the earliest launch."""
    if not cands:
        return None
    return min(cands, key=lambda g: (g.launch is None, g.launch.end if g.launch else 0, g.end, g.corr or 0))


def idle_causes(tr: Trace, w0: int, w1: int, devices: Optional[Sequence[int]] = None
                ) -> Dict[int, DeviceCauses]:
    """Charge every idle ns of every device over [w0, w1) to one (kind, detail) of MODEL.md."""
    tls = device_timelines(tr, w0, w1, devices)
    api_by_tid: Dict[int, list] = defaultdict(list)
    for a in tr.apis:
        api_by_tid[a.tid].append((a.start, a.end, a))
    nvtx_by_tid: Dict[int, list] = defaultdict(list)
    for st, en, tid, name in tr.nvtx:
        nvtx_by_tid[tid].append((st, en, name))
    osrt_by_tid: Dict[int, list] = defaultdict(list)
    for st, en, tid, name in tr.osrt:
        osrt_by_tid[tid].append((st, en, name))

    out = {}
    drains: Dict[int, Tuple[List[int], List[int]]] = {}
    for d, tl in tls.items():
        acts = [g for g in tr.activity if g.device == d]
        by_start: Dict[int, List[Gpu]] = defaultdict(list)
        by_end: Dict[int, List[Gpu]] = defaultdict(list)
        for g in acts:
            by_start[g.start].append(g)
            by_end[g.end].append(g)
        in_win = [g for g in acts if min(g.end, w1) > max(g.start, w0)]
        cnt = Counter(g.launch.tid for g in in_win if g.launch is not None)
        fallback = min(cnt, key=lambda t: (-cnt[t], t)) if cnt else None
        # MODEL.md "The gap's host thread": a bystander process (under 1 % of the device's launched activity time in
        # the window while other processes hold more) does not own the gaps its activity opens
        held: Counter = Counter()
        for g in in_win:
            if g.launch is not None:
                held[g.launch.pid] += min(g.end, w1) - max(g.start, w0)
        by = {p for p, v in held.items() if v < 0.01 * sum(held.values())}
        by = by if by != set(held) else set()
        others = sorted((g for g in acts if g.launch is not None and g.launch.pid not in by),
                        key=lambda g: g.start)
        other_starts = [g.start for g in others]

        copies = _Sweep((x.start, x.end, x) for x in tr.copies if x.device == d)
        sources = {"api": api_by_tid, "nvtx": nvtx_by_tid, "osrt": osrt_by_tid}
        sweeps: Dict[Tuple[str, int], _Sweep] = {}   # fresh per device: queries move forward per thread

        causes: Dict[Tuple[str, str], int] = defaultdict(int)
        short_causes: Dict[Tuple[str, str], int] = defaultdict(int)
        gap_counts: Dict[Tuple[str, str], int] = defaultdict(int)
        copy_waiting: Dict[Tuple[str, str], int] = defaultdict(int)
        copy_unknown: Dict[Tuple[str, str], int] = defaultdict(int)
        after_short: Dict[Tuple[str, str], int] = defaultdict(int)
        lead: Dict[Tuple[str, str], int] = defaultdict(int)
        trail: Dict[Tuple[str, str], int] = defaultdict(int)
        how = Counter()
        host_paced = 0
        segs: List[Tuple[int, int, Optional[int], Tuple[str, str]]] = []
        for a, b in tl.gaps:
            opener = _pick(by_start.get(b, [])) if b < w1 else None
            if opener is not None and opener.launch is not None and opener.launch.pid in by:
                i = bisect.bisect_left(other_starts, b)      # the next activity another process launched
                opener = _pick([g for g in others[i:] if g.start == others[i].start]) if i < len(others) else None
            closer = _pick(by_end.get(a, [])) if a > w0 else None
            queued_t = None
            if opener is not None and opener.launch is not None:
                tid, queued_t = opener.launch.tid, opener.launch.end
                how["opener"] += 1
            elif closer is not None and closer.launch is not None:
                tid = closer.launch.tid
                how["closer"] += 1
            elif fallback is not None:
                tid = fallback
                how["fallback"] += 1
            else:
                tid = None
                how["none"] += 1

            cps = copies.query(a, b)
            apis = _sweep(sweeps, sources, "api", tid).query(a, b) if tid is not None else []
            nvtx = _sweep(sweeps, sources, "nvtx", tid).query(a, b) if tid is not None else []
            nvtx.sort(key=lambda x: (-x[0], x[1]))        # innermost (latest start, shortest) first
            osrt = _sweep(sweeps, sources, "osrt", tid).query(a, b) if tid is not None else []
            pts = {a, b}
            for lst in (cps, apis, nvtx, osrt):
                for x in lst:
                    pts.update(p for p in (x[0], x[1]) if a < p < b)
            if queued_t is not None and a < queued_t < b:
                pts.add(queued_t)
            pts = sorted(pts)
            seen = set()
            queued_ns = 0
            for p, q in zip(pts, pts[1:]):
                # MODEL.md row 1: a copy in flight counts only while one of the device's copies (its end clipped
                # to the window) ends after p and by the gap's end: else the work after the gap waited on none
                waited = [x for x in cps if p < min(x[1], w1) <= b]
                cause = _classify_at(tr, p, tid, queued_t, cps if waited else [], apis, nvtx, osrt)
                causes[cause] += q - p
                if a == w0:
                    lead[cause] += q - p
                elif b == w1:
                    trail[cause] += q - p
                if cause[0] == "queued":
                    queued_ns += q - p
                if cause[0] == "copy":
                    shadow = _classify_at(tr, p, tid, queued_t, [], apis, nvtx, osrt)
                    if shadow[0] in WAITING_SHADOWS or (shadow[0] == "osrt" and is_wait(shadow[1])):
                        copy_waiting[cause] += q - p
                    elif shadow[0] == "unknown":
                        copy_unknown[cause] += q - p
                if cause[0] in HOST_SEGMENT_KINDS:
                    segs.append((p, q, tid, cause))
                if b - a < 1_000_000:
                    short_causes[cause] += q - p
                    if tid is not None and _after_drain(tr, drains, api_by_tid, tid, p):
                        after_short[cause] += q - p
                seen.add(cause)
            for c in seen:
                gap_counts[c] += 1
            if queued_ns:
                host_paced += min(queued_ns, _paced_cap(opener, by_end.get(a, []) if a > w0 else []))
        out[d] = DeviceCauses(d, tl.window_ns, tl.busy_ns, tl.idle_ns, dict(causes), dict(gap_counts),
                              dict(short_causes), how, segs, dict(copy_waiting),
                              dict(copy_unknown), dict(after_short), dict(lead), dict(trail), host_paced)
    return out


def _paced_cap(opener: Optional[Gpu], closers: List[Gpu]) -> int:
    """MODEL.md "Host-paced queued time": the most queued ns of a gap that are host-paced. The activity before the
    gap is the earliest-starting one ending at its start; when the next activity's launch call (not that one's own
    call) returned after it started, up to its own launch-to-start delay (≥ 0) is host-paced."""
    if opener is None or opener.launch is None or not closers:
        return 0
    first = min(g.start for g in closers)
    prev = _pick([g for g in closers if g.start == first])
    if prev is None or prev.launch is None or prev.launch == opener.launch:
        return 0
    if opener.launch.end <= prev.start:        # launched before the previous one started: a deeper queue
        return 0
    return max(prev.start - prev.launch.end, 0)


def _after_drain(tr: Trace, drains: Dict[int, Tuple[List[int], List[int]]], api_by_tid: Dict[int, list], tid: int,
                 t: int) -> bool:
    """MODEL.md "After a drain": a blocking sync call of ``tid`` (kind sync / sync_memcpy) returned at or before
    ``t`` and none of its launch calls (launch / module_load) started after that return, up to ``t``."""
    if tid not in drains:
        kinds = [(classify_api(tr, a), a) for _, _, a in api_by_tid.get(tid, [])]
        drains[tid] = (sorted(a.end for k, a in kinds if k in ("sync", "sync_memcpy")),
                       sorted(a.start for k, a in kinds if k in ("launch", "module_load")))
    ends, starts = drains[tid]
    i = bisect.bisect_right(ends, t) - 1
    if i < 0:
        return False
    j = bisect.bisect_right(starts, t) - 1
    return j < 0 or ends[i] > starts[j]


def _sweep(sweeps: Dict[Tuple[str, int], _Sweep], sources: Dict[str, Dict[int, list]], kind: str, tid: int
           ) -> _Sweep:
    if (kind, tid) not in sweeps:
        sweeps[(kind, tid)] = _Sweep(sources[kind].get(tid, []))
    return sweeps[(kind, tid)]


def _covering(items: Sequence[tuple], t: int) -> List[tuple]:
    return [x for x in items if x[0] <= t < x[1]]


def _classify_at(tr: Trace, t: int, tid: Optional[int], queued_t: Optional[int],
                 cps, apis, nvtx, osrt) -> Tuple[str, str]:
    c = _covering(cps, t)
    if c:
        return ("copy", min(c, key=lambda x: (x[0], -x[1], x[2].detail))[2].detail)
    if queued_t is not None and t >= queued_t:
        return ("queued", "")
    if tid is None:
        return ("unknown", "")
    c = _covering(apis, t)
    if c:
        kind = min((classify_api(tr, x[2]) for x in c), key=RANK.__getitem__)
        outer = min(c, key=lambda x: (x[0], -x[1]))[2]
        return (kind, outer.name)
    c = [x for x in _covering(osrt, t) if is_wait(x[2])]   # MODEL.md: a waiting OS call wins over its range
    if c:
        return ("osrt", min(c, key=lambda x: (x[0], -x[1]))[2])
    for x in nvtx:                                      # sorted innermost first
        if x[0] <= t < x[1]:
            return ("nvtx", x[2])
    c = _covering(osrt, t)
    if c:
        return ("osrt", min(c, key=lambda x: (x[0], -x[1]))[2])
    return ("host_cpu", "")


# ----------------------------------------------------------------------------- full window

def full_window(tr: Trace) -> Optional[Tuple[int, int]]:
    """First -> last timestamp of kernels, CUDA API, memcpy/memset/sync/graph rows and NVTX ranges."""
    ts: List[int] = []
    for g in tr.activity:
        ts += [g.start, g.end]
    for a in tr.apis:
        ts += [a.start, a.end]
    for x in tr.copies:
        ts += [x.start, x.end]
    ts += tr.other_ts + tr.nvtx_full_ts
    ts = [t for t in ts if t is not None]
    return (min(ts), max(ts)) if ts else None


# ----------------------------------------------------------------------------- metric vocabulary

def _sel(tls: Dict[int, object], device_id: Optional[int]) -> list:
    return list(tls.values()) if device_id is None else [tls[device_id]]


def kernel_devices(tls: Dict[int, DeviceTimeline]) -> List[int]:
    """The devices that ran a kernel (or a whole-graph execution) in the timelines' window."""
    return sorted(d for d, t in tls.items() if t.ran_kernels)


def _pooled(tls: Dict[int, DeviceTimeline], device_id: Optional[int],
            over: Optional[Sequence[int]] = None) -> List[DeviceTimeline]:
    """One device, or (``device_id`` None) the devices ``over`` (default: those that ran kernels)."""
    if device_id is not None:
        return [tls[device_id]]
    ids = kernel_devices(tls) if over is None else over
    return [tls[d] for d in ids if d in tls]


def busy_pct(tls: Dict[int, DeviceTimeline], device_id: Optional[int] = None) -> float:
    sel = _pooled(tls, device_id)
    w = sum(t.window_ns for t in sel)
    return 100.0 * sum(t.busy_ns for t in sel) / w if w else 0.0


def idle_pct(tls: Dict[int, DeviceTimeline], device_id: Optional[int] = None,
             over: Optional[Sequence[int]] = None) -> float:
    sel = _pooled(tls, device_id, over)
    w = sum(t.window_ns for t in sel)
    return 100.0 * sum(t.idle_ns for t in sel) / w if w else 0.0


def cause_pct_of_window(causes: Dict[int, DeviceCauses], kind: str, detail: Optional[str] = None,
                        device_id: Optional[int] = None) -> float:
    sel = _sel(causes, device_id)
    w = sum(c.window_ns for c in sel)
    ns = sum(v for c in sel for (k, dt), v in c.causes.items() if k == kind and (detail is None or dt == detail))
    return 100.0 * ns / w if w else 0.0


def once_ns(causes: Dict[int, DeviceCauses], kind: str, device_id: int, at_start: bool, at_end: bool) -> int:
    """A device's idle ns of ``kind`` paid once per run: in its leading gap when the window starts at the capture's
    start (``at_start``), in its trailing gap when it ends at the capture's end (``at_end``); FINDINGS.md, "Start-up
    and shutdown"."""
    c = causes[device_id]
    return sum(v for (k, _d), v in c.lead.items() if k == kind) * at_start + \
        sum(v for (k, _d), v in c.trail.items() if k == kind) * at_end


def startup_pct_of_cause(causes: Dict[int, DeviceCauses], kind: str, device_id: int, at_start: bool,
                         at_end: bool) -> float:
    ns = causes[device_id].kind_ns().get(kind, 0)
    return 100.0 * once_ns(causes, kind, device_id, at_start, at_end) / ns if ns else 0.0


def loop_pct_of_window(causes: Dict[int, DeviceCauses], kind: str, device_id: int, at_start: bool,
                       at_end: bool) -> float:
    c = causes[device_id]
    ns = c.kind_ns().get(kind, 0) - once_ns(causes, kind, device_id, at_start, at_end)
    return 100.0 * ns / c.window_ns if c.window_ns else 0.0


def idle_pct_change(full: Dict[int, DeviceTimeline], steady: Dict[int, DeviceTimeline]) -> float:
    """Both pooled over the devices that ran kernels in the steady window."""
    over = kernel_devices(steady)
    return idle_pct(full, over=over) - idle_pct(steady, over=over)


def kernels_in(tr: Trace, w0: int, w1: int, device_id: Optional[int] = None) -> List[Tuple[int, int, Gpu]]:
    """Kernels intersecting [w0, w1) (a zero-length one when it starts inside), clipped: (start, end, kernel)."""
    out = []
    for k in tr.kernels:
        if device_id is not None and k.device != device_id:
            continue
        if k.start < w1 and (k.end > w0 or (k.end == k.start and k.start >= w0)):
            s0 = max(k.start, w0)
            out.append((s0, max(min(k.end, w1), s0), k))
    return out


def kernel_share_pct(tr: Trace, w0: int, w1: int, name: str) -> float:
    ks = kernels_in(tr, w0, w1)
    tot = sum(e - s for s, e, _ in ks)
    mine = sum(e - s for s, e, k in ks if name in (k.name, k.short))
    return 100.0 * mine / tot if tot else 0.0


def kernel_count(tr: Trace, w0: int, w1: int, device_id: Optional[int] = None) -> int:
    return len(kernels_in(tr, w0, w1, device_id))


def launch_rate_per_s(tr: Trace, w0: int, w1: int, device_id: Optional[int] = None) -> float:
    n = len(kernels_in(tr, w0, w1, device_id))
    return n / ((w1 - w0) / 1e9) if w1 > w0 else 0.0


def kernel_p50_ns(tr: Trace, w0: int, w1: int, device_id: Optional[int] = None) -> float:
    """Median (linear interpolation) of clipped kernel durations."""
    d = sorted(e - s for s, e, _ in kernels_in(tr, w0, w1, device_id))
    if not d:
        return 0.0
    m = (len(d) - 1) / 2
    lo = int(m)
    return d[lo] + (d[min(lo + 1, len(d) - 1)] - d[lo]) * (m - lo)


def busy_ns(tls: Dict[int, DeviceTimeline]) -> int:
    return sum(t.busy_ns for t in _pooled(tls, None))


HOST_KINDS_SHORT = ("host_cpu",)   # launch overhead only: never time inside an NVTX range, OS or other CUDA call


def launch_ranges(tr: Trace) -> set:
    """Normalized names of NVTX push/pop ranges that enclose the start of a kernel's launch call on their own
    thread (ranges the launches happen in)."""
    starts: Dict[int, List[int]] = defaultdict(list)
    for k in tr.kernels:
        if k.launch is not None:
            starts[k.launch.tid].append(k.launch.start)
    for v in starts.values():
        v.sort()
    out = set()
    for st, en, tid, name in tr.nvtx:
        v = starts.get(tid)
        if v and name not in out:
            i = bisect.bisect_left(v, st)
            if i < len(v) and v[i] <= en:
                out.add(name)
    return out


def host_overhead_pct(causes: Dict[int, DeviceCauses], device_id: int, ranges: Optional[set] = None) -> float:
    """MODEL.md: launch ns + the ns in gaps shorter than 1 ms of host_cpu and of nvtx inside a range that
    encloses launches (``ranges``: :func:`launch_ranges`), less their part after a drain, / window."""
    c = causes[device_id]
    ns = sum(v for (k, _), v in c.causes.items() if k == "launch")
    ns += sum(v - c.after_sync_short.get((k, d), 0) for (k, d), v in c.short_causes.items()
              if k in HOST_KINDS_SHORT or (k == "nvtx" and ranges is not None and d in ranges))
    ns += c.host_paced
    return 100.0 * ns / c.window_ns if c.window_ns else 0.0


def um_overlap_pct(tr: Trace, w0: int, w1: int, device_id: int) -> float:
    """``um_overlap_pct_of_kernel_time``: 100 · |K ∩ M| / |K| on one device, K = kernels + graph executions,
    M = Unified-Memory copies (copy kinds 11–13) other than user prefetches (migrationCause 1), both clipped to
    [w0, w1); |K ∩ M| = |K| + |M| − |K ∪ M|."""
    k = union(clip(((g.start, g.end) for g in tr.activity if g.device == device_id), w0, w1))
    m = union(clip(((c.start, c.end) for c in tr.copies
                    if c.device == device_id and c.detail.startswith("Unified") and not c.user_prefetch), w0, w1))
    both = total(k) + total(m) - total(union(k + m))
    return 100.0 * both / total(k) if total(k) else 0.0


#: docs/METRICS.md "Exposed communication": kernel names of the categories ``nccl`` and ``custom_allreduce`` (the
#: generic preset's rules, written out here)
COMM_NAME_RE = re.compile(
    r"nccl|rccl|cross_device_reduce|all_?reduce_?fusion|custom_?all_?reduce|lamport|quick_?all_?reduce|quickreduce"
    r"|mscclpp|userbuffers|multimem_all_reduce|(one|two)_?shot\w*all_?reduce|all_?reduce\w*(one|two)_?shot",
    re.IGNORECASE)


def comm_devices(tr: Trace, w0: int, w1: int, devices: List[int]) -> List[int]:
    """``comm_exposed_pct``'s devices: of ``devices`` (those that ran kernels), the ones with a communication kernel
    (:data:`COMM_NAME_RE`) inside [w0, w1)."""
    return sorted(d for d in devices if any(g.device == d and g.name and COMM_NAME_RE.search(g.name)
                                            and g.end > w0 and g.start < w1 for g in tr.activity))


def comm_exposed_pct(tr: Trace, w0: int, w1: int, devices: List[int],
                     wait: Optional[Tuple[Dict[int, int], int]]) -> float:
    """``comm_exposed_pct``: 100 · Σ |C \\ K| / Σ window over ``devices``, C = a device's communication kernels, K =
    its other kernels and graph executions, both clipped to [w0, w1); |C \\ K| = |C ∪ K| − |K|. ``wait``: ({device:
    Σ waits of its ranks other than the late rank}, the straggler's wait_ns_total): each device's waits up to its
    exposed ns, in all at most wait_ns_total, are left out."""
    out = 0
    left = 0
    for d in devices:
        comm = [(g.start, g.end) for g in tr.activity if g.device == d and g.name and COMM_NAME_RE.search(g.name)]
        rest = [(g.start, g.end) for g in tr.activity if g.device == d and not (g.name and COMM_NAME_RE.search(g.name))]
        c, k = union(clip(comm, w0, w1)), union(clip(rest, w0, w1))
        exposed = total(union(c + k)) - total(k)
        if wait is not None:
            left += min(wait[0].get(d, 0), exposed)
        out += exposed
    if wait is not None:
        out -= min(left, wait[1])
    return 100.0 * out / ((w1 - w0) * len(devices)) if devices and w1 > w0 else 0.0


#: docs/FINDINGS.md "NCCL": NCCL kernels and their collective name (the first identifier starting with ``nccl``)
NCCL_NAME_RE = re.compile(r"nccl\w*", re.IGNORECASE)


def nccl_late_rank_metric(tr: Trace, device_id: int, metric: str, window_ns: int = 0) -> Optional[float]:
    """The late-rank rule's checks (docs/FINDINGS.md "NCCL": ``matched``, ``last_arrivals``, ``wait_caused_share``,
    ``late_idle_share_p50``)
    of the NCCL rank on ``device_id``, written plainly: per collective name, each (pid, device) rank's kernels in
    start order, the k-th with the k-th (issue order: None, not recomputed, when the ranks of a name have different
    counts; the tool then matches by time); per instance the last arriver is the latest start (ties: the lowest
    (pid, device)), a rank's wait = the latest start − its start, the waiting caused = the others' waits at the
    instances it is last at; the share = caused / Σ of all waits, rounded to 4 places; ``late_idle_share_p50``: at
    each instance it is last at, its device's idle since its previous kernel of the name (the stretch from that
    one's end to its start less the union of the device's kernels) less the earliest rank's, at least 0, capped at
    how late it is, / how late it is; the median over those where both have a previous kernel;
    ``wait_pct_of_window``: the waiting it caused / (``window_ns``, the whole capture, × the number of other
    ranks) × 100, 2 places."""
    per: Dict[str, Dict[Tuple[int, int], List[Tuple[int, int]]]] = {}
    for g in tr.kernels:
        m = NCCL_NAME_RE.search(g.name or "")
        if m:
            rank = (g.pid if g.pid is not None else -1, g.device)
            per.setdefault(m.group(0), {}).setdefault(rank, []).append((g.start, g.end))
    ranks = sorted({r for d in per.values() for r in d})
    matched = {r: 0 for r in ranks}
    last = {r: 0 for r in ranks}
    waited = {r: 0 for r in ranks}
    caused = {r: 0 for r in ranks}
    # per rank, where it was last: (its idle since its previous kernel of the name, the earliest rank's, how late)
    late_at: Dict[Tuple[int, int], List[Tuple[Optional[int], Optional[int], int]]] = {}

    def idle_since(series: List[Tuple[int, int]], k: int, device: int) -> Optional[int]:
        """The device's idle ns from the end of the rank's (k-1)-th kernel of the name to its k-th's start: the
        stretch less its overlap with the union of the device's kernels (None for k = 0)."""
        if k == 0:
            return None
        a, b = series[k - 1][1], series[k][0]
        if a >= b:
            return 0
        busy = union(clip([(g.start, g.end) for g in tr.kernels if g.device == device], a, b))
        return (b - a) - total(busy)

    for d in per.values():
        if len(d) < 2:
            continue
        if len({len(v) for v in d.values()}) != 1:
            return None
        series = {r: sorted(v) for r, v in d.items()}   # (start, end) in start order
        for k in range(len(next(iter(series.values())))):
            starts = {r: v[k][0] for r, v in series.items()}
            latest = max(starts.values())
            for r in starts:
                matched[r] += 1
            if latest == min(starts.values()):
                continue
            late = min(r for r, x in starts.items() if x == latest)
            first = min(r for r, x in starts.items() if x == min(starts.values()))
            last[late] += 1
            late_at.setdefault(late, []).append((idle_since(series[late], k, late[1]),
                                                 idle_since(series[first], k, first[1]),
                                                 latest - min(starts.values())))
            for r, x in starts.items():
                waited[r] += latest - x
                caused[late] += latest - x
    on = [r for r in ranks if r[1] == device_id]
    if not on:
        return None
    r = max(on, key=lambda x: caused[x])
    if metric == "matched":
        return float(matched[r])
    if metric == "last_arrivals":
        return float(last[r])
    if metric == "late_idle_share_p50":
        # per late arrival: its extra idle = its device's idle since its previous kernel of the name less the
        # earliest rank's (the first to start), at least 0 (either unknown: left out); share = min(extra idle,
        # lateness) / lateness; the median
        shares = []
        for own, earliest, late_by in late_at.get(r, []):
            if own is not None and earliest is not None:
                shares.append(min(max(own - earliest, 0), late_by) / late_by)
        return round(float(statistics.median(shares)), 4) if shares else None
    if metric == "wait_pct_of_window":
        others = (len(ranks) - 1) * window_ns
        return round(100.0 * caused[r] / others, 2) if others > 0 else 0.0
    assert metric == "wait_caused_share", metric
    total_wait = sum(waited.values())
    return round(caused[r] / total_wait, 4) if total_wait else 0.0


#: MODEL.md, "Copies the kernels waited on": the shadow kinds of a copy ns in which a kernel waits on the copy
#: (``osrt`` only for an OS call that waits); ``unknown`` is kept apart (whether a kernel waited is not known)
WAITING_SHADOWS = ("queued", "sync", "sync_memcpy", "pageable_memcpy", "launch")


def copy_waiting_pct(causes: Dict[int, DeviceCauses], device_id: int) -> float:
    """``copy_waiting_pct``: 100 · (copy idle ns whose shadow — the kind without the copies — is a waiting kind) /
    (copy idle ns), on one device."""
    c = causes[device_id]
    ns = sum(v for (k, _), v in c.causes.items() if k == "copy")
    return 100.0 * sum(c.copy_waiting.values()) / ns if ns else 0.0


def copy_waiting_unknown_pct(causes: Dict[int, DeviceCauses], device_id: int) -> float:
    """``copy_waiting_unknown_pct``: 100 · (copy idle ns whose shadow is ``unknown``) / (copy idle ns), on one
    device."""
    c = causes[device_id]
    ns = sum(v for (k, _), v in c.causes.items() if k == "copy")
    return 100.0 * sum(c.copy_waiting_unknown.values()) / ns if ns else 0.0


COPY_PATHS = {"Host-to-Device": "H2D", "Host-to-Array": "H2D", "Device-to-Host": "D2H", "Array-to-Host": "D2H",
              "Device-to-Device": "D2D", "Array-to-Array": "D2D", "Array-to-Device": "D2D", "Device-to-Array": "D2D",
              "Peer-to-Peer": "P2P", "Host-to-Host": "H2H", "memset": "memset"}


def copy_path_of(detail: str) -> str:
    """The copy path of a copy row's detail (direction label, `` (pageable)`` dropped): docs/METRICS.md."""
    d = detail[: -len(" (pageable)")] if detail.endswith(" (pageable)") else detail
    return "Unified" if d.startswith("Unified") else COPY_PATHS.get(d, "other")


def _copy_path_sets(tr: Trace, w0: int, w1: int, device_id: int, path: str):
    k = union(clip(((g.start, g.end) for g in tr.activity if g.device == device_id), w0, w1))
    c = union(clip(((x.start, x.end) for x in tr.copies
                    if x.device == device_id and copy_path_of(x.detail) == path), w0, w1))
    return k, c


def copy_path_metric(tr: Trace, w0: int, w1: int, device_id: int, path: str, metric: str,
                     steps: Sequence[Tuple[int, int]] = ()) -> float:
    """``copy_path_busy_pct`` = 100 · |C| / window; ``copy_path_overlap_pct`` = 100 · |C ∩ K| / |C|;
    ``copy_path_beyond_kernels_pct`` = 100 · |C \\ K| / window; ``copy_path_held_pct`` = 100 · held / window (C
    in each gap of K up to the last of the path's copy ends in it); ``copy_path_step_busy_pct`` = median over the
    steps (clipped to the window, positive length) of
    100 · |C ∩ step| / |step|. C = union of the path's copies, K = kernels + graph executions, in [w0, w1)."""
    k, c = _copy_path_sets(tr, w0, w1, device_id, path)
    if metric == "copy_path_busy_pct":
        return 100.0 * total(c) / (w1 - w0)
    if metric == "copy_path_overlap_pct":
        both = total(k) + total(c) - total(union(k + c))
        return 100.0 * both / total(c) if total(c) else 0.0
    if metric == "copy_path_beyond_kernels_pct":
        return 100.0 * (total(union(k + c)) - total(k)) / (w1 - w0)
    if metric == "copy_path_held_pct":   # METRICS.md "Copy paths", held_ns: per gap of K, C up to its last copy end
        ends = sorted(min(x.end, w1) for x in tr.copies if x.device == device_id
                      and copy_path_of(x.detail) == path and _kept(x.start, x.end, w0, w1))
        held = 0
        for g0, g1 in complement(k, w0, w1):
            i = bisect.bisect_right(ends, g1) - 1
            if i >= 0 and ends[i] > g0:
                held += total(clip(c, g0, ends[i]))
        return 100.0 * held / (w1 - w0)
    assert metric == "copy_path_step_busy_pct", metric
    shares = []
    for a, b in steps:
        a, b = max(a, w0), min(b, w1)
        if b > a:
            shares.append(100.0 * total(clip(c, a, b)) / (b - a))
    return statistics.median(shares)


# ----------------------------------------------------------------------------- per-step synchronization

SS_MIN_POINTS, SS_MIN_SHARE, SS_MAX_SPREAD, SS_WAIT_TOL = 5, 0.5, 3.0, 20_000
SS_PAUSE = 10   # host time after a sync point over 10 × the median period: an idle pause
SS_D2H_NAMES = {"cuMemcpyDtoH", "cuMemcpyAtoH"}


def _kept(st: int, en: int, w0: int, w1: int) -> bool:
    """model/clip.py: a row intersecting [w0, w1) (a zero-length one starting inside)."""
    e = max(en, st)
    return st < w1 and (e > w0 or (e == st and st >= w0))


def _clipped(st: int, en: int, w0: int, w1: int) -> Tuple[int, int]:
    s0 = max(st, w0)
    return s0, max(min(en, w1), s0)


def _blocking(tr: Trace, a: Api) -> bool:
    n, key = a.name, (a.pid, a.corr)
    d2h = key in tr.d2h_calls or n in SS_D2H_NAMES
    return (n in SYNC_APIS or (is_sync_copy_api(n) and "Memset" not in n and d2h)
            or (is_async_memcpy_api(n) and key in tr.pageable_d2h_calls))


def _pctl(xs: Sequence[float], q: float) -> float:
    """Linear-interpolation percentile (numpy's default), 0 for none."""
    v = sorted(xs)
    if not v:
        return 0.0
    pos = (len(v) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


@dataclass
class StepSyncSeries:
    device_id: int
    tid: int
    holds: bool
    api: str
    sync_points: int
    step_sync_points: int
    exposed_ns: int
    overlap_ns: int
    kernels_in_steps: int
    device_kernels: int


def step_sync(tr: Trace, causes: Dict[int, DeviceCauses], w0: int, w1: int) -> List[StepSyncSeries]:
    """Per (launching thread, device): the per-step sync pattern of analyses/steps/sync.py, with plain loops."""
    out: List[StepSyncSeries] = []
    for d in sorted(causes):
        acts = []                                      # (start, end, launch api) of the device's work in the window
        for g in tr.activity:
            if g.device == d and _kept(g.start, g.end, w0, w1):
                s0, e0 = _clipped(g.start, g.end, w0, w1)
                acts.append((s0, e0, g.launch if g.launch is not None and _kept(g.launch.start, g.launch.end, w0, w1)
                             else None))
        starts = sorted(a[0] for a in acts)
        for tid in sorted({a[2].tid for a in acts if a[2] is not None}):
            mine = sorted(((_clipped(a[2].start, a[2].end, w0, w1)[0], a[0], a[1]) for a in acts
                           if a[2] is not None and a[2].tid == tid), key=lambda x: x[0])
            calls = sorted((_clipped(a.start, a.end, w0, w1) + (a,) for a in tr.apis
                            if a.tid == tid and _kept(a.start, a.end, w0, w1) and _blocking(tr, a)),
                           key=lambda x: (x[0], x[1]))
            sp = []                                    # (s, e, wait, name)
            for s, e, a in calls:
                before = [m for m in mine if m[0] < s]
                if not before:
                    continue
                last = max(m[2] for m in before)
                if s < last <= e + SS_WAIT_TOL:
                    sp.append((s, e, max(0, min(last, e) - s), a.name))
            if not sp:
                continue
            segs = [(p, q) for p, q, t, _ in causes[d].host_segments if t == tid]
            cnt = Counter(x[3] for x in sp)
            api = min(cnt, key=lambda n: (-cnt[n], n))
            ed = [x[1] for x in sp if x[3] == api]
            period = [b - a for a, b in zip(ed, ed[1:])]
            pause = SS_PAUSE * _pctl(period, 50) if len(ed) > 1 else None
            xs, paused = [], []
            for i, (_, e, _, _) in enumerate(sp):
                later = [m[1] for m in mine if m[0] >= e]
                k = min(later) if later else e
                b = max(e, min(k, sp[i + 1][0])) if i + 1 < len(sp) else max(e, k)
                paused.append(pause is not None and b - e > pause)   # an idle pause: no host work of a step
                xs.append(0 if paused[-1] else sum(max(0, min(q, b) - max(p, e)) for p, q in segs))
            rs = [min(x, sp[i + 1][2]) if i + 1 < len(sp) else 0 for i, x in enumerate(xs)]
            # a step [ed_{j-1}, ed_j) holding a paused sync point's return is left out of the period
            kept = [j for j in range(1, len(ed))
                    if not any(pz and ed[j - 1] <= x[1] < ed[j] for pz, x in zip(paused, sp))]
            period = [period[j - 1] for j in kept]
            # per step: the host time after its sync points (Σ X of those returning in [ed_{j-1}, ed_j))
            step_x = [sum(x for x, p in zip(xs, sp) if ed[j - 1] <= p[1] < ed[j]) for j in kept]
            x50, x90 = _pctl(step_x, 50), _pctl(step_x, 90)
            in_steps = sum(1 for t in starts if ed[0] <= t < ed[-1])
            share = in_steps / len(starts) if starts else 0.0
            p50, p90 = _pctl(period, 50), _pctl(period, 90)
            # a regular period, or a regular host time with periods of two kinds (80 % within 25 % of p50 or p90)
            levels = (sum(1 for v in period if abs(v - p50) <= 0.25 * p50 or abs(v - p90) <= 0.25 * p90)
                      / len(period)) if period else 0.0
            recurs = p90 <= SS_MAX_SPREAD * p50 or (x50 > 0 and x90 <= SS_MAX_SPREAD * x50 and levels >= 0.8)
            holds = len(ed) >= SS_MIN_POINTS and share >= SS_MIN_SHARE and recurs
            out.append(StepSyncSeries(d, tid, holds, api, len(sp), len(ed), sum(xs), sum(rs), in_steps,
                                      len(starts)))
    return out


def step_sync_metric(series: List[StepSyncSeries], causes: Dict[int, DeviceCauses], device_id: int,
                     metric: str) -> float:
    """``step_sync_points`` / ``step_sync_exposed_pct`` / ``step_sync_overlap_pct`` of a device: over the
    device's holding series (the largest step count; Σ ns / window × 100)."""
    held = [s for s in series if s.device_id == device_id and s.holds]
    if metric == "step_sync_points":
        return float(max((s.step_sync_points for s in held), default=0))
    w = causes[device_id].window_ns
    ns = sum(s.exposed_ns if metric == "step_sync_exposed_pct" else s.overlap_ns for s in held)
    return 100.0 * ns / w if w else 0.0
