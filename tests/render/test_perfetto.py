"""timeline.pftrace: the file parsed back with the perfetto package's own protos and checked against the
report — kernels per device and stream, idle pieces per cause to the nanosecond, NVTX ranges, launch → kernel flows,
findings' markers at their gaps, the span under --timeline-events, hostile names kept as data."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import pytest
from conftest import built_scenario, real_trace, run_cli, scenario_report
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

from nsys_llm_explainer.pipeline import analyze_path, load_model
from nsys_llm_explainer.render.perfetto import FILE_NAME
from nsys_llm_explainer.render.perfetto_packets import _varints, lanes, shift_timestamps


class Slice:
    def __init__(self, track: int, start: int, name: str, args: Dict[str, Any], flows: List[int], ends: List[int]):
        self.track, self.start, self.name, self.args, self.flows, self.ends = track, start, name, args, flows, ends
        self.end = start


class Parsed:
    """A trace file as trace_processor reads it: tracks (uuid → name, parent, process / thread), slices made by
    pairing each track's begin / end events as a stack in timestamp order (file order among equal times), instants
    and counters; names and argument names resolved through each sequence's interned data."""

    def __init__(self, data: bytes) -> None:
        tr = pb.Trace.FromString(data)
        self.tracks: Dict[int, Dict[str, Any]] = {}
        self.slices: List[Slice] = []
        self.instants: List[Slice] = []
        self.counters: Dict[int, List[Tuple[int, float]]] = defaultdict(list)
        names: Dict[Tuple[int, int], str] = {}
        arg_names: Dict[Tuple[int, int], str] = {}
        events = []
        for i, p in enumerate(tr.packet):
            seq = p.trusted_packet_sequence_id
            for n in p.interned_data.event_names:
                names[(seq, n.iid)] = n.name
            for n in p.interned_data.debug_annotation_names:
                arg_names[(seq, n.iid)] = n.name
            if p.HasField("track_descriptor"):
                d = p.track_descriptor
                self.tracks[d.uuid] = {
                    "name": d.name or (d.thread.thread_name if d.HasField("thread") else d.process.process_name),
                    "parent": d.parent_uuid if d.HasField("parent_uuid") else None,
                    "thread": (d.thread.pid, d.thread.tid) if d.HasField("thread") else None,
                    "process": d.process.pid if d.HasField("process") else None}
            if p.HasField("track_event"):
                events.append((p.timestamp, i, seq, p.track_event))
        events.sort(key=lambda x: (x[0], x[1]))
        stacks: Dict[int, List[Slice]] = defaultdict(list)
        for ts, _, seq, e in events:
            if e.type in (1, 3):
                args = {}
                for a in e.debug_annotations:
                    k = arg_names[(seq, a.name_iid)]
                    args[k] = a.string_value if a.HasField("string_value") else a.int_value \
                        if a.HasField("int_value") else a.bool_value if a.HasField("bool_value") else a.double_value
                s = Slice(e.track_uuid, ts, names[(seq, e.name_iid)], args, list(e.flow_ids),
                          list(e.terminating_flow_ids))
                if e.type == 1:
                    stacks[e.track_uuid].append(s)
                    self.slices.append(s)
                else:
                    self.instants.append(s)
            elif e.type == 2:
                stacks[e.track_uuid].pop().end = ts
            elif e.type == 4:
                self.counters[e.track_uuid].append((ts, e.double_counter_value))
        assert not any(stacks.values()), "a slice without its end"

    def name(self, uuid: Optional[int]) -> str:
        return self.tracks[uuid]["name"] if uuid in self.tracks else ""

    def parent(self, uuid: int) -> Optional[int]:
        return self.tracks[uuid]["parent"]

    def on(self, track_name: str, parent_prefix: str = "") -> List[Slice]:
        return [s for s in self.slices if self.name(s.track) == track_name
                and self.name(self.parent(s.track)).startswith(parent_prefix)]

    def gpu_of(self, s: Slice) -> int:
        return int(self.name(self.parent(s.track)).split()[1])


def written(report: Any, tmp_path: Path) -> Parsed:
    p = tmp_path / FILE_NAME
    assert report.write_perfetto(p) == p
    return Parsed(p.read_bytes())


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Tuple[Any, Parsed]:
    _, _, r = scenario_report("demo", tmp_path_factory)
    return r, written(r, tmp_path_factory.mktemp("pf"))


@pytest.fixture(scope="module")
def demo_model(tmp_path_factory) -> Any:
    """The demo trace's model, read again (the file is checked against the trace, not against the report)."""
    _, p, _ = scenario_report("demo", tmp_path_factory)
    return load_model(str(p))


def kernel_slices(t: Parsed) -> List[Slice]:
    return [s for s in t.slices if t.name(s.track).startswith("stream ")]


def test_kernels_per_device_and_stream_equal_the_kernel_table(demo, demo_model) -> None:
    r, t = demo
    assert r.timeline_file.span.kept == "capture"
    got: Dict[Tuple[str, int], List[int]] = defaultdict(lambda: [0, 0])
    for s in kernel_slices(t):
        g = got[(s.name, t.gpu_of(s))]
        g[0] += 1
        g[1] += s.end - s.start
    table = {(row["name"], row["device_id"]): [row["count"], row["total_ns"]] for row in r.to_dict()["kernels"]}
    assert dict(got) == table and len(table) > 10
    k = demo_model.kernels   # per stream: the rows of each (device, stream) of the trace
    per_stream = defaultdict(int)
    for s in kernel_slices(t):
        per_stream[(t.gpu_of(s), int(t.name(s.track).split()[1]))] += 1
    want = defaultdict(int)
    for d, st in zip(k.device.tolist(), k.stream.tolist()):
        want[(d, st)] += 1
    assert dict(per_stream) == dict(want)


def test_idle_slices_sum_to_the_idle_cause_table(demo) -> None:
    r, t = demo
    got: Dict[Tuple[int, str], int] = defaultdict(int)
    for s in t.on("idle causes", "GPU "):
        got[(t.gpu_of(s), s.name)] += s.end - s.start
    want = {(d["device_id"], c["kind"] + (": " + c["detail"] if c["detail"] else "")): c["ns"]
            for d in r.to_dict()["idle_causes"]["devices"] for c in d["causes"]}
    assert dict(got) == want
    assert sum(want.values()) == sum(d["idle_ns"] for d in r.to_dict()["idle_causes"]["devices"])


def test_nvtx_ranges_equal_the_nvtx_table(demo, demo_model) -> None:
    r, t = demo
    got: Dict[str, List[int]] = defaultdict(lambda: [0, 0])
    for s in t.slices:
        if t.name(s.track).startswith("NVTX"):
            got[s.name][0] += 1
            got[s.name][1] += s.end - s.start
    want = {row["name"]: [row["count"], row["total_ns"]] for row in r.to_dict()["nvtx"]["ranges"]}
    assert dict(got) == want
    # on the thread that recorded them (a child track of that thread's track)
    nv = demo_model.nvtx
    threads = {t.tracks[t.parent(s.track)]["thread"] for s in t.slices if t.name(s.track).startswith("NVTX")}
    assert threads == {(int(p), int(tid)) for p, tid in zip(nv.pid.tolist(), nv.tid.tolist())}


def test_flows_connect_each_launch_to_its_kernel(demo, demo_model) -> None:
    r, t = demo
    calls = {f: s for s in t.slices for f in s.flows}
    ks = [s for s in kernel_slices(t) if s.ends]
    assert len(ks) == int((demo_model.kernels.launch_idx >= 0).sum()) == len(demo_model.kernels)
    for k in ks:
        call = calls[k.ends[0]]
        assert call.args["correlation_id"] == k.args["correlation_id"]
        assert call.start <= k.start and call.name.startswith("cudaLaunchKernel")
        assert t.tracks[call.track]["thread"] is not None


def test_findings_markers_sit_at_their_gaps(demo) -> None:
    r, t = demo
    markers = {s.args["finding"]: s for s in t.slices if "finding" in s.args}
    assert set(markers) == {f.id for f in r.findings}
    for f in r.findings:
        m = markers[f.id]
        assert m.name == f.title and m.args["time_at_stake_ns"] == f.time_at_stake_ns
        devs = [d for d in r.idle_causes.devices if f.device_id in (None, d.device_id)]
        gaps = [(e, d.device_id) for d in devs for c in d.causes if f.cause and c.kind == f.cause[0]
                for e in c.examples[:1]]
        if not gaps:   # a finding about no idle gap (per-step sync, launch-bound composite): the steady window
            assert (m.start, m.end) == (r.window.start_ns, r.window.end_ns) and t.name(m.track) == "analysis"
            continue
        ex, dev = max(gaps, key=lambda x: x[0].ns)
        assert (m.start, m.end) == (ex.start_ns, ex.end_ns) and t.gpu_of(m) == dev
        assert m.args["cause"].split(":")[0] == f.cause[0]
    assert any(t.name(m.track) == "findings" for m in markers.values())


def test_window_counters_and_the_file_note(demo) -> None:
    r, t = demo
    (w,) = t.on("analysis") and [s for s in t.on("analysis") if s.name == "steady window"]
    assert (w.start, w.end) == (r.window.start_ns, r.window.end_ns)
    note = [i for i in t.instants if i.name.startswith("timeline file: ")]
    assert len(note) == 1 and note[0].args["kept"] == "capture" and note[0].args["rows_kept"] == \
        r.timeline_file.span.capture_rows
    busy = [u for u, v in t.tracks.items() if v["name"] == "busy %"]
    assert len(busy) == len(r.idle_causes.bins)
    b0 = r.idle_causes.bins[0]
    vals = t.counters[busy[0]]
    assert len(vals) == len(b0.edges_ns)
    assert vals[1][1] == pytest.approx(100.0 * b0.busy_ns[1] / (b0.edges_ns[2] - b0.edges_ns[1]))


def test_copy_bandwidth_spreads_bytes_over_the_bins() -> None:
    from nsys_llm_explainer.analyses.timeline.content import spread_per_bin

    # 1000 bytes over [0, 100) and 50 bytes at 250 (zero length); bins of 50 ns
    out = spread_per_bin(np.array([0, 250]), np.array([100, 250]), np.array([1000, 50]), np.array([0, 50, 100, 300]))
    assert out.tolist() == pytest.approx([500.0, 500.0, 50.0])
    out = spread_per_bin(np.array([10]), np.array([30]), np.array([40]), np.array([0, 20, 40]))
    assert out.tolist() == pytest.approx([20.0, 20.0])


def test_bulk_varints_are_the_protobuf_ones() -> None:
    """The bulk slices' varints (7 bits a byte, low first, the high bit on all but the last; a negative int64 as
    its 64-bit two's complement, 10 bytes): worked by hand, and as protobuf writes a timestamp."""
    data, keep = _varints(np.array([0, 1, 127, 128, 300, -1, 3_295_714_899, 1 << 62], np.int64))
    got = [bytes(d[k]) for d, k in zip(data, keep)]
    assert got[:6] == [b"\x00", b"\x01", b"\x7f", b"\x80\x01", b"\xac\x02", b"\xff" * 9 + b"\x01"]
    assert got[6:] == [pb.TracePacket(timestamp=v).SerializeToString()[1:] for v in (3_295_714_899, 1 << 62)]


def test_lanes_keep_each_track_a_stack() -> None:
    assert lanes(np.array([0, 10, 20]), np.array([10, 20, 30])).tolist() == [0, 0, 0]
    assert lanes(np.array([0, 1, 2]), np.array([10, 5, 3])).tolist() == [0, 0, 0]      # nested
    assert lanes(np.array([0, 5, 6]), np.array([10, 15, 7])).tolist() == [0, 1, 0]     # 5-15 crosses 0-10
    assert lanes(np.array([0, 5, 12]), np.array([10, 15, 14])).tolist() == [0, 1, 0]


def test_span_under_the_limit_keeps_the_steady_start(tmp_path) -> None:

    p = tmp_path / "w.sqlite"
    built_scenario("warmup_tail", str(p))
    full = analyze_path(str(p))
    assert full.timeline_file.span.kept == "capture"
    sp = full.timeline_file.span
    from nsys_llm_explainer.options import options_from_kwargs

    r = analyze_path(str(p), options_from_kwargs(timeline_events=sp.steady_rows))
    assert r.timeline_file.span.kept == "steady" and (r.timeline_file.span.start_ns, r.timeline_file.span.end_ns) \
        == (r.window.start_ns, r.window.end_ns)
    limit = sp.steady_rows // 3
    r = analyze_path(str(p), options_from_kwargs(timeline_events=limit))
    s = r.timeline_file.span
    assert s.kept == "steady_start" and s.start_ns == r.window.start_ns and s.end_ns < r.window.end_ns
    assert 0 < s.kept_rows <= limit and "only the first" in s.left_out
    rows = r.timeline_file.rows
    kept = sum(len(x) for x in (rows.kernels, rows.api, rows.nvtx, rows.memcpy, rows.memset, rows.graph_trace,
                                rows.osrt, rows.samples))
    assert kept == s.kept_rows
    from nsys_llm_explainer.render import render_markdown

    assert "left out: only the first" in render_markdown(r)
    note = r.to_dict()["timeline_file"]["span"]
    assert note["kept"] == "steady_start" and note["left_out"] == s.left_out
    t = written(r, tmp_path)
    (mark,) = [i for i in t.instants if i.name.startswith("timeline file: ")]
    assert mark.name == "timeline file: " + s.left_out and mark.args["rows_kept"] == s.kept_rows
    # the idle pieces inside the span: each device's idle time inside [start, end) exactly
    for dev, pieces in rows.idle:
        inside = sum(e - a for a, e in zip(pieces.start.tolist(), pieces.end.tolist()))
        assert inside == sum(s2.end - s2.start for s2 in t.on("idle causes", f"GPU {dev}"))
        assert inside <= next(d.idle_ns for d in r.idle_causes.devices if d.device_id == dev)
    off = analyze_path(str(p), options_from_kwargs(timeline_events=0))
    assert not off.timeline_file.span.written and off.write_perfetto(tmp_path / "x.pftrace") is None
    assert not (tmp_path / "x.pftrace").exists()


def test_hostile_names_round_trip_as_data(tmp_path) -> None:
    from test_names_inert import BIDI, ESC_RED, FORMULAS, LONG, OSC8, build_names_trace

    p = tmp_path / "names.sqlite"
    build_names_trace(p)
    r = analyze_path(str(p))
    t = written(r, tmp_path)
    assert {s.name for s in kernel_slices(t)} == set(FORMULAS + [ESC_RED, OSC8, BIDI])
    assert {s.name for s in t.slices if t.name(s.track).startswith("NVTX")} == {BIDI, LONG}
    names = {v["name"] for v in t.tracks.values()}
    assert "thr" + OSC8 in names and "proc" + ESC_RED in names
    assert OSC8 in {s.name for s in t.on("OS runtime")}


@pytest.mark.slow
def test_the_demo_writes_it(tmp_path) -> None:
    out = tmp_path / "d"
    proc = run_cli("demo", "--out", str(out), "--quiet")
    assert proc.returncode == 0, proc.stderr
    man = json.loads((out / ".nsys-llm-explainer.json").read_text())
    assert FILE_NAME in man["files"]
    rep = json.loads((out / "report.json").read_text())
    t = Parsed((out / FILE_NAME).read_bytes())
    assert len(kernel_slices(t)) == rep["trace"]["row_counts"]["kernels"]
    assert rep["timeline_file"]["span"]["kept"] == "capture"


def test_the_file_needs_only_the_typed_report(demo, tmp_path) -> None:
    """The timeline result carries every value the file shows: without the trace model the same bytes are
    written; a report loaded from report.json (no rows) says so in one line."""
    import dataclasses

    from nsys_llm_explainer.errors import InputError
    from nsys_llm_explainer.report import Report

    r, _ = demo
    a, b = tmp_path / "a.pftrace", tmp_path / "b.pftrace"
    r.write_perfetto(a)
    assert "model" not in {f.name for f in dataclasses.fields(r)}   # the report holds no trace model at all
    r.write_perfetto(b)
    assert a.read_bytes() == b.read_bytes() and len(a.read_bytes()) > 10_000
    loaded = Report.from_dict(json.loads(json.dumps(r.to_dict())))
    with pytest.raises(InputError) as e:
        loaded.write_perfetto(tmp_path / "c.pftrace")
    assert "report.json" in str(e.value) and "\n" not in str(e.value)
    assert not (tmp_path / "c.pftrace").exists()


def test_a_rank_moves_to_the_aligned_clock() -> None:
    tr = pb.Trace()
    tr.packet.add(timestamp=5, trusted_packet_sequence_id=1)
    tr.packet.add(trusted_packet_sequence_id=1)
    out = pb.Trace.FromString(shift_timestamps(tr.SerializeToString(), 1000))
    assert [p.timestamp for p in out.packet] == [1005, 0] and not out.packet[1].HasField("timestamp")


@pytest.mark.slow
def test_real_trace_against_its_report(tmp_path) -> None:
    r = analyze_path(str(real_trace("24_cs336_laptop_rtx5000ada_launch_bound")))
    t = written(r, tmp_path)
    sp = r.timeline_file.span
    assert sp.written
    if sp.kept == "capture":
        got: Dict[Tuple[str, int], int] = defaultdict(int)
        for s in kernel_slices(t):
            got[(s.name, t.gpu_of(s))] += 1
        assert dict(got) == {(row["name"], row["device_id"]): row["count"] for row in r.to_dict()["kernels"]}
    if sp.kept in ("capture", "steady"):
        idle: Dict[Tuple[int, str], int] = defaultdict(int)
        for s in t.on("idle causes", "GPU "):
            idle[(t.gpu_of(s), s.name)] += s.end - s.start
        assert dict(idle) == {(d["device_id"], c["kind"] + (": " + c["detail"] if c["detail"] else "")): c["ns"]
                              for d in r.to_dict()["idle_causes"]["devices"] for c in d["causes"]}


@pytest.mark.slow
def test_a_cluster_trace_holds_every_rank_on_the_aligned_clock(tmp_path) -> None:
    from synth.scenarios import build_cluster

    d = tmp_path / "ranks_in"
    d.mkdir()
    build_cluster("cluster_straggler", str(d), normalized=(2,))
    out = tmp_path / "out"
    proc = run_cli(str(d), "--out", str(out), "--jobs", "1", "--quiet")
    assert proc.returncode == 0, proc.stderr
    cl = json.loads((out / "cluster.json").read_text())
    assert cl["alignment"]["aligned"]
    assert FILE_NAME in json.loads((out / ".nsys-llm-explainer.json").read_text())["files"]
    t = Parsed((out / FILE_NAME).read_bytes())
    ranks = {v["process"]: v["name"] for v in t.tracks.values() if v["process"] is not None}
    assert sorted(ranks.values()) == sorted(f"rank {f['label']}" for f in cl["files"])
    for i, f in enumerate(cl["files"]):
        own = Parsed((out / "ranks" / f["label"] / FILE_NAME).read_bytes())
        rep = json.loads((out / "ranks" / f["label"] / "report.json").read_text())
        # every kernel of the rank, moved by the rank's clock offset
        mine = sorted(s.start for s in kernel_slices(own))
        assert len(mine) == rep["trace"]["row_counts"]["kernels"]
        root = next(u for u, v in t.tracks.items() if v["process"] == i + 1)

        def under(u: Optional[int], root: int = root) -> bool:
            while u is not None:
                if u == root:
                    return True
                u = t.parent(u)
            return False
        there = sorted(s.start for s in kernel_slices(t) if under(s.track))
        off = f["offset_ns"] - min(g["offset_ns"] for g in cl["files"])
        assert there == [m + off for m in mine]


def test_idle_slices_are_bounded_by_the_limit_and_the_devices_left_out_are_named(tmp_path) -> None:
    """The idle slices count against ``--timeline-events`` too (many devices fed by one busy host thread cut into
    devices × calls slices): 40 devices of 8 kernels each, 641 rows and 648 idle slices per device; with a limit of
    1 000 the rows fit, device 0's slices fit, and devices 1–39 are named as left out — in report.json, report.md
    and the file — while their idle causes still add up in the report (only the file's tracks are missing)."""
    import sys

    from nsys_llm_explainer.options import options_from_kwargs
    from nsys_llm_explainer.pipeline import analyze_path
    from nsys_llm_explainer.render import render_markdown

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    import pathological as P

    p = tmp_path / "dev40.sqlite"
    P.write_device_ids(str(p), 40)
    r = analyze_path(str(p), options_from_kwargs(timeline_events=1000))
    assert r.timeline_file.span.kept == "capture" and r.timeline_file.span.kept_rows == 641
    assert r.timeline_file.idle_left_out == tuple(range(1, 40))
    t = written(r, tmp_path)
    idle = t.on("idle causes", "GPU ")
    assert {t.gpu_of(s) for s in idle} == {0} and len(idle) == 648
    got: Dict[str, int] = defaultdict(int)
    for s in idle:
        got[s.name] += s.end - s.start
    assert dict(got) == {c.kind + (": " + c.detail if c.detail else ""): c.ns for c in r.idle_causes.devices[0].causes}
    assert "the idle-cause tracks of 39 devices (their idle slices would pass the file's 1,000)" in render_markdown(r)
    assert r.to_dict()["timeline_file"]["idle_left_out"] == list(range(1, 40))
    assert all(sum(c.ns for c in d.causes) == d.idle_ns > 0 for d in r.idle_causes.devices)


# ------------------------------------------------------------------ kernel launch configurations (grid, block, ...)
#: corr → (start, end, grid, block, registers, static shared, dynamic shared); written out of start order, so the
#: model's order (by start) differs from the table's (rowid) order
LAUNCHES = {
    1: (3_000, 4_000, (7, 2, 1), (256, 1, 1), 40, 0, 4096),
    2: (1_000, 2_000, (1, 1, 1), (32, 4, 2), 16, 1024, 0),
    3: (5_000, 5_500, (65_536, 3, 2), (1024, 1, 1), 255, 49_152, 98_304),
    4: (2_500, 2_600, (12, 1, 1), (64, 1, 1), 24, 0, 0),
}


def launches_trace(path: Path, drop: Tuple[str, ...] = ()) -> Path:
    from synth import TraceBuilder

    b = TraceBuilder()
    b.process(10)
    g = b.thread(10, 11, "main")
    for c, (s, e, grid, block, regs, st, dyn) in LAUNCHES.items():
        b.runtime(s - 500, s - 400, tid_g=g, corr=c)
        b.kernel(s, e, pid=10, corr=c, name=f"k{c}", grid=grid, block=block, registers=regs, static_shared=st,
                 dynamic_shared=dyn)
    for col in drop:
        b.drop_column(b.kernel_table_name, col)
    b.write(str(path))
    return path


def kernel_args(t: Parsed) -> Dict[int, Dict[str, Any]]:
    return {s.args["correlation_id"]: s.args for s in kernel_slices(t)}


def test_kernels_carry_grid_block_registers_and_shared_memory(tmp_path) -> None:
    import sqlite3

    p = launches_trace(tmp_path / "l.sqlite")
    r = analyze_path(str(p))
    with sqlite3.connect(f"file:{p}?mode=ro", uri=True) as con:
        corr_of = dict(con.execute("SELECT rowid, correlationId FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchall())
    from nsys_llm_explainer.pipeline import load_model

    k = load_model(str(p)).kernels   # the model's order (by start) is not the table's: each kernel's rowid is kept
    assert k.read_pos.shape[0] == 4 and list(corr_of.values()) != [2, 4, 1, 3]
    assert [corr_of[i] for i in k.rowids(np.arange(4)).tolist()] == k.corr.tolist() == [2, 4, 1, 3]
    got = kernel_args(written(r, tmp_path))
    assert got[1]["grid"] == "7,2,1" and got[1]["block"] == "256,1,1"
    assert got[2]["grid"] == "1,1,1" and got[2]["block"] == "32,4,2"
    assert got[3]["grid"] == "65536,3,2" and got[3]["block"] == "1024,1,1"
    assert got[4]["grid"] == "12,1,1" and got[4]["block"] == "64,1,1"
    assert [got[c]["registers_per_thread"] for c in (1, 2, 3, 4)] == [40, 16, 255, 24]
    # shared memory only when the kernel uses some
    assert [got[c].get("static_shared_memory") for c in (1, 2, 3, 4)] == [None, 1024, 49_152, None]
    assert [got[c].get("dynamic_shared_memory") for c in (1, 2, 3, 4)] == [4096, None, 98_304, None]


def test_an_export_without_launch_columns_gives_no_such_args(tmp_path) -> None:
    cols = ("gridX", "gridY", "gridZ", "blockX", "blockY", "blockZ", "registersPerThread", "staticSharedMemory",
            "dynamicSharedMemory")
    r = analyze_path(str(launches_trace(tmp_path / "old.sqlite", cols)))
    got = kernel_args(written(r, tmp_path))
    assert sorted(got) == [1, 2, 3, 4]
    assert not any(k in a for a in got.values() for k in ("grid", "block", "registers_per_thread"))
    # registers and shared memory columns missing: grid and block still shown, the rest left out
    r = analyze_path(str(launches_trace(tmp_path / "part.sqlite", cols[6:])))
    got = kernel_args(written(r, tmp_path))
    assert got[3]["grid"] == "65536,3,2" and got[3]["block"] == "1024,1,1"
    assert not any(k in got[3] for k in ("registers_per_thread", "static_shared_memory", "dynamic_shared_memory"))


def test_rowid_gaps_or_a_changed_file_give_no_launch_args(tmp_path) -> None:
    import sqlite3

    from nsys_llm_explainer.pipeline import analyze_model

    p = launches_trace(tmp_path / "gap.sqlite")
    with sqlite3.connect(p) as con:   # the test's own copy: a hand-edited export whose rowids have a gap
        con.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET rowid = rowid + 10 WHERE correlationId = 3")
    r = analyze_path(str(p))
    from nsys_llm_explainer.pipeline import load_model

    assert load_model(str(p)).kernels.rowid_base is None
    got = kernel_args(written(r, tmp_path))
    assert sorted(got) == [1, 2, 3, 4] and not any("grid" in a for a in got.values())
    p = launches_trace(tmp_path / "changed.sqlite")
    model = load_model(str(p))
    with sqlite3.connect(p) as con:   # the file changes between the read and the analysis
        con.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = start + 1 WHERE correlationId = 2")
    assert analyze_model(model).timeline_file.rows.kernels.config is None


def test_real_kernels_carry_their_launch_configuration(tmp_path) -> None:
    import sqlite3

    p = real_trace("01_llama3_demo")
    got = kernel_args(written(analyze_path(str(p)), tmp_path))
    con = sqlite3.connect(f"file:{p}?mode=ro&immutable=1", uri=True)
    want = {c: (f"{gx},{gy},{gz}", f"{bx},{by},{bz}", r, s, d) for c, gx, gy, gz, bx, by, bz, r, s, d in con.execute(
        "SELECT correlationId, gridX, gridY, gridZ, blockX, blockY, blockZ, registersPerThread, staticSharedMemory, "
        "dynamicSharedMemory FROM CUPTI_ACTIVITY_KIND_KERNEL")}
    con.close()
    assert len(want) == len(got) == 64
    assert {c: (a["grid"], a["block"], a["registers_per_thread"], a.get("static_shared_memory", 0),
                a.get("dynamic_shared_memory", 0)) for c, a in got.items()} == want
    assert any(s > 0 for *_, s, _ in want.values())   # some of its kernels use static shared memory


def test_steps_of_a_process_without_gpu_work_share_one_track(tmp_path) -> None:
    """``--step-range`` can take a range from a process that ran no GPU work: its steps have no device. They are
    slices of ONE "steps" track outside the GPUs (not one track per step); device steps stay on their GPU's."""
    from synth import TraceBuilder

    from nsys_llm_explainer.options import options_from_kwargs

    b = TraceBuilder()
    b.process(100)
    b.process(200)
    g, h = b.thread(100, 100), b.thread(200, 200)
    b.gpu(0)
    for i in range(6):
        s = 1_000_000 + i * 200_000
        b.nvtx_push_pop(s, s + 150_000, "decode", tid_g=g)
        b.launch(s + 1_000, s + 3_000, s + 5_000, s + 100_000, pid=100, tid=100, name="gemm")
        b.nvtx_push_pop(s + 10_000, s + 120_000, "decode", tid_g=h)
    b.write(str(tmp_path / "t.sqlite"), overwrite=True)
    r = analyze_path(str(tmp_path / "t.sqlite"), options_from_kwargs(step_range="decode"))
    assert r.steps.arrays is not None and r.steps.arrays.device.tolist() == [0] * 6 + [-1] * 6
    t = written(r, tmp_path)
    steps = [u for u, d in t.tracks.items() if d["name"] == "steps"]
    off_gpu = [u for u in steps if not t.name(t.parent(u)).startswith("GPU ")]
    assert len(steps) == 2 and len(off_gpu) == 1
    assert sorted(s.start for s in t.slices if s.track == off_gpu[0]) == \
        [1_010_000 + i * 200_000 for i in range(6)]
    assert len([s for s in t.slices if s.track in steps]) == 12


def test_chunked_writes_hold_the_same_packets_and_none_empty(demo, tmp_path, monkeypatch) -> None:
    """Packets are written 20,000 at a time; a chunk boundary adds no packet (each one carries an event, a track, a
    name table or the sequence's start), so 7-packet chunks give the packets of one chunk."""
    import nsys_llm_explainer.render.perfetto_packets as pp

    r, _ = demo
    whole = pb.Trace.FromString(r.write_perfetto(tmp_path / "a").read_bytes())
    monkeypatch.setattr(pp, "CHUNK", 7)
    small = pb.Trace.FromString(r.write_perfetto(tmp_path / "b").read_bytes())
    assert len(whole.packet) > 7 * 3
    assert [p.SerializeToString() for p in small.packet] == [p.SerializeToString() for p in whole.packet]
    assert all(len(p.ListFields()) > 1 for p in small.packet)   # more than trusted_packet_sequence_id


def test_a_chosen_window_is_not_called_steady(tmp_path_factory, tmp_path) -> None:
    """With ``--window`` the analysis slice spans exactly the chosen window and is named "window set by --window"
    (it read "steady window": nothing judged a chosen window steady)."""
    from nsys_llm_explainer.options import options_from_kwargs

    _, p, r = scenario_report("demo", tmp_path_factory)
    w0, w1 = r.window.start_ns + 1_000_000, r.window.start_ns + 3_000_000
    t = written(analyze_path(str(p), options_from_kwargs(window=(w0, w1))), tmp_path)
    assert [(s.name, s.start, s.end) for s in t.on("analysis") if "method" in s.args] == [
        ("window set by --window", w0, w1)]
