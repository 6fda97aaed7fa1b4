"""Without the real traces the suite is never green (tests/conftest.py): pytest run in a subprocess on a few
trace-dependent tests with ``NSYS_LLM_EXPLAINER_SHARED`` pointing at a missing directory.

- locally (no ``CI``): each such test fails or errors, naming the path, nothing is skipped, and the terminal
  summary ends with the REAL TRACES MISSING banner;
- with ``CI=true``: pytest stops before running any test, with one line naming the path, exit status 4."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, SHARED_ENV, in_ci

pytestmark = pytest.mark.slow   # three pytest runs in subprocesses

#: one test per way a test reaches the traces: a parametrization over them (the stand-in fails in set-up),
#: the ``shared_traces`` fixture, and ``require_traces()`` in the test body
SELECTION = (
    "tests/oracle/test_oracle_real.py::test_real_trace_invariants",
    "tests/oracle/test_oracle_nvtxkernsum.py::test_attribution_matches_nvtxkernsum[01_llama3_demo]",
    "tests/analyses/test_kernel_traits.py::test_real_23_fp32_gemm_on_a100",
)


def _pytest(shared: Path, ci: str, *tests: str) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env[SHARED_ENV] = str(shared)
    env.pop("CI", None)
    if ci:
        env["CI"] = ci
    return subprocess.run([sys.executable, "-m", "pytest", "-rs", "-p", "no:cacheprovider", *tests],
                          cwd=ROOT, capture_output=True, text=True, env=env, timeout=300)


def test_locally_missing_traces_fail_loudly(tmp_path):
    missing = tmp_path / "no_shared"
    proc = _pytest(missing, "", *SELECTION)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    summary = out.strip().splitlines()[-1]
    assert re.search(r"\b1 failed, 2 errors\b", summary), summary
    assert "passed" not in summary and "skipped" not in summary, summary
    assert out.count(f"real traces missing: {missing / 'traces'} is not a directory") >= 3, out
    assert "REAL TRACES MISSING" in out and "NOT a valid check" in out


@pytest.mark.parametrize("ci, workers", [("true", []), ("1", ["-n", "2"])])   # also as .ci/run runs it (xdist)
def test_in_ci_missing_traces_stop_the_run(tmp_path, ci, workers):
    missing = tmp_path / "no_shared"
    proc = _pytest(missing, ci, *workers, *SELECTION)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 4, out
    assert f"CI: real traces missing: {missing / 'traces'} is not a directory" in out
    assert not re.search(r"\d+ (passed|failed|errors?)\b", out), out


def test_env_override_finds_the_traces_in_ci(shared_traces, tmp_path):
    """NSYS_LLM_EXPLAINER_SHARED=DIR reads DIR/traces (here a link to the real ones) and CI runs normally."""
    alt = tmp_path / "alt_shared"
    alt.mkdir()
    (alt / "traces").symlink_to(shared_traces, target_is_directory=True)
    proc = _pytest(alt, "true", "tests/oracle/test_oracle_files.py")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    n = len(list(shared_traces.glob("*/trace.sqlite")))
    assert f"real traces: {alt.resolve() / 'traces'} ({n} found); CI=True" in out
    assert re.search(r"\b4 passed\b", out.strip().splitlines()[-1]), out


def test_ci_flag_values(monkeypatch):
    for value, expected in (("true", True), ("1", True), ("yes", True), ("", False), ("0", False),
                            ("false", False), ("No", False)):
        monkeypatch.setenv("CI", value)
        assert in_ci() is expected, value
    monkeypatch.delenv("CI")
    assert in_ci() is False
