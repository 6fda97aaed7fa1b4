"""Imported first by each worker of a ``--scheduler local`` Dask cluster (a Dask preload): the worker's own log lines
and anything else it would print on the shared stderr stay off the terminal, whose stderr keeps one line per fault
(:mod:`cluster.workers` words what a worker meets); a library's Python warning is one line.

A worker that Dask tears down while its cluster closes can end in an exception of Dask's own shutdown (its
connection pool already closed), which ``multiprocessing`` prints as a traceback on the process's stderr: the
worker's ``sys.stderr`` is therefore the null device, and only its warnings reach the terminal."""

from __future__ import annotations

import logging
import os
import sys
import warnings
from typing import Any, Optional

from ..terminal import warning_line

logging.getLogger("distributed").setLevel(logging.CRITICAL + 1)
_TERMINAL = sys.stderr


def _warning(message: object, category: type, filename: str, lineno: int, file: Any = None,
             line: Optional[str] = None) -> None:
    """A library's warning: one line on the terminal's stderr (:func:`terminal.warning_line`)."""
    quiet, sys.stderr = sys.stderr, _TERMINAL
    try:
        warning_line(message, category, filename, lineno, file, line)
    finally:
        sys.stderr = quiet


warnings.showwarning = _warning
sys.stderr = open(os.devnull, "w", encoding="utf-8")   # the worker process's stderr until it exits
