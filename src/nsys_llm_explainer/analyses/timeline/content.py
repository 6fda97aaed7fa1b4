"""What goes into the timeline file (docs/MODEL.md, "Timeline file"): the rows inside the span (:mod:`.rows`) with
their launch calls (the flows), each device's idle slices, the findings' markers, the steps and the per-bin counters.
Pure and vectorized; the encoder (:mod:`render.perfetto`) only writes these, and needs nothing else of the trace.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple

import numpy as np

from ...jsonable import NOT_IN_JSON, FieldsJson
from ...model.launch_config import LaunchConfig, read_launch_config
from ...model.timeline import MEMCPY_KIND_LABEL, build_timelines, rows_by_value
from ...model.trace import TraceModel
from ..idle.bins import DeviceBins, bins_for, device_bins
from ..idle.result import IdleCausesResult, IdlePieces
from ..memory.memcpy import MEM_KIND_LABEL
from ..steps.metrics import StepResult
from ..trace.window import WindowResult
from .rows import (
    ApiRows,
    CopyRows,
    GraphRows,
    HostRows,
    KernelRows,
    SampleRows,
    api_rows,
    copy_rows,
    graph_rows,
    host_rows,
    kernel_rows,
    labels_of,
    sample_rows,
)
from .span import TimelineSpan

#: a finding as the timeline needs it: (id, title, severity, time at stake ns, device id or None, (kind, detail) or
#: None) — plain values, so that this analysis does not import the findings
FindingRef = Tuple[str, str, str, int, Optional[int], Optional[Tuple[str, str]]]


@dataclass(frozen=True)
class Marker:
    """A finding's marker: ``[start_ns, end_ns)`` is its example gap (the largest gap holding its idle cause on its
    device), or the steady window on ``device_id`` -1 for a finding about no single gap."""

    finding_id: str
    title: str
    severity: str
    time_at_stake_ns: int
    device_id: int
    start_ns: int
    end_ns: int
    cause: str            # "kind: detail" / "kind" of the gap's cause, "" for a finding about no gap
    gap_ns: int           # ns of the gap charged to that cause (0 without a gap)


@dataclass(frozen=True)
class DeviceCounters:
    """Per bin of the file's span on one device (the bins of report.json ``timeline`` when the span is the window):
    ``busy_pct`` = busy ns / bin width × 100, ``copy_gbps`` = memcpy bytes moved inside the bin / bin width (bytes
    per ns = GB/s; each copy's bytes spread evenly over its duration, a zero-length copy counted at its start)."""

    device_id: int
    edges_ns: np.ndarray
    busy_pct: np.ndarray
    copy_gbps: np.ndarray


@dataclass(frozen=True)
class TimelineRows:
    """What the file shows, copied out of the model (:mod:`.rows`: only the rows inside the span, with their
    names), and the step rows (of :class:`analyses.steps.metrics.StepArrays`) inside the span."""

    kernels: KernelRows
    memcpy: CopyRows
    memset: CopyRows
    graph_trace: GraphRows
    api: ApiRows
    nvtx: HostRows
    osrt: HostRows
    samples: SampleRows
    idle: Tuple[Tuple[int, IdlePieces], ...]
    markers: Tuple[Marker, ...]
    counters: Tuple[DeviceCounters, ...]
    steps: np.ndarray
    thread_labels: Mapping[int, str] = field(default_factory=dict)   # gtid → label (named threads only)
    copy_kinds: Mapping[int, str] = field(default_factory=dict)   # copyKind → direction (ENUM_CUDA_MEMCPY_OPER)
    mem_kinds: Mapping[int, str] = field(default_factory=dict)    # srcKind / dstKind / memKind → memory kind


@dataclass(frozen=True)
class TimelineFile(FieldsJson):
    """report.json ``timeline_file``: the span of ``timeline.pftrace`` (:class:`.span.TimelineSpan`); the rows it
    shows are a helper, not serialised (a report loaded from report.json cannot write the file)."""

    span: TimelineSpan
    rows: Optional[TimelineRows] = field(default=None, metadata=NOT_IN_JSON)
    #: devices whose window meets the span but whose idle slices were left out: the idle slices kept before them
    #: reached the file's limit (``span.limit_rows``), so their ``idle causes`` track is missing
    idle_left_out: Tuple[int, ...] = ()


_E = np.empty(0, np.int64)


def in_span(start: np.ndarray, end: np.ndarray, s0: int, s1: int, whole: bool) -> np.ndarray:
    """Rows (sorted by start) that intersect ``[s0, s1)`` (:mod:`model.clip`'s rule); all rows when ``whole``."""
    if whole:
        return np.arange(start.shape[0], dtype=np.int64)
    n = int(np.searchsorted(start, s1, side="left"))
    st, e = start[:n], np.maximum(end[:n], start[:n])
    return np.nonzero((e > s0) | ((e == st) & (st >= s0)))[0].astype(np.int64)


def _ops(o: Any, s0: int, s1: int, whole: bool) -> np.ndarray:
    return _E if o is None or len(o) == 0 else in_span(o.start, o.end, s0, s1, whole)


def _launch(t: Any, rows: np.ndarray, api_rows: np.ndarray) -> np.ndarray:
    """API row of the launch call of each kept row of table ``t``, -1 when unknown or not kept."""
    if t is None or t.launch_idx.shape[0] == 0 or rows.shape[0] == 0 or api_rows.shape[0] == 0:
        return np.full(rows.shape[0], -1, np.int64)
    call = np.asarray(t.launch_idx, np.int64)[rows]
    pos = np.minimum(np.searchsorted(api_rows, call), api_rows.shape[0] - 1)
    return np.where((call >= 0) & (api_rows[pos] == call), call, -1)


#: findings about what the window left out (the whole capture against the window): marked over the warm-up
#: ``[full start, window start)`` and the tail ``[window end, full end)``, each where not empty
ABOUT_TRIMMED = ("capture_window",)


def _markers(findings: Sequence[FindingRef], causes: IdleCausesResult, window: WindowResult) -> Tuple[Marker, ...]:
    out = []
    w0, w1 = int(window.start_ns), int(window.end_ns)
    for fid, title, sev, stake, dev, cause in findings:
        if fid in ABOUT_TRIMMED:
            out += [Marker(fid, title, sev, int(stake), -1, a, b, "", 0)
                    for a, b in ((int(window.full_start_ns), w0), (w1, int(window.full_end_ns))) if b > a]
            continue
        best = None   # (ns, device, example, cause)
        if cause is not None and causes.available:
            kind, detail = cause
            for d in causes.devices:
                if dev is not None and d.device_id != dev:
                    continue
                exact = [c for c in d.causes if c.kind == kind and c.detail == detail]
                for c in exact or [c for c in d.causes if c.kind == kind]:
                    for e in (c.examples or ())[:1]:
                        if best is None or e.ns > best[0]:
                            best = (e.ns, d.device_id, e, c)
        if best is None:
            out.append(Marker(fid, title, sev, int(stake), -1 if dev is None else int(dev), w0, w1, "", 0))
        else:
            _, d_id, e, c = best
            out.append(Marker(fid, title, sev, int(stake), int(d_id), int(e.start_ns), int(e.end_ns),
                              f"{c.kind}: {c.detail}" if c.detail else c.kind, int(e.ns)))
    return tuple(out)


def spread_per_bin(start: np.ndarray, end: np.ndarray, amount: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Σ of ``amount`` inside each bin ``[edges[i], edges[i+1])``, each row's amount spread evenly over
    ``[start, end)`` (a zero-length row counted in the bin of its start): the integral of a piecewise-constant
    rate, exact up to float rounding, O(rows · log rows)."""
    nb = edges.shape[0] - 1
    out = np.zeros(max(nb, 0), np.float64)
    if nb <= 0 or start.shape[0] == 0:
        return out
    amount = amount.astype(np.float64)
    dur = (end - start).astype(np.int64)
    point = dur <= 0
    if point.any():
        cell = np.searchsorted(edges, start[point], side="right") - 1
        ok = (cell >= 0) & (cell < nb)
        np.add.at(out, cell[ok], amount[point][ok])
    s, e, a = start[~point], end[~point], amount[~point]
    if s.shape[0]:
        rate = a / (e - s)
        t = np.concatenate((s, e)).astype(np.int64)
        dr = np.concatenate((rate, -rate))
        order = np.argsort(t, kind="stable")
        t, dr = t[order], dr[order]
        r_after = np.cumsum(dr)
        cum = np.concatenate(([0.0], np.cumsum(r_after[:-1] * np.diff(t).astype(np.float64))))
        k = np.searchsorted(t, edges, side="right") - 1
        kk = np.maximum(k, 0)
        at = np.where(k >= 0, cum[kk] + r_after[kk] * (edges - t[kk]).astype(np.float64), 0.0)
        out += np.diff(at)
    return out


def _span_bins(model: TraceModel, causes: IdleCausesResult, window: WindowResult, span: TimelineSpan,
               include_memcpy: bool) -> Sequence[DeviceBins]:
    """The bins the counters show: the window's (report.json ``timeline``) when the span is the window, else the
    span's own, cut alike (a capture-wide span shows its warm-up and tail, a span ending early stops there): the
    counters cover what the slices cover (docs/MODEL.md, "Timeline file")."""
    s0, s1 = int(span.start_ns), int(span.end_ns)
    if not causes.bins or (s0, s1) == (int(window.start_ns), int(window.end_ns)):
        return causes.bins
    tls = build_timelines(model, s0, s1, include_memcpy)   # the span's rows: at most --timeline-events of them
    return [device_bins(tl, _E, _E, _E, bins_for(len(tls))) for tl in tls.values()]


def _counters(model: TraceModel, bins: Sequence[DeviceBins]) -> Tuple[DeviceCounters, ...]:
    mc = model.memcpy
    out = []
    copy_rows = dict(rows_by_value(np.asarray(mc.device))) if mc is not None and len(mc) else {}   # one sort
    for b in bins:
        edges = np.asarray(b.edges_ns, np.int64)
        width = np.diff(edges).astype(np.float64)
        width[width <= 0] = 1.0
        busy = np.asarray(b.busy_ns, np.float64) / width * 100.0
        gbps = np.zeros(busy.shape[0], np.float64)
        on = copy_rows.get(b.device_id)
        if mc is not None and on is not None and on.shape[0]:
            by = np.maximum(np.asarray(mc.bytes, np.int64)[on], 0)
            gbps = spread_per_bin(mc.start[on], mc.end[on], by, edges) / width
        out.append(DeviceCounters(b.device_id, edges, busy, gbps))
    return tuple(out)


def span_kernels(model: TraceModel, span: TimelineSpan) -> np.ndarray:
    """Rows of the model's kernel table inside the span (those the file shows); none when no file is written."""
    return _ops(model.kernels, span.start_ns, span.end_ns, span.kept == "capture") if span.written else _E


def span_launch_config(model: TraceModel, timeline_span: TimelineSpan) -> Optional[LaunchConfig]:
    """Grid, block, registers and shared memory of the kernels the timeline file shows, read from the export again
    by rowid (model/launch_config.py: only those ≤ --timeline-events rows, never the whole table)."""
    return read_launch_config(model, span_kernels(model, timeline_span))


def analyze_timeline(model: TraceModel, window: WindowResult, span: TimelineSpan, causes: IdleCausesResult,
                     steps: StepResult, findings: Sequence[FindingRef], name_category: Optional[np.ndarray] = None,
                     categories: Sequence[str] = (), launch_config: Optional[LaunchConfig] = None,
                     include_memcpy: bool = False) -> TimelineFile:
    """The timeline file's content (module docstring); no rows when the file is not written. ``launch_config``:
    of the kernels inside the span (:func:`span_kernels`), read from the export by the graph; ``include_memcpy``:
    copies count as busy (--include-memcpy-in-busy), as in the window's bins."""
    if not span.written:
        return TimelineFile(span)
    s0, s1, whole = span.start_ns, span.end_ns, span.kept == "capture"
    rows: Dict[str, np.ndarray] = {n: _ops(getattr(model, n), s0, s1, whole)   # kernels: span_kernels
                                   for n in ("kernels", "api", "nvtx", "memcpy", "memset", "graph_trace", "osrt")}
    smp = model.samples
    rows["samples"] = _E if smp is None or len(smp) == 0 else in_span(smp.start, smp.start, s0, s1, whole)
    a = rows["api"]
    idle = tuple((d.device_id, d.slices) for d in causes.devices if d.slices is not None) if causes.available else ()
    shown = {d for d, _ in idle}
    idle_left_out = tuple(b.device_id for b in causes.bins if b.device_id not in shown and b.start_ns < s1
                          and b.end_ns > s0) if causes.available else ()
    st = steps.arrays if steps.available else None
    step_rows = _E if st is None or len(st) == 0 else \
        np.nonzero((st.start < s1) & (st.end > s0))[0].astype(np.int64)
    mc, ms = model.memcpy, model.memset
    k_launch, mc_launch, ms_launch = (_launch(getattr(model, n), rows[n], a) for n in ("kernels", "memcpy", "memset"))
    api_r = api_rows(model, a, np.concatenate((k_launch, mc_launch, ms_launch)))
    nvtx_r, osrt_r = host_rows(model.nvtx, rows["nvtx"]), host_rows(model.osrt, rows["osrt"])
    smp_r = sample_rows(model, rows["samples"])
    tr = TimelineRows(
        kernels=kernel_rows(model, rows["kernels"], k_launch, name_category, categories, launch_config),
        memcpy=copy_rows(mc, rows["memcpy"], mc_launch), memset=copy_rows(ms, rows["memset"], ms_launch),
        graph_trace=graph_rows(model.graph_trace, rows["graph_trace"]),
        api=api_r, nvtx=nvtx_r, osrt=osrt_r, samples=smp_r,
        idle=idle, markers=_markers(findings, causes, window),
        counters=_counters(model, _span_bins(model, causes, window, span, include_memcpy)), steps=step_rows,
        thread_labels=labels_of(model, api_r.gtid, nvtx_r.gtid, osrt_r.gtid, smp_r.gtid),
        copy_kinds=dict(MEMCPY_KIND_LABEL), mem_kinds=dict(MEM_KIND_LABEL))
    return TimelineFile(span, tr, idle_left_out)
