"""report.html without a browser: written on every run, offline (no network resource, strict CSP), the numbers
it shows equal report.json, hostile names escaped in markup, plotly labels and the data script, a bounded size.

The browser half (charts drawn, no console error, hostile names inert) is tests/render/test_browser.py."""

from __future__ import annotations

import copy
import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import pytest
from conftest import as_report, empty_report, real_traces, trace_id
from synth import TraceBuilder

from nsys_llm_explainer.errors import InputError
from nsys_llm_explainer.render import ALL_RENDERERS, HtmlRenderer
from nsys_llm_explainer.render.charts import plot_text
from nsys_llm_explainer.render.html import render_html
from nsys_llm_explainer.render.html.markup import script_json
from nsys_llm_explainer.render.html.page import inline_js
from nsys_llm_explainer.render.sections.idle import LABEL_DETAIL
from nsys_llm_explainer.render.sections.steps import MAX_STEP_POINTS
from nsys_llm_explainer.vocabulary.units import fmt_ms, fmt_pct

REAL = real_traces()

#: report.html of the demo: plotly.js (~4.8 MB) + the report (~0.3 MB); fails if the page grows past this
MAX_DEMO_BYTES = 5_500_000
#: the page without the plotly.js bundle (markup + figure data)
MAX_DEMO_REPORT_BYTES = 400_000

EVIL_IMG = "<img src=x onerror=alert(1)>"
EVIL_SCRIPT = "</script><script>window.__pwned=1</script>"
EVIL_ODD = "odd\u2028<!--name&amp;\u2029"
#: tags plotly itself would render in a label (a link, bold): escaped, they must show literally
EVIL_LINK = '<a href="javascript:window.__pwned=1">x</a><b>b</b>'
EVIL_RANGES = (EVIL_IMG, EVIL_SCRIPT, EVIL_LINK)
EVIL_FILE = "t<b>\"&'.sqlite"
FIGURES_RE = re.compile(r'<script type="application/json" id="nle-figures">(.*?)</script>', re.S)
SCRIPT_RE = re.compile(r"<script\b[^>]*>(.*?)</script>", re.S | re.I)


def build_hostile(path: Path) -> None:
    """9 NVTX ranges named like markup, 5 kernels each (4 with hostile names), host gaps inside the ranges (so
    the NVTX names become idle-cause details) and between them; hostile process and thread names."""
    b = TraceBuilder()
    b.process(100, "py" + EVIL_IMG)
    g = b.thread(100, 100, name="thr" + EVIL_SCRIPT)
    b.gpu(id=0)
    names = [EVIL_IMG, EVIL_SCRIPT, "flash_fwd_kernel", EVIL_ODD, EVIL_LINK]
    for i in range(9):
        s = 1_000_000 + i * 100_000
        b.nvtx_push_pop(s, s + 95_000, EVIL_RANGES[i % 3], tid_g=g)
        for j, name in enumerate(names):
            a = s + 1000 + j * 15000
            k = s + 5000 + j * 15000
            b.launch(a, a + 2000, k, k + 10_000, pid=100, tid=100, device=0, name=name)
    b.write(str(path), overwrite=True)


class Page(HTMLParser):
    """The parts of report.html the tests read: tables (cells with attributes and text), ``span.v`` values,
    finding titles, scripts, and the visible text (outside scripts and styles)."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tables: Dict[str, List[List[Tuple[Dict[str, Optional[str]], str]]]] = {}
        self.values: Dict[str, Tuple[Optional[str], str]] = {}
        self.titles: List[str] = []
        self.scripts: List[Tuple[Dict[str, Optional[str]], str]] = []
        self.metas: List[Dict[str, Optional[str]]] = []
        self.tags: List[Tuple[str, Dict[str, Optional[str]]]] = []
        self.visible: List[str] = []
        self._table: Optional[str] = None
        self._cell: Optional[Tuple[Dict[str, Optional[str]], List[str]]] = None
        self._value: Optional[Tuple[Dict[str, Optional[str]], List[str]]] = None
        self._title: Optional[List[str]] = None
        self._title_depth = 0
        self._raw: Optional[Tuple[str, Dict[str, Optional[str]]]] = None
        self.feed(text)
        self.close()

    def handle_starttag(self, tag: str, attrs: List[Tuple[str, Optional[str]]]) -> None:
        a = dict(attrs)
        self.tags.append((tag, a))
        if tag in ("script", "style"):
            self._raw = (tag, a)
        elif tag == "meta":
            self.metas.append(a)
        elif tag == "table":
            self._table = a.get("id") or ""
            self.tables[self._table] = []
        elif tag == "tr" and self._table is not None:
            self.tables[self._table].append([])
        elif tag in ("td", "th") and self._table is not None:
            self._cell = ({**a, "_tag": tag}, [])
        elif tag == "span" and "v" in (a.get("class") or "").split():
            self._value = (a, [])
        if tag == "span" and self._title is not None:
            self._title_depth += 1
        elif tag == "span" and a.get("class") == "title":
            self._title, self._title_depth = [], 1

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style"):
            self._raw = None
        elif tag in ("td", "th") and self._cell is not None and self._table is not None:
            self.tables[self._table][-1].append((self._cell[0], "".join(self._cell[1])))
            self._cell = None
        elif tag == "table":
            self._table = None
        if tag == "span" and self._value is not None:
            a, parts = self._value
            self.values[a.get("data-k") or ""] = (a.get("data-v"), "".join(parts))
            self._value = None
        if tag == "span" and self._title is not None:
            self._title_depth -= 1
            if self._title_depth == 0:
                self.titles.append("".join(self._title))
                self._title = None

    def handle_data(self, data: str) -> None:
        if self._raw is not None:
            if self._raw[0] == "script":
                self.scripts.append((self._raw[1], data))
            return
        self.visible.append(data)
        for buf in (self._cell[1] if self._cell else None, self._value[1] if self._value else None, self._title):
            if buf is not None:
                buf.append(data)

    @property
    def text(self) -> str:
        return "".join(self.visible)

    def rows(self, tid: str) -> List[List[Tuple[Dict[str, Optional[str]], str]]]:
        """The body rows of table ``tid`` (rows of ``<td>`` cells)."""
        return [r for r in self.tables[tid] if r and all(a.get("_tag") == "td" for a, _ in r)]


def figures(text: str) -> Dict[str, Dict[str, Any]]:
    m = FIGURES_RE.search(text)
    assert m, "no figure data script"
    return {f["id"]: f for f in json.loads(m.group(1))["figures"]}


def without_plotly(text: str) -> str:
    """The page with the (large, third-party) plotly.js script body cut out."""
    bodies = SCRIPT_RE.findall(text)
    big = max(bodies, key=len)
    return text.replace(big, "")


def plain(rich_text: str) -> str:
    """What the page shows for report text with backtick code spans."""
    return rich_text.replace("`", "") if rich_text.count("`") % 2 == 0 else rich_text


# ------------------------------------------------------------------------------------------------ fixtures
@pytest.fixture(scope="module")
def demo(demo_report: Any) -> Dict[str, Any]:
    return demo_report.to_dict()


@pytest.fixture(scope="module")
def demo_html(demo: Dict[str, Any]) -> str:
    return render_html(as_report(demo), js="")


@pytest.fixture(scope="module")
def cli_demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from conftest import run_cli

    out = tmp_path_factory.mktemp("cli") / "demo_out"
    proc = run_cli("demo", "--out", str(out), "--quiet")
    assert proc.returncode == 0, proc.stderr
    return out


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Tuple[Dict[str, Any], str]:
    from nsys_llm_explainer.pipeline import analyze_path

    d = tmp_path_factory.mktemp("hostile")
    trace = d / EVIL_FILE
    build_hostile(trace)
    data = analyze_path(str(trace)).to_dict()
    HtmlRenderer().render(as_report(data), d / "out")
    return data, (d / "out" / "report.html").read_text(encoding="utf-8")


# ------------------------------------------------------------------------------------------------ tests
def test_html_renderer_runs_for_every_report() -> None:
    assert HtmlRenderer in ALL_RENDERERS


def test_demo_run_writes_an_offline_page_of_bounded_size(cli_demo: Path) -> None:
    from plotly.offline import get_plotlyjs

    path = cli_demo / "report.html"
    assert path.is_file() and (cli_demo / "report.md").is_file()
    text = path.read_text(encoding="utf-8")
    size = path.stat().st_size
    assert size < MAX_DEMO_BYTES, size
    markup = without_plotly(text)
    assert len(markup.encode("utf-8")) < MAX_DEMO_REPORT_BYTES, len(markup.encode("utf-8"))
    # plotly.js is inlined once, unmodified (bar the </script guard), and is the page's only big script
    assert text.count(inline_js(get_plotlyjs())) == 1
    # no resource load to the network: no src/href to a URL, no external script, style, font, frame or image
    assert not re.search(r"""(?:src|href|action|data)\s*=\s*["']?\s*(?:[a-z][a-z0-9+.-]*:)?//""", markup, re.I)
    assert not re.search(r"<(?:link|iframe|img|object|embed|base|form|audio|video|source)\b", markup, re.I)
    assert not re.search(r"url\(|@import", markup, re.I)
    page = Page(text)
    assert [a for a, _ in page.scripts if "src" in a] == []
    assert [t for t, _ in page.tags].count("script") == 3
    csp = [m.get("content") or "" for m in page.metas if (m.get("http-equiv") or "").lower() ==
           "content-security-policy"]
    assert len(csp) == 1 and "default-src 'none'" in csp[0] and "connect-src 'none'" in csp[0]
    assert "'unsafe-eval'" not in csp[0] and "http" not in csp[0]


def test_sections_in_report_md_order(demo_html: str) -> None:
    ids = re.findall(r'<(?:section|header) id="([a-z-]+)"', demo_html)
    assert ids == ["headline", "findings", "timeline", "idle", "kernels", "traits", "categories", "steps", "launch",
                   "sync", "cuda-api", "memory", "nvtx", "nccl", "gaps", "trace", "method"]
    assert demo_html.count("<strong>Window:</strong>") == 1


def test_headline_and_findings_equal_report_json(demo: Dict[str, Any], demo_html: str) -> None:
    page = Page(demo_html)
    raw, shown = page.values["headline.steady_busy_pct"]
    assert float(raw or "nan") == demo["headline"]["steady_busy_pct"]
    assert shown == fmt_pct(demo["headline"]["steady_busy_pct"])
    for d in demo["devices"]:
        raw, shown = page.values[f"devices.{d['device_id']}.busy_pct"]
        assert float(raw or "nan") == d["busy_pct"] and shown == fmt_pct(d["busy_pct"])
    assert demo["findings"]
    assert page.titles == [plain(f["title"]) for f in demo["findings"]]
    assert plain(demo["headline"]["verdict"]) in page.text and plain(demo["headline"]["action"]) in page.text


def test_idle_causes_equal_report_json(demo: Dict[str, Any], demo_html: str) -> None:
    page = Page(demo_html)
    figs = figures(demo_html)
    for i, dc in enumerate(demo["idle_causes"]["devices"]):
        rows = page.rows(f"idle-causes-dev-{i}")
        # the rows report.md shows: the causes before the analysis's "other" fold, then that fold's row
        n = dc["other"]["after_rows"] if dc["other"]["count"] else len(dc["causes"])
        assert len(rows) == n + bool(dc["other"]["count"]) and n > 0
        if dc["other"]["count"]:
            assert rows[-1][0][1] == f"other ({dc['other']['count']:,} causes)"
            assert rows[-1][2][1] == fmt_ms(dc["other"]["ns"])
        for row, cause in zip(rows[:n], dc["causes"]):
            cells = {a.get("data-k"): (a.get("data-v"), text) for a, text in row}
            assert cells["kind"][1] == cause["kind"] and cells["detail"][1] == (cause["detail"] or "–")
            assert int(cells["ns"][0] or "-1") == cause["ns"] and cells["ns"][1] == fmt_ms(cause["ns"])
            assert float(cells["pct_of_window"][0] or "nan") == cause["pct_of_window"]
        bars = figs[f"idle-causes-{i}"]["data"][0]["x"]
        n = dc["other"]["after_rows"] if dc["other"]["count"] else len(bars)
        assert bars[:n] == [round(c["ns"] / 1e6, 6) for c in dc["causes"][:n]]
        if dc["other"]["count"]:
            assert bars[n:] == [round(dc["other"]["ns"] / 1e6, 6)]


def test_timeline_is_the_report_bins(demo: Dict[str, Any], demo_html: str) -> None:
    figs = figures(demo_html)
    tl = demo["timeline"]["devices"]
    assert tl, "the demo report has a timeline"
    for i, dev in enumerate(tl):
        fig = figs[f"timeline-{i}"]
        bars = {t["name"]: t["y"] for t in fig["data"] if t["type"] == "bar"}
        assert bars["busy (kernels)"] == [round(v / 1e3, 3) for v in dev["busy_ns"]]
        for kind, series in dev["idle_ns_by_kind"].items():
            assert bars[f"idle: {kind}"] == [round(v / 1e3, 3) for v in series]
        t0 = demo["window"]["full_start_ns"]
        assert fig["shared"]["x"] == [round((e - t0) / 1e6, 6) for e in dev["edges_ns"][:-1]]
        gaps = [g for g in demo["devices"] if g["device_id"] == dev["device_id"]][0]["largest_gaps"]
        rects = [s for s in fig["layout"]["shapes"] if s["type"] == "rect"]
        assert len(rects) == len(gaps)  # the demo window is the whole capture: only gap boxes, no shading
        lines = [s["x0"] for s in fig["layout"]["shapes"] if s["type"] == "line"]
        assert lines == [round((demo["window"][k] - t0) / 1e6, 6) for k in ("start_ns", "end_ns")]


def test_categories_and_kernels_equal_report_json(demo: Dict[str, Any], demo_html: str) -> None:
    page = Page(demo_html)
    cats = demo["categories"]["overall"]
    assert figures(demo_html)["categories-chart"]["data"][0]["x"] == [round(c["nonoverlap_ns"] / 1e6, 6)
                                                                     for c in cats]
    got = [{a.get("data-k"): a.get("data-v") for a, _ in r} for r in page.rows("categories")]
    assert [(g["category"], int(g["total_ns"] or -1)) for g in got] == [(c["category"], c["total_ns"])
                                                                         for c in cats[:20]]
    src = demo["steady_kernels"]["by_name"] or demo["kernels_summary"]["by_name"]
    got = [{a.get("data-k"): a.get("data-v") for a, _ in r} for r in page.rows("top-kernels")]
    assert [(g["name"], int(g["total_ns"] or -1)) for g in got] == [(k["name"], k["total_ns"]) for k in src[:20]]


def test_steps_series_is_the_step_rows(demo: Dict[str, Any], demo_html: str) -> None:
    fig = figures(demo_html)["steps-series"]
    assert sum(len(t["x"]) for t in fig["data"]) == len(demo["steps"]["rows"])
    walls = sorted(y for t in fig["data"] for y in t["y"])
    assert walls == sorted(round(r["wall_ns"] / 1e6, 6) for r in demo["steps"]["rows"])


def test_steps_are_capped(demo: Dict[str, Any]) -> None:
    data = copy.deepcopy(demo)
    base = data["steps"]["rows"][-1]
    data["steps"]["rows"] = [{**base, "index": i, "start_ns": base["start_ns"] + i} for i in range(25_000)]
    text = render_html(as_report(data), js="")
    fig = figures(text)["steps-series"]
    points = sum(len(t["x"]) for t in fig["data"])
    assert points <= MAX_STEP_POINTS + len(data["steps"]["slowest"]), points
    assert "every 7-th step plus the slowest" in text


def test_missing_timeline_is_said_not_fatal(demo: Dict[str, Any], tmp_path: Path) -> None:
    data = {k: v for k, v in demo.items() if k != "timeline"}
    with pytest.raises(InputError, match="missing key 'timeline'"):   # a report.json without it is no report
        as_report(data)
    text = render_html(empty_report(tmp_path), js="")
    assert "No per-device timeline" in text and "timeline-0" not in figures(text)



def test_hostile_names_are_escaped(hostile: Tuple[Dict[str, Any], str]) -> None:
    data, text = hostile
    markup = without_plotly(text)
    for evil in (EVIL_IMG, EVIL_SCRIPT, EVIL_LINK, "<!--", "\u2028", "\u2029", "<b>", '<a href="javascript'):
        assert evil not in markup, evil
    assert len(SCRIPT_RE.findall(text)) == 3 and text.lower().count("<script") == 3
    assert text.count("</script>") == 3
    page = Page(text)
    shown = page.text
    for evil in (EVIL_IMG, EVIL_SCRIPT, EVIL_LINK, EVIL_FILE):
        assert evil in shown, evil
    details = [c["detail"] for c in data["idle_causes"]["devices"][0]["causes"] if c["kind"] == "nvtx"]
    assert len(details) == 3 and all(d in shown for d in details)
    # in the data script: names escaped for plotly (entities) inside script-safe JSON
    raw = FIGURES_RE.search(text).group(1)  # type: ignore[union-attr]
    assert "<" not in raw and ">" not in raw and "&" not in raw
    figs = figures(text)
    labels = figs["idle-causes-0"]["layout"]["yaxis"]["ticktext"]
    assert [lab for lab in labels if lab.startswith("nvtx")] == [f"nvtx: {plot_text(d, LABEL_DETAIL)}"
                                                                 for d in details]
    assert all("<" not in lab for f in figs.values() for lab in f["layout"]["yaxis"].get("ticktext", []))


def test_script_json_cannot_leave_the_script() -> None:
    value = {"a": "</script><script>x</script>", "b": "<!--", "c": "\u2028\u2029", "d": "&amp;"}
    s = script_json(value)
    assert json.loads(s) == value
    assert not set("<>&\u2028\u2029") & set(s)
    assert plot_text("<b>x</b> & y") == "&lt;b&gt;x&lt;/b&gt; &amp; y"
    assert inline_js('a="</SCRIPT>"') == 'a="<\\/SCRIPT>"'


@pytest.mark.slow
@pytest.mark.parametrize("trace", REAL, ids=trace_id)
def test_real_traces_render(trace: Path) -> None:
    from conftest import real_report_dict

    data = real_report_dict(trace)
    text = render_html(as_report(data), js="")
    figs = figures(text)
    assert len([k for k in figs if k.startswith("timeline-")]) == len(data["timeline"]["devices"])
    assert all(f["data"] for f in figs.values())
    assert Page(text).titles == [plain(f["title"]) for f in data["findings"]]
