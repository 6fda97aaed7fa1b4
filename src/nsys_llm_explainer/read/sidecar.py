"""Refuse a trace whose SQLite side files say it is not a finished, committed database.

The trace is opened ``immutable=1`` (:mod:`read.connection`): SQLite then reads the main file only. So:

* a **hot rollback journal** (``trace.sqlite-journal``, non-empty, with a valid journal header) means a writer
  stopped in the middle of a transaction: the main file may hold half-written pages;
* a **WAL file** (``trace.sqlite-wal``) holding at least one frame means committed data may still be in the
  WAL and not in the main file: the report would miss it (a database held wholly in its WAL reads as empty).

Both are refused with exit 2 and one line that says what to do (let the writer finish, or open the database
once with ``sqlite3`` so it rolls back / checkpoints — which writes the file, so the tool never does it;
or analyze a copy of the main file alone to accept it as it is). An empty journal, a journal whose header
was zeroed (``journal_mode=PERSIST`` after commit) and an empty WAL are harmless and ignored.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import InputError

JOURNAL_MAGIC = bytes.fromhex("d9d505f920a163d7")
WAL_MAGICS = (bytes.fromhex("377f0682"), bytes.fromhex("377f0683"))
WAL_HEADER = 32
WAL_FRAME_HEADER = 24


def _head(p: Path, n: int) -> bytes:
    try:
        with open(p, "rb") as fh:
            return fh.read(n)
    except OSError:
        return b""


def hot_journal(trace: Path) -> bool:
    """A ``-journal`` beside ``trace`` that SQLite would roll back (non-empty, header not zeroed)."""
    return _head(Path(f"{trace}-journal"), 8) == JOURNAL_MAGIC


def wal_frames(trace: Path) -> int:
    """Frames in the ``-wal`` beside ``trace`` (0 when there is none, it is empty or not a WAL)."""
    wal = Path(f"{trace}-wal")
    head = _head(wal, WAL_HEADER)
    if len(head) < WAL_HEADER or head[:4] not in WAL_MAGICS:
        return 0
    page = int.from_bytes(head[8:12], "big")
    size = wal.stat().st_size
    return max(0, (size - WAL_HEADER) // (WAL_FRAME_HEADER + page)) if page else 0


def check_sidecars(trace: Path) -> None:
    """Raise :class:`InputError` when a hot journal or a non-empty WAL sits beside ``trace`` (module docs)."""
    name = trace.name
    if hot_journal(trace):
        raise InputError(f"{trace}: a hot rollback journal {name}-journal is beside it (a write was interrupted; "
                         "the file may be mid-transaction); let the writer finish, or run `sqlite3 "
                         f"{name} 'PRAGMA integrity_check'` once to roll it back (that writes the file), or "
                         "analyze a copy of the file alone to accept it as it is")
    frames = wal_frames(trace)
    if frames:
        raise InputError(f"{trace}: {name}-wal beside it holds {frames} page(s) not yet in the file, which a "
                         f"read-only reader cannot see; let the writer finish, or run `sqlite3 {name} "
                         "'PRAGMA wal_checkpoint(TRUNCATE)'` (that writes the file), or analyze a copy of the file "
                         "alone to accept it as it is")
