"""Odd exports: every single table or column the reader uses may be missing, and the tool must still
produce a report (degrading section by section), never crash."""

from __future__ import annotations

import shutil
import sqlite3

import pytest
from conftest import as_report, built_scenario

from nsys_llm_explainer import render
from nsys_llm_explainer.pipeline import analyze_path
from nsys_llm_explainer.serialize import report_dict

TABLES = ["CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS", "CUPTI_ACTIVITY_KIND_MEMCPY",
          "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", "StringIds", "TARGET_INFO_GPU", "PROCESSES", "META_DATA_EXPORT"]


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    p = tmp_path_factory.mktemp("variants") / "base.sqlite"
    built_scenario("demo", str(p))
    c = sqlite3.connect(p)
    cols = {t: [r[1] for r in c.execute(f'PRAGMA table_info("{t}")')] for t in TABLES}
    c.close()
    return p, cols


COLUMNS = {
    "CUPTI_ACTIVITY_KIND_KERNEL": ("deviceId", "streamId", "correlationId", "globalPid", "demangledName",
                                   "shortName", "graphNodeId"),
    "CUPTI_ACTIVITY_KIND_RUNTIME": ("globalTid", "correlationId", "nameId", "eventClass"),
    "NVTX_EVENTS": ("end", "text", "textId", "globalTid", "endGlobalTid", "domainId"),
}


def _variants():
    return [(t, None) for t in TABLES] + [(t, c) for t, cs in COLUMNS.items() for c in cs]


@pytest.mark.slow   # a sweep over every removable table and column
@pytest.mark.parametrize("table,column", _variants())
def test_missing_table_or_column_degrades(base, tmp_path, table, column):
    src, cols = base
    assert column is None or column in cols[table]
    p = tmp_path / "v.sqlite"
    shutil.copyfile(src, p)
    c = sqlite3.connect(p)
    if column is None:
        c.execute(f'DROP TABLE "{table}"')
    else:
        c.execute(f'ALTER TABLE "{table}" DROP COLUMN "{column}"')
    c.commit()
    c.close()
    j = report_dict(analyze_path(str(p)))
    for r in render.ALL_RENDERERS:
        r().render(as_report(j), tmp_path / "out")
    assert (tmp_path / "out" / "report.md").exists()
    if table == "CUPTI_ACTIVITY_KIND_KERNEL" and column is None:
        assert j["kernels"] == [] and not j["kernels_summary"]["available"]
    if table == "CUPTI_ACTIVITY_KIND_KERNEL" and column == "globalPid":
        assert any("globalPid" in w for w in j["warnings"] + j["trace"]["schema_notes"])
    for d in j["devices"]:
        assert d["busy_ns"] + d["idle_ns"] == d["window_ns"]
