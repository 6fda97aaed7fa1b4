"""The staging directory and the commit that makes it ``--out``: one rename, a swap, or file by file beside the
user's files, never through a symbolic link (rules: docs/SECURITY.md, "2. Outputs")."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import secrets
import stat
from pathlib import Path
from types import TracebackType
from typing import List, Optional, Set, Tuple

from .. import __version__
from ..errors import OutputError
from ..interrupts import critical
from .fsops import dir_at, mkdir_fresh, remove_tree, rmdir_at, why
from .lock import acquire, release
from .owned import (
    MANIFEST,
    OLD_PREFIX,
    STAGING_PREFIX,
    TOOL,
    WHAT,
    OutDir,
    contained,
    first_foreign,
    ident_of,
    inside,
    is_regular,
    link_on_the_way,
    same_file,
)

#: the directory of the last commit of this process (the CLI says "interrupted after the report was written")
COMMITTED: List[Path] = []


class Staging:
    """Context manager: ``tmp`` is a fresh staging directory; :meth:`commit` makes it ``--out`` (module docs).

    Any ``OSError`` raised inside the block (a full file system, a quota) becomes one :class:`OutputError`."""

    def __init__(self, target: OutDir) -> None:
        if not isinstance(target, OutDir):
            raise TypeError("Staging needs the OutDir returned by check_out_dir")
        self.target = target
        self.tmp: Optional[Path] = None
        self._swap = False
        self._mode = 0   # the mode --out gets at the commit (set by __enter__)

    def _beside(self) -> bool:
        """The staging directory can be made beside the real ``--out`` (same file system, parent writable)."""
        real, parent = self.target.real, self.target.real.parent
        try:
            return (real != parent and os.access(parent, os.W_OK | os.X_OK)
                    and os.stat(real).st_dev == os.stat(parent).st_dev)
        except OSError:
            return False

    def _can_swap(self) -> bool:
        t = self.target
        if t.ident is None:
            return True
        try:
            cwd = Path(os.path.realpath(os.getcwd()))
        except OSError:
            cwd = None
        return self._beside() and (cwd is None or not inside(cwd, t.real))

    def __enter__(self) -> Staging:
        t = self.target
        self._swap = self._can_swap()
        where = t.real if (t.ident is not None and not self._swap and not self._beside()) else t.real.parent
        while not where.exists():
            where = where.parent
        acquire(t.real, t.path, again=True)   # held since check_out_dir; taken again for a second Staging of one OutDir
        try:
            with critical():   # no signal between creating the directory and remembering it
                self.tmp = mkdir_fresh(where, STAGING_PREFIX)
            # the mode --out gets: a new one follows the umask (as mkdir made it), a replaced one keeps its own;
            # meanwhile the owner may always write, list and remove it (also under a umask of 0777)
            self._mode = stat.S_IMODE(os.stat(t.real if t.ident is not None and self._swap else self.tmp).st_mode)
            os.chmod(self.tmp, self._mode | 0o700)
        except BaseException as exc:
            self._remove_tmp()
            release(t.real)
            if isinstance(exc, OSError):
                raise OutputError(f"cannot write into {where}: {why(exc)}") from None
            raise
        return self

    def _remove_tmp(self) -> None:
        """Remove the staging directory; a signal waits until it is gone (the first one's unwinding included)."""
        with critical(stop_first=False):
            if self.tmp is not None:
                remove_tree(self.tmp)
            self.tmp = None

    def __exit__(self, exc_type: Optional[type], exc: Optional[BaseException], tb: Optional[TracebackType]) -> None:
        self._remove_tmp()
        release(self.target.real)
        if isinstance(exc, OSError) and not isinstance(exc, BrokenPipeError) and exc.errno != errno.ENOMEM:
            raise OutputError(f"cannot write the {WHAT[self.target.kind]} into {self.target.path}: "
                              f"{why(exc)}") from None

    # ------------------------------------------------------------------------------------------ commit
    def commit(self) -> List[Path]:
        """Make the staged output visible in one step (docs/SECURITY.md, "2. Outputs"); returns the files written.
        ``--out`` must still be what :func:`check_out_dir` saw (:meth:`_recheck`), else nothing is written."""
        assert self.tmp is not None
        t = self.target
        files = sorted(Path(r, n).relative_to(self.tmp).as_posix() for r, _, names in os.walk(self.tmp) for n in names)
        for p in t.inputs:   # never replace an input, even if it appeared there during the run
            if any(same_file(p, t.real / f) for f in files + sorted(t.previous)):
                raise OutputError(f"the input {p} is a file of --out {t.path} that this run would replace")
        try:
            doc = {"tool": TOOL, "tool_version": __version__, "kind": t.kind, "files": files,
                   "note": "files written by nsys-llm-explainer; a later run replaces only these"}
            (self.tmp / MANIFEST).write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
            os.chmod(self.tmp, self._mode)
            with critical():
                pfd = self._recheck()
                try:
                    if t.ident is None:
                        self._commit_new(pfd)
                    elif self._swap and first_foreign(t.real, t.previous) is None:
                        self._commit_swap(pfd)
                    else:
                        self._commit_each(files, pfd)
                finally:
                    if pfd is not None:
                        os.close(pfd)
        except OSError as exc:
            raise OutputError(f"cannot move the {WHAT[t.kind]} into {t.path}: {why(exc)}") from None
        COMMITTED.append(t.real)
        return [t.real / f for f in files]

    def _changed(self, what: str) -> OutputError:
        t = self.target
        return OutputError(f"--out {t.path} changed while the tool ran ({what}); nothing was written there: check "
                           "what replaced it, then run again")

    def _recheck(self) -> Optional[int]:
        """``--out`` as the check saw it: the same directory (device and inode, not a link), or still absent, under
        the same directory above it. Returns a descriptor of the parent of the real ``--out`` (None when it is
        still to be created), opened without following a link and checked to be the directory seen: the renames
        of the commit go through it, so no link swapped in afterwards is followed."""
        t = self.target
        try:
            st: Optional[os.stat_result] = os.lstat(t.real)
        except FileNotFoundError:
            st = None
        if t.ident is None and st is not None:
            kind = ("a symbolic link" if stat.S_ISLNK(st.st_mode) else "a directory" if stat.S_ISDIR(st.st_mode)
                    else "a file")
            raise self._changed(f"it was absent and is now {kind}")
        if t.ident is not None:
            if st is None:
                raise self._changed("it was removed")
            if stat.S_ISLNK(st.st_mode):
                raise self._changed("it is now a symbolic link")
            if not stat.S_ISDIR(st.st_mode) or (st.st_dev, st.st_ino) != t.ident:
                raise self._changed("it was replaced by another directory or file")
        if t.anchor_ident is None:   # the directory above could not be seen at the check (it went away then)
            if t.ident is not None:
                raise self._changed(f"{t.anchor} was not there when --out was checked")
            return None
        if os.path.realpath(t.anchor) != str(t.anchor) or ident_of(t.anchor) != t.anchor_ident:
            raise self._changed(f"{t.anchor} was replaced or is now reached through a symbolic link")
        if t.anchor != t.real.parent:
            return None   # directories above --out still to be made (_commit_new)
        pfd = os.open(t.anchor, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        fst = os.fstat(pfd)
        if (fst.st_dev, fst.st_ino) != t.anchor_ident:
            os.close(pfd)
            raise self._changed(f"{t.anchor} was replaced")
        return pfd

    def _commit_new(self, pfd: Optional[int]) -> None:
        """A new ``--out``: one rename of the staging directory (made in its parent, or in the nearest existing
        directory above, whose missing directories are made first). A rename never follows a link at its
        target: a link that appears there now makes it fail (ENOTDIR), and so does a directory that is not
        empty."""
        assert self.tmp is not None
        real = self.target.real
        if pfd is not None:
            os.rename(self.tmp, real.name, dst_dir_fd=pfd)
            self.tmp = None
            return
        created: List[Path] = []
        p = real.parent
        while not os.path.lexists(p):
            created.append(p)
            p = p.parent
        try:
            for d in reversed(created):
                os.mkdir(d)
            os.rename(self.tmp, real)
            self.tmp = None
        except OSError:
            for d in created:
                with contextlib.suppress(OSError):
                    os.rmdir(d)
            raise

    def _commit_swap(self, pfd: Optional[int]) -> None:
        """A previous output holding only our files: ``--out`` → a hidden sibling, staging → ``--out`` (both
        renames in the checked parent directory), the sibling removed. What was moved aside must be the directory
        checked: anything else (swapped in at the last moment) is put back and nothing is written."""
        assert self.tmp is not None and pfd is not None
        t = self.target
        real = t.real
        old = real.parent / f"{OLD_PREFIX}{secrets.token_hex(6)}"
        os.rename(real.name, old.name, src_dir_fd=pfd, dst_dir_fd=pfd)
        if ident_of(old) != t.ident:
            os.rename(old.name, real.name, src_dir_fd=pfd, dst_dir_fd=pfd)
            raise self._changed("it was replaced by another directory or a link")
        try:
            os.rename(self.tmp, real.name, dst_dir_fd=pfd)
        except OSError:
            os.rename(old.name, real.name, src_dir_fd=pfd, dst_dir_fd=pfd)
            raise
        self.tmp = None
        remove_tree(old)

    def _commit_each(self, files: List[str], pfd: Optional[int]) -> None:
        """Move file by file into a directory that also holds files of the user (never touched), never through
        a symbolic link: every move goes through directory descriptors opened without following links, from the
        real ``--out`` checked to be the directory seen; a previous file now reached through a link is left
        alone, a new one is refused."""
        assert self.tmp is not None
        t = self.target
        owned = {f for f in t.previous if contained(t.real, f) and is_regular(t.real / f)}
        if is_regular(t.real / MANIFEST):
            owned.add(MANIFEST)
        for f in files + [MANIFEST]:
            link = link_on_the_way(t.real, f)
            if link is not None:
                raise OutputError(f"--out {t.path} holds {link!r}, a symbolic link or a file, on the way to {f!r}; "
                                  "this tool never writes through it: remove it or choose another directory")
            if os.path.lexists(t.real / f) and f not in owned:
                raise OutputError(f"--out {t.path} holds {f!r}, which this tool did not write and would replace; "
                                  "move it or choose another directory")
        flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
        rfd = os.open(t.real.name, flags, dir_fd=pfd) if pfd is not None else os.open(t.real, flags)
        try:
            rst = os.fstat(rfd)
            if (rst.st_dev, rst.st_ino) != t.ident:
                raise self._changed("it was replaced by another directory or a link")
            self._move_each(files, owned, rfd)
        finally:
            os.close(rfd)

    def _move_each(self, files: List[str], owned: Set[str], rfd: int) -> None:
        assert self.tmp is not None
        t = self.target
        backup = mkdir_fresh(self.tmp, OLD_PREFIX)
        done: List[Tuple[str, bool, bool]] = []   # (relative path, old version backed up, new one moved in)
        made: List[str] = []

        def changed(f: str) -> OutputError:
            return OutputError(f"--out {t.path} changed while the tool wrote into it ({f!r}); nothing was "
                               "replaced")
        try:
            for f in sorted(owned - set(files) - {MANIFEST}) + files + [MANIFEST]:
                src = self.tmp / f
                *way, leaf = f.split("/")
                try:
                    dfd = dir_at(rfd, way, made)
                except OSError as exc:   # ELOOP: a link on the way (O_NOFOLLOW)
                    if isinstance(exc, (NotADirectoryError, FileNotFoundError)) or exc.errno == errno.ELOOP:
                        raise changed(f) from exc
                    raise
                try:
                    try:
                        lst: Optional[os.stat_result] = os.lstat(leaf, dir_fd=dfd)
                    except FileNotFoundError:
                        lst = None
                    if lst is not None and f not in owned:
                        raise changed(f)
                    had = lst is not None
                    if had:
                        (backup / f).parent.mkdir(parents=True, exist_ok=True)
                        os.rename(leaf, backup / f, src_dir_fd=dfd)
                    done.append((f, had, False))
                    if os.path.lexists(src):
                        os.rename(src, leaf, dst_dir_fd=dfd)
                        done[-1] = (f, had, True)
                finally:
                    if dfd != rfd:
                        os.close(dfd)
        except (OSError, OutputError):
            for f, had, moved in reversed(done):   # put every file back where it was
                *way, leaf = f.split("/")
                try:
                    dfd = dir_at(rfd, way, None)
                except OSError:
                    continue
                try:
                    if moved:
                        os.rename(leaf, self.tmp / f, src_dir_fd=dfd)
                    if had:
                        os.rename(backup / f, leaf, dst_dir_fd=dfd)
                except OSError:
                    pass
                finally:
                    if dfd != rfd:
                        os.close(dfd)
            for d in reversed(made):
                rmdir_at(rfd, d)
            raise
        for rel in sorted({str(Path(f).parent) for f in owned - set(files) - {MANIFEST}}, key=lambda x: -x.count("/")):
            if rel != ".":
                rmdir_at(rfd, rel)   # only when empty: a directory of ours that a new run no longer needs
