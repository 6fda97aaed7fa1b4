"""NVTX step method: choose the push/pop ranges that mark model steps and assign work to them (docs/FINDINGS.md,
"Steps"; enclosing ranges: :mod:`..nvtx.tree`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Collection, Dict, Iterable, List, Optional, Tuple

import numpy as np

from ...config.phase_map import PhaseMap
from ...model.names import distinct_small
from ...model.timeline import rows_by_value, run_starts
from ...model.trace import TraceModel
from ...vocabulary.code_spans import code_name
from ..idle.range_names import normalize_range_name
from ..nvtx.tree import (
    NvtxTree,
    combine_innermost,
    distinct_calls,
    enclosing_by_domain,
    has_ancestor_with_key,
    innermost_enclosing,
    nearest_marked,
    per_call,
    subtree_sums,
)
from ..trace.window import gpu_work
from .phases import phase_of_names

MIN_INSTANCES = 3


@dataclass(frozen=True)
class StepChoice:
    nodes: np.ndarray          # tree nodes of the step ranges
    names: Tuple[str, ...]
    confidence: str
    reason: str


# ------------------------------------------------------------------------------------------- work items
def work_items(model: TraceModel) -> Tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """GPU work = kernels, then whole-graph rows (graph-level trace): (launch row, device, pid, #kernels)."""
    k, gt = model.kernels, model.graph_trace
    li = k.launch_idx if k is not None and len(k) and k.launch_idx.shape[0] == len(k) \
        else np.full(0 if k is None else len(k), -1, np.int64)
    nk = int(li.shape[0])
    if gt is not None and len(gt):
        li = np.concatenate([li, gt.launch_idx])
    dev, pid = gpu_work(model, "device", "pid")   # the model's own columns when there is one table (no copies)
    return np.asarray(li).astype(np.int64, copy=False), dev, pid, nk


def kernel_nodes(model: TraceModel, tree: NvtxTree, li: np.ndarray) -> np.ndarray:
    """Innermost enclosing tree node of each work item's launch call (as nvtx_attribution does)."""
    api = model.api
    if api is None or not (li >= 0).any():
        return np.full(li.shape[0], -1, np.int64)
    calls = distinct_calls(len(api), li)
    return per_call(len(api), li, calls, innermost_enclosing(tree, api.gtid, api.start, api.end, calls))


def _overlaps(pid: np.ndarray, start: np.ndarray, end: np.ndarray) -> bool:
    o = np.lexsort((start, pid))
    p, s, e = pid[o], start[o], end[o]
    same = p[1:] == p[:-1]
    return bool((same & (s[1:] < e[:-1])).any())


#: NVTX names of libraries / per-op instrumentation that never mark a model step
_NOT_STEP = re.compile(
    r"^(?:[\w.]+:)?(?:nccl|mpi_|aten::|cublas|cudnn|cufft|nvshmem|cupti)"   # libraries, torch ops
    r"|, (?:seq|op_id) = "                                                 # torch emit_nvtx op ranges
    r"|^autograd::|^torch::autograd::|^\w+Backward(?:\d+|#)?$"               # torch autograd per-node ranges
    r"|^tensorrt:(?!executioncontext)"                                     # TensorRT per-layer ranges
    # DeepSpeed ZeRO-3 / ZeRO-Inference per-submodule parameter hooks and collectives (`fetch_sub_module`,
    # `PartitionedParameterCoordinator.release_sub_module`, `allgather_fn`, `reduce_scatter_coalesced`): one per layer
    # or bucket inside the forward / backward, never a whole iteration
    r"|(?:^|\.)_*(?:(?:fetch|release)_sub_module|(?:pre|post)_sub_module_\w+|all_?gather\w*|reduce_scatter\w*)$",
    re.IGNORECASE)
#: a training step's optimizer part (``Optimizer.step#AdamW.step``, ``lr_scheduler.step``, ``scaler.step``): once per
#: iteration, so as steps it would give the right count with the optimizer's time (1 ms of a 10 ms iteration) as
#: the step time; never a step candidate
#: (an optimizer class's own ``step``: ``DeepSpeedZeroOptimizer_Stage3.step``, ``FP16_Optimizer.step``)
_OPTIMIZER_STEP = re.compile(r"(?:optim(?:izer\w*)?|lr_scheduler|scaler|adamw?|sgd)[.#_]step", re.IGNORECASE)
#: not step-like names: those, any scheduler's ``step`` method, and a diffusion pipeline's VAE decode (``vae.decode``,
#: diffusers' ``decode_latents``, LDM's ``decode_first_stage``): once per image after the denoising loop, not a decode
#: step (the phase map's ``ignore`` list gives it no phase either)
_PART_STEP = re.compile(_OPTIMIZER_STEP.pattern + r"|scheduler[.#_]step|vae[._]decode|decode_latents"
                        r"|decode_first_stage", re.IGNORECASE)


def _name_groups(names: List[str]) -> Tuple[np.ndarray, List[str]]:
    """Group id per name (digit runs replaced as the idle causes' NVTX details are, :func:`normalize_range_name`:
    ``token_7_step`` → ``token_N_step``, ``ProfilerStep#3`` → ``ProfilerStep#N``), plus labels."""
    index: Dict[str, int] = {}
    gid = np.array([index.setdefault(normalize_range_name(n), len(index)) for n in names] + [-1], np.int64)
    return gid, list(index)


# ------------------------------------------------------------------------------------------- NVTX method
def choose_nvtx(model: TraceModel, tree: NvtxTree, knode: np.ndarray, li: np.ndarray, phase_map: PhaseMap,
                step_range: Optional[str]) -> Tuple[Optional[StepChoice], Tuple[str, ...]]:
    """The NVTX ranges that are the steps (see module docstring), or None; and notes for the report."""
    names = model.nvtx.names if model.nvtx is not None else []
    notes: Tuple[str, ...] = ()
    if step_range:
        want = step_range.lower()
        exact = [i for i, n in enumerate(names) if n.lower() == want]
        ids = exact or [i for i, n in enumerate(names) if want in n.lower()]
        if ids:
            sel = np.isin(tree.name_idx, np.asarray(ids, np.int64))
            sel &= ~has_ancestor_with_key(tree, np.where(sel, 0, -1 - np.arange(len(tree))))
            used = tuple(sorted({names[i] for i in tree.name_idx[sel].tolist()}))
            return StepChoice(np.nonzero(sel)[0], used, "high",
                              f"step ranges chosen by the user (--step-range {code_name(step_range)})"), ()
        notes = (f"--step-range {code_name(step_range)} matches no NVTX push/pop range; detecting steps automatically",)
    api = model.api
    if api is None or not (li >= 0).any():
        return None, notes
    gid, glabels = _name_groups(names)
    node_g = gid[tree.name_idx]
    lthreads = np.unique(api.gtid[li[li >= 0]])
    sub = subtree_sums(tree, np.bincount(knode[knode >= 0], minlength=len(tree)).astype(np.int64))   # kernels inside
    usable = np.array([not (_NOT_STEP.search(g) or _OPTIMIZER_STEP.search(g)) for g in glabels] + [False], bool)
    cand = np.isin(tree.gtid, lthreads) & ~has_ancestor_with_key(tree, node_g) & usable[node_g]
    g_phase = phase_of_names(glabels, phase_map)
    step_phases = {j for j, p in enumerate(phase_map.names) if p != "other"}
    best: Optional[Tuple] = None
    info: Dict[int, Tuple[np.ndarray, int]] = {}
    cidx = np.nonzero(cand)[0]
    cg = node_g[cidx]
    groups = rows_by_value(np.asarray(cg))   # each name group's candidates in one sort (no mask per group)
    for gi, r in groups:
        inst = cidx[r]
        with_k = int((sub[inst] > 0).sum())
        if inst.shape[0] < MIN_INSTANCES or with_k < MIN_INSTANCES:
            continue
        if _overlaps(tree.pid[inst], tree.start[inst], tree.end[inst]):
            continue
        depth = int(tree.depth[inst].min())
        steplike = _steplike(glabels[gi], int(g_phase[gi]), phase_map, step_phases)
        key = (steplike, -depth, int(inst.shape[0]), int(sub[inst].sum()), -gi)
        info[gi] = (inst, depth)
        if best is None or key > best[0]:
            best = (key, gi)
    if best is None:
        return None, notes
    (steplike, _, _, _, _), gi = best
    inst, depth = info[gi]
    part_of = ""
    if steplike:
        gi, part_of = _iteration_part(model, tree, knode, info, gi, glabels, g_phase, step_phases, phase_map)
        inst, depth = info[gi]
    chosen = [gi]
    if int(g_phase[gi]) in step_phases:
        for gj, r in groups:
            if gj == gi or int(g_phase[gj]) not in step_phases or int(g_phase[gj]) == int(g_phase[gi]):
                continue
            other = cidx[r]
            other = other[(tree.depth[other] == depth) & (sub[other] > 0)]
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
    used = tuple(glabels[i] for i in chosen)
    desc = " + ".join(code_name(n) for n in used)
    n_inst = int(inst.shape[0])
    every = int(lk.sum())
    if steplike and cov >= 0.5 and total < every:     # other threads launch too (an autograd thread's backward)
        conf, why = "high", (f"NVTX range {desc} ({n_inst:,} instances) encloses {cov:.0%} of the kernel launches of "
                             f"its threads ({int(sub[inst].sum()):,} of the trace's {every:,} launches: other "
                             "threads launched the rest)")
    elif steplike and cov >= 0.5:
        conf, why = "high", f"NVTX range {desc} ({n_inst:,} instances) encloses {cov:.0%} of kernel launches"
    elif steplike:
        conf, why = "medium", (f"NVTX range {desc} ({n_inst:,} instances) looks like a step but encloses only "
                               f"{cov:.0%} of the kernel launches of its threads")
    else:
        conf, why = "low", (f"the outermost NVTX range that repeats with kernel launches inside, {desc} ({n_inst:,} "
                            "instances), was used; "
                            "its name does not look like a model step")
    if part_of:
        why += f"; {part_of}"
    return StepChoice(np.sort(inst), used, conf, why), notes


def _steplike(label: str, phase: int, phase_map: PhaseMap, step_phases: Collection[int]) -> bool:
    """Whether a range name (group label) looks like a model step: a step keyword (not an optimizer's ``step``
    method) or a prefill/decode phase name."""
    return (any(kw.lower() in label.lower() for kw in phase_map.step_keywords) and not _PART_STEP.search(label)) \
        or phase in step_phases


def _interleaved(tree: NvtxTree, rare: np.ndarray, other: np.ndarray) -> bool:
    """Whether, on every thread, no two instances of ``rare`` follow one another without an instance of ``other``
    between them (and ``rare`` has an instance of ``other`` on its thread): the two names are parts of one iteration
    (k draft steps, then one verify step)."""
    both = np.concatenate([rare, other])
    is_rare = np.concatenate([np.ones(rare.shape[0], bool), np.zeros(other.shape[0], bool)])
    o = np.lexsort((tree.start[both], tree.gtid[both]))
    g, r = tree.gtid[both][o], is_rare[o]
    same = g[1:] == g[:-1]
    if (same & r[1:] & r[:-1]).any():
        return False
    th_other = np.unique(tree.gtid[other])
    return bool(np.isin(tree.gtid[rare], th_other).all())


def _iteration_part(model: TraceModel, tree: NvtxTree, knode: np.ndarray, info: Dict[int, Tuple[np.ndarray, int]],
                    gi: int, glabels: List[str], g_phase: np.ndarray, step_phases: Collection[int],
                    phase_map: PhaseMap) -> Tuple[int, str]:
    """The step name among the parts of one iteration (docs/FINDINGS.md, "Steps": step-like names at the depth of
    the preferred candidate ``gi`` interleaving with it, as ``draft_step`` ×4 then ``verify_step``; the part enclosing
    the most GPU time marks it): the chosen name group and a note for the confidence reason ("" when ``gi`` stays)."""
    ws, we = gpu_work(model, "start", "end")
    m = knode >= 0
    if not m.any() or ws.shape[0] != knode.shape[0]:
        return gi, ""
    t = subtree_sums(tree, np.bincount(knode[m], weights=(we - ws)[m], minlength=len(tree)).astype(np.int64))
    inst, depth = info[gi]
    pi = int(g_phase[gi])
    parts = []
    for gj, (other, dj) in info.items():
        pj = int(g_phase[gj])
        if gj == gi or dj != depth or not _steplike(glabels[gj], pj, phase_map, step_phases) \
                or (pi in step_phases and pj in step_phases and pi != pj):
            continue
        rare, many = (other, inst) if other.shape[0] <= inst.shape[0] else (inst, other)
        if _interleaved(tree, rare, many):
            parts.append(gj)
    if not parts:
        return gi, ""
    gpu = {g: int(t[info[g][0]].sum()) for g in [gi] + parts}
    best = max(parts, key=lambda g: (gpu[g], -g))
    if gpu[best] <= gpu[gi]:                 # ties: the preferred candidate stays
        return gi, ""
    others = ", ".join(f"{code_name(glabels[g])} ×{info[g][0].shape[0]}" for g in [gi] + parts if g != best)
    total = sum(gpu.values())
    return best, (f"with {others} between its instances, parts of one iteration: it encloses the launches of "
                  f"{100.0 * gpu[best] / total:.0f} % of their GPU time and marks the iteration")


def _innermost_step(per_domain: Iterable[np.ndarray], n: int, tree: NvtxTree, step_of_node: np.ndarray
                    ) -> np.ndarray:
    """Per query: over the domains (the layers of :func:`enclosing_by_domain`: per query a tree node, -1 none), the
    step of the nearest enclosing step range, the innermost (:func:`combine_innermost`) winning; -1 when none."""
    near = nearest_marked(tree.parent, step_of_node >= 0)   # per tree node: its nearest step range
    layers = {i: np.where(dn >= 0, near[np.maximum(dn, 0)], -1) for i, dn in enumerate(per_domain)}
    best = combine_innermost(tree, layers, n)
    return np.where(best >= 0, step_of_node[np.maximum(best, 0)], -1)


def step_of_work(model: TraceModel, tree: NvtxTree, nodes: np.ndarray, li: np.ndarray, nk: Optional[int] = None,
                 domain_nodes: Optional[Dict[int, np.ndarray]] = None) -> np.ndarray:
    """Step (index into ``nodes``) whose range encloses each work item's launch call, -1 when none.
    ``domain_nodes`` (domain → innermost range of that domain per kernel, i.e. per work item ``< nk``, as the
    NVTX attribution computes it) spares the range lookups when every work item is a kernel."""
    api = model.api
    if api is None or nodes.shape[0] == 0 or not (li >= 0).any():
        return np.full(li.shape[0], -1, np.int64)
    threads = np.unique(tree.gtid[nodes])               # only threads with steps
    step_of_node = np.full(len(tree), -1, np.int64)
    step_of_node[nodes] = np.arange(nodes.shape[0])
    if domain_nodes and nk == li.shape[0] and all(v.shape[0] == nk for v in domain_nodes.values()):
        # a range on a thread without steps has no step ancestor: the attribution's lookups give the same steps
        return _innermost_step(domain_nodes.values(), li.shape[0], tree, step_of_node)
    calls = distinct_calls(len(api), li)
    calls = calls[np.isin(api.gtid[calls], threads)]
    by_dom = enclosing_by_domain(tree, api.gtid, api.start, api.end, calls)
    return per_call(len(api), li, calls, _innermost_step(by_dom.values(), calls.shape[0], tree, step_of_node))


def nvtx_steps(model: TraceModel, tree: NvtxTree, choice: StepChoice, li: np.ndarray, wdev: np.ndarray,
               wpid: np.ndarray, nk: Optional[int] = None, domain_nodes: Optional[Dict[int, np.ndarray]] = None
               ) -> Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(start, end, pid, device, step per work item) for NVTX step instances (see :func:`work_items`;
    ``nk`` / ``domain_nodes``: see :func:`step_of_work`)."""
    nodes = choice.nodes
    s, e, pid = tree.start[nodes], tree.end[nodes], tree.pid[nodes]
    n = nodes.shape[0]
    wstep = step_of_work(model, tree, nodes, li, nk, domain_nodes)
    dev = np.full(n, -1, np.int64)
    has = wstep >= 0
    if has.any():
        ud, dinv = distinct_small(wdev[has])           # = np.unique(…, return_inverse=True), O(n)
        nd = ud.shape[0]
        uk, kinv = distinct_small(wstep[has] * nd + dinv)
        cnt = np.bincount(kinv)
        o = np.lexsort((uk % nd, -cnt, uk // nd))   # per step: the device with most work items first
        f = uk[o[run_starts(uk[o] // nd)]]
        dev[f // nd] = ud[f % nd]
    no_dev = np.flatnonzero(dev < 0)
    if no_dev.shape[0]:                     # one sort of each side, not a mask over every work item per pid
        work_of = dict(rows_by_value(np.asarray(wpid)))
        for p, r in rows_by_value(np.asarray(pid)[no_dev]):
            w = work_of.get(p)
            if w is not None and w.shape[0]:
                vals, cnt = np.unique(wdev[w], return_counts=True)
                dev[no_dev[r]] = int(vals[np.argmax(cnt)])
    return s, e, pid, dev, wstep
