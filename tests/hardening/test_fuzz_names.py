"""Property test: hostile names are data. Each seed builds a small synthetic trace whose
kernel, NVTX, process and thread names come from :func:`fuzz_inputs.hostile_name` (controls, ESC / OSC-8
sequences, bidi overrides, NUL, Markdown / HTML / CSV markup, formula prefixes, unicode, 100 KB lengths) and
puts bytes that are not UTF-8 straight into ``StringIds`` (sqlite3), then runs the command line and checks:

* exit 0 and a complete report (report.md / .json / .html, tables/, the manifest listing them);
* report.json keeps every name exactly (the undecodable ones with U+FFFD, as ``bytes.decode("utf-8",
  "replace")``), every launch counted once, and one warning counts the undecodable values;
* no raw control / bidi character in report.md, stdout or stderr; every Markdown table row has as many cells
  as its header; no HTML tag from a name in report.md;
* report.html, parsed with ``html.parser``: the same tags, attributes, scripts and links as a report of the same
  trace with plain names; no control character in its text or attribute values (entities decoded);
* every CSV file parses, every row as wide as its header, no cell starts a formula, and kernels.csv keeps the
  names (after the ``'`` guard) exactly.
"""

from __future__ import annotations

import csv
import json
import random
import re
import sqlite3
import threading
import time
from html.parser import HTMLParser
from pathlib import Path
from typing import List, Set, Tuple

import pytest
from fuzz_inputs import (
    BIDI,
    CONTROLS,
    CSV_META,
    DEFAULT_SEED,
    FORMULA_START,
    HIDDEN,
    MARKUP,
    TERMINAL,
    UNICODE,
    distinct,
    hostile_name,
    replayable,
    seeds,
    undecodable,
)
from synth import TraceBuilder

from nsys_llm_explainer.cli import PROG, main
from nsys_llm_explainer.output import MANIFEST
from nsys_llm_explainer.terminal import Progress

PID, TID = 100, 101
N_KERNELS, N_RANGES, N_STEPS = 5, 3, 4
FAST = 4   # seeds in the fast set (then 8 more in the slow sweep)
csv.field_size_limit(1 << 30)


class Case:
    """The names of one seed: kernels (the first ``len(bad)`` get bytes that are not UTF-8 in ``StringIds``), NVTX
    ranges (some registered: their text in ``StringIds``), the process, the thread and the GPU; ``other_bad``:
    bytes that are not UTF-8 put in place of the process name, the first range's text or the GPU name."""

    def __init__(self, seed: int, plain: str = "") -> None:
        rng = random.Random(seed)
        self.seed = seed
        if plain:   # the same trace with inert names: the HTML structure every hostile report must keep
            self.kernels = [f"{plain}_{i}" for i in range(N_KERNELS)]
            self.ranges = [f"range_{i}" for i in range(N_RANGES)]
            self.process, self.thread, self.gpu, self.out = "proc", "thread", "GPU", "out"
            self.bad = [f"{plain}_0\xff".encode("latin-1")] if plain == "other" else []   # a warning, as most have
            self.other_bad, self.registered = {}, False
            return
        self.kernels = distinct(rng, N_KERNELS, hostile_name)
        self.ranges = [r for r in distinct(rng, N_RANGES + N_KERNELS, hostile_name) if r not in self.kernels]
        self.ranges = self.ranges[:N_RANGES]
        self.process, self.thread, self.gpu = hostile_name(rng), hostile_name(rng), hostile_name(rng)
        self.registered = rng.random() < 0.5
        self.bad = [undecodable(rng) for _ in range(rng.randint(0, 2))]
        self.other_bad = {k: undecodable(rng) for k in ("process", "range", "gpu") if rng.random() < 0.25}
        # the output directory is named with one too: the terminal lines show it (a file name holds no '/' or
        # NUL and at most 255 bytes)
        self.out = "out " + hostile_name(rng, long=False).replace("/", "").replace("\x00", "")[:60]

    def build(self, path: Path) -> None:
        b = TraceBuilder()
        b.process(PID, self.process)
        g = b.thread(PID, TID, name=self.thread)
        b.gpu(id=0, name=self.gpu)
        for i in range(N_STEPS):
            s = 1_000_000 + i * 200_000
            b.nvtx_push_pop(s, s + 190_000, self.ranges[i % N_RANGES], tid_g=g, registered=self.registered)
            for j, name in enumerate(self.kernels):
                a, k = s + 1000 + j * 15_000, s + 5000 + j * 15_000
                b.launch(a, a + 2000, k, k + 10_000, pid=PID, tid=TID, device=0, name=name)
        b.write(str(path), overwrite=True)
        c = sqlite3.connect(path)   # bytes that are not UTF-8, written straight into the tables
        for name, raw in zip(self.kernels, self.bad):
            c.execute("UPDATE StringIds SET value = CAST(? AS TEXT) WHERE value = ?", (raw, name))
        edits = {"process": "UPDATE PROCESSES SET name = CAST(? AS TEXT)",
                 "gpu": "UPDATE TARGET_INFO_GPU SET name = CAST(? AS TEXT)",
                 "range": ("UPDATE StringIds SET value = CAST(? AS TEXT) WHERE value = ?" if self.registered else
                           "UPDATE NVTX_EVENTS SET text = CAST(? AS TEXT) WHERE text = ?")}
        for what, raw in self.other_bad.items():
            c.execute(edits[what], (raw, self.ranges[0]) if what == "range" else (raw,))
        c.commit()
        c.close()

    def kernel_names(self) -> List[str]:
        """The names report.json must hold: the undecodable ones as ``decode("utf-8", "replace")``."""
        dec = [raw.decode("utf-8", "replace") for raw in self.bad]
        return dec + self.kernels[len(self.bad):]

    def name(self, what: str) -> str:
        """The process / GPU name, or the first range's, as report.json must hold it."""
        raw = self.other_bad.get(what)
        return raw.decode("utf-8", "replace") if raw is not None else \
            {"process": self.process, "gpu": self.gpu, "range": self.ranges[0]}[what]


def run(case: Case, where: Path, capsys) -> Tuple[Path, str, str]:
    trace, out = where / "t.sqlite", where / case.out
    case.build(trace)
    rc = main([str(trace), "--out", str(out)])
    cap = capsys.readouterr()
    assert rc == 0, f"exit {rc}: {cap.err[-2000:]}"
    return out, cap.out, cap.err


# ------------------------------------------------------------------------------------------------ checks
def check_complete(out: Path) -> None:
    for f in ("report.md", "report.json", "report.html", "tables/kernels.csv", MANIFEST):
        assert (out / f).is_file(), f"incomplete report: {f} missing"
    listed = json.loads((out / MANIFEST).read_text(encoding="utf-8"))["files"]
    on_disk = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file() and p.name != MANIFEST)
    assert sorted(listed) == on_disk, "the manifest does not list exactly the files written"


def check_json(case: Case, out: Path) -> None:
    d = json.loads((out / "report.json").read_text(encoding="utf-8"))
    want = case.kernel_names()
    got = {k["name"]: k["count"] for k in d["kernels"]}
    assert set(got) == set(want), f"kernel names changed: {sorted(set(got) ^ set(want))!a}"
    assert sum(got.values()) == N_KERNELS * N_STEPS, "a launch was lost or counted twice"
    for name in set(want):                          # names that decode alike are counted together
        assert got[name] == N_STEPS * want.count(name), ascii(name)
    assert {r["name"] for r in d["nvtx"]["ranges"]} == {case.name("range"), *case.ranges[1:]}, "NVTX names changed"
    assert [p["name"] for p in d["trace"]["processes"]] == [case.name("process")], "the process name changed"
    assert [g["name"] for g in d["trace"]["gpus"]] == [case.name("gpu")], "the GPU name changed"
    assert [t["name"] for t in d["facts"]["nvtx_threads"]] == [case.thread], "the thread name changed"
    notes = [w for w in d["warnings"] if "not UTF-8" in w]
    in_string_ids = set(case.bad) | ({case.other_bad["range"]} if case.registered and "range" in case.other_bad
                                     else set())
    if in_string_ids:   # one line counts them (values read after the kernel tables are not counted yet: SECURITY.md)
        assert len(notes) == 1, notes
        m = re.match(r"(\d+) text value\(s\) in StringIds\b", notes[0])
        assert m and int(m.group(1)) >= len(in_string_ids), (notes[0], len(in_string_ids))
    elif not case.other_bad:
        assert notes == [], notes


TABLE_ROW = re.compile(r"^\|.*\|$")


def _cells(row: str) -> int:
    """The cells of a Markdown table row: ``|`` not escaped with ``\\`` (inside code spans too, as GitHub does)."""
    return len(re.findall(r"(?<!\\)\|", row)) - 1


def check_markdown(md: str) -> None:
    bad = HIDDEN.search(md)
    assert bad is None, f"raw {bad.group()!a} in report.md: {md[max(0, bad.start() - 60): bad.end() + 60]!a}"
    tags = set(re.findall(r"</?([A-Za-z][A-Za-z0-9-]*)", md))
    assert tags <= {"code"}, f"HTML from a name in report.md: {sorted(tags)}"
    lines = md.split("\n")
    for i, line in enumerate(lines):
        if TABLE_ROW.match(line) and i + 1 < len(lines) and re.match(r"^\|(\s*:?-+:?\s*\|)+$", lines[i + 1]):
            width, j = _cells(line), i + 2
            while j < len(lines) and lines[j].startswith("|"):
                assert _cells(lines[j]) == width, f"table row split by a name: {lines[j][:200]!a}"
                j += 1


class Page(HTMLParser):
    """Tags, attributes, scripts and links of an HTML page; its text and attribute values (entities decoded)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: Set[str] = set()
        self.attrs: Set[Tuple[str, str]] = set()
        self.scripts = 0
        self.hrefs: Set[str] = set()
        self.text: List[str] = []
        self.text_of_file = ""
        self._raw = 0

    def handle_starttag(self, tag: str, attrs) -> None:
        self.tags.add(tag)
        self.scripts += tag == "script"
        self._raw += tag in ("script", "style")
        for k, v in attrs:
            self.attrs.add((tag, k))
            self.text.append(v or "")
            if k in ("href", "src", "action"):
                self.hrefs.add(v or "")

    def handle_endtag(self, tag: str) -> None:
        self._raw -= tag in ("script", "style") and self._raw > 0

    def handle_data(self, data: str) -> None:
        if not self._raw:       # plotly.js, the boot script and the JSON data island are our code
            self.text.append(data)


def page(path: Path) -> Page:
    p = Page()
    p.text_of_file = path.read_text(encoding="utf-8")
    p.feed(p.text_of_file)
    p.close()
    return p


#: the markup plotly renders in chart labels and hover text that our charts use
CHART_TAGS = {"br", "b", "extra"}


def _strings(v) -> List[str]:
    if isinstance(v, str):
        return [v]
    if isinstance(v, dict):
        v = list(v.values())
    return [s for x in v for s in _strings(x)] if isinstance(v, list) else []


def check_figures(html_text: str) -> None:
    """The charts' JSON island parses, and no label or hover text (which plotly renders as HTML) holds a tag
    from a name."""
    m = re.search(r'<script type="application/json" id="nle-figures">(.*?)</script>', html_text, re.S)
    assert m is not None, "the charts' data island is missing or was cut short"
    for s in _strings(json.loads(m.group(1))):
        tags = set(re.findall(r"<\s*/?\s*([A-Za-z][A-Za-z0-9-]*)", s))
        assert tags <= CHART_TAGS, f"a chart text holds markup from a name: {sorted(tags - CHART_TAGS)}: {s[:200]!a}"


#: a tag a name may legitimately add to the page (a name in monospace, a shortened one with its title)
NAME_TAGS = {"code", "span", "abbr"}


def check_html(got: Page, plain: Page) -> None:
    assert got.tags <= plain.tags | NAME_TAGS, f"tags injected: {sorted(got.tags - plain.tags - NAME_TAGS)}"
    extra = {a for a in got.attrs - plain.attrs if a[0] not in NAME_TAGS or a[1] not in ("title", "class")}
    assert not extra, f"attributes injected: {sorted(extra)}"
    assert got.scripts == plain.scripts, f"{got.scripts} <script> elements, {plain.scripts} expected"
    assert got.hrefs <= plain.hrefs, f"links injected: {sorted(got.hrefs - plain.hrefs)!a}"
    for t in got.text:
        bad = HIDDEN.search(t)
        assert bad is None, f"raw {bad.group()!a} in report.html: {t[max(0, bad.start() - 60): bad.end() + 60]!a}"


def check_csv_cells(tables: Path) -> None:
    """Every CSV file parses, every row as wide as its header, no text cell starts a formula."""
    for f in sorted(tables.glob("*.csv")):
        with open(f, newline="", encoding="utf-8") as fh:
            rows = list(csv.reader(fh))
        for row in rows[1:]:
            assert len(row) == len(rows[0]), f"{f.name}: a row of {len(row)} cells under {len(rows[0])} headers"
            for cell in row:
                if cell.startswith(FORMULA_START):
                    try:
                        float(cell)             # a negative number is a number, not a formula
                    except ValueError:
                        pytest.fail(f"{f.name}: a cell starts a formula: {cell[:60]!a}")


def check_csv(case: Case, out: Path) -> None:
    check_csv_cells(out / "tables")
    with open(out / "tables" / "kernels.csv", newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    names = {r["kernel_name"][1:] if r["kernel_name"].startswith("'") and r["kernel_name"][1:].startswith(FORMULA_START)
             else r["kernel_name"]
             for r in rows}
    assert names == set(case.kernel_names()), "kernels.csv does not keep the names"


def check_terminal(stdout: str, stderr: str) -> None:
    for what, text in (("stdout", stdout), ("stderr", stderr)):
        bad = HIDDEN.search(text)
        assert bad is None, f"raw {bad.group()!a} on {what}: {text[max(0, bad.start() - 60): bad.end() + 60]!a}"
    assert "Traceback" not in stderr and "error" not in stderr, stderr[-2000:]
    assert stdout.startswith("nsys-llm-explain: wrote ") and "report.md" in stdout.splitlines()[0], stdout[:500]


def check_compare(case: Case, trace: Path, plain: Path, plain_compare: Page, where: Path, capsys) -> None:
    """``compare`` of a plain trace (BASE) and the hostile one: the same promises for compare.md/html/json/csv."""
    out = where / "cmp"
    rc = main(["compare", str(plain), str(trace), "--out", str(out), "--quiet"])
    cap = capsys.readouterr()
    assert rc == 0, f"compare: exit {rc}: {cap.err[-2000:]}"
    check_terminal("nsys-llm-explain: wrote report.md", cap.err)
    d = json.loads((out / "compare.json").read_text(encoding="utf-8"))
    names = {k["name"] for c in d["comparisons"] for k in c["kernel_deltas"]}
    assert names == set(case.kernel_names()) | {f"kernel_{i}" for i in range(N_KERNELS)}, "compare.json names changed"
    check_markdown((out / "compare.md").read_text(encoding="utf-8"))
    got = page(out / "compare.html")
    check_html(got, plain_compare)
    check_figures(got.text_of_file)
    check_csv_cells(out / "tables")


# ------------------------------------------------------------------------------------------------ the test
@pytest.fixture(scope="module")
def plain(tmp_path_factory) -> Tuple[Path, Page, Page]:
    """A trace of inert names, its report's page, and the page of its comparison with a renamed copy."""
    d = tmp_path_factory.mktemp("plain")
    trace, other = d / "t.sqlite", d / "other.sqlite"
    Case(0, plain="kernel").build(trace)
    Case(0, plain="other").build(other)
    assert main([str(trace), "--out", str(d / "out"), "--quiet"]) == 0
    assert main(["compare", str(trace), str(other), "--out", str(d / "cmp"), "--quiet"]) == 0
    return trace, page(d / "out" / "report.html"), page(d / "cmp" / "compare.html")


@pytest.mark.parametrize("seed", seeds(FAST, 8))
def test_hostile_names_are_data_in_every_output(seed: int, tmp_path: Path, plain, capsys) -> None:
    plain_trace, plain_page, plain_compare = plain
    case = Case(seed)
    with replayable(seed, {"kernels": case.kernels, "bad": case.bad, "ranges": case.ranges,
                           "process": case.process, "thread": case.thread, "gpu": case.gpu, "out": case.out,
                           "registered": case.registered, "other_bad": case.other_bad}):
        out, stdout, stderr = run(case, tmp_path, capsys)
        check_complete(out)
        check_json(case, out)
        check_markdown((out / "report.md").read_text(encoding="utf-8"))
        html_page = page(out / "report.html")
        check_html(html_page, plain_page)
        check_figures(html_page.text_of_file)
        check_csv(case, out)
        check_terminal(stdout, stderr)
        if seed % 2:
            check_compare(case, tmp_path / "t.sqlite", plain_trace, plain_compare, tmp_path, capsys)


def test_the_fast_seeds_cover_every_class() -> None:
    """The default fast seeds alone draw from every pool of hostile pieces, start a name like a formula, hold a
    name of 100 KB, a NUL, a CR LF and bytes that are not UTF-8 (so the fast set is not a weaker test)."""
    cases = [Case(seed) for seed in range(DEFAULT_SEED, DEFAULT_SEED + FAST)]
    names = [n for c in cases for n in c.kernels + c.ranges + [c.process, c.thread]]
    for pool in (CONTROLS, TERMINAL, BIDI, MARKUP, CSV_META, UNICODE):
        assert any(piece in n for n in names for piece in pool if len(piece) > 1 or piece not in "\x00 "), pool[:3]
    for needle in ("\x1b]8;;", "\u202e", "<img", "|", "\x00", "\r\n"):
        assert any(needle in n for n in names), ascii(needle)
    assert any(n.startswith(FORMULA_START) for n in names) and max(map(len, names)) >= 100_000
    assert any(c.bad for c in cases)


def test_no_progress_line_outlives_the_run(capsys) -> None:
    """Found by this suite (a progress line of an earlier run in a later run's stderr): steps start on several
    threads at once (runner.py) and each replaced the progress timer without a lock, so a timer could be left
    running and print ``[nsys-llm-explain] <step> … (1.0 s elapsed)`` after ``stop()``, after the report was
    written (terminal.Progress now holds one timer under a lock)."""
    for _ in range(10):
        p = Progress(f"[{PROG}] ", True, delay=0.05)
        start = threading.Barrier(8)
        threads = [threading.Thread(target=lambda i=i, p=p, b=start: (b.wait(), p(f"step {i}"))) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        p.stop()
    time.sleep(0.1)
    assert capsys.readouterr().err == ""
    p = Progress(f"[{PROG}] ", True, delay=0.01)            # a step that runs long still says so
    p("slow step")
    time.sleep(0.1)
    p.stop()
    assert capsys.readouterr().err.startswith("[nsys-llm-explain] slow step … (")
