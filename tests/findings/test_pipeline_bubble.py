"""Pipeline parallelism: the first stage's GPipe bubble (docs/FINDINGS.md). Its wait is the schedule's (more
micro-batches, an interleaved 1F1B schedule shrink it), not the host's nor a message size's."""

from __future__ import annotations

from pathlib import Path

from synth import TraceBuilder

from nsys_llm_explainer import analyze
from nsys_llm_explainer.findings.advice import ADVICE

US = 1000
MS = 1000 * US
T0 = 1_000_000
SR = "ncclDevKernel_SendRecv(ncclDevComm*, unsigned long, ncclWork*)"


def _stage0(path: str, backward: str = "gemm_dgrad") -> None:
    """Stage 0 of a 2-stage GPipe, 10 steps of 10 ms. Per step t: forwards of 4 micro-batches (500 µs each) on stream
    7 from t + 10 µs, each followed by a 20 µs SendRecv (its send) on stream 20; then a receive SendRecv on stream 20
    from the last send's end (t + 2.09 ms) to t + 6 ms, when stage 1's backward gradient arrives, with the host in
    `cudaStreamSynchronize` on stream 20 until t + 6.01 ms; then 4 backwards (kernel ``backward``) of 1 ms from
    t + 6.05 ms."""
    b = TraceBuilder()
    b.process(100)
    b.gpu(0)
    g = b.thread(100, 100, "stage0")
    for k in range(10):
        t = T0 + k * 10 * MS
        h = t
        for m in range(4):
            a = t + 10 * US + m * 520 * US
            b.launch(h, h + 4 * US, a, a + 500 * US, pid=100, tid=100, device=0, stream=7, name="gemm_f")
            h += 6 * US
            b.launch(h, h + 4 * US, a + 500 * US, a + 520 * US, pid=100, tid=100, device=0, stream=20, name=SR)
            h += 6 * US
        b.launch(h, h + 4 * US, t + 2090 * US, t + 6 * MS, pid=100, tid=100, device=0, stream=20, name=SR)
        h += 6 * US
        c = b.runtime(h, t + 6 * MS + 10 * US, tid_g=g, name="cudaStreamSynchronize_v3020")
        b.sync(h, t + 6 * MS + 10 * US, pid=100, sync_type=3, device=0, stream=20, corr=c)
        h = t + 6 * MS + 15 * US
        for m in range(4):
            a = t + 6 * MS + 50 * US + m * MS
            b.launch(h, h + 4 * US, a, a + MS, pid=100, tid=100, device=0, stream=7, name=backward)
            h += 6 * US
        b.nvtx_push_pop(t, t + 10 * MS - 100 * US, "train_step", tid_g=g)
    b.write(path)


def test_first_stage_bubble_advice_names_the_schedule(tmp_path: Path) -> None:
    """Per step the receive runs alone over [2.09, 6) ms = 3.91 ms and each send [a + 500, a + 520) µs alone (the
    next forward starts at a + 520 µs): 3.91 + 4 × 0.02 = 3.99 ms a step, 39.9 ms of exposed send/recv in 10 steps.
    The receive waits for stage 1's backward: the GPipe bubble, which more
    micro-batches or an interleaved 1F1B schedule shrink; the advice only says "overlap the collectives with
    independent compute, send fewer and larger messages". Fixed: when send/recv holds ≥ 10 % of the exposed time the
    pipeline line is given, by workload: training (``gemm_dgrad`` kernels: backward) → ``comm_exposed.pp``
    (micro-batches, interleaved 1F1B); the same trace whose backward kernels say nothing (``gemm_b``: read as
    inference) → ``comm_exposed.pp.inference`` (batches in flight per stage)."""
    for backward, line, other in (("gemm_dgrad", "comm_exposed.pp", "comm_exposed.pp.inference"),
                                  ("gemm_b", "comm_exposed.pp.inference", "comm_exposed.pp")):
        p = str(tmp_path / f"pp_{backward}.sqlite")
        _stage0(p, backward)
        rep = analyze(p)
        f = next(x for x in rep.findings if x.id == "comm_exposed")
        assert f.time_at_stake_ns == 39_900 * US
        assert f.title.startswith("Exposed communication: the send/recv runs with no compute beside it for 39.9 %")
        assert ADVICE[line].text in f.recommendation and ADVICE[other].text not in f.recommendation
    assert "micro-batches" in ADVICE["comm_exposed.pp"].text
