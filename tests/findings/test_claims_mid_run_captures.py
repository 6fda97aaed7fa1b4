"""Captures that start while the program already runs (`nsys start` / `nsys stop` attached to a running server,
`--capture-range=cudaProfilerApi` around a few training steps, `nsys profile --delay`): the first launch of a kernel
name INSIDE the capture is not the process's first launch of it, so its launch call is not a one-time cost
(`module_load`, "first launches"); where the capture shows the process starting CUDA (its `cuInit` before its first
launch) or shows nothing that bounds it, a first launch stays one (docs/MODEL.md, idle-cause kind 7).

Every trace is one host-bound loop on one thread: per step, 4 launch calls of 20 µs (kernels `k0` … `k3`), each
kernel [call end + 1 µs, + 3 µs); the next call starts 1 µs after the kernel ends. Each launch call lies wholly in a
GPU idle gap, so 20 µs of idle per call is the call's: 20 steps × 4 calls × 20 µs = 1.600 ms, of which the 4 first
launches hold 4 × 20 µs = 80 µs."""

from __future__ import annotations

from pathlib import Path
from typing import Dict, Optional

import pytest
from synth import TraceBuilder

from nsys_llm_explainer.options import options_from_kwargs
from nsys_llm_explainer.pipeline import analyze_path

US, MS = 1_000, 1_000_000
PID = 4242
T0 = 1 * MS
STEP = 4 * 25 * US


def _loop(tmp_path: Path, flavor: str, *, in_flight: bool = False, init: bool = False, profiler: bool = False,
          meta: Optional[Dict[str, str]] = None) -> Dict[str, int]:
    """The loop above from ``T0``; ``in_flight``: a 50 µs kernel of the process already running at the capture's
    start [T0 − 60 µs, T0 − 10 µs) whose launch call was not recorded (attached mid-run); ``init``: a `cuInit` call
    [T0 − 200 µs, T0 − 150 µs); ``profiler``: a `cudaProfilerStart` call [T0 − 30 µs, T0 − 25 µs) and a
    `cudaProfilerStop` after the loop; ``meta``: META_DATA_CAPTURE rows. Returns idle ns per cause kind."""
    b = TraceBuilder(flavor)
    b.process(PID, "python3")
    b.gpu(0)
    g = b.thread(PID, 1, "python3")
    for k, v in (meta or {}).items():
        b.meta(k, v)
    if in_flight:
        b.kernel(T0 - 60 * US, T0 - 10 * US, pid=PID, name="paged_attention_v2_kernel", corr=900_000)
    if init:
        b.runtime(T0 - 200 * US, T0 - 150 * US, tid_g=g, name="cuInit", event_class=1)
    if profiler:
        b.runtime(T0 - 30 * US, T0 - 25 * US, tid_g=g, name="cudaProfilerStart_v4000")
    t = T0
    for _ in range(20):
        for j in range(4):
            b.launch(t, t + 20 * US, t + 21 * US, t + 24 * US, pid=PID, tid=1, name=f"k{j}")
            t += 25 * US
    if profiler:
        b.runtime(t + 10 * US, t + 15 * US, tid_g=g, name="cudaProfilerStop_v4000")
    p = tmp_path / "t.sqlite"
    b.write(str(p), overwrite=True)
    rep = analyze_path(str(p), options_from_kwargs(window=(T0, T0 + 20 * STEP))).to_dict()
    (d,) = rep["idle_causes"]["devices"]
    out: Dict[str, int] = {}
    for c in d["causes"]:
        out[c["kind"]] = out.get(c["kind"], 0) + c["ns"]
    return out


@pytest.mark.parametrize("flavor", ["2022.4", "2024.2"])
def test_server_attached_mid_run_has_no_first_launches(tmp_path: Path, flavor: str) -> None:
    """vLLM server attached with `nsys start` while a decode kernel runs (its launch call was before the capture):
    before, the 4 first-in-capture launch calls were "first launches" (80 µs of `module_load`, one-time); now all
    80 calls are `launch`: 1.600 ms."""
    kinds = _loop(tmp_path, flavor, in_flight=True)
    assert "module_load" not in kinds
    assert kinds["launch"] == 80 * 20 * US


@pytest.mark.parametrize("flavor", ["2021.5", "2024.2"])
def test_profiler_api_range_around_training_steps_has_no_first_launches(tmp_path: Path, flavor: str) -> None:
    """`--capture-range=cudaProfilerApi` around steps 100–110: the program's `cudaProfilerStart` / `Stop` calls (and,
    in exports that record it, the start trigger) bound the recording; the kernels ran in steps 0–99."""
    meta = {"START_TRIGGER": "CudaProfilerApi"} if flavor != "2021.5" else None
    kinds = _loop(tmp_path, flavor, profiler=True, meta=meta)
    assert "module_load" not in kinds
    assert kinds["launch"] == 80 * 20 * US


def test_delayed_capture_has_no_first_launches(tmp_path: Path) -> None:
    """`nsys profile --delay 30`: `START_DELAY_MS` 30 000, no CUDA initialization recorded."""
    kinds = _loop(tmp_path, "2024.2", meta={"START_DELAY_MS": "30000"})
    assert "module_load" not in kinds
    assert kinds["launch"] == 80 * 20 * US


def test_delayed_capture_of_a_process_started_after_the_delay_keeps_first_launches(tmp_path: Path) -> None:
    """`--delay 30` of a process that initializes CUDA (`cuInit`) inside the capture: its first launches are its
    first: 80 µs of `module_load`, 1.520 ms of `launch`."""
    kinds = _loop(tmp_path, "2024.2", init=True, meta={"START_DELAY_MS": "30000"})
    assert kinds["module_load"] == 4 * 20 * US
    assert kinds["launch"] == 76 * 20 * US


@pytest.mark.parametrize("flavor", ["2021.5", "2024.2"])
def test_whole_run_capture_keeps_first_launches(tmp_path: Path, flavor: str) -> None:
    """A whole-run capture (nothing bounds it, no GPU work before the first launch call): the true first-launch
    case stays: 80 µs of `module_load`, 1.520 ms of `launch`."""
    kinds = _loop(tmp_path, flavor)
    assert kinds["module_load"] == 4 * 20 * US
    assert kinds["launch"] == 76 * 20 * US


def _idle_lead(tmp_path: Path, flavor: str, attached: bool) -> str:
    """A server idle 40 ms before its traffic, then 200 steps of the loop above from 40 ms (first kernel at
    40.021 ms); ``attached``: `nsys start` while a 50 µs decode kernel [50, 100) µs runs (its launch call not
    recorded), else a whole-run capture with `cuInit` at [10, 60) µs. Returns the window's reason."""
    b = TraceBuilder(flavor)
    b.process(PID, "python3")
    b.gpu(0)
    g = b.thread(PID, 1, "python3")
    if attached:
        b.kernel(50 * US, 100 * US, pid=PID, name="paged_attention_v2_kernel", corr=900_000)
    else:
        b.runtime(10 * US, 60 * US, tid_g=g, name="cuInit", event_class=1)
    t = 40 * MS
    for _ in range(200):
        b.nvtx_push_pop(t, t + STEP, "step", tid_g=g)
        for j in range(4):
            b.launch(t, t + 20 * US, t + 21 * US, t + 24 * US, pid=PID, tid=1, name=f"k{j}")
            t += 25 * US
    p = tmp_path / "lead.sqlite"
    b.write(str(p), overwrite=True)
    return str(analyze_path(str(p), options_from_kwargs()).window.reason)


@pytest.mark.parametrize("flavor", ["2022.4", "2024.2"])
def test_attached_capture_lead_is_not_called_warm_up(tmp_path: Path, flavor: str) -> None:
    """The window trims the 40 ms before the first step either way; attached mid-run, nothing in it warmed up (the
    process ran before the capture): it read "trimmed 39.971 ms of warm-up", now a lead-in. The lead runs from the
    trace's start (the in-flight kernel, 50 µs) to the first step's kernel (40.021 ms): 39.971 ms, busy 50 µs =
    0.13 %."""
    reason = _idle_lead(tmp_path, flavor, attached=True)
    assert reason.startswith("Auto-detected window: trimmed 39.971 ms of lead-in (GPU busy 0.13%; the capture began "
                             "while the program ran); "), reason
    assert "warm-up" not in reason


def test_whole_run_capture_lead_stays_warm_up(tmp_path: Path) -> None:
    """The same server captured from its start (`cuInit` at 10 µs recorded): the 40.011 ms lead (10 µs → 40.021 ms,
    no kernel) is its start-up, "warm-up"."""
    reason = _idle_lead(tmp_path, "2024.2", attached=False)
    assert reason.startswith("Auto-detected window: trimmed 40.011 ms of warm-up (GPU busy 0.0%); "), reason
