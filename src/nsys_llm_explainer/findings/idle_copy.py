"""The ``copy`` idle finding's claims: whether kernels waited on the copies (``copy_waiting_pct``, docs/MODEL.md
"Copies the kernels waited on"), the title variants that say so, and the copies' own facts for its advice
(docs/FINDINGS.md, "Idle causes → findings")."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import AbstractSet, Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ..analyses.idle.result import DeviceCauses
from ..analyses.memory.copy_engines import (
    CopyEnginesResult,
    CopyPath,
    async_side_share,
    copies_async_side_stream,
    path_of_detail,
)
from ..vocabulary.cause_kinds import KIND, CauseKind
from ..vocabulary.code_spans import code_name
from ..vocabulary.units import fmt_bytes
from ..vocabulary.units import fmt_dur as dur
from .base import MEDIUM_SHARE, Check, Scope

#: average bytes per copy above which per-copy overhead is small (1 MiB: ~40 µs over PCIe 4, a few µs fixed cost):
#: "fewer, larger copies" is no advice for such copies (the copy-path finding and the ``copy`` idle finding)
LARGE_COPY_BYTES = 1 << 20
COPY_WAITING_PCT = 50.0     # copies "keep the kernels waiting" when a kernel waited on them this much of their time
#: what the copies do, in the ``copy`` finding's titles: the kind's own title says they keep the kernels waiting
_WAITING = "keep the kernels waiting"
_EARLY = "run while the GPU idles, before the next kernel is launched"
_UNKNOWN = "run while the GPU idles; whether kernels waited on them is not known (no launch call is linked)"
_UM_ADVICE = ("um.see_finding", "um.prefetch", "um.advise")
#: an asynchronous copy call (runtime or driver API: `cudaMemcpyAsync`, `cudaMemcpy2DAsync`, `cuMemcpyHtoDAsync`);
#: blocking copies have their own idle kinds (`sync_memcpy`, `pageable_memcpy`)
_ASYNC_COPY_CALL = re.compile(r"^cu(?:da)?Memcpy\w*Async", re.IGNORECASE)


def _variant(unified: bool, doing: str, advice: Tuple[str, ...]) -> CauseKind:
    """The ``copy`` kind with the title saying what the copies (or Unified-Memory migrations) do."""
    if unified:
        title = f"Unified-Memory migrations ({{what}}) {doing}: {{share:.1f}} % of the window"
        many = f"Unified-Memory migrations and copies {doing}: {{share:.1f}} % of the window"
    else:
        title = f"Copies {doing}: {{what}} copies fill {{share:.1f}} % of the window"
        many = f"Copies {doing}: {{share:.1f}} % of the window"
    return replace(KIND["copy"], title=title, title_many=many, advice=advice)


#: the ``copy`` finding's titles other than the kind's own: Unified-Memory migrations, copies the kernels did not wait
#: on ("early"), and copies of which that is not known ("unknown")
COPY_VARIANTS: Dict[str, CauseKind] = {
    "copy_unified": _variant(True, _WAITING, _UM_ADVICE),
    "copy_early": _variant(False, _EARLY, ("copy.batch", "copy.launch_first", "host_cpu.vllm", "host_cpu.vllm.graphs",
                                           "host_cpu.sglang", "host_cpu.trtllm", "host_cpu.trtllm.graphs")),
    "copy_unified_early": _variant(True, _EARLY, _UM_ADVICE),
    # no host thread is linked to the gaps (copy_waiting_unknown_pct decides the title): neither wording is shown
    "copy_unknown": _variant(False, _UNKNOWN, ("unknown.trace_cuda",)),
    "copy_unified_unknown": _variant(True, _UNKNOWN, ("um.see_finding", "unknown.trace_cuda")),
}


def copy_waiting(d: DeviceCauses) -> Tuple[Optional[str], Tuple[Check, ...], str]:
    """Which ``copy`` idle title device ``d`` gets ("waiting", "early" or "unknown", by ``copy_waiting_pct`` and
    ``copy_waiting_unknown_pct``: docs/MODEL.md, docs/FINDINGS.md), the checks behind it and its evidence line; (None,
    (), "") when the device has no copy idle time or it is not known (a report loaded without the field)."""
    cs = [c for c in d.causes if c.kind == "copy"]
    ns = sum(c.ns for c in cs)
    if ns <= 0 or any(c.waiting_ns is None for c in cs):
        return None, (), ""
    waited = sum(c.waiting_ns or 0 for c in cs)
    unknown = sum(c.waiting_unknown_ns or 0 for c in cs)
    pct, upct = 100.0 * waited / ns, 100.0 * unknown / ns
    sc = Scope(device_id=d.device_id)
    check = Check("copy_waiting_pct", pct, ">=", COPY_WAITING_PCT, sc)
    how = ("the next kernel launched, or the launching thread blocked on the GPU, in a launch call or waiting on "
           "another thread")
    rest = ns - waited - unknown
    if unknown:   # the unlinked part is stated apart: no launch call shows whether a kernel waited
        known = (f"a kernel is known to have waited on the copies in {dur(waited)} ({pct:.1f} %: {how})" if waited
                 else "no kernel is known to have waited on the copies")
        line = (f"Of the {dur(ns)} of copy time with the GPU idle on device {d.device_id}, {known}; in {dur(unknown)} "
                f"({upct:.1f} %) "
                "whether one waited is not known: no host thread is linked to those gaps (no launch call of the "
                "device's work is in the export)" + (
                    "; in the rest the launching thread worked on the host and had not launched the next kernel."
                    if rest > 0 else "."))
    else:
        line = (f"Of the {dur(ns)} of copy time with the GPU idle on device {d.device_id}, {dur(waited)} ({pct:.1f} %) "
                f"had a kernel waiting on the copies ({how}); " + (
                    "in the rest the launching thread worked on the host and had not launched the next kernel: the "
                    "GPU idled for want of launched work, the copies ran meanwhile." if rest > 0
                    else "in none did the launching thread work on the host before launching the next kernel."))
    if check.holds():
        return "waiting", (check,), line
    below = replace(check, op="<")
    if not unknown or pct + upct < COPY_WAITING_PCT:
        return "early", (below,), line
    return "unknown", (below, Check("copy_waiting_unknown_pct", upct, ">=", COPY_WAITING_PCT - pct, sc)), line


def pageable_matters(ns_by_detail: Mapping[Any, int], window_ns: int) -> bool:
    """Whether the pageable host copies among a copy finding's idle ns (``ns_by_detail``: a ``copy`` detail, or a
    ``("copy", detail)`` key, → ns on one device) hold at least :data:`.base.MEDIUM_SHARE` % of the device's window:
    the pinning lines (``copy.pageable``, ``pageable.pin.torch``) are given only then — a few bytes of pageable copies
    beside a finding about other copies are not worth pinning (docs/FINDINGS.md, "Advice and the facts it needs")."""
    ns = sum(v for d, v in ns_by_detail.items() if str(d[-1] if isinstance(d, tuple) else d).endswith(" (pageable)"))
    return window_ns > 0 and 100.0 * ns / window_ns >= MEDIUM_SHARE


def copy_facts(facts: Mapping[str, Any], ce: Optional[CopyEnginesResult], devs: AbstractSet[int],
                details: Mapping[str, int]) -> Tuple[Mapping[str, Any], List[str]]:
    """:func:`side_stream` over the ``copy`` finding's own copies (the copy paths of its details on its devices),
    and ``copies_large``: those copies average more than :data:`LARGE_COPY_BYTES` (None: no copy, or a copy path
    whose bytes the export does not record); ``d2d_copies_large``: the same of its device-to-device and peer copies
    alone (``copy.d2d``'s "usually from `.contiguous()` …" is said of small ones only)."""
    if ce is None or not ce.available:
        return facts, []
    want = {path_of_detail(d) for d in details}
    paths = [p for p in ce.paths if p.device_id in devs and p.path in want]
    return side_stream({**facts, "copies_large": large_copies(paths),
                        "d2d_copies_large": large_copies([p for p in paths if p.path in ("D2D", "P2P")])}, paths)


def outlast_kernels(ns_by_detail: Mapping[str, int], busy_ns: int, dev: int) -> Tuple[bool, List[str]]:
    """Fact ``copies_outlast_kernels`` of the ``copy`` finding whose copies keep the kernels waiting (the kind's own
    title; None for the other titles) and its evidence line: on its device ``dev`` (``busy_ns``
    of kernels in the window) one host direction's copies (``ns_by_detail``: its idle ns by copy detail) ran with the
    GPU idle more than twice as long as the kernels ran at all, so overlapping them with compute could hide less than
    half of them: the bytes set the time (docs/FINDINGS.md, "Advice and the facts it needs")."""
    ns = {p: sum(v for d, v in ns_by_detail.items() if path_of_detail(d) == p) for p in ("H2D", "D2H")}
    path = max(ns, key=lambda p: (ns[p], p))
    if ns[path] <= 2 * busy_ns:
        return False, []
    return True, [f"Device {dev} ran {dur(busy_ns)} of kernels in the window, less than half the {dur(ns[path])} "
                  f"these {path} copies ran with the GPU idle: overlapping the copies with the kernels could hide at "
                  "most that much; the rest takes fewer bytes over the host link or faster copies."]


def large_copies(paths: Sequence[CopyPath]) -> Optional[bool]:
    """Whether the copies of ``paths`` average more than :data:`LARGE_COPY_BYTES` (None: no copy, or a path whose
    bytes the export does not record)."""
    count = sum(p.count for p in paths)
    if not count or any(p.bytes is None for p in paths):
        return None
    return sum(p.bytes or 0 for p in paths) > LARGE_COPY_BYTES * count


def side_stream(facts: Mapping[str, Any], paths: Sequence[CopyPath]) -> Tuple[Mapping[str, Any], List[str]]:
    """``facts`` with ``copies_async_side_stream`` measured on ``paths``, and the evidence line that states the share
    of their time issued on a side stream (none when it is not known)."""
    share = async_side_share(paths)
    facts = {**facts, "copies_async_side_stream": copies_async_side_stream(paths)}
    return facts, [] if share is None else [
        f"{share:.1f} % of these copies' time was issued by an asynchronous copy call on a side stream (a stream no "
        "kernel of the device runs on in the window)."]


def copy_calls_pace(d: DeviceCauses, facts: Mapping[str, Any], ce: Optional[CopyEnginesResult], devs: AbstractSet[int],
                    details: Mapping[str, int]) -> Tuple[Mapping[str, Any], List[str]]:
    """``facts`` with ``copy_calls_pace``: on device ``d``, the idle time with no copy running while the host was
    inside asynchronous copy calls (``other_api`` causes whose detail is one, :data:`_ASYNC_COPY_CALL`) holds at
    least :data:`.base.MEDIUM_SHARE` % of the window, and the ``copy`` finding's copies (the copy paths of its
    ``details`` on its ``devs``) are small (not :func:`large_copies`): the host issues many small copies one call
    each and the GPU waits on the calls (None: the copies' bytes are not recorded); and the evidence line when it
    holds (docs/FINDINGS.md, "Advice and the facts it needs")."""
    want = {path_of_detail(x) for x in details}
    paths = [p for p in ce.paths if p.device_id in devs and p.path in want] if ce is not None and ce.available else []
    calls = [c for c in d.causes if c.kind == "other_api" and _ASYNC_COPY_CALL.match(c.detail) and c.ns > 0]
    ns = sum(c.ns for c in calls)
    held = d.window_ns > 0 and 100.0 * ns / d.window_ns >= MEDIUM_SHARE
    large = large_copies(paths)
    fact = None if large is None and held else held and large is False
    if not fact:
        return {**facts, "copy_calls_pace": fact}, []
    n = sum(p.count for p in paths)
    names = ", ".join(code_name(c.detail) for c in sorted(calls, key=lambda c: (-c.ns, c.detail))[:2])
    return {**facts, "copy_calls_pace": True}, [
        f"Between these copies the GPU idles a further {dur(ns)} ({100.0 * ns / d.window_ns:.1f} % of the window) "
        f"with the host inside copy calls ({names}) and no copy running: the host issues the copies one call each, "
        f"{n:,} copies averaging {fmt_bytes(sum(p.bytes or 0 for p in paths) // max(n, 1))}."]
