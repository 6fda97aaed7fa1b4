"""clip_model against a per-row reference written from its docstring (keep rows intersecting the window, clip them,
order by (start, end)), in the three layouts: kept rows contiguous and in order (views), a long early row crossing the
window start (rows not contiguous), and equal clipped starts with decreasing ends (order changes)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from synth import TraceBuilder

from nsys_llm_explainer.model.clip import api_relink, clip_model
from nsys_llm_explainer.pipeline import load_model

PID = 100
W0, W1 = 1000, 2000


def _reference(start, end, cols, w0, w1):
    rows = []
    for i, (s, e) in enumerate(zip(start, end)):
        ee = max(e, s)
        if s < w1 and (ee > w0 or (ee == s and s >= w0)):
            cs = max(s, w0)
            rows.append((cs, max(min(e, w1), cs), i))
    rows.sort(key=lambda r: (r[0], r[1], r[2]))
    return ([r[0] for r in rows], [r[1] for r in rows], {k: [v[r[2]] for r in rows] for k, v in cols.items()})


def _trace(tmp_path: Path, layout: str) -> str:
    b = TraceBuilder()
    b.process(PID)
    g = b.thread(PID, 101)
    spans = [(100, 200), (900, 1100), (1200, 1300), (1300, 1400), (1500, 1900), (1950, 2100), (2500, 2600)]
    if layout == "long_early":
        spans.append((50, 1600))                      # starts first, ends inside the window
    if layout == "tie":
        spans += [(800, 1500), (850, 1050)]           # both clip to start 1000; the second ends first
    for j, (s, e) in enumerate(sorted(spans)):
        b.launch(s - 40, s - 30, s, e, pid=PID, tid=101, name=f"k{j % 3}", device=j % 2)
    b.runtime(1600, 1700, tid_g=g, name="cudaStreamSynchronize_v3020")
    p = tmp_path / f"{layout}.sqlite"
    b.write(str(p))
    return str(p)


@pytest.mark.parametrize("layout", ["contiguous", "long_early", "tie"])
def test_clip_equals_the_per_row_reference(tmp_path, layout):
    m = load_model(_trace(tmp_path, layout))
    c = clip_model(m, W0, W1)
    k, ck = m.kernels, c.kernels
    cols = {"device": k.device.tolist(), "name_idx": k.name_idx.tolist(), "corr": k.corr.tolist()}
    rs, re_, rc = _reference(k.start.tolist(), k.end.tolist(), cols, W0, W1)
    assert ck.start.tolist() == rs and ck.end.tolist() == re_
    assert {"device": ck.device.tolist(), "name_idx": ck.name_idx.tolist(), "corr": ck.corr.tolist()} == rc
    # launch_idx points at the same API call (by correlation id) in the clipped API table, or -1 when it is outside
    for corr, li in zip(ck.corr.tolist(), ck.launch_idx.tolist()):
        full_rows = np.nonzero(m.api.corr == corr)[0]
        call = int(full_rows[0])
        inside = m.api.start[call] < W1 and max(m.api.end[call], m.api.start[call]) > W0
        assert (li >= 0) == bool(inside)
        if li >= 0:
            assert int(c.api.corr[li]) == corr
    a, ca = m.api, c.api
    rs, re_, rc = _reference(a.start.tolist(), a.end.tolist(), {"corr": a.corr.tolist()}, W0, W1)
    assert ca.start.tolist() == rs and ca.end.tolist() == re_ and ca.corr.tolist() == rc["corr"]


@pytest.mark.parametrize("layout", ["contiguous", "long_early", "tie"])
def test_api_relink_finds_each_call_in_the_clipped_api_table(tmp_path, layout):
    """``api_relink``: every API row of the whole model → the row of the same call (its correlation id) in the
    clipped API table, -1 for a call outside ``[W0, W1)`` (each launch call [s − 40, s − 30) is inside exactly when
    it intersects the window: those of the kernels starting at 1200, 1300, 1500 and 1950 ns; with the sync [1600,
    1700), 5 calls) and for -1."""
    m = load_model(_trace(tmp_path, layout))
    c = clip_model(m, W0, W1)
    n = len(m.api)
    got = api_relink(m, W0, W1)(np.concatenate((np.arange(n), [-1]))).tolist()
    assert got[-1] == -1
    inside = 0
    for i, li in enumerate(got[:-1]):
        kept = m.api.start[i] < W1 and max(m.api.end[i], m.api.start[i]) > W0
        assert (li >= 0) == bool(kept)
        if li >= 0:
            inside += 1
            assert int(c.api.corr[li]) == int(m.api.corr[i]) and int(c.api.start[li]) == max(int(m.api.start[i]), W0)
    assert inside == len(c.api) == 5      # the calls added by "long_early" / "tie" ([10, 20), [760 …), [810 …)) are out
