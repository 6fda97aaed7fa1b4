"""One option table (options.py) builds every parser, the API's keyword checks, the defaults and report.json's
``options``; options are named by their flag on the command line and by their keyword in the API. Every test
iterates over the table, so an option added to it (one field of ``Options``) is checked here without more code."""

from __future__ import annotations

import argparse
import ast
import dataclasses
import json
import pickle
import re
from pathlib import Path
from typing import Dict, Set

import pytest

import nsys_llm_explainer as nle
from nsys_llm_explainer.cli import _compare_parser, _demo_parser, _parser, main
from nsys_llm_explainer.errors import InputError, OptionConflict, OptionError
from nsys_llm_explainer.options import (
    COMMANDS,
    OPTION_NAMES,
    OPTIONS,
    TABLE,
    Options,
    check_option,
    flag_of,
    options_from_args,
    options_from_kwargs,
)

ROOT = Path(__file__).resolve().parents[2]
PARSERS = {"main": _parser, "compare": _compare_parser, "demo": _demo_parser}
MINIMAL = {"main": ["t.sqlite", "--out", "o"], "compare": ["a.sqlite", "b.sqlite", "--out", "o"],
           "demo": ["--out", "o"]}


def _flags(p: argparse.ArgumentParser) -> Set[str]:
    return {s for a in p._actions for s in a.option_strings} - {"-h", "--help", "--version"}


def test_the_table_is_the_options_fields() -> None:
    """Each field of Options is declared with its option (name, flags, help, check, default given once)."""
    assert OPTION_NAMES == tuple(f.name for f in dataclasses.fields(Options)) == tuple(o.name for o in OPTIONS)
    assert len({o.name for o in TABLE}) == len(TABLE)
    for f, o in zip(dataclasses.fields(Options), OPTIONS):
        assert f.metadata["option"].name == "" and f.default == o.default == getattr(Options(), o.name), o.name
        assert o.check is not None, o.name
        assert o.flags or o.commands == (), o.name        # an option without a flag is the API's only
        if o.flags:
            assert o.help and o.flag.startswith("--") and set(o.commands) <= set(COMMANDS), o.name
    seen = [s for o in TABLE for s in o.flags]
    assert len(seen) == len(set(seen)), "a flag is in the table twice"
    for o in TABLE:   # a default shown in --help is argparse's %(default)s, never written out a second time
        if o.default not in (None, True, False):
            assert not re.search(rf"default:? {re.escape(str(o.default))}\b", o.help), o.name


def test_every_parser_flag_comes_from_the_table() -> None:
    """The main, compare and demo parsers take exactly the table's flags for that command (plus -h, --version),
    and cli.py adds no flag itself (only the positional traces and --version)."""
    for command, make in PARSERS.items():
        want = {s for o in TABLE if command in o.commands for s in o.flags}
        assert _flags(make()) == want, command
    assert {"--window", "--window-nvtx", "--reader", "--nvtx-coverage-warn-threshold"} <= _flags(_compare_parser())
    assert _flags(_demo_parser()) == {"-o", "--out", "--force", "--scenario", "--top", "--timeline-events", "-q",
                                      "--quiet"}
    tree = ast.parse((ROOT / "src" / "nsys_llm_explainer" / "cli.py").read_text(encoding="utf-8"))
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "attr", "") == "add_argument"]
    added = [a.value for n in calls for a in n.args if isinstance(a, ast.Constant)]
    assert sorted(added) == ["--version", "traces", "traces"], added    # the main command's and compare's


def test_parser_defaults_are_the_options_defaults() -> None:
    for command, make in PARSERS.items():
        ns = make().parse_args(MINIMAL[command])
        assert options_from_args(ns) == Options(), command
        for o in TABLE:
            if command in o.commands and o.kind not in ("on", "off") and not o.required:
                assert getattr(ns, o.dest) == o.default, (command, o.name)
    ns = _parser().parse_args(MINIMAL["main"])
    assert (ns.jobs, ns.scheduler, ns.force, ns.quiet) == (None, None, False, False)


@pytest.mark.parametrize("command", ["main", "compare", "demo"])
def test_q_is_the_short_form_of_quiet(command: str) -> None:
    """``-q`` is ``--quiet`` on every command that writes an output (declared once, in the table)."""
    assert [o.flags for o in TABLE if o.name == "quiet"] == [("-q", "--quiet")]
    p = PARSERS[command]()
    assert p.parse_args(MINIMAL[command] + ["-q"]).quiet is True
    assert p.parse_args(MINIMAL[command] + ["--quiet"]).quiet is True
    assert p.parse_args(MINIMAL[command]).quiet is False


def test_q_silences_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["demo", "-q", "-o", str(tmp_path / "o")]) == 0
    out = capsys.readouterr()
    assert out.out == "" and out.err == ""
    assert (tmp_path / "o" / "report.json").is_file()


def test_each_flag_sets_its_option_on_every_command() -> None:
    argv = ["--window-nvtx", "decode", "--reader", "sqlite3", "--top", "7", "--no-nvtx-kernel-map",
            "--include-memcpy-in-busy", "--window", "10:20", "--step-range", "step", "--step-marker", "argmax",
            "--nvtx-coverage-warn-threshold", "0.25"]
    got = {c: options_from_args(PARSERS[c]().parse_args(MINIMAL[c] + argv)) for c in ("main", "compare")}
    assert got["main"] == got["compare"] == Options(
        top=7, nvtx_coverage_warn_threshold=0.25, nvtx_kernel_map=False, include_memcpy_in_busy=True,
        step_marker="argmax", window=(10, 20), window_nvtx="decode", step_range="step", reader="sqlite3")
    assert options_from_args(_demo_parser().parse_args(["--out", "o", "--top", "3"])) == Options(top=3)


@pytest.mark.parametrize("name", OPTION_NAMES)
def test_a_bad_value_names_the_keyword_in_the_api_and_the_flag_on_the_command_line(name: str) -> None:
    with pytest.raises(OptionError) as ei:
        options_from_kwargs(**{name: object()})
    e = ei.value
    assert isinstance(e, InputError) and e.exit_code == 2 and e.option == name
    assert str(e).startswith(name + " ") and "\n" not in str(e)
    assert e.worded(flag_of).startswith(flag_of(name) + " ")


def test_unknown_keyword_lists_the_known_ones() -> None:
    with pytest.raises(InputError) as ei:
        nle.analyze("t.sqlite", topp=3, windw="1:2")
    assert not isinstance(ei.value, OptionError)
    assert str(ei.value) == f"unknown options 'topp', 'windw' (known: {', '.join(OPTION_NAMES)})"


def test_flag_names() -> None:
    assert [flag_of(n) for n in ("top", "phase_map", "nvtx_kernel_map", "categories_file", "categories", "out",
                                 "jobs", "labels")] == [
        "--top", "--phase-map", "--no-nvtx-kernel-map", "--categories", "--categories", "--out", "--jobs", "--labels"]


def test_option_errors_survive_a_worker_process() -> None:
    """Cluster workers raise them in another process: they come back pickled, wording intact."""
    for e in (OptionError("window_nvtx", "'x': no NVTX range has exactly this name"),
              OptionError("labels", "a label is empty", ": "), OptionConflict("categories", "categories_file")):
        back = pickle.loads(pickle.dumps(e))
        assert type(back) is type(e) and str(back) == str(e) and back.worded(flag_of) == e.worded(flag_of)
    assert str(OptionConflict("categories", "categories_file")) == "give either categories or categories_file, not both"


def test_report_json_options_follow_the_table(tmp_path: Path) -> None:
    """report.json ``options``: every option of the table but ``reader`` (the numbers do not depend on it), in
    field order; parsed values serialise themselves."""
    assert Options().to_dict() == {
        "top": 20, "phase_map": None, "nvtx_coverage_warn_threshold": 0.7, "nvtx_kernel_map": True,
        "include_memcpy_in_busy": False, "categories_file": None, "step_marker": None, "window": None,
        "window_nvtx": None, "step_range": None, "categories": None, "timeline_events": 50_000}
    assert list(Options().to_dict()) == [o.name for o in OPTIONS if o.in_report]
    rules = tmp_path / "r.json"
    rules.write_text(json.dumps({"rules": [["slot", "prep"]]}))
    d = options_from_kwargs(phase_map={"tok": "decode"}, window=(5, 9), categories_file=str(rules)).to_dict()
    assert d["window"] == [5, 9] and d["categories_file"] == str(rules)
    assert d["phase_map"]["phases"] == [["tok", ["decode"]]] and d["phase_map"]["source"] == "user"
    assert "decoder" in d["phase_map"]["ignore"] and "execute_model" in d["phase_map"]["step_keywords"]
    c = d["categories"]
    assert (c["preset"], c["user_rules"], c["replace"], c["source"]) == ("auto", [["slot", "prep"]], False, str(rules))
    assert [p["name"] for p in c["presets"]] == ["generic", "vllm", "sglang", "trtllm"]
    json.dumps(d, allow_nan=False)


def test_run_options_checked_by_the_table() -> None:
    assert check_option("jobs", None) is None and check_option("jobs", 3) == 3
    with pytest.raises(OptionError, match=r"^jobs must be ≥ 1, got 0$"):
        check_option("jobs", 0)
    with pytest.raises(OptionError, match=r"^jobs must be an integer, got '2'$"):
        nle.analyze_cluster(["a.sqlite", "b.sqlite"], jobs="2")
    assert check_option("labels", "a,b") == ["a", "b"] and check_option("labels", ("x", "y")) == ["x", "y"]
    with pytest.raises(OptionError, match="^labels must be a comma-separated string or a sequence"):
        check_option("labels", 3)


# ------------------------------------------------------------------------------ worded at each boundary
def test_errors_found_during_the_analysis_name_the_keyword_in_the_api(demo_trace: Path) -> None:
    """An analysis that meets the trace raises the option by name: the API says ``window_nvtx``, …"""
    with pytest.raises(OptionError) as ei:
        nle.analyze(str(demo_trace), window_nvtx="no such range")
    assert str(ei.value) == "window_nvtx 'no such range': no NVTX range has exactly this name"
    with pytest.raises(OptionError) as ei:
        nle.analyze(str(demo_trace), window=(1, 2))
    assert re.fullmatch(r"window 1:2 does not overlap the trace \(\d+:\d+\)", str(ei.value)), str(ei.value)
    with pytest.raises(OptionError, match=r"^step_marker is not a valid regular expression"):
        nle.analyze(str(demo_trace), step_marker="(oops")
    with pytest.raises(OptionError, match=r"^labels has 1 label for 2 traces; give one per trace$"):
        nle.compare([str(demo_trace), str(demo_trace)], labels=["one"])


def test_errors_found_during_the_analysis_name_the_flag_on_the_command_line(demo_trace: Path, tmp_path: Path,
                                                                             capsys: pytest.CaptureFixture) -> None:
    """… and the command line ``--window-nvtx``: one line, exit code 2, nothing written."""
    cases: Dict[str, list] = {
        "nsys-llm-explain: error: --window-nvtx 'no such range': no NVTX range has exactly this name":
            [str(demo_trace), "--window-nvtx", "no such range"],
        "nsys-llm-explain: error: --top must be at least 1 (got 0)": [str(demo_trace), "--top", "0"],
        "nsys-llm-explain: error: --jobs must be ≥ 1, got 0": [str(demo_trace), str(demo_trace), "--jobs", "0"],
        "nsys-llm-explain: error: --labels has 1 label for 2 traces; give one per trace":
            ["compare", str(demo_trace), str(demo_trace), "--labels", "one"],
    }
    for want, argv in cases.items():
        assert main([*argv, "--out", str(tmp_path / "o"), "--quiet"]) == 2, argv
        assert capsys.readouterr().err.splitlines() == [want]
        assert not (tmp_path / "o").exists()


# ------------------------------------------------------------------------------ docs follow the table
def test_readme_names_every_flag_and_its_default() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for o in TABLE:
        for f in o.flags:
            assert re.search(rf"(?<![\w-]){re.escape(f)}(?![\w-])", readme), f
        if "%(default)s" in o.help:
            assert re.search(rf"`{o.flags[0]}[^`]*`[^·]*default {o.default}\b", readme), o.name


def test_compare_doc_lists_the_analysis_flags() -> None:
    doc = " ".join((ROOT / "docs" / "COMPARE.md").read_text(encoding="utf-8").split())
    m = re.search(r"built from one table, `options.OPTIONS`: (.*?); `\.nsys-rep`", doc)
    assert m, "docs/COMPARE.md lost its list of the analysis options"
    assert re.findall(r"`(--[\w-]+)`", m.group(1)) == [o.flags[0] for o in OPTIONS if "compare" in o.commands]


def test_a_choice_is_read_alike_by_the_command_line_and_the_api(tmp_path):
    """`--reader ADBC` and `reader="ADBC"` are the same choice (case-insensitive on both sides)."""
    import argparse

    from nsys_llm_explainer.options import add_flags, options_from_kwargs

    p = argparse.ArgumentParser()
    add_flags(p, "main")
    assert p.parse_args(["--reader", "ADBC", "--out", str(tmp_path)]).reader == "adbc"
    assert options_from_kwargs(reader="ADBC").reader == "adbc"
