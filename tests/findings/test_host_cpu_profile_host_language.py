"""The host-gap profiling advice by what the trace says of the host's language (fact ``native_host``,
docs/FINDINGS.md "Facts"): py-spy (`host_cpu.profile`) only for a host known to run Python; a native host and a
host whose process the export does not name (nothing said of its language) get `nsys --sample=cpu` alone
(`host_cpu.profile.native`). Trace: the llama.cpp-style decode loop of
test_claims_generations_native_engines (no stack recognised, no CPU samples), its one process named or not."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from claims_support import finding_of
from test_claims_generations_native_engines import PID, decode

from nsys_llm_explainer.findings.advice import ADVICE
from nsys_llm_explainer.options import options_from_kwargs
from nsys_llm_explainer.pipeline import analyze_path


def _advice(tmp_path: Path, process: str, drop_row: bool = False) -> tuple:
    p = tmp_path / "t.sqlite"
    decode("2024.2", process=process).write(str(p), overwrite=True)
    if drop_row:      # an export with no PROCESSES row for it: the name is not recorded at all
        with sqlite3.connect(str(p)) as c:
            c.execute("DELETE FROM PROCESSES WHERE pid = ?", (PID,))
    j = analyze_path(str(p), options_from_kwargs()).to_dict()
    return j["facts"].get("native_host"), finding_of(j, "idle_host_cpu")["recommendation"]


@pytest.mark.parametrize("drop_row", [False, True], ids=["empty name", "no PROCESSES row"])
def test_an_unnamed_host_is_not_told_to_use_py_spy(tmp_path: Path, drop_row: bool) -> None:
    """The process that made every CUDA call has no recorded name: the trace says nothing of its language (no stack,
    no Python frame — no CPU sample at all): not native (no `native_host`), not known Python either, so the advice
    names `nsys --sample=cpu` only. (Before: unknown was read as Python and py-spy was advised.)"""
    native, adv = _advice(tmp_path, "", drop_row)
    assert native is None
    assert ADVICE["host_cpu.profile.native"].text in adv and not any("py-spy" in a for a in adv), adv


def test_a_python_interpreter_host_is_told_to_use_py_spy(tmp_path: Path) -> None:
    """The same loop in a process named `python3`: a Python interpreter, so py-spy is named."""
    native, adv = _advice(tmp_path, "python3")
    assert native is None
    assert ADVICE["host_cpu.profile"].text in adv and ADVICE["host_cpu.profile.native"].text not in adv, adv
