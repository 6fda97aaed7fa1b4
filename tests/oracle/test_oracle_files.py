"""The oracle files and tests/oracles.py agree: every oracle CSV without data rows is listed with its reason,
every listed one is really empty, and every real trace has every oracle (or is listed as not having it).
So an oracle test compares nothing with nothing only where the list says why."""

from __future__ import annotations

from pathlib import Path

from oracles import EMPTY_ORACLES, NO_NVTXKERNSUM, NVTXKERNSUM, NVTXKERNSUM_DIR, oracle_key, read_rows

#: the `nsys stats` reports every real trace carries in oracle/ (../shared/traces/README.md)
ORACLE_FILES = {
    "nsys2022.4_cudaapisum.csv", "nsys2022.4_gpukernsum.csv", "nsys2022.4_nvtxsum.csv",
    "nsys2024.2_cuda_api_sum.csv", "nsys2024.2_cuda_gpu_kern_sum.csv", "nsys2024.2_cuda_gpu_mem_time_sum.csv",
    "nsys2024.2_nvtx_sum.csv",
}


def _all_oracle_files(traces: Path) -> list:
    return sorted(traces.glob("*/oracle/*.csv")) + sorted(NVTXKERNSUM_DIR.glob("*.csv"))


def test_every_trace_has_every_oracle(shared_traces):
    dirs = sorted(p.parent.name for p in shared_traces.glob("*/trace.sqlite"))
    assert len(dirs) >= 14, dirs
    for d in dirs:
        assert {p.name for p in (shared_traces / d / "oracle").glob("*.csv")} >= ORACLE_FILES, d
    kernsum = {p.stem for p in NVTXKERNSUM_DIR.glob("*.csv")}
    assert kernsum <= set(dirs), kernsum - set(dirs)
    assert set(dirs) - kernsum == set(NO_NVTXKERNSUM), "update NO_NVTXKERNSUM in tests/oracles.py"


def test_empty_oracles_are_exactly_the_listed_ones(shared_traces):
    files = _all_oracle_files(shared_traces)
    empty = {oracle_key(p) for p in files if not read_rows(p)}
    assert empty, "the real traces 02 and 19 have empty oracles: the glob found nothing"
    unlisted = sorted(empty - set(EMPTY_ORACLES))
    assert not unlisted, f"oracle files without rows, not listed in tests/oracles.py EMPTY_ORACLES: {unlisted}"
    stale = sorted(set(EMPTY_ORACLES) - empty)
    assert not stale, f"listed as empty in tests/oracles.py but missing or holding rows: {stale}"


def test_most_oracles_have_rows(shared_traces):
    """The list stays the exception: of 14 traces × 8 oracles at most the 25 listed hold no rows."""
    files = _all_oracle_files(shared_traces)
    with_rows = [p for p in files if read_rows(p)]
    assert len(files) >= 14 * len(ORACLE_FILES) + 12
    assert len(files) - len(with_rows) == len(EMPTY_ORACLES) <= 25


def test_oracle_key_names_trace_and_report(shared_traces):
    assert oracle_key(NVTXKERNSUM_DIR / "05_nsysai_mfu_2gpu_before.csv") == ("05_nsysai_mfu_2gpu_before",
                                                                             NVTXKERNSUM)
    p = shared_traces / "05_nsysai_mfu_2gpu_before" / "oracle" / "nsys2024.2_nvtx_sum.csv"
    assert oracle_key(p) == ("05_nsysai_mfu_2gpu_before", "nsys2024.2_nvtx_sum.csv")
