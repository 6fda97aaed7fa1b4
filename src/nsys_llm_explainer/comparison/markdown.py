"""``compare.md``: the headline (3–5 lines per NEW, pasteable into a pull request), then tables.

Reads the ``compare.json`` dict only (:meth:`CompareResult.to_dict`); every name is escaped with
:mod:`render.escape` (kernel and NVTX names, labels, paths). Durations per unit of work in ms.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence

from ..render.base import fmt_int, fmt_ms, fmt_pct
from ..render.escape import md_cell, md_name, md_rich, md_text

KERNEL_ROWS = 15
UNIT_WORD = {"step": "step", "iteration": "iteration", "window_s": "s of window"}
CHANGE_TEXT = {"new": "new", "gone": "gone", "severity": "severity changed", "same": "unchanged"}


def _table(head: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[int] = ()) -> List[str]:
    sep = ["---:" if i in right else "---" for i in range(len(head))]
    out = ["| " + " | ".join(head) + " |", "| " + " | ".join(sep) + " |"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return out


def _signed_ms(ns: Any) -> str:
    if ns is None:
        return "–"
    return ("+" if ns >= 0 else "−") + fmt_ms(abs(ns))


def _signed_pct(x: Any) -> str:
    return "–" if x is None else f"{x:+.1f} %"


def _label(t: Mapping[str, Any]) -> str:
    return md_name(t.get("label"), 40)


def _metric_section(d: Mapping[str, Any], unit: str) -> List[str]:
    m = d["metric"]
    comps = {c["new"]: c for c in d["comparisons"]}
    out = ["## Headline metric", ""]
    desc = md_text(m["description"])
    if m.get("anchor_kernel"):
        desc += f"; anchor kernel {md_name(m['anchor_kernel'])}"
    out += [f"{desc}. Why: {md_text(m['reason'], line_start=False)}. Lower is better; "
            f"change = (NEW − BASE) / BASE; noise = ~95 % half-width of the change (docs/COMPARE.md).", ""]
    rows = []
    for i, t in enumerate(d["traces"]):
        v = t["metric"]
        c = comps.get(t["label"])
        rows.append([_label(t), "BASE" if i == 0 else "NEW", fmt_ms(v["p50_ns"]), fmt_ms(v["p90_ns"]),
                     "–" if v["spread"] is None else f"{v['spread']:.2f}", fmt_int(v["count"]),
                     _signed_pct(c["change_pct"]) if c else "", ("±" + fmt_pct(c["noise_pct"]) + " %")
                     if c and c["noise_pct"] is not None else "", md_cell(c["verdict"].replace("_", " ")) if c else "",
                     md_cell(c["status"].replace("_", " ")) if c else ""])
    out += _table(["trace", "role", "p50 (ms)", "p90 (ms)", "p90/p50", f"{unit}s", "change", "noise", "verdict",
                   "status"], rows, right=(2, 3, 4, 5, 6, 7))
    return out + [""]


def _traces_section(d: Mapping[str, Any], unit: str) -> List[str]:
    rows = []
    notes: List[str] = []
    for t in d["traces"]:
        st = t["steps"]
        steps = (f"{fmt_int(st['count'])} ({md_cell(st['method'])}), p50 {fmt_ms(st['p50_ns'])} ms"
                 if st["available"] else "none")
        units = "–" if t["units"] is None else f"{t['units']:,.1f}"
        rows.append([_label(t), md_cell(", ".join(t["gpus"]) or "–"), fmt_int(t["device_count"]),
                     f"{fmt_ms(t['window_ns'])} ({md_cell(t['window_method'])})", fmt_pct(t["busy_pct"]),
                     fmt_int(t["kernel_count"]), units, steps, md_rich(t["verdict"], line_start=False)])
        notes += [f"- {_label(t)}: {md_text(n, line_start=False)}" for n in t["notes"]]
    out = ["## Traces", ""]
    out += _table(["trace", "GPUs", "devices", "steady window (ms)", "GPU busy %", "kernels", f"{unit}s in window",
                   "steps", "verdict"], rows, right=(2, 3, 4, 5, 6))
    return out + ([""] + notes if notes else []) + [""]


def _per_unit_rows(d: Mapping[str, Any], key: str) -> List[List[str]]:
    traces = d["traces"]
    names: Dict[str, None] = {}
    for t in traces:
        for s in t[key]:
            names.setdefault(s["name"], None)
    by = [{s["name"]: s for s in t[key]} for t in traces]
    rows = []
    for n in names:
        cells = [md_cell(n)]
        for i, b in enumerate(by):
            s = b.get(n)
            cells.append(f"{fmt_ms(s['per_unit_ns'])} ({fmt_pct(s['pct_of_window'])} %)" if s else "–")
            if i:
                base = by[0].get(n)
                pb = base["per_unit_ns"] if base else 0
                pn = s["per_unit_ns"] if s else 0
                cells.append(_signed_ms(pn - pb) if pb is not None and pn is not None else "–")
        rows.append(cells)
    return rows


def _stack_section(d: Mapping[str, Any], unit: str) -> List[str]:
    traces = d["traces"]
    head = ["part"]
    for i, t in enumerate(traces):
        head.append(f"{_label(t)} ms/{unit} (% of window)")
        if i:
            head.append(f"Δ {_label(t)}")
    right = tuple(range(1, len(head)))
    out = [f"## Time per {unit}: non-overlapped GPU time per kernel category, and non-GPU time", "",
           "Each category's share of the busy time (overlapping kernels split equally); `non_gpu` = steady window − "
           "GPU busy. The parts add up to the window time per " + unit + ".", ""]
    out += _table(head, _per_unit_rows(d, "categories"), right)
    out += ["", f"## GPU idle per {unit} by cause", "",
            "Where the non-GPU time went (docs/MODEL.md: every idle ns is charged to one cause).", ""]
    out += _table(["cause kind"] + head[1:], _per_unit_rows(d, "idle_by_kind"), right)
    return out + [""]


def _pair_sections(c: Mapping[str, Any], unit: str, top: int) -> List[str]:
    title = f"{md_name(c['new'], 40)} vs {md_name(c['base'], 40)}"
    out = [f"## Top kernel changes: {title}", "",
           f"Kernel time per {unit} by name (steady window, all devices), largest absolute change first.", ""]
    rows = []
    for k in c["kernel_deltas"][:top]:
        rows.append([md_name(k["name"]), fmt_ms(k["base_per_unit_ns"]), fmt_ms(k["new_per_unit_ns"]),
                     _signed_ms(k["delta_per_unit_ns"]), _signed_pct(k["change_pct"]),
                     f"{fmt_int(k['base_count'])} → {fmt_int(k['new_count'])}"])
    out += _table(["kernel", f"BASE ms/{unit}", f"NEW ms/{unit}", "Δ ms", "change", "instances"], rows,
                  right=(1, 2, 3, 4, 5))
    out += ["", f"## Findings: {title}", ""]
    rows = [[md_cell(f["id"]), md_cell(f["category"]), CHANGE_TEXT.get(f["change"], md_cell(f["change"])),
             md_cell(f["base_severity"] or "–"), md_cell(f["new_severity"] or "–"), md_rich(f["title"], False)]
            for f in c["finding_changes"]]
    out += _table(["finding", "category", "change", "BASE", "NEW", "title (NEW, else BASE)"], rows)
    return out + [""]


def render_compare_markdown(d: Mapping[str, Any], top: Optional[int] = None) -> str:
    traces = d["traces"]
    unit = UNIT_WORD.get(d["metric"]["basis"], "unit")
    names = ", ".join(_label(t) for t in traces[1:])
    out = [f"# Trace comparison: {names} vs BASE {_label(traces[0])}", ""]
    for c in d["comparisons"]:
        out += [md_rich(line) + "  " for line in c["headline"]]
        out[-1] = out[-1].rstrip()
        out.append("")
    out += _metric_section(d, unit)
    out += _traces_section(d, unit)
    out += _stack_section(d, unit)
    for c in d["comparisons"]:
        out += _pair_sections(c, unit, top or KERNEL_ROWS)
    if d.get("warnings"):
        out += ["## Warnings", ""] + [f"- {md_text(w, line_start=False)}" for w in d["warnings"]] + [""]
    out += [f"Generated by nsys-llm-explain {md_text(d['tool_version'], False)} (compare.json schema "
            f"{md_text(d['schema_version'], False)}).", ""]
    return "\n".join(out)
