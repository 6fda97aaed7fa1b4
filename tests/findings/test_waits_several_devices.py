"""The waits finding when the launching threads of several devices wait alike (tensor-parallel workers, one per
GPU, each blocked in the same call): its title names every such device, not device 0 alone, and the evidence names
each device's thread (docs/FINDINGS.md, "Follow the wait")."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict

import pytest
from claims_support import finding_of
from synth import TraceBuilder

from nsys_llm_explainer.options import options_from_kwargs
from nsys_llm_explainer.pipeline import analyze_path

US = 1_000
PERIOD = 3_070 * US


def _workers(path: Path, flavor: str, one_thread: bool = False) -> Dict[str, Any]:
    """Two GPUs; per iteration i (t = i × 3.07 ms, 20 of them) the launcher of device d launches 4 `gemm` of 100 µs
    [t + 20, t + 420) µs, then waits in `sem_wait` [t + 450, t + 3,050) µs. Launchers: `MainThread` (pid 1000) for
    device 0 and `VllmWorker-1` (pid 2000) for device 1; ``one_thread``: `MainThread` launches on both devices (and
    waits once per iteration). Window [0, 58.75) ms (the last kernels end at 19 × 3.07 + 0.42 ms); each device's 19
    gaps of 2.67 ms hold 2.6 ms of `sem_wait`: 49.4 ms = 84.1 % of its window."""
    b = TraceBuilder(flavor, seed=1)
    for d in range(2):
        b.gpu(d)
        pid = 1000 if one_thread else 1000 + 1000 * d
        b.process(pid, "python3")
        g = b.thread(pid, pid, "MainThread" if d == 0 or one_thread else "VllmWorker-1")
        for i in range(20):
            t = i * PERIOD
            for j in range(4):
                b.launch(t + j * 10 * US + d * US, t + j * 10 * US + 5 * US, t + 20 * US + j * 100 * US,
                         t + 20 * US + (j + 1) * 100 * US, pid=pid, tid=pid, device=d, name="gemm")
            if d == 0 or not one_thread:
                b.osrt(t + 450 * US, t + 3_050 * US, tid_g=g, name="sem_wait")
    b.write(str(path), overwrite=True)
    return analyze_path(str(path), options_from_kwargs()).to_dict()


@pytest.mark.parametrize("flavor", ["2021.5", "2024.2"])
def test_every_device_whose_launcher_waits_alike_is_named(tmp_path: Path, flavor: str) -> None:
    """Before: "The launching thread waits in `sem_wait` while the GPU idles: 84.1 % (49.400 ms)" — device 0's
    thread and numbers alone, though device 1's worker waits the same 84.1 %."""
    f = finding_of(_workers(tmp_path / "t.sqlite", flavor), "idle_osrt")
    assert f["title"] == ("The launching threads of devices 0 and 1 wait in `sem_wait` while the GPUs idle: 84.1 % "
                          "(49.400 ms) on device 0, 84.1 % on device 1")
    assert ("Device 0's launching thread `MainThread` (tid 1000) waits in OS calls 84.1 % of the window (`sem_wait` "
            "84.1 %).") in f["evidence"]
    assert ("Device 1's launching thread `VllmWorker-1` (tid 2000) waits alike: in OS calls 84.1 % of the window "
            "(`sem_wait` 84.1 %).") in f["evidence"]


def test_one_thread_launching_on_both_devices_is_one_thread(tmp_path: Path) -> None:
    """One thread feeds both GPUs and waits: "The launching thread of devices 0 and 1 waits", no second thread."""
    f = finding_of(_workers(tmp_path / "t.sqlite", "2024.2", one_thread=True), "idle_osrt")
    assert f["title"] == ("The launching thread of devices 0 and 1 waits in `sem_wait` while the GPUs idle: 84.1 % "
                          "(49.400 ms) on device 0, 84.1 % on device 1")
    assert not any("waits alike" in e for e in f["evidence"])
