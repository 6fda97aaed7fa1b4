"""A termination signal whose exception Python swallowed (raised inside a weakref callback or ``__del__``:
"Exception ignored in …") must still stop the run before an output is made visible."""

from __future__ import annotations

import gc
import signal
import weakref

import pytest

from nsys_llm_explainer import interrupts
from nsys_llm_explainer.errors import Interrupted


class _Obj:
    pass


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")   # the swallowed exception
def test_swallowed_signal_stops_the_commit():
    previous = interrupts.install()
    try:
        obj = _Obj()
        # the handler runs inside a weakref callback: Python prints "Exception ignored" and goes on
        ref = weakref.ref(obj, lambda _r: interrupts._handler(signal.SIGTERM, None))
        del obj
        gc.collect()
        assert ref() is None
        with pytest.raises(Interrupted) as ei:
            with interrupts.critical():
                pytest.fail("the block must not run after a swallowed signal")
        assert ei.value.exit_code == 143
    finally:
        interrupts.restore(previous)
        interrupts._STATE.update(defer=0, pending=None, fired=0)


def test_no_signal_no_effect():
    previous = interrupts.install()
    try:
        ran = []
        with interrupts.critical():
            ran.append(1)
        assert ran == [1]
    finally:
        interrupts.restore(previous)
