"""Regenerate tests/data/nsys2022.4_nvtxkernsum/*.csv: NVIDIA's `nsys stats -r nvtxkernsum` (Nsight Systems
2022.4.2, Debian package `nsight-systems`) on every real trace in ../shared/traces, aggregated per
(range, style, pid) over kernel names and threads. Needs `nsys` on PATH.

    python scripts/make_nvtxkernsum_oracle.py
"""

from __future__ import annotations

import csv
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TRACES = ROOT.parent / "shared" / "traces"
OUT = ROOT / "tests" / "data" / "nsys2022.4_nvtxkernsum"


def main() -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    for t in sorted(TRACES.glob("*/trace.sqlite")):
        with tempfile.TemporaryDirectory() as td:
            base = Path(td) / "r"
            subprocess.run(["nsys", "stats", "--report", "nvtxkernsum", "--format", "csv", "--output", str(base),
                            str(t)], check=True, capture_output=True)
            f = Path(str(base) + "_nvtxkernsum.csv")
            agg = defaultdict(lambda: [0, 0])
            if f.exists() and f.stat().st_size:
                with open(f, newline="") as fh:
                    for r in csv.DictReader(fh):
                        if not r["NVTX Range"] or r["NVTX Range"] == "None" or r["PID"] == "None":
                            continue
                        a = agg[(r["NVTX Range"], r["Style"], int(r["PID"]))]
                        a[0] += int(r["Kern Inst"])
                        a[1] += int(r["Total Time (ns)"])
        with open(OUT / f"{t.parent.name}.csv", "w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["range", "style", "pid", "kern_inst", "total_ns"])
            for (name, style, pid), (n, tot) in sorted(agg.items()):
                w.writerow([name, style, pid, n, tot])
        print(t.parent.name, len(agg))
    return 0


if __name__ == "__main__":
    sys.exit(main())
