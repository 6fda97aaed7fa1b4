"""Names are data: kernel / NVTX / process names that look like
spreadsheet formulas, terminal escape sequences, bidi overrides or are 1 MB long stay inert in every output —
CSV cells neutralised with a leading ``'``, control and bidi characters shown as visible escapes in Markdown,
HTML and on the terminal, long names shortened there — while report.json keeps every name exactly."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest
from conftest import run_cli
from synth import TraceBuilder

from nsys_llm_explainer.render.escape import (
    CODE_LIMIT,
    TERM_LIMIT,
    csv_text,
    html_escape,
    md_cell,
    md_code,
    md_text,
    term_text,
    visible,
)
from nsys_llm_explainer.terminal import encodable, error_line, say

ESC_RED = "\x1b[31mRED\x1b[0m"
OSC8 = "\x1b]8;;http://evil.example/\x07click\x1b]8;;\x07"
BIDI = "abc\u202egnp.exe"
FORMULAS = ['=HYPERLINK("http://evil.example","x")', "+cmd|' /C calc'!A0", "-2+3", "@SUM(1+1)", "\tTAB", "\rCR"]
LONG = "L" * 1_000_000
#: every character that must never reach a human-facing output raw
HIDDEN = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


# ------------------------------------------------------------------------------------------- helpers, unit level
def test_visible_escapes_controls_and_bidi() -> None:
    assert visible(ESC_RED) == "\\x1b[31mRED\\x1b[0m"
    assert visible(OSC8) == "\\x1b]8;;http://evil.example/\\x07click\\x1b]8;;\\x07"
    assert visible(BIDI) == "abc\\u202egnp.exe"
    assert visible("a\u2066b\u2069c\u200ed\u200fe\u061cf\x85g\x7fh") == \
        "a\\u2066b\\u2069c\\u200ed\\u200fe\\u061cf\\x85g\\x7fh"
    assert visible("tab\there\nline\rcr") == "tab here line cr"
    assert visible("plain name_1<T>") == "plain name_1<T>"


@pytest.mark.parametrize("name", FORMULAS)
def test_csv_text_neutralises_formulas(name: str) -> None:
    assert csv_text(name) == "'" + name
    assert csv_text("gemm=1") == "gemm=1" and csv_text(-5) == -5 and csv_text(1.5) == 1.5


def test_markdown_html_terminal_helpers_are_inert() -> None:
    for out in (md_cell(ESC_RED), md_text(OSC8), md_code(BIDI), html_escape(BIDI + ESC_RED), term_text(OSC8)):
        assert not HIDDEN.search(out), out
    assert "\\x1b" in term_text(ESC_RED) and "\\u202e" in html_escape(BIDI)
    assert len(md_code(LONG)) < CODE_LIMIT + 20 and len(term_text(LONG)) == TERM_LIMIT
    assert len(md_text(LONG)) < 2100


def test_terminal_lines_ascii_and_hostile(capsys) -> None:
    say(["  verdict: " + ESC_RED + " " + BIDI + " 5 µs – ok"])
    error_line("nsys-llm-explain: error: ", "bad name " + OSC8 + "\nsecond line")
    out, err = capsys.readouterr()
    assert out == "  verdict: \\x1b[31mRED\\x1b[0m abc\\u202egnp.exe 5 µs – ok\n"
    assert err == ("nsys-llm-explain: error: bad name \\x1b]8;;http://evil.example/\\x07click\\x1b]8;;\\x07 "
                   "second line\n")
    assert encodable("5 µs – ≥ 2 → ✓", "ascii") == "5 us - >= 2 -> \\u2713"


# ------------------------------------------------------------------------------------------- end to end
def build_names_trace(path: Path) -> None:
    """One process / thread with escape-sequence names, NVTX ranges named with a bidi override and 1 MB of
    text, kernels named like formulas and terminal escapes (10 launches each)."""
    b = TraceBuilder()
    b.process(100, "proc" + ESC_RED)
    g = b.thread(100, 100, name="thr" + OSC8)
    b.gpu(id=0)
    kernels = FORMULAS + [ESC_RED, OSC8, BIDI]
    for i in range(10):
        s = 1_000_000 + i * 200_000
        b.nvtx_push_pop(s, s + 190_000, BIDI if i % 2 else LONG, tid_g=g)
        for j, name in enumerate(kernels):
            a = s + 1000 + j * 15_000
            k = s + 5000 + j * 15_000
            b.launch(a, a + 2000, k, k + 10_000, pid=100, tid=100, device=0, name=name)
    # a launcher that waits (sem_wait inside the first range) while a worker named like an escape sequence is in
    # NVTX ranges and an OS call with hostile names: the waits section and the osrt finding quote them
    w = b.thread(100, 101, name="wrk" + ESC_RED)
    for i in range(10):
        s = 1_000_000 + i * 200_000 + 160_000
        b.osrt(s, s + 29_000, tid_g=g, name="sem_wait")
        b.nvtx_push_pop(s + 1000, s + 28_000, LONG if i % 2 else BIDI, tid_g=w)
        b.osrt(s + 2000, s + 27_000, tid_g=w, name=OSC8)
    b.write(str(path), overwrite=True)


@pytest.fixture(scope="module")
def names_report(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("names")
    trace = d / "names.sqlite"
    build_names_trace(trace)
    proc = run_cli(str(trace), "--out", str(d / "out"))
    assert proc.returncode == 0, proc.stderr
    assert not HIDDEN.search(proc.stdout + proc.stderr)
    return d / "out"


def test_csv_cells_never_start_a_formula(names_report: Path) -> None:
    csv.field_size_limit(10_000_000)
    seen = set()
    for f in sorted((names_report / "tables").glob("*.csv")):
        with open(f, newline="", encoding="utf-8") as fh:
            rows = list(csv.reader(fh))
        for row in rows:
            for cell in row:
                if cell[:1] in ("=", "+", "-", "@", "\t", "\r"):
                    try:
                        float(cell)          # a negative number is a number, not a formula
                    except ValueError:
                        pytest.fail(f"{f.name}: formula-like cell {cell[:40]!r}")
                seen.add(cell)
    for name in FORMULAS:
        assert "'" + name in seen, name          # kept in full after the guard
    assert LONG in seen                          # the 1 MB NVTX name is kept in full in CSV


def test_json_keeps_names_exactly(names_report: Path) -> None:
    d = json.loads((names_report / "report.json").read_text(encoding="utf-8"))
    names = {k["name"] for k in d["kernels"]}
    assert set(FORMULAS + [ESC_RED, OSC8, BIDI]) <= names
    assert LONG in {r["name"] for r in d["nvtx"]["ranges"]}


@pytest.mark.parametrize("file", ["report.md", "report.html"])
def test_markdown_and_html_are_inert_and_short(names_report: Path, file: str) -> None:
    text = (names_report / file).read_text(encoding="utf-8")
    text = re.sub(r"<script>.*?</script>", "", text, flags=re.S)   # plotly.js and the boot script: our code
    bad = HIDDEN.search(text)
    assert bad is None, (file, repr(text[max(0, bad.start() - 40): bad.end() + 40]))
    assert "L" * 5000 not in text                     # the 1 MB name is shortened for humans
    assert "x1b" in text and "u202egnp.exe" in text   # shown as visible escapes, not removed
    if file == "report.md":
        assert len(text) < 500_000


def test_error_line_with_hostile_name_is_one_inert_line(tmp_path: Path, names_report: Path) -> None:
    trace = names_report.parent / "names.sqlite"
    proc = run_cli(str(trace), "--out", str(tmp_path / "o"), "--window-nvtx", "no" + OSC8 + "\nsuch")
    assert proc.returncode == 2
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("nsys-llm-explain: error:"), proc.stderr
    assert not HIDDEN.search(proc.stderr) and "\\x1b]8;;" in proc.stderr
