"""Helpers shared by the hardening tests: the one-line check of a refusal, snapshots of a directory tree, our
hidden temporary entries, and a copy of the demo trace where a test may put things beside it."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional

from nsys_llm_explainer.output import OLD_PREFIX, STAGING_PREFIX
from nsys_llm_explainer.output.lock import LOCK_PREFIX

PROG = "nsys-llm-explain"
#: our hidden temporary entries: staging, a swapped-out output, the lock of a run
OURS = (STAGING_PREFIX, OLD_PREFIX, LOCK_PREFIX)


def one_line(err: str) -> str:
    """The one non-blank line of ``err`` (a refusal's stderr), failing when there are more, a traceback or an
    internal error. Progress lines (``[nsys-llm-explain] <step> … (1.0 s elapsed)``, shown when a step takes over
    a second, as on a loaded machine) are not counted."""
    lines = [ln for ln in err.splitlines() if ln.strip() and not ln.startswith(f"[{PROG}] ")]
    assert len(lines) == 1 and "Traceback" not in err and "internal error" not in err, err[-3000:]
    return lines[0]


def snapshot(d: Path) -> Dict[str, str]:
    """Every entry under ``d`` (links not followed): file → its bytes (hex), link → its target, dir → 'dir'."""
    out: Dict[str, str] = {}
    for root, dirs, files in os.walk(d):
        for n in dirs + files:
            p = Path(root, n)
            rel = p.relative_to(d).as_posix()
            out[rel] = ("-> " + os.readlink(p) if p.is_symlink() else "dir" if p.is_dir() else p.read_bytes().hex())
    return out


def digest(d: Path) -> Dict[str, str]:
    """Relative path → sha256 of every file under ``d`` (hidden ones included)."""
    return {p.relative_to(d).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(d.rglob("*")) if p.is_file()}


def leftovers(d: Path) -> List[str]:
    """Our hidden temporary entries (staging, swapped-out output, lock) anywhere under ``d``."""
    return [str(p) for p in d.rglob("*") if p.name.startswith(OURS)]


def copy_trace(src: Path, tmp_path: Path) -> Path:
    """``tmp_path/in/r0.sqlite``, a copy of ``src`` (tests check that nothing but ``in`` is left in ``tmp_path``)."""
    t = tmp_path / "in" / "r0.sqlite"
    t.parent.mkdir()
    shutil.copyfile(src, t)
    return t


def make_victim(tmp_path: Path) -> Path:
    """A directory of the user's, outside ``--out``, holding files named like ours."""
    v = tmp_path / "victim"
    v.mkdir()
    (v / "kernels.csv").write_text("precious\n")
    (v / "report.md").write_text("the user's own report\n")
    (v / "other.txt").write_text("keep me\n")
    (v / "empty").mkdir()
    return v


def refused(capsys, argv: List[str]) -> str:
    """Run the command line in this process on ``argv``: exit 2 and one ``error:`` line, which is returned."""
    from nsys_llm_explainer.cli import main

    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    line = one_line(err)
    assert line.startswith(f"{PROG}: error: "), line
    return line


def one_line_of(err: bytes) -> str:
    """:func:`one_line` of a subprocess's stderr bytes."""
    return one_line(err.decode("utf-8", "replace"))


def cli_env() -> Dict[str, str]:
    """``os.environ`` without the debug switch (which would let a traceback through)."""
    env = dict(os.environ)
    env.pop("NSYS_LLM_EXPLAIN_DEBUG", None)
    return env


def run_subprocess(args: List[str], stdout: object = subprocess.PIPE, stderr: object = subprocess.PIPE,
                   close: Optional[int] = None, env: Optional[Dict[str, str]] = None, cwd: Optional[Path] = None,
                   timeout: float = 120) -> subprocess.CompletedProcess:
    """The command line in a subprocess (bytes out); ``close``: a descriptor (1, 2) closed in the child, as ``>&-``
    does."""
    return subprocess.run([sys.executable, "-m", "nsys_llm_explainer", *args], stdout=stdout, stderr=stderr,
                          preexec_fn=(lambda: os.close(close)) if close is not None else None, env=env or cli_env(),
                          cwd=cwd, timeout=timeout)
