"""KV-cache retrieval / offload connectors that move many small blocks one ``cudaMemcpyAsync`` each from the
launching thread: the lever — fewer, larger copies (a gather kernel and one copy, ``cudaMemcpyBatchAsync``) — is named
only where the host is inside copy calls while the GPU idles and the copies are small (numbers worked out in the
docstrings)."""

from __future__ import annotations

from pathlib import Path

import pytest
from synth import TraceBuilder

from nsys_llm_explainer.findings.advice import ADVICE
from nsys_llm_explainer.options import options_from_kwargs
from nsys_llm_explainer.pipeline import analyze_path

US, MS = 1_000, 1_000_000
PID = 100


def _kv_retrieval(flavor: str, n: int, nbytes: int, copy_us: int) -> TraceBuilder:
    """20 decode steps on one thread, step s from t = 1 ms + s × (5n + 1100) µs (NVTX `decode_step` over it): ``n``
    KV blocks fetched from pinned host memory, block j's ``cudaMemcpyAsync`` [h, h + 4) µs, h = t + 5j µs, its
    ``nbytes`` Host-to-Device copy [h + 2, h + 2 + ``copy_us``) µs on stream 7; then 10 kernels of 100 µs launched
    6 µs apart from t + 5n µs, running back to back from 10 µs after the first launch, and a
    ``cudaStreamSynchronize`` until 5 µs after the last ends."""
    b = TraceBuilder(flavor)
    b.process(PID)
    g = b.thread(PID, PID, "python3")
    t = 1 * MS
    for _ in range(20):
        b.nvtx_push_pop(t, t + (5 * n + 1_100) * US, "decode_step", tid_g=g)
        for j in range(n):
            h = t + j * 5 * US
            c = b.runtime(h, h + 4 * US, tid_g=g, name="cudaMemcpyAsync_v3020")
            b.memcpy(h + 2 * US, h + (2 + copy_us) * US, pid=PID, bytes=nbytes, copy_kind=1, src_kind=1, dst_kind=2,
                     stream=7, corr=c)
        h = t + n * 5 * US
        for k in range(10):
            b.launch(h + k * 6 * US, h + k * 6 * US + 4 * US, h + (10 + 100 * k) * US, h + (110 + 100 * k) * US,
                     pid=PID, tid=PID, name="paged_attention_v2_kernel" if k % 2 else "gemv_kernel")
        b.runtime(h + 60 * US, h + 1_015 * US, tid_g=g, name="cudaStreamSynchronize_v3020")
        t += (5 * n + 1_100) * US
    return b


def _copy_finding(b: TraceBuilder, tmp_path: Path):
    p = tmp_path / "kv.sqlite"
    b.write(str(p), overwrite=True)
    (f,) = [f for f in analyze_path(str(p), options_from_kwargs()).findings if f.id == "idle_copy"]
    return f


@pytest.mark.parametrize("flavor", ["2022.4", "2026.2"])
def test_many_small_kv_copies_issued_one_call_each_are_told_to_batch(tmp_path: Path, flavor: str) -> None:
    """(trace: :func:`_kv_retrieval`, 500 blocks of 64 KiB, 3 µs copies) Per block the GPU idles 5 µs: [h, h + 2) µs
    with the host in the block's ``cudaMemcpyAsync`` and no copy running (the previous copy ended at h), then the
    copy's 3 µs. Per step 500 × 2 µs = 1 ms and 1.5 ms; over 20 steps 20 ms (27.8 % of the 20 × 3.600 = 72 ms window)
    and 30 ms of copy. No kernel waits on the copies (the host has not launched), so the finding told the user to
    "shorten the host work between launches" without saying the host work is issuing 10,000 copies of 64 KiB one call
    each; the lever, fewer and larger copies (a gather kernel and one copy, ``cudaMemcpyBatchAsync``), is now the
    first line, with its evidence."""
    f = _copy_finding(_kv_retrieval(flavor, 500, 64 << 10, 3), tmp_path)
    assert f.title.startswith("Copies run while the GPU idles, before the next kernel is launched"), f.title
    assert ("Between these copies the GPU idles a further 20.000 ms (27.8 % of the window) with the host inside copy "
            "calls (`cudaMemcpyAsync`) and no copy running: the host issues the copies one call each, 10,000 copies "
            "averaging 65.54 kB.") in f.evidence, f.evidence
    assert f.recommendation[0] == ADVICE["copy.batch"].text


def test_large_copies_issued_one_call_each_are_not_told_to_batch(tmp_path: Path) -> None:
    """(trace: :func:`_kv_retrieval`, 500 blocks, the same timing, each copy 4 MiB) The host is again in copy calls
    20 ms of the window with no copy running (27.8 %), but the copies average 4 MiB, over 1 MiB: per-copy overhead is
    not what costs, so "fewer, larger copies" and its evidence are not given."""
    f = _copy_finding(_kv_retrieval("2026.2", 500, 4 << 20, 3), tmp_path)
    assert f.title.startswith("Copies run while the GPU idles, before the next kernel is launched"), f.title
    assert ADVICE["copy.batch"].text not in f.recommendation
    assert not any(e.startswith("Between these copies") for e in f.evidence)
    assert f.recommendation[0] == ADVICE["copy.launch_first"].text
