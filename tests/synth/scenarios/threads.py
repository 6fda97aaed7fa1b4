"""Threads that share a name: PyTorch's worker threads inherit ``pt_main_thread``. The per-step sync loop of
:func:`~.step_sync.step_sync_host_work` (process 21101) runs on the launching thread, renamed
``pt_main_thread``; two more threads of the process, also named ``pt_main_thread``, open NVTX ranges around
OS calls once per step (``load_shard`` around a ``read``, ``store_shard`` around a ``write``), and a fourth,
``tokenizer``, opens ``tokenize`` once per step without an OS call. The report must name the three
``pt_main_thread (tid N)`` with their tids and ``tokenizer`` bare (model/names.thread_labels)."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from .rank import Rank
from .sim import US, Sim
from .step_sync import step_sync_loop

__all__ = ["colliding_thread_names"]

PID = 21101
SHARED = "pt_main_thread"


def _threads(sim: Sim, r: Rank, syncs: List[Tuple[int, int, int]]) -> Dict[str, Any]:
    b = sim.b
    main = b.thread(PID, PID, SHARED)                  # the launching thread, renamed
    load, store = b.thread(PID, PID + 1, SHARED), b.thread(PID, PID + 2, SHARED)
    tok = b.thread(PID, PID + 3, "tokenizer")
    for s, e, _ in syncs:
        b.nvtx_push_pop(s - 800 * US, s - 200 * US, "load_shard", tid_g=load)
        b.osrt(s - 700 * US, s - 300 * US, tid_g=load, name="read")
        b.nvtx_push_pop(e + 100 * US, e + 700 * US, "store_shard", tid_g=store)
        b.osrt(e + 200 * US, e + 500 * US, tid_g=store, name="write")
        b.nvtx_push_pop(s - 150 * US, s - 100 * US, "tokenize", tid_g=tok)
    assert main == r.gtid
    return {
        "thread_gtids": {"launcher": main, "loader": load, "storer": store, "tokenizer": tok},
        "worker_ranges": len(syncs),      # NVTX ranges per worker thread (one per sync point)
    }


def colliding_thread_names(path: str, seed: int = 0, flavor: Optional[str] = None) -> Dict[str, Any]:
    return step_sync_loop(path, seed, flavor, pid=PID, extra=_threads)
