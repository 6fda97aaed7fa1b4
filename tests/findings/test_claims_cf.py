"""Claims sweep, NVTX / CPU samples / Unified Memory (helper CF): sentences a report made that its trace contradicts.
Each trace is built by hand; the truth is worked out in the docstring."""

from __future__ import annotations

from pathlib import Path

import pytest
from synth import TraceBuilder

from nsys_llm_explainer.options import options_from_kwargs
from nsys_llm_explainer.pipeline import analyze_path

US = 1_000
MS = 1_000_000
PID = 100
PY = "/usr/lib/libpython3.10.so"


def _run(b: TraceBuilder, tmp_path: Path, **options):
    p = tmp_path / "t.sqlite"
    b.write(str(p), overwrite=True)
    return analyze_path(str(p), options_from_kwargs(**options)).to_dict()


def _finding(rep, fid: str):
    return next(f for f in rep["findings"] if f["id"] == fid)


def test_host_cpu_advice_does_not_cite_samples_that_miss_its_gaps(tmp_path: Path) -> None:
    """Thread 1 launches a 300 µs kernel every 1 ms (call [t+50, t+60) µs, kernel [t+100, t+400) µs) and is in the
    push/pop range `prepare` [t+400, t+950) µs, which launches nothing; 5 CPU samples per step, at t+450 … t+850 µs,
    all inside `prepare`. Idle per step: `nvtx` [t+400, t+950) = 550 µs, `host_cpu` [t+950, t+1050) = 100 µs
    (20 steps: 1.95 ms with the 50 µs before the first call, 9.8 % of the 19.95 ms window: a finding). None of the
    100 samples lies in a `host_cpu` piece, so that finding's evidence says so — and its advice must not say
    "the CPU samples ... (evidence above) name the code that ran while the GPU idled"; the `nvtx` finding, whose
    gaps hold all 100 samples, keeps citing them."""
    b = TraceBuilder()
    b.process(PID)
    g1 = b.thread(PID, 1, "main")
    for i in range(20):
        t = i * MS
        b.launch(t + 50 * US, t + 60 * US, t + 100 * US, t + 400 * US, pid=PID, tid=1, name="gemm")
        b.nvtx_push_pop(t + 400 * US, t + 950 * US, "prepare", tid_g=g1)
        for s in range(5):
            b.cpu_sample(t + 450 * US + s * 100 * US, tid_g=g1, frames=[("tokenize", PY), ("main", "/usr/bin/python3")])
    rep = _run(b, tmp_path)
    host = _finding(rep, "idle_host_cpu")
    assert "CPU samples: none of the 100 samples of the gaps' host thread fall inside them." in host["evidence"]
    assert not any("name the code that ran" in a for a in host["recommendation"]), host["recommendation"]
    assert any("Profile the host side" in a for a in host["recommendation"])
    nvtx = _finding(rep, "idle_nvtx")
    assert any(e.startswith("CPU samples of the launching thread inside these gaps (100 over 11.000 ms")
               for e in nvtx["evidence"])
