"""Unified Memory (CUDA managed memory): page migrations, GPU and CPU page faults, and how much kernel time ran
while migrations were in flight, over the steady window and the whole capture (docs/METRICS.md, "Unified Memory").
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ...jsonable import FieldsJson, Outcome, json_name
from ...model import intervals as iv
from ...model.timeline import rows_by_value
from ...model.trace import Memcpy, TraceModel
from ..common.copy_bytes import bytes_or_none, recorded_bytes
from ..common.stats import group_sums
from ..trace.window import gpu_work

UM_COPY_KINDS = (11, 12, 13)
DIRECTION = {11: "Unified Host-to-Device", 12: "Unified Device-to-Host", 13: "Unified Device-to-Device"}
#: ENUM_CUDA_UNIF_MEM_MIGRATION labels (built-in: the 2022.x exporters can leave ENUM_* tables empty)
CAUSE = {-1: "not recorded", 0: "unknown", 1: "user prefetch", 2: "page fault (coherence)",
         3: "speculative prefetch", 4: "eviction", 5: "access counters"}
#: ENUM_CUDA_UNIF_MEM_ACCESS_TYPE labels
ACCESS = {0: "unknown", 1: "read", 2: "write", 3: "atomic", 4: "prefetch"}
#: ``migrationCause`` of a ``cudaMemPrefetchAsync`` migration: stream-ordered ahead of the kernels that read the pages,
#: it never holds up a kernel it runs beside, so kernel time under it is not "kernel time under migrations"
USER_PREFETCH = 1
TOP_CPU = 10
GPU_TABLE = "CUDA_UM_GPU_PAGE_FAULT_EVENTS"
CPU_TABLE = "CUDA_UM_CPU_PAGE_FAULT_EVENTS"


@dataclass(frozen=True)
class MigrationGroup:
    """Unified-memory migrations of one direction (``key`` = copy kind 11–13, ``label`` = :data:`DIRECTION`)
    or of one migration cause (``key`` = ``migrationCause``, -1 not recorded; ``label`` = :data:`CAUSE`)."""

    key: int
    label: str
    count: int
    bytes: Optional[int]        # of the rows that record theirs; None: none does (docs/METRICS.md)
    total_ns: int


@dataclass(frozen=True)
class FaultsByAccess:
    """GPU page-fault groups of one ``faultAccessType`` (``access_id``; ``access`` = :data:`ACCESS`)."""

    access_id: int
    access: str
    count: int          # fault groups (rows)
    page_faults: int    # Σ numberOfPageFaults


@dataclass(frozen=True)
class CpuFaultSite:
    """CPU page faults at one function or module (a StringIds name)."""

    name: str
    count: int


@dataclass(frozen=True)
class UmDevice:
    """One device over one window (docs/METRICS.md, "Unified Memory")."""

    device_id: int
    migration_count: int
    migration_bytes: Optional[int]      # None: no migration of the device records its bytes
    migration_ns: int
    migration_union_ns: int
    kernel_busy_ns: int
    overlap_ns: int
    overlap_pct: float
    migration_idle_ns: int
    gpu_fault_events: int
    gpu_page_faults: int
    gpu_fault_union_ns: int


@dataclass(frozen=True)
class UmWindow(FieldsJson):
    """Unified Memory over one window: ``window`` is "steady" or "full"."""

    window: str
    start_ns: int
    end_ns: int
    migration_count: int
    migration_bytes: Optional[int]      # None: no migration records its bytes
    migration_ns: int
    by_direction: Tuple[MigrationGroup, ...] = field(metadata=json_name(rows={"key": "copy_kind",
                                                                               "label": "direction"}))
    by_cause: Tuple[MigrationGroup, ...] = field(metadata=json_name(rows={"key": "cause_id", "label": "cause"}))
    devices: Tuple[UmDevice, ...]
    kernel_busy_ns: int
    overlap_ns: int
    overlap_pct: float
    migration_idle_ns: int
    gpu_fault_events: int
    gpu_page_faults: int
    gpu_faults_by_access: Tuple[FaultsByAccess, ...]
    cpu_fault_count: int
    cpu_faults_by_function: Tuple[CpuFaultSite, ...] = field(metadata=json_name(rows={"name": "function"}))
    cpu_faults_by_module: Tuple[CpuFaultSite, ...] = field(metadata=json_name(rows={"name": "module"}))

    def device(self, device_id: int) -> Optional[UmDevice]:
        return next((d for d in self.devices if d.device_id == device_id), None)

    def overlap_of(self) -> str:
        """The migrations ``overlap_ns`` counts, in words: "migrations", or "migrations other than user prefetches"
        when the window has some (:data:`USER_PREFETCH`: not counted)."""
        return "migrations" + (" other than user prefetches" if any(
            r.key == USER_PREFETCH and r.count for r in self.by_cause) else "")


@dataclass(frozen=True)
class UnifiedMemoryResult(Outcome):
    """``available``: the trace holds Unified-Memory activity (a migration or a fault row); ``sources``: which
    inputs the export has (``gpu_fault_table``, ``cpu_fault_table``, ``migration_cause_column``); ``notes``:
    what could not be measured and why."""

    sources: Dict[str, bool]
    notes: Tuple[str, ...] = ()
    steady: Optional[UmWindow] = None
    full: Optional[UmWindow] = None


def um_rows(mc: Optional[Memcpy]) -> np.ndarray:
    """Row indices of the Unified (managed-memory) copies of a memcpy table."""
    if mc is None or len(mc) == 0:
        return np.empty(0, np.int64)
    ck = np.asarray(mc.copy_kind)
    return np.nonzero((ck >= UM_COPY_KINDS[0]) & (ck <= UM_COPY_KINDS[-1]))[0]


def _i64(v: np.ndarray, rows: Optional[np.ndarray] = None) -> np.ndarray:
    v = np.asarray(v, np.int64)
    return v if rows is None else v[rows]


def _grouped(key: np.ndarray, cols: Sequence[np.ndarray], label: Dict[int, str]
             ) -> List[Tuple[int, str, int, List[int]]]:
    """One entry per distinct ``key`` (ascending): (key, its label, row count, [Σ of each of ``cols``, in int64:
    exact])."""
    first, _, count, sums = group_sums([key], *cols)
    return [(k, label.get(k, str(k)), int(count[i]), [int(s[i]) for s in sums])
            for i, k in enumerate(key[first].tolist())]


def _migrations(key: np.ndarray, nbytes: np.ndarray, dur: np.ndarray, label: Dict[int, str]
                ) -> Tuple[MigrationGroup, ...]:
    nb, known = recorded_bytes(nbytes)
    return tuple(MigrationGroup(k, lab, n, bytes_or_none(b, kn, n), t)
                 for k, lab, n, (b, t, kn) in _grouped(key, (nb, dur, known.astype(np.int64)), label))


def kernel_unions(m: TraceModel) -> Callable[[int], iv.IntervalUnion]:
    """``f(d)``: the union of the kernel and whole-graph-execution intervals of device ``d``; the rows are grouped by
    device once (one sort), not searched again for every device asked for."""
    start, end, dev = gpu_work(m, "start", "end", "device")
    rows, e = dict(rows_by_value(np.asarray(dev))), np.empty(0, np.int64)
    return lambda d: iv.union_blocks(start[rows.get(d, e)], end[rows.get(d, e)])


def _top(idx: np.ndarray, names: List[str]) -> Tuple[CpuFaultSite, ...]:
    """The :data:`TOP_CPU` most frequent names of ``idx`` (index into ``names``; ties by name)."""
    ok = idx[idx >= 0]
    if ok.shape[0] == 0:
        return ()
    cnt = np.bincount(ok, minlength=len(names))
    nz = np.nonzero(cnt)[0]
    order = sorted(nz.tolist(), key=lambda i: (-int(cnt[i]), names[i]))[:TOP_CPU]
    return tuple(CpuFaultSite(names[i], int(cnt[i])) for i in order)


def _window(m: TraceModel, which: str, w0: int, w1: int) -> UmWindow:
    mc = m.memcpy
    rows = um_rows(mc)
    n = rows.shape[0]
    s, e, ck, nbytes, cause, dev = (_i64(getattr(mc, c), rows) if n else np.empty(0, np.int64)
                                    for c in ("start", "end", "copy_kind", "bytes", "migration_cause", "device"))
    nb0, known = recorded_bytes(nbytes)
    dur = e - s
    by_direction = _migrations(ck, nbytes, dur, DIRECTION)
    by_cause = _migrations(np.where(cause < 0, -1, cause), nbytes, dur, CAUSE)
    gf = m.um_gpu_faults
    fs, fe, fdev, nf, acc = (_i64(getattr(gf, c)) if gf is not None and len(gf) else np.empty(0, np.int64)
                             for c in ("start", "end", "device", "faults", "access"))
    nf = np.maximum(nf, 0)
    by_access = tuple(FaultsByAccess(k, lab, n, f) for k, lab, n, (f,) in _grouped(acc, (nf,), ACCESS))
    devices: List[UmDevice] = []
    e0 = np.empty(0, np.int64)
    mig_rows, fault_rows = dict(rows_by_value(dev)), dict(rows_by_value(fdev))   # one sort each, no mask per device
    union_of = kernel_unions(m)
    ahead = cause == USER_PREFETCH
    for d in sorted(set(mig_rows) | set(fault_rows)):
        sel = mig_rows.get(d, e0)
        mig, ku = iv.union_blocks(s[sel], e[sel]), union_of(d)
        others = sel[~ahead[sel]]     # kernel time under user prefetches is not counted (USER_PREFETCH)
        over, under = (int(iv.overlap_length(ku, u.start, u.end).sum()) if len(u) and len(ku) else 0
                       for u in (iv.union_blocks(s[others], e[others]), mig))
        kb = ku.length
        fsel = fault_rows.get(d, e0)
        devices.append(UmDevice(
            device_id=int(d), migration_count=int(sel.shape[0]),
            migration_bytes=bytes_or_none(int(nb0[sel].sum()), int(known[sel].sum()), int(sel.shape[0])),
            migration_ns=int(dur[sel].sum()), migration_union_ns=mig.length, kernel_busy_ns=kb, overlap_ns=over,
            overlap_pct=100.0 * over / kb if kb > 0 else 0.0, migration_idle_ns=mig.length - under,
            gpu_fault_events=int(fsel.shape[0]), gpu_page_faults=int(nf[fsel].sum()),
            gpu_fault_union_ns=iv.union_blocks(fs[fsel], fe[fsel]).length))
    kb_all = sum(x.kernel_busy_ns for x in devices)
    over_all = sum(x.overlap_ns for x in devices)
    cf = m.um_cpu_faults
    n_cpu = len(cf) if cf is not None else 0
    by_func, by_mod = ((_top(_i64(cf.func_idx), cf.names), _top(_i64(cf.module_idx), cf.names)) if cf is not None
                       else ((), ()))   # no row: _top gives ()
    return UmWindow(
        window=which, start_ns=int(w0), end_ns=int(w1), migration_count=int(n),
        migration_bytes=bytes_or_none(int(nb0.sum()), int(known.sum()), int(n)),
        migration_ns=int(dur.sum()), by_direction=by_direction, by_cause=by_cause, devices=tuple(devices),
        kernel_busy_ns=kb_all, overlap_ns=over_all, overlap_pct=100.0 * over_all / kb_all if kb_all else 0.0,
        migration_idle_ns=sum(x.migration_idle_ns for x in devices), gpu_fault_events=int(fs.shape[0]),
        gpu_page_faults=int(nf.sum()), gpu_faults_by_access=by_access, cpu_fault_count=int(n_cpu),
        cpu_faults_by_function=by_func, cpu_faults_by_module=by_mod)


def _absent_reason(model: TraceModel, src: Dict[str, bool]) -> str:
    mc = model.memcpy
    copies = (f"no Unified copy kind (11–13) among {len(mc):,} memcpy rows" if mc is not None and len(mc)
              else "no memcpy rows")
    tabs = [t for t, k in (("GPU", "gpu_fault_table"), ("CPU", "cpu_fault_table")) if src[k]]
    faults = (f"UM {' and '.join(tabs)} page-fault table{'s' if len(tabs) > 1 else ''} empty" if tabs
              else "no UM page-fault tables")
    return f"no Unified Memory activity: {copies}; {faults}"


def _notes(src: Dict[str, bool], full: UmWindow) -> Tuple[str, ...]:
    out = []
    if not src["gpu_fault_table"]:
        out.append(f"GPU page faults not recorded (no {GPU_TABLE} table; nsys records them with "
                   "`--cuda-um-gpu-page-faults=true`).")
    if not src["cpu_fault_table"]:
        out.append(f"CPU page faults not recorded (no {CPU_TABLE} table; nsys records them with "
                   "`--cuda-um-cpu-page-faults=true`).")
    if full.migration_count and not any(r.key >= 0 for r in full.by_cause):
        out.append("Migration causes not recorded (migrationCause NULL or absent).")
    return tuple(out)


def analyze_unified_memory(model: TraceModel, steady: TraceModel, w0: int, w1: int, full_w0: int,
                           full_w1: int) -> UnifiedMemoryResult:
    """Unified Memory over the steady window ``[w0, w1)`` (``steady``: the model clipped to it, or ``model``
    itself when the window is the whole capture) and over the whole capture (every row of ``model``)."""
    gf, cf = model.um_gpu_faults, model.um_cpu_faults
    tables = model.info.tables if model.info is not None else {}
    src = {"gpu_fault_table": gf is not None, "cpu_fault_table": cf is not None,
           "migration_cause_column": "migrationCause" in tables.get("CUPTI_ACTIVITY_KIND_MEMCPY", [])}
    if um_rows(model.memcpy).shape[0] == 0 and not (gf is not None and len(gf)) and not (cf is not None and len(cf)):
        return UnifiedMemoryResult(False, _absent_reason(model, src), src)
    full = _window(model, "full", full_w0, full_w1)
    same = steady is model and (w0, w1) == (full_w0, full_w1)
    st = dataclasses.replace(full, window="steady") if same else _window(steady, "steady", w0, w1)
    return UnifiedMemoryResult(True, None, src, _notes(src, full), st, full)
