"""What the host does around each step's sync, as the per-step sync series (steps/sync.py) reads it: the
per-model pass over the CUDA API calls that every device's series shares (:class:`StepSyncContext`: blocking calls,
device-to-host / host-to-device copy calls and their bytes, CUDA event timing reads, per thread), sampling on the
host (:class:`HostSampling`: the copy pattern and the CPU samples in sampling code after the syncs) and event timing
of the steps. Definitions: docs/FINDINGS.md, "Per-step synchronization".
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable, ClassVar, Dict, Optional, Tuple

import numpy as np

from ...jsonable import NONE_OMITTED, FieldsJson
from ...model.clip import api_relink
from ...model.timeline import D2H, H2D, PAGEABLE, rows_by_value
from ...model.trace import ApiCalls, TraceModel
from ..api import classes as ac
from ..common.stats import percentile

_D2H_NAMES = {"cuMemcpyDtoH", "cuMemcpyAtoH"}
#: host-side sampling (docs/FINDINGS.md, "Per-step synchronization"): the copy pattern on at least this share of the
#: steps — a readback before the sync and a host-to-device copy by the same thread before its next launch ...
SAMPLING_STEP_SHARE = 0.8
#: ... reading back at least this many times the bytes it sends (per step, p50): logits of a ≥ 32k vocabulary vs the
#: token ids is ≥ 4,000× per sequence; token ids (+ top-20 logprobs) vs the next step's inputs under GPU sampling ≤ 20×
SAMPLING_BYTES_RATIO = 256
#: ... and at least this share of the thread's CPU samples in the gaps after the syncs in sampling code (a leaf or
#: caller frame matching :data:`SAMPLER_FRAME`)
SAMPLING_SAMPLES_SHARE = 0.5
SAMPLER_FRAME = re.compile(r"sampl|logits|top_?[kp]|min_p|penalt|bitmask|grammar", re.IGNORECASE)
#: a holding series whose thread reads CUDA event timings (``cudaEventElapsedTime``) in at least this share of its
#: steps syncs to time each step: a benchmark harness's timed repetitions or a per-step timer (docs/FINDINGS.md)
EVENT_TIMED_SHARE = 0.8
_ELAPSED = {"cudaEventElapsedTime", "cuEventElapsedTime"}


@dataclass(frozen=True)
class HostSampling(FieldsJson):
    """The copy pattern of sampling on the host, on one series: ``steps`` of its ``of_steps`` steps read back
    (device → host, before the sync) and then send (host → device, by the same thread, after the sync returns and
    before its next launch); per step (p50) ``read_bytes`` and ``sent_bytes``; ``samples``: the thread's CPU
    samples in the gaps after the syncs (None: the trace has no samples of it), ``sampler_samples`` of them with a
    leaf or caller frame in sampling code (:data:`SAMPLER_FRAME`), ``sampler_frame`` the most frequent such frame;
    ``holds``: every threshold met (docs/FINDINGS.md, "Per-step synchronization")."""

    steps: int
    of_steps: int
    read_bytes: float
    sent_bytes: float
    samples: Optional[int] = field(default=None, metadata=NONE_OMITTED)
    sampler_samples: int = 0
    sampler_frame: str = ""
    JSON_DERIVED: ClassVar[Tuple[str, ...]] = ("holds",)

    @property
    def holds(self) -> bool:
        return (self.of_steps > 0 and self.steps >= SAMPLING_STEP_SHARE * self.of_steps
                and self.read_bytes >= SAMPLING_BYTES_RATIO * max(self.sent_bytes, 1.0)
                and bool(self.samples) and self.sampler_samples >= SAMPLING_SAMPLES_SHARE * (self.samples or 0))


class StepSyncContext:
    """Per-model inputs of every series (computed once): per API row whether it is a blocking call and
    whether it issued a device-to-host copy, and its base-name index.

    ``steady``: the analysis window's model; what a call in it copied comes from the whole capture's copy rows
    (``model``, clipped to ``[start_ns, end_ns)`` as ``steady`` is; None: ``steady``'s own): a call in the window
    whose copy runs past the window's end — the last step's readback when the window ends at the last kernel, the
    instant its copy starts — still issued a device-to-host copy (docs/FINDINGS.md, "Per-step synchronization")."""

    def __init__(self, steady: TraceModel, model: Optional[TraceModel] = None, start_ns: int = 0,
                 end_ns: int = 0) -> None:
        self.model = steady
        api = steady.api
        self.ok = api is not None and len(api) > 0
        if api is None or not self.ok:
            return
        self.api: ApiCalls = api
        # base-name index per raw name: gathered only at the few sync points
        names, self.base_names, self.name_base = ac.name_bases(api.names)

        def per_name(pred: Callable[[str], bool]) -> np.ndarray:
            return np.array([pred(b) for b in names] + [False], bool)[api.name_idx]

        wait = per_name(lambda b: b in ac.SYNC_WAIT)
        sync_copy = per_name(lambda b: b in ac.SYNC_COPY)
        async_copy = per_name(ac.is_async_copy)
        d2h = per_name(lambda b: b in _D2H_NAMES)
        pageable_d2h, h2d = np.zeros(len(api), bool), np.zeros(len(api), bool)
        primary = api.primary
        self.copy_rows: np.ndarray = np.empty(0, np.int64)          # API rows that issued a D→H / H→D copy, ascending
        self.copy_row_bytes: np.ndarray = np.empty(0, np.float64)   # … the bytes each one copied
        mc, relink = steady.memcpy, None
        if model is not None and model is not steady:
            mc, relink = model.memcpy, api_relink(model, start_ns, end_ns)
        if mc is not None and len(mc):
            li = np.asarray(mc.launch_idx if mc.launch_idx.shape[0] == len(mc) else np.full(len(mc), -1), np.int64)
            if relink is not None:
                li = relink(li)                # a row of the window's API table, -1: a call outside the window
            kind = np.asarray(mc.copy_kind, np.int64)
            is_d2h, is_h2d = (kind == D2H) & (li >= 0), (kind == H2D) & (li >= 0)
            d2h[li[is_d2h]] = True
            pageable_d2h[li[is_d2h & (np.asarray(mc.dst_kind, np.int64) == PAGEABLE)]] = True
            h2d[li[is_h2d]] = True
            cp = np.flatnonzero(is_d2h | is_h2d)
            rows, inv = np.unique(li[cp], return_inverse=True)
            self.copy_rows = rows
            # a copy whose bytes the export does not record (-1) counts 0: it never shows bytes read or sent
            self.copy_row_bytes = np.bincount(inv, weights=np.maximum(np.asarray(mc.bytes, np.float64)[cp], 0.0),
                                              minlength=rows.shape[0])
        self.blocking = (wait | (sync_copy & d2h) | (async_copy & pageable_d2h)) & primary
        self.d2h_call = d2h & primary
        self.blocking_rows = _by_thread(api.gtid, self.blocking)
        self.elapsed_rows = _by_thread(api.gtid, per_name(lambda b: b in _ELAPSED) & primary)
        self.d2h_rows = _by_thread(api.gtid, self.d2h_call)
        self.h2d_rows = _by_thread(api.gtid, h2d & primary)    # per thread: its calls that issued a H→D copy
        self.sampler = _sampler_frames(steady)


    def needs_pieces(self) -> bool:
        """Whether a series can be made (a blocking call exists): its exposure reads the idle pieces."""
        return bool(self.ok and self.blocking_rows)


def _sampler_frames(model: TraceModel) -> Optional[np.ndarray]:
    """Per distinct frame of the model's CPU samples, whether its symbol names sampling code (:data:`SAMPLER_FRAME`;
    one regex per distinct frame); None: no samples."""
    sm = model.samples
    if sm is None or len(sm) == 0:
        return None
    return np.array([bool(SAMPLER_FRAME.search(f)) for f in sm.frame_symbol], bool)


def _bytes_between(ctx: StepSyncContext, rows: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Per window ``[lo_i, hi_i]``: the bytes copied by the calls ``rows`` (one thread's, in start order) that start
    in it (one ``searchsorted`` per bound on a running sum)."""
    if rows.shape[0] == 0:
        return np.zeros(lo.shape[0], np.float64)
    n = ctx.copy_rows.shape[0]
    b = np.zeros(rows.shape[0], np.float64)
    if n:
        at = np.minimum(np.searchsorted(ctx.copy_rows, rows), n - 1)
        b = np.where(ctx.copy_rows[at] == rows, ctx.copy_row_bytes[at], 0.0)   # a call with no copy row: 0
    cum = np.concatenate(([0.0], np.cumsum(b)))
    cs = ctx.api.start[rows]
    return cum[np.searchsorted(cs, hi, side="right")] - cum[np.searchsorted(cs, lo, side="left")]


def host_sampling(ctx: StepSyncContext, g: int, lastl: np.ndarray, e: np.ndarray, b: np.ndarray,
                   step: np.ndarray) -> Optional[HostSampling]:
    """The copy pattern of sampling on the host at the step sync points (``step``: mask of the sync points ending
    a step but the last): bytes read back in ``[last launch, return]`` and sent in ``[return, next launch)``; None
    when fewer than :data:`SAMPLING_STEP_SHARE` of the steps have both."""
    n_steps = int(step.sum())
    if n_steps == 0:
        return None
    lo, ret, nx = lastl[step], e[step], b[step]
    read = _bytes_between(ctx, ctx.d2h_rows.get(g, np.empty(0, np.int64)), lo, ret)
    sent = _bytes_between(ctx, ctx.h2d_rows.get(g, np.empty(0, np.int64)), ret, nx - 1)
    both = (read > 0) & (sent > 0)
    k = int(both.sum())
    if k < SAMPLING_STEP_SHARE * n_steps:
        return None
    samples: Optional[int] = None
    hits, top = 0, ""
    sm = ctx.model.samples
    if ctx.sampler is not None and sm is not None:
        a, z = np.searchsorted(sm.start, [int(ret[0]), int(nx.max())], side="left").tolist()
        t = sm.start[a:z]
        w = np.searchsorted(ret, t, side="right") - 1          # gap starting at or before the sample
        inside = (w >= 0) & (t < nx[np.maximum(w, 0)]) & (sm.gtid[a:z] == g)
        leaf, caller = sm.leaf[a:z][inside], sm.caller[a:z][inside]
        samples = int(inside.sum())
        m = ctx.sampler[leaf] | ctx.sampler[caller]
        hits = int(m.sum())
        if hits:
            fr = np.where(ctx.sampler[caller[m]], caller[m], leaf[m])
            cnt = np.bincount(fr)
            top = sm.frame_symbol[int(np.argmax(cnt))]
    return HostSampling(k, n_steps, percentile(read[both], 50), percentile(sent[both], 50), samples, hits, top)


def timed_steps(ctx: StepSyncContext, g: int, ed: np.ndarray) -> Optional[int]:
    """The steps ``[ed_j, ed_{j+1})`` (between the returns of consecutive step sync points) in which thread ``g``
    calls ``cudaEventElapsedTime`` / ``cuEventElapsedTime``, when they are at least :data:`EVENT_TIMED_SHARE` of the
    steps; None otherwise."""
    steps = ed.shape[0] - 1
    rows = ctx.elapsed_rows.get(g)
    if steps < 1 or rows is None or rows.shape[0] == 0:
        return None
    cs = ctx.api.start[rows]
    lo, hi = np.searchsorted(cs, ed[:-1], side="left"), np.searchsorted(cs, ed[1:], side="left")
    k = int((hi > lo).sum())
    return k if k >= EVENT_TIMED_SHARE * steps else None


def _by_thread(gtid: np.ndarray, mask: np.ndarray) -> Dict[int, np.ndarray]:
    """Thread → its rows in ``mask`` (ascending row order = start order)."""
    rows = np.nonzero(mask)[0]
    return {g: rows[r] for g, r in rows_by_value(gtid[rows])}


__all__ = ["EVENT_TIMED_SHARE", "HostSampling", "SAMPLER_FRAME", "SAMPLING_BYTES_RATIO", "SAMPLING_SAMPLES_SHARE",
           "SAMPLING_STEP_SHARE", "StepSyncContext", "host_sampling", "timed_steps"]
