"""Read a small option file given by the user (``--categories``, ``--phase-map``) with a size cap.

Only a regular file is read, and at most :data:`MAX_BYTES` of it: ``/dev/zero``, a FIFO, a directory or a
multi-gigabyte file is refused with one :class:`~nsys_llm_explainer.errors.OptionError` line (naming the
option) instead of being read until memory runs out. The file is opened non-blocking so that opening a FIFO
never waits for a writer.
"""

from __future__ import annotations

import os
import stat
from typing import Union

from ..errors import OptionError

#: largest option file read (rule and phase-map files are a few kB)
MAX_BYTES = 8 << 20


class Unreadable(Exception):
    """Why an option file cannot be read (``file not found``, ``not a regular file``, …): one short phrase."""


def read_text(path: Union[str, os.PathLike]) -> str:
    """The UTF-8 text of ``path``; :class:`Unreadable` when it is missing, not a regular file, larger than
    :data:`MAX_BYTES` or not UTF-8."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        raise Unreadable("file not found") from None
    except OSError as exc:
        raise Unreadable(f"cannot read the file ({exc.strerror or exc})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise Unreadable("not a regular file")
        if st.st_size > MAX_BYTES:
            raise Unreadable(f"the file is {st.st_size:,} bytes; option files are limited to {MAX_BYTES:,}")
        with os.fdopen(fd, "rb", closefd=False) as fh:
            data = fh.read(MAX_BYTES + 1)
    except OSError as exc:
        raise Unreadable(f"cannot read the file ({exc.strerror or exc})") from None
    finally:
        os.close(fd)
    if len(data) > MAX_BYTES:
        raise Unreadable(f"the file is larger than {MAX_BYTES:,} bytes, the limit for option files")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Unreadable(f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def read_user_text(path: Union[str, os.PathLike], option: str) -> str:
    """:func:`read_text`, or :class:`OptionError` ``<option> <path>: <why>``."""
    try:
        return read_text(path)
    except Unreadable as exc:
        raise OptionError(option, f"{path}: {exc}") from None
