"""Resources and limits: pathological trace shapes (small versions of ``bench/pathological.py``)
with exact answers computed by hand, scaling checks that fail if a tree walk regresses to one round per depth level,
memory and time that grow with the trace's rows (not NVTX domains × kernels or devices × rows), and the idle-cause
partition path against cutting every gap."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Dict

import numpy as np
import pytest
from conftest import built_scenario

import nsys_llm_explainer as nle
from nsys_llm_explainer.analyses.nvtx import tree as T
from nsys_llm_explainer.model.trace import NvtxRanges

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import pathological as P  # noqa: E402

DEPTH = 2000


def _kernel_dur(n: int) -> np.ndarray:
    """Kernel durations written by the bench (kernel i: 1000 + ((i + 1) % 7) * 100 ns)."""
    return 1000 + ((np.arange(n) + 1) % 7) * 100


@pytest.fixture(scope="module")
def deep(tmp_path_factory) -> SimpleNamespace:
    path = tmp_path_factory.mktemp("patho") / "deep.sqlite"
    P.write_deep(str(path), DEPTH)
    rep = nle.analyze(str(path))
    return SimpleNamespace(rep=rep, d=rep.to_dict(), path=path)


@pytest.mark.slow   # large shapes and scaling measurements
def test_deep_tree_parent_depth(deep):
    from nsys_llm_explainer.pipeline import load_model

    tree = T.build_tree(load_model(str(deep.path)).nvtx)
    assert len(tree) == DEPTH + 1                       # "outer" + ranges 0 .. DEPTH-1, one chain
    assert np.array_equal(tree.parent, np.arange(-1, DEPTH))
    assert np.array_equal(tree.depth, np.arange(DEPTH + 1))
    assert np.array_equal(tree.sub_end, np.full(DEPTH + 1, DEPTH + 1))


@pytest.mark.slow   # large shapes and scaling measurements
def test_deep_self_times(deep):
    t_end = 10 * DEPTH + 10_000 * DEPTH + 1_000_000
    # range i = [10 i, t_end - 10 i]; its only child is range i + 1: self time 20 ns, the last one all of it
    self_t = np.full(DEPTH, 20, np.int64)
    self_t[-1] = t_end - 20 * (DEPTH - 1)
    names = [P.deep_name(k) for k in range(DEPTH)]
    want = {"outer": 10}
    for nm, st in zip(names, self_t.tolist()):
        want[nm] = want.get(nm, 0) + st
    got = {r["name"]: r["self_ns"] for r in deep.d["nvtx"]["ranges"]}
    assert got == want


@pytest.mark.slow   # large shapes and scaling measurements
def test_deep_attribution(deep):
    # kernel i is launched inside range i only (its innermost range); enclosing ranges: outer, ranges 0..i
    dur = _kernel_dur(DEPTH)
    names = [P.deep_name(k) for k in range(DEPTH)]
    first = {}
    for k, nm in enumerate(names):
        first.setdefault(nm, k)
    rows = {r.name: r for r in deep.rep.attribution.ranges}
    assert rows["outer"].kernel_count == DEPTH and rows["outer"].innermost_kernel_count == 0
    for nm, f in first.items():
        inner = [i for i in range(DEPTH) if names[i] == nm]
        assert rows[nm].kernel_count == DEPTH - f
        assert rows[nm].inclusive_ns == int(dur[f:].sum())
        assert rows[nm].innermost_kernel_count == len(inner)
        assert rows[nm].innermost_ns == int(dur[inner].sum())
    assert deep.rep.attribution.attributed_count == DEPTH
    node = deep.rep.attribution.kernel_node
    assert np.array_equal(np.sort(node), np.arange(1, DEPTH + 1))


@pytest.mark.slow   # large shapes and scaling measurements
def test_deep_phases(deep):
    # "decode" ranges are at depths 5, 21, 37, ...: kernels 0..4 have no phase-named enclosing range
    ph = {r["phase"]: r["kernel_count"] for r in deep.d["phases"]["phases"]}
    assert ph["decode"] == DEPTH - 5 and ph["unmapped"] == 5


def _chain(depth: int, n_threads: int = 1) -> NvtxRanges:
    """``depth`` nested ranges per thread, then a sibling of the outermost one (forces a climb of the
    whole chain in pointer jumping); names cycle through 16 values."""
    s, e, g = [], [], []
    for t in range(n_threads):
        i = np.arange(depth, dtype=np.int64)
        s += [10 * i, [10 * depth * 3]]
        e += [10 * depth * 2 - 10 * i, [10 * depth * 3 + 5]]
        g += [np.full(depth + 1, 1000 + t)]
    s, e, g = np.concatenate(s), np.concatenate(e), np.concatenate(g)
    n = s.shape[0]
    o = np.lexsort((-e, s))
    return NvtxRanges(start=s[o], end=e[o], closed=np.ones(n, bool), event_type=np.full(n, 59), gtid=g[o],
                      pid=g[o] // 1000, tid=g[o], end_gtid=np.full(n, -1), name_idx=(np.arange(n) % 16)[o],
                      names=[f"n{k}" for k in range(16)], domain=np.zeros(n, np.int64))


def _walk_all(depth: int) -> int:
    """Every tree walk the analyses use, on a ``depth``-deep chain; returns the rounds counted."""
    T.ROUNDS["n"] = 0
    tree = T.build_tree(_chain(depth))
    T.self_time(tree)
    q = np.arange(0, 10 * depth, 7, dtype=np.int64)
    T.enclosing_by_domain(tree, np.full(q.shape[0], 1000), q, q + 3)
    T.subtree_sums(tree, np.ones(len(tree), np.int64))
    T.has_ancestor_with_key(tree, tree.name_idx)
    T.nearest_marked(tree.parent, tree.name_idx == 3)
    T.nearest_marked(tree.parent, np.zeros(len(tree), bool))
    return T.ROUNDS["n"]


@pytest.mark.slow   # large shapes and scaling measurements
def test_deep_walks_take_log_depth_rounds():
    small, big = _walk_all(1000), _walk_all(8000)
    # O(log depth): 8× deeper adds a few rounds per walk; one round per level would add ~7000
    assert big <= small + 40, (small, big)
    assert big < 300, big


@pytest.mark.slow   # large shapes and scaling measurements
def test_deep_walks_scale_linearly():
    def best(depth: int) -> float:
        out = []
        for _ in range(3):
            t = time.perf_counter()
            _walk_all(depth)
            out.append(time.perf_counter() - t)
        return min(out)

    small, big = best(2000), best(16000)
    # near-linear: 8× the rows ≈ 8× the time; O(depth) rounds would be ≈ 64× (generous bound for noise)
    assert big < 30 * small + 0.05, (small, big)


@pytest.mark.slow   # large shapes and scaling measurements
def test_walks_match_brute_force_on_random_forests():
    rng = np.random.default_rng(7)
    for it in range(60):
        n = int(rng.integers(1, 120))
        s = rng.integers(0, 40, n)
        e = s + rng.integers(0, 25, n)                  # not properly nested: parents are still exact
        g = rng.integers(0, 2, n) + 1000
        o = np.lexsort((-e, s))
        nv = NvtxRanges(start=s[o], end=e[o], closed=np.ones(n, bool), event_type=np.full(n, 59), gtid=g[o],
                        pid=g[o] // 1000, tid=g[o], end_gtid=np.full(n, -1), name_idx=rng.integers(0, 3, n),
                        names=["a", "b", "c"], domain=rng.integers(0, 2, n) * (it % 2))
        tree = T.build_tree(nv)
        b = tree.thread_bounds
        for lo, hi in zip(b[:-1].tolist(), b[1:].tolist()):
            for i in range(lo, hi):
                ge = [j for j in range(lo, i) if tree.end[j] >= tree.end[i]]
                assert tree.parent[i] == (ge[-1] if ge else -1)
        anc = []
        for i in range(len(tree)):
            a, p = [], tree.parent[i]
            while p >= 0:
                a.append(int(p))
                p = tree.parent[p]
            anc.append(a)
        assert tree.depth.tolist() == [len(a) for a in anc]
        vals = rng.integers(0, 9, len(tree))
        sub = T.subtree_sums(tree, vals)
        for i in range(len(tree)):
            assert sub[i] == vals[i] + sum(int(vals[j]) for j in range(len(tree)) if i in anc[j])
        dup = T.has_ancestor_with_key(tree, tree.name_idx)
        assert dup.tolist() == [any(tree.name_idx[a] == tree.name_idx[i] for a in anc[i]) for i in range(len(tree))]
        mk = rng.random(len(tree)) < 0.3
        near = T.nearest_marked(tree.parent, mk)
        assert near.tolist() == [i if mk[i] else next((a for a in anc[i] if mk[a]), -1) for i in range(len(tree))]
        q = rng.integers(0, 50, 40)
        qg = rng.integers(0, 2, 40) + 1000
        layers = T.enclosing_by_domain(tree, qg, q, q + 2)
        for d in sorted(set(tree.domain.tolist())):
            res = T.domain_layer_nodes(tree, layers, d, 40)
            for k in range(40):
                segs = [j for j in range(len(b) - 1) if tree.gtid[b[j]] == qg[k] and tree.domain[b[j]] == d]
                want = -1
                if segs:
                    lo, hi = int(b[segs[0]]), int(b[segs[0] + 1])
                    c = int(np.searchsorted(tree.start[lo:hi], q[k], "right")) - 1
                    c = c + lo if c >= 0 else -1
                    while c >= 0 and tree.end[c] < q[k] + 2:
                        c = int(tree.parent[c])
                    want = c
                assert res[k] == want


@pytest.mark.slow   # large shapes and scaling measurements
def test_many_ranges_steps_and_attribution(tmp_path):
    path = tmp_path / "ranges.sqlite"
    P.write_ranges(str(path), 4000)                      # 1000 steps: execute_model ⊃ attn, mlp, norm
    rep = nle.analyze(str(path))
    d = rep.to_dict()
    counts = {r["name"]: r["count"] for r in d["nvtx"]["ranges"]}
    assert counts == {"execute_model": 1000, "attn": 1000, "mlp": 1000, "norm": 1000, "warmup": 1}
    selfs = {r["name"]: r["self_ns"] for r in d["nvtx"]["ranges"]}
    assert selfs["execute_model"] == 1000 * (90_000 - 24_000 - 25_000 - 20_000) - 10   # warmup sits in step 0
    st = d["steps"]
    assert (st["method"], st["step_count"], st["step_ranges"]) == ("nvtx", 1000, ["execute_model"])
    assert st["totals"]["kernel_count"] == 2000 and len(st["rows"]) == 1000
    rows = {r.name: r for r in rep.attribution.ranges}
    assert rows["execute_model"].kernel_count == 2000 and rows["execute_model"].innermost_kernel_count == 0
    assert rows["attn"].innermost_kernel_count == 1000 and rows["mlp"].innermost_kernel_count == 1000
    assert "norm" not in rows


@pytest.mark.slow   # large shapes and scaling measurements
def test_many_distinct_kernel_names(tmp_path):
    path = tmp_path / "names.sqlite"
    P.write_names(str(path), 3000, per_name=5)
    rep = nle.analyze(str(path))
    d = rep.to_dict()
    from nsys_llm_explainer.pipeline import load_model

    k = load_model(str(path)).kernels
    assert len(k.names) == 3000 and len(set(k.names)) == 3000
    assert np.array_equal(np.bincount(k.name_idx), np.full(3000, 5))
    cat = d["categories"]
    assert cat["kernel_count"] == 15000
    assert sum(r["count"] for r in cat["overall"]) == 15000
    assert sum(r["nonoverlap_ns"] for r in cat["overall"]) == cat["busy_ns"] == int(_kernel_dur(15000).sum())


@pytest.mark.slow   # large shapes and scaling measurements
@pytest.mark.parametrize("huge", [4_000_000_000, 2**31 - 1])
def test_sparse_huge_device_ids(tmp_path, huge):
    path = tmp_path / "devices.sqlite"
    P.write_devices(str(path), 1000, (0, huge))          # kernel i on device 0 when i is even, else on `huge`
    d = nle.analyze(str(path)).to_dict()
    dur = _kernel_dur(1000)
    devs = {r["device_id"]: r for r in d["devices"]}
    assert sorted(devs) == [0, huge]
    assert devs[0]["kernel_count"] == devs[huge]["kernel_count"] == 500
    assert devs[0]["busy_ns"] == int(dur[0::2].sum())      # kernels never overlap on one device
    assert devs[huge]["busy_ns"] == int(dur[1::2].sum())


@pytest.mark.slow   # large shapes and scaling measurements
def test_sparse_huge_string_id_allocates_per_row_not_per_id():
    import tracemalloc

    from nsys_llm_explainer.model.names import distinct_small

    tracemalloc.start()
    uniq, inv = distinct_small(np.array([0, 49_000_000, 0, 7], np.int64))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert uniq.tolist() == [0, 7, 49_000_000] and inv.tolist() == [0, 2, 0, 1]
    assert peak < 16 << 20, peak          # a lookup table over all possible ids would be ~440 MB



# ------------------------------------------------------------------------------------- memory: rows, not domains × rows
ROOT = Path(__file__).resolve().parents[2]


BENCH = ROOT / "bench"


_MEASURE = """
import json, resource, sys, time
sys.path.insert(0, {bench!r})
import pathological as P
P.WRITERS[{shape!r}]({path!r}, {size})
import nsys_llm_explainer as nle
t = time.perf_counter()
rep = nle.analyze({path!r})
rep.to_dict()
print(json.dumps({{"s": time.perf_counter() - t, "mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}}))
"""


def _measure(tmp_path: Path, shape: str, size: int) -> Dict[str, float]:
    """Analysis time and peak RSS (MB, the generator's included) of ``bench/pathological.py``'s ``shape`` at
    ``size``, in a fresh interpreter."""
    path = str(tmp_path / f"{shape}_{size}.sqlite")
    code = _MEASURE.format(bench=str(BENCH), shape=shape, path=path, size=size)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600,
                         env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.slow
@pytest.mark.parametrize("shape, small, big, mb", [("domains", 1_000, 8_000, 150), ("device_ids", 100, 1_000, 150)])
def test_memory_grows_with_rows_not_domains_or_devices_times_rows(tmp_path: Path, shape, small, big, mb) -> None:
    """8× the NVTX domains (one range and one kernel each) or 8×/10× the device ids (8 kernels each): the rows grow
    8–10×, so time and memory may grow about that much — before the fix 8,000 domains peaked at 2.5 GB and 32 s
    (one full-size array per domain), 1,000 devices at 0.6 GB and 7 s (idle pieces of every device cut at every
    call of the launching thread)."""
    a, b = _measure(tmp_path, shape, small), _measure(tmp_path, shape, big)
    assert b["mb"] - a["mb"] < mb, (a, b)
    assert b["s"] < 12 * a["s"] + 2.0, (a, b)


def _both_paths(model) -> tuple:
    """Idle causes and bins of ``model`` (whole capture as the window) cut gap by gap and by the threads'
    partitions from the first device on (causes.PIECES_KEPT and ROWS_FACTOR set to 0, prefix sums forced)."""
    from nsys_llm_explainer.analyses.idle import causes as C
    from nsys_llm_explainer.analyses.nvtx.tree import build_tree
    from nsys_llm_explainer.model.timeline import iter_timelines

    w0, w1 = model.trace_start, model.trace_end
    tree = build_tree(model.nvtx)
    out = []
    from nsys_llm_explainer.analyses.idle import host_partition as H

    for needed in (True, False):
        kept, factor, least = C.PIECES_KEPT, C.ROWS_FACTOR, H.PREFIX_MIN_PIECES_PER_CODE
        C.PIECES_KEPT = C.ROWS_FACTOR = H.PREFIX_MIN_PIECES_PER_CODE = 0   # the prefix sums whenever they apply
        try:
            r = C.analyze_idle_causes(model, model, iter_timelines(model, w0, w1, False), tree, 500,
                                      pieces_needed=needed)
        finally:
            C.PIECES_KEPT, C.ROWS_FACTOR, H.PREFIX_MIN_PIECES_PER_CODE = kept, factor, least
        out.append({"devices": [(d.device_id, d.causes, [d.gap_cause(i) for i in range(len(d.gap_cause_code))],
                                  d.wait_ns_by_thread) for d in r.devices], "bins": r.bins})
    return out[0], out[1]


@pytest.mark.parametrize("scenario", ["demo", "nccl_straggler", "queued_dependency", "host_samples", "training_step",
                                      "cuda_graph_node", "pageable_h2d"])
def test_partition_path_gives_the_same_causes_and_bins(tmp_path: Path, scenario: str) -> None:
    """The device pass charged by the host threads' partitions (taken past the budget when nothing reads the pieces'
    places in time) gives the same causes (ns, gap counts, examples, short/tiny ns), per-gap causes, waits and bins
    as cutting every gap at every host row."""
    from nsys_llm_explainer.pipeline import load_model

    p = tmp_path / "t.sqlite"
    built_scenario(scenario, str(p))
    cut, part = _both_paths(load_model(str(p)))
    assert cut == part


def test_partition_path_on_many_devices_fed_by_one_thread(tmp_path: Path) -> None:
    import sys as _sys
    _sys.path.insert(0, str(BENCH))
    import pathological as P

    from nsys_llm_explainer.pipeline import load_model

    p = str(tmp_path / "d.sqlite")
    P.write_device_ids(p, 40)
    cut, part = _both_paths(load_model(p))
    assert len(cut["devices"]) == 40 and cut == part


@pytest.mark.parametrize("prefix_min", [0, 1 << 30])
def test_interval_sums_equal_a_brute_force_sum(monkeypatch, prefix_min: int) -> None:
    """The partition's sums over intervals, by scanning and by per-cause prefix sums (forced either way), equal the
    overlap of every piece with every interval summed by hand."""
    from nsys_llm_explainer.analyses.idle import host_partition as H

    monkeypatch.setattr(H, "PREFIX_MIN_PIECES_PER_CODE", prefix_min)
    rng = np.random.default_rng(3)
    for _ in range(40):
        cuts = np.unique(rng.integers(0, 1000, int(rng.integers(2, 80))))
        p = H.Partition(cuts[:-1], cuts[1:], rng.integers(0, 4, cuts.shape[0] - 1))
        pts = np.unique(rng.integers(int(cuts[0]), int(cuts[-1]) + 1, 2 * int(rng.integers(1, 12))))
        a, b = pts[0::2], pts[1::2]
        if a.shape[0] > b.shape[0]:
            a = a[:-1]
        want: Dict[tuple, int] = {}
        for i, (x, y) in enumerate(zip(a.tolist(), b.tolist())):
            for s, e, c in zip(p.start.tolist(), p.end.tolist(), p.code.tolist()):
                ov = min(e, y) - max(s, x)
                if ov > 0:
                    want[(i, c)] = want.get((i, c), 0) + ov
        w, c, ns = H.interval_sums(p, a, b)
        assert {(int(i), int(k)): int(v) for i, k, v in zip(w, c, ns)} == want
        assert list(zip(w.tolist(), c.tolist())) == sorted(want)


# ------------------------------------------------------------------------------------- memory: copies of a column
def _peak_columns(f, n: int):
    """(f(), the peak memory f allocated, in 8-byte columns of ``n`` rows)."""
    import tracemalloc

    tracemalloc.start()
    try:
        c0 = tracemalloc.get_traced_memory()[0]
        out = f()
        return out, (tracemalloc.get_traced_memory()[1] - c0) / (8 * n)
    finally:
        tracemalloc.stop()


def test_per_row_helpers_hold_few_copies_of_their_rows():
    """The helpers the 5 M-kernel report's peak memory is made of hold a bounded number of copies of their rows
    (docs/PERFORMANCE.md, "Peak memory of the full report"): a duration summary one (the partition of the
    durations; it held three: an all-zero key column, its packed sort key and the partition), the spread of a
    value per launch call over the kernels two and a half (the table and the result; it held four), an interval
    union with its row bookkeeping under five and a half (it held six and a half)."""
    from nsys_llm_explainer.analyses.common.stats import Summary, summary
    from nsys_llm_explainer.model import intervals as iv

    n = 1_000_000
    dur = (np.arange(n) % 1000).astype(np.int64)       # 0..999, each 1000 times
    s, copies = _peak_columns(lambda: summary(dur), n)
    # total 1000 · (0 + … + 999); p50 between sorted[499999] = 499 and sorted[500000] = 500; p90 at 899.1, p99 at 989.01
    assert s == Summary(count=n, total_ns=499_500_000, avg_ns=500, min_ns=0, max_ns=999, p50_ns=500, p90_ns=899,
                        p99_ns=989)
    assert copies < 1.5, copies

    li = np.arange(n, dtype=np.int64)[::-1].copy()      # kernel i launched by API row n − 1 − i, every third unlinked
    li[::3] = -1
    calls = np.arange(0, n, 2)                          # the even API rows are launch calls, each with value 10 × row
    got, copies = _peak_columns(lambda: T.per_call(n, li, calls, calls * 10), n)
    want = np.where((li >= 0) & (li % 2 == 0), li * 10, -1)
    assert np.array_equal(got, want) and got.dtype == np.int64
    assert copies < 3.0, copies

    start = np.arange(n, dtype=np.int64) * 10           # rows [10 i, 10 i + 5); every fourth covers the next row
    end = start + 5
    end[::4] += 12
    u, copies = _peak_columns(lambda: iv.union(start, end), n)
    assert len(u) == n - n // 4                         # rows 4k and 4k + 1 make one block [40 k, 40 k + 17)
    assert u.start[:4].tolist() == [0, 20, 30, 40] and u.end[:4].tolist() == [17, 25, 35, 57]
    assert u.first_row[:4].tolist() == [0, 2, 3, 4] and u.last_row[:4].tolist() == [0, 2, 3, 4]
    assert copies < 5.5, copies
