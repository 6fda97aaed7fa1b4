"""Dedicated Markdown renderers of the diagnosis sections (render/markdown_diagnosis.py) and their CSVs."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest

from nsys_llm_explainer.pipeline import Options, analyze_path
from nsys_llm_explainer.render import markdown_diagnosis as mdd
from nsys_llm_explainer.render import render_all, render_markdown
from nsys_llm_explainer.render.csv_tables import read_table
from nsys_llm_explainer.render.json_report import build_json
from nsys_llm_explainer.synth import TraceBuilder, build_scenario

EVIL_RANGE = "vllm: decode step|<script>alert(1)</script>"
EVIL_KERNEL = "gemm|<script>x</script>_kernel"
DIAG_TITLES = [
    "Analysis window (steady state)",
    "GPU time accounting",
    "Kernel categories",
    "Phases (prefill / decode)",
    "Model steps",
    "CUDA graphs",
    "Memory traffic & allocation",
    "NCCL",
]


@pytest.fixture(autouse=True)
def _registered() -> None:
    # another test may replace/delete an entry of the shared registry; re-install ours
    mdd.register()


def _run(trace: Path, out: Path, top: int = 20) -> Tuple[Dict[str, Any], str]:
    data = build_json(analyze_path(str(trace), Options(top=top)))
    render_all(data, out)
    return data, (out / "report.md").read_text(encoding="utf-8")


_CACHE: Dict[str, Tuple[Dict[str, Any], str, Path]] = {}


@pytest.fixture(scope="module")
def scen(tmp_path_factory):  # noqa: ANN201
    def get(name: str) -> Tuple[Dict[str, Any], str, Path]:
        if name not in _CACHE:
            mdd.register()
            d = tmp_path_factory.mktemp(name)
            build_scenario(name, str(d / "t.sqlite"))
            data, md = _run(d / "t.sqlite", d / "out")
            _CACHE[name] = (data, md, d / "out")
        return _CACHE[name]

    return get


def build_evil(path: Path) -> None:
    """6 NVTX steps of 80 µs, each with 4 kernels of 10 µs launched 15 µs apart (launch call 2 µs, 4 µs before
    its kernel). Hand-computed: window 1,005,000 → 1,560,000 (555,000 ns), busy 24 × 10,000 = 240,000,
    idle 315,000 = launch 3 × 2,000 × 6 + 2,000 × 5 = 46,000 + no CUDA call 269,000."""
    b = TraceBuilder()
    b.process(100, "py|<b>thon")
    g = b.thread(100, 100)
    b.gpu(id=0)
    names = [EVIL_KERNEL, "flash_fwd_kernel", "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(x)", "argmax_sampler"]
    for i in range(6):
        s = 1_000_000 + i * 100_000
        b.nvtx_push_pop(s, s + 80_000, EVIL_RANGE, tid_g=g)
        for j in range(4):
            a = s + 1000 + j * 15000
            k = s + 5000 + j * 15000
            b.launch(a, a + 2000, k, k + 10_000, pid=100, tid=100, device=0, name=names[j])
    b.write(str(path), overwrite=True)


# ------------------------------------------------------------------------------------------ helpers
def sections(md: str) -> Dict[str, str]:
    out: Dict[str, str] = {}
    for chunk in md.split("\n## ")[1:]:
        title, _, body = chunk.partition("\n")
        out[title.strip()] = body
    return out


def heads(md: str) -> List[str]:
    return [line[3:] for line in md.split("\n") if line.startswith("## ")]


def md_cells(line: str) -> List[str]:
    inner = line.strip()[1:-1]
    return re.split(r"(?<!\\)\|", inner)


def assert_tables_valid(md: str) -> None:
    block: List[str] = []
    for line in md.split("\n") + [""]:
        if line.startswith("|"):
            block.append(line)
            continue
        if block:
            n = len(md_cells(block[0]))
            assert re.fullmatch(r"\|(:?---:?\|)+", block[1]), block[:2]
            for row in block:
                assert len(md_cells(row)) == n, (block[0], row)
            block = []


# ------------------------------------------------------------------------------------------ tests
def test_order_and_header_lines(scen) -> None:  # noqa: ANN001
    data, md, _ = scen("demo")
    h = heads(md)
    i = h.index("NVTX per PID")
    assert h[i + 1 : i + 1 + len(DIAG_TITLES)] == DIAG_TITLES
    assert h[i + 1 + len(DIAG_TITLES)] == "Derivation & assumptions"
    secs = sections(md)
    for t in DIAG_TITLES:
        body = secs[t].lstrip("\n")
        assert body.startswith("*Derived from:*"), t
        assert "\n*Limitations:*" in body, t
    assert "renderer failed" not in md
    assert_tables_valid(md)
    # graphs are not available in the demo: the reason is printed
    assert "**Not available:** " + data["graphs"]["reason"] in secs["CUDA graphs"]


def test_accounting_identity_lines_match_json(scen) -> None:  # noqa: ANN001
    data, md, _ = scen("demo")
    acc = sections(md)["GPU time accounting"]
    devs = data["accounting"]["steady"]["devices"]
    assert len(devs) == 2
    for d in devs:
        parts = d["idle_parts"]
        assert d["busy_ns"] + sum(parts.values()) == d["window_ns"]
        terms = " + ".join(
            f"{parts[k]:,} {t}" for k, t in mdd.IDLE_PARTS
        )
        line = (
            f": busy {d['busy_ns']:,} + idle ({terms}) = {d['window_ns']:,} ns = window {d['window_ns']:,} ns ✓"
        )
        assert line in acc
        # the table row: busy ms (% of window)
        pct = d["busy_ns"] / d["window_ns"] * 100
        assert f"{d['busy_ns'] / 1e6:,.3f} ({pct:.2f}%)" in acc
    # trimmed? no: only the whole-trace table, plus launch stats per device and short-gap share
    assert data["window"]["method"] == "full"
    assert "### Whole trace (no warm-up or tail trimmed)" in acc and "Full trace (before trimming)" not in acc
    ls = data["accounting"]["steady"]["launch_stats"]
    assert f"p50 {ls['launch_call']['p50_ns'] / 1e3:,.2f} µs" in acc
    per0 = ls["launch_to_start_per_device"][0]
    assert f"| {per0['p50_ns'] / 1e3:,.2f} | {per0['p90_ns'] / 1e3:,.2f} | {per0['p99_ns'] / 1e3:,.2f} |" in acc
    assert f"({devs[0]['idle_in_short_gaps_pct']:.2f}%)" in acc
    assert "| **Σ all devices** |" in acc
    assert "largest cause **no CUDA call**" in acc  # demo: 70 % of idle outside CUDA calls


def test_hand_computed_trace_with_evil_names(tmp_path: Path) -> None:
    build_evil(tmp_path / "e.sqlite")
    data, md = _run(tmp_path / "e.sqlite", tmp_path / "out")
    d = data["accounting"]["steady"]["devices"][0]
    assert (d["window_ns"], d["busy_ns"], d["idle_ns"]) == (555_000, 240_000, 315_000)
    assert d["idle_parts"]["launch"] == 46_000 and d["idle_parts"]["no_cuda_call"] == 269_000
    secs = sections(md)
    acc = secs["GPU time accounting"]
    assert (
        "busy 240,000 + idle (0 sync + 46,000 launch + 0 alloc + 0 other API + 269,000 no CUDA call + 0 unknown) "
        "= 555,000 ns = window 555,000 ns ✓" in acc
    )
    # 0.046 ms launch = 8.29 % of the 0.555 ms window
    assert "| 0.555 | 0.240 (43.24%) | 0.315 (56.76%) | 0.000 (0.00%) | 0.046 (8.29%) |" in acc
    assert data["steps"]["step_count"] == 6
    steps = secs["Model steps"]
    assert "**6 steps**, wall p50 0.080 ms" in steps
    # GPU busy % of the decode steps: 6 × 40 µs busy of 6 × 80 µs wall; 4 kernels per step
    assert re.search(r"\| `decode` \| 6 \| 0\.080 \| 0\.080 \| 0\.080 \| 0\.080 \| 50\.00 \| 0\.000 \| 4\.00 \|", steps)
    # names with | and <script> never break a table nor inject HTML
    assert "<script>" not in md and "</script>" not in md
    assert r"vllm: decode step\|&lt;script&gt;alert(1)&lt;/script&gt;" in secs["Phases (prefill / decode)"]
    assert r"gemm\|&lt;script&gt;x&lt;/script&gt;\_kernel" in secs["Kernel categories"]
    assert "&lt;script&gt;" in steps
    assert_tables_valid(md)
    # CSVs: full names, one row per step
    header, rows = read_table(tmp_path / "out" / "tables" / "steps.csv")
    assert header == list(mdd.STEP_COLUMNS)
    assert len(rows) == 6
    assert rows[0] == ["0", "1000000", "1080000", "80000", "decode", "100", "0", "40000", "40000", "4", "0", "0"]
    header, rows = read_table(tmp_path / "out" / "tables" / "accounting.csv")
    row = dict(zip(header, rows[0]))
    assert row["idle_launch_ns"] == "46000" and row["idle_no_cuda_call_ns"] == "269000"
    assert row["window_ns"] == "555000" and row["busy_ns"] == "240000" and row["idle_sync_ns"] == "0"
    header, rows = read_table(tmp_path / "out" / "tables" / "categories.csv")
    gemm = dict(zip(header, [r for r in rows if r[0] == "gemm"][0]))
    assert gemm["top_kernel"] == EVIL_KERNEL and gemm["total_ns"] == "60000" and gemm["count"] == "6"


def test_warmup_tail_window_and_both_scopes(scen) -> None:  # noqa: ANN001
    data, md, out = scen("warmup_tail")
    w = data["window"]
    assert w["method"] == "auto" and w["warmup_ns"] > 0
    win = sections(md)["Analysis window (steady state)"]
    assert f"**Window:** {w['start_ns']:,} → {w['end_ns']:,} ns" in win
    assert f"**Warm-up trimmed:** {w['warmup_ns'] / 1e6:,.3f} ms" in win
    assert f"`--window {w['start_ns']}:{w['end_ns']}`" in win and "`--window-nvtx NAME`" in win
    assert "`auto`" in win
    acc = sections(md)["GPU time accounting"]
    assert "### Steady state" in acc and "### Full trace (before trimming)" in acc
    for scope in ("steady", "full"):
        for d in data["accounting"][scope]["devices"]:
            assert f"= {d['window_ns']:,} ns = window {d['window_ns']:,} ns ✓" in acc
    # steady-state idle is shown inside the accounting section, not as a section of its own
    assert "### GPU idle within the steady-state window" in acc
    assert "GPU idle within the steady-state window" not in heads(md)
    si = data["steady_idle"][0]
    assert f"| {si['window_ns'] / 1e6:,.3f} | {si['busy_ns'] / 1e6:,.3f} | {si['idle_ns'] / 1e6:,.3f} |" in acc
    _, rows = read_table(out / "tables" / "accounting.csv")
    assert [int(r[1]) for r in rows] == [d["device_id"] for d in data["accounting"]["steady"]["devices"]]
    assert rows[0][0] == "steady_state"


@pytest.mark.parametrize("name", ["demo", "warmup_tail", "nccl_straggler"])
def test_steps_and_categories_csv(scen, name: str) -> None:  # noqa: ANN001
    data, md, out = scen(name)
    st = data["steps"]
    header, rows = read_table(out / "tables" / "steps.csv")
    assert header == list(mdd.STEP_COLUMNS)
    assert len(rows) == st["step_count"] == len(st["rows"])
    assert [int(r[3]) for r in rows] == [r["wall_ns"] for r in st["rows"]]
    steps = sections(md)["Model steps"]
    assert f"**{st['step_count']:,} steps**" in steps
    assert f"confidence {st['confidence']}" in steps
    if st["slowest"]:
        s0 = st["slowest"][0]
        assert f"| {s0['index']} | `{s0['phase']}` |" in steps
    cat = data["categories"]
    header, rows = read_table(out / "tables" / "categories.csv")
    assert len(rows) == len(cat["overall"])
    assert sum(int(r[header.index("nonoverlap_ns")]) for r in rows) == cat["busy_ns"]
    cs = sections(md)["Kernel categories"]
    assert f"**Preset:** `{cat['preset']}`" in cs
    assert f"**Unclassified (`other`):** {cat['other_ns'] / 1e6:,.3f} ms = {cat['other_pct']:.2f}%" in cs


def test_graph_level_warning(scen) -> None:  # noqa: ANN001
    data, md, _ = scen("graph_level")
    g = data["graphs"]
    assert g["graph_level_hidden"] is True
    sec = sections(md)["CUDA graphs"]
    assert "> **Warning:** CUDA graphs were traced at graph level" in sec
    assert "Fix: `nsys profile --cuda-graph-trace=node`" in sec
    assert f"Graph launches: {g['graph_launch_count']}" in sec
    assert f"| {g['graph_trace']['count']} | {g['graph_trace']['total_ns'] / 1e6:,.3f} |" in sec
    assert_tables_valid(md)


def test_nccl_straggler_verdict(scen) -> None:  # noqa: ANN001
    data, md, _ = scen("nccl_straggler")
    st = data["nccl"]["straggler"]
    sec = sections(md)["NCCL"]
    assert f"**Straggler: {st['late_rank']}** arrives last in {st['late_share'] * 100:.2f}%" in sec
    assert f"{st['duration_ratio']:.2f}×" in sec
    late = [r for r in data["nccl"]["ranks"] if r["rank"] == st["late_rank"]][0]
    assert f"| {late['last_arrival_count']} (100.00%) |" in sec
    # pct_of_kernel_ns is already a percentage
    d0 = data["nccl"]["per_device"][0]
    assert f"| {d0['pct_of_kernel_ns']:.2f} |" in sec
    demo, demo_md, _ = scen("demo")
    assert "**No straggler:** no significant imbalance" in sections(demo_md)["NCCL"]


def test_top_caps_tables(scen) -> None:  # noqa: ANN001
    data, _, _ = scen("demo")
    rep = copy.deepcopy(data)
    rep["options"]["top"] = 2
    md = render_markdown(rep)
    cats = [c for c in rep["categories"]["overall"] if c["count"] > 0]
    assert f"*Showing 2 of {len(cats)} categories (`--top 2`); all rows in `tables/categories.csv`.*" in md
    steps = sections(md)["Model steps"]
    assert f"*Showing 2 of {len(rep['steps']['slowest'])} steps" in steps
    assert_tables_valid(md)


def test_odd_shapes_do_not_break(scen) -> None:  # noqa: ANN001
    data, _, _ = scen("demo")
    rep = copy.deepcopy(data)
    rep["steps"] = {"available": False, "reason": "no step-like NVTX range | and no <marker> kernels"}
    rep["nccl"] = {"available": True}
    rep["memory"] = {}
    rep["window"] = {"method": "override", "start_ns": 5, "end_ns": 10}
    rep["categories"]["overall"][0]["top_kernels"] = []
    md = render_markdown(rep)
    assert "renderer failed" not in md
    secs = sections(md)
    assert r"**Not available:** no step-like NVTX range \| and no &lt;marker&gt; kernels" in secs["Model steps"]
    assert "`override` — set with `--window START_NS:END_NS`" in secs["Analysis window (steady state)"]
    assert "**No straggler:**" in secs["NCCL"]
    assert_tables_valid(md)
    # accounting without the steady/full shape falls back to the generic renderer
    rep["accounting"] = {"scope": "full", "devices": [{"device_id": 0, "idle_ns": 2_500_000}]}
    md = render_markdown(rep)
    assert "- scope: full" in sections(md)["GPU time accounting"]
