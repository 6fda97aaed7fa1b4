"""What an idle finding claims beside what the idle-cause table charges (docs/FINDINGS.md, "Idle causes →
findings"): the ns handed to the launch-bound composite and those more specific findings claim, the idle within one
bin of the window's edges, and the lines that say why a finding's time differs from the table's."""

from __future__ import annotations

from typing import AbstractSet, Dict, Mapping, Optional, Sequence, Tuple

from ..analyses.idle.causes import IdleCausesResult
from ..vocabulary.code_spans import code_name
from ..vocabulary.units import fmt_dur as dur
from .base import Check, Quoted
from .launch_bound import HOST_KINDS

Claimed = Mapping[int, Mapping[Tuple[str, str], int]]

SPLIT_SHOWN_POINTS = 0.05   # a claimed share this far below the table's is stated and checked on its own


def split_claims(causes: IdleCausesResult, lb: Dict[int, Tuple[Check, ...]], active: AbstractSet[int],
                 claimed: Sequence[Claimed], launch_ranges: AbstractSet[str]
                 ) -> Tuple[Dict[str, Dict[int, Dict[str, int]]], Dict[int, Dict[Tuple[str, str], int]]]:
    """(per kind: per device list of (ns, detail ns dict)), launch-overhead parts per device (every ``launch`` ns;
    of ``host_cpu`` and launching ranges' ``nvtx``, the short-gap ns not after a drain: the host time after a
    blocking sync returned and before the thread's next launch is the step's, not per launch; the host-paced
    ``queued`` ns: the host's launch interval, not GPU-side latency, docs/MODEL.md); devices
    outside ``active`` (a copy or a few stray kernels on an otherwise unused GPU) are left out, and so are the ns
    ``claimed`` by more specific findings."""
    per_kind: Dict[str, Dict[int, Dict[str, int]]] = {}
    merged: Dict[int, Dict[Tuple[str, str], int]] = {}
    for d in causes.devices:
        if d.device_id not in active:
            continue
        for c in d.causes:
            ns = c.ns - sum(m.get(d.device_id, {}).get((c.kind, c.detail), 0) for m in claimed)
            if d.device_id in lb and (c.kind in HOST_KINDS or (c.kind == "nvtx" and c.detail in launch_ranges)
                                      or (c.kind == "queued" and c.host_paced_ns > 0)):
                part = min(ns, c.ns if c.kind == "launch" else c.host_paced_ns if c.kind == "queued"
                           else c.short_gap_ns - (c.after_sync_short_ns or 0))
                if part > 0:
                    merged.setdefault(d.device_id, {})[(c.kind, c.detail)] = part
                ns -= part
            if ns > 0:
                per_kind.setdefault(c.kind, {}).setdefault(d.device_id, {})[c.detail] = ns
    return per_kind, merged


def title_quoted(title_ns: Optional[int], total: int, detail: Optional[str], loop: bool, by: str, dev: int,
                 devices: Sequence[int]) -> Optional[Quoted]:
    """What the title's time is and what the time at stake covers, when the two differ (docs/FINDINGS.md, "One
    quantity per sentence"): ``detail`` the detail the title names alone (None: the kind's time on ``dev``),
    ``loop`` its part between kernels only, ``by`` what the details are when the finding has more than one."""
    if title_ns is None or title_ns == total:
        return None
    many_devs = len(devices) > 1
    what = ((f"in {code_name(detail or '–')}" if detail is not None else "")
            + (", in the loop" if loop else "") + (f" on device {dev}" if many_devs else "")).strip()
    spans = (f"in all {by}s" if by and detail is not None else "") + (
        ", start-up and shutdown included" if loop else "") + (
        " on devices " + ", ".join(str(d) for d in devices[:-1]) + f" and {devices[-1]}" if many_devs else "")
    if not what or not spans:      # the title's time differs only by the window's edges: nothing to label
        return None
    return Quoted(title_ns, what.lstrip(", "), spans.lstrip(", "))


def charge_line(dev: int, kind: str, table_ns: int, claim_ns: int, edge_ns: int, win_ns: int,
                claims: Tuple[Claimed, ...]) -> Optional[str]:
    """Why the idle-cause table's ``table_ns`` of ``kind`` on device ``dev`` differs from the ``claim_ns`` the
    finding claims there (``claims``: the launch-bound, per-step sync and copy-path findings' ns; ``edge_ns``: the
    ns within one bin of the window's edges); None when they agree. Shares when they differ by
    ``SPLIT_SHOWN_POINTS`` or more, else the times (the shares would print alike)."""
    if not win_ns or table_ns == claim_ns:
        return None
    split = 100.0 * (table_ns - claim_ns) / win_ns >= SPLIT_SHOWN_POINTS
    charged, kept = (f"{100.0 * table_ns / win_ns:.1f} %", f"{100.0 * claim_ns / win_ns:.1f} %") if split else \
        (dur(table_ns), dur(claim_ns))
    found = [w for w, m in zip(("the launch-bound finding", "the per-step sync finding", "the copy-path finding"),
                               claims) if sum(v for (k, _), v in m.get(dev, {}).items() if k == kind) > 0]
    elsewhere = found + (["the window's edges"] if edge_ns > 0 else [])
    return (f"The idle-cause table charges {charged} of device {dev}'s window to `{kind}`; this finding claims the "
            f"{kept} that no more specific finding explains and that lies more than one timeline bin from the "
            "window's edges" + (f" ({dur(edge_ns)} lies within one bin of an edge)" if edge_ns else "")
            + ("; " + " and ".join(elsewhere) + (" account" if len(elsewhere) > 1 else " accounts")
               + " for the rest" if found else "") + ".")


def edge_bin_ns(causes: IdleCausesResult) -> Dict[int, Dict[str, int]]:
    """Per device and idle kind, the ns in the first and last bins of its timeline (``timeline`` in report.json):
    idle that lies within one bin of the window's edges, on which no finding may rest (a window cut one bin off
    would not hold it)."""
    out: Dict[int, Dict[str, int]] = {}
    for b in causes.bins:
        n = len(b.edges_ns) - 1
        out[b.device_id] = {k: int(v[0]) + (int(v[-1]) if n > 1 else 0) for k, v in b.idle_ns_by_kind.items() if v}
    return out
