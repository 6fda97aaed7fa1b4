"""Bad input: one-line error, exit code 2 (never a traceback); input never modified; atomic output."""

from __future__ import annotations

import hashlib
import shutil
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import pause_env, run_cli, wait_until_staged

pytestmark = pytest.mark.slow   # every test starts the command line in a subprocess


def one_line_error(proc) -> str:
    assert "Traceback" not in proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("nsys-llm-explain: error:")
    return lines[0]


def test_missing_path_is_not_created(tmp_path):
    missing = tmp_path / "nope.sqlite"
    proc = run_cli(str(missing), "--out", str(tmp_path / "out"))
    assert proc.returncode == 2
    assert "not found" in one_line_error(proc)
    assert not missing.exists()
    assert not (tmp_path / "out").exists()


def test_directory(tmp_path):
    proc = run_cli(str(tmp_path), "--out", str(tmp_path / "out"))
    assert proc.returncode == 2
    assert "directory" in one_line_error(proc)


def test_not_sqlite(tmp_path):
    f = tmp_path / "trace.sqlite"
    f.write_text("hello, this is not a database\n" * 10)
    proc = run_cli(str(f), "--out", str(tmp_path / "out"))
    assert proc.returncode == 2
    assert "not an SQLite database" in one_line_error(proc)


def test_empty_file(tmp_path):
    f = tmp_path / "trace.sqlite"
    f.write_bytes(b"")
    proc = run_cli(str(f), "--out", str(tmp_path / "out"))
    assert proc.returncode == 2
    one_line_error(proc)


def test_sqlite_but_not_nsys(tmp_path):
    f = tmp_path / "other.sqlite"
    c = sqlite3.connect(f)
    c.execute("CREATE TABLE users(id INTEGER, name TEXT)")
    c.commit()
    c.close()
    proc = run_cli(str(f), "--out", str(tmp_path / "out"))
    assert proc.returncode == 2
    assert "not an Nsight Systems export" in one_line_error(proc)


def test_sqlite_without_tables(tmp_path):
    f = tmp_path / "empty.sqlite"
    c = sqlite3.connect(f)
    c.execute("PRAGMA user_version = 1")
    c.commit()
    c.close()
    proc = run_cli(str(f), "--out", str(tmp_path / "out"))
    assert proc.returncode == 2
    one_line_error(proc)


@pytest.mark.parametrize("fraction", [0.5, 0.1])
def test_truncated_file(tmp_path, demo_trace, fraction):
    data = demo_trace.read_bytes()
    f = tmp_path / "trunc.sqlite"
    f.write_bytes(data[: int(len(data) * fraction)])
    proc = run_cli(str(f), "--out", str(tmp_path / "out"))
    assert proc.returncode == 2, proc.stderr
    one_line_error(proc)
    assert not (tmp_path / "out").exists()


def test_corrupt_pages(tmp_path, demo_trace):
    data = bytearray(demo_trace.read_bytes())
    for off in range(8192, len(data), 4096):  # scribble over every page after the first two
        data[off + 100: off + 164] = b"\xff" * 64
    f = tmp_path / "corrupt.sqlite"
    f.write_bytes(bytes(data))
    proc = run_cli(str(f), "--out", str(tmp_path / "out"))
    assert proc.returncode == 2, proc.stderr
    one_line_error(proc)


def test_locked_database_is_read(tmp_path, demo_trace):
    f = tmp_path / "locked.sqlite"
    shutil.copyfile(demo_trace, f)
    holder = sqlite3.connect(f, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        proc = run_cli(str(f), "--out", str(tmp_path / "out"), "--quiet")
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "out" / "report.json").exists()


def _nsys_shell(path: Path, with_kernel_table: bool) -> None:
    c = sqlite3.connect(path)
    c.execute("CREATE TABLE StringIds(id INTEGER PRIMARY KEY, value TEXT NOT NULL)")
    c.execute("CREATE TABLE META_DATA_EXPORT(name TEXT, value TEXT)")
    c.execute("INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_PRODUCT_VERSION', '2024.2.3.38')")
    if with_kernel_table:
        c.execute("CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL(start INTEGER NOT NULL, end INTEGER NOT NULL, "
                  "deviceId INTEGER, streamId INTEGER, correlationId INTEGER, globalPid INTEGER, "
                  "demangledName INTEGER, shortName INTEGER)")
    c.commit()
    c.close()


def test_empty_kernel_table(tmp_path):
    f = tmp_path / "t.sqlite"
    _nsys_shell(f, True)
    out = tmp_path / "out"
    proc = run_cli(str(f), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    md = (out / "report.md").read_text()
    assert "no CUDA kernels were captured" in md
    assert "--trace=cuda" in md


def test_all_activity_tables_missing(tmp_path):
    f = tmp_path / "t.sqlite"
    _nsys_shell(f, False)
    out = tmp_path / "out"
    proc = run_cli(str(f), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    import json
    j = json.loads((out / "report.json").read_text())
    assert j["kernels"] == [] and j["devices"] == []
    assert any("no cuda kernels were captured" in w.lower() for w in j["warnings"])


def test_unwritable_out(tmp_path, demo_trace):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    proc = run_cli(str(demo_trace), "--out", str(blocker / "sub"))
    assert proc.returncode == 2
    one_line_error(proc)


def test_out_is_a_file(tmp_path, demo_trace):
    f = tmp_path / "out"
    f.write_text("x")
    proc = run_cli(str(demo_trace), "--out", str(f))
    assert proc.returncode == 2
    one_line_error(proc)
    assert f.read_text() == "x"


def test_out_rules(tmp_path, demo_trace):
    out = tmp_path / "out"
    out.mkdir()
    assert run_cli(str(demo_trace), "--out", str(out), "--quiet").returncode == 0   # empty dir: ok
    assert run_cli(str(demo_trace), "--out", str(out), "--quiet").returncode == 0   # previous report: ok
    (out / "notes.txt").write_text("mine")
    proc = run_cli(str(demo_trace), "--out", str(out), "--quiet")
    assert proc.returncode == 2
    assert "--force" in one_line_error(proc)
    proc = run_cli(str(demo_trace), "--out", str(out), "--quiet", "--force")
    assert proc.returncode == 0
    assert (out / "notes.txt").read_text() == "mine"
    assert not [p for p in tmp_path.rglob("*") if p.name.startswith(".nsys-llm-explain-")]


def test_bad_usage_exit_2(tmp_path, demo_trace):
    proc = run_cli(str(demo_trace))  # --out missing
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    proc = run_cli(str(demo_trace), "--out", str(tmp_path / "o"), "--window", "abc")
    assert proc.returncode == 2
    one_line_error(proc)
    bad = tmp_path / "phases.json"
    bad.write_text("{not json")
    proc = run_cli(str(demo_trace), "--out", str(tmp_path / "o"), "--phase-map", str(bad))
    assert proc.returncode == 2
    one_line_error(proc)


def test_nsys_rep_without_nsys(tmp_path):
    f = tmp_path / "trace.nsys-rep"
    f.write_bytes(b"\x00" * 64)
    env = {"PATH": str(tmp_path)}  # no nsys on PATH
    proc = run_cli(str(f), "--out", str(tmp_path / "out"), env_extra=env)
    assert proc.returncode == 2
    line = one_line_error(proc)
    assert "nsys export --type sqlite" in line
    assert not list(tmp_path.glob("*.sqlite"))


@pytest.mark.slow   # waits for a real SIGINT
def test_ctrl_c_leaves_nothing(tmp_path, demo_trace):
    from nsys_llm_explainer.output import STAGING_PREFIX

    out = tmp_path / "out"
    env = pause_env(tmp_path / "h", staged=30)   # the report is staged, then waits: Ctrl-C lands there
    p = subprocess.Popen([sys.executable, "-m", "nsys_llm_explainer", str(demo_trace), "--out", str(out)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    wait_until_staged(p, tmp_path)
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 130, err
    assert "Traceback" not in err
    assert "interrupted" in err
    assert not out.exists()
    assert not [x for x in tmp_path.iterdir() if x.name.startswith((".out", STAGING_PREFIX))]


def _fingerprint(p: Path):
    st = p.stat()
    return hashlib.sha256(p.read_bytes()).hexdigest(), st.st_mtime_ns, st.st_size


@pytest.mark.slow   # the CLI on 12 real traces
def test_input_unchanged_and_no_side_files(tmp_path, shared_traces, capsys):
    """Every export layout (2019 → 2026) is opened read-only: nothing beside it, not a byte changed (the command
    line in this process: the read is the same code as in a subprocess)."""
    from nsys_llm_explainer.cli import main

    for trace in sorted(shared_traces.glob("*/trace.sqlite"))[:12]:
        before = _fingerprint(trace)
        siblings = sorted(x.name for x in trace.parent.iterdir())
        code = main([str(trace), "--out", str(tmp_path / trace.parent.name), "--quiet"])
        assert code == 0, (trace, capsys.readouterr().err)
        assert _fingerprint(trace) == before
        assert sorted(x.name for x in trace.parent.iterdir()) == siblings  # no -journal/-wal/-shm


@pytest.mark.skipif(shutil.which("nsys") is None, reason="needs Nsight Systems (`nsys`) on PATH")
def test_qdrep_is_exported_to_a_temp_dir(tmp_path, shared_traces):
    src = shared_traces / "12_gartangh_keras_gtx1650" / "original.qdrep"
    assert src.is_file(), f"no .qdrep in ../shared: {src}"
    rep = tmp_path / "in" / "original.qdrep"
    rep.parent.mkdir()
    shutil.copyfile(src, rep)
    before = _fingerprint(rep)
    proc = run_cli(str(rep), "--out", str(tmp_path / "out"), "--quiet")
    assert proc.returncode == 0, proc.stderr
    assert _fingerprint(rep) == before
    assert sorted(p.name for p in rep.parent.iterdir()) == ["original.qdrep"]   # nothing written beside it
    import json
    j = json.loads((tmp_path / "out" / "report.json").read_text())
    assert j["kernels_summary"]["kernel_count"] > 0
    # the committed trace.sqlite was exported from this .qdrep by nsys 2022.4: same numbers when the local
    # nsys is that version
    ref = run_cli(str(src.parent / "trace.sqlite"), "--out", str(tmp_path / "ref"), "--quiet")
    assert ref.returncode == 0
    r = json.loads((tmp_path / "ref" / "report.json").read_text())
    if j["trace"]["nsys_version"] == r["trace"]["nsys_version"]:
        assert j["kernels"] == r["kernels"] and j["cuda_api"] == r["cuda_api"]


def test_bad_option_files_fail_fast(tmp_path, demo_trace):
    bad = tmp_path / "cats.json"
    bad.write_text('{"rules": [["(unclosed", "gemm"]]}')
    proc = run_cli(str(demo_trace), "--out", str(tmp_path / "o"), "--categories", str(bad))
    assert proc.returncode == 2
    one_line_error(proc)
    proc = run_cli(str(demo_trace), "--out", str(tmp_path / "o"), "--step-marker", "(oops")
    assert proc.returncode == 2
    assert "--step-marker" in one_line_error(proc)
    proc = run_cli(str(demo_trace), "--out", str(tmp_path / "o"), "--window-nvtx", "no such range")
    assert proc.returncode == 2
    one_line_error(proc)
    assert not (tmp_path / "o").exists()


@pytest.mark.slow   # pauses 1.2 s per pipeline step
def test_progress_on_stderr_for_slow_steps(tmp_path, demo_trace):
    proc = run_cli(str(demo_trace), "--out", str(tmp_path / "o"), env_extra=pause_env(tmp_path / "h", step=1.2),
                   timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert "[nsys-llm-explain]" in proc.stderr and "elapsed" in proc.stderr
    assert "verdict:" in proc.stdout and "GPU busy" in proc.stdout and "first thing to do:" in proc.stdout
    quiet = run_cli(str(demo_trace), "--out", str(tmp_path / "q"), "--quiet")
    assert quiet.returncode == 0 and quiet.stdout == "" and quiet.stderr == ""
