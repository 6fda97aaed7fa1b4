"""NVTX ranges of the model: impossible rows left out, domain-qualified names, unterminated ranges ended by
the documented rule (docs/METRICS.md), rows sorted by (start, −end)."""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import numpy as np

from ..read import fetch_nvtx as FN
from .names import intern_strings
from .row_checks import MAX_TS, drop_impossible, unsummable
from .trace import NvtxRanges, pid_of, tid_of

#: the one rule for ranges left open in the capture (NULL ``end``; the read takes ``NvtxRows.max_ts``, the model
#: applies it): nsys 2022.4's nvtxsum / nvtxkernsum; 2024.2's nvtx_sum ends them at the latest *range* timestamp
#: instead, which differs only when a mark or other NVTX row comes after the last range timestamp
UNTERMINATED_END_RULE = "nsys 2022.4: latest start or end of any NVTX_EVENTS row (marks included)"


def possible_nvtx(nv: FN.NvtxRows, warnings: List[str]) -> FN.NvtxRows:
    """``nv`` without its impossible ranges (:mod:`.row_checks`); the latest NVTX timestamp (the end of
    unterminated ranges) is then taken from the rows kept when the export's own maximum is impossible."""
    c = nv.cols
    before = len(warnings)
    kept = drop_impossible(dict(c, _row=np.arange(c["start"].shape[0])), "NVTX_EVENTS", warnings, has_end="has_end")
    max_ts = nv.max_ts
    if max_ts is not None and max_ts > MAX_TS:
        ends = kept["end"][kept["has_end"].astype(bool)]
        max_ts = int(max(kept["start"].max(initial=0), ends.max(initial=0)))
    if len(warnings) == before:
        return FN.NvtxRows(cols=c, text=nv.text, domains=nv.domains, max_ts=max_ts)
    rows = kept.pop("_row")
    text = np.array(nv.text, dtype=object)[rows].tolist() if rows.shape[0] else []
    return FN.NvtxRows(cols=kept, text=text, domains=nv.domains, max_ts=max_ts)


def build_nvtx(nv: FN.NvtxRows, t_end: Optional[int], warnings: List[str]) -> NvtxRanges:
    c = nv.cols
    n = c["start"].shape[0]
    pid = pid_of(c["gtid"])
    # domain names are per process: (pid, domainId) -> name
    dom: Dict[Tuple[int, int], str] = {(int(pid_of(np.array([g]))[0]), d): name for g, d, name in nv.domains}
    name_idx, names = intern_strings(nv.text)
    if dom and n:
        # qualify names of non-default domains, per distinct (pid, domain, name) — not per row
        rows = np.nonzero(c["domain"] > 0)[0]
        if rows.size:
            key = np.stack([pid[rows], c["domain"][rows], name_idx[rows].astype(np.int64)], axis=1)
            uniq, inv = np.unique(key, axis=0, return_inverse=True)
            index = {s: i for i, s in enumerate(names)}
            new = np.empty(uniq.shape[0], np.int32)
            for j, (p, d, ni) in enumerate(uniq.tolist()):
                dn = dom.get((p, d))
                s = f"{dn}:{names[ni]}" if dn is not None else names[ni]
                new[j] = index.setdefault(s, len(index))
            names = list(index.keys())
            name_idx = name_idx.copy()
            name_idx[rows] = new[inv.reshape(-1)]
    closed = c["has_end"].astype(bool) & (c["end"] >= 0)
    end = c["end"].copy()
    open_rows = int((~closed).sum())
    if open_rows:
        # as nsys does (nvtx_sum, nvtx_kern_sum): an unterminated range ends at the latest NVTX timestamp
        fill = nv.max_ts if nv.max_ts is not None else (t_end if t_end is not None else int(c["start"].max()))
        end[~closed] = np.maximum(fill, c["start"][~closed])
        warnings.append(f"{open_rows} NVTX range(s) have no end (unterminated in the capture): they are taken to "
                        f"end at {int(fill)} ns (rule {UNTERMINATED_END_RULE}).")
    order = np.lexsort((-end, c["start"]))
    dur = end - c["start"]                 # the sums rule (row_checks.SUM_LIMIT), once every range has its end
    out = unsummable(dur, "NVTX_EVENTS", "durations", warnings)
    if out.shape[0]:
        keep = np.ones(n, bool)
        keep[out] = False
        order = order[keep[order]]
    return NvtxRanges(
        start=c["start"][order], end=end[order], closed=closed[order], event_type=c["event_type"][order],
        gtid=c["gtid"][order], pid=pid[order], tid=tid_of(c["gtid"])[order], end_gtid=c["end_gtid"][order],
        name_idx=name_idx[order], names=names, domain=np.maximum(c["domain"], 0)[order],
    )
