"""Which other processes ran on a CPU during a set of times: the CPU samples of their threads taken inside them,
counted per process (``TraceModel.wait_samples``). One definition for the launching thread's waits
(analyses/threads/waits.py) and for the gaps where it is not sampled (analyses/idle/host_samples.py); docs/METRICS.md,
"Waits of the launching thread"."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

import numpy as np

from ...model.intervals import IntervalUnion, points_inside
from ...model.names import distinct_small
from ...model.trace import TraceModel, pid_of, tid_of
from .stats import pct


@dataclass(frozen=True)
class OtherProcess:
    """Another process during the times (the launching thread's waits, or its gaps where it is not sampled):
    ``sampled`` = its CPU samples (any of its threads) taken inside them — it ran on a CPU then; ``pct_of_samples`` =
    sampled / (every sample inside them but the launching thread's) × 100; ``process``: its name (PROCESSES; else
    its main thread's name; "" none)."""

    pid: int
    process: str
    sampled: int
    pct_of_samples: float


def sampled_processes(model: TraceModel, pid: int, w: IntervalUnion, own: int
                      ) -> Optional[Tuple[int, Tuple[OtherProcess, ...]]]:
    """(samples, processes): the CPU samples inside the times ``w`` of the threads of every process but ``pid``,
    counted per process (most first, then pid); ``own``: the samples of ``pid``'s other threads inside ``w`` (the
    rest of the shares' denominator). None: the trace has no CPU samples. ``w`` must lie inside the times
    ``model.wait_samples`` was read for (waits, device idle)."""
    s = model.wait_samples
    if s is None or s.total == 0:
        return None
    if len(s) == 0 or len(w) == 0:
        return 0, ()
    p = pid_of(s.gtid).astype(np.int64)
    m = (p != pid) & points_inside(w, s.start)
    pids, inv = distinct_small(p[m])
    cnt = np.bincount(inv, minlength=pids.shape[0])
    total = int(cnt.sum())
    names = dict(model.info.process_names)
    if any(not names.get(q) for q in pids.tolist()) and model.thread_names:   # else its main thread's (tid = pid)
        tg = np.fromiter(model.thread_names, np.int64, len(model.thread_names))
        tp = pid_of(tg)
        for t in tg[(tp == tid_of(tg)) & np.isin(tp, pids)].tolist():
            q = int(pid_of(np.array([t], np.int64))[0])
            names[q] = names.get(q) or model.thread_names.get(t) or ""
    rows = sorted((OtherProcess(q, names.get(q) or "", int(c), pct(int(c), own + total))
                   for q, c in zip(pids.tolist(), cnt.tolist())), key=lambda r: (-r.sampled, r.pid))
    return total, tuple(rows)
