"""Cluster claims on multi-node jobs (ranks on several hosts, each host with its own session start and clock;
docs/CLUSTER.md "Clock alignment" and "Per-rank view and claims"). Each rank: 10 steps (period 1 ms from 50 ms on the
true common clock unless said), a GEMM launched 10 µs into the step, an all-reduce kernel starting 2 µs after the GEMM
ends and ending on every rank 20 µs after the latest start, a ``cudaStreamSynchronize`` and an ``execute_model`` NVTX
range ending 8 µs after the all-reduce."""

from __future__ import annotations

from synth import TraceBuilder
from synth.scenarios.cluster import AR, BASE_UTC, GEMM, MS

import nsys_llm_explainer as nle

US = 1_000
HOUR = 3_600 * 1_000_000_000


def _rank(path: str, r: int, gemm_us: int, last_gemm_us: int, *, dev: int = 0, pid: int = 1,
          session_ns: int = 0, clock_error_ns: int = 0, steps: int = 10, period: int = MS,
          utc: bool = True) -> None:
    """Rank ``r`` (a container: pid 1, GPU ``dev``) whose session starts ``session_ns`` after BASE_UTC on the true
    clock (its timestamps: true − session_ns) and whose host clock reads ``clock_error_ns`` ahead (the recorded
    utcEpochNs: BASE_UTC + session_ns + clock_error_ns; 0 when not ``utc``). Its GEMM takes ``gemm_us``; the slowest
    rank's ``last_gemm_us`` sets when every all-reduce ends."""
    b = TraceBuilder("2024.2", seed=r, utc_epoch_ns=BASE_UTC + session_ns + clock_error_ns if utc else 0)
    sh = -session_ns
    b.process(pid, "python3")
    g = b.thread(pid, pid, f"rank{r}")
    b.gpu(dev)
    for s in range(steps):
        st = 50 * MS + s * period
        ge = st + 10 * US + gemm_us * US
        end = st + 10 * US + last_gemm_us * US + 22 * US
        b.launch(st + sh, st + 5 * US + sh, st + 10 * US + sh, ge + sh, pid=pid, tid=pid, device=dev, stream=7,
                 name=GEMM)
        b.launch(st + 6 * US + sh, st + 9 * US + sh, ge + 2 * US + sh, end + sh, pid=pid, tid=pid, device=dev,
                 stream=7, name=AR)
        c = b.runtime(st + 12 * US + sh, end + 5 * US + sh, tid_g=g, name="cudaStreamSynchronize_v3020")
        b.sync(st + 12 * US + sh, end + 5 * US + sh, pid=pid, sync_type=3, device=dev, stream=7, corr=c)
        b.nvtx_push_pop(st + sh, end + 8 * US + sh, "execute_model", tid_g=g)
    b.write(path, overwrite=True)


def _another_run(tmp_path, utc: bool) -> None:
    """rank0–2: one job (GEMM 300 µs, step range 10 + 300 + 2 + 20 + 8 = 340 µs, period 1 ms). rank3: another
    model's run (GEMM 900 µs, step range 940 µs, period 2 ms, 6 steps) whose session started 5 h later."""
    for r in range(3):
        _rank(str(tmp_path / f"rank{r}.sqlite"), r, 300, 300, dev=r, session_ns=r * MS, utc=utc)
    _rank(str(tmp_path / "rank3.sqlite"), 3, 900, 900, dev=3, session_ns=3 * MS, clock_error_ns=5 * HOUR,
          steps=6, period=2 * MS, utc=utc)


def test_a_rank_file_of_another_run_is_not_called_the_slowest(tmp_path):
    """Every file has a session start, but rank3's activity lies 5 h after the others': not aligned (disjoint).
    Its step p50 940 µs vs 340 µs (2.76×, period 2 ms vs 1 ms) compares another model's run with this one: before,
    'rank3 has the slowest steps'. Now no claim, a warning says why, the per-rank table keeps both rows."""
    _another_run(tmp_path, utc=True)
    res = nle.analyze_cluster(str(tmp_path), jobs=1)
    assert not res.alignment.aligned and res.alignment.disjoint()
    assert {d.rank: d.step_p50_ns for d in res.devices} == {
        "rank0": 340 * US, "rank1": 340 * US, "rank2": 340 * US, "rank3": 940 * US}
    assert res.claims == ()
    assert [w for w in res.warnings if "may come from different runs" in w and "no rank is compared" in w]


def test_without_session_starts_a_slower_rank_is_still_claimed(tmp_path):
    """The same files with utcEpochNs 0: nothing says they are not one run (alignment fails for want of a session
    start, not disjoint), so rank3 keeps 'the slowest steps': 940 / median(340, 340, 340) = 2.7647 → 2.76×, period
    ratio 2 ms / 1 ms = 2 (both ≥ 1.1)."""
    _another_run(tmp_path, utc=False)
    res = nle.analyze_cluster(str(tmp_path), jobs=1)
    assert not res.alignment.aligned and not res.alignment.disjoint()
    assert [(c.id, c.rank) for c in res.claims] == [("slow_step_rank", "rank3")]
    checks = {c.metric: c.observed for c in res.claims[0].checks}
    assert (checks["step_p50_ratio"], checks["step_period_p50_ratio"]) == (2.7647, 2.0)
    assert not [w for w in res.warnings if "different runs" in w]


def _two_nodes(tmp_path, clock_error_ns: int) -> None:
    """2 nodes × 2 GPUs, files named by host (nodeA-gpu0 … nodeB-gpu1), pid 1 on every container. Rank 3
    (nodeB-gpu1) is late by 200 µs at every all-reduce (GEMM 500 µs, the others 300 µs): truly every other rank
    waits 200 µs per collective, 2.000 ms over 10. Node B's host clock reads ``clock_error_ns`` ahead."""
    for r in range(4):
        host = "nodeA" if r < 2 else "nodeB"
        _rank(str(tmp_path / f"{host}-gpu{r % 2}.sqlite"), r, 500 if r == 3 else 300, 500, dev=r % 2,
              session_ns=3 * r * MS, clock_error_ns=clock_error_ns if r >= 2 else 0)


def test_synchronised_nodes_give_the_true_waits(tmp_path):
    """Node clocks agree: nodeB-gpu1 arrives last in 10 of 10; the others wait 200 µs each time (2.000 ms)."""
    _two_nodes(tmp_path, 0)
    res = nle.analyze_cluster(str(tmp_path), jobs=1)
    assert {x.rank: (x.wait_ns_total, x.last_arrival_count) for x in res.collectives.ranks} == {
        "nodeA-gpu0": (2 * MS, 0), "nodeA-gpu1": (2 * MS, 0), "nodeB-gpu0": (2 * MS, 0), "nodeB-gpu1": (0, 10)}
    assert [(c.id, c.rank, c.time_at_stake_ns) for c in res.claims] == [("late_arriver", "nodeB-gpu1", 2 * MS)]


def test_a_clock_error_between_nodes_is_not_counted_as_wait(tmp_path):
    """Node B's clock 60 µs behind (its kernels appear 60 µs early on the aligned clock): on starts, nodeB-gpu1
    appears +140 µs after node A and nodeB-gpu0 −60 µs, so node A's ranks 'waited' 140 µs per collective (1.400 ms)
    and nodeB-gpu0 200 µs (2.000 ms), the others' mean 1.600 ms. Truly each waits 200 µs per collective inside its
    kernel (duration 220 µs vs nodeB-gpu1's 20 µs, no clock involved): 2.000 ms each, which the clock-free waits
    give; skew p50 220 − 20 = 200 µs, end spread p50 60 µs (the clock error) ≤ 200 / 2, so the claim is made."""
    _two_nodes(tmp_path, -60 * US)
    res = nle.analyze_cluster(str(tmp_path), jobs=1)
    assert res.alignment.aligned
    late = [c for c in res.claims if c.id == "late_arriver"]
    assert [c.rank for c in late] == ["nodeB-gpu1"]
    assert {x.rank: x.wait_ns_total for x in res.collectives.ranks} == {
        "nodeA-gpu0": 2 * MS, "nodeA-gpu1": 2 * MS, "nodeB-gpu0": 2 * MS, "nodeB-gpu1": 0}
    assert late[0].time_at_stake_ns == 2 * MS
