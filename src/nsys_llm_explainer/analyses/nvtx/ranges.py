"""NVTX ranges by (domain-qualified) name and style: duration statistics, self time of push/pop ranges and
shares (docs/METRICS.md, "NVTX ranges"; the end of an unterminated range: "Reading the export").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ...jsonable import NONE_OMITTED, NOT_IN_JSON, FieldsJson, Outcome
from ...model.nvtx_build import UNTERMINATED_END_RULE
from ...model.trace import TraceModel
from ..common.stats import GroupStats, group_stats, int_sums, pct
from ..idle.range_names import normalize_range_name
from .tree import NvtxTree, build_tree, has_ancestor_with_key, self_time


@dataclass(frozen=True)
class NvtxRangeRow(FieldsJson):
    """One NVTX range name and style (docs/METRICS.md): duration statistics (ns), ``pct_total``, and for push/pop
    ranges ``self_ns`` / ``pct_self`` (None, and no key in ``report.json``, for start/end ranges)."""

    name: str
    style: str
    count: int
    total_ns: int
    avg_ns: int
    p50_ns: int
    min_ns: int
    max_ns: int
    pct_total: float
    self_ns: Optional[int] = field(default=None, metadata=NONE_OMITTED)
    pct_self: Optional[float] = field(default=None, metadata=NONE_OMITTED)
    #: push/pop ranges some of which nest inside a range of the same name on their thread (a recursion, pushes never
    #: popped): ``total_ns`` less those nested ranges' durations — the time not counted twice; None (no key) otherwise
    outer_ns: Optional[int] = field(default=None, metadata=NONE_OMITTED)


@dataclass(frozen=True)
class NvtxGroupRow(NvtxRangeRow):
    """The ranges of one style whose names differ only in their numbers (docs/METRICS.md, "NVTX ranges"): ``name``
    with digit runs as ``N`` (``aten::mm, seq = N``), ``name_count`` distinct names, the fields of
    :class:`NvtxRangeRow` over every range of the group (``self_ns``: their Σ)."""

    name_count: int = 0
    JSON_KEYS: ClassVar[Tuple[str, ...]] = ("name", "style", "name_count")


@dataclass(frozen=True)
class NvtxPidRow(FieldsJson):
    """The ranges of one name in process ``pid``: count and summed duration (ns)."""

    pid: int
    name: str
    count: int
    total_ns: int


@dataclass(frozen=True)
class NvtxResult(Outcome):
    range_count: int = 0
    unterminated: int = 0
    unterminated_end_rule: str = UNTERMINATED_END_RULE   # the rule unterminated ranges end by (a constant)
    unterminated_end_ns: Optional[int] = None   # end given to unterminated ranges (None: none open)
    ranges: Tuple[NvtxRangeRow, ...] = ()
    by_pid: Tuple[NvtxPidRow, ...] = ()
    # the rows grouped by name with digit runs as N; None (no key) when no two names of one style group together
    groups: Optional[Tuple[NvtxGroupRow, ...]] = field(default=None, metadata=NONE_OMITTED)
    tree: Optional[NvtxTree] = field(default=None, metadata=NOT_IN_JSON)   # push/pop nesting tree: a helper


def analyze_nvtx(model: TraceModel) -> NvtxResult:
    nv = model.nvtx
    if nv is None:
        return NvtxResult(False, "no NVTX_EVENTS table: NVTX was not traced (add `--trace=nvtx`) or no ranges")
    if len(nv) == 0:
        return NvtxResult(False, "NVTX_EVENTS has no push/pop or start/end ranges")
    style = np.where(nv.is_push_pop, 0, 1)
    dur = nv.end - nv.start
    tree = build_tree(nv)
    self_by_name = int_sums(tree.name_idx, self_time(tree), len(nv.names)) if tree is not None else \
        np.zeros(len(nv.names), np.int64)
    same = _nested_in_same_name(tree, len(nv.names))
    self_total = int(self_by_name.sum())
    gs = group_stats({"name": nv.name_idx.astype(np.int64), "style": style}, dur)
    total_all = int(gs.total.sum()) if len(gs) else 0
    ranges = gs.rows(NvtxRangeRow, nv.names, **_shares(gs, self_by_name, total_all, self_total, same))
    by_pid = group_stats({"pid": nv.pid, "name": nv.name_idx.astype(np.int64)}, dur).rows(NvtxPidRow, nv.names)
    groups = _groups(nv.names, nv.name_idx.astype(np.int64), style, dur, self_by_name, total_all, self_total, same)
    open_ = ~nv.closed
    open_end = int(nv.end[open_].max()) if open_.any() else None
    return NvtxResult(True, None, range_count=len(nv), unterminated=int(open_.sum()), unterminated_end_ns=open_end,
                      ranges=tuple(ranges), by_pid=tuple(by_pid), groups=groups, tree=tree)


def _nested_in_same_name(tree: Optional[NvtxTree], n: int) -> Tuple[np.ndarray, np.ndarray]:
    """Per name: how many of its push/pop ranges nest inside a range of the same name on their thread, and their
    summed duration."""
    if tree is None:
        return np.zeros(n, np.int64), np.zeros(n, np.int64)
    nested = has_ancestor_with_key(tree, tree.name_idx)
    return int_sums(tree.name_idx, nested, n), int_sums(tree.name_idx, np.where(nested, tree.end - tree.start, 0), n)


def _shares(gs: GroupStats, self_ns: np.ndarray, total_all: int, self_total: int,
            same: Tuple[np.ndarray, np.ndarray]) -> Dict[str, List[Any]]:
    """The ``style``, ``pct_total``, ``self_ns``, ``pct_self`` and ``outer_ns`` columns of the groups ``gs`` by
    (name, style) (``self_ns`` and ``same``, :func:`_nested_in_same_name`: by name key)."""
    keys = list(zip(gs.keys["name"].tolist(), (gs.keys["style"] == 0).tolist()))   # (name, push/pop)
    nested_n, nested_ns = same
    return {"style": ["PushPop" if push else "StartEnd" for _, push in keys],
            "pct_total": [pct(t, total_all) for t in gs.total.tolist()],
            "self_ns": [int(self_ns[ni]) if push else None for ni, push in keys],
            "pct_self": [pct(int(self_ns[ni]), self_total) if push else None for ni, push in keys],
            "outer_ns": [t - int(nested_ns[ni]) if push and nested_n[ni] else None
                         for (ni, push), t in zip(keys, gs.total.tolist())]}


def _groups(names: Sequence[str], name_idx: np.ndarray, style: np.ndarray, dur: np.ndarray, self_by_name: np.ndarray,
            total_all: int, self_total: int, same: Tuple[np.ndarray, np.ndarray]) -> Optional[Tuple[NvtxGroupRow, ...]]:
    """The ranges by (name with digit runs as ``N``, style) — per-op ranges (``aten::mm, seq = 1234``) seen once each
    become one row per op — or None when no group holds two names (the ungrouped rows say it all). Each distinct name
    is normalised once; the ranges are grouped with numpy."""
    index: Dict[str, int] = {}
    gid = np.array([index.setdefault(normalize_range_name(n), len(index)) for n in names], np.int64)
    if len(index) == len(names):
        return None
    used = np.unique(name_idx * 2 + style)       # the (name, style) pairs that occur
    members = np.bincount(gid[used // 2] * 2 + used % 2, minlength=2 * len(index))
    if not (members > 1).any():
        return None
    gs = group_stats({"name": gid[name_idx], "style": style}, dur)
    members_of = members[gs.keys["name"] * 2 + gs.keys["style"]].tolist()
    return tuple(gs.rows(NvtxGroupRow, list(index), name_count=members_of,
                         **_shares(gs, int_sums(gid, self_by_name, len(index)), total_all, self_total,
                                   (int_sums(gid, same[0], len(index)), int_sums(gid, same[1], len(index))))))
