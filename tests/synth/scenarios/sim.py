"""Scenario simulator: interval helpers and :class:`Sim` (builder + RNG + planted busy/idle bookkeeping)."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..builder import TraceBuilder

__all__ = ["MS", "US", "Sim", "idle_within", "overlap", "union"]

US = 1_000
MS = 1_000_000


def union(iv: Sequence[Tuple[int, int]]) -> List[Tuple[int, int]]:
    out: List[Tuple[int, int]] = []
    for s, e in sorted(iv):
        if out and s <= out[-1][1]:
            if e > out[-1][1]:
                out[-1] = (out[-1][0], e)
        else:
            out.append((s, e))
    return out


def overlap(merged: Sequence[Tuple[int, int]], a: int, b: int) -> int:
    tot = 0
    for s, e in merged:
        if e <= a:
            continue
        if s >= b:
            break
        tot += min(e, b) - max(s, a)
    return tot


def idle_within(merged: Sequence[Tuple[int, int]], windows: Sequence[Tuple[int, int]]) -> int:
    """GPU idle ns inside the union of ``windows`` given merged busy intervals."""
    return sum((b - a) - overlap(merged, a, b) for a, b in union(windows))


# -------------------------------------------------------------------------------------------------
# simulator
# -------------------------------------------------------------------------------------------------
class Sim:
    def __init__(self, flavor: str, seed: int, t0: int = 40 * MS) -> None:
        self.b = TraceBuilder(flavor, seed=seed)
        self.rng = np.random.default_rng(seed)
        self.t0 = t0
        self.busy: Dict[Tuple[int, int], List[Tuple[int, int]]] = {}
        self.kernel_ns: Dict[Tuple[int, int], int] = {}
        self.kernel_n: Dict[Tuple[int, int], int] = {}
        self.memcpy_iv: Dict[Tuple[int, int], List[Tuple[int, int]]] = {}
        self.windows: Dict[str, List[Tuple[Tuple[int, int], int, int]]] = {}
        self.by_name: Dict[str, int] = {}

    def jit(self, v: float, rel: float = 0.05) -> int:
        return max(1, int(round(v * (1.0 + rel * self.rng.standard_normal()))))

    def uni(self, lo: float, hi: float) -> int:
        return int(self.rng.integers(int(lo), int(hi) + 1))

    def record(
        self, key: Tuple[int, int], s: int, e: int, name: Optional[str] = None, kernel: bool = True
    ) -> None:
        self.busy.setdefault(key, []).append((s, e))
        if kernel:
            self.kernel_ns[key] = self.kernel_ns.get(key, 0) + (e - s)
            self.kernel_n[key] = self.kernel_n.get(key, 0) + 1
            if name is not None:
                self.by_name[name] = self.by_name.get(name, 0) + (e - s)

    def window(self, kind: str, key: Tuple[int, int], a: int, b: int) -> None:
        self.windows.setdefault(kind, []).append((key, a, b))

    def _devices(self, merged_by_key: Dict[Tuple[int, int], List[Tuple[int, int]]]) -> Dict[str, Any]:
        """Per "pid:device": planted kernel count / sum, busy union, span and copy time."""
        devices: Dict[str, Any] = {}
        for key in sorted(self.busy):
            merged = merged_by_key[key]
            busy = sum(e - s for s, e in merged)
            first, last = merged[0][0], merged[-1][1]
            devices[f"{key[0]}:{key[1]}"] = {
                "pid": key[0],
                "device": key[1],
                "kernel_count": self.kernel_n.get(key, 0),
                "kernel_sum_ns": self.kernel_ns.get(key, 0),
                "busy_ns": busy,
                "first_start_ns": first,
                "last_end_ns": last,
                "idle_ns": (last - first) - busy,
                "memcpy_ns": 0,
                "memset_ns": 0,
            }
        for kind in ("memcpy", "memset"):
            for r in self.b.rows(kind):
                k = f"{(r['globalPid'] >> 24) & 0xFFFFFF}:{r['deviceId']}"
                if k in devices:
                    devices[k][f"{kind}_ns"] += r["end"] - r["start"]
        return devices

    def _trace_bounds(self) -> Tuple[int, int]:
        keys = ("kernel", "runtime", "memcpy", "memset", "sync", "nvtx", "osrt", "graph_trace")
        starts = [r["start"] for k in keys for r in self.b.rows(k)]
        ends = [r["end"] if r.get("end") is not None else r["start"] for k in keys for r in self.b.rows(k)]
        return min(starts), max(ends)

    def _idle_inside(self, merged_by_key: Dict[Tuple[int, int], List[Tuple[int, int]]]) -> Dict[str, int]:
        """GPU idle ns inside the recorded host windows, per window kind (summed over devices)."""
        idle_in: Dict[str, int] = {}
        for kind, wins in self.windows.items():
            tot = 0
            for key in {w[0] for w in wins}:
                tot += idle_within(merged_by_key.get(key, []), [(a, b) for k, a, b in wins if k == key])
            idle_in[kind] = tot
        return idle_in

    def facts(self, cause: str, **extra: Any) -> Dict[str, Any]:
        merged_by_key = {k: union(v) for k, v in self.busy.items()}
        devices = self._devices(merged_by_key)
        rows = self.b.rows
        start, end = self._trace_bounds()
        out: Dict[str, Any] = {
            "cause": cause,
            "flavor": self.b.flavor,
            "kernel_count": len(rows("kernel")),
            "runtime_count": len(rows("runtime")),
            "nvtx_count": len(rows("nvtx")),
            "memcpy_count": len(rows("memcpy")),
            "sync_count": len(rows("sync")),
            "graph_trace_count": len(rows("graph_trace")),
            "trace_start_ns": start,
            "trace_end_ns": end,
            "devices": devices,
            "gpu_busy_ns": sum(d["busy_ns"] for d in devices.values()),
            "gpu_idle_ns": sum(d["idle_ns"] for d in devices.values()),
            "kernel_sum_ns": sum(d["kernel_sum_ns"] for d in devices.values()),
            "idle_inside_ns": self._idle_inside(merged_by_key),
        }
        out.update(extra)
        return out
