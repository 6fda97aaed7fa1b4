"""Small numeric helpers of analyses/common/stats.py against numpy's own definitions."""

from __future__ import annotations

import numpy as np
import pytest


def test_top_indices_equals_a_stable_descending_sort():
    from nsys_llm_explainer.analyses.common.stats import top_indices

    rng = np.random.default_rng(7)
    for n, hi, k in [(0, 5, 3), (5, 5, 10), (1000, 4, 20), (100_000, 50, 20), (100_000, 10**9, 1), (37, 3, 37)]:
        v = rng.integers(0, hi, n)
        want = np.argsort(-v, kind="stable")[:k].tolist()
        assert top_indices(v, k).tolist() == want, (n, hi, k)


def test_launch_share_under_per_device(tmp_path):
    """pct_under_Xus per device and per PID: hand-counted on four kernels of 3/7/15/30 µs on GPU 0, one of 1 µs
    on GPU 1 (two processes)."""
    from synth import TraceBuilder

    from nsys_llm_explainer.analyses.api.launch import analyze_launch
    from nsys_llm_explainer.pipeline import load_model

    b = TraceBuilder()
    for pid in (100, 200):
        b.process(pid)
        b.thread(pid, pid + 1)
    t = 1_000_000
    for j, us in enumerate((3, 7, 15, 30)):
        b.launch(t + j * 100_000, t + j * 100_000 + 10, t + j * 100_000 + 50, t + j * 100_000 + 50 + us * 1000,
                 pid=100, tid=101, name="k", device=0)
    b.launch(t, t + 10, t + 60, t + 1060, pid=200, tid=201, name="k", device=1)
    p = tmp_path / "l.sqlite"
    b.write(str(p))
    r = analyze_launch(load_model(str(p)), 1_000_000)
    dev = {d.device_id: d for d in r.per_device}
    assert [(d.pct_under_5us, d.pct_under_10us, d.pct_under_20us) for d in (dev[0], dev[1])] == [
        (25.0, 50.0, 75.0), (100.0, 100.0, 100.0)]
    pid = {d.pid: d for d in r.per_pid}
    assert pid[100].launches == 4 and pid[100].pct_under_10us == 50.0 and pid[200].pct_under_5us == 100.0
    assert r.overall is not None and r.overall.launches == 5 and r.overall.pct_under_5us == 40.0
    assert r.overall.launch_storm is None and r.to_dict()["overall"]["launch_storm"] is None


@pytest.mark.parametrize("groups", [1, 3, 8, 12])
def test_group_stats_against_numpy_percentile(groups):
    """Few big groups take a partition path, more groups the sort path: both equal numpy's own percentile
    (linear interpolation), sum, min and max per group."""
    from nsys_llm_explainer.analyses.common.stats import group_stats

    rng = np.random.default_rng(groups)
    n = 150_000
    keys = rng.integers(0, groups, n) * 7 + 3
    dur = rng.integers(0, 5_000_000, n)
    dur[: n // 10] = 1234                               # many ties
    gs = group_stats({"k": keys}, dur)
    assert gs.keys["k"].tolist() == sorted(set(keys.tolist()))
    for i, kv in enumerate(gs.keys["k"].tolist()):
        v = dur[keys == kv]
        assert (gs.count[i], gs.total[i], gs.min[i], gs.max[i]) == (v.shape[0], v.sum(), v.min(), v.max())
        for q, got in ((50, gs.p50[i]), (90, gs.p90[i]), (99, gs.p99[i])):
            assert got == int(np.floor(np.percentile(v, q) + 0.5)), (kv, q)
        assert gs.p50_exact[i] == pytest.approx(np.median(v), abs=1e-6)
