"""Groupings over many distinct values (devices, pids, threads, names, map entries) give the answers of a plain
Python computation: the per-group work is one sort, not one pass over every row per group (docs/PERFORMANCE.md,
"Many groups")."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
from synth import TraceBuilder, global_tid

import nsys_llm_explainer as nle
from nsys_llm_explainer.model.build import _map_devices
from nsys_llm_explainer.model.timeline import rows_by_value


def _plain_groups(x):
    out = defaultdict(list)
    for i, v in enumerate(x.tolist()):
        out[v].append(i)
    return sorted(out.items())


def test_rows_by_value_equals_a_plain_grouping():
    rng = np.random.default_rng(5)
    for x in (rng.integers(0, 3, 500), rng.integers(-2**62, 2**62, 3000), rng.integers(0, 2000, 5000).astype(np.int16),
              np.zeros(0, np.int64)):
        got = [(v, r.tolist()) for v, r in rows_by_value(x)]
        assert got == _plain_groups(x)


def test_device_map_of_many_entries_matches_a_mask_per_entry():
    rng = np.random.default_rng(7)
    n = 4000
    pid = rng.integers(1, 400, n).astype(np.int64)
    dev = rng.integers(0, 8, n).astype(np.int16)
    dmap = {(p, c): (p * 8 + c) % 30000 for p in range(1, 300) for c in range(0, 8, 2)}   # 1,196 entries
    dmap[(2**70, 0)] = 5                                      # an entry no row can match
    want = dev.copy()
    for i in range(n):
        g = dmap.get((int(pid[i]), int(dev[i])))
        if g is not None:
            want[i] = g
    got = _map_devices(dev, pid, dmap)
    assert got.dtype == dev.dtype and got.tolist() == want.tolist()


def test_start_end_ranges_of_thousands_of_names_count_their_kernels_once(tmp_path):
    """1,200 start/end ranges of 600 names on 3 threads of 3 processes (nested and repeated): per name and per
    (pid, name), the kernels launched inside a range of that name on its thread, each once."""
    b = TraceBuilder()
    rng = np.random.default_rng(11)
    calls = []   # (pid, gtid, start, end, kernel dur)
    for pid in (10, 11, 12):
        b.process(pid, f"p{pid}")
        g = b.thread(pid, pid + 100)
        for j in range(400):
            t = 1_000_000 + j * 1_000
            dur = 100 + int(rng.integers(0, 50))
            b.launch(t, t + 200, t + 300, t + 300 + dur, pid=pid, tid=pid + 100, name="k")
            calls.append((pid, g, t, t + 200, dur))
    ranges = []
    for i in range(1200):
        pid = (10, 11, 12)[i % 3]
        g = global_tid(pid, pid + 100)
        s = 1_000_000 + int(rng.integers(0, 400)) * 1_000 - int(rng.integers(0, 2)) * 100
        e = s + int(rng.integers(0, 6)) * 1_000 + int(rng.integers(0, 3)) * 100
        name = f"r{i % 600}"
        b.nvtx_start_end(s, e, name, tid_g=g)
        ranges.append((g, s, e, name))
    path = tmp_path / "se.sqlite"
    b.write(str(path))
    by_thread = defaultdict(list)
    for c in calls:
        by_thread[c[1]].append(c)
    inside = defaultdict(set)
    for g, s, e, name in ranges:
        inside[name] |= {c for c in by_thread[g] if s <= c[2] <= e and c[3] <= e}
    want_n, want_t, want_pid = defaultdict(int), defaultdict(int), defaultdict(lambda: [0, 0])
    for name, cs in inside.items():
        for pid, _, _, _, dur in cs:
            want_n[name] += 1
            want_t[name] += dur
            want_pid[(pid, name)][0] += 1
            want_pid[(pid, name)][1] += dur
    att = nle.analyze(str(path)).attribution
    got = {r.name: (r.kernel_count, r.inclusive_ns) for r in att.ranges if r.style == "StartEnd"}
    assert len(got) > 300 and got == {n: (want_n[n], want_t[n]) for n in want_n}
    got_pid = {(r.pid, r.name): [r.kernel_count, r.inclusive_ns] for r in att.by_pid if r.style == "StartEnd"}
    assert got_pid == dict(want_pid)
    rows = [r for r in att.ranges if r.style == "StartEnd"]
    assert [(-r.inclusive_ns, r.name) for r in rows] == sorted((-r.inclusive_ns, r.name) for r in rows)
