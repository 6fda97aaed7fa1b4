"""Write the demo's shipped traces, ``src/nsys_llm_explainer/demo_traces/NAME.sqlite.xz``, from the synthetic
generator in ``tests/synth`` (which is not part of the package).

    python scripts/build_demo_traces.py            # every scenario in SHIPPED
    python scripts/build_demo_traces.py demo ...   # only these

Run it after changing a shipped scenario or the generator: ``tests/cli/test_demo_traces.py`` fails while a shipped
copy's rows differ from what the generator writes. xz (LZMA2, preset 9e, 4 MiB dictionary): the six traces are
0.89 MB, gzip -9 would make them 1.20 MB."""

from __future__ import annotations

import lzma
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "src" / "nsys_llm_explainer" / "demo_traces"
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "src"))

from synth import build_scenario  # noqa: E402

#: the scenarios the package ships (``demo --scenario`` offers exactly the files present)
SHIPPED = ("demo", "healthy", "launch_bound", "per_token_sync", "launcher_waits_io", "h2d_pageable_step")
SUFFIX = ".sqlite.xz"
FILTERS = [{"id": lzma.FILTER_LZMA2, "preset": 9 | lzma.PRESET_EXTREME, "dict_size": 1 << 22}]


def build(name: str) -> Path:
    """Generate scenario ``name`` (seed 0) and write it compressed beside the package's other demo traces."""
    with tempfile.TemporaryDirectory() as td:
        trace = Path(td) / f"{name}.sqlite"
        build_scenario(name, str(trace))
        data = lzma.compress(trace.read_bytes(), format=lzma.FORMAT_XZ, filters=FILTERS)
    dest = OUT / f"{name}{SUFFIX}"
    tmp = dest.with_name(dest.name + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(dest)
    return dest


def main(argv: list) -> int:
    for name in argv or SHIPPED:
        dest = build(name)
        print(f"{dest.relative_to(ROOT)}: {dest.stat().st_size:,} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
