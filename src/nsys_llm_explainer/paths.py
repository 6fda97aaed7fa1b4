"""Input paths as the tool takes them: the Python API's type checks and the file-name rule.

* :func:`path_arg` — a path argument of the API (``str``, ``bytes`` or ``os.PathLike``) as text; anything else
  raises :class:`errors.InputError` naming the argument (``path must be a file path …, got int``).
* :func:`check_name` — a trace's name (and the real path it resolves to) must be text: a file name whose bytes
  are not valid UTF-8 (``bad\\xff.sqlite``; Python keeps such bytes as surrogate escapes) cannot be opened by
  the SQLite driver nor written into a UTF-8 report, so it is refused in one line naming it, with the bytes
  shown as ``\\xff`` escapes, before any work starts; so is a name holding a NUL byte (no file has one; the API
  could be given one).
"""

from __future__ import annotations

import os
from typing import Any

from .errors import InputError


def shown(path: str) -> str:
    """``path`` printable: bytes that are not UTF-8 as ``\\xNN`` escapes."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def is_text(path: str) -> bool:
    try:
        path.encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


def check_name(path: str) -> str:
    """``path`` when its name and its real path are valid UTF-8; :class:`InputError` (one line) otherwise."""
    if "\x00" in path:
        raise InputError(f"{shown(path).replace(chr(0), '<NUL>')}: a file name cannot hold a NUL byte")
    real = os.path.realpath(path)
    if not is_text(path) or not is_text(real):
        bad = path if not is_text(path) else real
        raise InputError(f"{shown(bad)}: the file name is not valid UTF-8; rename the file (or copy it to a "
                         "UTF-8 name) and run again")
    return path


def path_arg(value: Any, name: str) -> str:
    """A path argument of the API as text (``str``, ``bytes`` or ``os.PathLike``); :class:`InputError` naming
    ``name`` for any other type."""
    if isinstance(value, (str, bytes, os.PathLike)):
        p = os.fspath(value)
        return os.fsdecode(p) if isinstance(p, bytes) else p
    raise InputError(f"{name} must be a file path (str, bytes or os.PathLike), got {type(value).__name__}"
                     + (f" {value!r}" if isinstance(value, (int, float)) else ""))
