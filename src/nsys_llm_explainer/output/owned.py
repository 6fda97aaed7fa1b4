"""Which files of an output directory are ours (the manifest), which are not, and whether a path stays inside
the real ``--out`` (rules: docs/SECURITY.md, "2. Outputs")."""

from __future__ import annotations

import json
import os
import stat
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Set, Tuple

from ..errors import OutputError
from .lock import acquire, lock_name, release

MANIFEST = ".nsys-llm-explainer.json"
TOOL = "nsys-llm-explainer"
PROG = "nsys-llm-explain"   # the command's name, as its other lines start (cli.PROG)
#: hidden names of our own temporary directories (staging, and the previous output while it is swapped out)
STAGING_PREFIX = ".nsys-llm-explain-tmp-"
OLD_PREFIX = ".nsys-llm-explain-old-"
NAME_MAX = 255
MANIFEST_MAX_BYTES = 16 << 20
#: top-level files each kind writes (``tables/…`` and ``ranks/…`` are listed per run in the manifest)
KIND_FILES: Dict[str, Tuple[str, ...]] = {
    "report": ("report.md", "report.json", "report.html", "timeline.pftrace"),
    "demo": ("report.md", "report.json", "report.html", "timeline.pftrace", "demo_trace.sqlite"),
    "compare": ("compare.md", "compare.json", "compare.html"),
    "cluster": ("cluster.md", "cluster.json", "cluster.html", "timeline.pftrace"),
}
#: directories each kind writes into (checked: a link or a file there is refused, even with ``force``)
KIND_DIRS: Dict[str, Tuple[str, ...]] = {"report": ("tables",), "demo": ("tables",), "compare": ("tables",),
                                         "cluster": ("tables", "ranks")}
WHAT = {"report": "report", "demo": "demo report", "compare": "comparison", "cluster": "cluster report"}
#: kinds that may replace each other without ``force`` (a demo does not replace a real trace's report)
COMPATIBLE = {"report": {"report", "demo"}, "demo": {"demo"}, "compare": {"compare"}, "cluster": {"cluster"}}


@dataclass
class OutDir:
    """A checked ``--out``: where it is, what a previous run left there, and which inputs must survive."""

    path: Path                       # as the user gave it (messages)
    real: Path                       # absolute, symlinks resolved
    kind: str
    inputs: Tuple[Path, ...]
    #: what the check saw, compared again at the commit (:meth:`Staging.commit`): (device, inode) of the real
    #: ``--out`` (None: absent) and of the nearest existing directory above it, which is ``anchor``
    ident: Optional[Tuple[int, int]]
    anchor: Path
    anchor_ident: Optional[Tuple[int, int]]
    previous: Set[str] = field(default_factory=set)     # files the previous manifest lists (still ours)


def ident_of(p: Path) -> Optional[Tuple[int, int]]:
    """(device, inode) of the directory ``p`` itself (a link is not followed); None when absent or not a directory."""
    try:
        st = os.lstat(p)
    except FileNotFoundError:
        return None
    return (st.st_dev, st.st_ino) if stat.S_ISDIR(st.st_mode) else None


def _fs_name_check(out: Path) -> None:
    for part in out.parts:
        n = len(os.fsencode(part))
        if n > NAME_MAX:
            raise OutputError(f"--out has a path component of {n} bytes; file systems allow {NAME_MAX}")
    if len(os.fsencode(str(out.absolute()))) > 4000:
        raise OutputError("--out path is too long")


def is_regular(p: Path) -> bool:
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


def link_on_the_way(root: Path, rel: str) -> Optional[str]:
    """The first directory on the way from ``root`` to ``root/rel`` that is a symbolic link (or not a
    directory), as a relative path; None when every existing one is a real directory (missing ones are made
    by the tool itself). The last component is not followed by a rename, so it is not checked here."""
    parts = rel.split("/")
    p = root
    for i in range(len(parts) - 1):
        p = p / parts[i]
        try:
            if not stat.S_ISDIR(os.lstat(p).st_mode):
                return "/".join(parts[:i + 1])
        except FileNotFoundError:
            return None
        except OSError:
            return "/".join(parts[:i + 1])
    return None


def contained(root: Path, rel: str) -> bool:
    """``root/rel`` is reached without a link and is not one itself (a file or directory the tool may own)."""
    return link_on_the_way(root, rel) is None and not os.path.islink(root / rel)


def read_manifest(d: Path, ignored: List[str]) -> Optional[Tuple[str, Set[str]]]:
    """(kind, files) of the manifest in ``d``; None when there is none; :class:`OutputError` when unreadable.
    Only entries that are plain relative paths to regular files reached without a symbolic link count;
    the others are ignored, and appended to ``ignored`` (entries naming a file that is gone are not)."""
    m = d / MANIFEST
    if not os.path.lexists(m):
        return None
    bad = OutputError(f"--out {d} holds a {MANIFEST} this tool cannot read; choose another directory")
    if not is_regular(m) or m.stat().st_size > MANIFEST_MAX_BYTES:
        raise bad
    try:
        data = json.loads(m.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        raise bad from None
    if not isinstance(data, dict) or data.get("tool") != TOOL or not isinstance(data.get("kind"), str) \
            or data["kind"] not in KIND_FILES \
            or not isinstance(data.get("files"), list):
        raise bad
    files: Set[str] = set()
    for x in data["files"]:
        r = _safe_rel(x)
        if r is None or not contained(d, r):
            if r is None or os.path.lexists(d / r):
                ignored.append(x if isinstance(x, str) else repr(x))
        elif is_regular(d / r):
            files.add(r)
    return str(data["kind"]), files


def _warn_ignored(out: Path, ignored: List[str]) -> None:
    """One warning line on stderr (never raises): names shown through ``ascii()``, so they are inert."""
    if not ignored:
        return
    first = ascii(ignored[0][:120])
    try:
        sys.stderr.write(f"{PROG}: warning: the {MANIFEST} in --out {ascii(str(out))} lists {len(ignored)} "
                         f"path(s) outside --out or through a symbolic link (e.g. {first}); they are ignored: "
                         "never written, replaced or removed\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def first_foreign(d: Path, owned: Set[str]) -> Optional[str]:
    """The first relative path under ``d`` that is not owned (a directory counts only when no owned file is below),
    or None."""
    keep_dirs = {str(p) for f in owned for p in Path(f).parents}
    lock = lock_name(d)   # this run's own lock, where it had to go inside --out (output.lock)
    for root, dirs, files in os.walk(d):
        rel_root = os.path.relpath(root, d)
        for name in sorted(files):
            rel = name if rel_root == "." else f"{rel_root}/{name}"
            if rel != MANIFEST and rel not in owned and rel != lock:
                return rel
        for name in sorted(dirs):
            rel = name if rel_root == "." else f"{rel_root}/{name}"
            full = os.path.join(root, name)
            if os.path.islink(full):
                return rel
            elif rel not in keep_dirs:   # name a file inside (``tables/mine.csv``) when there is one
                inner = next((os.path.join(r, f[0]) for r, _, f in os.walk(full) if f), None)
                return os.path.relpath(inner, d).replace(os.sep, "/") if inner else rel + "/"
        dirs[:] = [n for n in dirs if (n if rel_root == "." else f"{rel_root}/{n}") in keep_dirs
                   and not os.path.islink(os.path.join(root, n))]
    return None


def inside(child: Path, parent: Path) -> bool:
    return child == parent or parent in child.parents


def same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _no_dangling_link(out: Path) -> None:
    """Refuse an ``--out`` that is, or lies under, a symbolic link to a missing path: creating it would create
    directories wherever the link points (``mkdir -p`` refuses it too)."""
    p = Path(os.path.abspath(out))
    while not p.exists():
        if os.path.islink(p):
            raise OutputError(f"--out {out}: {p} is a symbolic link to a missing path; create its target or choose "
                              "another directory")
        if p == p.parent:
            return
        p = p.parent


def current_umask() -> int:
    """The process's umask, read without changing it where the system says it (Linux ``/proc``)."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _check_umask(out: Path) -> None:
    """Refuse a umask that takes the owner's write or search permission from new directories: the tool could not
    write into the directories it makes (``tables/``), nor the user read the report."""
    mask = current_umask()
    if mask & 0o300:
        raise OutputError(f"--out {out}: the umask {mask:04o} takes the owner's write or search permission from the "
                          "directories this tool creates; run with a umask such as 0022 (`umask 022`)")


def check_out_dir(out: Path, force: bool, kind: str = "report", inputs: Sequence[os.PathLike] = ()) -> OutDir:
    """Refuse an unusable ``--out`` before any work (docs/SECURITY.md, "2. Outputs"); ``inputs``: the files read.
    A path the system will not look up (a parent that may not be searched, a name too long, a link loop) is one line
    too."""
    try:
        return _check_out_dir(Path(out), force, kind, inputs)
    except OSError as exc:
        from ..errors import CWD_GONE, cwd_gone

        why = CWD_GONE if cwd_gone(os.fspath(out)) else exc.strerror or exc
        raise OutputError(f"--out {out} cannot be used: {why}") from None


def _check_out_dir(out: Path, force: bool, kind: str, inputs: Sequence[os.PathLike]) -> OutDir:
    _fs_name_check(out)
    _no_dangling_link(out)
    real = Path(os.path.realpath(out))
    _check_umask(out)
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
    top = anchor if anchor != real else real.parent
    od = OutDir(out, real, kind, tuple(Path(p) for p in inputs), ident_of(real), top, ident_of(top))
    acquire(real, out)   # one run at a time into this --out (output.lock): a second one is refused here
    try:
        _check_existing(od, force)
    except BaseException:
        release(real)
        raise
    return od


def _check_existing(od: OutDir, force: bool) -> None:
    out, real, kind, what = od.path, od.real, od.kind, WHAT[od.kind]
    if od.ident is not None:
        ignored: List[str] = []   # manifest entries outside --out or through a link
        man = read_manifest(real, ignored)
        previous_kind = None
        if man is not None:
            previous_kind, od.previous = man
        for d in KIND_DIRS[kind]:
            if os.path.islink(real / d) or (os.path.lexists(real / d) and not os.path.isdir(real / d)):
                what_is = "a symbolic link" if os.path.islink(real / d) else "not a directory"
                raise OutputError(f"--out {out} holds {d!r}, {what_is}, where this tool writes its {d}/ files; it "
                                  "never writes through a link or replaces a file it did not write (not even with "
                                  "--force): remove it or choose another directory")
        for p in od.inputs:
            rp = Path(os.path.realpath(p))
            replaced = [real / f for f in od.previous | set(KIND_FILES[kind])]
            if any(same_file(rp, f) for f in replaced if f.exists()):
                raise OutputError(f"the input {p} is a file of --out {out} that this run would replace; copy it "
                                  "elsewhere first")
            if inside(rp, real) and not force:
                raise OutputError(f"the input {p} is inside --out {out}; choose another directory, or pass --force "
                                  "to write beside it (the input is never changed)")
        foreign = first_foreign(real, od.previous)
        if foreign is not None and not force:
            why = "has no manifest" if man is None else f"whose {MANIFEST} does not list it"
            raise OutputError(f"--out {out} holds {foreign!r}, not written by this tool (the directory {why}); "
                              "choose another directory, or pass --force to write beside it (other files are "
                              "never changed)")
        if previous_kind and previous_kind not in COMPATIBLE[kind] and not force:
            prev = "a report of a real trace" if previous_kind == "report" else f"a {WHAT[previous_kind]}"
            raise OutputError(f"--out {out} holds {prev}, not a {what}; choose another directory, or pass --force "
                              "to replace it")
        for name in KIND_FILES[kind]:
            if os.path.lexists(real / name) and name not in od.previous:
                raise OutputError(f"--out {out} holds {name!r}, which this tool did not write and would replace; "
                                  "move it or choose another directory (--force never overwrites it)")
        _warn_ignored(out, ignored)
