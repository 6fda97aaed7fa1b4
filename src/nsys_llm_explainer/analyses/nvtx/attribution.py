"""NVTX → kernel attribution: the kernel time launched inside each NVTX range name (inclusive, innermost), the
coverage, and the kernels no range covers per launching thread (docs/METRICS.md, "NVTX → kernel attribution").
Phase totals (``--phase-map``) come from :mod:`phases`: :mod:`graph`'s ``phases`` step sets ``phases`` on a copy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, FrozenSet, List, Optional, Tuple

import numpy as np

from ...jsonable import NOT_IN_JSON, FieldsJson, Outcome, json_name
from ...model.timeline import few_distinct, rows_by_value
from ...model.trace import TraceModel
from ..common.stats import group_stats, group_sums, int_sums, pct
from ..idle.pieces import index_runs
from ..idle.range_names import normalize_range_name
from .tree import (
    NvtxTree,
    combine_innermost,
    distinct_calls,
    domain_layer_nodes,
    enclosing_by_domain,
    has_ancestor_with_key,
    per_call,
    subtree_sums,
)


@dataclass(frozen=True)
class RangeRow(FieldsJson):
    """Kernels attributed to one NVTX range name (docs/METRICS.md): ``style`` ``PushPop`` or ``StartEnd``."""

    name: str
    style: str
    kernel_count: int
    inclusive_ns: int
    innermost_ns: int
    innermost_kernel_count: int
    pct_of_kernel_time: float


@dataclass(frozen=True)
class RangePidRow(FieldsJson):
    """Kernels of process ``pid`` attributed to one NVTX range name (inclusive)."""

    pid: int
    name: str
    style: str
    kernel_count: int
    inclusive_ns: int


@dataclass(frozen=True)
class UncoveredThread(FieldsJson):
    """Kernels no push/pop range covers that one thread launched (:func:`uncovered_threads`); ``gtid`` -1: the
    kernels whose launch call is unknown."""

    gtid: int
    pid: int
    tid: int
    thread_name: str     # its label (model/names.thread_labels: ``name (tid N)`` where names collide); "" unnamed
    kernel_count: int
    kernel_ns: int
    pct_of_uncovered: float
    thread_ranges: int   # NVTX ranges the thread opened


@dataclass(frozen=True)
class PidCoverage(FieldsJson):
    """The kernel time of process ``pid`` and the part of it inside a push/pop range (``coverage`` = their
    ratio, 0 without kernel time)."""

    pid: int
    kernel_ns: int
    attributed_ns: int
    coverage: float


@dataclass(frozen=True)
class AttributionPhase(FieldsJson):
    """The kernels of one phase of a user ``--phase-map`` (:mod:`..steps.phases`): count, summed duration (ns) and
    share of all kernel time."""

    phase: str
    kernel_count: int
    kernel_ns: int
    pct_of_kernel_time: float


@dataclass(frozen=True)
class AttributionResult(Outcome):
    coverage: float = 0.0
    total_kernel_ns: int = 0
    attributed_ns: int = 0
    attributed_count: int = field(default=0, metadata=json_name("attributed_kernel_count"))
    linked_kernel_ns: int = 0          # kernel time whose launch call was found
    startend_kernel_ns: int = 0        # kernel time launched inside ≥ 1 start/end range (same thread)
    ranges: Tuple[RangeRow, ...] = ()
    by_pid: Tuple[RangePidRow, ...] = ()
    pid_coverage: Tuple[PidCoverage, ...] = ()
    phases: Tuple[AttributionPhase, ...] = ()   # set only with a user --phase-map (graph.py)
    uncovered_by_thread: Tuple[UncoveredThread, ...] = ()   # kernels no push/pop range covers, per launching thread
    # helpers, not in report.json: innermost tree node per kernel (-1 none), and one innermost node per NVTX domain
    # stack, in layers (tree.enclosing_by_domain: a layer holds domains whose kernels do not meet)
    kernel_node: Optional[np.ndarray] = field(default=None, metadata=NOT_IN_JSON)
    kernel_nodes: Dict[int, np.ndarray] = field(default_factory=dict, metadata=NOT_IN_JSON)

    def launch_range_details(self) -> FrozenSet[str]:
        """The idle-cause details (range names, digit runs as ``N``) of push/pop ranges that enclose at least
        one kernel launch: ranges the launches happen in (a step, a layer), as opposed to ranges of host work
        that launch nothing."""
        return frozenset(normalize_range_name(r.name) for r in self.ranges
                         if r.style == "PushPop" and r.kernel_count > 0)


def analyze_attribution(model: TraceModel, tree: Optional[NvtxTree]) -> AttributionResult:
    k, api = model.kernels, model.api
    if k is None or len(k) == 0:
        return AttributionResult(False, "no kernels to attribute")
    if api is None or len(api) == 0:
        return AttributionResult(False, "no CUDA API calls: kernels cannot be linked to launching threads")
    total = int(k.dur.sum())
    li = k.launch_idx
    linked = li >= 0
    calls = distinct_calls(len(api), li)     # distinct launch calls (graph launches map to many kernels)
    se_rows, se_by_pid, se_ns = startend_rows(model, calls, total)
    if tree is None or len(tree) == 0:
        if model.nvtx is None or not se_rows:
            return AttributionResult(False, "no NVTX push/pop or start/end ranges to attribute kernels to")
        return AttributionResult(True, None, total_kernel_ns=total, linked_kernel_ns=int(k.dur[linked].sum()),
                                 startend_kernel_ns=se_ns, ranges=se_rows, by_pid=se_by_pid)
    # innermost range per distinct launch call, then per kernel
    by_dom = enclosing_by_domain(tree, api.gtid, api.start, api.end, calls)
    kernel_nodes = {d: per_call(len(api), li, calls, cn) for d, cn in by_dom.items()}
    # one domain: the innermost range over domains is that domain's (the same array, not a copy)
    node = next(iter(kernel_nodes.values())) if len(kernel_nodes) == 1 else \
        per_call(len(api), li, calls, combine_innermost(tree, by_dom, calls.shape[0]))
    for a in (node, *kernel_nodes.values()):   # shared with phases and steps: read-only
        a.flags.writeable = False
    del by_dom
    dur = k.dur                                # (made after the lookups: less memory at once)
    att = node >= 0
    attributed_ns = int(dur[att].sum())

    n = len(tree)

    def per_node(nd: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        """(Σ duration, kernel count) per tree node of the kernels with node ``nd`` ≥ 0 (bin 0 = none)."""
        b = nd + 1
        return (np.bincount(b, weights=dur, minlength=n + 1)[1:].astype(np.int64),
                np.bincount(b, minlength=n + 1)[1:].astype(np.int64))

    inner_t, inner_c = per_node(node)
    # inclusive sums: a kernel sits in one innermost node per domain stack of its launching thread
    own_t = np.zeros(n, np.int64)
    own_c = np.zeros(n, np.int64)
    for dn in kernel_nodes.values():
        t, c = per_node(dn)
        own_t += t
        own_c += c
    sub_t, sub_c = subtree_sums(tree, own_t), subtree_sums(tree, own_c)
    dup = has_ancestor_with_key(tree, tree.name_idx)   # has an ancestor with the same name
    names = model.nvtx.names if model.nvtx is not None else []
    nn = len(names)
    first = ~dup
    incl_t = np.bincount(tree.name_idx[first], weights=sub_t[first], minlength=nn).astype(np.int64)
    incl_c = np.bincount(tree.name_idx[first], weights=sub_c[first], minlength=nn).astype(np.int64)
    inn_t = np.bincount(tree.name_idx, weights=inner_t, minlength=nn).astype(np.int64)
    inn_c = np.bincount(tree.name_idx, weights=inner_c, minlength=nn).astype(np.int64)
    ranges = tuple(RangeRow(names[i], "PushPop", int(incl_c[i]), int(incl_t[i]), int(inn_t[i]), int(inn_c[i]),
                            pct(int(incl_t[i]), total))
                   for i in np.lexsort((np.arange(nn), -incl_t)).tolist() if incl_c[i] != 0)
    # per (PID, name) (tree nodes carry the launching thread's PID)
    pid, name = tree.pid[first], tree.name_idx[first]
    at, _, _, (pt, pc) = group_sums([pid, name], sub_t[first], sub_c[first])
    by_pid = tuple(RangePidRow(int(pid[at[j]]), names[int(name[at[j]])], "PushPop", int(pc[j]), int(pt[j]))
                   for j in np.argsort(-pt, kind="stable").tolist() if pc[j] != 0)
    pid_coverage = []
    for p, m in rows_by_value(np.asarray(k.pid)):     # one sort, not a mask over every kernel per pid
        pt_all = int(dur[m].sum())
        pa = int(dur[m[att[m]]].sum())
        pid_coverage.append(PidCoverage(p, pt_all, pa, pa / pt_all if pt_all else 0.0))
    return AttributionResult(
        True, None, total_kernel_ns=total, attributed_ns=attributed_ns, attributed_count=int(att.sum()),
        uncovered_by_thread=uncovered_threads(model, ~att, dur),
        coverage=attributed_ns / total if total else 0.0, linked_kernel_ns=int(dur[linked].sum()),
        startend_kernel_ns=se_ns, ranges=ranges + se_rows, by_pid=by_pid + se_by_pid,
        pid_coverage=tuple(pid_coverage), kernel_node=node, kernel_nodes=kernel_nodes)


def uncovered_threads(model: TraceModel, uncovered: np.ndarray, dur: np.ndarray, top: int = 8
                      ) -> Tuple[UncoveredThread, ...]:
    """Kernels no push/pop range covers, per launching thread (largest kernel time first, ``top`` rows): the
    thread (``gtid``, ``pid``, ``tid``, ``thread_name``), its uncovered ``kernel_count`` / ``kernel_ns`` and their
    share of all uncovered kernel time, and ``thread_ranges``: NVTX ranges that thread opened (nsys attributes
    ranges per thread, so a thread with none — e.g. PyTorch's autograd thread — can never be covered). Kernels
    whose launch call is unknown are one row with ``gtid`` -1."""
    k, api = model.kernels, model.api
    assert k is not None and api is not None
    li = k.launch_idx[uncovered]
    g = np.where(li >= 0, api.gtid[np.maximum(li, 0)], -1).astype(np.int64)
    if g.shape[0] == 0:
        return ()
    u = few_distinct(g)                      # launching threads are few: no full sort of the kernels
    inv = np.searchsorted(u, g)
    ns = np.bincount(inv, weights=dur[uncovered], minlength=u.shape[0]).astype(np.int64)
    cnt = np.bincount(inv, minlength=u.shape[0])
    total = int(ns.sum())
    nv = model.nvtx
    ranges: Dict[int, int] = {}
    if nv is not None and len(nv):
        rg, rc = np.unique(nv.gtid, return_counts=True)
        ranges = dict(zip(rg.tolist(), rc.tolist()))
    rows = []
    for j in np.lexsort((u, -ns)).tolist()[:top]:
        gt = int(u[j])
        rows.append(UncoveredThread(
            gtid=gt, pid=int((gt >> 24) & 0xFFFFFF) if gt >= 0 else -1, tid=int(gt & 0xFFFFFF) if gt >= 0 else -1,
            thread_name=model.thread_label(gt), kernel_count=int(cnt[j]), kernel_ns=int(ns[j]),
            pct_of_uncovered=pct(int(ns[j]), total), thread_ranges=int(ranges.get(gt, 0))))
    return tuple(rows)


def startend_rows(model: TraceModel, calls: np.ndarray, total: int
                  ) -> Tuple[Tuple[RangeRow, ...], Tuple[RangePidRow, ...], int]:
    """Rows (style ``StartEnd``) for start/end ranges ended on their own thread: per name and per
    (pid, name), the kernels whose launch call (rows ``calls`` of the API table) lies inside one of
    them on the same thread — each kernel once per name. Also the kernel time inside any of them."""
    nv, api, k = model.nvtx, model.api, model.kernels
    if nv is None or api is None or k is None or len(nv) == 0 or calls.shape[0] == 0:
        return (), (), 0
    se = np.nonzero(((nv.event_type == 60) | (nv.event_type == 71)) & (nv.end_gtid < 0))[0]
    if se.shape[0] == 0:
        return (), (), 0
    # launch calls ordered by (thread, start): the calls of one thread starting in [s, e] are one slice
    o = np.lexsort((api.start[calls], api.gtid[calls]))
    cg, cs, ce, cid = api.gtid[calls][o], api.start[calls][o], api.end[calls][o], calls[o]
    # per range: the calls of its thread starting in [start, end] (one slice of the calls by (thread, start)), those
    # ending by its end kept — all ranges at once (a loop over threads, none over ranges)
    se_s, se_e = nv.start[se], nv.end[se]
    a = np.zeros(se.shape[0], np.int64)
    b = np.zeros(se.shape[0], np.int64)
    for g, rr in rows_by_value(np.asarray(nv.gtid[se], np.int64)):
        lo, hi = int(np.searchsorted(cg, g, "left")), int(np.searchsorted(cg, g, "right"))
        a[rr] = lo + np.searchsorted(cs[lo:hi], se_s[rr], "left")
        b[rr] = lo + np.searchsorted(cs[lo:hi], se_e[rr], "right")
    cnt = np.maximum(b - a, 0)
    which = np.repeat(np.arange(se.shape[0]), cnt)
    at = index_runs(a, cnt)
    keep = ce[at] <= se_e[which]
    which, pair_call = which[keep], cid[at[keep]]
    del at, keep
    if which.shape[0] == 0:
        return (), (), 0
    # distinct (name, call) pairs; names in the order of their first range with a call
    pair_name = np.asarray(nv.name_idx, np.int64)[se[which]]
    u_name, name_inv = np.unique(pair_name, return_inverse=True)
    first = np.full(u_name.shape[0], which.shape[0], np.int64)
    np.minimum.at(first, name_inv.reshape(-1), np.arange(which.shape[0]))
    rank = np.empty(u_name.shape[0], np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(u_name.shape[0])
    pairs = np.unique(rank[name_inv.reshape(-1)] * len(api) + pair_call)
    p_rank, p_call = pairs // len(api), pairs % len(api)
    del which, pair_name, pair_call, name_inv, pairs
    dur, li = k.dur, k.launch_idx
    linked = li >= 0
    any_call = np.zeros(len(api), bool)
    any_call[p_call] = True
    # the kernels each pair's call launched: (name, kernel) once each
    kl = np.flatnonzero(linked)
    kl = kl[np.argsort(li[kl], kind="stable")]
    k_lo = np.searchsorted(li[kl], p_call, "left")
    k_n = np.searchsorted(li[kl], p_call, "right") - k_lo
    kn_rank = np.repeat(p_rank, k_n)
    kn_k = kl[index_runs(k_lo, k_n)]
    n_names = u_name.shape[0]
    n_of = np.bincount(kn_rank, minlength=n_names)
    t_of = int_sums(kn_rank, dur[kn_k], n_names)
    names_in_order = u_name[np.argsort(rank)]
    rows: List[RangeRow] = [RangeRow(nv.names[int(ni)], "StartEnd", int(n_of[j]), int(t_of[j]), 0, 0,
                                     pct(int(t_of[j]), total)) for j, ni in enumerate(names_in_order.tolist())]
    gs = group_stats({"rank": kn_rank, "pid": np.asarray(k.pid, np.int64)[kn_k]}, np.asarray(dur[kn_k], np.int64))
    by_pid = [RangePidRow(p, nv.names[int(names_in_order[r])], "StartEnd", c, t) for r, p, c, t in
              zip(gs.keys["rank"].tolist(), gs.keys["pid"].tolist(), gs.count.tolist(), gs.total.tolist())]
    rows.sort(key=lambda r: (-r.inclusive_ns, r.name))
    by_pid.sort(key=lambda r: (-r.inclusive_ns, r.pid, r.name))
    se_ns = int(dur[linked & any_call[np.maximum(li, 0)]].sum())
    return tuple(rows), tuple(by_pid), se_ns


def default_domain_node(model: TraceModel, tree: Optional[NvtxTree], att: AttributionResult) -> Optional[np.ndarray]:
    """Per kernel, its innermost range of the default NVTX domain (0) when that domain has ranges on a thread that
    launches kernels; else the innermost over all domains (``att.kernel_node``)."""
    if not att.kernel_nodes or tree is None or len(tree) == 0 or att.kernel_node is None:
        return att.kernel_node
    seg = tree.thread_bounds[:-1]
    dom = tree.domain[seg]
    k, api = model.kernels, model.api
    if k is None or api is None:
        return att.kernel_node
    li = k.launch_idx[k.launch_idx >= 0]
    if not np.isin(tree.gtid[seg][dom == 0], api.gtid[li]).any():
        return att.kernel_node
    out = domain_layer_nodes(tree, att.kernel_nodes, 0, att.kernel_node.shape[0])
    out.flags.writeable = False
    return out
