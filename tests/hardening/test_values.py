"""Values inside an export (docs/SECURITY.md §5; issues 9, 17 and 24): impossible rows are left out, counted per
table and reason, and stated; a text, blob or real value in an integer column leaves its row out with both
readers alike; NULLs nsys allows keep their row; text that is not UTF-8 is shown with U+FFFD and counted; ids
that are not integers are left out and counted; sums that would overflow leave out the rows that cannot be
summed exactly; huge ids cost no memory. Hand-computed answers on small synthetic exports."""

from __future__ import annotations

import hashlib
import sqlite3
import warnings
from pathlib import Path
from typing import Any, Dict

import numpy as np
import pytest
from synth import TraceBuilder
from synth.builder import global_pid, global_tid

import nsys_llm_explainer as nle
from nsys_llm_explainer import cli
from nsys_llm_explainer.cli import main
from nsys_llm_explainer.read.connection import open_readonly
from nsys_llm_explainer.read.fetch_nvtx import fetch_nvtx
from nsys_llm_explainer.read.schema import probe

PID = 100
K = "CUPTI_ACTIVITY_KIND_KERNEL"
RT = "CUPTI_ACTIVITY_KIND_RUNTIME"
REPLACED = "\ufffd"


def _write(tmp_path: Path, b: TraceBuilder, *updates: str, name: str = "t.sqlite") -> str:
    """``b`` written to ``tmp_path/name``, then the SQL ``updates`` applied with sqlite3."""
    p = tmp_path / name
    b.write(str(p))
    c = sqlite3.connect(p)
    for u in updates:
        c.execute(u)
    c.commit()
    c.close()
    return str(p)


def _six(names: bool = False) -> TraceBuilder:
    """Six 100 ns kernels "k", 1 µs apart (``names``: also a process "server", one 50 ns kernel "other" and an
    NVTX range "step")."""
    b = TraceBuilder()
    if names:
        b.process(PID, name="server")
    else:
        b.process(PID)
    g = b.thread(PID, 101)
    for i in range(6):
        b.launch(1000 + i * 1000, 1010 + i * 1000, 1100 + i * 1000, 1200 + i * 1000, pid=PID, tid=101, name="k")
    if names:
        b.launch(8000, 8010, 8100, 8150, pid=PID, tid=101, name="other")
        b.nvtx_push_pop(900, 7300, "step", tid_g=g)
    return b


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


def _k_rows(rep: dict) -> dict:
    rows = [r for r in rep["kernels"] if r["name"] == "k"]
    return {"count": sum(r["count"] for r in rows), "total_ns": sum(r["total_ns"] for r in rows),
            "min_ns": min(r["min_ns"] for r in rows)}


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


def digests(*paths: Path) -> Dict[str, str]:
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in paths if p.exists()}


# ------------------------------------------------------------------------------------------ impossible rows
@pytest.mark.parametrize("reader", ["adbc", "sqlite3"])
def test_impossible_kernel_rows_are_left_out_and_counted(tmp_path, reader):
    p = _write(tmp_path, _six(),
               f'UPDATE {K} SET "end" = start - 50 WHERE rowid = 2',                  # ends before it starts
               f'UPDATE {K} SET "end" = 9223372036854775807 WHERE rowid = 4',        # beyond 2^62
               f"UPDATE {K} SET start = -9223372036854775808 WHERE rowid = 5")       # negative start
    rep = nle.analyze(p, reader=reader).to_dict()
    assert _k_rows(rep) == {"count": 3, "total_ns": 300, "min_ns": 100}
    w = [x for x in rep["warnings"] if x.startswith(K)]
    assert w == [f"{K}: 3 impossible row(s) left out of every number (2 with a start or end time missing or "
                 "outside 0 … 2^62 ns; 1 ending before they start)."]


# ------------------------------------------------------------------------------------------ values of the wrong type
GRAPH_NODE_TEXT = f"UPDATE {K} SET graphNodeId = 'node' || rowid WHERE rowid % 10 = 0"
MIXED = (f"UPDATE {K} SET deviceId = 'gpu0' WHERE rowid = 3", f"UPDATE {K} SET start = X'0001' WHERE rowid = 5",
         f'UPDATE {K} SET "end" = "end" + 0.5 WHERE rowid = 7', f"UPDATE {K} SET demangledName = 'k' WHERE rowid = 11",
         f"UPDATE {RT} SET correlationId = 'c' WHERE rowid = 12", f"UPDATE {RT} SET globalTid = X'01' WHERE rowid = 13")
WRONG_TYPES = {   # id → (kernels written, SQL, kernels kept, CUDA API rows kept)
    "stream-text-corr-blob-api-start-text": (6, (f"UPDATE {K} SET streamId = 'seven' WHERE rowid = 1",
                                                 f"UPDATE {K} SET correlationId = X'0102' WHERE rowid = 6",
                                                 f"UPDATE {RT} SET start = 'soon' WHERE rowid = 3"), 4, 5),
    "end-real": (6, (f'UPDATE {K} SET "end" = 1250.75 WHERE rowid = 1',), 5, 6),
    "graph-node-only": (100, (GRAPH_NODE_TEXT,), 90, 100),
    "ids-timestamps-names": (100, (GRAPH_NODE_TEXT, *MIXED), 86, 98),
}


@pytest.mark.parametrize("case", list(WRONG_TYPES))
def test_both_readers_leave_out_the_same_rows_of_wrong_type(tmp_path: Path, case: str) -> None:
    """One rule, both readers: a row with a text, blob or real value in an integer column the tool reads is left out
    and counted, one warning per table (docs/SECURITY.md §5), with identical reports and no warning on stderr.
    Six 100 ns kernels with a text ``streamId``, a blob ``correlationId``, an API row with a text ``start``; or a
    real ``end``; 100 kernels with a text ``graphNodeId`` on every 10th (the standard-library reader's packed path
    once read it as "a graph node" and kept them); then also a text ``deviceId``, a blob ``start``, a real ``end``,
    a text ``demangledName`` (a name id) on four others and two API rows with a text ``correlationId`` / blob
    ``globalTid``."""
    n, updates, kernels, api = WRONG_TYPES[case]
    p = _write(tmp_path, _six() if n == 6 else _bulk(n, 100), *updates)
    a, b = _analyze_quiet(p, "sqlite3"), _analyze_quiet(p, "adbc")
    assert a == b
    assert a["trace"]["row_counts"]["kernels"] == kernels and a["trace"]["row_counts"]["cuda_api"] == api
    assert _k_rows(a) == {"count": kernels, "total_ns": 100 * kernels, "min_ns": 100}
    assert sum(x["count"] for x in a["cuda_api"]["apis"]) == api
    assert f"{K}: {n - kernels} row(s) with a non-integer value (text, blob or real) in an integer column were " \
        "left out." in a["warnings"]
    assert (f"{RT}: {n - api} row(s) with a non-integer value (text, blob or real) in an integer column were "
            "left out." in a["warnings"]) == (api < n)


# ------------------------------------------------------------------------------------------ NULLs and blobs
def test_null_global_pid_and_tid_keep_their_rows(tmp_path):
    p = _write(tmp_path, _six(), f"UPDATE {K} SET globalPid = NULL WHERE rowid = 2",
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

    p = _write(tmp_path, _six(), f"UPDATE {K} SET deviceId = 4000000000")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    rep = nle.analyze(p).to_dict()
    assert [d["device_id"] for d in rep["devices"]] == [4000000000]
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 200_000   # KiB: < 200 MB more


# ------------------------------------------------------------------------------------------ text that is not UTF-8
BAD_K = "UPDATE StringIds SET value = CAST(X'6261646bff' AS TEXT) WHERE value = 'k'"   # b"badk\xff"


def test_kernel_name_that_is_not_utf8_is_replaced_counted_and_written_whole(tmp_path: Path, capsys) -> None:
    """Both readers: the renamed kernel's row keeps its count, total, min and max; one warning; the input is not
    changed. The command line writes the whole report (kernels.csv holds the row, report.md the warning)."""
    p = Path(_write(tmp_path, _six(names=True), BAD_K))
    before = digests(p)
    for reader in ("adbc", "sqlite3"):
        rep = nle.analyze(str(p), reader=reader).to_dict()
        rows = {r["name"]: r for r in rep["kernels"]}
        assert set(rows) == {"badk" + REPLACED, "other"}, reader
        assert (rows["badk" + REPLACED]["count"], rows["badk" + REPLACED]["total_ns"]) == (6, 600)
        assert (rows["badk" + REPLACED]["min_ns"], rows["badk" + REPLACED]["max_ns"]) == (100, 100)
        assert (rows["other"]["count"], rows["other"]["total_ns"]) == (1, 50)
        bad = [w for w in rep["warnings"] if "not UTF-8" in w]
        assert bad == ["1 text value(s) in StringIds hold bytes that are not UTF-8; they are shown with U+FFFD "
                       "(\ufffd) in place of those bytes (names that differ only there are counted together)."]
    assert digests(p) == before
    out = tmp_path / "o"
    assert cli.main([str(p), "--out", str(out), "--quiet"]) == 0
    assert "error" not in capsys.readouterr().err
    csv = (out / "tables" / "kernels.csv").read_text(encoding="utf-8")
    assert f"\nbadk{REPLACED},0,6,0.000600,600," in csv
    assert "not UTF-8" in (out / "report.md").read_text(encoding="utf-8")
    assert digests(p) == before


def test_every_text_column_read_is_replaced_not_refused(tmp_path: Path) -> None:
    """NVTX text, a process name and export metadata: each decoded with
    U+FFFD; the read counts them in one note (``excluded``: the model's warnings)."""
    p = Path(_write(tmp_path, _six(names=True),
                    "UPDATE NVTX_EVENTS SET text = CAST(X'73746570ff' AS TEXT) WHERE eventType = 59",
                    "UPDATE PROCESSES SET name = CAST(X'736572766572fe' AS TEXT)",
                    "UPDATE META_DATA_EXPORT SET value = CAST(X'ff' AS TEXT) WHERE rowid = 1"))
    conn = open_readonly(p)
    try:
        schema = probe(conn, str(p))
        nv = fetch_nvtx(conn, schema)
        assert nv is not None and nv.text == ["step" + REPLACED]
        (note,) = conn.excluded
        assert note.startswith("2 text value(s) in META_DATA_EXPORT, NVTX_EVENTS hold bytes that are not UTF-8")
    finally:
        conn.close()
    rep = nle.analyze(str(p)).to_dict()
    assert [r["name"] for r in rep["nvtx"]["ranges"]] == ["step" + REPLACED]
    assert any(pr.get("name") == "server" + REPLACED for pr in rep["trace"]["processes"])



# ------------------------------------------------------------------------------------------ ids that are not integers
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


# ------------------------------------------------------------------------------------------ sums that would overflow
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
