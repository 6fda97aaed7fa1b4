"""Memsets have bytes but no rate (docs/METRICS.md, "Memcpy / memset" and "Copy paths"): an old capture (nsys 2019.6,
GTX 1650) records 8 MiB ``cuMemsetD32Async`` memsets of about 1.2 µs — 7 TB/s on a GPU of at most 192 GB/s — so
bytes / recorded duration is no rate the memory sustained; the bytes stay exact (``nsys stats``' sum)."""

from __future__ import annotations

from pathlib import Path

import pytest
from synth import TraceBuilder

from nsys_llm_explainer.options import options_from_kwargs
from nsys_llm_explainer.pipeline import analyze_path
from nsys_llm_explainer.render import render_all

US = 1_000
MIB8 = 8 * 1024 * 1024


@pytest.mark.parametrize("flavor", ["2021.5", "2026.2"])
def test_a_memset_group_shows_its_bytes_and_no_rate(tmp_path: Path, flavor: str) -> None:
    """A kernel at [0, 1 ms); 4 memsets of 8 MiB, 1.2 µs each, inside it; one pinned H2D copy of 1 MB in 100 µs."""
    b = TraceBuilder(flavor)
    b.gpu(0, name="NVIDIA GeForce GTX 1650", memory_bandwidth=128_000_000_000)
    b.process(100, "python3")
    b.thread(100, 1, "main")
    b.kernel(0, 1_000 * US, pid=100, name="gemm")
    for i in range(4):
        t = (100 + 10 * i) * US
        b.memset(t, t + 1_200, pid=100, bytes=MIB8, value=0xFFFFFFFF)
    b.memcpy(500 * US, 600 * US, pid=100, bytes=1_000_000, copy_kind=1, src_kind=1, dst_kind=2)
    p = tmp_path / "t.sqlite"
    b.write(str(p), overwrite=True)
    rep = analyze_path(str(p), options_from_kwargs())
    (ms,) = rep.memcpy.memset
    assert (ms.count, ms.bytes, ms.total_ns, ms.gb_per_s) == (4, 4 * MIB8, 4_800, None)
    (h2d,) = rep.memcpy.by_kind
    assert h2d.gb_per_s == pytest.approx(10.0)             # 1,000,000 B / 100,000 ns: copies keep their rate
    paths = {c.path: c for c in rep.copy_engines.paths}
    assert paths["memset"].bytes == 4 * MIB8 and paths["memset"].gb_per_s is None
    assert paths["H2D"].gb_per_s == pytest.approx(10.0)
    render_all(rep, tmp_path / "out")
    md = (tmp_path / "out" / "report.md").read_text()
    assert "| memset | – | Device | 4 | 33.55 MB | 0.005 | 1.20 | – |" in md
