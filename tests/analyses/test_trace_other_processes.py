"""The trace section's processes without CUDA calls (``trace.other_processes``, analyses/trace/info.py): the
processes with NVTX ranges, CPU samples or OS-runtime calls but no kernel and no CUDA API call, most recorded
activity first, the first 8 named and the rest counted; names escaped like every other name. Hand-built traces."""

from __future__ import annotations

from pathlib import Path

from synth import TraceBuilder

from nsys_llm_explainer.options import Options
from nsys_llm_explainer.pipeline import analyze_path
from nsys_llm_explainer.render import render_html, render_markdown

US = 1_000
PY = "/usr/lib/libpython3.10.so"


def _cuda_process(b: TraceBuilder) -> None:
    """pid 1 `engine`: one launch of a 100 µs kernel, with an NVTX range and an OS call of its own."""
    g = b.thread(1, 1, "engine")
    b.launch(10 * US, 15 * US, 20 * US, 120 * US, pid=1, tid=1, device=0, name="k")
    b.nvtx_push_pop(5 * US, 200 * US, "step", tid_g=g)
    b.osrt(130 * US, 140 * US, tid_g=g, name="futex")


def test_ten_processes_without_cuda_calls_most_active_first_eight_named(tmp_path: Path) -> None:
    """pid 100 + i (i = 0…9) is sampled i + 1 times (one sample per 10 µs); pid 100 also has 3 NVTX ranges and
    pid 101 5 OS calls, so activity is 1 + 3 = 4 (pid 100), 2 + 5 = 7 (pid 101), i + 1 for the rest: the order
    is 109 (10), 108 (9), 107 (8), 101 (7), 106 (7), 105 (6), 104 (5), 100 (4), 103 (4), 102 (3); ties by pid. The
    CUDA process (pid 1) has an NVTX range and an OS call but is not listed. Names 8 and 2 more."""
    b = TraceBuilder("2024.2", seed=1)
    b.process(1, "engine")
    b.gpu(0)
    _cuda_process(b)
    for i in range(10):
        pid = 100 + i
        # pid 100's PROCESSES name is empty: "pid 100", no empty code span
        b.process(pid, "tok`<b>" if i == 9 else f"worker{i}" if i else "")
        g = b.thread(pid, pid, f"t{i}")
        for j in range(i + 1):
            b.cpu_sample((30 + 10 * j) * US, tid_g=g, frames=[("f", PY)])
        if i == 0:
            for j in range(3):
                b.nvtx_push_pop((40 + 10 * j) * US, (45 + 10 * j) * US, "r", tid_g=g)
        if i == 1:
            for j in range(5):
                b.osrt((40 + 10 * j) * US, (45 + 10 * j) * US, tid_g=g, name="read")
    p = tmp_path / "t.sqlite"
    b.write(str(p))
    rep = analyze_path(str(p), Options())
    got = [(r.pid, r.nvtx_ranges, r.cpu_samples, r.os_runtime_calls) for r in rep.trace.other_processes or ()]
    assert got == [(109, 0, 10, 0), (108, 0, 9, 0), (107, 0, 8, 0), (101, 0, 2, 5), (106, 0, 7, 0), (105, 0, 6, 0),
                   (104, 0, 5, 0), (100, 3, 1, 0), (103, 0, 4, 0), (102, 0, 3, 0)]
    assert [r.pid for r in rep.trace.processes] == [1]
    md = render_markdown(rep)
    line = next(x for x in md.splitlines() if x.startswith("- Other processes"))
    assert line == ("- Other processes with recorded activity (no CUDA calls): "
                    "pid 109 <code>tok&#96;&lt;b&gt;</code> (10 CPU samples); pid 108 `worker8` (9 CPU samples); "
                    "pid 107 `worker7` (8 CPU samples); pid 101 `worker1` (2 CPU samples, 5 OS-runtime calls); "
                    "pid 106 `worker6` (7 CPU samples); pid 105 `worker5` (6 CPU samples); "
                    "pid 104 `worker4` (5 CPU samples); pid 100 (3 NVTX ranges, 1 CPU sample); and 2 more.")
    page = render_html(rep)
    assert "tok`&lt;b&gt;" in page and "tok`<b>" not in page


def test_no_other_process_no_line_and_no_key(tmp_path: Path) -> None:
    """A trace whose one process makes the CUDA calls: no list in report.json, no line in report.md."""
    b = TraceBuilder("2024.2", seed=1)
    b.process(1, "engine")
    b.gpu(0)
    _cuda_process(b)
    p = tmp_path / "t.sqlite"
    b.write(str(p))
    rep = analyze_path(str(p), Options())
    assert rep.trace.other_processes is None and "other_processes" not in rep.to_dict()["trace"]
    assert "Other processes" not in render_markdown(rep)


def test_minor_processes_are_counted_in_one_phrase_the_active_ones_listed(tmp_path: Path) -> None:
    """A serving capture with short-lived helpers (traces 01–03 list 24–26 `bash` / `readlink` / unnamed pids of
    1–10 samples each, burying the one process that matters). The CUDA process (pid 1) has 500 CPU samples and 970
    OS calls; `tokenizer` (pid 200) 20 samples; `api_server` (pid 300) 3 NVTX ranges and 1 sample; `nvidia-smi`
    (pid 500) 30 OS calls; ten `bash` (pids 400…409) 2 samples each; `readlink` (pid 410) 1 sample and 5 OS calls.
    Capture: 500 + 20 + 1 + 20 + 1 = 542 samples (1 % = 5.42), 970 + 30 + 5 = 1,005 OS calls (1 % = 10.05).
    Listed: `nvidia-smi` (30 ≥ 10.05), `tokenizer` (20 ≥ 5.42), `api_server` (NVTX ranges: instrumented on
    purpose); minor: the 11 others (2 or 1 samples < 5.42, 5 calls < 10.05): 21 samples and 5 OS calls."""
    b = TraceBuilder("2022.4", seed=1)
    b.process(1, "engine")
    b.gpu(0)
    _cuda_process(b)
    g1 = b.thread(1, 2, "engine_io")
    for j in range(500):
        b.cpu_sample((300 + j) * US, tid_g=g1, frames=[("f", PY)])
    for j in range(969):
        b.osrt((300 + j) * US, (300 + j) * US + 500, tid_g=g1, name="read")

    def proc(pid: int, name: str, samples: int, calls: int, ranges: int = 0) -> None:
        b.process(pid, name)
        g = b.thread(pid, pid, name)
        for j in range(samples):
            b.cpu_sample((30 + 10 * j) * US, tid_g=g, frames=[("f", PY)])
        for j in range(calls):
            b.osrt((40 + 10 * j) * US, (45 + 10 * j) * US, tid_g=g, name="ioctl")
        for j in range(ranges):
            b.nvtx_push_pop((40 + 10 * j) * US, (45 + 10 * j) * US, "handle_request", tid_g=g)

    proc(200, "tokenizer", 20, 0)
    proc(300, "api_server", 1, 0, ranges=3)
    proc(500, "nvidia-smi", 0, 30)
    for i in range(10):
        proc(400 + i, "bash", 2, 0)
    proc(410, "readlink", 1, 5)
    p = tmp_path / "t.sqlite"
    b.write(str(p))
    rep = analyze_path(str(p), Options())
    t = rep.to_dict()["trace"]
    assert [(r["pid"], r["name"]) for r in t["other_processes"]] == [(500, "nvidia-smi"), (200, "tokenizer"),
                                                                     (300, "api_server")]
    assert t["minor_processes"] == {"processes": 11, "cpu_samples": 21, "os_runtime_calls": 5}
    line = next(x for x in render_markdown(rep).splitlines() if x.startswith("- Other processes"))
    assert line == ("- Other processes with recorded activity (no CUDA calls): pid 500 `nvidia-smi` (30 OS-runtime "
                    "calls); pid 200 `tokenizer` (20 CPU samples); pid 300 `api_server` (3 NVTX ranges, 1 CPU "
                    "sample); and 11 more processes with 21 CPU samples and 5 OS-runtime calls in all, each under 1 % "
                    "of the capture's CPU samples and of its OS-runtime calls.")


def test_only_minor_processes_one_phrase_of_the_kinds_the_capture_has(tmp_path: Path) -> None:
    """No OS-runtime trace, a CUDA process with 300 samples and 3 `bash` pids of 2 samples each (2 / 306 < 1 %):
    no list, the phrase names CPU samples only (the capture has no OS call to be a share of)."""
    b = TraceBuilder("2024.2", seed=1)
    b.process(1, "engine")
    b.gpu(0)
    g = b.thread(1, 1, "engine")
    b.launch(10 * US, 15 * US, 20 * US, 120 * US, pid=1, tid=1, device=0, name="k")
    for j in range(300):
        b.cpu_sample((200 + j) * US, tid_g=g, frames=[("f", PY)])
    for i in range(3):
        b.process(400 + i, "bash")
        gb = b.thread(400 + i, 400 + i, "bash")
        for j in range(2):
            b.cpu_sample((30 + 10 * j) * US, tid_g=gb, frames=[("f", PY)])
    p = tmp_path / "t.sqlite"
    b.write(str(p))
    rep = analyze_path(str(p), Options())
    assert rep.trace.other_processes is None and "other_processes" not in rep.to_dict()["trace"]
    line = next(x for x in render_markdown(rep).splitlines() if x.startswith("- Other processes"))
    assert line == ("- Other processes with recorded activity (no CUDA calls): 3 processes with 6 CPU samples in all, "
                    "each under 1 % of the capture's CPU samples.")
