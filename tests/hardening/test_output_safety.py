"""The tool writes only what it owns (issue 9, items 1–3, 10–12): a manifest in every output directory, the
input never replaced, foreign files never touched, the whole report visible in one step, nothing left behind on
a failure or a signal, odd outputs (closed pipe, ASCII terminal, long names, full disk) with a clear answer."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import signal
import sqlite3
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict

import pytest
from conftest import pause_env, run_cli, wait_until_staged

from nsys_llm_explainer import cli, interrupts
from nsys_llm_explainer.errors import Interrupted
from nsys_llm_explainer.output import MANIFEST, OLD_PREFIX, STAGING_PREFIX
from nsys_llm_explainer.render.csv_tables import CsvRenderer


def digest(d: Path) -> Dict[str, str]:
    """Relative path → sha256 of every file under ``d`` (hidden ones included)."""
    return {p.relative_to(d).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(d.rglob("*")) if p.is_file()}


def leftovers(d: Path) -> list:
    return [p.name for p in d.rglob("*") if p.name.startswith((STAGING_PREFIX, OLD_PREFIX))]


def run(*args: str) -> int:
    return cli.main(list(args))


def one_line(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


@pytest.fixture()
def trace(tmp_path: Path, demo_trace: Path) -> Path:
    t = tmp_path / "in" / "trace.sqlite"
    t.parent.mkdir()
    shutil.copyfile(demo_trace, t)
    return t


# ------------------------------------------------------------------------------------------- ownership
def test_manifest_lists_exactly_the_files_written(tmp_path: Path, trace: Path) -> None:
    out = tmp_path / "out"
    assert run(str(trace), "-o", str(out), "--quiet") == 0
    man = json.loads((out / MANIFEST).read_text())
    assert man["tool"] == "nsys-llm-explainer" and man["kind"] == "report"
    on_disk = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file() and p.name != MANIFEST)
    assert man["files"] == on_disk
    assert {"report.md", "report.json", "report.html", "tables/kernels.csv"} <= set(man["files"])


def test_input_inside_out_is_refused_and_kept(tmp_path: Path, trace: Path, capsys) -> None:
    r = tmp_path / "r"
    (r / "tables").mkdir(parents=True)
    inside = r / "tables" / "t.sqlite"
    shutil.copyfile(trace, inside)
    before = digest(r)
    assert run(str(inside), "--out", str(r)) == 2
    assert "inside --out" in one_line(capsys.readouterr().err)
    assert digest(r) == before
    # --force writes beside it; the input is byte-identical afterwards
    assert run(str(inside), "--out", str(r), "--force", "--quiet") == 0
    assert digest(r)["tables/t.sqlite"] == before["tables/t.sqlite"]
    assert (r / "report.json").exists() and "tables/t.sqlite" not in json.loads((r / MANIFEST).read_text())["files"]


def test_trace_named_like_an_output_is_never_overwritten(tmp_path: Path, trace: Path, capsys) -> None:
    d = tmp_path / "d"
    d.mkdir()
    named = d / "report.json"
    shutil.copyfile(trace, named)
    before = digest(d)
    for extra in ([], ["--force"]):
        assert run(str(named), "--out", str(d), *extra) == 2
        assert "would replace" in one_line(capsys.readouterr().err)
        assert digest(d) == before


def test_demo_trace_of_previous_demo_is_not_replaced(tmp_path: Path, capsys) -> None:
    out = tmp_path / "demo"
    assert run("demo", "-o", str(out), "--quiet") == 0
    t = out / "demo_trace.sqlite"
    before = digest(out)
    assert run(str(t), "--out", str(out), "--force") == 2
    assert "would replace" in one_line(capsys.readouterr().err)
    assert digest(out) == before


def test_foreign_file_is_refused_then_kept_with_force(tmp_path: Path, trace: Path, capsys) -> None:
    d = tmp_path / "d"
    (d / "tables").mkdir(parents=True)
    (d / "tables" / "mine.csv").write_text("1\n")
    assert run(str(trace), "--out", str(d)) == 2
    line = one_line(capsys.readouterr().err)
    assert "not written by this tool" in line and "--force" in line and "tables/mine.csv" in line
    assert sorted(p.name for p in d.rglob("*")) == ["mine.csv", "tables"]
    assert run(str(trace), "--out", str(d), "--force", "--quiet") == 0
    assert (d / "tables" / "mine.csv").read_text() == "1\n"
    assert (d / "report.md").exists() and "tables/mine.csv" not in json.loads((d / MANIFEST).read_text())["files"]
    # a rerun (no --force needed for our files, but mine.csv is still foreign) keeps it too
    assert run(str(trace), "--out", str(d), "--force", "--quiet") == 0
    assert (d / "tables" / "mine.csv").read_text() == "1\n" and not leftovers(tmp_path)


def test_rerun_replaces_only_manifest_files_and_drops_stale_demo_trace(tmp_path: Path, trace: Path) -> None:
    out = tmp_path / "o"
    assert run("demo", "--out", str(out), "--quiet") == 0
    assert (out / "demo_trace.sqlite").exists()
    assert run(str(trace), "--out", str(out), "--quiet") == 0    # a report may replace a demo report
    assert not (out / "demo_trace.sqlite").exists()
    man = json.loads((out / MANIFEST).read_text())
    assert man["kind"] == "report" and "demo_trace.sqlite" not in man["files"]


def test_demo_refuses_a_real_report_unless_force(tmp_path: Path, trace: Path, capsys) -> None:
    out = tmp_path / "o"
    assert run(str(trace), "--out", str(out), "--quiet") == 0
    before = digest(out)
    assert run("demo", "--out", str(out)) == 2
    assert "real trace" in one_line(capsys.readouterr().err)
    assert digest(out) == before
    assert run("demo", "--out", str(out), "--force", "--quiet") == 0
    assert json.loads((out / MANIFEST).read_text())["kind"] == "demo"


def test_demo_unknown_scenario_lists_the_valid_ones(tmp_path: Path, capsys) -> None:
    assert run("demo", "--scenario", "foo", "-o", str(tmp_path / "o")) == 2
    line = one_line(capsys.readouterr().err)
    assert "'foo'" in line and "healthy" in line and "launch_bound" in line
    assert not (tmp_path / "o").exists()


def test_compare_and_cluster_share_the_rules(tmp_path: Path, trace: Path, capsys) -> None:
    d = tmp_path / "c"
    d.mkdir()
    (d / "notes.txt").write_text("mine")
    assert run("compare", str(trace), str(trace), "-o", str(d)) == 2
    assert "notes.txt" in one_line(capsys.readouterr().err)
    cl = tmp_path / "cl"
    (cl / "in").mkdir(parents=True)
    for i in range(2):
        shutil.copyfile(trace, cl / "in" / f"rank{i}.sqlite")
    assert run(str(cl / "in"), "-o", str(cl), "--jobs", "1") == 2       # the inputs are inside --out
    assert "inside --out" in one_line(capsys.readouterr().err)
    good = tmp_path / "cl_out"
    assert run(str(cl / "in"), "-o", str(good), "--jobs", "1", "--quiet") == 0
    man = json.loads((good / MANIFEST).read_text())
    assert man["kind"] == "cluster" and any(f.startswith("ranks/") for f in man["files"])
    assert run("compare", str(trace), str(trace), "-o", str(good), "--quiet") == 2   # another kind of output


# ------------------------------------------------------------------------------------------- atomic, failures
def test_failure_while_rendering_keeps_previous_report(tmp_path: Path, trace: Path, monkeypatch, capsys) -> None:
    out = tmp_path / "o"
    assert run(str(trace), "--out", str(out), "--quiet") == 0
    before = digest(out)

    def full(self, report, out_dir):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(CsvRenderer, "render", full)
    assert run(str(trace), "--out", str(out)) == 2
    assert "No space left on device" in one_line(capsys.readouterr().err)
    assert digest(out) == before and not leftovers(tmp_path)


def test_failure_in_the_swap_restores_previous_report(tmp_path: Path, trace: Path, monkeypatch, capsys) -> None:
    out = tmp_path / "o"
    assert run(str(trace), "--out", str(out), "--quiet") == 0
    before = digest(out)
    real_rename = os.rename

    def rename(src, dst, **dir_fds):   # the commit renames through directory descriptors (no link followed)
        if Path(src).name.startswith(STAGING_PREFIX):
            raise OSError(errno.EIO, "injected")
        return real_rename(src, dst, **dir_fds)

    monkeypatch.setattr(os, "rename", rename)
    assert run(str(trace), "--out", str(out)) == 2
    assert "injected" in one_line(capsys.readouterr().err)
    assert digest(out) == before and not leftovers(tmp_path)


def test_failed_run_creates_no_parent_dirs(tmp_path: Path, trace: Path, monkeypatch) -> None:
    monkeypatch.setattr(CsvRenderer, "render", lambda self, r, d: (_ for _ in ()).throw(OSError(errno.EDQUOT, "q")))
    assert run(str(trace), "--out", str(tmp_path / "a" / "b" / "out")) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in"]


def test_new_dir_mode_follows_umask(tmp_path: Path, trace: Path) -> None:
    old = os.umask(0o022)
    try:
        assert run(str(trace), "--out", str(tmp_path / "a" / "o"), "--quiet") == 0
        os.umask(0o027)
        assert run(str(trace), "--out", str(tmp_path / "b"), "--quiet") == 0
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "a" / "o").stat().st_mode) == 0o755
    assert stat.S_IMODE((tmp_path / "a").stat().st_mode) == 0o755      # parent created at commit
    assert stat.S_IMODE((tmp_path / "b").stat().st_mode) == 0o750
    assert stat.S_IMODE((tmp_path / "b" / "report.md").stat().st_mode) == 0o640


def test_out_name_too_long(tmp_path: Path, trace: Path, capsys) -> None:
    assert run(str(trace), "--out", str(tmp_path / ("x" * 300))) == 2
    assert "255" in one_line(capsys.readouterr().err)


# ------------------------------------------------------------------------------------------- signals
@pytest.mark.slow   # a CLI subprocess
@pytest.mark.parametrize("sig,code", [(signal.SIGTERM, 143), (signal.SIGHUP, 129), (signal.SIGINT, 130)])
def test_signal_after_staging_leaves_previous_report(tmp_path: Path, trace: Path, sig: int, code: int) -> None:
    out = tmp_path / "o"
    assert run(str(trace), "--out", str(out), "--quiet") == 0
    before = digest(out)
    tmpdir = tmp_path / "tmpdir"     # $TMPDIR of the run: must be empty afterwards
    tmpdir.mkdir()
    env = dict(pause_env(tmp_path / "h", staged=30), TMPDIR=str(tmpdir))
    p = subprocess.Popen([sys.executable, "-m", "nsys_llm_explainer", str(trace), "--out", str(out), "--quiet"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    wait_until_staged(p, tmp_path)
    p.send_signal(sig)
    _, err = p.communicate(timeout=60)
    assert p.returncode == code, err
    assert "interrupted by " + signal.Signals(sig).name in one_line(err)
    assert digest(out) == before and not leftovers(tmp_path) and not list(tmpdir.iterdir())


def test_sigterm_during_compare_keeps_previous_comparison(tmp_path: Path, trace: Path) -> None:
    out = tmp_path / "cmp"
    assert run("compare", str(trace), str(trace), "-o", str(out), "--quiet") == 0
    before = digest(out)
    env = pause_env(tmp_path / "h", staged=30)
    p = subprocess.Popen([sys.executable, "-m", "nsys_llm_explainer", "compare", str(trace), str(trace), "-o",
                          str(out), "--quiet"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    wait_until_staged(p, tmp_path)
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 143 and "interrupted by SIGTERM" in one_line(err)
    assert digest(out) == before and not leftovers(tmp_path)


@pytest.mark.slow   # a CLI subprocess
def test_signal_waits_for_the_commit(tmp_path: Path) -> None:
    previous = interrupts.install()
    order = []
    try:
        with pytest.raises(Interrupted) as ei:
            with interrupts.critical():
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(0.05)
                order.append("still committing")
        order.append("raised")
    finally:
        interrupts.restore(previous)
    assert order == ["still committing", "raised"] and ei.value.exit_code == 143


@pytest.mark.slow   # a CLI subprocess
# ------------------------------------------------------------------------------------------- terminal
def test_closed_stdout_after_complete_report_exits_0(tmp_path: Path, trace: Path) -> None:
    p = subprocess.Popen([sys.executable, "-m", "nsys_llm_explainer", str(trace), "--out", str(tmp_path / "o")],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert p.stdout is not None
    p.stdout.close()
    err = p.stderr.read().decode() if p.stderr else ""
    assert p.wait(timeout=300) == 0, err
    assert "error" not in err and "Traceback" not in err and (tmp_path / "o" / "report.json").exists()


@pytest.mark.slow   # a CLI subprocess
def test_ascii_only_stdout(tmp_path: Path, trace: Path) -> None:
    proc = run_cli(str(trace), "--out", str(tmp_path / "o"), env_extra={"PYTHONIOENCODING": "ascii", "LANG": "C"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.isascii() and "verdict:" in proc.stdout


# ------------------------------------------------------------------------------------------- inputs
@pytest.mark.parametrize("kind", ["dev_zero", "fifo", "huge"])
def test_option_file_that_is_not_a_small_regular_file(tmp_path: Path, trace: Path, kind: str, capsys) -> None:
    if kind == "dev_zero":
        f = Path("/dev/zero")
    elif kind == "fifo":
        f = tmp_path / "fifo"
        os.mkfifo(f)
    else:
        f = tmp_path / "huge.json"
        with open(f, "wb") as fh:
            fh.truncate(64 << 20)   # sparse 64 MiB
    for flag in ("--categories", "--phase-map"):
        assert run(str(trace), "--out", str(tmp_path / "o"), flag, str(f)) == 2
        one_line(capsys.readouterr().err)
    assert not (tmp_path / "o").exists()


@pytest.mark.slow   # a CLI subprocess
def test_view_named_like_a_table_is_not_read(tmp_path: Path, trace: Path) -> None:
    c = sqlite3.connect(trace)
    c.execute("DROP TABLE IF EXISTS NVTX_EVENTS")
    c.execute("CREATE VIEW NVTX_EVENTS AS WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) "
              "SELECT i AS start, i AS end, 59 AS eventType, 'x' AS text, 1 AS globalTid FROM r")
    c.commit()
    c.close()
    proc = run_cli(str(trace), "--out", str(tmp_path / "o"), "--quiet", timeout=120)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.slow   # a CLI subprocess
def test_wal_and_hot_journal_beside_the_input(tmp_path: Path, trace: Path) -> None:
    wal = tmp_path / "wal"
    wal.mkdir()
    c = sqlite3.connect(trace)
    c.execute("PRAGMA journal_mode=WAL")
    c.execute("PRAGMA wal_autocheckpoint=0")
    c.execute("CREATE TABLE late(x)")
    c.commit()
    shutil.copyfile(trace, wal / "t.sqlite")
    shutil.copyfile(f"{trace}-wal", wal / "t.sqlite-wal")
    c.close()
    proc = run_cli(str(wal / "t.sqlite"), "--out", str(tmp_path / "o1"))
    assert proc.returncode == 2 and "-wal" in one_line(proc.stderr)
    (wal / "t.sqlite-wal").write_bytes(b"")            # an empty WAL is harmless
    assert run_cli(str(wal / "t.sqlite"), "--out", str(tmp_path / "o2"), "--quiet").returncode == 0
    journal = wal / "t.sqlite-journal"
    journal.write_bytes(bytes.fromhex("d9d505f920a163d7") + b"\x00" * 504)   # a hot journal's header
    proc = run_cli(str(wal / "t.sqlite"), "--out", str(tmp_path / "o3"))
    assert proc.returncode == 2 and "hot rollback journal" in one_line(proc.stderr)
    journal.write_bytes(b"\x00" * 512)                  # header zeroed (journal_mode=PERSIST): not hot
    assert run_cli(str(wal / "t.sqlite"), "--out", str(tmp_path / "o4"), "--quiet").returncode == 0
