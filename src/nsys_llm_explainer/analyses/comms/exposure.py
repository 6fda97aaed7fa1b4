"""Exposed communication: per device, the time in the analysis window during which communication kernels (the
categories ``nccl``, ``custom_allreduce`` and ``all_to_all``) run and no compute kernel (one of another category)
nor whole-graph execution does — the compute streams wait while the GPU is "busy" in a collective (docs/METRICS.md,
"Exposed communication").
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Dict, List, Sequence, Tuple

import numpy as np

from ...jsonable import FieldsJson, Outcome
from ...model import intervals as iv
from ...model.timeline import rows_by_value
from ...model.trace import TraceModel
from ..common.stats import pct
from ..kernels.categories import CategoryResult

#: categories whose kernels move data between GPUs: their time is set by the links and by waiting for the peers
COMM_CATEGORIES = ("nccl", "custom_allreduce", "all_to_all")

#: the collective a communication kernel runs, from its name (first match wins; docs/METRICS.md)
_OPS: Tuple[Tuple[str, re.Pattern[str]], ...] = tuple((op, re.compile(rx, re.IGNORECASE)) for op, rx in (
    ("reduce-scatter", r"reduce_?scatter"),
    ("all-gather", r"all_?gather"),
    ("all-to-all", r"all_?to_?all"),
    ("all-reduce", r"all_?reduce"),
    ("send/recv", r"send|recv"),
    ("broadcast", r"broadcast|bcast"),
    ("reduce", r"reduce"),
))


#: the collectives a ``custom_allreduce`` kernel's name may name besides the all-reduce (userbuffers, mscclpp)
_CUSTOM_OTHER = ("reduce-scatter", "all-gather", "all-to-all")


def collective_op(name: str, category: str) -> str:
    """The collective of a communication kernel name (:data:`_OPS`, first match); a ``custom_allreduce`` kernel is an
    all-reduce (vLLM's ``cross_device_reduce``, Lamport, one-/two-shot kernels) unless its name says reduce-scatter,
    all-gather or all-to-all; an ``all_to_all`` kernel (DeepEP / pplx dispatch and combine, NVSHMEM) is an all-to-all;
    an NCCL name that says none is "other"."""
    if category == "all_to_all":
        return "all-to-all"
    custom = category == "custom_allreduce"
    for op, rx in _OPS:
        if (not custom or op in _CUSTOM_OTHER) and rx.search(name):
            return op
    return "all-reduce" if custom else "other"


@dataclass(frozen=True)
class CommOp(FieldsJson):
    """The communication kernels of one collective (:func:`collective_op`) on one device, in the window."""

    op: str
    count: int
    comm_ns: int            # |C_op|: union of its kernels' intervals
    exposed_ns: int         # |C_op \\ K|: of that, no other (non-communication) kernel running


@dataclass(frozen=True)
class CommExposureDevice(FieldsJson):
    """One device's communication kernels in the window: C the union of their intervals, K the union of the other
    kernels and whole-graph executions (docs/METRICS.md, "Exposed communication")."""

    device_id: int
    window_ns: int
    comm_count: int
    comm_ns: int            # |C|
    overlapped_ns: int      # |C ∩ K|
    exposed_ns: int         # |C \\ K| = comm_ns − overlapped_ns
    exposed_pct: float      # exposed_ns / window_ns × 100
    overlapped_pct: float   # overlapped_ns / comm_ns × 100
    ops: Tuple[CommOp, ...]  # by exposed_ns desc, then comm_ns desc, then op


@dataclass(frozen=True)
class CommExposureResult(Outcome):
    window_start_ns: int = 0
    window_end_ns: int = 0
    devices: Tuple[CommExposureDevice, ...] = ()

    def pooled(self, ids: Sequence[int]) -> Tuple[int, int, int, int]:
        """(Σ exposed_ns, Σ window_ns, Σ comm_ns, Σ overlapped_ns) over the devices ``ids`` (those of them with
        communication kernels; a device in ``ids`` without any adds its window only: no exposed time)."""
        rows = [d for d in self.devices if d.device_id in ids]
        win = (self.window_end_ns - self.window_start_ns) * len(set(ids))
        return (sum(d.exposed_ns for d in rows), win, sum(d.comm_ns for d in rows),
                sum(d.overlapped_ns for d in rows))


def analyze_comm_exposure(steady: TraceModel, categories: CategoryResult, w0: int, w1: int) -> CommExposureResult:
    """Exposed communication over ``[w0, w1)``: kernels of ``steady`` (the model clipped to the window), their
    category by name from ``categories`` (whose ``name_category`` indexes the same kernel names)."""
    k = steady.kernels
    if k is None or len(k) == 0:
        return CommExposureResult(False, "no CUDA kernels in the analysis window", int(w0), int(w1))
    if not categories.available or categories.name_category is None \
            or categories.name_category.shape[0] != len(k.names):
        return CommExposureResult(False, "kernels were not categorized", int(w0), int(w1))
    cats = list(categories.categories)
    comm_codes = [cats.index(c) for c in COMM_CATEGORIES if c in cats]
    name_comm = np.isin(categories.name_category, comm_codes)
    is_comm = name_comm[k.name_idx]
    if not is_comm.any():
        return CommExposureResult(False, "no communication kernels (categories nccl, custom_allreduce, all_to_all) "
                                  "in the analysis window", int(w0), int(w1))
    # the collective of each communication name (Python work per distinct name only)
    op_ids: Dict[str, int] = {}
    op_of_name = np.full(len(k.names), -1, np.int64)
    for j in np.flatnonzero(name_comm).tolist():
        op_of_name[j] = op_ids.setdefault(collective_op(k.names[j], cats[int(categories.name_category[j])]),
                                          len(op_ids))
    ops = list(op_ids)
    start, end = np.asarray(k.start, np.int64), np.asarray(k.end, np.int64)
    dev = k.device                                    # (as the model holds it: no int64 copy)
    g = steady.graph_trace
    gs, ge, gd = ((np.asarray(g.start, np.int64), np.asarray(g.end, np.int64), np.asarray(g.device, np.int64))
                  if g is not None and len(g) else (np.empty(0, np.int64),) * 3)
    graph_rows = dict(rows_by_value(gd)) if gd.shape[0] else {}
    win = int(w1) - int(w0)
    out: List[CommExposureDevice] = []
    for d, on in rows_by_value(dev):                  # one sort, not a mask over every row per device
        c_rows = on[is_comm[on]]
        if c_rows.shape[0] == 0:
            continue
        o_rows = on[~is_comm[on]]
        gr = graph_rows.get(d, np.empty(0, np.int64))
        ks = np.concatenate((start[o_rows], gs[gr])) if gr.shape[0] else start[o_rows]
        ke = np.concatenate((end[o_rows], ge[gr])) if gr.shape[0] else end[o_rows]
        kun = iv.union_blocks(ks, ke)
        cun = iv.union_blocks(start[c_rows], end[c_rows])
        comm = cun.length
        ov = int(iv.overlap_length(kun, cun.start, cun.end).sum()) if len(kun) and comm else 0
        # per collective: |C_op| and |C_op ∩ K| (grouped unions, one sort)
        code = op_of_name[k.name_idx[c_rows]]
        cs, ce = start[c_rows], end[c_rows]
        n_ops = len(ops)
        op_cnt = np.bincount(code, minlength=n_ops)
        if int((op_cnt > 0).sum()) == 1:              # one collective on the device: its union is C itself
            op_len = np.where(op_cnt > 0, comm, 0)
            op_ov = np.where(op_cnt > 0, ov, 0)
        else:
            op_len = iv.grouped_overlap(code, cs, ce, n_ops, cun)
            op_ov = iv.grouped_overlap(code, cs, ce, n_ops, kun) if len(kun) else np.zeros(n_ops, np.int64)
        rows = sorted((CommOp(ops[i], int(op_cnt[i]), int(op_len[i]), int(op_len[i] - op_ov[i]))
                       for i in range(n_ops) if op_cnt[i]), key=lambda r: (-r.exposed_ns, -r.comm_ns, r.op))
        out.append(CommExposureDevice(
            device_id=int(d), window_ns=win, comm_count=int(c_rows.shape[0]), comm_ns=comm, overlapped_ns=ov,
            exposed_ns=comm - ov, exposed_pct=pct(comm - ov, win), overlapped_pct=pct(ov, comm), ops=tuple(rows)))
    return CommExposureResult(True, None, int(w0), int(w1), tuple(out))
