"""GPU time accounting: every ns of each device's window is busy or idle, and every idle ns is charged to
what the host was doing on that device's launching thread(s).

Definitions (integer ns):

* ``window_ns`` — per device, first start → last end of its busy intervals (kernels; with
  ``include_memcpy`` also memcpy/memset), as in :func:`idle.device_activity`.
* ``busy_ns`` — length of the union of those intervals; ``idle_ns = window_ns − busy_ns`` (always).
* *Launching threads* of a device — the threads (globalTid) of the CUDA API calls linked through
  ``launch_idx`` to any kernel, memcpy, memset or graph-trace row on that device.
* ``idle_parts[state]`` — idle ns during which the highest-priority state of the launching threads was
  ``state``, in priority order: ``sync`` (inside a host-blocking sync call or synchronous memcpy/memset:
  :mod:`api_classes` class ``sync``), ``launch`` (inside a launch call), ``alloc`` (inside an alloc or
  free call), ``other_api`` (inside any other CUDA runtime/driver call, non-blocking queries included),
  ``no_cuda_call`` (no launching thread was inside a CUDA call). Only runtime/driver rows (``primary``)
  count. ``unknown`` — idle of a device with no linked launching thread (host state not knowable).
  Every idle ns is counted exactly once: the parts sum to ``idle_ns``.
* ``idle_parts_pct[state]`` — ``idle_parts[state] / idle_ns × 100``.
* ``idle_queued_ns`` — idle during which the next GPU activity was already launched (its launch call had
  returned): GPU-side latency or a stream dependency, not the host's doing. ``idle_host_caused_parts``
  splits the rest (idle before the next activity's launch call returned) by host state as above, so
  Σ host-caused parts + queued = idle. Findings use the host-caused parts.
* ``gap_count`` — gaps between busy blocks; ``short_gap_count`` — gaps shorter than 100 µs;
  ``idle_in_short_gaps_ns`` — their total; ``idle_in_short_gaps_pct`` — that total / ``idle_ns`` × 100;
  ``idle_parts_short_gaps[state]`` — the part of ``idle_parts[state]`` that lies in gaps shorter than 100 µs.
* ``launch_stats.launch_call`` — duration statistics (:func:`stats.summary`) of all runtime/driver launch
  calls (class ``launch``).
* ``launch_stats.launch_to_start`` — for each launch call linked to at least one kernel: start of the
  earliest kernel it produced − start of the call (one value per call, so a graph launch counts once);
  overall and per device (the device of that earliest kernel).
* ``totals`` — sums over devices of window/busy/idle and of each idle part; percentages of the summed idle.

Computation is vectorized: per-state unions of API intervals are built once per device (cumulative in
priority order), and the idle gaps are intersected with them through :func:`intervals.overlap_length`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional

import numpy as np

from ..model.trace import TraceModel
from . import intervals as iv
from .api_classes import api_class
from .idle import device_activity
from .stats import pct, summary

STATES = ("sync", "launch", "alloc", "other_api", "no_cuda_call")
PART_KEYS = STATES + ("unknown",)
SHORT_GAP_NS = 100_000
_CLASS_TO_STATE = {"sync": 0, "launch": 1, "alloc": 2, "free": 2, "nonblocking_sync": 3, "other": 3}


@dataclass
class AccountingResult:
    available: bool
    reason: Optional[str]
    include_memcpy: bool
    devices: List[Dict] = field(default_factory=list)
    totals: Dict = field(default_factory=dict)
    launch_stats: Dict = field(default_factory=dict)
    notes: List[str] = field(default_factory=list)


@dataclass
class HostStateUnions:
    """Cumulative unions of the given threads' CUDA API intervals: ``cumulative[k]`` covers states 0..k."""

    cumulative: List[iv.Union]


def lean_union(start: np.ndarray, end: np.ndarray) -> iv.Union:
    """Union of intervals sorted by ``start`` — same blocks as :func:`intervals.union`, without the
    first/last-row bookkeeping (empty arrays there), so it needs no sort: O(n)."""
    n = start.shape[0]
    e0 = np.empty(0, np.int64)
    if n == 0:
        return iv.Union(e0, e0, e0, e0)
    s = np.asarray(start, dtype=np.int64)
    cm = np.maximum.accumulate(np.maximum(np.asarray(end, dtype=np.int64), s))
    new = np.empty(n, bool)
    new[0] = True
    np.greater(s[1:], cm[:-1], out=new[1:])
    first = np.nonzero(new)[0]
    last = np.append(first[1:] - 1, n - 1)
    return iv.Union(s[first], cm[last], e0, e0)


def _state_codes(model: TraceModel) -> np.ndarray:
    """State code (0 sync, 1 launch, 2 alloc/free, 3 other) per API row; -1 for non-primary rows."""
    api = model.api
    if api is None or len(api) == 0:
        return np.empty(0, np.int64)
    per_name = np.array([_CLASS_TO_STATE[api_class(n)] for n in api.names] + [3], dtype=np.int64)
    codes = per_name[api.name_idx]
    return np.where(api.primary, codes, -1)


def host_state_unions(model: TraceModel, gtids: np.ndarray,
                      codes: Optional[np.ndarray] = None) -> HostStateUnions:
    """Build the cumulative per-state unions of the API calls made by threads ``gtids``."""
    api = model.api
    empty = iv.union(np.empty(0, np.int64), np.empty(0, np.int64))
    if api is None or len(api) == 0 or np.asarray(gtids).shape[0] == 0:
        return HostStateUnions([empty] * 4)
    if codes is None:
        codes = _state_codes(model)
    mine = np.isin(api.gtid, np.asarray(gtids, dtype=np.int64)) & (codes >= 0)
    rows = np.nonzero(mine)[0]
    st, en, cd = api.start[rows], api.end[rows], codes[rows]
    out = []
    for k in range(4):
        m = cd <= k
        out.append(lean_union(st[m], en[m]))
    return HostStateUnions(out)


def state_parts(unions: HostStateUnions, gaps_start: np.ndarray,
                gaps_end: np.ndarray) -> Dict[str, np.ndarray]:
    """Per query interval, ns charged to each state (highest priority wins); they sum to its length."""
    a = np.asarray(gaps_start, dtype=np.int64)
    b = np.maximum(np.asarray(gaps_end, dtype=np.int64), a)
    prev = np.zeros(a.shape[0], np.int64)
    out: Dict[str, np.ndarray] = {}
    for k, state in enumerate(STATES[:4]):
        cov = iv.overlap_length(unions.cumulative[k], a, b).astype(np.int64)
        out[state] = cov - prev
        prev = cov
    out["no_cuda_call"] = (b - a) - prev
    return out


def state_parts_streaming(model: TraceModel, gtids: np.ndarray, codes: np.ndarray, gaps_start: np.ndarray,
                          gaps_end: np.ndarray, *more: np.ndarray) -> Dict[str, np.ndarray]:
    """Same result as ``state_parts(host_state_unions(...), ...)`` but builds one cumulative union at a
    time and drops it after use, so peak memory holds a single union (big traces). Extra ``(start, end)``
    array pairs in ``more`` are evaluated against the same unions; their results are returned under
    ``"_more"`` as a list of dicts."""
    api = model.api
    sets = [(gaps_start, gaps_end)] + [(more[i], more[i + 1]) for i in range(0, len(more), 2)]
    sets = [(np.asarray(a, dtype=np.int64), np.maximum(np.asarray(b, dtype=np.int64), np.asarray(a, np.int64)))
            for a, b in sets]
    outs: List[Dict[str, np.ndarray]] = [{} for _ in sets]
    prevs = [np.zeros(a.shape[0], np.int64) for a, _ in sets]
    if api is None or len(api) == 0 or np.asarray(gtids).shape[0] == 0:
        for o, (a, b) in zip(outs, sets):
            for state in STATES[:4]:
                o[state] = np.zeros(a.shape[0], np.int64)
            o["no_cuda_call"] = b - a
    else:
        mine = np.isin(api.gtid, np.asarray(gtids, dtype=np.int64)) & (codes >= 0)
        rows = np.nonzero(mine)[0]
        del mine
        cd = codes[rows]
        for k, state in enumerate(STATES[:4]):
            sel = rows[cd <= k]
            u = lean_union(api.start[sel], api.end[sel])
            del sel
            for j, (a, b) in enumerate(sets):
                cov = iv.overlap_length(u, a, b).astype(np.int64)
                outs[j][state] = cov - prevs[j]
                prevs[j] = cov
            del u
        for o, p, (a, b) in zip(outs, prevs, sets):
            o["no_cuda_call"] = (b - a) - p
    first = outs[0]
    if len(outs) > 1:
        first["_more"] = outs[1:]   # type: ignore[assignment]
    return first


def host_caused_end(model: TraceModel, act, gaps_start: np.ndarray, gaps_end: np.ndarray,
                    block_after: np.ndarray) -> np.ndarray:
    """End of the host-caused part of each gap: the end of the launch call of the activity that opens the
    block after the gap, clipped to the gap. Before it the GPU had nothing queued and waited for the host;
    after it the work was queued and the rest of the gap is GPU-side latency or a stream dependency
    (``queued``). Activity with no linked launch call counts as host-caused for the whole gap."""
    api = model.api
    ge = np.asarray(gaps_end, np.int64)
    if api is None or len(api) == 0 or act.launch_idx.shape[0] != act.start.shape[0] or ge.shape[0] == 0:
        return ge.copy()
    row = act.union.first_row[block_after]
    li = act.launch_idx[row]
    le = np.where(li >= 0, api.end[np.maximum(li, 0)], ge)
    return np.clip(le, np.asarray(gaps_start, np.int64), ge)


def host_state_during(model: TraceModel, gaps_start: np.ndarray, gaps_end: np.ndarray,
                      gtids: np.ndarray) -> Dict[str, np.ndarray]:
    """For each interval ``[gaps_start[i], gaps_end[i])``: ns during which threads ``gtids`` were in each
    state of :data:`STATES` (priority sync > launch > alloc > other_api > no_cuda_call). The five arrays
    sum to ``gaps_end − gaps_start`` element-wise."""
    return state_parts(host_state_unions(model, gtids), gaps_start, gaps_end)


def launching_threads(model: TraceModel) -> Dict[int, np.ndarray]:
    """Device → sorted distinct globalTids of the API calls that launched work on it."""
    api = model.api
    if api is None or len(api) == 0:
        return {}
    devs, rows = [], []
    k = model.kernels
    if k is not None and len(k) and k.launch_idx.shape[0] == len(k):
        devs.append(k.device)
        rows.append(k.launch_idx)
    for ops in (model.memcpy, model.memset, model.graph_trace):
        if ops is not None and len(ops) and "launch_idx" in ops.cols and "device" in ops.cols:
            devs.append(ops["device"])
            rows.append(ops["launch_idx"])
    if not devs:
        return {}
    d = np.concatenate(devs).astype(np.int64)
    r = np.concatenate(rows).astype(np.int64)
    ok = r >= 0
    d, r = d[ok], r[ok]
    out: Dict[int, np.ndarray] = {}
    if r.shape[0] == 0:
        return out
    # (device, thread) pairs through a bincount over dense codes: no sort of the per-row arrays
    threads = np.unique(api.gtid)                   # few distinct threads: hash unique, no inverse (fast)
    tinv = np.searchsorted(threads, api.gtid[r])
    dmin = int(d.min())
    nt = threads.shape[0]
    hit = np.bincount((d - dmin) * nt + tinv, minlength=(int(d.max()) - dmin + 1) * nt) > 0
    for dev_off in np.nonzero(hit.reshape(-1, nt).any(axis=1))[0].tolist():
        out[dmin + dev_off] = threads[hit.reshape(-1, nt)[dev_off]].astype(np.int64)
    return out


def _parts_pct(parts: Dict[str, int], idle: int) -> Dict[str, float]:
    return {s: pct(v, idle) for s, v in parts.items()}


def _launch_stats(model: TraceModel) -> Dict:
    api = model.api
    none = np.empty(0, np.int64)
    out: Dict = {"launch_call": summary(none), "launch_to_start": summary(none),
                 "launch_to_start_per_device": [], "linked_launch_calls": 0}
    if api is None or len(api) == 0:
        return out
    codes = _state_codes(model)
    lm = codes == 1
    out["launch_call"] = summary((api.end[lm] - api.start[lm]).astype(np.int64))
    k = model.kernels
    if k is None or len(k) == 0 or k.launch_idx.shape[0] != len(k):
        return out
    rows = np.nonzero(k.launch_idx >= 0)[0]
    if rows.size == 0:
        return out
    li = k.launch_idx[rows].astype(np.int64)
    # kernels are sorted by start, so the smallest kernel row per launch call is its earliest kernel
    earliest = np.full(len(api), np.iinfo(np.int64).max, np.int64)
    np.minimum.at(earliest, li, rows)
    lr = np.nonzero(earliest != np.iinfo(np.int64).max)[0]
    kr = earliest[lr]
    del earliest
    lat = (k.start[kr] - api.start[lr]).astype(np.int64)
    dev = k.device[kr].astype(np.int64)
    out["linked_launch_calls"] = int(kr.shape[0])
    out["launch_to_start"] = summary(lat)
    per = []
    for d in np.unique(dev).tolist():
        row = {"device_id": int(d)}
        row.update(summary(lat[dev == d]))
        per.append(row)
    out["launch_to_start_per_device"] = per
    return out


def analyze_accounting(model: TraceModel, include_memcpy: bool = False) -> AccountingResult:
    """Busy/idle per device with idle split by host state, plus launch-call and launch-latency stats."""
    acts = device_activity(model, include_memcpy)
    if not acts:
        return AccountingResult(False, "no GPU activity rows to build a timeline from (no kernels captured)",
                                include_memcpy, launch_stats=_launch_stats(model))
    res = AccountingResult(True, None, include_memcpy)
    threads = launching_threads(model)
    codes = _state_codes(model)
    tot = {"window_ns": 0, "busy_ns": 0, "idle_ns": 0, "gap_count": 0, "short_gap_count": 0,
           "idle_in_short_gaps_ns": 0}
    tot_parts = {s: 0 for s in PART_KEYS}
    tot_short = {s: 0 for s in PART_KEYS}
    for d in sorted(acts):
        u = acts[d].union
        w0, w1 = int(u.start[0]), int(u.end[-1])
        window = w1 - w0
        busy = u.length
        idle = window - busy
        gs, ge, _, ba = iv.gaps(u)
        gd = (ge - gs).astype(np.int64)
        gt = threads.get(d, np.empty(0, np.int64))
        parts = {s: 0 for s in PART_KEYS}
        parts_short = {s: 0 for s in PART_KEYS}
        host = {s: 0 for s in PART_KEYS}
        host_short = {s: 0 for s in PART_KEYS}
        short = gd < SHORT_GAP_NS
        hce = host_caused_end(model, acts[d], gs, ge, ba)
        queued = int((ge - hce).sum())
        if gt.shape[0]:
            per_gap = state_parts_streaming(model, gt, codes, gs, ge, gs, hce)
            per_host = per_gap.pop("_more")[0]
            for s in STATES:
                parts[s] = int(per_gap[s].sum())
                parts_short[s] = int(per_gap[s][short].sum())
                host[s] = int(per_host[s].sum())
                host_short[s] = int(per_host[s][short].sum())
            del per_gap, per_host
        else:
            parts["unknown"] = int(gd.sum())
            parts_short["unknown"] = int(gd[short].sum())
            host["unknown"] = int((hce - gs).sum())
            host_short["unknown"] = int((hce - gs)[short].sum())
        assert sum(host.values()) + queued == idle, (d, host, queued, idle)
        assert sum(parts.values()) == idle, (d, parts, idle)
        short_ns = int(gd[short].sum())
        tids = sorted({int(t) & 0xFFFFFF for t in gt.tolist()})
        res.devices.append({
            "device_id": d, "window_start_ns": w0, "window_end_ns": w1, "window_ns": window,
            "busy_ns": busy, "idle_ns": idle, "busy_pct": pct(busy, window),
            "idle_pct": pct(idle, window),
            "idle_parts": parts, "idle_parts_pct": _parts_pct(parts, idle),
            "idle_parts_short_gaps": parts_short,
            "idle_queued_ns": queued, "idle_host_caused_parts": host, "idle_host_caused_parts_short_gaps": host_short,
            "launching_thread_count": int(gt.shape[0]), "launching_tids": tids,
            "gap_count": int(gd.shape[0]), "short_gap_count": int(short.sum()),
            "idle_in_short_gaps_ns": short_ns, "idle_in_short_gaps_pct": pct(short_ns, idle),
        })
        for key, v in (("window_ns", window), ("busy_ns", busy), ("idle_ns", idle),
                       ("gap_count", gd.shape[0]), ("short_gap_count", int(short.sum())),
                       ("idle_in_short_gaps_ns", short_ns)):
            tot[key] += int(v)
        for s in PART_KEYS:
            tot_parts[s] += parts[s]
            tot_short[s] += parts_short[s]
        if not gt.shape[0] and idle:
            res.notes.append(f"Device {d}: no kernel/memcpy is linked to a CUDA API call, so the host state "
                             f"during its idle time is unknown.")
    del codes
    assert sum(tot_parts.values()) == tot["idle_ns"]
    res.totals = dict(tot)
    res.totals["busy_pct"] = pct(tot["busy_ns"], tot["window_ns"])
    res.totals["idle_pct"] = pct(tot["idle_ns"], tot["window_ns"])
    res.totals["idle_parts"] = tot_parts
    res.totals["idle_parts_pct"] = _parts_pct(tot_parts, tot["idle_ns"])
    res.totals["idle_parts_short_gaps"] = tot_short
    res.totals["idle_in_short_gaps_pct"] = pct(tot["idle_in_short_gaps_ns"], tot["idle_ns"])
    res.launch_stats = _launch_stats(model)
    return res
