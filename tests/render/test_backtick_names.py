"""Names holding backticks inside the tool's sentences (docs/SECURITY.md §4, "Names in sentences"): a finding writes
each name through ``vocabulary.code_spans.code_name``: ```name``` for a name without a backtick (every ordinary name:
no output changes), else a span fenced by one backtick more than the name's longest run, a space inside each fence
(CommonMark's form). report.md / report.html show the name whole, in monospace and escaped; report.json, the CSV
files and the terminal keep the fenced text (no private-use or other hidden character). Truths in the docstrings."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest
from synth import TraceBuilder
from test_names_in_sentences import _cycle

from nsys_llm_explainer import analyze
from nsys_llm_explainer.cli import main
from nsys_llm_explainer.render import render_html, render_markdown
from nsys_llm_explainer.render.escape import md_rich
from nsys_llm_explainer.render.html.markup import rich
from nsys_llm_explainer.vocabulary.code_spans import code_name, split

US, MS = 1_000, 1_000_000
#: private-use characters (a marker pair would be one) and other hidden characters must not reach any output
HIDDEN = re.compile("[\ue000-\uf8ff\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069]")

#: (name, its span as written, as report.md shows it, as report.html shows it): 1, 2 and 3 backticks
NAMES = [
    ("cpu`adam", "`` cpu`adam ``", "<code>cpu&#96;adam</code>", "<code>cpu`adam</code>"),
    ("`x` <b>", "`` `x` <b> ``", "<code>&#96;x&#96; &lt;b&gt;</code>", "<code>`x` &lt;b&gt;</code>"),
    ("a``b` <i>", "``` a``b` <i> ```", "<code>a&#96;&#96;b&#96; &lt;i&gt;</code>", "<code>a``b` &lt;i&gt;</code>"),
    ("```x", "```` ```x ````", "<code>&#96;&#96;&#96;x</code>", "<code>```x</code>"),
]


def test_code_name_writes_ordinary_names_as_before_and_fences_the_others() -> None:
    """An ordinary name (also the empty one) is ```name```, as every finding wrote it; a name with a backtick is
    fenced by a run one longer than its longest (1 → 2, 2 → 3, 3 → 4), a space inside each fence, and reads back
    whole — also with a leading / trailing space (the fence's one space is taken off each side, no more)."""
    assert code_name("ampere_gemm") == "`ampere_gemm`" and code_name("") == "``"
    for name, span, _, _ in NAMES:
        assert code_name(name) == span
        assert split(f"in {span} then `k` {span}.") == ["in ", name, " then ", "k", " ", name, "."]
    assert code_name(" `a ") == "``  `a  ``" and split(code_name(" `a "))[1] == " `a "


def test_split_reads_sentences_without_fenced_spans_as_str_split() -> None:
    """Without fenced spans the parts are ``str.split("`")``'s (what md_rich / rich split before); an unpaired
    backtick outside a span gives None (all plain text), also beside a fenced span."""
    for s in ("a `b` c", "``", "x `` y `z`", "no spans"):
        assert split(s) == s.split("`")
    assert split("a `b c") is None and split("`` `x ``, then `") is None


def test_md_rich_and_rich_show_a_fenced_name_and_keep_later_spans() -> None:
    """A sentence "thread `` `x` <b> `` waits in `sem_wait`": the name is one code span (escaped), and the code span
    after it stays one (with single-backtick pairing the name's two backticks shifted every later span)."""
    s = f"thread {code_name('`x` <b>')} waits in `sem_wait`"
    assert md_rich(s) == "thread <code>&#96;x&#96; &lt;b&gt;</code> waits in `sem_wait`"
    assert rich(s) == "thread <code>`x` &lt;b&gt;</code> waits in <code>sem_wait</code>"


def _nvtx_idle(path: Path, name: str) -> str:
    """One process, one thread, GPU 0; 3 steps of 100 ms from 1 ms: 20 kernels ``fwd`` of 990 µs at
    [t + j ms + 10 µs, t + (j + 1) ms), launched at t + 10j µs; the host in ``cudaStreamSynchronize``
    [t + 0.2, t + 20) ms, then in NVTX range ``name`` [t + 20.010, t + 99.990) ms with no CUDA call. Window
    [1, 300.990) ms = 299.990 ms; kernels 60 × 990 µs = 59.400 ms busy (19.8 %). The range holds 3 × 79.980 =
    239.940 ms of idle ("By range"); the title claims that less the 600 µs of the last gap within one timeline bin
    (299.990 ms / 500) of the window's end: 239.340 ms = 79.8 % — the verdict."""
    b = TraceBuilder()
    b.process(100, "train")
    g = b.thread(100, 100, "MainThread")
    for s in range(3):
        t = 1 * MS + s * 100 * MS
        for j in range(20):
            b.launch(t + j * 10 * US, t + j * 10 * US + 5 * US, t + j * MS + 10 * US, t + (j + 1) * MS, pid=100,
                     tid=100, name="fwd")
        b.runtime(t + 200 * US, t + 20 * MS, tid_g=g, name="cudaStreamSynchronize_v3020")
        b.nvtx_push_pop(t + 20_010 * US, t + 99_990 * US, name, tid_g=g)
    return b.write(str(path), overwrite=True)


@pytest.mark.parametrize("name,span,md,page", NAMES, ids=["one", "two", "three_split", "three_run"])
def test_nvtx_range_with_backticks_in_every_output(tmp_path: Path, capsys, name: str, span: str, md: str,
                                                    page: str) -> None:
    """The idle finding names the NVTX range in its title (the verdict) and evidence. report.md and report.html
    show the whole name in ``<code>`` wherever a sentence quotes it; findings.csv, report.json and the stdout
    summary hold the fenced span; no output holds a private-use or hidden character."""
    out = tmp_path / "out"
    assert main([_nvtx_idle(tmp_path / "t.sqlite", name), "--out", str(out)]) == 0
    title = "The GPU idles while the host is in NVTX range {} (79.8 % of the window, 239.340 ms)"
    stdout = capsys.readouterr().out
    assert f"  verdict: {title.format(span)}\n" in stdout
    text = (out / "report.md").read_text(encoding="utf-8")
    assert f"**Verdict: {title.format(md)}**" in text
    assert f"### 1. HIGH — {title.format(md)}\n" in text
    assert f"- By range: {md} 239.940 ms.\n" in text
    assert f"- 3 idle gaps on device 0 hold {md}; largest at 20.000 → " in text
    html = (out / "report.html").read_text(encoding="utf-8")
    assert html.count(title.format(page)) == 2          # the verdict and the finding's title
    assert f"By range: {page} 239.940 ms." in html
    with open(out / "tables" / "findings.csv", newline="", encoding="utf-8") as fh:
        row = next(r for r in csv.DictReader(fh) if r["id"] == "idle_nvtx")
    assert row["title"] == title.format(span)
    assert f"By range: {span} 239.940 ms." in row["evidence"]
    rep = json.loads((out / "report.json").read_text(encoding="utf-8"))
    f = next(x for x in rep["findings"] if x["id"] == "idle_nvtx")
    assert f["title"] == title.format(span)
    for p in out.rglob("*"):
        if p.suffix in (".md", ".json", ".csv"):
            assert not HIDDEN.search(p.read_text(encoding="utf-8")), p
    assert not HIDDEN.search(re.sub(r"(?s)<script>.*?</script>", "", html))     # but the inlined plotly.js
    assert not HIDDEN.search(stdout)


@pytest.mark.parametrize("name,span,md,page", NAMES[:3], ids=["one", "two", "three"])
def test_step_sync_evidence_keeps_its_later_code_spans(tmp_path: Path, name: str, span: str, md: str,
                                                       page: str) -> None:
    """Two engines time-sliced on GPU 0 (as test_names_in_sentences.py), engine A's thread named ``name``: its
    step-sync evidence names the thread, then the sync call in its own span — "(`cudaStreamSynchronize` 50)". With
    single-backtick pairing, an odd count of backticks in the name turned every span of the sentence to plain text
    and an even count shifted them; now the call stays a code span after the name in report.md and report.html."""
    b = TraceBuilder()
    b.process(100, "A")
    b.process(200, "B")
    for c in range(50):
        T = 1 * MS + c * 2 * MS
        _cycle(b, 100, T, "vllm_gemm", name)
        _cycle(b, 200, T + 1 * MS, "sgl_gemm", "B")
    rep = analyze(b.write(str(tmp_path / "t.sqlite"), overwrite=True))
    head = ("Device 0, thread {} (pid 100, tid 100): 50 blocking calls wait until the GPU has finished the thread's "
            "work ({})")
    ev = [e for f in rep.findings for e in f.evidence if e.startswith("Device 0, thread ")]
    assert ev and ev[0].startswith(head.format(span, "`cudaStreamSynchronize` 50"))
    assert head.format(md, "`cudaStreamSynchronize` 50") in render_markdown(rep)
    assert head.format(page, "<code>cudaStreamSynchronize</code> 50").replace("'", "&#x27;") in render_html(rep)


def test_compare_verdict_with_backtick_labels(tmp_path: Path, capsys) -> None:
    """``compare`` of the NVTX trace with itself (range ``x``), labels ``base`x`` (1 backtick) and ``new``y`` (a run
    of 2): both runs have the same 59 periods between their 60 ``fwd`` kernels (the anchor; median 1.000 ms), so the
    verdict is "no significant difference". It names NEW then BASE as fenced spans (2 and 3 backticks) in
    compare.json and on stdout, and compare.md shows each label whole in ``<code>``."""
    t = _nvtx_idle(tmp_path / "t.sqlite", "x")
    out = tmp_path / "cmp"
    assert main(["compare", t, t, "--labels", "base`x,new``y", "--out", str(out)]) == 0
    first = ("{} and {} do not differ significantly on the median iteration period: 1.000 ms → 1.000 ms (+0.0 %, "
             "within the noise).")
    fenced = first.format("``` new``y ```", "`` base`x ``")
    assert f"  {fenced}\n" in capsys.readouterr().out
    assert json.loads((out / "compare.json").read_text(encoding="utf-8"))["comparisons"][0]["headline"][0] == fenced
    md = (out / "compare.md").read_text(encoding="utf-8")
    assert first.format("<code>new&#96;&#96;y</code>", "<code>base&#96;x</code>") + "  \n" in md
