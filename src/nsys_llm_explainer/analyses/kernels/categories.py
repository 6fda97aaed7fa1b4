"""Kernel categories: what kind of work the GPU time went to (GEMM, attention, NCCL, …), by ordered regex rules
(first match wins) from a preset and the user's ``--categories`` file, read and validated by
:mod:`config.categories`. Definitions: docs/FINDINGS.md, "Kernel categories".
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from ...config.categories import (
    CategoryRules,
    PresetRules,
    build_rules,
)
from ...config.patterns import first_match, for_matching
from ...jsonable import NOT_IN_JSON, FieldsJson, Outcome
from ...model.names import distinct_small
from ...model.timeline import copy_kind_label, rows_by_value
from ...model.trace import Memcpy, TraceModel
from ...vocabulary.units import fmt_pct
from ..common.stats import pct
from ..trace.window import WindowResult
from .category_split import device_split
from .summary import TopKernel

TOP_KERNELS = 5
OTHER_TOP_KERNELS = 15


# ----------------------------------------------------------------------------------------------------------
# classification


def classify(names: Sequence[str], rules: CategoryRules) -> np.ndarray:
    """Category index (into ``rules.categories``) per distinct name; loops over rules × unmatched names. The
    user's rules (first in ``rules``) are matched in bounded time (:func:`config.patterns.first_match`: an
    :class:`OptionError` naming the rules file when one runs too long), the built-in ones here."""
    names = for_matching(names)
    cats = rules.categories
    index = {c: i for i, c in enumerate(cats)}
    out = np.full(len(names), index["other"], np.int64)
    todo = list(range(len(names)))
    compiled = rules.compiled()
    n_user = len(rules.user_rules) if rules.rules[:len(rules.user_rules)] == rules.user_rules else 0
    if n_user and todo:
        where = f"{rules.source}: " if rules.source else ""
        first = first_match([rx for rx, _ in rules.user_rules], names,
                            "categories_file" if rules.source else "categories",
                            [f"{where}rule #{j + 1} {rx!r}" for j, (rx, _) in enumerate(rules.user_rules)])
        for i, j in enumerate(first):
            if j >= 0:
                out[i] = index[rules.user_rules[j][1]]
        todo = [i for i, j in enumerate(first) if j < 0]
        compiled = compiled[n_user:]
    for pattern, cat in compiled:
        if not todo:
            break
        ci = index[cat]
        rest = []
        for i in todo:
            if pattern.search(names[i]):
                out[i] = ci
            else:
                rest.append(i)
        todo = rest
    return out


def _name_time(name_idx: np.ndarray, dur: np.ndarray, n_names: int) -> Tuple[np.ndarray, np.ndarray]:
    """(count, total_ns) per name index (exact while sums stay below 2**53 ns)."""
    cnt = np.bincount(name_idx, minlength=n_names).astype(np.int64)
    tot = np.rint(np.bincount(name_idx, weights=dur.astype(np.float64), minlength=n_names)).astype(np.int64)
    return cnt, tot


def detect_engine(names: Sequence[str], name_total_ns: np.ndarray, engines: Sequence[PresetRules]
                  ) -> Tuple[Optional[str], Dict[str, float]]:
    """Engine preset among ``engines`` (in tie-break order) whose ``detect`` regexes match the most kernel time
    (None if none matches)."""
    total = int(name_total_ns.sum())
    shares: Dict[str, float] = {}
    best, best_ns = None, 0
    live = [i for i in range(len(names)) if name_total_ns[i] > 0]
    text = dict(zip(live, for_matching([names[i] for i in live])))
    for eng in engines:
        pats = [re.compile(p, re.IGNORECASE) for p in eng.detect]
        ns = sum(int(name_total_ns[i]) for i in live if any(p.search(text[i]) for p in pats))
        shares[eng.name] = pct(ns, total)
        if ns > best_ns:
            best, best_ns = eng.name, ns
    return best, shares


@dataclass(frozen=True)
class CategoryShare(FieldsJson):
    """One category in a scope (a device, a phase; docs/FINDINGS.md): kernels, summed and non-overlapped time."""

    category: str
    count: int
    total_ns: int
    pct: float
    nonoverlap_ns: int
    nonoverlap_pct: float


@dataclass(frozen=True)
class CategoryRow(CategoryShare):
    """One category over all devices (:class:`CategoryShare`) and its largest kernel names."""

    top_kernels: Tuple[TopKernel, ...] = ()


@dataclass(frozen=True)
class CategoryDevice(FieldsJson):
    """The categories of one device: its kernels, their summed time and its busy time (ns)."""

    device_id: int
    kernel_count: int
    total_kernel_ns: int
    busy_ns: int
    categories: Tuple[CategoryShare, ...]


@dataclass(frozen=True)
class CategoryPhase(FieldsJson):
    """The categories of one phase's kernels (``phase`` None: kernels of no phase, ``phase_index`` -1)."""

    phase: Optional[str]
    phase_index: int
    kernel_count: int
    total_kernel_ns: int
    busy_ns: int
    categories: Tuple[CategoryShare, ...]


@dataclass(frozen=True)
class CategoryResult(Outcome):
    preset: str = "generic"
    preset_reason: str = ""
    detect_pct: Dict[str, float] = field(default_factory=dict)
    rules_file: Optional[str] = None
    rules_replaced: bool = False
    rule_count: int = 0
    include_memcpy: bool = False
    categories: Tuple[str, ...] = ()
    kernel_count: int = 0
    total_kernel_ns: int = 0
    busy_ns: int = 0
    other_ns: int = 0
    other_pct: float = 0.0
    overall: Tuple[CategoryRow, ...] = ()
    devices: Tuple[CategoryDevice, ...] = ()
    phases: Tuple[CategoryPhase, ...] = ()
    other_top_kernels: Tuple[TopKernel, ...] = ()
    # helpers, not in to_dict(): the rules applied, category index per kernel name
    rules: Optional[CategoryRules] = field(default=None, metadata=NOT_IN_JSON)
    name_category: Optional[np.ndarray] = field(default=None, metadata=NOT_IN_JSON)


def _order(count: np.ndarray, total: np.ndarray, nonov: np.ndarray) -> List[int]:
    """Categories present, by nonoverlap_ns desc, then total_ns desc, then category index."""
    present = np.flatnonzero(count > 0)
    return sorted(present.tolist(), key=lambda i: (-int(nonov[i]), -int(total[i]), i))


def _rows(cats: List[str], count: np.ndarray, total: np.ndarray, nonov: np.ndarray, total_all: int,
          busy: int) -> Tuple[CategoryShare, ...]:
    """Category rows of a device or phase (see :func:`_order`)."""
    return tuple(CategoryShare(category=cats[i], count=int(count[i]), total_ns=int(total[i]),
                               pct=pct(int(total[i]), total_all), nonoverlap_ns=int(nonov[i]),
                               nonoverlap_pct=pct(int(nonov[i]), busy)) for i in _order(count, total, nonov))


def _top(members: np.ndarray, names: List[str], n_cnt: np.ndarray, n_tot: np.ndarray, n: int
         ) -> Tuple[TopKernel, ...]:
    """The ``n`` names among ``members`` with the largest total_ns (ties: lower name index)."""
    top = members[np.lexsort((members, -n_tot[members]))][:n]
    return tuple(TopKernel(names[i], int(n_cnt[i]), int(n_tot[i])) for i in top.tolist())


def analyze_categories(model: TraceModel, rules: Optional[CategoryRules] = None,
                       kernel_phase: Optional[np.ndarray] = None, phase_names: Optional[Sequence[str]] = None,
                       include_memcpy: bool = False) -> CategoryResult:
    k = model.kernels
    if k is None or len(k) == 0:
        return CategoryResult(False, "no CUDA kernels were captured — nothing to categorize")
    if kernel_phase is not None and np.shape(kernel_phase)[0] != len(k):
        raise ValueError(f"kernel_phase has {np.shape(kernel_phase)[0]} entries for {len(k)} kernels")
    rules = rules or build_rules(None)   # built-in presets, parsed once by config
    names = list(k.names)
    name_idx = k.name_idx                    # int32: every per-row array below stays as small as its values allow
    n_cnt, n_tot = _name_time(name_idx, k.end - k.start, len(names))
    detect_pct: Dict[str, float] = {}
    if rules.preset == "auto":
        eng, detect_pct = detect_engine(names, n_tot, rules.engine_presets())
        shares = ", ".join(f"{e} {fmt_pct(v)} %" for e, v in detect_pct.items())
        if eng is None:
            rules = rules.with_preset("generic", f"auto: no engine-specific kernel names found ({shares})")
        else:
            rules = rules.with_preset(eng, f"auto: {eng} kernel names cover the most kernel time ({shares})")
    cats = rules.categories
    n_cat = len(cats)
    other = cats.index("other")
    name_cat = classify(names, rules)

    start, end = np.asarray(k.start, np.int64), np.asarray(k.end, np.int64)
    dev = k.device
    row_name = name_idx
    all_names = names
    phase = (np.maximum(np.asarray(kernel_phase), -1).astype(np.int32) if kernel_phase is not None
             else np.full(len(k), -1, np.int32))
    if include_memcpy:
        extra_s, extra_e, extra_d, extra_n = [], [], [], []
        all_names = list(names)
        for ops in (model.memcpy, model.memset):
            if ops is None or len(ops) == 0:
                continue
            if isinstance(ops, Memcpy):
                uniq, inv = distinct_small(ops.copy_kind)
                base = len(all_names)
                all_names += [f"[CUDA memcpy {copy_kind_label(u)}]" for u in uniq.tolist()]
                extra_n.append(base + inv)
            else:
                all_names.append("[CUDA memset]")
                extra_n.append(np.full(len(ops), len(all_names) - 1, np.int64))
            extra_s.append(ops.start.astype(np.int64))
            extra_e.append(ops.end.astype(np.int64))
            extra_d.append(ops.device.astype(np.int64))   # concatenated with ``dev`` below
        if extra_s:
            name_cat = np.concatenate((name_cat, classify(all_names[len(names):], rules)))
            start = np.concatenate([start] + extra_s)
            end = np.concatenate([end] + extra_e)
            dev = np.concatenate([np.asarray(dev, np.int64)] + extra_d)
            row_name = np.concatenate([np.asarray(row_name, np.int64)] + extra_n)
            phase = np.concatenate((phase, np.full(start.shape[0] - len(k), -1, np.int32)))
            n_cnt, n_tot = _name_time(row_name, end - start, len(all_names))
    cat = name_cat.astype(np.int16 if n_cat < (1 << 15) else np.int64)[row_name]
    devices_ids, dev_code = distinct_small(np.asarray(dev))
    n_dev = int(devices_ids.shape[0])

    count, total, nonov, busy = device_split(start, end, cat, dev_code, n_dev, n_cat)
    tot_all = int(total.sum())
    busy_all = int(busy.sum())
    c_cnt, c_tot, c_non = count.sum(0), total.sum(0), nonov.sum(0)
    overall = tuple(CategoryRow(**asdict(r), top_kernels=_top(np.flatnonzero((name_cat == i) & (n_cnt > 0)), all_names,
                                                             n_cnt, n_tot, TOP_KERNELS))
                    for i, r in zip(_order(c_cnt, c_tot, c_non), _rows(cats, c_cnt, c_tot, c_non, tot_all, busy_all)))
    other_top = _top(np.flatnonzero((name_cat == other) & (n_cnt > 0)), all_names, n_cnt, n_tot, OTHER_TOP_KERNELS)
    devices = tuple(CategoryDevice(
        device_id=int(devices_ids[j]), kernel_count=int(count[j].sum()), total_kernel_ns=int(total[j].sum()),
        busy_ns=int(busy[j]),
        categories=_rows(cats, count[j], total[j], nonov[j], int(total[j].sum()), int(busy[j])),
    ) for j in range(n_dev))

    phases: List[CategoryPhase] = []
    if kernel_phase is not None:
        labels = list(phase_names or [])
        # each phase's rows ascending (so in start order), the rows without a phase (-1) last
        for p, ro in sorted(rows_by_value(phase), key=lambda g: g[0] < 0):
            pc, pt, pn, pb = device_split(start[ro], end[ro], cat[ro], dev_code[ro], n_dev, n_cat)
            ptot, pbusy = int(pt.sum()), int(pb.sum())
            name = None if p < 0 else (str(labels[p]) if p < len(labels) else f"phase {p}")
            phases.append(CategoryPhase(
                phase=name, phase_index=int(p), kernel_count=int(pc.sum()), total_kernel_ns=ptot,
                busy_ns=pbusy, categories=_rows(cats, pc.sum(0), pt.sum(0), pn.sum(0), ptot, pbusy),
            ))
    return CategoryResult(
        True, None, preset=rules.preset, preset_reason=rules.reason, detect_pct=detect_pct,
        rules_file=rules.source, rules_replaced=rules.replace, rule_count=len(rules.rules),
        include_memcpy=include_memcpy, categories=tuple(cats), kernel_count=int(start.shape[0]),
        total_kernel_ns=tot_all, busy_ns=busy_all, other_ns=int(c_tot[other]),
        other_pct=pct(int(c_tot[other]), tot_all), overall=overall, devices=devices, phases=tuple(phases),
        other_top_kernels=other_top, rules=rules, name_category=name_cat[: len(names)],
    )


def window_categories(steady: TraceModel, window: WindowResult, categories: CategoryResult, include_memcpy: bool
                      ) -> CategoryResult:
    """Kernel categories over the analysis window: ``categories`` itself when the window is the whole capture (or
    nothing was categorized), else the same rules applied to the clipped model (no phases), so that the categories'
    non-overlapped busy time plus the idle time adds up to the window (what a comparison splits; not in
    report.json)."""
    if window.is_full or not categories.available or categories.rules is None:
        return categories
    return analyze_categories(steady, categories.rules, include_memcpy=include_memcpy)
