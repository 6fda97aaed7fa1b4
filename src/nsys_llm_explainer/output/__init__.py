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

**Containment.** Nothing outside the real ``--out`` (symlinks resolved once, at the check) is created,
replaced or removed: every path is checked, component by component, to reach its file without a symbolic
link (:func:`link_on_the_way`). A manifest entry that is not a plain relative path, or whose way goes through
a link, or that is itself a link, is ignored (never written or removed) and reported in one warning line
(:attr:`OutDir.ignored`); a directory the tool writes into (``tables/``, ``ranks/``, ``ranks/<label>/``) that is
a link or not a directory is refused (exit 2), even with ``force``: the link is the user's, so it is not
replaced either. Staging directories are made beside the real ``--out`` (inside it only where it is a mount
point or its parent is not writable) and removed on every way out, signals included.
An ``--out`` that is, or lies under, a symbolic link to a missing path is refused (creating it would create
directories wherever the link points).

**Changed during the run.** The commit checks ``--out`` again: the same directory (device, inode, not a link)
or still absent, under the same directory above it; anything else is refused (exit 2) and nothing is written
there. The renames go through a descriptor of the checked parent; a rename never follows a link at its target.

**One run per --out** (:mod:`output.lock`): a second run into an ``--out`` being written is refused at its check.

The new directory's mode follows the umask; a replaced directory keeps its mode. A umask that takes the owner's
write or search permission is refused; the staging directory stays owner-``rwx`` until the commit.
"""

from __future__ import annotations

from .owned import (
    KIND_DIRS,
    KIND_FILES,
    MANIFEST,
    OLD_PREFIX,
    STAGING_PREFIX,
    TOOL,
    OutDir,
    check_out_dir,
    first_foreign,
    link_on_the_way,
    read_manifest,
)
from .staging import COMMITTED, Staging

__all__ = ["COMMITTED", "KIND_DIRS", "KIND_FILES", "MANIFEST", "OLD_PREFIX", "STAGING_PREFIX", "TOOL", "OutDir",
           "Staging", "check_out_dir", "first_foreign", "link_on_the_way", "read_manifest"]
