"""Per-step sync under sampling on the host (a decode loop that samples its tokens on the CPU):
`StepSyncSeries.host_sampling` and the `step_sync.gpu_sampling` line. The double-buffer advice ("launch step N+1 before
reading step N's results") is replaced only when the trace shows all of: a readback before the sync and a host-to-device
copy by the same thread before its next launch on ≥ 80 % of the steps, ≥ 256× more bytes read than sent (p50 per step),
and ≥ 50 % of the thread's CPU samples in the gaps in sampling code. Frame names alone do not suffice: vLLM with GPU
sampling runs `get_pythonized_sample_results` on the host after its token readback, where double-buffering is right.
Each trace is built by hand; the truth is in the docstrings. Rule: docs/FINDINGS.md, "Per-step synchronization"."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import jsonschema
from claims_support import finding_of
from synth import TraceBuilder

from nsys_llm_explainer.findings.advice import ADVICE
from nsys_llm_explainer.options import options_from_kwargs
from nsys_llm_explainer.pipeline import analyze_path

US = 1_000
MS = 1_000_000
PID = 100
T0 = 5 * MS
PY = "/usr/lib/libpython3.10.so"
SCHEMA = Path(__file__).resolve().parents[2] / "src" / "nsys_llm_explainer" / "report_schema.json"
SAMPLER = [("_apply_min_p", PY), ("sample", PY), ("execute_model", PY)]
#: today's advice on these traces (no framework detected: the PyTorch line is not given)
DOUBLE_BUFFER = [ADVICE["step_sync.overlap"].text]


def _trace(read: int = 256 * 1024, frames: Optional[List[Tuple[str, str]]] = SAMPLER, n: int = 20) -> TraceBuilder:
    """As tests/findings/test_claims_cpu_sampling_decode.py `_cpu_sampling`: step i at t = T0 + 4 i ms, 10 kernels [t +
    20, t + 820) µs; ``read`` bytes read back (`cudaMemcpyAsync` [t + 100, t + 110) µs into pageable memory, copy [t +
    820, t + 850) µs); `cudaStreamSynchronize` [t + 110, t + 852) µs; 3 ms on the host (``frames``: a CPU sample every
    250 µs from t + 900 µs, 12 per gap; None: no sample); 8 B sent by `cudaMemcpy` [T − 20, T − 5) µs before the next
    step at T = t + 4 ms (19 steps)."""
    b = TraceBuilder()
    b.process(PID)
    g = b.thread(PID, 1, "EngineCore")
    for i in range(n):
        t = T0 + i * 4 * MS
        for k in range(10):
            b.launch(t + 10 * k * US, t + 10 * k * US + 5 * US, t + 20 * US + 80 * k * US,
                     t + 100 * US + 80 * k * US, pid=PID, tid=1, name=f"layer_gemm_{k % 3}")
        c = b.runtime(t + 100 * US, t + 110 * US, tid_g=g, name="cudaMemcpyAsync_v3020")
        b.memcpy(t + 820 * US, t + 850 * US, pid=PID, bytes=read, copy_kind=2, src_kind=2, dst_kind=0, corr=c)
        c = b.runtime(t + 110 * US, t + 852 * US, tid_g=g, name="cudaStreamSynchronize_v3020")
        b.sync(t + 112 * US, t + 851 * US, pid=PID, sync_type=3, corr=c)
        s = t + 900 * US
        while frames and s < t + 3752 * US:
            b.cpu_sample(s, tid_g=g, frames=frames)
            s += 250 * US
        nt = t + 4 * MS
        if i < n - 1:
            c = b.runtime(nt - 20 * US, nt - 5 * US, tid_g=g, name="cudaMemcpy_v3020")
            b.memcpy(nt - 15 * US, nt - 10 * US, pid=PID, bytes=8, copy_kind=1, src_kind=0, dst_kind=2, corr=c)
    return b


def _report(b: TraceBuilder, tmp_path: Path) -> Dict[str, Any]:
    p = tmp_path / "t.sqlite"
    b.write(str(p), overwrite=True)
    j = analyze_path(str(p), options_from_kwargs()).to_dict()
    jsonschema.validate(json.loads(json.dumps(j)), json.loads(SCHEMA.read_text()))
    return j


def _series(j: Dict[str, Any]) -> Dict[str, Any]:
    (s,) = [s for s in j["step_sync"]["series"] if s["holds"]]
    assert s["overlap_ns"] == 19 * 710 * US      # unchanged by the sampling rule
    return s


def test_host_sampling_replaces_the_double_buffer_advice(tmp_path: Path) -> None:
    """19 steps (the 20 step sync points but the last), each reading back 262,144 B and sending 8 B (ratio
    32,768 ≥ 256); the 228 samples in the gaps (12 × 19, t + 900 … t + 3650 µs, all before the token copy at
    T − 20 µs) all lead with `_apply_min_p` (matches `min_p`): 100 % ≥ 50 %. The evidence says so and the advice is
    `step_sync.gpu_sampling` alone."""
    j = _report(_trace(), tmp_path)
    assert _series(j)["host_sampling"] == {"steps": 19, "of_steps": 19, "read_bytes": 262144.0, "sent_bytes": 8.0,
                                           "samples": 228, "sampler_samples": 228, "sampler_frame": "_apply_min_p",
                                           "holds": True}
    f = finding_of(j, "step_sync")
    assert f["evidence"][-1].startswith("On 19 of its 19 steps the thread reads back 262.14 kB (p50) before the sync "
                                        "and sends 8 B (p50) to the GPU before its next launch, and 100 % of its 228 "
                                        "CPU samples in the gaps are in sampling code (`_apply_min_p`)"), f["evidence"]
    assert f["recommendation"] == [ADVICE["step_sync.gpu_sampling"].text]


def test_token_readback_with_sampler_named_host_code_keeps_the_double_buffer_advice(tmp_path: Path) -> None:
    """GPU sampling (vLLM's shape): each step reads back 16 B (token ids), sends 8 B, and the host then runs
    `get_pythonized_sample_results` (a sampler-named frame, 228 of 228 samples): 16 / 8 = 2 < 256, so the next
    step's input need not come from host-side sampling: double-buffering stays the advice."""
    j = _report(_trace(read=16, frames=[("get_pythonized_sample_results", PY)]), tmp_path)
    h = _series(j)["host_sampling"]
    assert (h["read_bytes"], h["sent_bytes"], h["samples"], h["sampler_samples"], h["holds"]) == \
        (16.0, 8.0, 228, 228, False)
    f = finding_of(j, "step_sync")
    assert f["recommendation"] == DOUBLE_BUFFER
    assert not any("sampling code" in e for e in f["evidence"])


def test_logits_readback_without_sampler_code_keeps_the_double_buffer_advice(tmp_path: Path) -> None:
    """The logits-sized readback (32,768×) but the gaps' 228 samples are all in `schedule`: 0 % in sampling code
    (< 50 %): not shown to be host sampling, the advice stays."""
    j = _report(_trace(frames=[("schedule", PY), ("step", PY)]), tmp_path)
    h = _series(j)["host_sampling"]
    assert (h["samples"], h["sampler_samples"], h["sampler_frame"], h["holds"]) == (228, 0, "", False)
    assert finding_of(j, "step_sync")["recommendation"] == DOUBLE_BUFFER


def test_without_samples_the_advice_is_unchanged(tmp_path: Path) -> None:
    """The copy pattern on 19 of 19 steps but no CPU sample: the trace cannot tell host sampling from a scheduler
    preparing the next inputs, so `samples` is absent, `holds` false, and the advice is today's."""
    j = _report(_trace(frames=None), tmp_path)
    h = _series(j)["host_sampling"]
    assert "samples" not in h and (h["steps"], h["of_steps"], h["holds"]) == (19, 19, False)
    assert finding_of(j, "step_sync")["recommendation"] == DOUBLE_BUFFER
