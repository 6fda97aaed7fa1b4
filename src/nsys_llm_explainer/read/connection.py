"""Open an Nsight Systems SQLite export strictly read-only.

The file is opened through a URI with ``mode=ro&immutable=1``: SQLite then neither writes, creates
journal/WAL side files, nor takes locks, so the user's trace is never modified or locked and a
database locked by another process can still be read.
"""

from __future__ import annotations

import os
import sqlite3
import stat
from pathlib import Path
from urllib.parse import quote

from ..errors import InputError

SQLITE_MAGIC = b"SQLite format 3\x00"


def _uri(path: Path) -> str:
    return "file:" + quote(str(path.resolve()), safe="/") + "?mode=ro&immutable=1"


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


def open_readonly(path: str | os.PathLike) -> sqlite3.Connection:
    """Open ``path`` read-only and immutable; raise :class:`InputError` when it is not a usable database."""
    p = check_trace_path(path)
    try:
        conn = sqlite3.connect(_uri(p), uri=True, check_same_thread=False)
        conn.execute("PRAGMA query_only = 1")
        conn.execute("PRAGMA temp_store = MEMORY")
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.DatabaseError as exc:
        raise InputError(f"{p} is not a readable SQLite database ({exc})") from None
    return conn
