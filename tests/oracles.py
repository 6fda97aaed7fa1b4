"""Reading NVIDIA's oracle CSVs (``../shared/traces/*/oracle/*.csv`` and ``tests/data/nsys2022.4_nvtxkernsum``)
so that no test compares nothing with nothing by accident.

An oracle file without data rows is accepted only when it is listed in ``EMPTY_ORACLES`` with the reason:

- ``NONE``: the trace has no such data. The test still runs and checks that our report has none either;
- ``SKIP``: nsys gave no rows although the trace has data. The test is skipped with the reason (listed by ``-rs``).

Every other oracle file must hold at least one row: an unlisted empty file fails the test that reads it, and
``tests/oracle/test_oracle_files.py`` checks that the list and the files agree.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Dict, List, Tuple

import pytest

NONE = "none"
SKIP = "skip"
NVTXKERNSUM_DIR = Path(__file__).resolve().parent / "data" / "nsys2022.4_nvtxkernsum"
#: name under which a tests/data/nsys2022.4_nvtxkernsum/<trace>.csv file is listed
NVTXKERNSUM = "nvtxkernsum"

_NO_KERNELS = "no CUDA kernels in the trace (no KERNEL rows): our report must list none either"
_NO_NVTX = "no NVTX ranges in the trace: our report must list none either"
_NOTHING = "the export holds no CUDA or NVTX rows at all: nsys wrote an empty file for every report"

#: (trace directory, oracle file name or NVTXKERNSUM) -> (NONE or SKIP, why the oracle holds no rows)
EMPTY_ORACLES: Dict[Tuple[str, str], Tuple[str, str]] = {
    **{("02_llama3_basic_analysis", f): (NONE, _NOTHING) for f in (
        "nsys2022.4_cudaapisum.csv", "nsys2022.4_gpukernsum.csv", "nsys2022.4_nvtxsum.csv",
        "nsys2024.2_cuda_api_sum.csv", "nsys2024.2_cuda_gpu_kern_sum.csv", "nsys2024.2_cuda_gpu_mem_time_sum.csv",
        "nsys2024.2_nvtx_sum.csv", NVTXKERNSUM)},
    ("07_nsysai_mock_rtx3080", "nsys2022.4_nvtxsum.csv"): (NONE, _NO_NVTX),
    ("07_nsysai_mock_rtx3080", "nsys2024.2_nvtx_sum.csv"): (NONE, _NO_NVTX),
    ("07_nsysai_mock_rtx3080", NVTXKERNSUM): (NONE, _NO_NVTX),
    ("08_pipit_saxpy_mpi_a100", "nsys2024.2_cuda_gpu_mem_time_sum.csv"): (
        SKIP, "nsys 2024.2 gives no memcpy rows for this 2022.2-era export although it holds 15 copies "
              "(the 2022.4 reports have no memcpy summary to compare with)"),
    ("10_abacus_dnn_serving_titanrtx_r1", "nsys2022.4_nvtxsum.csv"): (NONE, _NO_NVTX),
    ("10_abacus_dnn_serving_titanrtx_r1", "nsys2024.2_nvtx_sum.csv"): (NONE, _NO_NVTX),
    ("10_abacus_dnn_serving_titanrtx_r1", NVTXKERNSUM): (NONE, _NO_NVTX),
    ("12_gartangh_keras_gtx1650", NVTXKERNSUM): (
        NONE, "no push/pop range: its only ranges are two start/end `Model` ranges, to which nsys 2022.4 "
              "attributes no kernel"),
    ("14_nvfuser_v100_nvtx_heavy", "nsys2024.2_cuda_gpu_mem_time_sum.csv"): (
        NONE, "no memcpy or memset rows in the trace: our report must list none either"),
    **{("19_uvmtorch_a5000_2025_no_cuda", f): (NONE, _NO_KERNELS) for f in (
        "nsys2022.4_gpukernsum.csv", "nsys2024.2_cuda_gpu_kern_sum.csv", "nsys2024.2_cuda_gpu_mem_time_sum.csv",
        NVTXKERNSUM)},
    ("19_uvmtorch_a5000_2025_no_cuda", "nsys2022.4_nvtxsum.csv"): (NONE, _NO_NVTX),
    ("19_uvmtorch_a5000_2025_no_cuda", "nsys2024.2_nvtx_sum.csv"): (NONE, _NO_NVTX),
}

#: real traces without a tests/data/nsys2022.4_nvtxkernsum oracle -> why
NO_NVTXKERNSUM: Dict[str, str] = {
    "23_cs336_2p7b_a100_fp32_nvtx": "added to ../shared after the nvtxkernsum oracles were made (needs nsys 2022.4: "
                                    "scripts/make_nvtxkernsum_oracle.py)",
    "24_cs336_laptop_rtx5000ada_launch_bound": "added to ../shared after the nvtxkernsum oracles were made (needs "
                                               "nsys 2022.4: scripts/make_nvtxkernsum_oracle.py)",
}


def oracle_key(path: Path) -> Tuple[str, str]:
    """(trace directory, file name) of a ``<trace>/oracle/<file>.csv``, or (trace, NVTXKERNSUM) of a
    ``tests/data/nsys2022.4_nvtxkernsum/<trace>.csv``."""
    if path.parent.resolve() == NVTXKERNSUM_DIR:
        return path.stem, NVTXKERNSUM
    return path.parent.parent.name, path.name


def read_rows(path: Path) -> List[dict]:
    """The data rows of a CSV file (none for a 0-byte or header-only file)."""
    if path.stat().st_size == 0:
        return []
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def oracle_rows(path: Path) -> List[dict]:
    """Rows of one oracle CSV. Fails when the file is missing, or empty without being listed in
    ``EMPTY_ORACLES``; skips (with the listed reason) when it is listed as SKIP; ``[]`` when listed as NONE."""
    assert path.is_file(), f"oracle file missing: {path}"
    rows = read_rows(path)
    key = oracle_key(path)
    listed = EMPTY_ORACLES.get(key)
    if rows:
        assert listed is None, f"{path} has {len(rows)} rows but is listed in tests/oracles.py EMPTY_ORACLES"
        return rows
    assert listed is not None, (f"{path} holds no rows, so the test would compare nothing with nothing: list it "
                                f"in tests/oracles.py EMPTY_ORACLES with the reason")
    if listed[0] == SKIP:
        pytest.skip(f"{key[0]} {key[1]} is empty: {listed[1]}")
    return rows
