"""CPU samples inside host-side idle (``host_samples``) for the renderers: the "host samples" cell of an idle-cause
row, the note when the trace has none, and ``host_samples.csv``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, List, Optional, Sequence

from ..vocabulary.units import fmt_int, fmt_pct
from .table import Col, Joined, Table, csv_col, raw, with_fields

if TYPE_CHECKING:
    from ..analyses.idle.host_samples import ScopeSamples
    from ..report import Report


@dataclass(frozen=True)
class HostSampleRow:
    """One row of ``host_samples.csv``: an entry (``rank`` in its ``list``) of a device's per-kind or per-cause
    scope, with the scope's numbers beside it (the entry's fields are those of ``analyses.idle.host_samples.Share``,
    flattened: render reads results without importing analyses)."""

    device_id: int
    scope: str
    kind: str
    detail: Optional[str]
    idle_ns: int
    samples: int
    list: str
    rank: int
    name: str
    module: str
    group: str
    count: int
    pct: float
    est_ns: int


#: kinds whose idle-cause rows get a "host samples" cell (the host-side kinds whose pieces are sampled)
SAMPLED_KINDS = ("launch", "other_api", "nvtx", "osrt", "host_cpu")
#: entries named in a cell (groups, then callers)
CELL_GROUPS = 2
CELL_CALLERS = 1
FIELD = "host_samples"


def captured(report: Report) -> bool:
    """True when the trace has CPU samples matched against idle pieces."""
    hs = report.host_samples
    return hs.available and hs.captured


def cell_text(entry: Optional[ScopeSamples]) -> str:
    """Plain text of one cause's samples: ``n=185: OS kernel 76 %, CUDA driver 9 %; top: [unresolved]
    (libcuda.so.1) 69 %`` (``0 samples`` for a cause without samples)."""
    if entry is None or not entry.samples:
        return "0 samples"
    groups = ", ".join(f"{g.name} {fmt_pct(g.pct or 0, 0)} %" for g in entry.groups[:CELL_GROUPS])
    callers = "; ".join(f"{c.name} ({c.module}) {fmt_pct(c.pct or 0, 0)} %" for c in entry.callers[:CELL_CALLERS])
    return f"n={fmt_int(entry.samples)}: {groups}" + (f"; top: {callers}" if callers else "")


def attach(report: Report, device_id: int, rows: Sequence[Any]) -> List[Joined]:
    """``rows`` (idle causes of ``device_id``) with ``host_samples`` beside: the cell text on the sampled kinds
    (``0 samples`` when the trace has samples but none fell in that cause), ``""`` elsewhere."""
    if not captured(report):
        return with_fields(rows, **{FIELD: ""})
    dev = report.host_samples.device(device_id)
    idx = {(c.kind, c.detail): c for c in dev.causes} if dev is not None else {}
    return [Joined(r, {FIELD: cell_text(idx.get((r.kind, r.detail))) if r.kind in SAMPLED_KINDS else ""})
            for r in rows]


#: what the "host samples" column holds (text with backtick code spans)
COLUMN_NOTE = ("CPU samples of the gap's host thread inside the host-side idle of each cause: their count, the "
               "largest module groups (leaf frame) and the top caller (first frame outside libc and the OS kernel); "
               "per kind, module and function in `tables/host_samples.csv` and report.json `host_samples` "
               "(docs/MODEL.md).")


def samples_note(report: Report, kinds: Sequence[Any]) -> str:
    """The note under the idle tables (text with backtick code spans): what the "host samples" column holds,
    or — when host-side kinds (``host_cpu``, ``nvtx``) hold idle time — why there are no samples; "" otherwise."""
    if captured(report):
        return COLUMN_NOTE
    if not any(k in ("host_cpu", "nvtx") for k in kinds):
        return ""
    reason = report.host_samples.reason
    return f"what the host ran in `host_cpu` / `nvtx` idle is unknown: {reason}." if reason else ""


def _rows(report: Report) -> List[HostSampleRow]:
    out: List[HostSampleRow] = []
    for d in report.host_samples.devices:
        for scope_name, scopes in (("kind", d.kinds), ("cause", d.causes)):
            for sc in scopes:
                for lst, entries in (("group", sc.groups), ("module", sc.modules), ("function", sc.functions),
                                     ("caller", sc.callers)):
                    for rank, e in enumerate(entries, 1):
                        out.append(HostSampleRow(d.device_id, scope_name, sc.kind, sc.detail, sc.idle_ns,
                                                 sc.samples, lst, rank, e.name, e.module, e.group, e.count, e.pct,
                                                 e.est_ns))
    return out


#: ``tables/host_samples.csv``: one row per list entry (group, module, function, caller) of each per-kind and
#: per-cause scope of each device
HOST_SAMPLES: Table[Report] = Table("host_samples.csv", (
    csv_col("device_id", "scope", "kind", "detail", "idle_ns", "samples", "list", "rank", "name", "module", "group",
            "count", "pct", "est_ns"),
), _rows)

#: the idle-cause table's column (CSV ``host_samples``, Markdown "host samples")
CAUSE_COL = Col(((FIELD, raw(FIELD)),), "host samples", value=raw(FIELD), key=FIELD)


__all__ = ["CAUSE_COL", "COLUMN_NOTE", "HOST_SAMPLES", "SAMPLED_KINDS", "attach", "captured", "cell_text",
           "samples_note"]
