"""Exports with parts missing: sentences a report made that its trace cannot support because the evidence they need is
not in the export (no links from kernels to launch calls, no CUDA API rows, API names missing from StringIds). Each
trace is built by hand; the truth is worked out in the docstring."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any, Dict

import pytest
from claims_support import report_of as _run
from synth import TraceBuilder

from nsys_llm_explainer.findings.advice import ADVICE
from nsys_llm_explainer.options import options_from_kwargs
from nsys_llm_explainer.pipeline import analyze_path

US = 1_000
MS = 1_000_000
PID = 100


def _ids(rep: Dict[str, Any]) -> list:
    return [f["id"] for f in rep["findings"]]


def _nvtx_loop(b: TraceBuilder, *, linked_steps: int, steps: int = 20) -> None:
    """Thread 1 (`main`) opens the push/pop range `decode_step` [t, t + 900) µs at t = s ms and launches 4 kernels of
    80 µs inside it (call [t + 100k, t + 100k + 10) µs, kernel [t + 100k + 20, t + 100k + 100) µs, k = 0..3). In the
    first ``linked_steps`` steps a kernel carries its call's correlation id; in the others it carries an id no call
    has (an export whose kernels lost their correlation links)."""
    b.process(PID)
    g = b.thread(PID, 1, "main")
    for s in range(steps):
        t = s * MS
        b.nvtx_push_pop(t, t + 900 * US, "decode_step", tid_g=g)
        for k in range(4):
            a = t + k * 100 * US
            c = b.runtime(a, a + 10 * US, tid_g=g)
            b.kernel(a + 20 * US, a + 100 * US, pid=PID, name=f"attn_{k}", corr=c if s < linked_steps else 10_000 + c)


def test_no_coverage_claim_when_no_kernel_is_linked_to_its_launch(tmp_path: Path) -> None:
    """20 steps × 4 kernels × 80 µs = 6.400 ms of kernel time, every launch inside `decode_step` — but no kernel's
    correlation id matches a call, so the export cannot say which range a launch was in. The report said
    "NVTX ranges cover little of the GPU time", "0.0 % of kernel time ... is launched inside an NVTX push/pop range"
    and "Kernels no range covers, by launching thread: ." (an empty list) with advice to move ranges to "the
    launching threads named above": false (every launch is in a range) and resting on links the export lacks. No
    `nvtx_coverage` finding."""
    b = TraceBuilder()
    _nvtx_loop(b, linked_steps=0)
    rep = _run(b, tmp_path)
    assert rep["nvtx"]["attribution"]["linked_kernel_ns"] == 0
    assert "nvtx_coverage" not in _ids(rep), [f["title"] for f in rep["findings"]]


def test_coverage_is_judged_on_the_linked_kernels(tmp_path: Path) -> None:
    """Steps 0–9 linked, 10–19 not: linked kernel time 10 × 4 × 80 µs = 3.200 ms, all of it launched inside
    `decode_step` (100 %); overall push/pop coverage 3.2 / 6.4 = 50 % < the 70 % threshold. The report said "NVTX
    ranges cover little of the GPU time" although every launch whose range can be known is covered: no finding."""
    b = TraceBuilder()
    _nvtx_loop(b, linked_steps=10)
    rep = _run(b, tmp_path)
    att = rep["nvtx"]["attribution"]
    assert (att["linked_kernel_ns"], att["attributed_ns"], att["total_kernel_ns"]) == (3_200 * US, 3_200 * US,
                                                                                         6_400 * US)
    assert "nvtx_coverage" not in _ids(rep)


def test_coverage_evidence_says_how_much_kernel_time_is_unlinked(tmp_path: Path) -> None:
    """Steps 0–9 linked, but only kernel k = 0 of each step is launched inside a range (`decode_step` is cut to
    [t, t + 50) µs): linked 3.200 ms, covered 10 × 80 µs = 0.800 ms (25.0 % of the linked time, 12.5 % of all
    6.400 ms). The finding stands (25 % < 70 %) and says that 50.0 % of kernel time (3.200 ms) is linked to no
    launch call, so whether a range encloses those launches is not known."""
    b = TraceBuilder()
    b.process(PID)
    g = b.thread(PID, 1, "main")
    for s in range(20):
        t = s * MS
        b.nvtx_push_pop(t, t + 50 * US, "decode_step", tid_g=g)
        for k in range(4):
            a = t + k * 100 * US
            c = b.runtime(a, a + 10 * US, tid_g=g)
            b.kernel(a + 20 * US, a + 100 * US, pid=PID, name=f"attn_{k}", corr=c if s < 10 else 10_000 + c)
    rep = _run(b, tmp_path)
    f = next(f for f in rep["findings"] if f["id"] == "nvtx_coverage")
    assert f["evidence"][0] == ("12.5 % of kernel time (800.00 µs of 6.400 ms) is launched inside an NVTX push/pop "
                                "range.")
    assert f["evidence"][1] == ("50.0 % of kernel time (3.200 ms) is not linked to the CUDA call that launched it "
                                "(no API row with its correlation id): whether a range encloses those launches is "
                                "not known; of the linked kernel time 25.0 % is.")


def _launch_loop(b: TraceBuilder, *, linked: bool, runtime: bool = True) -> None:
    """200 kernels of 5 µs, one every 20 µs: call [20i, 20i + 15) µs on thread 1, kernel [20i + 16, 20i + 21) µs.
    ``linked`` False: each kernel carries a correlation id no call has; ``runtime`` False: no CUDA API rows."""
    b.process(PID)
    g = b.thread(PID, 1, "main")
    for i in range(200):
        t = i * 20 * US
        c = b.runtime(t, t + 15 * US, tid_g=g) if runtime else b.next_corr(PID)
        b.kernel(t + 16 * US, t + 21 * US, pid=PID, name="small_elementwise", corr=c if linked else 10_000 + c)


def test_unlinked_kernels_do_not_get_advice_to_trace_cuda(tmp_path: Path) -> None:
    """The export holds 200 CUDA API calls (CUDA was traced) but no kernel links to one: window [0, 4 001) µs (first
    call to last kernel), busy 200 × 5 µs = 1.000 ms, idle 3.001 ms, all of it `unknown`. The report's advice read
    "Capture with `--trace=cuda` so kernels link to the CUDA calls that launched them." — contradicted by
    the trace, which has the calls; the links are what is missing. The finding says so (200 calls, none linked)
    and gives the link advice instead."""
    b = TraceBuilder()
    _launch_loop(b, linked=False)
    rep = _run(b, tmp_path)
    (d,) = rep["idle_causes"]["devices"]
    assert (d["window_ns"], d["idle_ns"], [(c["kind"], c["ns"]) for c in d["causes"]]) == (
        4_001 * US, 3_001 * US, [("unknown", 3_001 * US)])
    f = next(f for f in rep["findings"] if f["id"] == "idle_unknown")
    assert not any("--trace=cuda" in a for a in f["recommendation"]), f["recommendation"]
    assert f["recommendation"] == [ADVICE["unknown.unlinked"].text]
    assert ("The export holds 200 CUDA API calls, but no kernel, copy or memset of device 0 in the window is linked "
            "to one (no call of its process has its correlation id): which thread launched the work, and what it did "
            "in these gaps, is not known.") in f["evidence"]


def test_without_cuda_api_rows_the_advice_is_to_trace_cuda(tmp_path: Path) -> None:
    """Same loop, no CUPTI_ACTIVITY_KIND_RUNTIME rows at all (captured without CUDA API trace): the idle is
    `unknown` and the advice to capture with `--trace=cuda` stands; no line about calls that exist."""
    b = TraceBuilder()
    _launch_loop(b, linked=True, runtime=False)
    rep = _run(b, tmp_path)
    f = next(f for f in rep["findings"] if f["id"] == "idle_unknown")
    assert f["recommendation"] == [ADVICE["unknown.trace_cuda"].text]
    assert not any("CUDA API calls" in e for e in f["evidence"])


def test_copies_are_not_said_to_keep_kernels_waiting_without_launch_calls(tmp_path: Path) -> None:
    """vLLM-style async output, captured without CUDA API trace: per 1 ms step t = i ms (20 steps) a kernel runs
    [t + 50, t + 550) µs and a 4 KiB Device-to-Host copy [t + 550, t + 850) µs on the same stream; the next kernel
    starts at t + 1 050 µs (by construction it was launched at t + 1 000 µs, after the copy: nothing waited on it).
    No CUPTI_ACTIVITY_KIND_RUNTIME table: whether a kernel was launched during the copies is not in the export.
    The report said "Copies keep the kernels waiting" and "Of the 6.000 ms of copy time with the GPU idle on
    device 0, 6.000 ms (100.0 %) had a kernel waiting on the copies (the next kernel launched, or the launching
    thread blocked ...)": a claim whose evidence (the launch calls) is missing. It must not say they waited."""
    b = TraceBuilder()
    b.process(PID)
    for i in range(20):
        t = i * MS
        b.kernel(t + 50 * US, t + 550 * US, pid=PID, name="decode_step")
        b.memcpy(t + 550 * US, t + 850 * US, pid=PID, bytes=4096, copy_kind=2, src_kind=2, dst_kind=1)
    rep = _run(b, tmp_path)
    f = next(f for f in rep["findings"] if f["id"] == "idle_copy")
    assert "keep the kernels waiting" not in f["title"], f["title"]
    assert not any("had a kernel waiting on the copies" in e for e in f["evidence"]), f["evidence"]


def test_a_launch_call_with_a_missing_name_is_still_a_launch(tmp_path: Path) -> None:
    """The launch-bound loop of :func:`_launch_loop` (200 calls of 15 µs, each launching one 5 µs kernel 1 µs
    later), with the StringIds row of the call's name deleted. Each call is linked to the kernel it launched, so it
    is a launch call whatever its name: the idle is `launch` (each kernel ends 1 µs into the next call: 199 × 14 µs =
    2.786 ms), `module_load` (the first call, 15 µs) and `queued` (200 × 1 µs), and the report is launch-bound
    (the docstring said 199 × 15 µs and 16 µs: the 1 µs before each kernel is `queued`). It read "The host is
    inside `[missing StringId 1]` while the GPU idles" with "move it out of the loop or make it asynchronous" —
    advice for a non-launch call, which this is not. A warning counts the missing API name."""
    b = TraceBuilder()
    _launch_loop(b, linked=True)
    p = tmp_path / "t.sqlite"
    b.write(str(p), overwrite=True)
    con = sqlite3.connect(str(p))
    con.execute("DELETE FROM StringIds WHERE id = (SELECT nameId FROM CUPTI_ACTIVITY_KIND_RUNTIME LIMIT 1)")
    con.commit()
    con.close()
    rep = analyze_path(str(p), options_from_kwargs()).to_dict()
    assert "idle_other_api" not in _ids(rep)
    assert "launch_overhead" in _ids(rep)
    (d,) = rep["idle_causes"]["devices"]
    kinds = {c["kind"]: c["ns"] for c in d["causes"]}
    assert kinds == {"launch": 2_786 * US, "module_load": 15 * US, "queued": 200 * US}
    assert ("1 CUDA API name id(s) missing from StringIds; shown as [missing StringId N] (a call a kernel links is "
            "still a launch call: docs/MODEL.md).") in rep["warnings"]


def _five_calls(b: TraceBuilder, steps: int = 10) -> None:
    """Per 1 ms step t (thread 1): a launch call [t, t + 15) µs of a 5 µs kernel [t + 16, t + 21); a stream sync
    [t + 30, t + 230) with its synchronization row (type 3); a synchronous H2D copy call [t + 300, t + 400) whose
    copy runs [t + 310, t + 390); an unlinked call [t + 500, t + 600) (cudaFuncGetAttributes); an async copy call
    [t + 700, t + 705) whose copy runs [t + 710, t + 790)."""
    b.process(PID)
    g = b.thread(PID, 1, "main")
    for i in range(steps):
        t = i * MS
        c = b.runtime(t, t + 15 * US, tid_g=g, name="cudaLaunchKernel_v7000")
        b.kernel(t + 16 * US, t + 21 * US, pid=PID, name="k", corr=c)
        c = b.runtime(t + 30 * US, t + 230 * US, tid_g=g, name="cudaStreamSynchronize_v3020")
        b.sync(t + 30 * US, t + 230 * US, pid=PID, sync_type=3, corr=c)
        c = b.runtime(t + 300 * US, t + 400 * US, tid_g=g, name="cudaMemcpy_v3020")
        b.memcpy(t + 310 * US, t + 390 * US, pid=PID, bytes=1 << 20, copy_kind=1, src_kind=1, dst_kind=2, corr=c)
        b.runtime(t + 500 * US, t + 600 * US, tid_g=g, name="cudaFuncGetAttributes_v3020")
        c = b.runtime(t + 700 * US, t + 705 * US, tid_g=g, name="cudaMemcpyAsync_v3020")
        b.memcpy(t + 710 * US, t + 790 * US, pid=PID, bytes=1 << 20, copy_kind=1, src_kind=1, dst_kind=2, corr=c)


@pytest.mark.parametrize("names", ["kept", "deleted"])
def test_a_missing_call_name_is_told_by_what_links_the_call(tmp_path: Path, names: str) -> None:
    """:func:`_five_calls`, 10 steps, with the call names in StringIds or all five deleted: the idle causes are the
    same either way. Window [0, 9 790) µs, busy 10 × 5 µs, idle 9.740 ms. Per step: launch 15 µs (the first step's
    `module_load`: 9 × 15 = 135 µs), queued 1 µs (10), sync 200 µs (2.000 ms: the synchronization row links the
    call), sync_memcpy 10 + 10 µs around the copy (200 µs: the call returned after its copy ended), copy 80 + 80 µs
    (1.600 ms), other_api 100 µs of the unlinked call (1.000 ms — nothing links it: the old reading stays) and 5 µs
    of the async copy call (50 µs: it returned before its copy ended, as a named cudaMemcpyAsync is `other_api`),
    host_cpu 9 + 70 + 100 + 100 + 5 + 210 µs per step but the last step's 210 (4.730 ms)."""
    b = TraceBuilder()
    _five_calls(b)
    p = tmp_path / "t.sqlite"
    b.write(str(p), overwrite=True)
    if names == "deleted":
        con = sqlite3.connect(str(p))
        con.execute("DELETE FROM StringIds WHERE id IN (SELECT nameId FROM CUPTI_ACTIVITY_KIND_RUNTIME)")
        con.commit()
        con.close()
    rep = analyze_path(str(p), options_from_kwargs()).to_dict()
    (d,) = rep["idle_causes"]["devices"]
    assert (d["window_ns"], d["idle_ns"]) == (9_790 * US, 9_740 * US)
    assert sorted((c["kind"], c["ns"]) for c in d["causes"]) == sorted([
        ("host_cpu", 4_730 * US), ("sync", 2_000 * US), ("copy", 1_600 * US), ("other_api", 1_000 * US),
        ("sync_memcpy", 200 * US), ("launch", 135 * US), ("other_api", 50 * US), ("module_load", 15 * US),
        ("queued", 10 * US)])
    missing = [w for w in rep["warnings"] if "CUDA API name id(s) missing" in w]
    assert missing == ([] if names == "kept" else [
        "5 CUDA API name id(s) missing from StringIds; shown as [missing StringId N] (a call a kernel links is "
        "still a launch call: docs/MODEL.md)."])


def test_an_unknown_call_name_that_launches_kernels_is_a_launch_call(tmp_path: Path) -> None:
    """The launch loop of :func:`_launch_loop` with its calls named `cudaLaunchKernelExD_v13000` (a name the lists do
    not know, as a future CUDA's might be): each call is linked to the kernel it launched, so the idle is `launch`
    (199 × 14 µs = 2.786 ms), `module_load` (15 µs) and `queued` (200 µs) as with `cudaLaunchKernel`, not
    `other_api`; the name is in StringIds, so no warning."""
    b = TraceBuilder()
    b.process(PID)
    g = b.thread(PID, 1, "main")
    for i in range(200):
        t = i * 20 * US
        c = b.runtime(t, t + 15 * US, tid_g=g, name="cudaLaunchKernelExD_v13000")
        b.kernel(t + 16 * US, t + 21 * US, pid=PID, name="small_elementwise", corr=c)
    rep = _run(b, tmp_path)
    (d,) = rep["idle_causes"]["devices"]
    kinds = {c["kind"]: c["ns"] for c in d["causes"]}
    assert kinds == {"launch": 2_786 * US, "module_load": 15 * US, "queued": 200 * US}
    assert "launch_overhead" in _ids(rep) and not any("missing from StringIds" in w for w in rep["warnings"])
