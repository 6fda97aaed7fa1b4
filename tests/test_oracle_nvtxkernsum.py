"""NVTX → kernel attribution equals NVIDIA's `nsys stats -r nvtxkernsum` (2022.4.2) on every real trace.

The oracle CSVs in tests/data were produced by scripts/make_nvtxkernsum_oracle.py (nsys output aggregated per
range, style and PID). nvtxkernsum counts a kernel once per distinct kernel (``Kern Inst``) but sums its
duration once per enclosing range *instance*, so with nested ranges of the same name its total exceeds ours
(we count each kernel once per distinct enclosing name); counts must match exactly, totals match exactly
when there is no same-name nesting and no duplicated launch rows, and are never below ours. (Trace 08
records every CUDA call twice — eventClass 0 and a wrapper eventClass 67 with the same correlation id — so
nvtxkernsum's join doubles each kernel's time there; we link each kernel to one call.)
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from conftest import SHARED_TRACES

from nsys_llm_explainer.model.build import corr_key
from nsys_llm_explainer.pipeline import analyze_path
from nsys_llm_explainer.serialize import report_dict as build_json

DATA = Path(__file__).parent / "data" / "nsys2022.4_nvtxkernsum"
CASES = sorted(DATA.glob("*.csv"))
pytestmark = pytest.mark.skipif(not SHARED_TRACES.exists(), reason="../shared/traces not available")


@pytest.mark.parametrize("oracle", CASES, ids=lambda p: p.stem)
def test_attribution_matches_nvtxkernsum(oracle):
    trace = SHARED_TRACES / oracle.stem / "trace.sqlite"
    rep = analyze_path(str(trace))
    j = build_json(rep)
    ours = {(r["pid"], r["name"]): r for r in j["nvtx"]["attribution"]["by_pid"]}
    with open(oracle, newline="") as fh:
        theirs = [r for r in csv.DictReader(fh) if r["style"] == "PushPop"]
    tree = rep.nvtx.tree
    same_name_nesting = False
    if tree is not None:
        for anc in tree.ancestors_rounds():
            ok = anc >= 0
            if (ok & (tree.name_idx[anc.clip(0)] == tree.name_idx)).any():
                same_name_nesting = True
                break
    api = rep.model.api
    keys = corr_key(api.pid, api.corr) if api is not None else []
    duplicated_launch_rows = bool(len(keys) and (len(set(keys.tolist())) < len(keys)))
    assert len(theirs) == len(ours)
    for r in theirs:
        o = ours[(int(r["pid"]), r["range"])]
        assert o["kernel_count"] == int(r["kern_inst"])
        assert o["inclusive_ns"] <= int(r["total_ns"])
        if not same_name_nesting and not duplicated_launch_rows:
            assert o["inclusive_ns"] == int(r["total_ns"])
