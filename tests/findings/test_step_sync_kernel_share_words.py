"""The per-step sync finding's kernel share names both its terms (docs/FINDINGS.md, "Per-step synchronization"):
the steps are the intervals between the thread's sync points, the denominator the device's kernels in the window —
beside NVTX step ranges that hold every kernel, "19 steps holding 95 % of the device's kernels" read as a
contradiction of the steps section's "encloses 100% of kernel launches"."""

from __future__ import annotations

from pathlib import Path

from claims_support import finding_of
from test_claims_generations_native_engines import MS, PID, decode

from nsys_llm_explainer.options import options_from_kwargs
from nsys_llm_explainer.pipeline import analyze_path
from nsys_llm_explainer.render import render_markdown


def test_sync_steps_share_is_of_the_window_s_kernels_beside_nvtx_steps(tmp_path: Path) -> None:
    """The decode loop of test_claims_generations_native_engines (20 steps of 10 kernels, each ended by a readback
    and `cudaStreamSynchronize`) with an NVTX range `decode_step` around each whole step [1 + 3 i, 4 + 3 i) ms
    (less 1 µs): the NVTX steps hold all 200 kernels; the sync points' 19 steps (first sync to last) hold the
    kernels of steps 1-19, 190 of the 200 in the window = 95 % — step 0's 10 kernels start before the first sync
    point."""
    b = decode("2022.4")
    g = b.thread(PID, 1, "llama-server")
    for i in range(20):
        t = 1 * MS + i * 3 * MS
        b.nvtx_push_pop(t, t + 3 * MS - 1_000, "decode_step", tid_g=g)
    p = tmp_path / "t.sqlite"
    b.write(str(p))
    rep = analyze_path(str(p), options_from_kwargs())
    j = rep.to_dict()
    ev = finding_of(j, "step_sync")["evidence"][0]
    assert ev.endswith("`cudaStreamSynchronize` ends a step every 3.000 ms (p90 3.000 ms); the 19 steps from the first "
                       "to the last sync point hold 95 % of the device's 200 kernels in the window."), ev
    (s,) = j["step_sync"]["series"]
    assert s["reason"].startswith("20 sync points of `cudaStreamSynchronize`; the steps between them hold 95 % of the "
                                  "device's kernels in the window;"), s["reason"]
    assert "**20 steps** from NVTX range `decode_step`" in render_markdown(rep)
