"""Issue 24, third sweep: containment and lost output, out-of-memory, API and wording. Each test reproduces one
class the hostile sweep found (it failed before the fix) and checks what docs/SECURITY.md promises: one line on
stderr, exit 2, nothing written outside ``--out``, no staging directory or lock left behind."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict, List

import pytest
from conftest import pause_env, wait_until_staged

from nsys_llm_explainer import cli
from nsys_llm_explainer.errors import OutputError
from nsys_llm_explainer.output import MANIFEST, OLD_PREFIX, STAGING_PREFIX, Staging, check_out_dir
from nsys_llm_explainer.output.lock import LOCK_PREFIX

PROG = "nsys-llm-explain"
OURS = (STAGING_PREFIX, OLD_PREFIX, LOCK_PREFIX)


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
    """Our hidden temporary entries (staging, swapped-out output, lock) anywhere under ``d``."""
    return [str(p) for p in d.rglob("*") if p.name.startswith(OURS)]


def one_line(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in err and "internal error" not in err, err
    return lines[0]


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
    (v / "report.md").write_text("the user's own report\n")
    (v / "notes.txt").write_text("keep me\n")
    return v


def _stage(st: Staging) -> None:
    assert st.tmp is not None
    (st.tmp / "tables").mkdir()
    (st.tmp / "tables" / "kernels.csv").write_text("new\n")
    (st.tmp / "report.md").write_text("# new\n")


# ------------------------------------------------------------------------------------------ 1. --out swapped
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


# ------------------------------------------------------------------------------------------ 3. two runs, one --out
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


# ------------------------------------------------------------------------------------------ 4. umask 0777
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


# ------------------------------------------------------------------------------------------ 2. rank labels
@pytest.mark.parametrize("names, labels", [
    (["r.sqlite", "r .sqlite", "r_2.sqlite"], ["r", "r_2", "r_2_2"]),
    (["r_2.sqlite", "r.sqlite", "r .sqlite"], ["r_2", "r", "r_3"]),
    (["R.sqlite", "r.sqlite", "r_2.sqlite", "R_2.sqlite"], ["R", "r_2", "r_2_2", "R_2_3"]),   # case-insensitive
    (["a b.sqlite", "a_b.sqlite", "a__b.sqlite", "a?b.sqlite"], ["a_b", "a_b_2", "a__b", "a_b_3"]),
    (["..sqlite", "_.sqlite", "trace.sqlite"], ["trace", "trace_2", "trace_3"]),
])
def test_rank_labels_are_unique_after_every_suffix(names, labels) -> None:
    from nsys_llm_explainer.cluster import make_labels

    assert make_labels([f"/d/{n}" for n in names]) == labels


def test_rank_labels_fit_a_file_name() -> None:
    from nsys_llm_explainer.cluster import make_labels

    got = make_labels(["/" + "p" * 250 + "/" + "x" * 240 + ".sqlite", "/" + "q" * 250 + "/" + "x" * 240 + ".sqlite"])
    assert got == ["p" * 120, "q" * 120]   # folder_stem, cut to LABEL_MAX


def test_cluster_whose_names_give_one_label_keeps_every_rank(tmp_path: Path, demo_trace: Path, capsys) -> None:
    d = tmp_path / "in"
    d.mkdir()
    for n in ("r.sqlite", "r .sqlite", "r_2.sqlite"):
        shutil.copyfile(demo_trace, d / n)
    out = tmp_path / "o"
    assert cli.main([str(d / "r.sqlite"), str(d / "r .sqlite"), str(d / "r_2.sqlite"), "--out", str(out), "--quiet",
                     "--jobs", "1"]) == 0, capsys.readouterr().err
    files = json.loads((out / "cluster.json").read_text())["files"]
    assert [(f["label"], Path(f["path"]).name) for f in files] == [("r", "r.sqlite"), ("r_2", "r .sqlite"),
                                                                   ("r_2_2", "r_2.sqlite")]
    for f in files:   # each rank's own report, naming its own file
        rep = json.loads((out / "ranks" / f["label"] / "report.json").read_text())
        assert Path(rep["trace"]["path"]).name == Path(f["path"]).name


# ------------------------------------------------------------------------------------------ 14. what the file is
@pytest.fixture(scope="module")
def our_outputs(tmp_path_factory, demo_trace: Path) -> Path:
    d = tmp_path_factory.mktemp("ours")
    assert cli.main([str(demo_trace), "--out", str(d / "r"), "--quiet"]) == 0
    assert cli.main(["compare", str(demo_trace), str(demo_trace), "--out", str(d / "c"), "--quiet"]) == 0
    return d


def _gz(src: Path, dst: Path) -> None:
    import gzip

    dst.write_bytes(gzip.compress(src.read_bytes()[:65536]))


def _zip(src: Path, dst: Path) -> None:
    import zipfile

    with zipfile.ZipFile(dst, "w") as z:
        z.writestr("trace.sqlite", src.read_bytes()[:65536])


@pytest.mark.parametrize("make, said", [
    (_gz, "is a gzip-compressed file; decompress it first (gunzip -k), not an SQLite export of an Nsight Systems "
          "report"),
    (_zip, "is a zip archive; extract the .sqlite export from it first (unzip), not an SQLite export of an Nsight "
           "Systems report"),
    (lambda s, d: d.write_bytes(b"\xfd7zXZ\x00" + b"\x00" * 200), "is an xz-compressed file"),
    (lambda s, d: d.write_bytes(b'[{"a": 1}]'), "is a JSON text file, not an SQLite export"),
])
def test_a_compressed_or_json_file_named_sqlite_says_what_it_is(tmp_path: Path, demo_trace: Path, capsys, make,
                                                                said) -> None:
    bad = tmp_path / "trace.sqlite"
    make(demo_trace, bad)
    assert cli.main([str(bad), "--out", str(tmp_path / "o")]) == 2
    line = one_line(capsys.readouterr().err)
    assert line.startswith(f"{PROG}: error: {bad} {said}") and "nsys export" not in line, line
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("rel, name", [("r/report.json", "report.json"), ("c/compare.json", "compare.json"),
                                       (f"r/{MANIFEST}", None)])
@pytest.mark.parametrize("as_sqlite", [False, True], ids=["json", "renamed-sqlite"])
def test_our_own_outputs_given_as_a_trace_are_named(tmp_path: Path, our_outputs: Path, capsys, rel, name,
                                                    as_sqlite) -> None:
    src = our_outputs / rel
    given = tmp_path / "given.sqlite" if as_sqlite else src
    if as_sqlite:
        shutil.copyfile(src, given)
    assert cli.main([str(given), "--out", str(tmp_path / "o")]) == 2
    line = one_line(capsys.readouterr().err)
    want = (f"is a {name} written by nsys-llm-explainer (an analysis result, not a trace); give the trace it was "
            "made from" if name else "is the manifest of an output directory of nsys-llm-explainer")
    assert line.startswith(f"{PROG}: error: {given} {want}"), line


def test_a_cluster_json_given_as_a_trace_is_named(tmp_path: Path, demo_trace: Path, capsys) -> None:
    other = tmp_path / "b.sqlite"
    shutil.copyfile(demo_trace, other)
    assert cli.main([str(demo_trace), str(other), "--out", str(tmp_path / "k"), "--quiet", "--jobs", "1"]) == 0
    capsys.readouterr()
    assert cli.main([str(tmp_path / "k" / "cluster.json"), "--out", str(tmp_path / "o")]) == 2
    assert "is a cluster.json written by nsys-llm-explainer" in one_line(capsys.readouterr().err)


# ------------------------------------------------------------------------------------------ 12. API on a report dict
@pytest.fixture(scope="module")
def report_dict(demo_trace: Path) -> dict:
    import nsys_llm_explainer as nle

    return json.loads(json.dumps(nle.analyze(str(demo_trace)).to_dict()))   # as json.load gives it


def _with(d: dict, path: tuple, value) -> dict:
    d = json.loads(json.dumps(d))
    o = d
    for k in path[:-1]:
        o = o[k]
    o[path[-1]] = value
    return d


@pytest.mark.parametrize("path, value, named", [
    (("kernels_summary", "total_kernel_ns"), 10 ** 400, "report.json kernels_summary.total_kernel_ns: an integer "
                                                        "of 401 digits is out of range (at most 2^127)"),
    (("kernels", 0, "total_ns"), -(10 ** 400), "report.json kernels[0].total_ns: an integer of 401 digits"),
    (("launch", "launch_count"), 2 ** 128, "report.json launch.launch_count: an integer of 39 digits"),
    (("window", "start_ns"), float("inf"), "report.json window.start_ns: inf is not a finite number"),
])
def test_a_number_no_result_holds_is_an_input_error_naming_the_key(report_dict: dict, path, value, named) -> None:
    import nsys_llm_explainer as nle
    from nsys_llm_explainer.errors import InputError
    from nsys_llm_explainer.report import Report

    bad = _with(report_dict, path, value)
    with pytest.raises(InputError) as ei:
        Report.from_dict(bad)
    assert str(ei.value).startswith(named), str(ei.value)
    with pytest.raises(InputError) as ei:
        nle.render_markdown(bad)
    assert str(ei.value).startswith(named), str(ei.value)   # the dict is a report.json


@pytest.mark.parametrize("key", ["findings", "warnings", "kernels", "devices"])
def test_render_markdown_of_a_malformed_dict_names_the_key(report_dict: dict, key: str) -> None:
    import nsys_llm_explainer as nle
    from nsys_llm_explainer.errors import InputError

    with pytest.raises(InputError) as ei:
        nle.render_markdown(_with(report_dict, (key,), float("nan")))   # NaN where a list belongs
    assert f"report.json {key}" in str(ei.value), str(ei.value)
    assert nle.render_markdown(report_dict).startswith("# ")   # the dict itself renders


def _paths(d, pre=(), depth=0):
    if isinstance(d, dict):
        for k, v in d.items():
            yield pre + (k,)
            if depth < 1:
                yield from _paths(v, pre + (k,), depth + 1)
    elif isinstance(d, list) and d:
        yield pre + (0,)
        if depth < 1:
            yield from _paths(d[0], pre + (0,), depth + 1)


@pytest.mark.slow   # a few hundred renders
def test_render_markdown_raises_only_input_errors_on_any_malformed_part(report_dict: dict) -> None:
    """Every key of the dict, two levels deep, replaced by a value of the wrong kind or out of range: the public
    renderer renders or raises :class:`InputError`, never a raw TypeError / OverflowError."""
    import nsys_llm_explainer as nle
    from nsys_llm_explainer.errors import InputError

    raw = []
    for path in _paths(report_dict):
        for value in (float("nan"), 10 ** 400):
            try:
                nle.render_markdown(_with(report_dict, path, value))
            except InputError:
                pass
            except Exception as exc:   # noqa: BLE001 - what the test looks for
                raw.append((path, repr(value)[:12], type(exc).__name__))
    assert raw == []


# ------------------------------------------------------------------------------------------ 13. deleted cwd
def _in_deleted_cwd(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    gone = tmp_path / "gone"
    gone.mkdir()
    src = Path(__file__).resolve().parents[2] / "src"
    env = dict(os.environ, PYTHONPATH=str(src))
    env.pop("NSYS_LLM_EXPLAIN_DEBUG", None)
    return subprocess.run(["bash", "-c", 'cd "$1" && rmdir "$1" && shift && exec "$@"', "-", str(gone),
                           sys.executable, "-m", "nsys_llm_explainer", *args], capture_output=True, text=True,
                          env=env, timeout=180)


@pytest.mark.slow   # the command line and its process pool in subprocesses
def test_a_cluster_on_the_process_pool_runs_from_a_deleted_working_directory(tmp_path: Path, trace: Path) -> None:
    other = tmp_path / "in" / "r1.sqlite"
    shutil.copyfile(trace, other)
    out = tmp_path / "o"
    proc = _in_deleted_cwd(tmp_path, str(trace), str(other), "--out", str(out), "--jobs", "2", "--quiet")
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in (out / "ranks").iterdir() if p.is_dir()) == ["r0", "r1"]
    assert (out / "ranks" / "r1" / "report.json").is_file() and not leftovers(tmp_path)


@pytest.mark.slow   # the command line in subprocesses
@pytest.mark.parametrize("args, said", [
    (["{t}", "{t1}", "--out", "o", "--jobs", "2"], "--out o cannot be used: it is a relative path and the working "
                                                   "directory no longer exists (give an absolute path)"),
    (["{t}", "r1.sqlite", "--out", "{o}", "--jobs", "2"], "r1.sqlite does not exist: it is a relative path and "
                                                          "the working directory no longer exists"),
    (["r1.sqlite", "--out", "{o}"], "r1.sqlite: it is a relative path and the working directory no longer exists"),
    (["compare", "{t}", "r1.sqlite", "--out", "{o}"], "trace not found: r1.sqlite (it is a relative path and the "
                                                       "working directory no longer exists"),
])
def test_relative_paths_from_a_deleted_working_directory_say_so(tmp_path: Path, trace: Path, args, said) -> None:
    other = tmp_path / "in" / "r1.sqlite"
    shutil.copyfile(trace, other)
    fill = {"t": str(trace), "t1": str(other), "o": str(tmp_path / "o")}
    proc = _in_deleted_cwd(tmp_path, *[a.format(**fill) for a in args])
    assert proc.returncode == 2 and one_line(proc.stderr).startswith(f"{PROG}: error: {said}"), proc.stderr
    assert sorted(os.listdir(tmp_path)) == ["in"]


# ------------------------------------------------------------------------------------------ 11. out of memory
MEMORY = f"{PROG}: error: not enough memory to analyse this trace: "


@pytest.mark.parametrize("exc, why", [
    (MemoryError(), "Python could not allocate memory (MemoryError)"),
    (RuntimeError("can't start new thread"), "a thread could not start"),
    (ImportError("libopenblas.so.0: failed to map segment from shared object"),
     "a library could not be loaded (libopenblas.so.0: failed to map segment from shared object)"),
    (OSError(12, "Cannot allocate memory"), "the system refused memory (Cannot allocate memory)"),
])
@pytest.mark.parametrize("where", ["analysis", "staging"])
def test_out_of_memory_anywhere_is_one_line_exit_2_and_no_staging(tmp_path: Path, trace: Path, monkeypatch, capsys,
                                                                  exc, why, where) -> None:
    from nsys_llm_explainer import pipeline, render

    def fail(*args, **kwargs):
        raise exc

    monkeypatch.setattr(pipeline if where == "analysis" else render, "analyze_any" if where == "analysis"
                        else "render_all", fail)
    assert cli.main([str(trace), "--out", str(tmp_path / "o")]) == 2
    assert one_line(capsys.readouterr().err) == MEMORY + why
    assert sorted(os.listdir(tmp_path)) == ["in"]


@pytest.mark.slow   # the command line under `ulimit -v`, in subprocesses
@pytest.mark.parametrize("kb", [60000, 100000, 120000, 200000, 300000])
@pytest.mark.parametrize("mode", ["single", "cluster"])
def test_an_address_space_limit_is_one_line_wherever_it_strikes(tmp_path: Path, trace: Path, kb: int,
                                                                 mode: str) -> None:
    """Limits that made numpy's import fail (a 40-line traceback), a thread fail to start, jemalloc print its own
    line, or numpy's sort crash (SIGSEGV, staging left): refused in one line before any work, or one line after."""
    src = Path(__file__).resolve().parents[2] / "src"
    env = dict(os.environ, PYTHONPATH=str(src))
    env.pop("NSYS_LLM_EXPLAIN_DEBUG", None)
    args = [str(trace)] + ([str(trace.with_name("r1.sqlite")), "--jobs", "2"] if mode == "cluster" else [])
    if mode == "cluster":
        shutil.copyfile(trace, trace.with_name("r1.sqlite"))
    proc = subprocess.run(["bash", "-c", f'ulimit -v {kb}; exec "$@"', "-", sys.executable, "-m",
                           "nsys_llm_explainer", *args, "--out", str(tmp_path / "o"), "--quiet"],
                          capture_output=True, text=True, env=env, timeout=180)
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert one_line(proc.stderr).startswith(MEMORY), proc.stderr
    assert sorted(os.listdir(tmp_path)) == ["in"]


@pytest.mark.parametrize("module", ["perfetto", "regex", "plotly"])
def test_a_declared_dependency_that_cannot_be_imported_is_one_line(tmp_path: Path, module: str) -> None:
    """A package the tool declares (the timeline file's ``perfetto``, user patterns' ``regex``, the page's ``plotly``)
    missing or broken in the environment: one line naming it and how to repair, exit 2, nothing written — never an
    "internal error"."""
    from synth import build_scenario

    trace = tmp_path / "t.sqlite"
    build_scenario("healthy", str(trace))
    out = tmp_path / "out"
    code = (f"import sys; sys.modules[{module!r}] = None\n"
            "from nsys_llm_explainer.cli import main\n"
            f"sys.exit(main([{str(trace)!r}, '--out', {str(out)!r}, '--quiet', '--step-marker', 'nothing_matches']))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and "a package it needs cannot be imported" in proc.stderr, proc.stderr
    assert module in proc.stderr and "pip install --force-reinstall nsys-llm-explainer" in proc.stderr
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["t.sqlite"]
