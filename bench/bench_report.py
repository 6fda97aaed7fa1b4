"""Benchmark: full report on a ≥ 5 M-kernel synthetic trace.

Prints wall time and peak RSS of `nsys-llm-explain TRACE --out DIR` (run as a child process), the time
of one `GROUP BY` pass over the kernel table (the floor any SQL-based tool pays), and the per-step
timings the tool records. Not a test: run it by hand, record the numbers in docs/PERFORMANCE.md.

    python bench/bench_report.py [--kernels 5000000] [--trace PATH] [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kernels", type=int, default=5_000_000)
    ap.add_argument("--trace", default=str(HERE / "_data" / "big5m.sqlite"))
    ap.add_argument("--keep", action="store_true", help="keep the generated trace for the next run")
    a = ap.parse_args()
    trace = Path(a.trace)
    if not trace.exists():
        from make_big_trace import make_big_trace

        trace.parent.mkdir(parents=True, exist_ok=True)
        t = time.perf_counter()
        make_big_trace(str(trace), n_kernels=a.kernels)
        print(f"generated {trace} ({a.kernels} kernels) in {time.perf_counter() - t:.1f} s")
    size_mb = trace.stat().st_size / 1e6
    conn = sqlite3.connect(f"file:{trace}?mode=ro&immutable=1", uri=True)
    n = conn.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    t = time.perf_counter()
    groups = len(conn.execute("SELECT demangledName, count(*), sum(end - start) FROM CUPTI_ACTIVITY_KIND_KERNEL "
                              "GROUP BY 1").fetchall())
    floor = time.perf_counter() - t
    conn.close()
    with tempfile.TemporaryDirectory() as td:
        out = Path(td) / "report"
        t = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "nsys_llm_explainer", str(trace), "--out", str(out), "--quiet"],
                              capture_output=True)
        wall = time.perf_counter() - t
        rss_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        if proc.returncode != 0:
            print(proc.stderr.decode(errors="replace"))
            return 1
        rep = json.loads((out / "report.json").read_text())
    print(f"trace: {trace} ({size_mb:.0f} MB, {n:,} kernels, {groups} kernel names)")
    print(f"GROUP BY floor (one pass over the kernel table): {floor:.2f} s")
    print(f"full report wall time: {wall:.2f} s = {wall / floor:.1f} x the floor (target: <= 4 x, <= 10 s)")
    print(f"peak RSS: {rss_mb:.0f} MB (target: <= 1500 MB)")
    print(f"reader: {os.environ.get('NSYS_LLM_EXPLAINER_READER', 'auto')} (set NSYS_LLM_EXPLAINER_READER=sqlite3|adbc)")
    print(f"cpu count: {os.cpu_count()}")
    print("step timings (s):", json.dumps(rep.get("timings_s", {})))
    if not a.keep and trace.parent == HERE / "_data" and "--trace" not in sys.argv:
        pass  # generated data is kept in bench/_data (git-ignored) so re-runs are fast
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
