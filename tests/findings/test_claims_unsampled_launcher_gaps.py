"""The `host_cpu` gaps of a launching thread that is not sampled in them while other processes are. A training loop
whose OS calls are not traced idles between steps in `host_cpu` (thread 1 outside any traced call); its data-loader
workers are sampled running in those gaps. The finding named no process and advised "Profile the host code (`nsys
--sample=cpu`)" although the trace has CPU samples; it counts the other processes' samples in the gaps where thread 1
has none — the rule of the launching thread's waits (docs/FINDINGS.md, "Follow the wait") — names them and gives the
other-process advice. The trace is the input-pipeline training loop's
(`test_claims_input_pipeline_training._loader_loop`, whose docstring times every row); the truth is worked out in the
docstrings."""

from __future__ import annotations

from pathlib import Path

import test_claims_input_pipeline_training as input_pipeline
from claims_support import finding_of, report_of
from synth import TraceBuilder

from nsys_llm_explainer.findings.advice import ADVICE

US = 1_000
MS = 1_000_000
OTHER = [ADVICE["wait.other_process.training"].text, ADVICE["wait.other_process.torch"].text]


def _gap_line(ms: str, pieces: int, n: int, each: int) -> str:
    return (f"No CPU sample of the launching thread `python3 (tid 1)` falls inside {ms} of its `host_cpu` idle on "
            f"device 0 (100.0 %, {pieces} pieces): it was off the CPU there, or ran too briefly to be sampled. CPU "
            f"samples of other processes taken during these gaps: `pt_data_worker` (pid 300) sampled running in "
            f"{each} of the {n} samples taken inside them; `pt_data_worker` (pid 301) sampled running in {each} of "
            f"the {n} samples taken inside them (every thread's but the launching thread's).")


def test_unsampled_launcher_names_the_workers_sampled_in_its_gaps(tmp_path: Path) -> None:
    """OS calls not traced, 20 steps, thread 1 never sampled. `host_cpu` on device 0: the leading gap's
    [T0 − 5 ms, T0 + 8.01 ms) = 13.01 ms (thread 3's `cudaHostAlloc` is not the launching thread's) and per later
    step [s − 4.08 ms, s) (last kernel s − 10 ms + 5.92 ms to the next `cudaMemcpyAsync` at s) plus the 10 µs between
    that call and the first launch: 13.01 + 19 × 4.09 = 90.72 ms in 40 pieces, none with a sample of thread 1.
    Worker samples at t + 0.1 + 0.25 j ms (t = s − 8 ms), workers alternating: all 32 of step 0 in the leading gap
    (16 each); in [t + 3.92, t + 8) ms j = 16 … 31, 16 per step (8 each): 32 + 19 × 16 = 336 samples, 16 + 19 × 8 =
    168 of each worker (50 % ≥ 10 %, ≥ 10 samples: both named). Training, PyTorch: the other-process lines, not
    "Profile … `nsys --sample=cpu`"."""
    rep = report_of(input_pipeline._loader_loop(osrt=False), tmp_path)
    (u,) = rep["host_samples"]["unsampled"]
    assert (u["kind_ns"], u["idle_ns"], u["pieces"], u["own_samples"], u["process_samples"]) == \
        (90_720_000, 90_720_000, 40, 0, 336)
    assert [(p["pid"], p["sampled"], p["pct_of_samples"]) for p in u["processes"]] == [(300, 168, 50.0),
                                                                                      (301, 168, 50.0)]
    f = finding_of(rep, "idle_host_cpu")
    assert _gap_line("90.720 ms", 40, 336, 168) in f["evidence"]
    assert f["recommendation"] == OTHER
    assert "--sample=cpu" not in " ".join(f["recommendation"])
    assert any(c["metric"] == "unsampled_pct_of_kind" and c["observed"] == 100.0 for c in f["checks"])


def test_off_cpu_launcher_sampled_only_in_its_launch_bursts(tmp_path: Path) -> None:
    """30 steps, thread 1 sampled 4 times per launch burst (s + 30 … 330 µs: inside launch calls or the copy's
    shadow, never in a `host_cpu` piece): 13.01 + 29 × 4.09 = 131.62 ms in 60 pieces unsampled; 32 + 29 × 16 = 496
    worker samples in them, 248 each. The off-CPU line ("trace OS calls … see which processes run meanwhile") gave
    way to the processes the trace shows running."""
    rep = report_of(input_pipeline._loader_loop(osrt=False, main_sampled=True, n=30), tmp_path)
    f = finding_of(rep, "idle_host_cpu")
    assert _gap_line("131.620 ms", 60, 496, 248) in f["evidence"]
    assert f["recommendation"] == OTHER


def test_no_worker_process_keeps_the_off_cpu_words(tmp_path: Path) -> None:
    """No worker process: no sample of another process in the gaps (0 process samples), nothing qualifies; thread
    1 (120 samples, none in the gaps) is off-CPU there: today's `host_cpu.off_cpu.training`, no process line."""
    rep = report_of(input_pipeline._loader_loop(osrt=False, main_sampled=True, n=30, workers=()), tmp_path)
    (u,) = rep["host_samples"]["unsampled"]
    assert (u["idle_ns"], u["process_samples"], u["processes"]) == (131_620_000, 0, [])
    f = finding_of(rep, "idle_host_cpu")
    assert f["recommendation"] == [ADVICE["host_cpu.off_cpu.training"].text]
    assert not any("other processes" in e for e in f["evidence"])


def test_trace_without_samples_keeps_the_plain_host_words(tmp_path: Path) -> None:
    """The same loop with no CPU sample at all: no `unsampled` entry, the profiling line as before."""
    b = input_pipeline._loader_loop(osrt=False, workers=())
    rep = report_of(b, tmp_path)
    assert "unsampled" not in rep["host_samples"]
    f = finding_of(rep, "idle_host_cpu")
    assert f["recommendation"] == [ADVICE["host_cpu.profile"].text]


# ---- item 2: one pause holds most of a wait finding

def _poll_loop(pause_at: int = -1, pause_ms: int = 100, n: int = 10, training: bool = False,
               marked: bool = False) -> TraceBuilder:
    """One thread (pid 100, tid 1) waits in `poll` [t_i, s_i) for W_i = 5 ms (``pause_ms`` at step ``pause_at``),
    launches one 2 ms kernel at s_i ([s_i, s_i + 10 µs) call, kernel [s_i + 20 µs, s_i + 2.02 ms)) and waits again
    from t_{i+1} = s_i + 20 µs; t_0 = 50 ms. Window: the first call s_0 = 55 ms to the last kernel's end. Kernels
    `gemm_kernel`; ``training``: every other one `convolution_backward_kernel` (the others an `at::native` kernel),
    the last the Adam kernel (a PyTorch training loop), and a data-loader process (pid 300) sampled every 250 µs from
    t_i + 100 µs in every wait."""
    b = TraceBuilder()
    b.process(100, "python3")
    g = b.thread(100, 1, "python3")
    gw = -1
    if training:
        b.process(300, "pt_data_worker")
        gw = b.thread(300, 300, "pt_data_worker")
    t = 50 * MS
    for i in range(n):
        s = t + (pause_ms * MS if i == pause_at else 5 * MS)
        b.osrt(t, s, tid_g=g, name="poll")
        if training:
            for ts in range(t + 100 * US, s, 250 * US):
                b.cpu_sample(ts, tid_g=gw, frames=[("decode_jpeg", "/usr/lib/libjpeg.so")])
        name = "gemm_kernel" if not training else \
            "void multi_tensor_apply_kernel<AdamFunctor<float>>(int)" if i == n - 1 else \
            "convolution_backward_kernel" if i % 2 else "void at::native::elementwise_kernel<128, 4>"
        b.launch(s, s + 10 * US, s + 20 * US, s + 2020 * US, pid=100, tid=1, name=name)
        if marked:     # each step an NVTX range `step` from its wait to its launch's return: repeated steps
            b.nvtx_push_pop(t, s + 15 * US, "step", tid_g=g)
        t = s + 20 * US
    return b


def test_one_pause_holding_most_of_the_wait_is_called_a_pause(tmp_path: Path) -> None:
    """Pause at step 5, each step an NVTX range `step` [t_i, s_i + 15 µs) (10 repeated steps: the window repeats).
    The window opens at the first range, t_0 = 50 ms: s_9 = 50 + 9 × 5 + 100 + 9 × 0.02 = 195.18 ms, window to
    s_9 + 2.02 = 197.2 ms (147.2 ms). The `poll` idle: the leading gap's [50, 55) = 5 ms and, in the gap after kernel
    i, [s_i + 2.02 ms, s_{i+1}) = W_{i+1} − 2 ms: 8 × 3 + 98 = 122 ms; 127 ms in 10 gaps, of which the finding claims
    127 − 0.2944 = 126.7056 ms (294.40 µs lies within one bin of an edge). The largest, 98 ms, holds 98 / 126.7056
    = 77.3 % ≥ 50 %: a pause between steps. The pause line comes first; the wait line kept (`wait.unseen`, workload
    inference: GEMMs only) speaks of no step."""
    rep = report_of(_poll_loop(pause_at=5, marked=True), tmp_path)
    assert rep["window_repeats"] is True
    f = finding_of(rep, "idle_osrt")
    assert ("One gap of 98.000 ms holds 77.3 % of it: a pause, not a per-step cost; the other 9 gaps hold "
            "28.706 ms.") in f["evidence"]
    assert f["recommendation"] == [ADVICE["pause.one_gap.inference"].text, ADVICE["wait.unseen"].text]
    assert "(a request's tokenization or other pre-processing, the server idle between requests, a one-off stall)" \
        in f["recommendation"][0] and "epoch" not in f["recommendation"][0]
    c = next(c for c in f["checks"] if c["metric"] == "largest_gap_pct_of_claimed")
    assert round(c["observed"], 4) == round(100 * 98 / (127 - 0.2944), 4) and c["threshold"] == 50.0
    # as **Do first** its words name the gap in the finding's evidence, not a gap "above" the headline
    assert rep["headline"]["action"].startswith("Most of this idle time is one pause (the largest gap in the "
                                                "finding's evidence), not a cost paid in every step")


def test_one_large_gap_in_a_window_without_repeated_steps_is_no_pause(tmp_path: Path) -> None:
    """The same loop with nothing marking its steps (the report says the window holds no repeated steps; real trace
    12, one warm Keras forward pass, alike): s_9 = 55 + 8 × 5 + 100 + 9 × 0.02 = 195.18 ms, window from s_0 = 55 ms
    to s_9 + 2.02 ms (142.2 ms); `poll` 8 × 3 + 98 = 122 ms in 9 gaps, the largest 98 / 122 = 80.3 %. Without a step
    there is nothing to call it "not a per-step cost" against: it said "a pause, not a per-step cost" and gave the
    pause advice ("not a cost paid in every step"). Now the line says whether each pass pays it is not known; no
    pause advice, no pause check."""
    rep = report_of(_poll_loop(pause_at=5), tmp_path)
    assert rep["window_repeats"] is False
    f = finding_of(rep, "idle_osrt")
    assert f["title"] == "The launching thread waits in `poll` while the GPU idles: 85.8 % (122.000 ms)"
    assert ("One gap of 98.000 ms holds 80.3 % of it; the other 8 gaps hold 24.000 ms; the window holds no repeated "
            "steps, so whether each pass pays it is not known.") in f["evidence"]
    assert not any("a pause" in e for e in f["evidence"])
    assert f["recommendation"] == [ADVICE["wait.unseen"].text]
    assert not any(c["metric"] == "largest_gap_pct_of_claimed" for c in f["checks"])


def test_wait_spread_evenly_keeps_the_plain_host_words(tmp_path: Path) -> None:
    """No pause: 9 gaps of 3 ms `poll` (27 ms of a 47.2 ms window); the largest holds 3 / 27 = 11.1 % < 50 %: no pause
    line, no pause advice."""
    rep = report_of(_poll_loop(), tmp_path)
    f = finding_of(rep, "idle_osrt")
    assert f["title"] == "The launching thread waits in `poll` while the GPU idles: 57.2 % (27.000 ms)"
    assert not any("a pause" in e for e in f["evidence"])
    assert f["recommendation"] == [ADVICE["wait.unseen"].text]


def test_epoch_boundary_of_a_pytorch_training_loop(tmp_path: Path) -> None:
    """The training variant with a 100 ms pause at step 5, steps marked (the same times: the largest gap 77.3 %);
    the data-loader process is sampled in every wait (its samples are all those taken inside them: named). Without
    the pause the advice is `wait.other_process.training` ("Make each batch cheaper to prepare …") and its
    `DataLoader` line; with it, both speak of every batch and give way to the pause lines, `pause.torch` (training,
    PyTorch: `persistent_workers`) included."""
    even = finding_of(report_of(_poll_loop(training=True), tmp_path), "idle_osrt")
    assert even["recommendation"] == OTHER
    rep = report_of(_poll_loop(pause_at=5, training=True, marked=True), tmp_path)
    assert (rep["facts"]["workload"], rep["facts"]["framework"]) == ("training", "pytorch")
    f = finding_of(rep, "idle_osrt")
    assert ("One gap of 98.000 ms holds 77.3 % of it: a pause, not a per-step cost; the other 9 gaps hold "
            "28.706 ms.") in f["evidence"]
    assert f["recommendation"] == [ADVICE["pause.one_gap"].text, ADVICE["pause.torch"].text]
