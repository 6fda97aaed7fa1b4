"""Kernel duration statistics by grouping (``name``, ``name``+``device_id``, ``name``+``device_id``+``pid``,
``pid``, ``device_id``, ``all``; :func:`~analyses.common.stats.group_stats`), computed once per model as a value
(:class:`KernelStats`): the three name groupings from one sort, the full capture's and the steady window's once
each (one object when the window is the whole capture).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, FrozenSet, Iterable, Mapping, Optional, Tuple

import numpy as np

from ...model.trace import Kernels, TraceModel
from ..common.stats import GroupStats, group_stats, nested_group_stats, reordered
from ..trace.window import WindowResult

Grouping = Tuple[str, ...]

#: the key column of each grouping column
KEY_COLUMNS: Dict[str, Callable[[Kernels], np.ndarray]] = {
    "name": lambda k: k.name_idx, "device_id": lambda k: k.device, "pid": lambda k: k.pid,
    "all": lambda k: np.zeros(len(k), np.int8)}
#: groupings by a prefix of these columns come from one sort
NESTED: Grouping = ("name", "device_id", "pid")
#: every grouping an analysis reads
GROUPINGS: Tuple[Grouping, ...] = (("name",), ("name", "device_id"), ("name", "device_id", "pid"), ("pid",),
                                   ("device_id",), ("all",))


@dataclass(frozen=True)
class KernelStats:
    """Kernel duration statistics of one model by grouping (see module docstring); :meth:`by` reads one."""

    groups: Mapping[FrozenSet[str], GroupStats]

    def by(self, *cols: str) -> GroupStats:
        """The statistics grouped by ``cols``, groups and key columns in the order of ``cols``."""
        gs = self.groups.get(frozenset(cols))
        if gs is None:
            raise KeyError(f"kernel statistics by {cols} were not computed (have: {sorted(map(sorted, self.groups))})")
        return reordered(gs, cols)

    def with_groupings(self, kernels: Kernels, groupings: Iterable[Grouping]) -> KernelStats:
        """These statistics plus the ``groupings`` not computed yet (for the same kernels)."""
        missing = [g for g in groupings if frozenset(g) not in self.groups]
        return KernelStats({**self.groups, **kernel_stats(kernels, missing).groups}) if missing else self


def kernel_stats(kernels: Kernels, groupings: Iterable[Grouping] = GROUPINGS) -> KernelStats:
    """The statistics of ``kernels`` by each of ``groupings``."""
    want = {frozenset(g): tuple(g) for g in groupings}
    dur = kernels.dur
    out: Dict[FrozenSet[str], GroupStats] = {}
    if any(w in want for w in (frozenset(NESTED[:i]) for i in (1, 2, 3))):
        fam = nested_group_stats({c: KEY_COLUMNS[c](kernels) for c in NESTED}, dur) or {}
        out.update({frozenset(g): gs for g, gs in fam.items() if frozenset(g) in want})
    for key, cols in want.items():
        if key not in out:
            out[key] = group_stats({c: KEY_COLUMNS[c](kernels) for c in cols}, dur)
    return KernelStats(out)


_compute = kernel_stats   # for window_kernel_stats, whose parameter (the graph's value) shadows the name


def capture_kernel_stats(model: TraceModel) -> Optional[KernelStats]:
    """The whole capture's kernel statistics by the groupings its kernel summary reads (None: no kernels)."""
    k = model.kernels
    return kernel_stats(k, (NESTED[:1], NESTED[:2], NESTED, ("pid",))) if k is not None and len(k) else None


def window_kernel_stats(steady: TraceModel, window: WindowResult, kernel_stats: Optional[KernelStats]
                        ) -> Optional[KernelStats]:
    """The analysis window's kernel statistics: the capture's ``kernel_stats``, completed, when the window is the
    whole capture (nothing is computed twice); None when the window has no kernels."""
    k = steady.kernels
    if k is None or len(k) == 0:
        return None
    return kernel_stats.with_groupings(k, GROUPINGS) if window.is_full and kernel_stats is not None \
        else _compute(k)
