"""The typed cluster result: per-file facts, clock alignment, per-device rows, matched collectives, claims.

``ClusterResult.to_dict()`` is ``cluster.json`` (``schema_version`` :data:`SCHEMA_VERSION`). Built from the
per-file :class:`summary.FileSummary` objects only, so it is the same whichever executor produced them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Sequence, Tuple

from .. import __version__
from ..analyses.comms.nccl import MAX_END_SPREAD_SHARE
from ..jsonable import json_ready
from .align import Alignment, align
from .claims import RankClaim, make_claims
from .collectives import CollectivesResult, match_collectives
from .summary import FileSummary

SCHEMA_VERSION = "1.0"
Row = Dict[str, Any]


@dataclass(frozen=True)
class ClusterResult:
    tool_version: str
    files: Tuple[Row, ...]
    alignment: Alignment
    devices: Tuple[Row, ...]
    collectives: CollectivesResult
    claims: Tuple[RankClaim, ...]
    warnings: Tuple[str, ...]

    def to_dict(self) -> Dict[str, Any]:
        return json_ready({
            "schema_version": SCHEMA_VERSION, "tool_version": self.tool_version, "files": self.files,
            "alignment": self.alignment, "devices": self.devices, "collectives": self.collectives,
            "claims": self.claims, "warnings": self.warnings})


def _device_rows(files: Sequence[FileSummary]) -> List[Row]:
    rows = []
    for f in files:
        for d in f.devices:
            rows.append({"rank": f.label if len(f.devices) == 1 else f"{f.label}/GPU {d.device_id}",
                         "file": f.label, **d.to_dict()})
    return rows


def _file_rows(files: Sequence[FileSummary], al: Alignment) -> List[Row]:
    return [{"label": f.label, "path": f.path, "nsys_version": f.nsys_version, "window_method": f.window_method,
             "window_start_ns": f.window_start_ns, "window_end_ns": f.window_end_ns, "clock": f.clock.to_dict(),
             "offset_ns": al.offsets_ns[i], "devices": len(f.devices),
             "nccl_kernels": sum(len(s.start) for s in f.nccl), "headline": f.headline} for i, f in enumerate(files)]


def build_result(files: Sequence[FileSummary]) -> ClusterResult:
    al = align(files)
    coll: CollectivesResult = match_collectives(files, al)
    devices = _device_rows(files)
    warnings = []
    if not al.aligned:
        warnings.append(f"Clocks of the files cannot be aligned ({al.reason}); no cross-rank timing claim is made.")
    if len(files) < 2:
        warnings.append("Only one file: nothing to compare across files.")
    if coll.split_names:
        ex = coll.split_names[0]
        warnings.append(
            f"{len(coll.split_names)} (rank, collective) pair(s) run on several CUDA streams (e.g. {ex['name']} on "
            f"{ex['rank']}: streams {', '.join(map(str, ex['streams']))}): the collective name is shared by several "
            "communicators (each runs on its own stream), which the export does not name, so matching by name and "
            "issue order mixes them; no late-arriver claim is made.")
    if coll.timed and coll.end_spread_p50_ns > int(coll.skew_p50_ns * MAX_END_SPREAD_SHARE):
        warnings.append(
            f"Matched NCCL kernels do not end together (median end spread {coll.end_spread_p50_ns:,} ns vs median "
            f"start skew {coll.skew_p50_ns:,} ns): matching by collective name and issue order may pair kernels of "
            "different collectives (e.g. of different communicators, which the export does not name), or the clocks "
            "disagree; no late-arriver claim is made.")
    claims = make_claims(coll, devices, al.aligned)
    return ClusterResult(__version__, tuple(_file_rows(files, al)), al, tuple(devices), coll, tuple(claims),
                         tuple(warnings))
