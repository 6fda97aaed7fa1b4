"""``python -m nsys_llm_explainer`` and the ``nsys-llm-explain`` console script: closed standard streams reopened on
/dev/null and the termination signals routed (:mod:`interrupts`) before anything else is imported, the streams
flushed after the run without changing its exit code (docs/SECURITY.md, "Faults, streams, signals, names and the
API").
"""

from __future__ import annotations

import os
import sys

from .errors import MEMORY_LINE, address_space_limit, address_space_shortage, memory_shortage  # loaded with the package

TYPE_CHECKING = False   # typing is not imported before the signal handlers are installed
if TYPE_CHECKING:
    from typing import Any, Optional, Set

PROG = "nsys-llm-explain"


def _reopen_closed_fds() -> None:
    """Open /dev/null on whichever of file descriptors 0, 1, 2 is closed."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            try:
                new = os.open(os.devnull, os.O_RDWR)
            except OSError:
                return
            if new != fd:
                os.dup2(new, fd)
                os.close(new)


def _hold_signals() -> Optional[Set[int]]:
    """Block SIGINT / SIGTERM / SIGHUP while the handlers are being installed (POSIX; a signal that arrives is
    kept pending, then delivered to them); returns the previous mask (None where there are no masks). Uses the
    interpreter's built-in ``_signal`` (``signal`` itself first imports ``enum``: milliseconds without a
    handler)."""
    sig = _signal_module()
    if not hasattr(sig, "pthread_sigmask"):
        return None
    wanted = {getattr(sig, n) for n in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(sig, n)}
    return {int(s) for s in sig.pthread_sigmask(sig.SIG_BLOCK, wanted)}


def _signal_module() -> Any:
    import importlib

    try:
        return importlib.import_module("_signal")   # the C module behind ``signal``, built into CPython
    except ImportError:
        return importlib.import_module("signal")


def _release_signals(previous: Optional[Set[int]]) -> None:
    if previous is not None:
        sig = _signal_module()
        sig.pthread_sigmask(sig.SIG_SETMASK, previous)


def _settle(stream_name: str, fd: int) -> None:
    """Flush a standard stream; when it cannot be written, point its descriptor at /dev/null so the
    interpreter's own flush at exit cannot fail (which would turn the exit code into 120)."""
    stream = getattr(sys, stream_name, None)
    try:
        if stream is not None:
            stream.flush()
    except (OSError, ValueError):
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, fd)
            os.close(devnull)
        except OSError:
            pass


def _say(line: str) -> None:
    """Write ``line`` on stderr; a closed or unwritable stderr is ignored."""
    try:
        if sys.stderr is not None:
            sys.stderr.write(line)
    except (OSError, ValueError):
        pass


def _fit_address_space() -> None:
    """Under a limited address space (``ulimit -v``), ask the libraries for less of it before they load: one
    OpenBLAS thread (its per-thread buffers are reserved at import; the tool does no BLAS work) and Arrow's system
    allocator (jemalloc's background threads print their own line when they cannot start). Settings the user made
    are kept; with no limit nothing changes."""
    if address_space_limit() is not None:
        for key, value in (("OPENBLAS_NUM_THREADS", "1"), ("ARROW_DEFAULT_MEMORY_POOL", "system")):
            os.environ.setdefault(key, value)


def _wants_analysis(argv: list) -> bool:
    """The command analyses traces (not ``schema``, ``--help``, ``--version``)."""
    return bool(argv) and argv[0] != "schema" and not any(a in ("-h", "--help", "--version") for a in argv)


def run() -> int:
    """The command line, with signals routed and streams guarded from the first instruction."""
    _reopen_closed_fds()
    _fit_address_space()
    held = _hold_signals()
    from .interrupts import fired, ignore, install, quiet_unraisable

    try:
        quiet_unraisable()
        install()
        _release_signals(held)   # a signal that arrived meanwhile is raised here, as Interrupted
        short = address_space_shortage()   # too little to load the libraries: refused before they load
        if short is not None and _wants_analysis(sys.argv[1:]):
            _say(f"{PROG}: error: {MEMORY_LINE}{short}\n")
            return 2
        from .cli import main

        code = main()
    except BaseException as exc:   # a signal while the modules load, before cli.main handles them
        why = fired() or (exc if isinstance(exc, KeyboardInterrupt) else None)
        if why is None:
            short = memory_shortage(exc)   # numpy cannot be mapped under `ulimit -v`: one line, not its traceback
            if short is None:
                raise
            _say(f"{PROG}: error: {MEMORY_LINE}{short}\n")
            return 2
        _say(f"{PROG}: interrupted by {getattr(why, 'name', 'SIGINT')}; no output was written\n")
        code = int(getattr(why, "exit_code", 130))
    ignore()   # the run is over: a late signal changes nothing
    _settle("stdout", 1)
    _settle("stderr", 2)
    return code


if __name__ == "__main__":
    sys.exit(run())
