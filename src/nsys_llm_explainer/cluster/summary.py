"""Per-file work of a cluster run: analyse one export (and write its own report) and keep a compact, picklable
:class:`FileSummary` of what the cluster view needs, never the model (docs/CLUSTER.md, "How the work is split")."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..analyses.common.stats import summary
from ..analyses.comms.series import NcclSeries
from ..analyses.trace.session import ClockInfo
from ..errors import InputError
from ..jsonable import NOT_IN_JSON, FieldsJson
from ..options import Options
from ..vocabulary.cause_kinds import KINDS
from ..vocabulary.windows import window_name

if TYPE_CHECKING:
    from ..report import Report


#: the one plotly.js of a cluster run's rank pages, at the top of the output beside cluster.html (no rank label can
#: take its name there; ``ranks/<label>/report.html`` loads ``../../plotly.min.js``): 200 ranks write one 4.6 MB
#: copy, not 200
RANK_PLOTLY = "plotly.min.js"


@dataclass(frozen=True)
class DeviceRow(FieldsJson):
    """``devices[]`` of cluster.json: one device of one file over that file's analysis window."""

    rank: str                         # the file's name, or ``name/GPU n`` when it has several devices (device_rank)
    file: str                         # the file label
    device_id: int
    role: str                         # "kernels" | "few kernels" | "copies only" | "idle" (report.json devices[].role)
    window_ns: int
    busy_ns: int
    busy_pct: float
    idle_ns: int
    idle_by_kind: Dict[str, int]      # cause kind → idle ns; precedence order, kinds with ns > 0
    kernel_count: int
    step_count: int
    step_p50_ns: Optional[int]
    step_p90_ns: Optional[int]
    #: p50 of the file's NVTX step periods (start to the next step's start, same process; report.json
    #: ``steps.period``), None without NVTX steps: ranks in lockstep share it whatever their step ranges' lengths
    step_period_p50_ns: Optional[int] = field(default=None, metadata=NOT_IN_JSON)
    #: its recorded time over the file's whole capture (report.json ``devices[].full.window_ns``): the scope of the
    #: waiting the collectives matched over the captures caused it (claims, the late-arriver's ``wait_pct_of_window``)
    capture_ns: int = 0


@dataclass(frozen=True)
class FileSummary(FieldsJson):
    """``files[]`` of cluster.json: one input file — its analysis window, clock facts and offset on the cluster clock —
    as the worker that analysed it summarises it, with its devices' rows and NCCL kernels (not in ``files[]``:
    :func:`result.build_result` moves the rows to ``devices[]`` and sets the offset)."""

    label: str
    path: str
    nsys_version: Optional[str]
    window_method: str
    #: the window in words (vocabulary.windows.window_name): "the steady window" only when the window rule judged it
    window_name: str
    window_start_ns: int
    window_end_ns: int
    clock: ClockInfo
    offset_ns: Optional[int]          # aligned timestamp = export timestamp + offset_ns (None: not aligned)
    devices: int                      # devices in the file's own report
    nccl_kernels: int
    headline: str                     # the verdict of the file's own report
    device_rows: Tuple[DeviceRow, ...] = field(default=(), metadata=NOT_IN_JSON)
    nccl: Tuple[NcclSeries, ...] = field(default=(), metadata=NOT_IN_JSON)


def says_host(label: str, host: Optional[str]) -> bool:
    """Whether a file label already names its host (unknown: None): the host's first name (to its first ".") is a
    word of it, any case ("nodeA-gpu0" on nodeA; "node10" is not on node1)."""
    short = (host or "").split(".")[0]
    return not short or re.search(rf"(?<![a-z0-9]){re.escape(short)}(?![a-z0-9])", label, re.I) is not None


def file_names(files: Sequence[FileSummary]) -> List[str]:
    """Each file's name in its ranks' names (docs/CLUSTER.md, "Per-rank view and claims"): its label, as "host:label"
    when the files come from several hosts and the label does not name its own."""
    several = len({f.clock.host for f in files} - {None}) > 1
    return [f"{f.clock.host}:{f.label}" if several and not says_host(f.label, f.clock.host) else f.label
            for f in files]


def device_rank(name: str, devices: int, device: int) -> str:
    """A device's rank name: the file's name (:func:`file_names`) when the file has one device, else name/GPU n."""
    return name if devices == 1 else f"{name}/GPU {device}"


def _devices(report: Report, label: str) -> Tuple[DeviceRow, ...]:
    causes = {c.device_id: c for c in report.idle_causes.devices}
    st = report.steps
    arr = st.arrays if st.available else None
    walls: Dict[int, np.ndarray] = {}     # device → its steps' wall times: one sort, not a mask per device
    if arr is not None and len(arr):
        o = np.argsort(arr.device, kind="stable")
        for seg in np.split(o, np.flatnonzero(arr.device[o][1:] != arr.device[o][:-1]) + 1):
            walls[int(arr.device[seg[0]])] = arr.wall[seg]
    period = st.period.p50_ns if st.available and st.period is not None else None
    out = []
    for dev in report.gpu_time.devices:
        did = dev.device_id
        dc = causes.get(did)
        wall = walls.get(did)
        s = summary(wall) if wall is not None else None
        rank = device_rank(label, len(report.gpu_time.devices), did)
        out.append(DeviceRow(rank, label, did, dev.role, dev.window_ns, dev.busy_ns, dev.busy_pct, dev.idle_ns,
                             {k: ns for k in KINDS if dc is not None and (ns := dc.ns_of(k)) > 0}, dev.kernel_count,
                             len(wall) if wall is not None else 0, s.p50_ns if s else None, s.p90_ns if s else None,
                             period if s else None, dev.full.window_ns if dev.full is not None else 0))
    return tuple(out)


def summarize(report: Report, label: str) -> FileSummary:
    """The compact summary of a :class:`report.Report` made from a trace (its ``clock`` and ``nccl_series``, which a
    report loaded from report.json lacks: :class:`errors.InputError`)."""
    w = report.window
    if report.clock is None or report.nccl_series is None:
        raise InputError("a cluster summary needs the trace itself, and this report was loaded from report.json "
                         "(Report.from_dict), which does not carry it: analyze the trace again")
    rows, nccl = _devices(report, label), report.nccl_series
    return FileSummary(
        label=label, path=str(report.trace.path), nsys_version=report.trace.nsys_version,
        window_method=str(w.method),
        window_name=window_name(str(w.method), w.details.bins is not None, report.window_repeats),
        window_start_ns=int(w.start_ns), window_end_ns=int(w.end_ns),
        clock=report.clock, offset_ns=None, devices=len(rows),
        nccl_kernels=sum(len(x.start) for x in nccl if not x.custom),
        headline=str(report.headline.verdict), device_rows=rows, nccl=nccl)


def analyze_file(path: str, label: str, options: Optional[Options] = None,
                 rank_dir: Optional[str] = None, rank_index: int = 0) -> FileSummary:
    """Worker entry point: analyse ``path``; with ``rank_dir``, also write its single-file report there (its
    report.html loads the plotly.js the cluster writer puts once beside the rank folders: :data:`RANK_PLOTLY`) and
    its timeline file as rank ``rank_index`` of the cluster (its own process; the cluster's timeline.pftrace
    concatenates them on the aligned clock: :func:`render.perfetto.concat_ranks`)."""
    from ..pipeline import analyze_any

    report = analyze_any(path, options)
    if rank_dir is not None:
        from ..render import render_all
        from ..render.perfetto import FILE_NAME, write_perfetto

        render_all(report, Path(rank_dir), plotly_src="../../" + RANK_PLOTLY)   # makes the directory
        one = len(report.gpu_time.devices) == 1 and sum(p.kernels > 0 for p in report.trace.processes) <= 1
        host = report.clock.host if report.clock is not None else None
        root = f"{'rank' if one else 'file'} {label}" + ("" if says_host(label, host) else f" (host {host})")
        write_perfetto(report, Path(rank_dir) / FILE_NAME, rank=(rank_index, root))
    return summarize(report, label)
