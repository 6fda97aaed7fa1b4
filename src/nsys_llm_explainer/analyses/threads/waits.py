"""Follow the wait: the waits of each launching thread in OS calls, and what the other threads of its process do
meanwhile. Definitions: docs/METRICS.md, "Waits of the launching thread".
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from ...jsonable import NONE_OMITTED, Outcome
from ...model.intervals import IntervalUnion, grouped_overlap, points_inside, union_blocks
from ...model.names import distinct_small
from ...model.timeline import rows_by_value
from ...model.trace import TraceModel, pid_of, tid_of
from ...vocabulary.os_calls import is_wait, os_call_class, waits_of
from ..api.classes import SYNC_WAIT
from ..common.processes import OtherProcess, sampled_processes
from ..common.stats import int_sums, pct
from ..idle.range_names import normalize_range_name
from ..idle.result import IdleCausesResult
from ..nvtx.tree import NvtxTree, innermost_enclosing

#: launching threads whose waits hold less than this % of the window are not followed
MIN_WAIT_SHARE = 1.0
#: a thread launches the work the report is about when it launched at least this % of the window's kernel time on
#: its GPUs (an engine process's few warm-up kernels beside its workers' do not make it "the launching thread")
MIN_LAUNCH_PCT = 10.0
#: launching threads followed (the largest waits)
MAX_LAUNCHERS = 16
#: rows (thread, what, name) kept per launching thread
TOP_ROWS = 20
WHATS = ("nvtx", "osrt", "cuda")


@dataclass(frozen=True)
class WaitCall:
    """One waiting call name of the launching thread: ``ns`` (union of its calls in the window), ``count``."""

    name: str
    ns: int
    count: int
    pct_of_window: float
    context: str = ""          # the innermost NVTX range (normalised name) around most of this call's wait time
    context_pct: float = 0.0   # its share of this call's wait time


@dataclass(frozen=True)
class WaitContext:
    """An NVTX range (normalised name) that is the innermost range around wait calls: ``ns`` of those calls."""

    range: str
    ns: int
    pct_of_waits: float


@dataclass(frozen=True)
class OtherThread:
    """Another thread of the process during the waits: ``active_ns`` = |(its NVTX ranges, CUDA calls and OS calls
    that do not wait, less its own waiting OS calls) ∩ waits| — it works; ``waiting_ns`` = |(its own waiting OS
    calls) ∩ waits| — it waits too; ``sampled``: its CPU samples taken inside the waits — it ran on a CPU (None:
    the trace has no CPU samples)."""

    gtid: int
    tid: int
    thread: str
    active_ns: int
    pct_of_waits: float
    waiting_ns: int
    waiting_pct_of_waits: float
    sampled: Optional[int] = field(default=None, metadata=NONE_OMITTED)


@dataclass(frozen=True)
class OverlapRow:
    """What another thread was in during the waits: ``what`` ``nvtx`` (range), ``osrt`` (OS call; ``os_class``
    ``wait``/``file_io``/``other``) or ``cuda`` (API call; ``os_class`` ``wait`` for a synchronize call, which waits
    for the GPU: :data:`analyses.api.classes.SYNC_WAIT`); ``ns`` overlapped with the waits."""

    gtid: int
    tid: int
    thread: str
    what: str
    name: str
    os_class: str
    ns: int
    pct_of_waits: float


@dataclass(frozen=True)
class LauncherWaits:
    """One launching thread's waits in the window and what the other threads of its process did meanwhile."""

    gtid: int
    pid: int
    tid: int
    thread: str
    devices: Tuple[int, ...]
    window_ns: int
    wait_ns: int
    wait_pct_of_window: float
    gpu_idle_ns: int
    calls: Tuple[WaitCall, ...]
    contexts: Tuple[WaitContext, ...]
    threads: Tuple[OtherThread, ...]
    rows: Tuple[OverlapRow, ...]
    #: CPU samples of the process's other threads taken inside the waits (None: the trace has no CPU samples)
    samples_in_waits: Optional[int] = field(default=None, metadata=NONE_OMITTED)
    #: its share of the window's kernel time on its devices: Σ (clipped) duration of the window's kernels it
    #: launched / Σ of all the window's kernels on those devices × 100
    kernel_pct: float = 100.0
    #: the other threads that launched ≥ MIN_LAUNCH_PCT % of the window's kernel time on one of its devices
    #: (0: it is the launching thread of its devices)
    co_launchers: int = 0
    #: CPU samples of the other processes' threads taken inside the waits (None: the trace has no CPU samples)
    process_samples: Optional[int] = field(default=None, metadata=NONE_OMITTED)
    #: those processes, most samples first (the TOP_ROWS largest; None: the trace has no CPU samples)
    processes: Optional[Tuple[OtherProcess, ...]] = field(default=None, metadata=NONE_OMITTED)

    def sampled_elsewhere(self) -> int:
        """Every CPU sample taken inside the waits but the launching thread's: its process's other threads' and
        the other processes' (0: none, or the trace has no CPU samples)."""
        return (self.samples_in_waits or 0) + (self.process_samples or 0)

    def shared_with(self) -> str:
        """Words for a thread that is not *the* launching thread of its devices ("" when it is): the number of
        threads launching their work and its share."""
        if not self.co_launchers:
            return ""
        gpus = ", ".join(str(d) for d in self.devices)
        return (f"one of {self.co_launchers + 1} threads that each launched ≥ {MIN_LAUNCH_PCT:g} % of the window's "
                f"kernel time on GPU {gpus}; this one {self.kernel_pct:.0f} %")

    def rows_of(self, gtid: int, what: Optional[str] = None) -> List[OverlapRow]:
        """This thread's rows (largest first), of one ``what`` or all."""
        return [r for r in self.rows if r.gtid == gtid and (what is None or r.what == what)]


@dataclass(frozen=True)
class WaitsResult(Outcome):
    """``launchers``: the launching threads whose waits hold ≥ :data:`MIN_WAIT_SHARE` % of the window, largest
    waits first."""

    window_ns: int = 0
    launchers: Tuple[LauncherWaits, ...] = ()


# ------------------------------------------------------------------------------------------ analysis


@dataclass(frozen=True)
class _Launcher:
    devices: Tuple[int, ...]
    kernel_pct: float
    co_launchers: int


def _launchers(model: TraceModel, w0: int, w1: int) -> Optional[Dict[int, _Launcher]]:
    """gtid → the devices of the kernels it launched in the window ``[w0, w1)``, its share of their kernel time
    and the other threads launching ≥ :data:`MIN_LAUNCH_PCT` % there; only threads that launched ≥
    :data:`MIN_LAUNCH_PCT` % of the window's kernel time on their devices (docs/METRICS.md "Waits of the launching
    thread"); None when no kernel of the window is linked to its launch call."""
    k, api = model.kernels, model.api
    if k is None or api is None or len(k) == 0 or k.launch_idx.shape[0] != len(k):
        return None
    ks, ke = np.asarray(k.start, np.int64), np.asarray(k.end, np.int64)
    inw = np.flatnonzero((ks < w1) & ((ke > w0) | (ks >= w0)))     # in the window (a zero-length one by its start)
    kd = np.maximum(np.minimum(ke[inw], w1) - np.maximum(ks[inw], w0), 0)
    devs, d_inv = distinct_small(k.device[inw].astype(np.int64))
    dev_ns = int_sums(d_inv, kd, devs.shape[0])                  # all the window's kernel time per device
    li = k.launch_idx[inw]
    ok = li >= 0
    g = api.gtid[li[ok]].astype(np.int64)
    if g.shape[0] == 0:
        return None
    gts, g_inv = distinct_small(g)
    n_d = devs.shape[0]
    ns = int_sums(g_inv * n_d + d_inv[ok], kd[ok], gts.shape[0] * n_d).reshape(gts.shape[0], n_d)
    launched = np.bincount(g_inv * n_d + d_inv[ok], minlength=gts.shape[0] * n_d).reshape(gts.shape[0], n_d) > 0
    big = 100.0 * ns >= MIN_LAUNCH_PCT * dev_ns                  # ≥ MIN_LAUNCH_PCT % of a device's kernel time
    out: Dict[int, _Launcher] = {}
    for i in range(gts.shape[0]):    # per launching thread (few)
        on = launched[i]
        share = pct(int(ns[i][on].sum()), int(dev_ns[on].sum()))
        if share < MIN_LAUNCH_PCT:
            continue
        peers = int((big[:, on].any(axis=1)).sum()) - int(big[i][on].any())
        out[int(gts[i])] = _Launcher(tuple(devs[on].tolist()), share, peers)
    return out


def analyze_waits(model: TraceModel, window_start_ns: int, window_end_ns: int,
                  causes: Optional[IdleCausesResult] = None, tree: Optional[NvtxTree] = None) -> WaitsResult:
    """The waits of every launching thread in ``[window_start_ns, window_end_ns)`` of ``model`` and what the other
    threads of its process did during them (module docstring); ``causes``: the idle causes (for ``gpu_idle_ns``),
    ``tree``: the NVTX nesting of ``model``'s ranges (for ``contexts``)."""
    w0, w1 = int(window_start_ns), int(window_end_ns)
    win = w1 - w0
    osrt = model.osrt
    if osrt is None or len(osrt) == 0:
        return WaitsResult(False, "the trace has no OS-runtime calls (capture with `--trace=osrt`)", win)
    launchers = _launchers(model, w0, w1)
    if launchers is None:
        return WaitsResult(False, "no kernel in the window is linked to the CUDA call that launched it", win)
    if not launchers:
        return WaitsResult(False, f"no thread launched ≥ {MIN_LAUNCH_PCT:g} % of the window's kernel time on its GPUs "
                                  "(the launches are spread over many threads)", win)
    o_g = np.asarray(osrt.gtid, np.int64)
    o_s = np.clip(np.asarray(osrt.start, np.int64), w0, w1)
    o_e = np.clip(np.asarray(osrt.end, np.int64), w0, w1)
    o_n = np.asarray(osrt.name_idx, np.int64)
    is_wait = waits_of(osrt.names)[o_n]
    labels = model.thread_labels            # names as every output shows them (`name (tid N)` on collisions)
    waits = np.nonzero(is_wait & (o_e > o_s))[0]
    of_thread = dict(rows_by_value(o_g[waits]))    # each thread's waiting calls, ascending: one sort
    cand = []
    for g, la in launchers.items():
        rows = waits[of_thread.get(g, waits[:0])]
        if rows.shape[0] == 0:
            continue
        w = union_blocks(o_s[rows], o_e[rows])
        if pct(w.length, win) >= MIN_WAIT_SHARE:
            cand.append((w.length, g, la, rows, w))
    if not cand:
        return WaitsResult(False, f"no launching thread waits in OS calls for {MIN_WAIT_SHARE:g} % of the window",
                           win)
    cand.sort(key=lambda c: (-c[0], c[1]))          # the largest waits are followed: other threads' rows are read
    found = [_follow(model, tree, g, la, o_s[rows], o_e[rows], o_n[rows], w, n, w0, w1, labels, causes)
             for n, g, la, rows, w in cand[:MAX_LAUNCHERS]]   # once per followed launcher
    return WaitsResult(True, None, win, tuple(found))


def _follow(model: TraceModel, tree: Optional[NvtxTree], g: int, la: _Launcher, o_s: np.ndarray,
            o_e: np.ndarray, o_n: np.ndarray, w: IntervalUnion, wait_ns: int, w0: int, w1: int,
            labels: Mapping[int, str], causes: Optional[IdleCausesResult]) -> LauncherWaits:
    """One launcher's waits: its waiting OS calls ``[o_s, o_e)`` (clipped to the window; name indices ``o_n``)."""
    osrt = model.osrt
    assert osrt is not None
    win = w1 - w0
    names, inv = distinct_small(o_n)
    whole = union_blocks(np.array([w0], np.int64), np.array([w1], np.int64))
    per_call = grouped_overlap(inv, o_s, o_e, names.shape[0], whole)
    counts = np.bincount(inv, minlength=names.shape[0])
    names_nv = model.nvtx.names if model.nvtx is not None else ()
    ctx = [_contexts(tree, names_nv, g, o_s[inv == i], o_e[inv == i], int(per_call[i]))[:1]   # call names are few
           for i in range(names.shape[0])]
    calls = sorted((WaitCall(osrt.names[n] if n >= 0 else "", int(ns), int(c), pct(int(ns), win),
                             cx[0].range if cx else "", cx[0].pct_of_waits if cx else 0.0)
                    for n, ns, c, cx in zip(names.tolist(), per_call.tolist(), counts.tolist(), ctx)),
                   key=lambda c: (-c.ns, c.name))
    pid = int(pid_of(np.array([g], np.int64))[0])
    sampled = _sampled(model, g, pid, w)
    others = _others(model, g, pid, w, wait_ns, w0, w1, labels, sampled)
    procs = sampled_processes(model, pid, w, 0 if sampled is None else sum(sampled.values()))
    return LauncherWaits(
        gtid=g, pid=pid, tid=int(tid_of(np.array([g], np.int64))[0]), thread=labels.get(g, ""),
        devices=tuple(sorted(la.devices)), window_ns=win, wait_ns=wait_ns, wait_pct_of_window=pct(wait_ns, win),
        gpu_idle_ns=sum(d.wait_ns_by_thread.get(g, 0) for d in causes.devices) if causes and causes.available else 0,
        calls=tuple(calls),
        contexts=_contexts(tree, names_nv, g, o_s, o_e, wait_ns),
        threads=others[0], rows=others[1], samples_in_waits=None if sampled is None else sum(sampled.values()),
        process_samples=None if procs is None else sum(p.sampled for p in procs[1]),
        processes=None if procs is None else procs[1][:TOP_ROWS], kernel_pct=la.kernel_pct,
        co_launchers=la.co_launchers)


def _contexts(tree: Optional[NvtxTree], range_names: Sequence[str], g: int, s: np.ndarray, e: np.ndarray,
              wait_ns: int) -> Tuple[WaitContext, ...]:
    """Innermost NVTX push/pop range (any domain) around each wait call ``[s, e)`` of thread ``g``: ns per range
    name (normalised)."""
    if tree is None or len(tree) == 0 or s.shape[0] == 0:
        return ()
    node = innermost_enclosing(tree, np.full(s.shape[0], g, np.int64), s, e)
    ok = node >= 0
    if not ok.any():
        return ()
    names, inv = distinct_small(tree.name_idx[node[ok]])
    ns = int_sums(inv, e[ok] - s[ok], names.shape[0])
    acc: Dict[str, int] = {}
    for n, v in zip(names.tolist(), ns.tolist()):
        k = normalize_range_name(range_names[n]) if 0 <= n < len(range_names) else ""
        acc[k] = acc.get(k, 0) + int(v)
    return tuple(WaitContext(k, v, pct(v, wait_ns)) for k, v in sorted(acc.items(), key=lambda x: (-x[1], x[0])))


def _waits(what: int, name: str) -> bool:
    """A call that waits: an OS call of the wait class (``what`` 1) or a CUDA synchronize call (``what`` 2)."""
    return (what == 1 and is_wait(name)) or (what == 2 and name in SYNC_WAIT)


def _sampled(model: TraceModel, g: int, pid: int, w: IntervalUnion) -> Optional[Dict[int, int]]:
    """gtid → CPU samples inside the waits ``w`` of each other thread of process ``pid`` with at least one (None: the
    trace has no CPU samples). ``model.wait_samples`` holds every sample inside the CUDA-calling threads' waits."""
    s = model.wait_samples
    if s is None or s.total == 0:
        return None
    if len(s) == 0 or len(w) == 0:
        return {}
    m = (pid_of(s.gtid) == pid) & (s.gtid != g) & points_inside(w, s.start)
    gt, inv = distinct_small(s.gtid[m])
    return dict(zip(gt.tolist(), np.bincount(inv, minlength=gt.shape[0]).tolist()))


def _others(model: TraceModel, g: int, pid: int, w: IntervalUnion, wait_ns: int, w0: int, w1: int,
            labels: Mapping[int, str], sampled: Optional[Dict[int, int]] = None
            ) -> Tuple[Tuple[OtherThread, ...], Tuple[OverlapRow, ...]]:
    """``threads`` and ``rows``: the other threads of process ``pid`` during the waits; ``sampled``: their CPU
    samples inside the waits (:func:`_sampled`)."""
    th, rows = _traced(model, g, pid, w, wait_ns, w0, w1, labels)
    if sampled is None:
        return th, rows
    seen = {t.gtid for t in th}
    extra = [OtherThread(t, int(tid_of(np.array([t], np.int64))[0]), labels.get(t, ""), 0, 0.0, 0, 0.0)
             for t in sampled if t not in seen]
    th = tuple(sorted((dataclasses.replace(t, sampled=sampled.get(t.gtid, 0)) for t in (*th, *extra)),
                      key=lambda t: (-t.active_ns, -t.waiting_ns, -(t.sampled or 0), t.tid)))
    return th, rows


def _traced(model: TraceModel, g: int, pid: int, w: IntervalUnion, wait_ns: int, w0: int, w1: int,
            labels: Mapping[int, str]) -> Tuple[Tuple[OtherThread, ...], Tuple[OverlapRow, ...]]:
    """``threads`` and ``rows`` from the traced rows (NVTX ranges, OS calls, CUDA calls) of the other threads of
    process ``pid`` during the waits (the trace has OS calls: :func:`analyze_waits`)."""
    parts: List[Tuple[np.ndarray, np.ndarray, np.ndarray, int, np.ndarray, Sequence[str]]] = []
    nv, osrt, api = model.nvtx, model.osrt, model.api
    if nv is not None and len(nv):
        m = nv.closed & (nv.pid == pid) & (nv.gtid != g)
        nv_names = [normalize_range_name(n) for n in nv.names]
        parts.append((nv.gtid[m], nv.start[m], nv.end[m], 0, nv.name_idx[m], nv_names))
    if osrt is not None and len(osrt):
        og = np.asarray(osrt.gtid, np.int64)
        m = (pid_of(og) == pid) & (og != g)
        parts.append((og[m], osrt.start[m], osrt.end[m], 1, np.asarray(osrt.name_idx, np.int64)[m],
                      osrt.names))
    if api is not None and len(api):
        m = api.primary & (api.pid == pid) & (api.gtid != g)
        parts.append((api.gtid[m], api.start[m], api.end[m], 2, api.name_idx[m], api.base_names))
    gt = np.concatenate([p[0] for p in parts]).astype(np.int64)
    st = np.clip(np.concatenate([p[1] for p in parts]).astype(np.int64), w0, w1)
    en = np.clip(np.concatenate([p[2] for p in parts]).astype(np.int64), w0, w1)
    # (what, display name) → one code per distinct pair (its insertion index), so equal normalised names merge;
    # each part adds (what, "") at least: vocab is never empty
    vocab: Dict[Tuple[int, str], int] = {}
    codes = []
    for _, _, _, what, idx, names in parts:
        lut = np.array([vocab.setdefault((what, n), len(vocab)) for n in names]
                       + [vocab.setdefault((what, ""), len(vocab))], np.int64)
        codes.append(lut[np.asarray(idx, np.int64)])
    nc = np.concatenate(codes)
    keep = en > st
    gt, st, en, nc = gt[keep], st[keep], en[keep], nc[keep]
    threads, t_inv = distinct_small(gt)
    # calls that wait: OS calls of the wait class, CUDA synchronize calls (the thread waits for its GPU)
    waits_code = np.array([_waits(what, name) for what, name in vocab], bool)
    blocked = waits_code[nc]
    waiting = grouped_overlap(t_inv[blocked], st[blocked], en[blocked], threads.shape[0], w)
    # works = (its ranges and calls) minus its own waiting calls: |(A ∪ B) ∩ W| − |B ∩ W| = |(A \ B) ∩ W|, so a
    # thread blocked in `sem_wait` (or `cudaStreamSynchronize`) inside its own NVTX range waits there
    active = grouped_overlap(t_inv, st, en, threads.shape[0], w) - waiting
    key = t_inv * len(vocab) + nc
    ukey, k_inv = distinct_small(key)
    per = grouped_overlap(k_inv, st, en, ukey.shape[0], w)
    pairs = list(vocab)
    tids = tid_of(threads)
    th = sorted((OtherThread(int(threads[i]), int(tids[i]), labels.get(int(threads[i]), ""), int(active[i]),
                             pct(int(active[i]), wait_ns), int(waiting[i]), pct(int(waiting[i]), wait_ns))
                 for i in np.nonzero((active > 0) | (waiting > 0))[0].tolist()),
                key=lambda t: (-t.active_ns, -t.waiting_ns, t.tid))
    rows = []
    for j in np.nonzero(per > 0)[0].tolist():
        ti, c = divmod(int(ukey[j]), len(vocab))
        what, name = pairs[c]
        rows.append(OverlapRow(int(threads[ti]), int(tids[ti]), labels.get(int(threads[ti]), ""), WHATS[what], name,
                               os_call_class(name) if what == 1 else "wait" if waits_code[c] else "", int(per[j]),
                               pct(int(per[j]), wait_ns)))
    rows.sort(key=lambda r: (-r.ns, r.tid, r.what, r.name))
    return tuple(th), tuple(rows[:TOP_ROWS])
