"""Few, long steps, compared: two captures of 3 training iterations. The Traces table's "steps in window" column showed
the comparison's units of work (`units`: the step periods of the period span, docs/COMPARE.md "Over whole step
periods"), 2.0, while each window holds 3 whole steps. The truth is worked out in the docstring."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from synth import TraceBuilder

import nsys_llm_explainer as nle
from nsys_llm_explainer.comparison.document import compare_document
from nsys_llm_explainer.render.markdown import write_markdown

US = 1_000
MS = 1_000_000
PID = 100


def _train(path: Path, kernel_ms: int) -> str:
    """3 iterations (NVTX `train_step`) of 50 back-to-back kernels of ``kernel_ms`` ms launched from T = 10 ms
    (10 µs calls), a ``cudaStreamSynchronize`` to the last kernel's end, then 200 ms of host time."""
    b = TraceBuilder()
    b.process(PID)
    g = b.thread(PID, 1, "main")
    t = 10 * MS
    for _ in range(3):
        a, k = t, t + 15 * US
        for _ in range(50):
            k = max(k, a + 15 * US)
            b.launch(a, a + 10 * US, k, k + kernel_ms * MS, pid=PID, tid=1, name="gemm_step")
            k += kernel_ms * MS
            a += 10 * US
        b.runtime(a, k + 5 * US, tid_g=g, name="cudaStreamSynchronize_v3020")
        b.nvtx_push_pop(t, k + 10 * US, "train_step", tid_g=g)
        t = k + 10 * US + 200 * MS
    b.write(str(path))
    return str(path)


def test_traces_table_does_not_call_step_periods_steps_in_window(tmp_path: Path) -> None:
    """Each trace: 3 steps of 50 × 100 ms (+ 110 µs of launch lead and sync) = 5,000.025 ms, 200 ms apart: window
    = whole trace, the 3 steps all inside it (`StepResult.inside` = 3.0); the period span (first step start → last
    step start) holds 2 periods (`units` 2.0, the headline's "2 step periods", too short to compare). The table row
    read "| 2.0 |" under "steps in window": a window of 3 steps said to hold 2; the column is now headed with the
    metric's count word, "step periods in span"."""
    res = nle.compare([_train(tmp_path / "a.sqlite", 100), _train(tmp_path / "b.sqlite", 110)], labels=["A", "B"])
    assert [t.units for t in res.traces] == [2.0, 2.0]
    md = write_markdown(compare_document(res))
    lines = md.splitlines()
    h = next(i for i, line in enumerate(lines) if line.startswith("| trace | GPUs"))
    cols = [c.strip() for c in lines[h].strip("|").split("|")]
    row = next(line for line in lines[h:] if line.startswith("| `A`"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    got = dict(zip(cols, cells))
    assert "steps in window" not in got, got
    assert got["step periods in span"] == "2", got     # a whole count as an integer, 2.0 in compare.json


def _traces_row(res: object, label: str) -> dict:
    md = write_markdown(compare_document(res))
    lines = md.splitlines()
    h = next(i for i, line in enumerate(lines) if line.startswith("| trace | GPUs"))
    cols = [c.strip() for c in lines[h].strip("|").split("|")]
    row = next(line for line in lines[h:] if line.startswith(f"| `{label}`"))
    return dict(zip(cols, [c.strip() for c in row.strip("|").split("|")]))


def test_traces_table_units_whole_as_integer_fraction_with_decimals(tmp_path: Path) -> None:
    """The Traces table printed whole counts as decimals ("step periods in span 119.0", "iterations in
    window 250.0"). The units stay floats in compare.json (2.0 here, as above); the table writes a whole count as
    an integer ("2") and a fraction with its decimals: an iteration count of 5 anchor instances over a repeat of 2
    is 2.5 iterations, written "2.500"; 1,250 periods are "1,250"."""
    res = nle.compare([_train(tmp_path / "a.sqlite", 100), _train(tmp_path / "b.sqlite", 110)], labels=["A", "B"])
    assert [t.units for t in res.traces] == [2.0, 2.0]
    assert _traces_row(res, "A")["step periods in span"] == "2"
    a, b = res.traces
    frac = dataclasses.replace(res, traces=(dataclasses.replace(a, units=2.5), dataclasses.replace(b, units=1250.0)))
    assert _traces_row(frac, "A")["step periods in span"] == "2.500"
    assert _traces_row(frac, "B")["step periods in span"] == "1,250"
