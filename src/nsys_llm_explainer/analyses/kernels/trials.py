"""The ``autotune`` kernel trait's name rule (cuDNN / TensorFlow autotuning trials), on its own so that the
steady-state window (computed before the traits) and the traits share one definition of an autotuning kernel
(docs/FINDINGS.md, "Kernel traits" and "Steady-state window")."""

from __future__ import annotations

import re
from typing import Sequence

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
