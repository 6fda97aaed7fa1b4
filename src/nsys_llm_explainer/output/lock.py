"""One run at a time per ``--out``: an advisory ``flock`` on a hidden file beside it, held from the check of
``--out`` to the end of its commit (docs/SECURITY.md, "Containment, memory errors, API", class 3).
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import fcntl
import hashlib
import os
import stat
from pathlib import Path
from typing import Dict, Optional, Tuple

from ..errors import OutputError

LOCK_PREFIX = ".nsys-llm-explain-lock-"
#: real --out path → (lock file path, its open descriptor, the process that took it) held by this process
_HELD: Dict[str, Tuple[Path, int, int]] = {}


def lock_name(real: Path) -> str:
    """The lock file's name for the real ``--out`` path ``real``."""
    return LOCK_PREFIX + hashlib.sha256(os.fsencode(str(real).casefold())).hexdigest()[:24]


def _where(real: Path) -> Optional[Path]:
    """The directory the lock of ``real`` lives in: the nearest existing one above it when writable, else
    ``real`` itself when it is a writable directory; None when there is none (nothing can be written anyway)."""
    anchor = real.parent
    while not os.path.lexists(anchor) and anchor != anchor.parent:
        anchor = anchor.parent
    for d in (anchor, real):
        if os.path.isdir(d) and not os.path.islink(d) and os.access(d, os.W_OK | os.X_OK):
            return d
    return None


def acquire(real: Path, shown: object, again: bool = False) -> None:
    """Take the lock of the real ``--out`` ``real``; :class:`OutputError` when another run holds it — in this
    process too (two checks of one ``--out`` are two runs), unless ``again`` (the staging of the run whose check
    took it: a no-op). ``shown``: ``--out`` as the user wrote it (the message)."""
    key = str(real)
    if key in _HELD and _HELD[key][2] == os.getpid():
        if again:
            return
        raise _busy(shown, _HELD[key][0])
    where = _where(real)
    if where is None:
        return
    path = where / lock_name(real)
    for _ in range(20):   # the holder may remove the file between our open and our flock: try again
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            if exc.errno in (errno.EACCES, errno.EROFS, errno.EPERM):
                return   # nowhere to put a lock: nothing else of ours could write there either
            raise OutputError(f"--out {shown} cannot be used: {exc.strerror or exc}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise _busy(shown, path) from None
            return   # a file system without flock (some network mounts): no lock, as before
        try:
            st, now = os.fstat(fd), os.lstat(path)
        except FileNotFoundError:
            os.close(fd)
            continue
        if stat.S_ISREG(now.st_mode) and (st.st_dev, st.st_ino) == (now.st_dev, now.st_ino):
            _HELD[key] = (path, fd, os.getpid())
            return
        os.close(fd)
    raise OutputError(f"--out {shown}: cannot take its lock {path.name}; try again")


def _busy(shown: object, path: Path) -> OutputError:
    return OutputError(f"--out {shown} is being written by another run of this tool (it holds {path.name} beside "
                       "it); wait for it to finish or choose another directory")


def release(real: Path) -> None:
    """Remove and unlock the lock of ``real`` if this process holds it (never raises)."""
    held = _HELD.pop(str(real), None)
    if held is None:
        return
    path, fd, pid = held
    if pid != os.getpid():   # a forked child's copy: the lock is its parent's
        return
    with contextlib.suppress(OSError):
        st, now = os.fstat(fd), os.lstat(path)
        if (st.st_dev, st.st_ino) == (now.st_dev, now.st_ino):
            os.unlink(path)   # still ours: removed while we hold the lock, so no one else holds this inode
    with contextlib.suppress(OSError):
        os.close(fd)


def release_all() -> None:
    """Release every lock this process holds (the command line's exit, and an API caller's at interpreter exit)."""
    for key in list(_HELD):
        release(Path(key))


atexit.register(release_all)
