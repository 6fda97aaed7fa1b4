"""Imported first by each worker of a ``--scheduler local`` Dask cluster (a Dask preload): its log lines and its
stderr (where ``multiprocessing`` prints the tracebacks of Dask's own shutdown) stay off the terminal, and a library's
warning is one line (docs/CLUSTER.md, "Faults and interrupts")."""

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
