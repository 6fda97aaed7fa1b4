"""``Report.from_dict``: a report loaded from its ``report.json`` dict writes the same dict again, holds typed
sections with the trace's real numbers (the planted facts of each scenario; NVIDIA's ``nsys stats`` kernel summary
of each real trace), gives the same ``to_frame`` tables, and refuses a dict of another schema or with a part
missing in one line (``errors.InputError``). What ``report.json`` does not carry (the trace model, helper arrays)
comes back empty and is named where something needs it."""

from __future__ import annotations

import copy
import dataclasses
import json
from pathlib import Path
from typing import Any, Dict, Tuple

import numpy as np
import pytest
from conftest import built_scenario, real_report, real_traces, scenario_report, trace_id
from oracles import oracle_rows
from synth import SCENARIOS
from test_scenarios import expected

from nsys_llm_explainer.analyses.api.graphs import GraphResult
from nsys_llm_explainer.analyses.api.launch import LaunchDeviceRow, LaunchResult, LaunchStats
from nsys_llm_explainer.analyses.comms.nccl_result import NcclResult
from nsys_llm_explainer.analyses.idle.gpu_time import DeviceTime
from nsys_llm_explainer.analyses.kernels.summary import KernelDeviceRow, KernelRow
from nsys_llm_explainer.analyses.memory.traffic import AllocApi, MemoryResult
from nsys_llm_explainer.analyses.steps import metrics
from nsys_llm_explainer.comparison.core import compare_reports
from nsys_llm_explainer.config.categories import load_rules
from nsys_llm_explainer.errors import InputError
from nsys_llm_explainer.findings.base import Check, Finding
from nsys_llm_explainer.jsonable import from_json
from nsys_llm_explainer.pipeline import analyze_path
from nsys_llm_explainer.render.frames import table_frame, table_names
from nsys_llm_explainer.report import Report
from nsys_llm_explainer.serialize import MOVED, NOT_CARRIED, ORDER, SCHEMA_VERSION

#: (class, field) whose value ``report.json`` does not carry beyond what the NOT_IN_JSON fields say: compared apart
LOST = {("DeviceCauses", "gap_cause_code"), ("DeviceCauses", "cause_of_code"), ("StepResult", "arrays"),
        ("Report", "steady_kernels")} | {("Report", n) for n in NOT_CARRIED}


def _json(d: Any) -> Any:
    return json.loads(json.dumps(d))


def same(a: Any, b: Any, where: str = "report") -> None:
    """``a`` (the analysed value) equals ``b`` (the loaded one) field by field, the fields ``report.json`` leaves
    out (``metadata=NOT_IN_JSON``, :data:`LOST`) aside; types included (a tuple stays a tuple)."""
    assert type(a) is type(b) or (isinstance(a, (int, float)) and isinstance(b, (int, float))), where
    if dataclasses.is_dataclass(a):
        for f in dataclasses.fields(a):
            if f.metadata.get("json", True) is not False and (type(a).__name__, f.name) not in LOST:
                same(getattr(a, f.name), getattr(b, f.name), f"{where}.{f.name}")
    elif isinstance(a, np.ndarray):
        assert np.array_equal(a, b), where
    elif isinstance(a, (tuple, list)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            same(x, y, f"{where}[{i}]")
    elif isinstance(a, dict):
        assert list(a) == list(b), where
        for k in a:
            same(a[k], b[k], f"{where}[{k!r}]")
    else:
        assert a == b, where


def round_trip(rep: Report) -> Report:
    """The report loaded from its parsed ``report.json``; checks that it writes the same dict and holds the same
    typed values."""
    d = rep.to_dict()
    loaded = Report.from_dict(_json(d))
    again = loaded.to_dict()
    assert {k: v for k, v in again.items() if k != "timings_s"} == {k: v for k, v in d.items() if k != "timings_s"}
    assert again["timings_s"] == d["timings_s"]   # loaded too, though not a result
    assert not {"model", "steady"} & {f.name for f in dataclasses.fields(Report)}   # no trace model in a report
    assert all(getattr(loaded, n) is None for n in NOT_CARRIED)
    same(rep, loaded)
    for b in loaded.idle_causes.devices:
        assert b.gap_cause_code.shape == (0,) and b.cause_of_code == {} and b.pieces is None
    st, ls = rep.steps, loaded.steps
    assert (ls.arrays is None) == (st.arrays is None or not st.available or st.step_count == 0)
    if ls.arrays is not None:
        assert st.arrays is not None and tuple(ls.arrays.rows()) == st.rows
    sk, lk = rep.steady_kernels, loaded.steady_kernels
    if rep.window.is_full:
        assert lk is loaded.kernels and sk == rep.kernels
    else:
        assert lk.by_name == sk.by_name and (lk.total_kernel_ns, lk.kernel_count) == (sk.total_kernel_ns,
                                                                                   sk.kernel_count)
    return loaded


def same_frames(rep: Report, loaded: Report) -> None:
    """``loaded.to_frame(name)`` of every table equals the analysed report's."""
    pd = pytest.importorskip("pandas")
    for name in table_names():
        pd.testing.assert_frame_equal(loaded.to_frame(name), table_frame(rep, name, pd), obj=name)


# ------------------------------------------------------------------------------------------ scenarios
@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_scenario_round_trip(name, tmp_path_factory):
    facts, _, rep = scenario_report(name, tmp_path_factory)
    loaded = round_trip(rep)
    # the planted workload, read off the loaded typed sections
    k = loaded.kernels
    assert k.kernel_count == facts["kernel_count"] and k.total_kernel_ns == facts["kernel_sum_ns"]
    assert isinstance(k.by_name, tuple) and all(isinstance(r, KernelRow) for r in k.by_name)
    assert sum(r.total_ns for r in k.by_name) == facts["kernel_sum_ns"]
    assert sum(r.count for r in k.by_name) == facts["kernel_count"]
    assert loaded.findings[0].category == expected(name, facts)
    assert all(isinstance(f, Finding) and f.holds() for f in loaded.findings)
    assert all(isinstance(c, Check) for f in loaded.findings for c in f.checks)
    assert loaded.headline.top_finding_id == loaded.findings[0].id
    planted: Dict[int, int] = {}
    for v in facts["devices"].values():
        planted[v["device"]] = planted.get(v["device"], 0) + v["busy_ns"]
    devs = loaded.gpu_time.devices
    assert all(isinstance(d, DeviceTime) for d in devs)
    if len(planted) == len(devs):   # one process per device: the full capture's busy time is the planted one
        assert {d.device_id: (d.full or d).busy_ns for d in devs} == planted
    causes = {c.device_id: c for c in loaded.idle_causes.devices}
    for d in devs:
        assert d.busy_ns + d.idle_ns == d.window_ns
        assert sum(c.ns for c in causes[d.device_id].causes) == d.idle_ns


def test_to_frame_of_a_loaded_report(demo_report):
    """Every table of ``tables/*.csv`` (each real trace's: :func:`test_real_trace_round_trip`)."""
    rep = demo_report
    loaded = Report.from_dict(_json(rep.to_dict()))
    same_frames(rep, loaded)
    assert len(loaded.to_frame("steps")) == loaded.steps.step_count > 0


def test_loaded_report_keeps_user_rules_and_options(tmp_path):
    """Options that a plain run leaves at their defaults come back as given: a phase map, category rules (the merged
    rule list, not in report.json, rebuilt from the presets), a window, a step marker."""
    p = tmp_path / "demo.sqlite"
    built_scenario("demo", str(p))
    rules = tmp_path / "rules.json"
    rules.write_text(json.dumps({"rules": [["gemm", "matmul_custom"]]}))
    phases = tmp_path / "phases.json"
    phases.write_text(json.dumps({"prefill": ["prefill"], "decode": ["decode", "step"]}))
    for opts in ({"categories": load_rules("vllm", rules), "phase_map": str(phases), "step_marker": "gemm",
                  "window": (50_000_000, 90_000_000), "top": 3, "include_memcpy_in_busy": True},
                 {"categories_file": str(rules)}):
        from nsys_llm_explainer import analyze

        rep = analyze(str(p), **opts)
        loaded = round_trip(rep)
        assert loaded.options == rep.options
        assert loaded.options.categories is not None and loaded.options.categories.rules[0] == ("gemm",
                                                                                               "matmul_custom")


def test_capped_step_rows_round_trip(tmp_path, monkeypatch):
    """More steps than report.json keeps rows of: the loaded report has the rows it keeps and still says capped."""
    monkeypatch.setattr(metrics, "MAX_ROWS", 7)
    p = tmp_path / "t.sqlite"
    built_scenario("training_step", str(p))
    rep = analyze_path(str(p))
    assert rep.steps.step_count > 7 and rep.to_dict()["steps"]["rows_capped"] is True
    loaded = round_trip(rep)
    assert loaded.steps.step_count == rep.steps.step_count and len(loaded.steps.arrays.rows()) == 7


# ------------------------------------------------------------------------------------------ real traces
@pytest.mark.slow
@pytest.mark.parametrize("trace", real_traces(), ids=trace_id)
def test_real_trace_round_trip(trace: Path):
    rep = real_report(trace)
    loaded = round_trip(rep)
    rows = oracle_rows(trace.parent / "oracle" / "nsys2024.2_cuda_gpu_kern_sum.csv")
    by_name = {r.name: r for r in loaded.kernels.by_name}
    assert len(by_name) == len(rows)
    for o in rows:
        r = by_name[o["Name"]]
        assert (r.count, r.total_ns, r.min_ns, r.max_ns) == (int(o["Instances"]), int(o["Total Time (ns)"]),
                                                             int(o["Min (ns)"]), int(o["Max (ns)"]))
    assert loaded.kernels.total_kernel_ns == sum(int(o["Total Time (ns)"]) for o in rows)
    if rows:
        top = max(int(o["Total Time (ns)"]) for o in rows)
        assert loaded.kernels.by_name[0].total_ns == top
        assert loaded.kernels.by_name[0].name in {o["Name"] for o in rows if int(o["Total Time (ns)"]) == top}
    # (its tables: to_frame is made from to_dict(), equal above; test_to_frame_of_a_loaded_report checks them)


# ------------------------------------------------------------------------------------------ refusals
@pytest.fixture(scope="module")
def demo_dict(tmp_path_factory) -> Dict[str, Any]:
    p = tmp_path_factory.mktemp("rt") / "demo.sqlite"
    built_scenario("demo", str(p))
    return _json(analyze_path(str(p)).to_dict())


def _refused(d: Any) -> str:
    with pytest.raises(InputError) as e:
        Report.from_dict(d)
    msg = str(e.value)
    assert "\n" not in msg
    return msg


def test_another_schema_is_refused(demo_dict):
    for v in ("3.0", "1.0", 2):
        d = dict(demo_dict, schema_version=v)
        seen = f"schema_version {v!r}" if isinstance(v, str) else "a schema_version that is an integer"
        assert seen in _refused(d) and SCHEMA_VERSION in _refused(d)
    deep: list = []
    cur = deep
    for _ in range(5000):   # deeper than repr() or any recursive walk can go
        cur.append([])
        cur = cur[0]
    assert "a schema_version that is a list of 1 item(s)" in _refused(dict(demo_dict, schema_version=deep))
    for key in ("kernels_summary", "findings", "options", "headline"):   # one InputError line wherever it sits
        assert _refused(dict(demo_dict, **{key: deep})).startswith(f"report.json {key}")
    d = {k: v for k, v in demo_dict.items() if k != "schema_version"}
    assert "no schema_version" in _refused(d)
    assert "dict was expected, got list" in _refused([demo_dict])


def test_a_missing_or_malformed_part_is_named(demo_dict):
    for key in ("idle_causes", "timeline", "kernels_summary", "pids", "devices", "kernel_traits", "options"):
        d = {k: v for k, v in demo_dict.items() if k != key}
        assert _refused(d) == f"report.json: missing key {key!r}"
    d = copy.deepcopy(demo_dict)
    del d["kernels_summary"]["by_name"][1]["count"]
    assert _refused(d) == "report.json kernels_summary.by_name[1]: missing key 'count'"
    d = copy.deepcopy(demo_dict)
    del d["nvtx"]["attribution"]["attributed_kernel_count"]
    assert _refused(d) == "report.json nvtx.attribution: missing key 'attributed_kernel_count'"
    d = copy.deepcopy(demo_dict)
    d["window"]["start_ns"] = "soon"
    assert _refused(d) == "report.json window.start_ns: expected an integer, got a string"
    d = dict(demo_dict, gpu_time=[])
    assert _refused(d) == "report.json gpu_time: expected an object, got a list of 0 item(s)"
    d = copy.deepcopy(demo_dict)
    d["findings"][0]["checks"] = {"x": 1}
    assert _refused(d) == "report.json findings[0].checks: expected a list, got an object with 1 key(s)"


def test_rows_load_typed_and_empty_parts_load_as_none(tmp_path):
    """Row tables come back as their row classes; a part an unavailable result leaves empty is ``{}`` in
    report.json and None again when loaded; a memory row's ``class`` key is its ``api_class`` field."""
    p = tmp_path / "alloc.sqlite"
    built_scenario("alloc_in_loop", str(p))
    d = _json(analyze_path(str(p)).to_dict())
    loaded = Report.from_dict(d)
    assert loaded.memory.alloc_free_by_api and all(isinstance(r, AllocApi) for r in loaded.memory.alloc_free_by_api)
    assert {r.api_class for r in loaded.memory.alloc_free_by_api} == {"alloc", "free"}
    assert isinstance(loaded.launch.overall, LaunchStats) and loaded.launch.overall.launch_storm is None
    assert all(isinstance(r, LaunchDeviceRow) for r in loaded.launch.per_device)
    assert all(isinstance(r, KernelDeviceRow) for r in loaded.kernels.by_name_device)
    empty = {LaunchResult(False, "no kernels"): ["overall"], GraphResult(False, "no graphs"): ["kernels_per_launch"],
             NcclResult(False, "no kernels"): ["custom_allreduce"],
             MemoryResult(False, "no copies"): ["host_copies", "pageable", "sync_copies", "alloc", "free"]}
    for r, keys in empty.items():
        j = _json(r.to_dict())
        assert [k for k, v in j.items() if v == {}] == keys
        assert from_json(type(r), j, "x") == r
    del d["memory"]["alloc_free_by_api"][0]["class"]
    assert _refused(d) == "report.json memory.alloc_free_by_api[0]: missing key 'class'"


def test_the_fields_read_apart_are_the_ones_placed_apart():
    """Every field ``report_values`` reads from elsewhere than the key of its name is one ``report_dict`` places
    itself (serialize.ORDER, or not at all): a field it writes under its own name needs no line in either table."""
    assert {"options", "steady_kernels"} <= set(ORDER)
    assert {f.name for f in dataclasses.fields(Report)} >= set(MOVED) | NOT_CARRIED


def test_what_needs_the_trace_says_so(demo_dict):
    loaded = Report.from_dict(demo_dict)
    from nsys_llm_explainer.cluster.summary import summarize

    for call in (lambda: summarize(loaded, "a"), lambda: compare_reports([loaded, loaded])):
        with pytest.raises(InputError, match="needs the trace itself.*loaded from report.json"):
            call()
    with pytest.raises(InputError, match="^compare needs the trace itself"):
        compare_reports([loaded, loaded])


def test_rows_with_keys_only_some_rows_have_round_trip():
    """A start/end NVTX range has no self time (no keys in report.json, None loaded back), and a GPU row holds the
    columns its export has, in the export's column order."""
    from nsys_llm_explainer.analyses.nvtx.ranges import NvtxRangeRow
    from nsys_llm_explainer.jsonable import from_json
    from nsys_llm_explainer.model.info import GpuInfo

    se = NvtxRangeRow("load", "StartEnd", 2, 30, 15, 15, 10, 20, 25.0)
    pp = NvtxRangeRow("step", "PushPop", 1, 90, 90, 90, 90, 90, 75.0, self_ns=60, pct_self=100.0)
    assert list(se.to_dict()) == ["name", "style", "count", "total_ns", "avg_ns", "p50_ns", "min_ns", "max_ns",
                                  "pct_total"]
    assert pp.to_dict()["self_ns"] == 60 and list(pp.to_dict())[-2:] == ["self_ns", "pct_self"]
    rows = from_json(Tuple[NvtxRangeRow, ...], [se.to_dict(), pp.to_dict()], "nvtx.ranges")
    assert rows == (se, pp) and rows[0].self_ns is None
    g = GpuInfo.of_row({"smCount": 34, "id": 0, "name": "RTX", "totalMemory": None})
    assert g.to_dict() == {"id": 0, "name": "RTX", "totalMemory": None, "smCount": 34}
    assert list(g.to_dict()) == ["id", "name", "totalMemory", "smCount"]
    assert GpuInfo.from_dict(g.to_dict()) == g and g.uuid is None
