"""Threads are named unambiguously: a name two threads share is shown as ``name (tid N)``
everywhere a thread is named, defined once by ``model/names.thread_labels``; a unique name stays bare; a thread
without a name keeps each output's own fallback. Scenario ``colliding_thread_names``: three threads of process
21101 named ``pt_main_thread`` (tids 21101, 21102, 21103) and one ``tokenizer`` (tid 21104)."""

from __future__ import annotations

import csv
import sqlite3
from pathlib import Path

from conftest import as_report, scenario_report
from synth import global_tid

from nsys_llm_explainer.analyses.nvtx.attribution import AttributionResult, UncoveredThread
from nsys_llm_explainer.findings.capture import nvtx_coverage_finding
from nsys_llm_explainer.model.names import thread_labels
from nsys_llm_explainer.render import render_all
from nsys_llm_explainer.vocabulary.labels import label_shows_tid

P = 21101
MAIN, LOAD, STORE, TOK = (global_tid(P, P + i) for i in range(4))


def test_labels_by_hand() -> None:
    """Same name in the same process: labelled; same name in two processes: labelled only when both threads are
    shown (CUDA / NVTX / OS-runtime activity); same name and tid in two shown processes: pid too."""
    a1, a2 = global_tid(777, 5), global_tid(777, P)          # process 777
    b1, b2 = global_tid(778, P), global_tid(778, 9)           # process 778
    c1 = global_tid(779, 3)                                   # process 779
    names = {MAIN: "pt_main_thread", LOAD: "pt_main_thread",  # one process: collide whatever is shown
             STORE: "loader", TOK: "",                        # unique: bare; unnamed: no label
             a1: "worker", b2: "worker", c1: "worker",        # three processes: only a1 and c1 are shown
             a2: "x", b1: "x"}                                # same tid, both shown: pid and tid
    shown = [MAIN, a1, c1, a2, b1]
    assert thread_labels(names, shown) == {
        MAIN: "pt_main_thread (tid 21101)", LOAD: "pt_main_thread (tid 21102)", STORE: "loader",
        a1: "worker (tid 5)", c1: "worker (tid 3)", b2: "worker",
        a2: "x (pid 777, tid 21101)", b1: "x (pid 778, tid 21101)"}
    # nothing shown: only same-process namesakes collide
    assert thread_labels(names)[a1] == "worker" and thread_labels(names)[a2] == "x"
    assert thread_labels(names)[LOAD] == "pt_main_thread (tid 21102)"
    assert thread_labels({}) == {}
    assert label_shows_tid("pt_main_thread (tid 21101)", 21101) and not label_shows_tid("loader", 21101)
    assert label_shows_tid("x (pid 777, tid 21101)", 21101) and not label_shows_tid("a (tid 2)", 21102)


def _uncovered(gtid: int, label: str, pct: float, ranges: int) -> UncoveredThread:
    return UncoveredThread(gtid=gtid, pid=(gtid >> 24) & 0xFFFFFF, tid=gtid & 0xFFFFFF, thread_name=label,
                           kernel_count=1, kernel_ns=1, pct_of_uncovered=pct, thread_ranges=ranges)


def test_nvtx_coverage_text_names_each_thread_once() -> None:
    """A label that carries the tid is not followed by it again; a bare name keeps ``(tid N)``; a thread the trace
    does not name is `` `tid N` `` (as in the title), not a `thread` it is not called."""
    rows = (_uncovered(MAIN, "pt_main_thread (tid 21101)", 60.0, 0), _uncovered(STORE, "loader", 30.0, 4),
            _uncovered(TOK, "", 10.0, 0))
    att = AttributionResult(True, None, total_kernel_ns=100, attributed_ns=10, coverage=0.1,
                            uncovered_by_thread=rows, linked_kernel_ns=100)   # every kernel linked to its launch
    f = nvtx_coverage_finding(att, 0.7, {})
    assert f is not None
    assert f.title.endswith("60 % of the uncovered kernel time is launched by `pt_main_thread (tid 21101)`")
    assert f.evidence[1] == ("Kernels no range covers, by launching thread: `pt_main_thread (tid 21101)` 60.0 %, "
                             "no NVTX range on it; `loader` (tid 21103) 30.0 %, 4 range(s) on that thread; "
                             "`tid 21104` 10.0 %, no NVTX range on it.")


def test_scenario_labels_every_thread(tmp_path_factory, tmp_path: Path) -> None:
    facts, trace, rep = scenario_report("colliding_thread_names", tmp_path_factory)
    assert facts["thread_gtids"] == {"launcher": MAIN, "loader": LOAD, "storer": STORE, "tokenizer": TOK}
    con = sqlite3.connect(f"file:{trace}?mode=ro", uri=True)
    n_main = con.execute("SELECT count(*) FROM NVTX_EVENTS WHERE globalTid = ?", (MAIN,)).fetchone()[0]
    con.close()
    j = rep.to_dict()
    # step_sync series and its finding: the launching thread
    (s,) = j["step_sync"]["series"]
    assert (s["thread_name"], s["pid"], s["tid"]) == ("pt_main_thread (tid 21101)", P, P)
    ss = next(f for f in j["findings"] if f["category"] == "step_sync")
    assert ss["evidence"][0].startswith("Device 0, thread `pt_main_thread (tid 21101)` (pid 21101): 30 blocking")
    # facts: the threads that opened NVTX ranges (30 each; the launcher opens none here)
    assert n_main == 0 and facts["worker_ranges"] == 30
    assert [(t["gtid"], t["name"], t["ranges"]) for t in j["facts"]["nvtx_threads"]] == [
        (LOAD, "pt_main_thread (tid 21102)", 30), (STORE, "pt_main_thread (tid 21103)", 30), (TOK, "tokenizer", 30)]
    # the NVTX-coverage finding: every kernel is launched by the launcher, outside any range
    cov = next(f for f in j["findings"] if f["category"] == "nvtx_coverage")
    assert cov["evidence"][1] == ("Kernels no range covers, by launching thread: `pt_main_thread (tid 21101)` "
                                  "100.0 %, no NVTX range on it.")
    # every output: the labels, never the bare shared name
    render_all(as_report(j), tmp_path)
    md = (tmp_path / "report.md").read_text(encoding="utf-8")
    html = (tmp_path / "report.html").read_text(encoding="utf-8")
    for label in ("pt_main_thread (tid 21101)", "pt_main_thread (tid 21102)", "pt_main_thread (tid 21103)"):
        assert label in md and label in html, label
    assert "`pt_main_thread`" not in md and "pt_main_thread (tid 21104)" not in md
    assert "tokenizer (30 ranges)" in md
    with open(tmp_path / "tables" / "step_sync.csv", newline="", encoding="utf-8") as fh:
        (row,) = list(csv.DictReader(fh))
    assert (row["thread_name"], row["tid"]) == ("pt_main_thread (tid 21101)", "21101")


def test_many_threads_of_one_name_are_labelled_in_linear_time():
    """30 000 worker threads named alike in one process (a pairwise search would take minutes): each gets its tid."""
    from nsys_llm_explainer.model.names import thread_labels

    pid = 4242
    names = {(pid << 24) | tid: "worker" for tid in range(1, 30_001)}
    out = thread_labels(names, names)
    assert len(out) == 30_000 and out[(pid << 24) | 17] == "worker (tid 17)"
