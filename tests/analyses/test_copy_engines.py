"""Copy engines as a resource: copy paths per device and direction, the copy-path
finding, and advice from the copies' own facts.

Numbers are computed by hand from the planted layout of ``synth/scenarios/copy_engines.py`` (20 steps of 10 ms;
the analysis window is the whole capture: from the first issue call, 0.2 ms before step 0's GPU work, to the end
of the last ``step`` range, 9.79 ms into step 19: 199.99 ms).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from conftest import scenario_report

from nsys_llm_explainer.analyses.memory.copy_engines import analyze_copy_engines, path_of_detail
from nsys_llm_explainer.analyses.trace.facts import copy_facts
from nsys_llm_explainer.findings.advice import ADVICE
from nsys_llm_explainer.model.trace import Memcpy, Memset
from nsys_llm_explainer.report import Report

MS = 1_000_000
WINDOW = 199_990_000             # [49.8 ms, 249.79 ms)


def _rep(name, tmp_path_factory):
    return scenario_report(name, tmp_path_factory)[2]


def _find(ce, device_id, path):
    """The copy path ``path`` of device ``device_id`` in ``ce``, or None."""
    return next((p for p in ce.paths if p.device_id == device_id and p.path == path), None)


def _path(rep, path):
    p = _find(rep.copy_engines, 0, path)
    assert p is not None, [q.path for q in rep.copy_engines.paths]
    return p


def test_d2d_bound_step_paths(tmp_path_factory):
    rep = _rep("d2d_bound_step", tmp_path_factory)
    assert (rep.window.start_ns, rep.window.end_ns) == (49_800_000, 249_790_000)
    d2d = _path(rep, "D2D")
    # 4 back-to-back copies of 2.35 ms per step: 9.4 ms × 20 = 188 ms; 470 MB each
    assert (d2d.count, d2d.busy_ns, d2d.bytes) == (80, 188 * MS, 80 * 470_000_000)
    assert d2d.busy_pct == pytest.approx(100 * 188 / 199.99)
    assert d2d.gb_per_s == pytest.approx(200.0)                       # 470 MB / 2.35 ms
    # the three GEMMs (7.5 ms per step) lie inside [t, t + 9.4 ms): all of them under the D2D path
    assert (d2d.kernel_overlap_ns, d2d.beyond_kernels_ns) == (150 * MS, 38 * MS)
    # held: only the kernel gap [t + 8.2, t + 10.5) ms (the last step's: to the window's end) holds a D2D copy's end
    # (t + 9.4 ms): its no-kernel D2D time [t + 8.2, t + 9.4) ms, 1.2 ms × 20; in [t, t + 0.5), [t + 3.0, t + 3.1)
    # and [t + 5.6, t + 5.7) ms the GEMM after the gap starts while the D2D copy still runs
    assert d2d.held_ns == 24 * MS
    assert d2d.overlap_pct == pytest.approx(100 * 7.5 / 9.4)        # 79.79 %
    # steps: the ``step`` ranges [t − 0.2, t + 9.79) ms, 9.99 ms each, the D2D busy 9.4 ms of each
    assert d2d.steps == 20 and d2d.step_busy_pct_p50 == pytest.approx(100 * 9.4 / 9.99)
    assert d2d.bytes_per_step_p50 == 4 * 470_000_000
    h2d, d2h = _path(rep, "H2D"), _path(rep, "D2H")
    assert (h2d.count, h2d.busy_ns, h2d.bytes, h2d.kernel_overlap_ns, h2d.pageable_count) == (
        20, 20 * MS, 20 * 25_000_000, 20 * MS, 0)
    assert h2d.gb_per_s == pytest.approx(25.0) and h2d.overlap_pct == 100.0
    assert (d2h.busy_ns, d2h.bytes, d2h.overlap_pct) == (10 * MS, 20 * 12_500_000, 100.0)
    (dev,) = rep.copy_engines.devices
    assert (dev.kernel_busy_ns, dev.copy_busy_ns, dev.copy_overlap_ns) == (150 * MS, 188 * MS, 150 * MS)


def test_d2d_bound_step_finding_and_advice(tmp_path_factory):
    rep = _rep("d2d_bound_step", tmp_path_factory)
    top = rep.findings[0]
    assert (top.id, top.category, top.severity, top.cause) == ("copy_path", "copy_bound", "high",
                                                               ("copy_path", "Device-to-Device"))
    # it claims the idle the table charges to Device-to-Device copies: the 1.2 ms per step up to the copy that ends
    # in the gap (t + 9.4 ms); the 0.5 + 0.1 + 0.1 ms before GEMMs that start while the copy still runs are `queued`
    # (docs/MODEL.md, idle causes row 1)
    assert top.time_at_stake_ns == 24 * MS
    (d,) = rep.idle_causes.devices
    assert d.ns_of("copy", "Device-to-Device") == 24 * MS and d.ns_of("copy") == 24 * MS
    assert not any(f.id == "idle_copy" for f in rep.findings)         # no ns claimed twice
    # the title states what it claims: 24 ms of a 200 ms window beyond the kernels, busy 94 %;
    # bytes per step and the rate are evidence
    assert "(busy 94.0 %): 12.0 % of the window (24.000 ms) beyond the kernels" in top.title
    ev = " ".join(top.evidence)
    assert "1.88 GB" in ev and "200.0 GB/s" in ev
    assert {c.metric: c.holds() for c in top.checks} == {
        "copy_path_busy_pct": True, "copy_path_overlap_pct": True, "copy_path_step_busy_pct": True,
        "copy_path_beyond_kernels_pct": True, "copy_path_held_pct": True}
    facts = rep.facts.advice_facts()
    assert (facts["copies_d2d"], facts["copies_host"], facts["host_copies_pageable"],
            facts["copies_overlap_kernels"]) == (True, True, False, True)
    assert rep.facts.copy_overlap_pct == pytest.approx(100 * 150 / 188)
    text = " ".join(top.recommendation)
    # its 80 D2D copies move 37.6 GB: 470 MB (448 MiB) each, over 1 MiB — the large-copy line, not "come from layout
    # changes … merge many small copies" (docs/FINDINGS.md, copy.d2d)
    assert ADVICE["copy_pace.d2d.large"].text in top.recommendation
    assert ADVICE["copy_pace.d2d"].text not in top.recommendation
    assert "pinned" not in text and "side stream" not in text and "pin_memory" not in text
    # the headline is the finding's, not an average that hides it
    assert rep.headline.top_finding_id == "copy_path"


def test_h2d_pageable_step(tmp_path_factory):
    rep = _rep("h2d_pageable_step", tmp_path_factory)
    h2d = _path(rep, "H2D")
    assert _find(rep.copy_engines, 0, "D2D") is None
    # 80 pageable copies of 28.2 MB (2.35 ms) plus the 20 pinned 25 MB ones (1 ms, under the first pageable one)
    assert (h2d.count, h2d.busy_ns, h2d.bytes) == (100, 188 * MS, 80 * 28_200_000 + 20 * 25_000_000)
    assert (h2d.pageable_count, h2d.pageable_bytes) == (80, 80 * 28_200_000)
    assert h2d.gb_per_s == pytest.approx((80 * 28.2e6 + 20 * 25e6) / 188e6)
    top = rep.findings[0]
    assert (top.id, top.cause) == ("copy_path", ("copy_path", "Host-to-Device")) and top.time_at_stake_ns == 24 * MS
    facts = rep.facts.advice_facts()
    assert (facts["copies_d2d"], facts["host_copies_pageable"], facts["copies_overlap_kernels"]) == (False, True, True)
    assert ADVICE["copy.pageable"].text in top.recommendation
    assert ADVICE["copy_pace.host.resident"].text in top.recommendation
    assert not any("evice-to-device" in r for r in top.recommendation)
    assert ADVICE["copy.overlap"].text not in top.recommendation     # the copies already overlap the kernels


def test_round_trip_keeps_copy_paths(tmp_path_factory):
    rep = _rep("d2d_bound_step", tmp_path_factory)
    back = Report.from_dict(rep.to_dict())
    assert back.copy_engines == rep.copy_engines and back.to_dict() == rep.to_dict()


def _ops(cls, **cols):
    """A ``cls`` table of the given columns, every other column -1 (as the read gives a column the export lacks)."""
    n = len(cols["start"])
    return cls(**{f.name: np.asarray(cols[f.name], np.int64) if f.name in cols else np.full(n, -1, np.int64)
                  for f in dataclasses.fields(cls)})


def test_clipping_prorates_bytes_and_unions_concurrent_copies():
    """Two concurrent D2D copies count once in busy; a copy crossing the window's end counts its bytes in
    proportion; a memset is its own path; a kernel under half of the union."""
    from types import SimpleNamespace

    mc = _ops(Memcpy, start=[100, 150, 900], end=[300, 250, 1_300], bytes=[2_000, 1_000, 4_000], copy_kind=[8, 8, 1],
              src_kind=[2, 2, 0], dst_kind=[2, 2, 2], device=[0, 0, 0])
    ms = _ops(Memset, start=[500], end=[600], bytes=[50], device=[0])
    class K:
        start, end, device = np.array([200]), np.array([400]), np.array([0])
        pid, stream = np.array([-1]), np.array([7])

        def __len__(self):
            return 1

    model = SimpleNamespace(memcpy=mc, memset=ms, kernels=K(), graph_trace=None, api=None)
    steady = SimpleNamespace(memcpy=None, memset=None, kernels=K(), graph_trace=None, api=None)
    r = analyze_copy_engines(model, steady, 0, 1_000)
    d2d, h2d, mset = (_find(r, 0, p) for p in ("D2D", "H2D", "memset"))
    assert (d2d.busy_ns, d2d.bytes, d2d.kernel_overlap_ns, d2d.overlap_pct) == (200, 3_000, 100, 50.0)
    assert d2d.gb_per_s == pytest.approx(15.0)
    # 100 of its 400 ns lie in the window: a quarter of 4 000 bytes; pageable host copy
    assert (h2d.busy_ns, h2d.bytes, h2d.pageable_count, h2d.pageable_bytes) == (100, 1_000, 1, 1_000)
    assert (mset.busy_ns, mset.bytes, mset.kernel_overlap_ns, mset.gb_per_s) == (100, 50, 0, None)   # no rate
    f = copy_facts(r)
    # all copies: [100, 300) ∪ [500, 600) ∪ [900, 1000) = 400 ns, 100 of them under the kernel: 25 % < 50 %
    # no CUDA calls in this model: whether the copies are issued asynchronously on a side stream is not known
    assert f == {"copies_d2d": True, "copies_host": True, "host_copies_pageable": True,
                 "copies_overlap_kernels": False, "copy_overlap_pct": 25.0, "copies_async_side_stream": None,
                 "async_side_pct": None}


def test_idle_details_map_to_paths():
    assert [path_of_detail(d) for d in ("Device-to-Device", "Host-to-Device (pageable)", "Device-to-Host",
                                        "Peer-to-Peer", "memset", "Unified Host-to-Device", "Array-to-Device",
                                        "weird")] == ["D2D", "H2D", "D2H", "P2P", "memset", "Unified", "D2D", "other"]


def test_no_copies_no_facts():
    from types import SimpleNamespace

    empty = SimpleNamespace(memcpy=None, memset=None, kernels=None, graph_trace=None, api=None)
    r = analyze_copy_engines(empty, empty, 0, 10)
    assert not r.available and copy_facts(r) == {}
