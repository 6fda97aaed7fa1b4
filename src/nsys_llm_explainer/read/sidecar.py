"""Refuse a trace whose SQLite side files (a hot rollback journal, a WAL holding frames, beside any name the trace
goes by: :func:`names_of`) say it is not a finished, committed database: the reader opens it ``immutable=1`` and
would not see them. Rules and the message's advice: docs/SECURITY.md, "1. The input is read, never written".
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import List, Tuple

from ..errors import InputError

JOURNAL_MAGIC = bytes.fromhex("d9d505f920a163d7")
WAL_MAGICS = (bytes.fromhex("377f0682"), bytes.fromhex("377f0683"))
WAL_HEADER = 32
WAL_FRAME_HEADER = 24
#: links followed at most (the kernel's own limit is 40)
MAX_LINKS = 40


def _head_and_size(p: Path, n: int) -> Tuple[bytes, int]:
    """The first ``n`` bytes of ``p`` and its size, from one open regular file (b"", 0 when there is none or it
    cannot be read; opened non-blocking, so a FIFO in its place never waits for a writer)."""
    try:
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return b"", 0
    try:
        st = os.fstat(fd)
        return (os.read(fd, n), st.st_size) if stat.S_ISREG(st.st_mode) else (b"", 0)
    except OSError:
        return b"", 0
    finally:
        os.close(fd)


def hot_journal(trace: Path) -> bool:
    """A ``-journal`` beside ``trace`` that SQLite would roll back (non-empty, header not zeroed)."""
    return _head_and_size(Path(f"{trace}-journal"), 8)[0] == JOURNAL_MAGIC


def wal_frames(trace: Path) -> int:
    """Frames in the ``-wal`` beside ``trace`` (0 when there is none, it is empty or not a WAL)."""
    head, size = _head_and_size(Path(f"{trace}-wal"), WAL_HEADER)
    if len(head) < WAL_HEADER or head[:4] not in WAL_MAGICS:
        return 0
    page = int.from_bytes(head[8:12], "big")
    return max(0, (size - WAL_HEADER) // (WAL_FRAME_HEADER + page)) if page else 0


def names_of(trace: Path) -> List[Path]:
    """Every name ``trace`` goes by, first the one given: each hop of its symbolic-link chain (with the links
    of its directories resolved too) and last the real file; no duplicates."""
    out: List[Path] = []

    def add(p: Path) -> None:
        if p not in out:
            out.append(p)

    p = Path(trace)   # as given: "<p>-wal" is found the way the system finds the trace (no lexical "..")
    add(p)
    for _ in range(MAX_LINKS):
        here = Path(os.path.realpath(p.parent)) / p.name   # the directories' links resolved, not the file's
        add(here)
        try:
            target = os.readlink(here)
        except OSError:   # not a link (or unreadable): the chain ends here
            break
        p = here.parent / target   # absolute target: itself
        add(p)
    add(Path(os.path.realpath(trace)))
    return out


def check_sidecars(trace: Path) -> None:
    """Raise :class:`InputError` when a hot journal or a non-empty WAL sits beside ``trace``, or beside any
    name it goes by (:func:`names_of`; module docs)."""
    for i, where in enumerate(names_of(trace)):
        _check_one(trace, where, i > 0)


def _check_one(trace: Path, where: Path, linked: bool) -> None:
    name = where.name
    if linked:
        where_shown = Path(os.path.realpath(where.parent)) / name
        shown, run_on = f"{trace} (through a link: {where_shown})", str(where_shown)
    else:
        shown, run_on = str(trace), name
    if hot_journal(where):
        raise InputError(f"{shown}: a hot rollback journal {name}-journal is beside it (a write was interrupted; "
                         "the file may be mid-transaction); let the writer finish, or run `sqlite3 "
                         f"{run_on} 'PRAGMA integrity_check'` once to roll it back (that writes the file), or "
                         "analyze a copy of the file alone to accept it as it is")
    frames = wal_frames(where)
    if frames:
        raise InputError(f"{shown}: {name}-wal beside it holds {frames} page(s) not yet in the file, which a "
                         f"read-only reader cannot see; let the writer finish, or run `sqlite3 {run_on} "
                         "'PRAGMA wal_checkpoint(TRUNCATE)'` (that writes the file), or analyze a copy of the file "
                         "alone to accept it as it is")
