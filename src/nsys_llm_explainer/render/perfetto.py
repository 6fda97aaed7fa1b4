"""``timeline.pftrace``: the report's reading as a Perfetto trace, laid out from ``Report.timeline_file`` (with the
window, steps and trace info) as tracks. What the file holds: docs/MODEL.md, "Timeline file"; its tracks:
docs/DESIGN.md, "The timeline file's tracks"."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import numpy as np

from ..vocabulary.cause_kinds import KINDS
from ..vocabulary.labels import label_shows_tid
from ..vocabulary.windows import window_name
from .perfetto_packets import Encoder, lanes

#: a :class:`report.Report` (render never imports the report: it reads the typed fields it is given)
Report = Any

FILE_NAME = "timeline.pftrace"


def launch_args(cfg: Any) -> List[List[Tuple[str, object]]]:
    """Each kernel's launch configuration (a :class:`model.launch_config.LaunchConfig` of at least one kernel) as
    arguments (the rules: docs/MODEL.md, "Timeline file"); each distinct configuration formatted once."""
    key = np.concatenate((cfg.grid, cfg.block, cfg.registers[:, None], cfg.static_smem[:, None],
                          cfg.dynamic_smem[:, None]), axis=1)
    u, inv = np.unique(key, axis=0, return_inverse=True)
    forms: List[List[Tuple[str, object]]] = []
    for gx, gy, gz, bx, by, bz, reg, st, dyn in u.tolist():
        a: List[Tuple[str, object]] = []
        if min(gx, gy, gz) >= 0:
            a.append(("grid", f"{gx},{gy},{gz}"))
        if min(bx, by, bz) >= 0:
            a.append(("block", f"{bx},{by},{bz}"))
        if reg >= 0:
            a.append(("registers_per_thread", reg))
        if st > 0:
            a.append(("static_shared_memory", st))
        if dyn > 0:
            a.append(("dynamic_shared_memory", dyn))
        forms.append(a)
    return [forms[j] for j in inv.reshape(-1).tolist()]


def _memo(cache: Dict[Any, int], key: Any, make: Callable[[], int]) -> int:
    """``cache[key]``, made by ``make()`` the first time."""
    u = cache.get(key)
    if u is None:
        u = cache[key] = make()
    return u


class _Layout:
    """Writes one report's tracks and events (docs/DESIGN.md, "The timeline file's tracks")."""

    def __init__(self, enc: Encoder, report: Report, rank: Optional[Tuple[int, str]]) -> None:
        self.enc, self.r = enc, report
        tf = report.timeline_file
        if tf.rows is None:
            raise ValueError("the report holds no timeline rows (timeline_events 0)")
        self.rows = tf.rows
        self.span = tf.span
        self.flow_base = (rank[0] + 1) << 40 if rank is not None else 1 << 40
        self.root = enc.process(rank[0] + 1, rank[1]) if rank is not None else None
        self.rank = rank
        self.proc_names = {p.pid: p.name for p in report.trace.processes}
        self.tracks: Dict[Tuple[Any, ...], int] = {}   # ("gpu" | "pid" | "tid", id[, track name]) → uuid
        self.analysis = enc.track("analysis", self.root)

    # ---------------------------------------------------------------- tracks (each declared when first used)
    def gpu(self, dev: int) -> int:
        def make() -> int:
            names = self.r.facts.gpu_names_by_device()
            return self.enc.track(f"GPU {dev}" + (f" ({names[dev]})" if names.get(dev) else ""), self.root)
        return _memo(self.tracks, ("gpu", dev), make)

    def gpu_track(self, dev: int, name: str, unit: Optional[str] = None) -> int:
        return _memo(self.tracks, ("gpu", dev, name), lambda: self.enc.track(name, self.gpu(dev), unit))

    def process(self, pid: int) -> int:
        name = self.proc_names.get(pid) or "process"
        return _memo(self.tracks, ("pid", pid), lambda: self.enc.process(pid, name) if self.rank is None
                     else self.enc.track(f"{name} (pid {pid})", self.root))

    def thread(self, gtid: int) -> int:
        def make() -> int:
            pid, tid = (gtid >> 24) & 0xFFFFFF, gtid & 0xFFFFFF
            label = self.rows.thread_labels.get(gtid, "") or f"tid {tid}"
            if self.rank is None:
                self.process(pid)
                return self.enc.thread(pid, tid, label)
            shown = label_shows_tid(label, tid) or label == f"tid {tid}"   # the track's name names its own tid
            return self.enc.track(label if shown else f"{label} (tid {tid})", self.process(pid))
        return _memo(self.tracks, ("tid", gtid), make)

    def thread_track(self, gtid: int, name: str) -> int:
        return _memo(self.tracks, ("tid", gtid, name), lambda: self.enc.track(name, self.thread(gtid)))

    # ---------------------------------------------------------------- content
    def write(self) -> None:
        self._reading()
        self._kernels()
        self._copies()
        self._graphs()
        self._idle()
        self._api()
        self._host(self.rows.nvtx, "NVTX", True)
        self._host(self.rows.osrt, "OS runtime", False)
        self._samples()
        self._counters()

    def _reading(self) -> None:
        w, sp, enc = self.r.window, self.span, self.enc
        name = window_name(w.method, w.details.bins is not None, self.r.window_repeats)[4:]
        before = [m for m in self.rows.markers if not m.cause and m.end_ns <= int(w.start_ns)]
        for m in before:   # a warm-up marker ends where the window begins: written first, the track stays a stack
            self._marker(m)
        enc.slice(int(w.start_ns), int(w.end_ns), self.analysis, name,
                  (("method", str(w.method)), ("reason", str(w.reason))))
        enc.instant(int(sp.start_ns), self.analysis, "timeline file: " + (sp.left_out or "the whole capture"),
                    (("kept", sp.kept), ("start_ns", int(sp.start_ns)), ("end_ns", int(sp.end_ns)),
                     ("rows_kept", int(sp.kept_rows)), ("rows_in_capture", int(sp.capture_rows)),
                     ("limit_rows", int(sp.limit_rows)),
                     ("idle_tracks_left_out", ",".join(map(str, self.r.timeline_file.idle_left_out)))))
        st = self.r.steps.arrays if self.r.steps.available else None
        if st is not None:
            for i in self.rows.steps.tolist():
                dev = int(st.device[i])
                track = (self.gpu_track(dev, "steps") if dev >= 0
                         else _memo(self.tracks, ("steps",), lambda: self.enc.track("steps", self.root)))
                enc.slice(int(st.start[i]), int(st.end[i]), track, f"step {i + 1}",
                          (("phase", st.phase_label(i)), ("pid", int(st.pid[i])), ("kernels", int(st.kernel_count[i]))))
        after = [m for m in self.rows.markers if not m.cause and m.start_ns >= int(w.end_ns) and m not in before]
        for m in self.rows.markers:
            if m not in before and m not in after:
                self._marker(m)
        for m in after:    # a tail marker begins where the window (and the markers over it) end: written last
            self._marker(m)

    def _marker(self, m: Any) -> None:
        """A finding's marker (:class:`analyses.timeline.content.Marker`): on its device's ``findings`` track when it
        marks a gap, else on ``analysis``."""
        track = self.gpu_track(m.device_id, "findings") if m.cause and m.device_id >= 0 else self.analysis
        args: List[Tuple[str, object]] = [("finding", m.finding_id), ("severity", m.severity),
                                          ("time_at_stake_ns", m.time_at_stake_ns)]
        if m.cause:
            args += [("cause", m.cause), ("gap_ns_charged", m.gap_ns)]
        self.enc.slice(m.start_ns, m.end_ns, track, m.title, args)

    def _on_lanes(self, key: np.ndarray, start: np.ndarray, end: np.ndarray, track: Callable[[int, int], int],
                  by_start: bool = False) -> Iterator[Tuple[int, int]]:
        """(row, track) of each row, grouped by ``key`` (in key order; the rows of a group in start order when
        ``by_start``), each on the lane of its group where its slices nest (:func:`.perfetto_packets.lanes`);
        ``track(key, lane)`` makes a lane's track when the lane's first row comes."""
        for kv in np.unique(key).tolist():
            sel = np.nonzero(key == kv)[0]
            if by_start:
                sel = sel[np.lexsort((-end[sel], start[sel]))]
            tracks: Dict[int, int] = {}
            for i, ln in zip(sel.tolist(), lanes(start[sel], end[sel]).tolist()):
                t = tracks.get(ln)
                if t is None:
                    t = tracks[ln] = track(kv, ln)
                yield i, t

    def _kernels(self) -> None:
        k = self.rows.kernels
        if len(k) == 0:
            return
        enc, cat, cfg = self.enc, k.category, k.config
        launch = launch_args(cfg) if cfg is not None else []   # not empty: the config is of the rows, len(k) > 0

        def track(kv: int, ln: int) -> int:
            d, s = kv >> 32, kv & 0xFFFFFFFF
            return enc.track(f"stream {s} (overlap {ln})", self.gpu(d)) if ln else self.gpu_track(d, f"stream {s}")
        for i, t in self._on_lanes(k.device * (1 << 32) + (k.stream & 0xFFFFFFFF), k.start, k.end, track):
            ni = int(k.name[i])
            args: List[Tuple[str, object]] = [("correlation_id", int(k.corr[i]))]
            if cat and cat[ni]:
                args.append(("category", cat[ni]))
            if k.graph_node[i]:
                args.append(("cuda_graph_node", True))
            if launch:
                args += launch[i]
            li = int(k.launch[i])
            enc.slice(int(k.start[i]), int(k.end[i]), t, k.names[ni], args,
                      end_flow=self.flow_base + li + 1 if li >= 0 else 0)

    def _copies(self) -> None:
        for what, ops in (("memcpy", self.rows.memcpy), ("memset", self.rows.memset)):
            if len(ops) == 0:
                continue
            cols = {n: getattr(ops, n).tolist() for n in ("bytes", "copy_kind", "src_kind", "dst_kind", "mem_kind",
                                                           "corr") if getattr(ops, n) is not None}
            start, end, launch = ops.start, ops.end, ops.launch

            def track(kv: int, ln: int, what: str = what) -> int:
                return self.gpu_track(kv >> 32, f"{what} stream {kv & 0xFFFFFFFF}" + (f" (overlap {ln})" if ln else ""))
            for j, t in self._on_lanes(ops.device * (1 << 32) + (ops.stream & 0xFFFFFFFF), start, end, track):
                args: List[Tuple[str, object]] = []
                name = what
                if "copy_kind" in cols:
                    kind = self.rows.copy_kinds.get(cols["copy_kind"][j], str(cols["copy_kind"][j]))
                    name = f"memcpy {kind}"
                    args.append(("kind", kind))
                if "bytes" in cols and cols["bytes"][j] >= 0:      # -1: not recorded by the export
                    args.append(("bytes", cols["bytes"][j]))
                for col in ("src_kind", "dst_kind", "mem_kind"):
                    if col in cols and cols[col][j] >= 0:
                        args.append((col, self.rows.mem_kinds.get(cols[col][j], str(cols[col][j]))))
                if "corr" in cols:
                    args.append(("correlation_id", cols["corr"][j]))
                li = int(launch[j])
                self.enc.slice(int(start[j]), int(end[j]), t, name, args,
                               end_flow=self.flow_base + li + 1 if li >= 0 else 0)

    def _graphs(self) -> None:
        g = self.rows.graph_trace
        for i in range(len(g)):
            d = int(g.device[i])
            args = [("graph_id", int(g.graph_id[i]))] if g.graph_id is not None else []
            self.enc.slice(int(g.start[i]), int(g.end[i]), self.gpu_track(d, "CUDA graph executions"),
                           "CUDA graph", args)

    def _idle(self) -> None:
        for dev, p in self.rows.idle:
            if len(p) == 0:
                continue
            t = self.gpu_track(dev, "idle causes")
            kinds, name = np.unique(p.kind.astype(np.int64) * len(p.details) + p.detail, return_inverse=True)
            names = [f"{KINDS[k]}: {p.details[d]}" if p.details[d] else KINDS[k]
                     for k, d in (divmod(kd, len(p.details)) for kd in kinds.tolist())]
            self.enc.slices(p.start, p.end, np.full(len(p), t, np.int64), name.reshape(-1), names)

    def _api(self) -> None:
        api = self.rows.api
        if len(api) == 0:
            return
        for i, t in self._on_lanes(api.gtid, api.start, api.end,
                                   lambda g, ln: self.thread_track(g, f"CUDA API (overlap {ln})") if ln
                                   else self.thread(g)):
            self.enc.slice(int(api.start[i]), int(api.end[i]), t, api.names[int(api.name[i])],
                           (("correlation_id", int(api.corr[i])),),
                           flow=self.flow_base + int(api.row[i]) + 1 if api.flow[i] else 0)

    def _host(self, h: Any, what: str, by_start: bool) -> None:
        """NVTX ranges or OS-runtime calls (a :class:`analyses.timeline.rows.HostRows`) on their threads' tracks."""
        if len(h) == 0 or h.gtid is None:
            return
        rows: List[int] = []     # the rows not yet written (plain slices: written in bulk)
        tracks: List[int] = []

        def write() -> None:
            if rows:
                r = np.array(rows, np.int64)
                self.enc.slices(h.start[r], h.end[r], np.array(tracks, np.int64), h.name[r], h.names)
                rows.clear()
                tracks.clear()

        def track(g: int, ln: int) -> int:
            write()   # the rows before a new track's descriptor
            return self.thread_track(g, what + (f" (overlap {ln})" if ln else ""))
        for i, t in self._on_lanes(h.gtid, h.start, h.end, track, by_start):
            if h.closed is None or h.closed[i]:
                rows.append(i)
                tracks.append(t)
            else:
                write()
                self.enc.slice(int(h.start[i]), int(h.end[i]), t, h.names[int(h.name[i])], (("unterminated", True),))
        write()

    def _samples(self) -> None:
        s = self.rows.samples
        for i in range(len(s)):
            t = self.thread_track(int(s.gtid[i]), "CPU samples")
            self.enc.instant(int(s.start[i]), t, s.names[int(s.symbol[i])],
                             (("module", s.names[int(s.module[i])]), ("caller", s.names[int(s.caller[i])])))

    def _counters(self) -> None:
        for c in self.rows.counters:
            if c.edges_ns.shape[0] < 2:
                continue
            busy = self.gpu_track(c.device_id, "busy %", "%")
            bw = self.gpu_track(c.device_id, "copy GB/s", "GB/s")
            edges = c.edges_ns.tolist()
            for t, b, g in zip(edges[:-1], c.busy_pct.tolist(), c.copy_gbps.tolist()):
                self.enc.counter(t, busy, b)
                self.enc.counter(t, bw, g)
            self.enc.counter(edges[-1], busy, 0.0)
            self.enc.counter(edges[-1], bw, 0.0)


def write_perfetto(report: Report, path: Path, rank: Optional[Tuple[int, str]] = None) -> Optional[Path]:
    """Write ``path`` (``timeline.pftrace``) when the report's timeline file is on (``timeline_events`` > 0);
    returns the path written, None when off. ``rank``: (index, root track name) in a cluster (the file becomes a
    process, its GPUs', processes' and threads' tracks under it; ids kept apart from other files')."""
    if not report.timeline_file.span.written:
        return None
    with open(path, "wb") as f:
        enc = Encoder(f, (rank[0] + 1) if rank is not None else 1, ((rank[0] + 1) << 40) if rank is not None else 0)
        _Layout(enc, report, rank).write()
        enc.flush()
    return path
