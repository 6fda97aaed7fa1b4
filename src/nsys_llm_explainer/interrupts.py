"""Termination signals as exceptions (:func:`install`, called by the command line only, never on import), and a
critical section (:func:`critical`) in which they wait: docs/SECURITY.md, "3. Signals".
"""

from __future__ import annotations

import signal
import sys
import threading
from contextlib import contextmanager
from types import FrameType
from typing import Any, Callable, Dict, Iterator, Optional, Union

from .errors import Interrupted

SIGNALS = tuple(getattr(signal, n) for n in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, n))
_STATE: Dict[str, Any] = {"defer": 0, "pending": None, "fired": 0}   # fired: the signal being handled, or 0


def _raise(signum: int) -> None:
    _STATE["fired"] = signum
    raise Interrupted(signum, signal.Signals(signum).name)


def fired() -> Optional[Interrupted]:
    """The interrupt being handled, or None: a signal's exception can come back as another one (a C extension
    that was loading, such as numpy's, turns it into an ``ImportError``), so the command line asks this first."""
    signum = _STATE["fired"]
    return Interrupted(signum, signal.Signals(signum).name) if signum else None


def check() -> None:
    """Raise again a signal whose exception was swallowed: Python ignores an exception raised by a handler
    that happened to run inside a weakref callback or ``__del__`` ("Exception ignored in …"), so the run
    would go on as if nothing happened. Called before an output is made visible."""
    signum = _STATE["fired"]
    if signum:
        raise Interrupted(signum, signal.Signals(signum).name)


#: a signal handler as :func:`signal.signal` takes and returns it
Handler = Union[Callable[[int, Optional[FrameType]], Any], int, signal.Handlers, None]


def _handler(signum: int, _frame: Optional[FrameType]) -> None:
    if _STATE["fired"]:
        return   # already unwinding: let the cleanup finish
    if _STATE["defer"]:
        _STATE["pending"] = signum
        return
    _raise(signum)


def install() -> Dict[int, Handler]:
    """Route SIGINT / SIGTERM / SIGHUP to :class:`errors.Interrupted` (main thread only; no-op elsewhere);
    returns the previous handlers for :func:`restore`."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    if all(signal.getsignal(sig) is _handler for sig in SIGNALS):
        return {}   # already routed (``__main__`` before ``cli.main``): keep a signal that already fired
    _STATE.update(defer=0, pending=None, fired=0)
    return {sig: signal.signal(sig, _handler) for sig in SIGNALS}


def quiet_unraisable() -> None:
    """Keep Python from printing "Exception ignored in …" with a traceback for our own interrupt (a handler that
    ran inside a weakref callback or ``__del__``; :func:`check` raises it again); anything else is reported as
    before."""
    default = sys.unraisablehook

    def hook(unraisable: Any) -> None:
        if not isinstance(unraisable.exc_value, Interrupted):
            default(unraisable)

    sys.unraisablehook = hook


def ignore() -> None:
    """Ignore SIGINT / SIGTERM / SIGHUP from now on (main thread only): the command line's run is over."""
    if threading.current_thread() is threading.main_thread():
        for sig in SIGNALS:
            signal.signal(sig, signal.SIG_IGN)


def restore(previous: Dict[int, Handler]) -> None:
    """Put back the handlers :func:`install` replaced; the signal they handled is over, so a later run in this
    process (the API after an interrupted ``cli.main``) starts clean instead of raising it again (:func:`check`)."""
    for sig, handler in previous.items():
        signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
    if previous:   # this call's install() routed the signals (an outer one that did keeps its state)
        _STATE.update(defer=0, pending=None, fired=0)


@contextmanager
def critical(stop_first: bool = True) -> Iterator[None]:
    """Hold termination signals until the block ends (then raise the first one that arrived); a signal that
    arrived earlier and was swallowed (:func:`check`) stops the block before it starts, unless ``stop_first``
    is false (a cleanup, which must run even while an earlier signal unwinds)."""
    if stop_first:
        check()
    _STATE["defer"] += 1
    try:
        yield
    finally:
        _STATE["defer"] -= 1
        pending = _STATE["pending"]
        if pending is not None and not _STATE["defer"] and not _STATE["fired"]:
            _STATE["pending"] = None
            _raise(pending)
