"""Launch storm: kernel launch rate and kernel-size distribution per device and per process, and the
``launch_storm`` flag (docs/METRICS.md, "Launch storm").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Dict, List, Optional, Tuple

import numpy as np

from ...jsonable import NONE_AS_EMPTY, FieldsJson, Outcome
from ...model.trace import TraceModel
from ..common.stats import GroupStats, pct
from ..kernels.stats import KernelStats, kernel_stats

STORM_RULES = ((50_000.0, 10_000), (100_000.0, 20_000))  # (launches/s at least, p50 at most ns)
TINY_NS = 10_000

SHARE_THRESHOLDS_NS = (5_000, 10_000, 20_000)   # the ``pct_under_Xus`` fields


@dataclass(frozen=True)
class LaunchFigures(FieldsJson):
    """Kernel launches over the window and their durations (module docstring); the classes below add the key that
    names the group (written first: ``JSON_KEYS``) and the launch-storm flag."""

    launches: int
    window_ns: int
    launches_per_s: float
    p50_ns: int
    p90_ns: int
    p99_ns: int
    pct_under_5us: float
    pct_under_10us: float
    pct_under_20us: float


@dataclass(frozen=True)
class LaunchStats(LaunchFigures):
    """All devices pooled; ``launch_storm`` is None: the flag is never evaluated over all GPUs pooled."""

    launch_storm: Optional[bool] = None


@dataclass(frozen=True)
class LaunchDeviceRow(LaunchFigures):
    """Kernel launches of one device, with its launch-storm flag."""

    device_id: int
    launch_storm: bool
    JSON_KEYS: ClassVar[Tuple[str, ...]] = ("device_id",)


@dataclass(frozen=True)
class LaunchPidRow(LaunchFigures):
    """Kernel launches of one process, with its launch-storm flag."""

    pid: int
    launch_storm: bool
    JSON_KEYS: ClassVar[Tuple[str, ...]] = ("pid",)


@dataclass(frozen=True)
class TinyKernel(FieldsJson):
    """A kernel name whose p50 duration is under ``TINY_NS``: kernels, mean and p50 duration (ns)."""

    name: str
    count: int
    avg_ns: int
    p50_ns: int


@dataclass(frozen=True)
class LaunchResult(Outcome):
    overall: Optional[LaunchStats] = field(default=None, metadata=NONE_AS_EMPTY)
    per_device: Tuple[LaunchDeviceRow, ...] = ()
    per_pid: Tuple[LaunchPidRow, ...] = ()
    tiny_kernels: Tuple[TinyKernel, ...] = ()


def _rows(key_name: str, gs: GroupStats, keys: np.ndarray, dur: np.ndarray, window: int) -> List[Dict[str, Any]]:
    """The fields of each group's row (keyword arguments of :class:`LaunchDeviceRow` / :class:`LaunchPidRow`, the
    key under ``key_name``)."""
    out = []
    # group of each row (``gs`` holds its groups in ascending key order): the share-under figures are counts
    # per group, no sort needed
    code = np.searchsorted(gs.keys[key_name], keys)
    under = {t: np.bincount(code[dur < t], minlength=len(gs)) for t in SHARE_THRESHOLDS_NS}
    for i in range(len(gs)):
        kv = int(gs.keys[key_name][i])
        n = int(gs.count[i])
        rate = n / (window / 1e9) if window > 0 else 0.0
        out.append({key_name: kv, "launches": n, "window_ns": window, "launches_per_s": rate,
                    "p50_ns": int(gs.p50[i]), "p90_ns": int(gs.p90[i]), "p99_ns": int(gs.p99[i]),
                    **{f"pct_under_{t // 1000}us": pct(int(under[t][i]), n) for t in SHARE_THRESHOLDS_NS},
                    "launch_storm": any(rate >= r and float(gs.p50_exact[i]) <= p for r, p in STORM_RULES)})
    return out


def analyze_launch(model: TraceModel, window_ns: int, top: int = 10, stats: Optional[KernelStats] = None
                   ) -> LaunchResult:
    """``model``: clipped to the analysis window; ``window_ns``: its length (the rate's denominator); ``stats``:
    its kernels' :class:`~analyses.kernels.stats.KernelStats` when already computed."""
    k = model.kernels
    if k is None or len(k) == 0:
        return LaunchResult(False, "no CUDA kernels were captured")
    dur = k.dur
    st = stats if stats is not None else kernel_stats(k)
    pooled = _rows("all", st.by("all"), np.zeros(len(k), np.int64), dur, window_ns)[0]
    # never evaluated over all GPUs pooled
    overall = LaunchStats(**{c: v for c, v in pooled.items() if c not in ("all", "launch_storm")})
    gs = st.by("name")
    tiny = np.nonzero(gs.p50_exact < TINY_NS)[0]
    tiny = tiny[np.lexsort((gs.keys["name"][tiny], -gs.count[tiny]))][:top]
    tiny_kernels = tuple(TinyKernel(name=k.names[int(gs.keys["name"][i])], **gs.row(i, TinyKernel))
                         for i in tiny.tolist())
    per_device = tuple(LaunchDeviceRow(**r) for r in _rows("device_id", st.by("device_id"), k.device, dur, window_ns))
    per_pid = tuple(LaunchPidRow(**r) for r in _rows("pid", st.by("pid"), k.pid, dur, window_ns))
    return LaunchResult(True, None, overall=overall, per_device=per_device, per_pid=per_pid,
                        tiny_kernels=tiny_kernels)
