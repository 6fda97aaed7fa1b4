"""What every chart shares: plotly options and layout, the idle-cause colours and legend names, plotly-safe label
text, the horizontal bar chart. Figures are plain plotly dicts; values are the report's in display units."""

from __future__ import annotations

import html
from typing import Any, Dict, Iterable, List

from ..vocabulary.cause_kinds import CAUSE_KINDS, KINDS
from ..vocabulary.units import ms_value
from .document import Figure, Inline
from .escape import shorten

#: characters kept for a name in a chart label
PLOT_NAME_LIMIT = 70

#: colours of the timeline / idle-cause charts: busy, then each idle-cause kind (docs/MODEL.md precedence)
KIND_COLORS: Dict[str, str] = {"busy": "#2e7d32", **{k.name: k.color for k in CAUSE_KINDS}}
SPARE_COLORS = ("#8d6e63", "#78909c", "#d81b60", "#7cb342", "#039be5", "#fb8c00")

#: plotly options of every chart: no plotly logo or cloud links, SVG download, responsive width
PLOT_CONFIG: Dict[str, Any] = {"displaylogo": False, "responsive": True, "showLink": False,
                               "showSendToCloud": False, "showEditInChartStudio": False,
                               "toImageButtonOptions": {"format": "svg"}}

#: the legend name of busy time in stacked busy / idle-by-cause bars (timeline, cluster.html)
BUSY_LABEL = "busy (kernels)"


def in_kind_order(kinds: Iterable[str]) -> List[str]:
    """Idle-cause kinds in the precedence order of docs/MODEL.md, any other after them, sorted."""
    seen = set(kinds)
    return [k for k in KINDS if k in seen] + sorted(seen - set(KINDS))


def kind_color(kind: str, i: int = 0) -> str:
    return KIND_COLORS.get(kind, SPARE_COLORS[i % len(SPARE_COLORS)])


def plot_text(text: Any, limit: int = PLOT_NAME_LIMIT) -> str:
    """Text for a plotly label or hover: shortened, control characters removed, ``& < >`` as entities (plotly
    renders a subset of HTML in labels, so the entities show literally)."""
    return html.escape(shorten("" if text is None else str(text), limit), quote=False)


def idle_label(kind: Any) -> str:
    """The legend name of one idle-cause kind in stacked busy / idle-by-cause bars (plotly-escaped)."""
    return f"idle: {plot_text(kind)}"


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


def hbar(fid: str, labels: List[str], values_ns: List[Any], colors: List[str], hover: List[str],
         caption: Inline) -> Figure:
    """A horizontal bar chart in ms, first row on top; labels are tick texts (already plotly-escaped)."""
    idx = list(range(len(labels)))
    data: List[Dict[str, Any]] = [{"type": "bar", "orientation": "h", "y": idx, "x": [ms_value(v) for v in values_ns],
                                   "marker": {"color": colors}, "hovertext": hover, "hoverinfo": "text",
                                   "showlegend": False}]
    lay = layout(max(160, 60 + 26 * len(labels)), "ms", "")
    lay["yaxis"].update({"tickvals": idx, "ticktext": labels, "autorange": "reversed", "automargin": True})
    lay["margin"]["l"] = 20
    return Figure(fid, data, lay, caption)
