"""Renderers, unit level: escaping and number formats, CSV tables, the JSON Schema of report.json, and the
package structure rules of ``render/`` (module size, no metric code imported)."""

from __future__ import annotations

import ast
import copy
import hashlib
import json
from pathlib import Path
from typing import Any, Dict, List

import pytest
from conftest import as_report, built_scenario, empty_report, read_table, real_traces, trace_id

from nsys_llm_explainer.render import (
    ALL_RENDERERS,
    CsvRenderer,
    HtmlRenderer,
    JsonRenderer,
    MarkdownRenderer,
    load_schema,
    render_all,
    render_markdown,
)
from nsys_llm_explainer.render.base import dumps_indented
from nsys_llm_explainer.render.csv_tables import CSV_TABLES
from nsys_llm_explainer.render.escape import md_cell, md_code, md_name, md_rich, md_text, shorten
from nsys_llm_explainer.vocabulary.units import (
    exact_decimal,
    fmt_at,
    fmt_bytes,
    fmt_count,
    fmt_dur,
    fmt_int,
    fmt_ms,
    fmt_num,
    fmt_pct,
    fmt_us,
    ms_value,
    signed_dur,
    signed_ms,
    signed_pct,
    us_value,
)

jsonschema = pytest.importorskip("jsonschema")

ROOT = Path(__file__).resolve().parents[2]
RENDER = ROOT / "src" / "nsys_llm_explainer" / "render"
REAL = real_traces()
HOSTILE = "<img src=x onerror=alert(1)> a|b `tick` line\nbreak \x1b[31mred\x1b[0m"


@pytest.fixture(scope="module")
def demo(demo_report: Any) -> Dict[str, Any]:
    return demo_report.to_dict()


def validator() -> Any:
    schema = load_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


# ------------------------------------------------------------------------------------------ escaping
def test_md_cell_leaves_no_table_breaker_or_html() -> None:
    cell = md_cell(HOSTILE)
    assert "\n" not in cell and "\x1b" not in cell
    assert "<" not in cell and ">" not in cell and "`" not in cell
    assert "|" not in cell.replace("\\|", "")
    assert "alert(1)" in cell


def test_md_code_and_rich_and_text() -> None:
    assert md_code("gemm_kernel") == "`gemm_kernel`"
    code = md_code(HOSTILE)
    assert code.startswith("<code>") and code.endswith("</code>")
    inner = code[len("<code>"):-len("</code>")]
    assert "<" not in inner and "`" not in inner and "\n" not in inner and "\x1b" not in inner
    assert md_rich("use `--trace=cuda` now") == "use `--trace=cuda` now"
    assert md_text("# heading") == "\\# heading"
    assert md_rich("+1.0 µs", line_start=False) == "+1.0 µs"


def test_shorten_keeps_head_and_tail_within_limit() -> None:
    name = "void at::native::reduce_kernel<512, 1, " + "x" * 200 + ">(params)"
    s = shorten(name, 80)
    assert len(s) == 80 and s.startswith("void at::native::reduce_kernel") and s.endswith("(params)")
    assert "…" in s
    assert shorten("short", 80) == "short"
    assert shorten("a\nb\x1bc", 80) == "a b\\x1bc"   # line breaks a space, other controls shown escaped
    assert len(md_name("k" * 300)) <= 82  # backticks around ≤ 80 characters


def test_number_formats_use_one_unit_vocabulary() -> None:
    assert fmt_dur(1_500) == "1.50 µs"
    assert fmt_dur(2_500_000) == "2.500 ms"
    assert fmt_dur(12_000_000_000) == "12.000 s"
    # the unit is chosen after rounding: never "1,000.00 µs" or "10,000.000 ms"
    assert (fmt_dur(999_994), fmt_dur(999_995), fmt_dur(999_999)) == ("999.99 µs", "1.000 ms", "1.000 ms")
    assert (fmt_dur(9_999_999_400), fmt_dur(9_999_999_600)) == ("9,999.999 ms", "10.000 s")
    assert fmt_dur(-999_999) == "−1.000 ms"
    assert fmt_dur(None) == "–"
    assert fmt_ms(1_234_567) == "1.235" and fmt_us(1_234) == "1.23"
    # counted nouns: singular for exactly one (real traces 01, 10, 16 read "1 calls", 08 and 14 "All 1 names")
    assert (fmt_count(1, "call"), fmt_count(0, "call"), fmt_count(12_345, "call")) == ("1 call", "0 calls",
                                                                                      "12,345 calls")
    assert (fmt_count(1, "copy", "copies"), fmt_count(2, "copy", "copies")) == ("1 copy", "2 copies")
    assert fmt_count(None, "gap") == "– gaps"
    assert fmt_at(3_000_000, 1_000_000) == "2.000 ms" and fmt_at(3_000_000, 1_000_000, unit=False) == "2.000"
    assert fmt_pct(79.54) == "79.5" and fmt_int(12345) == "12,345" and fmt_bytes(20992) == "20.99 kB"
    assert fmt_num(5.0) == "5" and fmt_num(13.1504) == "13.15" and fmt_num(62970.29) == "62,970"
    # the fixed-unit forms with their unit (terminal gate lines, compare headlines) and signed changes
    assert fmt_ms(1_234_567_890, unit=True) == "1,234.568 ms" and fmt_ms(None, unit=True) == "–"
    assert fmt_us(48_200, unit=True) == "48.20 µs"
    assert signed_ms(-20_000) == "−0.020" and signed_ms(1_250_000, unit=True) == "+1.250 ms"
    assert signed_pct(12.46) == "+12.5 %" and signed_pct(None) == "–"
    # one minus sign (U+2212) in every negative figure and signed change; CSV's exact decimal keeps "-" for machines
    assert (signed_pct(-9.152), signed_dur(-12_500_000_000), signed_dur(190_000)) == ("−9.2 %", "−12.500 s",
                                                                                      "+190.00 µs")
    assert (fmt_ms(-62_609), fmt_us(-1_500), fmt_pct(-44.94), fmt_at(0, 2_000_000)) == ("−0.063", "−1.50", "−44.9",
                                                                                        "−2.000 ms")
    # chart coordinates keep every ns; CSV decimals are exact (no float rounding)
    assert ms_value(1_234_567) == 1.234567 and us_value(1_234) == 1.234 and ms_value(float("nan")) is None
    assert exact_decimal(1_234_567, 6) == "1.234567" and exact_decimal(-5, 3) == "-0.005"
    assert exact_decimal(None, 6) == ""


# ------------------------------------------------------------------------------------------ CSV
def test_csv_tables_have_headers_and_distinct_contents(demo: Dict[str, Any], tmp_path: Path) -> None:
    paths = CsvRenderer().render(as_report(demo), tmp_path)
    names = {p.name for p in paths}
    assert names == {t.csv for t in CSV_TABLES}
    assert "accounting.csv" not in names and "steps_rows.csv" not in names
    for wanted in ("idle_causes.csv", "findings.csv", "devices.csv", "gpu_idle_gaps.csv", "kernels.csv",
                   "nvtx_ranges.csv", "steps.csv", "categories.csv", "memcpy.csv", "cuda_api.csv"):
        assert wanted in names
    digests: Dict[str, str] = {}
    for p in paths:
        header, _ = read_table(p)
        assert header and all(header), p.name
        digest = hashlib.sha256(p.read_bytes()).hexdigest()
        assert digest not in digests, f"{p.name} has the same content as {digests.get(digest)}"
        digests[digest] = p.name


def test_csv_headers_written_for_an_empty_report(tmp_path: Path) -> None:
    for p in CsvRenderer().render(empty_report(tmp_path), tmp_path / "out"):
        header, rows = read_table(p)
        assert header, p.name
        if p.name in ("kernels.csv", "gpu_idle_gaps.csv", "categories.csv", "memcpy.csv", "nvtx_ranges.csv"):
            assert rows == [], p.name


def test_idle_causes_csv_sums_to_idle_per_device(demo: Dict[str, Any], tmp_path: Path) -> None:
    CsvRenderer().render(as_report(demo), tmp_path)
    header, rows = read_table(tmp_path / "tables" / "idle_causes.csv")
    for col in ("device_id", "kind", "detail", "ns", "pct_of_window", "pct_of_idle", "gap_count", "one_time"):
        assert col in header
    i_dev, i_ns = header.index("device_id"), header.index("ns")
    for d in demo["devices"]:
        total = sum(int(r[i_ns]) for r in rows if r[i_dev] == str(d["device_id"]))
        assert total == d["idle_ns"]


def test_csv_rows_come_from_the_dict(demo: Dict[str, Any], tmp_path: Path) -> None:
    CsvRenderer().render(as_report(demo), tmp_path)
    t = tmp_path / "tables"
    header, rows = read_table(t / "findings.csv")
    assert [r[header.index("id")] for r in rows] == [f["id"] for f in demo["findings"]]
    assert [int(r[header.index("time_at_stake_ns")]) for r in rows] == [f["time_at_stake_ns"] for f in demo["findings"]]
    header, rows = read_table(t / "devices.csv")
    assert [int(r[header.index("busy_ns")]) for r in rows] == [d["busy_ns"] for d in demo["devices"]]
    assert "full_busy_pct" in header and "copy_only_ns" in header
    header, rows = read_table(t / "gpu_idle_gaps.csv")
    assert {"cause_kind", "cause_detail", "kernel_before", "kernel_after"} <= set(header)
    assert len(rows) == sum(len(d["largest_gaps"]) for d in demo["devices"])
    header, rows = read_table(t / "kernels.csv")
    assert [r[header.index("kernel_name")] for r in rows] == [k["name"] for k in demo["kernels"]]
    assert max(len(r[header.index("kernel_name")]) for r in rows) > 80  # full names, not shortened


# ------------------------------------------------------------------------------------------ schema
def test_schema_requires_the_2_0_contract() -> None:
    schema = load_schema()
    assert set(schema["required"]) >= {"schema_version", "headline", "window", "findings", "kernels", "devices",
                                       "idle_causes"}
    assert set(schema["properties"]["window"]["required"]) >= {"start_ns", "end_ns"}
    assert set(schema["properties"]["findings"]["items"]["required"]) >= {
        "category", "severity", "title", "evidence", "recommendation", "time_at_stake_ns", "checks"}
    for gone in ("accounting", "steady_idle", "idle"):
        assert gone not in schema["properties"]


def test_schema_accepts_the_demo_and_rejects_violations(demo: Dict[str, Any]) -> None:
    v = validator()
    v.validate(demo)
    bad: List[Dict[str, Any]] = []
    for mutate in (
        lambda d: d.pop("headline"),
        lambda d: d.pop("idle_causes"),
        lambda d: d["window"].pop("start_ns"),
        lambda d: d["findings"][0].pop("checks"),
        lambda d: d["findings"][0].__setitem__("severity", "urgent"),
        lambda d: d["devices"][0].__setitem__("busy_pct", 120.0),
        lambda d: d["idle_causes"]["devices"][0]["causes"][0].__setitem__("kind", "gremlins"),
        lambda d: d.__setitem__("schema_version", "1.0"),
    ):
        d = copy.deepcopy(demo)
        mutate(d)
        bad.append(d)
    for d in bad:
        assert list(v.iter_errors(d)), "schema accepted a report that breaks the contract"


@pytest.mark.slow
@pytest.mark.parametrize("trace", REAL, ids=trace_id)
def test_schema_accepts_every_real_trace(trace: Path) -> None:
    from conftest import real_report_dict

    validator().validate(json.loads(json.dumps(real_report_dict(trace))))


def test_schema_command_serves_the_schema() -> None:
    from conftest import run_cli

    proc = run_cli("schema")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == load_schema()


# ------------------------------------------------------------------------------------------ renderers
def test_render_all_writes_md_json_csv(demo: Dict[str, Any], tmp_path: Path) -> None:
    assert ALL_RENDERERS == [MarkdownRenderer, JsonRenderer, CsvRenderer, HtmlRenderer]
    written = render_all(as_report(demo), tmp_path)
    assert (tmp_path / "report.md").read_text() == render_markdown(as_report(demo))
    assert json.loads((tmp_path / "report.json").read_text()) == demo
    assert (tmp_path / "report.html").is_file()  # content: tests/render/test_html.py, tests/render/test_browser.py
    assert len(written) == 3 + len(CSV_TABLES)


def test_json_renderer_is_strict(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        dumps_indented({"x": float("nan")})


# ------------------------------------------------------------------------------------------ structure
def _render_modules() -> List[Path]:
    return sorted(RENDER.rglob("*.py"))


def _absolute(p: Path, node: ast.ImportFrom) -> str:
    """The absolute module name of a (possibly relative) ``from … import`` in render module ``p``."""
    if not node.level:
        return node.module or ""
    pkg = ["nsys_llm_explainer"] + list(p.relative_to(RENDER.parent).parent.parts)
    base = pkg[: len(pkg) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def test_render_imports_no_metric_code() -> None:
    """Renderers run no metric code: the typed results they read (report, analyses, findings, the cluster result)
    are imported for annotations only (``if TYPE_CHECKING:``); the model, graph and pipeline not at all."""
    banned = tuple(f"nsys_llm_explainer.{m}"
                   for m in ("analyses", "findings", "pipeline", "model", "graph", "runner", "report"))
    types = tuple(f"nsys_llm_explainer.{m}" for m in ("analyses", "findings", "report", "cluster"))
    for p in _render_modules():
        tree = ast.parse(p.read_text())
        typing_only = {id(n) for blk in ast.walk(tree) if isinstance(blk, ast.If)
                       and getattr(blk.test, "id", "") == "TYPE_CHECKING" for n in ast.walk(blk)}
        for node in ast.walk(tree):
            if id(node) in typing_only and isinstance(node, ast.ImportFrom):
                assert _absolute(p, node).startswith(types + ("nsys_llm_explainer.render",)), (p, node.module)
                continue
            if isinstance(node, ast.ImportFrom):
                mod = _absolute(p, node)
                assert mod.startswith(("nsys_llm_explainer.render", "nsys_llm_explainer.vocabulary",
                                       "nsys_llm_explainer.serialize", "nsys_llm_explainer.jsonable")) \
                    or not mod.startswith("nsys_llm_explainer"), (p, mod)   # vocabularies are pure data
                assert not mod.startswith(banned), (p, mod)
            elif isinstance(node, ast.Import):
                assert not any(a.name.startswith(banned) for a in node.names), p


def test_render_swallows_no_exception() -> None:
    for p in _render_modules():
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.ExceptHandler):
                body = node.body
                assert not (len(body) == 1 and isinstance(body[0], ast.Pass)), p
                assert node.type is not None, f"bare except in {p}"


def test_the_largest_gaps_note_says_the_csv_holds_the_largest_not_all(tmp_path: Path) -> None:
    """Scenario launch_bound: 11,581 idle gaps in the window; gpu_time keeps the 20 largest per device (one device),
    the table shows 5. The note read "Showing 5 of 20; all rows in tables/gpu_idle_gaps.csv" — as if the window
    had 20 gaps."""
    p = tmp_path / "lb.sqlite"
    built_scenario("launch_bound", str(p))
    from nsys_llm_explainer.options import Options
    from nsys_llm_explainer.pipeline import analyze_path

    rep = analyze_path(str(p), Options())
    (d,) = rep.gpu_time.devices
    assert (d.gap_count, len(d.largest_gaps)) == (11_581, 20)
    render_all(rep, tmp_path / "out")
    md = (tmp_path / "out" / "report.md").read_text(encoding="utf-8")
    assert ("Showing 5; the 20 largest (per device) of the window's 11,581 gaps in `tables/gpu_idle_gaps.csv`; "
            "every gap, by length, in `tables/gap_histogram.csv`.") in md


@pytest.mark.parametrize("launcher_sampled", [False, True])
def test_facts_line_says_whose_cpu_samples(tmp_path: Path, launcher_sampled: bool) -> None:
    """The model keeps the CPU samples of the threads that call CUDA only. A trace whose 50 samples are all of a
    tokenizer thread that calls no CUDA read "CPU samples: no" — of a trace holding samples; the line now says whose:
    "CPU samples of CUDA threads: no" (and "yes" once the launching thread is sampled too)."""
    from synth import TraceBuilder

    from nsys_llm_explainer.pipeline import analyze_path
    from nsys_llm_explainer.render import render_markdown

    b = TraceBuilder()
    b.process(100)
    main = b.thread(100, 100, "MainThread")
    tok = b.thread(100, 101, "tokenizer")
    for i in range(50):
        t = i * 100_000
        b.launch(t, t + 5_000, t + 10_000, t + 60_000, pid=100, tid=100, name="gemm")
        b.cpu_sample(t + 70_000, tid_g=tok, frames=[("tokenize", "tok.so")])
        if launcher_sampled:
            b.cpu_sample(t + 80_000, tid_g=main, frames=[("step", "python3")])
    p = tmp_path / "t.sqlite"
    b.write(str(p), overwrite=True)
    md = render_markdown(analyze_path(str(p)))
    assert f"**CPU samples of CUDA threads:** {'yes' if launcher_sampled else 'no'}" in md
    assert "**CPU samples:**" not in md
