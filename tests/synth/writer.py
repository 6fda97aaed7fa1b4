"""SQLite writer of a :class:`~.builder.TraceBuilder`: metadata, enums, activity and identity tables.

Tables are created in the exporter's order (metadata, session, enums, activity tables, processes,
threads, strings, GPUs, streams). Activity rows are inserted in a seeded shuffled order because real
exports are not time-ordered; bulk array groups are inserted chunk by chunk, chunks shuffled.
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Optional, Sequence, Set, Tuple

import numpy as np

from .catalog import Col
from .catalog_session import (
    ANALYSIS_COLS,
    ENUM_COLS,
    ENUMS,
    GPU_INFO_COLS,
    KERNEL_DEFAULTS,
    META_COLS,
    PROCESS_COLS,
    STREAM_COLS,
    STRING_COLS,
    SYSTEM_ENV_COLS,
    THREAD_COLS,
    ddl,
    session_cols,
)
from .ids import FLAVORS, VM_GLOBAL, VM_ID, global_pid, pid_of
from .rows_samples import write_samples

if TYPE_CHECKING:  # pragma: no cover
    from .store import RowStore

__all__ = ["write_all", "time_bounds"]

CHUNK = 200_000
Meta = List[Tuple[str, str]]


class _Writer:
    """Table creation / insertion on one connection, honouring the builder's dropped columns."""

    def __init__(self, b: RowStore, con: sqlite3.Connection) -> None:
        self.b = b
        self.con = con
        self.f = b._flv

    def create(self, table: str, cols: Sequence[Col], pk: Optional[str] = None) -> List[str]:
        drop = self.b._dropped.get(table, set())
        kept = [c for c in cols if c[0] not in drop]
        self.con.execute(ddl(table, kept, pk))
        return [c[0] for c in kept]

    def insert(self, table: str, names: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
        q = f"INSERT INTO {table} ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})"
        self.con.executemany(q, rows)

    def table(
        self, table: str, cols: Sequence[Col], rows: Iterable[Sequence[Any]], pk: Optional[str] = None
    ) -> None:
        """Create ``table`` and insert ``rows`` (given in the order of ``cols``)."""
        self.insert(table, self.create(table, cols, pk), rows)

    def order(self, n: int, salt: int) -> Iterable[int]:
        if not self.b.shuffle or n < 2:
            return range(n)
        return np.random.default_rng(self.b.seed * 1000003 + salt).permutation(n).tolist()


def time_bounds(b: RowStore) -> Tuple[int, int]:
    """(min(0, first timestamp), last timestamp) over every collected row."""
    lo: Optional[int] = None
    hi: Optional[int] = None
    for rows in b._rows.values():
        for r in rows:
            s = r["start"]
            e = r.get("end")
            lo = s if lo is None or s < lo else lo
            top = s if e is None else e
            hi = top if hi is None or top > hi else hi
    for group in b._bulk_kernels + b._bulk_runtime:
        if len(group["start"]):
            s0, e1 = int(group["start"].min()), int(group["end"].max())
            lo = s0 if lo is None else min(lo, s0)
            hi = e1 if hi is None else max(hi, e1)
    return (0 if lo is None else min(lo, 0)), (0 if hi is None else hi)


# ----------------------------------------------------------------------------------------- metadata
def _export_rows(b: RowStore) -> Meta:
    f = b._flv
    product, schema, cksum, _ = FLAVORS[b.flavor]
    major, minor, micro = schema.split(".")
    rows: Meta = [
        ("EXPORT_PRODUCT_NAME", "NVIDIA Nsight Systems"),
        ("EXPORT_PRODUCT_VERSION", product),
        ("EXPORT_PRODUCT_DATE", b.flavor),
        ("EXPORT_SCHEMA_VERSION", schema),
        ("EXPORT_SCHEMA_VERSION_MAJOR", major),
        ("EXPORT_SCHEMA_VERSION_MINOR", minor),
        ("EXPORT_SCHEMA_VERSION_MICRO", micro),
        ("EXPORT_SCHEMA_VERSION_CKSUM", cksum),
        ("EXPORT_PLATFORM", "linux-desktop"),
        ("EXPORT_ARCH", "x64"),
        ("EXPORT_TIME_UTC", "2025-01-01T12:30:00"),
        ("EXPORT_HOST", "synth"),
        ("EXPORT_USER", ""),
    ]
    lazy = "true" if b.lazy else "false"
    if f <= 1:
        rows += [
            ("EXPORT_INPUT_FILE", "report1.nsys-rep"),
            ("EXPORT_OUTUPT_FILE", "report1.sqlite"),
            ("EXPORT_OVERWRITE", "true"),
            ("EXPORT_LAZY", lazy),
        ]
        return rows
    out_key = "EXPORT_PARAM_OUTPUT_FILE" if f >= 4 else "EXPORT_PARAM_OUTUPT_FILE"
    rows += [
        ("EXPORT_PARAM_EXPORT_TYPE", "SQLite"),
        ("EXPORT_PARAM_INPUT_FILE", "report1.nsys-rep"),
        (out_key, "report1.sqlite"),
        ("EXPORT_PARAM_OVERWRITE", "true"),
        ("EXPORT_PARAM_LAZY", lazy),
        ("EXPORT_PARAM_TIME_NORMALIZE", "false"),
        ("EXPORT_PARAM_TIME_SHIFT", "0"),
        ("EXPORT_PARAM_TABLES_TO_EXPORT", ""),
        ("EXPORT_PARAM_TIMES_TO_EXPORT", ""),
        ("EXPORT_CONFIG_TIME_SHIFT", "0"),
    ]
    return rows


def _capture_rows(b: RowStore, lo: int, hi: int) -> Meta:
    """META_DATA_CAPTURE rows (>= 2023.4); user rows replace defaults except repeated event types."""
    user_cap = [(k, v) for t, k, v in b._meta if t == "META_DATA_CAPTURE"]
    user_keys = {k for k, _ in user_cap}
    cap: Meta = [("CAPTURE_EVENT_TYPE", "Cuda"), ("CAPTURE_EVENT_TYPE", "NvtxEvents")]
    if b._rows["osrt"]:
        cap.append(("CAPTURE_EVENT_TYPE", "OSRuntime"))
    cap += [
        ("CUDA_SKIP_SOME_API_CALLS", "true"),
        ("CUDA_TRACE_SCOPE", "ProcessTree"),
        ("PROCESS_0:COMMAND", "python3"),
        ("PROCESS_0:ARGUMENT_0", "-m"),
        ("PROCESS_0:ARGUMENT_1", "vllm.entrypoints.openai.api_server"),
        ("START_DELAY_MS", "0"),
        ("RUN_DURATION_MS", str(max(0, (hi - lo) // 1_000_000) if b.session is None
                                else max(0, (b.session[1] - b.session[0]) // 1_000_000))),
    ]
    if b._flv >= 4:
        cap.append(("CUDA_GRAPH_TRACE_OPTIONS:MODE", "Node"))
    return [kv for kv in cap if kv[0] not in user_keys or kv[0] == "CAPTURE_EVENT_TYPE"] + user_cap


def _write_meta(w: _Writer, lo: int, hi: int) -> None:
    b = w.b
    meta_table = b._export_meta_table()
    user_export = {k: v for t, k, v in b._meta if t == meta_table}
    rows = [(k, user_export.pop(k, v)) for k, v in _export_rows(b)] + list(user_export.items())
    w.table(meta_table, META_COLS, rows)
    if w.f >= 2:
        w.table("META_DATA_CAPTURE", META_COLS, _capture_rows(b, lo, hi))
    for t in sorted({t for t, _, _ in b._meta} - {meta_table, "META_DATA_CAPTURE"}):
        w.table(t, META_COLS, [(k, v) for tt, k, v in b._meta if tt == t])


def _write_session(w: _Writer, lo: int, hi: int) -> None:
    names = w.create("TARGET_INFO_SESSION_START_TIME", session_cols(w.f))
    sess = [w.b.utc_epoch_ns, "2025-01-01T12:00:00", "2025-01-01T12:00:00", 28254349605]
    w.insert("TARGET_INFO_SESSION_START_TIME", names, [sess[: len(names)]])
    lo, hi = w.b.session or (lo, hi)
    row = dict(zip((c[0] for c in ANALYSIS_COLS), (VM_GLOBAL, hi - lo, lo, hi)))
    names = w.create("ANALYSIS_DETAILS", ANALYSIS_COLS)   # a dropped column (drop_column) is left out
    w.insert("ANALYSIS_DETAILS", names, [tuple(row[n] for n in names)])
    if w.b.host is not None and w.f >= 1:   # the capture's host (2022.4 flavors on; RowStore.host)
        w.table("TARGET_INFO_SYSTEM_ENV", SYSTEM_ENV_COLS, [(VM_GLOBAL, "Local (CLI)", "Hostname", 619, w.b.host)])


def _write_enums(w: _Writer) -> None:
    if w.f < 1:
        return
    for ename, rows in ENUMS.items():
        tname = ename
        if ename == "ENUM_CUDA_KERNEL_LAUNCH_TYPE" and w.f <= 1:
            tname = "ENUM_CUDA_KRENEL_LAUNCH_TYPE"
        if ename == "ENUM_CUPTI_STREAM_TYPE" and w.f <= 1:
            continue
        w.table(tname, ENUM_COLS, rows, pk="id")


# ----------------------------------------------------------------------------------------- activity
def _defaults(key: str) -> Dict[str, Any]:
    if key == "kernel":
        return KERNEL_DEFAULTS
    return {"returnValue": 0} if key == "runtime" else {}


def _write_activity(w: _Writer) -> None:
    b = w.b
    for salt, (key, (tname, cols)) in enumerate(b._activity_tables().items()):
        rows = b._rows.get(key, [])
        bulk = b._bulk_kernels if key == "kernel" else b._bulk_runtime if key == "runtime" else []
        if b.lazy and not rows and not any(len(g["start"]) for g in bulk):
            continue
        names = w.create(tname, cols)
        defaults = _defaults(key)
        if rows:
            order = w.order(len(rows), salt)
            dflt = [defaults.get(c) for c in names]
            data = [tuple(map(rows[i].get, names, dflt)) for i in order]
            for i in range(0, len(data), CHUNK):
                w.insert(tname, names, data[i : i + CHUNK])
        if bulk:
            _write_bulk(w, tname, names, bulk, defaults, salt)


def _bulk_sql(
    tname: str, names: Sequence[str], first: Dict[str, np.ndarray], defaults: Dict[str, Any]
) -> Tuple[str, List[str]]:
    """INSERT statement for bulk groups (constant columns inline) and its varying column names."""
    varying = [c for c in names if c in first]
    if "gridId" in names:
        varying.append("gridId")
    consts = [c for c in names if c not in varying]
    lits = []
    for c in consts:
        v = defaults.get(c)
        lits.append("NULL" if v is None else (repr(v) if isinstance(v, str) else str(int(v))))
    q = (
        f"INSERT INTO {tname} ({', '.join(varying + consts)}) VALUES "
        f"({', '.join(['?'] * len(varying) + lits)})"
    )
    return q, varying


def _write_bulk(
    w: _Writer,
    tname: str,
    names: Sequence[str],
    groups: List[Dict[str, np.ndarray]],
    defaults: Dict[str, Any],
    salt: int,
) -> None:
    """Insert array groups chunk by chunk (chunks in shuffled order); constants go inline in SQL."""
    q, varying = _bulk_sql(tname, names, groups[0], defaults)
    chunks: List[Tuple[int, int, int]] = []
    for gi, g in enumerate(groups):
        n = len(g["start"])
        chunks += [(gi, i, min(n, i + CHUNK)) for i in range(0, n, CHUNK)]
    for ci in w.order(len(chunks), salt + 100):
        gi, a, z = chunks[ci]
        g = groups[gi]
        cols: List[Any] = [g[c][a:z].tolist() for c in varying if c != "gridId"]
        if "gridId" in varying:
            base = w.b._grid_id + sum(len(x["start"]) for x in groups[:gi])
            cols.append(range(base + a + 1, base + z + 1))
        w.con.executemany(q, zip(*cols))


# ----------------------------------------------------------------------------------------- identities
def _process_rows(b: RowStore) -> List[Tuple[int, int, str]]:
    pids = set(b._processes)
    for r in b._rows["kernel"] + b._rows["memcpy"] + b._rows["sync"]:
        if r.get("globalPid") is not None:
            pids.add(pid_of(r["globalPid"]))
    for r in b._rows["runtime"] + b._rows["nvtx"]:
        pids.add(pid_of(r["globalTid"]))
    return [(global_pid(p), p, b._processes.get(p, "python3")) for p in sorted(pids)]


def _thread_rows(b: RowStore) -> List[Tuple[int, int, int]]:
    """ThreadNames rows; an unnamed main thread (tid == pid) takes its process's name."""
    trows = []
    for g, name in sorted(b._threads.items()):
        if name is None:
            pid = pid_of(g)
            name = b._processes.get(pid, "python3") if (g & 0xFFFFFF) == pid else None
        if name is not None:
            trows.append((b.string(name), 20, g))
    return trows


def _write_identities(w: _Writer) -> None:
    procs = _process_rows(w.b)
    threads = _thread_rows(w.b)  # may add strings: StringIds is written after it
    w.table("PROCESSES", PROCESS_COLS, procs)
    w.table("ThreadNames", THREAD_COLS, threads)
    w.table("StringIds", STRING_COLS, w.b._string_list, pk="id")


def _write_gpus(w: _Writer) -> None:
    b = w.b
    gpus = dict(b._gpus)
    if b.auto_gpu:
        devs = {
            r["deviceId"] for k in ("kernel", "memcpy", "memset", "sync", "graph_trace") for r in b._rows[k]
        }
        for g in b._bulk_kernels:
            devs.update(int(d) for d in np.unique(g["deviceId"]))
        for d in sorted(devs - set(gpus)):
            b.gpu(d)
            gpus[d] = b._gpus[d]
    names = w.create("TARGET_INFO_GPU", GPU_INFO_COLS)
    w.insert("TARGET_INFO_GPU", names, [tuple(g.get(c) for c in names) for _, g in sorted(gpus.items())])


def _streams(b: RowStore) -> Set[Tuple[int, int, int]]:
    """(pid, context, stream) of every stream with kernel / memcpy / memset rows."""
    streams = set()
    for k in ("kernel", "memcpy", "memset"):
        for r in b._rows[k]:
            streams.add((pid_of(r["globalPid"]), r.get("contextId", 1), r["streamId"]))
    for g in b._bulk_kernels:
        pairs = np.unique(np.stack([g["globalPid"], g["streamId"]], axis=1), axis=0)
        for gp, st in pairs.tolist():
            streams.add((pid_of(gp), 1, st))
    return streams


def _write_streams(w: _Writer) -> None:
    streams = _streams(w.b)
    if streams or not w.b.lazy:
        rows = [(s, 0, VM_ID, p, c, 0, 3 if s == 7 else 2) for p, c, s in sorted(streams)]
        w.table("TARGET_INFO_CUDA_STREAM", STREAM_COLS, rows)


def write_all(b: RowStore, con: sqlite3.Connection) -> None:
    """Create and fill every table of ``b``'s export on ``con`` (the caller commits)."""
    w = _Writer(b, con)
    lo, hi = time_bounds(b)
    _write_meta(w, lo, hi)
    _write_session(w, lo, hi)
    _write_enums(w)
    _write_activity(w)
    _write_identities(w)
    _write_gpus(w)
    _write_streams(w)
    write_samples(w)
