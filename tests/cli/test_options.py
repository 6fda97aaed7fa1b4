"""Typed options (options.py) and the config package: parsing and validation, hand-checked values."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from nsys_llm_explainer.cli import _parser
from nsys_llm_explainer.config.categories import CategoryRules, builtin_preset, load_rules
from nsys_llm_explainer.config.phase_map import PhaseMap, build_phase_map, parse_phase_map, read_phase_map_file
from nsys_llm_explainer.config.window import check_window
from nsys_llm_explainer.errors import InputError, OptionError
from nsys_llm_explainer.options import OPTION_NAMES, Options, flag_of, options_from_args, options_from_kwargs


def _msg(exc: pytest.ExceptionInfo) -> str:
    text = str(exc.value)
    assert "\n" not in text
    return text


def _cli(exc: pytest.ExceptionInfo) -> str:
    """The message as the command line words it (the option by its flag)."""
    assert isinstance(exc.value, OptionError), exc.value
    return exc.value.worded(flag_of)


# ---------------------------------------------------------------------------------------------- Options
def test_defaults_and_field_names() -> None:
    o = options_from_kwargs()
    assert o == Options()
    assert (o.top, o.phase_map, o.nvtx_coverage_warn_threshold, o.nvtx_kernel_map, o.include_memcpy_in_busy,
            o.categories_file, o.step_marker, o.window, o.window_nvtx, o.step_range, o.categories, o.timeline_events,
            o.reader) == (20, None, 0.7, True, False, None, None, None, None, None, None, 50_000, "auto")
    assert OPTION_NAMES == ("top", "phase_map", "nvtx_coverage_warn_threshold", "nvtx_kernel_map",
                            "include_memcpy_in_busy", "categories_file", "step_marker", "window", "window_nvtx",
                            "step_range", "categories", "timeline_events", "reader")
    with pytest.raises(dataclasses.FrozenInstanceError):
        o.top = 5  # type: ignore[misc]


def test_top() -> None:
    assert options_from_kwargs(top=1).top == 1
    with pytest.raises(InputError) as ei:
        options_from_kwargs(top=0)
    assert _msg(ei) == "top must be at least 1 (got 0)"
    assert ei.value.option == "top" and _cli(ei) == "--top must be at least 1 (got 0)"
    with pytest.raises(InputError, match=r"^top must be an integer, got '5'$"):
        options_from_kwargs(top="5")
    with pytest.raises(InputError, match="top must be an integer"):
        options_from_kwargs(top=True)


def test_unknown_option() -> None:
    with pytest.raises(InputError) as ei:
        options_from_kwargs(topp=3)
    assert _msg(ei).startswith("unknown option 'topp' (known: top, phase_map,")


def test_threshold_flags_and_strings() -> None:
    assert options_from_kwargs(nvtx_coverage_warn_threshold=0).nvtx_coverage_warn_threshold == 0.0
    for bad in (1.5, -0.1, float("nan"), "0.5"):
        with pytest.raises(InputError, match="nvtx_coverage_warn_threshold must be a number between 0 and 1"):
            options_from_kwargs(nvtx_coverage_warn_threshold=bad)
    o = options_from_kwargs(nvtx_kernel_map=False, include_memcpy_in_busy=True, step_range="", step_marker="")
    assert (o.nvtx_kernel_map, o.include_memcpy_in_busy, o.step_range, o.step_marker) == (False, True, None, None)
    with pytest.raises(InputError, match="^nvtx_kernel_map must be True or False, got 1$"):
        options_from_kwargs(nvtx_kernel_map=1)
    with pytest.raises(InputError) as ei:
        options_from_kwargs(step_marker="(oops")
    assert _msg(ei).startswith("step_marker is not a valid regular expression: missing ), unterminated subpattern")
    with pytest.raises(InputError, match="^step_range must be a string, got int$"):
        options_from_kwargs(step_range=3)
    with pytest.raises(InputError, match="^window_nvtx must be a non-empty NVTX range name$"):
        options_from_kwargs(window_nvtx="")


def test_window() -> None:
    assert options_from_kwargs(window="100:200").window == (100, 200)
    assert options_from_kwargs(window=(5, 10)).window == (5, 10)
    assert options_from_kwargs(window="").window is None
    with pytest.raises(InputError) as ei:
        options_from_kwargs(window="200:100")
    assert _msg(ei) == "window end (100) must be after its start (200)"
    with pytest.raises(InputError, match=r"^window expects START_NS:END_NS \(integers\), got 'abc'$"):
        options_from_kwargs(window="abc")
    with pytest.raises(InputError, match="window expects START_NS:END_NS or a"):
        options_from_kwargs(window=(1.5, 3))


def test_phase_map_option(tmp_path: Path) -> None:
    o = options_from_kwargs(phase_map={"tok": "decode", "lay": ["layers", ""]})
    assert o.phase_map == PhaseMap((("tok", ("decode",)), ("lay", ("layers",))), "user",
                                   o.phase_map.ignore, o.phase_map.step_keywords)
    assert o.phase_map.as_dict() == {"tok": ["decode"], "lay": ["layers"]} and o.phase_map.names == ["tok", "lay"]
    assert "decoder" in o.phase_map.ignore and "execute_model" in o.phase_map.step_keywords
    assert options_from_kwargs(phase_map={}).phase_map is None          # empty map: presets
    assert options_from_kwargs(phase_map="").phase_map is None          # empty path: presets, not "file not found"
    f = tmp_path / "pm.json"
    f.write_text(json.dumps({"prefill": ["ctx"], "decode": ["gen"]}))
    assert options_from_kwargs(phase_map=str(f)).phase_map.as_dict() == {"prefill": ["ctx"], "decode": ["gen"]}
    with pytest.raises(InputError, match="^phase_map: phase name 'unmapped' is reserved$"):
        options_from_kwargs(phase_map={"unmapped": ["x"]})
    f.write_text(json.dumps({"decode": [1, 2]}))
    with pytest.raises(InputError) as ei:
        options_from_kwargs(phase_map=f)
    assert _msg(ei) == f'phase_map {f} must be a JSON object {{"phase": ["substring", ...]}}'
    with pytest.raises(InputError, match="^phase_map must be a JSON file path or a mapping"):
        options_from_kwargs(phase_map=["decode"])


def test_categories_option(tmp_path: Path) -> None:
    f = tmp_path / "c.json"
    f.write_text(json.dumps({"rules": [["slot_mapping", "prep"]]}))
    o = options_from_kwargs(categories_file=str(f))
    assert o.categories_file == str(f)
    assert o.categories.preset == "auto" and o.categories.user_rules == (("slot_mapping", "prep"),)
    assert o.categories.rules == (("slot_mapping", "prep"),) + tuple(builtin_preset("generic").rules)
    same = options_from_kwargs(categories=f)          # a path given as ``categories``
    assert same.categories == o.categories and same.categories_file == str(f)
    assert options_from_kwargs(categories=o.categories).categories is o.categories
    with pytest.raises(InputError, match="^give either categories or categories_file, not both$"):
        options_from_kwargs(categories=o.categories, categories_file=str(f))
    with pytest.raises(InputError) as ei:
        options_from_kwargs(categories_file=str(tmp_path / "missing.json"))
    assert _msg(ei).startswith(f"categories_file {tmp_path / 'missing.json'}: cannot read the file")


# ---------------------------------------------------------------------------------------------- command line
def test_options_from_args(tmp_path: Path) -> None:
    pm = tmp_path / "pm.json"
    pm.write_text(json.dumps({"decode": ["gen"]}))
    ns = _parser().parse_args(["t.sqlite", "--out", "o", "--top", "7", "--window", "10:20", "--phase-map", str(pm),
                               "--no-nvtx-kernel-map", "--step-range", "execute_model"])
    o = options_from_args(ns)
    assert (o.top, o.window, o.nvtx_kernel_map, o.step_range) == (7, (10, 20), False, "execute_model")
    assert o.phase_map.as_dict() == {"decode": ["gen"]} and o.phase_map.source == "user"
    # --phase-map '' (an unset shell variable, say) is no phase map: the presets, as without the flag
    assert options_from_args(_parser().parse_args(["t.sqlite", "--out", "o", "--phase-map", ""])).phase_map is None
    nope = tmp_path / "nope.json"
    for argv, option, rest in (
        (["--top", "0"], "top", " must be at least 1 (got 0)"),
        (["--window", "5:5"], "window", " end (5) must be after its start (5)"),
        (["--nvtx-coverage-warn-threshold", "2"], "nvtx_coverage_warn_threshold", " must be a number between 0"),
        (["--phase-map", str(nope)], "phase_map", f" file not found: {nope}"),
        (["--categories", str(nope)], "categories_file", f" {nope}: cannot read"),
        (["--step-marker", "[x"], "step_marker", " is not a valid regular expression"),
    ):
        with pytest.raises(OptionError) as ei:
            options_from_args(_parser().parse_args(["t.sqlite", "--out", "o", *argv]))
        assert ei.value.option == option
        assert _cli(ei).startswith(argv[0] + rest), (argv, _cli(ei))      # the command line: the flag
        assert _msg(ei).startswith(option + rest), (argv, _msg(ei))        # the API: the keyword


# ---------------------------------------------------------------------------------------------- config
def test_parse_window() -> None:
    assert check_window(" 10 : 20 ") == (10, 20)
    assert check_window("-5:0") == (-5, 0)
    assert check_window((1, 2)) == (1, 2)
    for bad, msg in (("1:2:3", "--window expects START_NS:END_NS (integers), got '1:2:3'"),
                     ("a:b", "--window expects START_NS:END_NS (integers), got 'a:b'"),
                     ("7:3", "--window end (3) must be after its start (7)")):
        with pytest.raises(OptionError) as ei:
            check_window(bad)
        assert _cli(ei) == msg and str(ei.value) == msg[2:]


def test_phase_map_config(tmp_path: Path) -> None:
    pm = build_phase_map(None)
    assert pm.source.startswith("preset:") and pm.names[:3] == ["prefill", "decode", "other"]
    assert parse_phase_map({"a": "x", "b": ["", "y", "z"]}) == {"a": ["x"], "b": ["y", "z"]}
    with pytest.raises(OptionError, match=r'^phase_map must be a JSON object \{"phase"'):
        parse_phase_map({"a": [None]})
    f = tmp_path / "bad.json"
    f.write_text("{not json")
    with pytest.raises(OptionError) as ei:
        read_phase_map_file(f)
    assert _msg(ei).startswith(f"phase_map {f} is not valid JSON: Expecting property name")
    assert _cli(ei).startswith(f"--phase-map {f} is not valid JSON: Expecting property name")


def test_categories_yaml_parses_into_rules(tmp_path: Path) -> None:
    pytest.importorskip("yaml")
    f = tmp_path / "cats.yaml"
    f.write_text("rules:\n  - ['flash', 'fa']\n  - {regex: 'nvjet|gemm', category: matmul}\nreplace: false\n")
    r = load_rules(None, str(f))
    assert isinstance(r, CategoryRules)
    assert r.user_rules == (("flash", "fa"), ("nvjet|gemm", "matmul"))
    assert r.rules[:2] == r.user_rules and r.rules[2:] == tuple(builtin_preset("generic").rules)
    assert (r.preset, r.replace, r.source) == ("auto", False, str(f))
    assert r.categories[-2:] == ["fa", "matmul"]
    # auto carries every preset it may switch to, so the analysis reads no file
    assert [p.name for p in r.presets] == ["generic", "vllm", "sglang", "trtllm"]
    f.write_text("- [nccl, comm]\n")              # a bare list of rules; replace defaults to false
    assert load_rules("vllm", str(f)).rules[0] == ("nccl", "comm")
    f.write_text("rules: [[nccl, comm]]\nreplace: true\n")
    r = load_rules("vllm", str(f))
    assert (r.preset, r.rules, r.reason) == ("custom", (("nccl", "comm"),), f"rules replaced by {f}")
    f.write_text("rules: [[nccl]]\n")
    with pytest.raises(OptionError) as ei:
        load_rules(None, str(f))
    # the shape of the bad value, never the file's text; the command line names the flag, the API the keyword
    want = "rule #1 must be a [regex, category] pair of strings, got a list of 1 item(s)"
    assert _cli(ei) == f"--categories {f}: {want}"
    assert _msg(ei) == f"categories_file {f}: {want}"


def test_reader() -> None:
    assert options_from_kwargs(reader="SQLITE3").reader == "sqlite3"
    assert options_from_kwargs(reader="adbc").reader == "adbc"
    with pytest.raises(InputError, match="reader must be one of auto, adbc, sqlite3"):
        options_from_kwargs(reader="duckdb")


