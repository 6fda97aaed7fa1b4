"""Renderers: Markdown (escaping, capping, sections), CSV (columns, round trip, headers), JSON + schema."""

from __future__ import annotations

import copy
import csv
import json
import re
from pathlib import Path
from typing import Any, Dict, List

import pytest

from nsys_llm_explainer.render import (
    ALL_RENDERERS,
    SECTION_RENDERERS,
    CsvRenderer,
    JsonRenderer,
    MarkdownRenderer,
    load_schema,
    render_all,
    render_markdown,
)
from nsys_llm_explainer.render.base import fmt_bytes, fmt_dur, fmt_int, fmt_ms, fmt_pct, fmt_us
from nsys_llm_explainer.render.csv_tables import CSV_TABLES, read_table
from nsys_llm_explainer.render.escape import html_escape, md_cell, md_code, md_rich, md_text, truncate

TRACES = Path("/work/shared/traces")
REAL = sorted(TRACES.glob("*/trace.sqlite"))
EVIL = "a|b <script>&\n`x`"

KERNEL_HEADER = [
    "kernel_name",
    "device_id",
    "total_ms",
    "calls",
    "avg_us",
    "p50_us",
    "p90_us",
    "pct_kernel_time",
    "total_ns",
    "avg_ns",
    "p50_ns",
    "p90_ns",
    "min_ns",
    "max_ns",
]


# ------------------------------------------------------------------------------------------ fixtures
def _krow(name: str, dev: int, count: int, total: int, pct: float) -> Dict[str, Any]:
    avg = (total + count // 2) // count
    return {
        "name": name,
        "device_id": dev,
        "count": count,
        "total_ns": total,
        "avg_ns": avg,
        "p50_ns": avg,
        "p90_ns": avg,
        "p99_ns": avg,
        "min_ns": avg,
        "max_ns": avg,
        "pct": pct,
    }


def minimal_report(top: int = 20) -> Dict[str, Any]:
    """A hand-made report dict with every core section (values chosen so results are known)."""
    kernels = [_krow(EVIL, 0, 2, 3_000_000, 60.0), _krow("gemm_kernel", 0, 4, 2_000_000, 40.0)]
    return {
        "schema_version": "1.0",
        "tool_version": "0.0-test",
        "generated_at": "2025-01-01 00:00:00 UTC",
        "trace": {
            "path": "/tmp/t|<b>.sqlite",
            "nsys_version": "2024.2",
            "export_schema_version": "3.11",
            "metadata_table": "META_DATA_EXPORT",
            "kernel_table": "CUPTI_ACTIVITY_KIND_KERNEL",
            "start_ns": 1_000,
            "end_ns": 10_001_000,
            "span_ns": 10_000_000,
            "gpus": [{"id": 0, "name": "H100 <x>"}],
            "processes": [{"pid": 7, "name": "py|thon", "kernels": 6, "cuda_api_calls": 6}],
            "row_counts": {"kernels": 6},
            "cuda_graph_trace_mode": None,
            "capture": {},
            "schema_notes": [],
        },
        "options": {"top": top},
        "warnings": ["Warn with `--trace=cuda` <b>"],
        "findings": [
            {
                "id": "dominant_kernel",
                "category": "dominant_kernel",
                "severity": "medium",
                "confidence": "high",
                "title": "One kernel dominates GPU time",
                "evidence": [f"`{EVIL}` is 60.0% of kernel time."],
                "recommendation": ["Fix it."],
                "time_at_stake_ns": 3_000_000,
            }
        ],
        "kernels": kernels,
        "kernels_summary": {
            "available": True,
            "reason": None,
            "total_kernel_ns": 5_000_000,
            "kernel_count": 6,
            "by_name": [{k: v for k, v in r.items() if k != "device_id"} for r in kernels],
        },
        "devices": [
            {
                "device_id": 0,
                "window_start_ns": 1_000,
                "window_end_ns": 10_001_000,
                "window_ns": 10_000_000,
                "busy_ns": 5_000_000,
                "idle_ns": 5_000_000,
                "idle_pct": 50.0,
                "busy_pct": 50.0,
                "gap_count": 1,
                "largest_gaps": [
                    {
                        "start_ns": 2_001_000,
                        "end_ns": 7_001_000,
                        "duration_ns": 5_000_000,
                        "kernel_before": EVIL,
                        "kernel_after": 'gemm,kernel "q"',
                    }
                ],
                "gap_histogram": [
                    {"bucket": "<1us", "lo_ns": 0, "hi_ns": 1000, "count": 0, "total_ns": 0},
                    {"bucket": ">1ms", "lo_ns": 1_000_000, "hi_ns": None, "count": 1, "total_ns": 5_000_000},
                ],
            }
        ],
        "idle": {"available": True, "reason": None, "include_memcpy": False},
        "pids": {
            "by_pid": [{"pid": 7, "count": 6, "total_ns": 5_000_000, "pct": 100.0}],
            "kernels_by_pid": [{**r, "pid": 7, "pct_of_pid": r["pct"]} for r in kernels],
        },
        "launch": {"available": False, "reason": "no CUDA kernels were captured"},
        "sync": {
            "available": True,
            "reason": None,
            "total_ns": 0,
            "call_count": 0,
            "sync_apis": [],
            "nonblocking_apis": [
                {
                    "name": "cudaEventQuery",
                    "count": 3,
                    "total_ns": 3000,
                    "avg_ns": 1000,
                    "p50_ns": 1000,
                    "max_ns": 1000,
                }
            ],
            "per_pid": [],
            "per_pid_totals": [],
        },
        "cuda_api": {"available": False, "reason": "no CUPTI_ACTIVITY_KIND_RUNTIME table"},
        "memcpy": {
            "available": False,
            "reason": "no memcpy or memset activity in the trace",
            "by_direction": [],
            "by_kind": [],
            "memset": [],
            "total_bytes": 0,
            "total_ns": 0,
        },
        "nvtx": {
            "available": False,
            "reason": "no NVTX_EVENTS table",
            "range_count": 0,
            "unterminated": 0,
            "ranges": [],
            "by_pid": [],
            "attribution": {
                "available": False,
                "reason": "no NVTX push/pop ranges",
                "coverage": 0.0,
                "ranges": [],
                "by_pid": [],
                "pid_coverage": [],
                "phases": [],
            },
        },
    }


def md_cells(line: str) -> List[str]:
    """Split a GFM table row into cells, honouring backslash escapes (``\\|`` is not a separator)."""
    assert line.startswith("|") and line.endswith("|"), line
    cells, cur, i = [], "", 1
    while i < len(line):
        ch = line[i]
        if ch == "\\" and i + 1 < len(line):
            cur += line[i : i + 2]
            i += 2
            continue
        if ch == "|":
            cells.append(cur.strip())
            cur = ""
        else:
            cur += ch
        i += 1
    return cells


def md_tables(text: str) -> List[List[str]]:
    """Blocks of consecutive table lines."""
    blocks: List[List[str]] = []
    cur: List[str] = []
    for line in text.split("\n"):
        if line.startswith("|"):
            cur.append(line)
        elif cur:
            blocks.append(cur)
            cur = []
    if cur:
        blocks.append(cur)
    return blocks


def assert_tables_valid(text: str) -> None:
    for block in md_tables(text):
        n = len(md_cells(block[0]))
        assert re.fullmatch(r"\|(:?---:?\|)+", block[1]), block[1]
        for line in block:
            assert len(md_cells(line)) == n, (block[0], line)


# ------------------------------------------------------------------------------------------ escaping
def test_md_cell_escapes_everything_user_controlled() -> None:
    assert md_cell(EVIL) == r"a\|b &lt;script&gt;&amp; &#96;x&#96;"
    assert md_cell("x\\y") == r"x\\y"
    assert md_cell("[link](http://e.vil)") == r"\[link\](http&#58;//e.vil)"
    assert md_cell("*bold* ~~s~~ $m$") == r"\*bold\* \~\~s\~\~ \$m\$"
    assert md_cell("# heading") == r"\# heading"
    assert md_cell("_lead and_trail_") == r"\_lead and_trail\_"  # intraword _ cannot emphasise
    assert md_cell("a\r\nb\tc") == "a  b c"
    assert md_cell(None) == ""
    assert md_cell(12) == "12"


def test_md_text_and_code_and_rich() -> None:
    assert md_text("1. not a list") == r"1\. not a list"
    assert md_text("1. mid line", line_start=False) == "1. mid line"
    assert md_text("> quote <b>") == r"&gt; quote &lt;b&gt;"
    assert md_text("- item") == r"\- item"
    assert md_code("plain_name*") == "`plain_name*`"
    assert md_code("a<b>|c") == r"<code>a&lt;b&gt;\|c</code>"
    assert md_rich("`k<T>` took 5 ms <b>") == "<code>k&lt;T&gt;</code> took 5 ms &lt;b&gt;"
    assert md_rich("odd ` tick <b>") == "odd &#96; tick &lt;b&gt;"
    assert html_escape('<a href="x">&\'') == "&lt;a href=&quot;x&quot;&gt;&amp;&#x27;"
    assert truncate("abcdef", 4) == "abc…"
    assert truncate("abc", 4) == "abc"


def test_number_formats() -> None:
    assert fmt_ms(1_234_567) == "1.235"
    assert fmt_us(1_234_567) == "1,234.57"
    assert fmt_us(1_005) == "1.00" or fmt_us(1_005) == "1.01"  # float formatting of .005 is platform-exact
    assert fmt_dur(999_999) == "1,000.00 µs"
    assert fmt_dur(1_000_000) == "1.000 ms"
    assert fmt_pct(12.3456) == "12.35"
    assert fmt_int(1234567) == "1,234,567"
    assert fmt_bytes(2_500_000) == "2.50 MB"
    assert fmt_ms(None) == "–"


# ------------------------------------------------------------------------------------------ markdown
def test_markdown_hostile_kernel_name_keeps_tables_valid(tmp_path: Path) -> None:
    rep = minimal_report()
    paths = MarkdownRenderer().render(rep, tmp_path)
    assert paths == [tmp_path / "report.md"]
    text = (tmp_path / "report.md").read_text(encoding="utf-8")
    assert "<script>" not in text
    assert "<b>" not in text
    assert_tables_valid(text)
    # the kernel table: 8 columns, the evil name escaped in the first cell
    block = next(b for b in md_tables(text) if b[0].startswith("| Kernel | Calls | Total (ms)"))
    assert len(md_cells(block[0])) == 8
    row = md_cells(block[2])
    assert row[0] == r"a\|b &lt;script&gt;&amp; &#96;x&#96;"
    assert row[1:4] == ["2", "3.000", "1,500.00"]  # calls, 3 ms total, 1.5 ms avg in µs
    assert row[7] == "60.00"


def test_markdown_sections_in_order_with_derivation_lines() -> None:
    text = render_markdown(minimal_report())
    heads = [line[3:] for line in text.split("\n") if line.startswith("## ")]
    assert heads == [
        "Warnings",
        "What to do next",
        "Trace & capture info",
        "Top CUDA kernels",
        "Top PIDs by kernel time",
        "Launch storm",
        "CPU↔GPU synchronization",
        "CUDA API summary",
        "Memcpy / memset",
        "GPU idle per device",
        "NVTX ranges",
        "NVTX → kernel attribution",
        "NVTX per PID",
        "Derivation & assumptions",
    ]
    for sec in text.split("\n## ")[1:]:
        body = sec.split("\n", 1)[1].lstrip("\n")
        assert body.startswith("*Derived from:*"), sec[:80]
        assert "\n*Limitations:*" in body, sec[:80]
    assert text.startswith("# Nsight Systems LLM inference report\n")
    assert "0.0-test" in text and "2025-01-01 00:00:00 UTC" in text
    # unavailable sections state why
    assert "**Not available:** no CUDA kernels were captured" in text
    assert "**Not available:** no CUPTI\\_ACTIVITY\\_KIND\\_RUNTIME table" not in text  # intraword _ kept
    assert "**Not available:** no CUPTI_ACTIVITY_KIND_RUNTIME table" in text
    assert (
        "**Not available:** no NVTX\\_EVENTS table" in text
        or "**Not available:** no NVTX_EVENTS table" in text
    )
    # non-blocking calls are labelled as not sync
    assert "### Non-blocking query/wait calls (NOT synchronization)" in text
    # gap table: starts 2.000 ms after trace start, 5 ms gap, histogram labels
    assert '| 2.000 | 5.000 ms | a\\|b &lt;script&gt;&amp; &#96;x&#96; | gemm,kernel "q" |' in text
    assert "| &gt;1 ms | 1 | 5.000 | 100.00 |" in text
    assert "| &lt;1 µs | 0 | 0.000 | 0.00 |" in text
    # finding: title, evidence with the name as escaped code, time at stake
    assert "### 1. [MEDIUM] One kernel dominates GPU time" in text
    assert (
        "- <code>a\\|b &lt;script&gt;&amp; </code>x is 60.0% of kernel time." in text
    )  # name split by its `
    assert "time at stake **3.000 ms**" in text


def test_top_capping_says_showing(tmp_path: Path) -> None:
    rep = minimal_report(top=2)
    names = [f"k{i}" for i in range(5)]
    rep["kernels"] = [_krow(n, 0, 1, 1000 * (5 - i), 20.0) for i, n in enumerate(names)]
    rep["kernels_summary"]["by_name"] = [
        {k: v for k, v in r.items() if k != "device_id"} for r in rep["kernels"]
    ]
    text = render_markdown(rep)
    assert "*Showing 2 of 5 kernel names (`--top 2`); all rows in `tables/kernels.csv`.*" in text
    block = next(b for b in md_tables(text) if b[0].startswith("| Kernel | Calls | Total (ms)"))
    assert [md_cells(r)[0] for r in block[2:]] == ["k0", "k1"]
    # CSVs are never capped
    CsvRenderer().render(rep, tmp_path)
    header, rows = read_table(tmp_path / "tables" / "kernels.csv")
    assert [r[0] for r in rows] == names


def test_long_names_truncated_in_markdown_only(tmp_path: Path) -> None:
    rep = minimal_report()
    long = "k" * 300
    rep["kernels_summary"]["by_name"][1]["name"] = long
    rep["kernels"][1]["name"] = long
    text = render_markdown(rep)
    assert "k" * 159 + "…" in text and "k" * 160 not in text
    assert "Names longer than 160 characters are truncated" in text
    CsvRenderer().render(rep, tmp_path)
    _, rows = read_table(tmp_path / "tables" / "kernels.csv")
    assert rows[1][0] == long


def test_generic_diagnosis_sections_and_registry(tmp_path: Path) -> None:
    rep = minimal_report()
    rep["accounting"] = {
        "available": True,
        "reason": None,
        "scope": "full",
        "total_idle_ns": 1500,
        "devices": [{"device_id": 0, "idle_ns": 2_500_000, "idle_pct": 12.5, "window_start_ns": 5}],
    }
    rep["nccl"] = {"available": False, "reason": "no NCCL kernels in the trace", "rows": []}
    rep["_private"] = {"x": 1}
    text = render_markdown(rep)
    heads = [line[3:] for line in text.split("\n") if line.startswith("## ")]
    assert heads[-3:] == ["GPU time accounting", "NCCL", "Derivation & assumptions"]
    acc = text.split("## GPU time accounting", 1)[1].split("\n## ", 1)[0]
    assert "*Derived from:*" in acc and "*Limitations:*" in acc
    assert "- scope: full" in acc
    assert "- total_idle_ns: 1.50 µs" in acc
    assert "| device_id | idle (ms) | idle_pct | window_start (ns) |" in acc
    assert "| 0 | 2.500 | 12.50 | 5 |" in acc
    assert "**Not available:** no NCCL kernels in the trace" in text
    assert "private" not in text.lower()
    assert_tables_valid(text)
    CsvRenderer().render(rep, tmp_path)
    header, rows = read_table(tmp_path / "tables" / "accounting_devices.csv")
    assert header == ["device_id", "idle_ns", "idle_pct", "window_start_ns"]
    assert rows == [["0", "2500000", "12.5", "5"]]

    def custom(key: str, val: Any, ctx: Any) -> List[str]:
        return [f"## Custom {key}", "", "*Derived from:* x", "", "*Limitations:* y", ""]

    previous = SECTION_RENDERERS.get("accounting")
    SECTION_RENDERERS["accounting"] = custom
    try:
        text2 = render_markdown(rep)
    finally:
        if previous is None:
            del SECTION_RENDERERS["accounting"]
        else:
            SECTION_RENDERERS["accounting"] = previous
    assert "## Custom accounting" in text2 and "## GPU time accounting" not in text2


# ------------------------------------------------------------------------------------------ CSV
def test_csv_columns_values_and_round_trip(tmp_path: Path) -> None:
    rep = minimal_report()
    tricky = 'gemm, "fast"\nkernel|x'
    rep["kernels"][1]["name"] = tricky
    paths = CsvRenderer().render(rep, tmp_path)
    assert {p.name for p in paths} >= {
        "kernels.csv",
        "nvtx_ranges.csv",
        "gpu_idle_gaps.csv",
        "kernels_by_pid.csv",
        "sync_by_pid.csv",
        "nvtx_by_pid.csv",
        "cuda_api.csv",
        "memcpy.csv",
        "gap_histogram.csv",
    }
    header, rows = read_table(tmp_path / "tables" / "kernels.csv")
    assert header == KERNEL_HEADER
    assert rows[0] == [
        EVIL,
        "0",
        "3.000000",
        "2",
        "1500.000",
        "1500.000",
        "1500.000",
        "60.0",
        "3000000",
        "1500000",
        "1500000",
        "1500000",
        "1500000",
        "1500000",
    ]
    assert rows[1][0] == tricky
    header, rows = read_table(tmp_path / "tables" / "gpu_idle_gaps.csv")
    assert header == ["device_id", "start_ns", "end_ns", "duration_ns", "kernel_before", "kernel_after"]
    assert rows == [["0", "2001000", "7001000", "5000000", EVIL, 'gemm,kernel "q"']]
    header, rows = read_table(tmp_path / "tables" / "gap_histogram.csv")
    assert rows[1] == ["0", ">1ms", "1000000", "", "1", "5.000000", "5000000"]
    header, rows = read_table(tmp_path / "tables" / "sync_apis.csv")
    assert rows == [
        [
            "cudaEventQuery",
            "false",
            "3",
            "0.003000",
            "1.000",
            "1.000",
            "1.000",
            "3000",
            "1000",
            "1000",
            "1000",
        ]
    ]


def test_empty_tables_have_headers(tmp_path: Path) -> None:
    empty = {
        "schema_version": "1.0",
        "tool_version": "x",
        "trace": {"path": "p"},
        "options": {"top": 5},
        "warnings": [],
        "findings": [],
        "kernels": [],
        "devices": [],
        "pids": {},
        "launch": {},
        "sync": {},
        "cuda_api": {},
        "memcpy": {},
        "nvtx": {},
    }
    paths = CsvRenderer().render(empty, tmp_path)
    assert len(paths) == len(CSV_TABLES)
    for p in paths:
        with open(p, newline="", encoding="utf-8") as fh:
            data = list(csv.reader(fh))
        assert len(data) == 1 and len(data[0]) >= 3, p.name
    assert read_table(tmp_path / "tables" / "kernels.csv")[0] == KERNEL_HEADER
    text = render_markdown(empty)  # renders without any analysis content
    assert_tables_valid(text)
    assert "No rule fired" in text


# ------------------------------------------------------------------------------------------ JSON + schema
def test_json_renderer_strict(tmp_path: Path) -> None:
    rep = minimal_report()
    JsonRenderer().render(rep, tmp_path)
    assert json.loads((tmp_path / "report.json").read_text(encoding="utf-8")) == rep
    bad = copy.deepcopy(rep)
    bad["devices"][0]["idle_pct"] = float("nan")
    with pytest.raises(ValueError):
        JsonRenderer().render(bad, tmp_path / "bad")


def test_schema_accepts_fixture_and_rejects_violations() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = load_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    v = jsonschema.Draft202012Validator(schema)
    rep = minimal_report()
    assert list(v.iter_errors(rep)) == []
    for mutate in (
        lambda r: r.pop("nvtx"),
        lambda r: r["kernels"][0].__setitem__("total_ns", 1.5),
        lambda r: r["findings"][0].__setitem__("category", "vibes"),
        lambda r: r["findings"][0].pop("evidence"),
        lambda r: r["devices"][0]["largest_gaps"][0].pop("kernel_after"),
        lambda r: r["nvtx"]["attribution"].pop("coverage"),
        lambda r: r["sync"].__setitem__("wait_ns", 2.5),  # any *_ns key of a described object: integer
    ):
        bad = copy.deepcopy(rep)
        mutate(bad)
        assert list(v.iter_errors(bad)), mutate
    ok = copy.deepcopy(rep)
    ok["later_section"] = {"available": True, "rows": [{"wait_ns": 2, "x": "y"}]}  # later sections fit
    ok["nvtx"]["pct_of_kernel_ns"] = 12.5  # a percentage, not a duration
    assert list(v.iter_errors(ok)) == []


_NS_KEY = re.compile(r"^(?!.*pct).*_ns$")


def ns_violations(obj: Any, path: str = "") -> List[str]:
    """Keys ending in _ns (percentages excepted) anywhere whose value is not integer ns / null / list or
    dict of those — the project-wide duration convention, checked on whole reports (later sections too)."""

    def ok(v: Any) -> bool:
        if v is None or (isinstance(v, int) and not isinstance(v, bool)):
            return True
        if isinstance(v, list):
            return all(ok(x) for x in v)
        if isinstance(v, dict):
            return all(ok(x) for x in v.values())
        return False

    out: List[str] = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            if _NS_KEY.match(str(k)) and not ok(v):
                out.append(f"{path}.{k}={v!r}"[:120])
            else:
                out += ns_violations(v, f"{path}.{k}")
    elif isinstance(obj, list):
        for v in obj:
            out += ns_violations(v, f"{path}[]")
    return out


def test_ns_convention_checker() -> None:
    assert ns_violations(minimal_report()) == []
    assert ns_violations({"a": [{"b": {"wait_ns": 1.5, "pct_of_x_ns": 2.5}}]}) == [".a[].b.wait_ns=1.5"]


@pytest.mark.skipif(not REAL, reason="real traces not available")
@pytest.mark.parametrize("trace", REAL, ids=[p.parent.name for p in REAL])
def test_real_trace_report_validates_and_renders(trace: Path, tmp_path: Path) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    from nsys_llm_explainer.pipeline import analyze_path
    from nsys_llm_explainer.render.json_report import build_json

    rep = build_json(analyze_path(str(trace)))
    written = render_all(rep, tmp_path)
    assert {p.name for p in written} >= {"report.md", "report.json", "kernels.csv"}
    assert len(ALL_RENDERERS) == 3
    on_disk = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))
    assert on_disk == rep
    jsonschema.validate(on_disk, load_schema())
    assert ns_violations(on_disk) == []
    text = (tmp_path / "report.md").read_text(encoding="utf-8")
    assert_tables_valid(text)
    header, rows = read_table(tmp_path / "tables" / "kernels.csv")
    assert header == KERNEL_HEADER
    assert len(rows) == len(rep["kernels"])
    assert sum(int(r[8]) for r in rows) == rep["kernels_summary"]["total_kernel_ns"]


def test_synthetic_trace_end_to_end(tmp_path: Path) -> None:
    synth = pytest.importorskip("nsys_llm_explainer.synth")
    from nsys_llm_explainer.pipeline import analyze_path
    from nsys_llm_explainer.render.json_report import build_json

    b = synth.TraceBuilder()
    b.process(1001, "python3")
    b.gpu(0)
    b.launch(1_000, 1_500, 2_000, 4_500, pid=1001, tid=1001, name=EVIL)  # 2500 ns
    b.launch(1_600, 2_100, 5_000, 6_000, pid=1001, tid=1001, name='gemm,"k"')  # 1000 ns, gap 500 ns before
    path = tmp_path / "t.sqlite"
    b.write(str(path))
    rep = build_json(analyze_path(str(path)))
    out = tmp_path / "out"
    render_all(rep, out)
    header, rows = read_table(out / "tables" / "kernels.csv")
    by_name = {r[0]: r for r in rows}
    assert by_name[EVIL][1:5] == ["0", "0.002500", "1", "2.500"]
    assert by_name['gemm,"k"'][8] == "1000"
    _, gaps = read_table(out / "tables" / "gpu_idle_gaps.csv")
    assert gaps == [["0", "4500", "5000", "500", EVIL, 'gemm,"k"']]
    text = (out / "report.md").read_text(encoding="utf-8")
    assert "<script>" not in text
    assert_tables_valid(text)
    assert "| a\\|b &lt;script&gt;&amp; &#96;x&#96; | 1 | 0.003 | 2.50 | 2.50 | 2.50 | 2.50 | 71.43 |" in text


def test_nvtx_domains_grouping() -> None:
    from nsys_llm_explainer.render.markdown import nvtx_domains

    ranges = [
        {"name": "NCCL:ncclAllReduce", "style": "PushPop", "count": 2, "total_ns": 10},
        {"name": "aten::to", "style": "PushPop", "count": 1, "total_ns": 5},
        {"name": "x", "style": "StartEnd", "count": 3, "total_ns": 30},
        {"name": "y", "domain": "MyDom", "style": "StartEnd", "count": 1, "total_ns": 1},
    ]
    assert nvtx_domains(ranges) == [
        {"domain": "(default domain)", "pushpop": 1, "startend": 3, "total_ns": 35},
        {"domain": "NCCL", "pushpop": 2, "startend": 0, "total_ns": 10},
        {"domain": "MyDom", "pushpop": 0, "startend": 1, "total_ns": 1},
    ]
