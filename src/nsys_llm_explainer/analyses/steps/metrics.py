"""Per-step metrics of model steps (decode / prefill iterations; detection: :mod:`.detect`): wall, GPU busy and
idle, sync and memcpy time, kernels, their distributions per phase and process, and the slowest and outlier steps.
Definitions: docs/FINDINGS.md, "Steps".
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Dict, List, Optional, Tuple

import numpy as np

from ...config.phase_map import build_phase_map
from ...errors import InputError
from ...jsonable import (
    NONE_AS_EMPTY,
    NONE_OMITTED,
    NOT_IN_JSON,
    FieldsJson,
    Outcome,
    dataclass_from_json,
    fields_json,
    need,
    need_rows,
)
from ...model import intervals as iv
from ...model.timeline import rows_by_value
from ...model.trace import TraceModel
from ...vocabulary.units import fmt_count, signed_dur
from ..api.classes import class_mask
from ..common.stats import Summary, median, round_half_up, summary
from ..nvtx.tree import NvtxTree, build_tree
from ..trace.window import gpu_work
from .detect import MarkerKernel, detect_steps
from .periods import PAUSE, pauses, step_periods
from .phases import UNMAPPED, PhaseResult

METRICS = ("wall_ns", "gpu_busy_ns", "gpu_idle_ns", "sync_ns", "memcpy_ns", "kernel_count")
MAX_ROWS = 100_000  # per-step rows kept in report.json / tables/steps.csv
#: a window holds repeated steps (a steady state can be measured in it) when at least this many steps lie in it
MIN_REPEATED_STEPS = 2.0

@dataclass(frozen=True)
class StepRow(FieldsJson):
    """One step (module docstring): its index in step order, place in time and metrics (integer ns, counts)."""

    index: int
    start_ns: int
    end_ns: int
    wall_ns: int
    phase: str
    pid: int
    device: int
    gpu_busy_ns: int
    gpu_idle_ns: int
    kernel_count: int
    sync_ns: int
    memcpy_ns: int


@dataclass(frozen=True)
class StepMetrics(FieldsJson):
    """The step metrics (:data:`METRICS`, in that order) of a set of steps: their totals, or a step's excess over
    its phase's medians (``vs_median``)."""

    wall_ns: int
    gpu_busy_ns: int
    gpu_idle_ns: int
    sync_ns: int
    memcpy_ns: int
    kernel_count: int


@dataclass(frozen=True)
class SlowStep(StepRow):
    """A slowest or outlier step: its row, ``vs_median`` (its metrics minus its phase's medians) and
    ``what_differed`` (those differences in words)."""

    vs_median: StepMetrics
    what_differed: str


@dataclass(frozen=True)
class PhaseMedian(StepMetrics):
    """The median of each metric over the ``count`` steps of one phase (rounded half up)."""

    phase: str
    count: int
    JSON_KEYS: ClassVar[Tuple[str, ...]] = ("phase", "count")


@dataclass(frozen=True)
class StepGroup(Summary):
    """The steps of one group: the distribution of ``wall_ns`` (:func:`stats.summary`) and the totals of the other
    metrics (the rows below add the key that names the group, written first: ``JSON_KEYS``)."""

    gpu_busy_ns: int
    gpu_idle_ns: int
    sync_ns: int
    memcpy_ns: int
    kernel_count: int


@dataclass(frozen=True)
class StepPhaseGroup(StepGroup):
    """The steps of one phase."""

    phase: str
    JSON_KEYS: ClassVar[Tuple[str, ...]] = ("phase",)


@dataclass(frozen=True)
class StepPidGroup(StepGroup):
    """The steps of one process."""

    pid: int
    JSON_KEYS: ClassVar[Tuple[str, ...]] = ("pid",)


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
    #: per step: the union of the work on its device between its end and the next step's start of its process
    #: (0 for a process's last step); None when rebuilt from report.json rows (not serialized)
    gap_busy: Optional[np.ndarray] = None

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

    def rows(self, idx: Optional[np.ndarray] = None) -> List[StepRow]:
        """The rows of the steps ``idx`` (all by default), converting each column once."""
        at = (np.arange(len(self)) if idx is None else idx).tolist()
        cols = [[int(v) for v in x[at].tolist()] for x in (self.start, self.end, self.pid, self.device,
                                                          self.gpu_busy, self.kernel_count, self.sync, self.memcpy)]
        return [StepRow(i, s, e, e - s, self.phase_label(i), p, d, b, e - s - b, kc, sy, mc)
                for i, s, e, p, d, b, kc, sy, mc in zip(at, *cols)]

    @classmethod
    def from_dict(cls, rows: Any, where: str = "steps") -> StepArrays:
        """The columns of the step rows ``rows`` (:meth:`rows`; ``wall_ns`` / ``gpu_idle_ns`` are derived);
        ``phase_names``: the phases the rows name, in order of first use."""
        cols = {"start": "start_ns", "end": "end_ns", "pid": "pid", "device": "device", "kernel_count": "kernel_count",
                "gpu_busy": "gpu_busy_ns", "sync": "sync_ns", "memcpy": "memcpy_ns"}
        vals = need_rows(rows, (*cols.values(), "phase"), f"{where}.rows")
        names = tuple(dict.fromkeys(str(v[-1]) for v in vals if v[-1] != UNMAPPED))
        index = {n: i for i, n in enumerate(names)}
        try:
            arrays = {f: np.array([v[j] for v in vals], np.int64) for j, f in enumerate(cols)}
        except (TypeError, ValueError, OverflowError):
            raise InputError(f"{where}.rows: expected integer ns, counts and ids") from None
        return cls(**arrays, phase=np.array([index.get(str(v[-1]), -1) for v in vals], np.int64), phase_names=names)


@dataclass(frozen=True)
class StepResult(Outcome):
    method: str                        # "nvtx" | "marker" | "none"
    confidence: str = "low"            # "high" | "medium" | "low"
    confidence_reason: str = ""
    step_ranges: Tuple[str, ...] = ()  # NVTX names used as steps
    marker_regex: Optional[str] = None
    marker_kernels: Tuple[MarkerKernel, ...] = ()  # marker kernel names and counts
    step_count: int = 0
    summary: Optional[Summary] = field(default=None, metadata=NONE_AS_EMPTY)   # of wall_ns
    #: NVTX steps: of the step periods (start to the next step's start, same process; periods over an idle pause
    #: left out, ``period_pauses`` of them: analyses/steps/periods.py); None for marker steps (their wall is it)
    period: Optional[Summary] = field(default=None, metadata=NONE_OMITTED)
    period_pauses: int = 0   # periods left out over an idle pause (marker steps: intervals between markers)
    #: NVTX steps: the median over the steps with a period of their range ÷ their period, × 100 (≤ 100:
    #: analyses/steps/periods.py, StepPeriods.cover_p50_pct); None without periods
    period_cover_pct: Optional[float] = field(default=None, metadata=NONE_OMITTED)
    totals: Optional[StepMetrics] = field(default=None, metadata=NONE_AS_EMPTY)
    by_phase: Tuple[StepPhaseGroup, ...] = ()
    by_pid: Tuple[StepPidGroup, ...] = ()
    median_by_phase: Tuple[PhaseMedian, ...] = ()
    slowest: Tuple[SlowStep, ...] = ()
    outliers: Tuple[SlowStep, ...] = ()
    notes: Tuple[str, ...] = ()
    arrays: Optional[StepArrays] = field(default=None, metadata=NOT_IN_JSON)   # full per-step columns: a helper
    rows: Tuple[StepRow, ...] = ()   # the first MAX_ROWS steps (StepArrays.rows): report.json, steps.csv, the charts
    rows_capped: bool = False        # more steps than ``rows``
    #: steps with at least one kernel whose name ``analyze_steps``' ``optimizer_names`` marks (the workload's
    #: evidence: analyses/kernels/traits.py); None when not asked
    optimizer_steps: Optional[int] = field(default=None, metadata=NOT_IN_JSON)

    @property
    def sure(self) -> bool:
        """Whether per-step figures may be checked and quoted (the copy-path finding, the memory section): steps found
        with confidence medium or high (a low-confidence range — a layer's fetch hook, an op's range — is no step a
        median may be taken over and called the step's)."""
        return self.available and self.confidence != "low"

    @property
    def bounds(self) -> Optional[Tuple[np.ndarray, np.ndarray]]:
        """(starts, ends) of every step, ns; None when there are no steps."""
        return (self.arrays.start, self.arrays.end) if self.available and self.arrays is not None else None

    def inside(self, start_ns: int, end_ns: int) -> float:
        """Steps inside ``[start_ns, end_ns)``: Σ over the steps of the fraction of the step's wall inside it (0.0
        without steps)."""
        a = self.arrays
        if not self.available or a is None or len(a) == 0:
            return 0.0
        wall = np.maximum(a.end - a.start, 1)
        inside = np.clip(np.minimum(a.end, end_ns) - np.maximum(a.start, start_ns), 0, None)
        return float((inside / wall).sum())

    def repeat_in(self, start_ns: int, end_ns: int) -> bool:
        """Whether ``[start_ns, end_ns)`` holds repeated steps: at least :data:`MIN_REPEATED_STEPS` steps inside
        it (:meth:`inside`). Without, an auto-detected window may be one pass: no steady state is shown."""
        return self.inside(start_ns, end_ns) >= MIN_REPEATED_STEPS

    @classmethod
    def from_dict(cls, d: Any, where: str = "steps") -> StepResult:
        """The inverse of ``to_dict()``: ``arrays`` rebuilt from ``rows`` (all steps, or the first :data:`MAX_ROWS`
        when ``rows_capped``), and the rows from them."""
        rows = need(d, "rows", where)
        got = dataclass_from_json(cls, d, where, rows=[], arrays=rows if rows and need(d, "available", where) else None)
        return replace(got, rows=tuple(got.arrays.rows())) if got.arrays is not None else got


# ------------------------------------------------------------------------------------------- metrics
def _clip_union(starts: np.ndarray, ends: np.ndarray, keys: np.ndarray, q_key: np.ndarray,
                q0: np.ndarray, q1: np.ndarray, unions: Optional[Dict[int, Optional[iv.IntervalUnion]]] = None
                ) -> np.ndarray:
    """Per query: length of the union of the intervals with the query's key inside [q0, q1). ``unions``: the
    per-key unions of these intervals found so far, filled here (a second call over the same intervals reuses
    them)."""
    out = np.zeros(q0.shape[0], np.int64)
    if starts.shape[0] == 0:
        return out
    unions = {} if unions is None else unions
    by_key: Optional[Dict[int, Any]] = None
    for kk, q in rows_by_value(np.asarray(q_key)):   # one sort each: no mask per key
        if kk not in unions:
            if by_key is None:
                one = keys.shape[0] > 0 and int(keys.min()) == int(keys.max())   # one key: a view, no copies
                by_key = {int(keys[0]): slice(None)} if one else dict(rows_by_value(np.asarray(keys)))
            m = by_key.get(kk)
            unions[kk] = iv.union_blocks(starts[m], ends[m]) if m is not None else None
        u = unions[kk]
        if u is not None:
            out[q] = iv.overlap_length(u, q0[q], q1[q])
    return out


def _gap_busy(a: StepArrays, ws: np.ndarray, we: np.ndarray, wd: np.ndarray,
              unions: Dict[int, Optional[iv.IntervalUnion]]) -> np.ndarray:
    """Per step of ``a``: the union of the work (``ws``/``we`` on device ``wd``; ``unions``: its per-device unions
    found so far) on the step's device inside ``[end, next start)``, the next step being the next by start of the
    same process (none: 0)."""
    o = np.lexsort((a.start, a.pid))
    nxt = a.end.copy()
    same = a.pid[o][1:] == a.pid[o][:-1]
    nxt[o[:-1][same]] = a.start[o[1:][same]]
    return _clip_union(ws, we, wd, a.device, a.end, np.maximum(nxt, a.end), unions)


def _what_differed(delta: Dict[str, int], phase: str) -> str:
    """A slow step against its phase's median, in words; signed durations with the unit that fits (``signed_dur``)."""
    parts = [(delta[key], label) for key, label in (("gpu_idle_ns", "GPU idle"), ("sync_ns", "sync"),
                                                     ("gpu_busy_ns", "GPU busy"), ("memcpy_ns", "memcpy"))]
    txt = [f"{signed_dur(v)} {label}" for v, label in sorted(parts, key=lambda t: -t[0]) if v > 0]
    if delta["kernel_count"] > 0:
        txt.append(f"+{delta['kernel_count']} kernels")
    w = delta["wall_ns"]
    head = f"{signed_dur(w)} wall vs the median {phase} step"
    return head + (": " + ", ".join(txt) if txt else "")


def _group_rows(metric: Dict[str, np.ndarray], groups: np.ndarray) -> List[Dict[str, Any]]:
    """Per distinct value of ``groups`` (in sorted order): the fields of a :class:`StepPhaseGroup` /
    :class:`StepPidGroup` but its key (the summary of ``wall_ns``, the totals of the other :data:`METRICS`)."""
    return [dict(**fields_json(summary(metric["wall_ns"][m])), **{mm: int(metric[mm][m].sum()) for mm in METRICS[1:]})
            for _, m in rows_by_value(np.asarray(groups))]   # one sort, not a mask over every step per group


# ------------------------------------------------------------------------------------------- entry point
def analyze_steps(model: TraceModel, phase_result: Optional[PhaseResult] = None,
                  step_marker: Optional[str] = None,
                  step_range: Optional[str] = None, top: int = 10, tree: Optional[NvtxTree] = None,
                  kernel_node: Optional[np.ndarray] = None,
                  domain_nodes: Optional[Dict[int, np.ndarray]] = None,
                  optimizer_names: Optional[np.ndarray] = None) -> StepResult:
    """Detect steps (:func:`steps_detect.detect_steps`) and measure them (see module docstring);
    ``tree`` / ``kernel_node`` / ``domain_nodes`` (the attribution's per-domain innermost node per kernel)
    reused if given; ``optimizer_names``: a mask over ``model.kernels.names`` whose steps to count
    (``optimizer_steps``)."""
    if phase_result is not None:
        phase_map = phase_result.rules or build_phase_map(phase_result.phase_map)
        phase_names = list(phase_result.phase_names)
    else:
        phase_map = build_phase_map(None)
        phase_names = phase_map.names
    if tree is None:
        tree = build_tree(model.nvtx)
    how, sp = detect_steps(model, phase_map, phase_result, step_marker, step_range, tree, kernel_node, domain_nodes)
    head = StepResult(False, **how)
    if sp is None:
        return head
    s, e, pid, dev, kstep, ph = sp.start, sp.end, sp.pid, sp.device, sp.kernel_step, sp.phase
    ws, we, wd = gpu_work(model, "start", "end", "device")
    work_unions: Dict[int, Optional[iv.IntervalUnion]] = {}   # per device: the union of its GPU work, found once
    busy = _clip_union(ws, we, wd, dev, s, e, work_unions)
    marker_pauses = 0
    if head.method == "marker":
        # a marker step's wall is its period and all of it is "between steps": the NVTX periods' idle-pause rule
        paused = pauses(e - s, e - s - busy)
        marker_pauses = int(paused.sum())
        if marker_pauses:
            keep = ~paused
            new_index = np.cumsum(keep) - 1
            k0 = np.maximum(kstep, 0)
            kstep = np.where((kstep >= 0) & keep[k0], new_index[k0], -1)
            s, e, pid, dev, ph, busy = (x[keep] for x in (s, e, pid, dev, ph, busy))
            head = replace(head, notes=head.notes + (
                f"{fmt_count(marker_pauses, 'interval')} between marker kernels left out: GPU idle over {PAUSE} × "
                "the median interval (an idle pause or another phase of the job, not a step)",))
    n = s.shape[0]
    kc = np.bincount(kstep[kstep >= 0], minlength=n).astype(np.int64)
    mc, api = model.memcpy, model.api
    memcpy = _clip_union(mc.start, mc.end, mc.device.astype(np.int64), dev, s, e) if mc is not None and len(mc) \
        else np.zeros(n, np.int64)
    sm = class_mask(api, "sync") if api is not None and len(api) else None
    sync = _clip_union(api.start[sm], api.end[sm], api.pid[sm].astype(np.int64), pid.astype(np.int64), s, e) \
        if api is not None and sm is not None else np.zeros(n, np.int64)
    order = np.lexsort((s, dev, pid))   # by pid, device, then start
    a = StepArrays(start=s[order], end=e[order], pid=pid[order].astype(np.int64), device=dev[order],
                   phase=ph[order], kernel_count=kc[order], gpu_busy=busy[order], sync=sync[order],
                   memcpy=memcpy[order], phase_names=tuple(phase_names))
    a = replace(a, gap_busy=_gap_busy(a, ws, we, wd, work_unions))
    opt_steps = None
    if optimizer_names is not None and model.kernels is not None and kstep.shape[0] == len(model.kernels):
        named = np.append(np.asarray(optimizer_names, bool), False)   # name_idx -1 (no name): not marked
        opt_steps = int(np.unique(kstep[named[model.kernels.name_idx] & (kstep >= 0)]).shape[0])
    metric = {"wall_ns": a.wall, "gpu_busy_ns": a.gpu_busy, "gpu_idle_ns": a.gpu_idle, "sync_ns": a.sync,
              "memcpy_ns": a.memcpy, "kernel_count": a.kernel_count}
    uph = np.unique(a.phase).tolist()
    med: Dict[int, Dict[str, int]] = {}
    median_by_phase: List[PhaseMedian] = []
    for p in uph:
        m = a.phase == p
        med[p] = {mm: int(round_half_up(median(metric[mm][m]))) for mm in METRICS}
        median_by_phase.append(PhaseMedian(phase=phase_names[p] if p >= 0 else UNMAPPED, count=int(m.sum()),
                                           **med[p]))
    ntop = max(int(top), 0)
    ref_wall = np.array([med[p]["wall_ns"] for p in uph], np.int64)[np.searchsorted(np.asarray(uph, np.int64),
                                                                                    a.phase)]   # no loop over steps
    excess = a.wall - ref_wall
    slow = np.lexsort((a.start, -a.wall))[:ntop]
    groups = _group_rows(metric, a.phase)
    # an outlier is longer than its phase's p90: ≥ 10 % of the phase's steps as long are a kind of step that recurs
    # (the verify step every fifth step among draft steps of one name), not an outlier
    ref_p90 = np.array([g["p90_ns"] for g in groups], np.int64)[np.searchsorted(np.asarray(uph, np.int64), a.phase)]
    cand = np.flatnonzero((excess > 0) & (a.wall > ref_p90))
    out = cand[np.lexsort((a.start[cand], -excess[cand]))][:ntop]
    per = step_periods(a) if head.method == "nvtx" else None
    return replace(
        head, available=True, step_count=n, summary=summary(a.wall),
        period=summary(per.samples) if per is not None and per.samples.shape[0] else None,
        period_pauses=per.paused if per is not None else marker_pauses,
        period_cover_pct=per.cover_p50_pct() if per is not None else None,
        totals=StepMetrics(**{m: int(metric[m].sum()) for m in METRICS}),
        by_phase=tuple(StepPhaseGroup(phase=phase_names[p] if p >= 0 else UNMAPPED, **g)
                       for p, g in zip(uph, groups)),
        by_pid=tuple(StepPidGroup(pid=int(p), **g) for p, g in zip(np.unique(a.pid).tolist(),
                                                                   _group_rows(metric, a.pid))),
        median_by_phase=tuple(median_by_phase), slowest=_vs_median(a, slow, med), outliers=_vs_median(a, out, med),
        arrays=a, rows=tuple(a.rows(np.arange(min(MAX_ROWS, n)))), rows_capped=n > MAX_ROWS,
        optimizer_steps=opt_steps)


def _vs_median(a: StepArrays, idx: np.ndarray, med: Dict[int, Dict[str, int]]) -> Tuple[SlowStep, ...]:
    """Rows of steps ``idx`` with ``vs_median`` (metrics minus the phase's medians) and ``what_differed``."""
    rows = []
    for i, row in zip(idx.tolist(), a.rows(idx)):
        ref = med[int(a.phase[i])]
        delta = {mm: int(getattr(row, mm)) - ref[mm] for mm in METRICS}
        rows.append(SlowStep(**fields_json(row), vs_median=StepMetrics(**delta),
                             what_differed=_what_differed(delta, row.phase)))
    return tuple(rows)
