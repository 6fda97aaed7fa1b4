"""Hostile names where the start-up, pause and harness sentences pick names up — the loop detail of a mixed start-up
finding ("largest in the loop `X`"), the quoted label ("… of it in `Z`, the verdict's"), the thread and the other
processes of the pause and unsampled-`host_cpu` evidence, the event-timed thread and the GEMM of a harness. Each trace
is a hand-built one of the findings tests (its docstring times it) with its names replaced in the written export;
report.md, report.html, tables/*.csv and the terminal summary stay inert (the checkers of
tests/render/test_names_inert.py)."""

from __future__ import annotations

import csv
import re
import sqlite3
from pathlib import Path
from typing import Callable, Dict, List, Tuple

import pytest
import test_claims_benchmark_harnesses as harnesses
import test_claims_input_pipeline_training as input_pipeline
import test_claims_unsampled_launcher_gaps as unsampled_launcher
from synth import TraceBuilder
from test_claims_generations_and_empty_range_names import _two_ranges

from nsys_llm_explainer.cli import main

US = 1_000
HIDDEN = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
#: NAME stands for the original name (kept inside, so the name rules that classify it still match)
HOSTILE = {
    "markdown_html": "NAME`|*_[x](http://evil.example)<script>alert(1)</script><img src=x>",
    "formula": '=HYPERLINK("http://evil.example","x")NAME',
    "terminal": "NAME\x1b[31mRED\x1b]8;;http://evil.example/\x07c\x1b]8;;\x07",
    "bidi": "NAME\u202egnp.exe",
    "long": "NAME" + "L" * 100_000,
}


def csv_cells_inert(tables: Path) -> None:
    """No cell of ``tables/*.csv`` starts like a spreadsheet formula unless it is a number."""
    csv.field_size_limit(10_000_000)
    for f in sorted(tables.glob("*.csv")):
        with open(f, newline="", encoding="utf-8") as fh:
            for row in csv.reader(fh):
                for cell in row:
                    if cell[:1] in ("=", "+", "-", "@", "\t", "\r"):
                        try:
                            float(cell)
                        except ValueError:
                            pytest.fail(f"{f.name}: formula-like cell {cell[:40]!r}")


def _mixed() -> Tuple[TraceBuilder, List[str]]:
    """The mixed trace of test_claims_one_time_work_titles.py: `init` [0, 600 µs), 10 steps of a 30 µs `send` then 10
    kernels."""
    b = TraceBuilder()
    b.process(7)
    g = b.thread(7, 1)
    b.nvtx_push_pop(0, 600 * US, "init", tid_g=g)
    t = 610 * US
    for _ in range(10):
        b.nvtx_push_pop(t, t + 30 * US, "send", tid_g=g)
        for i in range(10):
            k = t + 40 * US + i * 10 * US
            b.launch(k - 8 * US, k - 6 * US, k, k + 9 * US, pid=7, tid=1, name="gemm")
        t += 140 * US
    return b, ["--window", "0:2009000"]


def _stake() -> Tuple[TraceBuilder, List[str]]:
    b, end = _two_ranges("load", "log", "2024.2")
    return b, ["--window", f"0:{end}"]


TRACES: Dict[str, Tuple[Callable[[], Tuple[TraceBuilder, List[str]]], List[str]]] = {
    "loop_detail": (_mixed, ["send", "init"]),
    "quoted_label": (_stake, ["load", "log"]),
    "pause": (lambda: (unsampled_launcher._poll_loop(pause_at=5, training=True), []), ["pt_data_worker", "python3"]),
    "unsampled": (lambda: (input_pipeline._loader_loop(osrt=False), []), ["pt_data_worker", "python3"]),
    "harness": (lambda: (harnesses._do_bench(timed_add_us=20), []), [harnesses.GEMM, "main"]),
}


def _rename(path: Path, pairs: List[Tuple[str, str]]) -> None:
    con = sqlite3.connect(path)
    for old, new in pairs:
        con.execute("UPDATE StringIds SET value = ? WHERE value = ?", (new, old))
        con.execute("UPDATE PROCESSES SET name = ? WHERE name = ?", (new, old))
        if con.execute("SELECT 1 FROM sqlite_master WHERE name = 'NVTX_EVENTS'").fetchone():
            con.execute("UPDATE NVTX_EVENTS SET text = ? WHERE text = ?", (new, old))
    con.commit()
    con.close()


@pytest.mark.slow
@pytest.mark.parametrize("hostile", sorted(HOSTILE))
@pytest.mark.parametrize("trace", sorted(TRACES))
def test_new_sentences_keep_hostile_names_inert(trace: str, hostile: str, tmp_path: Path, capsys) -> None:
    make, olds = TRACES[trace]
    b, opts = make()
    p = tmp_path / "t.sqlite"
    b.write(str(p))
    _rename(p, [(o, HOSTILE[hostile].replace("NAME", o)) for o in olds])
    assert main([str(p), "--out", str(tmp_path / "out"), *opts]) == 0
    out, err = capsys.readouterr()
    assert not HIDDEN.search(out + err), repr(out + err)
    d = tmp_path / "out"
    for f in ("report.md", "report.html"):
        text = (d / f).read_text(encoding="utf-8")
        text = re.sub(r"<script>.*?</script>", "", text, flags=re.S)   # our own scripts (html)
        bad = HIDDEN.search(text)
        assert bad is None, (f, repr(text[max(0, bad.start() - 60): bad.end() + 20]))
        # raw HTML nowhere; a Markdown link only matters in the .md (in HTML it is text inside <code>)
        for raw in ("<script>alert", "<img src") + (("](http://evil",) if f == "report.md" else ()):
            assert raw not in text, (f, raw, text[max(0, text.find(raw) - 300): text.find(raw) + 60])
        assert "L" * 5000 not in text, f
    csv_cells_inert(d / "tables")
