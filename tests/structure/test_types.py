"""The type checker passes over src/ and tests/synth (the generator) with the configuration in pyproject.toml
(docs/DESIGN.md "Types"): 0 errors.
Installed by the test extra (`.[test]`), so `.ci/run` runs it; slow (about 10 s cold)."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_mypy_reports_no_error_over_src(tmp_path):
    from mypy import api

    out, err, status = api.run(["--config-file", str(ROOT / "pyproject.toml"), "--cache-dir", str(tmp_path),
                                str(ROOT / "src"), str(ROOT / "tests" / "synth")])
    assert status == 0 and "Success: no issues found" in out, out + err
