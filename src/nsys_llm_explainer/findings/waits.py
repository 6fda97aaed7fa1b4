"""Words of the ``osrt`` idle finding when the launching thread *waits* (docs/FINDINGS.md, "Follow the wait"):
the NVTX range around the waits as context, what the other threads of its process did meanwhile (with numbers),
and advice chosen by what they did — file I/O, CUDA copies, other work, or nothing traced."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

from ..analyses.common.stats import pct
from ..analyses.threads.waits import LauncherWaits, OtherProcess, OverlapRow, WaitsResult
from ..vocabulary.code_spans import code_name
from ..vocabulary.labels import label_shows_tid
from ..vocabulary.os_calls import is_wait
from .base import MEDIUM_SHARE

#: another thread is named when it is active during at least this % of the waits
SHOWN_THREAD_PCT = 10.0
#: threads named in the evidence
SHOWN_THREADS = 3
#: the I/O (or copy) advice when the named threads spend at least this % of the waits in such calls
DOING_PCT = 25.0
#: the finding says its call waits "inside" an NVTX range when that range holds at least this % of the call's waits
CONTEXT_PCT = 50.0
#: another process is named (and `wait.other_process` given) when it holds at least this % of the CPU samples taken
#: inside the waits (every thread's but the launching thread's) ...
SHOWN_PROCESS_PCT = 10.0
#: ... and at least this many of them: a stray wake-up or two is not a process running through the waits (10 samples
#: ≈ 10 ms on a CPU at nsys's default 1 kHz sampling)
MIN_PROCESS_SAMPLES = 10
#: the advice when another process ran through the waits (the workload fact picks one)
OTHER_PROCESS_ADVICE = ("wait.other_process", "wait.other_process.training", "wait.other_process.torch")


@dataclass(frozen=True)
class WaitStory:
    """``context``: the NVTX range around most of the waits ("" none); ``evidence`` lines; ``advice`` ids."""

    context: str
    evidence: Tuple[str, ...]
    advice: Tuple[str, ...]
    #: the other devices whose launching thread waits in the same call (:func:`waits_alike`): (device, share of its
    #: window, whether that thread is the finding's device's)
    alike: Tuple[Tuple[int, float, bool], ...] = ()

    def waiters(self, dev: int) -> Tuple[str, str, str, str]:
        """Who waits (with its verb), the GPUs, the title device and the others' shares, as the title says them: the
        launching thread of ``dev`` alone, or the thread(s) of every device in :attr:`alike` — the title must not
        single one out ("The launching threads of devices 0 and 1 wait", "… on device 0, 84.1 % on device 1")."""
        if not self.alike:
            return "The launching thread waits", "the GPU idles", "", ""
        one = all(same for _, _, same in self.alike)
        shares = [x for _, x, _ in self.alike]
        lo, hi = f"{min(shares):.1f}", f"{max(shares):.1f}"
        return (f"The launching thread{'' if one else 's'} of {_devices([dev] + [d for d, _, _ in self.alike])} "
                f"{'waits' if one else 'wait'}", "the GPUs idle", f" on device {dev}",
                f", {lo if lo == hi else lo + '–' + hi} % on {_devices([d for d, _, _ in self.alike])}")


def _devices(ds: Sequence[int]) -> str:
    """"device 1", "devices 0 and 1", "devices 0, 1 and 2" (sorted)."""
    ds = sorted(ds)
    return f"device {ds[0]}" if len(ds) == 1 else "devices " + ", ".join(map(str, ds[:-1])) + f" and {ds[-1]}"


def launcher_of(waits: Optional[WaitsResult], device: int) -> Optional[LauncherWaits]:
    """The followed launching thread of ``device`` whose waits leave the GPU idle longest."""
    if waits is None or not waits.available:
        return None
    cand = [w for w in waits.launchers if device in w.devices]
    return max(cand, key=lambda w: (w.gpu_idle_ns, w.wait_ns, -w.gtid)) if cand else None


def thread_named(label: str, tid: int) -> str:
    """A thread as the evidence names it: its name and tid; its tid alone when the trace names it not (no
    ThreadNames row: never a placeholder shown as its name)."""
    if not label:
        return f"tid {tid}"
    return f"{code_name(label)} (tid {tid})" if not label_shows_tid(label, tid) else code_name(label)


def _proc(name: str, pid: int) -> str:
    """A process as the evidence names it: its name and pid; its pid alone when the trace names it not (no
    PROCESSES row)."""
    return f"{code_name(name)} (pid {pid})" if name else f"pid {pid}"


def _doing(w: LauncherWaits, gtid: int) -> str:
    """What one thread was in during the waits: its largest NVTX range, OS call and CUDA call, with shares."""
    parts: List[str] = []
    for what, word in (("nvtx", "in NVTX {}"), ("osrt", "in {}"), ("cuda", "in {}")):
        rows = w.rows_of(gtid, what)
        if rows:
            r = rows[0]
            kind = {"file_io": ", file I/O", "wait": ", itself waiting"}.get(r.os_class, "")
            parts.append(word.format(code_name(r.name)) + f" {r.pct_of_waits:.0f} %{kind}")
    return "; ".join(parts) if parts else "active"


def _waits_in(w: LauncherWaits, gtid: int) -> str:
    """The largest waiting call (OS or CUDA synchronize) of another thread during the waits, with its share."""
    r = max((r for r in w.rows_of(gtid) if r.what != "nvtx" and r.os_class == "wait"), key=lambda r: r.ns,
            default=None)
    return f"in {code_name(r.name)} {r.pct_of_waits:.0f} %" if r is not None else "in OS calls"


def _advice(w: LauncherWaits, shown: List[int], ran: bool = False) -> Tuple[str, ...]:
    """By what the named threads did during the waits: file I/O, CUDA copies, other OS / CUDA calls, code outside
    calls; nothing traced and no CPU sample (``ran``: another thread was sampled running during the waits)."""
    if not shown and not ran:
        return ("wait.unseen", "wait.unseen.training")     # the workload fact picks one
    rows: List[OverlapRow] = [r for g in shown for r in w.rows_of(g)]
    io = max((r.pct_of_waits for r in rows if r.what == "osrt" and r.os_class == "file_io"), default=0.0)
    copies = max((r.pct_of_waits for r in rows if r.what == "cuda" and "Memcpy" in r.name), default=0.0)
    # in OS or CUDA calls that do not wait (a thread's own waiting calls are not work: OtherThread)
    busy_os = max((r.pct_of_waits for r in rows if r.what in ("osrt", "cuda") and r.os_class != "wait"), default=0.0)
    ids: List[str] = []
    if io >= DOING_PCT:
        ids.append("wait.io")
    if copies >= DOING_PCT:
        ids.append("wait.copies")
    if not ids:     # code outside calls, or calls that neither do file I/O nor copy (wait.cpu would deny them)
        ids.append("wait.cpu" if busy_os < DOING_PCT else "wait.calls")
    return tuple(ids)


def wait_story(waits: Optional[WaitsResult], device: int, call: str,
               shares: Optional[Dict[int, float]] = None) -> Optional[WaitStory]:
    """The evidence and advice of the ``osrt`` finding of ``device`` whose largest call is ``call``; None when
    ``call`` does not wait or the launching thread was not followed (its waits < 1 % of the window). ``shares``:
    ``call``'s idle-cause share of each other device's window (:func:`waits_alike`)."""
    if not is_wait(call):
        return None
    w = launcher_of(waits, device)
    if w is None:
        return None
    calls = ", ".join(f"{code_name(c.name)} {c.pct_of_window:.1f} %" for c in w.calls[:3])
    shared = w.shared_with()
    who = f"Launching thread {thread_named(w.thread, w.tid)} ({shared})" if shared else \
        f"The launching thread {thread_named(w.thread, w.tid)}"
    ev = [f"{who} waits in OS calls {w.wait_pct_of_window:.1f} % of the window ({calls})."]
    own = next((c for c in w.calls if c.name == call), None)   # the finding's call: the range around its own waits
    context = own.context if own is not None and own.context_pct >= CONTEXT_PCT else ""
    if own is not None and context:
        ev.append(f"The {code_name(call)} waits are inside NVTX range {code_name(context)} ({own.context_pct:.0f} % of "
                  "their time): the thread is blocked there, not running.")
    shown = [t for t in w.threads if t.pct_of_waits >= SHOWN_THREAD_PCT][:SHOWN_THREADS]
    n_s = w.samples_in_waits or 0
    ran = sorted((t for t in w.threads if t.sampled and pct(t.sampled, n_s) >= SHOWN_THREAD_PCT),
                 key=lambda t: (-(t.sampled or 0), t.tid))[:SHOWN_THREADS]
    if shown:
        ev.append("Meanwhile: " + "; ".join(
            f"{thread_named(t.thread, t.tid)} works {t.pct_of_waits:.0f} % of that time ({_doing(w, t.gtid)})"
            for t in shown) + ".")
    else:
        blocked = [t for t in w.threads if t.waiting_pct_of_waits >= SHOWN_THREAD_PCT][:SHOWN_THREADS]
        ev.append("No other thread of its process works (an NVTX range, a CUDA call or an OS call that does not "
                  f"wait) for as much as {SHOWN_THREAD_PCT:g} % of these waits" + ("; " + "; ".join(
                      f"{thread_named(t.thread, t.tid)} waits too ({_waits_in(w, t.gtid)})" for t in blocked)
                      if blocked else "") + ".")
    if ran:
        ev.append("CPU samples taken during these waits: " + "; ".join(
            f"{thread_named(t.thread, t.tid)} sampled running in {t.sampled:,} of the waits' {n_s:,} samples"
            for t in ran)
            + " (samples of the other threads of its process).")
    elif n_s:
        k = sum(1 for t in w.threads if t.sampled)
        ev.append(f"CPU samples taken during these waits: {n_s:,} samples of {k} other threads of its process, "
                  f"none with {SHOWN_THREAD_PCT:g} % of them.")
    elif w.samples_in_waits == 0 and not shown:
        ev.append("No CPU sample of another thread of its process falls inside these waits (the trace has CPU "
                  "samples): none was sampled running during them.")
    n_all = w.sampled_elsewhere()
    every = qualifying(w.processes or (), n_all)     # other processes sampled running through the waits
    if every:
        ev.extend((processes_line(every, n_all, "these waits"), source_line(every, "these waits")))
    elif w.process_samples:
        k = len(w.processes or ())
        ev.append(f"CPU samples of other processes taken during these waits: {w.process_samples:,} samples of "
                  f"{k} process{'es' if k != 1 else ''}, none with {SHOWN_PROCESS_PCT:g} % of the {n_all:,} samples "
                  f"taken inside them and {MIN_PROCESS_SAMPLES} samples.")
    named = [t.gtid for t in shown] + [t.gtid for t in ran if t.gtid not in {s.gtid for s in shown}]
    advice = _advice(w, named, n_s > 0)
    if every:   # another process ran through the waits: not "no one is seen working" (lack of load)
        advice = tuple(a for a in advice if not a.startswith("wait.unseen")) + OTHER_PROCESS_ADVICE
    alike, alike_ev = waits_alike(waits, device, call, shares or {})
    if alike_ev:       # beside other devices' threads, this one is the device's
        ev[0] = ev[0].replace("The launching thread", f"Device {device}'s launching thread", 1)
    return WaitStory(context, tuple(ev + alike_ev), advice, alike)


def waits_alike(waits: Optional[WaitsResult], device: int, call: str, shares: Dict[int, float]
                ) -> Tuple[Tuple[Tuple[int, float, bool], ...], List[str]]:
    """The other devices whose launching thread waits in ``call`` too — ``call``'s idle-cause row holds ≥
    :data:`~findings.base.MEDIUM_SHARE` % of the device's window (``shares``: device → that %) and the device's
    followed launching thread waits in ``call`` — as (device, share, whether that thread is ``device``'s); and the
    evidence naming their threads (none for ``device``'s own thread, which the story names)."""
    w = launcher_of(waits, device)
    out: List[Tuple[int, float, bool]] = []
    lines: List[str] = []
    for d, share in sorted(shares.items()):
        o = launcher_of(waits, d)
        c = next((c for c in o.calls if c.name == call), None) if o is not None else None
        if o is None or c is None or share < MEDIUM_SHARE or w is None:
            continue
        out.append((d, share, o.gtid == w.gtid))
        if o.gtid != w.gtid:
            lines.append(f"Device {d}'s launching thread {thread_named(o.thread, o.tid)} waits alike: in OS calls "
                         f"{o.wait_pct_of_window:.1f} % of the window ({code_name(call)} {c.pct_of_window:.1f} %).")
    if len(lines) > SHOWN_THREADS:
        lines = lines[:SHOWN_THREADS] + [f"{len(lines) - SHOWN_THREADS} more devices' launching threads wait alike."]
    return tuple(out), lines


def qualifying(processes: Sequence[OtherProcess], n_all: int) -> List[OtherProcess]:
    """The ``processes`` (most samples first) sampled running through a set of times: ≥ :data:`SHOWN_PROCESS_PCT` %
    of the ``n_all`` samples inside them (every thread's but the launching thread's) and ≥
    :data:`MIN_PROCESS_SAMPLES`. One rule for the launching thread's waits and for the ``host_cpu`` gaps it is not
    sampled in (findings/idle.py)."""
    return [p for p in processes if p.sampled >= MIN_PROCESS_SAMPLES and pct(p.sampled, n_all) >= SHOWN_PROCESS_PCT]


def processes_line(every: Sequence[OtherProcess], n_all: int, during: str, listed: str = "waits") -> str:
    """The evidence line naming the qualifying processes ``every`` (:func:`qualifying`, all of them) sampled
    running during ``during`` ("these waits", "these gaps"): the first :data:`SHOWN_THREADS`, the rest counted
    (``listed``: where report.json lists them all)."""
    procs = every[:SHOWN_THREADS]
    more = len(every) - len(procs)   # e.g. eight data-loader workers: the rest are counted, not dropped
    return (f"CPU samples of other processes taken during {during}: " + "; ".join(
        _proc(p.process, p.pid) + f" sampled running in {p.sampled:,} of the {n_all:,} samples taken inside them"
        for p in procs)
        + (f"; {more} more process{'es' if more != 1 else ''} with {sum(p.sampled for p in every[len(procs):]):,} "
           f"of them, each ≥ {SHOWN_PROCESS_PCT:g} % (all in report.json `{listed}`)" if more else "")
        + " (every thread's but the launching thread's).")


def source_line(every: Sequence[OtherProcess], during: str) -> str:
    """The evidence line naming the process(es) ``every`` (:func:`qualifying`) the launching thread may be waiting
    for, so that the other-process advice speaks of a named process, not of a guessed role (tokenizer, scheduler)."""
    procs = every[:SHOWN_THREADS]
    more = len(every) - len(procs)
    one = len(every) == 1
    return (f"The process{'' if one else 'es'} that ran during {during}: " + ", ".join(_proc(p.process, p.pid)
                                                                              for p in procs)
            + (f" and {more} more" if more else "") + " — the step's input may come from "
            + ("there" if one else "them") + " (the samples show that it ran then, not that the wait was for it).")
