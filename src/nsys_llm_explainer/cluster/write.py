"""Write a cluster result: ``cluster.md``, ``cluster.json``, ``cluster.html`` (one document: :mod:`render.cluster`),
``tables/*.csv``; each file's own report under ``ranks/<label>/`` is written by the workers into the same
staging directory (:func:`run.run_files`).

Atomic and owned like the main command (:mod:`output`: a manifest of the files written, a staging directory
made visible in one step); ``--out`` may be new, empty or hold a previous cluster report, anything else needs
``force``. Text cells follow :mod:`render.escape`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, List, Mapping, Optional, Sequence

from ..output import OutDir, check_out_dir
from ..render.cluster import render_cluster_html, render_cluster_markdown, report_href
from ..render.csv_tables import write_csv
from ..vocabulary.cause_kinds import KINDS

IDLE_KINDS = KINDS   # the idle-cause precedence of docs/MODEL.md


def check_cluster_out(out: Path, force: bool, inputs: Sequence[str] = ()) -> OutDir:
    """Refuse an unusable ``--out`` (or one holding an input) before any trace is analyzed."""
    return check_out_dir(out, force, "cluster", [Path(p) for p in inputs])


def rank_pages(d: Mapping[str, Any], out_dir: Path) -> List[str]:
    """Labels of the files whose own ``ranks/<label>/report.html`` is in ``out_dir`` (cluster.html links them)."""
    return [f["label"] for f in d["files"] if report_href(f["label"])
            and (out_dir / "ranks" / f["label"] / "report.html").is_file()]


def write_cluster_files(d: Mapping[str, Any], out_dir: Path, js: Optional[str] = None) -> List[Path]:
    """Every cluster output of a cluster.json dict into ``out_dir`` (the staging directory of :mod:`output`,
    where the workers already wrote ``ranks/``); ``js`` replaces the plotly.js bundle of cluster.html."""
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "cluster.json").write_text(json.dumps(d, indent=2, allow_nan=False) + "\n", encoding="utf-8")
    (out_dir / "cluster.md").write_text(render_cluster_markdown(d), encoding="utf-8")
    (out_dir / "cluster.html").write_text(render_cluster_html(d, js, rank_pages(d, out_dir)), encoding="utf-8")
    t = out_dir / "tables"
    files = [out_dir / "cluster.json", out_dir / "cluster.md", out_dir / "cluster.html"]
    files.append(write_csv(t / "ranks.csv", ["rank", "file", "device_id", "window_ns", "busy_ns", "busy_pct",
                                             "idle_ns", "kernel_count", "step_count", "step_p50_ns", "step_p90_ns"]
                           + [f"idle_{k}_ns" for k in IDLE_KINDS],
                           [[r["rank"], r["file"], r["device_id"], r["window_ns"], r["busy_ns"], r["busy_pct"],
                             r["idle_ns"], r["kernel_count"], r["step_count"], r["step_p50_ns"], r["step_p90_ns"]]
                            + [r["idle_by_kind"].get(k, 0) for k in IDLE_KINDS] for r in d["devices"]]))
    rk = ["rank", "file", "pid", "device_id", "nccl_count", "nccl_total_ns", "matched", "wait_ns_total",
          "wait_mean_ns", "wait_p50_ns", "last_arrival_count", "last_arrival_share"]
    coll = d["collectives"]
    files.append(write_csv(t / "nccl_ranks.csv", rk, [[r.get(k) for k in rk] for r in coll["ranks"]]))
    bk = ["name", "ranks", "kernels", "matched", "unmatched_kernels", "skew_total_ns", "skew_p50_ns", "skew_max_ns",
          "end_spread_p50_ns", "most_late_rank", "most_late_share"]
    files.append(write_csv(t / "nccl_collectives.csv", bk, [[r.get(k) for k in bk] for r in coll["by_name"]]))
    ik = ["name", "seq", "late_rank", "first_start_ns", "last_start_ns", "skew_ns", "end_spread_ns"]
    files.append(write_csv(t / "nccl_instances.csv", ik, [[r.get(k) for k in ik] for r in coll["instances"]]))
    ck = ["id", "rank", "severity", "title", "time_at_stake_ns", "evidence"]
    files.append(write_csv(t / "claims.csv", ck, [[c["id"], c["rank"], c["severity"], c["title"],
                                                   c["time_at_stake_ns"], " ".join(c["evidence"])]
                                                  for c in d["claims"]]))
    fk = ["label", "path", "nsys_version", "window_method", "window_start_ns", "window_end_ns", "offset_ns"]
    files.append(write_csv(t / "files.csv", fk + ["utc_epoch_ns", "normalized", "shift_ns"],
                           [[f[k] for k in fk] + [f["clock"]["utc_epoch_ns"], f["clock"]["normalized"],
                                                   f["clock"]["shift_ns"]] for f in d["files"]]))
    return files
