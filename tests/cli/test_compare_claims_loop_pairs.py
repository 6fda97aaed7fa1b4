"""Compare and cluster claims checked against BASE/NEW pairs and rank groups whose truth is known by construction
(docs/COMPARE.md, docs/CLUSTER.md "Per-rank view and claims").

The loop (``_loop``, exact TraceBuilder rows, no jitter): per step, from its start t, a 16 µs pinned H2D copy
(+2…+18 µs), a 200 µs GEMM (+20…+220 µs), a FlashAttention kernel of ``attn`` µs right after it, a 20 µs RMS norm,
a 10 µs sampler, a ``cudaStreamSynchronize`` that returns 5 µs after the sampler, an NVTX ``execute_model`` range
from t to 10 µs after that; the next step starts ``period − 355 µs`` after the sync returns (host work with the
GPU idle). So the step period is ``period + attn − 100 µs`` and its wall 365 µs + ``attn`` − 100 µs."""

from __future__ import annotations

import math
import os

import numpy as np
import pytest
from synth import TraceBuilder
from synth.loops import LOOP_KERNELS, synced_loop
from synth.scenarios.cluster import AR, BASE_UTC, GEMM
from synth.scenarios.names import K

import nsys_llm_explainer as nle
from nsys_llm_explainer.comparison.metric import change
from nsys_llm_explainer.comparison.result import MetricValue

US = 1_000
MS = 1_000_000
SAMPLER = "void at::native::sampling_kernel()"


def _loop(path, steps: int = 40, attn: int = 100, period: int = MS) -> str:
    kernels = tuple((n, attn if n == K.FLASH else d) for n, d in LOOP_KERNELS)
    return synced_loop(str(path), kernels, steps, period)


def test_a_pair_not_compared_claims_nothing_about_its_change(tmp_path):
    """BASE: 40 steps of the loop; NEW: the same loop captured for 8 steps (7 step periods < 10, steady window
    7 × 1 ms + 365 µs = 7.365 ms < 20 ms): not compared. The window time per step is then mostly where the capture
    cut the loop — (39 × 1 000 + 365) / 40 = 984.1 µs against (7 × 1 000 + 365) / 8 = 920.6 µs — so the headline
    said "Largest change: GPU idle with the host outside CUDA, NVTX and OS calls (idle cause `host_cpu`) −0.064 ms
    per step" of a loop whose host work did not change, and "noise ±0.0 %: the change is within the noise" of a
    pair it declined to compare. Now: the reasons, the spread and count of each trace, and GPU busy only. (The window
    time per step is now over whole periods, first step's start to the last step's start: 1.000 ms in both.)"""
    base, new = _loop(tmp_path / "b.sqlite"), _loop(tmp_path / "n.sqlite", steps=8)
    c = nle.compare([base, new], labels=["BASE", "NEW"]).comparisons[0]
    assert (c.status, c.verdict) == ("too_short", "not_compared")
    assert (c.window_per_unit_base_ns, c.window_per_unit_new_ns) == (1_000_000, 1_000_000)
    assert c.headline == (
        "`NEW` vs `BASE`: not compared — too short to compare: NEW has 7 step periods (< 10); the steady window of NEW "
        "is 7.365 ms (< 20.000 ms).",
        "Spread p90/p50 1.00 over 39 step periods vs 1.00 over 7.",
        "GPU busy 33.5 % → 35.8 % of the steady window.")


def test_a_longer_capture_of_the_same_loop_does_not_move_the_main_reason(tmp_path):
    """BASE: 24 steps; NEW: the same loop with FlashAttention 10 µs longer (110 µs), captured for 60 steps. Truth:
    every step of NEW is exactly 10 µs longer, all of it attention (step period 1.000 → 1.010 ms, +1.0 %); the host
    work between steps is the same 645 µs. The main reason must be `attention` +0.010 ms per step. It reads
    "`host_cpu` +0.016 ms per step": the steady window holds a host tail after every step but the last, so the
    host idle per step is about 23/24 of a tail in BASE and 59/60 in NEW (0.609 → 0.624 ms per step in the
    idle table), an artefact of where the captures end that outweighs the real change.

    Fix I would make: for the period metrics, measure the per-unit parts over whole periods — per process from its
    first step's start to its last step's start (N − 1 units, each a full period), or count the last step's
    partial period as (its time in the window) / the median period and leave the parts as they are (the edge
    then moves busy parts by ~wall·(1 − wall/period)/N instead: 5 µs here, under the real change)."""
    base, new = _loop(tmp_path / "b.sqlite", steps=24), _loop(tmp_path / "n.sqlite", steps=60, attn=110)
    c = nle.compare([base, new], labels=["BASE", "NEW"]).comparisons[0]
    assert (c.verdict, c.metric_base.p50_ns, c.metric_new.p50_ns) == ("slower", 1_000 * US, 1_010 * US)
    assert (c.main_reason.component, c.main_reason.name) == ("category", "attention")
    assert c.main_reason.delta_per_unit_ns == 10 * US
    # the parts are over whole periods (first step's start to the last step's start): 23 and 59 periods of 1.000 and
    # 1.010 ms, the host work between steps 635 µs per period in both (1 000 − 365 µs)
    b, n = nle.compare([base, new], labels=["BASE", "NEW"]).traces
    assert (b.units, n.units, b.pooled_window_ns, n.pooled_window_ns) == (23, 59, 23 * MS, 59 * 1_010 * US)
    top = [(s.idle_by_kind[0].name, s.idle_by_kind[0].per_unit_ns) for s in (b, n)]
    assert top == [("host_cpu", 635 * US)] * 2
    assert (c.window_per_unit_base_ns, c.window_per_unit_new_ns) == (1_000 * US, 1_010 * US)


def test_a_longer_host_tail_is_the_main_reason_whatever_the_capture_length(tmp_path):
    """The opposite case: BASE 24 steps; NEW 60 steps of the same kernels with 40 µs more host work between steps
    (period 1.040 ms). Truth: every period of NEW is 40 µs longer, all of it GPU idle with the host outside CUDA:
    main reason `host_cpu` +0.040 ms per step (635 → 675 µs), the kernel categories unchanged per step."""
    base, new = _loop(tmp_path / "b.sqlite", steps=24), _loop(tmp_path / "n.sqlite", steps=60, period=1_040 * US)
    c = nle.compare([base, new], labels=["BASE", "NEW"]).comparisons[0]
    assert (c.verdict, c.metric_new.p50_ns) == ("slower", 1_040 * US)
    assert (c.main_reason.component, c.main_reason.name, c.main_reason.delta_per_unit_ns) == ("idle", "host_cpu",
                                                                                               40 * US)
    assert {d.name: d.delta_per_unit_ns for d in c.category_changes if d.name != "non_gpu"} == {
        "gemm": 0, "attention": 0, "norm": 0, "sampling": 0}


def test_both_changes_over_whole_periods_add_up_to_the_period_change(tmp_path):
    """Mixed: BASE 60 steps; NEW 24 steps with FlashAttention 10 µs longer and 30 µs more host work (period
    1.040 ms: attn 110 µs, ``period`` 1.030 ms). Truth per step: attention +10 µs, `host_cpu` +30 µs, and the window
    time per step 1.000 → 1.040 ms, exactly the sum; the main reason is `host_cpu` +0.030 ms."""
    base = _loop(tmp_path / "b.sqlite", steps=60)
    new = _loop(tmp_path / "n.sqlite", steps=24, attn=110, period=1_030 * US)
    c = nle.compare([base, new], labels=["BASE", "NEW"]).comparisons[0]
    assert (c.window_per_unit_base_ns, c.window_per_unit_new_ns) == (1_000 * US, 1_040 * US)
    assert (c.main_reason.name, c.main_reason.delta_per_unit_ns) == ("host_cpu", 30 * US)
    assert {d.name: d.delta_per_unit_ns for d in c.category_changes}["attention"] == 10 * US


def test_identical_runs_with_noise_are_rarely_called_different():
    """A/A by construction: BASE and NEW draw their 39 step periods from the same distribution (1 ms + normal
    noise of σ 20 µs, or + uniform 0…50 µs). docs/COMPARE.md: noise = the ~95 % half-width of the change, so
    |change| > noise should happen in about 5 % of such pairs (at most 6.5 % over 4 000 pairs: the binomial
    standard error is 0.35 %). It happens in ~10 % (normal) and ~13 % (uniform) of them. The 0.5 % floor hides it
    for quiet loops (σ 20 µs is 2 %, so it does not here).

    Fix I would make: a half-width of 1.96 σ of each median, σ_median ≈ 1.2533 σ / √n = 0.929 IQR / √n for normal
    samples, i.e. 1.82 · IQR / √n combined in quadrature (or McGill's 1.58 added, h_BASE + h_NEW, ~98 %); every
    trace's noise_pct changes (identity diffs on the 05/06 pair)."""
    rng = np.random.default_rng(7)
    n = 39

    def mv(x: np.ndarray) -> MetricValue:
        q75, q25 = np.percentile(x, [75, 25])
        return MetricValue(int(np.median(x)), None, n, None, int(q75 - q25))

    for draw in (lambda: MS + rng.normal(0, 20 * US, n), lambda: MS + rng.uniform(0, 50 * US, n)):
        hits = 0
        for _ in range(4000):
            ch, noise = change(mv(draw()), mv(draw()))
            hits += abs(ch) > noise
        assert hits / 4000 <= 0.065


def test_one_kernel_five_times_slower_is_a_regression_not_another_workload(tmp_path):
    """BASE: the loop; NEW: the same four kernels, FlashAttention 500 µs instead of 100 µs. Truth: the same
    workload, 40 % slower per step (1.000 → 1.400 ms). Shares of kernel time: BASE gemm 200/330, attention 100/330,
    norm 20/330, sampling 10/330; NEW 200/730, 500/730, 20/730, 10/730: weighted Jaccard Σmin / Σmax =
    (200/730 + 100/330 + 20/730 + 10/730) / (200/330 + 500/730 + 20/330 + 10/330) = 0.447 < 0.5, so the pair is
    "too different to compare: the kernel mixes overlap little" — every kernel name of each run is in the other —
    and `--fail-on-regression 5 --allow-incomparable` lets a +40 % regression through (exit 0, "not gated").

    Fix I would make: test that the runs are one workload by the kernel *names* they share — the fraction of each
    run's kernel time spent in kernels the other run also has, min over the two (1.0 here; a different model or
    engine shares few names) — and keep the weighted Jaccard as a reported number only."""
    base, new = _loop(tmp_path / "b.sqlite"), _loop(tmp_path / "n.sqlite", attn=500)
    res = nle.compare([base, new], labels=["BASE", "NEW"])
    c = res.comparisons[0]
    assert c.change_pct == pytest.approx(40.0)
    assert (c.status, c.verdict) == ("comparable", "slower")


# ------------------------------------------------------------------------------------------ cluster
def _rank(path: str, r: int, host_delay_us: int, coll_start, coll_end, off: int, gemm_us: int = 300) -> None:
    """Rank ``r`` (pid 5000 + r, GPU r, session ``off`` after BASE_UTC), 12 steps of 1 ms from 50 ms on the common
    clock: the host launches a ``gemm_us`` GEMM ``host_delay_us`` into the step (kernel 10 µs after the launch starts),
    then the all-reduce [coll_start(r, s), coll_end(s)], a ``cudaStreamSynchronize`` and ``execute_model``."""
    b = TraceBuilder("2024.2", seed=r, utc_epoch_ns=BASE_UTC + off)
    pid = 5000 + r
    b.process(pid)
    g = b.thread(pid, pid, f"rank{r}")
    b.gpu(r)
    for s in range(12):
        st = 50 * MS + s * MS - off
        h = st + host_delay_us * US
        b.launch(h, h + 5 * US, h + 10 * US, h + (10 + gemm_us) * US, pid=pid, tid=pid, device=r, name=GEMM)
        end = coll_end(s) - off
        b.launch(h + 6 * US, h + 9 * US, coll_start(r, s) - off, end, pid=pid, tid=pid, device=r, name=AR)
        c = b.runtime(h + 12 * US, end + 5 * US, tid_g=g, name="cudaStreamSynchronize_v3020")
        b.sync(h + 12 * US, end + 5 * US, pid=pid, sync_type=3, device=r, corr=c)
        b.nvtx_push_pop(st, end + 8 * US, "execute_model", tid_g=g)
    b.write(path, overwrite=True)


def test_a_late_rank_is_not_also_the_least_busy_because_the_others_wait_for_it(tmp_path):
    """4 ranks, sessions 1 ms apart (aligned). Rank 1's host launches its GEMM 150 µs late in every step; every
    GEMM takes 300 µs; each rank's all-reduce starts 2 µs after its own GEMM and all end 20 µs after rank 1's
    starts. Truth: every GPU does the same work per step (300 µs GEMM + 20 µs of all-reduce transfer); ranks 0, 2
    and 3 additionally spin 150 µs per step in the all-reduce waiting for rank 1 (12 × 150 = 1.8 ms each, the
    late-arriver claim, correct). The low_busy_rank claim "rank1 keeps its GPU busy less than the other ranks
    (34.1 % vs a median of 49.1 %)", at stake 1.551 ms, counts that waiting as the others' busy time: the 15-point
    gap is the others' wait for rank 1 (1.8 ms of their 11.49 ms windows = 15.7 points), already claimed as the
    late arriver's cost, not work rank 1's GPU leaves undone. Only the late-arriver claim is true. (Every window now
    holds all 12 identical steps, 11.49 ms — window rule 5b no longer trims rank 1's first step as warm-up — so
    rank 1 is busy 12 × 320 µs / 11.49 ms = 33.42 %.)

    Fix I would make: when the clocks are aligned, compare busy % net of each rank's own NCCL wait (busy_ns −
    the waits of its matched instances inside its steady window) in low_busy_rank; its check becomes
    busy_pct_gap of that net busy."""
    def start(r: int, s: int) -> int:
        return 50 * MS + s * MS + (150 * US if r == 1 else 0) + 312 * US

    def end(s: int) -> int:
        return start(1, s) + 20 * US

    for r in range(4):
        _rank(os.path.join(tmp_path, f"rank{r}.sqlite"), r, 150 if r == 1 else 0, start, end, r * MS)
    res = nle.analyze_cluster(str(tmp_path), jobs=1)
    ranks = {x.rank: x for x in res.collectives.ranks}
    assert ranks["rank0"].wait_ns_total == 12 * 150 * US and ranks["rank1"].last_arrival_count == 12
    assert math.isclose(min(d.busy_pct for d in res.devices), 33.42, abs_tol=0.005)   # the gap is there...
    assert sorted((c.id, c.rank) for c in res.claims) == [("late_arriver", "rank1")]  # ...but is the others' wait
    assert [(r.rank, r.wait_in_window_ns) for r in res.collectives.ranks] == [
        ("rank0", 1_800 * US), ("rank1", 0), ("rank2", 1_800 * US), ("rank3", 1_800 * US)]


def _ranks_of(tmp_path, late: bool, short_gemm: bool):
    """4 ranks as above; rank 1 late by 150 µs when ``late``, its GEMM 150 µs instead of 300 when ``short_gemm``;
    the all-reduces end 20 µs after rank 1's starts."""
    def start(r: int, s: int) -> int:
        return 50 * MS + s * MS + (150 * US if r == 1 and late else 0) + 312 * US

    def end(s: int) -> int:
        return start(1, s) + 20 * US

    for r in range(4):
        _rank(os.path.join(tmp_path, f"rank{r}.sqlite"), r, 150 if r == 1 and late else 0, start, end, r * MS,
              gemm_us=150 if r == 1 and short_gemm else 300)
    return nle.analyze_cluster(str(tmp_path), jobs=1)


def test_a_rank_that_does_less_work_is_still_the_least_busy(tmp_path):
    """The opposite case: nobody is late (every all-reduce [t + 312, t + 332) µs on every rank, no wait), rank 1's
    GEMM takes 150 µs, the others' 300 µs. Windows 11 × 1 ms + 340 µs = 11.34 ms; busy 12 × (300 + 20) = 3.84 ms
    (33.86 %) on ranks 0, 2, 3 and 12 × (150 + 20) = 2.04 ms (17.99 %) on rank 1: a 1.8 / 11.34 = 15.873-point gap
    whether or not the waits (0) are taken off — the claim stands, at stake 15.873 % × 11.34 ms = 1.800 ms (the
    rounded gap: 1 799 998 ns)."""
    res = _ranks_of(tmp_path, late=False, short_gemm=True)
    assert {(d.rank, d.window_ns, d.busy_ns) for d in res.devices} == {
        ("rank0", 11_340 * US, 3_840 * US), ("rank1", 11_340 * US, 2_040 * US), ("rank2", 11_340 * US, 3_840 * US),
        ("rank3", 11_340 * US, 3_840 * US)}
    (c,) = res.claims
    assert (c.id, c.rank, c.time_at_stake_ns) == ("low_busy_rank", "rank1", 1_799_998)
    assert [(k.metric, k.observed) for k in c.checks] == [
        ("devices", 4), ("busy_pct_gap", 15.873), ("net_busy_pct_gap", 15.873)]


def test_a_late_rank_that_also_does_less_work_is_claimed_for_the_net_gap(tmp_path):
    """Mixed: rank 1 is late by 150 µs AND its GEMM takes 150 µs. Ranks 0, 2, 3: windows 11.49 ms, busy
    12 × (300 + 170) = 5.64 ms (49.09 %) of which 12 × 150 µs = 1.8 ms waiting for rank 1, net 3.84 ms (33.42 %);
    rank 1: its window 11.49 ms holds its 12 identical steps (window rule 5b: the first is no warm-up), busy
    12 × (150 + 20) = 2.04 ms (17.75 %), no wait. Raw gap 49.086 − 17.755 = 31.33 points, of which the waiting is
    not rank 1's GPU's: the net gap is 33.420 − 17.755 = 15.666 points, so both claims are made and low_busy_rank's
    stake is the net gap × 11.49 ms = 1.800 ms, not the raw 3.6 ms (which would count the late-arriver claim's
    1.8 ms of waiting twice)."""
    res = _ranks_of(tmp_path, late=True, short_gemm=True)
    dev = {d.rank: (d.window_ns, d.busy_ns) for d in res.devices}
    assert dev == {"rank0": (11_490 * US, 5_640 * US), "rank1": (11_490 * US, 2_040 * US),
                   "rank2": (11_490 * US, 5_640 * US), "rank3": (11_490 * US, 5_640 * US)}
    claims = {c.id: c for c in res.claims}
    assert sorted((c.id, c.rank) for c in res.claims) == [("late_arriver", "rank1"), ("low_busy_rank", "rank1")]
    c = claims["low_busy_rank"]
    net = 100 * 3_840 / 11_490 - 100 * 2_040 / 11_490
    assert [(k.metric, k.observed) for k in c.checks] == [
        ("devices", 4), ("busy_pct_gap", round(100 * 5_640 / 11_490 - 100 * 2_040 / 11_490, 4)),
        ("net_busy_pct_gap", round(net, 4))]
    assert round(net, 4) == 15.6658 and c.time_at_stake_ns == round(15.6658 / 100 * 11_490 * US)
    assert c.evidence[1] == "Net of each device's wait in matched NCCL collectives: 17.8% vs a median of 33.4%."
