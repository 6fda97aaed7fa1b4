"""The ``autotune`` kernel trait's name rule (cuDNN / TensorFlow autotuning trials), on its own so that the
steady-state window (computed before the traits) and the traits share one definition of an autotuning kernel
(docs/FINDINGS.md, "Kernel traits" and "Steady-state window")."""

from __future__ import annotations

import re
from typing import Sequence, Tuple

import numpy as np

from ...config.patterns import for_matching

#: cuDNN's FFT convolutions (also part of the ``conv`` trait's rule)
FFT_CONV = r"fft[12]d_[rc]2[rc]|dse::\w*fft|flip_filter|cudnn(?:(?!cudnn)\S)*fft"
#: the FFT / complex-GEMM kernels an autotuner's trials run
FFT_TRIAL = FFT_CONV + r"|cgemm|compute_gemm_pointers|transpose(?:(?!transpose)\w)*<float2"
REDZONE = r"redzone_checker"
_REDZONE_RX = re.compile(REDZONE, re.IGNORECASE)
_FFT_TRIAL_RX = re.compile(FFT_TRIAL, re.IGNORECASE)


def autotune_trial_names(names: Sequence[str]) -> np.ndarray:
    """Mask over ``names``: the ``autotune`` trait's names — ``redzone_checker`` (TF/XLA's check around each
    trial) and, only when some name is a ``redzone_checker``, the FFT / complex-GEMM trial kernels."""
    text = for_matching([str(n or "") for n in names])
    redzone = np.array([bool(_REDZONE_RX.search(t)) for t in text], bool)
    if not redzone.any():
        return redzone
    return redzone | np.array([bool(_FFT_TRIAL_RX.search(t)) for t in text], bool)


def marked_pass(start: np.ndarray, end: np.ndarray, marked: np.ndarray, rows: np.ndarray, open_end: int
                ) -> Tuple[int, int, int, int, int]:
    """The pass of the ``marked`` kernels (a mask, not empty, within the mask ``rows``: an autotuning pass's trials,
    one-time work): it ends at ``until``, the start of the first other kernel of ``rows`` starting at or after the
    last marked one's end (``open_end`` when none). (until, kernels of ``rows`` starting before it, their Σ duration,
    that of the marked among them, kernels of ``rows`` starting from ``until`` on)."""
    after = rows & ~marked & (start >= int(end[marked].max()))
    until = int(start[after].min()) if after.any() else open_end
    before = rows & (start < until)
    dur = end - start
    return (until, int(before.sum()), int(dur[before].sum()), int(dur[before & marked].sum()),
            int((rows & (start >= until)).sum()))
