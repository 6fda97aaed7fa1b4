"""CPU samples inside host-side idle (analyses/idle/host_samples.py; docs/MODEL.md "What the host ran during
host-side idle").

* the planted scenario ``host_samples``: counts per kind, per cause, per module group / module / function /
  caller equal the numbers the generator computed from what it planted, on several export flavors;
* real traces 01, 03, 08: the attribution of the launching thread's samples is non-empty and equals a plain SQL
  count of that thread's samples inside the idle pieces (joined with SQL, leaf module from SAMPLING_CALLCHAINS);
* traces without samples (10; 14 / 23 where sampling was on but recorded nothing) say so, with the capture hint;
* report.md / report.html / tables show it; report.json validates against the schema.
"""

from __future__ import annotations

import csv
import json
import sqlite3
from pathlib import Path
from typing import Any, Dict, Tuple

import jsonschema
import numpy as np
import pytest
from conftest import as_report, built_scenario, real_trace
from synth import TraceBuilder

from nsys_llm_explainer.analyses.idle.host_samples import analyze_host_samples, samples_evidence
from nsys_llm_explainer.model.samples import GROUP_LABEL
from nsys_llm_explainer.pipeline import analyze_path
from nsys_llm_explainer.render import render_all
from nsys_llm_explainer.vocabulary.cause_kinds import KINDS

SCHEMA = Path(__file__).resolve().parents[2] / "src" / "nsys_llm_explainer" / "report_schema.json"
_CACHE: Dict[Any, Any] = {}


def _run(path: Path) -> Tuple[Any, Dict[str, Any]]:
    key = str(path)
    if key not in _CACHE:
        rep = analyze_path(str(path))
        _CACHE[key] = (rep, rep.to_dict())
    return _CACHE[key]


def _planted(tmp_path_factory, flavor: str):
    key = ("planted", flavor)
    if key not in _CACHE:
        p = tmp_path_factory.mktemp(f"hs{flavor}") / "host_samples.sqlite"
        facts = built_scenario("host_samples", str(p), seed=4, flavor=flavor)
        _CACHE[key] = (facts, p) + _run(p)
    return _CACHE[key]


def _as_counts(entries, key_fn) -> Dict[str, int]:
    return {key_fn(e): e["count"] for e in entries}


def _round_half_up(num: int, den: int) -> int:
    return (2 * num + den) // (2 * den)


# ------------------------------------------------------------------------------------------ planted
@pytest.mark.parametrize("flavor", ["2021.5", "2022.4", "2023.4", "2024.2", "2026.2"])
def test_planted_counts_exact(tmp_path_factory, flavor):
    facts, path, rep, j = _planted(tmp_path_factory, flavor)
    assert [j["window"]["start_ns"], j["window"]["end_ns"]] == facts["idle_window_ns"]
    hs = j["host_samples"]
    assert hs["available"] and hs["captured"] and hs["reason"] is None
    assert hs["sample_count"] == facts["sample_total"]
    assert hs["samples_read"] == facts["samples_read"]          # the thread without CUDA calls is not read
    (dev,) = hs["devices"]
    assert dev["threads"] == [facts["main_gtid"]]
    exp = facts["samples_by_kind"]
    assert dev["samples_inside"] == sum(v["samples"] for v in exp.values())
    kinds = {k["kind"]: k for k in dev["kinds"]}
    # every host kind with idle time is listed; the kinds with planted samples have exactly those
    assert set(kinds) == {k for k in ("launch", "other_api", "nvtx", "osrt", "host_cpu")
                          if facts["idle_by_kind_ns"].get(k)}
    for kind, e in exp.items():
        k = kinds[kind]
        assert k["idle_ns"] == facts["idle_by_kind_ns"][kind]
        assert k["samples"] == e["samples"]
        assert _as_counts(k["groups"], lambda g: g["name"]) == {GROUP_LABEL[g]: n for g, n in e["groups"].items()}
        assert _as_counts(k["modules"], lambda m: m["name"]) == e["modules"]
        assert _as_counts(k["functions"], lambda f: f"{f['name']}|{f['module']}") == e["functions"]
        assert _as_counts(k["callers"], lambda f: f"{f['name']}|{f['module']}") == e["callers"]
        for g in k["groups"]:
            assert g["pct"] == pytest.approx(100.0 * g["count"] / e["samples"])
            assert g["est_ns"] == _round_half_up(g["count"] * k["idle_ns"], e["samples"])
        counts = [x["count"] for x in k["callers"]]
        assert counts == sorted(counts, reverse=True)
    causes = {f"{c['kind']}|{c['detail']}": c for c in dev["causes"]}
    assert set(causes) == set(facts["samples_by_cause"])
    for key, e in facts["samples_by_cause"].items():
        c = causes[key]
        assert c["samples"] == e["samples"]
        assert c["idle_ns"] == facts["idle_by_cause_ns"][c["kind"]][c["detail"]]
        top = sorted(e["callers"].items(), key=lambda x: (-x[1], x[0]))[:3]
        assert [(f"{x['name']}|{x['module']}", x["count"]) for x in c["callers"]] == top
    assert "nvtx|prepare_inputs_N" in causes and "host_cpu|" in causes
    assert sum(facts["samples_left_out"].values()) + dev["samples_inside"] == facts["sample_total"]
    assert all(v > 0 for v in facts["samples_left_out"].values())


def test_planted_evidence_and_outputs(tmp_path_factory, tmp_path):
    facts, path, rep, j = _planted(tmp_path_factory, "2024.2")
    by_id = {f["id"]: f for f in j["findings"]}
    for fid, kind in (("idle_host_cpu", "host_cpu"), ("idle_nvtx", "nvtx")):
        e = facts["samples_by_kind"][kind]
        top_group = GROUP_LABEL[max(e["groups"], key=lambda g: (e["groups"][g], g))]
        top_caller = min(e["callers"].items(), key=lambda x: (-x[1], x[0]))[0].split("|")[0]
        line = next(x for x in by_id[fid]["evidence"] if x.startswith("CPU samples"))
        kind_ms = facts["idle_by_kind_ns"][kind] / 1e6
        assert f"({e['samples']:,} over {kind_ms:,.3f} ms of idle)" in line   # the planted idle is > 1 ms
        assert top_group in line and f"`{top_caller}`" in line
    schema = json.loads(SCHEMA.read_text())
    jsonschema.validate(json.loads(json.dumps(j)), schema)
    render_all(as_report(j), tmp_path)
    md = (tmp_path / "report.md").read_text()
    assert "| host samples |" in md and "*Host samples:*" in md
    row = next(x for x in md.splitlines() if x.startswith("| `host_cpu`"))
    assert f"n={facts['samples_by_kind']['host_cpu']['samples']}" in row and "Python interpreter" in row
    html = (tmp_path / "report.html").read_text()
    assert ">host samples<" in html and "prepare" in html
    with open(tmp_path / "tables" / "idle_causes.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    nvtx = next(r for r in rows if r["kind"] == "nvtx")
    assert nvtx["host_samples"].startswith(f"n={facts['samples_by_cause']['nvtx|prepare_inputs_N']['samples']}:")
    assert all(r["host_samples"] == "" for r in rows if r["kind"] not in ("launch", "other_api", "nvtx", "osrt",
                                                                          "host_cpu"))
    with open(tmp_path / "tables" / "host_samples.csv", newline="") as fh:
        hrows = list(csv.DictReader(fh))
    fns = {(r["name"], r["module"]): int(r["count"]) for r in hrows
           if r["scope"] == "kind" and r["kind"] == "host_cpu" and r["list"] == "function"}
    assert fns == {tuple(k.split("|")): v for k, v in facts["samples_by_kind"]["host_cpu"]["functions"].items()}


def _kernel_and_gap(b: TraceBuilder, main: int) -> None:
    """Two kernels launched by ``main`` with a 1 ms host gap between them."""
    b.gpu(0)
    for t in (1_000_000, 2_100_000):
        b.launch(t, t + 5_000, t + 10_000, t + 60_000, pid=77, tid=77, device=0, stream=7, name="k")


def test_samples_not_on_the_launching_thread_are_said(tmp_path):
    b = TraceBuilder("2024.2", seed=1)
    main, other = b.thread(77, 77), b.thread(77, 78)
    _kernel_and_gap(b, main)
    b.runtime(500_000, 510_000, tid_g=other, name="cudaGetDevice_v3020")
    for t in range(1_200_000, 2_000_000, 100_000):       # inside the gap, but on the other thread
        b.cpu_sample(t, tid_g=other, frames=[("f", "/usr/bin/python3")])
    b.write(str(tmp_path / "t.sqlite"))
    rep, j = _run(tmp_path / "t.sqlite")
    hs = j["host_samples"]
    assert hs["available"] and hs["sample_count"] == 8 and hs["devices"][0]["samples_inside"] == 0
    assert "no CPU samples of the gaps' host thread" in hs["devices"][0]["note"]
    # the evidence line the host_cpu finding would carry (this tiny trace is gated as too little work)
    line = samples_evidence(rep.host_samples, 0, "host_cpu")
    assert line == ("CPU samples: no CPU samples of the gaps' host thread (the samples in the trace are of other "
                    "threads).")
    assert samples_evidence(rep.host_samples, 5, "host_cpu") is None   # no such device


def test_samples_of_the_thread_outside_the_gaps_are_said(tmp_path):
    b = TraceBuilder("2023.4", seed=1)
    main = b.thread(77, 77)
    _kernel_and_gap(b, main)
    for t in (1_020_000, 1_040_000, 2_120_000):         # while a kernel runs (GPU busy)
        b.cpu_sample(t, tid_g=main, frames=[("f", "/usr/bin/python3")])
    b.write(str(tmp_path / "t.sqlite"))
    rep, j = _run(tmp_path / "t.sqlite")
    d = j["host_samples"]["devices"][0]
    assert d["thread_samples"] == 3 and d["samples_inside"] == 0
    assert d["note"] == ("the gaps' host thread has 3 CPU samples in the traced span, none inside its host-side idle "
                         "pieces on this device")


def test_lazy_false_export_with_empty_tables(tmp_path):
    b = TraceBuilder("2022.4", seed=1, lazy=False)
    _kernel_and_gap(b, b.thread(77, 77))
    b.write(str(tmp_path / "t.sqlite"))
    con = sqlite3.connect(f"file:{tmp_path / 't.sqlite'}?mode=ro", uri=True)
    assert con.execute("SELECT count(*) FROM COMPOSITE_EVENTS").fetchone()[0] == 0
    con.close()
    rep, j = _run(tmp_path / "t.sqlite")
    hs = j["host_samples"]
    assert not hs["available"] and not hs["captured"] and "no CPU samples" in hs["reason"]


# ------------------------------------------------------------------------------------------ real traces
def _sql_counts(trace: Path, pieces, kind: str) -> Dict[str, int]:
    """Leaf-module file → samples of the piece's thread inside the pieces of ``kind``, by plain SQL."""
    con = sqlite3.connect(":memory:")
    con.execute(f"ATTACH DATABASE 'file:{trace}?mode=ro&immutable=1' AS t")
    con.execute("CREATE TABLE p (s INTEGER, e INTEGER, g INTEGER)")
    code = KINDS.index(kind)
    m = (np.asarray(pieces.kind) == code) & (pieces.end > pieces.start)
    con.executemany("INSERT INTO p VALUES (?, ?, ?)",
                    zip(pieces.start[m].tolist(), pieces.end[m].tolist(), pieces.gtid[m].tolist()))
    con.execute("CREATE TABLE ev AS SELECT id, start, globalTid FROM t.COMPOSITE_EVENTS")
    con.execute("CREATE INDEX ev_t ON ev (globalTid, start)")
    rows = con.execute(
        "SELECT m.value, count(*) FROM p JOIN ev e ON e.globalTid = p.g AND e.start >= p.s AND e.start < p.e "
        "JOIN t.SAMPLING_CALLCHAINS c ON c.id = e.id AND c.stackDepth = 0 JOIN t.StringIds m ON m.id = c.module "
        "GROUP BY m.value").fetchall()
    con.close()
    return {v.rsplit("/", 1)[-1]: n for v, n in rows}


@pytest.mark.parametrize("name,kinds", [("01_llama3_demo", ("nvtx", "host_cpu")),
                                        ("03_llama3_real_inference_simulation", ("nvtx",)),
                                        ("08_pipit_saxpy_mpi_a100", ("host_cpu", "nvtx"))])
def test_real_traces_match_plain_sql(name, kinds):
    trace = real_trace(name)
    assert trace.is_file(), trace
    rep, j = _run(trace)
    hs = rep.host_samples
    assert hs.available and hs.captured
    con = sqlite3.connect(f"file:{trace}?mode=ro&immutable=1", uri=True)
    assert hs.sample_count == con.execute("SELECT count(*) FROM COMPOSITE_EVENTS").fetchone()[0]
    con.close()
    for dc in rep.idle_causes.devices:
        d = hs.device(dc.device_id)
        for kind in kinds:
            k = d.kind(kind)
            expected = _sql_counts(trace, dc.pieces, kind)
            assert k.samples == sum(expected.values()) > 0, (kind, k.samples, expected)
            top = sorted(expected.items(), key=lambda x: (-x[1], x[0]))[:5]
            assert [(m.name, m.count) for m in k.modules] == top
            assert k.idle_ns == dc.ns_of(kind)
    # the same numbers as the analysis function gives on the model (the pipeline calls it once)
    from nsys_llm_explainer.pipeline import load_model

    again = analyze_host_samples(load_model(str(trace)).samples, rep.idle_causes, unsampled=hs.unsampled)
    assert again.to_dict() == j["host_samples"]


def test_real_trace_08_names_the_application_loop():
    """08 (MPI + CUDA saxpy): the host-CPU idle is the application's own ``main`` loop (the SOURCE.md reading:
    the CPU computes between GPU phases); the NVTX MPI ranges are MPI/libfabric progress loops."""
    rep, j = _run(real_trace("08_pipit_saxpy_mpi_a100"))
    d = rep.host_samples.device(0)
    host = d.kind("host_cpu")
    assert host.callers[0].name == "main" and host.callers[0].module == "saxpy-mpi-cuda"
    assert host.callers[0].pct > 50
    nvtx = d.kind("nvtx")
    assert {c.module.split(".so")[0] for c in nvtx.callers[:3]} <= {"libfabric", "libmpi_nvidia"}


@pytest.mark.parametrize("name,requested", [("10_abacus_dnn_serving_titanrtx_r1", None),
                                            ("12_gartangh_keras_gtx1650", None),
                                            ("14_nvfuser_v100_nvtx_heavy", True),
                                            ("23_cs336_2p7b_a100_fp32_nvtx", True)])
def test_traces_without_samples_say_so(name, requested, tmp_path):
    """10 and 12 (2022.4 exports: no capture metadata) have no sample rows; 14 (empty tables) and 23 (no tables)
    were captured with CPU sampling on (META_DATA_CAPTURE) but recorded none."""
    trace = real_trace(name)
    assert trace.is_file(), trace
    rep, j = _run(trace)
    hs = j["host_samples"]
    assert not hs["available"] and not hs["captured"] and hs["sample_count"] == 0
    assert hs["sampling_requested"] is requested
    jsonschema.validate(json.loads(json.dumps(j)), json.loads(SCHEMA.read_text()))
    assert "--sample=process-tree" in hs["reason"]
    assert ("nsys status --environment" in hs["reason"]) == bool(requested)
    assert ("no CPU samples" in hs["reason"]) == (not requested)
    host_findings = [f for f in j["findings"] if f["id"] in ("idle_host_cpu", "idle_nvtx")]
    for f in host_findings:
        assert any(x.startswith("What the host ran in these gaps is unknown") for x in f["evidence"])
    if name.startswith("12"):
        assert [f["id"] for f in host_findings] == ["idle_host_cpu"]
    if name.startswith("10"):   # host_cpu is its largest idle cause (in the launch-overhead finding)
        render_all(as_report(j), tmp_path)
        md = (tmp_path / "report.md").read_text()
        assert "*Host samples:* what the host ran in `host_cpu` / `nvtx` idle is unknown" in md
        assert "| host samples |" not in md


def test_trace_02_has_samples_but_no_kernels():
    rep, j = _run(real_trace("02_llama3_basic_analysis"))
    hs = j["host_samples"]
    assert hs["captured"] and not hs["available"] and hs["sample_count"] == 3580
    assert hs["reason"].startswith("no idle causes to split")
    jsonschema.validate(json.loads(json.dumps(j)), json.loads(SCHEMA.read_text()))


def test_module_groups_by_name():
    """The group table (docs/MODEL.md) on module paths and symbols seen in the real exports."""
    from nsys_llm_explainer.model.samples import frame_group, is_system_module, module_group

    seen = {
        "/usr/lib/x86_64-linux-gnu/libc.so.6": "libc", "/lib64/libc-2.31.so": "libc", "/lib64/ld-2.31.so": "libc",
        "/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2": "libc", "/lib64/libpthread-2.31.so": "libc",
        "/usr/lib/x86_64-linux-gnu/libstdc++.so.6.0.33": "libc", "[kernel.kallsyms]": "os_kernel",
        "[vdso]": "os_kernel", "/home/u/.pyenv/versions/3.13.2/lib/libpython3.13.so.1.0": "python",
        "/usr/bin/python3.10": "python", "/x/torch/lib/libtorch_cpu.so": "framework",
        "/x/torch/lib/libc10.so": "framework", "/x/torch/_C.cpython-313-x86_64-linux-gnu.so": "framework",
        "/usr/lib/x86_64-linux-gnu/libcuda.so.570.172.08": "cuda_driver",
        "/usr/lib64/libnvidia-ptxjitcompiler.so.525.105.17": "cuda_driver",
        "/x/nvidia/cublas/lib/libcublasLt.so.12": "cuda_libs", "/x/cuda_runtime/lib/libcudart.so.12": "cuda_libs",
        "/opt/nvidia/nsight-systems/2024.6.2/target-linux-x64/libToolsInjection64.so": "profiler",
        "/opt/nvidia/nsight-systems/2024.6.2/target-linux-x64/libcupti.so.12.8": "profiler",
        "/opt/cray/libfabric/1.15.2.0/lib64/libfabric.so.1.18.2": "other",
        "/x/numpy/_core/_multiarray_umath.cpython-313-x86_64-linux-gnu.so": "other",
        "/global/apps/saxpy-mpi-cuda": "other",
    }
    assert {m: module_group(m) for m in seen} == seen
    assert frame_group("_int_malloc", "libc.so.6", False) == "allocator"
    assert frame_group("__GI___libc_free", "libc.so.6", False) == "allocator"
    assert frame_group("operator new(unsigned long)", "libstdc++.so.6", False) == "allocator"
    assert frame_group("_PyObject_Malloc", "libpython3.13.so.1.0", False) == "python"
    assert frame_group("malloc", "libc.so.6", True) == "os_kernel"      # kernel mode wins
    assert frame_group("__memmove_avx_unaligned_erms", "libc.so.6", False) == "libc"
    assert is_system_module("[Max depth]") and is_system_module("/lib64/libc-2.31.so")
    assert not is_system_module("/x/torch/lib/libtorch_cpu.so")


def test_a_device_without_host_side_idle_keeps_its_kinds_and_no_samples(tmp_path):
    """A device whose idle has no host-side piece (all queued or copies) beside samples elsewhere: the device is
    listed with its host kinds and no sample, and nothing fails (a regression: the constructor lacked ``causes``)."""
    import dataclasses

    import numpy as np

    from nsys_llm_explainer.analyses.idle.host_samples import analyze_host_samples
    from nsys_llm_explainer.pipeline import analyze_path

    p = tmp_path / "t.sqlite"
    built_scenario("host_samples", str(p))
    rep = analyze_path(str(p))
    e = np.empty(0, np.int64)
    d0 = rep.idle_causes.devices[0]
    empty = dataclasses.replace(d0.pieces, start=e, end=e, kind=np.empty(0, np.int8), detail=np.empty(0, np.int32),
                                gtid=e)
    causes = dataclasses.replace(rep.idle_causes, devices=(dataclasses.replace(d0, pieces=empty),))
    from nsys_llm_explainer.pipeline import load_model

    res = analyze_host_samples(load_model(str(p)).samples, causes)
    (dev,) = res.devices
    assert res.available and dev.samples_inside == 0 and dev.causes == ()
    assert {k.kind for k in dev.kinds} == {k for k in ("launch", "other_api", "nvtx", "osrt", "host_cpu")
                                          if d0.ns_of(k) > 0}
    assert all(k.samples == 0 for k in dev.kinds)


def test_samples_only_of_threads_without_cuda_calls_are_said_in_the_finding(tmp_path):
    """100 kernels of 30 µs (too long for the launch-bound pattern) every 100 µs, each launched by thread 77 at
    [−4, −2) µs: 66 µs of host work per gap, the ``host_cpu`` finding. The 8 CPU samples are all of thread 78,
    which made no CUDA call (so it cannot be a gap's host thread): nothing to attribute, and the finding's evidence
    says why, in one line."""
    b = TraceBuilder("2024.2", seed=1)
    other = b.thread(77, 78)
    b.gpu(0)
    for i in range(100):
        t = 4_000 + i * 100_000
        b.launch(t - 4_000, t - 2_000, t, t + 30_000, pid=77, tid=77, device=0, name="k")
    for t in range(1_000_000, 9_000_000, 1_000_000):
        b.cpu_sample(t, tid_g=other, frames=[("f", "/usr/bin/python3")])
    b.write(str(tmp_path / "t.sqlite"))
    rep, j = _run(tmp_path / "t.sqlite")
    reason = ("the trace has 8 CPU samples, none of a thread that made CUDA calls (only those can be a gap's host "
              "thread)")
    hs = j["host_samples"]
    assert hs["captured"] and not hs["available"] and hs["reason"] == reason
    f = rep.findings[0]
    assert f.cause == ("host_cpu", "")
    assert f.evidence[-1] == f"CPU samples: {reason}."
