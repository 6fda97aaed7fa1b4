"""Values entering the model (issue 9): impossible rows are left out, counted per table and reason, and stated;
values of the wrong type are left out and counted; NULLs nsys allows keep their row. Hand-computed answers on a
small synthetic export."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from synth import TraceBuilder

import nsys_llm_explainer as nle

PID = 100
K = "CUPTI_ACTIVITY_KIND_KERNEL"


def _trace(tmp_path: Path, *updates: str) -> str:
    b = TraceBuilder()
    b.process(PID)
    b.thread(PID, 101)
    for i in range(6):                       # six 100 ns kernels "k", 1 µs apart
        b.launch(1000 + i * 1000, 1010 + i * 1000, 1100 + i * 1000, 1200 + i * 1000, pid=PID, tid=101, name="k")
    p = tmp_path / "t.sqlite"
    b.write(str(p))
    c = sqlite3.connect(p)
    for u in updates:
        c.execute(u)
    c.commit()
    c.close()
    return str(p)


def _k_rows(rep: dict) -> dict:
    rows = [r for r in rep["kernels"] if r["name"] == "k"]
    return {"count": sum(r["count"] for r in rows), "total_ns": sum(r["total_ns"] for r in rows),
            "min_ns": min(r["min_ns"] for r in rows)}


@pytest.mark.parametrize("reader", ["adbc", "sqlite3"])
def test_impossible_kernel_rows_are_left_out_and_counted(tmp_path, reader):
    p = _trace(tmp_path,
               f'UPDATE {K} SET "end" = start - 50 WHERE rowid = 2',                  # ends before it starts
               f'UPDATE {K} SET "end" = 9223372036854775807 WHERE rowid = 4',        # beyond 2^62
               f"UPDATE {K} SET start = -9223372036854775808 WHERE rowid = 5")       # negative start
    rep = nle.analyze(p, reader=reader).to_dict()
    assert _k_rows(rep) == {"count": 3, "total_ns": 300, "min_ns": 100}
    w = [x for x in rep["warnings"] if x.startswith(K)]
    assert w == [f"{K}: 3 impossible row(s) left out of every number (2 with a start or end time missing or "
                 "outside 0 … 2^62 ns; 1 ending before they start)."]


@pytest.mark.parametrize("reader", ["adbc", "sqlite3"])
def test_wrong_types_are_left_out_and_counted(tmp_path, reader):
    p = _trace(tmp_path, f"UPDATE {K} SET streamId = 'seven' WHERE rowid = 1",
               f"UPDATE {K} SET correlationId = X'0102' WHERE rowid = 6",
               "UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET start = 'soon' WHERE rowid = 3")
    rep = nle.analyze(p, reader=reader).to_dict()
    assert _k_rows(rep)["count"] == 4
    assert f"{K}: 2 row(s) with a non-integer value (text, blob or real) in an integer column were left out." \
        in rep["warnings"]
    assert ("CUPTI_ACTIVITY_KIND_RUNTIME: 1 row(s) with a non-integer value (text, blob or real) in an integer "
            "column were left out.") in rep["warnings"]
    assert sum(a["count"] for a in rep["cuda_api"]["apis"]) == 5


def test_a_real_number_in_an_integer_column_is_left_out_by_both_readers(tmp_path):
    p = _trace(tmp_path, f'UPDATE {K} SET "end" = 1250.75 WHERE rowid = 1')
    for reader in ("adbc", "sqlite3"):
        rep = nle.analyze(p, reader=reader).to_dict()
        assert _k_rows(rep) == {"count": 5, "total_ns": 500, "min_ns": 100}
        assert f"{K}: 1 row(s) with a non-integer value (text, blob or real) in an integer column were left out." \
            in rep["warnings"]


def test_null_global_pid_and_tid_keep_their_rows(tmp_path):
    p = _trace(tmp_path, f"UPDATE {K} SET globalPid = NULL WHERE rowid = 2",
               "UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET globalTid = NULL WHERE rowid = 3")
    rep = nle.analyze(p).to_dict()
    assert _k_rows(rep) == {"count": 6, "total_ns": 600, "min_ns": 100}   # nothing left out
    assert sum(a["count"] for a in rep["cuda_api"]["apis"]) == 6
    # one process launched everything: its kernels (the NULL one included) belong to it
    assert {r["pid"] for r in rep["pids"]["kernels_by_pid"]} == {PID}


def test_nvtx_blob_text_and_impossible_range(tmp_path):
    b = TraceBuilder()
    b.process(PID)
    g = b.thread(PID, 101)
    b.nvtx_push_pop(900, 2300, "step", tid_g=g)
    b.nvtx_push_pop(950, 960, "bad", tid_g=g)
    b.launch(1000, 1010, 1100, 1200, pid=PID, tid=101, name="k")
    p = tmp_path / "n.sqlite"
    b.write(str(p))
    c = sqlite3.connect(p)
    c.execute("UPDATE NVTX_EVENTS SET text = X'ff00', textId = NULL WHERE text = 'step' OR textId IN "
              "(SELECT id FROM StringIds WHERE value = 'step')")
    c.execute("UPDATE NVTX_EVENTS SET \"end\" = 9223372036854775807 WHERE text = 'bad' OR textId IN "
              "(SELECT id FROM StringIds WHERE value = 'bad')")
    c.commit()
    c.close()
    rep = nle.analyze(str(p)).to_dict()
    assert "NVTX_EVENTS: 1 impossible row(s) left out of every number (1 with a start or end time missing or " \
           "outside 0 … 2^62 ns)." in rep["warnings"]
    names = [r["name"] for r in rep["nvtx"]["ranges"]]
    assert names == ["\ufffd\x00"]                     # the blob decoded as UTF-8, invalid bytes replaced


def test_huge_device_id_costs_no_memory(tmp_path):
    import resource

    p = _trace(tmp_path, f"UPDATE {K} SET deviceId = 4000000000")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    rep = nle.analyze(p).to_dict()
    assert [d["device_id"] for d in rep["devices"]] == [4000000000]
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 200_000   # KiB: < 200 MB more
