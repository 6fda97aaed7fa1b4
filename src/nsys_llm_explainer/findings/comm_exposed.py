"""The exposed-communication finding: collectives that no compute kernel overlaps (docs/FINDINGS.md, "Kernels")."""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

from ..analyses.comms.exposure import COMM_CATEGORIES, CommExposureResult
from ..analyses.comms.nccl_result import NcclResult
from ..analyses.idle.gpu_time import GpuTimeResult
from ..analyses.kernels.traits import KernelTraitsResult
from ..analyses.trace.facts import TraceFacts
from ..analyses.trace.window import WindowResult
from ..vocabulary.units import fmt_count
from ..vocabulary.units import fmt_dur as dur
from ..vocabulary.windows import window_name
from .base import HIGH_SHARE, Check, Finding, finding, pooled_scope, pooled_words

#: from this share of the window on, communication that no compute kernel overlaps is a finding (``comm_exposed``)
COMM_EXPOSED_PCT = 10.0


def _op_words(ops: List[str]) -> str:
    """"the all-reduce", "the all-reduce and all-gather", "the all-reduce, all-gather and send/recv"."""
    return "the " + (ops[0] if len(ops) == 1 else ", ".join(ops[:-1]) + " and " + ops[-1])


def _devices_words(ids: Sequence[int], ran: Sequence[int], gpu_time: GpuTimeResult) -> str:
    """Over which devices the exposed share is pooled, in words: those of the devices that ran the workload's kernels
    (:func:`.base.pooled_words`) that ran communication kernels; the others named as running none."""
    if list(ids) == list(ran):
        return pooled_words(gpu_time)
    none = [d for d in ran if d not in ids]
    text = f"device {ids[0]}" if len(ids) == 1 else "devices " + ", ".join(str(i) for i in ids) + " summed"
    return (text + ", the devices that ran communication kernels; " + ", ".join(f"device {i}" for i in none)
            + " ran none and " + ("is" if len(none) == 1 else "are") + " not counted")


def _straggler_wait(exposure: CommExposureResult, nccl: NcclResult, ids: Sequence[int]) -> Tuple[int, List[int]]:
    """The wait the ``nccl_wait`` finding claims, as exposed ns to leave out, and the devices it lies on: per device
    of ``ids`` other than the late rank's, the waits of its ranks other than the late rank inside the window (their
    ``wait_in_window_ns``: one scope with the exposed ns), at most that device's exposed ns; in all at most the
    waiting the late rank caused (the straggler's ``wait_ns_total``). With two ranks: the one waiting rank's wait in
    the window up to its device's exposed ns."""
    v = nccl.straggler
    assert v is not None
    exposed_of = {d.device_id: d.exposed_ns for d in exposure.devices if d.device_id in ids}
    per_dev: Dict[int, int] = {}
    for r in nccl.ranks:
        if (r.pid, r.device_id) == (v.late_pid, v.late_device_id) or r.device_id not in exposed_of:
            continue
        per_dev[r.device_id] = per_dev.get(r.device_id, 0) + int(r.wait_in_window_ns or 0)
    capped = {d: min(w, exposed_of[d]) for d, w in sorted(per_dev.items()) if min(w, exposed_of[d]) > 0}
    return min(int(v.wait_ns_total), sum(capped.values())), sorted(capped)


def comm_exposed(exposure: CommExposureResult, gpu_time: GpuTimeResult, facts: TraceFacts, window: WindowResult,
                 repeats: bool, nccl: NcclResult, traits: KernelTraitsResult) -> Optional[Finding]:
    """``comm_exposed``: communication kernels run with no compute kernel beside them (exposed, docs/METRICS.md
    "Exposed communication") ≥ ``COMM_EXPOSED_PCT`` of the window, pooled over the devices that ran kernels and
    communication kernels among them, less the wait the ``nccl_wait`` finding explains (the straggler verdict's
    ``wait_ns_total``, at most the waiting device's exposed ns: claimed once); time at stake = the exposed ns left
    (which ``gpu_bound`` then leaves out of its own). The advice follows the collectives that are exposed
    (all-reduce: DDP / tensor parallelism by the workload; all-gather, reduce-scatter: FSDP). ``repeats``: the
    window holds repeated steps (its name)."""
    ran = gpu_time.kernel_devices()
    # pooled over the devices that ran communication kernels in the window: a device with none (a pipeline pair on 2
    # of 4 GPUs) has no exposed communication to share, and its window would dilute the share of those that do
    ids = [d for d in ran if any(c.device_id == d for c in exposure.devices)] if exposure.available else []
    if not ids:
        return None
    exposed, win, comm, ov = exposure.pooled(ids)
    v = nccl.straggler if nccl.available else None
    wait, wait_devs = _straggler_wait(exposure, nccl, ids) if v is not None else (0, [])
    measured = exposed
    exposed -= max(wait, 0)
    scope = pooled_scope(ids)
    check = Check("comm_exposed_pct", 100.0 * exposed / win if win else 0.0, ">=", COMM_EXPOSED_PCT, scope)
    if not check.holds():
        return None
    rows = [d for d in exposure.devices if d.device_id in ids]
    per_op: Dict[str, List[int]] = {}
    for d in rows:
        for o in d.ops:
            acc = per_op.setdefault(o.op, [0, 0])
            acc[0] += o.exposed_ns
            acc[1] += o.count
    ranked = sorted(per_op.items(), key=lambda kv: (-kv[1][0], kv[0]))
    # the collectives named in the title: each holding ≥ 10 % of the exposed time, at most three
    named = [op for op, (ns, _) in ranked if ns * 10 >= exposed][:3] or [ranked[0][0]]
    where = window_name(window.method, window.details.bins is not None, repeats)
    ov_pct = 100.0 * ov / comm if comm else 0.0
    ev = [f"{dur(measured)} of {dur(win)} ({100.0 * measured / win:.1f} %, {_devices_words(ids, ran, gpu_time)}): "
          "communication kernels (categories " + ", ".join(f"`{c}`" for c in COMM_CATEGORIES) + ") run with no compute "
          f"kernel (one of another category) beside them, so the compute streams wait; compute overlaps "
          f"{ov_pct:.1f} % of their {dur(comm)}.",
          "Exposed by collective: " + ", ".join(f"{op} {dur(ns)} ({fmt_count(n, 'kernel')})"
                                                for op, (ns, n) in ranked[:4] if ns)
          + ("; per device: " + ", ".join(f"device {d.device_id} {d.exposed_pct:.1f} %" for d in rows)
             if len(rows) > 1 else "") + "."]
    if wait > 0 and v is not None:
        on = (f"device {wait_devs[0]}" if len(wait_devs) == 1 else
              "devices " + ", ".join(str(d) for d in wait_devs[:-1]) + f" and {wait_devs[-1]}")
        ev.append(f"Left out: {dur(wait)} on {on}, the wait for the late rank {v.late_rank} "
                  f"that the NCCL-wait finding explains; {dur(exposed)} ({check.observed:.1f} %) is claimed here.")
    elif nccl.available and len(nccl.ranks) >= 2:
        ev.append(f"A communication kernel also runs while it waits for a late peer: the NCCL section compares the "
                  f"{len(nccl.ranks)} ranks this trace holds and names no late rank: "
                  f"{(nccl.straggler_reason or 'no straggler verdict').rstrip('.')}.")
    else:
        ev.append("A communication kernel also runs while it waits for a late peer: only the other ranks' traces "
                  "tell that wait from the transfer.")
    custom = nccl.custom_allreduce
    advice = {**facts.advice_facts(), "custom_allreduce": custom is not None and custom.count > 0,
              "transformer_engine": traits.available and "transformer_engine" in traits.traits}
    keys = []
    if {"all-reduce", "all-gather", "reduce-scatter"} & set(per_op):
        keys.append("comm_exposed.te")
    if "all-reduce" in per_op:
        keys += ["comm_exposed.ddp", "comm_exposed.tp", "comm_exposed.tp.custom", "comm_exposed.tp.vllm",
                 "comm_exposed.tp.sglang"]
    if "all-gather" in per_op or "reduce-scatter" in per_op:
        keys.append("comm_exposed.fsdp")
    if "all-to-all" in per_op:
        keys.append("comm_exposed.ep")
    if "send/recv" in named:
        keys += ["comm_exposed.pp", "comm_exposed.pp.inference"]
    keys.append("comm_exposed.generic.here" if nccl.available and len(nccl.ranks) >= 2 else "comm_exposed.generic")
    verb, it = ("runs", "it") if len(named) == 1 else ("run", "them")
    return finding(
        "comm_exposed", severity="high" if check.observed >= HIGH_SHARE else "medium",
        title=f"Exposed communication: {_op_words(named)} {verb} with no compute beside {it} for "
              f"{check.observed:.1f} % of {where}",
        evidence=ev, advice=keys, facts=advice, time_at_stake_ns=exposed, checks=(check,))
