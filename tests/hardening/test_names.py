"""Names are data (docs/SECURITY.md "Faults, streams, signals" and §2): a
trace name that is not valid UTF-8 is refused in one line (such an ``--out`` works); a ``.nsys-rep`` named like an
option reaches ``nsys export`` as an absolute path and the suggested command is shell-quoted; every parser and API
message is one inert line (ESC, OSC-8, CSI, bidi controls and line breaks shown as escapes); a library's warning is
one inert line; a file named like a subcommand changes nothing; cluster rank labels stay unique and fit a file
name. The random sweeps are ``test_fuzz_names.py`` (names inside a trace) and ``test_fuzz_paths.py`` (paths)."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hostile import PROG, cli_env, one_line_of, run_subprocess

import nsys_llm_explainer as nle
from nsys_llm_explainer import cli
from nsys_llm_explainer.cli import main
from nsys_llm_explainer.errors import InputError

OSC8 = "\x1b]8;;http://evil.example/\x07"
BAD_NAME = os.fsdecode(b"bad\xff.sqlite")          # not UTF-8: Python keeps the byte as a surrogate escape


@pytest.fixture()
def trace(small_trace: Path) -> Path:
    return small_trace


# ------------------------------------------------------------------------------------------ file names
def test_a_trace_name_that_is_not_utf8_is_refused_in_one_line(tmp_path, trace, capsys) -> None:
    bad = tmp_path / BAD_NAME
    shutil.copyfile(trace, bad)
    want = f"{PROG}: error: {tmp_path}/bad\\xff.sqlite: the file name is not valid UTF-8; rename the file (or copy " \
           "it to a UTF-8 name) and run again"
    for argv in ([str(bad)], ["compare", str(trace), str(bad)], [str(tmp_path)], [str(trace), str(bad)]):
        assert main([*argv, "--out", str(tmp_path / "o"), "--quiet"]) == 2, argv
        assert capsys.readouterr().err.splitlines() == [want], argv
        assert not (tmp_path / "o").exists()
    with pytest.raises(InputError, match="not valid UTF-8"):
        nle.analyze(os.fsencode(bad))


@pytest.mark.slow   # the command line in a subprocess
def test_a_non_utf8_out_directory_works(tmp_path, trace) -> None:
    out = os.fsencode(tmp_path) + b"/out\xfe"
    proc = subprocess.run([sys.executable, "-m", "nsys_llm_explainer", os.fsencode(trace), "--out", out, "--quiet"],
                          capture_output=True, env=cli_env(), timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert (Path(os.fsdecode(out)) / "report.md").exists()


FAKE_NSYS = """#!{python}
import json, os, shutil, sys
with open({log!r}, "w") as fh:
    json.dump(sys.argv[1:], fh)
args = sys.argv[1:]
if os.environ.get("FAKE_NSYS_FAIL"):
    sys.stderr.write("fake nsys: cannot read the report\\n")
    sys.exit(1)
shutil.copyfile(args[5], args[4])    # our stand-in .nsys-rep files are SQLite exports already
"""


@pytest.mark.slow   # the command line in subprocesses, a stand-in nsys
def test_a_report_named_like_an_option_reaches_nsys_as_an_absolute_path(tmp_path, trace) -> None:
    bin_dir, work = tmp_path / "bin", tmp_path / "work"
    bin_dir.mkdir()
    work.mkdir()
    log = tmp_path / "nsys-args.json"
    exe = bin_dir / "nsys"
    exe.write_text(FAKE_NSYS.format(python=sys.executable, log=str(log)))
    exe.chmod(0o755)
    rep = work / "-my run.nsys-rep"
    shutil.copyfile(trace, rep)
    shutil.copyfile(trace, work / "-x.nsys-rep")
    env = dict(cli_env(), PATH=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    # without `--` the parser says where such a name goes
    proc = run_subprocess(["-x.nsys-rep", "--out", "o"], env=env, cwd=work)
    assert proc.returncode == 2
    assert "a file name starting with '-' goes after '--' or as ./-x.nsys-rep" in one_line_of(proc.stderr)
    proc = run_subprocess(["--out", "o", "--quiet", "--", rep.name], env=env, cwd=work)
    assert proc.returncode == 0, proc.stderr
    args = json.loads(log.read_text())
    assert args[:4] == ["export", "--type", "sqlite", "--output"]
    assert args[5] == str(rep) and all(os.path.isabs(a) for a in args[4:])
    # a failing export: the command to run by hand is correct once the shell splits it
    proc = run_subprocess(["--out", "o2", "--", rep.name], env=dict(env, FAKE_NSYS_FAIL="1"), cwd=work)
    assert proc.returncode == 2
    line = one_line_of(proc.stderr)
    assert line.startswith(f"{PROG}: error: `nsys export` failed: fake nsys: cannot read the report; run: ")
    hint = shlex.split(line.split("; run: ")[1])
    assert hint == ["nsys", "export", "--type", "sqlite", "--output", "./-my run.sqlite", str(rep)]


def test_subcommand_words_do_not_depend_on_the_working_directory(tmp_path, trace, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    shutil.copyfile(trace, tmp_path / "compare")     # a trace named like a subcommand
    (tmp_path / "schema").mkdir()                    # and a directory
    (tmp_path / "demo").write_text("x")
    assert main(["schema"]) == 0
    assert json.loads(capsys.readouterr().out)["$schema"]
    assert main(["compare", "x.sqlite", "--out", "o"]) == 2           # read as the subcommand
    assert capsys.readouterr().err.splitlines() == [
        f"{PROG}: error: compare needs at least two traces (BASE NEW [MORE ...]), got 1"]
    assert main(["./compare", "--out", "o", "--quiet"]) == 0         # the file, named as a path
    assert json.loads((tmp_path / "o" / "report.json").read_text())["trace"]["path"].endswith("compare")


# ------------------------------------------------------------------------------------------ messages
@pytest.mark.parametrize("command", ["", "compare", "demo", "schema"])
def test_every_parser_message_is_one_inert_line(command, capsys) -> None:
    head = [command] if command else []
    rest = {"schema": [], "demo": ["--out", "o"]}.get(command, ["t.sqlite", "--out", "o"])
    where = f"{PROG} {command}: " if command else ""
    see = f"(see {PROG}{' ' + command if command else ''} --help)"
    if command != "schema":
        assert main([*head, *rest, "--top", "abc"]) == 2
        assert capsys.readouterr().err.splitlines() == [
            f"{PROG}: error: {where}argument --top: invalid int value: 'abc' {see}"]
    assert main([*head, *rest, "--bo" + OSC8 + "gus"]) == 2
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\x07" not in err
    assert err.splitlines() == [f"{PROG}: error: {where}unrecognized arguments: "
                                f"--bo\\x1b]8;;http://evil.example/\\x07gus {see}"]


@pytest.mark.parametrize("call, quoted", [
    (lambda d, t: nle.analyze(d / "two\nlines \x1b]8;;http://x\x07 \u202e.sqlite"), True),   # a missing file
    (lambda d, t: nle.analyze(t, step_marker="(\n\x1b[31m"), False),   # a bad regex (the pattern is not quoted)
    (lambda d, t: nle.analyze(t, window_nvtx="no\nsuch \x1b[2J range"), True),   # a value the trace lacks
    (lambda d, t: nle.compare([t, d / "gone\r\n\x1b[A.sqlite"]), True),
    (lambda d, t: nle.analyze_cluster([str(d / "nothing\nhere\x9b*.sqlite")]), True),
])
def test_api_errors_are_one_inert_line(tmp_path, trace, call, quoted) -> None:
    """A path or value quoted in an API error keeps no line break, ESC, OSC-8, CSI or bidi control: str(exc) is
    one line with those shown as visible escapes (as the command line shows them)."""
    with pytest.raises(InputError) as ei:
        call(tmp_path, trace)
    text = str(ei.value)
    assert "\n" not in text and "\r" not in text and "\x07" not in text
    assert not any(c in text for c in "\x1b\x9b\u202e"), text
    assert not quoted or "\\x1b" in text or "\\x9b" in text, text   # shown, not dropped


def test_a_library_warning_is_one_inert_line(monkeypatch, capsys, tmp_path, trace) -> None:
    """A Python warning raised during a run (a library's deprecation, a numeric RuntimeWarning) is one stderr line
    through the terminal neutralisation, never Python's two-line source quote; the run's outcome is unchanged."""
    import warnings

    from nsys_llm_explainer import pipeline

    real = pipeline.analyze_path

    def noisy(*args, **kwargs):
        warnings.warn("two\nlines \x1b[31m", RuntimeWarning, stacklevel=1)
        return real(*args, **kwargs)

    monkeypatch.setattr(pipeline, "analyze_path", noisy)
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        before = warnings.showwarning
        code = main([str(trace), "--out", str(tmp_path / "o"), "--quiet"])
        assert warnings.showwarning is before   # put back after the run
    err = capsys.readouterr().err
    assert code == 0 and (tmp_path / "o" / "report.md").is_file()
    assert err.splitlines() == ["nsys-llm-explain: warning: RuntimeWarning: two lines \\x1b[31m"], err


# ------------------------------------------------------------------------------------------ cluster rank labels
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


def test_cluster_whose_names_give_one_label_keeps_every_rank(tmp_path: Path, small_trace: Path, capsys) -> None:
    d = tmp_path / "in"
    d.mkdir()
    for n in ("r.sqlite", "r .sqlite", "r_2.sqlite"):
        shutil.copyfile(small_trace, d / n)
    out = tmp_path / "o"
    assert cli.main([str(d / "r.sqlite"), str(d / "r .sqlite"), str(d / "r_2.sqlite"), "--out", str(out), "--quiet",
                     "--jobs", "1"]) == 0, capsys.readouterr().err
    files = json.loads((out / "cluster.json").read_text())["files"]
    assert [(f["label"], Path(f["path"]).name) for f in files] == [("r", "r.sqlite"), ("r_2", "r .sqlite"),
                                                                   ("r_2_2", "r_2.sqlite")]
    for f in files:   # each rank's own report, naming its own file
        rep = json.loads((out / "ranks" / f["label"] / "report.json").read_text())
        assert Path(rep["trace"]["path"]).name == Path(f["path"]).name
