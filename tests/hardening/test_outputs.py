"""The tool writes only what it owns (issues 9, 17 and 24; docs/SECURITY.md §2): a manifest in every output
directory; the input never replaced; foreign files never touched (refused, or kept with ``--force``); nothing
outside the real ``--out`` created, replaced or removed — not through a ``tables/`` or ``ranks/<label>/`` that is a
symbolic link, a manifest entry that leaves ``--out``, an ``--out`` swapped during the run; the whole output
visible in one step, nothing left behind on a failure; one run at a time per ``--out``; a umask that locks the
owner out refused. Each test builds the hostile directory in ``tmp_path`` and checks the files outside byte for
byte, the exit code and the one message line."""

from __future__ import annotations

import dataclasses
import errno
import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import List

import pytest
from conftest import pause_env, wait_until_staged
from hostile import PROG, copy_trace, digest, leftovers, make_victim, one_line, refused, snapshot

from nsys_llm_explainer import cli
from nsys_llm_explainer.errors import Interrupted, OutputError
from nsys_llm_explainer.output import MANIFEST, STAGING_PREFIX, Staging, check_out_dir
from nsys_llm_explainer.render.csv_tables import CsvRenderer


@pytest.fixture()
def trace(tmp_path: Path, small_trace: Path) -> Path:
    return copy_trace(small_trace, tmp_path)


@pytest.fixture()
def victim(tmp_path: Path) -> Path:
    return make_victim(tmp_path)


def run(*args: str) -> int:
    return cli.main(list(args))


def lines(err: str) -> List[str]:
    assert "Traceback" not in err, err
    return [ln for ln in err.splitlines() if ln.strip()]


def _run(kind: str, trace: Path, out: Path, *extra: str) -> int:
    """A report, comparison or cluster (of ``trace`` and a copy beside it) into ``out``, in this process."""
    if kind == "report":
        return cli.main([str(trace), "--out", str(out), "--quiet", *extra])
    if kind == "compare":
        return cli.main(["compare", str(trace), str(trace), "--out", str(out), "--quiet", *extra])
    second = trace.parent / "r1.sqlite"
    if not second.exists():
        shutil.copyfile(trace, second)
    return cli.main([str(trace), str(second), "--out", str(out), "--quiet", "--jobs", "1", *extra])


# ------------------------------------------------------------------------------------------- an --out that cannot be
def _dangling(tmp_path: Path) -> Path:
    os.symlink(tmp_path / "far" / "away", tmp_path / "dangling")
    return tmp_path / "dangling"


def _a_file(tmp_path: Path) -> Path:
    (tmp_path / "file").write_text("x")
    return tmp_path / "file"


UNUSABLE_OUT = {   # id → (make(tmp_path) → --out, what the line says after "error: ")
    "a-file": (_a_file, "--out {out} exists and is not a directory"),
    "under-a-file": (lambda d: _a_file(d) / "sub", "cannot create --out {out}: {tmp}/file is not a directory"),
    "name-too-long": (lambda d: d / ("x" * 300), "--out has a path component of 300 bytes; file systems allow 255"),
    "dangling-link": (_dangling, "--out {out}: {tmp}/dangling is a symbolic link to a missing path; create its "
                                 "target or choose another directory"),
    "under-a-dangling-link": (lambda d: _dangling(d) / "sub", "--out {out}: {tmp}/dangling is a symbolic link to a "
                                                              "missing path"),
}


@pytest.mark.parametrize("case", list(UNUSABLE_OUT))
def test_an_out_that_cannot_be_used_is_one_line(tmp_path: Path, demo_trace: Path, capsys, case: str) -> None:
    make, says = UNUSABLE_OUT[case]
    out = make(tmp_path)
    before = snapshot(tmp_path)
    line = refused(capsys, [str(demo_trace), "--out", str(out)])
    assert line.startswith(f"{PROG}: error: " + says.format(out=out, tmp=tmp_path)), line
    assert snapshot(tmp_path) == before


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


@pytest.mark.parametrize("foreign", ["notes.txt", "tables/mine.csv"])
def test_foreign_file_is_refused_then_kept_with_force(tmp_path: Path, trace: Path, capsys, foreign: str) -> None:
    """An empty directory and a previous report may be written; a file the tool did not write is refused (one
    line naming it and --force), then kept as it is with --force, run after run."""
    d = tmp_path / "d"
    d.mkdir()
    assert run(str(trace), "--out", str(d), "--quiet") == 0          # empty directory
    assert run(str(trace), "--out", str(d), "--quiet") == 0          # a previous report
    (d / foreign).write_text("1\n")
    before = snapshot(d)
    line = refused(capsys, [str(trace), "--out", str(d)])
    assert "not written by this tool" in line and "--force" in line and foreign in line, line
    assert snapshot(d) == before
    for _ in range(2):   # a rerun: no --force needed for our files, but the foreign one still is
        assert run(str(trace), "--out", str(d), "--force", "--quiet") == 0
        assert (d / foreign).read_text() == "1\n"
        assert (d / "report.md").exists() and foreign not in json.loads((d / MANIFEST).read_text())["files"]
    assert not leftovers(tmp_path)


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


@pytest.mark.parametrize("kind", [{}, [], 5, None])
def test_a_manifest_whose_kind_is_not_a_string(tmp_path: Path, small_trace: Path, capsys, kind) -> None:
    out = tmp_path / "o"
    assert cli.main([str(small_trace), "--out", str(out), "--quiet"]) == 0
    m = out / ".nsys-llm-explainer.json"
    data = json.loads(m.read_text())
    data["kind"] = kind
    m.write_text(json.dumps(data))
    before = sorted(p.name for p in out.iterdir())
    capsys.readouterr()
    for force in ([], ["--force"]):
        code = cli.main([str(small_trace), "--out", str(out), "--quiet", *force])
        err = capsys.readouterr().err
        assert code in (0, 2) and "internal error" not in err, err
        assert len([ln for ln in err.splitlines() if ln.strip()]) <= 1, err
    assert set(before) <= {p.name for p in out.iterdir()}


# ------------------------------------------------------------------------------------------- links, in and out
@pytest.mark.parametrize("kind", ["report", "compare", "cluster"])
def test_tables_linked_out_of_out_is_refused_even_with_force(tmp_path: Path, trace: Path, victim: Path, kind: str,
                                                             capsys) -> None:
    out = tmp_path / "out"
    assert _run(kind, trace, out) == 0
    shutil.rmtree(out / "tables")
    os.symlink(victim, out / "tables")           # the previous manifest still lists tables/kernels.csv …
    capsys.readouterr()
    before_v, before_o = snapshot(victim), snapshot(out)
    for extra in ((), ("--force",)):
        assert _run(kind, trace, out, *extra) == 2
        (line,) = lines(capsys.readouterr().err)
        assert line.startswith("nsys-llm-explain: error: --out ") and "'tables', a symbolic link" in line
        assert "--force" in line
        assert snapshot(victim) == before_v and snapshot(out) == before_o and not leftovers(tmp_path)


def test_manifest_entries_outside_or_through_a_link_are_ignored_and_reported(tmp_path: Path, trace: Path,
                                                                             victim: Path, capsys) -> None:
    out = tmp_path / "out"
    assert _run("report", trace, out) == 0
    os.symlink(victim, out / "tables" / "sub")   # a link inside a real tables/
    os.symlink(victim, out / "elsewhere")
    man = json.loads((out / MANIFEST).read_text())
    hostile = ["tables/sub/kernels.csv", "tables/sub/other.txt", "elsewhere/other.txt", "../victim/other.txt",
               str(victim / "other.txt"), "tables/sub/empty/x", 7]
    man["files"] += hostile
    (out / MANIFEST).write_text(json.dumps(man))
    capsys.readouterr()
    before_v = snapshot(victim)

    assert _run("report", trace, out) == 2       # the links are not ours: refused, one line, no warning
    (line,) = lines(capsys.readouterr().err)
    assert "not written by this tool" in line and snapshot(victim) == before_v

    assert _run("report", trace, out, "--force") == 0
    (warning,) = lines(capsys.readouterr().err)
    # six entries: through a link to something that exists (3), outside --out (2), not a path at all (1); the
    # one naming nothing (tables/sub/empty/x) is ignored silently, like any file of ours that is gone
    assert warning.startswith("nsys-llm-explain: warning: the .nsys-llm-explainer.json in --out ")
    assert "lists 6 path(s) outside --out or through a symbolic link" in warning and "never written" in warning
    assert snapshot(victim) == before_v and not leftovers(tmp_path)
    assert os.readlink(out / "tables" / "sub") == str(victim) and os.readlink(out / "elsewhere") == str(victim)
    files = json.loads((out / MANIFEST).read_text())["files"]
    assert not set(files) & {h for h in hostile if isinstance(h, str)} and "tables/kernels.csv" in files


def test_a_file_outside_listed_by_an_absolute_or_dotdot_entry_is_never_removed(tmp_path: Path, trace: Path,
                                                                              victim: Path) -> None:
    out = tmp_path / "out"
    assert _run("report", trace, out) == 0
    man = json.loads((out / MANIFEST).read_text())
    man["files"] += ["../victim/other.txt", str(victim / "kernels.csv")]
    (out / MANIFEST).write_text(json.dumps(man))
    before = snapshot(victim)
    assert _run("report", trace, out) == 0       # nothing foreign in --out: the swap, without --force
    assert snapshot(victim) == before


def test_cluster_rank_directory_linked_out_is_refused_at_the_commit(tmp_path: Path, trace: Path, victim: Path,
                                                                     capsys) -> None:
    out = tmp_path / "out"
    (out / "ranks").mkdir(parents=True)
    os.symlink(victim, out / "ranks" / "r0")      # where the first file's own report would go
    before = snapshot(victim)
    assert _run("cluster", trace, out, "--force") == 2
    (line,) = lines(capsys.readouterr().err)
    assert "'ranks/r0', a symbolic link or a file, on the way to 'ranks/r0/" in line
    assert snapshot(victim) == before and not leftovers(tmp_path)
    assert sorted(snapshot(out)) == ["ranks", "ranks/r0"]


def test_a_link_that_appears_during_the_run_is_never_written_through(tmp_path: Path, victim: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "mine.txt").write_text("the user's\n")
    od = check_out_dir(out, force=True)
    before = snapshot(victim)
    with pytest.raises(OutputError, match="'tables', a symbolic link or a file, on the way to 'tables/kernels.csv'"):
        with Staging(od) as st:
            assert st.tmp is not None
            (st.tmp / "tables").mkdir()
            (st.tmp / "tables" / "kernels.csv").write_text("new\n")
            (st.tmp / "report.md").write_text("# new\n")
            os.symlink(victim, out / "tables")    # made while the report was being written
            st.commit()
    assert snapshot(victim) == before and not leftovers(tmp_path)
    assert sorted(snapshot(out)) == ["mine.txt", "tables"]


def test_staging_is_beside_the_real_out_and_removed_on_interrupts(tmp_path: Path) -> None:
    real = tmp_path / "disk" / "reports"
    real.mkdir(parents=True)
    (tmp_path / "links").mkdir()
    link = tmp_path / "links" / "out"
    os.symlink(real, link)
    od = check_out_dir(link, force=False)
    assert od.real == real
    for exc in (KeyboardInterrupt(), Interrupted(15, "SIGTERM"), OSError(28, "No space left on device")):
        with pytest.raises((KeyboardInterrupt, OutputError)):
            with Staging(od) as st:
                assert st.tmp is not None and st.tmp.parent == real.parent   # beside the real --out
                (st.tmp / "report.md").write_text("x")
                raise exc
        assert not leftovers(tmp_path) and sorted(os.listdir(real.parent)) == ["reports"]
    assert not os.listdir(tmp_path / "links" / "out") and os.path.islink(link)


# ----------------------------------------------------------------------------------------- --out swapped during the run
def _stage(st: Staging) -> None:
    assert st.tmp is not None
    (st.tmp / "tables").mkdir()
    (st.tmp / "tables" / "kernels.csv").write_text("new\n")
    (st.tmp / "report.md").write_text("# new\n")


def _previous(out: Path) -> None:
    od = check_out_dir(out, force=False)
    with Staging(od) as st:
        _stage(st)
        st.commit()


def _to_link(out: Path, victim: Path) -> None:
    shutil.rmtree(out) if out.is_dir() else None
    os.symlink(victim, out)


def _to_other_dir(out: Path, victim: Path) -> None:
    os.rename(out, out.with_name("moved"))
    out.mkdir()
    (out / "theirs.txt").write_text("someone else's\n")


@pytest.mark.parametrize("previous", [False, True], ids=["new", "previous-report"])
@pytest.mark.parametrize("swap", [_to_link, _to_other_dir], ids=["link", "other-dir"])
@pytest.mark.parametrize("force", [False, True], ids=["", "force"])
def test_out_replaced_during_the_run_is_refused_at_the_commit(tmp_path: Path, victim: Path, previous, swap,
                                                              force) -> None:
    out = tmp_path / "out"
    if previous:
        _previous(out)
        if force:
            (out / "mine.txt").write_text("the user's\n")   # --force: the commit goes file by file
    od = check_out_dir(out, force=force)
    before = snapshot(victim)
    if not previous and swap is _to_other_dir:
        out.mkdir()   # absent at the check, a directory of someone else's at the commit
        (out / "theirs.txt").write_text("someone else's\n")
    with pytest.raises(OutputError, match=r"changed while the tool ran .*nothing was written there"):
        with Staging(od) as st:
            _stage(st)
            if previous or swap is _to_link:
                swap(out, victim)
            st.commit()
    assert snapshot(victim) == before and not leftovers(tmp_path)
    if out.is_symlink():
        assert os.readlink(out) == str(victim)
    else:
        assert snapshot(out) == {"theirs.txt": b"someone else's\n".hex()}


def test_parent_gone_at_the_check_of_a_previous_out_is_refused_at_the_commit(tmp_path: Path) -> None:
    """The directory above an existing --out vanishing between the check's two looks (a race: its identity could not
    be taken) is the one-line "changed" refusal at the commit, never an internal error."""
    out = tmp_path / "out"
    _previous(out)
    before = snapshot(out)
    od = dataclasses.replace(check_out_dir(out, force=False), anchor_ident=None)
    with pytest.raises(OutputError, match=r"changed while the tool ran \(.* was not there when --out was checked\); "
                                          r"nothing was written there"):
        with Staging(od) as st:
            _stage(st)
            st.commit()
    assert snapshot(out) == before and not leftovers(tmp_path)


@pytest.mark.slow   # the command line in a subprocess, paused before its commit
def test_out_made_a_link_during_a_cli_run_exits_2_and_writes_nothing_there(tmp_path: Path, trace: Path,
                                                                            victim: Path) -> None:
    out = tmp_path / "out"
    before = snapshot(victim)
    p = subprocess.Popen([sys.executable, "-m", "nsys_llm_explainer", str(trace), "--out", str(out), "--quiet"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=pause_env(tmp_path, staged=2.0))
    wait_until_staged(p, tmp_path)
    os.symlink(victim, out)
    _, err = p.communicate(timeout=120)
    assert p.returncode == 2, err
    assert one_line(err) == (f"{PROG}: error: --out {out} changed while the tool ran (it was absent and is now a "
                             "symbolic link); nothing was written there: check what replaced it, then run again")
    assert snapshot(victim) == before and not leftovers(tmp_path)


# ------------------------------------------------------------------------------------------- one run at a time
def test_a_second_run_into_the_same_out_is_refused_while_the_first_runs(tmp_path: Path) -> None:
    out = tmp_path / "new" / "out"
    first = check_out_dir(out, force=False, kind="compare")
    with pytest.raises(OutputError, match=r"is being written by another run of this tool"):
        check_out_dir(out, force=False, kind="cluster")
    with pytest.raises(OutputError, match=r"is being written by another run of this tool"):
        check_out_dir(tmp_path / "new" / ".." / "new" / "out", force=True, kind="report")   # another spelling
    with Staging(first) as st:
        _stage(st)
        st.commit()
    assert not leftovers(tmp_path)   # the lock is gone with the run
    second = check_out_dir(out, force=False, kind="compare")   # the next run may go
    with Staging(second):
        pass
    assert not leftovers(tmp_path)


def test_a_stale_lock_left_by_a_killed_run_does_not_block(tmp_path: Path) -> None:
    from nsys_llm_explainer.output.lock import lock_name

    out = tmp_path / "out"
    (tmp_path / lock_name(out)).write_bytes(b"")   # what SIGKILL leaves: the file, no holder
    with Staging(check_out_dir(out, force=False)) as st:
        _stage(st)
        st.commit()
    assert sorted(os.listdir(tmp_path)) == ["out"]


@pytest.mark.slow   # two command lines in subprocesses
def test_compare_and_cluster_into_one_new_out_one_wins(tmp_path: Path, trace: Path) -> None:
    other = tmp_path / "in" / "r1.sqlite"
    shutil.copyfile(trace, other)
    out = tmp_path / "out"
    a = subprocess.Popen([sys.executable, "-m", "nsys_llm_explainer", "compare", str(trace), str(other), "--out",
                          str(out), "--quiet"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=pause_env(tmp_path, staged=3.0))
    wait_until_staged(a, tmp_path)
    b = subprocess.run([sys.executable, "-m", "nsys_llm_explainer", str(trace), str(other), "--out", str(out),
                        "--quiet", "--jobs", "1"], capture_output=True, text=True, timeout=120)
    _, err = a.communicate(timeout=120)
    assert a.returncode == 0, err
    assert b.returncode == 2 and one_line(b.stderr).startswith(
        f"{PROG}: error: --out {out} is being written by another run of this tool"), b.stderr
    listed = json.loads((out / MANIFEST).read_text())["files"]
    on_disk = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file() and p.name != MANIFEST)
    assert listed == on_disk and "compare.md" in listed and "cluster.md" not in listed
    assert not leftovers(tmp_path)


# ------------------------------------------------------------------------------------------- failures, permissions
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


@pytest.mark.slow   # the command line in a subprocess
@pytest.mark.parametrize("mask", ["0777", "0200", "0100"])
def test_a_umask_that_locks_the_owner_out_is_one_line_and_leaves_nothing(tmp_path: Path, trace: Path,
                                                                         mask: str) -> None:
    out = tmp_path / "out"
    src = Path(__file__).resolve().parents[2] / "src"
    env = dict(os.environ, PYTHONPATH=str(src))
    env.pop("NSYS_LLM_EXPLAIN_DEBUG", None)
    proc = subprocess.run(["bash", "-c", f'umask {mask}; exec "$0" -m nsys_llm_explainer "$1" --out "$2" --quiet',
                           sys.executable, str(trace), str(out)], capture_output=True, text=True, env=env,
                          timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert one_line(proc.stderr) == (f"{PROG}: error: --out {out}: the umask {int(mask, 8):04o} takes the owner's "
                                     "write or search permission from the directories this tool creates; run with "
                                     "a umask such as 0022 (`umask 022`)")
    assert sorted(os.listdir(tmp_path)) == ["in"]


def test_staging_that_lost_its_permissions_is_still_removed(tmp_path: Path) -> None:
    """A staging tree whose directories have mode 000 (what a umask of 0777 makes, or a chmod): listed and removed
    on the way out (as a user; root reads any mode, so there the test shows the tree removed all the same)."""
    od = check_out_dir(tmp_path / "out", force=False)
    with pytest.raises(OutputError, match="Permission denied"):
        with Staging(od) as st:
            assert st.tmp is not None
            (st.tmp / "tables" / "deep").mkdir(parents=True)
            (st.tmp / "tables" / "deep" / "x.csv").write_text("x")
            os.chmod(st.tmp / "tables" / "deep", 0)
            os.chmod(st.tmp / "tables", 0)
            os.chmod(st.tmp, 0)
            raise OSError(13, "Permission denied")
    assert sorted(os.listdir(tmp_path)) == []
