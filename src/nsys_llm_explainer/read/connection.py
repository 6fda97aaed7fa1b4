"""Open an Nsight Systems SQLite export strictly read-only.

The file is opened through a URI with ``mode=ro&immutable=1``: SQLite then neither writes, creates
journal/WAL side files, nor takes locks, so the user's trace is never modified or locked and a
database locked by another process can still be read.
"""

from __future__ import annotations

import os
import sqlite3
import stat
import threading
from pathlib import Path
from typing import List, Optional
from urllib.parse import quote

from ..errors import InputError

SQLITE_MAGIC = b"SQLite format 3\x00"


def _uri(path: Path) -> str:
    return "file:" + quote(str(path.resolve()), safe="/") + "?mode=ro&immutable=1"


class TraceConnection(sqlite3.Connection):
    """A read-only connection that also knows its URI, so :mod:`read.columnar` can open the same file the same
    way (``columnar_uri`` is ``None`` when the standard-library reader is used). ``lock`` serializes use of this
    connection when tables are fetched on several threads."""

    columnar_uri: Optional[str] = None
    lock: threading.Lock
    excluded: List[str]   # warnings about rows left out while reading (values of the wrong type)


def check_trace_path(path: str | os.PathLike) -> Path:
    """Validate that ``path`` is an existing, readable SQLite file without creating anything."""
    p = Path(path)
    try:
        st = p.stat()
    except FileNotFoundError:
        raise InputError(f"trace not found: {p}") from None
    except OSError as exc:
        raise InputError(f"cannot access trace {p}: {exc.strerror or exc}") from None
    if stat.S_ISDIR(st.st_mode):
        raise InputError(f"{p} is a directory, expected an Nsight Systems .sqlite export")
    if not stat.S_ISREG(st.st_mode):
        raise InputError(f"{p} is not a regular file")
    try:
        with open(p, "rb") as fh:
            head = fh.read(100)
    except OSError as exc:
        raise InputError(f"cannot read trace {p}: {exc.strerror or exc}") from None
    if len(head) == 0:
        raise InputError(f"{p} is empty (0 bytes), not an SQLite export")
    if not head.startswith(SQLITE_MAGIC):
        raise InputError(
            f"{p} is not an SQLite database; export the report first: "
            f"nsys export --type sqlite --output trace.sqlite {p.name}"
        )
    if len(head) < 100:
        raise InputError(f"{p} is truncated (SQLite header incomplete)")
    return p


def open_readonly(path: str | os.PathLike, reader: str = "sqlite3") -> TraceConnection:
    """Open ``path`` read-only and immutable; raise :class:`InputError` when it is not a usable database.
    ``reader``: ``adbc`` lets big integer tables be fetched through :mod:`read.columnar` (already resolved by
    :func:`read.columnar.resolve_reader`), ``sqlite3`` keeps every read on this connection."""
    p = check_trace_path(path)
    from .sidecar import check_sidecars  # hot journal / non-empty WAL beside the trace: refused (read/sidecar.py)
    check_sidecars(p)
    try:
        conn = sqlite3.connect(_uri(p), uri=True, check_same_thread=False, factory=TraceConnection)
        conn.lock = threading.Lock()
        conn.excluded = []
        conn.columnar_uri = _uri(p) if reader == "adbc" else None
        conn.execute("PRAGMA query_only = 1")
        conn.execute("PRAGMA temp_store = MEMORY")
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.DatabaseError as exc:
        raise InputError(f"{p} is not a readable SQLite database ({exc})") from None
    return conn
