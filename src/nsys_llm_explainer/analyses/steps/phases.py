"""Inference phases (prefill / decode / other) from NVTX push/pop range names: per phase its ranges, wall time,
kernels and GPU time. Definitions: docs/FINDINGS.md, "Phases".
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from ...config.phase_map import UNMAPPED, PhaseMap
from ...jsonable import NOT_IN_JSON, FieldsJson, Outcome
from ...model import intervals as iv
from ...model.timeline import few_distinct, rows_by_value
from ...model.trace import TraceModel
from ..common.stats import pct
from ..nvtx.attribution import AttributionPhase, AttributionResult
from ..nvtx.tree import NvtxTree, nearest_marked


@dataclass(frozen=True)
class PidWall(FieldsJson):
    """The wall time (ns) a phase owns on the threads of process ``pid`` (module docstring)."""

    pid: int
    wall_ns: int


@dataclass(frozen=True)
class PhaseRow(FieldsJson):
    """One phase (or ``unmapped``): its ranges, wall time, kernels and GPU time (module docstring)."""

    phase: str
    range_count: int
    wall_ns: int
    wall_by_pid: Tuple[PidWall, ...]
    kernel_count: int
    gpu_time_ns: int
    gpu_busy_ns: int
    pct_of_kernel_time: float


@dataclass(frozen=True)
class PhaseRangeName(FieldsJson):
    """An NVTX push/pop range name that got a phase, and how many ranges have it."""

    name: str
    phase: str
    count: int


def phase_of_names(names: Sequence[str], phase_map: PhaseMap) -> np.ndarray:
    """Phase index per name (order of ``phase_map``), -1 for none or a name of its ignore list; one extra trailing
    -1 (for index -1)."""
    # (substring, phase index or -1 for ignore, tie order)
    pats = [(s.lower(), j, j) for j, (_, subs) in enumerate(phase_map.phases) for s in subs if s]
    pats += [(s.lower(), -1, len(phase_map.phases)) for s in phase_map.ignore if s]
    out = np.full(len(names) + 1, -1, np.int64)
    for i, n in enumerate(names):
        low = n.lower()
        best: Optional[Tuple[int, int]] = None
        ph = -1
        for s, j, order in pats:
            if s in low:
                key = (len(s), -order)
                if best is None or key > best:
                    best, ph = key, j
        out[i] = ph
    return out


def resolve_nodes(tree: NvtxTree, name_phase: np.ndarray) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(own phase per node, phase owner per node: the nearest ancestor-or-self with a phase, the owner's phase per
    node); -1 if none."""
    own = name_phase[tree.name_idx]
    owner = nearest_marked(tree.parent, own >= 0)
    return own, owner, np.where(owner >= 0, own[np.maximum(owner, 0)], -1)


@dataclass(frozen=True)
class PhaseResult(Outcome):
    source: str
    phase_map: Dict[str, List[str]]
    phase_names: Tuple[str, ...] = ()   # phase map order; index = kernel_phase value
    total_kernel_ns: int = 0
    phases: Tuple[PhaseRow, ...] = ()
    range_names: Tuple[PhaseRangeName, ...] = ()  # NVTX names that got a phase
    notes: Tuple[str, ...] = ()
    # helpers, not in to_dict(): phase index per kernel (-1 none), phase index of each tree node's phase
    # owner, and the phase map used (with ignore / step keywords)
    kernel_phase: Optional[np.ndarray] = field(default=None, metadata=NOT_IN_JSON)
    node_phase: Optional[np.ndarray] = field(default=None, metadata=NOT_IN_JSON)
    rules: Optional[PhaseMap] = field(default=None, metadata=NOT_IN_JSON)


def _busy_per_device(start: np.ndarray, end: np.ndarray, device: np.ndarray) -> int:
    if few_distinct(device).shape[0] == 1:
        return iv.union_lean(start, end).length            # kernels are sorted by start
    return sum(iv.union_lean(start[m], end[m]).length for _, m in rows_by_value(np.asarray(device)))   # one sort


def _owned_pieces(tree: NvtxTree, own: np.ndarray, owner: np.ndarray) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Intervals of time owned by each phase-named node: its range minus its phase-named descendants.

    Returns (start, end, owner node). Pieces of one node are [r.start, c1.start), [c1.end, c2.start), …,
    [ck.end, r.end) for its nearest phase-named descendants c1..ck (disjoint on one push/pop thread)."""
    lab = np.nonzero(own >= 0)[0]
    par = tree.parent[lab]
    lpar = np.where(par >= 0, owner[np.maximum(par, 0)], -1)   # nearest phase-named strict ancestor
    ch = lab[lpar >= 0]
    chp = lpar[lpar >= 0]
    s_t = np.concatenate([tree.start[lab], tree.end[ch]])
    s_o = np.concatenate([lab, chp])
    e_t = np.concatenate([tree.end[lab], tree.start[ch]])
    e_o = np.concatenate([lab, chp])
    so = np.lexsort((s_t, s_o))
    eo = np.lexsort((e_t, e_o))
    ps, pe, po = s_t[so], e_t[eo], s_o[so]
    return ps, np.maximum(pe, ps), po


def analyze_phases(model: TraceModel, phase_map: PhaseMap, tree: Optional[NvtxTree] = None,
                   kernel_nodes: Optional[Mapping[int, np.ndarray]] = None) -> PhaseResult:
    """Phase wall time and GPU time (see module docstring) by ``phase_map`` (:mod:`config.phase_map`).
    ``kernel_nodes``: per NVTX domain, the innermost tree node of each kernel's launch call (-1 none;
    :attr:`AttributionResult.kernel_nodes`)."""
    labels = phase_map.names
    k = model.kernels
    nk = len(k) if k is not None else 0
    kernel_phase = np.full(nk, -1, np.int64)
    node_phase: Optional[np.ndarray] = None
    dur = k.dur if k is not None else np.zeros(0, np.int64)
    total_kernel_ns = int(dur.sum())
    names = model.nvtx.names if model.nvtx is not None else []
    piece_s = piece_e = piece_ph = piece_pid = np.zeros(0, np.int64)
    range_count = np.zeros(len(labels), np.int64)
    range_names: List[PhaseRangeName] = []
    notes: List[str] = []
    available = False
    reason: Optional[str] = None
    if tree is None or len(tree) == 0:
        reason = "no NVTX push/pop ranges to take phases from"
    else:
        name_phase = phase_of_names(names, phase_map)
        own, owner, node_phase = resolve_nodes(tree, name_phase)
        has = own >= 0
        range_count = np.bincount(own[has], minlength=len(labels)).astype(np.int64)
        cnt = np.bincount(tree.name_idx[has], minlength=len(names) + 1)
        range_names = [PhaseRangeName(names[i], labels[int(name_phase[i])], int(cnt[i]))
                       for i in np.lexsort((np.arange(cnt.shape[0]), -cnt)).tolist()
                       if cnt[i] != 0 and i < len(names)]
        if not has.any():
            reason = "no NVTX push/pop range name matches the phase map"
        else:
            available = True
            ps, pe, po = _owned_pieces(tree, own, owner)
            piece_s, piece_e, piece_ph, piece_pid = ps, pe, own[po], tree.pid[po]
            if kernel_nodes and nk:
                kernel_phase = _latest_phase(kernel_nodes, own, owner, tree, nk)
            elif nk:
                notes.append("kernels were not linked to NVTX ranges: GPU time per phase is unavailable")
        nvtx = model.nvtx
        if nvtx is not None and len(nvtx):
            other = np.ones(len(nvtx), bool)
            other[tree.row] = False
            n_se = int((other & (name_phase[nvtx.name_idx] >= 0)).sum())
            if n_se:
                notes.append(f"{n_se} phase-named NVTX start/end or cross-thread ranges are not used "
                             "(phases come from push/pop ranges only)")
    kp = kernel_phase
    rows = []
    for j, label in enumerate(labels + [UNMAPPED]):
        pj = j if j < len(labels) else -1
        by_pid = []
        wall = 0
        if pj >= 0:
            r_ph = np.flatnonzero(piece_ph == pj)
            for p, r in rows_by_value(np.asarray(piece_pid)[r_ph]):   # one sort, no mask over every piece per pid
                m = r_ph[r]
                w = iv.union_blocks(piece_s[m], piece_e[m]).length
                by_pid.append(PidWall(p, int(w)))
                wall += w
        km = kp == pj
        if k is not None and nk and km.all():          # every kernel: the columns themselves, no copies
            t = int(dur.sum())
            busy = _busy_per_device(k.start, k.end, k.device)
        else:
            t = int(dur[km].sum())
            busy = _busy_per_device(k.start[km], k.end[km], k.device[km]) if k is not None and nk and km.any() else 0
        rows.append(PhaseRow(
            phase=label, range_count=int(range_count[pj]) if pj >= 0 else 0, wall_ns=int(wall),
            wall_by_pid=tuple(by_pid), kernel_count=int(km.sum()), gpu_time_ns=t, gpu_busy_ns=int(busy),
            pct_of_kernel_time=pct(t, total_kernel_ns)))
    return PhaseResult(available, reason, phase_map.source, phase_map.as_dict(), phase_names=tuple(labels),
                       total_kernel_ns=total_kernel_ns, phases=tuple(rows), range_names=tuple(range_names),
                       notes=tuple(notes), kernel_phase=kernel_phase, node_phase=node_phase, rules=phase_map)


def _latest_phase(kernel_nodes: Mapping[int, np.ndarray], own: np.ndarray, owner: np.ndarray, tree: NvtxTree,
                  nk: int) -> np.ndarray:
    """Phase per kernel from one innermost node per NVTX domain stack (the layers of
    :func:`~..nvtx.tree.enclosing_by_domain`): the phase of the phase range that started last (equal starts: the
    lower domain id; -1 none)."""
    kp = np.full(nk, -1, np.int64)
    best = np.full(nk, np.iinfo(np.int64).min, np.int64)
    best_dom = np.full(nk, np.iinfo(np.int64).max, np.int64)
    for kn in kernel_nodes.values():
        o = owner[np.maximum(kn, 0)]                   # the owning phase range of each kernel's node
        o[np.asarray(kn) < 0] = -1
        better = o >= 0
        st = tree.start[np.maximum(o, 0)]
        od = tree.domain[np.maximum(o, 0)]
        better &= (st > best) | ((st == best) & (od < best_dom))   # a phase range that started later wins
        kp[better] = own[o[better]]
        best[better] = st[better]
        best_dom[better] = od[better]
        del o, st, od, better
    return kp


def with_phase_totals(attribution: AttributionResult, phases: PhaseResult) -> AttributionResult:
    """``attribution`` (a new object) with its per-phase totals set from ``phases`` when both are available (a user
    phase map: the attribution's own phases are the NVTX ranges' defaults)."""
    if not (phases.available and attribution.available):
        return attribution
    return dataclasses.replace(attribution, phases=tuple(
        AttributionPhase(r.phase, r.kernel_count, r.gpu_time_ns, r.pct_of_kernel_time) for r in phases.phases))
