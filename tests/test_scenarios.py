"""Diagnosis on synthetic scenarios, each with one planted cause: the top finding names it, and the
time accounting adds up (busy + idle parts = window) with the planted busy time."""

from __future__ import annotations

import pytest

from nsys_llm_explainer.findings.rules import CATEGORIES
from nsys_llm_explainer.pipeline import analyze_path
from nsys_llm_explainer.render.json_report import build_json
from nsys_llm_explainer.synth import SCENARIOS, build_scenario

_CACHE: dict = {}


def run(name: str, tmp_path_factory):
    if name not in _CACHE:
        p = tmp_path_factory.mktemp(name) / f"{name}.sqlite"
        facts = build_scenario(name, str(p))
        _CACHE[name] = (facts, build_json(analyze_path(str(p))))
    return _CACHE[name]


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_top_finding_names_the_planted_cause(name, tmp_path_factory):
    facts, j = run(name, tmp_path_factory)
    top = j["findings"][0]
    assert top["category"] == facts["cause"], [(f["category"], f["time_at_stake_ns"]) for f in j["findings"]]
    assert top["category"] in CATEGORIES
    if facts["cause"] == "none":
        assert not any(f["severity"] == "high" for f in j["findings"])
    else:
        assert top["severity"] in ("high", "medium")
        assert top["time_at_stake_ns"] > 0
        assert top["evidence"] and top["recommendation"]


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_accounting_adds_up(name, tmp_path_factory):
    facts, j = run(name, tmp_path_factory)
    acc = j["accounting"]
    for scope in ("steady", "full"):
        a = acc[scope]
        if not a["available"]:
            continue
        for d in a["devices"]:
            assert d["busy_ns"] + d["idle_ns"] == d["window_ns"]
            assert sum(d["idle_parts"].values()) == d["idle_ns"]
            assert all(v >= 0 for v in d["idle_parts"].values())
    # the full-window accounting agrees with the idle section and with the planted busy time
    devs = {d["device_id"]: d for d in j["devices"]}
    for d in acc["full"]["devices"]:
        assert d["busy_ns"] == devs[d["device_id"]]["busy_ns"]
        assert d["window_ns"] == devs[d["device_id"]]["window_ns"]
    planted = {}
    for v in facts["devices"].values():
        planted.setdefault(v["device"], 0)
        planted[v["device"]] += v["busy_ns"]
    if len(planted) == len(devs):  # one process per device in every scenario
        for dev, busy in planted.items():
            assert devs[dev]["busy_ns"] == busy
    assert j["kernels_summary"]["kernel_count"] == facts["kernel_count"]


def test_sync_scenario_idle_is_inside_sync(tmp_path_factory):
    facts, j = run("per_token_sync", tmp_path_factory)
    acct = j["accounting"]["steady"]
    sync_idle = sum(d["idle_parts"]["sync"] for d in acct["devices"])
    assert sync_idle >= 0.8 * facts["idle_inside_ns"]["sync"]


def test_healthy_trace_with_big_sync_total_is_not_a_stall(tmp_path_factory):
    _, j = run("healthy", tmp_path_factory)
    assert j["findings"][0]["category"] == "none"
    assert all(f["category"] != "sync_stall" for f in j["findings"])


def test_warmup_window_is_trimmed_not_alarmed(tmp_path_factory):
    facts, j = run("warmup_tail", tmp_path_factory)
    w = j["window"]
    assert w["method"] == "auto"
    assert abs(w["start_ns"] - facts["steady_start_ns"]) < 2_000_000
    assert abs(w["end_ns"] - facts["steady_end_ns"]) < 2_000_000
    cats = [f["category"] for f in j["findings"] if f["severity"] in ("high", "medium")]
    assert cats == ["capture_window"]


def test_graph_level_trace_is_flagged(tmp_path_factory):
    _, j = run("graph_level", tmp_path_factory)
    assert j["graphs"]["graph_level_hidden"] is True
    assert any("cuda-graph-trace=node" in w for w in j["warnings"])


def test_nccl_straggler_names_ranks(tmp_path_factory):
    facts, j = run("nccl_straggler", tmp_path_factory)
    v = j["nccl"]["straggler"]
    assert v["waiting_pid"] == facts["waiting_pid"] and v["late_pid"] == facts["straggler_pid"]


@pytest.mark.parametrize("name", ["demo", "graph_level", "warmup_tail", "nccl_straggler"])
def test_diagnosis_sections_match_json_schema(name, tmp_path_factory):
    jsonschema = pytest.importorskip("jsonschema")
    from nsys_llm_explainer.render import load_schema

    _, j = run(name, tmp_path_factory)
    for key in ("window", "accounting", "categories", "phases", "steps", "graphs", "memory", "nccl"):
        assert key in j
    jsonschema.Draft202012Validator(load_schema()).validate(j)


def test_pageable_copies_per_step(tmp_path_factory):
    facts, j = run("pageable_h2d", tmp_path_factory)
    ps = j["memory"]["per_step"]
    h2d = [r for r in ps["by_kind_per_step"] if r["direction"] == "Host-to-Device" and r["src_kind_name"] == "Pageable"]
    assert len(h2d) == 1 and h2d[0]["copies_per_step"] == pytest.approx(facts["h2d_count"] / ps["step_count"])
    assert j["memory"]["pageable"]["count"] >= facts["h2d_count"]


def test_stack_specific_recommendation(tmp_path_factory):
    _, j = run("launch_bound", tmp_path_factory)
    top = j["findings"][0]
    assert top["category"] == "launch_overhead"
    assert any(r.startswith("vLLM:") and "--enforce-eager" in r for r in top["recommendation"])


def test_full_window_idle_section_points_to_steady_state(tmp_path_factory):
    from nsys_llm_explainer.render.markdown import render_markdown

    _, j = run("warmup_tail", tmp_path_factory)
    md = render_markdown(j)
    idle_sec = md.split("## GPU idle per device", 1)[1].split("\n## ", 1)[0]
    assert "These numbers cover the whole capture" in idle_sec and "steady-state window" in idle_sec


def test_launch_storm_info_not_for_graph_replays(tmp_path_factory):
    _, demo = run("demo", tmp_path_factory)
    assert any(f["id"] == "launch_storm" and f["severity"] == "low" for f in demo["findings"])
    assert demo["findings"][0]["id"] != "launch_storm"
    _, graphs = run("cuda_graph_node", tmp_path_factory)
    assert not any(f["id"] == "launch_storm" for f in graphs["findings"])
