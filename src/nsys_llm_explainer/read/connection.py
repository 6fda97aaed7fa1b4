"""Open an Nsight Systems SQLite export strictly read-only (``mode=ro&immutable=1``: no write, no side file, no
lock; a database locked by another process is still read). Text that is not UTF-8 is read with U+FFFD
(:func:`lenient`) and counted in ``excluded`` for the report's warnings (docs/SECURITY.md, "5. Values entering the
model").
"""

from __future__ import annotations

import os
import re
import sqlite3
import stat
import threading
from pathlib import Path
from typing import Callable, List, Optional, Set, TypeVar
from urllib.parse import quote

from ..errors import InputError
from .nsys_export import export_command

SQLITE_MAGIC = b"SQLite format 3\x00"
T = TypeVar("T")


def _uri(path: Path) -> str:
    return "file:" + quote(str(path.resolve()), safe="/") + "?mode=ro&immutable=1"


class TraceConnection(sqlite3.Connection):
    """A read-only connection that also knows its URI, so :mod:`read.columnar` can open the same file the same
    way (``columnar_uri`` is ``None`` when the standard-library reader is used). ``lock`` serializes use of this
    connection when tables are fetched on several threads."""

    columnar_uri: Optional[str] = None
    lock: threading.Lock
    excluded: List[str]   # warnings about rows left out while reading (values of the wrong type)


class LenientText:
    """A ``text_factory`` that decodes UTF-8 with invalid bytes replaced (U+FFFD) and remembers which distinct
    values needed it (by hash: memory grows with the number of bad values, never their size)."""

    def __init__(self) -> None:
        self.bad: Set[int] = set()
        self.where: List[str] = []   # the tables they were read from, in order
        self.note: Optional[str] = None

    def __call__(self, raw: bytes) -> str:
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            self.bad.add(hash(raw))
            return raw.decode("utf-8", "replace")


def undecodable(exc: BaseException) -> bool:
    """``exc`` is the standard library's error for a text value that is not UTF-8."""
    return isinstance(exc, sqlite3.OperationalError) and "Could not decode to UTF-8" in str(exc)


def lenient(conn: sqlite3.Connection, where: str, run: Callable[[], T]) -> T:
    """``run()`` (which reads text through ``conn``); when it meets bytes that are not UTF-8, ``conn`` decodes
    text leniently from then on (:class:`LenientText`) and ``run()`` is called again. Values replaced are
    counted in one note of ``conn.excluded`` naming the tables (``where``: the table ``run`` reads) — also when
    the second ``run()`` stops on another error that its caller handles (a value of the wrong type: the caller
    reads again without those rows, and the values replaced so far must still be told)."""
    dec = conn.text_factory if isinstance(conn.text_factory, LenientText) else None
    before = len(dec.bad) if dec is not None else 0
    try:
        try:
            return run()
        except sqlite3.OperationalError as exc:
            if dec is not None or not undecodable(exc):
                raise
            dec = LenientText()
            conn.text_factory = dec
            return run()
    finally:
        if dec is not None and len(dec.bad) > before:
            _note(conn, dec, where)


def _note(conn: sqlite3.Connection, dec: LenientText, where: str) -> None:
    """(Re)write the one note that counts the values ``dec`` replaced, naming the tables they came from."""
    if where not in dec.where:
        dec.where.append(where)
    notes = getattr(conn, "excluded", None)
    if isinstance(notes, list):
        if dec.note in notes:
            notes.remove(dec.note)
        dec.note = (f"{len(dec.bad)} text value(s) in {', '.join(dec.where)} hold bytes that are not UTF-8; they "
                    "are shown with U+FFFD (\ufffd) in place of those bytes (names that differ only there are "
                    "counted together).")
        notes.append(dec.note)


def all_rows(conn: sqlite3.Connection, sql: str, params: tuple = (), where: Optional[str] = None) -> List[tuple]:
    """``conn.execute(sql, params).fetchall()`` through :func:`lenient` (``where``: default, the table read)."""
    return lenient(conn, where or table_of(sql), lambda: conn.execute(sql, params).fetchall())


def table_of(sql: str) -> str:
    """The first table a query reads (for messages)."""
    m = re.search(r'\bFROM\s+"?([A-Za-z_][A-Za-z0-9_]*)', sql, re.IGNORECASE)
    return m.group(1) if m else "the trace"


#: leading bytes of file kinds given as traces by mistake → what to call them (and what to do)
MAGIC_KINDS = (
    (b"\x1f\x8b", "a gzip-compressed file; decompress it first (gunzip -k)"),
    (b"PK\x03\x04", "a zip archive; extract the .sqlite export from it first (unzip)"),
    (b"PK\x05\x06", "an empty zip archive"),
    (b"\xfd7zXZ\x00", "an xz-compressed file; decompress it first (unxz -k)"),
    (b"(\xb5/\xfd", "a zstd-compressed file; decompress it first (unzstd)"),
    (b"BZh", "a bzip2-compressed file; decompress it first (bunzip2 -k)"),
)
_OWN_JSON = re.compile(r'^\s*\{\s*"(schema_version|tool)"\s*:')
_TOP_KEY = re.compile(r'^\s{0,2}"([a-z_]+)"\s*:', re.MULTILINE)
_KIND = re.compile(r'"kind"\s*:\s*"(compare|cluster)"')


def sniff(p: Path, head: bytes) -> Optional[str]:
    """What the file ``p`` (starting with ``head``) is when it is a kind that users give as a trace by mistake — a
    compressed file or archive, or an output of this tool (``report.json``, ``compare.json``, ``cluster.json``,
    the manifest) — as words for a message; None for anything else."""
    for magic, what in MAGIC_KINDS:
        if head.startswith(magic):
            return what
    start = head.decode("latin-1").lstrip("\ufeff\xef\xbb\xbf")   # bytes as characters, one each; a BOM dropped
    if not _OWN_JSON.match(start):
        return "a JSON text file" if start.lstrip()[:1] in ("{", "[") else None
    try:
        with open(p, "rb") as fh:
            text = fh.read(4096).decode("latin-1")
    except OSError:
        return None
    keys = set(_TOP_KEY.findall(text))
    if "tool" in keys and "files" in keys and "nsys-llm-explainer" in text:
        return "the manifest of an output directory of nsys-llm-explainer (a list of files it wrote)"
    if "schema_version" not in keys or "tool_version" not in keys:
        return "a JSON text file"
    kind = _KIND.search(text)
    name = ("compare.json" if kind and kind.group(1) == "compare" else "report.json" if "headline" in keys
            else "cluster.json" if "files" in keys else None)
    if name is None:
        return "a JSON text file"
    return (f"a {name} written by nsys-llm-explainer (an analysis result, not a trace); give the trace it was "
            "made from")


def check_trace_path(path: str | os.PathLike) -> Path:
    """Validate that ``path`` is an existing, readable SQLite file without creating anything."""
    p = Path(path)
    try:
        st = p.stat()
    except FileNotFoundError:
        from ..errors import CWD_GONE, cwd_gone

        raise InputError(f"trace not found: {p}" + (f" ({CWD_GONE})" if cwd_gone(str(path)) else "")) from None
    except OSError as exc:
        raise InputError(f"cannot access trace {p}: {exc.strerror or exc}") from None
    if stat.S_ISDIR(st.st_mode):
        raise InputError(f"{p} is a directory, expected an Nsight Systems .sqlite export")
    if not stat.S_ISREG(st.st_mode):
        raise InputError(f"{p} is not a regular file")
    try:
        with open(p, "rb") as fh:
            head = fh.read(100)
    except OSError as exc:
        raise InputError(f"cannot read trace {p}: {exc.strerror or exc}") from None
    if len(head) == 0:
        raise InputError(f"{p} is empty (0 bytes), not an SQLite export")
    if not head.startswith(SQLITE_MAGIC):
        what = sniff(p, head)
        if what is not None:
            raise InputError(f"{p} is {what}, not an SQLite export of an Nsight Systems report")
        raise InputError(f"{p} is not an SQLite database; export the report first: {export_command(p)}")
    if len(head) < 100:
        raise InputError(f"{p} is truncated (SQLite header incomplete)")
    return p


def open_readonly(path: str | os.PathLike, reader: str = "sqlite3") -> TraceConnection:
    """Open ``path`` read-only and immutable; raise :class:`InputError` when it is not a usable database.
    ``reader``: ``adbc`` lets big integer tables be fetched through :mod:`read.columnar` (already resolved by
    :func:`read.columnar.resolve_reader`), ``sqlite3`` keeps every read on this connection."""
    p = check_trace_path(path)
    from .sidecar import check_sidecars  # hot journal / non-empty WAL beside the trace: refused (read/sidecar.py)
    check_sidecars(p)
    try:
        conn = sqlite3.connect(_uri(p), uri=True, check_same_thread=False, factory=TraceConnection)
        conn.lock = threading.Lock()
        conn.excluded = []
        conn.columnar_uri = _uri(p) if reader == "adbc" else None
        conn.execute("PRAGMA query_only = 1")
        conn.execute("PRAGMA temp_store = MEMORY")
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.DatabaseError as exc:
        raise InputError(f"{p} is not a readable SQLite database ({exc})") from None
    return conn
