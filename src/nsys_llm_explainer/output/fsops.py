"""Directory operations of the output layer that never follow a symbolic link: fresh hidden directories, removing
our own trees (also when parts lost their owner permissions), opening a path below a directory descriptor one
component at a time (O_NOFOLLOW), and listing the files of a tree."""

from __future__ import annotations

import os
import secrets
import shutil
import stat
from pathlib import Path
from typing import List, Optional

from ..errors import OutputError


def mkdir_fresh(parent: Path, prefix: str, mode: int = 0o777) -> Path:
    for _ in range(100):
        p = parent / f"{prefix}{secrets.token_hex(6)}"
        try:
            os.mkdir(p, mode)   # mode & ~umask: the report directory follows the umask
            return p
        except FileExistsError:
            continue
    raise OutputError(f"cannot create a staging directory in {parent}")


def owner_rwx(d: Path) -> None:
    """Give the owner read, write and search permission on ``d`` and every directory below it (links not
    followed), so that a tree of ours left with mode 000 (a umask of 0777, a chmod) can be listed and removed."""
    try:
        st = os.lstat(d)
        if not stat.S_ISDIR(st.st_mode):
            return
        if stat.S_IMODE(st.st_mode) & 0o700 != 0o700:
            os.chmod(d, stat.S_IMODE(st.st_mode) | 0o700)
        with os.scandir(d) as it:
            subdirs = [Path(e.path) for e in it if e.is_dir(follow_symlinks=False)]
    except OSError:
        return
    for sub in subdirs:
        owner_rwx(sub)


def remove_tree(d: Path) -> None:
    """Remove our own directory ``d`` (staging, a swapped-out previous output), also when parts of it lost their
    owner permissions; never follows a link; never raises."""
    if os.path.islink(d) or not os.path.lexists(d):
        return
    shutil.rmtree(d, ignore_errors=True)
    if os.path.lexists(d):
        owner_rwx(d)
        shutil.rmtree(d, ignore_errors=True)


def why(exc: OSError) -> str:
    return exc.strerror or str(exc)


def dir_at(rfd: int, way: List[str], made: Optional[List[str]]) -> int:
    """A descriptor of the directory ``way`` below the directory ``rfd``, each component opened without following a
    link (ELOOP / ENOTDIR when one is a link or a file); missing ones are made when ``made`` is a list (their
    relative paths appended). Returns ``rfd`` itself for an empty ``way``; the caller closes any other."""
    fd = rfd
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    for i, part in enumerate(way):
        try:
            nfd = os.open(part, flags, dir_fd=fd)
        except FileNotFoundError:
            if made is None:
                raise
            os.mkdir(part, dir_fd=fd)
            made.append("/".join(way[:i + 1]))
            nfd = os.open(part, flags, dir_fd=fd)
        except BaseException:
            if fd != rfd:
                os.close(fd)
            raise
        if fd != rfd:
            os.close(fd)
        fd = nfd
    return fd


def rmdir_at(rfd: int, rel: str) -> None:
    """Remove the directory ``rel`` below ``rfd`` when it is empty (never through a link); never raises."""
    *way, leaf = rel.split("/")
    try:
        dfd = dir_at(rfd, way, None)
    except OSError:
        return
    try:
        os.rmdir(leaf, dir_fd=dfd)
    except OSError:
        pass
    finally:
        if dfd != rfd:
            os.close(dfd)
