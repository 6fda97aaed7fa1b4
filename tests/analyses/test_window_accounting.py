"""Steady-state window, model clipping, the device timeline (busy/idle) and the idle-cause attribution on
hand-built fixtures; every expected number is worked out by hand in the docstrings."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import built_scenario
from synth import TraceBuilder, global_pid

from nsys_llm_explainer.analyses.idle.causes import KINDS, analyze_idle_causes
from nsys_llm_explainer.analyses.idle.gpu_time import device_time, gpu_time_result
from nsys_llm_explainer.analyses.idle.range_names import normalize_range_name
from nsys_llm_explainer.analyses.nvtx.tree import build_tree
from nsys_llm_explainer.analyses.trace.window import WindowResult, detect_window
from nsys_llm_explainer.config.window import check_window
from nsys_llm_explainer.errors import InputError
from nsys_llm_explainer.jsonable import from_json
from nsys_llm_explainer.model.clip import clip_model
from nsys_llm_explainer.model.timeline import build_timelines
from nsys_llm_explainer.pipeline import load_model

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


def _causes_fixture() -> TraceBuilder:
    """One thread g, device 0, all times + T:

    * launch A: call [0,6) → kernel ``gemm`` [4,10) (first launch of ``gemm``: module_load)
    * cudaStreamSynchronize [10,25); launch B: call [25,31) → ``gemm`` [30,40)
    * NVTX push/pop ``step_3`` [40,100); cudaMalloc [50,90); cudaMemcpyAsync [91,93) → pageable HtoD copy
      [92,96); launch C: call [95,99) → ``gemm`` [100,110); cudaDeviceSynchronize [110,120)

    Window [0,120) = 120, busy 6+10+10 = 26, idle 94. Gaps and their causes (precedence of docs/MODEL.md):
    [0,4) module_load 4 · [10,30) sync 15 + launch 5 · [40,100) copy 4 [92,96), queued 1 [99,100),
    alloc 40, pageable_memcpy 1 [91,92), launch 3 [96,99), nvtx ``step_N`` 11 ([40,50) + [90,91))
    · trailing [110,120) sync 10 (thread of the kernel before it).
    """
    b = TraceBuilder()
    b.process(PID)
    g = b.thread(PID, 101)
    b.launch(T + 0, T + 6, T + 4, T + 10, pid=PID, tid=101, name="gemm")
    b.runtime(T + 10, T + 25, tid_g=g, name="cudaStreamSynchronize_v3020")
    b.launch(T + 25, T + 31, T + 30, T + 40, pid=PID, tid=101, name="gemm")
    b.nvtx_push_pop(T + 40, T + 100, "step_3", tid_g=g)
    b.runtime(T + 50, T + 90, tid_g=g, name="cudaMalloc_v3020")
    corr = b.runtime(T + 91, T + 93, tid_g=g, name="cudaMemcpyAsync_v3020")
    b.memcpy(T + 92, T + 96, pid=PID, bytes=4096, copy_kind=1, src_kind=0, dst_kind=2, corr=corr)
    b.launch(T + 95, T + 99, T + 100, T + 110, pid=PID, tid=101, name="gemm")
    b.runtime(T + 110, T + 120, tid_g=g, name="cudaDeviceSynchronize_v3020")
    return b


def _causes(m, w0, w1):
    tls = build_timelines(m, w0, w1)
    return tls, analyze_idle_causes(m, m, tls, build_tree(m.nvtx))


def test_timeline_busy_idle_and_gaps(tmp_path: Path) -> None:
    m = _load(_causes_fixture(), tmp_path)
    tls = build_timelines(m, T, T + 120)
    tl = tls[0]
    assert (tl.window_ns, tl.busy_ns, tl.idle_ns) == (120, 26, 94)
    assert (tl.copy_busy_ns, tl.copy_only_ns, tl.kernel_count) == (4, 4, 3)
    g = tl.gaps()
    assert list(zip((g.start - T).tolist(), (g.end - T).tolist())) == [(0, 4), (10, 30), (40, 100), (110, 120)]
    assert g.prev_row[0] == -1 and g.next_row[-1] == -1


def test_idle_causes_hand_computed(tmp_path: Path) -> None:
    m = _load(_causes_fixture(), tmp_path)
    _, r = _causes(m, T, T + 120)
    (d,) = r.devices
    got = {(c.kind, c.detail): c.ns for c in d.causes}
    assert got == {
        ("module_load", "cudaLaunchKernel"): 4, ("sync", "cudaStreamSynchronize"): 15,
        ("sync", "cudaDeviceSynchronize"): 10, ("launch", "cudaLaunchKernel"): 8,
        ("copy", "Host-to-Device (pageable)"): 4, ("queued", ""): 1, ("alloc", "cudaMalloc"): 40,
        ("pageable_memcpy", "cudaMemcpyAsync"): 1, ("nvtx", "step_N"): 11,
    }
    assert sum(got.values()) == d.idle_ns == 94
    launch = next(c for c in d.causes if c.kind == "launch")
    assert launch.gap_count == 2 and launch.examples[0].ns == 5
    assert d.gap_cause(2) == ("alloc", "cudaMalloc") and d.gap_cause(3) == ("sync", "cudaDeviceSynchronize")
    assert next(c for c in d.causes if c.kind == "module_load").one_time


def test_gpu_time_steady_and_full(tmp_path: Path) -> None:
    """Steady window [T+10, T+110) of the fixture: busy [30,40) + [100,110) = 20 of 100; full = 26 of 120."""
    m = _load(_causes_fixture(), tmp_path)
    steady = clip_model(m, T + 10, T + 110)
    st = build_timelines(steady, T + 10, T + 110)
    full = build_timelines(m, T, T + 120)
    causes = analyze_idle_causes(m, steady, st, build_tree(m.nvtx))
    by_dev = {c.device_id: c.gap_cause for c in causes.devices}
    g = gpu_time_result([device_time(st[k], full[k], by_dev[k], 2) for k in sorted(st)], False)
    (d,) = g.devices
    assert (d.window_ns, d.busy_ns, d.idle_ns, d.busy_pct) == (100, 20, 80, 20.0)
    assert (d.full.window_ns, d.full.busy_ns, d.full.idle_ns) == (120, 26, 94)
    assert d.kernel_count == 2 and d.launches_per_s == pytest.approx(2 / 100e-9)
    assert [(x.start_ns - T, x.duration_ns, x.cause_kind) for x in d.largest_gaps] == [(40, 60, "alloc"),
                                                                                      (10, 20, "sync")]
    # first launches are found on the whole capture: B and C are not first launches inside the window
    assert causes.devices[0].ns_of("module_load") == 0


def test_unknown_thread_and_edges(tmp_path: Path) -> None:
    """A kernel with no launch call: its gaps are ``unknown``; a window wider than the activity has leading
    and trailing idle."""
    b = TraceBuilder()
    b.process(PID)
    b.kernel(T + 10, T + 20, pid=PID, name="k", corr=999)
    m = _load(b, tmp_path)
    tls, r = _causes(m, T, T + 50)
    (d,) = r.devices
    assert (d.window_ns, d.busy_ns, d.idle_ns) == (50, 10, 40)
    assert [(c.kind, c.ns, c.gap_count) for c in d.causes] == [("unknown", 40, 2)]


def test_multi_device_overlap_is_union(tmp_path: Path) -> None:
    """Device 0: kernels [0,10) and [5,20) on two streams → busy 20 (union, not 25); device 1: [0,5) →
    busy 5; both over the same window [0,20)."""
    b = TraceBuilder()
    b.process(PID)
    b.launch(T - 5, T - 1, T + 0, T + 10, pid=PID, tid=101, name="a", stream=1)
    b.launch(T - 4, T - 2, T + 5, T + 20, pid=PID, tid=101, name="b", stream=2)
    b.launch(T - 3, T - 2, T + 0, T + 5, pid=PID, tid=101, name="c", device=1)
    m = _load(b, tmp_path)
    tls = build_timelines(m, T, T + 20)
    assert {d: (t.busy_ns, t.idle_ns) for d, t in tls.items()} == {0: (20, 0), 1: (5, 15)}
    _, r = _causes(m, T, T + 20)
    d1 = next(d for d in r.devices if d.device_id == 1)
    assert sum(c.ns for c in d1.causes) == 15


def test_normalize_range_name() -> None:
    assert normalize_range_name("layer_12_attn") == "layer_N_attn"
    assert normalize_range_name("h2d_copy 3") == "h2d_copy N"
    assert normalize_range_name("nvFusion42") == "nvFusionN"
    assert KINDS[0] == "copy" and KINDS[-1] == "unknown"


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
    assert int(cm.memcpy.launch_idx[0]) == 2
    assert (int(cm.memcpy.start[0]), int(cm.memcpy.end[0])) == (T + 45, T + 60)
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
    # the timeline of the clipped model over the window: k2 alone is busy, the rest of the window is idle
    tl = build_timelines(cm, w0, w1)[0]
    assert (tl.busy_ns, tl.idle_ns) == (10, (w1 - w0) - 10)


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
    # details: 200 bins of 11 ms; the 18 bins wholly inside the dense 200 ms are 80 % busy (the reference), the
    # threshold 25 % of it; warm-up 50 × 50 µs in 1 s, dense 20 000 × 8 µs in 199.998 ms, nothing in the tail
    det = d["details"]
    assert list(det) == ["bins", "bin_ns", "reference_busy_pct", "active_threshold_pct", "active_bins",
                         "candidate_start_ns", "candidate_end_ns", "warmup_busy_pct", "steady_busy_pct",
                         "tail_busy_pct", "warmup_share_of_busy_pct", "tail_share_of_busy_pct"]
    assert det == {"bins": 200, "bin_ns": 11 * MS, "reference_busy_pct": 80.0, "active_threshold_pct": 20.0,
                   "active_bins": 18, "candidate_start_ns": w.start_ns, "candidate_end_ns": w.end_ns,
                   "warmup_busy_pct": 0.25, "steady_busy_pct": 80.0, "tail_busy_pct": 0.0,
                   "warmup_share_of_busy_pct": 1.54, "tail_share_of_busy_pct": 0.0}
    assert w.details.steady_busy_pct == 80.0 and w.details.nvtx_name is None
    assert from_json(WindowResult, json.loads(json.dumps(d)), "window") == w   # report.json round trip
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
    w = detect_window(m, override=check_window("-5:1000"))
    assert (w.start_ns, w.end_ns) == (0, 1000) and "clipped" in w.reason
    with pytest.raises(InputError):
        detect_window(m, override=(10 * S, 11 * S))
    with pytest.raises(InputError):
        check_window((5, 5))      # the one check of a window given as a pair (options, the API)
    assert check_window("10:20") == (10, 20)
    for bad in ("10", "a:b", "20:10", "1:2:3"):
        with pytest.raises(InputError):
            check_window(bad)
    w = detect_window(m, nvtx_range="decode")
    assert (w.method, w.start_ns, w.end_ns) == ("nvtx", S + 50 * MS, S + 120 * MS)
    assert w.details.nvtx_ranges == 2 and w.details.nvtx_name == "decode" and w.details.bins is None
    assert json.dumps(w.to_dict()["details"]) == '{"nvtx_name": "decode", "nvtx_ranges": 2}'
    assert detect_window(m, override=(S, 2 * S)).to_dict()["details"] == {}
    with pytest.raises(InputError):
        detect_window(m, nvtx_range="deco")   # exact names only
    (tmp_path / "n").mkdir()
    m2 = _warmup_dense_tail(tmp_path / "n", with_nvtx=False)
    with pytest.raises(InputError):
        detect_window(m2, nvtx_range="decode")


def test_synthetic_warmup_scenario(tmp_path: Path) -> None:

    try:
        facts = built_scenario("warmup_tail", str(tmp_path / "wt.sqlite"))
    except KeyError:
        pytest.skip("warmup_tail scenario not available")
    m = load_model(str(tmp_path / "wt.sqlite"))
    w = detect_window(m)
    assert w.method == "auto"
    # within 1 ms of the planted steady part (host-side bounds vs GPU activity)
    assert abs(w.start_ns - facts["steady_start_ns"]) < MS
    assert abs(w.end_ns - facts["steady_end_ns"]) < MS
    st = clip_model(m, w.start_ns, w.end_ns)
    tls = build_timelines(st, w.start_ns, w.end_ns)
    r = analyze_idle_causes(m, st, tls, build_tree(m.nvtx))
    for d in r.devices:
        assert sum(c.ns for c in d.causes) == d.idle_ns == d.window_ns - d.busy_ns


def test_timeline_bins_hand_computed(tmp_path: Path) -> None:
    """The causes fixture over [T, T+120) in 4 bins of 30 ns (see _causes_fixture for the pieces)."""
    m = _load(_causes_fixture(), tmp_path)
    tls = build_timelines(m, T, T + 120)
    r = analyze_idle_causes(m, m, tls, build_tree(m.nvtx), n_bins=4)
    (b,) = r.bins
    assert [e - T for e in b.edges_ns] == [0, 30, 60, 90, 120]
    assert b.busy_ns == (6, 10, 0, 10) and b.copy_ns == (0, 0, 0, 4)
    assert b.idle_ns_by_kind == {
        "module_load": (4, 0, 0, 0), "sync": (15, 0, 0, 10), "launch": (5, 0, 0, 3), "nvtx": (0, 10, 0, 1),
        "alloc": (0, 10, 30, 0), "pageable_memcpy": (0, 0, 0, 1), "copy": (0, 0, 0, 4), "queued": (0, 0, 0, 1)}


def test_zero_length_kernels_keep_the_full_window(tmp_path: Path) -> None:
    """25 zero-length kernels (at t = 10 + 100 i µs, each launched by a 2 µs call at t − 10 µs): enough kernels to look
    for a steady state, but no busy time in any bin, so the whole capture [0, 2 410 µs) is kept, and the reason
    says why."""
    b = TraceBuilder()
    b.process(PID)
    for i in range(25):
        t = 10 * T + i * 100 * T
        b.launch(t - 10 * T, t - 8 * T, t, t, pid=PID, tid=1, name="k")
    w = detect_window(_load(b, tmp_path))
    assert (w.method, w.start_ns, w.end_ns, w.warmup_ns, w.tail_ns) == ("full", 0, 2_410 * T, 0, 0)
    assert w.reason == "Full trace kept: kernels have zero total duration."



def _phases(tmp_path: Path, lead_every_ms: float, *, mirror: bool = False, lead_name: str = "k"):
    """A sparse part [0, 1 s) (1 ms kernels ``lead_name`` every ``lead_every_ms`` ms from 0), a dense phase
    [1, 1.5) s (500 back-to-back 1 ms kernels ``k``) and a second sparse part [1.5, 4) s (250 kernels ``k`` of 1 ms,
    from 1.509 s every 10 ms: the last ends at 4 s, 10 % busy); ``mirror``: the same trace reversed in time
    (t → 4 s − t)."""
    lead = np.arange(0, 1_000, lead_every_ms) * MS
    st = np.concatenate([lead, S + np.arange(500) * MS, int(1.509 * S) + np.arange(250) * 10 * MS]).astype(np.int64)
    en = st + MS
    if mirror:
        st, en = 4 * S - en, 4 * S - st
    b = TraceBuilder()
    b.process(PID)
    nid, lid = b.string("k"), b.string(lead_name)
    names = np.where(np.arange(st.shape[0]) < lead.shape[0], lid, nid)
    b.add_kernels_bulk(st, en, 0, 7, np.arange(1, st.shape[0] + 1), global_pid(PID), names, names)
    return detect_window(_load(b, tmp_path, f"ph{lead_every_ms}{mirror}{lead_name}.sqlite"))


@pytest.mark.parametrize("mirror", [False, True])
def test_a_sparse_part_repeated_beyond_the_densest_phase_is_not_warm_up(tmp_path: Path, mirror: bool) -> None:
    """Rule (5c). 80 kernels every 12.5 ms in [0, 1 s): 80 ms busy = 8.0 %; all busy 80 + 500 + 250 = 830 ms. The
    200 bins of 20 ms: the dense phase's 25 bins at 100 % hold 500 ms (over half), so the reference is 100 % and
    the threshold 25 %: the sparse bins (≤ 2 ms = 10 %) are inactive and the candidate is the dense phase [1, 1.5) s.
    The 1 s part before it holds 80 / 830 = 9.64 % ≤ 25 % of the busy time (rule 5 would trim it) and is under half
    as busy as [1, 4) s (750 / 3,000 = 25 %: 8 < 12.5, rule 5b would trim it); but the part after the phase,
    [1.5, 4) s = 2.5 s ≥ 1 s, holds 250 / 830 = 30.1 % > 25 % of the busy time (workload), and its first 1 s,
    [1.5, 2.5) s, runs kernels named ``k`` (all of the lead's kernel time) at 100 ms = 10.0 %; 8.0 ≥ ½ × 10.0: the
    sparse part is kept. Mirrored in time, the same holds for the tail against [1.5, 2.5) s."""
    w = _phases(tmp_path, 12.5, mirror=mirror)
    assert (w.method, w.start_ns, w.end_ns, w.warmup_ns, w.tail_ns) == ("full", 0, 4 * S, 0, 0)
    assert (w.details.candidate_start_ns, w.details.candidate_end_ns) == ((S, int(1.5 * S)) if not mirror
                                                                          else (int(2.5 * S), 3 * S))
    assert w.reason == (f"Full trace kept: the {'trailing' if mirror else 'leading'} part (GPU busy 8.0%) repeats "
                        "the same length on the other side of the densest stretch (GPU busy 10.0%): 100.0% of its "
                        "kernel time is of kernel names running there, and it is not under half as busy, so it is "
                        "treated as part of the workload, not warm-up or tail.")


@pytest.mark.parametrize("mirror", [False, True])
@pytest.mark.parametrize("every, name, busy", [(50.0, "k", "2.0"), (12.5, "autotune_gemm", "8.0")])
def test_a_warm_up_unlike_the_work_beyond_the_densest_phase_is_still_trimmed(tmp_path: Path, mirror: bool,
                                                                            every: float, name: str,
                                                                            busy: str) -> None:
    """As above with (a) 20 kernels ``k`` every 50 ms in [0, 1 s): 20 ms busy = 2.0 %, under ½ × 10.0 % of the same
    length after the dense phase (and under ½ × (750 / 3,000 = 25 %) of what it would leave); (b) 80 kernels every
    12.5 ms (8.0 %) named ``autotune_gemm``, a name that never runs after the dense phase (0 % of its kernel time
    < 50 %). Either is a warm-up, trimmed to the dense phase's first kernel at 1 s (mirrored: a tail trimmed after
    its last kernel at 3 s)."""
    w = _phases(tmp_path, every, mirror=mirror, lead_name=name)
    assert w.method == "auto"
    if not mirror:
        assert (w.start_ns, w.end_ns, w.warmup_ns, w.tail_ns) == (S, 4 * S, S, 0)
        assert w.reason.startswith(f"Auto-detected window: trimmed 1,000.000 ms of warm-up (GPU busy {busy}%)")
    else:
        assert (w.start_ns, w.end_ns, w.warmup_ns, w.tail_ns) == (0, 3 * S, 0, S)
        assert w.reason.startswith(f"Auto-detected window: trimmed 1,000.000 ms of tail (GPU busy {busy}%)")
