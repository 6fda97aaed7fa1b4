"""Findings: rules over analysis results.

Each finding: stable ``id``, ``category`` (vocabulary in :data:`CATEGORIES`), ``severity``
(high / medium / low / info), ``confidence`` (high / medium / low), ``title``, ``evidence`` (strings with
numbers and how they were derived), ``recommendation`` (strings, stack-specific when the stack is
recognised), ``time_at_stake_ns`` (ns of idle or kernel time the finding explains).

Ranking: a finding that invalidates the other numbers (graph-level CUDA-graph tracing) first; then the
workload's bottleneck findings (severity high/medium) by time at stake; then findings about the capture
itself (warm-up/tail-dominated window); then — if there was no high/medium finding — one ``none``
finding ("no bottleneck found"); then low/info findings. So the top finding names the primary
bottleneck, and a healthy GPU-bound trace leads with ``none``.

Idle-based rules use the time accounting of the steady-state window (see docs/FINDINGS.md): the share of
each idle part in the device window decides severity: ≥ 20 % high, ≥ 5 % medium.
"""

from __future__ import annotations

from typing import Dict, List, Optional

from ..render.json_report import plain

CATEGORIES = (
    "launch_overhead", "sync_stall", "capture_window", "dominant_kernel", "memcpy", "nccl_wait",
    "allocation", "host_gap", "graph_trace_mode", "nvtx_coverage", "none",
)
SEVERITY_RANK = {"high": 0, "medium": 1, "low": 2, "info": 3}
HIGH_SHARE = 20.0
MIN_GAPS_LAUNCH_BOUND = 10
MEDIUM_SHARE = 5.0


def ms(ns: float) -> str:
    return f"{ns / 1e6:.3f} ms"


def us(ns: float) -> str:
    return f"{ns / 1e3:.2f} us"


def collect_warnings(report) -> List[str]:
    w = list(report.model.warnings)
    k = report.kernels
    if not k.available and k.reason:
        w.append(k.reason[0].upper() + k.reason[1:])
    att = report.attribution
    thr = report.options.nvtx_coverage_warn_threshold
    if att.available and att.coverage < thr:
        w.append(f"NVTX→kernel attribution covers {att.coverage * 100:.1f}% of kernel time "
                 f"(< {thr * 100:.1f}%): per-range and per-phase GPU time is partial.")
        low = [p for p in att.pid_coverage if p["coverage"] < thr and p["kernel_ns"] > 0]
        if low and len(att.pid_coverage) > 1:
            worst = min(low, key=lambda p: p["coverage"])
            w.append(f"Per-PID NVTX attribution is low for {len(low)} PID(s) (worst PID {worst['pid']}: "
                     f"{worst['coverage'] * 100:.1f}%).")
    g = plain(report.extra.get("graphs")) or {}
    if g.get("graph_level_hidden"):
        w.append(g.get("warning") or "CUDA graphs ran with graph-level tracing: their kernels are not in the "
                 "trace, so per-kernel numbers and GPU idle are unreliable; capture with "
                 "`--cuda-graph-trace=node`.")
    return w


# --------------------------------------------------------------------------- helpers


def stack_of(report) -> str:
    """Recognised serving stack from kernel/NVTX/process names: vllm, sglang, trtllm, torch, or ''."""
    names = " ".join(n for n in (report.model.kernels.names if report.model.kernels else [])[:2000]).lower()
    nv = " ".join((report.model.nvtx.names if report.model.nvtx else [])[:2000]).lower()
    procs = " ".join(str(p.get("name", "")) for p in report.trace.processes).lower()
    blob = names + " " + nv + " " + procs
    if "vllm" in blob:
        return "vllm"
    if "sglang" in blob or "sgl_kernel" in blob:
        return "sglang"
    if "tensorrt_llm" in blob or "trtllm" in blob or "tllm" in blob:
        return "trtllm"
    if "triton_" in names or "aten::" in nv or "at::native" in names:
        return "torch"
    return ""


def _acct(report) -> Optional[Dict]:
    a = report.extra.get("accounting")
    if not a:
        return None
    steady = plain(a.get("steady"))
    if not steady or not steady.get("available"):
        return None
    return steady


def _window(report) -> Dict:
    return plain(report.extra.get("window")) or {}


def _severity(share_pct: float) -> Optional[str]:
    if share_pct >= HIGH_SHARE:
        return "high"
    if share_pct >= MEDIUM_SHARE:
        return "medium"
    return None


def _host(d: Dict, part: str) -> int:
    """Host-caused idle of a state (the GPU had nothing queued; see accounting)."""
    return int((d.get("idle_host_caused_parts") or d.get("idle_parts") or {}).get(part, 0))


def _host_short(d: Dict, part: str) -> int:
    return int((d.get("idle_host_caused_parts_short_gaps") or {}).get(part, 0))


#: idle amounts per device dict of the steady-state accounting, one per idle-based finding; all count only
#: host-caused idle (before the next activity's launch call returned), never queued-work latency
AMOUNTS = {
    # host blocked in synchronize calls (synchronous copies are the memcpy finding)
    "sync": lambda d: _host(d, "sync") - d.get("idle_in_sync_memcpy_ns", 0),
    "memcpy_sync": lambda d: d.get("idle_in_sync_memcpy_ns", 0),
    # inside launch calls, plus host time between launches in gaps < 100 µs (per-launch CPU overhead)
    "launch": lambda d: _host(d, "launch") + _host_short(d, "no_cuda_call") + _host_short(d, "other_api"),
    "alloc": lambda d: _host(d, "alloc"),
    # host work outside CUDA calls in gaps ≥ 100 µs (scheduling, Python, tokenization)
    "host": lambda d: _host(d, "no_cuda_call") - _host_short(d, "no_cuda_call"),
}


def _window_total(acct: Dict) -> int:
    return int(sum(d.get("window_ns", 0) for d in acct.get("devices", [])))


def _scope_text(report) -> str:
    w = _window(report)
    if w and w.get("method") not in (None, "full"):
        return (f"steady-state window {ms(w['start_ns'])} → {ms(w['end_ns'])} ({w.get('method')}; full trace "
                f"{ms(w['full_start_ns'])} → {ms(w['full_end_ns'])})")
    return "whole trace (no warm-up/tail trimmed)"


# --------------------------------------------------------------------------- rules


STACK_TIPS = {
    "launch_overhead": {
        "vllm": "vLLM: make sure decode runs in CUDA graphs (no `--enforce-eager`; the captured batch sizes "
                "must cover your running batch sizes) and keep torch.compile fusion enabled.",
        "sglang": "SGLang: keep CUDA graphs enabled (no `--disable-cuda-graph`; raise `--cuda-graph-max-bs` to "
                  "cover the running batch sizes).",
        "trtllm": "TensorRT-LLM: enable CUDA graphs for generation steps and in-flight batching.",
        "torch": "PyTorch: capture the decode step with CUDA graphs (`torch.compile(mode=\"reduce-overhead\")` "
                 "or `torch.cuda.graphs`) and fuse small elementwise ops.",
    },
    "sync_stall": {
        "vllm": "vLLM: look for `.item()`/`.cpu()`/`.tolist()` on GPU tensors in the step (sampling, logits "
                "processors, stop checks); `--async-scheduling` overlaps output processing with the next step.",
        "sglang": "SGLang: keep the overlap scheduler on (no `--disable-overlap-schedule`) so the CPU prepares "
                  "the next batch while the GPU runs.",
        "torch": "PyTorch: replace `.item()`/`.cpu()`/`torch.cuda.synchronize()` in the loop with "
                 "non-blocking copies to pinned memory and events polled later.",
    },
    "host_gap": {
        "vllm": "vLLM: `--async-scheduling` overlaps scheduling and output processing with GPU execution; "
                "CUDA graphs (no `--enforce-eager`) shorten the host work per step.",
        "sglang": "SGLang: keep the overlap scheduler on (no `--disable-overlap-schedule`) and CUDA graphs "
                  "enabled.",
        "trtllm": "TensorRT-LLM: keep the overlap scheduler enabled in the PyTorch backend and use CUDA graphs.",
    },
    "memcpy": {
        "torch": "PyTorch: `tensor.pin_memory()` once, then `.to(device, non_blocking=True)`; avoid "
                 "`torch.tensor(python_list, device=...)` inside the step (a pageable, synchronous copy).",
    },
    "capture_window": {
        "vllm": "vLLM: start/stop the profiler from vLLM itself (see its profiling docs: `--profiler-config`, "
                "`vllm bench serve --profile`) with `nsys profile --capture-range=cudaProfilerApi`.",
    },
}


def _tip(category: str, stack: str) -> List[str]:
    t = STACK_TIPS.get(category, {}).get(stack)
    return [t] if t else []


PART_TEXT = {
    "sync": "blocked in host-synchronizing calls (synchronous copies excluded)",
    "memcpy_sync": "inside synchronous memcpy/memset calls",
    "launch": "inside kernel launch calls or between launches in gaps < 100 µs",
    "alloc": "inside allocation/free calls",
    "host": "outside any CUDA call in gaps ≥ 100 µs (host-side work)",
}


def _idle_rule(report, part: str, fid: str, category: str, title: str, recs: List[str],
               extra_evidence: Optional[List[str]] = None) -> Optional[Dict]:
    """A finding for one idle amount of :data:`AMOUNTS`: severity from its share of the summed device windows
    (steady state), time at stake = the amount."""
    acct = _acct(report)
    if not acct:
        return None
    amount = AMOUNTS[part]
    devs = [d for d in acct.get("devices", []) if d.get("window_ns")]
    total = int(sum(max(amount(d), 0) for d in devs))
    win = _window_total(acct)
    if total <= 0 or win <= 0:
        return None
    share = 100.0 * total / win
    sev = _severity(share)
    if sev is None:
        return None
    d = max(devs, key=lambda x: amount(x) / x["window_ns"])
    ev = [f"GPU idle while the launching thread(s) were {PART_TEXT[part]}: {ms(total)} = "
          f"{share:.1f}% of the summed device windows ({_scope_text(report)}).",
          f"Worst device {d['device_id']}: {ms(amount(d))} of its {ms(d['window_ns'])} window; busy "
          f"{d.get('busy_pct', 0):.1f}%, idle {d.get('idle_pct', 0):.1f}% (idle split: "
          + ", ".join(f"{k} {ms(v)}" for k, v in d["idle_parts"].items() if v) + ")."]
    ev += extra_evidence or []
    return {"id": fid, "category": category, "severity": sev, "confidence": "high" if share >= HIGH_SHARE else "medium",
            "title": title, "evidence": ev, "recommendation": recs + _tip(category, stack_of(report)),
            "time_at_stake_ns": total}


def rule_sync(report):
    acct = _acct(report)
    if not acct:
        return None
    s = report.sync
    top = s.sync_apis[0] if s.available and s.sync_apis else None
    extra = []
    if top:
        extra.append(f"Top blocking call `{top['name']}`: {top['count']} calls, {ms(top['total_ns'])} total "
                     f"(avg {us(top['avg_ns'])}); all host-blocking sync calls: {ms(s.total_ns)} "
                     "(non-blocking queries/waits excluded).")
    return _idle_rule(
        report, "sync", "sync_stall", "sync_stall",
        "Sync stall: the GPU idles while the host waits in synchronize calls",
        ["Remove per-step host synchronization (`cudaStreamSynchronize`/`cudaDeviceSynchronize`/event sync) from "
         "the steady-state loop, or move the wait after the next step has been launched (double-buffer the step)."],
        extra_evidence=extra)


def rule_memcpy(report):
    mem = plain(report.extra.get("memory")) or {}
    ev = []
    pg = mem.get("pageable") or {}
    if pg.get("count"):
        ev.append(f"Pageable host copies: {pg.get('count')} copies, {pg.get('bytes', 0) / 1e6:.1f} MB, "
                  f"{ms(pg.get('total_ns', 0))} GPU time (pageable memory forces a staged, synchronous copy).")
    sc = mem.get("sync_copies") or {}
    if sc.get("count"):
        ev.append(f"Synchronous copy calls blocking the launching thread: {sc.get('count')} calls, "
                  f"{ms(sc.get('host_blocked_ns', 0))} host time.")
    return _idle_rule(
        report, "memcpy_sync", "memcpy_sync_copies", "memcpy",
        "Synchronous host↔device copies stall the GPU every step",
        ["Allocate host buffers pinned (`pin_memory=True` / `cudaHostAlloc`) and use `cudaMemcpyAsync` / "
         "`tensor.to(device, non_blocking=True)` on a side stream; prefetch the next step's inputs while the "
         "current step runs."],
        extra_evidence=ev)


def rule_launch(report):
    acct = _acct(report)
    extra = []
    if acct:
        ls = acct.get("launch_stats", {})
        lc = ls.get("launch_call", {})
        if lc.get("count"):
            extra.append(f"Launch calls: {lc['count']} with p50 {us(lc['p50_ns'])} / p90 {us(lc['p90_ns'])} each "
                         "on the CPU.")
        tot = acct.get("totals", {})
        if tot.get("gap_count"):
            extra.append(f"{tot.get('short_gap_count', 0)} of {tot['gap_count']} GPU gaps are shorter than 100 µs and "
                         f"hold {tot.get('idle_in_short_gaps_pct', 0):.1f}% of idle (many tiny gaps = launch-bound).")
    for d in report.launch.per_device:
        extra.append(f"Device {d['device_id']}: {d['launches_per_s']:.0f} launches/s, kernel p50 "
                     f"{us(d['p50_ns'])}, {d['pct_under_10us']:.1f}% of kernels < 10 µs"
                     + (" — launch storm." if d["launch_storm"] else "."))
    f = _idle_rule(
        report, "launch", "launch_overhead", "launch_overhead",
        "Launch-bound: the GPU waits for the CPU to launch kernels",
        ["Reduce the number of kernel launches per step: CUDA graphs for decode, kernel fusion "
         "(torch.compile, fused norms/activations), larger batches per launch."],
        extra_evidence=extra)
    if f is not None and acct and acct.get("totals", {}).get("gap_count", 0) < MIN_GAPS_LAUNCH_BOUND:
        # a few long launch calls (lazy module loading, first-launch JIT) are not a launch-bound loop
        f["severity"] = "low"
        f["confidence"] = "low"
        f["evidence"].append(f"Only {acct['totals'].get('gap_count', 0)} GPU gaps: this looks like first-launch "
                             "cost (module loading / JIT), not a launch-bound loop.")
    return f


def rule_launch_storm(report):
    """Informational: a device is flagged as a launch storm but launch overhead does not (yet) idle the GPU."""
    storm = [d for d in report.launch.per_device if d.get("launch_storm")]
    if not storm or rule_launch(report) is not None:
        return None
    g = plain(report.extra.get("graphs")) or {}
    if (g.get("graph_kernel_pct") or 0) >= 50.0:
        return None   # kernels replayed from CUDA graphs are not launched one by one by the CPU
    ev = [f"Device {d['device_id']}: {d['launches_per_s']:.0f} launches/s, kernel p50 {us(d['p50_ns'])}, "
          f"{d['pct_under_10us']:.1f}% of kernels < 10 µs." for d in storm]
    ev.append("Host-caused idle inside or between launches stays below 5% of the window, so the GPU is still fed; "
              "the CPU is close to its launch limit.")
    return {"id": "launch_storm", "category": "launch_overhead", "severity": "low", "confidence": "medium",
            "title": "Launch storm: many tiny kernels at a high launch rate (not yet idling the GPU)",
            "evidence": ev,
            "recommendation": ["Headroom: CUDA graphs or kernel fusion would cut CPU launch work before it becomes "
                               "the bottleneck at smaller batch sizes."] + _tip("launch_overhead", stack_of(report)),
            "time_at_stake_ns": 0}


def rule_alloc(report):
    mem = plain(report.extra.get("memory")) or {}
    extra = []
    al = mem.get("alloc") or {}
    if al.get("count"):
        extra.append(f"Allocation/free calls: {al.get('count')} calls, {ms(al.get('total_ns', 0))} on the CPU"
                     + (f"; {al['in_steps']} inside detected steps." if al.get("in_steps") else "."))
    return _idle_rule(
        report, "alloc", "allocation_in_loop", "allocation",
        "Allocation in the loop: the GPU idles during cudaMalloc/cudaFree",
        ["Allocate buffers once outside the step loop (or use a caching allocator / stream-ordered pool: "
         "`cudaMallocAsync` with a mempool release threshold); never call cudaFree in steady state (it "
         "synchronizes the device)."],
        extra_evidence=extra)


def rule_host_gap(report):
    return _idle_rule(
        report, "host", "host_gap", "host_gap",
        "Host gaps: the GPU idles while the host is outside any CUDA call",
        ["The CPU is busy with framework work between launches (scheduling, Python, tokenization, "
         "detokenization). Profile the host with `nsys --sample=cpu` or py-spy; overlap CPU work with GPU "
         "execution (async scheduling, CUDA graphs, moving pre/post-processing off the critical path)."])


def rule_capture_window(report):
    w = _window(report)
    if not w or w.get("method") in (None, "full", "override", "nvtx"):
        return None
    full = int(w["full_end_ns"] - w["full_start_ns"])
    trimmed = int(w.get("warmup_ns", 0) + w.get("tail_ns", 0))
    if full <= 0 or trimmed <= 0:
        return None
    share = 100.0 * trimmed / full
    if share < 20.0:
        return None
    full_idle = [d for d in report.idle.devices]
    ev = [f"Warm-up {ms(w.get('warmup_ns', 0))} and tail {ms(w.get('tail_ns', 0))} are {share:.1f}% of the "
          f"{ms(full)} capture; steady state is {ms(w['start_ns'])} → {ms(w['end_ns'])}. {w.get('reason', '')}"]
    if full_idle:
        d = max(full_idle, key=lambda r: r["idle_pct"])
        ev.append(f"Over the full window device {d['device_id']} looks {d['idle_pct']:.1f}% idle — "
                  "mostly warm-up/tail, "
                  "not a steady-state problem; the other findings use the steady-state window.")
    return {"id": "capture_window", "category": "capture_window", "severity": "medium", "confidence": "medium",
            "about_capture": True,
            "title": "The capture is dominated by warm-up / idle tail",
            "evidence": ev,
            "recommendation": ["Capture only steady-state decode: `nsys profile --capture-range=cudaProfilerApi` "
                               "with `torch.cuda.profiler.start()/stop()` around a few steps after warm-up, or "
                               "`--delay`/`--duration`; re-run this tool with `--window` or `--window-nvtx` to "
                               "choose the window yourself."] + _tip("capture_window", stack_of(report)),
            "time_at_stake_ns": trimmed}


def rule_graph_trace(report):
    g = plain(report.extra.get("graphs")) or {}
    if not g.get("graph_level_hidden"):
        return None
    gt = g.get("graph_trace") or {}
    at_stake = int(gt.get("total_ns") or 0)
    acct = _acct(report)
    if acct:
        at_stake = max(at_stake, int(acct.get("totals", {}).get("idle_ns", 0)))
    ev = [f"{g.get('graph_launch_count', 0)} CUDA graph launches but no kernel rows linked to them"
          + (f"; {gt.get('count', 0)} whole-graph executions take {ms(gt.get('total_ns', 0))} of GPU time in "
             "CUPTI_ACTIVITY_KIND_GRAPH_TRACE." if gt.get("total_ns") else "."),
          f"Capture metadata graph trace mode: {g.get('capture_graph_trace_mode') or 'not recorded'}."]
    return {"id": "graph_trace_mode", "category": "graph_trace_mode", "severity": "high", "confidence": "high",
            "blocks_analysis": True,
            "title": "CUDA graphs were traced at graph level: their kernels are missing",
            "evidence": ev,
            "recommendation": ["Re-capture with `nsys profile --cuda-graph-trace=node` so every kernel inside "
                               "the graphs is recorded; until then per-kernel tables and GPU idle are unreliable."],
            "time_at_stake_ns": at_stake}


def rule_nccl(report):
    n = plain(report.extra.get("nccl")) or {}
    v = n.get("straggler")
    if not v:
        return None
    wait = int(v.get("wait_ns_total", 0))
    if wait <= 0:
        return None
    v = dict(v)
    v["evidence"] = [f"Median NCCL kernel duration on {v.get('waiting_rank')} is {v.get('duration_ratio', 0):.2f}x "
                     f"its peers'; {v.get('late_rank')} arrived last in {v.get('late_share', 0) * 100:.0f}% of "
                     f"{v.get('matched_collectives', 0)} matched collectives."]
    return {"id": "nccl_wait", "category": "nccl_wait",
            "severity": "high" if v.get("confidence") == "high" else "medium",
            "confidence": v.get("confidence", "medium"),
            "title": f"NCCL wait: rank {v.get('waiting_rank')} waits in collectives for late rank {v.get('late_rank')}",
            "evidence": [f"Across matched collectives the late rank arrived {ms(wait)} after the earliest in total; "
                         f"the waiting rank's NCCL kernels absorb that time."] + list(v.get("evidence", [])),
            "recommendation": ["Balance the work before the collective on the late rank (uneven batch/sequence "
                               "split, extra host work or a slower GPU on that rank); check its step timeline."],
            "time_at_stake_ns": wait}


def rule_dominant_kernel(report):
    k = report.kernels
    if not k.available or not k.by_name:
        return None
    top = k.by_name[0]
    if top["pct"] < 50.0:
        return None
    busy_frac = 1.0
    acct = _acct(report)
    if acct and acct.get("totals", {}).get("window_ns"):
        busy_frac = acct["totals"]["busy_ns"] / acct["totals"]["window_ns"]
    at_stake = int(top["total_ns"] * busy_frac)
    sev = "medium" if busy_frac >= 0.5 else "low"
    return {"id": "dominant_kernel", "category": "dominant_kernel", "severity": sev, "confidence": "high",
            "title": "One kernel dominates GPU time",
            "evidence": [f"`{top['name'][:200]}` is {top['pct']:.1f}% of kernel time ({ms(top['total_ns'])} over "
                         f"{top['count']} calls, avg {us(top['avg_ns'])}, p90 {us(top['p90_ns'])}).",
                         f"The GPU is busy {busy_frac * 100:.1f}% of the analyzed window, so this kernel's speed "
                         "sets the step time."],
            "recommendation": ["Optimize this kernel first: check its tile/config choice for your shapes, a fused "
                               "or newer implementation (FlashAttention/FlashInfer, cuBLASLt heuristics, FP8), "
                               "and whether it runs more often than needed."],
            "time_at_stake_ns": at_stake}


def rule_nvtx_coverage(report):
    att = report.attribution
    thr = report.options.nvtx_coverage_warn_threshold
    if not att.available or att.coverage >= thr:
        return None
    return {"id": "nvtx_coverage", "category": "nvtx_coverage", "severity": "low", "confidence": "high",
            "title": "NVTX ranges cover little of the GPU time",
            "evidence": [f"Coverage {att.coverage * 100:.1f}% of kernel time ({ms(att.attributed_ns)} of "
                         f"{ms(att.total_kernel_ns)}) is launched inside a push/pop range."],
            "recommendation": ["Add NVTX ranges around prefill/decode steps (vLLM/SGLang can emit them) to get "
                               "per-phase GPU time."],
            "time_at_stake_ns": 0}


RULES = [rule_graph_trace, rule_capture_window, rule_sync, rule_memcpy, rule_launch, rule_launch_storm, rule_alloc,
         rule_host_gap, rule_nccl, rule_dominant_kernel, rule_nvtx_coverage]


def _none_finding(report) -> Dict:
    acct = _acct(report)
    ev = []
    if acct and acct.get("totals", {}).get("window_ns"):
        t = acct["totals"]
        ev.append(f"GPU busy {t['busy_ns'] / t['window_ns'] * 100:.1f}% of the summed device windows "
                  f"({_scope_text(report)}); no idle cause reaches {MEDIUM_SHARE:.0f}% of the window.")
    elif not report.kernels.available:
        ev.append(report.kernels.reason or "no kernels")
    s = report.sync
    if s.available and s.total_ns:
        ev.append(f"Host-blocking sync calls total {ms(s.total_ns)}, but the GPU stays busy meanwhile, so they "
                  "are not stalls.")
    return {"id": "no_bottleneck", "category": "none", "severity": "info", "confidence": "medium",
            "title": "No bottleneck found: the GPU is kept busy" if report.kernels.available
            else "No bottleneck can be diagnosed (no GPU kernels in the trace)",
            "evidence": ev,
            "recommendation": ["Further gains come from faster kernels (see the top kernels and categories) or "
                               "larger batches."],
            "time_at_stake_ns": 0}


def run_rules(report) -> List[Dict]:
    findings: List[Dict] = []
    for rule in RULES:
        out = rule(report)
        if out:
            findings.extend(out if isinstance(out, list) else [out])
    major = [f for f in findings if f["severity"] in ("high", "medium")]
    minor = [f for f in findings if f["severity"] not in ("high", "medium")]
    # a finding that invalidates the other numbers (graph-level tracing) comes first
    # a finding that invalidates the other numbers (graph-level tracing) comes first; findings about the
    # capture itself (warm-up/tail) come after the workload's own bottlenecks, whose time at stake is
    # steady-state time and so not comparable with trimmed warm-up time
    major.sort(key=lambda f: (not f.get("blocks_analysis", False), f.get("about_capture", False),
                              -int(f["time_at_stake_ns"]), SEVERITY_RANK[f["severity"]], f["id"]))
    minor.sort(key=lambda f: (SEVERITY_RANK.get(f["severity"], 9), -int(f["time_at_stake_ns"]), f["id"]))
    if not major:
        major = [_none_finding(report)]
    return major + minor
