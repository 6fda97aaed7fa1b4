"""The `unknown` idle finding when the kernel table has no ``globalPid``: the cause it names and the advice it gives
depend on what the trace shows (docs/FINDINGS.md, "unknown_host"; the fact ``pidless_api_processes``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict

import test_claims_generations_and_missing_columns as missing_columns
import test_claims_missing_export_parts as missing_parts
from claims_support import finding_of
from synth import TraceBuilder

from nsys_llm_explainer.findings.advice import ADVICE
from nsys_llm_explainer.options import options_from_kwargs
from nsys_llm_explainer.pipeline import analyze_path

OLD = ("The export holds 200 CUDA API calls, but no kernel, copy or memset of device 0 in the window is linked to one "
       "(no call of its process has its correlation id): which thread launched the work, and what it did in these "
       "gaps, is not known.")


def _run(b: TraceBuilder, tmp_path: Path) -> Dict[str, Any]:
    p = tmp_path / "t.sqlite"
    b.write(str(p), overwrite=True)
    return analyze_path(str(p), options_from_kwargs()).to_dict()


def test_two_processes_sharing_correlation_ids_without_global_pid_name_that_cause(tmp_path: Path) -> None:
    """(test_claims_generations_and_missing_columns._two_ranks_no_kernel_gpid) 2 processes, 20 calls each with
    correlation ids 1 … 20, kernel table without globalPid: no kernel links (every id is used by both processes), fact =
    2 processes; the finding names the missing globalPid and advises keeping it, not "writes the kernels'
    `correlationId`"."""
    rep = _run(missing_columns._two_ranks_no_kernel_gpid(), tmp_path)
    assert rep["facts"]["pidless_api_processes"] == 2
    f = finding_of(rep, "idle_unknown")
    assert ("The export holds 40 CUDA API calls, but no kernel, copy or memset of device 1 in the window is linked to "
            "one: the kernel rows carry no globalPid (their process is not recorded) and the 2 processes with CUDA API "
            "calls used the same correlation ids, so a kernel's correlation id does not say whose call launched it "
            "(not guessed): which thread launched the work, and what it did in these gaps, is not known.") in f[
        "evidence"]
    assert f["recommendation"] == [ADVICE["unknown.no_global_pid"].text]


def test_one_process_without_global_pid_keeps_the_correlation_id_words(tmp_path: Path) -> None:
    """Negative: the kernel table has no globalPid but one process (its kernels take its pid) and the kernels carry
    ids no call has (test_claims_missing_export_parts._launch_loop, unlinked): no fact, today's evidence and
    `unknown.unlinked`."""
    b = TraceBuilder("2022.4", kernel_has_global_pid=False)
    missing_parts._launch_loop(b, linked=False)
    rep = _run(b, tmp_path)
    assert "pidless_api_processes" not in rep["facts"]
    f = finding_of(rep, "idle_unknown")
    assert OLD in f["evidence"] and f["recommendation"] == [ADVICE["unknown.unlinked"].text]


def test_ids_no_other_process_uses_keep_the_correlation_id_words(tmp_path: Path) -> None:
    """Negative: no globalPid and two processes with calls, but the unlinked kernels (all of pid 100's loop) carry
    ids 10,001 … 10,200 that no call of either process has: a shared id is not the cause, so no fact and today's
    words (pid 200 makes one call, id 1, at 5 ms, after the loop)."""
    b = TraceBuilder("2022.4", kernel_has_global_pid=False)
    missing_parts._launch_loop(b, linked=False)
    b.process(200)
    b.runtime(5_000_000, 5_010_000, tid_g=b.thread(200, 2, "other"))
    rep = _run(b, tmp_path)
    assert "pidless_api_processes" not in rep["facts"]
    f = finding_of(rep, "idle_unknown")
    assert f["recommendation"] == [ADVICE["unknown.unlinked"].text]
    assert any(e.endswith("(no call of its process has its correlation id): which thread launched the work, and what "
                          "it did in these gaps, is not known.") for e in f["evidence"]), f["evidence"]
