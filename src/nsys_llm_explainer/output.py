"""Owned, atomic output directories (report, demo, compare and cluster outputs).

**Ownership.** Every output directory holds a manifest, :data:`MANIFEST` (``.nsys-llm-explainer.json``: the
tool, the kind of output and the relative path of every file written). A later run replaces only the files
that manifest lists. ``--out`` may be new, empty, or hold a previous output whose manifest lists everything
in it; anything else (a file the manifest does not list, a directory with no manifest, the input trace
inside ``--out``) is refused with exit 2 before any work, unless ``force``.

**--force** lets the tool write *beside* files it does not own: they are never deleted, modified or moved,
and a file of ours that the user replaced (now a symlink or directory) counts as theirs. A file that is
not ours at a path the tool would write (e.g. a trace saved as ``DIR/report.json``) is refused even with
``force``, and so is an input trace that a run would replace (a manifest-listed ``demo_trace.sqlite``) —
``force`` never deletes or overwrites an input or a file the manifest does not list. It also lets a
``demo`` replace a previous report of a real trace, and one kind of output replace another.

**Atomicity.** Everything is written into a staging directory on the same file system; :meth:`Staging.commit`
then makes it visible: a new ``--out`` is one ``rename``; a previous output holding only owned files is
swapped (``--out`` → a hidden sibling, staging → ``--out``, the sibling deleted), so readers see the old
report or the whole new one. Only where ``--out`` also holds the user's files (``force``), is a mount
point, the current directory or has an unwritable parent are the files moved in one at a time (rolled back
on error). Termination signals wait during these renames (:func:`interrupts.critical`). On any failure
the staging directory is removed, no parent directory of ``--out`` is created, and ``--out`` is as before.

The new directory's mode follows the umask; a replaced directory keeps its mode.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence, Set, Tuple

from . import __version__
from .errors import OutputError
from .interrupts import critical

MANIFEST = ".nsys-llm-explainer.json"
TOOL = "nsys-llm-explainer"
#: hidden names of our own temporary directories (staging, and the previous output while it is swapped out)
STAGING_PREFIX = ".nsys-llm-explain-tmp-"
OLD_PREFIX = ".nsys-llm-explain-old-"
NAME_MAX = 255
MANIFEST_MAX_BYTES = 16 << 20
#: top-level files each kind writes (``tables/…`` and ``ranks/…`` are listed per run in the manifest)
KIND_FILES: Dict[str, Tuple[str, ...]] = {
    "report": ("report.md", "report.json", "report.html"),
    "demo": ("report.md", "report.json", "report.html", "demo_trace.sqlite"),
    "compare": ("compare.md", "compare.json", "compare.html"),
    "cluster": ("cluster.md", "cluster.json", "cluster.html"),
}
WHAT = {"report": "report", "demo": "demo report", "compare": "comparison", "cluster": "cluster report"}
#: kinds that may replace each other without ``force`` (a demo does not replace a real trace's report)
COMPATIBLE = {"report": {"report", "demo"}, "demo": {"demo"}, "compare": {"compare"}, "cluster": {"cluster"}}

#: the directory of the last commit of this process (the CLI says "interrupted after the report was written")
COMMITTED: List[Path] = []


@dataclass
class OutDir:
    """A checked ``--out``: where it is, what a previous run left there, and which inputs must survive."""

    path: Path                       # as the user gave it (messages)
    real: Path                       # absolute, symlinks resolved
    kind: str
    force: bool
    exists: bool
    previous: Set[str] = field(default_factory=set)     # files the previous manifest lists (still ours)
    previous_kind: Optional[str] = None
    inputs: Tuple[Path, ...] = ()


def _fs_name_check(out: Path) -> None:
    for part in out.parts:
        n = len(os.fsencode(part))
        if n > NAME_MAX:
            raise OutputError(f"--out has a path component of {n} bytes; file systems allow {NAME_MAX}")
    if len(os.fsencode(str(out.absolute()))) > 4000:
        raise OutputError("--out path is too long")


def _is_regular(p: Path) -> bool:
    try:
        return stat.S_ISREG(os.lstat(p).st_mode)
    except OSError:
        return False


def _safe_rel(name: object) -> Optional[str]:
    """A manifest entry as a normalized relative POSIX path, or None when it could leave the directory."""
    if not isinstance(name, str) or not name or "\x00" in name or "\\" in name or name.startswith("/"):
        return None
    parts = name.split("/")
    if any(p in ("", ".", "..") for p in parts):
        return None
    return name


def read_manifest(d: Path) -> Optional[Tuple[str, Set[str]]]:
    """(kind, files) of the manifest in ``d``; None when there is none; :class:`OutputError` when unreadable."""
    m = d / MANIFEST
    if not os.path.lexists(m):
        return None
    bad = OutputError(f"--out {d} holds a {MANIFEST} this tool cannot read; choose another directory")
    if not _is_regular(m) or m.stat().st_size > MANIFEST_MAX_BYTES:
        raise bad
    try:
        data = json.loads(m.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise bad from None
    if not isinstance(data, dict) or data.get("tool") != TOOL or data.get("kind") not in KIND_FILES \
            or not isinstance(data.get("files"), list):
        raise bad
    files = {r for r in (_safe_rel(x) for x in data["files"]) if r is not None}
    return str(data["kind"]), {f for f in files if _is_regular(d / f)}


def _walk_foreign(d: Path, owned: Set[str]) -> Iterable[str]:
    """Relative paths under ``d`` that are not owned (directories count only when no owned file is below)."""
    keep_dirs = {str(Path(f).parent) for f in owned}
    keep_dirs |= {str(p) for f in owned for p in Path(f).parents}
    for root, dirs, files in os.walk(d):
        rel_root = os.path.relpath(root, d)
        for name in sorted(files):
            rel = name if rel_root == "." else f"{rel_root}/{name}"
            if rel != MANIFEST and rel not in owned:
                yield rel
        for name in sorted(dirs):
            rel = name if rel_root == "." else f"{rel_root}/{name}"
            full = os.path.join(root, name)
            if os.path.islink(full):
                yield rel
            elif rel not in keep_dirs:   # name a file inside (``tables/mine.csv``) when there is one
                inner = next((os.path.join(r, f[0]) for r, _, f in os.walk(full) if f), None)
                yield os.path.relpath(inner, d).replace(os.sep, "/") if inner else rel + "/"
        dirs[:] = [n for n in dirs if (n if rel_root == "." else f"{rel_root}/{n}") in keep_dirs
                   and not os.path.islink(os.path.join(root, n))]


def first_foreign(d: Path, owned: Set[str]) -> Optional[str]:
    return next(iter(_walk_foreign(d, owned)), None)


def _inside(child: Path, parent: Path) -> bool:
    return child == parent or parent in child.parents


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def check_out_dir(out: Path, force: bool, kind: str = "report", inputs: Sequence[os.PathLike] = ()) -> OutDir:
    """Refuse an unusable ``--out`` before any work (see module docstring); ``inputs``: the files read."""
    out = Path(out)
    _fs_name_check(out)
    real = Path(os.path.realpath(out))
    what = WHAT[kind]
    if os.path.lexists(real) and not real.is_dir():
        raise OutputError(f"--out {out} exists and is not a directory")
    anchor = real
    while not anchor.exists():
        anchor = anchor.parent
    if not anchor.is_dir():
        raise OutputError(f"cannot create --out {out}: {anchor} is not a directory")
    if not os.access(anchor, os.W_OK | os.X_OK):
        raise OutputError(f"--out {out} is not writable" if anchor == real else
                          f"cannot create --out {out}: {anchor} is not writable")
    od = OutDir(out, real, kind, force, real.exists(), inputs=tuple(Path(p) for p in inputs))
    if od.exists:
        man = read_manifest(real)
        if man is not None:
            od.previous_kind, od.previous = man
        for p in od.inputs:
            rp = Path(os.path.realpath(p))
            replaced = [real / f for f in od.previous | set(KIND_FILES[kind])]
            if any(_same_file(rp, f) for f in replaced if f.exists()):
                raise OutputError(f"the input {p} is a file of --out {out} that this run would replace; copy it "
                                  "elsewhere first")
            if _inside(rp, real) and not force:
                raise OutputError(f"the input {p} is inside --out {out}; choose another directory, or pass --force "
                                  "to write beside it (the input is never changed)")
        foreign = first_foreign(real, od.previous)
        if foreign is not None and not force:
            why = "has no manifest" if man is None else f"whose {MANIFEST} does not list it"
            raise OutputError(f"--out {out} holds {foreign!r}, not written by this tool (the directory {why}); "
                              "choose another directory, or pass --force to write beside it (other files are "
                              "never changed)")
        if od.previous_kind and od.previous_kind not in COMPATIBLE[kind] and not force:
            prev = "a report of a real trace" if od.previous_kind == "report" else f"a {WHAT[od.previous_kind]}"
            raise OutputError(f"--out {out} holds {prev}, not a {what}; choose another directory, or pass --force "
                              "to replace it")
        for name in KIND_FILES[kind]:
            if os.path.lexists(real / name) and name not in od.previous:
                raise OutputError(f"--out {out} holds {name!r}, which this tool did not write and would replace; "
                                  "move it or choose another directory (--force never overwrites it)")
    return od


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

    def _can_swap(self) -> bool:
        t = self.target
        real, parent = t.real, t.real.parent
        if not t.exists:
            return True
        try:
            cwd = Path(os.path.realpath(os.getcwd()))
        except OSError:
            cwd = None
        return (real != parent and os.access(parent, os.W_OK | os.X_OK) and (cwd is None or not _inside(cwd, real))
                and os.stat(real).st_dev == os.stat(parent).st_dev)

    def __enter__(self) -> Staging:
        t = self.target
        self._swap = self._can_swap()
        where = t.real if (t.exists and not self._swap) else t.real.parent
        while not where.exists():
            where = where.parent
        try:
            with critical():   # no signal between creating the directory and remembering it
                self.tmp = _mkdir_fresh(where, STAGING_PREFIX)
            if t.exists and self._swap:
                os.chmod(self.tmp, stat.S_IMODE(os.stat(t.real).st_mode))
        except OSError as exc:
            raise OutputError(f"cannot write into {where}: {_why(exc)}") from None
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if self.tmp is not None and os.path.lexists(self.tmp):
            shutil.rmtree(self.tmp, ignore_errors=True)
        self.tmp = None
        if exc_type is not None and issubclass(exc_type, OSError) and not issubclass(exc_type, BrokenPipeError):
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
            if any(_same_file(p, t.real / f) for f in files + sorted(t.previous)):
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
        """Move file by file into a directory that also holds files of the user (never touched)."""
        assert self.tmp is not None
        t = self.target
        owned = t.previous | {MANIFEST} if _is_regular(t.real / MANIFEST) else set(t.previous)
        for f in files + [MANIFEST]:
            if os.path.lexists(t.real / f) and f not in owned:
                raise OutputError(f"--out {t.path} holds {f!r}, which this tool did not write and would replace; "
                                  "move it or choose another directory")
        backup = _mkdir_fresh(self.tmp, OLD_PREFIX)
        done: List[Tuple[str, bool, bool]] = []   # (relative path, old version backed up, new one moved in)
        made: List[Path] = []
        try:
            for f in sorted(owned - set(files) - {MANIFEST}) + files + [MANIFEST]:
                dst, src = t.real / f, self.tmp / f
                for d in reversed([p for p in dst.parents if _inside(p, t.real) and p != t.real]):
                    if not d.exists():
                        os.mkdir(d)
                        made.append(d)
                had = os.path.lexists(dst)
                if had:
                    (backup / f).parent.mkdir(parents=True, exist_ok=True)
                    os.rename(dst, backup / f)
                done.append((f, had, False))
                if os.path.lexists(src):
                    os.rename(src, dst)
                    done[-1] = (f, had, True)
        except OSError:
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
        for d in sorted({(t.real / f).parent for f in t.previous - set(files)}, key=lambda p: -len(p.parts)):
            if _inside(d, t.real) and d != t.real:
                try:
                    os.rmdir(d)   # only when empty: a directory of ours that a new run no longer needs
                except OSError:
                    pass
