"""The demo's shipped traces (``src/nsys_llm_explainer/demo_traces/NAME.sqlite.xz``, written by
``scripts/build_demo_traces.py`` from the generator in ``tests/synth``) cannot go stale: each one, unpacked, has
every table's rows (and schema) equal to what the generator writes today; the package ships exactly the scenarios
the script lists, ``demo --scenario`` offers exactly those, and a Python without ``lzma`` gets one line."""

from __future__ import annotations

import importlib.util
import shutil
import sqlite3
import sys
from pathlib import Path
from types import ModuleType
from typing import Dict, List, Tuple

import pytest
from synth import build_scenario

from nsys_llm_explainer import demo_traces

ROOT = Path(__file__).resolve().parents[2]


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("build_demo_traces", ROOT / "scripts" / "build_demo_traces.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _tables(path: Path) -> Dict[str, Tuple[str, List[tuple]]]:
    """Table name → (its CREATE statement, its rows in storage order)."""
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return {name: (sql, con.execute(f'SELECT * FROM "{name}"').fetchall())
                for name, sql in con.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'")}
    finally:
        con.close()


def differences(shipped: Path, generated: Path) -> List[str]:
    """What differs between two exports, table by table ([] when every table has the same schema and rows)."""
    a, b = _tables(shipped), _tables(generated)
    out = [f"{n}: only {'shipped' if n in a else 'generated'}" for n in sorted(set(a) ^ set(b))]
    for n in sorted(set(a) & set(b)):
        if a[n][0] != b[n][0]:
            out.append(f"{n}: schema differs")
        elif a[n][1] != b[n][1]:
            out.append(f"{n}: rows differ ({len(a[n][1])} shipped, {len(b[n][1])} generated)")
    return out


def test_the_package_ships_the_scenarios_the_script_lists() -> None:
    from nsys_llm_explainer.cli import _demo_parser

    shipped = demo_traces.names()
    assert shipped == tuple(sorted(_script().SHIPPED))
    assert shipped == ("demo", "h2d_pageable_step", "healthy", "launch_bound", "launcher_waits_io", "per_token_sync")
    scenario = next(a for a in _demo_parser()._actions if a.dest == "scenario")
    assert list(scenario.choices or ()) == list(shipped) and scenario.default == "demo"
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    assert all(f"`{n}`" in readme.split("`--scenario NAME`", 1)[1][:300] for n in shipped if n != "demo"), readme
    total = sum((Path(demo_traces.__file__).parent / f"{n}{demo_traces.SUFFIX}").stat().st_size for n in shipped)
    assert total < 1_000_000, total


@pytest.mark.parametrize("name", demo_traces.names())
def test_a_shipped_trace_has_the_rows_the_generator_writes(tmp_path: Path, name: str) -> None:
    shipped, generated = tmp_path / "shipped.sqlite", tmp_path / "generated.sqlite"
    demo_traces.unpack(name, shipped)
    build_scenario(name, str(generated))
    assert differences(shipped, generated) == [], f"stale: run `python scripts/build_demo_traces.py {name}`"


def test_the_comparison_sees_one_changed_value_and_one_extra_table(tmp_path: Path) -> None:
    shipped, changed = tmp_path / "shipped.sqlite", tmp_path / "changed.sqlite"
    demo_traces.unpack("h2d_pageable_step", shipped)
    shutil.copyfile(shipped, changed)
    con = sqlite3.connect(changed)
    n = con.execute("SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    con.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET end = end + 1 WHERE rowid = (SELECT MAX(rowid) FROM "
                "CUPTI_ACTIVITY_KIND_KERNEL)")
    con.execute("CREATE TABLE EXTRA (x INTEGER)")
    con.commit()
    con.close()
    assert differences(shipped, changed) == ["EXTRA: only generated",
                                             f"CUPTI_ACTIVITY_KIND_KERNEL: rows differ ({n} shipped, {n} generated)"]


def test_a_python_without_lzma_gets_one_line(monkeypatch, capsys, tmp_path: Path) -> None:
    from nsys_llm_explainer.cli import main

    monkeypatch.setitem(sys.modules, "lzma", None)   # `import lzma` raises ImportError, as without liblzma
    monkeypatch.delenv("NSYS_LLM_EXPLAIN_DEBUG", raising=False)
    assert main(["demo", "--out", str(tmp_path / "d"), "--quiet"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "nsys-llm-explain: error: this Python has no lzma module (it was built without liblzma), which the demo "
        "needs to unpack its traces; use a Python built with it"]
    assert not (tmp_path / "d").exists()
