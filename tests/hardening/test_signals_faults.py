"""Signals, streams and faults end in their exit code and one clear line, in bounded time, never a traceback
(issues 9, 17 and 24; docs/SECURITY.md "Faults, streams, signals").

* a signal while the program starts, or once the output is staged (report, comparison; with or without a previous
  output) → 130 / 143 / 129, one line, the previous output kept or none written, nothing left behind;
* a closed (``>&-``), full (``/dev/full``) or closed-pipe stdout / stderr never changes the exit code of a run whose
  output was written (nor 2 into 1); the schema, whose output *is* stdout, says so in one line (exit 2);
* the ``--fail-on-regression`` gate fails closed: a capture that cannot be compared → exit 4 naming it, unless
  ``--allow-incomparable``;
* a cluster worker process killed (SIGKILL, as the out-of-memory killer does) → exit 2 and one line naming the
  files not analysed; an error in one file or an interrupt stops the pool at once (queued files cancelled);
* Dask: a silent, garbage-speaking or unreachable scheduler, a worker lost mid-run, a scheduler lost mid-run, a
  task whose workers keep dying → one line, exit 2, within the documented timeouts (:mod:`cluster.workers`);
* out of memory anywhere (``MemoryError``, a thread that cannot start, a library that cannot be mapped, ENOMEM, an
  address-space limit), a declared dependency that cannot be imported, a deleted working directory → one line.

Worker faults are planted with a test-only ``sitecustomize`` (:data:`HOOK`) that the worker processes load from
``PYTHONPATH``: it wraps ``analyze_file`` to record the worker's pid, kill itself (SIGKILL) on a file whose name
holds ``NLE_TEST_KILL``, or sleep on one whose name holds ``NLE_TEST_SLOW``. Nothing in the package knows it.
"""

from __future__ import annotations

import gc
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Dict, List

import pytest
from conftest import built_scenario, pause_env, run_cli, wait_until_staged
from hostile import PROG, cli_env, copy_trace, digest, leftovers, one_line, one_line_of, run_subprocess
from synth import TraceBuilder
from synth.scenarios import build_cluster

import nsys_llm_explainer as nle
from nsys_llm_explainer import cli, interrupts
from nsys_llm_explainer.cli import main
from nsys_llm_explainer.comparison.gate import gate
from nsys_llm_explainer.errors import EXIT_INCOMPARABLE, EXIT_REGRESSION, InputError, Interrupted, WorkerError

ROOT = Path(__file__).resolve().parents[2]
HOOK = '''
import os
if os.environ.get("NLE_TEST_WORKER"):
    import signal
    import time

    import nsys_llm_explainer.cluster.run as _run
    import nsys_llm_explainer.cluster.summary as _summary
    import nsys_llm_explainer.cluster.workers as _workers

    _real = _summary.analyze_file

    def analyze_file(path, *args, **kwargs):
        pids = os.environ.get("NLE_TEST_PIDS")
        if pids:
            open(os.path.join(pids, str(os.getpid())), "w").close()
        kill = os.environ.get("NLE_TEST_KILL")
        if kill and kill in os.path.basename(path):
            os.kill(os.getpid(), signal.SIGKILL)
        if os.environ.get("NLE_TEST_SLOW", "") in os.path.basename(path):
            time.sleep(float(os.environ.get("NLE_TEST_SLEEP", "0")))
        return _real(path, *args, **kwargs)

    analyze_file.__module__, analyze_file.__qualname__ = _real.__module__, _real.__qualname__
    _summary.analyze_file = _run.analyze_file = _workers.analyze_file = analyze_file
'''


def build_no_gpu_work(path: Path) -> Path:
    """A capture of a crashed / empty run: a process, a thread, a GPU and NVTX steps, but not one kernel."""
    b = TraceBuilder()
    b.process(100, "python")
    g = b.thread(100, 100, name="main")
    b.gpu(id=0)
    for i in range(10):
        s = 1_000_000 + i * 200_000
        b.nvtx_push_pop(s, s + 190_000, "step", tid_g=g)
    b.write(str(path), overwrite=True)
    return path


@pytest.fixture(scope="module")
def traces(tmp_path_factory) -> Dict[str, Path]:
    d = tmp_path_factory.mktemp("faults")
    base = d / "base.sqlite"
    built_scenario("healthy", str(base))
    return {"base": base, "empty": build_no_gpu_work(d / "empty.sqlite"), "dir": d}


@pytest.fixture(scope="module")
def healthy(traces) -> Path:
    return traces["base"]


@pytest.fixture()
def trace(tmp_path: Path, small_trace: Path) -> Path:
    return copy_trace(small_trace, tmp_path)


def _err_line(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


# ------------------------------------------------------------------------------------------ signals
@pytest.mark.slow   # the command line in subprocesses
@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGHUP, 129)])
@pytest.mark.parametrize("delay", [0.1, 0.2])
def test_a_signal_while_the_program_starts_is_one_line(tmp_path, healthy, sig, code, delay) -> None:
    """From the moment the package runs, a signal is ours. Before that the interpreter itself is starting (about
    30 ms); on a machine so loaded that this takes longer than ``delay``, the signal is sent that much later."""
    t0 = time.monotonic()
    subprocess.run([sys.executable, "-c", "import nsys_llm_explainer"], env=cli_env(), check=True, timeout=60)
    delay = max(delay, 2 * (time.monotonic() - t0))
    p = subprocess.Popen([sys.executable, "-m", "nsys_llm_explainer", str(healthy), "--out", str(tmp_path / "o")],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=cli_env())
    time.sleep(delay)
    p.send_signal(sig)
    _, err = p.communicate(timeout=60)
    assert p.returncode == code, err
    assert one_line_of(err).startswith(f"{PROG}: interrupted by {sig.name}")
    assert not (tmp_path / "o").exists()


@pytest.mark.slow   # a CLI subprocess, paused once its output is staged
@pytest.mark.parametrize("command, previous, sig, code", [
    ("report", True, signal.SIGTERM, 143), ("report", True, signal.SIGHUP, 129), ("report", True, signal.SIGINT, 130),
    ("compare", True, signal.SIGTERM, 143), ("report", False, signal.SIGINT, 130)],
    ids=["report-SIGTERM", "report-SIGHUP", "report-SIGINT", "compare-SIGTERM", "new-report-SIGINT"])
def test_a_signal_after_staging_leaves_the_previous_output_or_none(tmp_path: Path, trace: Path, command: str,
                                                                   previous: bool, sig: int, code: int) -> None:
    """The signal lands once the output is staged, before the commit: its exit code and one line; the previous
    report or comparison byte-identical (none: no ``--out`` at all), no staging, lock or swapped-out output left,
    and the run's ``$TMPDIR`` empty."""
    out = tmp_path / "o"
    argv = ([str(trace)] if command == "report" else ["compare", str(trace), str(trace)]) + ["--out", str(out)]
    before = None
    if previous:
        assert cli.main(argv + ["--quiet"]) == 0
        before = digest(out)
    tmpdir = tmp_path / "tmpdir"     # $TMPDIR of the run: must be empty afterwards
    tmpdir.mkdir()
    env = dict(pause_env(tmp_path / "h", staged=30), TMPDIR=str(tmpdir))
    p = subprocess.Popen([sys.executable, "-m", "nsys_llm_explainer", *argv], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=env)
    wait_until_staged(p, tmp_path)
    p.send_signal(sig)
    _, err = p.communicate(timeout=60)
    assert p.returncode == code, err
    assert one_line(err).startswith(f"{PROG}: interrupted by {signal.Signals(sig).name}"), err
    assert (digest(out) == before) if previous else not out.exists()
    assert not leftovers(tmp_path) and not list(tmpdir.iterdir())
    assert not [x for x in tmp_path.iterdir() if x.name.startswith(".out")]


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
    # the handlers are gone and so is their signal: a later run in this process (the API) is not interrupted by it
    assert interrupts.fired() is None
    interrupts.check()


# ------------------------------------------------------------------------------------------ streams
@pytest.mark.slow   # the command line in subprocesses
@pytest.mark.parametrize("how", ["closed", "full", "pipe-closed"])
def test_closed_or_full_stdout_keeps_exit_0_of_a_written_report(tmp_path, healthy, how) -> None:
    """stdout closed in the child (``>&-``), ``/dev/full`` (ENOSPC), or a pipe whose reader went away: exit 0 and
    a whole report; nothing on stderr but progress lines (a step over a second, on a loaded machine; the closed
    pipe: no error line)."""
    out = tmp_path / "o"
    if how == "closed":
        proc = run_subprocess([str(healthy), "--out", str(out)], close=1)
        err = proc.stderr
    elif how == "full":
        with open("/dev/full", "w") as full:
            proc = run_subprocess([str(healthy), "--out", str(out)], stdout=full)
        err = proc.stderr
    else:
        p = subprocess.Popen([sys.executable, "-m", "nsys_llm_explainer", str(healthy), "--out", str(out)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=cli_env())
        assert p.stdout is not None and p.stderr is not None
        p.stdout.close()
        err = p.stderr.read()
        proc = subprocess.CompletedProcess(p.args, p.wait(timeout=300), None, err)
    assert proc.returncode == 0, err
    if how == "pipe-closed":
        assert b"error" not in err and b"Traceback" not in err, err
    else:
        assert [ln for ln in err.decode().splitlines() if not ln.startswith(f"[{PROG}] ")] == [], err
    assert json.loads((out / "report.json").read_text())["schema_version"]      # written and whole


@pytest.mark.slow   # the command line in subprocesses
def test_closed_stdout_keeps_the_gate_code(tmp_path, healthy) -> None:


    empty = build_no_gpu_work(tmp_path / "empty.sqlite")
    proc = run_subprocess(["compare", str(healthy), str(empty), "--out", str(tmp_path / "c"), "--fail-on-regression",
                           "5"], close=1)
    assert proc.returncode == 4 and proc.stderr.decode().startswith(f"{PROG}: NOT COMPARABLE, failing (exit 4)")


@pytest.mark.slow   # the command line in subprocesses
@pytest.mark.parametrize("how", ["closed", "full"])
def test_closed_or_full_stderr_keeps_exit_2_of_bad_input(tmp_path, how) -> None:
    args = [str(tmp_path / "missing.sqlite"), "--out", str(tmp_path / "o")]
    if how == "closed":
        proc = run_subprocess(args, close=2)
    else:
        with open("/dev/full", "w") as full:
            proc = run_subprocess(args, stderr=full)
    assert proc.returncode == 2


@pytest.mark.slow   # the command line in subprocesses
def test_both_streams_closed_after_a_complete_run(tmp_path, healthy) -> None:
    proc = subprocess.run([sys.executable, "-m", "nsys_llm_explainer", str(healthy), "--out", str(tmp_path / "o")],
                          preexec_fn=lambda: (os.close(1), os.close(2)), env=cli_env(), timeout=120)
    assert proc.returncode == 0 and (tmp_path / "o" / "report.md").exists()


@pytest.mark.slow   # the command line in subprocesses
def test_schema_on_a_full_or_closed_stdout_is_one_line_exit_2() -> None:
    with open("/dev/full", "w") as full:
        proc = run_subprocess(["schema"], stdout=full)
    assert proc.returncode == 2
    assert one_line_of(proc.stderr) == (f"{PROG}: error: cannot write the schema to stdout: [Errno 28] No space left "
                                      "on device")
    proc = run_subprocess(["schema"], close=1)
    assert proc.returncode == 2
    assert one_line_of(proc.stderr) == f"{PROG}: error: cannot write the schema: stdout is closed"


@pytest.mark.slow   # a CLI subprocess
def test_ascii_only_stdout(tmp_path: Path, trace: Path) -> None:
    proc = run_cli(str(trace), "--out", str(tmp_path / "o"), env_extra={"PYTHONIOENCODING": "ascii", "LANG": "C"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.isascii() and "verdict:" in proc.stdout


@pytest.mark.slow   # pauses 1.2 s per pipeline step
def test_progress_on_stderr_for_slow_steps(tmp_path, demo_trace):
    proc = run_cli(str(demo_trace), "--out", str(tmp_path / "o"), env_extra=pause_env(tmp_path / "h", step=1.2),
                   timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert "[nsys-llm-explain]" in proc.stderr and "elapsed" in proc.stderr
    assert "verdict:" in proc.stdout and "GPU busy" in proc.stdout and "first thing to do:" in proc.stdout
    quiet = run_cli(str(demo_trace), "--out", str(tmp_path / "q"), "--quiet")
    assert quiet.returncode == 0 and quiet.stdout == "" and quiet.stderr == ""


# ------------------------------------------------------------------------------------------ the gate
def test_gate_fails_closed_when_new_has_no_gpu_work(traces, tmp_path, capsys) -> None:
    argv = ["compare", str(traces["base"]), str(traces["empty"]), "--out", str(tmp_path / "c"), "--quiet",
            "--fail-on-regression", "5"]
    assert main(argv) == EXIT_INCOMPARABLE == 4
    out, err = capsys.readouterr()
    assert out == ""   # the failing gate's line is on stderr, also under --quiet
    # a trace without kernels keeps its whole capture (nothing to judge a steady window by): named so
    assert err.startswith(f"{PROG}: NOT COMPARABLE, failing (exit 4): NEW empty has no GPU work (no kernel in the "
                          "whole capture) — too different to compare: no kernel ran in the whole capture of empty")
    assert err.endswith("(--allow-incomparable lets it pass)\n") and err.count("\n") == 1
    assert (tmp_path / "c" / "compare.json").exists()        # the comparison itself is still written
    # the explicit opt-out: exit 0, and the line says the pair was not gated and why
    assert main(argv + ["--allow-incomparable"]) == 0
    out, _ = capsys.readouterr()
    assert out.startswith(f"{PROG}: not gated (too different to compare: no kernel ran in the whole capture of "
                          "empty") and out.count("\n") == 1


def test_gate_names_base_when_base_is_the_empty_capture(traces) -> None:
    res = nle.compare([str(traces["empty"]), str(traces["base"])])
    lines, code = gate(res, 5.0)
    assert code == EXIT_INCOMPARABLE
    assert lines[0].startswith("NOT COMPARABLE, failing (exit 4): BASE empty has no GPU work")
    lines, code = gate(res, 5.0, allow_incomparable=True)
    assert code == 0 and lines[0].startswith("not gated (too different to compare: ")


@pytest.mark.slow   # three analyses
def test_gate_regression_wins_over_a_pair_too_short(tmp_path) -> None:
    from test_compare import MS, decode_loop

    base = decode_loop(tmp_path / "base.sqlite")
    slow = decode_loop(tmp_path / "slow.sqlite", host_extra=2 * MS)
    short = decode_loop(tmp_path / "short.sqlite", steps=5)
    res = nle.compare([str(base), str(slow), str(short)])
    lines, code = gate(res, 5.0)
    assert code == EXIT_REGRESSION
    assert lines[0].startswith("REGRESSION: median step period: BASE base ")
    assert lines[1].startswith("NOT COMPARABLE, failing (exit 4): NEW short is too short (4 step periods < 10; the "
                               "steady window 3.086 ms < 20.000 ms) — too short to compare: short has 4 step periods "
                               "(< 10); the steady window of short is 3.086 ms (< 20.000 ms)")


# ------------------------------------------------------------------------------------------ local pool
def _hooked_env(tmp_path: Path, **extra: str) -> Dict[str, str]:
    hook = tmp_path / "hook"
    hook.mkdir(exist_ok=True)
    (hook / "sitecustomize.py").write_text(HOOK)
    env = dict(os.environ, NLE_TEST_WORKER="1", **extra)
    env["PYTHONPATH"] = os.pathsep.join([str(hook), str(ROOT / "src"), env.get("PYTHONPATH", "")])
    env.pop("NSYS_LLM_EXPLAIN_DEBUG", None)
    return env


def _copies(src: Path, d: Path, names: List[str]) -> List[str]:
    d.mkdir(parents=True, exist_ok=True)
    for n in names:
        shutil.copyfile(src, d / n)
    return [str(d / n) for n in names]


def _cli(args: List[str], env: Dict[str, str], timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "nsys_llm_explainer", *args], capture_output=True, text=True,
                          env=env, timeout=timeout)


@pytest.mark.slow   # worker processes
def test_killed_pool_worker_is_one_line_naming_the_files(tmp_path, traces) -> None:
    files = _copies(traces["base"], tmp_path / "in", ["a.sqlite", "KILLME.sqlite", "c.sqlite"])
    t0 = time.monotonic()
    proc = _cli([*files, "--jobs", "2", "--out", str(tmp_path / "o"), "--quiet"],
                _hooked_env(tmp_path, NLE_TEST_KILL="KILLME"), timeout=120)
    assert proc.returncode == 2, proc.stderr
    line = _err_line(proc.stderr)
    assert line.startswith(f"{PROG}: error: a worker process died before it finished (killed by a signal, as the "
                           "out-of-memory killer does); not analysed: ")
    assert files[1] in line and "BrokenProcessPool" not in line
    assert not (tmp_path / "o").exists() and time.monotonic() - t0 < 60


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as fh:
            return "\tZ" not in fh.read()      # a zombie waiting for its reaper is gone
    except FileNotFoundError:
        return False


@pytest.mark.slow   # worker processes (the pool's, or a local Dask cluster's) that sleep until stopped
@pytest.mark.parametrize("scheduler, sig, group, code", [
    ("pool", signal.SIGTERM, False, 143), ("pool", signal.SIGINT, True, 130), ("pool", signal.SIGHUP, False, 129),
    ("dask", signal.SIGTERM, False, 143), ("dask", signal.SIGINT, False, 130)],
    ids=["pool-SIGTERM", "pool-SIGINT-group", "pool-SIGHUP", "dask-SIGTERM", "dask-SIGINT"])
def test_interrupt_in_cluster_mode_stops_within_a_second(tmp_path, traces, scheduler, sig, group, code) -> None:
    """The process pool: four files, two workers analysing (each sleeps 60 s first), two queued; a local Dask
    cluster (``--scheduler local``): three files on two workers. A signal to the command (or Ctrl-C to the whole
    process group) ends it within about a second: queued work cancelled, the worker processes gone, one line."""
    if scheduler == "dask":
        _need_dask()
    names = ["a.sqlite", "b.sqlite", "c.sqlite"] + (["d.sqlite"] if scheduler == "pool" else [])
    _interrupt_stops_the_workers(tmp_path, traces, names, ["--scheduler", "local"] if scheduler == "dask" else [],
                                 sig, group, code)


def _interrupt_stops_the_workers(tmp_path: Path, traces: Dict[str, Path], names: List[str], args: List[str],
                                 sig: int, group: bool, code: int) -> None:
    """Run the files on two workers (each file sleeps 60 s first), signal the command (``group``: its whole process
    group) once both workers are busy: it must end within about a second (one line, ``code``), the workers gone,
    no output."""
    files = _copies(traces["base"], tmp_path / "in", names)
    pids = tmp_path / "pids"
    pids.mkdir()
    env = _hooked_env(tmp_path, NLE_TEST_SLEEP="60", NLE_TEST_PIDS=str(pids))
    p = subprocess.Popen([sys.executable, "-m", "nsys_llm_explainer", *files, *args, "--jobs", "2", "--out",
                          str(tmp_path / "o"), "--quiet"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                         start_new_session=True)
    try:
        t0 = time.monotonic()
        while len(list(pids.iterdir())) < 2 and time.monotonic() - t0 < 60:
            time.sleep(0.05)
        workers = [int(x.name) for x in pids.iterdir()]
        assert len(workers) == 2
        t1 = time.monotonic()
        os.killpg(p.pid, sig) if group else p.send_signal(sig)
        _, err = p.communicate(timeout=30)
        took = time.monotonic() - t1
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == code, err
    assert took < 1.5, took                                   # about a second at most (0.1 s here)
    assert _err_line(err.decode()) == f"{PROG}: interrupted by {signal.Signals(sig).name}; no output was written"
    deadline = time.monotonic() + 2
    while any(_alive(w) for w in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_alive(w) for w in workers)
    assert not (tmp_path / "o").exists()


@pytest.mark.slow   # worker processes
def test_an_error_in_one_file_does_not_wait_for_the_others(tmp_path, traces) -> None:
    files = _copies(traces["base"], tmp_path / "in", ["slow.sqlite"])
    bad = tmp_path / "in" / "bad.sqlite"
    bad.write_bytes(b"this is not a database")
    t0 = time.monotonic()
    proc = _cli([*files, str(bad), "--jobs", "2", "--out", str(tmp_path / "o"), "--quiet"],
                _hooked_env(tmp_path, NLE_TEST_SLOW="slow", NLE_TEST_SLEEP="60"), timeout=120)
    assert proc.returncode == 2 and "bad.sqlite is not an SQLite database" in _err_line(proc.stderr)
    assert time.monotonic() - t0 < 30                          # not the 60 s the other file sleeps


# ------------------------------------------------------------------------------------------ Dask
def _need_dask() -> None:
    try:
        import dask.distributed  # noqa: F401
    except ImportError:
        pytest.skip("DASK NOT INSTALLED: the Dask fault paths are untested; pip install 'nsys-llm-explainer[dask]' "
                    "(or '.[test,dask]') to run them")


class _FakeScheduler:
    """A TCP server that accepts and then says nothing (``silent``) or sends bytes that are not Dask's."""

    def __init__(self, garbage: bool) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.address = f"tcp://127.0.0.1:{self.sock.getsockname()[1]}"
        self.conns: List[socket.socket] = []
        self.garbage = garbage
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(c)
            if self.garbage:
                c.sendall(b"\xff" * 64)

    def close(self) -> None:
        for c in self.conns:
            c.close()
        self.sock.close()


@pytest.mark.slow   # Dask
@pytest.mark.parametrize("garbage", [False, True], ids=["silent", "garbage-speaking"])
def test_a_scheduler_that_does_not_speak_dask_is_one_error(monkeypatch, traces, garbage: bool) -> None:
    """A scheduler that accepts and says nothing: ``WorkerError`` after the connect bound (2 s here); one that sends
    bytes that are not Dask's: ``InputError`` naming it. Both within 10 s."""
    _need_dask()
    from nsys_llm_explainer.cluster import workers

    monkeypatch.setattr(workers, "DASK_CONNECT_TIMEOUT_S", 2.0)
    fake = _FakeScheduler(garbage=garbage)
    try:
        t0 = time.monotonic()
        with pytest.raises(InputError if garbage else WorkerError) as ei:
            nle.analyze_cluster([str(traces["base"]), str(traces["empty"])], scheduler=fake.address)
        assert time.monotonic() - t0 < 10
    finally:
        fake.close()
    if garbage:
        assert str(ei.value).startswith(f"cannot connect to the Dask scheduler {fake.address}: ")
    else:
        assert str(ei.value) == f"the Dask scheduler {fake.address} did not answer within 2 s"
        assert ei.value.exit_code == 2


@pytest.mark.slow   # Dask
def test_unreachable_scheduler_on_the_command_line(monkeypatch, tmp_path, traces, capsys) -> None:
    """The command line's one line (in this process, the connect bound shortened to 2 s from 10)."""
    _need_dask()
    from nsys_llm_explainer.cluster import workers

    monkeypatch.setattr(workers, "DASK_CONNECT_TIMEOUT_S", 2.0)
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()                                                 # nothing listens there now
    t0 = time.monotonic()
    code = main([str(traces["base"]), str(traces["empty"]), "--scheduler", f"tcp://127.0.0.1:{port}", "--out",
                 str(tmp_path / "o"), "--quiet"])
    assert code == 2
    assert _err_line(capsys.readouterr().err) == (
        f"{PROG}: error: cannot connect to the Dask scheduler tcp://127.0.0.1:{port}: OSError: Timed out trying to "
        f"connect to tcp://127.0.0.1:{port} after 2 s")
    assert time.monotonic() - t0 < 10 and not (tmp_path / "o").exists()


class _SlowCluster:
    def __init__(self, **kwargs: object) -> None:
        time.sleep(3)
        raise RuntimeError("never used")


class _BrokenCluster:
    def __init__(self, **kwargs: object) -> None:
        raise RuntimeError("Nanny failed to start.")


@pytest.mark.parametrize("cluster, message", [
    pytest.param(_SlowCluster, "the local Dask cluster (2 worker processes) did not start within 0.5 s",
                 marks=pytest.mark.slow),   # waits out the start-up limit
    (_BrokenCluster, "the local Dask cluster (2 worker processes) did not start: RuntimeError: Nanny failed to "
                     "start."),
])
def test_a_local_dask_cluster_that_does_not_start_is_one_error(monkeypatch, traces, cluster, message) -> None:
    _need_dask()
    import dask.distributed

    from nsys_llm_explainer.cluster import workers

    monkeypatch.setattr(workers, "DASK_LOCAL_START_S", 0.5)
    monkeypatch.setattr(dask.distributed, "LocalCluster", cluster)
    t0 = time.monotonic()
    with pytest.raises(WorkerError) as ei:
        nle.analyze_cluster([str(traces["base"]), str(traces["empty"])], scheduler="local", jobs=2)
    assert str(ei.value) == message and time.monotonic() - t0 < 2.5


class _DaskCluster:
    """An external ``dask scheduler`` and one ``dask worker --no-nanny`` (nothing restarts it), the worker
    loading :data:`HOOK`."""

    def __init__(self, tmp_path: Path, env: Dict[str, str]) -> None:
        sf = tmp_path / "scheduler.json"
        py = sys.executable
        self.scheduler = subprocess.Popen([py, "-m", "distributed.cli.dask_scheduler", "--scheduler-file", str(sf),
                                           "--host", "127.0.0.1", "--port", "0", "--no-dashboard"],
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        t0 = time.monotonic()
        while not sf.exists() and time.monotonic() - t0 < 60:
            time.sleep(0.1)
        time.sleep(0.2)
        self.address = json.loads(sf.read_text())["address"]
        self.worker = subprocess.Popen([py, "-m", "distributed.cli.dask_worker", "--scheduler-file", str(sf),
                                        "--no-nanny", "--nthreads", "1", "--no-dashboard"], env=env,
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        # The scheduler file can exist before the scheduler completes a handshake (on a loaded CI machine Client
        # raised a bare AssertionError): wait until a client connects and the worker has joined, retrying.
        from distributed import Client

        t0 = time.monotonic()
        while True:
            gc.collect()   # a failed attempt's Client collected inside the next one's start deadlocks distributed
            try:
                with Client(self.address, timeout="10s") as c:
                    c.wait_for_workers(1, timeout=30)
                return
            except Exception:
                if time.monotonic() - t0 > 60:
                    self.close()
                    raise
                time.sleep(0.2)

    def close(self) -> None:
        for p in (self.worker, self.scheduler):
            if p.poll() is None:
                p.kill()
            p.wait(10)


def _wait_for_pid(pids: Path) -> int:
    t0 = time.monotonic()
    while not list(pids.iterdir()) and time.monotonic() - t0 < 60:
        time.sleep(0.05)
    return int(next(pids.iterdir()).name)


@pytest.mark.slow   # a Dask scheduler and worker
def test_dask_worker_lost_mid_run_is_one_error(monkeypatch, tmp_path, traces) -> None:
    _need_dask()
    from nsys_llm_explainer.cluster import workers

    monkeypatch.setattr(workers, "DASK_NO_WORKER_S", 2.0)
    pids = tmp_path / "pids"
    pids.mkdir()
    cl = _DaskCluster(tmp_path, _hooked_env(tmp_path, NLE_TEST_SLEEP="60", NLE_TEST_PIDS=str(pids)))
    try:
        files = [str(traces["base"]), str(traces["empty"])]
        killer = threading.Thread(target=lambda: os.kill(_wait_for_pid(pids), signal.SIGKILL), daemon=True)
        killer.start()
        t0 = time.monotonic()
        with pytest.raises(WorkerError) as ei:
            nle.analyze_cluster(files, scheduler=cl.address)
        assert time.monotonic() - t0 < 40
    finally:
        cl.close()
    assert str(ei.value) == (f"no Dask worker on {cl.address} for 2 s (lost mid-run, none joined); not analysed: "
                             f"{files[0]}, {files[1]}")


@pytest.mark.slow   # a Dask scheduler and worker
def test_dask_scheduler_lost_mid_run_on_the_command_line(tmp_path, traces) -> None:
    _need_dask()
    pids = tmp_path / "pids"
    pids.mkdir()
    cl = _DaskCluster(tmp_path, _hooked_env(tmp_path, NLE_TEST_SLEEP="60", NLE_TEST_PIDS=str(pids)))
    try:
        files = [str(traces["base"]), str(traces["empty"])]
        p = subprocess.Popen([sys.executable, "-m", "nsys_llm_explainer", *files, "--scheduler", cl.address, "--out",
                              str(tmp_path / "o"), "--quiet"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
        _wait_for_pid(pids)
        t0 = time.monotonic()
        cl.scheduler.kill()
        _, err = p.communicate(timeout=60)
        took = time.monotonic() - t0
    finally:
        cl.close()
    assert p.returncode == 2, err
    assert _err_line(err) == (f"{PROG}: error: lost the connection to the Dask scheduler {cl.address}; not analysed: "
                              f"{files[0]}, {files[1]}")
    assert took < 20


@pytest.mark.slow   # a local Dask cluster whose worker dies on one file until Dask gives up
def test_dask_workers_dying_on_one_file_name_it(tmp_path, traces) -> None:
    _need_dask()
    files = _copies(traces["base"], tmp_path / "in", ["a.sqlite", "KILLME.sqlite"])
    t0 = time.monotonic()
    proc = _cli([*files, "--scheduler", "local", "--jobs", "1", "--out", str(tmp_path / "o"), "--quiet"],
                _hooked_env(tmp_path, NLE_TEST_KILL="KILLME"), timeout=180)
    assert proc.returncode == 2, proc.stderr
    line = _err_line(proc.stderr)
    assert line.startswith(f"{PROG}: error: Dask workers died repeatedly (KilledWorker after Dask's retries: the "
                           "out-of-memory killer, a crash) with ")
    assert line.split("; not analysed: ")[1].endswith(files[1])
    assert time.monotonic() - t0 < 120


# ------------------------------------------------------------------------------- out of memory, a broken environment
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


@pytest.mark.slow   # the command line under `ulimit -v`, in a subprocess
def test_the_early_address_space_refusal_on_a_full_stderr_still_exits_2(tmp_path: Path, trace: Path) -> None:
    """Too little address space to load the libraries is refused before they load; when stderr cannot take that
    line (``/dev/full``) the exit code still says so (2), never an internal error."""
    src = Path(__file__).resolve().parents[2] / "src"
    env = dict(os.environ, PYTHONPATH=str(src))
    env.pop("NSYS_LLM_EXPLAIN_DEBUG", None)
    proc = subprocess.run(["bash", "-c", 'ulimit -v 60000; exec "$@" 2>/dev/full', "-", sys.executable, "-m",
                           "nsys_llm_explainer", str(trace), "--out", str(tmp_path / "o"), "--quiet"],
                          capture_output=True, text=True, env=env, timeout=180)
    assert proc.returncode == 2, proc.returncode
    assert sorted(os.listdir(tmp_path)) == ["in"]


def _without(module: str, args: List[str]) -> subprocess.CompletedProcess:
    """The command line with ``module`` unimportable (as a missing or broken install makes it)."""
    code = (f"import sys; sys.modules[{module!r}] = None\n"
            "from nsys_llm_explainer.cli import main\n"
            f"sys.exit(main({args!r}))")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("command, module", [("cluster", "perfetto"), ("report", "regex"), ("report", "plotly"),
                                             ("compare", "regex"), ("compare", "plotly")])   # no timeline in compare
def test_a_declared_dependency_that_cannot_be_imported_is_one_line(tmp_path: Path, module: str, command: str) -> None:
    """A package the tool declares (``perfetto``, which the cluster's timeline reads the ranks' files with, user
    patterns' ``regex``, the pages' ``plotly``) missing or broken in the environment: one line naming it and how to
    repair, exit 2, nothing written — never an "internal error", and never a page silently without its charts
    (report, compare and cluster alike). The cluster's ranks: the straggler set, one rank exported with
    ``--ts-normalize`` (its clock offset is not 0, so its timeline file is read and shifted)."""
    trace = tmp_path / "t.sqlite"
    out = tmp_path / "out"
    opts = ["--out", str(out), "--quiet", "--step-marker", "nothing_matches"]
    if command == "cluster":
        build_cluster("cluster_straggler", str(tmp_path / "ranks"), normalized=(2,))
        args, kept = [str(tmp_path / "ranks"), *opts, "--jobs", "1"], ["ranks"]
    else:
        built_scenario("healthy", str(trace))
        args, kept = [str(trace), *opts], ["t.sqlite"]
        if command == "compare":
            args = ["compare", str(trace), str(trace), *opts]
    proc = _without(module, args)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and "a package it needs cannot be imported" in proc.stderr, proc.stderr
    assert module in proc.stderr and "pip install --force-reinstall nsys-llm-explainer" in proc.stderr
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == kept


def test_a_report_writes_its_timeline_without_the_perfetto_package(tmp_path: Path) -> None:
    """The single-file report encodes timeline.pftrace itself (render/perfetto_packets.py, protobuf wire bytes):
    with ``perfetto`` unimportable it still exits 0 and writes the file, which ``perfetto_trace_pb2`` reads back
    into packets (the first one clears the sequence's interned names, flag 1)."""
    from perfetto.protos.perfetto.trace import perfetto_trace_pb2  # type: ignore[import-untyped]

    trace = tmp_path / "t.sqlite"
    built_scenario("healthy", str(trace))
    proc = _without("perfetto", [str(trace), "--out", str(tmp_path / "out"), "--quiet"])
    assert proc.returncode == 0, proc.stderr
    packets = perfetto_trace_pb2.Trace.FromString((tmp_path / "out" / "timeline.pftrace").read_bytes()).packet
    assert len(packets) > 10 and packets[0].sequence_flags == 1


# ---------------------------------------------------------------------------------------- a deleted working directory
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


def test_a_local_dask_workers_shutdown_traceback_stays_off_the_terminal() -> None:
    """A ``--scheduler local`` worker imports ``cluster.dask_quiet`` first (a Dask preload). Dask's own shutdown can
    end a worker in an exception (``RuntimeError: ConnectionPool is closed`` while its cluster closes), which
    ``multiprocessing`` printed as a 30-line traceback beside the run's one error line (seen once in CI). In a
    process that imported the preload, an uncaught exception prints nothing on stderr, while a library's warning is
    still one line there."""
    code = ("import nsys_llm_explainer.cluster.dask_quiet, warnings\n"
            "warnings.warn('careful')\n"
            "raise RuntimeError('ConnectionPool is closed')\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert proc.stderr == f"{PROG}: warning: UserWarning: careful\n"
