"""What every HTML section reads (the report dict, the capture-start time base) and the figures it adds.

A section function takes an :class:`HtmlCtx` and returns the section's HTML (``None`` when it does not
apply). Charts are plain plotly figure dicts (``{"data": [...], "layout": {...}}``) collected with
:meth:`HtmlCtx.figure`, which returns the placeholder ``<div>``; the page embeds all of them once as JSON and
a small script draws them. No metric is derived here: values are the dict's, converted to display units.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Mapping, Optional

from ...vocabulary.cause_kinds import CAUSE_KINDS
from ..base import ReportView, fmt_at
from .markup import h, plot_text, script_json

Section = Callable[["HtmlCtx"], Optional[str]]

#: colours of the timeline / idle-cause charts: busy, then each idle-cause kind (docs/MODEL.md precedence)
KIND_COLORS: Dict[str, str] = {"busy": "#2e7d32", **{k.name: k.color for k in CAUSE_KINDS}}
SPARE_COLORS = ("#8d6e63", "#78909c", "#d81b60", "#7cb342", "#039be5", "#fb8c00")

#: plotly options of every chart: no plotly logo or cloud links, SVG download, responsive width
PLOT_CONFIG: Dict[str, Any] = {"displaylogo": False, "responsive": True, "showLink": False,
                               "showSendToCloud": False, "showEditInChartStudio": False,
                               "toImageButtonOptions": {"format": "svg"}}


def kind_color(kind: str, i: int = 0) -> str:
    return KIND_COLORS.get(kind, SPARE_COLORS[i % len(SPARE_COLORS)])


#: the legend name of busy time in stacked busy / idle-by-cause bars (timeline, cluster.html)
BUSY_LABEL = "busy (kernels)"


def idle_label(kind: Any) -> str:
    """The legend name of one idle-cause kind in stacked busy / idle-by-cause bars (plotly-escaped)."""
    return f"idle: {plot_text(kind)}"


def ms(ns: Any) -> Optional[float]:
    """ns → ms for a chart coordinate (6 decimals keep every ns)."""
    if ns is None or isinstance(ns, bool) or not isinstance(ns, (int, float)):
        return None
    return round(ns / 1e6, 6)


def us(ns: Any) -> Optional[float]:
    """ns → µs for a chart coordinate (3 decimals keep every ns)."""
    if ns is None or isinstance(ns, bool) or not isinstance(ns, (int, float)):
        return None
    return round(ns / 1e3, 3)


def layout(height: int, xtitle: str = "", ytitle: str = "", **extra: Any) -> Dict[str, Any]:
    """The shared layout of every chart (fonts, margins, white background); ``extra`` overrides keys."""
    base: Dict[str, Any] = {
        "height": height, "margin": {"l": 70, "r": 20, "t": 30, "b": 50},
        "font": {"family": "system-ui, -apple-system, Segoe UI, Roboto, sans-serif", "size": 12},
        "paper_bgcolor": "#ffffff", "plot_bgcolor": "#ffffff", "hoverlabel": {"namelength": -1},
        "xaxis": {"title": {"text": xtitle}, "zeroline": False, "gridcolor": "#eeeeee"},
        "yaxis": {"title": {"text": ytitle}, "zeroline": False, "gridcolor": "#eeeeee"},
        "legend": {"orientation": "h", "y": -0.25},
    }
    base.update(extra)
    return base


class HtmlCtx(ReportView):
    """The report dict and the state of one HTML rendering (the figures collected so far)."""

    def __init__(self, report: Mapping[str, Any]) -> None:
        super().__init__(report)
        self.figures: List[Dict[str, Any]] = []

    def at(self, ns: Any, unit: bool = True) -> str:
        """A timestamp as ms from capture start (``window.full_start_ns``), as text."""
        return fmt_at(ns, self.t0, unit)

    def span(self, start: Any, end: Any) -> str:
        return f"{fmt_at(start, self.t0, unit=False)} → {fmt_at(end, self.t0)}"

    def rel_ms(self, ns: Any) -> Optional[float]:
        """A timestamp as ms from capture start, for a chart coordinate."""
        if ms(ns) is None or ms(self.t0) is None:
            return None
        return round((ns - self.t0) / 1e6, 6)

    def device(self, dev: Any) -> str:
        """``Device 0 (GPU name)``, escaped."""
        gpu = self.gpu_names.get(dev)
        return f"Device {h(dev)}" + (f" ({h(gpu)})" if gpu else "")

    def figure(self, fid: str, data: List[Dict[str, Any]], lay: Dict[str, Any], caption: str,
               shared: Optional[Dict[str, Any]] = None) -> str:
        """Register a chart; return its placeholder and caption (``caption`` is already escaped HTML).
        ``shared`` holds arrays (``x``, ``width``) that the page copies into every trace lacking them, so a
        stacked chart ships its bin positions once."""
        fig: Dict[str, Any] = {"id": fid, "data": data, "layout": lay}
        if shared:
            fig["shared"] = shared
        self.figures.append(fig)
        return (f'<figure><div id="{h(fid)}" class="chart" role="img" aria-label="chart; text equivalent '
                f'in the caption"></div><figcaption>{caption}</figcaption></figure>')

    def figures_json(self) -> str:
        return script_json({"config": PLOT_CONFIG, "figures": self.figures})
