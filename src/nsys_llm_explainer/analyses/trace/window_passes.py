"""One-time passes at the start of a steady-state window (docs/FINDINGS.md, "Steady-state window"): an autotuning
pass (rule 6: the `autotune` trait's trial kernels) and one-time work of kernel names that never run again (rule 7:
a cuDNN benchmark pass of ordinary names); and what a trimmed side is when module load / unload calls fill it (start-up
or teardown)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Dict, Optional

import numpy as np

from ...model import intervals as iv
from ...model.trace import TraceModel
from ...vocabulary.code_spans import code_name
from ...vocabulary.units import fmt_int
from ..api import classes as ac
from ..kernels.trials import autotune_trial_names, marked_pass

AUTOTUNE_TRIAL_SHARE = 0.5   # rule 6: a leading stretch is an autotuning pass when its trials hold half its kernel time
ONE_OFF_LEAD_SHARE = 0.25    # rule 7: a one-off name runs no kernel starting after the window's first quarter
ONE_OFF_SHARE = 0.5          # rule 7: a leading stretch is one-time work when one-off names hold half its kernel time
MODULE_CALL_SHARE = 0.5      # a trimmed side is start-up / teardown when module calls run during half of it
_MODULE_CALL = re.compile(r"^(cu|cuda)(Module|Library)(Load|Unload)")


@dataclass(frozen=True)
class AutotuneLead:
    """An autotuning pass at the start of a window (rule 6): its kernels start before ``until_ns``."""

    until_ns: int
    kernels: int         # kernels starting in [window start, until_ns)
    trial_pct: float     # Σ duration of its `autotune` trials / of its kernels × 100
    left: int            # kernels starting in [until_ns, window end)


def autotune_lead(model: TraceModel, s: int, e: int) -> Optional[AutotuneLead]:
    """Rule (6): the autotuning pass leading ``[s, e)``, or None. Of the kernels starting in the window (all devices
    pooled), the trials are those of the ``autotune`` trait's names (:func:`kernels.trials.autotune_trial_names`);
    the pass (:func:`kernels.trials.marked_pass`; to the window's end when no other kernel follows the trials) is one
    when its trials hold ≥ :data:`AUTOTUNE_TRIAL_SHARE` of the
    kernel time (Σ duration) of the kernels starting in ``[s, until)``."""
    k = model.kernels
    if k is None or len(k) == 0:
        return None
    trial_name = autotune_trial_names(k.names)
    if not trial_name.any():
        return None
    inw = (k.start >= s) & (k.start < e)
    trial = trial_name[k.name_idx] & inw
    if not trial.any():
        return None
    until, n, total, trials, left = marked_pass(np.asarray(k.start, np.int64), np.asarray(k.end, np.int64), trial,
                                               inw, e)
    if total <= 0 or trials < AUTOTUNE_TRIAL_SHARE * total:
        return None
    return AutotuneLead(until, n, round(100.0 * trials / total, 1), left)


@dataclass(frozen=True)
class OneOffLead:
    """One-time work leading a window (rule 7): its kernels start before ``until_ns``."""

    until_ns: int
    kernels: int         # kernels starting in [window start, until_ns)
    one_off_pct: float   # Σ duration of its kernels of one-off names / of its kernels × 100


def one_off_lead(model: TraceModel, s: int, e: int, min_kernels: int) -> Optional[OneOffLead]:
    """Rule (7): the one-time work leading ``[s, e)`` (a cuDNN benchmark pass trying algorithms it never runs again),
    or None. Of the kernels starting in the window (all devices pooled), the *one-off* ones are those of names no
    kernel of which starts at or after ``s + ONE_OFF_LEAD_SHARE × (e − s)``; the stretch is their pass
    (:func:`kernels.trials.marked_pass`: it ends at ``until``, the first other kernel after them). It is one-time
    work when the one-off kernels hold ≥ :data:`ONE_OFF_SHARE` of the kernel time (Σ duration) of the kernels
    starting in ``[s, until)`` and the rest is a repetition: ≥ ``min_kernels`` kernels start in ``[until, e)`` and
    each of their names runs at least twice there (a single pass, each layer's kernel once, is no steady state to
    trim towards)."""
    k = model.kernels
    if k is None or len(k) == 0 or e <= s:
        return None
    inw = (k.start >= s) & (k.start < e)
    late = np.zeros(len(k.names), bool)
    late[k.name_idx[inw & (k.start >= s + ONE_OFF_LEAD_SHARE * (e - s))]] = True
    once = inw & ~late[k.name_idx]
    if not once.any():
        return None
    until, n, total, one, left = marked_pass(np.asarray(k.start, np.int64), np.asarray(k.end, np.int64), once, inw, e)
    if left == 0 or left < min_kernels or total <= 0 or one < ONE_OFF_SHARE * total:
        return None
    rest = inw & (k.start >= until)
    return None if int(np.unique(k.name_idx[rest], return_counts=True)[1].min()) < 2 else \
        OneOffLead(until, n, round(100.0 * one / total, 1))


def module_calls(model: TraceModel, a: int, b: int) -> Optional[str]:
    """What the trimmed side ``[a, b)`` is when CUDA module / library load or unload calls (runtime or driver rows,
    clipped to it) run during ≥ :data:`MODULE_CALL_SHARE` of it — the words the window's reason adds to the side,
    naming the call names by descending clipped time with their counts ("teardown: `cuModuleUnload` × 5,490 run
    during 90.9% of it"; "start-up" when the largest is a load) —; else None."""
    api = model.api
    if api is None or len(api) == 0 or b <= a:
        return None
    base = [ac.normalize(n) for n in api.names]
    mod = np.array([bool(_MODULE_CALL.match(n)) for n in base] + [False], bool)
    rows = np.flatnonzero(mod[api.name_idx] & api.primary & (api.start < b) & (api.end > a))
    if rows.shape[0] == 0:
        return None
    s, e = np.maximum(api.start[rows], a), np.minimum(api.end[rows], b)
    covered = iv.union_blocks(s, e).length
    if covered < MODULE_CALL_SHARE * (b - a):
        return None
    idx = api.name_idx[rows]
    ns = np.bincount(idx, weights=(e - s).astype(np.float64), minlength=len(base))
    count = np.bincount(idx, minlength=len(base))
    per_ns: Dict[str, float] = {}                    # per base name (few distinct names): clipped ns, calls
    per_n: Dict[str, int] = {}
    for i in np.flatnonzero(count):
        per_ns[base[i]] = per_ns.get(base[i], 0.0) + float(ns[i])
        per_n[base[i]] = per_n.get(base[i], 0) + int(count[i])
    names = sorted(per_ns, key=lambda n: (-per_ns[n], n))
    calls = ", ".join(f"{code_name(n)} × {fmt_int(per_n[n])}" for n in names)
    largest = _MODULE_CALL.match(names[0])        # its Load / Unload part, not the name's end (a name may go on)
    what = "teardown" if largest is not None and largest.group(3) == "Unload" else "start-up"
    return f"{what}: {calls} run during {round(100.0 * covered / (b - a), 1)}% of it"
