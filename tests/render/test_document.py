"""One document for every output: the HTML page holds every section of the Markdown file, with the same sentences
and the same table rows (text content compared, not markup), for the report (demo, scenarios, real traces), the
comparison and the cluster report. Also the writers' layout rules (docs in render/document.py)."""

from __future__ import annotations

import html
import re
from html.parser import HTMLParser
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Dict, List, Optional, Tuple

import pytest
from conftest import as_report, built_scenario, empty_report, real_traces, trace_id

from nsys_llm_explainer.render import render_html, render_markdown
from nsys_llm_explainer.render.document import (
    BR,
    NL,
    Code,
    Data,
    Document,
    Paragraph,
    Rich,
    Section,
    Strong,
    TablePart,
    bullets,
    para,
)
from nsys_llm_explainer.render.html.writer import HtmlWriter
from nsys_llm_explainer.render.markdown import write_markdown
from nsys_llm_explainer.render.table import int_col, name_col
from nsys_llm_explainer.vocabulary.units import fmt_dur

Table = Tuple[List[str], List[List[str]]]
#: scenarios whose reports hold the optional sections (Unified Memory, CPU samples, NCCL, CUDA graphs, steps)
SCENARIOS = ("unified_memory", "host_samples", "nccl_straggler", "cuda_graph_node", "pageable_h2d", "healthy")
_ESCAPED = re.compile(r"\\([\\`*_{}\[\]()#+\-.!|~$>=])")


def _md_plain(text: str) -> str:
    """What a Markdown reader sees of one line of our Markdown: code spans verbatim, emphasis markers and
    backslash escapes removed, HTML entities and ``<code>`` tags resolved."""
    parts = text.split("`")
    out = []
    for i, p in enumerate(parts):
        if i % 2:
            out.append(p)
            continue
        p = _ESCAPED.sub(lambda m: "\0" + str(ord(m.group(1))) + "\0", p)
        p = p.replace("**", "").replace("*", "").replace("<code>", "").replace("</code>", "")
        p = re.sub("\0(\\d+)\0", lambda m: chr(int(m.group(1))), p)
        out.append(html.unescape(p))
    return "".join(out)


def _norm(s: str) -> str:
    return " ".join(s.split())


def _cells(line: str) -> List[str]:
    cells = re.split(r"(?<!\\)\|", line.strip())[1:-1]
    return [_norm(_md_plain(c)) for c in cells]


def md_sections(md: str) -> Dict[str, Tuple[List[str], List[Table]]]:
    """Markdown ``## title`` → (the plain text of every non-table line, the tables); ``""``: the part before the
    first ``##``."""
    out: Dict[str, Tuple[List[str], List[Table]]] = {}
    title = ""
    lines: List[str] = []
    tables: List[Table] = []
    table: Optional[Table] = None
    for raw in md.splitlines() + ["## "]:
        if raw.startswith("## "):
            out[title] = (lines, tables)
            title, lines, tables, table = _norm(_md_plain(raw[3:])), [], [], None
        elif raw.startswith("|"):
            if table is None:
                table = (_cells(raw), [])
                tables.append(table)
            elif not re.fullmatch(r"\|(?:\s*-+:?\s*\|)+", raw.strip()):
                table[1].append(_cells(raw))
        else:
            table = None
            text = re.sub(r"^(?:#{1,6} |- |> )", "", raw.rstrip())
            if text.strip():
                lines.append(_norm(_md_plain(text)))
    return out


class HtmlSections(HTMLParser):
    """The page split at its ``<h2>`` headings as a reader sees it: per title the visible text and the tables
    (header cells, body rows: ``<tfoot>`` rows included)."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.sections: Dict[str, Tuple[List[str], List[Table]]] = {"": ([], [])}
        self.current = ""
        self._skip = 0
        self._h2: Optional[List[str]] = None
        self._row: Optional[List[str]] = None
        self._cell: Optional[List[str]] = None
        self._head = False
        self.feed(text)
        self.close()

    def handle_starttag(self, tag: str, attrs: List[Tuple[str, Optional[str]]]) -> None:
        if tag in ("script", "style", "nav"):
            self._skip += 1
        elif tag == "h2":
            self._h2 = []
        elif tag == "table":
            self.sections[self.current][1].append(([], []))
        elif tag == "tr":
            self._row = []
        elif tag in ("td", "th"):
            self._cell, self._head = [], tag == "th"
        elif tag in ("p", "li", "h1", "h3", "div", "br"):
            self.sections[self.current][0].append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style", "nav"):
            self._skip -= 1
        elif tag == "h2" and self._h2 is not None:
            self.current = _norm("".join(self._h2))
            self.sections[self.current] = ([], [])
            self._h2 = None
        elif tag in ("td", "th") and self._cell is not None and self._row is not None:
            self._row.append(_norm("".join(self._cell)))
            self._cell = None
        elif tag == "tr" and self._row is not None:
            head, rows = self.sections[self.current][1][-1]
            if self._head:
                head.extend(self._row)
            else:
                rows.append(self._row)
            self._row = None
        elif tag in ("p", "li", "h1", "h3"):
            self.sections[self.current][0].append("\n")

    def handle_data(self, data: str) -> None:
        if self._skip:
            return
        for buf in (self._h2, self._cell):
            if buf is not None:
                buf.append(data)
                return
        self.sections[self.current][0].append(data)


def assert_html_holds_md(md: str, page: str) -> None:
    """Every ``##`` section of ``md`` is a section of ``page`` with each of its lines (as text) and each of its
    table rows (the Markdown columns of an HTML table with the same headers plus possibly more)."""
    want = md_sections(md)
    got = HtmlSections(page).sections
    assert [t for t in want if t not in got] == [], list(got)
    for title, (lines, tables) in want.items():
        text = [_norm(x) for x in "".join(got[title][0]).split("\n")]
        joined = " | ".join(text)
        for line in lines:
            assert line in text or line in joined, (title, line)
        html_tables = list(got[title][1])
        for head, rows in tables:   # in order: the next page table whose headers hold the Markdown ones
            while html_tables and not set(head) <= set(html_tables[0][0]):
                html_tables.pop(0)
            assert html_tables, (title, head, [h for h, _ in got[title][1]])
            h, hrows = html_tables.pop(0)
            idx = [h.index(c) for c in head]
            assert [[r[i] if i < len(r) else "" for i in idx] for r in hrows[:len(rows)]] == rows, (title, head)


# ------------------------------------------------------------------------------------------------ reports
@pytest.fixture(scope="module")
def demo(demo_report: Any) -> Dict[str, Any]:
    return demo_report.to_dict()


def test_demo_html_holds_every_report_md_section(demo: Dict[str, Any]) -> None:
    md, page = render_markdown(as_report(demo)), render_html(as_report(demo), js="")
    titles = [t for t in md_sections(md) if t]
    assert len(titles) >= 15 and "Where the idle time went" in titles and "How these numbers are computed" in titles
    assert_html_holds_md(md, page)
    # the per-device line states the copies in both formats (the page used to leave that clause out)
    idle = "".join(HtmlSections(page).sections["Where the idle time went"][0])
    for d in demo["devices"]:
        clause = f"copies {fmt_dur(d['copy_busy_ns'])} ({fmt_dur(d['copy_only_ns'])} with no kernel running)"
        assert clause in md and clause in idle


@pytest.mark.parametrize("name", SCENARIOS)
def test_scenario_html_holds_every_report_md_section(name: str, tmp_path: Path) -> None:
    from nsys_llm_explainer.pipeline import analyze_path

    built_scenario(name, str(tmp_path / "t.sqlite"))
    d = analyze_path(str(tmp_path / "t.sqlite")).to_dict()
    assert_html_holds_md(render_markdown(as_report(d)), render_html(as_report(d), js=""))


@pytest.mark.slow
@pytest.mark.parametrize("trace", real_traces()[:6], ids=trace_id)
def test_real_trace_html_holds_every_report_md_section(trace: Path) -> None:
    from conftest import real_report_dict

    d = real_report_dict(trace)
    assert_html_holds_md(render_markdown(as_report(d)), render_html(as_report(d), js=""))


@pytest.mark.slow
def test_compare_and_cluster_html_hold_their_markdown(tmp_path: Path) -> None:
    from synth.scenarios import build_cluster

    import nsys_llm_explainer as nle
    from nsys_llm_explainer.comparison.document import compare_document, render_compare_html
    from nsys_llm_explainer.render.cluster import render_cluster_html, render_cluster_markdown

    for name in ("launch_bound", "per_token_sync"):
        built_scenario(name, str(tmp_path / f"{name}.sqlite"))
    cmp = nle.compare([str(tmp_path / "launch_bound.sqlite"), str(tmp_path / "per_token_sync.sqlite")])
    md = write_markdown(compare_document(cmp))
    assert "## Headline metric" in md and "## Top kernel changes" in md
    assert_html_holds_md(md, render_compare_html(cmp, js=""))
    build_cluster("cluster_straggler", str(tmp_path / "cl"))
    c = nle.analyze_cluster([str(p) for p in sorted((tmp_path / "cl").glob("*.sqlite"))])
    md = render_cluster_markdown(c)
    assert "## NCCL collectives across ranks" in md
    assert_html_holds_md(md, render_cluster_html(c, js=""))


# ------------------------------------------------------------------------------------------------ writers
def test_a_column_the_rows_do_not_have_is_an_error_not_an_empty_cell() -> None:
    """Table rows are typed: a column key that names no field of the row raises instead of rendering "–"."""
    doc = Document("t", (Section("s", "S", (TablePart((int_col("count", "count", "count"),),
                                                      [SimpleNamespace(cnt=3)]),)),))
    with pytest.raises(AttributeError, match="count"):
        write_markdown(doc)


def test_nvtx_by_pid_rows_join_ranges_and_attributed_kernels(tmp_path: Path) -> None:
    """``nvtx_by_pid.csv``: a (pid, range) with ranges and attributed kernels is one row; kernels attributed to a
    (pid, range) that ``nvtx.by_pid`` lacks still get their row, with no range count or time."""
    import dataclasses

    from synth import TraceBuilder

    from nsys_llm_explainer.analyses.nvtx.attribution import RangePidRow
    from nsys_llm_explainer.pipeline import analyze_path
    from nsys_llm_explainer.render.specs import NvtxPidRange, nvtx_by_pid_rows

    b = TraceBuilder()
    b.process(1)
    t1 = b.thread(1, 1)
    b.nvtx_push_pop(0, 3000, "step", tid_g=t1)
    b.launch(100, 110, 10_000, 10_010, pid=1, tid=1, name="a")
    rep = analyze_path(b.write(str(tmp_path / "t.sqlite")))
    extra = RangePidRow(2, "other", "PushPop", 7, 700)
    rep = dataclasses.replace(rep, attribution=dataclasses.replace(
        rep.attribution, by_pid=rep.attribution.by_pid + (extra,)))
    assert nvtx_by_pid_rows(rep) == [NvtxPidRange(1, "step", 1, 3000, 1, 10),
                                     NvtxPidRange(2, "other", None, None, 7, 700)]


def test_markdown_layout_rules() -> None:
    doc = Document("t", (
        Section("top", "", (para(Strong(("A:",)), " one", brk=BR), para("two", brk=NL),
                            bullets([Rich("a `x|y` b", lead=True), (Data("- x", lead=True),)]), para("end"))),
        Section("s", "Hostile <b>", (Paragraph((Code("k" * 100, 20),)),
                                     TablePart((name_col("n", "n", "name", 10), int_col("c", "c", "count")),
                                               [SimpleNamespace(n="a|b", c=1234), SimpleNamespace(n=None, c=None)]))),
    ))
    assert write_markdown(doc) == (
        "**A:** one  \ntwo\n- a <code>x\\|y</code> b\n- \\- x\n\nend\n\n## Hostile <b>\n\n"
        "`kkkkkkkkkkkkkkk…kkkk`\n\n| name | count |\n|---|---:|\n| <code>a\\|b</code> | 1,234 |\n| – | – |\n")
    w = HtmlWriter()
    body = w.body(doc)
    assert "<h2>Hostile &lt;b&gt;</h2>" in body and '<td data-v="1234" class="n" data-k="c">1,234</td>' in body
    assert "<li>a <code>x|y</code> b</li>" in body and w.figures == []


def test_the_terminal_summary_is_the_headline_in_plain_text(demo: Dict[str, Any], tmp_path: Path) -> None:
    """The command line's stdout summary comes from the headline's terminal parts through the plain-text writer:
    the report's own verdict and action words, the busy share of the window with the one duration formatter."""
    from nsys_llm_explainer.render import summary_lines
    from nsys_llm_explainer.render.document import Code, Paragraph, Rich, Strong
    from nsys_llm_explainer.render.text import text_lines

    h, w = demo["headline"], demo["window"]
    assert summary_lines(as_report(demo)) == [
        f"verdict: {' '.join(h['verdict'].split())}",
        f"GPU busy {h['steady_busy_pct']:.1f}% of the {w['method']} window ({fmt_dur(w['end_ns'] - w['start_ns'])})",
        f"first thing to do: {' '.join(h['action'].split())}"]
    # plain text: markup dropped, names as they are (the terminal neutralises them), one line per paragraph
    assert text_lines([Paragraph((Strong(("a ",)), Code("<k>\n`x`"), " ", Rich("`n` *b*")))]) == ["a <k> `x` `n` *b*"]
    assert not any(line.startswith("GPU busy") for line in summary_lines(empty_report(tmp_path)))
