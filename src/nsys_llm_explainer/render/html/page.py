"""The page shell: Content-Security-Policy, style sheet, plotly.js (inlined, or the shared copy of a cluster's rank
pages), the figures' JSON and the script that draws the charts and sorts tables (docs/DESIGN.md, "HTML")."""

from __future__ import annotations

import re
from typing import Optional, Sequence, Tuple

from .markup import h

CSP = ("default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:; "
       "font-src data:; connect-src 'none'; base-uri 'none'; form-action 'none'")
#: the policy of a page that loads the plotly.js its directory shares (the rank pages of a cluster run: one copy
#: for all of them): scripts may also come from the page's own origin or, opened from disk, from a local file
SHARED_SCRIPT_CSP = CSP.replace("script-src 'unsafe-inline'", "script-src 'self' file: 'unsafe-inline'")

CSS = """
:root{--fg:#1f2328;--muted:#59636e;--line:#d1d9e0;--bg2:#f6f8fa}
*{box-sizing:border-box}
body{margin:0;font:14px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--fg)}
nav{position:sticky;top:0;z-index:10;background:#fff;border-bottom:1px solid var(--line);padding:6px 24px;
 font-size:13px}
nav a{margin-right:14px;color:#0969da;text-decoration:none}
main{max-width:1200px;margin:0 auto;padding:8px 24px 40px}
section,header,footer{scroll-margin-top:40px}
h1{font-size:22px;margin:16px 0 8px}h2{font-size:19px;border-bottom:1px solid var(--line);padding-bottom:4px;
 margin-top:32px}h3{font-size:15px;margin:18px 0 6px}
code{font:12px ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;background:var(--bg2);padding:1px 4px;
 border-radius:4px;word-break:break-all}
.verdict{font-size:16px;font-weight:600}.action{background:#ddf4ff;padding:6px 10px;border-radius:6px}
.meta,.legend,figcaption,caption{color:var(--muted);font-size:12px}
.warning{background:#fff8c5;border-left:4px solid #d4a72c;padding:6px 10px;margin:6px 0}
.missing{color:var(--muted);font-style:italic}
.finding{border:1px solid var(--line);border-left-width:5px;border-radius:6px;padding:4px 14px;margin:10px 0}
.finding h3{margin:8px 0 4px}.finding ul{margin:4px 0}.facts,.checks{font-size:13px;color:var(--muted)}
.badge{font-size:11px;padding:1px 6px;border-radius:10px;background:#eaeef2;vertical-align:2px}
.sev-critical,.sev-high{border-left-color:#cf222e}.sev-critical .badge,.sev-high .badge{background:#ffebe9}
.sev-medium{border-left-color:#d4a72c}.sev-medium .badge{background:#fff8c5}
.sev-low,.sev-info{border-left-color:#0969da}
figure{margin:8px 0 16px}.chart{width:100%;min-height:120px}
.tw{overflow-x:auto;margin:6px 0 14px}
table{border-collapse:collapse;font-size:12.5px}caption{text-align:left;padding:2px 0}
th,td{border:1px solid var(--line);padding:3px 8px;text-align:left;vertical-align:top}
th{background:var(--bg2);cursor:pointer;user-select:none;white-space:nowrap}
th.n,td.n{text-align:right}td.n{font-variant-numeric:tabular-nums;white-space:nowrap}
th[aria-sort=ascending]::after{content:" \\25B2"}th[aria-sort=descending]::after{content:" \\25BC"}
details summary{cursor:pointer;color:#0969da;font-size:13px}
footer{max-width:1200px;margin:0 auto;padding:0 24px 40px;color:var(--muted);font-size:12px}
"""

#: draws every figure of the JSON block and makes ``table.sortable`` headers sort their column
BOOT_JS = """
(function () {
  "use strict";
  function cellKey(row, col, numeric) {
    var c = row.cells[col];
    var v = c ? (c.hasAttribute("data-v") ? c.getAttribute("data-v") : c.textContent) : "";
    var f = parseFloat(v);
    if (numeric && !isNaN(f)) { return {num: true, v: f}; }
    return {num: false, v: String(v).toLowerCase()};
  }
  function sortBy(th) {
    var table = th.closest("table"), body = table.tBodies[0], heads = th.parentNode.children;
    var col = Array.prototype.indexOf.call(heads, th), numeric = th.classList.contains("n");
    var prev = th.getAttribute("aria-sort");
    var asc = prev ? prev !== "ascending" : !numeric;
    Array.prototype.forEach.call(heads, function (x) { x.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", asc ? "ascending" : "descending");
    var rows = Array.prototype.map.call(body.rows, function (r, i) {
      var k = cellKey(r, col, numeric); k.r = r; k.i = i; return k;
    });
    rows.sort(function (a, b) {
      if (numeric && a.num !== b.num) { return a.num ? -1 : 1; }
      var d = a.num ? a.v - b.v : (a.v < b.v ? -1 : (a.v > b.v ? 1 : 0));
      return (asc ? d : -d) || a.i - b.i;
    });
    rows.forEach(function (x) { body.appendChild(x.r); });
  }
  document.querySelectorAll("table.sortable thead th").forEach(function (th) {
    th.addEventListener("click", function () { sortBy(th); });
    th.addEventListener("keydown", function (e) {
      if (e.key === "Enter" || e.key === " ") { e.preventDefault(); sortBy(th); }
    });
  });
  var spec = JSON.parse(document.getElementById("nle-figures").textContent);
  if (typeof Plotly === "undefined") {
    document.querySelectorAll(".chart").forEach(function (el) {
      el.textContent = "The chart library did not load; the tables and report.json hold the same numbers.";
    });
    return;
  }
  spec.figures.forEach(function (f) {
    var el = document.getElementById(f.id);
    if (f.shared) {
      f.data.forEach(function (t) {
        Object.keys(f.shared).forEach(function (k) { if (!(k in t)) { t[k] = f.shared[k]; } });
      });
    }
    if (el) { Plotly.newPlot(el, f.data, f.layout, spec.config); }
  });
  document.body.setAttribute("data-charts", String(spec.figures.length));
})();
"""

_SCRIPT_END = re.compile(r"</(script)", re.IGNORECASE)


def inline_js(js: str) -> str:
    """JavaScript source made safe to sit inside ``<script>…</script>`` (``</script`` → ``<\\/script``, which
    means the same inside a JS string, template or regular expression)."""
    return _SCRIPT_END.sub(r"<\\/\1", js)


def plotly_js() -> str:
    """The plotly.js bundle shipped with the ``plotly`` Python package (a declared dependency: when it cannot be
    imported the command says so in one line, exit 2, as for every declared dependency)."""
    from plotly.offline import get_plotlyjs  # type: ignore[import-untyped]  # plotly ships no type stubs

    return str(get_plotlyjs())


def page(title: str, body: str, figures_json: str, js: str, nav_items: Sequence[Tuple[str, str]] = (),
         footer: str = "", plotly_src: Optional[str] = None) -> str:
    """The complete document (``body`` is already escaped HTML; ``figures_json`` from ``script_json``;
    ``nav_items``: (section id, label) of the navigation; ``footer``: escaped HTML after ``<main>``;
    ``plotly_src``: a relative path to a shared plotly.js loaded instead of inlining ``js``, the plotly.js source)."""
    links = "".join(f'<a href="#{h(sid)}">{h(label)}</a>' for sid, label in nav_items)
    nav = f"<nav>{links}</nav>" if links else ""
    csp = CSP if plotly_src is None else SHARED_SCRIPT_CSP
    lib = (f"<script>{inline_js(js)}</script>" if plotly_src is None
           else f'<script src="{h(plotly_src)}"></script>')
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f'<meta http-equiv="Content-Security-Policy" content="{h(csp)}">'
        '<meta name="referrer" content="no-referrer">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{h(title)}</title><style>{CSS}</style></head>\n<body>"
        f"{nav}<main>\n{body}\n</main>{footer}\n"
        f'<script type="application/json" id="nle-figures">{figures_json}</script>\n'
        f"{lib}\n<script>{BOOT_JS}</script>\n</body></html>\n"
    )
