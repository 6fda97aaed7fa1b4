"""The staging directory and the commit that makes it ``--out`` (:mod:`output`, whose docstring states the
rules): one rename, a swap, or file by file beside the user's files, never through a symbolic link."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import stat
from pathlib import Path
from types import TracebackType
from typing import List, Optional, Tuple

from .. import __version__
from ..errors import OutputError
from ..interrupts import critical
from .owned import (
    MANIFEST,
    OLD_PREFIX,
    STAGING_PREFIX,
    TOOL,
    WHAT,
    OutDir,
    contained,
    first_foreign,
    inside,
    is_regular,
    link_on_the_way,
    same_file,
)

#: the directory of the last commit of this process (the CLI says "interrupted after the report was written")
COMMITTED: List[Path] = []


def _mkdir_fresh(parent: Path, prefix: str, mode: int = 0o777) -> Path:
    for _ in range(100):
        p = parent / f"{prefix}{secrets.token_hex(6)}"
        try:
            os.mkdir(p, mode)   # mode & ~umask: the report directory follows the umask
            return p
        except FileExistsError:
            continue
    raise OutputError(f"cannot create a staging directory in {parent}")


def _files_under(d: Path) -> List[str]:
    return sorted(Path(root, n).relative_to(d).as_posix() for root, _, files in os.walk(d) for n in files)


def _why(exc: OSError) -> str:
    return exc.strerror or str(exc)


class Staging:
    """Context manager: ``tmp`` is a fresh staging directory; :meth:`commit` makes it ``--out`` (module docs).

    Any ``OSError`` raised inside the block (a full file system, a quota) becomes one :class:`OutputError`."""

    def __init__(self, target: OutDir) -> None:
        if not isinstance(target, OutDir):
            raise TypeError("Staging needs the OutDir returned by check_out_dir")
        self.target = target
        self.tmp: Optional[Path] = None
        self._swap = False

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
        if not t.exists:
            return True
        try:
            cwd = Path(os.path.realpath(os.getcwd()))
        except OSError:
            cwd = None
        return self._beside() and (cwd is None or not inside(cwd, t.real))

    def __enter__(self) -> Staging:
        t = self.target
        self._swap = self._can_swap()
        where = t.real if (t.exists and not self._swap and not self._beside()) else t.real.parent
        while not where.exists():
            where = where.parent
        try:
            with critical():   # no signal between creating the directory and remembering it
                self.tmp = _mkdir_fresh(where, STAGING_PREFIX)
            if t.exists and self._swap:
                os.chmod(self.tmp, stat.S_IMODE(os.stat(t.real).st_mode))
        except OSError as exc:
            self._remove_tmp()
            raise OutputError(f"cannot write into {where}: {_why(exc)}") from None
        return self

    def _remove_tmp(self) -> None:
        """Remove the staging directory; a signal waits until it is gone (the first one's unwinding included)."""
        with critical(stop_first=False):
            if self.tmp is not None and os.path.lexists(self.tmp):
                shutil.rmtree(self.tmp, ignore_errors=True)
            self.tmp = None

    def __exit__(self, exc_type: Optional[type], exc: Optional[BaseException], tb: Optional[TracebackType]) -> None:
        self._remove_tmp()
        if isinstance(exc, OSError) and not isinstance(exc, BrokenPipeError):
            raise OutputError(f"cannot write the {WHAT[self.target.kind]} into {self.target.path}: "
                              f"{_why(exc)}") from None

    # ------------------------------------------------------------------------------------------ commit
    def _write_manifest(self, files: List[str]) -> None:
        assert self.tmp is not None
        doc = {"tool": TOOL, "tool_version": __version__, "kind": self.target.kind, "files": files,
               "note": "files written by nsys-llm-explainer; a later run replaces only these"}
        (self.tmp / MANIFEST).write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")

    def commit(self) -> List[Path]:
        """Make the staged output visible in one step (see module docstring); returns the files written."""
        assert self.tmp is not None
        t = self.target
        files = _files_under(self.tmp)
        for p in t.inputs:   # never replace an input, even if it appeared there during the run
            if any(same_file(p, t.real / f) for f in files + sorted(t.previous)):
                raise OutputError(f"the input {p} is a file of --out {t.path} that this run would replace")
        try:
            self._write_manifest(files)
            with critical():
                if not t.real.exists():
                    self._commit_new()
                elif self._swap and first_foreign(t.real, t.previous) is None:
                    self._commit_swap()
                else:
                    self._commit_each(files)
        except OSError as exc:
            raise OutputError(f"cannot move the {WHAT[t.kind]} into {t.path}: {_why(exc)}") from None
        COMMITTED.append(t.real)
        return [t.real / f for f in files]

    def _commit_new(self) -> None:
        assert self.tmp is not None
        real = self.target.real
        created: List[Path] = []
        p = real.parent
        while not p.exists():
            created.append(p)
            p = p.parent
        try:
            for d in reversed(created):
                os.mkdir(d)
            os.rename(self.tmp, real)
            self.tmp = None
        except OSError:
            for d in created:
                try:
                    os.rmdir(d)
                except OSError:
                    pass
            raise

    def _commit_swap(self) -> None:
        assert self.tmp is not None
        real = self.target.real
        old = real.parent / f"{OLD_PREFIX}{secrets.token_hex(6)}"
        os.rename(real, old)
        try:
            os.rename(self.tmp, real)
        except OSError:
            os.rename(old, real)
            raise
        self.tmp = None
        shutil.rmtree(old, ignore_errors=True)

    def _commit_each(self, files: List[str]) -> None:
        """Move file by file into a directory that also holds files of the user (never touched), never through
        a symbolic link: a previous file now reached through one is left alone, a new one is refused."""
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
        backup = _mkdir_fresh(self.tmp, OLD_PREFIX)
        done: List[Tuple[str, bool, bool]] = []   # (relative path, old version backed up, new one moved in)
        made: List[Path] = []

        def guard(f: str) -> None:   # checked again just before each step: the directory may have changed
            if link_on_the_way(t.real, f) is not None or (f not in owned and os.path.lexists(t.real / f)):
                raise OutputError(f"--out {t.path} changed while the tool wrote into it ({f!r}); nothing was "
                                  "replaced")
        try:
            for f in sorted(owned - set(files) - {MANIFEST}) + files + [MANIFEST]:
                dst, src = t.real / f, self.tmp / f
                guard(f)
                for d in reversed([p for p in dst.parents if inside(p, t.real) and p != t.real]):
                    if not d.exists():
                        os.mkdir(d)
                        made.append(d)
                guard(f)
                had = os.path.lexists(dst)
                if had:
                    (backup / f).parent.mkdir(parents=True, exist_ok=True)
                    os.rename(dst, backup / f)
                done.append((f, had, False))
                if os.path.lexists(src):
                    os.rename(src, dst)
                    done[-1] = (f, had, True)
        except (OSError, OutputError):
            for f, had, moved in reversed(done):   # put every file back where it was
                try:
                    if moved:
                        os.rename(t.real / f, self.tmp / f)
                    if had:
                        os.rename(backup / f, t.real / f)
                except OSError:
                    pass
            for d in reversed(made):
                try:
                    os.rmdir(d)
                except OSError:
                    pass
            raise
        for rel in sorted({str(Path(f).parent) for f in owned - set(files) - {MANIFEST}}, key=lambda x: -x.count("/")):
            if rel != "." and contained(t.real, rel) and (t.real / rel).is_dir():
                try:
                    os.rmdir(t.real / rel)   # only when empty: a directory of ours that a new run no longer needs
                except OSError:
                    pass
