"""Claims about copies (copy paths, copy idle, memory kinds) on hand-built traces whose truth is known by
construction (numbers worked out in the docstrings)."""

from __future__ import annotations

from pathlib import Path

from synth import TraceBuilder

from nsys_llm_explainer.options import options_from_kwargs
from nsys_llm_explainer.pipeline import analyze_path

US = 1_000
PID = 7
T0 = 100 * US   # the first period starts here (its launch call before it)


def _run(b: TraceBuilder, tmp_path: Path, name: str, **options):
    p = tmp_path / name
    b.write(str(p), overwrite=True)
    return analyze_path(str(p), options_from_kwargs(**options))


def test_a_copy_path_hidden_under_the_kernels_does_not_set_the_pace(tmp_path: Path) -> None:
    """100 periods of 100 µs, window [T0, T0 + 10 ms): a 90 µs kernel at [0, 90) µs of each on stream 7 and a pinned
    2 MiB Host-to-Device copy at [10, 60) µs on stream 8, inside the kernel. H2D path busy 50 µs of 100 (50.0 %),
    all of it under a kernel (overlap 100 %), 0 µs beyond the kernels: the kernels (busy 90.0 %) set the pace, the
    copies are hidden. It read "The H2D copy path sets the pace on device 0 (busy 50.0 %): 0.0 % of the window
    (0.00 µs) beyond the kernels" beside the GPU-bound finding ("kernel time sets the pace"). The check
    ``copy_path_beyond_kernels_pct`` = |C \\ K| / window = 0 < 5 now fails; GPU-bound stays."""
    b = TraceBuilder()
    b.process(PID)
    g = b.thread(PID, 1)
    for i in range(100):
        t = T0 + i * 100 * US
        b.launch(t - 3 * US, t - 1 * US, t, t + 90 * US, pid=PID, tid=1, name="gemm_layer")
        c = b.runtime(t + 1 * US, t + 3 * US, tid_g=g, name="cudaMemcpyAsync_v3020")
        b.memcpy(t + 10 * US, t + 60 * US, pid=PID, bytes=2 << 20, src_kind=1, dst_kind=2, stream=8, corr=c)
    rep = _run(b, tmp_path, "hidden.sqlite", window=(T0, T0 + 10_000 * US))
    (h2d,) = rep.copy_engines.paths
    assert (h2d.busy_ns, h2d.kernel_overlap_ns, h2d.beyond_kernels_ns) == (5_000 * US, 5_000 * US, 0)
    ids = [f.id for f in rep.findings]
    assert ids[0] == "gpu_bound" and "copy_path" not in ids and "idle_copy" not in ids, ids
    assert rep.headline.top_finding_id == "gpu_bound"


def test_a_copy_path_with_kernels_under_it_and_idle_beyond_them_still_paces(tmp_path: Path) -> None:
    """100 periods of 100 µs, window [T0, T0 + 10 ms): a 50 µs kernel at [0, 50) µs on stream 7 and a pinned 1 MiB
    Host-to-Device copy at [20, 98) µs on stream 8. H2D busy 78 µs of 100 (78.0 %), 30 µs under the kernel
    (38.5 % ≥ 25), 48 µs beyond it: 4.8 ms, 48.0 % of the window, which ends with the last copy at T0 + 9 998 µs
    (4 800 / 9 998 ≥ 5 %): the copy path sets the pace, medium (< 80 %); it
    claims the 48 µs × 100 = 4.8 ms the idle-cause table charges to Host-to-Device copies."""
    b = TraceBuilder()
    b.process(PID)
    g = b.thread(PID, 1)
    for i in range(100):
        t = T0 + i * 100 * US
        b.launch(t - 3 * US, t - 1 * US, t, t + 50 * US, pid=PID, tid=1, name="gemm")
        c = b.runtime(t + 1 * US, t + 2 * US, tid_g=g, name="cudaMemcpyAsync_v3020")
        b.memcpy(t + 20 * US, t + 98 * US, pid=PID, bytes=1 << 20, src_kind=1, dst_kind=2, stream=8, corr=c)
    rep = _run(b, tmp_path, "pace.sqlite", window=(T0, T0 + 10_000 * US))
    f = rep.findings[0]
    assert f.id == "copy_path" and f.severity == "medium" and f.holds()
    assert f.time_at_stake_ns == 4_800 * US
    beyond = next(c for c in f.checks if c.metric == "copy_path_beyond_kernels_pct")
    assert (beyond.observed, beyond.threshold) == (100.0 * 4_800 / 9_998, 5.0)
