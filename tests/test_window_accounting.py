"""Steady-state window, model clipping and GPU time accounting on hand-built fixtures."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from nsys_llm_explainer.analyses.accounting import (
    PART_KEYS,
    STATES,
    analyze_accounting,
    host_state_during,
    launching_threads,
)
from nsys_llm_explainer.analyses.idle import analyze_idle
from nsys_llm_explainer.analyses.window import detect_window, parse_window
from nsys_llm_explainer.errors import InputError
from nsys_llm_explainer.model.clip import clip_model
from nsys_llm_explainer.pipeline import load_model
from nsys_llm_explainer.synth import TraceBuilder, global_pid

T = 1000
MS = 1_000_000
S = 1_000_000_000
PID = 100


def _load(b: TraceBuilder, tmp_path: Path, name: str = "t.sqlite"):
    p = tmp_path / name
    b.write(str(p), overwrite=True)
    return load_model(str(p))


def _brief_fixture() -> TraceBuilder:
    """Kernels [0,10) [30,40) [100,110) (offset T); the launching thread is in cudaStreamSynchronize
    [10,25), cudaLaunchKernel [25,31) and cudaMalloc [50,90)."""
    b = TraceBuilder()
    b.process(PID)
    g = b.thread(PID, 101)
    b.launch(T - 8, T - 2, T, T + 10, pid=PID, tid=101, name="k1")
    b.runtime(T + 10, T + 25, tid_g=g, name="cudaStreamSynchronize_v3020")
    b.launch(T + 25, T + 31, T + 30, T + 40, pid=PID, tid=101, name="k2")
    b.launch(T + 32, T + 37, T + 100, T + 110, pid=PID, tid=101, name="k3")
    b.runtime(T + 50, T + 90, tid_g=g, name="cudaMalloc_v3020")
    return b


# ------------------------------------------------------------------------------------------ accounting


def test_accounting_brief_example(tmp_path: Path) -> None:
    m = _load(_brief_fixture(), tmp_path)
    r = analyze_accounting(m)
    assert r.available
    (d,) = r.devices
    assert (d["window_start_ns"], d["window_end_ns"], d["window_ns"]) == (T, T + 110, 110)
    assert d["busy_ns"] == 30 and d["idle_ns"] == 80
    assert d["idle_parts"] == {"sync": 15, "launch": 5, "alloc": 40, "other_api": 0, "no_cuda_call": 20,
                               "unknown": 0}
    assert sum(d["idle_parts"].values()) == d["idle_ns"]
    assert d["idle_parts_pct"]["alloc"] == 50.0 and d["idle_parts_pct"]["sync"] == 18.75
    assert d["launching_tids"] == [101] and d["launching_thread_count"] == 1
    assert d["gap_count"] == 2 and d["short_gap_count"] == 2
    assert d["idle_in_short_gaps_ns"] == 80 and d["idle_in_short_gaps_pct"] == 100.0
    assert r.totals["idle_ns"] == 80 and r.totals["idle_parts"]["alloc"] == 40
    # launch calls: 6, 6, 5 ns; launch→start: 8, 5, 68 ns
    ls = r.launch_stats
    assert ls["launch_call"]["count"] == 3 and ls["launch_call"]["total_ns"] == 17
    assert ls["launch_call"]["min_ns"] == 5 and ls["launch_call"]["max_ns"] == 6
    lt = ls["launch_to_start"]
    assert (lt["count"], lt["total_ns"], lt["min_ns"], lt["max_ns"], lt["p50_ns"], lt["avg_ns"]) == (
        3, 81, 5, 68, 8, 27)
    assert ls["launch_to_start_per_device"][0]["device_id"] == 0
    assert ls["launch_to_start_per_device"][0]["count"] == 3


def test_host_state_during_priority_and_threads(tmp_path: Path) -> None:
    b = TraceBuilder()
    b.process(PID)
    ga = b.thread(PID, 1)
    gb = b.thread(PID, 2)
    gc = b.thread(PID, 3)
    b.launch(0, 5, 10, 20, pid=PID, tid=1, name="a")        # thread 1 launches on device 0
    b.launch(6, 9, 200, 210, pid=PID, tid=2, name="b")      # thread 2 launches on device 0
    b.runtime(20, 40, tid_g=ga, name="cudaDeviceSynchronize_v3020")       # sync
    b.runtime(30, 60, tid_g=gb, name="cudaLaunchKernel_v7000", corr=999)  # launch (no kernel)
    b.runtime(50, 80, tid_g=ga, name="cudaEventQuery_v3020")              # non-blocking → other_api
    b.runtime(70, 120, tid_g=gb, name="cudaFree_v3020")                   # alloc (free)
    b.runtime(70, 75, tid_g=ga, name="cuLaunchKernel", event_class=1)     # driver launch wins over free
    b.runtime(130, 150, tid_g=ga, name="cudaDeviceSynchronize_v3020", event_class=67)  # not primary
    b.runtime(130, 190, tid_g=gc, name="cudaMalloc_v3020")                # thread 3 never launches
    m = _load(b, tmp_path)
    gt = launching_threads(m)
    assert sorted((gt[0] & 0xFFFFFF).tolist()) == [1, 2]
    parts = host_state_during(m, np.array([20, 20, 100]), np.array([200, 60, 100]), gt[0])
    assert set(parts) == set(STATES)
    # [20,200): sync 20..40 = 20; launch 40..60 + 70..75 = 25; alloc 75..120 = 45; other 60..70 = 10
    assert [int(parts[s][0]) for s in STATES] == [20, 25, 45, 10, 80]
    assert [int(parts[s][1]) for s in STATES] == [20, 20, 0, 0, 0]
    assert [int(parts[s][2]) for s in STATES] == [0, 0, 0, 0, 0]
    r = analyze_accounting(m)
    (d,) = r.devices
    assert d["idle_ns"] == 180 and d["idle_parts"]["sync"] == 20 and d["idle_parts"]["no_cuda_call"] == 80
    assert sum(d["idle_parts"].values()) == 180


def test_overlapping_streams_busy_is_union(tmp_path: Path) -> None:
    b = TraceBuilder()
    b.process(PID)
    g = b.thread(PID, 1)
    b.launch(0, 5, 100, 150, pid=PID, tid=1, stream=7, name="a")
    b.launch(5, 10, 120, 170, pid=PID, tid=1, stream=8, name="b")
    b.launch(10, 15, 160, 165, pid=PID, tid=1, stream=9, name="c")   # nested in the union
    b.launch(15, 20, 200, 220, pid=PID, tid=1, stream=7, name="d")
    c = b.runtime(175, 178, tid_g=g, name="cudaMemcpyAsync_v3020")
    b.memcpy(180, 190, pid=PID, bytes=64, corr=c)
    m = _load(b, tmp_path)
    r = analyze_accounting(m)
    (d,) = r.devices
    assert (d["window_ns"], d["busy_ns"], d["idle_ns"]) == (120, 90, 30)
    assert d["idle_parts"]["other_api"] == 3 and d["idle_parts"]["no_cuda_call"] == 27
    rm = analyze_accounting(m, include_memcpy=True)
    (dm,) = rm.devices
    assert (dm["window_ns"], dm["busy_ns"], dm["idle_ns"]) == (120, 100, 20)
    assert dm["idle_parts"]["other_api"] == 3 and dm["idle_parts"]["no_cuda_call"] == 17
    idle = analyze_idle(m).devices[0]
    assert idle["busy_ns"] == d["busy_ns"] and idle["idle_ns"] == d["idle_ns"]


def test_multi_device_and_unknown_host(tmp_path: Path) -> None:
    b = TraceBuilder()
    b.process(PID)
    g1 = b.thread(PID, 1)
    b.thread(PID, 2)
    b.launch(0, 5, 10, 20, pid=PID, tid=1, device=0, name="a")
    b.launch(0, 5, 50, 60, pid=PID, tid=1, device=0, name="a")
    b.launch(1, 6, 10, 30, pid=PID, tid=2, device=1, name="b")
    b.launch(7, 9, 40, 45, pid=PID, tid=2, device=1, name="b")
    b.runtime(20, 35, tid_g=g1, name="cudaStreamSynchronize_v3020")
    b.kernel(10, 20, pid=PID, device=2, name="orphan", corr=5000)   # no API row links to it
    b.kernel(30, 35, pid=PID, device=2, name="orphan", corr=5001)
    m = _load(b, tmp_path)
    r = analyze_accounting(m)
    dev = {d["device_id"]: d for d in r.devices}
    assert dev[0]["idle_ns"] == 30 and dev[0]["idle_parts"]["sync"] == 15
    assert dev[0]["idle_parts"]["no_cuda_call"] == 15
    # thread 1's sync does not count for device 1 (launched by thread 2 only)
    assert dev[1]["idle_ns"] == 10 and dev[1]["idle_parts"]["no_cuda_call"] == 10
    assert dev[2]["idle_ns"] == 10 and dev[2]["idle_parts"]["unknown"] == 10
    assert dev[2]["launching_thread_count"] == 0 and r.notes
    assert r.totals["idle_ns"] == 50 and sum(r.totals["idle_parts"].values()) == 50
    assert set(r.totals["idle_parts"]) == set(PART_KEYS)


def test_accounting_without_kernels(tmp_path: Path) -> None:
    b = TraceBuilder()
    b.process(PID)
    g = b.thread(PID, 1)
    b.runtime(0, 10, tid_g=g, name="cudaMalloc_v3020")
    m = _load(b, tmp_path)
    r = analyze_accounting(m)
    assert not r.available and r.devices == [] and r.reason


# ------------------------------------------------------------------------------------------ clip_model


def test_clip_model_counts_and_clipping(tmp_path: Path) -> None:
    b = _brief_fixture()
    g = b.thread(PID, 101)
    b.nvtx_push_pop(T - 10, T + 200, "outer", tid_g=g)
    b.nvtx_push_pop(T + 60, T + 70, "inner", tid_g=g)
    b.nvtx_push_pop(T + 150, T + 160, "after", tid_g=g)
    c = b.runtime(T + 41, T + 44, tid_g=g, name="cudaMemcpyAsync_v3020")
    b.memcpy(T + 45, T + 60, pid=PID, bytes=8, corr=c)
    m = _load(b, tmp_path)
    w0, w1 = T + 28, T + 100       # cuts k2's launch call and k2; drops k1, k3 and their launches
    cm = clip_model(m, w0, w1)
    k = cm.kernels
    assert len(k) == 1 and k.names[int(k.name_idx[0])] == "k2"
    assert (int(k.start[0]), int(k.end[0])) == (T + 30, T + 40)
    api = cm.api
    names = [api.names[int(i)] for i in api.name_idx]
    assert names == ["cudaLaunchKernel_v7000", "cudaLaunchKernel_v7000", "cudaMemcpyAsync_v3020",
                     "cudaMalloc_v3020"]
    assert api.start.tolist() == [T + 28, T + 32, T + 41, T + 50]
    assert api.end.tolist() == [T + 31, T + 37, T + 44, T + 90]
    # launch_idx re-indexed into the clipped API table
    assert int(k.launch_idx[0]) == 0
    assert int(cm.memcpy["launch_idx"][0]) == 2
    assert (int(cm.memcpy["start"][0]), int(cm.memcpy["end"][0])) == (T + 45, T + 60)
    nv = cm.nvtx
    assert [nv.names[int(i)] for i in nv.name_idx] == ["outer", "inner"]
    assert nv.start.tolist() == [w0, T + 60] and nv.end.tolist() == [w1, T + 70]
    assert cm.info.row_counts["kernels"] == 1 and cm.info.row_counts["cuda_api"] == 4
    assert cm.trace_start == w0 and cm.trace_end == w1
    # the original model is untouched
    assert len(m.kernels) == 3 and int(m.kernels.launch_idx[1]) >= 0
    # a window that excludes a kernel's launch call turns its launch_idx into -1
    cm2 = clip_model(m, T + 99, T + 120)
    assert len(cm2.kernels) == 1 and int(cm2.kernels.launch_idx[0]) == -1
    # accounting on the clipped model: k2 alone → no idle
    r = analyze_accounting(cm)
    assert r.devices[0]["busy_ns"] == 10 and r.devices[0]["idle_ns"] == 0


# ------------------------------------------------------------------------------------------ window


def _warmup_dense_tail(tmp_path: Path, with_nvtx: bool = True):
    """1 s of sparse warm-up kernels (50 µs every 20 ms), 0.2 s dense decode (8 µs every 10 µs), then a
    1 s idle tail (the host sits in cudaDeviceSynchronize)."""
    b = TraceBuilder()
    b.process(PID)
    g = b.thread(PID, 1)
    nid = b.string("decode_kernel")
    warm = np.arange(0, S, 20 * MS, dtype=np.int64)
    dense = np.arange(S, S + 200 * MS, 10_000, dtype=np.int64)
    st = np.concatenate([warm, dense])
    en = np.concatenate([warm + 50_000, dense + 8_000])
    b.add_kernels_bulk(st, en, 0, 7, np.arange(1, st.shape[0] + 1), global_pid(PID), nid, nid)
    b.runtime(S + 200 * MS, int(2.2 * S), tid_g=g, name="cudaDeviceSynchronize_v3020", corr=10**7)
    if with_nvtx:
        b.nvtx_push_pop(S + 50 * MS, S + 60 * MS, "decode", tid_g=g)
        b.nvtx_push_pop(S + 100 * MS, S + 120 * MS, "decode", tid_g=g)
        b.nvtx_push_pop(S + 110 * MS, S + 115 * MS, "decode_inner", tid_g=g)
    return _load(b, tmp_path, "w.sqlite")


def test_auto_window_trims_warmup_and_tail(tmp_path: Path) -> None:
    m = _warmup_dense_tail(tmp_path)
    w = detect_window(m)
    assert w.method == "auto"
    assert (w.full_start_ns, w.full_end_ns) == (0, int(2.2 * S))
    assert w.start_ns == S and w.end_ns == S + 200 * MS - 10_000 + 8_000
    assert w.warmup_ns == S and w.tail_ns == int(2.2 * S) - w.end_ns
    assert w.steady_fraction == pytest.approx((w.end_ns - w.start_ns) / (2.2 * S), abs=1e-6)
    assert "warm-up" in w.reason and "tail" in w.reason
    d = w.to_dict()
    assert d["window_ns"] == w.end_ns - w.start_ns and d["method"] == "auto"
    # the clipped model holds only dense kernels
    cm = clip_model(m, w.start_ns, w.end_ns)
    assert len(cm.kernels) == 20_000


def test_full_window_when_no_warmup(tmp_path: Path) -> None:
    m = _load(_brief_fixture(), tmp_path)
    w = detect_window(m)
    assert w.method == "full" and (w.start_ns, w.end_ns) == (T - 8, T + 110)
    assert w.warmup_ns == 0 and w.tail_ns == 0 and w.steady_fraction == 1.0
    # uniformly dense trace → nothing to trim
    b = TraceBuilder()
    b.process(PID)
    nid = b.string("k")
    st = np.arange(0, 100 * MS, 10_000, dtype=np.int64)
    b.add_kernels_bulk(st, st + 6_000, 0, 7, np.arange(1, st.shape[0] + 1), global_pid(PID), nid, nid)
    m2 = _load(b, tmp_path, "u.sqlite")
    w2 = detect_window(m2)
    assert w2.method == "full" and "no warm-up" in w2.reason


def test_periodic_bursts_are_not_warmup(tmp_path: Path) -> None:
    """Bursts every 100 ms for 1 s, then a 50 ms denser burst: the earlier bursts carry 44 % of the GPU
    work, so they are kept (no trimming)."""
    b = TraceBuilder()
    b.process(PID)
    nid = b.string("k")
    bursts = [np.arange(i * 100 * MS, i * 100 * MS + 4 * MS, 20_000, dtype=np.int64) for i in range(10)]
    bursts.append(np.arange(S, S + 50 * MS, 20_000, dtype=np.int64))
    st = np.concatenate(bursts)
    b.add_kernels_bulk(st, st + 15_000, 0, 7, np.arange(1, st.shape[0] + 1), global_pid(PID), nid, nid)
    m = _load(b, tmp_path, "p.sqlite")
    w = detect_window(m)
    assert w.method == "full" and "workload" in w.reason


def test_override_and_nvtx_windows(tmp_path: Path) -> None:
    m = _warmup_dense_tail(tmp_path)
    w = detect_window(m, override=(S, S + 100 * MS))
    assert (w.method, w.start_ns, w.end_ns, w.warmup_ns) == ("override", S, S + 100 * MS, S)
    assert w.tail_ns == int(2.2 * S) - (S + 100 * MS)
    w = detect_window(m, override="-5:1000")
    assert (w.start_ns, w.end_ns) == (0, 1000) and "clipped" in w.reason
    with pytest.raises(InputError):
        detect_window(m, override=(10 * S, 11 * S))
    with pytest.raises(InputError):
        detect_window(m, override=(5, 5))
    assert parse_window("10:20") == (10, 20)
    for bad in ("10", "a:b", "20:10", "1:2:3"):
        with pytest.raises(InputError):
            parse_window(bad)
    w = detect_window(m, nvtx_range="decode")
    assert (w.method, w.start_ns, w.end_ns) == ("nvtx", S + 50 * MS, S + 120 * MS)
    assert w.details["nvtx_ranges"] == 2
    with pytest.raises(InputError):
        detect_window(m, nvtx_range="deco")   # exact names only
    (tmp_path / "n").mkdir()
    m2 = _warmup_dense_tail(tmp_path / "n", with_nvtx=False)
    with pytest.raises(InputError):
        detect_window(m2, nvtx_range="decode")


def test_synthetic_warmup_scenario(tmp_path: Path) -> None:
    from nsys_llm_explainer.synth import build_scenario

    try:
        facts = build_scenario("warmup_tail", str(tmp_path / "wt.sqlite"))
    except KeyError:
        pytest.skip("warmup_tail scenario not available")
    m = load_model(str(tmp_path / "wt.sqlite"))
    w = detect_window(m)
    assert w.method == "auto"
    # within 1 ms of the planted steady part (host-side bounds vs GPU activity)
    assert abs(w.start_ns - facts["steady_start_ns"]) < MS
    assert abs(w.end_ns - facts["steady_end_ns"]) < MS
    r = analyze_accounting(clip_model(m, w.start_ns, w.end_ns))
    for d in r.devices:
        assert sum(d["idle_parts"].values()) == d["idle_ns"] == d["window_ns"] - d["busy_ns"]
