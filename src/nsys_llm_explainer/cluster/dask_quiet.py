"""Imported by each worker process of a ``--scheduler local`` Dask cluster (as a Dask preload, before the worker
starts): the worker's own log lines (start-up, shut-down, a connection found closed while the cluster stops) stay
off the terminal, whose stderr the command line keeps to one line per fault. What a worker meets reaches the
caller as its task's error or as a lost worker (:mod:`cluster.workers`), worded there; a library's Python
warning is one line."""

from __future__ import annotations

import logging
import warnings

from ..terminal import warning_line

logging.getLogger("distributed").setLevel(logging.CRITICAL + 1)
warnings.showwarning = warning_line   # a library's warning: one line on the shared stderr
