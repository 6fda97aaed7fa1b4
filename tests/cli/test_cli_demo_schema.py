"""The README's first commands, as a new user types them: the demo line of the README's set-up section (run as
written, less the two steps that create and fill .venv: this test's Python stands for .venv/bin/python),
``nsys-llm-explain schema`` and ``schema --compare``."""

from __future__ import annotations

import csv
import functools
import json
import os
import shlex
import shutil
import sqlite3
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any, Dict

import jsonschema
import pytest
from test_readme_commands import VENV_PY, readme_setup_commands

#: what `demo --out DIR` writes (README "Outputs in --out"), besides the demo trace it analysed
REPORT_FILES = ("report.md", "report.html", "report.json")
#: tables the README names (a header row even when empty)
README_TABLES = ("findings.csv", "devices.csv", "idle_causes.csv", "gpu_idle_gaps.csv", "kernels.csv",
                 "kernel_traits.csv", "categories.csv", "steps.csv", "nvtx_ranges.csv", "cuda_api.csv", "memcpy.csv")


def _run(args: list, cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.pop("NSYS_LLM_EXPLAIN_DEBUG", None)
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, env=env, timeout=300)


@functools.cache
def _schema(*extra: str) -> Dict[str, Any]:
    """The JSON printed by `python -m nsys_llm_explainer schema [extra]` (one run per argument list)."""
    proc = _run([sys.executable, "-m", "nsys_llm_explainer", "schema", *extra], Path.cwd())
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    return json.loads(proc.stdout)


def readme_demo_command() -> str:
    """The README's demo line without its `python3 -m venv .venv` and `pip install .` steps, .venv/bin/python
    replaced by this test's Python (where the package under test is installed)."""
    steps = [s.strip() for s in readme_setup_commands()[0].split("&&")]
    kept = [s for s in steps if not s.startswith("python3 -m venv") and " -m pip install" not in s]
    assert len(kept) == len(steps) - 2, steps
    return " && ".join(kept).replace(VENV_PY, shlex.quote(sys.executable))


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory) -> Dict[str, Any]:
    """The README's demo line (``... -m nsys_llm_explainer demo --out demo_report && cat demo_report/report.md``)
    run by bash in an empty directory."""
    cwd = tmp_path_factory.mktemp("readme")
    proc = _run(["bash", "-c", readme_demo_command()], cwd)
    return {"proc": proc, "out": cwd / "demo_report"}


def test_demo_exits_0_and_writes_every_output(demo_run):
    proc, out = demo_run["proc"], demo_run["out"]
    assert proc.returncode == 0, proc.stderr
    for name in REPORT_FILES:
        assert (out / name).is_file() and (out / name).stat().st_size > 0, name
    for name in README_TABLES:
        with open(out / "tables" / name, newline="") as fh:
            assert next(csv.reader(fh)), f"{name} has no header row"
    assert proc.stdout.startswith("nsys-llm-explain: wrote demo_report/report.md, report.html, report.json, tables/")
    assert proc.stdout.endswith((out / "report.md").read_text())     # `cat demo_report/report.md`


def test_readme_demo_command_is_the_module_entry_point():
    assert readme_demo_command() == (f"{shlex.quote(sys.executable)} -m nsys_llm_explainer demo --out demo_report"
                                     " && cat demo_report/report.md")


def test_demo_report_json_validates_against_the_schema_command(demo_run):
    schema = _schema()
    report = json.loads((demo_run["out"] / "report.json").read_text())
    jsonschema.validators.validator_for(schema).check_schema(schema)
    jsonschema.validate(report, schema)
    assert report["schema_version"] == "2.1"          # README: "versioned by schema_version 2.1"


def test_demo_is_the_readme_two_gpu_trace(demo_run):
    """README: "a synthetic 2-GPU tensor-parallel vLLM-style capture"; the report names the trace it read."""
    out = demo_run["out"]
    report = json.loads((out / "report.json").read_text())
    assert len(report["devices"]) == 2
    con = sqlite3.connect(f"file:{out / 'demo_trace.sqlite'}?mode=ro&immutable=1", uri=True)
    try:
        devices = con.execute("SELECT COUNT(DISTINCT deviceId) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    finally:
        con.close()
    assert devices == 2
    md = (out / "report.md").read_text()
    assert md.splitlines()[0] == "# Nsight Systems LLM report: `demo_trace.sqlite`"
    verdict = report["headline"]["verdict"]
    assert verdict in md and f"verdict: {verdict}" in demo_run["proc"].stdout


def test_schema_prints_the_report_schema():
    schema = _schema()
    jsonschema.validators.validator_for(schema).check_schema(schema)
    assert schema["type"] == "object" and "schema_version" in schema["required"]


def test_schema_compare_prints_another_valid_schema():
    report_schema, compare_schema = _schema(), _schema("--compare")
    jsonschema.validators.validator_for(compare_schema).check_schema(compare_schema)
    assert compare_schema != report_schema and "kind" in compare_schema["properties"]


def test_console_script_schema(tmp_path):
    """`nsys-llm-explain schema` (README "Use") through the installed console script prints the same schema."""
    exe = shutil.which("nsys-llm-explain", path=sysconfig.get_path("scripts")) or shutil.which("nsys-llm-explain")
    assert exe, f"the nsys-llm-explain console script is not installed (looked in {sysconfig.get_path('scripts')})"
    proc = _run([exe, "schema"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == _schema()
