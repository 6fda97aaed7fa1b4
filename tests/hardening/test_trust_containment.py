"""Nothing outside the real ``--out`` is ever created, replaced or removed (issue 17, item 1): not through a
``tables/`` (or ``ranks/<label>/``) that is a symbolic link to another directory, not for a manifest entry that
leaves ``--out`` or goes through a link, not with ``--force``; staging directories are made beside the real
``--out`` and removed on every way out. Each test builds the hostile directory in ``tmp_path`` and checks the
files outside byte for byte, the exit code and the one message line."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Dict, List

import pytest

from nsys_llm_explainer import cli
from nsys_llm_explainer.errors import Interrupted, OutputError
from nsys_llm_explainer.output import MANIFEST, OLD_PREFIX, STAGING_PREFIX, Staging, check_out_dir


def snapshot(d: Path) -> Dict[str, str]:
    """Every entry under ``d`` (links not followed): file → its bytes (hex), link → its target, dir → 'dir'."""
    out: Dict[str, str] = {}
    for root, dirs, files in os.walk(d):
        for n in dirs + files:
            p = Path(root, n)
            rel = p.relative_to(d).as_posix()
            out[rel] = ("-> " + os.readlink(p) if p.is_symlink() else "dir" if p.is_dir() else p.read_bytes().hex())
    return out


def leftovers(d: Path) -> List[str]:
    return [p.name for p in d.rglob("*") if p.name.startswith((STAGING_PREFIX, OLD_PREFIX))]


def lines(err: str) -> List[str]:
    assert "Traceback" not in err, err
    return [ln for ln in err.splitlines() if ln.strip()]


@pytest.fixture()
def trace(tmp_path: Path, demo_trace: Path) -> Path:
    t = tmp_path / "in" / "r0.sqlite"
    t.parent.mkdir()
    shutil.copyfile(demo_trace, t)
    return t


@pytest.fixture()
def victim(tmp_path: Path) -> Path:
    """A directory of the user's, outside ``--out``, holding files named like ours."""
    v = tmp_path / "victim"
    v.mkdir()
    (v / "kernels.csv").write_text("precious\n")
    (v / "other.txt").write_text("keep me\n")
    (v / "empty").mkdir()
    return v


def _run(kind: str, trace: Path, out: Path, *extra: str) -> int:
    if kind == "report":
        return cli.main([str(trace), "--out", str(out), "--quiet", *extra])
    if kind == "compare":
        return cli.main(["compare", str(trace), str(trace), "--out", str(out), "--quiet", *extra])
    second = trace.parent / "r1.sqlite"
    if not second.exists():
        shutil.copyfile(trace, second)
    return cli.main([str(trace), str(second), "--out", str(out), "--quiet", "--jobs", "1", *extra])


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


def test_out_through_a_dangling_link_is_refused(tmp_path: Path, trace: Path, capsys) -> None:
    os.symlink(tmp_path / "far" / "away", tmp_path / "dangling")
    for out in (tmp_path / "dangling", tmp_path / "dangling" / "sub"):
        assert cli.main([str(trace), "--out", str(out), "--quiet"]) == 2
        (line,) = lines(capsys.readouterr().err)
        assert "is a symbolic link to a missing path" in line
    assert sorted(os.listdir(tmp_path)) == ["dangling", "in"]
