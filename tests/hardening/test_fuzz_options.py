"""Property test: hostile option files and option values.

* **Option files** (``--categories`` / ``categories_file``, ``--phase-map`` / ``phase_map``): each seed draws one
  file — nested past the depth limit (JSON, YAML flow or block, lists and objects at random), past the value limit
  (wide, or a YAML alias / merge-key bomb of random fan-out and depth), an alias cycle, a huge scalar or file, the
  wrong types at any place, a truncated or garbled file, bytes that are not UTF-8 — every scalar holding a marker
  that must never be echoed. The API raises :class:`OptionError` naming the keyword and the file, the command line
  exits 2 with one inert line naming the flag, both within a time bound, never quoting the file, and saying why
  (the limit, the parser's reason, the rule at fault). A well-formed file of hostile names is accepted, and its
  category names stay inert in the report.
* **Option values**: every option of the table (``options.OPTIONS``) gets random values of every type through the
  API (a parsed value, or :class:`OptionError` naming that keyword in one line) and random strings through the
  command line (exit 0 and a complete report, or exit 2 with one inert line naming the flag); where the rule is
  simple (integers, fractions, choices, regular expressions, files, NVTX names) the outcome is the one it gives.
"""

from __future__ import annotations

import json
import math
import numbers
import os
import random
import re
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

import pytest
from conftest import built_scenario
from fuzz_inputs import HIDDEN, hostile_name, replayable, seeds

import nsys_llm_explainer as nle
from nsys_llm_explainer.cli import main
from nsys_llm_explainer.errors import InputError, OptionError
from nsys_llm_explainer.options import OPTIONS, flag_of, options_from_kwargs

SECRET = "SECRET"
#: CPU seconds (this process's, ``time.process_time``: other processes loading the machine do not count) a refusal
#: may take: a bound on blow-ups (deep nesting, alias expansion), which would take minutes; the largest fuzz files
#: (~450 KB of YAML up to the 50,000-value limit) take ~2 s of pure-Python parsing
TIME_BOUND_S = 5.0
DEPTH, VALUES = "nested deeper than 64 levels", "more than 50,000 values"
YAML_BIG, FILE_BIG = "YAML option files are limited to", "option files are limited to 8,388,608"
RULE_PHRASES = ("expected an object", '"rules" must be', "rule #", '"replace" must be')


def one_line(err: str) -> str:
    got = [ln for ln in err.splitlines() if ln.strip()]
    assert len(got) == 1 and "Traceback" not in err, err[-3000:]
    bad = HIDDEN.search(got[0])
    assert bad is None, f"raw {bad.group()!a} in the error line"
    return got[0]


# ------------------------------------------------------------------------------------------------ option files
def _secret(rng: random.Random) -> str:
    return SECRET + str(rng.randint(0, 999))


def _nested(rng: random.Random, depth: int, quote: str = '"') -> str:
    """``depth`` levels of lists and objects as JSON (or YAML flow style: ``quote=""``); keys and leaves carry the
    marker, some lists have siblings after the nested one. Built as text: no recursion."""
    opens, closes = [], []
    for _ in range(depth - 1):
        if rng.random() < 0.5:
            opens.append("[")
            closes.append("".join(f", {quote}{_secret(rng)}{quote}" for _ in range(rng.randint(0, 2))) + "]")
        else:
            opens.append(f"{{{quote}{_secret(rng)}{quote}: ")
            closes.append("}")
    return "".join(opens) + f"{quote}{_secret(rng)}{quote}" + "".join(reversed(closes))


def _yaml_block(depth: int, leaf: str) -> str:
    return "".join(" " * i + "-\n" for i in range(0, 2 * depth, 2)) + " " * 2 * depth + f"- {leaf}\n"


def _bomb(rng: random.Random, merge: bool) -> str:
    fan = rng.randint(3, 9)
    levels = next(n for n in range(2, 30) if fan ** n > 60_000)
    names = [f"{SECRET}{i}" for i in range(levels + 1)]
    if merge:
        text = f"{names[0]}: &{names[0]} {{x1: {SECRET}, x2: 2}}\n"
        for prev, cur in zip(names, names[1:]):
            text += f"{cur}: &{cur} {{<<: [" + ", ".join([f"*{prev}"] * fan) + "]}\n"
        return text + "rules: []\n"
    text = f"{names[0]}: &{names[0]} [" + ", ".join([SECRET] * fan) + "]\n"
    for prev, cur in zip(names, names[1:]):
        text += f"{cur}: &{cur} [" + ", ".join([f"*{prev}"] * fan) + "]\n"
    return text + f"rules: [*{names[-1]}]\n"


def bad_regexes(s: str) -> List[List[str]]:
    """Rules whose regex does not compile (``s``: the marker). Those whose ``re.error`` quotes a group or character
    name are :func:`test_a_bad_regex_in_an_option_file_is_not_quoted` (a known leak, not drawn here)."""
    return [[f"({s}", "gemm"], [f"[{s}", "gemm"], [f"{s}{{2,1}}", "gemm"], [f"\\q{s}", "gemm"], [f"(?{s})", "gemm"],
            [f"*{s}", "gemm"], [f"{s})", "gemm"]]


QUOTING_REGEXES = ["(?P<SECRET!>x)", "(?P=SECRET)", "(?(SECRET)a|b)", "\\N{SECRET NAME}", "(?P<1SECRET>x)"]


def _wrong_types(rng: random.Random, phase: bool) -> Tuple[Any, Tuple[str, ...]]:
    s = _secret(rng)
    if phase:
        return rng.choice([[s], 7, s, None, True, {s: 5}, {s: [1, s]}, {s: {s: s}}, {"unmapped": [s]}, {s: None}]), \
            ("must be a JSON object", "is reserved")
    bad_rule = rng.choice([7, None, s, [s], [s, s, s], [1, s], [s, 2], {"regex": 1, "category": s}, [s, " "],
                           [s, [s]], {s: s}] + bad_regexes(s))
    rules: List[Any] = [[f"ok{i}", "gemm"] for i in range(rng.randint(0, 3))]
    rules.insert(rng.randint(0, len(rules)), bad_rule)
    doc = rng.choice([{"rules": rules}, rules, {"rules": rules, "replace": False}, {"rules": s}, {"rules": {s: s}},
                      {"rules": [], "replace": s}, {s: rules}, 7, s, None])
    return doc, RULE_PHRASES


def option_file(rng: random.Random, phase: bool) -> Tuple[str, bytes, Tuple[str, ...]]:
    """(file suffix, content, phrases of which the message must hold one)."""
    suffix = ".json" if phase else rng.choice([".json", ".yaml", ".yml", ".txt"])
    yaml_ok = suffix != ".json" or not phase
    kinds = ["deep", "wide", "wrong", "truncated", "not utf8", "big"] + (["bomb", "merge bomb", "cycle", "deep block"]
                                                                         if yaml_ok else [])
    kind = rng.choice(kinds)
    if kind in ("bomb", "merge bomb", "cycle", "deep block"):
        suffix = rng.choice([".yaml", ".yml"]) if phase is False else suffix
    if kind == "deep":
        flow = suffix != ".json" and rng.random() < 0.5           # YAML flow style
        return suffix, _nested(rng, rng.randint(65, 3000), "" if flow else '"').encode(), (DEPTH, VALUES)
    if kind == "deep block":
        return suffix, _yaml_block(rng.randint(65, 400), _secret(rng)).encode(), (DEPTH,)
    if kind == "wide":   # as JSON mostly: PyYAML composes the 50,000 values it reads in about 1.3 s
        suffix = suffix if phase or rng.random() < 0.15 else rng.choice([".json", ".txt"])
        n = rng.randint(50_001, 80_000)
        leaves = [rng.choice([_secret(rng), 1, None, [1]]) for _ in range(200)]
        doc = {"rules": [leaves[i % 200] for i in range(n)]}
        return suffix, json.dumps(doc).encode(), (VALUES,)
    if kind in ("bomb", "merge bomb"):
        return suffix, _bomb(rng, kind == "merge bomb").encode(), (VALUES,)
    if kind == "cycle":
        s = _secret(rng)
        return suffix, rng.choice([f"rules: &{s} [{s}, *{s}]\n", f"a: &{s} {{k: [*{s}]}}\nrules: []\n",
                                   f"rules:\n  - &{s}\n    - x\n    - *{s}\n"]).encode(), ("a cycle",)
    if kind == "wrong":
        doc, phrases = _wrong_types(rng, phase)
        return suffix, json.dumps(doc).encode(), phrases
    if kind == "truncated":
        doc = {f"{SECRET}phase": [SECRET, "x"]} if phase else {"rules": [[SECRET, "gemm"], [SECRET + "2", "x"]]}
        text = json.dumps(doc)
        cut = text[: rng.randint(1, len(text) - 1)] + rng.choice(["", "\x00", "}}}", "]\n:", "\t"])
        return suffix, cut.encode(), ("not valid",) + (() if phase else RULE_PHRASES)
    if kind == "not utf8":
        raw = json.dumps({"rules": [[SECRET, "gemm"]]} if not phase else {"x": [SECRET]}).encode()
        at = rng.randint(0, len(raw))
        return suffix, raw[:at] + rng.choice([b"\xff", b"\xc3", b"\xed\xa0\x80"]) + raw[at:], ("not UTF-8 text",)
    # big: a YAML scalar past the YAML limit (a file not named .yaml is tried as JSON first, and its JSON error is
    # the answer when it is too big for YAML), or any file past the file limit
    if suffix != ".json" and rng.random() < 0.7:
        return suffix, ("rules: [[" + SECRET * (1_100_000 // len(SECRET)) + ", gemm]]\n").encode(), \
            (YAML_BIG,) if suffix in (".yaml", ".yml") else ("not valid JSON",)
    return suffix, ('{"rules": [["' + SECRET * (8_500_000 // len(SECRET)) + '", "gemm"]]}').encode(), (FILE_BIG,)


@pytest.fixture(scope="module")
def trace(tmp_path_factory) -> Path:
    p = tmp_path_factory.mktemp("opts") / "t.sqlite"
    built_scenario("healthy", str(p))
    return p


@pytest.mark.parametrize("seed", seeds(12, 100))
def test_hostile_option_file_is_one_line_naming_the_option(seed: int, tmp_path: Path, trace: Path, capsys) -> None:
    rng = random.Random(seed)
    phase = rng.random() < 0.3
    suffix, content, phrases = option_file(rng, phase)
    f = tmp_path / f"opt{suffix}"
    f.write_bytes(content)
    keyword, flag = ("phase_map", "--phase-map") if phase else ("categories_file", "--categories")
    with replayable(seed, {"option": keyword, "file": content[:300], "bytes": len(content)}):
        t0 = time.process_time()
        with pytest.raises(OptionError) as ei:
            options_from_kwargs(**{keyword: str(f)})
        assert time.process_time() - t0 < TIME_BOUND_S, "the API took too long to refuse the file"
        msg = str(ei.value)
        assert ei.value.option == keyword and msg.startswith(f"{keyword} {f}"), msg[:300]
        assert "\n" not in msg and len(msg) < 1000, msg[:300]
        assert SECRET not in msg, f"the message quotes the file: {msg[:300]!a}"
        assert any(p in msg for p in phrases), (msg[:300], phrases)
        t0 = time.process_time()
        assert main([str(trace), "--out", str(tmp_path / "o"), flag, str(f)]) == 2
        line = one_line(capsys.readouterr().err)
        assert time.process_time() - t0 < TIME_BOUND_S, "the command line took too long to refuse the file"
        assert line.startswith(f"nsys-llm-explain: error: {flag} {f}") and SECRET not in line, line[:300]
        assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("regex", QUOTING_REGEXES)
def test_a_bad_regex_in_an_option_file_is_not_quoted(regex: str, tmp_path: Path) -> None:
    f = tmp_path / "cats.json"
    f.write_text(json.dumps({"rules": [["ok", "gemm"], [regex, "gemm"]]}))
    with pytest.raises(OptionError) as ei:
        options_from_kwargs(categories_file=str(f))
    assert "rule #2 has an invalid regex" in str(ei.value)
    assert SECRET not in str(ei.value), str(ei.value)


@pytest.mark.parametrize("seed", seeds(2, 20))
def test_well_formed_option_files_of_hostile_names_are_accepted(seed: int, tmp_path: Path, trace: Path,
                                                                capsys) -> None:
    rng = random.Random(seed)
    cats = [hostile_name(rng, long=False).strip() or "x" for _ in range(4)]
    rules = [[re.escape(hostile_name(rng, long=False)), c] for c in cats] + [["gemm|sgemm|ampere", cats[0]]]
    phases = {hostile_name(rng, long=False) or "p": [hostile_name(rng, long=False) or "s"] for _ in range(3)}
    phases.pop("unmapped", None)
    cf, pf = tmp_path / "cats.json", tmp_path / "phases.json"
    cf.write_text(json.dumps({"rules": rules}))
    pf.write_text(json.dumps(phases))
    with replayable(seed, {"rules": rules, "phases": phases}):
        got = options_from_kwargs(categories_file=str(cf), phase_map=str(pf))
        assert got.categories is not None and [list(r) for r in got.categories.user_rules] == \
            [[r, c.strip()] for r, c in rules]
        assert got.phase_map is not None and dict(got.phase_map.phases) == \
            {k: tuple(s for s in v if s) for k, v in phases.items()}
        out = tmp_path / "o"
        assert main([str(trace), "--out", str(out), "--quiet", "--categories", str(cf), "--phase-map", str(pf)]) == 0
        assert capsys.readouterr().err == ""
        for name in ("report.md", "report.html"):
            text = re.sub(r"<script\b.*?</script>", "", (out / name).read_text(encoding="utf-8"), flags=re.S)
            bad = HIDDEN.search(text)
            assert bad is None, f"raw {bad.group()!a} in {name}: {text[max(0, bad.start() - 60): bad.end() + 40]!a}"


# ------------------------------------------------------------------------------------------------ option values
NUMBERS = ["0", "1", "-1", "3", "20", "10" * 15, "-0", "0.5", "1e3", "1e999", "nan", "inf", "-inf", "0x10", "1_000",
           " 7 ", "٣", "²", "1.0", "0.0", "0.7", "1", "2", "+1", "1e-400", "7" * 5000]
SHAPES = ["", " ", "schedule", "execute_model", "1:2", "5:1", "0:0", "-5:10", "1:2:3", ":", "a:b", "0:" + "9" * 30,
          "1000000:2000000", "0:18446744073709551616", "sqlite3", "adbc", "auto", "ADBC", "(", "(?P<x>", "a{2,1}",
          "[", "\\", ".*", "gemm|nccl", "step", "decode", "/dev/null", "/", ".", "-", "--", "-x", "--top"]


def random_text(rng: random.Random) -> str:
    return rng.choice([rng.choice(NUMBERS), rng.choice(SHAPES), hostile_name(rng, long=False)[:200]])


def random_value(rng: random.Random) -> Any:
    """Any type the API might be given."""
    return rng.choice([
        lambda: random_text(rng), lambda: rng.randint(-10, 10), lambda: rng.choice([10 ** 30, -(10 ** 30), 2 ** 63]),
        lambda: rng.choice([0.5, -0.0, 1.5, math.nan, math.inf, -math.inf, 1e308, 0.7]),
        lambda: rng.choice([True, False]),
        lambda: None, lambda: random_text(rng).encode("utf-8", "replace"), lambda: [random_text(rng)],
        lambda: (rng.randint(0, 10), rng.randint(0, 10 ** 7)), lambda: {random_text(rng): [random_text(rng)]},
        lambda: {random_text(rng): random_value(rng)}, lambda: object(), lambda: Path(random_text(rng) or "x"),
        lambda: (1, 2, 3), lambda: ("1", "2"),
    ])()


def _window_rule(v: str) -> Optional[bool]:
    """``START:END`` integers with END after START, else refused; a well-formed one may still miss the trace."""
    parts = v.split(":")
    try:
        a, b = (int(x.strip()) for x in parts) if len(parts) == 2 else (0, 0)
    except ValueError:
        return False
    return None if b > a else False


def _int_rule(v: Any) -> Optional[bool]:
    """Whether an ``int`` option's command-line text is valid (argparse's ``int`` then 1 to 10⁹)."""
    try:
        return 1 <= int(v) <= 10 ** 9
    except ValueError:
        return False


def _count_rule(v: Any) -> Optional[bool]:
    """``--timeline-events``: argparse's ``int`` then 0 to 10⁹ (0 turns the file off)."""
    try:
        return 0 <= int(v) <= 10 ** 9
    except ValueError:
        return False


def _fraction_rule(v: Any) -> Optional[bool]:
    try:
        f = float(v)
    except ValueError:
        return False
    return math.isfinite(f) and 0 <= f <= 1


def _regex_rule(v: Any) -> Optional[bool]:
    try:
        re.compile(v, re.IGNORECASE)
        return True
    except re.error:
        return False


#: option → whether a command-line text is valid (None: the rule depends on the trace, only the form is checked)
CLI_RULES: Dict[str, Callable[[str], Optional[bool]]] = {
    "top": _int_rule, "nvtx_coverage_warn_threshold": _fraction_rule, "step_marker": _regex_rule,
    "timeline_events": _count_rule,
    "reader": lambda v: v.lower() in ("auto", "adbc", "sqlite3"),   # the choices, any case (as the API)
    "step_range": lambda v: True,
    "categories_file": lambda v: v == "", "phase_map": lambda v: v == "",
    "window_nvtx": lambda v: v in ("schedule", "execute_model"),    # the NVTX ranges of scenario "healthy"
    "window": _window_rule,
}


def _is_int(v: Any) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def api_rule(name: str, v: Any) -> bool:
    """Whether ``options_from_kwargs(name=v)`` accepts ``v`` (the documented rule of each keyword; a path is
    refused because none of the drawn ones names a readable option file)."""
    if v is None:   # "not given": the options whose default is None, and reader (None → auto)
        return name == "reader" or next(o for o in OPTIONS if o.name == name).default is None
    path = isinstance(v, (str, os.PathLike))
    if name == "top":
        return _is_int(v) and 1 <= v <= 10 ** 9   # config.values.MAX_COUNT
    if name == "timeline_events":
        return _is_int(v) and 0 <= v <= 10 ** 9
    if name == "nvtx_coverage_warn_threshold":
        return isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v) and 0 <= v <= 1
    if name in ("nvtx_kernel_map", "include_memcpy_in_busy"):
        return isinstance(v, bool)
    if name == "reader":
        return isinstance(v, str) and v.lower() in ("auto", "adbc", "sqlite3")
    if name == "step_marker":
        return isinstance(v, str) and _regex_rule(v) is True
    if name == "step_range":
        return isinstance(v, str)
    if name == "window_nvtx":
        return isinstance(v, str) and v != ""
    if name == "window":
        if isinstance(v, str):
            return v == "" or _window_rule(v) is None
        try:
            return len(v) == 2 and all(_is_int(x) for x in v) and v[1] > v[0]
        except TypeError:
            return False
    if name in ("categories_file", "categories"):
        return path and str(v) == ""
    if name == "phase_map":
        if path:
            return str(v) == ""
        return isinstance(v, dict) and all(isinstance(k, str) and k != "unmapped" and (
            isinstance(x, str) or isinstance(x, list) and all(isinstance(y, str) for y in x)) for k, x in v.items())
    raise AssertionError(f"no rule for {name}: add one")

VALUED = [o for o in OPTIONS if o.flags and o.kind not in ("on", "off")]


def test_every_option_that_takes_a_value_has_a_rule() -> None:
    assert {o.name for o in VALUED} == set(CLI_RULES), "a new option needs its rule here"


@pytest.mark.parametrize("seed", seeds(12, 200))
def test_hostile_option_values_in_the_api_name_the_keyword(seed: int, trace: Path) -> None:
    rng = random.Random(seed)
    values = {o.name: random_value(rng) for o in OPTIONS}
    for name, value in values.items():
        with replayable(seed, {name: value}):
            try:
                options_from_kwargs(**{name: value})
                assert api_rule(name, value), f"{name}={value!a} accepted"
                if name in ("window", "window_nvtx") and rng.random() < 0.5:
                    nle.analyze(str(trace), **{name: value})     # the trace decides: a value, or OptionError
            except OptionError as e:
                assert not api_rule(name, value) or name in ("window", "window_nvtx"), f"{name}={value!a} refused"
                msg = str(e)
                assert e.option == name and msg.startswith((name + " ", name + ":")), msg[:300]
                ours = msg.replace(repr(value), "").replace(str(value), "")   # our words, without the value quoted
                assert "\n" not in ours and e.exit_code == 2, msg[:300]
                assert e.worded(flag_of).startswith(flag_of(name)), e.worded(flag_of)[:300]


@pytest.mark.parametrize("seed", seeds(2, 30))
def test_hostile_option_values_on_the_command_line_name_the_flag(seed: int, tmp_path: Path, trace: Path,
                                                                  capsys) -> None:
    rng = random.Random(seed)
    for i, o in enumerate(VALUED):
        value = random_text(rng).replace("\x00", "")     # a command line cannot hold a NUL byte
        flag = rng.choice(o.flags)
        args = [f"{flag}={value}"] if rng.random() < 0.5 else [flag, value]
        out = tmp_path / f"o{i}"
        with replayable(seed, {"args": args}):
            rc = main([str(trace), "--out", str(out), "--quiet", *args])
            err = capsys.readouterr().err
            assert rc in (0, 2), f"exit {rc}: {err[-2000:]}"
            want = CLI_RULES[o.name](value)
            # `--flag -x`: argparse may read the value as an option (one line, exit 2 too): not checked against the rule
            if want is not None and not (flag == args[0] and value.startswith("-") and value != "-"):
                assert rc == (0 if want else 2), f"exit {rc} for {o.name}={value!a}: {err[-2000:]}"
            if rc == 2:
                line = one_line(err)
                assert line.startswith("nsys-llm-explain: error: ") and o.flag in line, line[:300]
                assert not out.exists()
            else:
                assert err == "" and (out / "report.json").is_file() and (out / "report.html").is_file()


def test_a_nul_byte_in_a_path_is_one_line_through_the_api(trace: Path) -> None:
    """Found by this suite: a path holding a NUL byte (no file name can; the API can be given one) raised
    ``ValueError: embedded null byte`` (an internal error) for the trace and for a rules file."""
    with pytest.raises(InputError, match="^a<NUL>b.sqlite: a file name cannot hold a NUL byte$"):
        nle.analyze("a\x00b.sqlite")
    for keyword in ("categories_file", "categories"):
        with pytest.raises(OptionError) as ei:
            nle.analyze(str(trace), **{keyword: "r\x00.json"})
        assert ei.value.option == keyword and str(ei.value).endswith("cannot read the file (a file name cannot hold "
                                                                     "a NUL byte)")
    with pytest.raises(OptionError, match=r"^phase_map p\\x00\.json: a file name cannot hold a NUL byte$"):
        nle.analyze(str(trace), phase_map="p\x00.json")
