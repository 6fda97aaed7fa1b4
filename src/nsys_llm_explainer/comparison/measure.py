"""What the comparison reads from one typed report, over its steady window and the devices that ran kernels (busy,
idle by cause, non-overlapped busy per category, kernels by name, kernel starts: docs/COMPARE.md, "Where the
change comes from")."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, AbstractSet, Dict, FrozenSet, List, Optional, Sequence, Set, Tuple

import numpy as np

from ..analyses.idle.causes import cause_totals
from ..analyses.idle.result import DeviceCauses
from ..analyses.kernels.categories import CategoryResult, classify
from ..analyses.kernels.starts import KernelStarts
from ..analyses.steps.periods import PeriodSpan
from ..findings.launch_bound import launch_bound_devices
from ..vocabulary.os_calls import is_wait

if TYPE_CHECKING:
    from ..report import Report

GRAPH_UNTRACED = "graph_untraced"
NON_GPU = "non_gpu"
#: the ``launch`` detail that holds a launch-bound device's host-paced ``queued`` ns (docs/COMPARE.md, "Where the
#: change comes from"): the launch overhead the report's launch-bound finding counts with the launch calls
HOST_PACED = "host-paced queued"


@dataclass(frozen=True)
class Facts:
    """Raw per-trace numbers the comparison is built from (not serialized)."""

    label: str
    path: str
    report: Report
    pooled_window_ns: int
    busy_ns: int
    busy_pct: float
    device_count: int                             # devices counted (those that ran kernels; all when none did)
    kernels: Dict[str, Tuple[int, int]]           # name → (count, total ns) in the steady window
    idle_kind: Dict[str, int]                     # kind → idle ns
    idle_detail: Dict[Tuple[str, str], int]       # (kind, detail) → idle ns
    categories: Dict[str, int]                    # category → non-overlapped busy ns (+ graph_untraced)
    kernel_starts: KernelStarts                   # the steady window's kernel starts (anchor kernel periods)
    not_counted: Tuple[Tuple[int, str], ...] = ()  # (device id, role) of the devices that ran no kernel
    #: the whole step periods the parts (window, busy, idle, categories, kernels) are over, when not the window
    span: Optional[PeriodSpan] = None

    @property
    def non_gpu_ns(self) -> int:
        return self.pooled_window_ns - self.busy_ns


def _categories(cat: CategoryResult, busy_ns: int, counted: AbstractSet[int]) -> Dict[str, int]:
    """Non-overlapped time per category over the ``counted`` devices (those the pooled ``busy_ns`` sums), in the
    overall table's order; busy time no kernel explains is ``graph_untraced``."""
    per: Counter[str] = Counter()
    for d in cat.devices if cat.available else ():
        if d.device_id in counted:
            for c in d.categories:
                per[c.category] += int(c.nonoverlap_ns)
    out = {r.category: per[r.category] for r in (cat.overall if cat.available else ()) if per[r.category]}
    rest = busy_ns - sum(out.values())
    if rest > 0:
        out[GRAPH_UNTRACED] = rest
    return out


def _host_paced_to_launch(detail: Dict[Tuple[str, str], int], devs: List[DeviceCauses],
                          launch_bound: AbstractSet[int]) -> None:
    """Move the host-paced ``queued`` ns (``IdleCause.host_paced_ns``, docs/MODEL.md "Host-paced queued time") of
    the ``launch_bound`` devices among ``devs`` from their ``queued`` rows of ``detail`` to the ``launch`` detail
    :data:`HOST_PACED`, as the report's launch-bound finding counts them (:func:`findings.idle.launch_bound_devices`:
    one definition of a launch-bound device). A report loaded from report.json has no ``host_paced_ns`` (0): nothing
    moves, but compare refuses such a report (:func:`.core.compare_reports`)."""
    moved: Counter[Tuple[str, str]] = Counter()
    for d in devs:
        if d.device_id in launch_bound:
            for c in d.causes:
                if c.kind == "queued" and c.host_paced_ns > 0:
                    moved[(c.kind, c.detail)] += min(int(c.host_paced_ns), int(c.ns))
    for key, ns in sorted(moved.items()):
        left = detail[key] - ns
        if left > 0:
            detail[key] = left
        else:
            del detail[key]
        detail[("launch", HOST_PACED)] = detail.get(("launch", HOST_PACED), 0) + ns


def gather(rep: Report, label: str, path: str, periods: bool = False) -> Facts:
    """The numbers of ``rep`` the comparison uses (see module docstring); ``rep`` holds the steady window's kernel
    starts and categories (a report the analysis made, not one loaded from report.json). ``periods``: the parts are
    over the whole step periods of ``rep.period_parts`` when it has them (the devices counted: those of the window)."""
    assert rep.steady_kernel_starts is not None and rep.steady_categories is not None
    pooled = rep.gpu_time.pooled()
    pooled_ns, busy, busy_pct = ((int(pooled.window_ns), int(pooled.busy_ns), float(pooled.busy_pct))
                                 if pooled is not None else (int(rep.window.end_ns - rep.window.start_ns), 0, 0.0))
    counted = set(rep.gpu_time.kernel_devices())
    pp = rep.period_parts if periods else None
    idle, cats, sk = (pp.idle_causes, pp.categories, pp.kernels) if pp is not None else (
        rep.idle_causes, rep.steady_categories, rep.steady_kernels)
    devs = [dc for dc in idle.devices if dc.device_id in counted] if idle.available else []
    detail = {(c.kind, c.detail): int(c.ns) for c in cause_totals(devs)}
    _host_paced_to_launch(detail, devs, launch_bound_devices(rep.gpu_time).keys())
    kind: Counter[str] = Counter()
    for (k, _), ns in detail.items():
        kind[k] += ns
    if pp is not None:
        pooled_ns, busy = sum(int(d.window_ns) for d in devs), sum(int(d.busy_ns) for d in devs)
    rest = tuple((d.device_id, d.role) for d in rep.gpu_time.devices if d.device_id not in counted)
    kernels = {r.name: (int(r.count), int(r.total_ns)) for r in sk.by_name} if sk.available else {}
    return Facts(label, path, rep, pooled_ns, busy, busy_pct, len(counted) or len(rep.gpu_time.devices), kernels,
                 kind, detail, _categories(cats, busy, counted), rep.steady_kernel_starts, rest,
                 pp.span if pp is not None else None)


#: the host-side places of the idle-cause precedence (docs/MODEL.md rows 10, 11, 11b, 12), each a kind and, for
#: ``osrt``, whether its call waits: a thread outside CUDA calls takes the first place whose evidence covers it
HOST_PLACES = (("osrt", True), ("nvtx", None), ("osrt", False), ("host_cpu", None))
#: the evidence a capture may lack (its option), the host places it decides, and what it records
UNSEEN = (("osrt", (0, 2), "OS-runtime call (--trace=osrt)", "OS call"), ("nvtx", (1,), "NVTX range", "range"))
#: the folded kinds in the trace notes
UNSEEN_TEXT = {"osrt": "the host in an OS call", "nvtx": "the host inside NVTX ranges"}


def unseen(rep: Report) -> Tuple[str, ...]:
    """The kinds of :data:`UNSEEN` whose evidence the capture of ``rep`` lacks (no OS-runtime call, no NVTX range)."""
    has = {"osrt": rep.facts.os_runtime, "nvtx": rep.nvtx.available}
    return tuple(u[0] for u in UNSEEN if not has[u[0]])


def host_place(kind: str, detail: str) -> int:
    """The index in :data:`HOST_PLACES` of an idle cause (-1: not a host place)."""
    return next((i for i, (k, w) in enumerate(HOST_PLACES) if k == kind and w in (None, is_wait(detail))), -1)


def fold_unseen(f: Facts, first: int) -> Facts:
    """``f`` with the idle of every host place from ``first`` on counted as ``host_cpu`` (detail empty). A capture
    without the evidence of a place charges that place's time to the places after it (an OS call that waits inside an
    NVTX range to the range, one outside to ``host_cpu``; a range's time to the OS call that does not wait inside it,
    or ``host_cpu``), so only their sum can be set against it (docs/COMPARE.md, "Where the change comes from")."""
    moved = {k: ns for k, ns in f.idle_detail.items() if host_place(*k) >= first}
    if not sum(v for k, v in moved.items() if k[0] != "host_cpu"):
        return f
    detail = {k: v for k, v in f.idle_detail.items() if k not in moved}
    detail[("host_cpu", "")] = sum(moved.values())
    kind: Counter[str] = Counter()
    for (k, _), ns in detail.items():
        kind[k] += ns
    return replace(f, idle_kind=dict(kind), idle_detail=detail)


# ------------------------------------------------------------------------------------------ similarity
def shares(f: Facts) -> Dict[str, float]:
    tot = sum(ns for _, ns in f.kernels.values())
    return {n: ns / tot for n, (_, ns) in f.kernels.items()} if tot > 0 else {}


def weighted_jaccard(a: Facts, b: Facts) -> float:
    """Σ_name min(share_a, share_b) / Σ_name max(share_a, share_b), shares of steady-window kernel time; 0
    when either trace has no kernel time. Reported only: one kernel that got five times slower lowers it as much as
    another workload does, so it does not decide "too different" (:func:`kernel_time_in_common` does)."""
    sa, sb = shares(a), shares(b)
    if not sa or not sb:
        return 0.0
    names = sorted(set(sa) | set(sb))   # a fixed order: the float sums do not depend on string hashing
    lo = sum(min(sa.get(n, 0.0), sb.get(n, 0.0)) for n in names)
    hi = sum(max(sa.get(n, 0.0), sb.get(n, 0.0)) for n in names)
    return lo / hi if hi > 0 else 0.0


#: the low-precision number formats a kernel name can name, each with its marks (case-insensitive): a precision or
#: quantization change renames a layer's kernels by them (``Fp8KVCacheDataType``, an enum of every paged-attention
#: kernel, names no format)
PRECISIONS: Tuple[Tuple[str, str], ...] = (
    ("fp8", r"e4m3|e5m2|fp8(?!kvcache)|float8"),
    ("fp4", r"e2m1|fp4"),
    ("int8", r"int8|i8i8|s8s8|i8816|i16832|(?<![a-z])imma"),
    ("int4", r"int4|4bit|w4a(?:8|16)|marlin|machete|awq|gptq"),
)
_PRECISION_RX = tuple((t, re.compile(rx, re.IGNORECASE)) for t, rx in PRECISIONS)
#: launches per unit of work of two runs' renamed kernels are alike when they differ by at most this share of the larger
LAUNCH_TOLERANCE = 0.1
QUANTIZE = "quantize"
#: kernels of these categories are never paired by a precision change: ``other`` says no kind of work, and
#: ``quantize`` kernels are the price of a change (counted with it), not a renamed kernel
_NOT_PAIRED = ("other", QUANTIZE)


def precision_types(names: AbstractSet[str]) -> FrozenSet[str]:
    """The low-precision formats (:data:`PRECISIONS`) any of ``names`` names."""
    return frozenset(t for t, rx in _PRECISION_RX if any(rx.search(n) for n in names))


@dataclass(frozen=True)
class Renamed:
    """Kernel names of each run that the other did not run, counted as work in common: renamed by a precision change
    (docs/COMPARE.md, "Too short, too different")."""

    names: Tuple[FrozenSet[str], FrozenSet[str]] = (frozenset(), frozenset())   # of a, of b
    categories: Tuple[str, ...] = ()                                            # the categories renamed
    types: Tuple[FrozenSet[str], FrozenSet[str]] = (frozenset(), frozenset())   # formats of a's, b's renamed names
    quantize: Tuple[bool, bool] = (False, False)     # a's / b's own ``quantize`` kernels counted with the change
    launches: Tuple[float, float] = (0.0, 0.0)       # launches per unit of work of a's, b's renamed names

    def __bool__(self) -> bool:
        return bool(self.categories)


#: nothing renamed
NOT_RENAMED = Renamed()


def _only(f: Facts, other: Facts) -> Dict[str, List[str]]:
    """Category → the kernel names ``f`` ran and ``other`` did not (sorted), by ``f``'s own category rules."""
    rules = f.report.categories.rules
    only = sorted(n for n in f.kernels if n not in other.kernels)
    if rules is None or not only:
        return {}
    cats = rules.categories
    out: Dict[str, List[str]] = {}
    for n, i in zip(only, classify(only, rules).tolist()):
        out.setdefault(cats[i], []).append(n)
    return out


def renamed_kinds(a: Facts, b: Facts) -> Tuple[str, ...]:
    """The kernel categories (never ``other``) of which each of ``a`` and ``b`` ran names the other did not: kernels of
    one kind under other names (another library, version, GPU or precision), by each run's own category rules."""
    return tuple(sorted((set(_only(a, b)) & set(_only(b, a))) - {"other"}))


def _rest_in_common(f: Facts, other: Facts, renamed: AbstractSet[str]) -> float:
    """Share of ``f``'s kernel time outside the ``renamed`` names spent in names ``other`` also ran (1 when no time
    is left outside them)."""
    rest = [(n, ns) for n, (_, ns) in sorted(f.kernels.items()) if n not in renamed]
    tot = sum(ns for _, ns in rest)
    return sum(ns for n, ns in rest if n in other.kernels) / tot if tot > 0 else 1.0


def precision_renamed(a: Facts, b: Facts, units_a: Optional[float], units_b: Optional[float],
                      min_share: float) -> Renamed:
    """The kernel names of ``a`` and ``b`` that a precision / quantization change renamed, by kernel category: both
    ran names of it the other did not, launching alike per unit of work (:data:`LAUNCH_TOLERANCE`) and naming
    different formats (:func:`precision_types`), the rest of each run at least ``min_share`` in common (the rule:
    docs/COMPARE.md, "Too short, too different"); :data:`NOT_RENAMED` without units of work on both sides."""
    if not units_a or not units_b or units_a <= 0 or units_b <= 0 or set(a.kernels) <= set(b.kernels) or \
            set(b.kernels) <= set(a.kernels):   # a run that ran only names the other ran renamed nothing
        return NOT_RENAMED
    only_a, only_b = _only(a, b), _only(b, a)
    cats = [c for c in sorted(set(only_a) & set(only_b)) if c not in _NOT_PAIRED]
    names: Tuple[List[str], List[str]] = ([], [])
    types: Tuple[Set[str], Set[str]] = (set(), set())
    launches = [0.0, 0.0]
    paired: List[str] = []
    for c in cats:
        sides = (only_a[c], only_b[c])
        per = [sum(f.kernels[n][0] for n in ns) / u for f, ns, u in zip((a, b), sides, (units_a, units_b))]
        ts = [precision_types(set(ns)) for ns in sides]
        if ts[0] != ts[1] and abs(per[0] - per[1]) <= LAUNCH_TOLERANCE * max(per):
            paired.append(c)
            for i in (0, 1):
                names[i].extend(sides[i])
                types[i].update(ts[i])
                launches[i] += per[i]
    if not paired:
        return NOT_RENAMED
    quant = [False, False]
    for i, (f, only, u) in enumerate(((a, only_a, units_a), (b, only_b, units_b))):
        q = only.get(QUANTIZE, [])
        if q and types[i] - types[1 - i] and sum(f.kernels[n][0] for n in q) / u <= launches[i]:
            names[i].extend(q)
            quant[i] = True
    sets = (frozenset(names[0]), frozenset(names[1]))
    if min(_rest_in_common(a, b, sets[0]), _rest_in_common(b, a, sets[1])) < min_share:
        return NOT_RENAMED
    return Renamed(sets, tuple(paired), (frozenset(types[0]), frozenset(types[1])), (quant[0], quant[1]),
                   (launches[0], launches[1]))


def kernel_time_in_common(a: Facts, b: Facts, renamed: Renamed = NOT_RENAMED) -> Tuple[float, float]:
    """(share of ``a``'s steady-window kernel time spent in kernel names ``b`` also ran, the same for ``b``); (0, 0)
    when either has no kernel time. It does not depend on how the time spreads over the common names, so a kernel
    that got slower (or faster) leaves it at 1, while another model, engine or phase runs other kernels. The names of
    ``renamed`` (:func:`precision_renamed`) count as names the other also ran."""
    sa, sb = shares(a), shares(b)
    if not sa or not sb:
        return 0.0, 0.0
    ra, rb = renamed.names
    # sorted: a fixed order, so the float sums do not depend on string hashing
    return (sum(v for n, v in sorted(sa.items()) if n in sb or n in ra),
            sum(v for n, v in sorted(sb.items()) if n in sa or n in rb))


# ------------------------------------------------------------------------------------------ anchor kernel
#: two anchor intervals last alike when the shorter is at least this share of the longer (a host gap that adds a third
#: of an interval or more is part of the loop's structure, not jitter: docs/COMPARE.md, "The headline metric")
ALIKE = 0.75


@dataclass(frozen=True)
class RepeatCounts:
    """Per ``k`` of ``ks``, over the devices: ``pairs`` of anchor intervals ``[a_i, a_i+1)`` and ``[a_i+k, a_i+k+1)``
    (same device), how many hold as many kernels (``same_count``) and how many last alike (``alike``: the shorter at
    least :data:`ALIKE` of the longer)."""

    ks: np.ndarray
    pairs: np.ndarray
    same_count: np.ndarray
    alike: np.ndarray


def repeat_counts(per_device: List[Tuple[np.ndarray, np.ndarray]], ks: Sequence[int]) -> RepeatCounts:
    """The :class:`RepeatCounts` of the anchor starts ``per_device`` ((anchor starts, all kernel starts) per device)
    for each ``k`` of ``ks``: one pass of array operations per ``k`` and device (no loop over intervals)."""
    # x, y ≥ 0 last alike when min ≥ ALIKE × max, i.e. x ≥ ALIKE × y and y ≥ ALIKE × x (ALIKE × d computed once;
    # float64 holds every ns interval exactly, and compares as the int64 would be cast)
    iv = [(np.diff(np.searchsorted(allk, a)), d, ALIKE * d)
          for a, allk in per_device for d in (np.diff(a).astype(np.float64),)]
    out = np.zeros((3, len(ks)), np.int64)
    for j, k in enumerate(ks):
        for sig, d, e in iv:
            if d.shape[0] > k:
                out[:, j] += (d.shape[0] - k, np.count_nonzero(sig[k:] == sig[:-k]),
                              np.count_nonzero((d[k:] >= e[:-k]) & (d[:-k] >= e[k:])))
    return RepeatCounts(np.asarray(ks, np.int64), out[0], out[1], out[2])


def anchor_periods(per_device: List[Tuple[np.ndarray, np.ndarray]], k: int) -> Tuple[np.ndarray, int, int]:
    """(samples start[i+k] − start[i] over devices, complete iterations Σ (n−1)//k, anchor instances)."""
    samples = [a[k:] - a[:-k] for a, _ in per_device if a.shape[0] > k]
    s = np.concatenate(samples) if samples else np.empty(0, np.int64)
    return s, sum((a.shape[0] - 1) // k for a, _ in per_device), sum(int(a.shape[0]) for a, _ in per_device)


def steps_in_window(f: Facts) -> float:
    """Steps inside the steady window: Σ over steps of the fraction of the step's wall inside it."""
    return f.report.steps.inside(f.report.window.start_ns, f.report.window.end_ns)


def step_sequences(f: Facts, by: str) -> int:
    """The step sequences run side by side in the steady window: the distinct ``by`` (``pid``: NVTX steps, one
    sequence per process; ``device``: marker-kernel steps) of the steps that overlap it."""
    a, w = f.report.steps.arrays, f.report.window
    if not f.report.steps.available or a is None or len(a) == 0:
        return 0
    inside = (a.end > w.start_ns) & (a.start < w.end_ns)
    return int(np.unique(getattr(a, by)[inside]).shape[0])
