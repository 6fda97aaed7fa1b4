"""The fast paths for scale against plain reference computations written here: counting instead
of searching, partitions instead of sorts, one shared sort for nested groupings, a direct launch-join table,
per-device timelines, lean unions, the attribution's nodes reused by the steps, long-list JSON layout."""

from __future__ import annotations

import json

import numpy as np
import pytest

from nsys_llm_explainer.analyses.common.stats import group_stats, percentile
from nsys_llm_explainer.analyses.kernels.stats import kernel_stats
from nsys_llm_explainer.model.timeline import few_distinct

RNG = np.random.default_rng(20261125)


@pytest.mark.parametrize("x", [
    np.array([], np.int64), np.array([3, 3, 1], np.uint8), RNG.integers(-5, 3, 200_000).astype(np.int32),
    RNG.integers(0, 400, 300_000), RNG.integers(0, 2**40, 1000), np.array([2**63 - 1, -2**63, 0], np.int64),
    np.concatenate([np.zeros(100_000, np.int64), [7_000_000]]),
    # sparse values, a few of them (one comparison pass each), and one the sample misses
    np.insert(np.where(RNG.random(500_000) < 0.5, 2**40, -(2**41)), 12_345, 3),
    np.array([-128, 127, 0, -1], np.int8), np.array([-1, 32767, 5], np.int16), np.array([0, 255, 7], np.uint8),
])
def test_few_distinct_is_numpy_unique(x):
    got = few_distinct(x)
    want = np.unique(x)
    assert got.dtype == want.dtype and got.tolist() == want.tolist()


def test_percentile_from_a_partition_is_numpys_linear_percentile():
    for n in (1, 2, 3, 10, 1001, 50_000):
        v = RNG.integers(-1000, 10**9, n)
        for q in (0, 1, 25, 50, 90, 99, 99.9, 100):
            assert percentile(v, q) == pytest.approx(float(np.percentile(v, q)), rel=0, abs=1e-6), (n, q)
    assert percentile(np.array([], np.int64), 50) == 0.0


def _reference_stats(keys, dur):
    """Per group (in key order): count, total, min, max and numpy's p50/p90/p99 (linear), from Python groups."""
    groups = {}
    for i in range(dur.shape[0]):
        groups.setdefault(tuple(int(k[i]) for k in keys), []).append(int(dur[i]))
    out = []
    for key in sorted(groups):
        v = np.array(groups[key], np.int64)
        pcts = [int(np.floor(np.percentile(v, q) + 0.5)) for q in (50, 90, 99)]
        out.append((key, v.shape[0], int(v.sum()), int(v.min()), int(v.max()), *pcts))
    return out


def _rows(gs, names):
    return [(tuple(int(gs.keys[c][i]) for c in names), int(gs.count[i]), int(gs.total[i]), int(gs.min[i]),
             int(gs.max[i]), int(gs.p50[i]), int(gs.p90[i]), int(gs.p99[i])) for i in range(len(gs))]


@pytest.mark.parametrize("dur_hi,dmin", [(200, 0), (10**6, 5), (2**40, -(2**20)), (3, 10**15)])
def test_group_stats_packed_sorts_equal_a_python_reference(dur_hi, dmin):
    """32-bit and 64-bit packed sorts, negative and huge minimum durations."""
    n = 4000
    a, b = RNG.integers(0, 7, n), RNG.integers(-3, 900, n).astype(np.int32)
    dur = RNG.integers(0, dur_hi, n) + dmin
    gs = group_stats({"a": a, "b": b}, dur)
    assert _rows(gs, ["a", "b"]) == _reference_stats([a, b], dur)


def _kernel_model(n: int, names: int, devices: int, pids: int, one_device_per_name: bool):
    from nsys_llm_explainer.model.trace import Kernels

    name_idx = RNG.integers(0, names, n).astype(np.int32)
    device = (name_idx % devices if one_device_per_name else RNG.integers(0, devices, n)).astype(np.int32)
    pid = (1000 + (device % pids)).astype(np.int32)
    start = np.sort(RNG.integers(0, 10**9, n))
    end = start + RNG.integers(0, 50_000, n)
    return Kernels(start=start, end=end, device=device, stream=np.zeros(n, np.int32),
                        corr=np.arange(n), pid=pid, name_idx=name_idx, graph_node=np.full(n, -1, np.int8),
                        names=[f"k{i}" for i in range(names)])


@pytest.mark.parametrize("one_device_per_name", [True, False])
def test_nested_kernel_groupings_equal_separate_groupings(one_device_per_name):
    """Groupings by name, name+device, pid+name+device (any column order) come from one sort; each equals
    group_stats run on its own columns, groups in the same order."""
    k = _kernel_model(30_000, 40, 3, 2, one_device_per_name)
    stats = kernel_stats(k)
    cols_of = {"name": k.name_idx, "device_id": k.device, "pid": k.pid}
    for cols in [("name",), ("name", "device_id"), ("device_id", "name"), ("pid", "name", "device_id"),
                 ("device_id", "pid", "name"), ("pid",), ("device_id",)]:
        got = stats.by(*cols)
        want = group_stats({c: cols_of[c] for c in cols}, k.dur)
        assert _rows(got, list(cols)) == _rows(want, list(cols)), cols


def _api(n_rows: int, pids, corr_hi: int, primary_share: float):
    from nsys_llm_explainer.model.trace import ApiCalls

    pid = RNG.choice(np.array(pids, np.int32), n_rows)
    corr = RNG.integers(-2, corr_hi, n_rows)                       # duplicates and invalid (-1, -2) ids
    event_class = np.where(RNG.random(n_rows) < primary_share, 0, 67).astype(np.int16)
    start = np.sort(RNG.integers(0, 10**9, n_rows))
    return ApiCalls(start=start, end=start + 10, gtid=pid.astype(np.int64) << 24, pid=pid, tid=pid, corr=corr,
                    name_idx=np.zeros(n_rows, np.int32), event_class=event_class, names=["cudaLaunchKernel"],
                    base_names=["cudaLaunchKernel"])


def _reference_lookup(api, pid, corr):
    best = {}
    for i in range(len(api)):
        if api.corr[i] < 0 or api.pid[i] < 0:
            continue
        key = (int(api.pid[i]), int(api.corr[i]) & 0xFFFFFFFF)
        rank = (0 if api.primary[i] else 1, i)
        if key not in best or rank < best[key][0]:
            best[key] = (rank, i)
    return [best.get((int(p), int(c) & 0xFFFFFFFF), (None, -1))[1] if p >= 0 and c >= 0 else -1
            for p, c in zip(pid.tolist(), corr.tolist())]


@pytest.mark.parametrize("pids,corr_hi,share", [((7,), 500, 0.8), ((7, 9, 4_000_000), 3000, 0.5),
                                                 ((1, 2), 2**33, 0.9), ((5,), 50, 0.0)])
def test_launch_join_table_equals_sorted_index_and_reference(monkeypatch, pids, corr_hi, share):
    import nsys_llm_explainer.model.link as link

    api = _api(4000, pids, corr_hi, share)
    q_pid = np.concatenate([RNG.choice(np.array(pids + (-1, 8), np.int64), 3000), [7, 7]])
    q_corr = np.concatenate([RNG.integers(-1, min(corr_hi, 2**32) + 5, 3000), [2**32 + 3, 3]])
    want = _reference_lookup(api, q_pid, q_corr)
    dense = link.ApiIndex(api)
    assert dense.lookup(q_pid, q_corr).tolist() == want
    monkeypatch.setattr(link, "DENSE_CELLS_PER_ROW", 0)
    monkeypatch.setattr(link, "MIN_DENSE_CELLS", 0)
    sorted_index = link.ApiIndex(api)
    assert sorted_index.table is None
    assert sorted_index.lookup(q_pid, q_corr).tolist() == want
    if corr_hi <= 3000:
        assert dense.table is not None          # small dense ids: the direct table was used


def test_union_blocks_equals_union_sorted_or_not():
    from nsys_llm_explainer.model import intervals as iv

    for sort_first in (True, False):
        s = RNG.integers(0, 10**6, 5000)
        if sort_first:
            s = np.sort(s)
        e = s + RNG.integers(-5, 400, 5000)
        o = np.argsort(s, kind="stable")
        a, b = iv.union_blocks(s, e), iv.union(s[o], e[o])
        assert a.start.tolist() == b.start.tolist() and a.end.tolist() == b.end.tolist()


def test_combine_innermost_equals_the_rule_per_query():
    from nsys_llm_explainer.analyses.nvtx.tree import combine_innermost

    class T:
        pass

    t = T()
    t.start = RNG.integers(0, 50, 30)
    t.end = t.start + RNG.integers(0, 50, 30)
    t.domain = np.zeros(30, np.int64)   # one domain: exact ties keep the earlier layer
    by_dom = {d: RNG.integers(-1, 30, 2000) for d in (3, 0, 7)}
    got = combine_innermost(t, by_dom, 2000).tolist()
    for q in range(2000):
        best = -1
        for cand in by_dom.values():
            c = int(cand[q])
            if c >= 0 and (best < 0 or t.start[c] > t.start[best]
                           or (t.start[c] == t.start[best] and t.end[c] < t.end[best])):
                best = c
        assert got[q] == best, q


def _old_timelines(model, w0, w1):
    """The concatenate-everything construction the per-device one replaced (kernels only)."""
    k = model.kernels
    s, e, lab, dev = k.start, k.end, k.name_idx.astype(np.int32), k.device.astype(np.int64)
    lix = k.launch_idx if k.launch_idx.shape[0] == len(k) else np.full(len(k), -1, np.int64)
    keep = (s < w1) & ((np.maximum(e, s) > w0) | ((e == s) & (s >= w0)))
    s, e, lab, dev, lix = s[keep], e[keep], lab[keep], dev[keep], lix[keep]
    s = np.maximum(s, w0)
    e = np.clip(e, s, w1)
    o = np.lexsort((e, s))
    s, e, lab, dev, lix = s[o], e[o], lab[o], dev[o], lix[o]
    return {int(d): (s[dev == d], e[dev == d], lab[dev == d], lix[dev == d]) for d in np.unique(dev).tolist()}


def test_per_device_timelines_equal_the_concatenated_construction():
    from nsys_llm_explainer.model.timeline import iter_timelines

    k = _kernel_model(20_000, 10, 3, 1, False)
    k.start[100:140] = k.start[100]                      # ties on start with different ends
    object.__setattr__(k, "launch_idx", RNG.integers(-1, 50, len(k)))
    k.end[5] = k.start[5] - 3                            # a backwards row

    class Model:
        kernels = k
        graph_trace = memcpy = memset = None

    for w0, w1 in [(0, 2 * 10**9), (int(k.start[5000]), int(k.start[15000]) + 7)]:
        want = _old_timelines(Model, w0, w1)
        got = {tl.device_id: tl for tl in iter_timelines(Model, w0, w1)}
        assert sorted(got) == sorted(want)
        for d, (s, e, lab, lix) in want.items():
            a = got[d].act
            assert a.start.tolist() == s.tolist() and a.end.tolist() == e.tolist()
            assert a.label_idx.tolist() == lab.tolist() and a.launch_idx.tolist() == lix.tolist()
            assert a.label_idx.dtype == np.int32 and a.is_kernel.all()


def test_steps_from_the_attributions_nodes_equal_fresh_range_lookups():
    """Every real trace and scenario with NVTX steps: the step of each work item is the same whether the
    attribution's per-domain nodes are reused or the ranges are looked up again."""
    from conftest import real_traces

    from nsys_llm_explainer.analyses.nvtx.attribution import analyze_attribution
    from nsys_llm_explainer.analyses.nvtx.tree import build_tree
    from nsys_llm_explainer.analyses.steps.nvtx_method import step_of_work, work_items
    from nsys_llm_explainer.pipeline import load_model

    checked = 0
    for path in real_traces():
        m = load_model(str(path))
        if m.nvtx is None or m.kernels is None or m.api is None:
            continue
        tree = build_tree(m.nvtx)
        att = analyze_attribution(m, tree)
        if not att.kernel_nodes or len(tree) == 0:
            continue
        li, _, _, nk = work_items(m)
        for pick in (np.arange(len(tree)), np.arange(0, len(tree), 3)):   # all ranges, and a subset, as steps
            a = step_of_work(m, tree, pick, li, nk, att.kernel_nodes)
            b = step_of_work(m, tree, pick, li)
            assert a.tolist() == b.tolist(), path
        checked += 1
    assert checked >= 3


def test_long_lists_one_element_per_line_and_the_rest_as_json_dumps():
    from nsys_llm_explainer.render.base import LONG_LIST, dumps_indented

    small = {"a": [1, 2, {"x": None, "y": [True, 1.5, "é\u2028"]}], "b": {}, "c": [], 1: 2.0}
    assert dumps_indented(small) == json.dumps(small, indent=2)
    rows = [{"i": i, "name": f"k{i}"} for i in range(LONG_LIST + 5)]
    text = dumps_indented({"rows": rows})
    assert json.loads(text) == {"rows": rows}
    assert '    {"i": 3, "name": "k3"},' in text.splitlines()
    with pytest.raises(ValueError):
        dumps_indented({"x": float("nan")})


def test_unique_counts_by_counting_equals_numpy():
    from nsys_llm_explainer.model.names import distinct_small

    for hi in (5, 10**6, 10**12):
        key = RNG.integers(0, hi, 20_000)
        u, inv = distinct_small(key)
        c = np.bincount(inv)
        wu, wc = np.unique(key, return_counts=True)
        assert u.tolist() == wu.tolist() and c.tolist() == wc.tolist()


def test_narrow_keeps_values():
    from nsys_llm_explainer.model.build import narrow

    assert narrow(np.array([-1, 0, 67])).dtype == np.int16
    assert narrow(np.array([0, 2**31 - 1]), (np.int32,)).dtype == np.int32
    big = np.array([0, 2**31])
    assert narrow(big, (np.int32,)).dtype == np.int64 and narrow(big, (np.int32,)).tolist() == big.tolist()


def test_steps_reuse_keeps_the_domain_order_on_exact_ties(tmp_path):
    """Two NVTX domains with ranges of identical start and end on one thread: the step a kernel gets (the first
    domain in lookup order wins an exact tie) is the same through the attribution's nodes as through lookups."""
    from synth import TraceBuilder, global_tid

    from nsys_llm_explainer.analyses.nvtx.attribution import analyze_attribution
    from nsys_llm_explainer.analyses.nvtx.tree import build_tree
    from nsys_llm_explainer.analyses.steps.nvtx_method import step_of_work, work_items
    from nsys_llm_explainer.pipeline import load_model

    b = TraceBuilder()
    b.process(10)
    b.thread(10, 11)
    g = global_tid(10, 11)
    for i in range(4):
        t = 1_000_000 * (i + 1)
        for dom in (5, 2):
            b.nvtx_push_pop(t, t + 500_000, f"step_{dom}_{i}", tid_g=g, domain_id=dom)
        b.launch(t + 10_000, t + 12_000, t + 20_000, t + 40_000, pid=10, tid=11, name="gemm")
    p = tmp_path / "ties.sqlite"
    b.write(str(p))
    m = load_model(str(p))
    tree = build_tree(m.nvtx)
    att = analyze_attribution(m, tree)
    assert len(att.kernel_nodes) == 2
    li, _, _, nk = work_items(m)
    nodes = np.arange(len(tree))
    fresh = step_of_work(m, tree, nodes, li)
    assert (fresh >= 0).all()
    assert step_of_work(m, tree, nodes, li, nk, att.kernel_nodes).tolist() == fresh.tolist()
