"""Model-step (decode / prefill iteration) detection and per-step metrics.

Method ``nvtx`` — one NVTX push/pop range per step. With ``step_range`` the ranges named so (exact,
case-insensitive; else every name containing it) are the steps. Otherwise candidates are range names on
the *launching threads* (threads that issued a CUDA call that launched a kernel) with ≥ 3 instances that
enclose kernel launches and do not overlap within a process (instances nested in a same-name range are
not separate instances). Preferred, in order: names that look like a step (a step keyword such as
``execute_model`` / ``step`` or a prefill/decode phase name), the shallowest nesting depth, the most
instances, the most kernels enclosed. When the chosen name has a phase, range names of the other
prefill/decode phases at the same depth are added (prefill steps beside decode steps).
Method ``marker`` (no suitable NVTX range, or ``step_marker`` given) — per device, marker kernels are
kernels whose name matches ``step_marker`` (default :data:`DEFAULT_MARKER`, sampling / argmax kernels;
a run of consecutive marker kernels counts once, by its last kernel); step i runs from the end of marker
i to the end of marker i + 1.

Per step:

* ``start_ns`` / ``end_ns`` / ``wall_ns`` = end − start; ``pid``: process of the range (of the closing
  marker kernel); ``device``: device that ran most of the step's kernels (NVTX: else the process's most
  used device; -1 when unknown).
* ``kernel_count``: kernels launched in the step — NVTX: kernels whose launch call on the range's thread
  lies inside the range (graph launches of a graph-level trace count for step detection and the device,
  not here); marker: kernels on the device starting in [start, end).
* ``gpu_busy_ns``: length of the union of all kernel intervals (and whole-graph intervals when the trace
  recorded CUDA graphs at graph level) on the step's device clipped to [start, end);
  ``gpu_idle_ns`` = ``wall_ns`` − ``gpu_busy_ns``.
* ``sync_ns``: length of the union of host-blocking sync calls (api_classes class ``sync``) of the
  step's process (all threads) clipped to the step.
* ``memcpy_ns``: length of the union of GPU memcpy intervals on the step's device clipped to the step.
* ``phase``: NVTX method — the phase of the step range itself when its name (or an enclosing range's)
  has one; otherwise the phase with the most GPU time among the work launched in the step (kernels,
  and whole graphs of a graph-level trace; phase of their launch call, :mod:`phases`); for markers, the
  phase with the most kernel time among the step's kernels; ``unmapped`` when none.

Distributions (``summary``, ``by_phase``, ``by_pid``): count / total / avg / min / max / p50 / p90 / p99 of
``wall_ns`` (:func:`stats.summary`) plus totals of the other metrics. ``median_by_phase``: the median of
each metric over the phase's steps (rounded half up). ``slowest``: the ``top`` steps with the largest
``wall_ns`` (ties: earlier first); ``outliers``: the ``top`` steps with the largest positive excess of
``wall_ns`` over their phase's median; each with ``vs_median`` = its metrics minus its phase's medians.
``confidence``: ``high`` (user-chosen range, or a step-like name whose instances enclose ≥ 50 % of the
kernels launched from their threads), ``medium`` (step-like name with lower coverage; marker method with
≥ 5 steps on every device), ``low`` (otherwise).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

import numpy as np

from ..errors import InputError
from ..model.trace import TraceModel
from . import intervals as iv
from .api_classes import class_mask
from .nvtx_tree import NvtxTree, build_tree, innermost_enclosing
from .phases import UNMAPPED, PhaseResult, phase_of_names, resolve_nodes, resolve_phase_map, step_keywords
from .stats import round_half_up, summary

DEFAULT_MARKER = r"argmax|sampl|top_?k|top_?p|topp"
MIN_INSTANCES = 3
METRICS = ("wall_ns", "gpu_busy_ns", "gpu_idle_ns", "sync_ns", "memcpy_ns", "kernel_count")


@dataclass
class StepArrays:
    """Full per-step columns (not serialized), in step order (by pid/device, then start)."""

    start: np.ndarray
    end: np.ndarray
    pid: np.ndarray
    device: np.ndarray
    phase: np.ndarray          # index into ``phase_names``, -1 unmapped
    kernel_count: np.ndarray
    gpu_busy: np.ndarray
    sync: np.ndarray
    memcpy: np.ndarray
    phase_names: List[str]

    @property
    def wall(self) -> np.ndarray:
        return self.end - self.start

    @property
    def gpu_idle(self) -> np.ndarray:
        return self.wall - self.gpu_busy

    def __len__(self) -> int:
        return int(self.start.shape[0])

    def phase_label(self, i: int) -> str:
        p = int(self.phase[i])
        return self.phase_names[p] if p >= 0 else UNMAPPED

    def row(self, i: int) -> Dict[str, object]:
        return {"index": int(i), "start_ns": int(self.start[i]), "end_ns": int(self.end[i]),
                "wall_ns": int(self.wall[i]), "phase": self.phase_label(i), "pid": int(self.pid[i]),
                "device": int(self.device[i]), "gpu_busy_ns": int(self.gpu_busy[i]),
                "gpu_idle_ns": int(self.gpu_idle[i]), "kernel_count": int(self.kernel_count[i]),
                "sync_ns": int(self.sync[i]), "memcpy_ns": int(self.memcpy[i])}


@dataclass
class StepResult:
    available: bool
    reason: Optional[str]
    method: str                        # "nvtx" | "marker" | "none"
    confidence: str = "low"            # "high" | "medium" | "low"
    confidence_reason: str = ""
    step_ranges: List[str] = field(default_factory=list)    # NVTX names used as steps
    marker_regex: Optional[str] = None
    marker_kernels: List[Dict] = field(default_factory=list)  # marker kernel names and counts
    step_count: int = 0
    summary: Dict[str, int] = field(default_factory=dict)
    totals: Dict[str, int] = field(default_factory=dict)
    by_phase: List[Dict] = field(default_factory=list)
    by_pid: List[Dict] = field(default_factory=list)
    median_by_phase: List[Dict] = field(default_factory=list)
    slowest: List[Dict] = field(default_factory=list)
    outliers: List[Dict] = field(default_factory=list)
    notes: List[str] = field(default_factory=list)
    arrays: Optional[StepArrays] = None   # full per-step data (not serialized; drop in JSON)

    def to_dict(self) -> Dict[str, object]:
        return {k: getattr(self, k) for k in (
            "available", "reason", "method", "confidence", "confidence_reason", "step_ranges", "marker_regex",
            "marker_kernels", "step_count", "summary", "totals", "by_phase", "by_pid", "median_by_phase",
            "slowest", "outliers", "notes")}

    def table(self) -> List[Dict[str, object]]:
        """Every step as a row (for CSV output)."""
        a = self.arrays
        return [a.row(i) for i in range(len(a))] if a is not None else []


# ------------------------------------------------------------------------------------------- helpers
def _launch_rows(model: TraceModel) -> np.ndarray:
    k = model.kernels
    if k is None or len(k) == 0 or k.launch_idx.shape[0] != len(k):
        return np.zeros(0 if k is None else len(k), np.int64) - 1
    return k.launch_idx


def _work(model: TraceModel) -> Tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """GPU work = kernels, then whole-graph rows (graph-level trace): (launch row, device, pid, #kernels)."""
    k, gt = model.kernels, model.graph_trace
    li = [_launch_rows(model)]
    dev = [k.device.astype(np.int64)] if k is not None else [np.zeros(0, np.int64)]
    pid = [k.pid.astype(np.int64)] if k is not None else [np.zeros(0, np.int64)]
    nk = int(li[0].shape[0])
    if gt is not None and len(gt) and "launch_idx" in gt.cols:
        li.append(gt["launch_idx"].astype(np.int64))
        dev.append(gt["device"].astype(np.int64))
        pid.append(gt["pid"].astype(np.int64))
    return np.concatenate(li), np.concatenate(dev), np.concatenate(pid), nk


def _kernel_nodes(model: TraceModel, tree: NvtxTree, li: np.ndarray) -> np.ndarray:
    """Innermost enclosing tree node of each kernel's launch call (as nvtx_attribution does)."""
    api = model.api
    node = np.full(li.shape[0], -1, np.int64)
    linked = li >= 0
    if api is None or not linked.any():
        return node
    calls = np.unique(li[linked])
    cn = innermost_enclosing(tree, api.gtid[calls], api.start[calls], api.end[calls])
    lut = np.full(len(api), -1, np.int64)
    lut[calls] = cn
    node[linked] = lut[li[linked]]
    return node


def _subtree_counts(tree: NvtxTree, node: np.ndarray) -> np.ndarray:
    """Kernels launched inside each tree node (its own and its descendants')."""
    n = len(tree)
    c = np.bincount(node[node >= 0], minlength=n).astype(np.int64)
    for d in range(int(tree.depth.max()) if n else 0, 0, -1):
        m = np.nonzero(tree.depth == d)[0]
        np.add.at(c, tree.parent[m], c[m])
    return c


def _self_nested(tree: NvtxTree, key: np.ndarray) -> np.ndarray:
    """Nodes with an ancestor of the same ``key`` (per node)."""
    dup = np.zeros(len(tree), bool)
    for anc in tree.ancestors_rounds():
        ok = anc >= 0
        dup |= ok & (key[np.maximum(anc, 0)] == key)
    return dup


def _overlaps(pid: np.ndarray, start: np.ndarray, end: np.ndarray) -> bool:
    o = np.lexsort((start, pid))
    p, s, e = pid[o], start[o], end[o]
    same = p[1:] == p[:-1]
    return bool((same & (s[1:] < e[:-1])).any())


_DIGITS = re.compile(r"\d+")
#: NVTX names of libraries / per-op instrumentation that never mark a model step
_NOT_STEP = re.compile(
    r"^(?:[\w.]+:)?(?:nccl|mpi_|aten::|cublas|cudnn|cufft|nvshmem|cupti)"   # libraries, torch ops
    r"|, (?:seq|op_id) = "                                                 # torch emit_nvtx op ranges
    r"|^tensorrt:(?!executioncontext)",                                    # TensorRT per-layer ranges
    re.IGNORECASE)


def _name_groups(names: List[str]) -> Tuple[np.ndarray, List[str]]:
    """Group id per name (digit runs replaced by ``#``: ``token_7_step`` → ``token_#_step``), plus labels."""
    labels: List[str] = []
    index: Dict[str, int] = {}
    gid = np.full(len(names) + 1, -1, np.int64)
    for i, n in enumerate(names):
        g = _DIGITS.sub("#", n)
        if g not in index:
            index[g] = len(labels)
            labels.append(g)
        gid[i] = index[g]
    return gid, labels


def _looks_like_step(name: str, keywords: List[str]) -> bool:
    low = name.lower()
    return any(kw.lower() in low for kw in keywords)


def _step_sort(pid: np.ndarray, dev: np.ndarray, start: np.ndarray) -> np.ndarray:
    return np.lexsort((start, dev, pid))


# ------------------------------------------------------------------------------------------- NVTX method
@dataclass
class _Choice:
    nodes: np.ndarray
    names: List[str]
    confidence: str
    reason: str


def _choose_nvtx(model: TraceModel, tree: NvtxTree, knode: np.ndarray, li: np.ndarray,
                 phase_map: Dict[str, List[str]], step_range: Optional[str],
                 notes: List[str]) -> Optional[_Choice]:
    names = model.nvtx.names if model.nvtx is not None else []
    if step_range:
        want = step_range.lower()
        exact = [i for i, n in enumerate(names) if n.lower() == want]
        ids = exact or [i for i, n in enumerate(names) if want in n.lower()]
        if ids:
            sel = np.isin(tree.name_idx, np.asarray(ids, np.int64))
            sel &= ~_self_nested(tree, np.where(sel, 0, -1 - np.arange(len(tree))))
            used = sorted({names[i] for i in tree.name_idx[sel].tolist()})
            return _Choice(np.nonzero(sel)[0], used, "high",
                           f"step ranges chosen by the user (--step-range {step_range!r})")
        notes.append(f"--step-range {step_range!r} matches no NVTX push/pop range; "
                     "detecting steps automatically")
    api = model.api
    if api is None or not (li >= 0).any():
        return None
    gid, glabels = _name_groups(names)
    node_g = gid[tree.name_idx]
    lthreads = np.unique(api.gtid[li[li >= 0]])
    sub = _subtree_counts(tree, knode)
    usable = np.array([not _NOT_STEP.search(g) for g in glabels] + [False], bool)
    cand = np.isin(tree.gtid, lthreads) & ~_self_nested(tree, node_g) & usable[node_g]
    labels = list(phase_map.keys())
    g_phase = phase_of_names(glabels, phase_map)
    step_phases = {j for j, p in enumerate(labels) if p != "other"}
    kws = step_keywords()
    best: Optional[Tuple] = None
    info: Dict[int, Tuple[np.ndarray, int]] = {}
    cidx = np.nonzero(cand)[0]
    cg = node_g[cidx]
    for gi in np.unique(cg).tolist():
        inst = cidx[cg == gi]
        with_k = int((sub[inst] > 0).sum())
        if inst.shape[0] < MIN_INSTANCES or with_k < MIN_INSTANCES:
            continue
        if _overlaps(tree.pid[inst], tree.start[inst], tree.end[inst]):
            continue
        depth = int(tree.depth[inst].min())
        steplike = _looks_like_step(glabels[gi], kws) or int(g_phase[gi]) in step_phases
        key = (steplike, -depth, int(inst.shape[0]), int(sub[inst].sum()), -gi)
        info[gi] = (inst, depth)
        if best is None or key > best[0]:
            best = (key, gi)
    if best is None:
        return None
    (steplike, _, _, _, _), gi = best
    inst, depth = info[gi]
    chosen = [gi]
    if int(g_phase[gi]) in step_phases:
        for gj in np.unique(cg).tolist():
            if gj == gi or int(g_phase[gj]) not in step_phases or int(g_phase[gj]) == int(g_phase[gi]):
                continue
            other = cidx[(cg == gj) & (tree.depth[cidx] == depth) & (sub[cidx] > 0)]
            if other.shape[0] == 0:
                continue
            both = np.concatenate([inst, other])
            if not _overlaps(tree.pid[both], tree.start[both], tree.end[both]):
                inst = both
                chosen.append(gj)
    # coverage: kernels launched inside the chosen instances / kernels launched from their threads
    thr = np.unique(tree.gtid[inst])
    lk = li >= 0
    total = int(np.isin(api.gtid[li[lk]], thr).sum())
    cov = int(sub[inst].sum()) / total if total else 0.0
    used = [glabels[i] for i in chosen]
    desc = " + ".join(repr(n) for n in used)
    n_inst = int(inst.shape[0])
    if steplike and cov >= 0.5:
        conf, why = "high", f"NVTX range {desc} ({n_inst} instances) encloses {cov:.0%} of kernel launches"
    elif steplike:
        conf, why = "medium", (f"NVTX range {desc} ({n_inst} instances) looks like a step but encloses only "
                               f"{cov:.0%} of the kernel launches of its threads")
    else:
        conf, why = "low", (f"the most frequent top-level NVTX range {desc} ({n_inst} instances) was used; "
                            "its name does not look like a model step")
    return _Choice(np.sort(inst), used, conf, why)


def _nvtx_steps(model: TraceModel, tree: NvtxTree, choice: _Choice, li: np.ndarray, wdev: np.ndarray,
                wpid: np.ndarray, nk: int):
    """(start, end, pid, device, step per work item) for NVTX step instances (see :func:`_work`)."""
    api = model.api
    nodes = choice.nodes
    s, e, pid, g = tree.start[nodes], tree.end[nodes], tree.pid[nodes], tree.gtid[nodes]
    n = nodes.shape[0]
    nw = li.shape[0]
    wstep = np.full(nw, -1, np.int64)
    if nw and api is not None:
        lk = li >= 0
        kg = np.full(nw, -1, np.int64)
        ks0 = np.zeros(nw, np.int64)
        ks1 = np.zeros(nw, np.int64)
        kg[lk] = api.gtid[li[lk]]
        ks0[lk] = api.start[li[lk]]
        ks1[lk] = api.end[li[lk]]
        for th in np.unique(g).tolist():
            sidx = np.nonzero(g == th)[0]
            sidx = sidx[np.argsort(s[sidx], kind="stable")]
            km = np.nonzero(lk & (kg == th))[0]
            if km.size == 0:
                continue
            pos = np.searchsorted(s[sidx], ks0[km], side="right") - 1
            ok = pos >= 0
            cand = sidx[np.maximum(pos, 0)]
            ok &= ks1[km] <= e[cand]
            wstep[km[ok]] = cand[ok]
    dev = np.full(n, -1, np.int64)
    has = wstep >= 0
    if has.any():
        ud, dinv = np.unique(wdev[has], return_inverse=True)
        nd = ud.shape[0]
        uk, cnt = np.unique(wstep[has] * nd + dinv.reshape(-1), return_counts=True)
        o = np.lexsort((uk % nd, -cnt, uk // nd))   # per step: the device with most work items first
        st = uk[o] // nd
        firsts = np.ones(st.shape[0], bool)
        firsts[1:] = st[1:] != st[:-1]
        dev[st[firsts]] = ud[(uk[o] % nd)[firsts]]
    for p in np.unique(pid[dev < 0]).tolist():
        pk = wdev[wpid == p]
        if pk.size:
            vals, cnt = np.unique(pk, return_counts=True)
            dev[(dev < 0) & (pid == p)] = int(vals[np.argmax(cnt)])
    return s, e, pid, dev, wstep


# ------------------------------------------------------------------------------------------- marker method
def _marker_steps(model: TraceModel, regex: str, out_markers: List[Dict]):
    """(start, end, pid, device, kernel_step) between consecutive marker kernels per device."""
    k = model.kernels
    try:
        rx = re.compile(regex, re.IGNORECASE)
    except re.error as exc:
        raise InputError(f"--step-marker {regex!r} is not a valid regular expression: {exc}") from None
    hit = np.array([bool(rx.search(n)) for n in k.names] + [False], dtype=bool)
    is_m = hit[k.name_idx]
    cnt = np.bincount(k.name_idx[is_m], minlength=len(k.names))
    for i in np.lexsort((np.arange(cnt.shape[0]), -cnt)).tolist():
        if cnt[i]:
            out_markers.append({"name": k.names[i], "count": int(cnt[i])})
    parts_s, parts_e, parts_p, parts_d = [], [], [], []
    kstep = np.full(len(k), -1, np.int64)
    base = 0
    for d in np.unique(k.device).tolist():
        idx = np.nonzero(k.device == d)[0]          # kernel order = start order
        m = is_m[idx]
        last_of_run = m.copy()
        last_of_run[:-1] &= ~m[1:]
        mk = idx[last_of_run]
        if mk.shape[0] < 2:
            continue
        o = np.argsort(k.end[mk], kind="stable")
        mk = mk[o]
        bnd = k.end[mk]
        ss, ee = bnd[:-1], bnd[1:]
        parts_s.append(ss)
        parts_e.append(ee)
        parts_p.append(k.pid[mk[1:]])
        parts_d.append(np.full(ss.shape[0], d, np.int64))
        pos = np.searchsorted(ss, k.start[idx], side="right") - 1
        ok = (pos >= 0) & (k.start[idx] < ee[np.maximum(pos, 0)])
        kstep[idx[ok]] = base + pos[ok]
        base += ss.shape[0]
    if not parts_s:
        return None
    return (np.concatenate(parts_s), np.concatenate(parts_e), np.concatenate(parts_p),
            np.concatenate(parts_d), kstep)


# ------------------------------------------------------------------------------------------- metrics
def _clip_union(starts: np.ndarray, ends: np.ndarray, keys: np.ndarray, q_key: np.ndarray,
                q0: np.ndarray, q1: np.ndarray) -> np.ndarray:
    """Per query: length of the union of the intervals with the query's key inside [q0, q1)."""
    out = np.zeros(q0.shape[0], np.int64)
    if starts.shape[0] == 0:
        return out
    for kk in np.unique(q_key).tolist():
        m = keys == kk
        if not m.any():
            continue
        u = iv.union_unsorted(starts[m], ends[m])
        q = q_key == kk
        out[q] = iv.overlap_length(u, q0[q], q1[q])
    return out


def _step_phase(kstep: np.ndarray, dur: np.ndarray, kphase: Optional[np.ndarray], n: int, nph: int,
                range_phase: Optional[np.ndarray]) -> np.ndarray:
    ph = np.full(n, -1, np.int64)
    if kphase is not None and kphase.shape[0] == kstep.shape[0] and nph:
        m = (kstep >= 0) & (kphase >= 0)
        if m.any():
            w = np.bincount(kstep[m] * nph + kphase[m], weights=dur[m], minlength=n * nph).reshape(n, nph)
            best = np.argmax(w, axis=1)
            ph = np.where(w.max(axis=1) > 0, best, -1)
    if range_phase is not None:
        ph = np.where(range_phase >= 0, range_phase, ph)
    return ph


def _fmt_us(ns: int) -> str:
    return f"{ns / 1000:.1f} µs"


def _what_differed(delta: Dict[str, int], phase: str) -> str:
    parts: List[Tuple[int, str]] = []
    for key, label in (("gpu_idle_ns", "GPU idle"), ("sync_ns", "sync"), ("gpu_busy_ns", "GPU busy"),
                       ("memcpy_ns", "memcpy")):
        v = delta[key]
        if v > 0:
            parts.append((v, f"+{_fmt_us(v)} {label}"))
    parts.sort(key=lambda t: -t[0])
    txt = [p[1] for p in parts]
    if delta["kernel_count"] > 0:
        txt.append(f"+{delta['kernel_count']} kernels")
    w = delta["wall_ns"]
    head = f"{'+' if w >= 0 else '-'}{_fmt_us(abs(w))} wall vs the median {phase} step"
    return head + (": " + ", ".join(txt) if txt else "")


def _group_rows(a: StepArrays, groups: np.ndarray, labels: List[object], key: str) -> List[Dict]:
    rows = []
    wall, busy, idle = a.wall, a.gpu_busy, a.gpu_idle
    for gv, label in zip(np.unique(groups).tolist(), labels):
        m = groups == gv
        row: Dict[str, object] = {key: label}
        row.update(summary(wall[m]))
        row.update({"gpu_busy_ns": int(busy[m].sum()), "gpu_idle_ns": int(idle[m].sum()),
                    "sync_ns": int(a.sync[m].sum()), "memcpy_ns": int(a.memcpy[m].sum()),
                    "kernel_count": int(a.kernel_count[m].sum())})
        rows.append(row)
    return rows


def _metric(a: StepArrays, name: str) -> np.ndarray:
    return {"wall_ns": a.wall, "gpu_busy_ns": a.gpu_busy, "gpu_idle_ns": a.gpu_idle, "sync_ns": a.sync,
            "memcpy_ns": a.memcpy, "kernel_count": a.kernel_count}[name]


# ------------------------------------------------------------------------------------------- entry point
def analyze_steps(model: TraceModel, phase_result: Optional[PhaseResult] = None,
                  step_marker: Optional[str] = None,
                  step_range: Optional[str] = None, top: int = 10, tree: Optional[NvtxTree] = None,
                  kernel_node: Optional[np.ndarray] = None) -> StepResult:
    """Detect steps and measure them (see module docstring); ``tree`` / ``kernel_node`` reused if given."""
    k = model.kernels
    notes: List[str] = []
    if phase_result is not None:
        phase_map, phase_names = phase_result.phase_map, list(phase_result.phase_names)
        kphase = phase_result.kernel_phase
    else:
        phase_map, _ = resolve_phase_map(None)
        phase_names, kphase = list(phase_map.keys()), None
    if tree is None:
        tree = build_tree(model.nvtx)
    li, wdev, wpid, nk = _work(model)
    res = StepResult(False, None, "none")
    steps = None
    range_phase = None
    choice: Optional[_Choice] = None
    if tree is not None and len(tree) and not step_marker:
        knode = kernel_node if kernel_node is not None else _kernel_nodes(model, tree, li[:nk])
        wnode = np.concatenate([np.asarray(knode, np.int64), _kernel_nodes(model, tree, li[nk:])])
        choice = _choose_nvtx(model, tree, wnode, li, phase_map, step_range, notes)
    elif step_range:
        notes.append("--step-range ignored: " + ("a --step-marker was given" if step_marker
                                                 else "the trace has no NVTX push/pop ranges"))
    marker = None
    regex = step_marker or DEFAULT_MARKER
    markers: List[Dict] = []
    if (choice is None or choice.confidence == "low") and k is not None and len(k):
        marker = _marker_steps(model, regex, markers)
        if marker is not None and choice is not None:
            per_dev = np.unique(marker[3], return_counts=True)[1]
            if per_dev.min() < MIN_INSTANCES:
                marker = None
            else:
                notes.append(f"marker kernels preferred over the NVTX range {' + '.join(choice.names)} "
                             "whose name does not look like a model step")
    dur = k.dur if k is not None else np.zeros(0, np.int64)
    wstep = wphase = None
    if choice is not None and marker is None:
        s0, e0, p0, d0, wstep = _nvtx_steps(model, tree, choice, li, wdev, wpid, nk)
        steps = (s0, e0, p0, d0, wstep[:nk])
        res.method, res.confidence, res.confidence_reason = "nvtx", choice.confidence, choice.reason
        res.step_ranges = choice.names
        if phase_result is not None and phase_result.node_phase is not None:
            node_phase = phase_result.node_phase
        else:
            own, owner = resolve_nodes(tree, phase_of_names(model.nvtx.names, phase_map))
            node_phase = np.where(owner >= 0, own[np.maximum(owner, 0)], -1)
        range_phase = node_phase[choice.nodes]
        wphase = np.where(wnode >= 0, node_phase[np.maximum(wnode, 0)], -1)
        gt = model.graph_trace
        wdur = np.concatenate([dur] + ([gt["end"] - gt["start"]] if wstep.shape[0] > nk else []))
    elif marker is not None:
        steps = marker
        res.method, res.marker_regex, res.marker_kernels = "marker", regex, markers
        per_dev = np.unique(marker[3], return_counts=True)[1]
        src = "user" if step_marker else "default"
        if per_dev.min() >= 5:
            res.confidence = "medium"
            res.confidence_reason = (f"steps bounded by marker kernels ({src} regex {regex!r}); "
                                     "no NVTX range marks steps")
        else:
            res.confidence = "low"
            res.confidence_reason = f"only {int(per_dev.min())} step(s) between marker kernels on some device"
    else:
        res.notes = notes
        res.marker_regex = regex
        if k is None or len(k) == 0:
            res.reason = "no kernels and no usable NVTX step ranges"
        else:
            res.reason = ("no NVTX range repeats once per step and fewer than 2 marker kernels "
                          f"(regex {regex!r}) ran on any device")
        return res
    s, e, pid, dev, kstep = steps
    n = s.shape[0]
    if wstep is not None:
        ph = _step_phase(wstep, wdur, wphase, n, len(phase_names), range_phase)
    else:
        ph = _step_phase(kstep, dur, kphase, n, len(phase_names), range_phase)
    kc = np.bincount(kstep[kstep >= 0], minlength=n).astype(np.int64)
    bs = [k.start] if k is not None else []
    be = [k.end] if k is not None else []
    bd = [k.device.astype(np.int64)] if k is not None else []
    gt = model.graph_trace
    if gt is not None and len(gt):
        bs.append(gt["start"])
        be.append(gt["end"])
        bd.append(gt["device"].astype(np.int64))
    if bs:
        busy = _clip_union(np.concatenate(bs), np.concatenate(be), np.concatenate(bd), dev, s, e)
    else:
        busy = np.zeros(n, np.int64)
    mc = model.memcpy
    if mc is not None and len(mc):
        memcpy = _clip_union(mc["start"], mc["end"], mc["device"].astype(np.int64), dev, s, e)
    else:
        memcpy = np.zeros(n, np.int64)
    api = model.api
    if api is not None and len(api):
        sm = class_mask(api, "sync")
        sync = _clip_union(api.start[sm], api.end[sm], api.pid[sm].astype(np.int64), pid.astype(np.int64),
                           s, e)
    else:
        sync = np.zeros(n, np.int64)
    order = _step_sort(pid, dev, s)
    a = StepArrays(start=s[order], end=e[order], pid=pid[order].astype(np.int64), device=dev[order],
                   phase=ph[order], kernel_count=kc[order], gpu_busy=busy[order], sync=sync[order],
                   memcpy=memcpy[order], phase_names=phase_names)
    res.arrays = a
    res.available = True
    res.step_count = n
    res.notes = notes
    res.summary = summary(a.wall)
    res.totals = {m: int(_metric(a, m).sum()) for m in METRICS}
    uph = np.unique(a.phase).tolist()
    res.by_phase = _group_rows(a, a.phase, [phase_names[p] if p >= 0 else UNMAPPED for p in uph], "phase")
    res.by_pid = _group_rows(a, a.pid, np.unique(a.pid).tolist(), "pid")
    med: Dict[int, Dict[str, int]] = {}
    for p in uph:
        m = a.phase == p
        med[p] = {mm: int(round_half_up(np.median(_metric(a, mm)[m]))) for mm in METRICS}
        res.median_by_phase.append({"phase": phase_names[p] if p >= 0 else UNMAPPED,
                                    "count": int(m.sum()), **med[p]})
    ntop = max(int(top), 0)
    ref_wall = np.array([med[int(p)]["wall_ns"] for p in a.phase.tolist()], np.int64)
    excess = a.wall - ref_wall
    slow = np.lexsort((a.start, -a.wall))[:ntop]
    out = np.lexsort((a.start, -excess))[:ntop]
    out = out[excess[out] > 0]
    for idx, dest in ((slow, res.slowest), (out, res.outliers)):
        for i in idx.tolist():
            row = a.row(i)
            ref = med[int(a.phase[i])]
            delta = {mm: int(row[mm]) - ref[mm] for mm in METRICS}
            row["vs_median"] = delta
            row["what_differed"] = _what_differed(delta, row["phase"])
            dest.append(row)
    return res
