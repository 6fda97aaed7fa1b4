"""Host-paced queued time (docs/MODEL.md, "Host-paced queued time"; docs/FINDINGS.md, "Launch-bound pattern"): a
`queued` gap whose next kernel was launched only after the previous kernel started is the host's launch interval
(launch-bound), up to the previous kernel's own launch-to-start delay; a deeper queue (a CUDA graph, a host
running ahead) keeps the per-kernel launch latency reading. Every trace is built by hand; the numbers in the
docstrings are worked out from it."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict

from claims_support import finding_of
from synth import TraceBuilder

from nsys_llm_explainer.analyses.idle.result import IdleCause
from nsys_llm_explainer.options import options_from_kwargs
from nsys_llm_explainer.pipeline import analyze_path

US = 1_000
MS = 1_000 * US
PID = 100
KERNEL = "vectorized_elementwise_kernel"


def _eager(b: TraceBuilder, a: int, n: int, ahead: int = 0) -> int:
    """``n`` launch calls [a, a + 3 µs) every 6 µs; each 2 µs kernel starts 4 µs after its call returns, plus 6 µs
    per kernel the host runs ``ahead``. The next start time."""
    for _ in range(n):
        s = a + 7 * US + ahead * 6 * US
        b.launch(a, a + 3 * US, s, s + 2 * US, pid=PID, tid=PID, name=KERNEL)
        a += 6 * US
    return a


def _graphs(b: TraceBuilder, t: int, n: int) -> int:
    """``n`` `cudaGraphLaunch` calls [t, t + 10 µs) every 120 µs, each replaying 20 nodes of 2 µs every 6 µs from
    20 µs after the call starts. The next start time."""
    for _ in range(n):
        b.graph_launch(t, t + 10 * US, pid=PID, tid=PID,
                       kernels=[(t + 20 * US + i * 6 * US, t + 22 * US + i * 6 * US, KERNEL) for i in range(20)])
        t += 120 * US
    return t


def _finish(b: TraceBuilder, a: int) -> TraceBuilder:
    """A final `cudaStreamSynchronize` at ``a`` (the trace's end)."""
    c = b.runtime(a, a + 5 * US, tid_g=b.thread(PID, PID, "python3"), name="cudaStreamSynchronize_v3020")
    b.sync(a + 1 * US, a + 4 * US, pid=PID, sync_type=3, corr=c)
    return b


def _builder() -> TraceBuilder:
    b = TraceBuilder()
    b.process(PID)
    b.thread(PID, PID, "python3")
    return b


def _run(b: TraceBuilder, tmp_path: Path, **options: Any) -> Any:
    p = tmp_path / "t.sqlite"
    b.write(str(p), overwrite=True)
    return analyze_path(str(p), options_from_kwargs(**options))


def _queued(rep: Any) -> IdleCause:
    (dev,) = rep.idle_causes.devices
    return next(c for c in dev.causes if c.kind == "queued")


def _launch_check(d: Dict[str, Any]) -> float:
    f = finding_of(d, "launch_overhead")
    return next(c["observed"] for c in f["checks"] if c["metric"] == "host_overhead_pct")


def test_kernels_launched_one_at_a_time_are_launch_bound(tmp_path: Path) -> None:
    """2000 eager kernels: kernel k runs [a + 7, a + 9) µs, kernel k + 1's call ends at a + 9 (after kernel k
    started at a + 7): each of the 1999 gaps between kernels is 4 µs of `queued`, host-paced up to kernel k's own
    delay 7 − 3 = 4 µs: all of it, 7.996 ms. The launch-bound finding claims them, no latency verdict remains."""
    b = _builder()
    rep = _run(_finish(b, _eager(b, 1 * MS, 2000)), tmp_path)
    q = _queued(rep)
    assert q.host_paced_ns == 1999 * 4 * US
    assert q.host_paced_tiny_ns == q.host_paced_short_piece_ns == 1999 * 4 * US
    d = rep.to_dict()
    ids = {f["id"] for f in d["findings"]}
    assert "launch_overhead" in ids and "idle_queued" not in ids, ids
    assert d["headline"]["verdict"].startswith("Launch-bound"), d["headline"]["verdict"]
    win = rep.idle_causes.devices[0].window_ns
    assert abs(_launch_check(d) - 100.0 * 1999 * 4 * US / win) < 1e-6
    assert "host-paced launches (each launched only after the kernel before it started) 7.996 ms" in \
        " ".join(finding_of(d, "launch_overhead")["evidence"])


def test_a_host_running_two_kernels_ahead_keeps_the_latency_verdict(tmp_path: Path) -> None:
    """The same kernels started 12 µs later ([a + 19, a + 21) µs): kernel k + 1's call ends at a + 9, before kernel
    k started: a deeper queue. Its 4 µs gaps are not host-paced (0 ns), and the verdict stays per-kernel launch
    latency between back-to-back queued kernels."""
    b = _builder()
    rep = _run(_finish(b, _eager(b, 1 * MS, 2000, ahead=2) + 12 * US), tmp_path)
    q = _queued(rep)
    assert q.host_paced_ns == 0 and q.ns >= 1999 * 4 * US
    d = rep.to_dict()
    assert "launch_overhead" not in {f["id"] for f in d["findings"]}
    assert d["headline"]["verdict"].startswith("Per-kernel launch latency: idle between back-to-back queued"), \
        d["headline"]["verdict"]


def test_cuda_graph_replays_keep_the_latency_verdict(tmp_path: Path) -> None:
    """100 graph replays of 20 nodes: nodes of one replay share its launch call (never host-paced), and graph
    j + 1's call returns at t + 130 µs, before graph j's last node starts at t + 134: 0 host-paced ns; the
    verdict stays per-kernel launch latency."""
    b = _builder()
    rep = _run(_finish(b, _graphs(b, 1 * MS, 100)), tmp_path)
    q = _queued(rep)
    assert q.host_paced_ns == 0 and q.ns >= 100 * 19 * 4 * US
    d = rep.to_dict()
    assert "launch_overhead" not in {f["id"] for f in d["findings"]}
    assert d["headline"]["verdict"].startswith("Per-kernel launch latency"), d["headline"]["verdict"]


def test_a_mix_splits_host_paced_from_queued_latency(tmp_path: Path) -> None:
    """1000 eager kernels, then 50 graph replays from the last eager call + 6 µs (t0 = a + 6 µs, a the last call's
    start). Host-paced: 999 eager gaps × 4 µs, plus the gap into the first graph [a + 9, a + 26) µs whose queued
    part [a + 16, a + 26) is capped at the last eager kernel's own 4 µs delay: 4.000 ms. Not host-paced: that gap's
    other 6 µs, the graphs' 50 × 19 + 49 gaps of 4 µs (3.996 ms) and the first kernel's 4 µs wait after its call
    (no kernel before it): 4.006 ms, still read as per-kernel launch latency; the launch-bound finding holds the
    host-paced 4.000 ms; the 7 µs launch call in that gap is the graph's first launch, one-time (`module_load`,
    docs/MODEL.md), though its kernels' names ran eagerly."""
    b = _builder()
    a = _eager(b, 1 * MS, 1000)
    _finish(b, _graphs(b, a, 50))
    rep = _run(b, tmp_path)
    q = _queued(rep)
    assert q.host_paced_ns == 1000 * 4 * US
    assert q.ns - q.host_paced_ns == 6 * US + (50 * 19 + 49) * 4 * US + 4 * US
    d = rep.to_dict()
    win = rep.idle_causes.devices[0].window_ns
    assert abs(_launch_check(d) - 100.0 * (1000 * 4 * US) / win) < 1e-6
    f = finding_of(d, "idle_queued")
    assert f["title"].startswith("Per-kernel launch latency: idle between back-to-back queued kernels"), f["title"]
    assert f["time_at_stake_ns"] <= q.ns - q.host_paced_ns


def test_a_delay_grown_past_the_previous_kernel_s_is_not_host_paced(tmp_path: Path) -> None:
    """One call every 40 µs; even kernels start 4 µs after their call returns, odd ones 24 µs after. Even → odd gap
    [a + 9, a + 67): host CPU, the call [a + 40, a + 43), then 24 µs `queued`, host-paced (the call returned after
    the even kernel started at a + 7) only up to the even kernel's own 4 µs delay. Odd → even gap [a + 69, a + 87):
    4 µs `queued` after the call [a + 80, a + 83), host-paced up to the odd kernel's 24 µs delay: all 4. Per pair
    28 µs `queued`, 8 µs host-paced; 500 pairs."""
    b = _builder()
    a = 1 * MS
    for k in range(1000):
        d = (4 if k % 2 == 0 else 24) * US
        b.launch(a, a + 3 * US, a + 3 * US + d, a + 5 * US + d, pid=PID, tid=PID, name=KERNEL)
        a += 40 * US
    rep = _run(_finish(b, a), tmp_path)
    q = _queued(rep)
    assert q.ns == 4 * US + 500 * 24 * US + 499 * 4 * US        # the first kernel's 4 µs wait too
    assert q.host_paced_ns == 500 * 4 * US + 499 * 4 * US


def test_the_queued_wording_is_chosen_from_the_ns_left_after_the_host_paced_part(tmp_path: Path) -> None:
    """2000 eager kernels (host-paced: 1999 gaps × 4 µs), then 40 kernels of 2 µs, 100 µs apart, all launched
    ahead at once (calls [a + 3i, a + 3i + 2) µs, kernels from a + 200 µs): a deep queue. The first gap into them,
    [a + 3, a + 200) µs, is host-paced for 4 µs (the last eager kernel's delay); the rest of the `queued` ns —
    193 µs, 39 × 100 µs and the first kernel's 4 µs, 4.097 ms — lie in gaps ≥ 10 µs. The launch-bound finding
    holds the 8.000 ms host-paced; the `queued` finding, on what is left, is a dependency or latency wait, not
    "per-kernel launch latency between back-to-back kernels" (a share over all `queued` ns, 66 % of them in tiny
    gaps, would have said so). Window: the whole run, [1 ms, the last kernel's end + 100 µs)."""
    b = _builder()
    a = _eager(b, 1 * MS, 2000)
    t = a + 200 * US
    for j in range(40):
        b.launch(a + 3 * j * US, a + (3 * j + 2) * US, t + j * 102 * US, t + j * 102 * US + 2 * US,
                 pid=PID, tid=PID, name=KERNEL)
    end = t + 40 * 102 * US
    rep = _run(_finish(b, end), tmp_path, window=(1 * MS, end))    # the whole run: no tail left out
    q = _queued(rep)
    assert q.host_paced_ns == 2000 * 4 * US
    assert q.ns - q.host_paced_ns == 193 * US + 39 * 100 * US + 4 * US
    assert q.tiny_gap_ns > 0.5 * q.ns
    d = rep.to_dict()
    assert d["headline"]["verdict"].startswith("Launch-bound"), d["headline"]["verdict"]
    f = finding_of(d, "idle_queued")
    assert f["title"].startswith("The GPU waits with work already queued"), f["title"]
