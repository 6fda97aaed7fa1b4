"""Write a cluster result (``cluster.md``, ``cluster.json``, ``cluster.html``, ``tables/*.csv``, the rank pages' one
plotly.js, ``timeline.pftrace``) into the staging directory where the workers wrote ``ranks/<label>/`` (outputs:
docs/CLUSTER.md; atomic and owned: docs/SECURITY.md §2)."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

from ..render.base import dumps_indented, write_text_files
from ..render.cluster import render_cluster_html, render_cluster_markdown, report_href
from ..render.cluster.tables import CLUSTER_TABLES
from ..render.csv_tables import write_tables
from ..render.html.page import plotly_js
from ..render.perfetto import FILE_NAME
from ..render.perfetto_packets import concat_ranks
from .result import ClusterResult
from .summary import RANK_PLOTLY


def write_cluster_files(d: ClusterResult, out_dir: Path, js: Optional[str] = None) -> List[Path]:
    """Every cluster output of a cluster result into ``out_dir`` (the staging directory of :mod:`output`,
    where the workers already wrote ``ranks/``); ``js`` replaces the plotly.js bundle of cluster.html."""
    out_dir.mkdir(parents=True, exist_ok=True)
    ranks = [f.label for f in d.files   # the files whose own ranks/<label>/report.html cluster.html links
             if report_href(f.label) and (out_dir / "ranks" / f.label / "report.html").is_file()]
    files = write_text_files(out_dir, {"cluster.json": dumps_indented(d.to_dict()) + "\n",
                                       "cluster.md": render_cluster_markdown(d),
                                       "cluster.html": render_cluster_html(d, js, ranks)})
    if (out_dir / "ranks").is_dir():        # the rank pages' one shared plotly.js (cluster.summary.RANK_PLOTLY)
        files += write_text_files(out_dir, {RANK_PLOTLY: plotly_js() if js is None else js})
    # timeline.pftrace: every rank's timeline file (ranks/<label>/) on the aligned clock (each rank on its own clock
    # when they cannot be aligned: the ranks' files still sit side by side)
    offs = d.alignment.offsets_ns if d.alignment.aligned else [0] * len(d.files)
    parts = [(out_dir / "ranks" / f.label / FILE_NAME, int(o or 0)) for f, o in zip(d.files, offs)]
    parts = [(p, o - min(o2 for _, o2 in parts)) for p, o in parts if p.exists()]   # timestamps stay ≥ 0
    if parts:
        with open(out_dir / FILE_NAME, "wb") as f:
            concat_ranks(parts, f)
        files.append(out_dir / FILE_NAME)
    return files + write_tables(CLUSTER_TABLES, d, out_dir)
