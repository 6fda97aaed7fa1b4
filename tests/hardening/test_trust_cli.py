"""Streams, names, signals, parser messages and the Python API's types (issue 17, item 7; docs/SECURITY.md
"Faults, streams, signals"): each hostile situation ends in its exit code and one clear line, never a traceback.

* a closed (``>&-``) or full (``/dev/full``: ENOSPC) stdout / stderr never changes the exit code of a run whose
  output was written (nor 2 into 1); the schema, whose output *is* stdout, says so in one line (exit 2);
* a trace name that is not valid UTF-8 is refused in one line (exit 2); such an ``--out`` works;
* a ``.nsys-rep`` whose name starts with ``-`` reaches ``nsys export`` as an absolute path, and the command the
  message suggests is shell-quoted and correct;
* every parser message (main, compare, demo, schema) is one inert line (``--top abc``; an option with ESC / OSC-8);
* a file named like a subcommand in the working directory changes nothing (``./compare`` names the file);
* SIGINT / SIGTERM / SIGHUP while the program starts (0.1 s, 0.2 s) → 130 / 143 / 129 and one line;
* the API says which argument has the wrong type (:class:`errors.InputError` / :class:`errors.OptionError`).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional

import pytest
from synth import build_scenario

import nsys_llm_explainer as nle
from nsys_llm_explainer.cli import main
from nsys_llm_explainer.errors import InputError, OptionError

PROG = "nsys-llm-explain"
OSC8 = "\x1b]8;;http://evil.example/\x07"
BAD_NAME = os.fsdecode(b"bad\xff.sqlite")          # not UTF-8: Python keeps the byte as a surrogate escape


@pytest.fixture(scope="module")
def trace(tmp_path_factory) -> Path:
    p = tmp_path_factory.mktemp("cli") / "t.sqlite"
    build_scenario("healthy", str(p))
    return p


def _env() -> Dict[str, str]:
    env = dict(os.environ)
    env.pop("NSYS_LLM_EXPLAIN_DEBUG", None)
    return env


def _run(args: List[str], stdout: object = subprocess.PIPE, stderr: object = subprocess.PIPE,
         close: Optional[int] = None, env: Optional[Dict[str, str]] = None, cwd: Optional[Path] = None,
         timeout: float = 120) -> subprocess.CompletedProcess:
    """The command line in a subprocess; ``close``: a descriptor (1, 2) closed in the child, as ``>&-`` does."""
    return subprocess.run([sys.executable, "-m", "nsys_llm_explainer", *args], stdout=stdout, stderr=stderr,
                          preexec_fn=(lambda: os.close(close)) if close is not None else None, env=env or _env(),
                          cwd=cwd, timeout=timeout)


def _one_line(err: bytes) -> str:
    text = err.decode("utf-8", "replace")
    lines = [ln for ln in text.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in text, text
    return lines[0]


# ------------------------------------------------------------------------------------------ streams
@pytest.mark.slow   # the command line in subprocesses
@pytest.mark.parametrize("how", ["closed", "full"])
def test_closed_or_full_stdout_keeps_exit_0_of_a_written_report(tmp_path, trace, how) -> None:
    out = tmp_path / "o"
    if how == "closed":
        proc = _run([str(trace), "--out", str(out)], close=1)
    else:
        with open("/dev/full", "w") as full:
            proc = _run([str(trace), "--out", str(out)], stdout=full)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == b""
    assert json.loads((out / "report.json").read_text())["schema_version"]      # written and whole


@pytest.mark.slow   # the command line in subprocesses
def test_closed_stdout_keeps_the_gate_code(tmp_path, trace) -> None:
    from test_trust_faults import build_no_gpu_work

    empty = build_no_gpu_work(tmp_path / "empty.sqlite")
    proc = _run(["compare", str(trace), str(empty), "--out", str(tmp_path / "c"), "--fail-on-regression", "5"],
                close=1)
    assert proc.returncode == 4 and proc.stderr.decode().startswith(f"{PROG}: NOT COMPARABLE, failing (exit 4)")


@pytest.mark.slow   # the command line in subprocesses
@pytest.mark.parametrize("how", ["closed", "full"])
def test_closed_or_full_stderr_keeps_exit_2_of_bad_input(tmp_path, how) -> None:
    args = [str(tmp_path / "missing.sqlite"), "--out", str(tmp_path / "o")]
    if how == "closed":
        proc = _run(args, close=2)
    else:
        with open("/dev/full", "w") as full:
            proc = _run(args, stderr=full)
    assert proc.returncode == 2


@pytest.mark.slow   # the command line in subprocesses
def test_both_streams_closed_after_a_complete_run(tmp_path, trace) -> None:
    proc = subprocess.run([sys.executable, "-m", "nsys_llm_explainer", str(trace), "--out", str(tmp_path / "o")],
                          preexec_fn=lambda: (os.close(1), os.close(2)), env=_env(), timeout=120)
    assert proc.returncode == 0 and (tmp_path / "o" / "report.md").exists()


@pytest.mark.slow   # the command line in subprocesses
def test_schema_on_a_full_or_closed_stdout_is_one_line_exit_2() -> None:
    with open("/dev/full", "w") as full:
        proc = _run(["schema"], stdout=full)
    assert proc.returncode == 2
    assert _one_line(proc.stderr) == (f"{PROG}: error: cannot write the schema to stdout: [Errno 28] No space left "
                                      "on device")
    proc = _run(["schema"], close=1)
    assert proc.returncode == 2
    assert _one_line(proc.stderr) == f"{PROG}: error: cannot write the schema: stdout is closed"


# ------------------------------------------------------------------------------------------ names
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
                          capture_output=True, env=_env(), timeout=120)
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
    env = dict(_env(), PATH=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    # without `--` the parser says where such a name goes
    proc = _run(["-x.nsys-rep", "--out", "o"], env=env, cwd=work)
    assert proc.returncode == 2
    assert "a file name starting with '-' goes after '--' or as ./-x.nsys-rep" in _one_line(proc.stderr)
    proc = _run(["--out", "o", "--quiet", "--", rep.name], env=env, cwd=work)
    assert proc.returncode == 0, proc.stderr
    args = json.loads(log.read_text())
    assert args[:4] == ["export", "--type", "sqlite", "--output"]
    assert args[5] == str(rep) and all(os.path.isabs(a) for a in args[4:])
    # a failing export: the command to run by hand is correct once the shell splits it
    proc = _run(["--out", "o2", "--", rep.name], env=dict(env, FAKE_NSYS_FAIL="1"), cwd=work)
    assert proc.returncode == 2
    line = _one_line(proc.stderr)
    assert line.startswith(f"{PROG}: error: `nsys export` failed: fake nsys: cannot read the report; run: ")
    hint = shlex.split(line.split("; run: ")[1])
    assert hint == ["nsys", "export", "--type", "sqlite", "--output", "./-my run.sqlite", str(rep)]


# ------------------------------------------------------------------------------------------ parser messages
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


# ------------------------------------------------------------------------------------------ signals at start-up
@pytest.mark.slow   # the command line in subprocesses
@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGHUP, 129)])
@pytest.mark.parametrize("delay", [0.1, 0.2])
def test_a_signal_while_the_program_starts_is_one_line(tmp_path, trace, sig, code, delay) -> None:
    """From the moment the package runs, a signal is ours. Before that the interpreter itself is starting (about
    30 ms); on a machine so loaded that this takes longer than ``delay``, the signal is sent that much later."""
    t0 = time.monotonic()
    subprocess.run([sys.executable, "-c", "import nsys_llm_explainer"], env=_env(), check=True, timeout=60)
    delay = max(delay, 2 * (time.monotonic() - t0))
    p = subprocess.Popen([sys.executable, "-m", "nsys_llm_explainer", str(trace), "--out", str(tmp_path / "o")],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env())
    time.sleep(delay)
    p.send_signal(sig)
    _, err = p.communicate(timeout=60)
    assert p.returncode == code, err
    assert _one_line(err).startswith(f"{PROG}: interrupted by {sig.name}")
    assert not (tmp_path / "o").exists()


# ------------------------------------------------------------------------------------------ the Python API
@pytest.mark.parametrize("call, error, message", [
    (lambda: nle.compare("x.sqlite"), InputError,
     "paths must be a list of trace paths (BASE first, then each NEW), got the str 'x.sqlite'; e.g. compare([BASE, "
     "NEW])"),
    (lambda: nle.compare([1, 2]), InputError, "paths[0] must be a file path (str, bytes or os.PathLike), got int 1"),
    (lambda: nle.compare(5), InputError, "paths must be a list of trace paths, got int"),
    (lambda: nle.analyze_cluster([]), InputError,
     "paths is empty: give at least one trace file, directory or glob pattern"),
    (lambda: nle.analyze_cluster("t.sqlite", jobs=1.5), OptionError, "jobs must be an integer, got 1.5"),
    (lambda: nle.analyze_cluster("t.sqlite", jobs="2"), OptionError, "jobs must be an integer, got '2'"),
    (lambda: nle.analyze_cluster("t.sqlite", scheduler=5), InputError,
     "scheduler must be an address string (or 'local'), got int"),
    (lambda: nle.analyze(123), InputError, "path must be a file path (str, bytes or os.PathLike), got int 123"),
    (lambda: nle.analyze(None), InputError, "path must be a file path (str, bytes or os.PathLike), got NoneType"),
    (lambda: nle.analyze("t.sqlite", workers=1.5), OptionError, "workers must be an integer, got 1.5"),
    (lambda: nle.render_markdown(5), InputError, "report must be a Report or its to_dict() dict, got int"),
])
def test_the_api_names_the_argument_of_the_wrong_type(call, error, message) -> None:
    with pytest.raises(error) as ei:
        call()
    assert str(ei.value) == message


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


def test_the_api_takes_bytes_and_pathlike_paths(trace) -> None:
    a = nle.analyze(os.fsencode(trace))
    b = nle.analyze(trace)
    assert a.to_dict()["trace"]["path"] == b.to_dict()["trace"]["path"] == str(trace)


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
