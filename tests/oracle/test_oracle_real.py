"""Every real trace in ../shared/traces: numbers equal NVIDIA's own `nsys stats` output (oracle CSVs)."""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

import pytest
from conftest import real_report_dict, real_traces, trace_id
from oracles import oracle_rows

#: the one real trace whose oracle checks run in the fast set (small: ~1 MB, NVTX, a launch-bound laptop
#: GPU); every other trace's are slow (the whole pipeline per trace)
FAST = "24_cs336_laptop_rtx5000ada_launch_bound"
TRACES = [pytest.param(t, id=trace_id(t), marks=() if t.parent.name == FAST else pytest.mark.slow)
          for t in real_traces()]

_CACHE: dict = {}


def report_json(path: Path) -> dict:
    if path not in _CACHE:
        _CACHE[path] = real_report_dict(path)
    return _CACHE[path]


def oracle(path: Path, name: str) -> list:
    """Rows of the trace's oracle CSV ``name``; an empty one only when tests/oracles.py lists it (with why)."""
    return oracle_rows(path.parent / "oracle" / name)


def half_up(x: float) -> int:
    import math
    return int(math.floor(x + 0.5))


def kernel_key(name: str) -> str:
    # nsys prints a kernel whose demangled-name id is missing as None; we fall back to the short name
    return name


@pytest.mark.parametrize("trace", TRACES)
def test_kernels_match_nsys_2024(trace):
    j = report_json(trace)
    ours = {r["name"]: r for r in j["kernels_summary"]["by_name"]}
    rows = oracle(trace, "nsys2024.2_cuda_gpu_kern_sum.csv")
    assert len(rows) == len(ours)
    for o in rows:
        r = ours[o["Name"]]
        assert r["count"] == int(o["Instances"])
        assert r["total_ns"] == int(o["Total Time (ns)"])
        assert r["min_ns"] == int(o["Min (ns)"])
        assert r["max_ns"] == int(o["Max (ns)"])
        assert abs(r["total_ns"] / r["count"] - float(o["Avg (ns)"])) <= 0.051
        assert r["avg_ns"] == half_up(r["total_ns"] / r["count"])
        assert r["p50_ns"] == half_up(float(o["Med (ns)"]))


@pytest.mark.parametrize("trace", TRACES)
def test_kernels_match_nsys_2022_grid_split(trace):
    """2022.4 gpukernsum splits a name by grid/block; summed per name it must equal ours."""
    j = report_json(trace)
    ours = {r["name"]: r for r in j["kernels_summary"]["by_name"]}
    agg = defaultdict(lambda: [0, 0, None, None])
    for o in oracle(trace, "nsys2022.4_gpukernsum.csv"):
        a = agg[o["Name"]]
        a[0] += int(o["Instances"])
        a[1] += int(o["Total Time (ns)"])
        a[2] = int(o["Min (ns)"]) if a[2] is None else min(a[2], int(o["Min (ns)"]))
        a[3] = int(o["Max (ns)"]) if a[3] is None else max(a[3], int(o["Max (ns)"]))
    assert set(agg) == set(ours)
    for name, (cnt, tot, mn, mx) in agg.items():
        r = ours[name]
        assert (r["count"], r["total_ns"], r["min_ns"], r["max_ns"]) == (cnt, tot, mn, mx)


def nsys_api_name(raw: str) -> str:
    """nsys's SQL: ``CASE substr(name, -6, 2) WHEN '_v' THEN substr(name, 1, length(name) - 6)`` —
    only a trailing ``_v`` + four characters is stripped (written here independently of the code)."""
    return re.sub(r"_v.{4}$", "", raw) if len(raw) >= 6 else raw


@pytest.mark.parametrize("trace", TRACES)
@pytest.mark.parametrize("version", ["nsys2024.2_cuda_api_sum.csv", "nsys2022.4_cudaapisum.csv"])
def test_cuda_api_matches_nsys(trace, version):
    """Names, not just sums: the multiset of (name, calls, total, min, max, median) rows equals nsys's."""
    j = report_json(trace)
    rows = oracle(trace, version)
    if not rows:  # listed in tests/oracles.py: a trace without CUDA API rows
        assert not j["cuda_api"]["apis"] and j["cuda_api"]["call_count"] == 0
        return
    assert sum(int(o["Num Calls"]) for o in rows) == j["cuda_api"]["call_count"]
    assert sum(int(o["Total Time (ns)"]) for o in rows) == j["cuda_api"]["total_ns"]
    ours = sorted((r["name"], r["count"], r["total_ns"], r["min_ns"], r["max_ns"], r["p50_ns"])
                  for r in j["cuda_api"]["apis"])
    theirs = sorted((o["Name"], int(o["Num Calls"]), int(o["Total Time (ns)"]), int(o["Min (ns)"]),
                     int(o["Max (ns)"]), half_up(float(o["Med (ns)"]))) for o in rows)
    assert ours == theirs
    # our display name is nsys's: derived from the raw name by nsys's rule, one raw name per row here
    for r in j["cuda_api"]["apis"]:
        assert [nsys_api_name(x) for x in r["raw_names"]] == [r["name"]], r


@pytest.mark.parametrize("trace", TRACES)
@pytest.mark.parametrize("version", ["nsys2024.2_nvtx_sum.csv", "nsys2022.4_nvtxsum.csv"])
def test_nvtx_matches_nsys(trace, version):
    j = report_json(trace)
    ours = {(r["name"], r["style"]): r for r in j["nvtx"]["ranges"]}
    rows = oracle(trace, version)
    assert len(rows) == len(ours)
    for o in rows:
        r = ours[(o["Range"], o["Style"])]
        assert r["count"] == int(o["Instances"])
        assert r["total_ns"] == int(o["Total Time (ns)"])
        assert r["min_ns"] == int(o["Min (ns)"])
        assert r["max_ns"] == int(o["Max (ns)"])
        assert r["p50_ns"] == half_up(float(o["Med (ns)"]))


MEM_LABEL = re.compile(r"\[CUDA memcpy (.+)\]")


@pytest.mark.parametrize("trace", TRACES)
def test_memcpy_matches_nsys(trace):
    j = report_json(trace)
    rows = oracle(trace, "nsys2024.2_cuda_gpu_mem_time_sum.csv")
    by_dir = {r["direction"]: r for r in j["memcpy"].get("by_direction", [])}
    memset = j["memcpy"].get("memset", [])
    if not rows:  # listed in tests/oracles.py as a trace without copies (08, where nsys gives none, is skipped)
        assert not by_dir and not memset
        return
    for o in rows:
        op = o["Operation"]
        if op == "[CUDA memset]":
            assert sum(r["count"] for r in memset) == int(o["Count"])
            assert sum(r["total_ns"] for r in memset) == int(o["Total Time (ns)"])
            continue
        m = MEM_LABEL.match(op)
        assert m, op
        r = by_dir[m.group(1)]
        assert r["count"] == int(o["Count"])
        assert r["total_ns"] == int(o["Total Time (ns)"])
        assert r["min_ns"] == int(o["Min (ns)"])
        assert r["max_ns"] == int(o["Max (ns)"])
    assert len(rows) == len(by_dir) + (1 if memset else 0)


@pytest.mark.parametrize("trace", TRACES)
def test_real_trace_invariants(trace):
    """busy ≤ window, busy + idle = window, idle % within [0, 100], coverage within [0, 1]."""
    j = report_json(trace)
    for d in j["devices"]:
        assert 0 <= d["busy_ns"] <= d["window_ns"]
        assert d["busy_ns"] + d["idle_ns"] == d["window_ns"]
        assert 0.0 <= d["idle_pct"] <= 100.0
        assert sum(b["count"] for b in d["gap_histogram"]) == d["gap_count"]
        assert sum(b["total_ns"] for b in d["gap_histogram"]) == d["idle_ns"]
    cov = j["nvtx"]["attribution"]["coverage"]
    assert 0.0 <= cov <= 1.0
    for r in j["nvtx"]["attribution"]["ranges"]:
        assert r["innermost_ns"] <= r["inclusive_ns"] <= j["kernels_summary"]["total_kernel_ns"]


def test_reexport_with_newer_schema_gives_identical_numbers(shared_traces):
    """16_*: the same capture exported by the author (schema 3.1.2) and re-exported by nsys 2023.4 (3.7.2,
    greenContextId inserted mid-table, renamed tables): every number must be identical."""
    d = shared_traces / "16_memfusion_tensorrt_rtx3090"
    a_path, b_path = d / "trace.sqlite", d / "trace_reexport_nsys2023.4.sqlite"
    assert b_path.is_file(), f"re-export missing: {b_path}"
    a, b = report_json(a_path), report_json(b_path)
    assert a["trace"]["export_schema_version"] != b["trace"]["export_schema_version"]
    for key in ("kernels", "devices", "launch", "sync", "cuda_api", "memcpy"):
        assert a[key] == b[key], key
    assert a["nvtx"]["ranges"] == b["nvtx"]["ranges"]
    assert a["nvtx"]["attribution"]["ranges"] == b["nvtx"]["attribution"]["ranges"]
    assert [f["category"] for f in a["findings"]] == [f["category"] for f in b["findings"]]
