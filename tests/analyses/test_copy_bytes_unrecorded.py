"""Copies whose byte count the export does not record (docs/METRICS.md, "Memcpy / memset"): the reader reads a NULL
``bytes`` (or an export without the column) as -1; byte totals count only the rows that record theirs and are None
("–", "bytes not recorded by this export") where none does — never a sum of the sentinel."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any, Tuple

import pytest
from synth import TraceBuilder

from nsys_llm_explainer.options import options_from_kwargs
from nsys_llm_explainer.pipeline import analyze_path
from nsys_llm_explainer.render import render_all
from nsys_llm_explainer.report import Report

US = 1_000
NULL_MARK = 7          # the byte count the test turns into NULL


def _trace(tmp_path: Path, *sql: str) -> Tuple[Report, str, Path]:
    """One process, a 1 ms kernel at [0, 1 ms); 4 pageable H2D copies of 10 µs from 100 µs, 20 µs apart (1,000,
    3,000, NULL, NULL bytes) and 2 D2H copies device → pinned of 20 µs at 200 / 240 µs (NULL bytes; written as
    :data:`NULL_MARK` B); then ``sql``."""
    b = TraceBuilder()
    b.gpu(0)
    b.process(100, "python3")
    b.thread(100, 1, "main")
    b.kernel(0, 1_000 * US, pid=100, name="gemm")
    for i, nb in enumerate((1_000, 3_000, NULL_MARK, NULL_MARK)):
        t = (100 + 20 * i) * US
        b.memcpy(t, t + 10 * US, pid=100, bytes=nb, copy_kind=1, src_kind=0, dst_kind=2)
    for t in (200 * US, 240 * US):
        b.memcpy(t, t + 20 * US, pid=100, bytes=NULL_MARK, copy_kind=2, src_kind=2, dst_kind=1)
    p = tmp_path / "t.sqlite"
    b.write(str(p), overwrite=True)
    con = sqlite3.connect(str(p))
    for q in sql:
        con.execute(q)
    con.commit()
    con.close()
    rep = analyze_path(str(p), options_from_kwargs())
    render_all(rep, tmp_path / "out")
    return rep, (tmp_path / "out" / "report.md").read_text(), tmp_path / "out"


def _negatives(o: Any, path: str = "") -> list:
    """Every negative number under a key naming bytes or a rate in a report.json object."""
    if isinstance(o, dict):
        return [x for k, v in o.items() for x in _negatives(v, f"{path}.{k}")]
    if isinstance(o, list):
        return [x for i, v in enumerate(o) for x in _negatives(v, f"{path}[{i}]")]
    if isinstance(o, (int, float)) and not isinstance(o, bool) and o < 0 and ("byte" in path or "gb_per_s" in path):
        return [(path, o)]
    return []


def test_some_copies_without_bytes_count_only_the_recorded_ones(tmp_path: Path) -> None:
    """4 of 6 copies record no bytes: copied 1,000 + 3,000 = 4,000 B (not 4,000 − 4); H2D: 4,000 B over the 20 µs of
    its 2 recorded copies = 0.2 GB/s; D2H: no copy records bytes → bytes and rate None ("–"). Pageable: the 4 H2D
    copies, 4,000 B. Copy paths: H2D 4,000 B, its rate unknown (its busy time holds copies of unknown size)."""
    t = "CUPTI_ACTIVITY_KIND_MEMCPY"      # the column is NOT NULL in the synth's schema: rebuilt nullable
    rep, md, out = _trace(tmp_path, f"ALTER TABLE {t} ADD COLUMN b2 INTEGER",
                          f"UPDATE {t} SET b2 = CASE WHEN bytes = {NULL_MARK} THEN NULL ELSE bytes END",
                          f"ALTER TABLE {t} DROP COLUMN bytes", f"ALTER TABLE {t} RENAME COLUMN b2 TO bytes")
    mc = rep.memcpy
    assert (mc.total_bytes, mc.bytes_unrecorded, mc.total_ns) == (4_000, 4, 80 * US)
    rows = {r.direction: r for r in mc.by_direction}
    h2d, d2h = rows["Host-to-Device"], rows["Device-to-Host"]
    assert (h2d.count, h2d.bytes, d2h.count, d2h.bytes, d2h.gb_per_s) == (4, 4_000, 2, None, None)
    assert h2d.gb_per_s == pytest.approx(0.2)
    mem = rep.memory
    assert (mem.copy_bytes, mem.pageable.count, mem.pageable.bytes) == (4_000, 4, 4_000)
    assert {d.direction: d.bytes for d in mem.by_direction} == {"Host-to-Device": 4_000, "Device-to-Host": None}
    paths = {p.path: p for p in rep.copy_engines.paths}
    assert (paths["H2D"].bytes, paths["H2D"].gb_per_s, paths["H2D"].pageable_bytes) == (4_000, None, 4_000)
    assert (paths["D2H"].bytes, paths["D2H"].gb_per_s) == (None, None)
    assert ("4.00 kB copied in 80.00 µs of copy time (whole capture); the bytes of 4 copies not recorded by this "
            "export.") in md
    assert "| memcpy | Device-to-Host | Device → Pinned | 2 | – | 0.040 | 20.00 | – |" in md
    assert not _negatives(json.loads((out / "report.json").read_text()))


def test_no_bytes_column_says_bytes_not_recorded(tmp_path: Path) -> None:
    """The same copies from an export without the ``bytes`` column: no total (None), 6 copies unrecorded, every
    byte cell "–"; the first line says so; the pageable bullet too; no negative number anywhere."""
    rep, md, out = _trace(tmp_path, "ALTER TABLE CUPTI_ACTIVITY_KIND_MEMCPY DROP COLUMN bytes")
    mc = rep.memcpy
    assert (mc.total_bytes, mc.bytes_unrecorded, mc.total_ns) == (None, 6, 80 * US)
    assert all(r.bytes is None and r.gb_per_s is None for r in mc.by_direction + mc.by_kind)
    assert (rep.memory.copy_bytes, rep.memory.pageable.bytes, rep.memory.host_copies.bytes) == (None, None, None)
    assert "Bytes not recorded by this export; 80.00 µs of copy time (whole capture)." in md
    assert "- Pageable host memory: 4 copies, bytes not recorded by this export, 40.00 µs" in md
    assert not _negatives(json.loads((out / "report.json").read_text()))
    assert " -" not in "".join(ln for ln in md.splitlines() if "B" in ln and "|" in ln)


def test_every_copy_recording_bytes_leaves_no_unrecorded_count(tmp_path: Path) -> None:
    """Negative control: every copy records its bytes (the NULL marks kept as 7 B): 1,000 + 3,000 + 4 × 7 = 4,028 B,
    no ``bytes_unrecorded`` (absent from report.json), the plain first line; D2H 14 B over 40 µs = 0.00035 GB/s."""
    rep, md, out = _trace(tmp_path)
    mc = rep.memcpy
    assert (mc.total_bytes, mc.bytes_unrecorded) == (4_028, None)
    d2h = {r.direction: r for r in mc.by_direction}["Device-to-Host"]
    assert d2h.bytes == 14 and d2h.gb_per_s == pytest.approx(14 / 40_000)
    assert "4.03 kB copied in 80.00 µs of copy time (whole capture)." in md
    assert "bytes_unrecorded" not in json.loads((out / "report.json").read_text())["memcpy"]
