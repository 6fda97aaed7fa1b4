"""Small exact loops the tests build by hand (not scenarios): every time is a constant, so tests can work their
answers out."""

from __future__ import annotations

from typing import Sequence, Tuple

from .builder import TraceBuilder
from .scenarios.names import K

US = 1_000
MS = 1_000_000
SAMPLER = "void at::native::sampling_kernel()"
#: the loop's kernels: (name, µs), back to back
LOOP_KERNELS: Tuple[Tuple[str, int], ...] = ((K.GEMM_QKV, 200), (K.FLASH, 100), (K.RMS_NORM, 20), (SAMPLER, 10))


def synced_loop(path: str, kernels: Sequence[Tuple[str, int]] = LOOP_KERNELS, steps: int = 40,
                period: int = MS) -> str:
    """``steps`` steps on thread 100 of pid 100, GPU 0, from t = 1 ms: a pinned 64 KiB H2D copy (call [t + 1,
    t + 19) µs, copy [t + 2, t + 18) µs), the ``kernels`` back to back from t + 20 µs (launch calls 0.5 µs, every
    0.6 µs from t + 19 µs), ``cudaStreamSynchronize`` until 5 µs after the last kernel ends, the NVTX range
    `execute_model` from t to 10 µs after that; the next step starts ``period − 355 µs`` after the sync returns
    (the default kernels, 330 µs, make a ``period`` loop)."""
    b = TraceBuilder()
    b.process(100)
    g = b.thread(100, 100)
    b.gpu(0)
    t = MS
    for _ in range(steps):
        c = b.runtime(t + 1 * US, t + 19 * US, tid_g=g, name="cudaMemcpyAsync_v3020")
        b.memcpy(t + 2 * US, t + 18 * US, pid=100, bytes=65536, copy_kind=1, src_kind=1, dst_kind=2, corr=c)
        api, k = t + 19 * US, t + 20 * US
        for name, dur in kernels:
            b.launch(api, api + 500, k, k + dur * US, pid=100, tid=100, name=name)
            api, k = api + 600, k + dur * US
        c = b.runtime(api, k + 5 * US, tid_g=g, name="cudaStreamSynchronize_v3020")
        b.sync(api, k + 5 * US, pid=100, sync_type=3, corr=c)
        b.nvtx_push_pop(t, k + 15 * US, "execute_model", tid_g=g)
        t = k + 5 * US + period - 355 * US
    return b.write(str(path), overwrite=True)
