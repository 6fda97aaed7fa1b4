"""Shared test plumbing: the one definition of the real-trace directory, and what happens when it is missing.

The real Nsight Systems exports live in ``../shared/traces`` (beside the repository; set
``NSYS_LLM_EXPLAINER_SHARED=/path/to/shared`` to use another copy). Tests that need them never skip:

- with ``CI`` set (``CI=true``, as CI services and ``.ci/run`` set it) and the directory missing, the session
  stops before running anything, with one line naming the path, and pytest exits with status 4;
- locally, every test that needs the traces fails (an error in its set-up, naming the path) and the terminal
  summary ends with a loud banner, so a run without the data is never green.
"""

from __future__ import annotations

import copy
import csv
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: the test groups, one folder each, by what they test (tests/README.md); their modules import helpers of one
#: another (``from test_html import …``) and the shared ones here (``conftest``, ``oracles``, ``reference_model``)
GROUPS = ("analyses", "findings", "render", "cli", "hardening", "oracle", "structure")
for _group in GROUPS:
    _dir = str(Path(__file__).resolve().parent / _group)
    if _dir not in sys.path:
        sys.path.insert(0, _dir)
#: environment variable that points the tests at another ``shared`` directory (holding ``traces/``)
SHARED_ENV = "NSYS_LLM_EXPLAINER_SHARED"
SHARED = Path(os.environ[SHARED_ENV]).resolve() if os.environ.get(SHARED_ENV) else ROOT.parent / "shared"
SHARED_TRACES = SHARED / "traces"
#: stands in for the real traces in parametrizations when they are missing: its tests then fail in set-up
MISSING_TRACE = SHARED_TRACES / "MISSING" / "trace.sqlite"
MISSING_MESSAGE = (f"real traces missing: {SHARED_TRACES} is not a directory (put ../shared beside the "
                   f"repository or set {SHARED_ENV}=/path/to/shared); the oracle tests need them")


def in_ci() -> bool:
    """True when the ``CI`` environment variable is set to anything but '', 0, false or no."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def traces_present() -> bool:
    """True when the real-trace directory exists."""
    return SHARED_TRACES.is_dir()


def real_traces() -> List[Path]:
    """``trace.sqlite`` of every real export, sorted by directory name; ``[MISSING_TRACE]`` when the directory
    is missing (or empty), so that a parametrization over it yields one failing test instead of none."""
    found = sorted(SHARED_TRACES.glob("*/trace.sqlite")) if traces_present() else []
    return found or [MISSING_TRACE]


def real_trace(name: str) -> Path:
    """``trace.sqlite`` of the real export in directory ``name`` (existence is checked by the test)."""
    return SHARED_TRACES / name / "trace.sqlite"


def trace_id(path: Path) -> str:
    """Test id of a real trace: its directory name."""
    return path.parent.name


def require_traces() -> Path:
    """The real-trace directory; fails the calling test with one clear line when it is missing."""
    if not traces_present():
        pytest.fail(MISSING_MESSAGE, pytrace=False)
    return SHARED_TRACES


@pytest.fixture(scope="session")
def shared_traces() -> Path:
    """The real-trace directory (``../shared/traces``); the test errors when it is missing."""
    return require_traces()


_REAL_REPORTS: dict = {}


def real_report(trace: Path) -> Any:
    """The default-options :class:`report.Report` of a real trace, analysed once per test session (a Report is
    immutable; many test files read the same 14 traces)."""
    key = str(Path(trace).resolve())
    if key not in _REAL_REPORTS:
        from nsys_llm_explainer.pipeline import analyze_path

        _REAL_REPORTS[key] = analyze_path(str(trace))
    return _REAL_REPORTS[key]


def real_report_dict(trace: Path) -> dict:
    """``real_report(trace).to_dict()``, once per session (callers must not modify it)."""
    key = "dict:" + str(Path(trace).resolve())
    if key not in _REAL_REPORTS:
        _REAL_REPORTS[key] = real_report(trace).to_dict()
    return _REAL_REPORTS[key]


def as_report(x: Any) -> Any:
    """The typed :class:`report.Report` renderers take: ``x`` itself, or ``Report.from_dict(x)`` for a
    ``report.json`` dict (e.g. one a test edited)."""
    from nsys_llm_explainer.report import Report

    return x if isinstance(x, Report) else Report.from_dict(x)


def empty_report(tmp_path: Path) -> Any:
    """The report of an export with one process and one CUDA call and nothing else (no kernel, copy, NVTX)."""
    from synth import TraceBuilder

    from nsys_llm_explainer.pipeline import analyze_path

    b = TraceBuilder()
    b.process(1)
    b.runtime(0, 10, tid_g=b.thread(1, 1), name="cudaFree_v3020")
    return analyze_path(b.write(str(Path(tmp_path) / "empty.sqlite")))


def scenario_report(name: str, tmp_path_factory: Any) -> Any:
    """``(facts, path, report)`` of a built-in scenario (default seed) and its default-options
    :class:`report.Report`, built and analysed once per test session (callers must not modify them)."""
    key = "scenario:" + name
    if key not in _REAL_REPORTS:
        from nsys_llm_explainer.pipeline import analyze_path

        p = tmp_path_factory.getbasetemp() / "scenario_reports" / f"{name}.sqlite"
        p.parent.mkdir(exist_ok=True)
        facts = built_scenario(name, p)
        _REAL_REPORTS[key] = (facts, p, analyze_path(str(p)))
    return _REAL_REPORTS[key]


#: (name, seed, flavor) → (the scenario's export, its planted facts), built once per test process
_BUILT: Dict[Tuple[str, int, Optional[str]], Tuple[Path, Dict[str, Any]]] = {}
_BUILT_DIR: Optional[str] = None


def built_scenario(name: str, path: Any, seed: int = 0, flavor: Optional[str] = None) -> Dict[str, Any]:
    """``build_scenario(name, path, seed, flavor)`` for tests of the tool rather than of the generator: each
    scenario is generated once per test process and copied to ``path`` (the generator is deterministic and writes
    the same bytes whatever the path: generator/test_builder.py); returns a fresh copy of its planted facts."""
    global _BUILT_DIR
    key = (name, seed, flavor)
    if key not in _BUILT:
        from synth import build_scenario

        if _BUILT_DIR is None:
            _BUILT_DIR = tempfile.mkdtemp(prefix="nle-tests-scenarios-")
        src = Path(_BUILT_DIR) / f"{len(_BUILT)}-{name}.sqlite"
        _BUILT[key] = (src, build_scenario(name, str(src), seed=seed, flavor=flavor))
    src, facts = _BUILT[key]
    shutil.copyfile(src, path)
    return copy.deepcopy(facts)


def nccl_of(model: Any) -> Any:
    """The NCCL analysis of a built model, run through the analysis graph with what it reads besides the model (its
    devices' captured time, the denominator of the waiting that matters)."""
    from nsys_llm_explainer.graph import STEPS
    from nsys_llm_explainer.options import Options
    from nsys_llm_explainer.runner import run_graph
    return run_graph(STEPS, {"model": model, "options": Options(), "display_path": None}, ["nccl"])[0]["nccl"]


def read_table(path: Path) -> Tuple[List[str], List[List[str]]]:
    """A CSV the tool wrote, read back: (header, rows)."""
    with open(path, newline="", encoding="utf-8") as fh:
        data = list(csv.reader(fh))
    return (data[0] if data else []), data[1:]


def run_cli(*args: str, env_extra: dict | None = None, timeout: int = 300) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.pop("NSYS_LLM_EXPLAIN_DEBUG", None)
    if env_extra:
        env.update(env_extra)
    return subprocess.run([sys.executable, "-m", "nsys_llm_explainer", *args], capture_output=True, text=True,
                          env=env, timeout=timeout)


#: a ``sitecustomize`` that slows a CLI subprocess down where a test needs it (the package has no test hooks):
#: ``NLE_TEST_STAGED_PAUSE_S`` sleeps once the output is staged, before the commit (a signal lands there);
#: ``NLE_TEST_STEP_PAUSE_S`` sleeps in the first progress step (its progress line appears)
PAUSE_HOOK = """
import os, time
_staged, _step = os.environ.get("NLE_TEST_STAGED_PAUSE_S"), os.environ.get("NLE_TEST_STEP_PAUSE_S")
if _staged:
    from nsys_llm_explainer.output import staging as _staging
    _commit = _staging.Staging.commit

    def commit(self, *args, **kwargs):
        time.sleep(float(_staged))
        return _commit(self, *args, **kwargs)

    _staging.Staging.commit = commit
if _step:
    from nsys_llm_explainer import terminal as _term
    _call = _term.Progress.__call__

    _slowed = []

    def call(self, step):   # the first step only: one progress line is enough
        _call(self, step)
        if not _slowed:
            _slowed.append(step)
            time.sleep(float(_step))

    _term.Progress.__call__ = call
"""


def one_line_error(proc: subprocess.CompletedProcess) -> str:
    """The one non-blank stderr line of a refused command-line run, checked to be our error line (no traceback)."""
    assert "Traceback" not in proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("nsys-llm-explain: error:")
    return lines[0]


def pause_env(where: Path, staged: Optional[float] = None, step: Optional[float] = None) -> Dict[str, str]:
    """Environment (``os.environ`` plus) for a CLI subprocess slowed by :data:`PAUSE_HOOK`, written to ``where``."""
    hook = where / "pause_hook"
    hook.mkdir(parents=True, exist_ok=True)
    (hook / "sitecustomize.py").write_text(PAUSE_HOOK)
    src = Path(__file__).resolve().parents[1] / "src"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(hook), str(src), os.environ.get("PYTHONPATH", "")]))
    env.pop("NSYS_LLM_EXPLAIN_DEBUG", None)
    if staged is not None:
        env["NLE_TEST_STAGED_PAUSE_S"] = str(staged)
    if step is not None:
        env["NLE_TEST_STEP_PAUSE_S"] = str(step)
    return env


def wait_until_staged(proc: subprocess.Popen, where: Path, timeout: float = 120) -> None:
    """Wait until the CLI run ``proc`` (started with :func:`pause_env`'s staged pause) has staged its output in
    ``where`` (a hidden staging directory exists); fails if it ends first or takes longer than ``timeout``."""
    import time

    from nsys_llm_explainer.output import STAGING_PREFIX

    deadline = time.time() + timeout
    while not [x for x in where.iterdir() if x.name.startswith(STAGING_PREFIX)]:
        assert time.time() < deadline and proc.poll() is None, proc.communicate()
        time.sleep(0.05)


@pytest.fixture(scope="session")
def demo_trace(tmp_path_factory) -> Path:
    p = tmp_path_factory.mktemp("demo") / "demo.sqlite"
    built_scenario("demo", p)
    return p


@pytest.fixture(scope="session")
def demo_report(demo_trace: Path) -> Any:
    """The default-options :class:`report.Report` of :func:`demo_trace`, analysed once per test process (a Report
    is immutable; take ``.to_dict()`` for a dict of your own)."""
    return real_report(demo_trace)


@pytest.fixture(scope="session")
def small_trace(tmp_path_factory) -> Path:
    """A 100 KB export (one process, six 100 ns kernels "k" 1 µs apart inside one NVTX range "step"): for tests of
    what happens around an analysis (outputs, refusals, signals), where the trace's size is not the point (the
    command line runs on it in about a fifth of the demo trace's time)."""
    from synth import TraceBuilder

    b = TraceBuilder()
    b.process(100, "python")
    g = b.thread(100, 101)
    for i in range(6):
        b.launch(1000 + i * 1000, 1010 + i * 1000, 1100 + i * 1000, 1200 + i * 1000, pid=100, tid=101, name="k")
    b.nvtx_push_pop(900, 7300, "step", tid_g=g)
    p = tmp_path_factory.mktemp("small") / "small.sqlite"
    b.write(str(p))
    return p


# ----------------------------------------------------------------------------- compiled modules, once per run
#: Python compiles every module it imports. With ``PYTHONDONTWRITEBYTECODE`` set (common in containers) it keeps
#: nothing, so each process the tests start (the xdist workers, ~100 command-line runs, mypy) compiled the package,
#: numpy and the tests again: a fifth of the suite's time. Then the run's processes share one temporary directory
#: of compiled files instead (``PYTHONPYCACHEPREFIX``: nothing is written beside the sources), removed when the
#: run ends. A ``PYTHONPYCACHEPREFIX`` of the user's own is left as it is.
_PYCACHE_MADE: Optional[str] = None
if sys.dont_write_bytecode and not sys.pycache_prefix:
    try:
        _PYCACHE_MADE = tempfile.mkdtemp(prefix="nle-tests-pycache-")
    except OSError:   # no writable temporary directory: the run is only slower
        pass
    else:
        os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
        os.environ["PYTHONPYCACHEPREFIX"] = sys.pycache_prefix = _PYCACHE_MADE
        sys.dont_write_bytecode = False


def pytest_unconfigure(config) -> None:
    if _PYCACHE_MADE is not None:   # the process that made it (the workers inherit it made)
        shutil.rmtree(_PYCACHE_MADE, ignore_errors=True)
    if _BUILT_DIR is not None:   # this process's scenarios (each worker builds its own)
        shutil.rmtree(_BUILT_DIR, ignore_errors=True)


# ----------------------------------------------------------------------------- hooks


def pytest_report_header(config) -> str:
    n = len(list(SHARED_TRACES.glob("*/trace.sqlite"))) if traces_present() else 0
    return f"real traces: {SHARED_TRACES} ({n} found){'' if n else ' — MISSING'}; CI={in_ci()}"


def pytest_sessionstart(session) -> None:
    if in_ci() and not traces_present():
        pytest.exit(f"CI: {MISSING_MESSAGE}", returncode=pytest.ExitCode.USAGE_ERROR)


def pytest_runtest_setup(item) -> None:
    """A test parametrized with the stand-in for missing real traces fails in set-up with one clear line."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    if any(v == MISSING_TRACE for v in params.values() if isinstance(v, Path)):
        pytest.fail(MISSING_MESSAGE, pytrace=False)


def pytest_terminal_summary(terminalreporter) -> None:
    if traces_present():
        return
    terminalreporter.write_sep("!", "REAL TRACES MISSING", red=True, bold=True)
    terminalreporter.write_line(MISSING_MESSAGE, red=True, bold=True)
    terminalreporter.write_line("every test that needs them failed or errored above: this run "
                                "is NOT a valid check of the tool", red=True, bold=True)
