"""Model-step (decode / prefill iteration) detection: which spans of time are the steps (method ``nvtx``: one NVTX
range per step, :mod:`.nvtx_method`; ``marker``: between marker kernels), with each step's process, device and
phase, and how confident the choice is. Definitions: docs/FINDINGS.md, "Steps".
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from ...config.patterns import first_match
from ...config.phase_map import PhaseMap
from ...jsonable import FieldsJson
from ...model.timeline import rows_by_value
from ...model.trace import Kernels, TraceModel
from ...vocabulary.code_spans import code_name
from ..kernels.traits import MOE_ROUTER
from ..nvtx.tree import NvtxTree
from .nvtx_method import MIN_INSTANCES, StepChoice, choose_nvtx, kernel_nodes, nvtx_steps, work_items
from .phases import PhaseResult, phase_of_names, resolve_nodes

DEFAULT_MARKER = r"argmax|sampl|top_?k|top_?p|topp"
#: image / feature resampling (`upsample_nearest2d`, `downsample`, `resample`, `grid_sampler_2d`): the default
#: marker's `sampl` matches them, but they are layers of a UNet / VAE / vision encoder (several per forward), not
#: token sampling; the default step marker leaves them out
RESAMPLE = r"(?:up|down|re|sub)_?sampl|grid_?sampl"


@dataclass(frozen=True)
class StepSpans:
    """The detected steps (unsorted): per step its span, process, device and phase index (-1 unmapped); per kernel
    row the index of its step (-1 none)."""

    start: np.ndarray
    end: np.ndarray
    pid: np.ndarray
    device: np.ndarray
    phase: np.ndarray
    kernel_step: np.ndarray


@dataclass(frozen=True)
class MarkerKernel(FieldsJson):
    """A kernel name the step-marker regex matched, and how many of its kernels ran."""

    name: str
    count: int


# ------------------------------------------------------------------------------------------- marker method
def marker_kernels(k: Kernels, regex: str, exclude: Optional[str]
                   ) -> Tuple[Tuple[np.ndarray, Tuple[MarkerKernel, ...]], Tuple[MarkerKernel, ...]]:
    """((marker mask per kernel row, marker kernel names with their counts, most frequent first), the names
    ``exclude`` left out with their counts). A user's ``regex`` (checked by :mod:`options`) is compiled and matched
    in bounded time (:func:`config.patterns.first_match`: an :class:`OptionError` ``step_marker`` when invalid)."""
    first = first_match([regex], k.names, "step_marker", [repr(regex)])
    hit = np.array([j == 0 for j in first] + [False], dtype=np.bool_)
    out = np.zeros(len(k.names) + 1, np.bool_)
    if exclude is not None:
        out[:-1] = hit[:-1] & np.array([j == 0 for j in first_match([exclude], k.names, "step_marker",
                                                                   [repr(exclude)])], dtype=np.bool_)
        hit &= ~out
    ni = np.asarray(k.name_idx)
    cnt = np.bincount(ni[ni >= 0], minlength=len(k.names))

    def listed(mask: np.ndarray) -> Tuple[MarkerKernel, ...]:
        c = np.where(mask[:-1], cnt[:len(k.names)], 0)   # (name_idx -1: no name, never a marker)
        return tuple(MarkerKernel(k.names[i], int(c[i]))
                     for i in np.lexsort((np.arange(c.shape[0]), -c)).tolist() if c[i])
    return (hit[k.name_idx], listed(hit)), listed(out)


#: (start, end, pid, device, step per kernel row) of marker steps
MarkerSteps = Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def marker_steps(k: Kernels, is_m: np.ndarray) -> Optional[MarkerSteps]:
    """(start, end, pid, device, kernel_step) between consecutive marker kernels per device, or None."""
    parts_s, parts_e, parts_p, parts_d = [], [], [], []
    kstep = np.full(len(k), -1, np.int64)
    base = 0
    for d, idx in rows_by_value(np.asarray(k.device)):   # kernel order = start order; one sort, no mask per device
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


# ------------------------------------------------------------------------------------------- phase per step
def step_phase(wstep: np.ndarray, dur: np.ndarray, wphase: Optional[np.ndarray], n: int, nph: int,
               range_phase: Optional[np.ndarray]) -> np.ndarray:
    """Phase per step: ``range_phase`` where set, else the phase with the most ``dur`` among its work."""
    ph = np.full(n, -1, np.int64)
    if wphase is not None and wphase.shape[0] == wstep.shape[0] and nph:
        m = (wstep >= 0) & (wphase >= 0)
        if m.any():
            w = np.bincount(wstep[m] * nph + wphase[m], weights=dur[m], minlength=n * nph).reshape(n, nph)
            best = np.argmax(w, axis=1)
            ph = np.where(w.max(axis=1) > 0, best, -1)
    if range_phase is not None:
        ph = np.where(range_phase >= 0, range_phase, ph)
    return ph


# ------------------------------------------------------------------------------------------- open ranges
def _closed_only(model: TraceModel, tree: NvtxTree, choice: Optional[StepChoice], notes: List[str]
                 ) -> Optional[StepChoice]:
    """``choice`` without its step ranges that have no end in the export (still open when the capture stopped:
    the step's length is unknown, and the end the model gives them is not the step's), with a note; None when
    no step range is left."""
    if choice is None or model.nvtx is None or choice.nodes.shape[0] == 0:
        return choice
    closed = np.asarray(model.nvtx.closed, bool)[tree.row[choice.nodes]]
    if closed.all():
        return choice
    n_open = int((~closed).sum())
    notes.append(f"{n_open} step range(s) still open when the capture stopped (no end in the export) are not "
                 "counted as steps: their length is unknown")
    return replace(choice, nodes=choice.nodes[closed]) if closed.any() else None


# ------------------------------------------------------------------------------------------- entry point
def detect_steps(model: TraceModel, phase_map: PhaseMap, phase_result: Optional[PhaseResult],
                 step_marker: Optional[str], step_range: Optional[str], tree: Optional[NvtxTree],
                 kernel_node: Optional[np.ndarray] = None,
                 domain_nodes: Optional[Dict[int, np.ndarray]] = None
                 ) -> Tuple[Dict[str, Any], Optional[StepSpans]]:
    """Find the steps (see module docstring): how they were found (the :class:`steps.metrics.StepResult` fields
    ``reason``, ``method`` — "nvtx" | "marker" | "none" —, ``confidence`` …, ``notes``) and the steps (None with
    method "none"). ``phase_result`` (optional) supplies kernel and node phases consistent with the phases
    section; ``kernel_node`` (innermost tree node per kernel) is reused if given."""
    k = model.kernels
    notes: List[str] = []
    nph = len(phase_map.names)
    li, wdev, wpid, nk = work_items(model)
    choice: Optional[StepChoice] = None
    if tree is not None and len(tree) and not step_marker:
        knode = kernel_node if kernel_node is not None else kernel_nodes(model, tree, li[:nk])
        wnode = np.asarray(knode, np.int64)
        if li.shape[0] > nk:                            # graph-level rows after the kernels
            wnode = np.concatenate([wnode, kernel_nodes(model, tree, li[nk:])])
        choice, choice_notes = choose_nvtx(model, tree, wnode, li, phase_map, step_range)
        notes += choice_notes
        choice = _closed_only(model, tree, choice, notes)
    elif step_range:
        notes.append("--step-range ignored: " + ("a --step-marker was given" if step_marker
                                                 else "the trace has no NVTX push/pop ranges"))
    marker = None
    regex = step_marker or DEFAULT_MARKER
    markers: Tuple[MarkerKernel, ...] = ()
    router_note = ""
    if (choice is None or choice.confidence == "low") and k is not None and len(k):
        (is_m, markers), left_out = marker_kernels(k, regex, None if step_marker else f"{MOE_ROUTER}|{RESAMPLE}")
        rs = re.compile(RESAMPLE, re.IGNORECASE)
        resampling = [m for m in left_out if rs.search(m.name) and not re.search(MOE_ROUTER, m.name, re.I)]
        router = [m for m in left_out if m not in resampling]
        for what, left in ((("MoE router kernels left out of the default step marker (they run once per MoE "
                             "layer, not once per step): "), router),
                           (("Resampling kernels left out of the default step marker (image / feature up- or "
                             "down-sampling, several per forward pass, not token sampling): "), resampling)):
            if left:
                note = what + ", ".join(f"{code_name(m.name)} ({m.count:,})" for m in left[:3]) + (
                    f" and {len(left) - 3} more" if len(left) > 3 else "")
                notes.append(note)
                router_note = f"{router_note}; {note}" if router_note else note
        marker = marker_steps(k, is_m)
        if marker is not None and choice is not None:
            per_dev = np.unique(marker[3], return_counts=True)[1]
            if per_dev.min() < MIN_INSTANCES:
                marker = None
            else:
                ranges = " + ".join(code_name(n) for n in choice.names)
                notes.append(f"marker kernels preferred over the NVTX range {ranges} "
                             "whose name does not look like a model step")
    dur = k.dur if k is not None else np.zeros(0, np.int64)
    if choice is not None and marker is None and tree is not None:   # (a choice implies a tree)
        s, e, pid, dev, wstep = nvtx_steps(model, tree, choice, li, wdev, wpid, nk, domain_nodes)
        if phase_result is not None and phase_result.node_phase is not None:
            node_phase = phase_result.node_phase
        else:
            node_phase = resolve_nodes(tree, phase_of_names(model.nvtx.names if model.nvtx is not None else [],
                                                            phase_map))[2]
        wphase = np.where(wnode >= 0, node_phase[np.maximum(wnode, 0)], -1)
        gt = model.graph_trace
        wdur = np.concatenate([dur] + ([gt.end - gt.start] if gt is not None and wstep.shape[0] > nk else []))
        return dict(reason=None, method="nvtx", confidence=choice.confidence, confidence_reason=choice.reason,
                    step_ranges=choice.names, notes=tuple(notes)), StepSpans(
            s, e, pid, dev, step_phase(wstep, wdur, wphase, s.shape[0], nph, node_phase[choice.nodes]), wstep[:nk])
    if marker is not None:
        s, e, pid, dev, kstep = marker
        per_dev = np.unique(dev, return_counts=True)[1]
        src = "user" if step_marker else "default"
        if per_dev.min() >= 5:
            conf, why = "medium", (f"steps bounded by marker kernels ({src} regex {code_name(regex)}); "
                                   "no NVTX range marks steps")
        else:
            conf, why = "low", f"only {int(per_dev.min())} step(s) between marker kernels on some device"
        kphase = phase_result.kernel_phase if phase_result is not None else None
        return dict(reason=None, method="marker", confidence=conf, confidence_reason=why, marker_regex=regex,
                    marker_kernels=markers, notes=tuple(notes)), \
            StepSpans(s, e, pid, dev, step_phase(kstep, dur, kphase, s.shape[0], nph, None), kstep)
    if k is None or len(k) == 0:
        reason = "no kernels and no usable NVTX step ranges"
    else:
        reason = ("no NVTX range repeats once per step and fewer than 2 marker kernels "
                  f"(regex {code_name(regex)}) ran on any device")
        if router_note:
            reason += f"; {router_note}"
    return dict(reason=reason, method="none", marker_regex=regex, notes=tuple(notes)), None
