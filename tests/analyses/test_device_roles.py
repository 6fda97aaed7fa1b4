"""Busy % over the GPUs that ran kernels: a device that only received copies is listed as
``copies only`` (``devices[].role``), never averaged into the headline, the findings or the comparison at 0 %, and
none of its idle is claimed. The expected numbers are computed here from the SQLite with plain SQL, and by hand
for the pooling rule itself."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path
from typing import Dict, List, Tuple

import pytest
from conftest import as_report, built_scenario
from synth.scenarios.rank import Rank
from synth.scenarios.sim import Sim
from synth.scenarios.steps import write_trace

import nsys_llm_explainer as nle
from nsys_llm_explainer.analyses.idle.gpu_time import DeviceTime, GpuTimeResult, device_role
from nsys_llm_explainer.render.specs import DEVICES

Iv = Tuple[int, int]
_BUILT: Dict[str, Tuple[Path, dict, dict]] = {}


def _union_ns(iv: List[Iv]) -> int:
    out: List[List[int]] = []
    for s, e in sorted(iv):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return sum(e - s for s, e in out)


def _sql(path: Path, q: str) -> list:
    con = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    try:
        return con.execute(q).fetchall()
    finally:
        con.close()


def _full_window(path: Path) -> Iv:
    """First start → last end of kernels, CUDA API, memcpy, sync and NVTX rows (docs/MODEL.md, "Windows")."""
    tabs = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_MEMCPY",
            "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", "NVTX_EVENTS")
    have = {r[0] for r in _sql(path, "SELECT name FROM sqlite_master WHERE type='table'")}
    lo, hi = [], []
    for t in tabs:
        if t in have:
            a, b = _sql(path, f"SELECT min(start), max(coalesce(end, start)) FROM {t}")[0]
            if a is not None:
                lo.append(a)
                hi.append(b)
    return min(lo), max(hi)


def _copies_only(tmp_path_factory) -> Tuple[Path, dict, dict]:
    if "scenario" not in _BUILT:
        p = tmp_path_factory.mktemp("roles") / "copies_only_gpu.sqlite"
        facts = built_scenario("copies_only_gpu", str(p))
        _BUILT["scenario"] = (p, facts, nle.analyze(str(p)).to_dict())
    return _BUILT["scenario"]


# ------------------------------------------------------------------------------------------ the rule, by hand
def _dev(i: int, busy: int, window: int, kernels: int, copy_ns: int, copies: int) -> DeviceTime:
    return DeviceTime(i, device_role(kernels, 0, copies), 0, window, window, busy, window - busy,
                      100.0 * busy / window, 100.0 * (window - busy) / window, copy_ns, max(0, copy_ns - busy), kernels,
                      0.0, 0, 0, (), (), None)


def test_device_role_rule():
    assert device_role(1, 0, 0) == "kernels"
    assert device_role(0, 3, 0) == "kernels"           # a whole-graph execution runs kernels
    assert device_role(0, 0, 5) == "copies only"
    assert device_role(0, 0, 0) == "idle"


def test_pooled_over_the_devices_that_ran_kernels_by_hand():
    """Windows of 100 ns: device 0 busy 60 ns, device 1 only copies (40 ns of them), device 2 busy 30 ns. Pooled:
    (60 + 30) / (100 + 100) = 45 %; averaging device 1 in at 0 % would have said 30 %."""
    g = GpuTimeResult(True, None, False, (_dev(0, 60, 100, 5, 0, 0), _dev(1, 0, 100, 0, 40, 2),
                                          _dev(2, 30, 100, 7, 0, 0)))
    assert g.kernel_devices() == (0, 2)
    p = g.pooled()
    assert p is not None and (p.busy_ns, p.window_ns, p.busy_pct) == (90, 200, 45.0)
    only_copies = GpuTimeResult(True, None, False, (_dev(1, 0, 100, 0, 40, 2),))
    assert only_copies.kernel_devices() == () and only_copies.pooled() is None


# ------------------------------------------------------------------------------------------ planted scenario
@pytest.mark.slow
def test_copies_only_gpu_headline_is_gpu0_busy(tmp_path_factory):
    """GPU 0 runs the GEMMs; GPU 1 ran no kernel and only received copies. Hand computation from the SQLite:
    headline busy % = |∪ GPU 0 kernels| / window (the whole capture: nothing is trimmed)."""
    p, facts, rep = _copies_only(tmp_path_factory)
    w0, w1 = _full_window(p)
    assert (rep["window"]["method"], rep["window"]["start_ns"], rep["window"]["end_ns"]) == ("full", w0, w1)
    k0 = [(s, e) for s, e in _sql(p, "SELECT start, end FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE deviceId = 0")]
    assert _sql(p, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE deviceId = 1")[0][0] == 0
    c1 = [(s, e) for s, e in _sql(p, "SELECT start, end FROM CUPTI_ACTIVITY_KIND_MEMCPY WHERE deviceId = 1")]
    busy0 = _union_ns(k0)
    want = 100.0 * busy0 / (w1 - w0)
    assert 60.0 <= want <= 80.0                                    # the planted shape: GEMMs keep GPU 0 ~72 % busy
    assert rep["headline"]["steady_busy_pct"] == pytest.approx(want, abs=1e-9)
    assert want == pytest.approx(facts["window_busy_pct"], abs=1e-9)
    devs = {d["device_id"]: d for d in rep["devices"]}
    assert set(devs) == {0, 1}
    assert (devs[0]["role"], devs[0]["busy_ns"]) == ("kernels", busy0)
    assert devs[1]["role"] == "copies only"
    assert (devs[1]["busy_ns"], devs[1]["kernel_count"]) == (0, 0)
    assert devs[1]["copy_busy_ns"] == _union_ns(c1) == facts["gpu1_copy_union_ns"]
    # the old, wrong average: GPU 1 at 0 % would have halved it
    assert abs(rep["headline"]["steady_busy_pct"] - want / 2) > 30


@pytest.mark.slow
def test_copies_only_gpu_no_finding_claims_gpu1(tmp_path_factory):
    """No finding is about GPU 1, no check measures it, and every pooled check says it pools over GPU 0 only."""
    p, _, rep = _copies_only(tmp_path_factory)
    assert rep["findings"], "GPU 0's per-step host work must still be found"
    assert rep["findings"][0]["device_id"] == 0
    for f in rep["findings"]:
        assert f["device_id"] != 1, f["id"]
        assert not re.search(r"\bdevice 1\b|\bGPU 1\b", " ".join([f["title"], *f["evidence"]]), re.I), f["id"]
        for c in f["checks"]:
            sc = c["scope"]
            assert sc.get("device_id") != 1, (f["id"], c)
            if sc.get("device_id") is None and c["metric"] in ("busy_pct", "idle_pct", "busy_ns", "idle_pct_change"):
                assert sc.get("devices") == [0], (f["id"], c)
    # GPU 1's idle stays in the idle-cause table (every ns accounted for), but is nobody's finding
    ic = {d["device_id"]: d for d in rep["idle_causes"]["devices"]}
    assert sum(c["ns"] for c in ic[1]["causes"]) == ic[1]["idle_ns"] == rep["devices"][1]["idle_ns"]


@pytest.mark.slow
def test_copies_only_gpu_with_copies_in_busy(tmp_path_factory):
    """``--include-memcpy-in-busy`` makes GPU 1's copies busy time (≥ 1 ms): it is still no workload device, not
    pooled, and no finding is about it."""
    p, _, base = _copies_only(tmp_path_factory)
    rep = nle.analyze(str(p), include_memcpy_in_busy=True).to_dict()
    devs = {d["device_id"]: d for d in rep["devices"]}
    assert devs[1]["role"] == "copies only" and devs[1]["busy_ns"] == devs[1]["copy_busy_ns"] > 1_000_000
    assert rep["headline"]["steady_busy_pct"] == pytest.approx(devs[0]["busy_pct"], abs=1e-9)
    assert rep["headline"]["steady_busy_pct"] == pytest.approx(base["headline"]["steady_busy_pct"], abs=1e-9)
    assert all(f["device_id"] != 1 for f in rep["findings"])
    assert all(c["scope"].get("device_id") != 1 for f in rep["findings"] for c in f["checks"])


@pytest.mark.slow
def test_copies_only_gpu_outputs_say_so(tmp_path_factory):
    """report.md states over which devices busy is measured and lists GPU 1 as copies only; devices.csv has the
    role column."""
    _, _, rep = _copies_only(tmp_path_factory)
    md = nle.render_markdown(rep)
    b = rep["headline"]["steady_busy_pct"]
    assert (f"**GPU busy {b:.1f} %** of the analysis window over the devices that ran kernels (device 0 {b:.1f} %, "
            "device 1 copies only, not counted).") in md
    assert "copies only: ran no kernel in the window, not counted in the GPU busy %" in md
    head = DEVICES.csv_header()
    rows = {r[0]: dict(zip(head, r)) for r in DEVICES.csv_rows(as_report(rep))}
    assert head[:2] == ["device_id", "role"]
    assert (rows[0]["role"], rows[1]["role"]) == ("kernels", "copies only")


@pytest.mark.slow
def test_copies_only_gpu_compare(tmp_path_factory):
    """The comparison reads the same pooled busy: GPU 0's, and says GPU 1 is not counted (its parts are over whole
    step periods, GPU 0's timeline from the first step's start to the last one's: one device's span, busy + idle)."""
    p, _, rep = _copies_only(tmp_path_factory)
    res = nle.compare([str(p), str(p)], labels=["base", "new"])
    t = res.traces[0]
    dev0 = rep["devices"][0]
    assert (t.busy_pct, t.device_count) == (pytest.approx(dev0["busy_pct"], abs=1e-9), 1)
    st = nle.analyze(str(p)).steps.arrays
    assert t.pooled_window_ns == int(st.start.max() - st.start.min()) < dev0["window_ns"]
    assert t.busy_ns < dev0["busy_ns"] and t.units == len(st) - 1
    assert sum(s.ns for s in t.idle_by_kind) == t.pooled_window_ns - t.busy_ns
    assert any("device 1 ran no kernel" in n and "copies only" in n for n in t.notes)
    assert res.comparisons[0].busy_pct_base == pytest.approx(dev0["busy_pct"], abs=1e-9)


# ------------------------------------------------------------------------------------------ no device ran kernels
def _copies_only_trace(path: Path) -> None:
    """One process, two GPUs, no kernel at all: 30 pinned host-to-device copies of 16 MiB onto GPU 0."""
    sim = Sim("2024.2", 0)
    r = Rank(sim, 13901, 0)
    sim.b.gpu(0)
    sim.b.gpu(1)
    for _ in range(30):
        r.memcpy_async(16 << 20, kind=1, src=1, dst=2, gbps=24.0)
        r.host(300_000)
    write_trace(sim, str(path))


def test_no_device_ran_kernels(tmp_path):
    """Copies only, no kernel: no busy % is stated (headline null), the gate finding says nothing can be
    diagnosed and names the copies-only device; report.md says no device ran a kernel."""
    p = tmp_path / "copies.sqlite"
    _copies_only_trace(p)
    rep = nle.analyze(str(p))
    d = rep.to_dict()
    assert [x["role"] for x in d["devices"]] == ["copies only"]
    assert d["headline"]["steady_busy_pct"] is None
    assert d["findings"][0]["id"] == "no_gpu_work"
    ev = " ".join(d["findings"][0]["evidence"])
    assert "device 0 ran only copies" in ev and "not counted" in ev
    md = nle.render_markdown(d)
    assert "**GPU busy:** no device ran a kernel in the analysis window (device 0 copies only), so no busy % is " \
           "stated." in md
    assert "GPU busy 0" not in md


def test_a_copies_only_gpu_is_not_a_low_busy_rank(tmp_path):
    """A cluster run over the copies_only_gpu trace: GPU 1 (no kernel) is listed with its role and is never the
    'keeps its GPU busy less than the other ranks' outlier (there is one device with kernels: no comparison)."""
    import nsys_llm_explainer as nle

    p = tmp_path / "r0.sqlite"
    built_scenario("copies_only_gpu", str(p))
    res = nle.analyze_cluster([str(p)], jobs=1)
    roles = {d.device_id: d.role for d in res.devices}
    assert roles == {0: "kernels", 1: "copies only"}
    assert not [c for c in res.claims if c.finding.id == "low_busy_rank"]
