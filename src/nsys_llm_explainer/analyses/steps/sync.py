"""Per-step synchronization, per launching thread and device: the thread blocks until the GPU has drained its work,
then works on the host while the GPU idles, then launches the next step. Its sync points, the exposed host time
after each, the part of it that could overlap the next step, and whether the pattern holds. Definitions:
docs/FINDINGS.md, "Per-step synchronization". What the host does around the syncs (the per-model pass over the API
calls, host sampling, event timing): host_evidence.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Dict, Literal, Optional, Sequence, Tuple

import numpy as np

from ...jsonable import NONE_OMITTED, FieldsJson, Outcome, json_name
from ...model.intervals import overlap_length
from ...model.timeline import DeviceTimeline, few_distinct, rows_by_value
from ...vocabulary.cause_kinds import KIND_CODE, KINDS
from ...vocabulary.code_spans import code_name
from ...vocabulary.units import fmt_dur as dur
from ..common.stats import pct, percentile
from ..idle.result import DeviceCauses, IdleCausesResult, IdlePieces
from .host_evidence import HostSampling, StepSyncContext, host_sampling, timed_steps
from .periods import PAUSE  # the idle-pause rule of the step periods: host time after a sync over PAUSE median periods

MIN_SYNC_POINTS = 5          # fewer sync points are no per-step pattern
MIN_KERNEL_SHARE = 0.5       # the steps hold at least half of the device's kernels in the window
MAX_PERIOD_SPREAD = 3.0      # period p90 ≤ 3 × p50, or host time after the sync p90 ≤ 3 × p50: the steps recur
LEVEL_TOL, LEVELS_SHARE = 0.25, 0.8   # … the latter with 80 % of the periods within 25 % of p50 or of p90
WAIT_TOL_NS = 20_000         # a call returning up to 20 µs before its work's recorded end still drained it
THRESHOLDS = {"min_sync_points": MIN_SYNC_POINTS, "min_kernel_share": MIN_KERNEL_SHARE,
              "max_period_spread": MAX_PERIOD_SPREAD, "wait_tol_ns": WAIT_TOL_NS}
_NEVER = np.iinfo(np.int64).min
_CAUSE = ("kind", "detail", "ns")


@dataclass(frozen=True)
class StepSyncSeries(FieldsJson):
    """The per-step sync pattern of one launching thread on one device (module docstring)."""

    device_id: int
    gtid: int                       # serialized globalTid of the launching thread
    pid: int
    tid: int
    thread_name: str                # its label (model/names.thread_labels: ``name (tid N)`` where names collide)
    holds: bool
    reason: str                     # why the pattern holds or not
    api: str                        # most frequent base name among the sync points
    api_counts: Tuple[Tuple[str, int], ...] = field(metadata=json_name(rows=("api", "count")))
    blocking_calls: int             # blocking calls of the thread in the window
    sync_points: int                # blocking calls that drained the thread's work (any API)
    step_sync_points: int           # sync points of ``api``: the step boundaries
    readback_points: int            # sync points preceded by a device-to-host copy call
    steps: int                      # step_sync_points − 1
    kernels_in_steps: int           # kernels of the device starting between the first and last sync point
    own_kernels_in_steps: int       # of those, launched by this thread (another process sharing the GPU: fewer)
    device_kernels: int             # kernels of the device in the window
    kernel_share: float             # kernels_in_steps / device_kernels
    kernels_per_step_p50: float
    #: the per-step medians and p90s below are over the steps kept (no idle pause): None when none is (no step, or
    #: every step left out as an idle pause), shown "–", not a 0 that reads as measured
    period_p50_ns: Optional[float]
    period_p90_ns: Optional[float]
    exposed_ns: int                 # Σ X_i
    exposed_p50_ns: Optional[float]           # per step
    exposed_p90_ns: Optional[float]
    wait_p50_ns: Optional[float]              # per step
    wait_p90_ns: Optional[float]
    overlap_ns: int                 # Σ R_i
    gpu_busy_p50_ns: Optional[float]          # per step
    gpu_busy_p90_ns: Optional[float]
    window_ns: int
    idle_ns: int
    exposed_pct_of_window: float
    exposed_pct_of_idle: float
    overlap_pct_of_window: float
    overlap_pct_of_idle: float
    # (kind, detail, ns) of Σ X_i, of Σ R_i, largest first
    exposed_by_cause: Tuple[Tuple[str, str, int], ...] = field(default=(), metadata=json_name(rows=_CAUSE))
    claimed: Tuple[Tuple[str, str, int], ...] = field(default=(), metadata=json_name(rows=_CAUSE))
    first_ns: int = 0               # return of the first sync point
    last_ns: int = 0                # return of the last sync point
    # the copy pattern of sampling on the host, when it is on SAMPLING_STEP_SHARE of the steps (None otherwise)
    host_sampling: Optional[HostSampling] = field(default=None, metadata=NONE_OMITTED)
    # steps (of ``steps``) in which the thread reads a CUDA event pair's elapsed time after the sync: recorded only
    # on a holding series where that is at least EVENT_TIMED_SHARE of its steps (a timing harness or per-step timer)
    timed_steps: Optional[int] = field(default=None, metadata=NONE_OMITTED)
    JSON_DERIVED: ClassVar[Tuple[str, ...]] = ("readback",)

    @property
    def readback(self) -> bool:
        """Most sync points read results back (a device-to-host copy just before the wait)."""
        return self.sync_points > 0 and 2 * self.readback_points >= self.sync_points


@dataclass(frozen=True)
class StepSyncResult(Outcome):
    series: Tuple[StepSyncSeries, ...] = ()     # holding series first, then by overlappable ns
    thresholds: Dict[str, float] = field(default_factory=lambda: dict(THRESHOLDS))

    def holding(self) -> Tuple[StepSyncSeries, ...]:
        return tuple(s for s in self.series if s.holds)

    def claimed(self) -> Dict[int, Dict[Tuple[str, str], int]]:
        """Per device: the idle ns per (kind, detail) that the holding series explain (``claimed``); a
        step-sync finding claims them and the idle findings subtract them, so that each ns is claimed once."""
        out: Dict[int, Dict[Tuple[str, str], int]] = {}
        for s in self.holding():
            dev = out.setdefault(s.device_id, {})
            for k, det, ns in s.claimed:
                dev[(k, det)] = dev.get((k, det), 0) + ns
        return out


#: (kind, detail, ns) per host-side cause, largest first
CauseSplit = Tuple[Tuple[str, str, int], ...]


def _by_cause(pc: IdlePieces, ns: np.ndarray, code: np.ndarray) -> CauseSplit:
    """(kind, detail, Σ ns) per piece cause code, largest first."""
    hit = ns > 0
    if not hit.any():
        return ()
    uc, inv = np.unique(code[hit], return_inverse=True)
    sums = np.bincount(inv, weights=ns[hit].astype(np.float64)).round().astype(np.int64)
    D = max(len(pc.details), 1)
    rows = [(KINDS[int(c) // D], pc.details[int(c) % D], int(v)) for c, v in zip(uc.tolist(), sums.tolist())]
    return tuple(sorted(rows, key=lambda r: (-r[2], r[0], r[1])))


def _per_step(ed: np.ndarray, e: np.ndarray, v: np.ndarray, side: Literal["left", "right"]) -> np.ndarray:
    """Σ ``v`` of the sync points (returns ``e``, sorted) per step ``j = 1 … m−1`` between step boundaries
    ``ed``: those with ``e`` in ``[ed_{j−1}, ed_j)`` (``side="right"``) or ``(ed_{j−1}, ed_j]`` (``"left"``)."""
    m = ed.shape[0]
    if m < 2:
        return np.empty(0, np.int64)
    step = np.searchsorted(ed, e, side=side) - (1 if side == "right" else 0)
    ok = (step >= 0) & (step < m - 1) if side == "right" else (step >= 1) & (step <= m - 1)
    idx = step[ok] - (0 if side == "right" else 1)
    return np.bincount(idx, weights=v[ok], minlength=m - 1).round().astype(np.int64)


def _exposure(dc: DeviceCauses, g: int, e: np.ndarray, b: np.ndarray, budget: np.ndarray
              ) -> Tuple[np.ndarray, np.ndarray, CauseSplit, CauseSplit]:
    """Per window ``[e_i, b_i)``: the exposed ns of thread ``g``'s host-side pieces, the overlappable ns
    (the first ``budget_i`` ns of them in time order), and both split by (kind, detail)."""
    n = e.shape[0]
    pc = dc.pieces
    zero = np.zeros(n, np.int64)
    if pc is None or len(pc) == 0 or n == 0:
        return zero, zero, (), ()
    m = pc.gtid == g
    ps, pe = pc.start[m], pc.end[m]
    code = pc.kind[m].astype(np.int64) * max(len(pc.details), 1) + pc.detail[m]
    w = np.searchsorted(e, ps, side="right") - 1       # window starting at or before the piece (pieces of g
    wi = np.maximum(w, 0)                              # are cut at g's call boundaries: none straddles e_i)
    ov = np.where(w >= 0, np.clip(np.minimum(pe, b[wi]) - np.maximum(ps, e[wi]), 0, None), 0)
    exposed = np.bincount(wi, weights=ov, minlength=n).round().astype(np.int64)
    # overlappable part: the first budget_i ns of each window's pieces (pieces are in time order)
    before = np.cumsum(ov) - ov                        # exposed ns of earlier pieces (all windows)
    first = np.append(before, int(ov.sum()))[np.searchsorted(wi, np.arange(n), side="left")]   # wi non-decreasing
    within = before - first[wi]
    take = np.where(w >= 0, np.clip(budget[wi] - within, 0, ov), 0)
    over = np.bincount(wi, weights=take, minlength=n).round().astype(np.int64)
    return exposed, over, _by_cause(pc, ov, code), _by_cause(pc, take, code)


def _waiting_ns(dc: DeviceCauses, g: int, e: np.ndarray, b: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """Per window ``[e_i, b_i)``: the ns of the device's idle charged to thread ``g`` (its pieces), and of those the
    ns of its ``osrt`` pieces (inside an OS call that waits)."""
    pc = dc.pieces
    if pc is None or len(pc) == 0 or e.shape[0] == 0:
        return np.zeros(e.shape[0], np.int64), np.zeros(e.shape[0], np.int64)
    m = pc.gtid == g
    ps, pe, osrt = pc.start[m], pc.end[m], pc.kind[m] == KIND_CODE["osrt"]
    w = np.searchsorted(e, ps, side="right") - 1
    wi = np.maximum(w, 0)
    ov = np.where(w >= 0, np.clip(np.minimum(pe, b[wi]) - np.maximum(ps, e[wi]), 0, None), 0)
    idle = np.bincount(wi, weights=ov, minlength=e.shape[0]).round().astype(np.int64)
    wait = np.bincount(wi, weights=np.where(osrt, ov, 0), minlength=e.shape[0]).round().astype(np.int64)
    return idle, wait


def _series(ctx: StepSyncContext, tl: DeviceTimeline, dc: DeviceCauses, g: int, work: np.ndarray
            ) -> Optional[StepSyncSeries]:
    api = ctx.api
    act = tl.act
    # work of g on this device, in launch-call order
    li = act.launch_idx[work]
    la = api.start[li]
    order = np.argsort(la, kind="stable")
    work, la = work[order], la[order]
    ws, we = act.start[work], act.end[work]
    reach = np.maximum.accumulate(we)                   # latest end of g's work launched so far
    rows = ctx.blocking_rows[g]
    s, e = api.start[rows], api.end[rows]
    j = np.searchsorted(la, s, side="left") - 1         # last work launched before the call starts
    last = np.where(j >= 0, reach[np.maximum(j, 0)], _NEVER)
    waited = (j >= 0) & (last > s) & (last <= e + WAIT_TOL_NS)
    sp, s, e, last = rows[waited], s[waited], e[waited], last[waited]
    n = int(sp.shape[0])
    if n == 0:
        return None
    wait = np.clip(np.minimum(last, e) - s, 0, None)
    # exposed window after each sync point: [e_i, min(first work launched at/after e_i, s_{i+1}))
    nxt = np.searchsorted(la, e, side="left")
    first_start = np.minimum.accumulate(ws[::-1])[::-1]     # earliest start among work launched from here on
    k_next = np.where(nxt < ws.shape[0], first_start[np.minimum(nxt, ws.shape[0] - 1)], e)
    b = np.maximum(np.minimum(k_next, np.append(s[1:], np.iinfo(np.int64).max)), e)
    budget = np.append(wait[1:], 0)                     # R_i = min(X_i, W_{i+1}); 0 for the last one
    names = ctx.name_base[ctx.api.name_idx[sp]]
    uniq, cnt = np.unique(names, return_counts=True)
    top = np.lexsort((uniq, -cnt))
    # steps: between consecutive sync points of the most frequent API
    ed = e[names == uniq[top[0]]]
    m = int(ed.shape[0])
    period = np.diff(ed)
    # an idle pause (docs/FINDINGS.md): the host time after a sync point exceeds PAUSE × the median period, or most of
    # the GPU idle charged to the thread in it is in an OS call that waits; no host work of a step: left out of X, R
    # and the per-step numbers
    paused = (b - e) > PAUSE * percentile(period, 50) if m > 1 else np.zeros(n, bool)
    idle_g, wait_g = _waiting_ns(dc, g, e, b)
    paused |= 2 * wait_g > idle_g
    exposed, over, by_cause, claimed = _exposure(dc, g, e, np.where(paused, e, b), budget)   # paused: empty window
    # readback: a D→H copy call of g after its last launch before the sync, before the sync (or the sync is one)
    cs = api.start[ctx.d2h_rows.get(g, np.empty(0, np.int64))]
    lastl = la[np.maximum(j[waited], 0)]
    at = np.searchsorted(cs, lastl, side="left")
    rb = (cs[np.minimum(at, cs.shape[0] - 1)] < s) & (at < cs.shape[0]) if cs.shape[0] else np.zeros(n, bool)
    rb |= ctx.d2h_call[sp]
    api_counts = tuple((ctx.base_names[int(uniq[i])], int(cnt[i])) for i in top.tolist())
    gpu_step = overlap_length(tl.busy, ed[:-1], ed[1:]) if m > 1 else np.empty(0, np.int64)
    kin = np.diff(np.searchsorted(act.start, ed, side="left"))
    in_steps = int(kin.sum())
    own_in_steps = int(((ws >= ed[0]) & (ws < ed[-1])).sum()) if m > 1 else 0
    dev_k = len(act.start)
    share = in_steps / dev_k if dev_k else 0.0
    step_x = _per_step(ed, e, exposed, "right")         # X of the sync points in [ed_{j-1}, ed_j)
    step_w = _per_step(ed, e, wait, "left")             # W of the sync points in (ed_{j-1}, ed_j]
    keep = _per_step(ed, e, paused.astype(np.int64), "right") == 0   # steps without an idle pause
    n_paused = int((~keep).sum())
    period, gpu_step, step_x, step_w = period[keep], gpu_step[keep], step_x[keep], step_w[keep]
    p50, p90 = percentile(period, 50), percentile(period, 90)
    x50, x90 = percentile(step_x, 50), percentile(step_x, 90)
    # the steps recur: a regular period, or (the GPU work differing per step: prefill and decode) a regular host
    # time after the sync — what the finding claims, on every step — with periods of two kinds (LEVELS_SHARE of
    # them within LEVEL_TOL of p50 or of p90: decode and prefill steps, not one-off trials of every length)
    levels = float(np.mean((np.abs(period - p50) <= LEVEL_TOL * p50) | (np.abs(period - p90) <= LEVEL_TOL * p90))) \
        if period.shape[0] else 0.0
    host_regular = x50 > 0 and x90 <= MAX_PERIOD_SPREAD * x50 and levels >= LEVELS_SHARE
    if m < MIN_SYNC_POINTS:
        holds, why = False, (f"{m} sync point{'s' if m != 1 else ''} of {code_name(api_counts[0][0])} "
                              f"(< {MIN_SYNC_POINTS})")
    elif m > 1 and period.shape[0] == 0:
        holds, why = False, "every step starts after an idle pause: no host work of a step to overlap"
    elif share < MIN_KERNEL_SHARE:
        holds, why = False, (f"the steps between its sync points hold {100 * share:.0f} % of the device's kernels in "
                             f"the window (< {100 * MIN_KERNEL_SHARE:.0f} %)")
    elif p90 > MAX_PERIOD_SPREAD * p50 and not host_regular:
        x_ok = x50 > 0 and x90 <= MAX_PERIOD_SPREAD * x50
        holds, why = False, (f"irregular period: p90 {dur(p90)} > {MAX_PERIOD_SPREAD:g} × p50 {dur(p50)}, and "
                             + (f"the host time after the sync is regular (p90/p50 {x90 / x50:.2f}) but only "
                                f"{100 * levels:.0f} % of the periods lie within {100 * LEVEL_TOL:.0f} % of p50 or "
                                "p90: not two kinds of step" if x_ok else
                                f"irregular host time after the sync: p90 {dur(x90)} "
                                + (f"> {MAX_PERIOD_SPREAD:g} × p50 {dur(x50)}" if x50 > 0 else "with p50 0")))
    else:
        holds, why = True, (f"{m} sync points of {code_name(api_counts[0][0])}; the steps between them hold "
                            f"{100 * share:.0f} % of the device's kernels in the window; period p90/p50 = "
                            f"{p90 / p50 if p50 else 0.0:.2f}")
        if p90 > MAX_PERIOD_SPREAD * p50:        # the GPU work differs per step (prefill / decode): the host's does not
            why += f"; host time after the sync p90/p50 = {x90 / x50:.2f}"
    if n_paused:
        why += f"; {n_paused} step{'s' if n_paused != 1 else ''} with an idle pause (host time after the sync over " \
               f"{PAUSE} × the median period, or mostly in an OS call that waits) left out"
    tot, ovl = int(exposed.sum()), int(over.sum())

    def kept(v: float) -> Optional[float]:   # a per-step statistic: none without a kept step
        return v if period.shape[0] else None
    is_step = names == uniq[top[0]]
    is_step[np.flatnonzero(is_step)[-1:]] = False      # the last step boundary has no next step
    hs = host_sampling(ctx, int(g), lastl, e, b, is_step) if holds else None
    timed = timed_steps(ctx, int(g), ed) if holds else None
    return StepSyncSeries(
        device_id=tl.device_id, gtid=int(g), pid=(int(g) >> 24) & 0xFFFFFF, tid=int(g) & 0xFFFFFF,
        thread_name=ctx.model.thread_label(int(g)), holds=holds, reason=why,
        api=api_counts[0][0], api_counts=api_counts, blocking_calls=int(rows.shape[0]), sync_points=n,
        step_sync_points=m, readback_points=int(rb.sum()), steps=max(m - 1, 0), kernels_in_steps=in_steps,
        own_kernels_in_steps=own_in_steps,
        device_kernels=dev_k, kernel_share=share, kernels_per_step_p50=percentile(kin, 50), period_p50_ns=kept(p50),
        period_p90_ns=kept(p90), exposed_ns=tot, exposed_p50_ns=kept(x50), exposed_p90_ns=kept(x90),
        wait_p50_ns=kept(percentile(step_w, 50)), wait_p90_ns=kept(percentile(step_w, 90)), overlap_ns=ovl,
        gpu_busy_p50_ns=kept(percentile(gpu_step, 50)), gpu_busy_p90_ns=kept(percentile(gpu_step, 90)),
        window_ns=dc.window_ns,
        idle_ns=dc.idle_ns, exposed_pct_of_window=pct(tot, dc.window_ns), exposed_pct_of_idle=pct(tot, dc.idle_ns),
        overlap_pct_of_window=pct(ovl, dc.window_ns), overlap_pct_of_idle=pct(ovl, dc.idle_ns),
        exposed_by_cause=by_cause, claimed=claimed, first_ns=int(e[0]), last_ns=int(e[-1]), host_sampling=hs,
        timed_steps=timed)


def device_step_sync(step_sync_context: StepSyncContext, timeline: DeviceTimeline, device_causes: DeviceCauses
                     ) -> Tuple[StepSyncSeries, ...]:
    """The series of one device (its timeline and idle causes, in its turn of the device pass)."""
    ctx, tl, dc = step_sync_context, timeline, device_causes
    if not ctx.ok or not ctx.blocking_rows:
        return ()
    api = ctx.api
    li = tl.act.launch_idx
    linked = np.nonzero(li >= 0)[0]
    if linked.shape[0] == 0:
        return ()
    thread = api.gtid[li[linked]]
    threads = [g for g in few_distinct(thread).tolist() if g in ctx.blocking_rows]   # few: no full sort
    rows = {g: linked for g in threads} if len(threads) == 1 and bool((thread == threads[0]).all()) else \
        {g: linked[r] for g, r in rows_by_value(thread) if g in ctx.blocking_rows}   # (one sort when many)
    del thread, linked
    out = []
    for g in threads:
        s = _series(ctx, tl, dc, int(g), rows.pop(g))
        if s is not None:
            out.append(s)
    return tuple(out)


def step_sync_result(step_sync_context: StepSyncContext, idle_causes: IdleCausesResult,
                     step_sync_series: Sequence[Sequence[StepSyncSeries]]) -> StepSyncResult:
    """The result from the series of every device (``step_sync_series``: per device, its series)."""
    series = [s for device in step_sync_series for s in device]
    if not idle_causes.available:
        return StepSyncResult(False, idle_causes.reason or "no idle causes")
    if not step_sync_context.ok:
        return StepSyncResult(False, "no CUDA API calls in the trace: sync calls cannot be matched to launches")
    if not series:
        return StepSyncResult(True, "no blocking call waited for the launching thread's GPU work")
    out = sorted(series, key=lambda s: (not s.holds, -s.overlap_ns, -s.exposed_ns, s.device_id, s.gtid))
    return StepSyncResult(True, None, tuple(out))


__all__ = ["StepSyncResult", "StepSyncSeries", "device_step_sync", "step_sync_result"]

