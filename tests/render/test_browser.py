"""report.html in a real browser (headless Chromium): the charts are drawn, nothing logs a console error,
nothing but the file itself is requested, table headers sort, and hostile kernel / NVTX / process names show
as text and run nothing.

Driven with Selenium and Debian's ``chromium`` + ``chromium-driver`` (the driver is built from the same
source as the browser, so their versions always match, and both come from the distribution: nothing is
downloaded at test time). Selenium gives the browser's console log (``goog:loggingPrefs``) and the network
log, and its CDP bridge installs the alert trap before the page's scripts run. The tests skip only when no
browser or driver is found, with a message naming what was tried; ``.ci/run`` installs them first.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Tuple

import pytest
from conftest import as_report, built_scenario
from test_html import EVIL_FILE, EVIL_IMG, EVIL_LINK, EVIL_SCRIPT, build_hostile, figures

pytestmark = pytest.mark.slow

BROWSERS = ("/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome")
DRIVERS = ("/usr/bin/chromedriver", "chromedriver")
#: flags for a root, headless, offline machine (no sandbox as root; no background connections to Google)
FLAGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-quic",
         "--disable-extensions", "--window-size=1280,2000")
#: runs before any script of the page: alert/confirm/prompt only record that they were called
TRAP_JS = ("window.__alerted = undefined; ['alert', 'confirm', 'prompt'].forEach(function (f) {"
           " window[f] = function () { window.__alerted = f; }; });")
LOAD_TIMEOUT_S = 60


def _find(candidates: Tuple[str, ...], env: str) -> Tuple[str, List[str]]:
    tried = [os.environ[env]] if os.environ.get(env) else []
    tried += list(candidates)
    for c in tried:
        path = c if os.path.isabs(c) else shutil.which(c)
        if path and os.path.isfile(path) and os.access(path, os.X_OK):
            return path, tried
    return "", tried


@pytest.fixture(scope="module")
def driver() -> Iterator[Any]:
    browser, tried_b = _find(BROWSERS, "NLE_CHROMIUM")
    chromedriver, tried_d = _find(DRIVERS, "NLE_CHROMEDRIVER")
    if not browser or not chromedriver:
        found_b = f"found at {browser}" if browser else f"not found (tried {', '.join(tried_b)})"
        found_d = f"found at {chromedriver}" if chromedriver else f"not found (tried {', '.join(tried_d)})"
        pytest.skip(f"NO BROWSER — report.html browser tests SKIPPED: browser {found_b}; driver {found_d}; "
                    "install Debian's chromium and chromium-driver (apt-get install -y chromium chromium-driver) "
                    "or set NLE_CHROMIUM / NLE_CHROMEDRIVER")
    from selenium import webdriver  # a declared test dependency: fails loudly when missing
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = browser
    for flag in FLAGS:
        opts.add_argument(flag)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    drv = webdriver.Chrome(service=Service(executable_path=chromedriver), options=opts)
    drv.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": TRAP_JS})
    try:
        yield drv
    finally:
        drv.quit()


def open_page(drv: Any, path: Path) -> Dict[str, Any]:
    """Load ``path`` and wait until its boot script has drawn every chart; return what the page logged and
    requested (console entries at SEVERE, every request URL) and the number of figures it holds."""
    drv.get_log("browser")
    drv.get_log("performance")
    drv.get(path.resolve().as_uri())
    n = len(figures(path.read_text(encoding="utf-8")))
    deadline = time.time() + LOAD_TIMEOUT_S
    while time.time() < deadline:
        done = drv.execute_script(
            "return document.body && document.body.getAttribute('data-charts') !== null && "
            "document.querySelectorAll('.js-plotly-plot').length >= arguments[0];", n)
        if done:
            break
        time.sleep(0.2)
    time.sleep(0.5)  # plotly finishes drawing asynchronously
    logs = drv.get_log("browser")
    urls = []
    for entry in drv.get_log("performance"):
        msg = json.loads(entry["message"])["message"]
        if msg.get("method") == "Network.requestWillBeSent":
            urls.append(msg["params"]["request"]["url"])
    return {"severe": [e for e in logs if e.get("level") == "SEVERE"], "urls": urls, "figures": n}


def assert_charts_drawn(drv: Any, page: Dict[str, Any]) -> None:
    n = page["figures"]
    assert n > 0
    assert drv.execute_script("return document.body.getAttribute('data-charts');") == str(n)
    drawn = drv.execute_script(
        "return Array.prototype.map.call(document.querySelectorAll('div.chart'), function (el) {"
        " return [el.id, el.classList.contains('js-plotly-plot'), el.querySelectorAll('svg.main-svg').length,"
        " el.querySelectorAll('g.points path').length]; });")
    assert len(drawn) == n
    for fid, is_plot, svgs, marks in drawn:
        assert is_plot and svgs >= 1, (fid, is_plot, svgs)
        assert marks > 0, f"{fid}: no bar or point drawn"
    assert page["severe"] == [], page["severe"]
    # nothing but the page itself (and data: URIs) was requested
    assert page["urls"] and all(u.startswith(("file:", "data:", "about:")) for u in page["urls"]), page["urls"]


def test_console_errors_are_collected(driver: Any, tmp_path: Path) -> None:
    """The log collection works (so an empty SEVERE list below means something)."""
    p = tmp_path / "probe.html"
    p.write_text("<!DOCTYPE html><html><body><script>console.error('probe-error');"
                 "document.body.setAttribute('data-charts', '0');</script></body></html>", encoding="utf-8")
    driver.get(p.as_uri())
    assert any("probe-error" in e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE")


@pytest.fixture(scope="module")
def demo_page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from conftest import run_cli

    out = tmp_path_factory.mktemp("browser") / "demo"
    proc = run_cli("demo", "--out", str(out), "--quiet")
    assert proc.returncode == 0, proc.stderr
    return out / "report.html"


def test_demo_page_draws_every_chart_without_errors(driver: Any, demo_page: Path) -> None:
    page = open_page(driver, demo_page)
    assert_charts_drawn(driver, page)
    ids = driver.execute_script("return Array.prototype.map.call(document.querySelectorAll('div.chart'),"
                                " function (el) { return el.id; });")
    assert {"timeline-0", "timeline-1", "idle-causes-0", "categories-chart", "steps-series"} <= set(ids)
    # the timeline stacks busy + every idle kind of the device
    traces = driver.execute_script("return document.getElementById('timeline-0').data.map("
                                   "function (t) { return t.name; });")
    assert traces[0] == "busy (kernels)" and any(t.startswith("idle: ") for t in traces)


def test_kernel_table_sorts_by_clicked_header(driver: Any, demo_page: Path) -> None:
    from selenium.webdriver.common.by import By

    open_page(driver, demo_page)
    header = driver.find_element(By.XPATH, "//table[@id='top-kernels']//th[normalize-space()='calls']")

    def column() -> List[float]:
        return driver.execute_script(
            "return Array.prototype.map.call(document.querySelectorAll('#top-kernels tbody td[data-k=count]'),"
            " function (td) { return parseFloat(td.getAttribute('data-v')); });")

    header.click()
    assert column() == sorted(column(), reverse=True) and header.get_attribute("aria-sort") == "descending"
    header.click()
    assert column() == sorted(column()) and header.get_attribute("aria-sort") == "ascending"
    assert len(set(column())) > 1


def test_hostile_names_show_as_text_and_run_nothing(driver: Any, tmp_path: Path) -> None:
    from nsys_llm_explainer.pipeline import analyze_path
    from nsys_llm_explainer.render import HtmlRenderer
    from nsys_llm_explainer.render.escape import shorten
    from nsys_llm_explainer.render.sections.idle import LABEL_DETAIL

    trace = tmp_path / EVIL_FILE
    build_hostile(trace)
    data = analyze_path(str(trace)).to_dict()
    HtmlRenderer().render(as_report(data), tmp_path / "out")
    page = open_page(driver, tmp_path / "out" / "report.html")
    assert_charts_drawn(driver, page)
    state = driver.execute_script(
        "return {pwned: typeof window.__pwned, alerted: window.__alerted === undefined ? null : window.__alerted,"
        " imgs: document.images.length, scripts: document.scripts.length, text: document.body.innerText,"
        " links: document.querySelectorAll('svg a, a[href^=\"javascript\"]').length,"
        " ticks: document.getElementById('idle-causes-0').textContent};")
    assert state["pwned"] == "undefined" and state["alerted"] is None
    assert state["imgs"] == 0 and state["scripts"] == 3 and state["links"] == 0
    for evil in (EVIL_IMG, EVIL_SCRIPT, EVIL_LINK, EVIL_FILE):
        assert evil in state["text"], evil
    # NVTX range names (as charged idle causes) are chart labels: shown literally by plotly, not as markup
    details = [c["detail"] for c in data["idle_causes"]["devices"][0]["causes"] if c["kind"] == "nvtx"]
    shown = [f"nvtx: {shorten(d, LABEL_DETAIL)}" for d in details]
    assert len(shown) == 3 and all(s in state["ticks"] for s in shown), (shown, state["ticks"])


def test_compare_page_draws_and_hostile_labels_stay_inert(driver: Any, tmp_path: Path) -> None:
    """compare.html of two planted-cause scenarios with markup in the labels and kernel names: the stacked bars
    are drawn, no console error, nothing requested, the labels show as text and run nothing."""
    import nsys_llm_explainer as nle
    from nsys_llm_explainer.comparison.write import write_compare

    paths = []
    for name in ("healthy", "per_token_sync"):
        p = tmp_path / f"{name}.sqlite"
        built_scenario(name, str(p))
        paths.append(str(p))
    hostile = tmp_path / EVIL_FILE
    build_hostile(hostile)
    labels = ["base" + EVIL_IMG, "new" + EVIL_SCRIPT]
    write_compare(nle.compare(paths, labels=labels), tmp_path / "cmp")
    page = open_page(driver, tmp_path / "cmp" / "compare.html")
    assert_charts_drawn(driver, page)
    state = driver.execute_script(
        "return {pwned: typeof window.__pwned, alerted: window.__alerted === undefined ? null : window.__alerted,"
        " imgs: document.images.length, text: document.body.innerText};")
    assert state["pwned"] == "undefined" and state["alerted"] is None and state["imgs"] == 0
    assert all(label in state["text"] for label in labels)
    # the hostile trace compares too (too different to gate), its page stays inert
    write_compare(nle.compare([paths[0], str(hostile)], labels=["a", "b" + EVIL_LINK]), tmp_path / "cmp2")
    page = open_page(driver, tmp_path / "cmp2" / "compare.html")
    assert page["severe"] == [] and all(u.startswith(("file:", "data:", "about:")) for u in page["urls"])
    assert driver.execute_script("return typeof window.__pwned;") == "undefined"


def test_cluster_page_draws_every_chart_offline_and_hostile_labels_stay_inert(driver: Any, tmp_path: Path) -> None:
    """cluster.html of the planted 4-rank straggler, one file named like markup: the busy/idle, wait, last-arrival
    and skew charts are drawn, no console error, nothing but the file requested, the name shows as text."""
    from conftest import run_cli
    from synth.scenarios import build_cluster

    build_cluster("cluster_straggler", str(tmp_path / "in"))
    evil = tmp_path / "in" / (EVIL_IMG + ".sqlite")
    (tmp_path / "in" / "rank0.sqlite").rename(evil)
    proc = run_cli(str(tmp_path / "in"), "-o", str(tmp_path / "out"), "--quiet", "--jobs", "1")
    assert proc.returncode == 0, proc.stderr
    page = open_page(driver, tmp_path / "out" / "cluster.html")
    assert page["figures"] == 4
    assert_charts_drawn(driver, page)
    state = driver.execute_script(
        "return {pwned: typeof window.__pwned, alerted: window.__alerted === undefined ? null : window.__alerted,"
        " imgs: document.images.length, scripts: document.scripts.length, text: document.body.innerText,"
        " skew: document.getElementById('nccl-skew').data.map(function (t) { return [t.name, t.x.length]; }),"
        " links: Array.prototype.map.call(document.querySelectorAll('a[href^=\"ranks/\"]'),"
        " function (a) { return a.getAttribute('href'); })};")
    assert state["pwned"] == "undefined" and state["alerted"] is None
    assert state["imgs"] == 0 and state["scripts"] == 3
    assert str(evil) in state["text"]
    assert sorted(state["skew"]) == [["last: rank1", 2], ["last: rank3", 8]]
    assert len(set(state["links"])) == 4 and all((tmp_path / "out" / h).is_file() for h in state["links"])


def test_cluster_rank_pages_share_one_plotly_and_draw_offline(driver: Any, tmp_path: Path) -> None:
    """A cluster run writes plotly.js once (beside cluster.html); each ranks/<label>/report.html loads it from there
    (a relative file, allowed by its Content-Security-Policy), draws every chart, logs no error and requests
    nothing but local files — and holds no inlined copy (200 ranks: ~0.1 MB each, not 4.9 MB)."""
    from conftest import run_cli
    from synth.scenarios import build_cluster

    build_cluster("cluster_straggler", str(tmp_path / "in"))
    proc = run_cli(str(tmp_path / "in"), "-o", str(tmp_path / "out"), "--quiet", "--jobs", "1")
    assert proc.returncode == 0, proc.stderr
    shared = tmp_path / "out" / "plotly.min.js"
    assert shared.stat().st_size > 1_000_000
    pages = sorted((tmp_path / "out" / "ranks").glob("*/report.html"))
    assert len(pages) == 4 and all(p.stat().st_size < 1_000_000 for p in pages)
    page = open_page(driver, pages[0])
    assert_charts_drawn(driver, page)
    assert any(u.endswith("/plotly.min.js") for u in page["urls"]), page["urls"]
