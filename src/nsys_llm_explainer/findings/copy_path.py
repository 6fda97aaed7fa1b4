"""The copy-path finding: a copy engine direction sets the pace (category ``copy_bound``, cause
``("copy_path", <path label>)``); its ns are taken out of the ``copy`` idle finding (:func:`claimed`).
Definitions: docs/FINDINGS.md, "Findings": "A copy path sets the pace"."""

from __future__ import annotations

from typing import AbstractSet, Dict, List, Optional, Tuple

from ..analyses.idle.causes import IdleCausesResult
from ..analyses.idle.gpu_time import GpuTimeResult
from ..analyses.memory.copy_engines import HOST_PATHS, CopyEnginesResult, CopyPath, path_of_detail
from ..analyses.steps.metrics import StepResult
from ..analyses.trace.facts import TraceFacts
from ..vocabulary.code_spans import code_name
from ..vocabulary.units import fmt_bytes
from ..vocabulary.units import fmt_dur as dur
from .base import MEDIUM_SHARE, Check, Claims, Scope, finding
from .idle_copy import large_copies, pageable_matters, side_stream

BUSY_PCT = 50.0        # % of the window (and of the median step) the path is busy
OVERLAP_PCT = 25.0     # % of the path's busy time with a kernel running
HIGH_BUSY_PCT = 80.0
COMPOSITE = "copy_path"
PACE_PATHS = ("H2D", "D2H", "D2D", "P2P", "H2H", "memset")

def checks(p: CopyPath, window_ns: int, sure: bool = True) -> Tuple[Check, ...]:
    """The checks of one path (module docstring); ``window_ns``: the copy-engine window's length; ``sure``: the steps
    are of medium or high confidence (the per-step check is made only over those: :attr:`.StepResult.sure`)."""
    sc = Scope(device_id=p.device_id, kind="copy", detail=p.path)
    beyond, held = (100.0 * ns / window_ns if window_ns > 0 else 0.0 for ns in (p.beyond_kernels_ns, p.held_ns))
    out: Tuple[Check, ...] = (Check("copy_path_busy_pct", p.busy_pct, ">=", BUSY_PCT, sc),
           Check("copy_path_overlap_pct", p.overlap_pct, ">=", OVERLAP_PCT, sc),
           Check("copy_path_beyond_kernels_pct", beyond, ">=", MEDIUM_SHARE, sc),
           Check("copy_path_held_pct", held, ">=", MEDIUM_SHARE, sc))
    if sure and p.steps and p.step_busy_pct_p50 is not None:
        out += (Check("copy_path_step_busy_pct", p.step_busy_pct_p50, ">=", BUSY_PCT, sc),)
    return out


def pacing_paths(ce: Optional[CopyEnginesResult], active: Optional[AbstractSet[int]], sure: bool = True
                 ) -> List[CopyPath]:
    """The paths whose checks hold on devices with kernels (and a workload), largest busy share first; ``sure``: see
    :func:`checks`."""
    if ce is None or not ce.available:
        return []
    k = {d.device_id: d.kernel_busy_ns for d in ce.devices}
    win = ce.window_end_ns - ce.window_start_ns
    out = [p for p in ce.paths if p.path in PACE_PATHS and k.get(p.device_id, 0) > 0
           and (active is None or p.device_id in active) and all(c.holds() for c in checks(p, win, sure))]
    return sorted(out, key=lambda p: (-p.busy_pct, p.device_id, PACE_PATHS.index(p.path)))


def claimed(causes: IdleCausesResult, paths: List[CopyPath]) -> Dict[int, Dict[Tuple[str, str], int]]:
    """Per device, the ``copy`` idle ns (per detail) of the top path on the devices where it holds."""
    if not paths or not causes.available:
        return {}
    top = paths[0].path
    devs = {p.device_id for p in paths if p.path == top}
    out = {d.device_id: {("copy", c.detail): c.ns for c in d.causes
                         if c.kind == "copy" and c.ns > 0 and path_of_detail(c.detail) == top}
           for d in causes.devices if d.device_id in devs}
    return {dev: ns for dev, ns in out.items() if ns}


def advice_ids(path: str, pageable: bool, other_direction: bool, large: bool) -> List[str]:
    """Advice lines for a pacing path (each still filtered by the facts); ``pageable``: the path's pageable copies
    hold enough of the idle it claims (:func:`.idle_copy.pageable_matters`); ``other_direction``: the device has copies
    in the opposite host direction in the window (using both directions at once needs some); ``large``: the path's
    copies average more than 1 MiB (:func:`.idle_copy.large_copies`: "larger, fewer copies" would not help)."""
    if path in ("D2D", "P2P"):      # layout changes and clones are the source of small copies (copy.d2d)
        ids = ["copy_pace.d2d.large" if large else "copy_pace.d2d"]
    elif path in HOST_PATHS:
        ids = ["copy_pace.host.resident"] + (
            ["copy_pace.engines", "copy_pace.engines.one", "copy_pace.engines.some"] if other_direction else [])
        if pageable:
            ids += ["copy.pageable", "pageable.pin.torch"]
    else:
        ids = []
    return ids + ["copy.overlap", "copy.overlap.torch", "copy_pace.less" if large else "copy_pace.fewer"]


def host_memory_evidence(p: CopyPath) -> str:
    """What the trace records of the host memory behind a host path's copies: pageable, pinned, other or not
    recorded (srcKind / dstKind NULL or "unknown", or columns missing) — "pinned" only for copies recorded so."""
    n = p.count
    other = n - p.pageable_count - p.pinned_count - p.kind_unknown_count
    if p.pinned_count == n:
        return "Every one of these copies is from/to pinned host memory."
    parts = []
    if p.pageable_count:
        nb = fmt_bytes(p.pageable_bytes) if p.pageable_bytes is not None else "bytes not recorded by this export"
        parts.append(f"{p.pageable_count:,} of these copies ({nb}) are from/to pageable host memory")
    if p.pinned_count:
        parts.append(f"{p.pinned_count:,} from/to pinned host memory")
    if other:
        parts.append(f"{other:,} from/to another memory kind (managed, device)")
    if p.kind_unknown_count:
        parts.append(f"the export records no host memory kind for {p.kind_unknown_count:,} of {n:,} "
                     f"({100.0 * p.kind_unknown_count / n:.1f} %; srcKind / dstKind NULL or unknown): whether those "
                     "are pageable is not known")
    return "; ".join(parts) + "."


def copy_path_claims(copy_engines: Optional[CopyEnginesResult], idle_causes: IdleCausesResult,
                     gpu_time: GpuTimeResult, facts: TraceFacts, steps: Optional[StepResult] = None) -> Claims:
    """The finding (None when no path holds) and the copy idle ns of its path (module docstring); per-step figures
    only over ``steps`` of medium or high confidence (:attr:`.StepResult.sure`)."""
    sure = steps is not None and steps.sure
    paths = pacing_paths(copy_engines, set(gpu_time.kernel_devices()) if gpu_time.available else None, sure)
    if not paths:
        return Claims(None, {})
    p = paths[0]
    assert copy_engines is not None      # a path holds only with copy-engine rows
    taken = claimed(idle_causes, paths)
    at_stake = sum(sum(v.values()) for v in taken.values())
    rate = f"{p.gb_per_s:,.1f} GB/s" if p.gb_per_s is not None else "no measurable rate"
    win = sum(d.window_ns for d in idle_causes.devices if d.device_id == p.device_id) if idle_causes.available else 0
    held = sum(taken.get(p.device_id, {}).values())
    title = (f"The {p.path} copy path sets the pace on device {p.device_id} (busy {p.busy_pct:.1f} %): "
             + (f"{100.0 * held / win:.1f} % of the window ({dur(at_stake)}) beyond the kernels" if win else
                f"{dur(at_stake)} beyond the kernels"))
    ev = [f"Device {p.device_id}: {p.count:,} {p.label} copies keep the copy path busy {dur(p.busy_ns)} "
          f"({p.busy_pct:.1f} % of the window), "
          + (f"{fmt_bytes(p.bytes)} at {rate}" if p.bytes is not None else "bytes not recorded by this export")
          + (f"; median step: busy {p.step_busy_pct_p50:.1f} %, {fmt_bytes(p.bytes_per_step_p50 or 0)}"
             if sure and p.steps and p.bytes_per_step_p50 is not None and p.step_busy_pct_p50 is not None else "")
          + ".",
          f"Kernels run under {p.overlap_pct:.1f} % of that time ({dur(p.kernel_overlap_ns)}); "
          f"{dur(p.beyond_kernels_ns)} of it runs with no kernel on the GPU.",
          f"This finding claims the {dur(at_stake)} of idle time the idle-cause table charges to "
          f"{code_name(p.label)} copies (the copy path holds the GPU beyond the kernels); the copy finding keeps the "
          "rest."]
    if p.path in HOST_PATHS:
        ev.append(host_memory_evidence(p))
    advice, side = side_stream({**facts.advice_facts(), "gpu_one_copy_engine": facts.one_copy_engine(p.device_id)}, [p])
    ev += side
    if paths[1:]:
        ev.append("Also busy most of the window with kernels under it: " + "; ".join(
            f"{q.label} on device {q.device_id} ({q.busy_pct:.1f} %)" for q in paths[1:5]) + ".")
    opposite = {"H2D": "D2H", "D2H": "H2D"}.get(p.path)
    ids = advice_ids(p.path, pageable_matters(taken.get(p.device_id, {}), win), any(
        q.device_id == p.device_id and q.path == opposite and q.count > 0 for q in copy_engines.paths),
        bool(large_copies([p])))
    f = finding(
        "copy_path", category="copy_bound", severity="high" if p.busy_pct >= HIGH_BUSY_PCT else "medium",
        title=title, evidence=ev, advice=ids,
        facts=advice, time_at_stake_ns=at_stake,
        checks=checks(p, copy_engines.window_end_ns - copy_engines.window_start_ns, sure), device_id=p.device_id,
        cause=(COMPOSITE, p.label))
    return Claims(f, taken)
