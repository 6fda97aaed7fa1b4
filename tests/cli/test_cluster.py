"""Many files, one report (docs/CLUSTER.md): per-file analysis in parallel, clock alignment, NCCL collectives
matched across files, late-arriver claims; local pool vs Dask; a real 2-process trace split per process."""

from __future__ import annotations

import json
import shutil
import sqlite3
import sys
from pathlib import Path

import pytest
from conftest import SHARED_TRACES
from synth import TraceBuilder
from synth.scenarios import build_cluster
from synth.scenarios.cluster import AR, BASE_UTC, MS

import nsys_llm_explainer as nle
from nsys_llm_explainer.cli import main
from nsys_llm_explainer.cluster.align import Alignment
from nsys_llm_explainer.render.cluster import render_cluster_markdown

US = 1_000
REAL = SHARED_TRACES / "05_nsysai_mfu_2gpu_before" / "trace.sqlite"
pytestmark = pytest.mark.slow   # process pools, Dask, a real 2-process trace


@pytest.fixture(scope="module")
def straggler(tmp_path_factory):
    d = tmp_path_factory.mktemp("cluster_straggler")
    facts = build_cluster("cluster_straggler", str(d), normalized=(2,))   # rank 2 exported with --ts-normalize
    return d, facts


@pytest.fixture(scope="module")
def pool_result(straggler):
    return nle.analyze_cluster(str(straggler[0]), jobs=2)


def test_planted_straggler_exact(straggler, pool_result):
    d, facts = straggler
    res = pool_result
    assert res.alignment.aligned
    assert res.alignment.offsets_ns == (0, 5_000_000, -facts["utc_epoch_ns"][0], 15_000_000)
    coll = res.collectives
    assert coll.timed and coll.matched_collectives == 10 and coll.unmatched_kernels == 0
    ranks = {r.rank: r for r in coll.ranks}
    # hand-computed (synth/scenarios/cluster.py): rank 3 is late by 200 µs in steps 0-7, rank 1 by 250 µs in 8-9
    assert {k: v.wait_ns_total for k, v in ranks.items()} == {
        "rank0": 2360 * US, "rank1": 1760 * US, "rank2": 2160 * US, "rank3": 460 * US}
    assert {k: v.wait_ns_total for k, v in ranks.items()} == {f"rank{r}": w for r, w in facts["wait_ns"].items()}
    assert {k: v.last_arrival_count for k, v in ranks.items()} == {"rank0": 0, "rank1": 2, "rank2": 0, "rank3": 8}
    assert ranks["rank3"].wait_p50_ns == 0 and ranks["rank0"].wait_p50_ns == 230 * US
    assert [i.skew_ns for i in coll.instances] == facts["skew_ns"]
    assert [i.late_rank for i in coll.instances] == ["rank3"] * 8 + ["rank1"] * 2
    claim = next(c.to_dict() for c in res.claims if c.finding.id == "late_arriver")
    assert claim["rank"] == "rank3" and claim["severity"] == "high"
    assert claim["time_at_stake_ns"] == round((2360 + 1760 + 2160) * US / 3)
    assert "arrives last in 80% (8 of 10)" in claim["evidence"][0]
    assert "209.33 µs of waiting per step" in claim["evidence"][1]
    assert all(c["op"] for c in claim["checks"])
    assert [(c["metric"], c["scope"], c["observed"], c["op"], c["threshold"]) for c in claim["checks"]] == [
        ("aligned", {}, 1, "==", 1), ("ranks", {}, 4, ">=", 2), ("matched", {"rank": "rank3"}, 10, ">=", 5),
        ("last_arrivals", {"rank": "rank3"}, 8, ">=", 2),
        # the waiting rank 3 caused: steps 0-7, ranks 0, 1, 2 wait 230 + 220 + 210 µs = 5.28 ms; rank 1 in steps
        # 8-9: 260 + 240 + 230 µs = 1.46 ms; 5.28 / 6.74 = 0.7834
        ("wait_caused_share", {"rank": "rank3"}, 0.7834, ">=", 0.6),
        # where rank 3 was last (steps 0-7) the others waited 230, 220, 210 µs of its 230: none within a quarter
        ("late_with_ranks", {"rank": "rank3"}, 0, "==", 0),
        ("others_mean_wait_ns", {"rank": "rank3"}, round((2360 + 1760 + 2160) * US / 3), ">", 0),
        ("end_spread_p50_ns", {}, 0, "<=", coll.skew_p50_ns // 2), ("split_names", {}, 0, "==", 0),
        ("point_to_point_only", {}, 0, "==", 0),   # all-reduces, not a send/recv hand-off
        # the 5.28 ms rank 3 caused over the other 3 ranks' windows (their steady windows, 9.6 ms each: the devices
        # table) = 18.33 %
        ("wait_pct_of_window", {"rank": "rank3"}, 18.33, ">=", 5.0),
        # what made it late, through the worker processes (NcclSeries.idle_since in FileSummary): in steps 1-7
        # (step 0 has no previous all-reduce) its all-reduce starts 230 µs after rank 0's; since the previous
        # all-reduce (ended together) both GPUs idled the same (up to the GEMM at +10 µs, then 2 µs after it):
        # 0 µs more, 0 / 230 = 0.0 <= 0.1, GPU work
        ("late_idle_share_p50", {"rank": "rank3"}, 0.0, "<=", 0.1)]
    assert (ranks["rank3"].late_idle_before_p50_ns, ranks["rank3"].late_by_p50_ns) == (0, 230 * US)
    assert (ranks["rank1"].late_idle_before_p50_ns, ranks["rank1"].late_by_p50_ns) == (0, 260 * US)
    assert ranks["rank0"].late_idle_share_p50 is None   # last nowhere
    assert claim["evidence"][-1].startswith("GPU work ran longer:")
    late = next(c for c in res.claims if c.finding.id == "late_arriver")   # the single-file Finding and Check types
    assert late.rank == "rank3" and late.finding.category == "nccl_wait" and late.finding.holds()
    assert [c.scope.rank for c in late.finding.checks] == [None, None, "rank3", "rank3", "rank3", "rank3", "rank3",
                                                           None, None, None, "rank3", "rank3"]
    devs = {r.rank: r for r in res.devices}
    assert all(devs[f"rank{r}"].step_count == 10 and devs[f"rank{r}"].kernel_count == 20 for r in range(4))
    json.dumps(res.to_dict(), allow_nan=False)
    assert res.to_dict()["schema_version"]


def test_kernels_that_do_not_end_together_give_no_late_arriver_claim(tmp_path, straggler, pool_result):
    """Two communicators ({0, 1}, {2, 3}) running the same all-reduce name: matched by name and issue order, the
    k-th kernels of the four ranks start 300 µs and end 250 µs apart (each pair ends together, the pairs do not),
    so the matching is not one collective: no late-arriver claim (rank 1 would otherwise be "last" in 10 of 10),
    and a warning says why. The planted straggler (ends together) keeps its claim."""
    facts = build_cluster("cluster_two_comms", str(tmp_path))
    res = nle.analyze_cluster([str(p) for p in facts["paths"]], jobs=1)
    coll = res.collectives
    assert coll.timed and coll.matched_collectives == 10
    assert [i.end_spread_ns for i in coll.instances] == facts["end_spread_ns"] == [250 * US] * 10
    assert [i.skew_ns for i in coll.instances] == facts["skew_ns"] == [50 * US] * 10
    assert coll.end_spread_p50_ns == 250 * US and coll.skew_p50_ns == 50 * US
    ranks = {r.rank: r for r in coll.ranks}
    # clock-free: rank 0's kernel runs 70 µs, ranks 1–3's 20 µs: rank 1 (first of the shortest) "last" 10 of 10
    assert ranks["rank1"].last_arrival_count == 10 and ranks["rank0"].wait_ns_total == 10 * 50 * US
    assert not [c for c in res.claims if c.finding.id == "late_arriver"]
    assert any("do not end together" in w and "communicators" in w for w in res.warnings)
    # ranks 2 and 3's kernels never overlap rank 0's (each pair ends before the other starts): issue order, warned
    assert coll.matching == "issue order" and any("matched by issue order" in w for w in res.warnings)
    ok = pool_result.collectives
    assert ok.end_spread_p50_ns == 0 and ok.skew_p50_ns > 0 and ok.matching == "time"
    claim = next(c.to_dict() for c in pool_result.claims if c.finding.id == "late_arriver")
    assert {"metric": "end_spread_p50_ns", "scope": {}, "observed": 0, "op": "<=",
            "threshold": ok.skew_p50_ns // 2} in claim["checks"]
    assert not any("end together" in w for w in pool_result.warnings)


def test_a_collective_name_on_several_streams_gives_no_late_arriver_claim(tmp_path):
    """The planted straggler with every other all-reduce on a second stream (as a second communicator would run):
    the waits are computed as before, but the name is split across streams on every rank, so matching by name
    may mix communicators — no late-arriver claim, and a warning names an example."""
    facts = build_cluster("cluster_straggler", str(tmp_path), second_stream=True)
    res = nle.analyze_cluster([str(p) for p in facts["paths"]], jobs=1)
    coll = res.collectives
    assert {r.rank: r.wait_ns_total for r in coll.ranks} == {f"rank{r}": w for r, w in facts["wait_ns"].items()}
    assert [(s.rank, s.streams) for s in coll.split_names] == [(f"rank{r}", (7, 9)) for r in range(4)]
    assert not [c for c in res.claims if c.finding.id == "late_arriver"]
    assert any("several CUDA streams" in w and "rank0: streams 7, 9" in w for w in res.warnings)


def test_without_session_start_no_timing_claims(tmp_path):
    build_cluster("cluster_straggler", str(tmp_path), no_session=True)
    res = nle.analyze_cluster([str(p) for p in sorted(tmp_path.glob("*.sqlite"))], jobs=1)
    assert not res.alignment.aligned and "utcEpochNs" in res.alignment.reason
    assert not res.collectives.timed and res.collectives.matched_collectives == 10
    assert res.collectives.ranks[0].wait_ns_total is None
    assert "wait_ns_total" not in res.to_dict()["collectives"]["ranks"][0]
    assert not [c for c in res.claims if c.finding.id == "late_arriver"]
    assert any("cannot be aligned" in w for w in res.warnings)


def test_inline_equals_pool(straggler, pool_result):
    assert nle.analyze_cluster(str(straggler[0]), jobs=1).to_dict() == pool_result.to_dict()


def test_dask_local_cluster_equals_pool(straggler, pool_result):
    try:
        from dask.distributed import LocalCluster
    except ImportError:
        pytest.skip("DASK NOT INSTALLED: the Dask path is untested; pip install 'nsys-llm-explainer[dask]' "
                    "(or '.[test,dask]') to run it")
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as lc:
        res = nle.analyze_cluster(str(straggler[0]), scheduler=lc.scheduler_address)
    assert res == pool_result
    assert res.to_dict() == pool_result.to_dict()


def _split(src: Path, pid: int, dst: Path) -> Path:
    """A copy of ``src`` keeping only process ``pid``'s rows in every table keyed by globalPid / globalTid."""
    shutil.copyfile(src, dst)
    con = sqlite3.connect(dst)
    try:
        for (t,) in con.execute("SELECT name FROM sqlite_master WHERE type='table'").fetchall():
            cols = [r[1] for r in con.execute(f'PRAGMA table_info("{t}")')]
            col = next((c for c in ("globalPid", "globalTid") if c in cols), None)
            if col:
                con.execute(f'DELETE FROM "{t}" WHERE ("{col}" >> 24) & 16777215 != ?', (pid,))
        con.commit()
    finally:
        con.close()
    return dst


def test_split_real_trace_matches_single_file(tmp_path, shared_traces):
    assert REAL.exists(), f"real traces missing: {REAL} (../shared/traces is required)"
    pids = [p.pid for p in nle.analyze(str(REAL)).trace.processes]
    assert len(pids) == 2
    files = [str(_split(REAL, p, tmp_path / f"pid{p}.sqlite")) for p in pids]
    auto = nle.analyze_cluster(files, jobs=2)
    assert auto.alignment.aligned and auto.alignment.offsets_ns == (0, 0)
    # each file has its own capture span (a --window is clipped to it): use one window inside every span so the
    # single-file report and each per-process file measure the same window
    w = (max(f.window_start_ns for f in auto.files), min(f.window_end_ns for f in auto.files))
    single = nle.analyze(str(REAL), window=w)
    res = nle.analyze_cluster(files, jobs=2, window=w)
    assert [(f.window_start_ns, f.window_end_ns) for f in res.files] == [w, w]
    assert (single.window.start_ns, single.window.end_ns) == w
    sd = single.to_dict()
    want = {}
    for dev in sd["devices"]:
        kinds: dict = {}
        for c in next(x for x in sd["idle_causes"]["devices"] if x["device_id"] == dev["device_id"])["causes"]:
            kinds[c["kind"]] = kinds.get(c["kind"], 0) + c["ns"]
        want[dev["device_id"]] = (dev["busy_pct"], dev["busy_ns"], dev["kernel_count"],
                                  {k: v for k, v in kinds.items() if v})
    got = {r.device_id: (r.busy_pct, r.busy_ns, r.kernel_count, r.idle_by_kind) for r in res.devices}
    assert got == want
    # NCCL across the two files on the same clock (2 ranks): a rank's clock-free wait (its duration − the other's,
    # when positive) differs from the start-based one (the other's start − its own, the single file's start skew of
    # the other rank) by at most the instance's end spread: dur_a − dur_b = (s_b − s_a) + (e_a − e_b)
    one = {r["pid"]: r for r in sd["nccl"]["ranks"]}
    many = {r.pid: r for r in res.collectives.ranks}
    coll = res.collectives
    assert coll.matched_collectives == sd["nccl"]["matched_collectives"]
    spread = sum(i.end_spread_ns for i in coll.instances) / len(coll.instances)
    for a, b in ((0, 1), (1, 0)):
        assert abs((many[pids[a]].wait_mean_ns or 0) - one[pids[b]]["mean_start_skew_ns"]) <= spread + 1
    # with 2 ranks one of them waits (the longer kernel) and that wait is the instance's skew
    assert sum(r.wait_ns_total or 0 for r in many.values()) == sum(i.skew_ns for i in coll.instances)
    assert sum(r.last_arrival_count or 0 for r in many.values()) == res.collectives.matched_collectives


def test_cli_directory_writes_cluster_and_rank_reports(straggler, pool_result, tmp_path):
    d, _ = straggler
    out = tmp_path / "out"
    assert main([str(d), "--out", str(out), "--jobs", "2", "--quiet"]) == 0
    data = json.loads((out / "cluster.json").read_text())
    assert data == pool_result.to_dict()
    assert "rank3 is the rank the others wait for" in (out / "cluster.md").read_text()
    for t in ("ranks.csv", "nccl_ranks.csv", "nccl_collectives.csv", "nccl_instances.csv", "claims.csv", "files.csv"):
        assert (out / "tables" / t).is_file()
    single = tmp_path / "single"
    assert main([str(d / "rank0.sqlite"), "--out", str(single), "--quiet"]) == 0
    assert not (single / "cluster.json").exists()
    a = json.loads((out / "ranks" / "rank0" / "report.json").read_text())
    b = json.loads((single / "report.json").read_text())
    a.pop("timings_s"), b.pop("timings_s")
    assert a == b
    assert (out / "ranks" / "rank3" / "report.md").is_file()
    # rerun into the same --out (a previous cluster report) with a glob
    assert main([str(d / "rank*.sqlite"), "--out", str(out), "--jobs", "1", "--quiet"]) == 0
    assert json.loads((out / "cluster.json").read_text()) == data


def test_cli_bad_inputs(tmp_path, capsys, monkeypatch):
    assert main([str(tmp_path / "nope*.sqlite"), "--out", str(tmp_path / "o")]) == 2
    assert "no file matches" in capsys.readouterr().err
    build_cluster("cluster_straggler", str(tmp_path / "in"), ranks=2, steps=6)
    assert main([str(tmp_path / "in"), "--out", str(tmp_path / "o"), "--jobs", "0"]) == 2
    assert "--jobs must be" in capsys.readouterr().err
    monkeypatch.setitem(sys.modules, "dask", None)
    monkeypatch.setitem(sys.modules, "dask.distributed", None)
    assert main([str(tmp_path / "in"), "--out", str(tmp_path / "o"), "--scheduler", "local"]) == 2
    err = capsys.readouterr().err
    assert "--scheduler needs Dask" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "o").exists()


def test_worker_error_is_one_line_exit_2(tmp_path, capsys):
    build_cluster("cluster_straggler", str(tmp_path / "in"), ranks=2, steps=6)
    (tmp_path / "in" / "zz.sqlite").write_text("not a database")
    assert main([str(tmp_path / "in"), "--out", str(tmp_path / "o"), "--jobs", "2", "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "zz.sqlite" in err[0] and not (tmp_path / "o").exists()


def test_rank_outlier_claims_need_their_preconditions():
    from nsys_llm_explainer.cluster.claims import make_claims
    from nsys_llm_explainer.cluster.collectives import CollectivesResult
    from nsys_llm_explainer.cluster.result import DeviceRow

    def dev(rank, busy, p50):
        return DeviceRow(rank=rank, file=rank, device_id=0, role="kernels", window_ns=10_000_000, busy_ns=0,
                         busy_pct=busy, idle_ns=6000, idle_by_kind={"host_cpu": 1000, "sync": 5000}, kernel_count=1,
                         step_count=10, step_p50_ns=p50, step_p90_ns=p50)

    none = CollectivesResult(False, "no NCCL kernels in any file", False)
    claims = [c.to_dict() for c in
              make_claims(none, [dev("a", 90.0, 1000), dev("b", 89.0, 1000), dev("c", 75.0, 1150)])]
    assert [(c["id"], c["rank"]) for c in claims] == [("low_busy_rank", "c"), ("slow_step_rank", "c")]
    assert claims[0]["checks"] == [
        {"metric": "devices", "scope": {}, "observed": 3, "op": ">=", "threshold": 2},
        {"metric": "busy_pct_gap", "scope": {"rank": "c"}, "observed": 14.5, "op": ">=", "threshold": 10.0}]
    assert claims[1]["checks"][1] == {"metric": "step_p50_ratio", "scope": {"rank": "c"}, "observed": 1.15,
                                      "op": ">=", "threshold": 1.1}
    assert claims[0]["advice"] == ["Open this rank's report (ranks/) for where its idle time went."]
    assert claims[0]["time_at_stake_ns"] == round(14.5 / 100 * 10_000_000)
    assert "largest idle cause is sync" in claims[0]["evidence"][0]
    assert make_claims(none, [dev("a", 90.0, 1000), dev("b", 81.0, 1090)]) == []


AG = "ncclDevKernel_AllGather_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"


def _rank_file(path: Path, t0: int, names, pid: int = 100) -> str:
    """One process on GPU 0, session start BASE_UTC (same in every file: offsets 0): kernel i of ``names`` launched
    at t0 + i ms (API call +0…+5 µs), running +10…+110 µs. The file's activity spans t0 (its first launch call) to
    t0 + (len(names) − 1) ms + 110 µs (its last kernel's end)."""
    b = TraceBuilder(utc_epoch_ns=BASE_UTC)
    b.process(pid)
    b.gpu(0)
    for i, name in enumerate(names):
        t = t0 + i * MS
        b.launch(t, t + 5 * US, t + 10 * US, t + 110 * US, pid=pid, tid=pid, name=name)
    return b.write(str(path), overwrite=True)


def test_files_whose_activity_does_not_overlap_cannot_be_aligned(tmp_path):
    """r0 is active 1.000 → 4.110 ms (4 all-reduces 1 ms apart), r1 from r0's last instant, 4.110 ms, on the same
    session start: after aligning, the spans do not overlap (one ends where the other starts), so the clocks are not
    aligned, no cross-rank timing, and cluster.md says why; the 4 all-reduces still match by name and issue order.
    Starting r1 one ns earlier makes them overlap by 1 ns: aligned (offsets 0, 0), timed."""
    r0 = _rank_file(tmp_path / "r0.sqlite", MS, [AR] * 4)
    r1 = _rank_file(tmp_path / "r1.sqlite", 4110 * US, [AR] * 4, pid=101)
    res = nle.analyze_cluster([r0, r1], jobs=1)
    why = ("the files' captured activity does not overlap in time after aligning their session start times (not one "
           "run, or host clocks disagree)")
    assert res.alignment == Alignment(False, why, BASE_UTC, (None, None))
    assert res.collectives.reason == f"clocks not aligned: {why}" and not res.collectives.timed
    assert res.collectives.matched_collectives == 4
    assert f"2 files, 2 devices. Clocks: NOT aligned — {why}; no cross-rank timing claim is made." in \
        render_cluster_markdown(res).splitlines()
    r1 = _rank_file(tmp_path / "r1.sqlite", 4110 * US - 1, [AR] * 4, pid=101)
    res = nle.analyze_cluster([r0, r1], jobs=1)
    assert res.alignment == Alignment(True, None, BASE_UTC, (0, 0)) and res.collectives.timed


def test_no_collective_matched_across_ranks_or_nccl_on_one_rank(tmp_path):
    """Aligned files (same session start, same times). r0 runs 4 all-reduces; r1 runs 4 all-gathers: two ranks but
    no collective name on both, so nothing is matched (8 kernels unmatched). r1 running a GEMM instead: one rank
    has NCCL kernels (4 unmatched). cluster.md's NCCL section says which."""
    r0 = _rank_file(tmp_path / "r0.sqlite", MS, [AR] * 4)
    for names, ranks, unmatched, reason in (([AG] * 4, 2, 8, "no collective could be matched across ranks"),
                                            (["gemm_kernel"] * 4, 1, 4, "NCCL kernels on a single rank")):
        r1 = _rank_file(tmp_path / "r1.sqlite", MS, names, pid=101)
        res = nle.analyze_cluster([r0, r1], jobs=1)
        coll = res.collectives
        assert res.alignment.aligned and coll.available and not coll.timed
        assert (coll.reason, len(coll.ranks), coll.matched_collectives, coll.unmatched_kernels) == (
            reason, ranks, 0, unmatched)
        md = render_cluster_markdown(res).splitlines()
        assert md[md.index("## NCCL collectives across ranks") + 2] == reason
        assert not [c for c in res.claims if c.finding.id == "late_arriver"]


def test_cli_without_quiet_says_what_it_wrote(straggler, tmp_path, capsys):
    """Without --quiet the command line prints where the cluster report went, how many files, and the first claims'
    titles (the planted straggler: its one claim, rank 3 arriving last in 8 of 10 all-reduces)."""
    d, _ = straggler
    out = tmp_path / "out"
    assert main([str(d), "--out", str(out), "--jobs", "1"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"nsys-llm-explain: wrote {out / 'cluster.md'}, cluster.json, tables/, ranks/ (4 files)",
        "  rank3 is the rank the others wait for at NCCL collectives"]


def test_ranks_heading_names_the_files_windows(straggler, pool_result):
    """The Ranks heading and chart caption take the files' window words (``files[].window_name``,
    vocabulary.windows.window_name), not "steady window" whatever the files' windows are: the planted straggler's four
    files each have a steady window (repeated steps, trimmed); with ``--window`` each file's window is the one set by
    that option; with files whose windows differ (one file's made the whole capture here) the words are "analysis
    window", and the caption points at each file's."""
    from dataclasses import replace

    from nsys_llm_explainer.render.cluster import render_cluster_html

    assert [f.window_name for f in pool_result.files] == ["the steady window"] * 4
    assert "## Ranks (steady window of each file)" in render_cluster_markdown(pool_result)
    two = pool_result.files[:2]   # ranks 0 and 1: one clock (rank 2 is exported with --ts-normalize)
    w = (max(f.window_start_ns for f in two), min(f.window_end_ns for f in two))
    set_ = nle.analyze_cluster([str(straggler[0] / f"{f.label}.sqlite") for f in two], jobs=1, window=w)
    assert [f.window_name for f in set_.files] == ["the window set by --window"] * 2
    assert "## Ranks (window set by --window of each file)" in render_cluster_markdown(set_)
    files = list(pool_result.files)
    files[1] = replace(files[1], window_name="the whole capture")
    mixed = replace(pool_result, files=tuple(files))
    md, page = render_cluster_markdown(mixed), render_cluster_html(mixed)
    assert "## Ranks (analysis window of each file)" in md and "steady window" not in md
    assert "over its own analysis window (each file&#x27;s: cluster.json <code>files[].window_name</code>)" in page
    assert "steady window" not in page and "ms of each file's analysis window" in page
