"""What the host ran during host-side GPU idle: the CPU samples of the gaps' host thread inside each device's
host-side idle pieces, counted by module group, module, function and caller, each with the idle time it stands
for. Definitions: docs/MODEL.md, "What the host ran during host-side idle".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from ...jsonable import NONE_OMITTED, FieldsJson, json_name
from ...model.intervals import points_inside, union_blocks
from ...model.names import distinct_small
from ...model.samples import GROUP_KEYS, GROUP_LABEL, GROUPS, CpuSamples, module_group
from ...model.timeline import rows_by_value
from ...model.trace import TraceModel, pid_of, tid_of
from ...vocabulary.cause_kinds import HOST_PIECE_KINDS, KINDS
from ...vocabulary.code_spans import code_name
from ...vocabulary.units import fmt_dur as dur
from ..common.processes import OtherProcess, sampled_processes
from ..common.stats import int_sums, pct
from .pieces import Cover
from .result import DeviceCauses, IdleCausesResult

#: entries per list (modules, functions, callers)
TOP = 5
#: per-cause (kind, detail) entries kept per device: the largest causes (by idle ns) with a sample
CAUSE_LIMIT = 100
#: entries per list of a per-cause entry
CAUSE_TOP = 3
#: kinds the evidence line and the idle-cause table speak for
SHOWN_KINDS = ("host_cpu", "nvtx")
#: other processes kept per device in :class:`UnsampledGaps` (most samples first)
UNSAMPLED_TOP = 20
#: where report.json lists them (the report's ``host_samples`` value, its ``unsampled`` field)
UNSAMPLED_KEY = "host_samples.unsampled"

#: how to capture samples (Nsight Systems CLI; docs/MODEL.md cites the sources)
CAPTURE_HINT = ("capture with CPU sampling on: `nsys profile --sample=process-tree` (Nsight Systems 2022.1 and "
                "later, where it is the default unless `--sample=none` is given; `--sample=cpu` in 2021.x); recent "
                "versions also sample Python frames with `--python-sampling=true` — check `nsys profile --help` "
                "for the options your version has")
NO_SAMPLES = "the trace has no CPU samples (COMPOSITE_EVENTS / SAMPLING_CALLCHAINS absent or empty)"
#: what the shares of the evidence line are (and are not)
SHARES_NOTE = ("These are shares of the samples, taken only while the thread ran on a CPU, not of the idle time: "
               "a thread off the CPU (sleeping, blocked) is not sampled.")
REQUESTED_EMPTY = ("CPU sampling was on in the capture (COLLECT_IP_BACKTRACE_SAMPLES) but no samples were "
                   "recorded: the system may not allow it (`nsys status --environment` shows why)")


@dataclass(frozen=True)
class Share(FieldsJson):
    """One row of a list: ``name`` (group label, module file, or function symbol), ``module`` (the module file
    of a function, else ""), ``group`` (module group label), ``count``, ``pct`` of the scope's samples, ``est_ns``."""

    name: str
    module: str
    group: str
    count: int
    pct: float
    est_ns: int


@dataclass(frozen=True)
class ScopeSamples(FieldsJson):
    """Samples inside the pieces of one kind (``detail`` None) or one cause (kind, detail) of a device."""

    kind: str
    detail: Optional[str]
    idle_ns: int
    samples: int
    groups: Tuple[Share, ...]
    modules: Tuple[Share, ...]
    functions: Tuple[Share, ...]
    callers: Tuple[Share, ...]


@dataclass(frozen=True)
class DeviceHostSamples(FieldsJson):
    device_id: int
    threads: Tuple[int, ...]           # the gaps' host threads (serialized globalTid) of this device's pieces
    thread_samples: int                # samples read of those threads (the traced span)
    samples_inside: int                # of them inside a host-side piece of this device
    kinds: Tuple[ScopeSamples, ...]    # per host kind with idle ns, largest idle first
    causes: Tuple[ScopeSamples, ...]   # per cause with ≥ 1 sample, the CAUSE_LIMIT largest by idle ns
    note: Optional[str] = None         # why a kind has no samples (none on the thread / none in the gaps)

    def kind(self, kind: str) -> Optional[ScopeSamples]:
        return next((k for k in self.kinds if k.kind == kind), None)


@dataclass(frozen=True)
class UnsampledGaps(FieldsJson):
    """One device's ``host_cpu`` idle pieces of its gaps' host thread (the one holding most of that kind's ns there)
    that hold none of that thread's CPU samples — it did not run on a CPU there, or ran too briefly to be sampled —
    and which other processes were sampled running in them: ``idle_ns`` Σ their length, ``pieces`` their count;
    ``own_samples`` the samples of the thread's process's other threads inside them; ``process_samples`` the other
    processes' (``own_samples`` + ``process_samples``: every sample inside them, none of them the thread's);
    ``processes`` those processes, most samples first (the :data:`UNSAMPLED_TOP` largest). docs/MODEL.md, "CPU
    samples during the waits"."""

    device_id: int
    gtid: int
    pid: int
    tid: int
    thread: str
    kind_ns: int       # all the device's ``host_cpu`` idle of that thread
    idle_ns: int
    pieces: int
    own_samples: int
    process_samples: int
    processes: Tuple[OtherProcess, ...]

    def sampled_elsewhere(self) -> int:
        """Every CPU sample inside these pieces (none is the thread's)."""
        return self.own_samples + self.process_samples


@dataclass(frozen=True)
class HostSamplesResult(FieldsJson):
    available: bool                    # samples were matched against idle pieces
    reason: Optional[str]
    captured: bool                     # the trace has CPU samples
    sampling_requested: Optional[bool]  # capture metadata: sampling on (None: not recorded)
    sample_count: int                  # every sample of the trace (all threads)
    samples_read: int                  # samples of the CUDA-calling threads in the traced span
    caller_depth: int = 0
    # report.json only (the lists' lengths, how to capture samples, the module groups): the same for every result
    top: int = field(default=TOP, init=False)
    cause_limit: int = field(default=CAUSE_LIMIT, init=False)
    capture_hint: str = field(default=CAPTURE_HINT, init=False)
    groups: Tuple[Tuple[str, str], ...] = field(default=GROUPS, init=False, metadata=json_name(rows=("key", "label")))
    devices: Tuple[DeviceHostSamples, ...] = ()
    #: per device with ``host_cpu`` pieces its host thread was not sampled in (None: the trace has no CPU samples)
    unsampled: Optional[Tuple[UnsampledGaps, ...]] = field(default=None, metadata=NONE_OMITTED)

    def device(self, device_id: int) -> Optional[DeviceHostSamples]:
        return next((d for d in self.devices if d.device_id == device_id), None)

    def unsampled_of(self, device_id: int) -> Optional[UnsampledGaps]:
        return next((u for u in self.unsampled or () if u.device_id == device_id), None)


# ------------------------------------------------------------------------------------------ counting
def _shares(codes: np.ndarray, total: int, scope_ns: int, names: Sequence[str], modules: Sequence[str],
            groups: Sequence[str], limit: int) -> Tuple[Share, ...]:
    """Top ``limit`` codes (indices into ``names``) by count (then name) as :class:`Share` rows (``limit`` < 0:
    every code present)."""
    if codes.shape[0] == 0 or total == 0:
        return ()
    present, inv = distinct_small(codes)
    cnt = np.bincount(inv)
    order = sorted(range(present.shape[0]), key=lambda i: (-int(cnt[i]), names[int(present[i])]))
    if limit >= 0:
        order = order[:limit]
    out = []
    for i in order:
        c, k = int(present[i]), int(cnt[i])
        out.append(Share(names[c], modules[c], groups[c], k, pct(k, total), (k * scope_ns * 2 + total) // (2 * total)))
    return tuple(out)


#: distinct display names, their module files and group labels
Names = Tuple[List[str], List[str], List[str]]


def _interned(names: Sequence[str], modules: Sequence[str], groups: Sequence[str]) -> Tuple[np.ndarray, Names]:
    """Per entry, the index of its (name, module) among the distinct ones in first-seen order; and those (each
    with the group of its first entry)."""
    first: Dict[Tuple[str, str], Tuple[int, str]] = {}
    idx = np.array([first.setdefault((n, m), (len(first), g))[0] for n, m, g in zip(names, modules, groups)],
                   np.int64)
    return idx, ([n for n, _ in first], [m for _, m in first], [g for _, g in first.values()])


@dataclass
class _Frames:
    """The frame tables of a :class:`CpuSamples` mapped (once per run, per distinct frame) to functions (display
    symbol + module file: the unresolved addresses of one module are one function) and to module files."""

    s: CpuSamples
    labels: List[str]
    fn_of_frame: np.ndarray       # frame → function index
    fns: Names
    mod_of_frame: np.ndarray      # frame → module index
    mods: Names

    @classmethod
    def of(cls, s: CpuSamples) -> _Frames:
        labels = [GROUP_LABEL[k] for k in GROUP_KEYS]
        fof, fns = _interned(s.frame_symbol, s.frame_module, [labels[int(g)] for g in s.frame_group.tolist()])
        mof, mods = _interned(s.frame_module, [""] * len(s.frame_module),   # a module's group: by its name alone
                              [GROUP_LABEL[module_group(m)] for m in s.frame_module])
        return cls(s, labels, fof, fns, mof, mods)

    def scope(self, kind: str, detail: Optional[str], rows: np.ndarray, ns: int, top: int) -> ScopeSamples:
        s = self.s
        leaf, caller = s.leaf[rows], s.caller[rows]
        n = int(rows.shape[0])
        g = s.frame_group[leaf].astype(np.int64)
        groups = _shares(g, n, ns, self.labels, [""] * len(self.labels), self.labels, -1)
        mods = _shares(self.mod_of_frame[leaf], n, ns, *self.mods, top)
        fns = _shares(self.fn_of_frame[leaf], n, ns, *self.fns, top)
        callers = _shares(self.fn_of_frame[caller], n, ns, *self.fns, top)
        return ScopeSamples(kind, detail, ns, n, groups, mods, fns, callers)


def _inside(s: CpuSamples, start: np.ndarray, end: np.ndarray, gtid: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """(sample rows, piece index) of the samples inside a piece of the same thread (pieces sorted, disjoint)."""
    lo, hi = (int(np.searchsorted(s.start, start[0], "left")), int(np.searchsorted(s.start, end[-1], "left"))) \
        if start.shape[0] and len(s) else (0, 0)
    if hi <= lo:
        e = np.empty(0, np.int64)
        return e, e
    j = Cover(start, end).row(s.start[lo:hi])
    rows = np.nonzero((j >= 0) & (s.gtid[lo:hi] == gtid[j]))[0]
    return rows + lo, j[rows]


def _device(fr: _Frames, dc: DeviceCauses) -> DeviceHostSamples:
    s = fr.s
    p = dc.pieces
    kind_ns = {k: dc.ns_of(k) for k in HOST_PIECE_KINDS}
    kinds_present = sorted((k for k, v in kind_ns.items() if v > 0), key=lambda k: (-kind_ns[k], k))
    if p is None or len(p) == 0:
        return DeviceHostSamples(dc.device_id, (), 0, 0, tuple(ScopeSamples(k, None, kind_ns[k], 0, (), (), (), ())
                                                               for k in kinds_present), ())
    keep = p.end > p.start
    start, end, gt = p.start[keep], p.end[keep], p.gtid[keep]
    kcode, dcode = np.asarray(p.kind)[keep].astype(np.int64), np.asarray(p.detail)[keep].astype(np.int64)
    threads = tuple(int(g) for g in np.unique(gt).tolist())
    thread_samples = sum(s.per_thread.get(g, 0) for g in threads)
    rows, piece = _inside(s, start, end, gt)
    pk, pd = kcode[piece], dcode[piece]
    kinds = [fr.scope(k, None, rows[pk == KINDS.index(k)], kind_ns[k], TOP) for k in kinds_present]
    ndet = max(len(p.details), 1)
    seg = {(KINDS[c // ndet], p.details[c % ndet]): r for c, r in rows_by_value(pk * ndet + pd)}
    causes = [fr.scope(c.kind, c.detail, rows[seg[(c.kind, c.detail)]], c.ns, CAUSE_TOP)   # dc.causes: largest first
              for c in [c for c in dc.causes if (c.kind, c.detail) in seg][:CAUSE_LIMIT]]
    note = None
    if rows.shape[0] == 0:
        if thread_samples == 0:
            note = ("no CPU samples of the gaps' host thread" + ("s" if len(threads) > 1 else "") +
                    " (the samples in the trace are of other threads)")
        else:
            note = (f"the gaps' host thread has {thread_samples:,} CPU samples in the traced span, none inside its "
                    "host-side idle pieces on this device")
    return DeviceHostSamples(dc.device_id, threads, thread_samples, int(rows.shape[0]), tuple(kinds), tuple(causes),
                             note)


def device_unsampled_gaps(steady: TraceModel, device_causes: DeviceCauses) -> Optional[UnsampledGaps]:
    """The :class:`UnsampledGaps` of one device (in its turn of the device pass, while its pieces are alive; read
    from ``steady.wait_samples``); None: the trace has no CPU samples, or no such piece."""
    s, p = steady.wait_samples, device_causes.pieces
    if s is None or s.total == 0 or p is None or len(p) == 0:
        return None
    hk = (np.asarray(p.kind) == KINDS.index("host_cpu")) & (p.end > p.start) & (p.gtid >= 0)
    if not hk.any():
        return None
    st, en, gt = p.start[hk], p.end[hk], np.asarray(p.gtid[hk], np.int64)
    threads, inv = distinct_small(gt)
    ns = int_sums(inv, en - st, threads.shape[0])
    g = int(threads[int(np.argmax(ns))])             # the thread holding most of it (ties: the lowest gtid)
    m = gt == g
    st, en = st[m], en[m]                            # one thread's pieces: sorted, disjoint
    lo, hi = np.searchsorted(s.start, [int(st[0]), int(en[-1])], side="left").tolist()
    t, tg = s.start[lo:hi], s.gtid[lo:hi]
    j = Cover(st, en).row(t)
    seen = np.zeros(st.shape[0], bool)
    seen[j[(j >= 0) & (tg == g)]] = True             # a piece with a sample of the thread: it ran there
    keep = ~seen
    if not keep.any():
        return None
    w = union_blocks(st[keep], en[keep])
    pid = int(pid_of(np.array([g], np.int64))[0])
    inside = points_inside(w, t)
    own = int((inside & (pid_of(tg) == pid) & (tg != g)).sum())
    procs = sampled_processes(steady, pid, w, own)
    total, rows = procs if procs is not None else (0, ())
    return UnsampledGaps(device_causes.device_id, g, pid, int(tid_of(np.array([g], np.int64))[0]),
                         steady.thread_labels.get(g, ""), int(ns.max()), w.length, int(keep.sum()), own, total,
                         rows[:UNSAMPLED_TOP])


def host_sample_frames(model: TraceModel) -> Optional[_Frames]:
    """The capture's CPU samples prepared for :func:`device_host_samples` (None when there are none to split)."""
    samples = model.samples
    usable = samples is not None and samples.total > 0 and len(samples) > 0
    return _Frames.of(samples) if usable and samples is not None else None


def device_host_samples(host_sample_frames: Optional[_Frames], device_causes: DeviceCauses
                        ) -> Optional[DeviceHostSamples]:
    """The samples inside one device's host-side idle pieces, computed in its turn of the device pass while its
    pieces are alive (past the run's budget of kept pieces they are dropped after that turn: causes.PIECES_KEPT)."""
    return _device(host_sample_frames, device_causes) if host_sample_frames is not None else None


def analyze_host_samples(samples: Optional[CpuSamples], causes: IdleCausesResult,
                         devices: Optional[Sequence[Optional[DeviceHostSamples]]] = None,
                         unsampled: Optional[Sequence[Optional[UnsampledGaps]]] = None) -> HostSamplesResult:
    """The result (module docstring) from the whole capture's ``samples``: ``devices`` computed in the device pass
    (:func:`device_host_samples`; else here from the pieces kept on ``causes``) and their ``unsampled`` gaps."""
    if samples is None or samples.total == 0:
        requested = samples.requested if samples is not None else None
        reason = REQUESTED_EMPTY if requested else NO_SAMPLES
        return HostSamplesResult(False, f"{reason}; {CAPTURE_HINT}", False, requested, 0, 0)
    gaps = tuple(u for u in unsampled or () if u is not None)

    def result(available: bool, reason: Optional[str], devices: Tuple[DeviceHostSamples, ...] = ()
               ) -> HostSamplesResult:
        assert samples is not None
        return HostSamplesResult(available, reason, True, samples.requested, samples.total, len(samples),
                                 samples.caller_depth, devices, gaps)
    if not causes.available:
        return result(False, f"no idle causes to split ({causes.reason})")
    if len(samples) == 0:
        return result(False, f"the trace has {samples.total:,} CPU samples, none of a thread that made "
                             "CUDA calls (only those can be a gap's host thread)")
    computed = tuple(d for d in devices if d is not None) if devices is not None else ()
    if len(computed) == len(causes.devices):
        return result(True, None, computed)
    fr = _Frames.of(samples)
    return result(True, None, tuple(_device(fr, d) for d in causes.devices))


# ------------------------------------------------------------------------------------------ evidence

def samples_evidence(result: Optional[HostSamplesResult], device_id: int, kind: str) -> Optional[str]:
    """One evidence line for the idle finding of ``kind`` on ``device_id``: the top sampled module groups and
    callers inside that kind's pieces, or why there are none (``None`` when the result is missing)."""
    if result is None:
        return None
    if not result.captured:
        return ("What the host ran in these gaps is unknown: " + (REQUESTED_EMPTY if result.sampling_requested
                                                                    else NO_SAMPLES) + ".")
    if not result.available:
        return f"CPU samples: {result.reason}."
    d = result.device(device_id)
    if d is None:
        return None
    k = d.kind(kind)
    if k is None or k.samples == 0:
        why = d.note or f"none of the {d.thread_samples:,} samples of the gaps' host thread fall inside them"
        return f"CPU samples: {why}."
    # shares of the samples only, never times: a sample stands for a sampling period the thread ran on a CPU, and
    # the export does not record that period as a time (docs/MODEL.md, "What the host ran during host-side idle")
    groups = ", ".join(f"{g.name} {g.pct:.0f} %"
                       for i, g in enumerate(k.groups[:3]) if i == 0 or g.pct >= 1.0)
    callers = "; ".join(f"{code_name(c.name)} ({c.module}) {c.pct:.0f} %"
                        for i, c in enumerate(k.callers[:3]) if i == 0 or c.pct >= 1.0)
    return (f"CPU samples of the launching thread inside these gaps ({k.samples:,} over {dur(k.idle_ns)} of "
            f"idle): {groups} of the samples. {SHARES_NOTE} Top code: {callers}.")


__all__ = ["CAPTURE_HINT", "DeviceHostSamples", "HostSamplesResult", "ScopeSamples", "Share", "UnsampledGaps",
           "analyze_host_samples", "device_unsampled_gaps", "samples_evidence"]
