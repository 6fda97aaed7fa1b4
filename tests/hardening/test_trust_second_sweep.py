"""Issue 17, second sweep: cases of the promised classes found by a hostile probe after the first round — each
must end in one line and exit 2 on the command line (``InputError`` / ``OptionError`` from the API), never
``internal error`` / exit 1 or a raw ``OSError`` / ``ValueError`` / ``OverflowError`` / ``RecursionError``."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path
from typing import List

import pytest

import nsys_llm_explainer as nle
from nsys_llm_explainer.cli import main
from nsys_llm_explainer.errors import InputError, OptionError

PROG = "nsys-llm-explain"


def _refused(capsys, argv: List[str], starts: str = f"{PROG}: error: ") -> str:
    code = main(argv)
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1, err
    assert lines[0].startswith(starts) and "internal error" not in lines[0], lines[0]
    return lines[0]


# ------------------------------------------------------------------------------------------ paths the system refuses
def test_a_trace_name_too_long_is_one_line(tmp_path: Path, demo_trace: Path, capsys) -> None:
    long = str(tmp_path / ("z" * 300 + ".sqlite"))            # ENAMETOOLONG: one component over 255 bytes
    deep = "/".join(["x" * 200] * 25)                          # over PATH_MAX
    for bad in (long, deep):
        line = _refused(capsys, [bad, "--out", str(tmp_path / "o")])
        assert "name too long" in line.lower()
        _refused(capsys, ["compare", str(demo_trace), bad, "--out", str(tmp_path / "c")])
        with pytest.raises(InputError):
            nle.analyze_cluster([str(demo_trace), bad])
        with pytest.raises(InputError):
            nle.compare([str(demo_trace), bad])
    assert not (tmp_path / "o").exists() and not (tmp_path / "c").exists()


def test_a_path_that_may_not_be_searched_is_one_line(tmp_path: Path, demo_trace: Path, capsys,
                                                     monkeypatch) -> None:
    """A parent directory without search permission (EACCES; as root the test plants the error, as a user
    ``chmod 700`` by another user makes it), for the trace and for ``--out``."""
    priv = tmp_path / "priv"
    priv.mkdir()
    shutil_copy = priv / "t.sqlite"
    shutil_copy.write_bytes(demo_trace.read_bytes())
    real_stat = os.stat

    def stat(path, *args, **kwargs):
        if str(priv) in os.fsdecode(os.fspath(path)) and os.fspath(path) != os.fspath(priv):
            raise PermissionError(errno.EACCES, "Permission denied", os.fspath(path))
        return real_stat(path, *args, **kwargs)

    monkeypatch.setattr(os, "stat", stat)
    line = _refused(capsys, [str(priv / "t.sqlite"), "--out", str(tmp_path / "o")])
    assert line == f"{PROG}: error: cannot look up {priv / 't.sqlite'}: Permission denied"
    line = _refused(capsys, [str(demo_trace), "--out", str(priv / "x")])
    assert line == f"{PROG}: error: --out {priv / 'x'} cannot be used: Permission denied"
    _refused(capsys, ["demo", "--out", str(priv / "x")])
    _refused(capsys, ["compare", str(demo_trace), str(priv / "t.sqlite"), "--out", str(tmp_path / "c")])
    with pytest.raises(InputError):
        nle.analyze_cluster([str(demo_trace), str(priv / "t.sqlite")])


def test_an_empty_trace_argument_is_refused_not_read_as_the_working_directory(tmp_path: Path, capsys,
                                                                              monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "x.sqlite").write_bytes(b"")
    line = _refused(capsys, ["", "--out", str(tmp_path / "o")])
    assert "an empty path" in line and not (tmp_path / "o").exists()
    with pytest.raises(InputError):
        nle.analyze_cluster([""])


def test_a_lone_surrogate_in_an_api_path_is_an_input_error() -> None:
    with pytest.raises(InputError) as e:
        nle.analyze("\ud800.sqlite")
    assert "\\ud800" in str(e.value)


# ------------------------------------------------------------------------------------------ option files and values
@pytest.mark.parametrize("suffix, flag, keyword", [(".json", "--categories", "categories_file"),
                                                   (".yaml", "--categories", "categories_file"),
                                                   (".json", "--phase-map", "phase_map")])   # phase maps: JSON only
def test_an_integer_of_5000_digits_in_an_option_file(tmp_path: Path, demo_trace: Path, capsys, suffix, flag,
                                                     keyword) -> None:
    f = tmp_path / f"big{suffix}"
    digits = "9" * 5000
    f.write_text(f'{{"rules": [["x", "c"]], "n": {digits}}}' if suffix == ".json"
                 else f"rules: [[x, c]]\nn: {digits}\n")
    line = _refused(capsys, [str(demo_trace), "--out", str(tmp_path / "o"), flag, str(f)])
    assert line.startswith(f"{PROG}: error: {flag} {f}") and digits[:50] not in line
    with pytest.raises(OptionError) as e:
        nle.analyze(str(demo_trace), **{keyword: str(f)})
    assert e.value.option == keyword


@pytest.mark.parametrize("content", [b'rules: [["a\x01", "c"]]\n', b'{"rules": [["a\x00b", "c"]]}'])
def test_a_control_character_in_a_categories_file(tmp_path: Path, demo_trace: Path, capsys, content) -> None:
    f = tmp_path / "ctl.yaml"
    f.write_bytes(content)
    line = _refused(capsys, [str(demo_trace), "--out", str(tmp_path / "o"), "--categories", str(f)])
    assert line.startswith(f"{PROG}: error: --categories {f}: not valid") and "\x01" not in line


def test_a_repeat_count_too_large_for_the_regex_engine(tmp_path: Path, demo_trace: Path, capsys) -> None:
    rx = "a{99999999999}"
    line = _refused(capsys, [str(demo_trace), "--out", str(tmp_path / "o"), "--step-marker", rx])
    assert line.startswith(f"{PROG}: error: --step-marker") and "not a valid regular expression" in line
    rules = tmp_path / "r.json"
    rules.write_text(json.dumps({"rules": [[rx, "x"]]}))
    line = _refused(capsys, [str(demo_trace), "--out", str(tmp_path / "o"), "--categories", str(rules)])
    assert "rule #1 has an invalid regex" in line
    with pytest.raises(OptionError):
        nle.analyze(str(demo_trace), step_marker=rx)


@pytest.mark.parametrize("kw, value", [("nvtx_coverage_warn_threshold", 10 ** 400), ("top", -10 ** 5000),
                                       ("top", 10 ** 5000), ("top", "9" * 5000), ("workers", 10 ** 5000)],
                         ids=["threshold_10e400", "top_-10e5000", "top_10e5000", "top_str", "workers_10e5000"])
def test_numbers_past_float_or_repr_limits_are_option_errors(demo_trace: Path, kw, value) -> None:
    with pytest.raises(OptionError) as e:
        nle.analyze(str(demo_trace), **{kw: value})
    assert e.value.option == kw and len(str(e.value)) < 300


# ------------------------------------------------------------------------------------------ a manifest of another shape
@pytest.mark.parametrize("kind", [{}, [], 5, None])
def test_a_manifest_whose_kind_is_not_a_string(tmp_path: Path, demo_trace: Path, capsys, kind) -> None:
    out = tmp_path / "o"
    assert main([str(demo_trace), "--out", str(out), "--quiet"]) == 0
    m = out / ".nsys-llm-explainer.json"
    data = json.loads(m.read_text())
    data["kind"] = kind
    m.write_text(json.dumps(data))
    before = sorted(p.name for p in out.iterdir())
    capsys.readouterr()
    for force in ([], ["--force"]):
        code = main([str(demo_trace), "--out", str(out), "--quiet", *force])
        err = capsys.readouterr().err
        assert code in (0, 2) and "internal error" not in err, err
        assert len([ln for ln in err.splitlines() if ln.strip()]) <= 1, err
    assert set(before) <= {p.name for p in out.iterdir()}
