"""Planted idle causes: the docs/MODEL.md precedence applied by the generator to its own rows.

For one device of one process and a window ``[w0, w1)``, every idle ns (not covered by a kernel or a
graph-trace row) is charged to the first kind of :data:`KINDS` that holds at that ns: a copy of the
device in flight; the next busy block's launch call has returned (queued); the gap's host thread inside
a sync / synchronous-copy / pageable-async-copy / alloc / module-load-or-first-launch / launch / other
CUDA call; inside an NVTX push/pop range (innermost, digits → ``N``); inside an OS-runtime call; else
plain host CPU. Each gap is cut at every boundary of the relevant rows; a piece takes the kind holding at
its start. This is the generator's own computation from its planted intervals, not the package's.
"""

from __future__ import annotations

import bisect
import re
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from nsys_llm_explainer.vocabulary.cause_kinds import API_KINDS, KINDS
from nsys_llm_explainer.vocabulary.os_calls import is_wait

from ..builder import TraceBuilder
from ..ids import pid_of

__all__ = [
    "API_KINDS",
    "KINDS",
    "base_name",
    "full_window",
    "idle_facts",
    "model_facts",
    "planted_idle",
    "range_detail",
]




_SYNC = {
    "cudaDeviceSynchronize",
    "cudaStreamSynchronize",
    "cudaEventSynchronize",
    "cuCtxSynchronize",
    "cuStreamSynchronize",
    "cuEventSynchronize",
}
_SYNC_MEMCPY = {"cudaMemcpy", "cudaMemset", "cudaMemcpy2D", "cuMemcpyHtoD", "cuMemcpyDtoH", "cuMemcpyDtoD"}
_ALLOC = {"cudaMalloc", "cudaFree", "cudaMallocHost", "cudaFreeHost", "cudaMallocAsync", "cudaFreeAsync"}
_ALLOC |= {"cuMemAlloc", "cuMemFree", "cuMemCreate", "cuMemMap"}
_LAUNCH = {"cudaLaunchKernel", "cudaLaunchKernelExC", "cudaGraphLaunch", "cuLaunchKernel", "cuLaunchKernelEx"}
_LAUNCH |= {"cuGraphLaunch"}
_MODULE_LOAD = re.compile(r"^(cu|cuda)(Module|Library)Load")
_SUFFIX = re.compile(r"(_v\d+)?(_ptsz|_ptds)?(_v\d+)?$")
_DIGITS = re.compile(r"(?<![A-Za-z0-9])\d+|\d+(?![A-Za-z0-9])")
_COPY_LABEL = {
    1: "Host-to-Device",
    2: "Device-to-Host",
    8: "Device-to-Device",
    9: "Host-to-Host",
    10: "Peer-to-Peer",
    11: "Unified Host-to-Device",
    12: "Unified Device-to-Host",
    13: "Unified Device-to-Device",
}

Iv = Tuple[int, int, str]  # start, end, detail


def base_name(api: str) -> str:
    """API name without the runtime version suffix (``cudaLaunchKernel_v7000`` → ``cudaLaunchKernel``)."""
    return _SUFFIX.sub("", api)


def range_detail(name: str, domain: str = "") -> str:
    """NVTX range name (``domain:`` prefixed for a non-default domain) with each digit run replaced by
    ``N`` unless it sits between two letters/digits (``layer_12_w`` → ``layer_N_w``; ``h2d`` kept)."""
    return (f"{domain}:" if domain else "") + _DIGITS.sub("N", name)


def _api_kind(base: str, pageable_async: bool, first_launch: bool) -> str:
    if base in _SYNC:
        return "sync"
    if base in _SYNC_MEMCPY:
        return "sync_memcpy"
    if pageable_async and "Memcpy" in base and "Async" in base:
        return "pageable_memcpy"
    if base in _ALLOC:
        return "alloc"
    if _MODULE_LOAD.search(base) or (first_launch and base in _LAUNCH):
        return "module_load"
    return "launch" if base in _LAUNCH else "other_api"


class _Cover:
    """Which interval covers time t: the outermost one (earliest start among those reaching furthest)."""

    def __init__(self, items: Iterable[Iv]) -> None:
        self.items = sorted(items)
        self.starts = [s for s, _, _ in self.items]
        self.reach: List[int] = []
        self.arg: List[int] = []
        for i, (_, e, _) in enumerate(self.items):
            if not self.reach or e > self.reach[-1]:
                self.reach.append(e)
                self.arg.append(i)
            else:
                self.reach.append(self.reach[-1])
                self.arg.append(self.arg[-1])

    def at(self, t: int) -> Optional[str]:
        i = bisect.bisect_right(self.starts, t) - 1
        if i < 0 or self.reach[i] <= t:
            return None
        return self.items[self.arg[i]][2]

    def innermost(self, t: int) -> Optional[str]:
        """Detail of the covering interval with the latest start (ties: the shortest)."""
        i = bisect.bisect_right(self.starts, t) - 1
        best: Optional[Iv] = None
        while i >= 0:
            s, e, d = self.items[i]
            if best is not None and s < best[0]:
                break
            if e > t and (best is None or e < best[1]):
                best = (s, e, d)
            i -= 1
        return None if best is None else best[2]


class _Thread:
    """Per host thread: covers per API kind, NVTX push/pop ranges, OSRT calls and all their boundaries."""

    def __init__(self) -> None:
        self.api: Dict[str, List[Iv]] = {k: [] for k in API_KINDS}
        self.nvtx: List[Iv] = []
        self.osrt: List[Iv] = []

    def build(self) -> None:
        self.covers = {k: _Cover(v) for k, v in self.api.items()}
        self.nvtx_cover = _Cover(self.nvtx)
        self.osrt_cover = _Cover(self.osrt)
        self.wait_cover = _Cover([iv for iv in self.osrt if is_wait(iv[2])])
        self.other_os_cover = _Cover([iv for iv in self.osrt if not is_wait(iv[2])])
        pts = {
            p for ivs in list(self.api.values()) + [self.nvtx, self.osrt] for s, e, _ in ivs for p in (s, e)
        }
        self.bounds = sorted(pts)

    def cause(self, t: int) -> Tuple[str, str]:
        for k in API_KINDS:
            d = self.covers[k].at(t)
            if d is not None:
                return k, d
        d = self.wait_cover.at(t)            # a waiting OS call wins over the NVTX range around it
        if d is not None:
            return "osrt", d
        d = self.nvtx_cover.innermost(t)
        if d is not None:
            return "nvtx", d
        d = self.other_os_cover.at(t)
        return ("osrt", d) if d is not None else ("host_cpu", "")


def full_window(b: TraceBuilder) -> Tuple[int, int]:
    """First start → last end of kernels, CUDA API, memcpy/memset/sync/graph-trace rows, NVTX ranges."""
    lo: List[int] = []
    hi: List[int] = []
    for key in ("kernel", "runtime", "memcpy", "memset", "sync", "graph_trace", "nvtx"):
        for r in b.rows(key):
            if key == "nvtx" and (r["eventType"] not in (59, 60) or r.get("end") is None):
                continue
            lo.append(r["start"])
            hi.append(r["end"])
    return min(lo), max(hi)


def _threads(b: TraceBuilder, pid: int) -> Dict[int, _Thread]:
    s = dict(b._string_list)
    pageable = {
        r["correlationId"]
        for r in b.rows("memcpy")
        if pid_of(r["globalPid"]) == pid and 0 in (r["srcKind"], r["dstKind"])
    }
    first: Dict[int, Tuple[int, int]] = {}
    for r in b.rows("kernel"):
        if pid_of(r["globalPid"]) == pid:
            cur = first.get(r["demangledName"])
            if cur is None or r["start"] < cur[0]:
                first[r["demangledName"]] = (r["start"], r["correlationId"])
    first_corr = {c for _, c in first.values()}
    out: Dict[int, _Thread] = {}
    for r in b.rows("runtime"):
        if pid_of(r["globalTid"]) == pid:
            base = base_name(s[r["nameId"]])
            kind = _api_kind(base, r["correlationId"] in pageable, r["correlationId"] in first_corr)
            out.setdefault(r["globalTid"], _Thread()).api[kind].append((r["start"], r["end"], base))
    nvtx = [r for r in b.rows("nvtx") if pid_of(r["globalTid"]) == pid]
    domains = {r["domainId"]: r["text"] for r in nvtx if r["eventType"] == 75}
    for r in nvtx:
        if r["eventType"] == 59 and r.get("end") is not None:
            text = r["text"] if r.get("text") is not None else s[r["textId"]]
            detail = range_detail(text, domains.get(r["domainId"], "") if r.get("domainId") else "")
            out.setdefault(r["globalTid"], _Thread()).nvtx.append((r["start"], r["end"], detail))
    for r in b.rows("osrt"):
        if pid_of(r["globalTid"]) == pid:
            out.setdefault(r["globalTid"], _Thread()).osrt.append((r["start"], r["end"], s[r["nameId"]]))
    for t in out.values():
        t.build()
    return out


def _copies(b: TraceBuilder, pid: int, device: int) -> List[Iv]:
    out: List[Iv] = []
    for key in ("memcpy", "memset"):
        for r in b.rows(key):
            if pid_of(r["globalPid"]) != pid or r["deviceId"] != device:
                continue
            if key == "memset":
                label = "memset"
            else:
                label = _COPY_LABEL.get(r["copyKind"], str(r["copyKind"]))
                label += " (pageable)" if 0 in (r["srcKind"], r["dstKind"]) else ""
            out.append((r["start"], r["end"], label))
    return out


def _blocks(acts: Sequence[Tuple[int, int, int, int]], w0: int, w1: int) -> List[List[int]]:
    """Busy blocks [start, end, opening activity, closing activity] of activities clipped to the window."""
    blocks: List[List[int]] = []
    order = sorted(range(len(acts)), key=lambda i: (acts[i][0], acts[i][1]))
    for i in order:
        s, e = max(acts[i][0], w0), min(acts[i][1], w1)
        if e <= s:
            continue
        if blocks and s <= blocks[-1][1]:
            if e > blocks[-1][1]:
                blocks[-1][1], blocks[-1][3] = e, i
        else:
            blocks.append([s, e, i, i])
    return blocks


def planted_idle(b: TraceBuilder, pid: int, device: int, w0: int, w1: int) -> Dict[str, Dict[str, int]]:
    """{kind: {detail: idle ns}} of device ``device`` of process ``pid`` over ``[w0, w1)``."""
    launch = {r["correlationId"]: r for r in b.rows("runtime") if pid_of(r["globalTid"]) == pid}
    acts = []  # start, end, launch thread, launch end
    for key in ("kernel", "graph_trace"):
        for r in b.rows(key):
            if pid_of(r["globalPid"]) == pid and r["deviceId"] == device:
                api = launch.get(r["correlationId"])
                acts.append(
                    (r["start"], r["end"], api["globalTid"] if api else -1, api["end"] if api else -1)
                )
    blocks = _blocks(acts, w0, w1)
    counts: Dict[int, int] = {}
    for a in acts:
        if a[2] >= 0 and a[0] < w1 and a[1] > w0:
            counts[a[2]] = counts.get(a[2], 0) + 1
    dominant = max(counts, key=lambda g: counts[g]) if counts else -1
    threads = _threads(b, pid)
    copy_items = _copies(b, pid, device)
    copies = _Cover(copy_items)
    copy_bounds = sorted({p for c0, c1, _ in copy_items for p in (c0, c1)})
    edges = [w0] + [x for blk in blocks for x in blk[:2]] + [w1]
    out: Dict[str, Dict[str, int]] = {}
    for j in range(0, len(edges), 2):
        gs, ge = edges[j], edges[j + 1]
        if ge <= gs:
            continue
        nxt = blocks[j // 2] if j // 2 < len(blocks) else None
        prev = blocks[j // 2 - 1] if j // 2 >= 1 else None
        g = acts[nxt[2]][2] if nxt is not None else -1
        g = g if g >= 0 else (acts[prev[3]][2] if prev is not None else -1)
        g = g if g >= 0 else dominant
        hce = min(max(acts[nxt[2]][3], gs), ge) if nxt is not None and acts[nxt[2]][3] >= 0 else ge + 1
        th = threads.get(g)
        pts = {gs, ge, hce} | _inside(copy_bounds, gs, ge) | (_inside(th.bounds, gs, ge) if th else set())
        cut = sorted(p for p in pts if gs <= p <= ge)
        for t0, t1 in zip(cut, cut[1:]):
            d = copies.at(t0)
            if d is not None:
                kind, det = "copy", d
            elif t0 >= hce:
                kind, det = "queued", ""
            elif th is None:
                kind, det = ("unknown", "") if g < 0 else ("host_cpu", "")
            else:
                kind, det = th.cause(t0)
            per = out.setdefault(kind, {})
            per[det] = per.get(det, 0) + t1 - t0
    busy = sum(blk[1] - blk[0] for blk in blocks)
    assert sum(sum(v.values()) for v in out.values()) == (w1 - w0) - busy
    return out


def _inside(points: Sequence[int], a: int, z: int) -> set:
    return set(points[bisect.bisect_right(points, a) : bisect.bisect_left(points, z)])


def idle_facts(b: TraceBuilder, pid: int, device: int, w0: int, w1: int, prefix: str = "") -> Dict[str, Any]:
    """Planted window, busy and idle-by-cause numbers of one device, as facts (keys prefixed ``prefix``)."""
    by_cause = planted_idle(b, pid, device, w0, w1)
    by_kind = {k: sum(v.values()) for k, v in by_cause.items()}
    idle = sum(by_kind.values())
    top = max(by_kind, key=lambda k: (by_kind[k], -KINDS.index(k))) if by_kind else ""
    top_detail = max(by_cause[top], key=lambda d: (by_cause[top][d], d)) if top else ""
    return {
        f"{prefix}idle_window_ns": [w0, w1],
        f"{prefix}window_ns": w1 - w0,
        f"{prefix}window_busy_ns": (w1 - w0) - idle,
        f"{prefix}window_busy_pct": 100.0 * ((w1 - w0) - idle) / (w1 - w0),
        f"{prefix}idle_by_kind_ns": by_kind,
        f"{prefix}idle_by_cause_ns": by_cause,
        f"{prefix}top_idle_kind": top,
        f"{prefix}top_idle_detail": top_detail,
    }


def model_facts(
    facts: Dict[str, Any],
    b: TraceBuilder,
    key: Tuple[int, int],
    cause_kind: str,
    cause_detail: str,
    window: Optional[Tuple[int, int]] = None,
) -> Dict[str, Any]:
    """Add the planted idle model of device ``key`` = (pid, device) over ``window`` (default: the full
    window) plus the expected dominant idle cause to ``facts``; returns ``facts``."""
    fw = full_window(b)
    w0, w1 = window if window is not None else fw
    facts.update(idle_facts(b, key[0], key[1], w0, w1))
    facts["full_idle_window_ns"] = list(fw)
    facts["cause_kind"] = cause_kind
    facts["cause_detail"] = cause_detail
    return facts
