"""Claims about processes, threads and collectives (bystander process, a thread's own kernels in its sync steps, custom
collectives across ranks, last arrivals, launching-thread share, the all_to_all / softmax / optimizer categories, XLA =
jax, speculative steps, pipeline bubble) on every exporter generation the synthetic writer knows (2021.5 … 2026.2;
/work/shared/SCHEMA.md §8: no ENUM tables in 2021.5, EXPORT_META_DATA and no META_DATA_CAPTURE up to 2022.4,
greenContextId from 2023.4, graph-level tables from 2024.2, TARGET_INFO_CUDA_DEVICE only in 2026.x). Global ids,
StringIds, ThreadNames, PROCESSES and the runtime / NVTX / OSRT columns are the same in all of them, so every one of
these claims reads nothing a generation lacks: each test's hand-computed answers must come out of every generation. The
one thing only 2026.x records, the per-process device map, is tested on its own."""

from __future__ import annotations

import importlib
import inspect
import sqlite3
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Tuple

import pytest
import test_claims_shared_gpu as shared_gpu
from claims_support import finding_of
from synth import FLAVORS, TraceBuilder

from nsys_llm_explainer.options import options_from_kwargs
from nsys_llm_explainer.pipeline import analyze_path

US = 1_000
MS = 1_000 * US
GENERATIONS = sorted(FLAVORS)      # 2021.5, 2022.4, 2023.4, 2024.2, 2026.2

#: the test modules of these claims (their traces are built with ``TraceBuilder()`` or
#: ``TraceBuilder("2024.2")``)
CLAIM_MODULES = ("test_claims_shared_gpu", "test_claims_custom_collectives", "test_claims_kernel_categories",
                 "test_claims_speculative_decoding", "test_claims_encoder_decoder_diffusion",
                 "test_claims_kv_cache_swap", "test_cluster_claims_custom_collectives", "test_cluster_claims_hosts",
                 "test_launching_thread", "test_pipeline_bubble", "test_nccl_ties")
#: their tests that build no trace (a pure function's table)
NO_TRACE = {"test_last_arrivals_one_rule"}


def _claim_tests() -> List[Tuple[str, str]]:
    out = []
    for m in CLAIM_MODULES:
        mod = importlib.import_module(m)
        out += [(m, n) for n, f in vars(mod).items()
                if n.startswith("test_") and inspect.isfunction(f) and n not in NO_TRACE]
    return out


@pytest.mark.slow
@pytest.mark.parametrize("flavor", [g for g in GENERATIONS if g != "2024.2"])
@pytest.mark.parametrize("module,name", _claim_tests())
def test_the_claims_hold_on_every_generation(module: str, name: str, flavor: str, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test of :data:`CLAIM_MODULES` (its trace and its hand-computed answers, worked out in its docstring)
    run again with every trace written as ``flavor`` instead of 2024.2: the same answers (no traceback, the same
    findings, numbers and cluster claims)."""
    mod = importlib.import_module(module)
    built: List[str] = []

    class Generation(TraceBuilder):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            built.append(flavor)
            kwargs.pop("flavor", None)
            super().__init__(flavor, *args[1:], **kwargs)

    monkeypatch.setattr(mod, "TraceBuilder", Generation)
    test = getattr(mod, name)
    # a test parametrized by flavor itself gets this generation's (its builder writes ``flavor`` either way)
    given = {"tmp_path": tmp_path, "flavor": flavor}
    test(**{p: given[p] for p in inspect.signature(test).parameters})
    assert built, f"{module}.{name} built no trace through its module's TraceBuilder"


def _with_device_map(path: Path, mapping: Mapping[Tuple[int, int], int]) -> None:
    """Add the 2026.x table ``TARGET_INFO_CUDA_DEVICE(gpuId, cudaId, pid, uuid, numMultiprocessors)`` (one row per
    process and CUDA ordinal it saw: ``mapping[(pid, cudaId)] = gpuId``) to the export at ``path``."""
    con = sqlite3.connect(str(path))
    con.execute("CREATE TABLE TARGET_INFO_CUDA_DEVICE (gpuId INTEGER NOT NULL, cudaId INTEGER NOT NULL, "
                "pid INTEGER NOT NULL, uuid TEXT, numMultiprocessors INTEGER)")
    con.executemany("INSERT INTO TARGET_INFO_CUDA_DEVICE VALUES (?, ?, ?, ?, ?)",
                    [(g, c, p, f"GPU-{g}", 132) for (p, c), g in mapping.items()])
    con.commit()
    con.close()


def _monitored(tmp_path: Path, flavor: str, mapping: Optional[Mapping[Tuple[int, int], int]] = None
               ) -> Dict[str, Any]:
    """Report of :func:`test_claims_shared_gpu._monitored` (owner pid 100: 500 GEMMs of 90 µs, 45 ms, a sync per 1 ms
    step; monitor pid 300: 49 probes of 2 µs, 98 µs, each on CUDA device 0 as its process sees it) written as
    ``flavor`` with two GPUs in TARGET_INFO_GPU, and with the 2026.x device map ``mapping`` when given."""
    b = TraceBuilder(flavor)
    b.gpu(0)
    b.gpu(1)
    shared_gpu._monitored(b)
    p = tmp_path / "t.sqlite"
    b.write(str(p), overwrite=True)
    if mapping is not None:
        _with_device_map(p, mapping)
    return analyze_path(str(p), options_from_kwargs()).to_dict()


SHARED_ID = "are used by several processes and the export has no per-process device map"


@pytest.mark.parametrize("flavor", GENERATIONS)
def test_bystander_probe_without_a_device_map(tmp_path: Path, flavor: str) -> None:
    """No device map (every generation can lack it; before 2026.x none has it): both processes' kernels are on
    "device 0", read as one GPU, and the report says so (the shared-id warning). The bystander rule then holds as in
    test_claims_shared_gpu.py: the monitor's probes (0.2 % of the device's kernel time) do not make its `nanosleep` the
    idle cause; the owner's per-step sync finding holds 49 × 81 µs = 3.969 ms, beside the verdict GPU-bound (busy 45.098
    ms of 49.925 ms: 90.3 %)."""
    rep = _monitored(tmp_path, flavor)
    assert any(SHARED_ID in w for w in rep["warnings"])
    assert [f["id"] for f in rep["findings"]] == ["gpu_bound", "step_sync"]
    assert finding_of(rep, "step_sync")["time_at_stake_ns"] == 3_969 * US
    assert [d["device_id"] for d in rep["devices"]] == [0]


def test_bystander_probe_mapped_onto_the_same_gpu(tmp_path: Path) -> None:
    """2026.2 with TARGET_INFO_CUDA_DEVICE mapping both processes' CUDA device 0 to GPU 0: the same GPU, now known
    (no shared-id warning, the mapping note instead); the same claims as without the map: GPU-bound, step_sync
    3.969 ms."""
    rep = _monitored(tmp_path, "2026.2", {(100, 0): 0, (300, 0): 0})
    assert not any(SHARED_ID in w for w in rep["warnings"])
    assert any("TARGET_INFO_CUDA_DEVICE" in n for n in rep["trace"]["schema_notes"])
    assert [f["id"] for f in rep["findings"]] == ["gpu_bound", "step_sync"]
    assert finding_of(rep, "step_sync")["time_at_stake_ns"] == 3_969 * US


def test_a_probe_gpu_mapped_apart_is_no_workload(tmp_path: Path) -> None:
    """2026.2 with TARGET_INFO_CUDA_DEVICE mapping the monitor's CUDA device 0 to GPU 1: the probes run on a GPU of
    their own (49 kernels, 98 µs busy in the 49.925 ms window: 0.2 %), the owner's GPU 0 is busy 45.000 ms
    (90.135 %). The report's verdict was "The launching thread waits in `nanosleep` while the GPU idles: 96.8 %
    (48.324 ms)" — the monitor's sleep on GPU 1, ranked above the owner's per-step sync — and the headline "GPU
    busy 45.2 %" (device 1 pooled in at 0.2 %). GPU 1 is no workload: 49 probes (≥ 20, so it kept role `kernels`)
    busy 98 µs, under 1 ms and under 1 % of GPU 0's 45 ms (the share under which a process is a bystander on one
    GPU). Fixed: such a device has role `few kernels` (docs/MODEL.md), no findings and no part in the busy %:
    headline 90.135 %, verdict GPU-bound (45.000 ms at stake) beside the per-step sync (3.969 ms: the owner's gaps
    are its own host work, as with both processes on one GPU)."""
    rep = _monitored(tmp_path, "2026.2", {(100, 0): 0, (300, 0): 1})
    roles = {d["device_id"]: (d["role"], d["kernel_count"], d["busy_ns"]) for d in rep["devices"]}
    assert roles == {0: ("kernels", 500, 45_000 * US), 1: ("few kernels", 49, 98 * US)}
    assert round(rep["headline"]["steady_busy_pct"], 3) == 90.135
    assert [f["id"] for f in rep["findings"]] == ["gpu_bound", "step_sync"]
    assert (rep["headline"]["top_finding_id"], rep["headline"]["time_at_stake_ns"]) == ("gpu_bound", 45_000 * US)
    assert finding_of(rep, "step_sync")["time_at_stake_ns"] == 3_969 * US
