"""Benchmark: pathological trace shapes must stay near-linear (issue 8, item 2).

Each shape is written at two sizes (n and 4n), then analyzed in a fresh child process that runs
``nsys_llm_explainer.analyze(path)``, ``.to_dict()`` and every renderer (``render.render_all``); the
table shows wall time, peak RSS and the 4n / n time ratio (near-linear: ≲ 4–5).

Shapes:

* ``deep``    — NVTX push/pop ranges nested ``depth`` deep on one thread, one kernel launched at every level.
* ``ranges``  — millions of shallow NVTX ranges (step ⊃ 3 layers) with one kernel per 2 ranges.
* ``names``   — 100 k distinct kernel names (5 kernels each).
* ``devices`` — kernels on two devices with sparse huge ids (0 and 4 000 000 000).
* ``device_ids`` — kernels spread over many device ids (kernel i on device i mod ``n / 8``: 8 kernels each; issue 24).
* ``domains`` — ``n`` NVTX domains of one push/pop range each, one kernel launched inside each (issue 24).

    python bench/pathological.py [--shape deep --shape names ...] [--scale 1.0] [--keep]

Traces are generated into the git-ignored ``bench/_data/`` (kept with ``--keep``). Not a test: run it by
hand and record the numbers in docs/PERFORMANCE.md. ``tests/hardening/test_limits.py`` has small versions.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Tuple

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))   # the generator: tests/synth
from synth.builder import TraceBuilder, global_pid, global_tid  # noqa: E402

HERE = Path(__file__).resolve().parent
PID = 4242
HUGE_DEVICE = 4_000_000_000
#: base size n of each shape (rows of the shape's defining kind); the bench also runs 4n
BASE = {"deep": 25_000, "ranges": 500_000, "names": 25_000, "devices": 250_000, "device_ids": 1_000,
        "domains": 8_000}


def _kernels_and_calls(b: TraceBuilder, call_start: np.ndarray, names: np.ndarray,
                       device: np.ndarray) -> None:
    """One kernel per launch call (call i runs [call_start[i], +2 µs]); kernels back to back per device."""
    n = call_start.shape[0]
    gtid = global_tid(PID, PID)
    corr = np.arange(1, n + 1, dtype=np.int64)
    a0 = np.asarray(call_start, np.int64)
    ks = a0 + 5_000
    ke = ks + 1_000 + (corr % 7) * 100
    b.add_runtime_bulk(a0, a0 + 2_000, gtid, corr, b.string("cudaLaunchKernel_v7000"), 1)
    b.add_kernels_bulk(ks, ke, device, 7, corr, global_pid(PID), names, names)


def _nvtx_rows(path: str, start: np.ndarray, end: np.ndarray, text: List[str]) -> None:
    """Append push/pop ranges of the main thread to NVTX_EVENTS with raw inserts (the builder keeps
    one dict per row, too slow for millions)."""
    con = sqlite3.connect(path)
    gtid = global_tid(PID, PID)
    con.executemany('INSERT INTO NVTX_EVENTS (start, "end", eventType, text, globalTid, domainId) '
                    "VALUES (?, ?, 59, ?, ?, 0)",
                    zip(start.tolist(), end.tolist(), text, [gtid] * len(text)))
    con.commit()
    con.close()


def _new_builder() -> Tuple[TraceBuilder, int]:
    b = TraceBuilder("2024.2", seed=0)
    b.process(PID, "python3")
    return b, b.thread(PID, PID, "python3")


def deep_name(k: int) -> str:
    """Name of the range at depth k of :func:`write_deep` (every 16th one has a phase: ``decode``)."""
    return "decode" if k % 16 == 5 else f"layer_{k % 16}"


def write_deep(path: str, depth: int) -> Dict[str, int]:
    """``depth`` ranges nested on one thread (range i: [10 i, T − 10 i]); a launch call inside every
    range, before the next one opens (so its innermost range is range i); names from :func:`deep_name`."""
    b, gtid = _new_builder()
    i = np.arange(depth, dtype=np.int64)
    t_end = 10 * depth + 10_000 * depth + 1_000_000
    b.nvtx_push_pop(0, t_end + 10, "outer", tid_g=gtid)
    call = 10 * i + 2                                   # inside range i, before range i + 1 opens at 10 i + 10
    _kernels_and_calls(b, call, np.full(depth, b.string("deep_kernel"), np.int64), np.zeros(depth, np.int64))
    b.gpu(0)
    b.write(path, overwrite=True)
    _nvtx_rows(path, 10 * i, t_end - 10 * i, [deep_name(k) for k in range(depth)])
    return {"nvtx": depth + 1, "kernels": depth}


def write_ranges(path: str, n_ranges: int) -> Dict[str, int]:
    """Steps of 4 ranges (step ⊃ attn, mlp, norm); one kernel in each of attn and mlp."""
    b, gtid = _new_builder()
    steps = n_ranges // 4
    s0 = np.arange(steps, dtype=np.int64) * 100_000
    starts = np.stack([s0, s0 + 1_000, s0 + 30_000, s0 + 60_000], axis=1).reshape(-1)
    ends = np.stack([s0 + 90_000, s0 + 25_000, s0 + 55_000, s0 + 80_000], axis=1).reshape(-1)
    text = ["execute_model", "attn", "mlp", "norm"] * steps
    b.nvtx_push_pop(0, 10, "warmup", tid_g=gtid)
    calls = np.stack([s0 + 2_000, s0 + 31_000], axis=1).reshape(-1)
    kn = np.array([b.string("flash_fwd_kernel"), b.string("sm90_xmma_gemm_bf16")], np.int64)
    _kernels_and_calls(b, calls, np.tile(kn, steps), np.zeros(calls.shape[0], np.int64))
    b.gpu(0)
    b.write(path, overwrite=True)
    _nvtx_rows(path, starts, ends, text)
    return {"nvtx": 4 * steps + 1, "kernels": int(calls.shape[0])}


def write_names(path: str, n_names: int, per_name: int = 5) -> Dict[str, int]:
    """``n_names`` distinct kernel names (templated, category-like), ``per_name`` kernels each."""
    b, gtid = _new_builder()
    forms = ["void vllm::rms_norm_kernel<c10::BFloat16, {i}>(c10::BFloat16*, int)",
             "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize{i}x128x64_execute_kernel__5x_cublas",
             "void flash::flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<{i}, 64, 128, 4>>(Flash_fwd_params)",
             "triton_poi_fused_add_mul_{i}", "ncclDevKernel_AllReduce_Sum_bf16_RING_LL_{i}(ncclDevKernelArgs)",
             "custom_op_kernel_{i}"]
    ids = np.array([b.string(forms[k % len(forms)].format(i=k)) for k in range(n_names)], np.int64)
    n = n_names * per_name
    which = np.random.default_rng(0).permutation(np.arange(n) % n_names)
    b.nvtx_push_pop(0, 10, "warmup", tid_g=gtid)
    _kernels_and_calls(b, np.arange(n, dtype=np.int64) * 10_000, ids[which], np.zeros(n, np.int64))
    b.gpu(0)
    b.write(path, overwrite=True)
    return {"kernels": n, "names": n_names}


def write_devices(path: str, n_kernels: int, devices: Tuple[int, int] = (0, HUGE_DEVICE)) -> Dict[str, int]:
    """Kernels alternating between two devices with sparse huge ids."""
    b, gtid = _new_builder()
    dev = np.where(np.arange(n_kernels) % 2 == 0, devices[0], devices[1]).astype(np.int64)
    b.nvtx_push_pop(0, 10, "warmup", tid_g=gtid)
    _kernels_and_calls(b, np.arange(n_kernels, dtype=np.int64) * 10_000,
                       np.full(n_kernels, b.string("gemm_kernel"), np.int64), dev)
    for d in devices:
        b.gpu(d)
    b.write(path, overwrite=True)
    return {"kernels": n_kernels}


def write_device_ids(path: str, n_devices: int, per_device: int = 8) -> Dict[str, int]:
    """``n_devices`` device ids with ``per_device`` kernels each, kernel i on device ``i % n_devices`` (one launching
    thread; kernels 10 µs apart, so each device is idle most of the capture)."""
    b, gtid = _new_builder()
    n = n_devices * per_device
    b.nvtx_push_pop(0, 10, "warmup", tid_g=gtid)
    _kernels_and_calls(b, np.arange(n, dtype=np.int64) * 10_000, np.full(n, b.string("gemm_kernel"), np.int64),
                       np.arange(n, dtype=np.int64) % n_devices)
    b.gpu(0)
    b.write(path, overwrite=True)
    return {"kernels": n, "devices": n_devices}


def write_domains(path: str, n_domains: int) -> Dict[str, int]:
    """``n_domains`` NVTX domains (ids 1 … n, each created by a domain row) with one push/pop range each,
    ``[10 µs·d, 10 µs·d + 8 µs]``, and one kernel launched inside each range."""
    b, gtid = _new_builder()
    d = np.arange(1, n_domains + 1, dtype=np.int64)
    b.nvtx_push_pop(0, 10, "warmup", tid_g=gtid)
    _kernels_and_calls(b, d * 10_000 + 100, np.full(n_domains, b.string("gemm_kernel"), np.int64),
                       np.zeros(n_domains, np.int64))
    b.gpu(0)
    b.write(path, overwrite=True)
    con = sqlite3.connect(path)
    con.executemany('INSERT INTO NVTX_EVENTS (start, "end", eventType, text, globalTid, domainId) '
                    "VALUES (?, ?, ?, ?, ?, ?)",
                    [(0, None, 75, f"dom{k}", gtid, k) for k in d.tolist()]
                    + [(10_000 * k, 10_000 * k + 8_000, 59, f"r{k}", gtid, k) for k in d.tolist()])
    con.commit()
    con.close()
    return {"kernels": n_domains, "nvtx_domains": n_domains}


WRITERS = {"deep": write_deep, "ranges": write_ranges, "names": write_names, "devices": write_devices,
           "device_ids": write_device_ids, "domains": write_domains}


def measure(path: str) -> Dict[str, float]:
    """Analyze ``path`` in this process: analyze + to_dict + every renderer; wall time and peak RSS."""
    import nsys_llm_explainer as nle
    from nsys_llm_explainer.render import render_all

    t = time.perf_counter()
    rep = nle.analyze(path)
    t_an = time.perf_counter() - t
    d = rep.to_dict()
    with tempfile.TemporaryDirectory() as td:
        render_all(d, Path(td))
    wall = time.perf_counter() - t
    return {"wall_s": wall, "analyze_s": t_an, "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", action="append", choices=sorted(WRITERS), help="default: all")
    ap.add_argument("--scale", type=float, default=1.0, help="multiply every base size")
    ap.add_argument("--keep", action="store_true", help="keep generated traces in bench/_data/")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per analysis run")
    ap.add_argument("--measure", help=argparse.SUPPRESS)   # child mode: analyze one trace, print JSON
    a = ap.parse_args()
    if a.measure:
        print(json.dumps(measure(a.measure)))
        return 0
    data = HERE / "_data"
    data.mkdir(exist_ok=True)
    print(f"cpu count: {os.cpu_count()}")
    print("| shape | size | rows | wall s | peak RSS MB | time ratio 4n/n |")
    print("|---|---|---|---|---|---|")
    for shape in a.shape or list(WRITERS):
        prev = None
        for mult in (1, 4):
            size = int(BASE[shape] * a.scale) * mult
            path = data / f"patho_{shape}_{size}.sqlite"
            if not path.exists():
                counts = WRITERS[shape](str(path), size)
                (data / f"{path.name}.json").write_text(json.dumps(counts))
            counts = json.loads((data / f"{path.name}.json").read_text())
            try:
                proc = subprocess.run([sys.executable, __file__, "--measure", str(path)], capture_output=True,
                                      timeout=a.timeout)
            except subprocess.TimeoutExpired:
                print(f"| {shape} | {size:,} | {counts} | > {a.timeout:.0f} (timeout) | | |", flush=True)
                continue
            if proc.returncode != 0:
                print(proc.stderr.decode(errors="replace")[-3000:])
                return 1
            m = json.loads(proc.stdout.decode().strip().splitlines()[-1])
            ratio = f"{m['wall_s'] / prev:.2f}" if prev else ""
            prev = m["wall_s"]
            rows = ", ".join(f"{k} {v:,}" for k, v in counts.items())
            print(f"| {shape} | {size:,} | {rows} | {m['wall_s']:.2f} | {m['rss_mb']:.0f} | {ratio} |", flush=True)
            if not a.keep:
                path.unlink()
                (data / f"{path.name}.json").unlink()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
