"""Follow the wait into other processes (a decode loop whose detokenizer runs in another process): the CPU samples of
every process taken inside the launching thread's waits are counted per process; a process with ≥ 10 % of those samples
(every thread's but the launching thread's) and ≥ 10 of them is named in the `osrt` finding's evidence and
`wait.other_process` replaces `wait.unseen` ("lack of load"). Each trace is built by hand; the truth is worked out in
the docstrings. Rule: docs/FINDINGS.md, "Follow the wait"."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict

import jsonschema
from claims_support import finding_of
from synth import TraceBuilder

from nsys_llm_explainer.findings.advice import ADVICE
from nsys_llm_explainer.options import options_from_kwargs
from nsys_llm_explainer.pipeline import analyze_path
from nsys_llm_explainer.render import render_all

US = 1_000
MS = 1_000_000
PID = 100
T0 = 5 * MS
PY = "/usr/lib/libpython3.10.so"
SCHEMA = Path(__file__).resolve().parents[2] / "src" / "nsys_llm_explainer" / "report_schema.json"
HOSTILE = "detok`<script>alert(1)</script>**|\x1b[31m"


def _trace(*, other: int = 10, other_waits: int = 20, own: int = 0, samples: bool = True,
           name: str = "detokenizer") -> TraceBuilder:
    """Engine thread 1 of pid 100 (`EngineCore`), 20 steps, t = T0 + 2 i ms: 10 kernels [t + 20, t + 820) µs
    launched at t + 10 k µs; a 64 B readback (`cudaMemcpyAsync` [t + 100, t + 110) µs) and
    `cudaStreamSynchronize` [t + 110, t + 852) µs; then it waits in `pthread_cond_wait` [t + 860, t + 1900) µs.
    Process 200 (``name``), thread 201, is sampled ``other`` times in each of the first ``other_waits`` waits at
    t + 900 + 100 j µs; thread 2 (`tokenizer`) of pid 100 ``own`` times at t + 905 + 100 j µs. ``samples`` False:
    no CPU sample at all. The window is [T0, T0 + 38.852 ms): the 19 waits of steps 0 … 18 lie in it."""
    b = TraceBuilder()
    b.process(PID)
    g = b.thread(PID, 1, "EngineCore")
    gt = b.thread(PID, 2, "tokenizer")
    b.process(200, name)
    gd = b.thread(200, 201, "detok")
    for i in range(20):
        t = T0 + i * 2 * MS
        for k in range(10):
            b.launch(t + 10 * k * US, t + 10 * k * US + 5 * US, t + 20 * US + 80 * k * US,
                     t + 100 * US + 80 * k * US, pid=PID, tid=1, name=f"layer_gemm_{k % 3}")
        c = b.runtime(t + 100 * US, t + 110 * US, tid_g=g, name="cudaMemcpyAsync_v3020")
        b.memcpy(t + 820 * US, t + 822 * US, pid=PID, bytes=64, copy_kind=2, src_kind=2, dst_kind=1, corr=c)
        c = b.runtime(t + 110 * US, t + 852 * US, tid_g=g, name="cudaStreamSynchronize_v3020")
        b.sync(t + 112 * US, t + 851 * US, pid=PID, corr=c)
        b.osrt(t + 860 * US, t + 1900 * US, tid_g=g, name="pthread_cond_wait")
        if not samples:
            continue
        for j in range(other if i < other_waits else 0):
            b.cpu_sample(t + (900 + 100 * j) * US, tid_g=gd, frames=[("detokenize", PY), ("run", PY)])
        for j in range(own):
            b.cpu_sample(t + (905 + 100 * j) * US, tid_g=gt, frames=[("encode", PY), ("run", PY)])
    return b


def _report(b: TraceBuilder, tmp_path: Path) -> Dict[str, Any]:
    p = tmp_path / "t.sqlite"
    b.write(str(p), overwrite=True)
    rep = analyze_path(str(p), options_from_kwargs())
    j = rep.to_dict()
    jsonschema.validate(json.loads(json.dumps(j)), json.loads(SCHEMA.read_text()))
    render_all(rep, tmp_path / "out")
    return j


def test_process_sampled_in_every_wait_is_named_and_replaces_the_load_advice(tmp_path: Path) -> None:
    """10 samples of pid 200 in each of the 19 waits of the window: 190, none of pid 100's other threads, so 190 of
    the 190 samples inside the waits (100 %) ≥ 10 % and ≥ 10: the evidence names `detokenizer` (pid 200) and the
    advice is `wait.other_process` alone (no other thread of pid 100 works or is sampled: today it was
    `wait.unseen`, "the GPU idles for lack of load")."""
    j = _report(_trace(), tmp_path)
    (w,) = j["waits"]["launchers"]
    assert (w["samples_in_waits"], w["process_samples"]) == (0, 190)
    assert w["processes"] == [{"pid": 200, "process": "detokenizer", "sampled": 190, "pct_of_samples": 100.0}]
    f = finding_of(j, "idle_osrt")
    assert ("CPU samples of other processes taken during these waits: `detokenizer` (pid 200) sampled running in "
            "190 of the 190 samples taken inside them (every thread's but the launching thread's).") in f["evidence"]
    assert f["recommendation"] == [ADVICE["wait.other_process"].text]
    assert "`detokenizer` (pid 200)" in (tmp_path / "out" / "report.md").read_text()


def test_process_under_ten_percent_keeps_todays_advice(tmp_path: Path) -> None:
    """pid 100's `tokenizer` thread sampled 10 times per wait (190) and pid 200 once per wait (19): pid 200 holds
    19 / (190 + 19) = 9.09 % < 10 %, so it is not named; the evidence counts it ("19 samples of 1 process, none
    with 10 % of the 209 …") and the advice stays today's: `wait.cpu` (the sampled `tokenizer` thread of its
    process, 190 of the 190 samples of the process's other threads)."""
    j = _report(_trace(other=1, own=10), tmp_path)
    (w,) = j["waits"]["launchers"]
    assert (w["samples_in_waits"], w["process_samples"]) == (190, 19)
    assert w["processes"] == [{"pid": 200, "process": "detokenizer", "sampled": 19, "pct_of_samples": 1900 / 209}]
    f = finding_of(j, "idle_osrt")
    assert ("CPU samples of other processes taken during these waits: 19 samples of 1 process, none with 10 % of "
            "the 209 samples taken inside them and 10 samples.") in f["evidence"]
    assert f["recommendation"] == [ADVICE["wait.cpu"].text]


def test_few_samples_of_another_process_keep_the_load_advice(tmp_path: Path) -> None:
    """pid 200 sampled once in each of the first 9 waits: 9 samples, 100 % of those inside the waits but < 10: a
    few stray wake-ups, not a process running through the waits; nothing of pid 100 works or is sampled, so the
    advice stays `wait.unseen`."""
    j = _report(_trace(other=1, other_waits=9), tmp_path)
    (w,) = j["waits"]["launchers"]
    assert (w["samples_in_waits"], w["process_samples"]) == (0, 9)
    f = finding_of(j, "idle_osrt")
    assert f["recommendation"] == [ADVICE["wait.unseen"].text]
    assert not any("(pid 200)" in e for e in f["evidence"])


def test_without_samples_the_advice_is_unchanged(tmp_path: Path) -> None:
    """No CPU sample in the trace: `samples_in_waits`, `process_samples` and `processes` are absent (not 0: the
    trace cannot tell), no line on other processes, the advice stays `wait.unseen`."""
    j = _report(_trace(samples=False), tmp_path)
    (w,) = j["waits"]["launchers"]
    assert not {"samples_in_waits", "process_samples", "processes"} & set(w)
    f = finding_of(j, "idle_osrt")
    assert f["recommendation"] == [ADVICE["wait.unseen"].text]
    assert not any("other processes" in e for e in f["evidence"])


def test_hostile_process_name_is_inert(tmp_path: Path) -> None:
    """The sampled process named with a backtick, HTML, Markdown and a terminal escape: report.json keeps it
    exactly; report.md shows it as an HTML-escaped `<code>` span (the backtick as `&#96;`, `<` as `&lt;`, Markdown
    characters backslashed) with the escape made visible (`\\x1b`); report.html holds no raw `<script>` and no
    raw ESC."""
    j = _report(_trace(name=HOSTILE), tmp_path)
    assert j["waits"]["launchers"][0]["processes"][0]["process"] == HOSTILE
    md = (tmp_path / "out" / "report.md").read_text()
    page = (tmp_path / "out" / "report.html").read_text()
    assert "\x1b" not in md and "\x1b" not in page
    assert "<script>alert" not in page
    line = next(x for x in md.splitlines() if "(pid 200) sampled running" in x)
    assert ("<code>detok&#96;&lt;script&gt;alert(1)&lt;/script&gt;\\*\\*\\|\\\\x1b\\[31m</code> (pid 200) sampled "
            "running in 190 of the 190") in line, line


def test_a_process_without_a_name_is_not_called_process(tmp_path: Path) -> None:
    """As the first test, but pid 200 has no name in PROCESSES and no main thread (its one thread is tid 201), so the
    trace gives it no name: 190 of the 190 samples inside the waits are its own. The evidence wrote it as a code span,
    "`process` (pid 200) sampled running in …", naming it `process` (a name it does not have; one a process may have);
    now by its pid alone, "pid 200 sampled running in …" (as a thread without a name is "tid N")."""
    j = _report(_trace(name=""), tmp_path)
    f = finding_of(j, "idle_osrt")
    assert ("CPU samples of other processes taken during these waits: pid 200 sampled running in "
            "190 of the 190 samples taken inside them (every thread's but the launching thread's).") in f["evidence"]
    assert not any("`process`" in e for e in f["evidence"])
