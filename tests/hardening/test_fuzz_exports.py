"""Fuzz: damaged copies of real and synthetic exports — dropped tables/columns, NULLs, wrong types, extreme
and impossible values, hostile names, views, truncation (``fuzz_cases.py``) — for a bounded, deterministic set of
cases. Every case must: exit 0 or 2 (never 1, never a traceback), leave the input byte-identical, and leave the output
either complete (report.md/json/html + tables/, report.json valid JSON) or absent."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from conftest import built_scenario, real_trace
from fuzz_cases import MUTATIONS, mutate, truncate

from nsys_llm_explainer.cli import main

pytestmark = pytest.mark.slow
SEEDS = tuple(range(1, 9))
REAL = ("07_nsysai_mock_rtx3080", "12_gartangh_keras_gtx1650")   # small real exports (2024.x and 2021.x layouts)


@pytest.fixture(scope="module")
def bases(tmp_path_factory):
    d = tmp_path_factory.mktemp("fuzz_bases")
    out = {}
    for sc in ("demo", "cuda_graph_node"):
        p = d / f"{sc}.sqlite"
        built_scenario(sc, str(p))
        out[sc] = p
    for name in REAL:
        p = real_trace(name)
        assert p.is_file(), f"real trace missing: {p}"
        out[name] = p
    return out


CASES = [(b, m, s) for b in ("demo", "cuda_graph_node") + REAL for m in MUTATIONS
         for s in SEEDS[:3 if b in REAL else 8]]


def _digest(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def _run(trace: Path, out: Path, capsys, timeline_events: int = 50_000) -> tuple:
    """One run; ``timeline_events``: the timeline file's bound (the default writes a small trace's every row: over
    half of each run's time, so most cases write a smaller file — its span, idle slices and rows still fuzzed)."""
    before = _digest(trace)
    rc = main([str(trace), "-o", str(out), "--quiet", "--timeline-events", str(timeline_events)])
    cap = capsys.readouterr()
    assert _digest(trace) == before, "the input was modified"
    assert "Traceback" not in cap.err and "internal error" not in cap.err, cap.err
    assert rc in (0, 2), f"exit {rc}: {cap.err}"
    if rc == 0:
        for f in ("report.md", "report.json", "report.html", "timeline.pftrace"):
            assert (out / f).is_file(), f"incomplete output: {f} missing"
        assert (out / "tables").is_dir()
        json.loads((out / "report.json").read_text(encoding="utf-8"))
    else:
        assert not out.exists(), "a failed run left an output directory"
        lines = [ln for ln in cap.err.splitlines() if ln.strip()]
        assert len(lines) == 1, cap.err
    return rc, cap.err


@pytest.mark.parametrize("base,mutation,seed", CASES, ids=[f"{b}-{m}-{s}" for b, m, s in CASES])
def test_mutated_export(bases, tmp_path, capsys, base, mutation, seed):
    trace = tmp_path / "t.sqlite"
    mutate(bases[base], trace, mutation, seed)
    _run(trace, tmp_path / "out", capsys, 50_000 if seed == SEEDS[0] else 1_000)


@pytest.mark.parametrize("base", ["demo", *REAL])
@pytest.mark.parametrize("seed", SEEDS[:3])
def test_truncated_export(bases, tmp_path, capsys, base, seed):
    trace = tmp_path / "t.sqlite"
    truncate(bases[base], trace, seed)
    _run(trace, tmp_path / "out", capsys)
