"""Unified Memory (managed memory): the analysis against the numbers planted by the ``unified_memory`` scenario
(hand-computed by the generator from its own intervals), the steady window against a plain-SQL recomputation,
the finding and its thresholds, the copy finding's advice for Unified copies, real traces with empty or absent
UM tables, and the report.md / report.html / CSV outputs."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Dict, List, Tuple

import pytest
from conftest import as_report, built_scenario, read_table, real_trace
from synth import CAUSES, SCENARIOS, TraceBuilder
from synth.scenarios.rank import Rank
from synth.scenarios.sim import US, Sim

from nsys_llm_explainer.analyses.memory.unified import UmDevice, UmWindow, UnifiedMemoryResult, analyze_unified_memory
from nsys_llm_explainer.findings.base import METRICS, Check
from nsys_llm_explainer.findings.unified_memory import HIGH_PCT, MEDIUM_PCT, unified_memory_finding
from nsys_llm_explainer.model.clip import clip_model
from nsys_llm_explainer.options import options_from_kwargs
from nsys_llm_explainer.pipeline import analyze_path, load_model
from nsys_llm_explainer.render import render_all
from nsys_llm_explainer.render.html import render_html
from nsys_llm_explainer.render.markdown import render_markdown

_BUILT: Dict[Tuple[str, str], tuple] = {}
WITH_TABLES = ("08_pipit_saxpy_mpi_a100", "10_abacus_dnn_serving_titanrtx_r1", "12_gartangh_keras_gtx1650",
               "14_nvfuser_v100_nvtx_heavy")
WITHOUT_TABLES = ("01_llama3_demo", "02_llama3_basic_analysis", "19_uvmtorch_a5000_2025_no_cuda",
                  "24_cs336_laptop_rtx5000ada_launch_bound")


def scenario(tmp_path_factory, flavor: str = "2024.2"):
    key = ("unified_memory", flavor)
    if key not in _BUILT:
        p = tmp_path_factory.mktemp(f"um_{flavor}") / "um.sqlite"
        facts = built_scenario("unified_memory", str(p), flavor=flavor)
        rep = analyze_path(str(p))
        _BUILT[key] = (p, facts, rep, rep.to_dict())
    return _BUILT[key]


# ------------------------------------------------------------------------------------------ plain reference
def _union(iv: List[Tuple[int, int]]) -> List[Tuple[int, int]]:
    out: List[List[int]] = []
    for a, b in sorted(iv):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


def _len(iv: List[Tuple[int, int]]) -> int:
    return sum(b - a for a, b in iv)


def _sql_overlap(path: Path, w0: int, w1: int, device: int) -> Tuple[int, int, int]:
    """(|K|, |K ∩ M|, |M \\ K|) of ``device`` over [w0, w1) straight from the SQLite (independent of the
    package): K kernels, M Unified copies (copyKind 11–13)."""
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        def clipped(sql: str) -> List[Tuple[int, int]]:
            rows = con.execute(sql, (device,)).fetchall()
            return _union([(max(s, w0), min(e, w1)) for s, e in rows if min(e, w1) > max(s, w0)])
        k = clipped("SELECT start, end FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE deviceId = ?")
        m = clipped("SELECT start, end FROM CUPTI_ACTIVITY_KIND_MEMCPY WHERE copyKind IN (11, 12, 13) "
                    "AND deviceId = ?")
    finally:
        con.close()
    both = _len(k) + _len(m) - _len(_union(k + m))
    return _len(k), both, _len(m) - both


# ------------------------------------------------------------------------------------------ the analysis
def test_registered_scenario_plants_the_unified_memory_cause() -> None:
    assert "unified_memory" in SCENARIOS and "unified_memory" in CAUSES
    assert "um_overlap_pct_of_kernel_time" in METRICS


def test_full_capture_equals_the_planted_numbers(tmp_path_factory) -> None:
    _, f, rep, _ = scenario(tmp_path_factory)
    um = rep.unified_memory
    assert um.available and um.reason is None
    assert um.sources == {"gpu_fault_table": True, "cpu_fault_table": True, "migration_cause_column": True}
    w = um.full
    assert (w.migration_count, w.migration_bytes, w.migration_ns) == (
        f["um_migration_count"], f["um_migration_bytes"], f["um_migration_ns"])
    assert {r.key: {"count": r.count, "bytes": r.bytes, "total_ns": r.total_ns} for r in w.by_direction} == \
        f["um_by_direction"]
    assert {r.key: {"count": r.count, "bytes": r.bytes, "total_ns": r.total_ns} for r in w.by_cause} == \
        f["um_by_cause"]
    assert {r.key: r.label for r in w.by_direction} == {11: "Unified Host-to-Device", 12: "Unified Device-to-Host"}
    assert (w.gpu_fault_events, w.gpu_page_faults) == (f["um_gpu_fault_events"], f["um_gpu_page_faults"])
    assert {r.access_id: {"events": r.count, "page_faults": r.page_faults}
            for r in w.gpu_faults_by_access} == f["um_gpu_faults_by_access"]
    assert w.cpu_fault_count == f["um_cpu_fault_count"]
    assert {r.name: r.count for r in w.cpu_faults_by_function} == f["um_cpu_faults_by_function"]
    (d,) = w.devices
    assert d.device_id == 0
    assert (d.kernel_busy_ns, d.overlap_ns, d.migration_union_ns, d.migration_idle_ns) == (
        f["um_kernel_busy_ns"], f["um_overlap_ns"], f["um_migration_union_ns"], f["um_migration_idle_ns"])
    assert d.overlap_pct == pytest.approx(f["um_overlap_pct"], abs=1e-9)
    assert d.gpu_fault_union_ns == f["um_gpu_fault_union_ns"]
    # the kernel union is the device's busy time of the idle model (no graph-level rows here)
    assert d.kernel_busy_ns == f["devices"]["14501:0"]["busy_ns"]
    # and the numbers a reader can check by hand: 30 steps × 12 layers × 6 HtoD migrations under the GEMMs
    assert f["um_by_direction"][11]["count"] == 30 * 12 * 6 and f["um_by_direction"][12]["count"] == 30 * 2
    assert f["um_gpu_page_faults"] == 30 * 12 * 4 * 4


def test_steady_window_matches_plain_sql(tmp_path_factory) -> None:
    p, _, rep, j = scenario(tmp_path_factory)
    w0, w1 = j["window"]["start_ns"], j["window"]["end_ns"]
    st = rep.unified_memory.steady
    assert st.window == "steady" and (st.start_ns, st.end_ns) == (w0, w1)
    (d,) = st.devices
    assert (d.kernel_busy_ns, d.overlap_ns, d.migration_idle_ns) == _sql_overlap(p, w0, w1, 0)
    # a window cut through the middle of the capture: the clipped model gives the same as plain SQL
    model = load_model(str(p))
    a, b = model.trace_start, model.trace_end
    c0, c1 = a + (b - a) // 3 + 1234, a + 2 * (b - a) // 3 - 777
    res = analyze_unified_memory(model, clip_model(model, c0, c1), c0, c1, a, b)
    (dc,) = res.steady.devices
    assert (dc.kernel_busy_ns, dc.overlap_ns, dc.migration_idle_ns) == _sql_overlap(p, c0, c1, 0)
    con = sqlite3.connect(f"file:{p}?mode=ro", uri=True)
    n_cpu = con.execute("SELECT count(*) FROM CUDA_UM_CPU_PAGE_FAULT_EVENTS WHERE start >= ? AND start < ?",
                        (c0, c1)).fetchone()[0]
    n_gpu, faults = con.execute("SELECT count(*), sum(numberOfPageFaults) FROM CUDA_UM_GPU_PAGE_FAULT_EVENTS "
                                "WHERE start < ? AND end > ?", (c1, c0)).fetchone()
    con.close()
    assert (res.steady.cpu_fault_count, res.steady.gpu_fault_events, res.steady.gpu_page_faults) == (
        n_cpu, n_gpu, faults)
    assert res.full.migration_count == rep.unified_memory.full.migration_count


@pytest.mark.slow   # the scenario in three more export flavors
@pytest.mark.parametrize("flavor", ["2022.4", "2023.4", "2026.2"])
def test_other_flavors_write_and_read_the_um_tables(tmp_path_factory, flavor: str) -> None:
    _, f, rep, _ = scenario(tmp_path_factory, flavor)
    w = rep.unified_memory.full
    assert f["gpu_fault_table"] and f["cpu_fault_table"]
    assert (w.migration_count, w.gpu_page_faults, w.cpu_fault_count, w.overlap_ns) == (
        f["um_migration_count"], f["um_gpu_page_faults"], f["um_cpu_fault_count"], f["um_overlap_ns"])


@pytest.mark.slow   # one more flavor
def test_flavor_without_the_fault_tables(tmp_path_factory) -> None:
    """2021.5: no UM fault tables are written; migrations are still read and the notes say what is missing."""
    _, f, rep, _ = scenario(tmp_path_factory, "2021.5")
    um = rep.unified_memory
    assert not f["gpu_fault_table"] and f["um_gpu_fault_events"] == 0
    assert um.available and not um.sources["gpu_fault_table"] and not um.sources["cpu_fault_table"]
    assert um.full.gpu_fault_events == 0 and um.full.cpu_fault_count == 0
    assert um.full.overlap_ns == f["um_overlap_ns"]
    assert any("--cuda-um-gpu-page-faults=true" in n for n in um.notes)


@pytest.mark.parametrize("flavor,trace", [("2022.4", "10_abacus_dnn_serving_titanrtx_r1"),
                                          ("2023.4", "14_nvfuser_v100_nvtx_heavy")])
def test_synthetic_um_tables_have_the_real_columns(tmp_path: Path, flavor: str, trace: str) -> None:
    from synth import TraceBuilder

    p = tmp_path / "t.sqlite"
    TraceBuilder(flavor, lazy=False).write(str(p))
    real = real_trace(trace)
    assert real.exists(), f"real trace missing: {real}"
    for t in ("CUDA_UM_GPU_PAGE_FAULT_EVENTS", "CUDA_UM_CPU_PAGE_FAULT_EVENTS"):
        cols = {}
        for path in (p, real):
            con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
            cols[path] = [(r[1], r[2], r[3]) for r in con.execute(f"PRAGMA table_info({t})")]
            con.close()
        assert cols[p] == cols[real], t


# ------------------------------------------------------------------------------------------ the finding
def test_finding_fires_first_with_its_check(tmp_path_factory) -> None:
    _, f, rep, j = scenario(tmp_path_factory)
    top = j["findings"][0]
    assert top["category"] == "unified_memory" and top["id"] == "unified_memory"
    assert top["severity"] == "high"            # 45.6 % of kernel time ≥ 30 %
    assert f["um_overlap_pct"] >= HIGH_PCT
    (c,) = top["checks"]
    assert c["metric"] == "um_overlap_pct_of_kernel_time" and c["op"] == ">=" and c["threshold"] == MEDIUM_PCT
    assert c["observed"] == pytest.approx(f["um_overlap_pct"], abs=1e-9) and c["scope"]["device_id"] == 0
    assert top["time_at_stake_ns"] == f["um_overlap_ns"]
    rec = " ".join(top["recommendation"])
    assert "cudaMemPrefetchAsync" in rec and "cudaMemAdvise" in rec and "cudaMalloc" in rec
    assert "CUDAPluggableAllocator" in rec      # the trace is PyTorch: the framework line applies
    assert j["headline"]["top_finding_id"] == "unified_memory"
    assert all(fd.holds() for fd in rep.findings)
    # the small copy idle of the DtoH migrations stays under the copy finding's 5 % threshold
    assert not any(x["category"] == "copy_bound" for x in j["findings"])


def _um(pcts: Dict[int, Tuple[float, int]]) -> UnifiedMemoryResult:
    """A result with devices ``id -> (overlap %, kernel busy ns)``."""
    devs = tuple(UmDevice(d, 10, 1000, 500, 500, kb, int(kb * p / 100), p, 0, 0, 0, 0) for d, (p, kb) in pcts.items())
    w = UmWindow("steady", 0, 10, 10, 1000, 500, (), (), devs, sum(x.kernel_busy_ns for x in devs),
                 sum(x.overlap_ns for x in devs), 0.0, 0, 0, 0, (), 0, (), ())
    return UnifiedMemoryResult(True, None, {"gpu_fault_table": False, "cpu_fault_table": False,
                                            "migration_cause_column": True}, (), w, w)


FACTS = {"unified_memory": True, "framework": "", "workload": "inference", "stack": ""}


@pytest.mark.parametrize("pct,severity", [(9.99, None), (10.0, "medium"), (29.9, "medium"), (30.0, "high")])
def test_thresholds(pct: float, severity) -> None:
    fd = unified_memory_finding(_um({0: (pct, 1_000_000)}), None, FACTS)
    assert (fd.severity if fd else None) == severity
    if fd:
        assert fd.holds() and fd.time_at_stake_ns == int(1_000_000 * pct / 100)
        assert not any("PyTorch" in r for r in fd.recommendation)   # no framework: no torch line


def test_the_largest_share_on_an_active_device_decides() -> None:
    um = _um({0: (5.0, 1_000_000), 1: (50.0, 2_000_000), 2: (90.0, 10)})
    fd = unified_memory_finding(um, {0, 1}, FACTS)
    assert fd.device_id == 1 and fd.checks == (Check("um_overlap_pct_of_kernel_time", 50.0, ">=", 10.0,
                                                     fd.checks[0].scope),)
    assert fd.time_at_stake_ns == 50_000 + 1_000_000     # both active devices' overlap (not device 2's)
    assert unified_memory_finding(um, {0}, FACTS) is None


def test_no_finding_and_one_line_without_um(tmp_path_factory) -> None:
    p = tmp_path_factory.mktemp("healthy") / "h.sqlite"
    built_scenario("healthy", str(p))
    rep = analyze_path(str(p))
    um = rep.unified_memory
    assert not um.available and um.steady is None
    assert um.reason.startswith("no Unified Memory activity: no memcpy rows")
    assert not any(f.category == "unified_memory" for f in rep.findings)
    md = render_markdown(as_report(rep.to_dict()))
    assert "## Unified Memory" not in md
    tail = [x for x in md.split("\n") if x.startswith("**Not shown (no data):**")]
    assert len(tail) == 1 and "Unified Memory (no Unified Memory activity" in tail[0]
    assert 'id="unified-memory"' not in render_html(as_report(rep.to_dict()), js="")


def test_copy_finding_on_unified_copies_points_to_prefetching(tmp_path: Path) -> None:
    """Unified Device-to-Host migrations filling the idle gaps between kernels: the copy finding names them and
    gives prefetch advice, not pinned-memory advice; with no overlap the UM finding stays silent."""
    sim = Sim("2024.2", 3)
    r = Rank(sim, 777, 0)
    sim.b.gpu(0)
    for _ in range(60):
        _, ke = r.launch("void at::native::vectorized_elementwise_kernel<4>(int)", 100 * US)
        r.stream_sync()
        sim.b.um_migration(ke + 5 * US, ke + 155 * US, pid=777, bytes=2 << 20, copy_kind=12, cause=4)
        r.host(200 * US)
    p = tmp_path / "um_copy.sqlite"
    sim.b.write(str(p))
    rep = analyze_path(str(p))
    cf = next(f for f in rep.findings if f.id == "idle_copy")
    assert cf.category == "copy_bound" and cf.cause == ("copy", "Unified Device-to-Host")
    assert "Unified-Memory migrations" in cf.title
    rec = " ".join(cf.recommendation)
    assert "cudaMemPrefetchAsync" in rec and "pin_memory" not in rec and "non_blocking" not in rec
    assert not any(f.category == "unified_memory" for f in rep.findings)
    assert rep.unified_memory.steady.overlap_ns == 0


# ------------------------------------------------------------------------------------------ real traces
@pytest.mark.parametrize("name", WITH_TABLES + WITHOUT_TABLES)
def test_real_traces_say_no_um_activity(name: str) -> None:
    p = real_trace(name)
    assert p.exists(), f"real trace missing: {p}"
    model = load_model(str(p))
    has = name in WITH_TABLES
    assert (model.um_gpu_faults is not None, model.um_cpu_faults is not None) == (has, has)
    if has:
        assert len(model.um_gpu_faults) == 0 and len(model.um_cpu_faults) == 0
    a, b = model.trace_start, model.trace_end
    if a is None:
        a = b = 0
    um = analyze_unified_memory(model, model, a, b, a, b)
    assert not um.available and um.reason.startswith("no Unified Memory activity")
    assert ("page-fault tables empty" in um.reason) == has
    assert ("no UM page-fault tables" in um.reason) == (not has)


@pytest.mark.slow   # full reports of two real traces
@pytest.mark.parametrize("name", ["08_pipit_saxpy_mpi_a100", "14_nvfuser_v100_nvtx_heavy"])
def test_real_reports_list_um_as_not_shown(tmp_path: Path, name: str) -> None:
    rep = analyze_path(str(real_trace(name)))
    j = rep.to_dict()
    assert j["unified_memory"]["available"] is False
    assert "UM GPU and CPU page-fault tables empty" in j["unified_memory"]["reason"]
    render_all(as_report(j), tmp_path)
    md = (tmp_path / "report.md").read_text(encoding="utf-8")
    assert "Unified Memory (no Unified Memory activity" in md and "## Unified Memory" not in md
    assert 'id="unified-memory"' not in (tmp_path / "report.html").read_text(encoding="utf-8")
    for csv in ("unified_memory.csv", "unified_memory_breakdown.csv"):
        head, rows = read_table(tmp_path / "tables" / csv)
        assert head and rows == []
    assert not any(f["category"] == "unified_memory" for f in j["findings"])


# ------------------------------------------------------------------------------------------ outputs
def test_outputs_show_the_section(tmp_path_factory, tmp_path: Path) -> None:
    _, f, _, j = scenario(tmp_path_factory)
    import json

    import jsonschema

    schema = json.loads((Path(__file__).resolve().parents[2] / "src" / "nsys_llm_explainer" /
                         "report_schema.json").read_text())
    jsonschema.validate(json.loads(json.dumps(j)), schema)
    md = render_markdown(as_report(j))
    sec = md.split("## Unified Memory", 1)[1].split("\n## ", 1)[0]
    assert f"{f['um_migration_count']:,} Unified-Memory migrations" in sec
    assert f"({f['um_overlap_pct']:.1f} %)" in sec
    assert "`tables/unified_memory.csv`" in sec and "page fault (coherence)" in sec
    html = render_html(as_report(j), js="")
    assert 'id="unified-memory"' in html and f'data-v="{f["um_overlap_ns"]}"' in html
    render_all(as_report(j), tmp_path)
    head, rows = read_table(tmp_path / "tables" / "unified_memory.csv")
    got = {(r[head.index("window")], int(r[head.index("device_id")])): r for r in rows}
    assert set(got) == {("steady", 0), ("full", 0)}
    full = got[("full", 0)]
    assert int(full[head.index("overlap_ns")]) == f["um_overlap_ns"]
    assert int(full[head.index("migration_count")]) == f["um_migration_count"]
    head, rows = read_table(tmp_path / "tables" / "unified_memory_breakdown.csv")
    causes = {int(r[head.index("id")]): int(r[head.index("count")]) for r in rows
              if r[head.index("window")] == "full" and r[head.index("group")] == "cause"}
    assert causes == {k: v["count"] for k, v in f["um_by_cause"].items()}


# ------------------------------------------------------------------------------------------ hand-built traces
def _um_loop(b: TraceBuilder, n: int = 100, migrations: int = 0, faults: int = 0) -> None:
    """``n`` periods of 100 µs from 10 µs: a 50 µs kernel at [0, 50) µs of each (launched at [−10, −8) µs, so the
    trace starts at 0); in the first ``migrations`` periods a 4 kB Unified Host-to-Device migration at [10, 30) µs
    with no recorded cause (migrationCause NULL); in the first ``faults`` a GPU fault group of 2 faults there."""
    b.process(7)
    for i in range(n):
        t = 10 * US + i * 100 * US
        b.launch(t - 10 * US, t - 8 * US, t, t + 50 * US, pid=7, tid=1, name="k")
        if i < migrations:
            b.um_migration(t + 10 * US, t + 30 * US, pid=7, bytes=4096, cause=None)
        if i < faults:
            b.um_gpu_fault(t + 10 * US, t + 30 * US, pid=7, faults=2)


def _um_run(b: TraceBuilder, tmp_path: Path, **options):
    p = tmp_path / "um.sqlite"
    b.write(str(p))
    return analyze_path(str(p), options_from_kwargs(**options))


def test_a_narrower_window_quotes_the_whole_capture_and_says_causes_are_missing(tmp_path: Path) -> None:
    """100 kernels of 50 µs (5 ms), migrations of 20 µs under the first 50 only, causes not recorded; window
    [0, 5 ms): 50 kernels (2.5 ms), all 50 migrations (1 ms) under them → 40.0 % of the window's kernel time (high);
    over the whole capture 1 ms of 5 ms → 20.0 %, quoted beside it. The notes (and report.md) say the migration
    causes are not recorded, and no "By migration cause" line is written. The window is the user's (``--window``):
    the finding and the section name it so, not "the steady window" (nothing checked it is steady)."""
    b = TraceBuilder()
    _um_loop(b, migrations=50)
    rep = _um_run(b, tmp_path, window=(0, 5_000 * US))
    um = rep.unified_memory
    assert (um.steady.overlap_pct, um.full.overlap_pct) == (40.0, 20.0)
    (f,) = [f for f in rep.findings if f.category == "unified_memory"]
    assert f.severity == "high"
    assert f.evidence[0] == ("Device 0: Unified-Memory migrations were in flight during 1.000 ms of its 2.500 ms of "
                             "kernel time (40.0 %) in the window set by --window; whole capture 20.0 %.")
    assert not any(e.startswith("By migration cause") for e in f.evidence)
    note = "Migration causes not recorded (migrationCause NULL or absent)."
    md = render_markdown(rep)
    assert note in um.notes and note in md
    assert "50 Unified-Memory migrations (" in md and ") in the window set by --window." in md
    assert "steady window" not in md


def test_gpu_faults_without_migrations_make_no_finding(tmp_path: Path) -> None:
    """GPU page faults (100 groups of 2) but no migration: Unified Memory is reported (200 faults on device 0),
    but no device has migrations to overlap its kernels, so there is no Unified-Memory finding."""
    b = TraceBuilder()
    _um_loop(b, faults=100)
    rep = _um_run(b, tmp_path)
    um = rep.unified_memory
    assert um.available and um.steady is not None
    (d,) = um.steady.devices
    assert (d.device_id, d.migration_count, d.gpu_fault_events, d.gpu_page_faults) == (0, 0, 100, 200)
    assert not any(f.category == "unified_memory" for f in rep.findings)


def test_an_empty_cpu_fault_table_names_no_fault_site(tmp_path: Path) -> None:
    """An export that writes the UM fault tables empty (``lazy=False``) with 100 migrations under the kernels: the
    CPU fault table is there (no "not recorded" note) with no row, so no function or module is named and the
    finding has no CPU-fault line."""
    b = TraceBuilder("2024.2", lazy=False)
    _um_loop(b, migrations=100)
    rep = _um_run(b, tmp_path)
    um = rep.unified_memory
    assert um.sources["cpu_fault_table"] and not any("CPU page faults" in n for n in um.notes)
    for w in (um.steady, um.full):
        assert (w.cpu_fault_count, w.cpu_faults_by_function, w.cpu_faults_by_module) == (0, (), ())
    (f,) = [f for f in rep.findings if f.category == "unified_memory"]
    assert not any("CPU page faults" in e for e in f.evidence)
