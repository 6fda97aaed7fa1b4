"""Turn an Nsight Systems report (``.nsys-rep`` / ``.qdrep``) into a SQLite export with the user's own
``nsys`` (``nsys export --type sqlite``), into a directory the caller owns (a temp dir). The report itself is
only read by ``nsys``; nothing is written beside it. Paths reach ``nsys`` absolute (a report named ``-x.nsys-rep``
is never read as an option), and the command suggested in messages is shell-quoted."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from pathlib import Path

from ..errors import InputError

REPORT_SUFFIXES = (".nsys-rep", ".qdrep")
EXPORT_TIMEOUT_S = 3600


def is_report(path: Path) -> bool:
    """True for an Nsight Systems report file name (needs exporting before it can be read)."""
    return path.suffix.lower() in REPORT_SUFFIXES


def export_command(path: Path) -> str:
    """The command that exports ``path`` by hand (into ``./<stem>.sqlite``; ``./<stem>.export.sqlite`` when
    ``path`` itself ends in ``.sqlite``, so that the command never writes over it), shell-quoted, the report
    named by its absolute path."""
    path = Path(path)
    name = path.with_suffix(".sqlite").name
    out = "./" + (path.stem + ".export.sqlite" if name == path.name else name)
    return f"nsys export --type sqlite --output {shlex.quote(out)} {shlex.quote(os.path.abspath(path))}"


def export_report(path: Path, tmpdir: Path) -> Path:
    """``tmpdir/trace.sqlite`` exported from the report ``path``; :class:`InputError` (one line with the
    command to run by hand) when ``nsys`` is missing or the export fails."""
    nsys = shutil.which("nsys")
    src = os.path.abspath(path)   # absolute: a name starting with '-' never reads as an option of nsys
    cmd_hint = export_command(path)
    if nsys is None:
        raise InputError(f"{path.name} is an Nsight Systems report, not SQLite, and `nsys` is not on PATH; "
                         f"run: {cmd_hint}")
    out = tmpdir / "trace.sqlite"
    try:
        proc = subprocess.run([nsys, "export", "--type", "sqlite", "--output", os.path.abspath(out), src],
                              capture_output=True, timeout=EXPORT_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError) as exc:
        raise InputError(f"`nsys export` failed ({exc}); run: {cmd_hint}") from None
    if proc.returncode != 0 or not out.exists():
        last = (proc.stderr or proc.stdout or b"").decode(errors="replace").strip().splitlines()
        raise InputError(f"`nsys export` failed: {last[-1] if last else proc.returncode}; run: {cmd_hint}")
    return out
