"""Issue 24, third sweep, classes 6–10: numbers that cannot overflow, one rule for values of the wrong type with
both readers, non-integer ids in ``StringIds`` and NVTX domain rows, and memory/time proportional to the trace's
rows (not devices × rows or NVTX domains × kernels). Hand-computed answers on small synthetic exports."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any, Dict

import numpy as np
import pytest
from synth import TraceBuilder
from synth.builder import global_pid, global_tid

import nsys_llm_explainer as nle
from nsys_llm_explainer.cli import main

PID = 100
K = "CUPTI_ACTIVITY_KIND_KERNEL"
RT = "CUPTI_ACTIVITY_KIND_RUNTIME"
ROOT = Path(__file__).resolve().parents[2]


def _write(tmp_path: Path, b: TraceBuilder, *updates: str, name: str = "t.sqlite") -> str:
    p = tmp_path / name
    b.write(str(p))
    c = sqlite3.connect(p)
    for u in updates:
        c.execute(u)
    c.commit()
    c.close()
    return str(p)


def _bulk(n: int, dur: int, devices: int = 1) -> TraceBuilder:
    """``n`` kernels "k" of ``dur`` ns, kernel i launched at 1000 i and starting 600 ns later (they overlap when
    ``dur`` is long), on device ``i % devices``."""
    b = TraceBuilder("2024.2", seed=0)
    b.process(PID, "python3")
    gtid = b.thread(PID, PID, "python3")
    a0 = np.arange(n, dtype=np.int64) * 1000
    corr = np.arange(1, n + 1, dtype=np.int64)
    b.add_runtime_bulk(a0, a0 + 500, gtid, corr, b.string("cudaLaunchKernel_v7000"), 1)
    name = np.full(n, b.string("k"), np.int64)
    b.add_kernels_bulk(a0 + 600, a0 + 600 + dur, np.arange(n, dtype=np.int64) % devices, 7, corr,
                       global_pid(PID), name, name)
    for d in range(devices):
        b.gpu(d)
    return b


def _no_negative_or_huge(x: Any, path: str = "") -> None:
    """Every integer of a report is a count or ns of one capture: never negative, never 2^63 − 1 or more."""
    if isinstance(x, dict):
        for k, v in x.items():
            _no_negative_or_huge(v, f"{path}/{k}")
    elif isinstance(x, list):
        for i, v in enumerate(x):
            _no_negative_or_huge(v, f"{path}[{i}]")
    elif isinstance(x, int) and not isinstance(x, bool):
        assert x >= -1 and x < (1 << 63) - 1, (path, x)


def _analyze_quiet(p: str, reader: str = "auto") -> Dict[str, Any]:
    """``analyze(p).to_dict()`` with every numpy / Python warning turned into an error (none may reach stderr)."""
    with warnings.catch_warnings(), np.errstate(all="raise"):
        warnings.simplefilter("error")
        d = nle.analyze(p, reader=reader).to_dict()
    d.pop("timings_s", None)
    return d


# ------------------------------------------------------------------------------------------ class 6: overflow
def test_82_kernels_of_2_61_ns_give_no_wrong_total(tmp_path: Path, capsys) -> None:
    """Σ 82 × 2^61 ns = 1.89e20 does not fit int64: the rows that cannot be summed exactly are left out (here
    every one: each is longer than 2^53 ns alone) and one warning says so; nothing negative, no numpy warning."""
    p = _write(tmp_path, _bulk(82, 1 << 61))
    d = _analyze_quiet(p)
    _no_negative_or_huge(d)
    assert d["trace"]["row_counts"]["kernels"] == 0
    w = [x for x in d["warnings"] if x.startswith(K)]
    assert w == [f"{K}: 82 row(s) left out of every number: their durations total 189,079,126,755,522,904,064 ns, "
                 "more than the 2^53 ns (about 104 days) a table's durations may total to be summed exactly; the "
                 "longest rows were left out, longest first, until the rest total less."], d["warnings"]
    code = main([p, "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert code == 0 and "RuntimeWarning" not in err and "warning" not in err.lower(), err


def test_a_table_just_over_the_limit_keeps_the_rows_that_fit(tmp_path: Path) -> None:
    """82 kernels of 2^47 ns total 82 · 2^47 > 2^53 = 64 · 2^47: the 19 longest (all equal: the last ones in
    table order) are left out, 63 kept, and the kernel total is exactly 63 · 2^47."""
    p = _write(tmp_path, _bulk(82, 1 << 47))
    d = _analyze_quiet(p)
    _no_negative_or_huge(d)
    rows = [r for r in d["kernels"] if r["name"] == "k"]
    assert sum(r["count"] for r in rows) == 63
    assert sum(r["total_ns"] for r in rows) == 63 * (1 << 47)
    assert d["categories"]["total_kernel_ns"] == 63 * (1 << 47)
    assert any(x.startswith(f"{K}: 19 row(s) left out of every number") for x in d["warnings"])


def test_a_window_of_2_62_ns_gives_exact_bin_edges(tmp_path: Path) -> None:
    """Two short kernels 2^62 − 10^4 ns apart (accepted timestamps): the timeline's bin edges are exact integers
    (``start + i·W // N``: no int64 overflow in ``i·W``), increasing, and tile the window."""
    b = TraceBuilder("2024.2", seed=0)
    b.process(PID, "python3")
    b.thread(PID, 101)
    b.launch(0, 10, 100, 200, pid=PID, tid=101, name="k")
    far = (1 << 62) - 10_000
    b.launch(far, far + 10, far + 100, far + 200, pid=PID, tid=101, name="k")
    d = _analyze_quiet(_write(tmp_path, b))
    _no_negative_or_huge(d)
    for dev in d["timeline"]["devices"]:
        e = dev["edges_ns"]
        n = len(e) - 1
        w = dev["end_ns"] - dev["start_ns"]
        assert e == [dev["start_ns"] + (i * w) // n for i in range(n + 1)]
        assert all(x < y for x, y in zip(e, e[1:]))
        for i in range(n):
            assert dev["busy_ns"][i] + sum(v[i] for v in dev["idle_ns_by_kind"].values()) == e[i + 1] - e[i]


# ------------------------------------------------------------------------------------------ class 7: both readers
GRAPH_NODE_TEXT = f"UPDATE {K} SET graphNodeId = 'node' || rowid WHERE rowid % 10 = 0"
MIXED = (f"UPDATE {K} SET deviceId = 'gpu0' WHERE rowid = 3", f"UPDATE {K} SET start = X'0001' WHERE rowid = 5",
         f'UPDATE {K} SET "end" = "end" + 0.5 WHERE rowid = 7', f"UPDATE {K} SET demangledName = 'k' WHERE rowid = 11",
         f"UPDATE {RT} SET correlationId = 'c' WHERE rowid = 12", f"UPDATE {RT} SET globalTid = X'01' WHERE rowid = 13")


@pytest.mark.parametrize("updates, kernels, api", [((GRAPH_NODE_TEXT,), 90, 100), ((GRAPH_NODE_TEXT, *MIXED), 86, 98)],
                         ids=["graph-node-only", "ids-timestamps-names"])
def test_both_readers_leave_out_the_same_rows_of_mixed_type_columns(tmp_path: Path, updates, kernels, api) -> None:
    """One rule, both readers: a row with a text, blob or real value in an integer column the tool reads is left out
    and counted (docs/SECURITY.md §5). 100 kernels; a text ``graphNodeId`` on every 10th (10 rows, the sweep's
    10 %: the standard-library reader's packed path read it as "a graph node" and kept them); then also a text
    ``deviceId``, a blob ``start``, a real ``end``, a text ``demangledName`` (a name id) on four others and two API
    rows with a text ``correlationId`` / blob ``globalTid``: the same counts with both readers, identical reports."""
    p = _write(tmp_path, _bulk(100, 100), *updates)
    a, b = _analyze_quiet(p, "sqlite3"), _analyze_quiet(p, "adbc")
    assert a == b
    assert a["trace"]["row_counts"]["kernels"] == kernels and a["trace"]["row_counts"]["cuda_api"] == api
    assert f"{K}: {100 - kernels} row(s) with a non-integer value (text, blob or real) in an integer column were " \
        "left out." in a["warnings"]
    assert (f"{RT}: {100 - api} row(s) with a non-integer value (text, blob or real) in an integer column were "
            "left out." in a["warnings"]) == (api < 100)


# ------------------------------------------------------------------------------------------ class 8: ids in names
def _strings_without_key(p: str, *rows: str) -> None:
    """Rebuild ``StringIds`` without its INTEGER PRIMARY KEY (so that its ids may hold any type) and add ``rows``."""
    c = sqlite3.connect(p)
    c.execute("CREATE TABLE s2 (id, value TEXT)")
    c.execute("INSERT INTO s2 SELECT id, value FROM StringIds")
    c.execute("DROP TABLE StringIds")
    c.execute("ALTER TABLE s2 RENAME TO StringIds")
    for r in rows:
        c.execute(f"INSERT INTO StringIds VALUES {r}")
    c.commit()
    c.close()


def test_non_integer_string_ids_are_left_out_and_counted(tmp_path: Path, capsys) -> None:
    p = _write(tmp_path, _bulk(10, 100))
    _strings_without_key(p, "(NULL, 'null id')", "('abc', 'text id')", "(X'0102', 'blob id')", "(2.5, 'real id')",
                         "(1000000, X'6869')")        # a blob value is decoded as UTF-8 text ("hi")
    d = _analyze_quiet(p, "sqlite3")
    assert d == _analyze_quiet(p, "adbc")
    assert [r["name"] for r in d["kernels"]] == ["k"] and d["kernels"][0]["count"] == 10
    assert "StringIds: 4 row(s) with a non-integer id (NULL, text, blob or real) were left out." in d["warnings"]
    assert main([p, "--out", str(tmp_path / "o")]) == 0
    assert "internal error" not in capsys.readouterr().err


def test_non_integer_nvtx_domain_rows_are_left_out_and_counted(tmp_path: Path, capsys) -> None:
    b = _bulk(4, 100)
    g = global_tid(PID, PID)
    b.nvtx_domain(1, "good", tid_g=g)
    b.nvtx_domain(2, "text id", tid_g=g)
    b.nvtx_domain(3, "blob id", tid_g=g)
    b.nvtx_domain(4, "text tid", tid_g=g)
    b.nvtx_domain(5, "blob tid", tid_g=g)
    for d in range(1, 6):
        b.nvtx_push_pop(100 * d, 100 * d + 50, f"r{d}", tid_g=g, domain_id=d)
    p = _write(tmp_path, b, "UPDATE NVTX_EVENTS SET domainId = 'two' WHERE eventType = 75 AND text = 'text id'",
               "UPDATE NVTX_EVENTS SET domainId = X'03' WHERE eventType = 75 AND text = 'blob id'",
               "UPDATE NVTX_EVENTS SET globalTid = 'me' WHERE eventType = 75 AND text = 'text tid'",
               "UPDATE NVTX_EVENTS SET globalTid = X'05' WHERE eventType = 75 AND text = 'blob tid'")
    d = _analyze_quiet(p, "sqlite3")
    assert d == _analyze_quiet(p, "adbc")
    names = sorted(r["name"] for r in d["nvtx"]["ranges"])
    assert names == ["good:r1", "r2", "r3", "r4", "r5"]       # only domain 1 keeps its name
    assert ("NVTX_EVENTS: 4 domain row(s) with a non-integer domainId or globalTid (text, blob or real) were left "
            "out; their domains' ranges keep their names unqualified.") in d["warnings"]
    assert main([p, "--out", str(tmp_path / "o")]) == 0
    assert "internal error" not in capsys.readouterr().err


# ------------------------------------------------------------------------------------------ classes 9, 10: memory
BENCH = ROOT / "bench"
_MEASURE = """
import json, resource, sys, time
sys.path.insert(0, {bench!r})
import pathological as P
P.WRITERS[{shape!r}]({path!r}, {size})
import nsys_llm_explainer as nle
t = time.perf_counter()
rep = nle.analyze({path!r})
rep.to_dict()
print(json.dumps({{"s": time.perf_counter() - t, "mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}}))
"""


def _measure(tmp_path: Path, shape: str, size: int) -> Dict[str, float]:
    """Analysis time and peak RSS (MB, the generator's included) of ``bench/pathological.py``'s ``shape`` at
    ``size``, in a fresh interpreter."""
    path = str(tmp_path / f"{shape}_{size}.sqlite")
    code = _MEASURE.format(bench=str(BENCH), shape=shape, path=path, size=size)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600,
                         env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.slow
@pytest.mark.parametrize("shape, small, big, mb", [("domains", 1_000, 8_000, 150), ("device_ids", 100, 1_000, 150)])
def test_memory_grows_with_rows_not_domains_or_devices_times_rows(tmp_path: Path, shape, small, big, mb) -> None:
    """8× the NVTX domains (one range and one kernel each) or 8×/10× the device ids (8 kernels each): the rows grow
    8–10×, so time and memory may grow about that much — before the fix 8,000 domains peaked at 2.5 GB and 32 s
    (one full-size array per domain), 1,000 devices at 0.6 GB and 7 s (idle pieces of every device cut at every
    call of the launching thread)."""
    a, b = _measure(tmp_path, shape, small), _measure(tmp_path, shape, big)
    assert b["mb"] - a["mb"] < mb, (a, b)
    assert b["s"] < 12 * a["s"] + 2.0, (a, b)


def _both_paths(model) -> tuple:
    """Idle causes and bins of ``model`` (whole capture as the window) cut gap by gap and by the threads'
    partitions from the first device on (causes.PIECES_KEPT and ROWS_FACTOR set to 0, prefix sums forced)."""
    from nsys_llm_explainer.analyses.idle import causes as C
    from nsys_llm_explainer.analyses.nvtx.tree import build_tree
    from nsys_llm_explainer.model.timeline import iter_timelines
    from nsys_llm_explainer.model.trace import trace_edge

    w0 = trace_edge(min, model.kernels, model.api, (model.memcpy, model.memset, model.sync, model.graph_trace),
                    model.nvtx)
    w1 = trace_edge(max, model.kernels, model.api, (model.memcpy, model.memset, model.sync, model.graph_trace),
                    model.nvtx)
    tree = build_tree(model.nvtx)
    out = []
    from nsys_llm_explainer.analyses.idle import host_partition as H

    for needed in (True, False):
        kept, factor, least = C.PIECES_KEPT, C.ROWS_FACTOR, H.PREFIX_MIN_PIECES_PER_CODE
        C.PIECES_KEPT = C.ROWS_FACTOR = H.PREFIX_MIN_PIECES_PER_CODE = 0   # the prefix sums whenever they apply
        try:
            r = C.analyze_idle_causes(model, model, iter_timelines(model, w0, w1, False), tree, 500,
                                      pieces_needed=needed)
        finally:
            C.PIECES_KEPT, C.ROWS_FACTOR, H.PREFIX_MIN_PIECES_PER_CODE = kept, factor, least
        out.append({"devices": [(d.device_id, d.causes, [d.gap_cause(i) for i in range(len(d.gap_cause_code))],
                                  d.wait_ns_by_thread) for d in r.devices], "bins": r.bins})
    return out[0], out[1]


@pytest.mark.parametrize("scenario", ["demo", "nccl_straggler", "queued_dependency", "host_samples", "training_step",
                                      "cuda_graph_node", "pageable_h2d"])
def test_partition_path_gives_the_same_causes_and_bins(tmp_path: Path, scenario: str) -> None:
    """The device pass charged by the host threads' partitions (taken past the budget when nothing reads the pieces'
    places in time) gives the same causes (ns, gap counts, examples, short/tiny ns), per-gap causes, waits and bins
    as cutting every gap at every host row."""
    from synth.scenarios import build_scenario

    from nsys_llm_explainer.pipeline import load_model

    p = tmp_path / "t.sqlite"
    build_scenario(scenario, str(p))
    cut, part = _both_paths(load_model(str(p)))
    assert cut == part


def test_partition_path_on_many_devices_fed_by_one_thread(tmp_path: Path) -> None:
    import sys as _sys
    _sys.path.insert(0, str(BENCH))
    import pathological as P

    from nsys_llm_explainer.pipeline import load_model

    p = str(tmp_path / "d.sqlite")
    P.write_device_ids(p, 40)
    cut, part = _both_paths(load_model(p))
    assert len(cut["devices"]) == 40 and cut == part


@pytest.mark.parametrize("prefix_min", [0, 1 << 30])
def test_interval_sums_equal_a_brute_force_sum(monkeypatch, prefix_min: int) -> None:
    """The partition's sums over intervals, by scanning and by per-cause prefix sums (forced either way), equal the
    overlap of every piece with every interval summed by hand."""
    from nsys_llm_explainer.analyses.idle import host_partition as H

    monkeypatch.setattr(H, "PREFIX_MIN_PIECES_PER_CODE", prefix_min)
    rng = np.random.default_rng(3)
    for _ in range(40):
        cuts = np.unique(rng.integers(0, 1000, int(rng.integers(2, 80))))
        p = H.Partition(cuts[:-1], cuts[1:], rng.integers(0, 4, cuts.shape[0] - 1))
        pts = np.unique(rng.integers(int(cuts[0]), int(cuts[-1]) + 1, 2 * int(rng.integers(1, 12))))
        a, b = pts[0::2], pts[1::2]
        if a.shape[0] > b.shape[0]:
            a = a[:-1]
        want: Dict[tuple, int] = {}
        for i, (x, y) in enumerate(zip(a.tolist(), b.tolist())):
            for s, e, c in zip(p.start.tolist(), p.end.tolist(), p.code.tolist()):
                ov = min(e, y) - max(s, x)
                if ov > 0:
                    want[(i, c)] = want.get((i, c), 0) + ov
        w, c, ns = H.interval_sums(p, a, b)
        assert {(int(i), int(k)): int(v) for i, k, v in zip(w, c, ns)} == want
        assert list(zip(w.tolist(), c.tolist())) == sorted(want)


def test_memcpy_bytes_past_2_53_leave_out_the_largest_rows(tmp_path: Path) -> None:
    """Ten 1 KiB copies and three of 2^60 bytes: the three total 3 · 2^60 ≥ 2^53, so they are left out (largest
    first) and the copies that remain total exactly 10 KiB; one warning names the table and the exact total."""
    b = TraceBuilder("2024.2", seed=0)
    b.process(PID, "python3")
    b.thread(PID, 101)
    b.launch(0, 10, 100, 200, pid=PID, tid=101, name="k")
    for i in range(13):
        b.memcpy(1000 + 1000 * i, 1500 + 1000 * i, pid=PID, bytes=(1 << 60) if i in (2, 5, 9) else 1024)
    d = _analyze_quiet(_write(tmp_path, b))
    _no_negative_or_huge(d)
    assert d["trace"]["row_counts"]["memcpy"] == 10
    total = 3 * (1 << 60) + 10 * 1024
    assert ("CUPTI_ACTIVITY_KIND_MEMCPY: 3 row(s) left out of every number: their bytes total "
            f"{total:,} bytes, more than the 2^53 bytes a table's bytes may total to be summed exactly; the largest "
            "rows were left out, largest first, until the rest total less.") in d["warnings"]
