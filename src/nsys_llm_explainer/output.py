"""Atomic output: render everything into a temporary directory beside ``--out``, then move it in place.

A run that fails or is interrupted before the move leaves ``--out`` as it was. ``--out`` may be new,
empty, or hold a previous report of this tool; anything else is refused unless ``force``.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import List, Optional, Set

from .errors import OutputError

#: files and folders a report consists of (a directory holding only these is a "previous report")
REPORT_ENTRIES = {"report.md", "report.json", "tables", "demo_trace.sqlite", "report.html"}


def check_out_dir(out: Path, force: bool, owned: Optional[Set[str]] = None, what: str = "report") -> None:
    """Refuse an unusable ``--out`` before any work is done: a non-directory, or (without ``force``) a
    directory holding anything but the entries a previous ``what`` writes (``owned``; default: a report)."""
    if out.exists() and not out.is_dir():
        raise OutputError(f"--out {out} exists and is not a directory")
    if out.is_dir():
        entries = {p.name for p in out.iterdir()}
        foreign = sorted(entries - (REPORT_ENTRIES if owned is None else owned))
        if foreign and not force:
            raise OutputError(
                f"--out {out} is not empty and does not hold a previous {what} (found {foreign[0]!r}); "
                "choose another directory or pass --force"
            )
    parent = out.resolve().parent
    if not parent.exists():
        try:
            parent.mkdir(parents=True, exist_ok=True)   # like `mkdir -p` for artifacts/run_X/
        except OSError as exc:
            raise OutputError(f"cannot create the parent directory of --out {parent}: {exc.strerror or exc}") from None
    if not parent.is_dir():
        raise OutputError(f"parent of --out is not a directory: {parent}")
    if not os.access(parent, os.W_OK | os.X_OK) or (out.is_dir() and not os.access(out, os.W_OK | os.X_OK)):
        raise OutputError(f"--out {out} is not writable")


class Staging:
    """Context manager: a temp dir beside ``out``; ``commit()`` moves its contents into ``out``."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.tmp: Path | None = None

    def __enter__(self) -> Staging:
        parent = self.out.resolve().parent
        try:
            self.tmp = Path(tempfile.mkdtemp(prefix=f".{self.out.name}.tmp-", dir=parent))
        except OSError as exc:
            raise OutputError(f"cannot write into {parent}: {exc.strerror or exc}") from None
        return self

    def __exit__(self, *exc) -> None:
        if self.tmp is not None and self.tmp.exists():
            shutil.rmtree(self.tmp, ignore_errors=True)

    def commit(self) -> List[Path]:
        assert self.tmp is not None
        out = self.out
        try:
            if not out.exists():
                os.replace(self.tmp, out)
                self.tmp = None
                return sorted(out.rglob("*"))
            moved = []
            for src in sorted(self.tmp.iterdir()):
                dst = out / src.name
                if dst.is_dir() and not dst.is_symlink():
                    old = out / f".{src.name}.old"
                    shutil.rmtree(old, ignore_errors=True)
                    os.replace(dst, old)
                    os.replace(src, dst)
                    shutil.rmtree(old, ignore_errors=True)
                else:
                    os.replace(src, dst)
                moved.append(dst)
            return moved
        except OSError as exc:
            raise OutputError(f"cannot move the report into {out}: {exc.strerror or exc}") from None
