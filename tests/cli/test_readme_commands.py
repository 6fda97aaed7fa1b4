"""The README's two set-up commands work as written on a fresh Debian/Ubuntu machine (a virtual environment, never
the "externally managed" system Python), and `.ci/run` runs exactly the README's test command."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import List

ROOT = Path(__file__).resolve().parents[2]
VENV = "python3 -m venv .venv"
VENV_PY = ".venv/bin/python"


def _section(title: str) -> str:
    """The README text under the level-2 heading that starts with ``title``, up to the next one."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    m = re.search(rf"^## {re.escape(title)}.*?$(.*?)(?=^## |\Z)", text, re.S | re.M)
    assert m, f"README.md has no '## {title}' section"
    return m.group(1)


def _bash_lines(text: str) -> List[str]:
    """Non-empty lines of the ```bash blocks in ``text``."""
    blocks = re.findall(r"^```bash\n(.*?)^```", text, re.S | re.M)
    return [ln.strip() for b in blocks for ln in b.splitlines() if ln.strip()]


def readme_setup_commands() -> List[str]:
    """The README's set-up commands, in order: [run the demo, run the tests]."""
    return _bash_lines(_section("Set-up"))


def _ci_command() -> str:
    """The last command line of .ci/run (comments and blank lines left out)."""
    lines = [ln.strip() for ln in (ROOT / ".ci" / "run").read_text().splitlines()]
    return [ln for ln in lines if ln and not ln.startswith("#")][-1]


def test_two_setup_commands_each_one_line():
    cmds = readme_setup_commands()
    assert len(cmds) == 2, cmds
    assert "nsys_llm_explainer demo --out demo_report" in cmds[0] and cmds[0].endswith("&& cat demo_report/report.md")
    assert "-m pytest" in cmds[1]


def test_setup_commands_use_a_virtual_environment():
    """PEP 668: `pip install` into Debian's/Ubuntu's system Python fails, so every step after creating .venv runs
    .venv's own Python."""
    for cmd in readme_setup_commands():
        steps = [s.strip() for s in cmd.split("&&")]
        assert steps[0] == VENV, cmd
        for step in steps[1:]:
            argv = shlex.split(step)
            assert argv[0] in (VENV_PY, "cat"), step
            if argv[0] == VENV_PY:
                assert argv[1] == "-m", step
        assert any(shlex.split(s)[:4] == [VENV_PY, "-m", "pip", "install"] for s in steps), cmd


def test_ci_run_runs_exactly_the_readme_test_command():
    test_cmd = readme_setup_commands()[1]
    assert _ci_command() == test_cmd
    argv = shlex.split(test_cmd.split("&&")[-1])
    assert "-m" not in argv[3:] and "-k" not in argv, "CI must run every test, slow ones included"


def test_ci_run_sets_ci_and_installs_before_testing():
    text = (ROOT / ".ci" / "run").read_text()
    assert re.search(r"^export CI=", text, re.M), "tests/conftest.py needs CI set to stop on missing traces"
    assert text.index("chromium-driver") < text.index(_ci_command())
    assert text.index("python3-venv") < text.index(_ci_command())


def test_fast_command_and_slow_marker_are_documented():
    fast = _bash_lines(_section("Development"))
    assert f'{VENV_PY} -m pytest -q -m "not slow" -n auto' in fast
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert re.search(r'^markers = \[\n\s+"slow: ', pyproject, re.M)
    assert "--strict-markers" in pyproject


def test_readme_counts_the_scenarios():
    """The README's "N synthetic scenarios" is the generator's count (it drifted once)."""
    import re
    from pathlib import Path

    from synth.scenarios import SCENARIOS
    text = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    (n,) = re.findall(r"(\d+) synthetic scenarios", text)
    assert int(n) == len(SCENARIOS)
