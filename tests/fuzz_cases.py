"""Mutations for the fuzz test (``hardening/test_fuzz_exports.py``): each takes a writable copy of an export and
damages it the way a real, old, truncated or hostile file could. Deterministic: a case is (base trace, mutation
name, seed)."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path
from typing import Callable, Dict, List

KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"
RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"
HOSTILE = ["=cmd|' /C calc'!A0", "+1+1", "-2", "@SUM(A1)", "\tTAB", "\rCR", "\x1b[31mred\x1b[0m",
           "\x1b]8;;http://x/\x07link\x1b]8;;\x07", "\u202eevil\u202c", "<script>alert(1)</script>", "| a | b |",
           "`code` **bold** [x](http://y)", "x" * 100_000, "", "\x00nul", "\ud7ff\ue000", "名前"]


def _tables(c: sqlite3.Connection) -> List[str]:
    return [r[0] for r in c.execute("SELECT name FROM sqlite_master WHERE type='table'")]


def _cols(c: sqlite3.Connection, t: str) -> List[str]:
    return [r[1] for r in c.execute(f'PRAGMA table_info("{t}")')]


def _rowids(c: sqlite3.Connection, t: str, rng: random.Random, k: int) -> List[int]:
    ids = [r[0] for r in c.execute(f'SELECT rowid FROM "{t}"')]
    return rng.sample(ids, min(k, len(ids))) if ids else []


def drop_table(c, rng):
    t = rng.choice([t for t in _tables(c) if not t.startswith("sqlite_")])
    c.execute(f'DROP TABLE "{t}"')


def drop_key_table(c, rng):
    t = rng.choice([KERNEL, RUNTIME, "StringIds", "NVTX_EVENTS", "TARGET_INFO_GPU", "ThreadNames"])
    c.execute(f'DROP TABLE IF EXISTS "{t}"')


def drop_column(c, rng):
    t = rng.choice([KERNEL, RUNTIME, "NVTX_EVENTS", "StringIds"])
    if t not in _tables(c):
        return
    cols = _cols(c, t)
    col = rng.choice(cols)
    keep = [x for x in cols if x != col]
    if not keep:
        return
    c.execute(f'CREATE TABLE "_tmp" AS SELECT {", ".join(chr(34) + x + chr(34) for x in keep)} FROM "{t}"')
    c.execute(f'DROP TABLE "{t}"')
    c.execute(f'ALTER TABLE "_tmp" RENAME TO "{t}"')


def _update_some(c, rng, t: str, cols: List[str], val, k: int) -> None:
    """Set ``val`` in ``k`` random rows of the first column (random order) whose constraints accept it."""
    cols = list(cols)
    rng.shuffle(cols)
    rids = _rowids(c, t, rng, k)
    for col in cols:
        try:
            for rid in rids:
                c.execute(f'UPDATE "{t}" SET "{col}" = ? WHERE rowid = ?', (val, rid))
            return
        except sqlite3.IntegrityError:   # NOT NULL / CHECK of the nsys schema: a value nsys never writes there
            continue


def nulls(c, rng):
    t = rng.choice([KERNEL, RUNTIME, "NVTX_EVENTS", "StringIds"])
    if t in _tables(c):
        _update_some(c, rng, t, _cols(c, t), None, 3)


def wrong_type(c, rng):
    t = rng.choice([KERNEL, RUNTIME, "NVTX_EVENTS", "StringIds"])
    if t in _tables(c):
        _update_some(c, rng, t, _cols(c, t), rng.choice(["seven", b"\x00\x01blob", 3.75, "1e3", ""]), 2)


def extreme(c, rng):
    t = rng.choice([KERNEL, RUNTIME, "NVTX_EVENTS"])
    if t not in _tables(c):
        return
    cols = [x for x in _cols(c, t) if x in ("start", "end", "deviceId", "streamId", "correlationId", "globalPid",
                                             "globalTid", "nameId", "demangledName", "textId", "domainId")]
    _update_some(c, rng, t, cols or ["start"], rng.choice([2 ** 63 - 1, -(2 ** 63), -1, 0, 4_000_000_000, 1 << 40]), 2)


def end_before_start(c, rng):
    t = rng.choice([KERNEL, RUNTIME, "NVTX_EVENTS", "CUPTI_ACTIVITY_KIND_MEMCPY"])
    if t not in _tables(c):
        return
    for rid in _rowids(c, t, rng, 3):
        c.execute(f'UPDATE "{t}" SET "end" = start - 1000 WHERE rowid = ?', (rid,))


def hostile_names(c, rng):
    if "StringIds" not in _tables(c):
        return
    for rid in _rowids(c, "StringIds", rng, 6):
        c.execute("UPDATE StringIds SET value = ? WHERE rowid = ?", (rng.choice(HOSTILE), rid))


def empty_table(c, rng):
    t = rng.choice([KERNEL, RUNTIME, "NVTX_EVENTS", "StringIds"])
    if t in _tables(c):
        c.execute(f'DELETE FROM "{t}"')


def duplicate_rows(c, rng):
    t = rng.choice([KERNEL, RUNTIME, "StringIds"])
    if t not in _tables(c):
        return
    cols = ", ".join(f'"{x}"' for x in _cols(c, t))
    try:
        c.execute(f'INSERT INTO "{t}" ({cols}) SELECT {cols} FROM "{t}" LIMIT 5')
    except sqlite3.IntegrityError:   # a unique id (StringIds.id): nsys never writes a duplicate there
        pass


def view_instead_of_table(c, rng):
    t = rng.choice([KERNEL, RUNTIME, "StringIds"])
    if t not in _tables(c):
        return
    c.execute(f'ALTER TABLE "{t}" RENAME TO "_real"')
    c.execute(f'CREATE VIEW "{t}" AS SELECT * FROM "_real"')


MUTATIONS: Dict[str, Callable[[sqlite3.Connection, random.Random], None]] = {
    f.__name__: f for f in (drop_table, drop_key_table, drop_column, nulls, wrong_type, extreme, end_before_start,
                            hostile_names, empty_table, duplicate_rows, view_instead_of_table)
}


def mutate(src: Path, dst: Path, name: str, seed: int) -> None:
    """Write ``src`` damaged by mutation ``name`` (random choices from ``seed``) to ``dst``."""
    dst.write_bytes(src.read_bytes())
    c = sqlite3.connect(dst)
    try:
        MUTATIONS[name](c, random.Random(seed))
        c.commit()
    finally:
        c.close()


def truncate(src: Path, dst: Path, seed: int) -> None:
    """A copy cut at a random page boundary past the header (a partly copied or partly written export)."""
    data = src.read_bytes()
    cut = random.Random(seed).randrange(4096, max(len(data), 4097))
    dst.write_bytes(data[: cut - cut % 1024])
