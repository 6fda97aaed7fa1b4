"""compare's run labels are user data, escaped exactly once per output: compare.md shows them (rendered) as the
label with control / bidi characters as visible escapes, compare.html the same text, compare.json the label as
given — a backslash is never doubled in what a reader sees."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest
from synth import TraceBuilder

import nsys_llm_explainer as nle
from nsys_llm_explainer.comparison.write import write_compare

US = 1_000
LABELS = ["a\\b|c*d\u202ee", "f\ng"]
#: what a reader sees of each (bidi and newline characters shown, as everywhere: render/escape.visible)
SEEN = ["a\\b|c*d\\u202ee", "f g"]


def _steps(path: Path, kernel_us: int) -> None:
    b = TraceBuilder("2024.2", seed=3)
    b.process(100, "python3")
    g = b.thread(100, 100, "main")
    b.gpu(0)
    for s in range(12):
        t = 1_000 * US + s * 1_000 * US
        b.launch(t + 5 * US, t + 10 * US, t + 20 * US, t + (20 + kernel_us) * US, pid=100, tid=100, name="gemm")
        b.nvtx_push_pop(t, t + 900 * US, "execute_model", tid_g=g)
    b.write(str(path), overwrite=True)


def _md_rendered(cell: str) -> str:
    """A Markdown span as a CommonMark reader renders its text: backslash escapes and entities resolved once."""
    return html.unescape(re.sub(r"\\(.)", r"\1", cell))


@pytest.mark.slow
def test_labels_with_backslash_pipe_star_bidi_and_newline_are_escaped_once(tmp_path: Path) -> None:
    a, b = tmp_path / "a.sqlite", tmp_path / "b.sqlite"
    _steps(a, 600)
    _steps(b, 300)
    res = nle.compare([str(a), str(b)], labels=LABELS)
    out = tmp_path / "out"
    write_compare(res, out)
    assert [t["label"] for t in json.loads((out / "compare.json").read_text())["traces"]] == LABELS
    md = (out / "compare.md").read_text()
    first = md.splitlines()[0]          # "# Trace comparison: NEW vs BASE BASE-LABEL"
    shown = [_md_rendered(tag or span) for tag, span in re.findall(r"<code>(.*?)</code>|`([^`]*)`", first)]
    assert shown == [SEEN[1], SEEN[0]]
    assert "\\\\\\\\" not in md        # a backslash escaped twice would read as two
    page = (out / "compare.html").read_text()
    titles = {html.unescape(t) for t in re.findall(r'<code title="([^"]*)"', page)}
    assert set(SEEN) <= titles and not any("\\\\" in t for t in titles)
    assert "\u202e" not in md and "\u202e" not in page
