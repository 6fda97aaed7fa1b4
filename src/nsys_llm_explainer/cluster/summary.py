"""Per-file work of a cluster run: analyse one export and keep a compact, picklable :class:`FileSummary`.

A worker (local process or Dask) runs :func:`analyze_file`: the full single-file analysis
(:func:`pipeline.analyze_path`), optionally the file's own report written under ``ranks/<label>/``, and returns
only what the cluster view needs — never the model or its arrays:

* per device (steady window of that file): ``busy_ns``, ``busy_pct``, ``idle_ns``, idle ns by cause kind,
  kernel count, step count and step time p50 / p90 (:func:`stats.summary` of the steps on that device);
* the NCCL kernel instances per (pid, device, collective name), in issue (start) order: start, end, stream;
* the clock facts alignment needs (``TARGET_INFO_SESSION_START_TIME.utcEpochNs``, the export's
  time-normalize flag and time shift, the activity span).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, Optional, Tuple

import numpy as np

from ..analyses.common.stats import summary
from ..analyses.comms.nccl import NCCL_RE, collective_name
from ..jsonable import FieldsJson, json_ready
from ..options import Options
from ..vocabulary.cause_kinds import KINDS

if TYPE_CHECKING:
    from ..model.trace import TraceModel
    from ..report import Report


#: the one plotly.js of a cluster run's rank pages, at the top of the output beside cluster.html (no rank label can
#: take its name there; ``ranks/<label>/report.html`` loads ``../../plotly.min.js``): 200 ranks write one 4.6 MB
#: copy, not 200
RANK_PLOTLY = "plotly.min.js"


@dataclass(frozen=True)
class DeviceSummary:
    device_id: int
    window_ns: int
    busy_ns: int
    busy_pct: float
    idle_ns: int
    idle_by_kind: Tuple[Tuple[str, int], ...]   # (kind, ns), precedence order, kinds with ns > 0
    kernel_count: int
    step_count: int
    step_p50_ns: Optional[int]
    step_p90_ns: Optional[int]
    role: str = "kernels"     # report.json devices[].role: "kernels" | "copies only" | "idle"

    def to_dict(self) -> Dict[str, Any]:
        return json_ready({
            "device_id": self.device_id, "role": self.role, "window_ns": self.window_ns, "busy_ns": self.busy_ns,
            "busy_pct": self.busy_pct, "idle_ns": self.idle_ns, "idle_by_kind": dict(self.idle_by_kind),
            "kernel_count": self.kernel_count, "step_count": self.step_count, "step_p50_ns": self.step_p50_ns,
            "step_p90_ns": self.step_p90_ns})


@dataclass(frozen=True)
class NcclSeries:
    """NCCL kernels of one collective name on one (pid, device), in issue (start) order; export timeline."""

    pid: int
    device_id: int
    name: str
    start: Tuple[int, ...]
    end: Tuple[int, ...]
    stream: Tuple[int, ...]


@dataclass(frozen=True)
class ClockInfo(FieldsJson):
    utc_epoch_ns: Optional[int]     # TARGET_INFO_SESSION_START_TIME.utcEpochNs
    normalized: bool                # EXPORT_PARAM_TIME_NORMALIZE == true: timestamps already UTC epoch ns
    shift_ns: int                   # EXPORT_CONFIG_TIME_SHIFT / EXPORT_PARAM_TIME_SHIFT
    start_ns: Optional[int]         # first / last activity timestamp, export timeline
    end_ns: Optional[int]


@dataclass(frozen=True)
class FileSummary:
    label: str
    path: str
    nsys_version: Optional[str]
    window_start_ns: int
    window_end_ns: int
    window_method: str
    clock: ClockInfo
    devices: Tuple[DeviceSummary, ...]
    nccl: Tuple[NcclSeries, ...]
    headline: str
    warnings: Tuple[str, ...]


def _int_meta(meta: Dict[str, Any], *keys: str) -> int:
    for k in keys:
        v = meta.get(k)
        if v:
            try:
                return int(str(v[0]).strip() or 0)
            except ValueError:
                continue
    return 0


def _clock(model: TraceModel) -> ClockInfo:
    meta = model.info.meta
    raw: Any = model.info.session.get("utcEpochNs")
    try:
        utc = int(raw) if raw is not None and int(raw) > 0 else None
    except (TypeError, ValueError):
        utc = None
    norm = (meta.get("EXPORT_PARAM_TIME_NORMALIZE") or ["false"])[0].strip().lower() in ("true", "1", "yes")
    shift = _int_meta(meta, "EXPORT_CONFIG_TIME_SHIFT", "EXPORT_PARAM_TIME_SHIFT")
    return ClockInfo(utc, norm, shift, model.trace_start, model.trace_end)


def _nccl(model: TraceModel) -> Tuple[NcclSeries, ...]:
    k = model.kernels
    if k is None or len(k) == 0:
        return ()
    is_nccl = np.array([bool(NCCL_RE.search(n)) for n in k.names] + [False], bool)[k.name_idx]
    rows = np.nonzero(is_nccl)[0]
    if rows.shape[0] == 0:
        return ()
    # collective name per distinct kernel name (Python work per name, never per row), then numpy grouping
    uniq = np.unique(k.name_idx[rows])
    cnames = sorted({collective_name(k.names[j]) for j in uniq.tolist()})
    code_of = {c: i for i, c in enumerate(cnames)}
    lut = np.full(len(k.names) + 1, -1, np.int64)
    lut[uniq] = [code_of[collective_name(k.names[j])] for j in uniq.tolist()]
    pid, dev, cc = k.pid[rows].astype(np.int64), k.device[rows].astype(np.int64), lut[k.name_idx[rows]]
    order = np.lexsort((k.end[rows], k.start[rows], cc, dev, pid))   # groups by (pid, device, name); issue order
    ix, pid, dev, cc = rows[order], pid[order], dev[order], cc[order]
    cut = np.nonzero((np.diff(pid) != 0) | (np.diff(dev) != 0) | (np.diff(cc) != 0))[0] + 1
    out = []
    for seg in np.split(np.arange(ix.shape[0]), cut):
        g = ix[seg]
        out.append(NcclSeries(int(pid[seg[0]]), int(dev[seg[0]]), cnames[int(cc[seg[0]])],
                              tuple(k.start[g].tolist()), tuple(k.end[g].tolist()), tuple(k.stream[g].tolist())))
    out.sort(key=lambda x: (x.pid, x.device_id, x.name))
    return tuple(out)


def _devices(report: Report) -> Tuple[DeviceSummary, ...]:
    causes = {c.device_id: c.causes for c in report.idle_causes.devices}
    order = list(KINDS)
    st = report.steps
    arr = st.arrays if st.available else None
    out = []
    for dev in report.gpu_time.devices:
        did = dev.device_id
        by_kind: Dict[str, int] = {}
        for c in causes.get(did, ()):
            by_kind[c.kind] = by_kind.get(c.kind, 0) + c.ns
        kinds = sorted(by_kind, key=lambda x: (order.index(x) if x in order else len(order), x))
        n, p50, p90 = 0, None, None
        if arr is not None and len(arr):
            wall = arr.wall[arr.device == did]
            n = int(wall.shape[0])
            if n:
                s = summary(wall)
                p50, p90 = s.p50_ns, s.p90_ns
        out.append(DeviceSummary(did, dev.window_ns, dev.busy_ns, dev.busy_pct, dev.idle_ns,
                                 tuple((x, by_kind[x]) for x in kinds if by_kind[x] > 0), dev.kernel_count, n, p50,
                                 p90, dev.role))
    return tuple(out)


def summarize(report: Report, label: str) -> FileSummary:
    """The compact summary of a :class:`report.Report`."""
    w = report.window
    return FileSummary(
        label=label, path=str(report.trace.path), nsys_version=report.trace.nsys_version,
        window_start_ns=int(w.start_ns), window_end_ns=int(w.end_ns), window_method=str(w.method),
        clock=_clock(report.trace_model("a cluster summary")), devices=_devices(report),
        nccl=_nccl(report.trace_model("a cluster summary")),
        headline=str(report.headline.verdict), warnings=tuple(report.warnings))


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

        out = Path(rank_dir)
        out.mkdir(parents=True, exist_ok=True)
        render_all(report, out, plotly_src="../../" + RANK_PLOTLY)
        from ..render.perfetto import FILE_NAME, write_perfetto

        write_perfetto(report, out / FILE_NAME, rank=(rank_index, label))
    return summarize(report, label)
