"""Renderer base class, the JSON file renderer, and number formatting shared by the renderers.

A renderer turns the report dict (:func:`render.json_report.build_json`) into files inside ``out_dir``
and returns their paths. The caller owns atomicity (it passes a temporary directory and moves it).

Number formats (Markdown only; CSV and JSON keep exact integer ns as well):

* ``fmt_ms(ns)`` — ns / 10⁶ with 3 decimals; ``fmt_us(ns)`` — ns / 10³ with 2 decimals.
* ``fmt_pct(x)`` — a percentage with 2 decimals; ``fmt_int(n)`` — integer with thousands separators.
* ``fmt_bytes(n)`` — decimal units (1 MB = 10⁶ bytes), 2 decimals.
* Missing values (``None``) print as ``–``.
"""

from __future__ import annotations

import json
import math
import re
from collections import abc
from pathlib import Path
from typing import Any, List, Mapping, Optional

DASH = "–"


class Renderer:
    """Base class: ``render(report_dict, out_dir)`` writes files into ``out_dir`` and returns their paths."""

    name: str = "renderer"

    def render(self, report: Mapping[str, Any], out_dir: Path) -> List[Path]:
        raise NotImplementedError


class JsonRenderer(Renderer):
    """``report.json``: the report dict as strict JSON (``allow_nan=False``, 2-space indent)."""

    name = "json"
    filename = "report.json"

    def render(self, report: Mapping[str, Any], out_dir: Path) -> List[Path]:
        out_dir = Path(out_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        path = out_dir / self.filename
        text = json.dumps(report, indent=2, allow_nan=False)
        path.write_text(text + "\n", encoding="utf-8")
        return [path]


def _num(x: Any) -> Optional[float]:
    if x is None or isinstance(x, bool):
        return None
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def fmt_ms(ns: Any) -> str:
    v = _num(ns)
    return DASH if v is None else f"{v / 1e6:,.3f}"


def fmt_us(ns: Any) -> str:
    v = _num(ns)
    return DASH if v is None else f"{v / 1e3:,.2f}"


def fmt_dur(ns: Any) -> str:
    """Duration with its unit: µs (2 decimals) below 1 ms, else ms (3 decimals)."""
    v = _num(ns)
    if v is None:
        return DASH
    return f"{v / 1e3:,.2f} µs" if abs(v) < 1e6 else f"{v / 1e6:,.3f} ms"


def fmt_pct(x: Any, decimals: int = 2) -> str:
    v = _num(x)
    return DASH if v is None else f"{v:.{decimals}f}"


def fmt_int(n: Any) -> str:
    v = _num(n)
    if v is None:
        return DASH
    return f"{int(v):,}" if v == int(v) else f"{v:,.3f}"


def fmt_float(x: Any, decimals: int = 3) -> str:
    v = _num(x)
    return DASH if v is None else f"{v:,.{decimals}f}"


def fmt_bytes(n: Any) -> str:
    v = _num(n)
    if v is None:
        return DASH
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(v) >= scale:
            return f"{v / scale:,.2f} {unit}"
    return f"{int(v)} B"


def section(report: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    """``report[key]`` when it is a dict, else an empty dict (renderers never fail on a missing section)."""
    v = report.get(key) if isinstance(report, abc.Mapping) else None
    return v if isinstance(v, abc.Mapping) else {}


def rows_of(obj: Any, key: Optional[str] = None) -> List[Mapping[str, Any]]:
    """The list of row dicts at ``obj[key]`` (or ``obj`` itself), skipping anything that is not a dict."""
    v = obj.get(key) if (key is not None and isinstance(obj, abc.Mapping)) else (obj if key is None else None)
    if not isinstance(v, list):
        return []
    return [r for r in v if isinstance(r, abc.Mapping)]


#: top-level report keys rendered by dedicated code; any other key is a diagnosis section rendered generically
CORE_KEYS = (
    "schema_version",
    "tool_version",
    "generated_at",
    "trace",
    "options",
    "warnings",
    "findings",
    "kernels",
    "kernels_summary",
    "devices",
    "idle",
    "pids",
    "launch",
    "sync",
    "cuda_api",
    "memcpy",
    "nvtx",
    "timings_s",
)


def extra_section_keys(report: Mapping[str, Any]) -> List[str]:
    """Top-level keys that are not core sections (diagnosis sections added later), in report order."""
    return [
        k
        for k in report
        if k not in CORE_KEYS and not str(k).startswith("_") and isinstance(report[k], (abc.Mapping, list))
    ]


def table_stem(*parts: Any) -> str:
    """CSV file stem for a generic table at ``report[part0][part1]…`` (non-identifier characters → ``_``)."""
    clean = [re.sub(r"[^A-Za-z0-9_]+", "_", str(p)).strip("_") for p in parts]
    return "_".join(c for c in clean if c) or "section"
