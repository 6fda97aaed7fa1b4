"""Per-step metrics of model steps (decode / prefill iterations); detection is in :mod:`steps_detect`.

Per step (integer ns):

* ``start_ns`` / ``end_ns`` / ``wall_ns`` = end − start; ``pid``, ``device``, ``phase``: see
  :mod:`steps_detect`.
* ``kernel_count``: kernels launched in the step — NVTX: kernels whose launch call on the range's thread
  lies inside the range (graph launches of a graph-level trace count for step detection and the device,
  not here); marker: kernels on the device starting in [start, end).
* ``gpu_busy_ns``: length of the union of all kernel intervals (and whole-graph intervals when the trace
  recorded CUDA graphs at graph level) on the step's device clipped to [start, end);
  ``gpu_idle_ns`` = ``wall_ns`` − ``gpu_busy_ns``.
* ``sync_ns``: length of the union of host-blocking sync calls (api_classes class ``sync``) of the
  step's process (all threads) clipped to the step.
* ``memcpy_ns``: length of the union of GPU memcpy intervals on the step's device clipped to the step.

Unions and clipping use :mod:`intervals`. Distributions (``summary``, ``by_phase``, ``by_pid``): count /
total / avg / min / max / p50 / p90 / p99 of ``wall_ns`` (:func:`stats.summary`) plus totals of the other
metrics. ``median_by_phase``: the median of each metric over the phase's steps (:func:`stats.median`,
rounded half up). ``slowest``: the ``top`` steps with the largest ``wall_ns`` (ties: earlier first);
``outliers``: the ``top`` steps with the largest positive excess of ``wall_ns`` over their phase's median;
each with ``vs_median`` = its metrics minus its phase's medians. ``confidence`` / ``method``: see
:mod:`steps_detect`. ``rows``: every step (the first :data:`MAX_ROWS`; ``rows_capped`` says whether more
were cut), as in ``tables/steps.csv``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ...config.phase_map import as_phase_map
from ...errors import InputError
from ...jsonable import NOT_IN_JSON, dataclass_from_json, json_ready, need, row_values
from ...model import intervals as iv
from ...model.trace import TraceModel
from ...vocabulary.units import fmt_us_unit as us
from ..api.classes import class_mask
from ..common.stats import median, round_half_up, summary
from ..nvtx.tree import NvtxTree, build_tree
from .detect import detect_steps
from .phases import UNMAPPED, PhaseResult

METRICS = ("wall_ns", "gpu_busy_ns", "gpu_idle_ns", "sync_ns", "memcpy_ns", "kernel_count")
MAX_ROWS = 100_000  # per-step rows kept in report.json / tables/steps.csv

Row = Dict[str, Any]


@dataclass(frozen=True)
class StepArrays:
    """Full per-step columns, in step order (by pid/device, then start); serialized only as the step rows."""

    start: np.ndarray
    end: np.ndarray
    pid: np.ndarray
    device: np.ndarray
    phase: np.ndarray          # index into ``phase_names``, -1 unmapped
    kernel_count: np.ndarray
    gpu_busy: np.ndarray
    sync: np.ndarray
    memcpy: np.ndarray
    phase_names: Tuple[str, ...]

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

    def row(self, i: int) -> Row:
        return {"index": int(i), "start_ns": int(self.start[i]), "end_ns": int(self.end[i]),
                "wall_ns": int(self.wall[i]), "phase": self.phase_label(i), "pid": int(self.pid[i]),
                "device": int(self.device[i]), "gpu_busy_ns": int(self.gpu_busy[i]),
                "gpu_idle_ns": int(self.gpu_idle[i]), "kernel_count": int(self.kernel_count[i]),
                "sync_ns": int(self.sync[i]), "memcpy_ns": int(self.memcpy[i])}

    def rows(self, limit: Optional[int] = None) -> List[Row]:
        """``row(i)`` for the first ``limit`` steps (all by default), converting each column once."""
        k = len(self) if limit is None else min(limit, len(self))
        cols = [[int(v) for v in x[:k].tolist()] for x in (self.start, self.end, self.pid, self.device,
                                                          self.gpu_busy, self.kernel_count, self.sync, self.memcpy)]
        labels = [self.phase_label(i) for i in range(k)]
        return [{"index": i, "start_ns": s, "end_ns": e, "wall_ns": e - s, "phase": ph, "pid": p, "device": d,
                 "gpu_busy_ns": b, "gpu_idle_ns": e - s - b, "kernel_count": kc, "sync_ns": sy, "memcpy_ns": mc}
                for i, (s, e, p, d, b, kc, sy, mc, ph) in enumerate(zip(*cols, labels))]

    @classmethod
    def from_dict(cls, rows: Any, where: str = "steps") -> StepArrays:
        """The columns of the step rows ``rows`` (:meth:`rows`; ``wall_ns`` / ``gpu_idle_ns`` are derived);
        ``phase_names``: the phases the rows name, in order of first use."""
        cols = {"start": "start_ns", "end": "end_ns", "pid": "pid", "device": "device", "kernel_count": "kernel_count",
                "gpu_busy": "gpu_busy_ns", "sync": "sync_ns", "memcpy": "memcpy_ns"}
        vals = row_values({"rows": rows}, "rows", (*cols.values(), "phase"), where)
        names = tuple(dict.fromkeys(str(v[-1]) for v in vals if v[-1] != UNMAPPED))
        index = {n: i for i, n in enumerate(names)}
        try:
            arrays = {f: np.array([v[j] for v in vals], np.int64) for j, f in enumerate(cols)}
        except (TypeError, ValueError, OverflowError):
            raise InputError(f"{where}.rows: expected integer ns, counts and ids") from None
        return cls(**arrays, phase=np.array([index.get(str(v[-1]), -1) for v in vals], np.int64), phase_names=names)


@dataclass(frozen=True)
class StepResult:
    available: bool
    reason: Optional[str]
    method: str                        # "nvtx" | "marker" | "none"
    confidence: str = "low"            # "high" | "medium" | "low"
    confidence_reason: str = ""
    step_ranges: Tuple[str, ...] = ()  # NVTX names used as steps
    marker_regex: Optional[str] = None
    marker_kernels: Tuple[Row, ...] = ()  # marker kernel names and counts
    step_count: int = 0
    summary: Dict[str, int] = field(default_factory=dict)
    totals: Dict[str, int] = field(default_factory=dict)
    by_phase: Tuple[Row, ...] = ()
    by_pid: Tuple[Row, ...] = ()
    median_by_phase: Tuple[Row, ...] = ()
    slowest: Tuple[Row, ...] = ()
    outliers: Tuple[Row, ...] = ()
    notes: Tuple[str, ...] = ()
    arrays: Optional[StepArrays] = field(default=None, metadata=NOT_IN_JSON)   # full per-step columns: a helper,
    #                                                                            in to_dict() only as ``rows``

    def rows(self) -> List[Row]:
        """The step rows ``report.json`` holds: the first :data:`MAX_ROWS` (:meth:`StepArrays.rows`)."""
        a = self.arrays if self.available else None
        return a.rows(MAX_ROWS) if a is not None and len(a) else []

    def to_dict(self) -> Dict[str, Any]:
        a = self.arrays if self.available else None
        return {**json_ready({
            "available": self.available, "reason": self.reason, "method": self.method, "confidence": self.confidence,
            "confidence_reason": self.confidence_reason, "step_ranges": self.step_ranges,
            "marker_regex": self.marker_regex, "marker_kernels": self.marker_kernels, "step_count": self.step_count,
            "summary": self.summary, "totals": self.totals, "by_phase": self.by_phase, "by_pid": self.by_pid,
            "median_by_phase": self.median_by_phase, "slowest": self.slowest, "outliers": self.outliers,
            "notes": self.notes}), "rows": self.rows(),
            "rows_capped": a is not None and self.step_count > MAX_ROWS}   # StepArrays.row() gives builtins already

    @classmethod
    def from_dict(cls, d: Any, where: str = "steps") -> StepResult:
        """The inverse of :meth:`to_dict`: ``arrays`` rebuilt from ``rows`` — all steps, or the first
        :data:`MAX_ROWS` when ``rows_capped`` (then :meth:`table` gives those only)."""
        rows = need(d, "rows", where)
        return dataclass_from_json(cls, d, where, arrays=rows if rows and need(d, "available", where) else None)

    def table(self) -> List[Row]:
        """Every step as a row (for CSV output)."""
        a = self.arrays
        return a.rows() if a is not None else []


# ------------------------------------------------------------------------------------------- metrics
def _clip_union(starts: np.ndarray, ends: np.ndarray, keys: np.ndarray, q_key: np.ndarray,
                q0: np.ndarray, q1: np.ndarray) -> np.ndarray:
    """Per query: length of the union of the intervals with the query's key inside [q0, q1)."""
    out = np.zeros(q0.shape[0], np.int64)
    if starts.shape[0] == 0:
        return out
    one = keys.shape[0] > 0 and int(keys.min()) == int(keys.max())   # one key: no masked copies
    for kk in np.unique(q_key).tolist():
        if one:
            if kk != int(keys[0]):
                continue
            u = iv.union_blocks(starts, ends)
        else:
            m = keys == kk
            if not m.any():
                continue
            u = iv.union_blocks(starts[m], ends[m])
        q = q_key == kk
        out[q] = iv.overlap_length(u, q0[q], q1[q])
    return out


def _what_differed(delta: Dict[str, int], phase: str) -> str:
    parts: List[Tuple[int, str]] = []
    for key, label in (("gpu_idle_ns", "GPU idle"), ("sync_ns", "sync"), ("gpu_busy_ns", "GPU busy"),
                       ("memcpy_ns", "memcpy")):
        v = delta[key]
        if v > 0:
            parts.append((v, f"+{us(v)} {label}"))
    parts.sort(key=lambda t: -t[0])
    txt = [p[1] for p in parts]
    if delta["kernel_count"] > 0:
        txt.append(f"+{delta['kernel_count']} kernels")
    w = delta["wall_ns"]
    head = f"{'+' if w >= 0 else '-'}{us(abs(w))} wall vs the median {phase} step"
    return head + (": " + ", ".join(txt) if txt else "")


def _group_rows(a: StepArrays, groups: np.ndarray, labels: Sequence[object], key: str) -> List[Row]:
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


def _joined(cols: List[np.ndarray]) -> np.ndarray:
    """One column of the busy rows: one table's own column (no copy), else the tables' columns concatenated."""
    return cols[0] if len(cols) == 1 else np.concatenate([np.asarray(c, np.int64) for c in cols])


def _metric(a: StepArrays, name: str) -> np.ndarray:
    return {"wall_ns": a.wall, "gpu_busy_ns": a.gpu_busy, "gpu_idle_ns": a.gpu_idle, "sync_ns": a.sync,
            "memcpy_ns": a.memcpy, "kernel_count": a.kernel_count}[name]


# ------------------------------------------------------------------------------------------- entry point
def analyze_steps(model: TraceModel, phase_result: Optional[PhaseResult] = None,
                  step_marker: Optional[str] = None,
                  step_range: Optional[str] = None, top: int = 10, tree: Optional[NvtxTree] = None,
                  kernel_node: Optional[np.ndarray] = None,
                  domain_nodes: Optional[Dict[int, np.ndarray]] = None) -> StepResult:
    """Detect steps (:func:`steps_detect.detect_steps`) and measure them (see module docstring);
    ``tree`` / ``kernel_node`` / ``domain_nodes`` (the attribution's per-domain innermost node per kernel)
    reused if given."""
    k = model.kernels
    if phase_result is not None:
        phase_map = phase_result.rules or as_phase_map(phase_result.phase_map, phase_result.source)
        phase_names = list(phase_result.phase_names)
    else:
        phase_map = as_phase_map(None)
        phase_names = phase_map.names
    if tree is None:
        tree = build_tree(model.nvtx)
    det = detect_steps(model, phase_map, phase_result, step_marker, step_range, tree, kernel_node, domain_nodes)
    head = StepResult(False, reason=det.reason, method=det.method, confidence=det.confidence,
                      confidence_reason=det.confidence_reason, step_ranges=tuple(det.step_ranges),
                      marker_regex=det.marker_regex, marker_kernels=tuple(det.marker_kernels), notes=tuple(det.notes))
    sp = det.spans
    if sp is None:
        return head
    s, e, pid, dev, kstep, ph = sp.start, sp.end, sp.pid, sp.device, sp.kernel_step, sp.phase
    n = s.shape[0]
    kc = np.bincount(kstep[kstep >= 0], minlength=n).astype(np.int64)
    bs = [k.start] if k is not None else []
    be = [k.end] if k is not None else []
    bd = [k.device] if k is not None else []
    gt = model.graph_trace
    if gt is not None and len(gt):
        bs.append(gt["start"])
        be.append(gt["end"])
        bd.append(gt["device"])
    if bs:
        busy = _clip_union(_joined(bs), _joined(be), _joined(bd), dev, s, e)
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
    order = np.lexsort((s, dev, pid))   # by pid, device, then start
    a = StepArrays(start=s[order], end=e[order], pid=pid[order].astype(np.int64), device=dev[order],
                   phase=ph[order], kernel_count=kc[order], gpu_busy=busy[order], sync=sync[order],
                   memcpy=memcpy[order], phase_names=tuple(phase_names))
    uph = np.unique(a.phase).tolist()
    med: Dict[int, Dict[str, int]] = {}
    median_by_phase: List[Row] = []
    for p in uph:
        m = a.phase == p
        med[p] = {mm: int(round_half_up(median(_metric(a, mm)[m]))) for mm in METRICS}
        median_by_phase.append({"phase": phase_names[p] if p >= 0 else UNMAPPED, "count": int(m.sum()), **med[p]})
    ntop = max(int(top), 0)
    ref_wall = np.array([med[int(p)]["wall_ns"] for p in a.phase.tolist()], np.int64)
    excess = a.wall - ref_wall
    slow = np.lexsort((a.start, -a.wall))[:ntop]
    out = np.lexsort((a.start, -excess))[:ntop]
    out = out[excess[out] > 0]
    return replace(
        head, available=True, step_count=n, summary=summary(a.wall),
        totals={m: int(_metric(a, m).sum()) for m in METRICS},
        by_phase=tuple(_group_rows(a, a.phase, [phase_names[p] if p >= 0 else UNMAPPED for p in uph], "phase")),
        by_pid=tuple(_group_rows(a, a.pid, np.unique(a.pid).tolist(), "pid")),
        median_by_phase=tuple(median_by_phase), slowest=_vs_median(a, slow, med), outliers=_vs_median(a, out, med),
        arrays=a)


def _vs_median(a: StepArrays, idx: np.ndarray, med: Dict[int, Dict[str, int]]) -> Tuple[Row, ...]:
    """Rows of steps ``idx`` with ``vs_median`` (metrics minus the phase's medians) and ``what_differed``."""
    rows = []
    for i in idx.tolist():
        row = a.row(i)
        ref = med[int(a.phase[i])]
        delta = {mm: int(row[mm]) - ref[mm] for mm in METRICS}
        rows.append({**row, "vs_median": delta, "what_differed": _what_differed(delta, str(row["phase"]))})
    return tuple(rows)
