"""timeline.pftrace says what the trace holds: an unnamed kernel's slice is named as the report names it
(``[unnamed]``), the ``busy %`` / ``copy GB/s`` counters cover the span the slices cover (not the analysis window
alone), and in a cluster two processes with the same pid in two files (two hosts) stay apart under their ranks."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Dict, List, Tuple

import pytest
from conftest import run_cli
from synth import TraceBuilder
from test_perfetto import Parsed, written

from nsys_llm_explainer.options import options_from_kwargs
from nsys_llm_explainer.pipeline import analyze_path
from nsys_llm_explainer.render.markdown import render_markdown

US = 1_000
MS = 1_000_000


@pytest.mark.parametrize("flavor", ["2021.5", "2026.2"])
def test_a_kernel_with_an_empty_name_is_unnamed_in_the_report_and_the_timeline(tmp_path: Path, flavor: str) -> None:
    """20 steps of a named GEMM (90 µs) and a kernel whose name is the empty string (40 µs)."""
    b = TraceBuilder(flavor, seed=1)
    b.process(100, "python3")
    b.thread(100, 100, "main")
    b.gpu(0)
    for s in range(20):
        t = MS + s * 200 * US
        b.launch(t, t + 5 * US, t + 10 * US, t + 100 * US, pid=100, tid=100, name="gemm_kernel")
        b.launch(t + 6 * US, t + 9 * US, t + 110 * US, t + 150 * US, pid=100, tid=100, name="")
    p = tmp_path / "t.sqlite"
    b.write(str(p), overwrite=True)
    r = analyze_path(str(p), options_from_kwargs())
    t = written(r, tmp_path)
    names = Counter(s.name for s in t.slices if t.name(s.track).startswith("stream "))
    assert names == {"gemm_kernel": 20, "[unnamed]": 20}     # was "" (an empty slice name)
    md = render_markdown(r)
    assert "| `[unnamed]` | 20 | 0.800 |" in md                 # was "| – | 20 | 0.800 |": read as no kernel
    assert sorted(k["name"] for k in r.to_dict()["kernels"]) == ["[unnamed]", "gemm_kernel"]   # json and csv


def _warmup_then_steps(path: Path) -> None:
    """A 1 ms kernel at [1, 2) ms (the warm-up), then 10 kernels of 0.5 ms at [3 + i, 3.5 + i) ms; launch calls
    5 µs before each kernel (so the capture is [0.995, 12.5) ms)."""
    b = TraceBuilder("2024.2", seed=2)
    b.process(100, "python3")
    b.thread(100, 100, "main")
    b.gpu(0)
    b.launch(MS - 5 * US, MS - 2 * US, MS, 2 * MS, pid=100, tid=100, name="warmup_kernel")
    for i in range(10):
        t = 3 * MS + i * MS
        b.launch(t - 5 * US, t - 2 * US, t, t + 500 * US, pid=100, tid=100, name="step_kernel")
    b.write(str(path), overwrite=True)


def _busy(t: Parsed) -> List[Tuple[int, float]]:
    (u,) = [u for u, v in t.tracks.items() if v["name"] == "busy %"]
    return t.counters[u]


def _at(samples: List[Tuple[int, float]], ts: int) -> float:
    """The counter's value at ``ts`` (the last sample at or before it)."""
    return [v for s, v in samples if s <= ts][-1]


def test_counters_cover_the_whole_capture_when_the_file_does(tmp_path: Path) -> None:
    p = tmp_path / "t.sqlite"
    _warmup_then_steps(p)
    r = analyze_path(str(p), options_from_kwargs(window=(3 * MS, 13 * MS)))   # the window leaves the warm-up out
    sp = r.timeline_file.span
    assert (sp.kept, sp.start_ns, sp.end_ns) == ("capture", MS - 5 * US, 12 * MS + 500 * US)
    busy = _busy(written(r, tmp_path))
    # the counters start and end where the file does (they started at the window, 3 ms: no value over the warm-up
    # kernel, whose slice is in the file)
    assert (busy[0][0], busy[-1]) == (sp.start_ns, (sp.end_ns, 0.0))
    assert _at(busy, 1_500 * US) == pytest.approx(100.0)   # inside the warm-up kernel
    assert _at(busy, 2_500 * US) == pytest.approx(0.0)     # between it and the first step
    assert _at(busy, 3_250 * US) == pytest.approx(100.0)   # inside a step kernel


def test_counters_stop_where_a_span_cut_by_the_limit_stops(tmp_path: Path) -> None:
    p = tmp_path / "t.sqlite"
    _warmup_then_steps(p)
    # the window [3, 13) ms holds 20 rows (10 calls, 10 kernels); 10 rows keep its first part
    r = analyze_path(str(p), options_from_kwargs(window=(3 * MS, 13 * MS), timeline_events=10))
    sp = r.timeline_file.span
    assert sp.kept == "steady_start" and sp.start_ns == 3 * MS and sp.end_ns < 13 * MS
    busy = _busy(written(r, tmp_path))
    assert (busy[0][0], busy[-1][0]) == (3 * MS, sp.end_ns)   # (ended at the window's end, 13 ms, before)


def _same_pid_nodes(where: Path) -> List[str]:
    """Two files (two hosts) whose one process has pid 5000 and runs GPU 0: a GEMM then an all-reduce per step."""
    ar = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
    paths = []
    for r in range(2):
        b = TraceBuilder("2024.2", seed=r, utc_epoch_ns=1_735_732_800_000_000_000, host=f"gpu-a1{r}")
        b.process(5000, "python3")
        g = b.thread(5000, 5000, "worker")
        b.gpu(0)
        for s in range(5):
            st = 50 * MS + s * MS
            b.launch(st, st + 5 * US, st + 10 * US, st + (300 + 100 * r) * US, pid=5000, tid=5000, name="gemm")
            b.launch(st + 6 * US, st + 9 * US, st + (302 + 100 * r) * US, st + 450 * US, pid=5000, tid=5000, name=ar)
            b.nvtx_push_pop(st, st + 460 * US, "execute_model", tid_g=g)
        paths.append(str(where / f"node{r}.sqlite"))
        b.write(paths[-1], overwrite=True)
    return paths


@pytest.mark.slow
def test_same_pid_on_two_hosts_stays_two_processes_in_the_cluster_timeline(tmp_path: Path) -> None:
    src = tmp_path / "in"
    src.mkdir()
    _same_pid_nodes(src)
    out = tmp_path / "out"
    proc = run_cli(str(src), "--out", str(out), "-q")
    assert proc.returncode == 0, proc.stderr
    t = Parsed((out / "timeline.pftrace").read_bytes())
    procs = [u for u, v in t.tracks.items() if v["name"] == "python3 (pid 5000)"]
    assert len(procs) == 2                                    # one per file, not merged
    roots: Dict[int, str] = {u: t.name(t.parent(u)) for u in procs}
    assert sorted(roots.values()) == ["rank node0 (host gpu-a10)", "rank node1 (host gpu-a11)"]   # its file's rank
    ranks = {t.tracks[t.parent(u)]["process"] for u in procs}
    assert len(ranks) == 2                                    # two process descriptors (distinct pids)
    per_proc = Counter(roots[t.parent(s.track)] for s in t.slices if t.parent(s.track) in roots
                       and t.name(s.track).startswith("worker"))
    assert per_proc == {"rank node0 (host gpu-a10)": 10, "rank node1 (host gpu-a11)": 10}   # 10 launch calls each


def test_a_cluster_timeline_names_a_file_of_several_ranks_as_a_file_with_its_host(tmp_path: Path) -> None:
    """A cluster worker's timeline of one node's export (host gpu-a17, label node0): pids 4000 and 4001 on GPUs 0
    and 1. Before, its root track read "rank node0" (one rank); now "file node0 (host gpu-a17)", its ranks the GPU
    tracks under it (cluster.md's "node0/GPU 0", …); a one-GPU export whose label names its host stays
    "rank nodeA-gpu0"."""
    from nsys_llm_explainer.cluster.summary import analyze_file

    roots = {}
    for label, host, gpus in (("node0", "gpu-a17", 2), ("nodeA-gpu0", "nodeA", 1)):
        b = TraceBuilder("2026.2", seed=1, host=host)
        for g in range(gpus):
            b.process(4000 + g, "python3")
            b.thread(4000 + g, 4000 + g, "pt_main_thread")
            b.gpu(g)
            for s in range(5):
                t = MS + s * 200 * US
                b.launch(t, t + 5 * US, t + 10 * US, t + 100 * US, pid=4000 + g, tid=4000 + g, device=g, name="gemm")
        b.write(str(tmp_path / f"{label}.sqlite"), overwrite=True)
        analyze_file(str(tmp_path / f"{label}.sqlite"), label, rank_dir=str(tmp_path / label))
        t = Parsed((tmp_path / label / "timeline.pftrace").read_bytes())
        top = [u for u in t.tracks if t.parent(u) is None]
        roots[label] = (t.name(top[0]), sorted(t.name(u) for u in t.tracks if t.parent(u) == top[0]
                                               and t.name(u).startswith("GPU")))
    assert roots == {"node0": ("file node0 (host gpu-a17)", ["GPU 0 (NVIDIA H100 80GB HBM3)",
                                                             "GPU 1 (NVIDIA H100 80GB HBM3)"]),
                     "nodeA-gpu0": ("rank nodeA-gpu0", ["GPU 0 (NVIDIA H100 80GB HBM3)"])}
