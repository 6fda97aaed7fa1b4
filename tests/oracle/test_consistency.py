"""The report agrees with an independent reference implementation of docs/MODEL.md.

For every real trace under ``../shared/traces`` and every built-in synthetic scenario, the report dict
produced through the public entry point is checked against ``tests/reference_model.py``, which
recomputes everything from the SQLite with plain SQL and loops (it never imports the package's
analysis code):

1. per device over the steady window: ``busy_ns`` / ``idle_ns`` exactly, ``busy + idle == window``; its
   ``role`` (ran kernels / copies only), and the headline's busy % pooled over the devices that ran kernels;
2. ``idle_causes``: Σ ns == idle_ns per device, and ns per kind (and per detail for API kinds and NVTX)
   exactly equal to the reference;
3. every finding's ``checks[]``: ``observed`` recomputed within 0.01 and ``op(recomputed, threshold)``;
4. a finding claiming the GPU "is kept busy" / "set(s) the step time" / "GPU-bound" carries a
   ``busy_pct >= 85`` (or stricter) check (GPU_BOUND_PCT of docs/FINDINGS.md).

Reports and reference results are cached per path in module-level dicts; the whole file runs in about
15 s and no single case takes over 5 s, so nothing is marked ``slow``.
"""

from __future__ import annotations

import json
import operator
import re
import sys
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import reference_model as rm  # noqa: E402
from conftest import SHARED_TRACES, built_scenario  # noqa: E402

TRACES_DIR = SHARED_TRACES
pytestmark = pytest.mark.slow   # every real trace and scenario, against the reference model

# Detail-level comparison for these kinds (API base names, normalized NVTX names, empty details).
# `copy` (copy-kind wording) and `osrt` (which of nested OS calls names it) are compared per kind only.
DETAIL_KINDS = {"queued", "sync", "sync_memcpy", "pageable_memcpy", "alloc", "module_load", "launch",
                "other_api", "nvtx", "host_cpu", "unknown"}
VOCABULARY = {"busy_pct", "idle_pct", "cause_pct_of_window", "idle_pct_change", "kernel_share_pct",
              "kernel_count", "launch_rate_per_s", "trait_share_pct", "kernel_p50_ns", "busy_ns",
              "host_overhead_pct", "claimed_pct_of_window", "um_overlap_pct_of_kernel_time", "copy_waiting_pct",
              "copy_waiting_unknown_pct",
              "step_sync_points", "step_sync_exposed_pct", "step_sync_overlap_pct",
              "copy_path_busy_pct", "copy_path_overlap_pct", "copy_path_step_busy_pct",
              "copy_path_beyond_kernels_pct", "copy_path_held_pct", "comm_exposed_pct", "matched", "last_arrivals",
              "wait_caused_share", "wait_pct_of_window",
              "late_idle_share_p50",
              "startup_pct_of_cause", "loop_pct_of_window", "autotune_trial_pct", "comm_nonoverlap_pct",
              "unsampled_pct_of_kind", "largest_gap_pct_of_claimed"}
#: integer-valued: compared within 1
NS_METRICS = {"kernel_p50_ns", "busy_ns", "kernel_count", "matched", "last_arrivals"}
GPU_BOUND_PCT = 85.0   # docs/FINDINGS.md: busy % from which a "GPU-bound / sets the step time" claim is allowed
OPS = {">=": operator.ge, ">": operator.gt, "<=": operator.le, "<": operator.lt, "==": operator.eq}
TOL = 0.01

# (case id, test name) -> reason, for disagreements proven to be the tool's fault (xfail strict).
KNOWN_TOOL_BUGS: Dict[Tuple[str, str], str] = {}


# ----------------------------------------------------------------------------- cases

def _trace_paths() -> List[Tuple[str, Optional[Path]]]:
    if not TRACES_DIR.is_dir():
        return [("trace:MISSING", None)]
    out = []
    for d in sorted(TRACES_DIR.iterdir()):
        if (d / "trace.sqlite").is_file():
            out.append((f"trace:{d.name}", d / "trace.sqlite"))
        for extra in sorted(d.glob("trace_reexport_*.sqlite")):
            out.append((f"trace:{d.name}/{extra.stem}", extra))
    return out or [("trace:MISSING", None)]


def _scenario_names() -> List[str]:
    from synth import SCENARIOS

    return list(SCENARIOS)


CASES = [cid for cid, _ in _trace_paths()] + [f"synth:{n}" for n in _scenario_names()]
_TRACE_PATH = dict(_trace_paths())

_PATHS: Dict[str, str] = {}
_REPORTS: Dict[str, dict] = {}
_REF: Dict[str, rm.Trace] = {}
_CAUSES: Dict[Tuple[str, int, int], Dict[int, rm.DeviceCauses]] = {}
_STEP_SYNC: Dict[Tuple[str, int, int], List[rm.StepSyncSeries]] = {}
_TLS: Dict[Tuple[str, int, int], Dict[int, rm.DeviceTimeline]] = {}


def produce_report(path: str) -> dict:
    """The report dict through the public entry point."""
    import nsys_llm_explainer as pkg

    return pkg.analyze(path).to_dict()


def _path(case: str, tmp_path_factory) -> str:
    if case not in _PATHS:
        kind, name = case.split(":", 1)
        if kind == "trace":
            p = _TRACE_PATH.get(case)
            if p is None:
                pytest.fail(f"real traces not found at {TRACES_DIR} (they are required, not optional)")
            _PATHS[case] = str(p)
        else:
            p = tmp_path_factory.mktemp("consistency") / f"{name}.sqlite"
            built_scenario(name, str(p))
            _PATHS[case] = str(p)
    return _PATHS[case]


class Ctx:
    """One case: the tool's report and the reference, with cached reference results per window."""

    def __init__(self, case: str, path: str):
        self.case, self.path = case, path
        if path not in _REPORTS:
            _REPORTS[path] = json.loads(json.dumps(produce_report(path), default=str))
        if path not in _REF:
            _REF[path] = rm.load(path)
        self.report = _REPORTS[path]
        self.ref = _REF[path]
        win = self.report["window"]
        self.steady = (int(win["start_ns"]), int(win["end_ns"]))
        self.full = (int(win.get("full_start_ns", win["start_ns"])), int(win.get("full_end_ns", win["end_ns"])))

    def window(self, which: Optional[str]) -> Tuple[int, int]:
        return self.full if which == "full" else self.steady

    def timelines(self, w: Tuple[int, int]) -> Dict[int, rm.DeviceTimeline]:
        key = (self.path, *w)
        if key not in _TLS:
            _TLS[key] = rm.device_timelines(self.ref, *w)
        return _TLS[key]

    def causes(self, w: Tuple[int, int]) -> Dict[int, rm.DeviceCauses]:
        key = (self.path, *w)
        if key not in _CAUSES:
            _CAUSES[key] = rm.idle_causes(self.ref, *w)
        return _CAUSES[key]

    def step_sync(self, w: Tuple[int, int]) -> List[rm.StepSyncSeries]:
        key = (self.path, *w)
        if key not in _STEP_SYNC:
            _STEP_SYNC[key] = rm.step_sync(self.ref, self.causes(w), *w)
        return _STEP_SYNC[key]

    def device_map(self) -> Dict[object, int]:
        """Tool device_id -> reference device id: same id, else the unique device with equal busy_ns."""
        tls = self.timelines(self.steady)
        out: Dict[object, int] = {}
        for d in self.report.get("devices", []):
            tid = d.get("device_id")
            if tid in tls:
                out[tid] = tid
                continue
            same = [r for r, tl in tls.items() if tl.busy_ns == d.get("busy_ns")]
            assert len(same) == 1, f"{self.case}: tool device {tid!r} matches no reference device {sorted(tls)}"
            out[tid] = same[0]
        return out


@pytest.fixture(params=CASES)
def ctx(request, tmp_path_factory) -> Ctx:
    case = request.param
    for (bug_case, test), reason in KNOWN_TOOL_BUGS.items():
        if bug_case == case and test == request.node.originalname:
            request.applymarker(pytest.mark.xfail(strict=True, reason=reason))
    return Ctx(case, _path(case, tmp_path_factory))


def _w_ok(ctx: Ctx) -> bool:
    return ctx.steady[1] > ctx.steady[0]


# ----------------------------------------------------------------------------- 0. data + oracle sanity

def test_real_traces_present():
    assert TRACES_DIR.is_dir(), f"{TRACES_DIR} is missing: the consistency tests need the real traces"
    found = sorted(p.parent.name for p in TRACES_DIR.glob("*/trace.sqlite"))
    assert len(found) >= 14, f"expected the 14 real traces, found {found}"


def test_reference_accounts_every_idle_ns(ctx):
    """The oracle itself: Σ causes == idle_ns and busy + idle == window on every device."""
    if not _w_ok(ctx):
        assert not ctx.ref.kernels, "an empty steady window while the trace has kernels"
        return
    for d, c in ctx.causes(ctx.steady).items():
        assert c.busy_ns + c.idle_ns == c.window_ns == ctx.steady[1] - ctx.steady[0]
        assert sum(c.causes.values()) == c.idle_ns, (ctx.case, d)
        assert all(ns > 0 for ns in c.causes.values())
        assert set(k for k, _ in c.causes) <= set(rm.PRECEDENCE)


# ----------------------------------------------------------------------------- 1. busy / idle

def test_steady_busy_idle_per_device(ctx):
    w0, w1 = ctx.steady
    assert ctx.report["window"].get("window_ns", w1 - w0) == w1 - w0
    tls = ctx.timelines(ctx.steady) if _w_ok(ctx) else {}
    tool = ctx.report.get("devices", [])
    dmap = ctx.device_map() if _w_ok(ctx) else {}
    for d in tool:
        ref = tls[dmap[d["device_id"]]]
        where = f"{ctx.case} device {d['device_id']} window [{w0}, {w1})"
        assert d["window_ns"] == w1 - w0, f"{where}: device window_ns {d['window_ns']} is not the steady window"
        assert d["busy_ns"] == ref.busy_ns, f"{where}: busy_ns tool {d['busy_ns']} != reference {ref.busy_ns}"
        assert d["idle_ns"] == ref.idle_ns, f"{where}: idle_ns tool {d['idle_ns']} != reference {ref.idle_ns}"
        assert d["busy_ns"] + d["idle_ns"] == d["window_ns"], where
    busy_devices = {r for r, tl in tls.items() if tl.busy_ns > 0}
    assert busy_devices <= set(dmap.values()), f"{ctx.case}: devices busy in the window missing from the report"


def test_device_roles_match_reference(ctx):
    """devices[].role: ``kernels`` exactly when a kernel or graph row intersects the window, ``copies only`` when
    only memcpy/memset rows do; the headline's busy % pools Σ busy / Σ window over the ``kernels`` devices."""
    if not _w_ok(ctx):
        return
    tls = ctx.timelines(ctx.steady)
    dmap = ctx.device_map()
    for d in ctx.report.get("devices", []):
        assert d.get("role") == tls[dmap[d["device_id"]]].role, (ctx.case, d["device_id"])
    busy = ctx.report["headline"].get("steady_busy_pct")
    if rm.kernel_devices(tls):
        assert busy is not None and abs(busy - rm.busy_pct(tls)) <= TOL, (ctx.case, busy, rm.busy_pct(tls))
    else:
        assert busy is None, (ctx.case, busy)


def test_copy_busy_per_device(ctx):
    if not _w_ok(ctx):
        return
    tls = ctx.timelines(ctx.steady)
    dmap = ctx.device_map()
    for d in ctx.report.get("devices", []):
        ref = tls[dmap[d["device_id"]]]
        assert d.get("copy_busy_ns") == ref.copy_busy_ns, (ctx.case, d["device_id"], "copy_busy_ns")
        assert d.get("copy_only_ns") == ref.copy_only_ns, (ctx.case, d["device_id"], "copy_only_ns")


def test_full_window_busy_idle_per_device(ctx):
    fw = rm.full_window(ctx.ref)
    if fw is not None:
        assert ctx.full == fw, f"{ctx.case}: full window tool {ctx.full} != reference {fw}"
    if ctx.full[1] <= ctx.full[0]:
        return
    tls = ctx.timelines(ctx.full)
    dmap = ctx.device_map()
    for d in ctx.report.get("devices", []):
        ref, full = tls[dmap[d["device_id"]]], d.get("full")
        assert full is not None, f"{ctx.case}: devices[].full missing"
        assert (full["window_ns"], full["busy_ns"], full["idle_ns"]) == (ref.window_ns, ref.busy_ns, ref.idle_ns), \
            (ctx.case, d["device_id"])


# ----------------------------------------------------------------------------- 2. idle causes

def _tool_causes(ctx: Ctx) -> Dict[object, dict]:
    ic = ctx.report.get("idle_causes")
    assert isinstance(ic, dict), f"{ctx.case}: report has no idle_causes"
    assert ic.get("available", True) or not ctx.report.get("devices"), f"{ctx.case}: idle_causes unavailable"
    return {d["device_id"]: d for d in ic.get("devices", [])}


def test_idle_causes_sum_to_idle(ctx):
    tool = _tool_causes(ctx)
    devices = {d["device_id"]: d for d in ctx.report.get("devices", [])}
    assert set(tool) == set(devices), f"{ctx.case}: idle_causes devices {set(tool)} != devices {set(devices)}"
    for dev, tc in tool.items():
        s = sum(c["ns"] for c in tc["causes"])
        assert s == tc["idle_ns"] == devices[dev]["idle_ns"], \
            f"{ctx.case} device {dev}: Σ causes {s}, idle_causes.idle_ns {tc['idle_ns']}, " \
            f"devices.idle_ns {devices[dev]['idle_ns']}"
        assert tc["busy_ns"] + tc["idle_ns"] == tc["window_ns"], (ctx.case, dev)
        assert all(c["kind"] in rm.PRECEDENCE for c in tc["causes"]), (ctx.case, dev)


def _canon(ctx: Ctx, kind: str, detail: str) -> str:
    """NVTX names compared under MODEL.md's literal normalization (every digit run -> ``N``), without an
    NVTX domain qualifier (``Domain:range``): MODEL.md fixes neither convention beyond that, and the
    range chosen, not its spelling, is what is checked. Other details are compared verbatim."""
    if kind != "nvtx":
        return detail
    for dom in ctx.ref.nvtx_domains:
        if detail.startswith(dom + ":"):
            detail = detail[len(dom) + 1:]
            break
    return rm.normalize_nvtx(detail)


def _fmt(d: Dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(d.items(), key=lambda kv: -kv[1]))


def test_idle_causes_match_reference(ctx):
    tool = _tool_causes(ctx)
    if not _w_ok(ctx):
        assert not any(t["causes"] for t in tool.values())
        return
    ref = ctx.causes(ctx.steady)
    dmap = ctx.device_map()
    problems = []
    for dev, tc in sorted(tool.items(), key=lambda kv: str(kv[0])):
        rc = ref[dmap[dev]]
        where = f"device {dev} window [{ctx.steady[0]}, {ctx.steady[1]})"
        if (tc["window_ns"], tc["busy_ns"], tc["idle_ns"]) != (rc.window_ns, rc.busy_ns, rc.idle_ns):
            problems.append(f"{where}: window/busy/idle tool {(tc['window_ns'], tc['busy_ns'], tc['idle_ns'])} "
                            f"!= ref {(rc.window_ns, rc.busy_ns, rc.idle_ns)}")
        t_kind: Dict[str, int] = {}
        t_det: Dict[Tuple[str, str], int] = {}
        for c in tc["causes"]:
            t_kind[c["kind"]] = t_kind.get(c["kind"], 0) + c["ns"]
            if c["kind"] in DETAIL_KINDS:
                key = (c["kind"], _canon(ctx, c["kind"], c.get("detail") or ""))
                t_det[key] = t_det.get(key, 0) + c["ns"]
        r_kind = rc.kind_ns()
        kdiff = {k: (t_kind.get(k, 0), r_kind.get(k, 0)) for k in set(t_kind) | set(r_kind)
                 if t_kind.get(k, 0) != r_kind.get(k, 0)}
        if kdiff:
            problems.append(f"{where}: per-kind ns differ (tool, ref): {sorted(kdiff.items())}")
        r_det: Dict[Tuple[str, str], int] = {}
        for (k, dt), ns in rc.causes.items():
            if k in DETAIL_KINDS:
                key = (k, _canon(ctx, k, dt))
                r_det[key] = r_det.get(key, 0) + ns
        ddiff = {k: (t_det.get(k, 0), r_det.get(k, 0)) for k in set(t_det) | set(r_det)
                 if t_det.get(k, 0) != r_det.get(k, 0)}
        if ddiff:
            problems.append(f"{where}: per-(kind, detail) ns differ (tool, ref): {sorted(ddiff.items())[:12]}")
        t_wait = sum(c.get("waiting_ns") or 0 for c in tc["causes"] if c["kind"] == "copy")
        r_wait = sum(rc.copy_waiting.values())
        if t_wait != r_wait:      # MODEL.md, "Copies the kernels waited on"
            problems.append(f"{where}: copy ns a kernel waited on differ (tool, ref): {(t_wait, r_wait)}")
        t_unk = sum(c.get("waiting_unknown_ns") or 0 for c in tc["causes"] if c["kind"] == "copy")
        r_unk = sum(rc.copy_waiting_unknown.values())
        if t_unk != r_unk:        # the part whose shadow is `unknown`, kept apart
            problems.append(f"{where}: copy ns with no host thread differ (tool, ref): {(t_unk, r_unk)}")
    assert not problems, f"{ctx.case}:\n  " + "\n  ".join(problems)


# ----------------------------------------------------------------------------- 3. finding checks

def recompute(ctx: Ctx, check: dict) -> Optional[float]:
    """The check's observed value from the reference (None for trait_share_pct: not recomputable)."""
    metric, scope = check["metric"], check.get("scope") or {}
    w = ctx.window(scope.get("window"))
    dev = scope.get("device_id")
    if dev is not None:
        dev = ctx.device_map()[dev]
    if metric == "busy_pct":
        return rm.busy_pct(ctx.timelines(w), dev)
    if metric == "idle_pct":
        return rm.idle_pct(ctx.timelines(w), dev)
    if metric == "cause_pct_of_window":
        return rm.cause_pct_of_window(ctx.causes(w), scope["kind"], scope.get("detail"), dev)
    if metric == "idle_pct_change":
        return rm.idle_pct_change(ctx.timelines(ctx.full), ctx.timelines(ctx.steady))
    if metric == "kernel_share_pct":
        return rm.kernel_share_pct(ctx.ref, *w, scope["name"])
    if metric == "kernel_count":
        return float(rm.kernel_count(ctx.ref, *w, dev))
    if metric == "kernel_p50_ns":
        return rm.kernel_p50_ns(ctx.ref, *w, dev)
    if metric == "busy_ns":
        return float(rm.busy_ns(ctx.timelines(w)))
    if metric == "host_overhead_pct":
        return rm.host_overhead_pct(ctx.causes(w), dev, rm.launch_ranges(ctx.ref))
    if metric == "launch_rate_per_s":
        return rm.launch_rate_per_s(ctx.ref, *w, dev)
    if metric in ("trait_share_pct", "claimed_pct_of_window", "autotune_trial_pct", "comm_nonoverlap_pct",
                  "unsampled_pct_of_kind", "largest_gap_pct_of_claimed"):   # the tool's own numbers, checked elsewhere
        # (autotune: tests/findings/test_claims_one_time_work.py; unsampled, one pause:
        # test_claims_unsampled_launcher_gaps.py)
        return None
    if metric in ("startup_pct_of_cause", "loop_pct_of_window"):   # the capture's edges, from the reference's own
        fw = rm.full_window(ctx.ref)
        at = (fw is not None and w[0] <= fw[0], fw is not None and w[1] >= fw[1])
        fn = rm.startup_pct_of_cause if metric == "startup_pct_of_cause" else rm.loop_pct_of_window
        return fn(ctx.causes(w), scope["kind"], dev, *at)
    if metric == "um_overlap_pct_of_kernel_time":
        return rm.um_overlap_pct(ctx.ref, *w, dev)
    if metric == "copy_waiting_pct":
        return rm.copy_waiting_pct(ctx.causes(w), dev)
    if metric == "copy_waiting_unknown_pct":
        return rm.copy_waiting_unknown_pct(ctx.causes(w), dev)
    if metric in ("step_sync_points", "step_sync_exposed_pct", "step_sync_overlap_pct"):
        return rm.step_sync_metric(ctx.step_sync(w), ctx.causes(w), dev, metric)
    if metric == "comm_exposed_pct":      # the straggler's wait: the tool's verdict (checked by the NCCL tests)
        v = (ctx.report.get("nccl") or {}).get("straggler")
        wait = None
        if v:
            per: Dict[int, int] = {}
            for r in ctx.report["nccl"].get("ranks") or []:
                if (r["pid"], r["device_id"]) != (v["late_pid"], v["late_device_id"]):
                    dd = ctx.device_map()[int(r["device_id"])]
                    per[dd] = per.get(dd, 0) + int(r.get("wait_in_window_ns") or 0)
            wait = (per, int(v["wait_ns_total"]))
        return rm.comm_exposed_pct(ctx.ref, *w, [ctx.device_map()[d] for d in scope["devices"]], wait)
    if metric in ("matched", "last_arrivals", "wait_caused_share", "late_idle_share_p50",
                  "wait_pct_of_window"):   # the late-rank rule; its share of the others' captured time
        return rm.nccl_late_rank_metric(ctx.ref, dev, metric, ctx.full[1] - ctx.full[0])
    if metric.startswith("copy_path_"):   # steps: the tool's step rows (step detection is checked on its own)
        steps = [(int(r["start_ns"]), int(r["end_ns"])) for r in (ctx.report.get("steps") or {}).get("rows") or []]
        return rm.copy_path_metric(ctx.ref, *w, dev, scope["detail"], metric, steps)
    raise AssertionError(f"unknown metric {metric!r}: the vocabulary of MODEL.md is closed")


def test_finding_checks_hold(ctx):
    problems = []
    for f in ctx.report.get("findings", []):
        if "checks" not in f:
            problems.append(f"finding {f.get('id')}: no checks[]")
            continue
        for chk in f["checks"]:
            scope = {k: v for k, v in (chk.get("scope") or {}).items() if v is not None}
            where = f"finding {f.get('id')} check {chk.get('metric')} {chk.get('op')} {chk.get('threshold')} " \
                    f"(observed {chk.get('observed')}, scope {scope})"
            if chk.get("metric") not in VOCABULARY:
                problems.append(f"{where}: metric not in the closed vocabulary of MODEL.md")
                continue
            if chk.get("op") not in OPS:
                problems.append(f"{where}: unknown op")
                continue
            op = OPS[chk["op"]]
            pooled = (chk.get("scope") or {}).get("devices")
            if pooled is not None:
                want = rm.kernel_devices(ctx.timelines(ctx.steady))
                if chk.get("metric") == "comm_exposed_pct":   # of those, the devices that ran communication
                    want = rm.comm_devices(ctx.ref, *ctx.steady, want)
                got = sorted(ctx.device_map()[d] for d in pooled)
                if got != want:
                    problems.append(f"{where}: pooled over devices {got}, the reference's devices that ran kernels "
                                    f"are {want}")
            value = recompute(ctx, chk)
            if value is None:                                  # trait_share_pct: the tool's number only
                if not op(chk["observed"], chk["threshold"]):
                    problems.append(f"{where}: precondition does not hold")
                continue
            if abs(value - chk["observed"]) > (1.0 if chk["metric"] in NS_METRICS else TOL):
                problems.append(f"{where}: reference observes {value}")
            if not op(value, chk["threshold"]):
                problems.append(f"{where}: precondition does not hold for the reference value {value}")
    assert not problems, f"{ctx.case}:\n  " + "\n  ".join(problems)


def test_step_sync_series_match_reference(ctx):
    """Every per-step sync series (holding or not) equals the reference's plain-loop computation: sync points,
    step boundaries, exposed and overlappable ns, kernels in the steps, and whether the pattern holds."""
    if not _w_ok(ctx):
        pytest.skip("empty analysis window")
    ss = ctx.report.get("step_sync") or {}
    dmap = ctx.device_map()
    tool = {(dmap.get(s["device_id"], s["device_id"]), s["gtid"]): s for s in ss.get("series", [])}
    ref = {(r.device_id, r.tid): r for r in ctx.step_sync(ctx.steady)}
    assert set(tool) == set(ref), (sorted(tool), sorted(ref))
    problems = []
    for key, r in ref.items():
        t = tool[key]
        got = (t["holds"], t["api"], t["sync_points"], t["step_sync_points"], t["exposed_ns"], t["overlap_ns"],
               t["kernels_in_steps"], t["device_kernels"])
        want = (r.holds, r.api, r.sync_points, r.step_sync_points, r.exposed_ns, r.overlap_ns, r.kernels_in_steps,
                r.device_kernels)
        if got != want:
            problems.append(f"{key}: tool {got} != reference {want}")
    assert not problems, f"{ctx.case}:\n  " + "\n  ".join(problems)


# ----------------------------------------------------------------------------- 4. claims need their precondition

_CLAIM = re.compile(r"(?<!not )(?<!n't )(is kept busy|sets? the step time|gpu[- ]bound)", re.IGNORECASE)


def _texts(f: dict) -> List[str]:
    ev = f.get("evidence") or []
    return [str(f.get("title", ""))] + [e if isinstance(e, str) else json.dumps(e) for e in ev]


def test_busy_claims_have_busy_check(ctx):
    for f in ctx.report.get("findings", []):
        claims = [m.group(0) for t in _texts(f) for m in _CLAIM.finditer(t)]
        if not claims:
            continue
        ok = [c for c in f.get("checks", []) if c.get("metric") == "busy_pct" and c.get("op") in (">=", ">")
              and c.get("threshold", 0) >= GPU_BOUND_PCT]
        assert ok, f"{ctx.case}: finding {f.get('id')} claims {claims!r} without a busy_pct >= 85 check"


def test_a_bystander_process_s_gaps_match_the_reference(tmp_path):
    """The bystander rule (docs/MODEL.md "The gap's host thread") against the reference model: a monitoring process
    whose 2 µs probes land in the owner's gaps (tests/findings/test_claims_shared_gpu.py), and the same probes from a
    thread of the owner's own process (no bystander): per kind and detail, the tool's idle causes equal the
    reference's."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "findings"))
    from synth import TraceBuilder
    from test_claims_shared_gpu import _monitored

    for pid in (300, 100):
        p = tmp_path / f"m{pid}.sqlite"
        _monitored(TraceBuilder(), monitor_pid=pid).write(str(p))
        rep = json.loads(json.dumps(produce_report(str(p)), default=str))
        w = (int(rep["window"]["start_ns"]), int(rep["window"]["end_ns"]))
        ref = rm.idle_causes(rm.load(str(p)), *w)
        for d in rep["idle_causes"]["devices"]:
            tool = {(c["kind"], c["detail"] or ""): c["ns"] for c in d["causes"]}
            assert tool == {k: v for k, v in ref[d["device_id"]].causes.items() if v}, (pid, d["device_id"])


def test_host_paced_queued_ns_match_the_reference(tmp_path):
    """Host-paced queued time (docs/MODEL.md) against the reference model, on the hand-built traces of
    tests/findings/test_host_paced.py: eager kernels one at a time, graph replays, a mix of both, and a delay that
    grows past the previous kernel's: per device, the tool's `host_paced_ns` equals the reference's, and so does
    the launch-bound finding's `host_overhead_pct` where it is formed."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "findings"))
    from synth import TraceBuilder
    from test_host_paced import MS, US, _builder, _eager, _finish, _graphs

    def mix(b: TraceBuilder) -> TraceBuilder:
        return _finish(b, _graphs(b, _eager(b, 1 * MS, 300), 20))

    def grown(b: TraceBuilder) -> TraceBuilder:
        a = 1 * MS
        for k in range(300):
            d = (4 if k % 2 == 0 else 24) * US
            b.launch(a, a + 3 * US, a + 3 * US + d, a + 5 * US + d, pid=100, tid=100, name="k")
            a += 40 * US
        return _finish(b, a)

    import nsys_llm_explainer as pkg

    builds = {"eager": lambda b: _finish(b, _eager(b, 1 * MS, 300)), "graphs": lambda b: _finish(b, _graphs(b, MS, 20)),
              "ahead": lambda b: _finish(b, _eager(b, 1 * MS, 300, ahead=2) + 12 * US), "mix": mix, "grown": grown}
    seen = 0
    for name, build in builds.items():
        p = tmp_path / f"{name}.sqlite"
        build(_builder()).write(str(p))
        typed = pkg.analyze(str(p))
        rep = json.loads(json.dumps(typed.to_dict(), default=str))
        w = (int(rep["window"]["start_ns"]), int(rep["window"]["end_ns"]))
        ref = rm.idle_causes(rm.load(str(p)), *w)
        for d in typed.idle_causes.devices:
            tool = sum(c.host_paced_ns for c in d.causes if c.kind == "queued")
            assert tool == ref[d.device_id].host_paced, (name, d.device_id, tool, ref[d.device_id].host_paced)
            seen += tool > 0
        for f in rep["findings"]:
            for c in f["checks"]:
                if c["metric"] == "host_overhead_pct":
                    want = rm.host_overhead_pct(ref, c["scope"]["device_id"], rm.launch_ranges(rm.load(str(p))))
                    assert abs(c["observed"] - want) <= TOL, (name, c["observed"], want)
    assert seen == 3     # eager, mix and grown hold host-paced ns; graphs and ahead none
