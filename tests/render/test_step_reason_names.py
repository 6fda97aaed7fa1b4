"""User names in the steps' and window's sentences (docs/SECURITY.md §4, "Names in sentences"): the steps' confidence
reason ("NVTX range … (N instances) encloses …", "the outermost NVTX range that repeats with kernel launches inside,
…", the parts of one iteration "with … ×N between its instances"), the marker-regex reasons, the ``--step-range``
notes and the ``--window-nvtx`` reason quoted names with Python's ``repr`` (``'decode_step'``): a backtick in the
name paired with the sentence's other backticks, and ``repr`` wrote a newline or an ESC as the text ``\\n`` /
``\\x1b``. Each name is now a code span written by ``vocabulary.code_spans.code_name`` (fenced when it holds
backticks): report.md and report.html show the name whole in ``<code>``, report.json and the CSV files keep the span
with the name exactly, and no output holds a hidden character. Each trace is built by hand; the truth is in the
docstrings."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path
from typing import List

import pytest
from synth import TraceBuilder

from nsys_llm_explainer import analyze
from nsys_llm_explainer.cli import main
from nsys_llm_explainer.options import Options
from nsys_llm_explainer.pipeline import analyze_path
from nsys_llm_explainer.render import render_html, render_markdown
from nsys_llm_explainer.render.escape import CODE_LIMIT

US, MS = 1_000, 1_000_000
HIDDEN = re.compile("[\ue000-\uf8ff\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069]")
LONG = "L" * 100_000

#: (step range name, its span as written, as report.md shows it, as report.html shows it): 1, 2 and 3 backticks,
#: a newline and an ESC (shown as a space and as the visible escape ``\x1b``: docs/SECURITY.md §4)
NAMES = [
    ("decode_step`x` <b>", "`` decode_step`x` <b> ``", "<code>decode_step&#96;x&#96; &lt;b&gt;</code>",
     "<code>decode_step`x` &lt;b&gt;</code>"),
    ("decode_step cpu`adam", "`` decode_step cpu`adam ``", "<code>decode_step cpu&#96;adam</code>",
     "<code>decode_step cpu`adam</code>"),
    ("decode_step a``b` <i>", "``` decode_step a``b` <i> ```", "<code>decode_step a&#96;&#96;b&#96; &lt;i&gt;</code>",
     "<code>decode_step a``b` &lt;i&gt;</code>"),
    ("decode_step\n\x1b[m", "`decode_step\n\x1b[m`", "<code>decode_step \\\\x1b\\[m</code>",
     "<code>decode_step \\x1b[m</code>"),
]
IDS = ["one", "two", "three", "escapes"]


def _steps(path: Path, name: str, lead_ms: int = 0, marker: str = "argmax_kernel") -> str:
    """One process, one thread, GPU 0. With ``lead_ms``: a ``warm`` kernel [0, 10 µs) launched at [-10, -5) µs
    before the loop. Then 10 ranges ``name`` of 800 µs every 1 ms from ``lead_ms`` + 1 ms, each launching ``gemm``
    [t + 25, t + 500) µs and ``marker`` [t + 500, t + 510) µs: 20 launches inside the ranges."""
    b = TraceBuilder()
    b.process(100, "p")
    g = b.thread(100, 100, "main")
    b.gpu(0)
    if lead_ms:
        b.launch(0, 5 * US, 10 * US, 20 * US, pid=100, tid=100, device=0, name="warm")
    for i in range(10):
        t = (lead_ms + 1 + i) * MS
        b.nvtx_push_pop(t, t + 800 * US, name, tid_g=g)
        b.launch(t + 10 * US, t + 20 * US, t + 25 * US, t + 500 * US, pid=100, tid=100, device=0, name="gemm")
        b.launch(t + 30 * US, t + 40 * US, t + 500 * US, t + 510 * US, pid=100, tid=100, device=0, name=marker)
    return b.write(str(path), overwrite=True)


def _no_hidden(out: Path, stdout: str) -> None:
    """No hidden character in report.md, report.json (JSON escapes them), report.html (but the inlined plotly.js)
    or the stdout summary; the CSV files keep names and sentences exactly (docs/SECURITY.md §4)."""
    for p in [out / "report.md", out / "report.json"]:
        assert not HIDDEN.search(p.read_text(encoding="utf-8")), p
    html = (out / "report.html").read_text(encoding="utf-8")
    assert not HIDDEN.search(re.sub(r"(?s)<script>.*?</script>", "", html))
    assert not HIDDEN.search(stdout)


@pytest.mark.parametrize("name,span,md,page", NAMES, ids=IDS)
def test_confidence_reason_names_its_range_as_a_code_span(tmp_path: Path, capsys, name: str, span: str, md: str,
                                                          page: str) -> None:
    """``_steps`` without a lead: the 10 ranges enclose all 20 launches, and ``decode_step`` is a step keyword:
    confidence high, "NVTX range {span} (10 instances) encloses 100% of kernel launches". report.md / report.html
    show the name once in ``<code>`` there; report.json holds the span with the name exactly (newline and ESC
    kept)."""
    out = tmp_path / "out"
    assert main([_steps(tmp_path / "t.sqlite", name), "--out", str(out)]) == 0
    reason = "NVTX range {} (10 instances) encloses 100% of kernel launches"
    text = (out / "report.md").read_text(encoding="utf-8")
    assert f"(confidence high: {reason.format(md)})" in text
    html = (out / "report.html").read_text(encoding="utf-8")
    assert f"(confidence high: {reason.format(page)})" in html
    st = json.loads((out / "report.json").read_text(encoding="utf-8"))["steps"]
    assert (st["confidence"], st["confidence_reason"]) == ("high", reason.format(span))
    _no_hidden(out, capsys.readouterr().out)


def test_window_reason_names_the_range_in_every_output(tmp_path: Path, capsys) -> None:
    """``_steps`` with a 50 ms lead and ``--window-nvtx`` the range ``decode_step`x` <b>``: the window is the span
    of the 10 ranges, [51, 60.8) ms = 9.800 ms; GPU busy there 10 × (475 + 10) µs = 4.850 ms (49.5 %, idle 50.5 %).
    Over the whole capture [0, 60.8) ms: 4.860 ms busy of 60.800 ms (8.0 %, idle 92.0 %): 41.5 points idler
    (≥ 10), so the capture_window finding's evidence ends with the window reason "Window set to the span of the 10
    NVTX range(s) named `` decode_step`x` <b> `` (9.800 ms)." — in report.md's window line and the finding, in
    report.html, and in findings.csv / report.json with the span."""
    name = "decode_step`x` <b>"
    out = tmp_path / "out"
    assert main([_steps(tmp_path / "t.sqlite", name, lead_ms=50), "--out", str(out), "--window-nvtx", name]) == 0
    reason = "Window set to the span of the 10 NVTX range(s) named {} (9.800 ms)."
    md = "<code>decode_step&#96;x&#96; &lt;b&gt;</code>"
    text = (out / "report.md").read_text(encoding="utf-8")
    assert text.count(reason.format(md)) == 2                  # the window line and the finding's evidence
    assert "- Idle 92.0 % over the whole capture vs 50.5 % in the chosen window" in text
    html = (out / "report.html").read_text(encoding="utf-8")
    assert html.split('<script type="application/json"', 1)[0].count(
        reason.format("<code>decode_step`x` &lt;b&gt;</code>")) == 2
    span = reason.format("`` decode_step`x` <b> ``")
    with open(out / "tables" / "findings.csv", newline="", encoding="utf-8") as fh:
        row = next(r for r in csv.DictReader(fh) if r["id"] == "capture_window")
    assert row["evidence"].endswith(span)
    rep = json.loads((out / "report.json").read_text(encoding="utf-8"))
    assert rep["window"]["reason"] == span
    _no_hidden(out, capsys.readouterr().out)


def test_a_long_window_range_name_is_shortened_where_it_stands(tmp_path: Path) -> None:
    """``--window-nvtx`` a 100 KB range name: the window line keeps its sentence, the name shortened to 200
    characters (159 + '…' + 40) in its code span, in report.md and report.html (not 5,000 ``L`` in a row)."""
    name = "decode_step" + LONG
    rep = analyze_path(_steps(tmp_path / "t.sqlite", name, lead_ms=50), Options(window_nvtx=name))
    tail = CODE_LIMIT // 5
    short = name[:CODE_LIMIT - 1 - tail] + "…" + name[-tail:]
    md, page = render_markdown(rep), render_html(rep)
    assert f"Window set to the span of the 10 NVTX range(s) named `{short}` (9.800 ms)." in md
    assert f"Window set to the span of the 10 NVTX range(s) named <code>{short}</code> (9.800 ms)." in page
    assert "L" * 5_000 not in md and "L" * 5_000 not in page.split('<script type="application/json"', 1)[0]


def test_step_range_reason_and_note_quote_the_users_text(tmp_path: Path) -> None:
    """``--step-range`` ``decode_step`x` <b>`` (the range's exact name): "confidence high: step ranges chosen by the
    user (--step-range `` decode_step`x` <b> ``)". ``--step-range`` ``nope`a``\\n`` (matches no range): the note
    "--step-range ``` nope`a``\\n ``` matches no NVTX push/pop range; detecting steps automatically" (a run of 2
    backticks: a fence of 3), then the automatic choice (the same ranges, "encloses 100%")."""
    name = "decode_step`x` <b>"
    p = _steps(tmp_path / "t.sqlite", name)
    chosen = analyze_path(p, Options(step_range=name))
    assert chosen.steps.confidence_reason == "step ranges chosen by the user (--step-range `` decode_step`x` <b> ``)"
    assert ("(confidence high: step ranges chosen by the user (--step-range "
            "<code>decode_step&#96;x&#96; &lt;b&gt;</code>))") in render_markdown(chosen)
    assert ("(confidence high: step ranges chosen by the user (--step-range <code>decode_step`x` &lt;b&gt;</code>))"
            in render_html(chosen))
    missed = analyze_path(p, Options(step_range="nope`a``\n"))
    note = "--step-range ``` nope`a``\n ``` matches no NVTX push/pop range; detecting steps automatically"
    assert missed.steps.notes == (note,)
    assert missed.steps.confidence_reason.startswith("NVTX range `` decode_step`x` <b> `` (10 instances) encloses")
    assert ("- Note: --step-range <code>nope&#96;a&#96;&#96; </code> matches no NVTX push/pop range; detecting steps "
            "automatically") in render_markdown(missed)
    assert "<li>Note: --step-range <code>nope`a`` </code> matches no NVTX push/pop range" in render_html(missed)


def test_marker_reasons_quote_the_users_regex(tmp_path: Path) -> None:
    """``_steps`` with range ``blk`x`` (no step keyword) and marker kernel ``argmax_kernel``: with ``--step-marker``
    ``arg`?max`` — a backtick in the regex (it still matches ``argmax``, the optional backtick absent) — and no NVTX
    choice (a marker is given), the steps are the 9 spans between the 10 markers per device (≥ 5): "steps bounded by
    marker kernels (user regex `` arg`?max ``); no NVTX range marks steps". Without ``--step-marker`` the low
    NVTX choice ``blk`x`` ×10 gives way to the default marker (9 steps ≥ 3 per device), the note naming the range
    "marker kernels preferred over the NVTX range `` blk`x` `` whose name does not look like a model step"."""
    p = _steps(tmp_path / "t.sqlite", "blk`x`")
    rep = analyze_path(p, Options(step_marker="arg`?max"))
    st = rep.steps
    assert (st.method, st.step_count, st.confidence) == ("marker", 9, "medium")
    assert st.confidence_reason == ("steps bounded by marker kernels (user regex `` arg`?max ``); no NVTX range marks "
                                    "steps")
    assert ("(confidence medium: steps bounded by marker kernels (user regex <code>arg&#96;?max</code>); no NVTX range "
            "marks steps)") in render_markdown(rep)
    auto = analyze(p).steps
    assert (auto.method, auto.step_count) == ("marker", 9)
    assert auto.notes == ("marker kernels preferred over the NVTX range `` blk`x` `` whose name does not look like a "
                          "model step",)
    assert ("- Note: marker kernels preferred over the NVTX range <code>blk&#96;x&#96;</code> whose name does not look "
            "like a model step") in render_markdown(analyze(p))


def test_no_steps_reason_quotes_the_users_regex(tmp_path: Path) -> None:
    """No NVTX ranges (``_steps`` would add them: a trace of 10 ``gemm`` kernels alone) and ``--step-marker``
    ``nomatch`x`` matching no kernel: steps are omitted, the reason "no NVTX range repeats once per step and fewer
    than 2 marker kernels (regex `` nomatch`x ``) ran on any device" — in report.json, and in report.md's "Not
    shown" line with the regex in ``<code>``."""
    b = TraceBuilder()
    b.process(100, "p")
    b.thread(100, 100, "main")
    b.gpu(0)
    for i in range(10):
        t = (1 + i) * MS
        b.launch(t, t + 5 * US, t + 10 * US, t + 500 * US, pid=100, tid=100, device=0, name="gemm")
    rep = analyze_path(b.write(str(tmp_path / "t.sqlite"), overwrite=True), Options(step_marker="nomatch`x"))
    assert rep.steps.reason == ("no NVTX range repeats once per step and fewer than 2 marker kernels "
                                "(regex `` nomatch`x ``) ran on any device")
    md = render_markdown(rep)
    line: List[str] = [x for x in md.splitlines() if x.startswith("**Not shown (no data):**")]
    assert line and "marker kernels (regex <code>nomatch&#96;x</code>) ran on any device" in line[0]
