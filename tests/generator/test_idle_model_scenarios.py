"""The idle-model scenarios of the synthetic generator have what their planted facts claim.

Everything is read back from the written SQLite file with plain ``sqlite3`` SQL (never with the package's
analysis code) and compared with the facts ``build_scenario`` returns.
"""

from __future__ import annotations

import re
import sqlite3
import statistics
from pathlib import Path
from typing import Any, Dict, List, Sequence, Tuple

import pytest
from synth import FLAVORS, build_scenario
from synth.scenarios import CAUSES

from nsys_llm_explainer.vocabulary.cause_kinds import KINDS

NEW = (
    "pageable_async_copy",
    "async_copies",
    "warmup_then_busy",
    "first_launch",
    "fp32_gemm",
    "nvtx_host_range",
    "queued_dependency",
    "training_step",
)
KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"
RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"
MEMCPY = "CUPTI_ACTIVITY_KIND_MEMCPY"
MS = 1_000_000
US = 1_000
Iv = Tuple[int, int]

_CACHE: Dict[str, Tuple[Dict[str, Any], Path]] = {}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory):
    def get(name: str) -> Tuple[Dict[str, Any], sqlite3.Connection]:
        if name not in _CACHE:
            p = tmp_path_factory.mktemp(name) / f"{name}.sqlite"
            _CACHE[name] = (build_scenario(name, str(p), seed=2), p)
        facts, p = _CACHE[name]
        return facts, sqlite3.connect(f"file:{p}?mode=ro&immutable=1", uri=True)

    return get


# ------------------------------------------------------------------------------------------ helpers
def _union(iv: Sequence[Iv]) -> List[Iv]:
    out: List[Iv] = []
    for s, e in sorted(iv):
        if out and s <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((s, e))
    return out


def _overlap(merged: Sequence[Iv], a: int, b: int) -> int:
    return sum(max(0, min(e, b) - max(s, a)) for s, e in merged if e > a and s < b)


def _tables(con: sqlite3.Connection) -> set:
    return {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}


def _busy(con: sqlite3.Connection) -> List[Iv]:
    return _union([(s, e) for s, e in con.execute(f"SELECT start, end FROM {KERNEL}")])


def _full_window(con: sqlite3.Connection) -> Iv:
    """First start → last end of kernels, CUDA API, memcpy/memset/sync rows and NVTX ranges."""
    tables = _tables(con)
    parts = []
    for t in (KERNEL, RUNTIME, MEMCPY, "CUPTI_ACTIVITY_KIND_MEMSET", "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"):
        if t in tables:
            parts.append(f"SELECT min(start) AS s, max(end) AS e FROM {t}")
    if "NVTX_EVENTS" in tables:
        parts.append(
            "SELECT min(start), max(end) FROM NVTX_EVENTS WHERE eventType IN (59, 60) AND end IS NOT NULL"
        )
    return con.execute(f"SELECT min(s), max(e) FROM ({' UNION ALL '.join(parts)})").fetchone()


def _queued(con: sqlite3.Connection, busy: Sequence[Iv], w0: int, w1: int) -> List[Iv]:
    """Parts of the idle gaps after the launch call of the kernel opening the next busy block returned
    (the trailing gap has no next block)."""
    launch_end = dict(
        con.execute(
            f"SELECT k.start, r.end FROM {KERNEL} k JOIN {RUNTIME} r ON r.correlationId = k.correlationId "
            "AND (r.globalTid & 0xFFFFFFFFFF000000) = k.globalPid"
        ).fetchall()
    )
    edges = [w0] + [x for iv in busy for x in iv] + [w1]
    out = []
    for gs, ge in zip(edges[0::2], edges[1::2]):
        if gs < ge < w1:
            q0 = min(max(launch_end[ge], gs), ge)
            if q0 < ge:
                out.append((q0, ge))
    return out


def _idle_inside(busy: Sequence[Iv], queued: Sequence[Iv], spans: Sequence[Iv]) -> int:
    """Idle ns inside ``spans`` that is neither busy nor queued."""
    return sum((e - s) - _overlap(busy, s, e) - _overlap(queued, s, e) for s, e in _union(spans))


def _launched(con: sqlite3.Connection, where: str = "1") -> List[Tuple[Any, ...]]:
    """(kernel start, end, name, launch start, launch end, API name, thread name) per kernel."""
    return con.execute(
        f"SELECT k.start, k.end, s.value, r.start, r.end, api.value, tn.value FROM {KERNEL} k "
        f"JOIN StringIds s ON s.id = k.demangledName "
        f"JOIN {RUNTIME} r ON r.correlationId = k.correlationId "
        "AND (r.globalTid & 0xFFFFFFFFFF000000) = k.globalPid "
        "JOIN StringIds api ON api.id = r.nameId "
        "LEFT JOIN ThreadNames t ON t.globalTid = r.globalTid LEFT JOIN StringIds tn ON tn.id = t.nameId "
        f"WHERE {where} ORDER BY k.start"
    ).fetchall()


def _calls(con: sqlite3.Connection, like: str) -> List[Tuple[int, int, str, int]]:
    return con.execute(
        f"SELECT r.start, r.end, s.value, r.eventClass FROM {RUNTIME} r JOIN StringIds s ON s.id = r.nameId "
        "WHERE s.value LIKE ? ORDER BY r.start",
        (like,),
    ).fetchall()


def _pct(part: int, whole: int) -> float:
    return 100.0 * part / whole


# ------------------------------------------------------------------------------------------ generic
@pytest.mark.parametrize("name", NEW)
def test_facts_are_consistent_with_the_file(built, name: str) -> None:
    f, con = built(name)
    assert f["cause"] in CAUSES and f["cause_kind"] in KINDS
    assert con.execute(f"SELECT count(*) FROM {KERNEL}").fetchone()[0] == f["kernel_count"]
    busy = _busy(con)
    (dev,) = f["devices"].values()
    assert sum(e - s for s, e in busy) == dev["busy_ns"]
    assert list(_full_window(con)) == f["full_idle_window_ns"]
    w0, w1 = f["idle_window_ns"]
    assert f["window_ns"] == w1 - w0 and f["window_busy_ns"] == _overlap(busy, w0, w1)
    # the planted idle model: every idle ns charged once; the expected cause dominates
    by_kind, by_cause = f["idle_by_kind_ns"], f["idle_by_cause_ns"]
    assert set(by_kind) <= set(KINDS) and all(v > 0 for v in by_kind.values())
    assert sum(by_kind.values()) == f["window_ns"] - f["window_busy_ns"]
    assert by_kind == {k: sum(v.values()) for k, v in by_cause.items()}
    assert max(by_kind, key=lambda k: by_kind[k]) == f["cause_kind"] == f["top_idle_kind"]
    top = by_cause[f["cause_kind"]]
    assert max(top, key=lambda d: top[d]) == f["cause_detail"] == f["top_idle_detail"]
    con.close()


@pytest.mark.slow   # every new scenario in two more export flavors
@pytest.mark.parametrize("flavor", ["2021.5", "2026.2"])
def test_other_flavors_build(tmp_path: Path, flavor: str) -> None:
    assert flavor in FLAVORS
    for name in NEW:
        p = tmp_path / f"{name}.sqlite"
        f = build_scenario(name, str(p), seed=5, flavor=flavor)
        con = sqlite3.connect(str(p))
        assert con.execute(f"SELECT count(*) FROM {KERNEL}").fetchone()[0] == f["kernel_count"]
        assert sum(f["idle_by_kind_ns"].values()) == f["window_ns"] - f["window_busy_ns"]
        assert f["top_idle_kind"] == f["cause_kind"]
        con.close()


@pytest.mark.slow   # builds three scenarios twice
def test_idle_model_scenarios_are_deterministic(tmp_path: Path) -> None:
    for name in ("pageable_async_copy", "first_launch", "queued_dependency"):
        a = build_scenario(name, str(tmp_path / "a.sqlite"), seed=7)
        b = build_scenario(name, str(tmp_path / "b.sqlite"), seed=7)
        assert a == b
        assert (tmp_path / "a.sqlite").read_bytes() == (tmp_path / "b.sqlite").read_bytes()


# ------------------------------------------------------------------------------------------ per scenario
def test_pageable_async_copy(built) -> None:
    f, con = built("pageable_async_copy")
    rows = con.execute(
        f"SELECT m.start, m.end, m.copyKind, m.srcKind, m.dstKind, m.bytes, r.start, r.end, s.value FROM {MEMCPY} m "
        f"JOIN {RUNTIME} r ON r.correlationId = m.correlationId AND (r.globalTid & 0xFFFFFFFFFF000000) = m.globalPid "
        "JOIN StringIds s ON s.id = r.nameId"
    ).fetchall()
    assert len(rows) == f["pageable_call_count"] == f["steps"]
    busy = _busy(con)
    staging = total_bytes = 0
    for c0, c1, kind, src, dst, nbytes, a0, a1, api in rows:
        total_bytes += nbytes
        assert (kind, src, dst, api) == (1, 0, 2, "cudaMemcpyAsync_v3020")
        assert a0 < c0 < c1 < a1 and a1 - a0 >= 4 * MS
        assert (c1 - c0) < 0.25 * (a1 - a0)  # the copy is a short part of the call
        assert _overlap(busy, a0, a1) == 0  # the GPU has no kernel while the host is blocked
        staging += (a1 - a0) - (c1 - c0)
    assert (
        staging
        == f["pageable_staging_ns_total"]
        == f["idle_by_cause_ns"]["pageable_memcpy"]["cudaMemcpyAsync"]
    )
    assert f["idle_by_cause_ns"]["copy"]["Host-to-Device (pageable)"] == f["pageable_copy_ns_total"]
    w0, w1 = _full_window(con)
    assert 35.0 <= _pct(_overlap(busy, w0, w1), w1 - w0) <= 45.0
    con.close()


def test_async_copies(built) -> None:
    f, con = built("async_copies")
    busy = _busy(con)
    w0, w1 = _full_window(con)
    copies = con.execute(f"SELECT start, end, copyKind, srcKind, dstKind, globalPid FROM {MEMCPY}").fetchall()
    h2d = [(s, e) for s, e, k, src, dst, _ in copies if (k, src, dst) == (1, 1, 2)]
    d2d = [(s, e) for s, e, k, src, dst, _ in copies if (k, src, dst) == (8, 2, 2)]
    assert len(h2d) + len(d2d) == len(copies) and len(h2d) == f["h2d_count"]
    assert all(_overlap(busy, s, e) == 0 for s, e, *_ in copies)
    h2d_ns, d2d_ns = sum(e - s for s, e in h2d), sum(e - s for s, e in d2d)
    assert 55.0 <= _pct(h2d_ns, w1 - w0) <= 65.0 and 30.0 <= _pct(d2d_ns, w1 - w0) <= 40.0
    assert 1.0 <= _pct(_overlap(busy, w0, w1), w1 - w0) <= 3.0
    assert f["idle_by_cause_ns"]["copy"] == {"Host-to-Device": h2d_ns, "Device-to-Device": d2d_ns}
    # the host is outside CUDA calls while the copies run
    gpid = copies[0][5]
    calls = _union(
        [
            (s, e)
            for s, e in con.execute(
                f"SELECT start, end FROM {RUNTIME} WHERE (globalTid & 0xFFFFFFFFFF000000) = ?", (gpid,)
            )
        ]
    )
    in_call = sum(_overlap(calls, s, e) for s, e, *_ in copies)
    assert in_call < 0.01 * (h2d_ns + d2d_ns)
    con.close()


def test_warmup_then_busy(built) -> None:
    f, con = built("warmup_then_busy")
    s0, s1 = f["steady_start_ns"], f["steady_end_ns"]
    busy = _busy(con)
    w0, _ = _full_window(con)
    warm = con.execute(f"SELECT count(*) FROM {KERNEL} WHERE end <= ?", (s0,)).fetchone()[0]
    assert 200 <= warm <= 400 and warm == f["warmup_kernel_count"]
    assert s0 - w0 >= 1300 * MS and 900 * MS <= s1 - s0 <= 1200 * MS
    assert _pct(_overlap(busy, w0, s0), s0 - w0) < 5.0
    assert _pct(_overlap(busy, s0, s1), s1 - s0) >= f["steady_busy_pct_min"] == 99
    # lazy loading: the first launch of every kernel name is slow; the steady loop is launched well ahead
    first: Dict[str, int] = {}
    later: List[int] = []
    for _ks, _ke, name, a0, a1, _api, _t in _launched(con):
        if name in first:
            later.append(a1 - a0)
        else:
            first[name] = a1 - a0
    assert len(first) == f["first_launch_count"] and all(2 * MS <= d <= 15 * MS for d in first.values())
    assert max(later) < 50 * US
    assert all(3 * MS <= e - s <= 6 * MS for s, e, _, _ in _calls(con, "cuModuleLoadData"))
    ahead = [ks - a1 for ks, _ke, _n, _a0, a1, _api, _t in _launched(con, f"k.start >= {s0}")]
    assert sum(a > 0 for a in ahead) >= 0.99 * len(ahead) and statistics.median(ahead) > 1 * MS
    con.close()


def test_first_launch(built) -> None:
    f, con = built("first_launch")
    per_name: Dict[str, List[Tuple[int, int, str]]] = {}
    for _ks, _ke, name, a0, a1, api, _t in _launched(con):
        per_name.setdefault(name, []).append((a0, a1, api))
    assert len(per_name) == f["kernel_names"] == 30
    assert all(1 <= len(v) <= 2 for v in per_name.values())
    for calls in per_name.values():
        a0, a1, api = calls[0]
        if api.startswith("cudaLaunchKernel"):
            assert 2 * MS <= a1 - a0 <= 15 * MS
        assert all(b1 - b0 < 20 * US for b0, b1, _ in calls[1:])
    loads = _calls(con, "cu%Load%")
    assert {n for _, _, n, _ in loads} == {"cuModuleLoadData", "cuLibraryLoadData"}
    assert (
        all(e - s >= 3 * MS and cls == 1 for s, e, _, cls in loads)
        and len(loads) == f["module_load_call_count"]
    )
    # GPU idle inside one-time calls (module loads + first launches) = the planted module_load idle
    busy = _busy(con)
    one_time = [(s, e) for s, e, _, _ in loads] + [(v[0][0], v[0][1]) for v in per_name.values()]
    w0, w1 = _full_window(con)
    idle = _idle_inside(busy, _queued(con, busy, w0, w1), one_time)
    assert idle == f["idle_by_kind_ns"]["module_load"]
    assert idle > 0.9 * ((w1 - w0) - _overlap(busy, w0, w1))
    con.close()


def test_fp32_gemm(built) -> None:
    f, con = built("fp32_gemm")
    assert con.execute("SELECT name FROM TARGET_INFO_GPU").fetchall() == [("NVIDIA A100-SXM4-80GB",)]
    by_name = dict(
        con.execute(
            f"SELECT s.value, sum(k.end - k.start) FROM {KERNEL} k JOIN StringIds s ON s.id = k.shortName "
            "GROUP BY s.value"
        ).fetchall()
    )
    share = by_name["ampere_sgemm_128x64_nn"] / sum(by_name.values())
    assert 0.85 <= share <= 0.91 and share == pytest.approx(f["fp32_gemm_share"])
    assert all(n == "ampere_sgemm_128x64_nn" or n == "vectorized_elementwise_kernel" for n in by_name)
    w0, w1 = _full_window(con)
    assert _pct(_overlap(_busy(con), w0, w1), w1 - w0) >= f["busy_pct_min"] == 99
    con.close()


def test_nvtx_host_range(built) -> None:
    f, con = built("nvtx_host_range")
    ranges = con.execute(
        "SELECT start, end, text, globalTid FROM NVTX_EVENTS WHERE eventType = 59 AND text LIKE 'load_layer_%'"
    ).fetchall()
    assert len(ranges) == f["range_count"] == f["steps"] * f["layers"]
    assert all(re.fullmatch(r"load_layer_\d+_weights", t) for _, _, t, _ in ranges)
    assert len({t for _, _, t, _ in ranges}) == f["layers"]
    assert all(0.8 * MS <= e - s <= 1.3 * MS for s, e, _, _ in ranges)
    inside = con.execute(
        f"SELECT count(*) FROM {RUNTIME} r JOIN NVTX_EVENTS n ON n.globalTid = r.globalTid "
        "AND n.eventType = 59 AND n.text LIKE 'load_layer_%' AND r.end > n.start AND r.start < n.end"
    ).fetchone()[0]
    assert inside == 0  # no CUDA call inside the ranges
    reads = con.execute(
        "SELECT count(*) FROM OSRT_API o JOIN StringIds s ON s.id = o.nameId JOIN NVTX_EVENTS n "
        "ON n.globalTid = o.globalTid AND n.text LIKE 'load_layer_%' AND o.start >= n.start AND o.end <= n.end "
        "WHERE s.value = 'read'"
    ).fetchone()[0]
    assert reads == len(ranges)
    busy = _busy(con)
    w0, w1 = _full_window(con)
    assert 4.0 <= _pct(_overlap(busy, w0, w1), w1 - w0) <= 7.0
    idle_in = _idle_inside(busy, _queued(con, busy, w0, w1), [(s, e) for s, e, _, _ in ranges])
    assert idle_in == f["idle_by_cause_ns"]["nvtx"]["load_layer_N_weights"]
    # the ranges cover the long idle gaps
    ivs = _union([(s, e) for s, e, _, _ in ranges])
    gaps = [(a[1], b[0]) for a, b in zip(busy, busy[1:]) if b[0] - a[1] > 500 * US]
    assert gaps and all(_overlap(ivs, s, e) >= 0.8 * (e - s) for s, e in gaps)
    con.close()


def test_queued_dependency(built) -> None:
    f, con = built("queued_dependency")
    streams = [r[0] for r in con.execute(f"SELECT DISTINCT streamId FROM {KERNEL} ORDER BY 1")]
    assert streams == f["streams"] == [7, 13]
    waits = con.execute(
        "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION y JOIN "
        f"{RUNTIME} r ON r.correlationId = y.correlationId JOIN StringIds s ON s.id = r.nameId "
        "WHERE y.syncType = 2 AND s.value = 'cudaStreamWaitEvent_v3020'"
    ).fetchone()[0]
    assert waits == f["event_wait_count"] == f["steps"] * f["pairs_per_step"] * 2
    ks = _launched(con)
    busy = _busy(con)
    w0, w1 = _full_window(con)
    assert 55.0 <= _pct(_overlap(busy, w0, w1), w1 - w0) <= 65.0
    # each idle gap is queued from the moment the next kernel's launch call returned (no copies here)
    queued = sum(e - s for s, e in _queued(con, busy, w0, w1))
    assert queued == f["idle_by_kind_ns"]["queued"]
    assert queued >= 0.95 * ((w1 - w0) - _overlap(busy, w0, w1))
    late = [k[0] - k[4] for k in ks]
    assert statistics.median(late) > 100 * US  # launch calls return long before the kernels start
    con.close()


def test_training_step(built) -> None:
    f, con = built("training_step")
    names = [
        r[0] for r in con.execute("SELECT s.value FROM ThreadNames t JOIN StringIds s ON s.id = t.nameId")
    ]
    assert "pt_autograd_0" in names
    rows = _launched(con)
    bwd = [r for r in rows if re.search(r"_bwd|backward", r[2], re.IGNORECASE)]
    assert len(bwd) > 0 and all(r[6] == "pt_autograd_0" for r in bwd)
    fwd_gemm = [r for r in rows if r[2].startswith("sm80_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize")]
    assert fwd_gemm and all(r[6] != "pt_autograd_0" for r in fwd_gemm)
    opt = [r for r in rows if "multi_tensor_apply_kernel" in r[2]]
    assert len(opt) == f["optimizer_kernel_count"] and all(r[6] != "pt_autograd_0" for r in opt)
    assert len(rows) == f["forward_kernel_count"] + f["backward_kernel_count"] + f["optimizer_kernel_count"]
    w0, w1 = _full_window(con)
    assert _pct(_overlap(_busy(con), w0, w1), w1 - w0) >= f["busy_pct_min"] == 95
    assert f["workload"] == "training"
    con.close()
