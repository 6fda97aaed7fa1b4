"""Steady-state analysis window: drop warm-up (model load, compilation, graph capture, sparse early kernels) and
idle tails before measuring. Definitions and the auto rule: docs/FINDINGS.md, "Steady-state window".
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, List, Optional, Tuple

import numpy as np

from ...config.window import Window
from ...errors import OptionError
from ...jsonable import NONE_OMITTED, FieldsJson
from ...model import intervals as iv
from ...model.trace import TraceModel
from ...vocabulary.code_spans import code_name
from ...vocabulary.units import fmt_count
from ...vocabulary.units import fmt_dur as dur
from ..common.stats import pct
from .capture_ranges import not_recorded
from .session import started_mid_run
from .window_passes import autotune_lead, module_calls, one_off_lead

N_BINS = 200
SPARSE_EDGE_RATIO = 0.5   # a merged-in side whose busy level is under half the rest's is warm-up or tail
MIN_EDGE_BINS = 3         # a side cut at a change point spans at least this many bins, and so does what is kept
MIN_BIN_NS = 1_000
ACTIVE_FRACTION = 0.25
HOLE_BINS_FRACTION = 0.05
TRIM_MIN_SHARE = 0.10
TRIM_MAX_BUSY_SHARE = 0.25
SAME_WORK_SHARE = 0.5     # rule 5c: a side repeats a stretch when half its kernel time is of names running there
MIN_KERNELS = 20


def _omitted() -> Any:
    """A field ``report.json`` leaves out when it is None (the other method's details)."""
    return field(default=None, metadata=NONE_OMITTED)


@dataclass(frozen=True)
class WindowDetails(FieldsJson):
    """How the window was found (docs/FINDINGS.md, "Steady-state window"): the auto rule's bins, levels and
    candidate edges, or the NVTX range's name and count; the other method's fields are None and have no key."""

    bins: Optional[int] = _omitted()
    bin_ns: Optional[int] = _omitted()
    reference_busy_pct: Optional[float] = _omitted()
    active_threshold_pct: Optional[float] = _omitted()
    active_bins: Optional[int] = _omitted()
    candidate_start_ns: Optional[int] = _omitted()
    candidate_end_ns: Optional[int] = _omitted()
    warmup_busy_pct: Optional[float] = _omitted()
    steady_busy_pct: Optional[float] = _omitted()
    tail_busy_pct: Optional[float] = _omitted()
    warmup_share_of_busy_pct: Optional[float] = _omitted()
    tail_share_of_busy_pct: Optional[float] = _omitted()
    autotune_until_ns: Optional[int] = _omitted()
    autotune_trial_pct: Optional[float] = _omitted()
    one_off_until_ns: Optional[int] = _omitted()
    one_off_pct: Optional[float] = _omitted()
    nvtx_name: Optional[str] = _omitted()
    nvtx_ranges: Optional[int] = _omitted()
    capture_ranges: Optional[int] = _omitted()
    not_recorded_ns: Optional[int] = _omitted()


@dataclass(frozen=True)
class WindowResult(FieldsJson):
    full_start_ns: int
    full_end_ns: int
    start_ns: int
    end_ns: int
    method: str          # "full" | "auto" | "override" | "nvtx"
    reason: str
    warmup_ns: int
    tail_ns: int
    steady_fraction: float
    details: WindowDetails = WindowDetails()
    JSON_DERIVED: ClassVar[Tuple[str, ...]] = ("window_ns",)

    @property
    def window_ns(self) -> int:
        return self.end_ns - self.start_ns

    @property
    def is_full(self) -> bool:
        return self.start_ns <= self.full_start_ns and self.end_ns >= self.full_end_ns


def _result(full0: int, full1: int, s: int, e: int, method: str, reason: str,
            details: WindowDetails = WindowDetails()) -> WindowResult:
    span = full1 - full0
    frac = round((e - s) / span, 6) if span > 0 else 1.0
    return WindowResult(full0, full1, s, e, method, reason, max(0, s - full0), max(0, full1 - e), frac,
                        details)


def gpu_work(model: TraceModel, *cols: str) -> List[np.ndarray]:
    """Columns ``cols`` of the GPU work: kernels, then whole-graph executions (graph-level trace); one table's own
    arrays when only it has rows, else both tables' concatenated (int64)."""
    tables: List[Any] = [t for t in (model.kernels, model.graph_trace) if t is not None and len(t)]
    if len(tables) == 1:
        return [getattr(tables[0], c) for c in cols]
    return [np.concatenate([np.asarray(getattr(t, c), np.int64) for t in tables] or [np.empty(0, np.int64)])
            for c in cols]


def _runs(active: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """(first, last) bin index of each run of True values."""
    a = np.concatenate(([False], active, [False])).astype(np.int8)
    d = np.diff(a)
    return np.nonzero(d == 1)[0], np.nonzero(d == -1)[0] - 1


def _snap(u: iv.IntervalUnion, edges: np.ndarray, b0: int, b1: int) -> Tuple[int, int]:
    """Snap bins ``b0..b1`` to busy blocks, then extend/shrink each edge by at most one bin along chains of
    blocks separated by gaps ≤ ``H`` (the largest gap inside the stretch, at most half a bin)."""
    nb = edges.shape[0] - 1
    t0, t1 = int(edges[b0]), int(edges[b1 + 1])
    j0 = int(np.searchsorted(u.end, t0, side="right"))
    j1 = int(np.searchsorted(u.start, t1, side="left")) - 1
    if j0 >= len(u) or j1 < j0:
        return t0, t1
    if j1 == j0:
        return int(u.start[j0]), int(u.end[j1])
    gap_after = u.start[1:] - u.end[:-1]           # gap after block j (j < len(u) − 1)
    inner = gap_after[j0:j1]
    bin_ns = int(edges[1] - edges[0])
    h = min(float(inner.max()), bin_ns / 2.0)
    # start: chain back from the last block starting in the first bin, not past the previous bin
    lo = int(np.searchsorted(u.end, int(edges[max(b0 - 1, 0)]), side="right"))
    a = max(int(np.searchsorted(u.start, int(edges[b0 + 1]), side="left")) - 1, j0)
    lo = min(lo, a)
    big = np.nonzero(gap_after[lo:a] > h)[0]        # gap after block lo+i, i.e. before block lo+i+1
    c = lo + int(big[-1]) + 1 if big.size else lo
    # end: chain forward from the first block ending in the last bin, not past the next bin
    hi = int(np.searchsorted(u.start, int(edges[min(b1 + 2, nb)]), side="left")) - 1
    z = min(int(np.searchsorted(u.end, int(edges[b1]), side="right")), j1)
    hi = max(hi, z)
    big = np.nonzero(gap_after[z:hi] > h)[0]
    f = z + int(big[0]) if big.size else hi
    return int(u.start[c]), int(u.end[f])


def _change_point(f: np.ndarray) -> Tuple[int, float, float]:
    """Best split of ``f`` into two constant levels (least squares): (k, mean of f[:k], mean of f[k:]),
    1 ≤ k < len(f)."""
    n = f.shape[0]
    c1 = np.cumsum(f)
    c2 = np.cumsum(f * f)
    k = np.arange(1, n)
    left = c2[k - 1] - c1[k - 1] ** 2 / k
    right = (c2[-1] - c2[k - 1]) - (c1[-1] - c1[k - 1]) ** 2 / (n - k)
    j = int(np.argmin(left + right))
    kk = int(k[j])
    return kk, float(c1[kk - 1] / kk), float((c1[-1] - c1[kk - 1]) / (n - kk))


def _sparse_edges(frac: np.ndarray, busy: np.ndarray, b0: int, b1: int, total: int) -> Tuple[int, int]:
    """Bins ``b0..b1`` of the merged run without a sparse warm-up or tail that the hole tolerance merged into
    it (step 3b of the auto rule): a side is cut at the least-squares change point of the bins' busy
    fractions when its level is under ``SPARSE_EDGE_RATIO`` of the rest's and it holds at most
    ``TRIM_MAX_BUSY_SHARE`` of all busy ns; the lead first, then the tail of what is left."""
    for side in ("lead", "tail"):
        if b1 - b0 + 1 < 2 * MIN_EDGE_BINS:
            break
        f = frac[b0:b1 + 1]
        k, m1, m2 = _change_point(f)
        if side == "lead":
            part, rest, cut = (b0, b0 + k - 1), m2, m1
        else:
            part, rest, cut = (b0 + k, b1), m1, m2
        n_part = part[1] - part[0] + 1
        if n_part < MIN_EDGE_BINS or b1 - b0 + 1 - n_part < MIN_EDGE_BINS:
            continue
        if cut < SPARSE_EDGE_RATIO * rest and int(busy[part[0]:part[1] + 1].sum()) <= TRIM_MAX_BUSY_SHARE * total:
            b0, b1 = (b0 + k, b1) if side == "lead" else (b0, b0 + k - 1)
    return b0, b1


def _repeated(model: TraceModel, u: iv.IntervalUnion, side: Tuple[int, int], like: Tuple[int, int]) -> Optional[str]:
    """Rule (5c): the comparison for the reason when the stretch ``like`` (as long as ``side``, beyond the candidate)
    repeats ``side``'s work — ≥ :data:`SAME_WORK_SHARE` of ``side``'s kernel time (clipped) is of kernel names that
    also run in ``like``, and ``side`` is at least :data:`SPARSE_EDGE_RATIO` as busy as ``like`` —; else None."""
    k = model.kernels
    if k is None or side[1] <= side[0]:
        return None
    (a0, a1), (b0, b1) = side, like
    ovl = np.minimum(k.end, a1) - np.maximum(k.start, a0)
    own = np.where(ovl > 0, ovl, 0)
    there = np.unique(k.name_idx[(k.start < b1) & (k.end > b0)])
    total = int(own.sum())
    shared = int(own[np.isin(k.name_idx, there)].sum())
    busy_a, busy_b = (int(iv.overlap_length(u, np.array([x]), np.array([y]))[0]) for x, y in (side, like))
    if total <= 0 or shared < SAME_WORK_SHARE * total or busy_a < SPARSE_EDGE_RATIO * busy_b:
        return None
    return (f"repeats the same length on the other side of the densest stretch (GPU busy {pct(busy_b, b1 - b0, 2)}%):"
            f" {round(100.0 * shared / total, 1)}% of its kernel time is of kernel names running there, and it is not "
            "under half as busy")


def _auto(model: TraceModel, full0: int, full1: int) -> WindowResult:
    span = full1 - full0
    k = model.kernels
    nk = len(k) if k is not None else 0
    if nk < MIN_KERNELS or span < MIN_BIN_NS:
        return _result(full0, full1, full0, full1, "full",
                       "Full trace kept: too little GPU activity to detect a steady state "
                       f"({fmt_count(nk, 'kernel')}).")
    u = iv.union_blocks(*gpu_work(model, "start", "end"))   # all devices pooled
    nb = int(min(N_BINS, span // MIN_BIN_NS))
    edges = full0 + (np.arange(nb + 1, dtype=np.int64) * span) // nb
    cov = iv.covered_before(u, edges)
    busy = np.diff(cov)
    width = np.diff(edges)
    frac = busy / np.maximum(width, 1)
    total = int(busy.sum())
    if total <= 0:
        return _result(full0, full1, full0, full1, "full",
                       "Full trace kept: kernels have zero total duration.")
    order = np.argsort(frac, kind="stable")
    cum = np.cumsum(busy[order])
    ref = float(frac[order][int(np.searchsorted(cum, total / 2.0, side="left"))])
    thr = ACTIVE_FRACTION * ref
    active = (frac >= thr) & (busy > 0)
    first, last = _runs(active)
    hole = max(1, int(round(HOLE_BINS_FRACTION * nb)))
    # merge runs separated by short holes
    keep_break = (first[1:] - last[:-1] - 1) > hole
    grp_start = np.concatenate(([0], np.nonzero(keep_break)[0] + 1))
    g_first = first[grp_start]
    g_last = last[np.append(grp_start[1:] - 1, first.shape[0] - 1)]
    csum = np.concatenate(([0], np.cumsum(busy)))
    g_busy = csum[g_last + 1] - csum[g_first]
    best = int(np.argmax(g_busy))
    b0, b1 = _sparse_edges(frac, busy, int(g_first[best]), int(g_last[best]), total)
    cand0, cand1 = _snap(u, edges, b0, b1)
    lead, trail = cand0 - full0, full1 - cand1

    def busy_in(a: int, b: int) -> int:
        return int(iv.overlap_length(u, np.array([a]), np.array([b]))[0])

    def busy_pct(a: int, b: int) -> float:
        return pct(busy_in(a, b), b - a, 2)

    lead_share = busy_in(full0, cand0) / total
    tail_share = busy_in(cand1, full1) / total
    cand = max(cand1 - cand0, 1)
    trim_lead = lead > TRIM_MIN_SHARE * min(span, cand) and lead_share <= TRIM_MAX_BUSY_SHARE
    trim_tail = trail > TRIM_MIN_SHARE * min(span, cand) and tail_share <= TRIM_MAX_BUSY_SHARE
    # a side is warm-up or tail only when it is sparser than what it would leave: requests spread over the trace
    # (a server waiting for traffic) make the densest stretch one request, and the rest is no sparser than it
    dense: List[Tuple[str, float, str]] = []    # (side, its busy %, why it is kept)

    def kept(a: int, b: int, rest: Tuple[int, int], like: Tuple[int, int], other_long: bool) -> Optional[str]:
        """Why the side ``[a, b)`` is workload, not warm-up or tail (None: it is trimmed): it is not under half as
        busy as the ``rest`` it would leave; or (5c: a periodic job's sparse phases on both sides of its densest one)
        the other side is workload at least as long (``other_long``) whose stretch ``like`` next to the candidate
        runs the side's kernels as densely."""
        if busy_in(a, b) / (b - a) >= SPARSE_EDGE_RATIO * busy_in(*rest) / (rest[1] - rest[0]):
            return f"is not under half as busy as the rest ({busy_pct(*rest)}%)"
        return _repeated(model, u, (a, b), like) if other_long else None

    why = kept(full0, cand0, (cand0, cand1 if trim_tail else full1), (cand1, cand1 + lead),
               trail >= lead and tail_share > TRIM_MAX_BUSY_SHARE) if trim_lead else None
    if why is not None:
        trim_lead = False
        dense.append(("leading", busy_pct(full0, cand0), why))
    why = kept(cand1, full1, (cand0 if trim_lead else full0, cand1), (cand0 - trail, cand0),
               lead >= trail and lead_share > TRIM_MAX_BUSY_SHARE) if trim_tail else None
    if why is not None:
        trim_tail = False
        dense.append(("trailing", busy_pct(cand1, full1), why))
    s = cand0 if trim_lead else full0
    e = cand1 if trim_tail else full1
    details = WindowDetails(
        bins=nb, bin_ns=int(span // nb), reference_busy_pct=round(100.0 * ref, 2),
        active_threshold_pct=round(100.0 * thr, 2), active_bins=int(active.sum()),
        candidate_start_ns=cand0, candidate_end_ns=cand1,
        warmup_busy_pct=busy_pct(full0, cand0), steady_busy_pct=busy_pct(cand0, cand1),
        tail_busy_pct=busy_pct(cand1, full1),
        warmup_share_of_busy_pct=round(100.0 * lead_share, 2),
        tail_share_of_busy_pct=round(100.0 * tail_share, 2),
    )
    tuned = autotune_lead(model, s, e)
    if tuned is not None:
        details = replace(details, autotune_until_ns=tuned.until_ns, autotune_trial_pct=tuned.trial_pct)
        if tuned.left < MIN_KERNELS:
            return _result(full0, full1, full0, full1, "full", (
                f"Full trace kept: no steady state found: the densest stretch starts with an autotuning pass "
                f"({dur(tuned.until_ns - s)}, {fmt_count(tuned.kernels, 'kernel')}, {tuned.trial_pct}% of their "
                f"kernel time `autotune` trials: one-time work) and only {fmt_count(tuned.left, 'kernel')} "
                f"run{'s' if tuned.left == 1 else ''} after it (under {MIN_KERNELS})."), details)
    one_off = one_off_lead(model, tuned.until_ns if tuned is not None else s, e, MIN_KERNELS)
    if one_off is not None:
        details = replace(details, one_off_until_ns=one_off.until_ns, one_off_pct=one_off.one_off_pct)
    if not trim_lead and not trim_tail and tuned is None and one_off is None:
        big = [(n, sh) for n, ln, sh in (("leading", lead, lead_share), ("trailing", trail, tail_share))
               if ln > TRIM_MIN_SHARE * min(span, cand)]
        if dense:
            name, side_pct, rest = dense[0]
            reason = (f"Full trace kept: the {name} part (GPU busy {side_pct}%) {rest}, so it is treated as part of "
                      "the workload, not warm-up or tail.")
        elif big:
            name, sh = max(big, key=lambda x: x[1])
            reason = (f"Full trace kept: the sparser {name} part holds {round(100.0 * sh, 1)}% of all GPU "
                      f"busy time, so it is treated as part of the workload, not warm-up or tail.")
        else:
            reason = (f"Full trace kept: no warm-up or idle tail above {int(TRIM_MIN_SHARE * 100)}% of the "
                      f"trace was detected (GPU busy {details.steady_busy_pct}% in the densest stretch).")
        return _result(full0, full1, full0, full1, "full", reason, details)
    parts = []

    def what(a: int, b: int) -> str:
        """"; start-up: …" when module load / unload calls fill the trimmed side (:func:`module_calls`)."""
        words = module_calls(model, a, b)
        return f"; {words}" if words else ""

    if trim_lead:     # a process already running when the recording began (:func:`.session.started_mid_run`): no
        attached = started_mid_run(model).shape[0] > 0     # warm-up shown, a lead-in before its work
        parts.append(f"{dur(lead)} of {'lead-in' if attached else 'warm-up'} (GPU busy {details.warmup_busy_pct}%"
                     f"{'; the capture began while the program ran' if attached else ''}{what(full0, cand0)})")
    if tuned is not None:
        parts.append(f"{'the' if trim_lead else 'a leading'} {dur(tuned.until_ns - s)} autotuning pass"
                     f"{' after it' if trim_lead else ''} ({fmt_count(tuned.kernels, 'kernel')}, {tuned.trial_pct}% "
                     "of their kernel time `autotune` trials: one-time work)")
        s = tuned.until_ns
    if one_off is not None:
        parts.append(f"{'a' if parts else 'a leading'} {dur(one_off.until_ns - s)} pass of one-time work"
                     f"{' after it' if parts else ''} ({fmt_count(one_off.kernels, 'kernel')}, {one_off.one_off_pct}% "
                     "of their kernel time of kernel names that never run again in the window: one-time work)")
        s = one_off.until_ns
    if trim_tail:
        parts.append(f"{dur(trail)} of tail (GPU busy {details.tail_busy_pct}%{what(cand1, full1)})")
    reason = (f"Auto-detected window: trimmed {' and '.join(parts)}; the kept window is GPU busy "
              f"{busy_pct(s, e)}% (active bins ≥ {details.active_threshold_pct}% busy).")
    return _result(full0, full1, s, e, "auto", reason, details)


def _capture_range(model: TraceModel, full0: int, full1: int, gaps: List[Tuple[int, int]]) -> WindowResult:
    """The window of a capture with spans the profiler did not record (:func:`not_recorded`): the capture range (the
    recorded stretch between them) holding the most pooled busy ns (ties: the earliest), trimmed inside by the
    auto rule; no window spans a time nothing was recorded in: what the GPU did then is unknown."""
    edges = [full0] + [x for g in gaps for x in g] + [full1]
    r0, r1 = np.array(edges[0::2], np.int64), np.array(edges[1::2], np.int64)
    busy = iv.overlap_length(iv.union_blocks(*gpu_work(model, "start", "end")), r0, r1)
    i = int(np.argmax(busy))
    inner = _auto(model, int(r0[i]), int(r1[i]))
    lost = sum(y - x for x, y in gaps)
    words = (f"Auto-detected window: capture range {i + 1} of {len(r0)} (the one holding the most GPU busy time, "
             f"{pct(int(busy[i]), max(int(busy.sum()), 1), 1)}%); the profiler recorded nothing for {dur(lost)} "
             "between the ranges, after the program stopped it (`cudaProfilerStop`): what the GPU did then is "
             "unknown, so the window spans no part of it; in the range, ")
    body = (inner.reason.replace("Full trace kept: ", "nothing trimmed: ").replace("Auto-detected window: ", "")
            .replace(" of the trace ", " of the range "))
    details = replace(inner.details, capture_ranges=len(r0), not_recorded_ns=lost)
    return _result(full0, full1, inner.start_ns, inner.end_ns, "auto", words + body, details)


def _nvtx_window(model: TraceModel, name: str, full0: int, full1: int) -> WindowResult:
    n = model.nvtx
    if n is None or len(n) == 0:
        raise OptionError("window_nvtx", f"{name!r}: the trace has no NVTX ranges")
    m = np.isin(n.name_idx, [i for i, s in enumerate(n.names) if s == name])
    if not m.any():
        raise OptionError("window_nvtx", f"{name!r}: no NVTX range has exactly this name")
    s, e = int(n.start[m].min()), int(n.end[m].max())
    count = int(m.sum())
    reason = f"Window set to the span of the {count} NVTX range(s) named {code_name(name)} ({dur(e - s)})."
    return _result(full0, full1, s, e, "nvtx", reason, WindowDetails(nvtx_name=name, nvtx_ranges=count))


def detect_window(model: TraceModel, override: Optional[Window] = None,
                  nvtx_range: Optional[str] = None) -> WindowResult:
    """Choose the analysis window: explicit override (a ``(start, end)`` pair checked by
    :func:`config.window.check_window`, end > start), an NVTX range's span, or auto-detection."""
    t0, t1 = model.trace_start, model.trace_end
    full0 = int(t0) if t0 is not None else 0
    full1 = int(t1) if t1 is not None else full0
    if override is not None:
        a, b = int(override[0]), int(override[1])
        s, e = max(a, full0), min(b, full1)
        if e <= s:
            raise OptionError("window", f"{a}:{b} does not overlap the trace ({full0}:{full1})")
        clipped = " (clipped to the trace span)" if (s, e) != (a, b) else ""
        return _result(full0, full1, s, e, "override", f"Window set by --window {a}:{b}{clipped}.")
    if nvtx_range is not None:
        return _nvtx_window(model, nvtx_range, full0, full1)
    if t0 is None:
        return _result(full0, full1, full0, full1, "full",
                       "Full trace kept: the trace has no timed activity.")
    gaps = not_recorded(model, full0, full1, TRIM_MIN_SHARE)
    return _capture_range(model, full0, full1, gaps) if gaps else _auto(model, full0, full1)
