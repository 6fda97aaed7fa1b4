"""Terminal lines: the stdout summary and the one-line stderr errors, made inert (:func:`render.escape.term_text`)
and encodable on the stream (docs/SECURITY.md, "4. Names are data": terminal encoding).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any, Optional, Sequence

from .render.escape import term_text

#: longest error line (a path or a name inside a message is shortened beyond this)
ERROR_LIMIT = 1000


def say(lines: Sequence[str]) -> None:
    """Print terminal lines made inert (:func:`term_text`) and encodable on stdout; a closed stdout is ignored."""
    enc = getattr(sys.stdout, "encoding", None) or "utf-8"
    try:
        for line in lines:
            indent = len(line) - len(line.lstrip(" "))
            sys.stdout.write(encodable(" " * indent + term_text(line), enc) + "\n")
        sys.stdout.flush()
    except (OSError, ValueError, AttributeError):   # closed (`| head`, `>&-`) or full (ENOSPC): not our failure
        silence_stdout()


def encodable(text: str, encoding: str) -> str:
    """``text`` in ``encoding``: our typographic characters as ASCII where needed, the rest as ``\\uXXXX``."""
    try:
        text.encode(encoding)
        return text
    except (UnicodeEncodeError, LookupError) as exc:   # LookupError: an encoding Python does not know
        t = text.translate(ASCII_FALLBACK)
        return t if isinstance(exc, LookupError) else t.encode(encoding, "backslashreplace").decode(encoding, "replace")


ASCII_FALLBACK = str.maketrans({"–": "-", "—": "-", "−": "-", "…": "...", "µ": "u", "≥": ">=", "≤": "<=",
                                "→": "->", "×": "x", "·": "-", "’": "'", "“": '"', "”": '"', "±": "+/-"})


def silence_stdout() -> None:
    """stdout is a closed pipe (``| head -1``): send the rest to /dev/null so the exit flush cannot fail."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass


#: the command's name at the start of each stderr line
PROG = "nsys-llm-explain"


def warning_line(message: object, category: type, filename: str, lineno: int, file: Any = None,
                 line: Optional[str] = None) -> None:
    """A Python warning (a library's ``DeprecationWarning``, a ``RuntimeWarning``) as one inert stderr line,
    ``nsys-llm-explain: warning: <Category>: <message>``, never the two-line source quote Python prints: the
    command line's stderr holds one line per thing said (installed as :data:`warnings.showwarning` by the
    command line and its worker processes)."""
    error_line(f"{PROG}: warning: ", f"{category.__name__}: {message}")


def error_line(prefix: str, message: object) -> None:
    """Write ``prefix + message`` as one inert, encodable line on stderr (never raises)."""
    enc = getattr(sys.stderr, "encoding", None) or "utf-8"
    try:
        sys.stderr.write(encodable(prefix + term_text(message, ERROR_LIMIT), enc) + "\n")
        sys.stderr.flush()
    except (OSError, ValueError, AttributeError):   # stderr closed (`2>&-`: None) or full
        pass


class Progress:
    """Prints ``<prefix><step> … (N s elapsed)`` on stderr when a step runs longer than ``delay`` seconds. Steps
    start on several threads (:mod:`runner`): one lock keeps one timer, so none outlives :meth:`stop`."""

    def __init__(self, prefix: str, enabled: bool, delay: float = 1.0) -> None:
        self.prefix = prefix
        self.enabled = enabled
        self.delay = delay
        self._timer: Optional[threading.Timer] = None
        self._lock = threading.Lock()
        self._t0 = time.perf_counter()

    def __call__(self, step: str) -> None:
        with self._lock:
            self._cancel()
            if self.enabled:
                t = threading.Timer(self.delay, self._say, args=(step,))
                t.daemon = True
                self._timer = t
                t.start()

    def _say(self, step: str) -> None:
        with self._lock:
            if self._timer is not threading.current_thread():   # replaced or stopped meanwhile
                return
        el = time.perf_counter() - self._t0
        error_line(self.prefix, f"{step} … ({el:.1f} s elapsed)")   # a step may name a file: made inert

    def _cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def stop(self) -> None:
        with self._lock:
            self._cancel()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
