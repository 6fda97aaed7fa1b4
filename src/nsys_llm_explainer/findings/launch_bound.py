"""The launch-bound composite finding: devices whose kernels are short and launched fast while the GPU is mostly idle
(the checks), and the launch overhead the finding claims on them (docs/FINDINGS.md, "Launch-bound pattern")."""

from __future__ import annotations

from collections import Counter
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ..analyses.idle.gpu_time import GpuTimeResult
from ..analyses.idle.host_samples import HostSamplesResult, samples_evidence
from ..analyses.kernels.traits import KernelTraitsResult
from ..vocabulary.cause_kinds import COMPOSITE_CAUSES, KIND
from ..vocabulary.code_spans import code_name
from ..vocabulary.units import fmt_dur as dur
from ..vocabulary.units import fmt_us_unit as us
from .base import HIGH_SHARE, MEDIUM_SHARE, Check, Finding, Scope, finding

HOST_OVERHEAD = "host_overhead"   # the launch-bound finding's cause (vocabulary.cause_kinds.COMPOSITE_CAUSES)
assert HOST_OVERHEAD in COMPOSITE_CAUSES
HOST_KINDS = ("launch", "host_cpu")   # the launch overhead the launch-bound composite may claim
LAUNCH_BOUND_MAX_BUSY = 50.0
LAUNCH_BOUND_MAX_P50_NS = 20_000
LAUNCH_BOUND_MIN_RATE = 5_000.0


def kind_severity(share: float, kind: str) -> Optional[str]:
    """The severity of a finding of cause kind ``kind`` whose share of the window is ``share`` %: none under
    MEDIUM_SHARE, "low" for a low-only kind, else "high" from HIGH_SHARE."""
    if share < MEDIUM_SHARE:
        return None
    if KIND[kind].low_only:
        return "low"
    return "high" if share >= HIGH_SHARE else "medium"


def launch_bound_devices(gpu: GpuTimeResult) -> Dict[int, Tuple[Check, ...]]:
    """Devices where the launch-bound pattern holds, with the checks that show it."""
    out: Dict[int, Tuple[Check, ...]] = {}
    for d in gpu.devices:
        sc = Scope(device_id=d.device_id)
        checks = (Check("busy_pct", d.busy_pct, "<", LAUNCH_BOUND_MAX_BUSY, sc),
                  Check("kernel_p50_ns", d.kernel_p50_ns, "<=", LAUNCH_BOUND_MAX_P50_NS, sc),
                  Check("launch_rate_per_s", d.launches_per_s, ">=", LAUNCH_BOUND_MIN_RATE, sc))
        if all(c.holds() for c in checks):
            out[d.device_id] = checks
    return out


def launch_finding(merged: Dict[int, Dict[Tuple[str, str], int]], win: Dict[int, int],
                    lb: Dict[int, Tuple[Check, ...]], gpu: GpuTimeResult,
                    traits: KernelTraitsResult, facts: Mapping[str, Any],
                    samples: Optional[HostSamplesResult]) -> Optional[Finding]:
    """The launch-bound finding: on the launch-bound devices (:func:`launch_bound_devices`), the launch overhead
    ``merged`` holds per device (parts by (kind, detail), docs/FINDINGS.md "Launch-bound"), titled by the device
    with the largest share of its window ``win``."""
    if not merged:
        return None
    share = {d: 100.0 * sum(v.values()) / win[d] for d, v in merged.items() if win.get(d)}
    dev = max(share, key=lambda x: (share[x], -x))
    sev = kind_severity(share[dev], "launch")
    if sev is None:
        return None
    parts: Counter[Tuple[str, str]] = sum(map(Counter, merged.values()), Counter())
    total = sum(parts.values())
    d = gpu.device(dev)
    assert d is not None   # a launch-bound device (lb) is one of gpu.devices
    own = sum(merged[dev].values())     # the title's share and time are one quantity: the device's
    # the device's launch overhead (GPU idle charged to it) per kernel: what the GPU waits per kernel for its
    # launch, not how long a launch call takes (a 10 µs call overlapping the kernel before it costs less)
    host_per_kernel = own / d.kernel_count if d.kernel_count else 0.0
    ev = [f"Device {dev}: {d.launches_per_s:,.0f} kernels/s with a median kernel of {us(d.kernel_p50_ns)}, GPU busy "
          f"{d.busy_pct:.1f} %; the GPU waits about {us(host_per_kernel)} per kernel for its launch (the launch "
          f"overhead below over its {d.kernel_count:,} kernels: GPU idle, not the length of a launch call).",
          "Launch overhead: " + "; ".join(
              (f"launch calls {code_name(det)} {dur(ns)}" if kind == "launch" else
               f"host CPU between launches inside range {code_name(det)} (gaps < 1 ms) {dur(ns)}" if kind == "nvtx" else
               f"launched kernels waiting to start after host-paced launches (each launched only after the kernel "
               f"before it started) {dur(ns)}" if kind == "queued" else
               f"host CPU between launches (gaps < 1 ms) {dur(ns)}")
              for (kind, det), ns in sorted(parts.items(), key=lambda x: -x[1])[:5]) + "; time inside NVTX ranges, "
          "OS calls, other CUDA calls, syncs and copies is left to their own findings."]
    sampled = samples_evidence(samples, dev, "host_cpu")      # what the host ran between launches
    if sampled:
        ev.append(sampled)
    checks = lb[dev] + (Check("host_overhead_pct", share[dev], ">=", MEDIUM_SHARE, Scope(device_id=dev)),)
    tiny = traits.traits.get("tiny_eager_pointwise")
    if tiny is not None and traits.kernel_count:
        ev.append(f"{tiny.kernel_count:,} tiny eager pointwise kernels (median under 10 µs) are "
                  f"{100.0 * tiny.kernel_count / traits.kernel_count:.0f} % of the kernels in the window: fusing "
                  "them removes launches.")
    return finding(
        "launch_overhead", severity=sev,
        title=f"Launch-bound: the GPU waits ~{us(host_per_kernel)} per kernel for its launch; the kernels run "
              f"~{us(d.kernel_p50_ns)}: "
              f"{share[dev]:.1f} % of the window ({dur(own)}" + (f" on device {dev}; {dur(total)} on all devices)"
                                                               if len(merged) > 1 else ")"),
        evidence=ev, advice=kernel_lines(KIND["launch"].advice, traits),
        facts=facts, time_at_stake_ns=total,
        checks=checks,
        device_id=dev, cause=(HOST_OVERHEAD, ""))


def kernel_lines(ids: Sequence[str], traits: KernelTraitsResult) -> List[str]:
    """``ids`` without the lines whose claim about the window's kernels is false of the trace: with no eager
    pointwise kernel (the ``eager_pointwise`` trait), ``compiled.graph_breaks`` ("the small kernels left are eager
    regions between graph breaks") and ``launch.fuse`` ("many tiny elementwise kernels"); ``launch.graphs.more``
    ("the launches that remain are outside them") when every kernel ran as a graph node, ``launch.graphs.all``
    unless every one did."""
    eager = traits.traits.get("eager_pointwise")
    drop = set() if eager is not None and eager.kernel_count > 0 else {"compiled.graph_breaks", "launch.fuse"}
    drop.add("launch.graphs.more" if traits.graph_node_kernels >= traits.kernel_count else "launch.graphs.all")
    return [i for i in ids if i not in drop]
