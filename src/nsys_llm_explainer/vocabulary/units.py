"""The one formatter per unit: how every output (Markdown, HTML, terminal lines, chart coordinates, CSV) writes a
duration, a timestamp, a percentage, a count, a size. Pure functions of a number; any package may import them. A
missing value (``None``, NaN, a non-number) is written ``–`` (:data:`DASH`); ``exact_decimal`` writes ``""``. A
negative duration, timestamp or percentage, and every signed change, is written with the minus sign ``−`` (U+2212),
never ``-`` (``exact_decimal``, the CSV's exact decimal, keeps ``-``: a number for machines).
"""

from __future__ import annotations

import math
from typing import Any, Optional

DASH = "–"


def _minus(text: str) -> str:
    """``text`` (a formatted number) with a leading ``-`` written as the minus sign ``−``."""
    return "−" + text[1:] if text.startswith("-") else text


def num(x: Any) -> Optional[float]:
    """``x`` as a finite float, else ``None`` (booleans, strings, NaN are not numbers here)."""
    if x is None or isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    v = float(x)
    return v if math.isfinite(v) else None


def fmt_ms(ns: Any, unit: bool = False) -> str:
    """ns / 10⁶ with 3 decimals (``1,234.567``; with ``unit``: ``1,234.567 ms``)."""
    v = num(ns)
    return DASH if v is None else _minus(f"{v / 1e6:,.3f}") + (" ms" if unit else "")


def fmt_us(ns: Any, unit: bool = False) -> str:
    """ns / 10³ with 2 decimals (``48.20``; with ``unit``: ``48.20 µs``)."""
    v = num(ns)
    return DASH if v is None else _minus(f"{v / 1e3:,.2f}") + (" µs" if unit else "")


def fmt_us_unit(ns: Any) -> str:
    """ns / 10³ with 2 decimals and its unit (``48.20 µs``): a per-kernel or per-call time in prose."""
    return fmt_us(ns, unit=True)


def fmt_dur(ns: Any) -> str:
    """A duration with its unit: µs (2 decimals) below 1 ms, ms (3 decimals) below 10 s, else s (3 decimals);
    the unit is chosen after rounding (999,999 ns is ``1.000 ms``, not ``1,000.00 µs``). The one formatter of a
    duration in prose (findings, report, compare, cluster)."""
    v = num(ns)
    if v is None:
        return DASH
    if abs(round(v / 1e3, 2)) < 1e3:
        return _minus(f"{v / 1e3:,.2f} µs")
    if abs(round(v / 1e6, 3)) < 1e4:
        return _minus(f"{v / 1e6:,.3f} ms")
    return _minus(f"{v / 1e9:,.3f} s")


def _sign(v: float) -> str:
    """The sign of every signed figure: ``+`` (zero included) or the minus sign ``−`` (U+2212), never ``-``."""
    return "+" if v >= 0 else "−"


def signed_ms(ns: Any, unit: bool = False) -> str:
    """A change in ms with its sign (``+1.250``, ``−0.020``)."""
    v = num(ns)
    return DASH if v is None else _sign(v) + fmt_ms(abs(v), unit)


def signed_dur(ns: Any) -> str:
    """A change as :func:`fmt_dur` writes a duration, with its sign (``+190.00 µs``, ``−12.500 s``)."""
    v = num(ns)
    return DASH if v is None else _sign(v) + fmt_dur(abs(v))


def fmt_at(ns: Any, t0: Any, unit: bool = True) -> str:
    """Timestamp ``ns`` as ms from trace start ``t0`` (the one time base of the reports)."""
    v, z = num(ns), num(t0)
    if v is None or z is None:
        return DASH
    return _minus(f"{(v - z) / 1e6:,.3f}") + (" ms" if unit else "")


def fmt_span(start: Any, end: Any, t0: Any) -> str:
    """A from–to pair of trace times, ``start → end`` as ms from trace start ``t0`` (``0.000 → 213.377 ms``): the
    one formatter of such a pair (tables, window line, findings)."""
    return f"{fmt_at(start, t0, unit=False)} → {fmt_at(end, t0)}"


def fmt_pct(x: Any, decimals: int = 1) -> str:
    v = num(x)
    return DASH if v is None else _minus(f"{v:.{decimals}f}")


def signed_pct(x: Any) -> str:
    """A relative change with its sign and unit (``+12.5 %``, ``−9.2 %``)."""
    v = num(x)
    return DASH if v is None else _sign(v) + f"{abs(v):.1f} %"


def fmt_int(n: Any) -> str:
    v = num(n)
    if v is None:
        return DASH
    return f"{int(v):,}" if v == int(v) else f"{v:,.3f}"


def fmt_count(n: Any, noun: str, plural: str = "") -> str:
    """``n`` as :func:`fmt_int` writes it and its noun, singular for exactly one ("1 call", "2 calls"); ``plural``
    for a noun that does not take an "s" ("copy" / "copies")."""
    return f"{fmt_int(n)} {noun if num(n) == 1 else plural or noun + 's'}"


def fmt_num(x: Any) -> str:
    """Compact number: integers with separators, ≥ 100 rounded to an integer, else ≤ 2 decimals."""
    v = num(x)
    if v is None:
        return DASH if x is None else str(x)
    if v == int(v) or abs(v) >= 100:
        return f"{v:,.0f}"
    return f"{v:.2f}".rstrip("0").rstrip(".")


def fmt_float(x: Any, decimals: int = 3) -> str:
    v = num(x)
    return DASH if v is None else f"{v:,.{decimals}f}"


def fmt_bytes(n: Any) -> str:
    v = num(n)
    if v is None:
        return DASH
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(v) >= scale:
            return f"{v / scale:,.2f} {unit}"
    return f"{int(v)} B"


def fmt_bool(v: Any) -> str:
    return DASH if v is None else ("yes" if v else "no")


def ms_value(ns: Any) -> Optional[float]:
    """ns → ms for a chart coordinate (6 decimals keep every ns)."""
    v = num(ns)
    return None if v is None else round(v / 1e6, 6)


def us_value(ns: Any) -> Optional[float]:
    """ns → µs for a chart coordinate (3 decimals keep every ns)."""
    v = num(ns)
    return None if v is None else round(v / 1e3, 3)


def exact_decimal(ns: Any, digits: int) -> str:
    """Integer ns / 10**digits as an exact decimal string (``""`` for a missing value)."""
    if ns is None or isinstance(ns, bool) or not isinstance(ns, (int, float)):
        return ""
    if isinstance(ns, float):
        if not math.isfinite(ns):
            return ""
        if ns != int(ns):
            return f"{ns / 10**digits:.{digits + 3}f}"
    n = int(ns)
    sign = "-" if n < 0 else ""
    q, r = divmod(abs(n), 10**digits)
    return f"{sign}{q}.{r:0{digits}d}"


__all__ = ["DASH", "exact_decimal", "fmt_at", "fmt_bool", "fmt_bytes", "fmt_dur", "fmt_float", "fmt_int", "fmt_ms",
           "fmt_num", "fmt_pct", "fmt_us", "ms_value", "num", "signed_dur", "signed_ms", "signed_pct", "us_value"]
