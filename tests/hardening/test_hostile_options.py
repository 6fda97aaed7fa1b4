"""Hostile option files and option values (docs/SECURITY.md "Option files"): each bad
file or value is refused quickly, in one line naming the option (the flag on the command line, the keyword in the
API's ``OptionError``) and why, without quoting the file; option files within the limits are read. The random
sweep of the same classes is ``test_fuzz_options.py``."""

from __future__ import annotations

import json
import os
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Callable, Dict, Optional, Tuple, Union

import pytest
from hostile import PROG, refused

import nsys_llm_explainer as nle
from nsys_llm_explainer.config import user_file
from nsys_llm_explainer.errors import OptionError

CATS, PHASES = "--categories", "--phase-map"
KEYWORD = {CATS: "categories_file", PHASES: "phase_map"}
BOTH = (CATS, PHASES)


def _bomb(levels: int = 9) -> str:
    names = "abcdefghijklmnop"
    text = f"{names[0]}: &{names[0]} [x, x, x, x, x, x, x, x, x]\n"
    for prev, cur in zip(names, names[1:levels]):
        text += f"{cur}: &{cur} [" + ", ".join([f"*{prev}"] * 9) + "]\n"
    return text + f"rules: [*{names[levels - 1]}]\n"   # 9^9 ≈ 387 million values once expanded


def _merge_bomb() -> str:
    names = "abcdefghijklmnopqrstu"
    text = "a: &a {x1: SECRET, x2: 2}\n"
    for prev, cur in zip(names, names[1:]):
        text += f"{cur}: &{cur} {{<<: [" + ", ".join([f"*{prev}"] * 8) + "]}\n"
    return text + "rules: []\n"


def _fifo(f: Path) -> None:
    os.mkfifo(f)


def _sparse_64mib(f: Path) -> None:
    with open(f, "wb") as fh:
        fh.truncate(64 << 20)


DIGITS = "9" * 5000
#: id → (file name, its content (text or bytes; a function makes it; None: /dev/zero), the flags that read it,
#: what the line must say (None: only that it names the flag and the file), what it must never quote)
OPTION_FILES: Dict[str, Tuple[str, Union[str, bytes, Callable[[Path], None], None], Tuple[str, ...], Optional[str],
                              str]] = {
    # past the limits
    "alias-bomb": ("alias_bomb.yaml", _bomb(), (CATS,), "more than 50,000 values", "x, x"),
    "merge-bomb": ("merge_bomb.yaml", _merge_bomb(), (CATS,), "more than 50,000 values", "SECRET"),
    "cycle": ("cycle.yaml", "rules: &a [SECRET, *a]\n", (CATS,), "a cycle", "SECRET"),
    "deep-yaml": ("deep.yaml", "[" * 100_000 + "]" * 100_000, (CATS,), "nested deeper than 64 levels", "[[["),
    # each node at most 41 levels deep as written, but the alias puts a 31-level list under 41 levels: 72 expanded
    "deep-yaml-through-alias": ("deep_alias.yaml", "a: &a " + "[" * 30 + "SECRET" + "]" * 30 + "\nrules: " + "[" * 40
                                + "*a" + "]" * 40 + "\n", (CATS,), "nested deeper than 64 levels", "SECRET"),
    "deep-yaml-block": ("deep_block.yaml", "".join(" " * i + "-\n" for i in range(0, 400, 2)) + " " * 400
                        + "- SECRET\n", (CATS,), "nested deeper than 64 levels", "SECRET"),
    "deep-json": ("deep.json", "[" * 100_000 + "]" * 100_000, BOTH, "nested deeper than 64 levels", "[[["),
    "deep-json-ok-for-python": ("deep_ok_for_python.json", "[" * 200 + "]" * 200, BOTH,
                                "nested deeper than 64 levels", "[[["),
    "wide-json": ("wide.json", "[" + ",".join(['["SECRET", "b"]'] * 20_000) + "]", BOTH, "more than 50,000 values",
                  "SECRET"),
    "big-yaml": ("big.yaml", "# SECRET\n" * 120_000, (CATS,), "YAML option files are limited to 1,048,576", "SECRET"),
    "integer-of-5000-digits-json": ("big.json", f'{{"rules": [["x", "c"]], "n": {DIGITS}}}', BOTH, None,
                                    DIGITS[:50]),
    "integer-of-5000-digits-yaml": ("big.yaml", f"rules: [[x, c]]\nn: {DIGITS}\n", (CATS,), None, DIGITS[:50]),
    # not a small regular file
    "dev-zero": ("", None, BOTH, "not a regular file", "\x00"),
    "fifo": ("fifo", _fifo, BOTH, "not a regular file", "\x00"),
    "sparse-64-MiB": ("huge.json", _sparse_64mib, BOTH, "the file is 67,108,864 bytes; option files are limited to "
                                                        "8,388,608", "\x00"),
    # not valid, or a rule at fault
    "not-json": ("phases.json", "{not json", (PHASES,), "is not valid JSON", "{not"),
    "bad-yaml": ("bad.yaml", "rules: [\n  - 'SECRET\n", (CATS,), None, "SECRET"),
    "undefined-alias": ("alias.yaml", "rules: *SECRETALIAS\n", (CATS,), "found undefined alias", "SECRET"),
    "rule-of-three": ("bad_rule.json", '{"rules": [["SECRET", "a", "b"]]}', (CATS,),
                      "rule #1 must be a [regex, category] pair of strings", "SECRET"),
    "bad-regex": ("bad_regex.json", '{"rules": [["(SECRET", "a"]]}', (CATS,), "rule #1 has an invalid regex",
                  "SECRET"),
    "unclosed-regex": ("cats.json", '{"rules": [["(unclosed", "gemm"]]}', (CATS,), "rule #1 has an invalid regex",
                       "(unclosed"),
    "repeat-too-large": ("r.json", json.dumps({"rules": [["a{99999999999}", "x"]]}), (CATS,),
                         "rule #1 has an invalid regex", "99999999999"),
    "bad-phase": ("bad_phase.json", '{"prefill": [1, "SECRET"]}', (PHASES,), None, "SECRET"),
    "control-character-yaml": ("ctl.yaml", b'rules: [["a\x01", "c"]]\n', (CATS,), "not valid", "\x01"),
    "nul-character-json": ("ctl.yaml", b'{"rules": [["a\x00b", "c"]]}', (CATS,), "not valid", "\x00"),
}


@pytest.mark.parametrize("case", list(OPTION_FILES))
def test_a_bad_option_file_is_one_line_quickly(tmp_path: Path, demo_trace: Path, capsys, case: str) -> None:
    """Each flag that reads the file: exit 2, one line ``error: FLAG FILE…`` saying why, in under 5 s, quoting
    nothing of the file, no output; the API: ``OptionError`` naming the keyword, one line, the same reason."""
    name, content, flags, says, never = OPTION_FILES[case]
    f = Path("/dev/zero") if content is None else tmp_path / name
    if callable(content):
        content(f)
    elif isinstance(content, bytes):
        f.write_bytes(content)
    elif content is not None:
        f.write_text(content)
    for flag in flags:
        t0 = time.perf_counter()
        line = refused(capsys, [str(demo_trace), "--out", str(tmp_path / "o"), flag, str(f)])
        assert time.perf_counter() - t0 < 5
        assert line.startswith(f"{PROG}: error: {flag} {f}") and (says is None or says in line), line
        assert never not in line.replace(str(f), "") and "SECRET" not in line.replace(str(f), ""), line
        assert not (tmp_path / "o").exists()
        keyword = KEYWORD[flag]
        with pytest.raises(OptionError) as ei:
            nle.analyze(str(demo_trace), **{keyword: str(f)})
        msg = str(ei.value)
        assert ei.value.option == keyword and msg.startswith(f"{keyword} {f}") and (says is None or says in msg), msg
        assert "\n" not in msg and never not in msg.replace(str(f), "") and "SECRET" not in msg.replace(str(f), "")


def test_a_file_that_reads_past_its_stated_size_is_refused_at_the_limit(tmp_path: Path, demo_trace: Path,
                                                                         capsys) -> None:
    """``/proc/self/pagemap`` is a regular file of size 0 (its stat says so) that reads on for gigabytes: the read
    stops at 8 MiB + 1 byte and refuses it, for both flags, in one line; nothing is written."""
    f = Path("/proc/self/pagemap")
    assert f.stat().st_size == 0
    why = "the file is larger than 8,388,608 bytes, the limit for option files"
    for flag, line in ((CATS, f"{CATS} {f}: cannot read the file ({why})"), (PHASES, f"{PHASES} {f}: {why}")):
        got = refused(capsys, [str(demo_trace), "--out", str(tmp_path / "o"), flag, str(f)])
        assert got == f"{PROG}: error: {line}"
    assert not (tmp_path / "o").exists()


def test_yaml_without_pyyaml_says_so_or_gives_the_json_error(tmp_path: Path, demo_trace: Path, capsys,
                                                            monkeypatch) -> None:
    """PyYAML not installed: a ``.yaml`` rules file is refused with how to get it or what to use instead; a file
    of another suffix that is not JSON gets the JSON error (YAML being only its second try)."""
    monkeypatch.setitem(sys.modules, "yaml", None)   # import yaml raises ImportError
    text = "rules:\n  - [gemm, matmul]\n"
    for name, why in (("rules.yaml", "YAML needs PyYAML (pip install pyyaml); use JSON instead"),
                      ("rules.txt", "not valid JSON (Expecting value at line 1)")):
        f = tmp_path / name
        f.write_text(text)
        line = refused(capsys, [str(demo_trace), "--out", str(tmp_path / "o"), CATS, str(f)])
        assert line == f"{PROG}: error: {CATS} {f}: {why}"
        with pytest.raises(OptionError) as ei:
            nle.analyze(str(demo_trace), categories_file=str(f))
        assert ei.value.option == "categories_file" and str(ei.value) == f"categories_file {f}: {why}"
    assert not (tmp_path / "o").exists()


def test_a_rule_nested_past_the_matchers_stack_is_one_line(tmp_path: Path, demo_trace: Path, capsys) -> None:
    """A rule of 300 nested groups: Python's ``re`` takes it (so the file is read), the ``regex`` matcher that runs
    user rules does not (its parser recurses deeper per group): one line naming the file and the rule, exit 2 (on
    the command line cut to 1,000 characters in the middle of the 1,204-character rule, the reason kept whole)."""
    rx = "(?:" * 300 + "gemm" + ")" * 300
    f = tmp_path / "nested.json"
    f.write_text(json.dumps({"rules": [["attn", "attention"], [rx, "matmul"]]}))
    reason = "is not a valid regular expression: a repeat count or nesting beyond what the matcher takes"
    why = f"{f}: rule #2 {rx!r} {reason}"
    line = refused(capsys, [str(demo_trace), "--out", str(tmp_path / "o"), CATS, str(f)])
    head = f"{PROG}: error: {CATS} {f}: rule #2 '(?:(?:(?:"
    assert line.startswith(head) and line.endswith(f"))))' {reason}") and line.count("…") == 1, line
    assert len(line) == len(f"{PROG}: error: ") + 1000 and not (tmp_path / "o").exists()
    with pytest.raises(OptionError) as ei:
        nle.analyze(str(demo_trace), categories_file=str(f))
    assert ei.value.option == "categories_file" and str(ei.value) == f"categories_file {why}"


# ------------------------------------------------------------------------------------------ option values
BAD_VALUES = {   # id → (arguments, the keyword and its value in the API, what the line says after "error: ")
    "regex-repeat-too-large": (["--step-marker", "a{99999999999}"], ("step_marker", "a{99999999999}"),
                               "--step-marker is not a valid regular expression"),
    "regex-unclosed": (["--step-marker", "(oops"], ("step_marker", "(oops"),
                       "--step-marker is not a valid regular expression: missing ), unterminated subpattern"),
    "window-nvtx-missing": (["--window-nvtx", "no such range"], ("window_nvtx", "no such range"),
                            "--window-nvtx 'no such range': no NVTX range has exactly this name"),
    "window-not-integers": (["--window", "abc"], ("window", "abc"),
                            "--window expects START_NS:END_NS (integers), got 'abc'"),
    "out-missing": ([], None, "the following arguments are required: -o/--out"),
}


@pytest.mark.parametrize("case", list(BAD_VALUES))
def test_a_bad_option_value_is_one_line_naming_the_flag(tmp_path: Path, demo_trace: Path, capsys, case: str) -> None:
    args, api, says = BAD_VALUES[case]
    out = ["--out", str(tmp_path / "o")] if args else []
    line = refused(capsys, [str(demo_trace), *out, *args])
    assert line.startswith(f"{PROG}: error: {says}"), line
    assert not (tmp_path / "o").exists()
    if api is not None:
        with pytest.raises(OptionError) as ei:
            nle.analyze(str(demo_trace), **{api[0]: api[1]})
        assert ei.value.option == api[0] and "\n" not in str(ei.value)


@pytest.mark.parametrize("kw, value", [("nvtx_coverage_warn_threshold", 10 ** 400), ("top", -10 ** 5000),
                                       ("top", 10 ** 5000), ("top", "9" * 5000), ("workers", 10 ** 5000)],
                         ids=["threshold_10e400", "top_-10e5000", "top_10e5000", "top_str", "workers_10e5000"])
def test_numbers_past_float_or_repr_limits_are_option_errors(demo_trace: Path, kw, value) -> None:
    with pytest.raises(OptionError) as e:
        nle.analyze(str(demo_trace), **{kw: value})
    assert e.value.option == kw and len(str(e.value)) < 300


# ------------------------------------------------------------------------------------------ within the limits
def test_alias_bomb_is_refused_in_bounded_memory(tmp_path: Path) -> None:
    tracemalloc.start()
    try:
        for text in (_bomb(12), _merge_bomb()):
            with pytest.raises(OptionError, match="^categories_file f: more than 50,000 values"):
                user_file.load_yaml(text, "categories_file", "f")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 32 << 20


def test_real_option_files_are_well_within_the_limits(tmp_path: Path) -> None:
    rules = [[f"kernel_{i}|gemm_{i}", f"cat{i % 7}"] for i in range(2000)]
    f = tmp_path / "rules.yaml"
    f.write_text("defaults: &d [nccl, comms]\nrules:\n" + "".join(f"  - [{a!r}, {b}]\n" for a, b in rules)
                 + "  - *d\n")
    from nsys_llm_explainer.config.categories import load_rules
    got = load_rules(None, f)
    assert len(got.user_rules) == 2001 and got.user_rules[-1] == ("nccl", "comms")
