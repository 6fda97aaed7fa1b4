"""Build a :class:`TraceModel` from a read-only connection: fetch, decode ids, resolve names, sort,
and join GPU work to its launching API call (same process + correlationId)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple, TypeVar

import numpy as np

from ..read import fetch as F
from ..read import fetch_nvtx as FN
from ..read import fetch_samples as FS
from ..read.connection import TraceConnection
from ..read.fetch_launch import rowid_range
from ..read.schema import Schema
from .info import GPU_READ, GpuInfo, RowCounts, SessionRecord, TraceInfo
from .link import ApiIndex, link_to_api, pid_from_launch, unknown_pid_message
from .names import MISSING, UNNAMED, base_api_name, distinct_small, intern_ids, thread_labels
from .nvtx_build import build_nvtx, possible_nvtx
from .row_checks import drop_impossible
from .samples import build_samples, build_wait_samples
from .timeline import few_distinct
from .trace import (
    ApiCalls,
    GraphTrace,
    Kernels,
    Memcpy,
    Memset,
    NvtxRanges,
    OsCalls,
    SyncRows,
    TraceModel,
    UmCpuFaults,
    UmGpuFaults,
    active_threads,
    pid_of,
    sql_int,
    tid_of,
    trace_edge,
)

K = TypeVar("K")
V = TypeVar("V")
T = TypeVar("T")


def _sorted(cols: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
    """Order rows by start (ties keep export order, so results are deterministic); columns are
    replaced one at a time to keep peak memory low."""
    st = cols["start"]
    if st.shape[0] < 2 or bool((st[1:] >= st[:-1]).all()):
        return cols
    order = np.argsort(st, kind="stable")
    for k in list(cols):
        cols[k] = cols[k][order]
    return cols


def _rowids(conn: TraceConnection, table: Optional[str], pos: Optional[np.ndarray], read: List[np.ndarray]
            ) -> Tuple[Optional[int], np.ndarray]:
    """(``Kernels.rowid_base``, ``Kernels.read_pos``): the rowid of the row read first when the read returned
    every row of a table with consecutive rowids (a full scan reads a rowid table in rowid order), else None; the
    position as read of each kernel, empty when the model keeps the read order (the array as made: not sorted, no
    row left out — every export seen so far; else 4 bytes a kernel)."""
    empty = np.empty(0, np.int32)
    if pos is None or not read or table is None:
        return None, empty
    n_read = int(read[0].shape[0])
    span = rowid_range(conn, table)
    if span is None or span[1] - span[0] + 1 != n_read:
        return None, empty
    return span[0], (empty if pos is read[0] else pos)


def narrow(v: np.ndarray, types: Tuple[type, ...] = (np.int16, np.int32)) -> np.ndarray:
    """``v`` in the first of ``types`` that holds every value (else as it is): less model memory."""
    if v.shape[0] == 0:
        return v
    lo, hi = int(v.min()), int(v.max())
    for t in types:
        if np.iinfo(t).min <= lo and hi <= np.iinfo(t).max:
            return v.astype(t, copy=False)
    return v


def _rows_map(conn: TraceConnection, schema: Schema, table: str, cols: Sequence[str],
              key: Callable[[Mapping[str, object]], K], value: Callable[[Mapping[str, object]], V]) -> Dict[K, V]:
    """``key(row) → value(row)`` of the rows of the small info table ``table`` (``cols``: the columns read, those it
    has; a row on which either raises, e.g. a pid that is not an integer, is left out)."""
    out: Dict[K, V] = {}
    for r in F.fetch_rows(conn, schema, table, cols):
        try:
            out[key(r)] = value(r)
        except (KeyError, TypeError, ValueError):
            continue
    return out


def _samples_by_pid(conn: TraceConnection, schema: Schema) -> Dict[int, int]:
    """CPU samples per process over the whole capture (``TraceInfo.samples_by_pid``); empty without samples."""
    got = FS.count_samples_by_pid(conn, schema)
    return {} if got is None else dict(zip(got["pid"].tolist(), got["samples"].tolist()))


def _map_devices(device: np.ndarray, pid: np.ndarray, dmap: Dict[Tuple[int, int], int]) -> np.ndarray:
    """``device`` with each (pid, CUDA device id) of ``dmap`` replaced by its GPU id: a mask per entry when the map
    is short, else every row looked up in the sorted map (never one pass over every row per entry)."""
    if not dmap or device.shape[0] == 0:
        return device
    out = device.copy()
    lim = np.iinfo(np.int64)
    fits = np.iinfo(out.dtype) if out.dtype.kind in "iu" else None
    entries = sorted((p, c, g) for (p, c), g in dmap.items() if lim.min <= p <= lim.max and lim.min <= c <= lim.max)
    if len(dmap) <= 16 or fits is None or not all(fits.min <= g <= fits.max for g in dmap.values()):
        for (p, c), g in dmap.items():
            out[(pid == p) & (device == c)] = g
        return out
    ep = np.array([e[0] for e in entries], np.int64)
    ec = np.array([e[1] for e in entries], np.int64)
    up, uc = np.unique(ep), np.unique(ec)
    ekey = np.searchsorted(up, ep) * uc.shape[0] + np.searchsorted(uc, ec)   # sorted: entries are in (p, c) order
    bp = np.minimum(np.searchsorted(up, pid), up.shape[0] - 1)
    bc = np.minimum(np.searchsorted(uc, device), uc.shape[0] - 1)
    at = np.minimum(np.searchsorted(ekey, bp * uc.shape[0] + bc), ekey.shape[0] - 1)
    hit = (up[bp] == pid) & (uc[bc] == device) & (ekey[at] == bp * uc.shape[0] + bc)
    out[hit] = np.array([e[2] for e in entries], np.int64)[at[hit]].astype(out.dtype)
    return out


def _fill_pid(cols: Dict[str, np.ndarray], default_pid: Optional[int]) -> np.ndarray:
    pid = pid_of(cols["gpid"])
    if default_pid is not None:
        pid = np.where(pid < 0, default_pid, pid)
    return pid


def build_model(conn: TraceConnection, schema: Schema, path: str, threads: int = 2) -> TraceModel:
    """Read every table the analyses use and normalize it (with the columnar reader and ``threads`` > 1, the kernel
    table is read on a second thread while the CUDA API table is read and built)."""
    warnings: List[str] = []
    notes: List[str] = []
    strings = F.fetch_strings(conn, schema)
    if not schema.has("StringIds"):
        warnings.append("StringIds table missing: names are shown as [missing StringId N].")

    # ---- the two big tables: fetched at the same time when the columnar reader is on (it releases the GIL);
    # the CUDA API rows are normalized while the kernel table is still being read
    ktable = schema.kernel_table

    def api_part() -> Tuple[Optional[ApiCalls], ApiIndex]:
        rt = F.fetch_runtime(conn, schema)
        if rt is None:
            return None, ApiIndex(None)
        rt = _sorted(drop_impossible(rt, "CUPTI_ACTIVITY_KIND_RUNTIME", warnings))
        name_idx, names = intern_ids(rt["name_id"], strings)
        missing = sum(1 for n in names if n.startswith(MISSING))
        if missing:
            warnings.append(f"{missing} CUDA API name id(s) missing from StringIds; shown as [missing StringId N] "
                            "(a call a kernel links is still a launch call: docs/MODEL.md).")
        calls = ApiCalls(
            start=rt["start"], end=rt["end"], gtid=rt["gtid"], pid=pid_of(rt["gtid"]), tid=tid_of(rt["gtid"]),
            corr=rt["corr"], name_idx=name_idx, event_class=narrow(rt["event_class"]), names=names,
            base_names=[base_api_name(n) for n in names],
        )
        return calls, ApiIndex(calls)

    read_order: List[np.ndarray] = []   # the kernels' positions as read (model order vs table order: rowids)

    def kernels_read() -> Optional[Dict[str, np.ndarray]]:
        got = F.fetch_kernels(conn, schema, ktable)
        if got is not None and got["start"].shape[0] < 1 << 31:
            got["read_pos"] = np.arange(got["start"].shape[0], dtype=np.int32)
            read_order.append(got["read_pos"])
        return got

    if threads > 1 and conn.columnar_uri:
        def kernels_sorted() -> Optional[Dict[str, np.ndarray]]:
            got = kernels_read()
            return None if got is None else _sorted(got)

        with ThreadPoolExecutor(1) as pool:
            kc_future = pool.submit(kernels_sorted)
            api, api_index = api_part()
            kc = kc_future.result()
    else:
        (api, api_index), kc = api_part(), kernels_read()

    api_pids = sorted({int(p) for p in np.unique(api.pid)} - {-1}) if api is not None and len(api) else []
    default_pid = api_pids[0] if len(api_pids) == 1 else None

    dmap = _rows_map(conn, schema, "TARGET_INFO_CUDA_DEVICE", ("gpuId", "cudaId", "pid"),
                     lambda r: (sql_int(r["pid"]), sql_int(r["cudaId"])), lambda r: sql_int(r["gpuId"]))
    if dmap:
        notes.append("Device ids are physical GPU ids mapped through TARGET_INFO_CUDA_DEVICE (pid, cudaId → gpuId).")

    # ---- kernels
    kernels: Optional[Kernels] = None
    if ktable == "CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL":
        notes.append("Kernels read from CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL (old table name).")
    if kc is not None and ktable is not None:   # (fetch_kernels reads nothing without a kernel table)
        kc = drop_impossible(kc, ktable, warnings)
        if not schema.has(ktable, "globalPid"):
            if default_pid is not None:
                notes.append(f"Kernel table has no globalPid column; all kernels assigned to the only CUDA "
                             f"process (PID {default_pid}).")
        if schema.has(ktable, "greenContextId"):
            notes.append("greenContextId column present (2023.x+ layout); columns selected by name.")
        kc = _sorted(kc)
        rowid_base, read_pos = _rowids(conn, ktable, kc.pop("read_pos", None), read_order)
        pid = _fill_pid(kc, default_pid)
        if "short" not in kc:              # per distinct id: no pass over every row per id
            ids, inv = distinct_small(kc["demangled"])
            short_map = F.fetch_short_for(conn, schema, ktable, [i for i in ids.tolist() if i not in strings])
            kc["short"] = np.array([short_map.get(i, -1) for i in ids.tolist()], np.int64)[inv]
        name_idx, names = intern_ids(kc["demangled"], strings, kc["short"], UNNAMED)
        missing = [n for n in names if n.startswith(MISSING)]
        if missing:
            warnings.append(f"{len(missing)} kernel name id(s) missing from StringIds; shown as [missing StringId N].")
        launch_idx = link_to_api(pid, kc["corr"], api, api_index, kind="kernel")
        if (pid < 0).any():   # no globalPid and several processes: the process of the linked launch call
            msg = unknown_pid_message(pid, kc["corr"], launch_idx, api, ktable, "kernel",
                                      column_missing=not schema.has(ktable, "globalPid"))
            if msg:
                warnings.append(msg)
            pid = pid_from_launch(pid, launch_idx, api)
        kernels = Kernels(
            start=kc["start"], end=kc["end"], device=_map_devices(narrow(kc["device"], (np.int32,)), pid, dmap),
            stream=narrow(kc["stream"], (np.int32,)), corr=narrow(kc["corr"], (np.int32,)), pid=pid,
            name_idx=name_idx, names=names,
            graph_node=np.maximum(kc.pop("graph_node"), -1),
            launch_idx=launch_idx, rowid_base=rowid_base, read_pos=read_pos,
        )
        if not dmap and len(kernels):
            pairs = np.unique((kernels.device.astype(np.int64) << 32) | (kernels.pid.astype(np.int64) & 0xFFFFFFFF))
            devs, n_pids = np.unique(pairs >> 32, return_counts=True)
            shared = [int(d) for d, c in zip(devs.tolist(), n_pids.tolist()) if c > 1]
            if shared:
                warnings.append(
                    f"CUDA device id(s) {', '.join(map(str, shared))} are used by several processes and the export "
                    "has no per-process device map (TARGET_INFO_CUDA_DEVICE): their kernels are treated as one GPU. "
                    "If each process saw a different GPU (per-process CUDA_VISIBLE_DEVICES), per-device busy/idle "
                    "mixes GPUs; per-PID numbers are unaffected.")

    def table(name: str, cols: Dict[str, str]) -> Optional[Dict[str, np.ndarray]]:
        """``cols`` of table ``name`` (None when absent) without its impossible rows, sorted by start, with
        ``pid`` decoded (of ``gpid``, the only process's where unknown; else of the thread ``gtid``)."""
        c = F.fetch_table(conn, schema, name, cols)
        if c is None:
            return None
        c = _sorted(drop_impossible(c, name, warnings))
        c["pid"] = _fill_pid(c, default_pid) if "gpid" in c else pid_of(c["gtid"])
        return c

    def ops(name: str, cols: Dict[str, str], kind: str, cls: Callable[..., T]) -> Optional[T]:
        c = table(name, cols)
        if c is None:
            return None
        c["launch_idx"] = link_to_api(c["pid"], c["corr"], api, api_index, kind=kind)
        c["pid"] = pid_from_launch(c["pid"], c["launch_idx"], api)
        c["device"] = _map_devices(c["device"], c["pid"], dmap)
        return cls(**c)

    memcpy = ops("CUPTI_ACTIVITY_KIND_MEMCPY", F.MEMCPY_COLS, "memcpy", Memcpy)
    memset = ops("CUPTI_ACTIVITY_KIND_MEMSET", F.MEMSET_COLS, "memset", Memset)
    sync = ops("CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", F.SYNC_COLS, "sync", SyncRows)
    graph_trace = ops("CUPTI_ACTIVITY_KIND_GRAPH_TRACE", F.GRAPH_TRACE_COLS, "graph_trace", GraphTrace)
    osrt_cols = table("OSRT_API", F.OSRT_COLS)
    osrt = None
    if osrt_cols is not None:
        osrt_cols["name_idx"], osrt_names = intern_ids(osrt_cols["name_id"], strings)
        osrt = OsCalls(**osrt_cols, names=osrt_names)

    um_gpu_faults, um_cpu_faults = _um_faults(table, strings, dmap)

    thread_names = _rows_map(conn, schema, "ThreadNames", ("globalTid", "nameId"), lambda r: sql_int(r["globalTid"]),
                             lambda r: strings.get(sql_int(r["nameId"]), ""))

    cuda = (kernels, api, memcpy, memset, sync, graph_trace)
    t_end = trace_edge(max, *cuda)   # before NVTX is read

    # ---- NVTX
    nvtx: Optional[NvtxRanges] = None
    nv = FN.fetch_nvtx(conn, schema)
    if nv is not None:
        nvtx = build_nvtx(possible_nvtx(nv, warnings), t_end, warnings)

    graph_mode = schema.meta_value("capture:CUDA_GRAPH_TRACE_OPTIONS:MODE")
    info = TraceInfo(
        path=path, product_version=schema.product_version, schema_version=schema.schema_version,
        meta_table=schema.meta_table, kernel_table=ktable, tables=schema.tables, meta=schema.meta,
        gpus=tuple(GpuInfo.of_row(g) for g in F.fetch_rows(conn, schema, "TARGET_INFO_GPU", GPU_READ)),
        process_names=_rows_map(conn, schema, "PROCESSES", ("globalPid", "pid", "name"),
                                lambda p: sql_int(p["pid"]), lambda p: str(p.get("name") or "")),
        session=SessionRecord(*F.fetch_session(conn, schema)),
        row_counts=RowCounts(), graph_trace_mode=graph_mode, samples_by_pid=_samples_by_pid(conn, schema),
    )
    if schema.meta_table is None:
        warnings.append("No export metadata table (EXPORT_META_DATA / META_DATA_EXPORT): nsys version unknown.")
    elif schema.meta_table == "EXPORT_META_DATA":
        notes.append("Export metadata read from EXPORT_META_DATA (≤ 2022.x layout).")
    if schema.has("CUDA_GRAPH_EVENTS"):
        level = ("graph-level (≥ 2024.2 meaning)" if schema.has("CUDA_GRAPH_EVENTS", "graphId")
                 else "node-level (≤ 2023.4 meaning)")
        notes.append(f"CUDA_GRAPH_EVENTS has {level} columns; decided by its columns, not the version.")
    span = trace_edge(min, *cuda, nvtx), trace_edge(max, *cuda, nvtx)
    samples = build_samples(conn, schema, strings, api.gtid if api is not None else None, *span)
    wait_samples = build_wait_samples(conn, schema, api.gtid if api is not None else None, osrt, *span, kernels)
    # the read's own notes (rows of the wrong type left out, text that is not UTF-8) once everything is read: NVTX
    # text, process / GPU names and samples are read after the kernel and API tables
    warnings += sorted(conn.excluded)
    return TraceModel(
        info=info, kernels=kernels, api=api, nvtx=nvtx, memcpy=memcpy, memset=memset, sync=sync,
        graph_trace=graph_trace, osrt=osrt, thread_names=thread_names,
        thread_labels=thread_labels(thread_names, active_threads(api, nvtx, osrt, few_distinct)),
        warnings=tuple(warnings), notes=tuple(notes),
        um_gpu_faults=um_gpu_faults, um_cpu_faults=um_cpu_faults, samples=samples,
        wait_samples=wait_samples,
    ).with_row_counts()


def _um_faults(table: Callable[[str, Dict[str, str]], Optional[Dict[str, np.ndarray]]], strings: Dict[int, str],
               dmap: Dict[Tuple[int, int], int]) -> Tuple[Optional[UmGpuFaults], Optional[UmCpuFaults]]:
    """The Unified-Memory page-fault tables (``None`` each when absent), read by ``table`` (sorted, PIDs decoded):
    GPU device ids mapped like the other GPU rows; CPU-fault function and module ids interned into one name list."""
    gpu = table("CUDA_UM_GPU_PAGE_FAULT_EVENTS", F.UM_GPU_FAULT_COLS)
    if gpu is not None:
        gpu["device"] = _map_devices(gpu["device"], gpu["pid"], dmap)
    cpu = table("CUDA_UM_CPU_PAGE_FAULT_EVENTS", F.UM_CPU_FAULT_COLS)
    names: List[str] = []
    if cpu is not None:
        n = cpu["start"].shape[0]
        idx, names = intern_ids(np.concatenate((cpu.pop("func_id"), cpu.pop("module_id"))), strings)
        cpu["func_idx"], cpu["module_idx"] = idx[:n], idx[n:]
    return (None if gpu is None else UmGpuFaults(**gpu)), (None if cpu is None else UmCpuFaults(**cpu, names=names))
