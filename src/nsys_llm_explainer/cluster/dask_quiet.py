"""Imported first by each worker of a ``--scheduler local`` Dask cluster (a Dask preload): the worker's own log lines
stay off the terminal, whose stderr keeps one line per fault (:mod:`cluster.workers` words what a worker meets);
a library's Python warning is one line."""

from __future__ import annotations

import logging
import warnings

from ..terminal import warning_line

logging.getLogger("distributed").setLevel(logging.CRITICAL + 1)
warnings.showwarning = warning_line   # a library's warning: one line on the shared stderr
