"""A real serving trace without NVTX or marker kernels (trace 10): its window repeats one request although no step is
found, and leaves out the cuDNN benchmark pass. Each truth is read from the trace with plain read-only SQL (worked out
in the docstrings); a missing trace directory fails the test (``raises=AssertionError`` keeps a missing file from
passing as the expected failure)."""

from __future__ import annotations

import pytest
from conftest import real_report, real_trace, require_traces

pytestmark = pytest.mark.slow   # real traces through the whole pipeline

TRACE10 = "10_abacus_dnn_serving_titanrtx_r1"
KERNELS = "CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.shortName"


def _report(name: str):
    require_traces()
    return real_report(real_trace(name))


def _sql(name: str, q: str) -> list[tuple]:
    import sqlite3
    with sqlite3.connect(f"file:{real_trace(name)}?mode=ro", uri=True) as c:
        return c.execute(q).fetchall()


def test_trace10_window_does_not_claim_to_hold_no_repeated_steps():
    """Trace 10 (PyTorch FP16 CNN serving, TITAN RTX): no NVTX, no marker kernel, so no step is *found*; but the
    window (8,739.387 -> 10,613.646 ms abs) repeats one request: from 300 ms in, the 57 `gemv2T_kernel_val` kernels
    are 56 x exactly 385 kernels apart and the 56 kernel-name sequences between them are identical (one distinct
    sequence), period p50 26.631 ms (SQL below). The report said the window "holds no repeated steps: it may be a
    single pass" and "no repeated steps in it"; true is that none were found."""
    from nsys_llm_explainer.render import render_markdown

    rows = _sql(TRACE10, f"SELECT k.start, s.value FROM {KERNELS} WHERE k.start >= 9039386788 "
                         "AND k.start < 10613646250 ORDER BY k.start")
    at = [i for i, (_, n) in enumerate(rows) if n.startswith("gemv2T")]
    seqs = {tuple(n for _, n in rows[a:b]) for a, b in zip(at, at[1:])}
    assert (len(at), len(seqs), {b - a for a, b in zip(at, at[1:])}) == (57, 1, {385})
    rep = _report(TRACE10)
    (f,) = [f for f in rep.findings if f.id == "capture_window"]
    assert "holds no repeated steps" not in f.evidence[0]
    assert "in which no repeated steps were found: it may be a single pass, or steps nothing marks" in f.evidence[0]
    line = next(x for x in render_markdown(rep).splitlines() if x.startswith("**Window:**"))
    assert line.startswith("**Window:** the auto-detected window, no repeated steps found in it (not shown to be a "
                           "steady state)")


def test_trace10_window_leaves_out_the_cudnn_benchmark_pass():
    """SOURCE.md: the first 9 s is set-up (context, weights, cuDNN benchmark), steady part 9.0-10.56 s. SQL: the 352
    FFT / Winograd / gcgemm / flip_filter kernels (cudnn.benchmark trying algorithms; none after) end at 8,960.228 ms
    abs, 220.841 ms into the window, which starts at the first kernel (8,739.387 ms) and so holds the search and its
    cudaMalloc / cudaFree gaps (69 ms charged to `alloc`)."""
    ((end, n),) = _sql(TRACE10, f"SELECT max(k.end), count(*) FROM {KERNELS} WHERE s.value LIKE '%fft%' OR "
                                "s.value LIKE '%inograd%' OR s.value LIKE '%gcgemm%' OR s.value LIKE 'flip_filter%'")
    assert (end, n) == (8_960_228_240, 352)
    rep = _report(TRACE10)
    assert rep.window.start_ns >= end, rep.window.start_ns
