"""Input paths as the tool takes them: the Python API's type checks (:func:`path_arg`) and the file-name rule
(:func:`check_name`: text the SQLite driver can open and a UTF-8 report can hold; no NUL byte). Cases:
docs/SECURITY.md, "Faults, streams, signals, names and the API".
"""

from __future__ import annotations

import os
from typing import Any, Optional

from .errors import CWD_GONE, InputError


def shown(path: str) -> str:
    """``path`` printable: bytes that are not UTF-8 as ``\\xNN`` escapes (a lone surrogate, which no file name
    can hold, as ``\\udNNN``)."""
    try:
        return os.fsencode(path).decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:
        return path.encode("utf-8", "backslashreplace").decode("ascii")


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
    try:
        os.fsencode(path)
    except UnicodeEncodeError:   # a surrogate outside U+DC80–U+DCFF: no name in the file system holds it
        raise InputError(f"{shown(path)}: the file name holds a lone surrogate, which no file name can hold"
                         ) from None
    try:
        real = os.path.realpath(path)
    except FileNotFoundError:   # relative, and the working directory was deleted
        raise InputError(f"{shown(path)}: {CWD_GONE}") from None
    if not is_text(path) or not is_text(real):
        bad = path if not is_text(path) else real
        raise InputError(f"{shown(bad)}: the file name is not valid UTF-8; rename the file (or copy it to a "
                         "UTF-8 name) and run again")
    return path


def stat_or_none(path: str) -> Optional[os.stat_result]:
    """``os.stat(path)``, or None when nothing is there (or a link points nowhere); an empty path, or a path the
    system will not look up — a parent directory that may not be searched, a name too long, a link loop, a
    component that is a file — is :class:`InputError` in one line naming it (never a raw ``OSError``)."""
    if path == "":
        raise InputError("an empty path was given as a trace (a shell variable that was not set?)")
    try:
        return os.stat(path)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:   # ValueError: an embedded NUL byte
        why = getattr(exc, "strerror", None) or str(exc)
        raise InputError(f"cannot look up {shown(path)}: {why}") from None


def path_arg(value: Any, name: str) -> str:
    """A path argument of the API as text (``str``, ``bytes`` or ``os.PathLike``); :class:`InputError` naming
    ``name`` for any other type."""
    if isinstance(value, (str, bytes, os.PathLike)):
        p = os.fspath(value)
        return os.fsdecode(p) if isinstance(p, bytes) else p
    raise InputError(f"{name} must be a file path (str, bytes or os.PathLike), got {type(value).__name__}"
                     + (f" {value!r}" if isinstance(value, (int, float)) else ""))
