"""GPU busy / idle per device.

busy = length of the union of kernel intervals on the device, plus whole-graph executions recorded by
graph-level CUDA-graph tracing (``CUPTI_ACTIVITY_KIND_GRAPH_TRACE``, whose kernels are not in the kernel
table), and with ``include_memcpy`` also memcpy and memset intervals; window = first start → last end of
those intervals on that device; idle = window −
busy; idle % = idle / window × 100. Gaps are the spaces between union blocks; each lists the activity
that closed the block before it and the one that opened the block after it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional

import numpy as np

from ..model.trace import TraceModel
from . import intervals as iv
from .stats import pct

#: gap-size histogram buckets: (label, lower bound ns inclusive, upper bound ns exclusive)
GAP_BUCKETS = [
    ("<1us", 0, 1_000),
    ("1-5us", 1_000, 5_000),
    ("5-10us", 5_000, 10_000),
    ("10-50us", 10_000, 50_000),
    ("50-100us", 50_000, 100_000),
    ("0.1-1ms", 100_000, 1_000_000),
    (">1ms", 1_000_000, None),
]

MEMCPY_KIND_LABEL = {
    0: "Unknown", 1: "Host-to-Device", 2: "Device-to-Host", 3: "Host-to-Array", 4: "Array-to-Host",
    5: "Array-to-Array", 6: "Array-to-Device", 7: "Device-to-Array", 8: "Device-to-Device", 9: "Host-to-Host",
    10: "Peer-to-Peer", 11: "Unified Host-to-Device", 12: "Unified Device-to-Host", 13: "Unified Device-to-Device",
}


@dataclass
class DeviceActivity:
    """Busy intervals of one device, sorted by start, with a label per interval."""

    device_id: int
    start: np.ndarray
    end: np.ndarray
    label_idx: np.ndarray
    labels: List[str]
    union: iv.Union
    launch_idx: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))  # API row that launched it, -1


@dataclass
class IdleResult:
    available: bool
    reason: Optional[str]
    include_memcpy: bool
    devices: List[Dict] = field(default_factory=list)
    activity: Dict[int, DeviceActivity] = field(default_factory=dict)  # not serialized


def device_activity(model: TraceModel, include_memcpy: bool) -> Dict[int, DeviceActivity]:
    """Per-device busy intervals (kernels, graph-level executions, optionally memcpy/memset) and their
    union; computed once per model and flag (cached on the model)."""
    key = ("device_activity", bool(include_memcpy))
    if key not in model.cache:
        model.cache[key] = _device_activity(model, include_memcpy)
    return model.cache[key]


def _device_activity(model: TraceModel, include_memcpy: bool) -> Dict[int, DeviceActivity]:
    k = model.kernels
    parts_s, parts_e, parts_l, parts_d, parts_li = [], [], [], [], []
    labels: List[str] = []

    def li_of(ops, n: int) -> np.ndarray:
        v = ops.cols.get("launch_idx") if hasattr(ops, "cols") else getattr(ops, "launch_idx", None)
        return np.asarray(v, np.int64) if v is not None and len(v) == n else np.full(n, -1, np.int64)

    if k is not None and len(k):
        parts_li.append(li_of(k, len(k)))
        parts_s.append(k.start)
        parts_e.append(k.end)
        parts_l.append(k.name_idx.astype(np.int64))
        parts_d.append(k.device)
        labels = list(k.names)
    gt = model.graph_trace
    if gt is not None and len(gt):
        labels.append("[CUDA graph (graph-level trace)]")
        parts_l.append(np.full(len(gt), len(labels) - 1, np.int64))
        parts_li.append(li_of(gt, len(gt)))
        parts_s.append(gt["start"])
        parts_e.append(gt["end"])
        parts_d.append(gt["device"])
    if include_memcpy:
        for ops, kind in ((model.memcpy, "memcpy"), (model.memset, "memset")):
            if ops is None or len(ops) == 0:
                continue
            if kind == "memcpy":
                ck = ops["copy_kind"]
                uniq, inv = np.unique(ck, return_inverse=True)
                base = len(labels)
                labels += [f"[CUDA memcpy {MEMCPY_KIND_LABEL.get(int(u), str(int(u)))}]" for u in uniq.tolist()]
                parts_l.append(base + inv.reshape(-1))
            else:
                labels.append("[CUDA memset]")
                parts_l.append(np.full(len(ops), len(labels) - 1, np.int64))
            parts_li.append(li_of(ops, len(ops)))
            parts_s.append(ops["start"])
            parts_e.append(ops["end"])
            parts_d.append(ops["device"])
    out: Dict[int, DeviceActivity] = {}
    if not parts_s:
        return out
    s = np.concatenate(parts_s)
    e = np.concatenate(parts_e)
    lab = np.concatenate(parts_l)
    dev = np.concatenate(parts_d)
    lix = np.concatenate(parts_li)
    if len(parts_s) == 1 and (dev.shape[0] < 2 or (dev[0] == dev).all()):
        order = None   # kernels only, one device: already sorted by start
    elif len(parts_s) == 1 and int(dev.min()) >= 0 and int(dev.max()) < (1 << 15):
        # kernels only (sorted by start): a stable radix sort on the small device id keeps start order
        order = np.argsort(dev.astype(np.int16), kind="stable")
        s, e, lab, dev, lix = s[order], e[order], lab[order], dev[order], lix[order]
    else:
        order = np.lexsort((e, s, dev))
        s, e, lab, dev, lix = s[order], e[order], lab[order], dev[order], lix[order]
    bounds = np.nonzero(np.diff(dev))[0] + 1
    for seg in np.split(np.arange(dev.shape[0]), bounds):
        if seg.size == 0:
            continue
        d = int(dev[seg[0]])
        ss, ee = s[seg], e[seg]
        out[d] = DeviceActivity(d, ss, ee, lab[seg], labels, iv.union(ss, ee), lix[seg])
    return out


def gap_histogram(durations: np.ndarray) -> List[Dict]:
    rows = []
    for label, lo, hi in GAP_BUCKETS:
        m = durations >= lo if hi is None else (durations >= lo) & (durations < hi)
        rows.append({"bucket": label, "lo_ns": lo, "hi_ns": hi, "count": int(m.sum()),
                     "total_ns": int(durations[m].sum())})
    return rows


def analyze_idle(model: TraceModel, include_memcpy: bool = False, top_gaps: int = 20) -> IdleResult:
    acts = device_activity(model, include_memcpy)
    if not acts:
        return IdleResult(False, "no GPU activity rows to build a timeline from (no kernels captured)",
                          include_memcpy)
    res = IdleResult(True, None, include_memcpy, activity=acts)
    for d in sorted(acts):
        a = acts[d]
        u = a.union
        w0, w1 = int(u.start[0]), int(u.end[-1])
        window = w1 - w0
        busy = u.length
        idle = window - busy
        gs, ge, bb, ba = iv.gaps(u)
        gd = ge - gs
        top = np.argsort(-gd, kind="stable")[:top_gaps]
        largest = []
        for j in top.tolist():
            largest.append({
                "start_ns": int(gs[j]), "end_ns": int(ge[j]), "duration_ns": int(gd[j]),
                "kernel_before": a.labels[int(a.label_idx[u.last_row[bb[j]]])],
                "kernel_after": a.labels[int(a.label_idx[u.first_row[ba[j]]])],
            })
        res.devices.append({
            "device_id": d, "window_start_ns": w0, "window_end_ns": w1, "window_ns": window,
            "busy_ns": busy, "idle_ns": idle, "idle_pct": pct(idle, window), "busy_pct": pct(busy, window),
            "gap_count": int(gd.shape[0]), "largest_gaps": largest, "gap_histogram": gap_histogram(gd),
        })
    return res
