"""The steady window's kernel start times by name and device: what a comparison times the iterations of its anchor
kernel from (docs/COMPARE.md "The headline metric": the anchor kernel is chosen across traces, so each trace keeps
the starts of every kernel). Not in ``report.json``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Tuple

import numpy as np

from ...model.timeline import rows_by_value
from ...model.trace import TraceModel

_EMPTY = np.empty(0, np.int64)


@dataclass(frozen=True)
class KernelStarts:
    """Every kernel of the steady (clipped) model: its start (ns, clipped to the window), device id and name
    (``names[name_idx]``), in the model's order (by start). The arrays are the clipped model's own, not copies."""

    names: Tuple[str, ...]
    name_idx: np.ndarray
    device: np.ndarray
    start: np.ndarray

    def __len__(self) -> int:
        return int(self.start.shape[0])

    def per_device(self, name: str) -> List[Tuple[np.ndarray, np.ndarray]]:
        """Per device that ran kernel ``name`` (by device id): (sorted starts of kernel ``name``, sorted starts
        of all its kernels); empty when no kernel has that name."""
        if len(self) == 0 or name not in self.names:
            return []
        idx = self.names.index(name)
        out = []
        hit = self.name_idx == idx
        for _, dm in rows_by_value(np.asarray(self.device)):   # one sort, not a mask over every kernel per device
            a = np.sort(self.start[dm[hit[dm]]])
            if a.shape[0]:
                out.append((a, np.sort(self.start[dm])))
        return out


def kernel_starts(steady: TraceModel) -> KernelStarts:
    """The kernel starts of the model clipped to the analysis window (``steady``)."""
    k = steady.kernels
    if k is None or len(k) == 0:
        return KernelStarts((), _EMPTY, _EMPTY, _EMPTY)
    return KernelStarts(tuple(k.names), k.name_idx, k.device, k.start)
