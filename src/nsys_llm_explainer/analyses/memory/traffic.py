"""Memory traffic and allocation: host↔device copies, pageable and synchronous copies, alloc/free calls, copies per
step (docs/FINDINGS.md, "Memory traffic").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Dict, List, Optional, Tuple

import numpy as np

from ...jsonable import NONE_AS_EMPTY, NONE_OMITTED, FieldsJson, Outcome, json_name
from ...model.timeline import D2H, H2D, PAGEABLE, rows_by_value
from ...model.timeline import copy_kind_label as _direction
from ...model.trace import ApiCalls, Memcpy, TraceModel
from ..api import classes as ac
from ..api.cuda_api import base_index
from ..common.copy_bytes import bytes_or_none, recorded_bytes
from ..common.stats import group_sums, int_sums, median, round_half_up
from .memcpy import mem_kind as _kind


@dataclass(frozen=True)
class CopyTotals(FieldsJson):
    """Copies: rows, bytes (of the rows that record theirs; None when none does) and summed GPU duration (ns)."""

    count: int
    bytes: Optional[int]
    total_ns: int


@dataclass(frozen=True)
class CopyDirection(CopyTotals):
    """The copies of one direction (``copy_kind``, written first: ``JSON_KEYS``; its label ``direction``)."""

    copy_kind: int
    direction: str
    JSON_KEYS: ClassVar[Tuple[str, ...]] = ("copy_kind",)


@dataclass(frozen=True)
class CopyKinds(CopyTotals):
    """The copies of one (direction, source memory kind, destination memory kind), the kinds written first."""

    copy_kind: int
    src_kind: int
    dst_kind: int
    direction: str
    src_kind_name: str
    dst_kind_name: str
    JSON_KEYS: ClassVar[Tuple[str, ...]] = ("copy_kind", "src_kind", "dst_kind")


@dataclass(frozen=True)
class PageableCopies(CopyTotals):
    """The pageable host copies (docs/FINDINGS.md), all and per direction."""

    by_direction: Tuple[CopyDirection, ...]


@dataclass(frozen=True)
class SyncCopyApi(FieldsJson):
    """The synchronous copy calls of one API (base name): calls and their summed duration (ns)."""

    name: str
    calls: int
    host_blocked_ns: int


@dataclass(frozen=True)
class SyncCopies(CopyTotals):
    """The synchronous copies (docs/FINDINGS.md): copy rows, their calls, the calls' summed duration, the pageable
    ones among the rows, per API."""

    calls: int
    host_blocked_ns: int
    pageable_count: int
    by_api: Tuple[SyncCopyApi, ...]


@dataclass(frozen=True)
class StepCopyKind(FieldsJson):
    """Copies inside steps of one (direction, source kind, destination kind): per step, mean over all steps."""

    direction: str
    src_kind_name: str
    dst_kind_name: str
    copies_per_step: float
    bytes_per_step: Optional[int]     # None: no copy of the kind records its bytes
    copy_ns_per_step: int


@dataclass(frozen=True)
class PidCopiesPerStep(FieldsJson):
    """Copies per step of one process's steps: its steps, the copies inside them, the median per step."""

    pid: int
    step_count: int
    copies_in_steps: int
    copies_per_step_median: float
    bytes_per_step_median: Optional[int]     # None: no copy in the steps records its bytes


@dataclass(frozen=True)
class CopiesPerStep(FieldsJson):
    """Copies per step (docs/FINDINGS.md): the copies inside steps, their median and mean per step, by kind."""

    step_count: int
    copies_in_steps: int
    copies_per_step_median: float
    copies_per_step_mean: float
    bytes_per_step_median: Optional[int]     # None (both): no copy in the steps records its bytes
    bytes_per_step_mean: Optional[int]
    copy_ns_per_step_mean: int
    host_copies_in_steps: int
    pageable_in_steps: int
    sync_copies_in_steps: int
    by_kind_per_step: Tuple[StepCopyKind, ...]
    #: steps of several processes (a prefill and a decode engine): the same figures per process, whose steps differ
    #: in kind (None with one process)
    by_pid: Optional[Tuple[PidCopiesPerStep, ...]] = field(default=None, metadata=NONE_OMITTED)


@dataclass(frozen=True)
class AllocTotals(FieldsJson):
    """The alloc (or free) calls: calls, their summed duration (ns), and of them the ones inside steps (None: no
    steps)."""

    count: int
    total_ns: int
    in_steps: Optional[int]
    in_steps_ns: Optional[int]


@dataclass(frozen=True)
class AllocApi(FieldsJson):
    """The alloc or free calls (``api_class``, ``class`` in ``report.json``) of one API (base name)."""

    name: str
    api_class: str = field(metadata=json_name("class"))
    count: int
    total_ns: int
    in_steps: Optional[int]


@dataclass(frozen=True)
class MemoryResult(Outcome):
    copy_count: int = 0
    copy_bytes: Optional[int] = 0      # None: no copy records its bytes
    copy_ns: int = 0
    by_direction: Tuple[CopyDirection, ...] = ()
    by_kind: Tuple[CopyKinds, ...] = ()
    host_copies: Optional[CopyTotals] = field(default=None, metadata=NONE_AS_EMPTY)
    pageable: Optional[PageableCopies] = field(default=None, metadata=NONE_AS_EMPTY)
    sync_copies: Optional[SyncCopies] = field(default=None, metadata=NONE_AS_EMPTY)
    per_step: Optional[CopiesPerStep] = None
    alloc: Optional[AllocTotals] = field(default=None, metadata=NONE_AS_EMPTY)
    free: Optional[AllocTotals] = field(default=None, metadata=NONE_AS_EMPTY)
    alloc_free_by_api: Tuple[AllocApi, ...] = ()


def _grouped(cols: Dict[str, np.ndarray], dur: np.ndarray, nbytes: np.ndarray) -> List[Dict[str, Any]]:
    """The values of ``cols``, then count / bytes (None: no row records its bytes) / total_ns, per distinct
    combination of ``cols``, ordered by total_ns descending (ties: first seen first)."""
    nb, known = recorded_bytes(nbytes)
    first, _, cnt, (tot, byt, kn) = group_sums(list(cols.values()), dur, nb, known.astype(np.int64))
    return [{**{k: int(v[first[i]]) for k, v in cols.items()}, "count": int(cnt[i]),
             "bytes": bytes_or_none(int(byt[i]), int(kn[i]), int(cnt[i])), "total_ns": int(tot[i])}
            for i in np.lexsort((first, -tot)).tolist()]


def _totals(m: np.ndarray, dur: np.ndarray, nbytes: np.ndarray) -> CopyTotals:
    nb, known = recorded_bytes(nbytes[m])
    return CopyTotals(count=int(m.sum()), bytes=bytes_or_none(int(nb.sum()), int(known.sum()), int(m.sum())),
                      total_ns=int(dur[m].sum()))


#: steps as (start, end, pid), sorted by pid then start; pid None: steps of any process, sorted by start
Steps = Tuple[np.ndarray, np.ndarray, Optional[np.ndarray]]


def step_of(t: np.ndarray, s0: np.ndarray, s1: np.ndarray) -> np.ndarray:
    """Index of the step (sorted, non-overlapping ``[s0, s1)``) holding each time, -1 when none."""
    if s0.shape[0] == 0:
        return np.full(t.shape[0], -1, np.int64)
    i = np.searchsorted(s0, t, side="right") - 1
    ok = (i >= 0) & (t < s1[np.maximum(i, 0)])
    return np.where(ok, i, -1)


def analyze_memory(model: TraceModel, step_bounds: Optional[Tuple[np.ndarray, np.ndarray]] = None,
                   step_pid: Optional[np.ndarray] = None) -> MemoryResult:
    """Copies, allocations and frees; per step when ``step_bounds`` (with ``step_pid``, the process of each step:
    a copy or call belongs to a step of its own process) are given."""
    mc, api = model.memcpy, model.api
    has_copies = mc is not None and len(mc) > 0
    am = ac.class_mask(api, "alloc") if api is not None and len(api) else np.zeros(0, bool)
    fm = ac.class_mask(api, "free") if api is not None and len(api) else np.zeros(0, bool)
    if not has_copies and not am.any() and not fm.any():
        return MemoryResult(False, "no memcpy activity and no allocation/free calls in the trace")
    steps: Optional[Steps] = None
    if step_bounds is not None:
        s0, s1 = np.asarray(step_bounds[0], np.int64), np.asarray(step_bounds[1], np.int64)
        if step_pid is None:                     # steps of any process
            o = np.argsort(s0, kind="stable")
            steps = s0[o], s1[o], None
        else:
            sp = np.asarray(step_pid, np.int64)
            o = np.lexsort((s0, sp))
            steps = s0[o], s1[o], sp[o]
    fields = _copies(mc if has_copies else None, api, steps)
    if api is not None and len(api):
        fields.update(_alloc_free(api, am, fm, steps))
    return MemoryResult(True, None, **fields)


def _copies(mc: Optional[Memcpy], api: Optional[ApiCalls], steps: Optional[Steps]) -> Dict[str, Any]:
    """The copy fields of :class:`MemoryResult` (all zero without a memcpy table)."""
    e = np.empty(0, np.int64)
    start, dur, nb, ck, sk, dk, li = (e,) * 7 if mc is None else (
        mc.start, mc.end - mc.start, mc.bytes, mc.copy_kind, mc.src_kind, mc.dst_kind, mc.launch_idx)
    by_direction = tuple(CopyDirection(**r, direction=_direction(r["copy_kind"]))
                         for r in _grouped({"copy_kind": ck}, dur, nb))
    by_kind = tuple(CopyKinds(**r, direction=_direction(r["copy_kind"]), src_kind_name=_kind(r["src_kind"]),
                              dst_kind_name=_kind(r["dst_kind"]))
                    for r in _grouped({"copy_kind": ck, "src_kind": sk, "dst_kind": dk}, dur, nb))
    host = (ck == H2D) | (ck == D2H)
    pm = host & ((sk == PAGEABLE) | (dk == PAGEABLE))
    pt = _totals(pm, dur, nb)
    pageable = PageableCopies(pt.count, pt.bytes, pt.total_ns, tuple(
        CopyDirection(**r, direction=_direction(r["copy_kind"])) for r in _grouped({"copy_kind": ck[pm]}, dur[pm],
                                                                                   nb[pm])))
    # synchronous copies: launching call is a blocking memcpy
    sync_rows = np.zeros(dur.shape[0], bool)
    calls = np.empty(0, np.int64)
    by_api: List[SyncCopyApi] = []
    blocked_ns = 0
    if api is not None and len(api):
        sc = ac.name_set_mask(api.names, api.name_idx, ac.SYNC_COPY) & api.primary
        linked = li >= 0
        sync_rows = linked & sc[np.where(linked, li, 0)]
        calls = np.unique(li[sync_rows])
        if calls.shape[0]:
            cd = api.end[calls] - api.start[calls]
            bidx, bnames = base_index(api, calls)
            by_api = sorted((SyncCopyApi(name=bnames[b], calls=int(mm.shape[0]), host_blocked_ns=int(cd[mm].sum()))
                             for b, mm in rows_by_value(bidx)),
                            key=lambda r: (-r.host_blocked_ns, r.name))
            blocked_ns = int(cd.sum())
    syt = _totals(sync_rows, dur, nb)
    sync_copies = SyncCopies(syt.count, syt.bytes, syt.total_ns, calls=int(calls.shape[0]), host_blocked_ns=blocked_ns,
                             pageable_count=int((sync_rows & pm).sum()), by_api=tuple(by_api))
    per_step = None
    if steps is not None:
        t, cpid = start, (mc.pid if mc is not None else e)
        if api is not None and len(api):
            t = np.where(li >= 0, api.start[np.maximum(li, 0)], start)
            cpid = np.where(li >= 0, api.pid[np.maximum(li, 0)], cpid)
        st = step_of_pid(t, cpid, steps)
        n_steps = steps[0].shape[0]
        inside = st >= 0
        cps = np.bincount(st[inside], minlength=n_steps).astype(np.int64)
        nb0, known = recorded_bytes(nb[inside])
        bps, tps = int_sums(st[inside], nb0, n_steps), int_sums(st[inside], dur[inside], n_steps)
        b_known = bool(known.any()) or not inside.any()      # no copy in the steps: 0 bytes per step, known
        per_step = CopiesPerStep(
            step_count=int(n_steps), copies_in_steps=int(inside.sum()),
            copies_per_step_median=median(cps),
            copies_per_step_mean=round(float(cps.mean()), 3) if n_steps else 0.0,
            bytes_per_step_median=int(round_half_up(median(bps))) if b_known else None,
            bytes_per_step_mean=(int(round_half_up(bps.mean())) if n_steps else 0) if b_known else None,
            copy_ns_per_step_mean=int(round_half_up(tps.mean())) if n_steps else 0,
            host_copies_in_steps=int((inside & host).sum()),
            pageable_in_steps=int((inside & pm).sum()),
            sync_copies_in_steps=int((inside & sync_rows).sum()),
            by_kind_per_step=_per_step_by_kind(n_steps, *(x[inside] for x in (ck, sk, dk, nb, dur))),
            by_pid=_by_pid(steps[2], cps, bps if b_known else None),
        )
    nb0, known = recorded_bytes(nb)
    return {"copy_count": int(dur.shape[0]), "copy_bytes": bytes_or_none(int(nb0.sum()), int(known.sum()),
                                                                        int(dur.shape[0])), "copy_ns": int(dur.sum()),
            "by_direction": by_direction, "by_kind": by_kind, "host_copies": _totals(host, dur, nb),
            "pageable": pageable, "sync_copies": sync_copies, "per_step": per_step}


def _by_pid(spid: Optional[np.ndarray], cps: np.ndarray, bps: Optional[np.ndarray]
            ) -> Optional[Tuple[PidCopiesPerStep, ...]]:
    """Per process of the steps (``spid``, one per step; ``cps`` / ``bps`` copies and bytes per step, ``bps`` None
    when no copy records its bytes): its :class:`PidCopiesPerStep`; None when the steps are of one process (or of
    no known one)."""
    if spid is None:
        return None
    groups = rows_by_value(np.asarray(spid))
    if len(groups) < 2:
        return None
    return tuple(PidCopiesPerStep(int(p), int(r.shape[0]), int(cps[r].sum()), median(cps[r]),
                                  int(round_half_up(median(bps[r]))) if bps is not None else None) for p, r in groups)


def step_of_pid(t: np.ndarray, pid: np.ndarray, steps: Steps) -> np.ndarray:
    """Index of the step of process ``pid`` (``steps``: start, end, pid, sorted by pid then start, one process's
    steps not overlapping; pid None: any process's step) holding each time ``t``, -1 when none."""
    s0, s1, sp = steps
    if sp is None:
        return step_of(t, s0, s1)
    out = np.full(t.shape[0], -1, np.int64)
    if s0.shape[0] == 0 or t.shape[0] == 0:
        return out
    by_pid = dict(rows_by_value(np.asarray(pid)))
    for p, r in rows_by_value(sp):          # one sort of each side: no mask per process
        q = by_pid.get(p)
        if q is not None:
            i = step_of(t[q], s0[r], s1[r])
            out[q] = np.where(i >= 0, r[np.maximum(i, 0)], -1)
    return out


def _alloc_free(api: ApiCalls, am: np.ndarray, fm: np.ndarray, steps: Optional[Steps]) -> Dict[str, Any]:
    """The ``alloc``, ``free`` and ``alloc_free_by_api`` fields of :class:`MemoryResult` (non-empty ``api``)."""
    adur = api.end - api.start
    st = step_of_pid(api.start, api.pid, steps) if steps is not None else None
    out: Dict[str, Any] = {}
    rows: List[AllocApi] = []
    for cls, m in (("alloc", am), ("free", fm)):
        out[cls] = AllocTotals(count=int(m.sum()), total_ns=int(adur[m].sum()),
                               in_steps=int((m & (st >= 0)).sum()) if st is not None else None,
                               in_steps_ns=int(adur[m & (st >= 0)].sum()) if st is not None else None)
        dd = adur[m]
        sm = st[m] if st is not None else None
        bidx, bnames = base_index(api, m)
        for b, mm in rows_by_value(bidx):
            rows.append(AllocApi(name=bnames[b], api_class=cls, count=int(mm.shape[0]), total_ns=int(dd[mm].sum()),
                                 in_steps=int((sm[mm] >= 0).sum()) if sm is not None else None))
    rows.sort(key=lambda r: (-r.total_ns, r.name))
    out["alloc_free_by_api"] = tuple(rows)
    return out


def _per_step_by_kind(n_steps: int, ck: np.ndarray, sk: np.ndarray, dk: np.ndarray, nb: np.ndarray, dur: np.ndarray
                      ) -> Tuple[StepCopyKind, ...]:
    """The copies inside steps (these rows) per (direction, source kind, destination kind): count, bytes and GPU
    time per step (mean over all steps)."""
    if n_steps == 0:
        return ()
    kinds = _grouped({"copy_kind": ck, "src_kind": sk, "dst_kind": dk}, dur, nb)
    # ties of the order below: kinds ascending, an unrecorded kind (-1) last
    kinds.sort(key=lambda g: (g["copy_kind"], g["src_kind"] & 0xFF, g["dst_kind"] & 0xFF))
    rows = [StepCopyKind(direction=_direction(g["copy_kind"]), src_kind_name=_kind(g["src_kind"]),
                         dst_kind_name=_kind(g["dst_kind"]), copies_per_step=g["count"] / n_steps,
                         bytes_per_step=(int(round_half_up(g["bytes"] / n_steps)) if g["bytes"] is not None
                                         else None),
                         copy_ns_per_step=int(round_half_up(g["total_ns"] / n_steps))) for g in kinds]
    rows.sort(key=lambda r: (-(r.bytes_per_step if r.bytes_per_step is not None else -1), r.direction))
    return tuple(rows)
