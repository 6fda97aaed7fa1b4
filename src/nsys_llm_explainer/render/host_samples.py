"""CPU samples inside host-side idle (``host_samples``, analyses/idle/host_samples.py), for the renderers: the
"host samples" cell of an idle-cause row (joined by device, kind and detail; formatting only), the note shown
when the trace has no samples, and the ``host_samples.csv`` table (every list entry of every scope)."""

from __future__ import annotations

from collections import abc
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ..vocabulary.units import fmt_int, fmt_pct
from .base import Row, rows_of, section
from .table import Col, Table, csv_col, raw

#: kinds whose idle-cause rows get a "host samples" cell (the host-side kinds whose pieces are sampled)
SAMPLED_KINDS = ("launch", "other_api", "nvtx", "osrt", "host_cpu")
#: entries named in a cell (groups, then callers)
CELL_GROUPS = 2
CELL_CALLERS = 1
FIELD = "host_samples"


def captured(report: Row) -> bool:
    """True when the trace has CPU samples matched against idle pieces."""
    hs = section(report, "host_samples")
    return bool(hs.get("available")) and bool(hs.get("captured"))


def _index(report: Row) -> Dict[Tuple[Any, Any, Any], Row]:
    out: Dict[Tuple[Any, Any, Any], Row] = {}
    for d in rows_of(section(report, "host_samples"), "devices"):
        for c in rows_of(d, "causes"):
            out[(d.get("device_id"), c.get("kind"), c.get("detail"))] = c
    return out


def cell_text(entry: Optional[Mapping[str, Any]]) -> str:
    """Plain text of one cause's samples: ``n=185: OS kernel 76 %, CUDA driver 9 %; top: [unresolved]
    (libcuda.so.1) 69 %`` (``0 samples`` for an entry without samples)."""
    if not isinstance(entry, abc.Mapping):
        return ""
    n = entry.get("samples")
    if not n:
        return "0 samples"
    groups = ", ".join(f"{g.get('name')} {fmt_pct(g.get('pct') or 0, 0)} %"
                       for g in rows_of(entry, "groups")[:CELL_GROUPS])
    callers = "; ".join(f"{c.get('name')} ({c.get('module')}) {fmt_pct(c.get('pct') or 0, 0)} %"
                        for c in rows_of(entry, "callers")[:CELL_CALLERS])
    return f"n={fmt_int(n)}: {groups}" + (f"; top: {callers}" if callers else "")


def attach(report: Row, device_id: Any, rows: Sequence[Row]) -> List[Row]:
    """``rows`` (idle causes of ``device_id``) with ``host_samples`` set to the cell text on the sampled kinds
    (``0 samples`` when the trace has samples but none fell in that cause), ``""`` elsewhere."""
    if not captured(report):
        return [{**r, FIELD: ""} for r in rows]
    idx = _index(report)
    out: List[Row] = []
    for r in rows:
        kind = r.get("kind")
        if kind in SAMPLED_KINDS:
            text = cell_text(idx.get((device_id, kind, r.get("detail")), {"samples": 0}))
        else:
            text = ""
        out.append({**r, FIELD: text})
    return out


#: what the "host samples" column holds (text with backtick code spans)
COLUMN_NOTE = ("CPU samples of the gap's host thread inside the host-side idle of each cause: their count, the "
               "largest module groups (leaf frame) and the top caller (first frame outside libc and the OS kernel); "
               "per kind, module and function in `tables/host_samples.csv` and report.json `host_samples` "
               "(docs/MODEL.md).")


def samples_note(report: Row, kinds: Sequence[Any]) -> str:
    """The note under the idle tables (text with backtick code spans): what the "host samples" column holds,
    or — when host-side kinds (``host_cpu``, ``nvtx``) hold idle time — why there are no samples; "" otherwise."""
    if captured(report):
        return COLUMN_NOTE
    hs = section(report, "host_samples")
    if not any(k in ("host_cpu", "nvtx") for k in kinds) or not hs:
        return ""
    reason = hs.get("reason")
    return f"what the host ran in `host_cpu` / `nvtx` idle is unknown: {reason}." if reason else ""


def _rows(report: Row) -> List[Row]:
    out: List[Row] = []
    for d in rows_of(section(report, "host_samples"), "devices"):
        for scope_name in ("kinds", "causes"):
            for sc in rows_of(d, scope_name):
                for lst in ("groups", "modules", "functions", "callers"):
                    for rank, e in enumerate(rows_of(sc, lst), 1):
                        out.append({"device_id": d.get("device_id"), "scope": scope_name[:-1], "kind": sc.get("kind"),
                                    "detail": sc.get("detail"), "idle_ns": sc.get("idle_ns"),
                                    "samples": sc.get("samples"), "list": lst[:-1], "rank": rank, **e})
    return out


#: ``tables/host_samples.csv``: one row per list entry (group, module, function, caller) of each per-kind and
#: per-cause scope of each device
HOST_SAMPLES = Table("host_samples.csv", (
    csv_col("device_id", "scope", "kind", "detail", "idle_ns", "samples", "list", "rank", "name", "module", "group",
            "count", "pct", "est_ns"),
), _rows)

#: the idle-cause table's column (CSV ``host_samples``, Markdown "host samples")
CAUSE_COL = Col(((FIELD, raw(FIELD)),), "host samples", value=raw(FIELD), key=FIELD)


__all__ = ["CAUSE_COL", "COLUMN_NOTE", "HOST_SAMPLES", "SAMPLED_KINDS", "attach", "captured", "cell_text",
           "samples_note"]
