"""cluster.html of the planted 4-rank straggler (synth ``cluster_straggler``; hand-computed answers in
tests/cli/test_cluster.py and synth/scenarios/cluster.py): the numbers the page states, the charts and their text
equivalents, links to each rank's report, the not-aligned case, the skew-point cap, and hostile labels."""

from __future__ import annotations

import copy
import json
import os
import re
from pathlib import Path
from typing import Any, Dict, Tuple

import pytest
from conftest import run_cli
from synth.scenarios import build_cluster
from test_html import EVIL_IMG, EVIL_LINK, EVIL_SCRIPT, Page, figures, without_plotly

from nsys_llm_explainer.cluster import ClusterResult
from nsys_llm_explainer.cluster.write import write_cluster_files
from nsys_llm_explainer.output import MANIFEST
from nsys_llm_explainer.render.charts import KIND_COLORS
from nsys_llm_explainer.render.cluster import render_cluster_html, report_href
from nsys_llm_explainer.render.cluster.nccl import MAX_SKEW_POINTS, TOP_SKEWS, plotted_instances
from nsys_llm_explainer.render.html.page import CSP
from nsys_llm_explainer.vocabulary.cause_kinds import KINDS

US = 1_000
#: hand-computed (synth/scenarios/cluster.py): waits in µs, rank 3 last in 8 of 10, rank 1 in the last 2
WAIT_US = {"rank0": 2360, "rank1": 1760, "rank2": 2160, "rank3": 460}
LAST = {"rank0": 0, "rank1": 2, "rank2": 0, "rank3": 8}
EVIL_BIDI = "\u202eevil\u2066"
EVIL_ESC = "\x1b[31mred\x1b]8;;x\x07"
HOSTILE_FILE = EVIL_IMG + ".sqlite"


def _cluster(tmp: Path, **kw: Any) -> Tuple[Path, Dict[str, Any], str]:
    """Build the straggler into ``tmp/in``, run the CLI into ``tmp/out``; (out dir, cluster.json, cluster.html)."""
    build_cluster("cluster_straggler", str(tmp / "in"), **kw)
    out = tmp / "out"
    proc = run_cli(str(tmp / "in"), "-o", str(out), "--quiet", "--jobs", "1")
    assert proc.returncode == 0, proc.stderr
    return (out, json.loads((out / "cluster.json").read_text(encoding="utf-8")),
            (out / "cluster.html").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def straggler(tmp_path_factory: pytest.TempPathFactory) -> Tuple[Path, Dict[str, Any], str]:
    return _cluster(tmp_path_factory.mktemp("cluster_html"))


def _by_key(page: Page, tid: str, key: str) -> Dict[str, Tuple[Any, str]]:
    """rank → (data-v, shown text) of column ``key`` of table ``tid`` (the rank is the first cell)."""
    out = {}
    for row in page.rows(tid):
        cells = {a.get("data-k"): (a.get("data-v"), text) for a, text in row}
        out[row[0][1]] = cells[key]
    return out


def test_page_is_written_listed_and_offline(straggler) -> None:
    out, _, text = straggler
    assert "cluster.html" in json.loads((out / MANIFEST).read_text(encoding="utf-8"))["files"]
    page = Page(text)
    assert [m.get("content") for m in page.metas if m.get("http-equiv") == "Content-Security-Policy"] == [CSP]
    small = without_plotly(text)
    assert len(text) - len(small) > 1_000_000            # plotly.js is inlined …
    assert not re.search(r"https?://", small)              # … and nothing else names a URL
    assert not [a for t, a in page.tags if t in ("img", "link", "iframe", "object", "embed")]
    assert all(not a.get("src") for t, a in page.tags if t == "script") and len(page.scripts) == 3


def test_headline_claims_and_clock_statement(straggler) -> None:
    _, d, text = straggler
    page = Page(text)
    assert "Cluster report4 files, 4 devices." in page.text
    assert "rank3 is the rank the others wait for at NCCL collectives" in page.titles
    assert page.text.index("rank3 is the rank") < page.text.index("Ranks (steady window")   # headline first
    assert "Clocks: aligned on the session start times (UTC)" in page.text
    # the claim's evidence and checks, as the text says them
    assert "rank3 arrives last in 80% (8 of 10) of the matched NCCL collectives" in page.text
    assert "the other ranks wait 2.093 ms each in total" in page.text
    assert "last_arrivals 8 ≥ 2" in page.text and "wait_caused_share 0.78 ≥ 0.6" in page.text
    assert "matched 10 ≥ 5" in page.text
    assert page.values["time_at_stake_ns"][0] == str(round((2360 + 1760 + 2160) * US / 3))


def test_nccl_numbers_tables_and_charts(straggler) -> None:
    _, d, text = straggler
    page = Page(text)
    waits = _by_key(page, "nccl-ranks", "wait_ns_total")
    assert {r: int(v) for r, (v, _) in waits.items()} == {r: w * US for r, w in WAIT_US.items()}
    assert {r: s for r, (_, s) in waits.items()} == {"rank0": "2.360", "rank1": "1.760", "rank2": "2.160",
                                                    "rank3": "0.460"}
    last = _by_key(page, "nccl-ranks", "last_arrival_count")
    assert {r: (int(v), s) for r, (v, s) in last.items()} == {r: (n, str(n)) for r, n in LAST.items()}
    assert _by_key(page, "nccl-ranks", "last_arrival_share")["rank3"] == ("0.8", "80 %")
    assert _by_key(page, "nccl-ranks", "wait_p50_ns")["rank0"] == (str(230 * US), "0.230")
    coll = page.rows("nccl-collectives")
    assert len(coll) == 1
    cells = {a.get("data-k"): (a.get("data-v"), s) for a, s in coll[0]}
    assert cells["matched"] == ("10", "10") and cells["most_late_rank"][1] == "rank3"
    assert cells["skew_max_ns"] == (str(260 * US), "0.260") and cells["skew_p50_ns"][0] == str(230 * US)

    figs = figures(text)
    assert list(figs) == ["rank-busy", "nccl-wait", "nccl-last", "nccl-skew"]
    wait = figs["nccl-wait"]["data"][0]
    assert wait["y"] == [WAIT_US[f"rank{r}"] / 1000 for r in range(4)]
    assert figs["nccl-wait"]["layout"]["xaxis"]["ticktext"] == ["rank0", "rank1", "rank2", "rank3"]
    assert figs["nccl-last"]["data"][0]["y"] == [0.0, 0.2, 0.0, 0.8]
    assert "8 of 10" in figs["nccl-last"]["data"][0]["hovertext"][3]
    skew = {t["name"]: t for t in figs["nccl-skew"]["data"]}
    assert set(skew) == {"last: rank3", "last: rank1"}
    assert skew["last: rank3"]["x"] == list(range(8)) and skew["last: rank3"]["y"] == [230.0] * 8
    assert skew["last: rank1"]["x"] == [8, 9] and skew["last: rank1"]["y"] == [260.0, 260.0]
    # the late rank's colour is its bar colour in the wait chart
    assert skew["last: rank3"]["marker"]["color"] == wait["marker"]["color"][3]
    assert "all 10 matched instances" in text


def test_rank_chart_uses_report_idle_colours_and_labels(straggler) -> None:
    _, d, text = straggler
    fig = figures(text)["rank-busy"]
    names = [t["name"] for t in fig["data"]]
    kinds = [k for k in KINDS if k in d["devices"][0]["idle_by_kind"]]
    assert names == ["busy (kernels)"] + [f"idle: {k}" for k in kinds]
    assert kinds == ["queued", "sync", "module_load", "launch", "nvtx", "host_cpu"]
    assert [k for k in KIND_COLORS if k != "busy"] == list(KINDS)   # the page orders kinds by report.html's colours
    assert [t["marker"]["color"] for t in fig["data"]] == [KIND_COLORS["busy"]] + [KIND_COLORS[k] for k in kinds]
    assert fig["data"][0]["y"] == [5.56] * 4                    # busy 5,560 µs of a 9,600 µs window
    assert fig["data"][names.index("idle: host_cpu")]["y"] == [3.84] * 4
    assert fig["layout"]["barmode"] == "stack"
    assert fig["layout"]["xaxis"]["ticktext"][3] == "rank3<br>57.9 % busy"
    page = Page(text)
    busy = _by_key(page, "ranks-table", "busy_pct")
    assert busy["rank0"] == (str(d["devices"][0]["busy_pct"]), "57.9")
    assert _by_key(page, "ranks-table", "idle_host_cpu_ns")["rank2"] == ("3840000", "3.840")


def test_cluster_json_reads_back_typed_and_renders_the_same(straggler) -> None:
    """cluster.json → ``ClusterResult.from_dict`` → the same dict, typed rows with the planted numbers, and the same
    cluster.md / cluster.html / CSVs as the run wrote; a dict of another schema or with a part missing is refused
    in one line naming the key."""
    from nsys_llm_explainer.errors import InputError
    from nsys_llm_explainer.render.cluster import render_cluster_markdown
    from nsys_llm_explainer.render.cluster.tables import CLAIMS, RANKS

    out, d, text = straggler
    res = ClusterResult.from_dict(d)
    assert res.to_dict() == d and ClusterResult.from_dict(res.to_dict()) == res
    assert {r.rank: r.wait_ns_total for r in res.collectives.ranks} == {r: w * US for r, w in WAIT_US.items()}
    assert {r.rank: r.last_arrival_count for r in res.collectives.ranks} == LAST
    assert [r.rank for r in res.devices] == ["rank0", "rank1", "rank2", "rank3"] and res.files[3].label == "rank3"
    late = res.claims[0]
    assert (late.rank, late.finding.id, late.finding.category, late.finding.confidence) == (
        "rank3", "late_arriver", "nccl_wait", "high") and late.finding.holds()
    # the last rows: the waiting matters (5.28 ms of 3 × 9.6 ms), what made rank 3 late (its GPU busy up to
    # the all-reduce: 2 µs idle of 230 µs late)
    assert [c.scope.rank for c in late.finding.checks] == [None, None, "rank3", "rank3", "rank3", "rank3", "rank3",
                                                           None, None, None, "rank3", "rank3"]
    assert render_cluster_markdown(res) == (out / "cluster.md").read_text(encoding="utf-8")
    assert render_cluster_html(res, rank_pages=[f"rank{r}" for r in range(4)]) == text
    csv = (out / "tables" / "claims.csv").read_text(encoding="utf-8").splitlines()
    assert csv[0] == ",".join(CLAIMS.csv_header()) and csv[1].startswith("late_arriver,rank3,high,")
    assert len(RANKS.csv_rows(res)) == 4
    bad = copy.deepcopy(d)
    del bad["devices"][1]["busy_pct"]
    with pytest.raises(InputError, match=r"^cluster.json.devices\[1\]: missing key 'busy_pct'$"):
        ClusterResult.from_dict(bad)
    bad = {**d, "schema_version": "0.9"}
    with pytest.raises(InputError, match="^cluster.json has schema_version '0.9'"):
        ClusterResult.from_dict(bad)
    bad = copy.deepcopy(d)
    bad["collectives"]["ranks"][0]["wait_ns_total"] = "many"
    with pytest.raises(InputError, match=r"^cluster.json.collectives.ranks\[0\].wait_ns_total: expected an integer"):
        ClusterResult.from_dict(bad)


def test_every_chart_names_its_text_equivalent(straggler) -> None:
    _, _, text = straggler
    caps = re.findall(r'<div id="([^"]+)" class="chart".*?<figcaption>(.*?)</figcaption>', text, re.S)
    assert [c[0] for c in caps] == list(figures(text))
    need = {"rank-busy": ("devices[]", "tables/ranks.csv", "cluster.md"),
            "nccl-wait": ("collectives.ranks[].wait_ns_total", "tables/nccl_ranks.csv", "cluster.md"),
            "nccl-last": ("collectives.ranks[].last_arrival_share", "tables/nccl_ranks.csv"),
            "nccl-skew": ("collectives.instances[]", "tables/nccl_instances.csv")}
    for fid, cap in caps:
        assert "Text equivalent" in cap and all(n in cap for n in need[fid]), (fid, cap)


def test_links_to_each_rank_report(straggler) -> None:
    out, _, text = straggler
    hrefs = [a["href"] for t, a in Page(text).tags if t == "a" and a.get("href", "").startswith("ranks/")]
    assert sorted(set(hrefs)) == [f"ranks/rank{r}/report.html" for r in range(4)]
    assert all((out / h).is_file() for h in hrefs)
    assert report_href("a/../b") == "ranks/a%2F..%2Fb/report.html" and report_href("..") is None


def test_not_aligned_draws_no_cross_rank_timing(tmp_path: Path) -> None:
    _, d, text = _cluster(tmp_path, no_session=True)
    assert not d["alignment"]["aligned"]
    res = ClusterResult.from_dict(d)      # the timed columns are absent from the dict, None in the typed rows
    assert res.collectives.ranks[0].wait_ns_total is None and res.to_dict() == d
    page = Page(text)
    assert "Clocks: NOT aligned — no session start time" in page.text
    assert "no timing chart is drawn" in page.text
    assert list(figures(text)) == ["rank-busy"]
    assert {r: int(v) for r, (v, _) in _by_key(page, "nccl-ranks", "matched").items()} == {
        f"rank{r}": 10 for r in range(4)}
    assert not any(a.get("data-k") == "wait_ns_total" for row in page.rows("nccl-ranks") for a, _ in row)


def test_skew_points_are_capped_and_the_caption_says_so(straggler) -> None:
    _, d, _ = straggler
    big = copy.deepcopy(d)
    base = d["collectives"]["instances"][0]
    n = 3 * MAX_SKEW_POINTS + 7
    big["collectives"]["instances"] = [{**base, "seq": i, "skew_ns": (i * 7919) % 100_003} for i in range(n)]
    res = ClusterResult.from_dict(big)
    shown = plotted_instances(res.collectives.instances)
    top = sorted(range(n), key=lambda i: -((i * 7919) % 100_003))[:TOP_SKEWS]
    assert len(shown) <= MAX_SKEW_POINTS + TOP_SKEWS and {r.seq for r in shown} >= set(top) | {0, 4}
    text = render_cluster_html(res, js="")
    pts = sum(len(t["x"]) for t in figures(text)["nccl-skew"]["data"])
    assert pts == len(shown)
    assert f"{len(shown):,} of {n:,} matched instances (every 4-th plus the {TOP_SKEWS} largest skews" in text


def _hostile_dict(d: Dict[str, Any]) -> Dict[str, Any]:
    evil = copy.deepcopy(d)
    lab = EVIL_IMG + EVIL_BIDI + EVIL_ESC
    evil["files"][0].update(label=lab, path="/x/" + EVIL_SCRIPT + ".sqlite", headline=EVIL_LINK)
    evil["devices"][0].update(rank=lab, file=lab)
    evil["collectives"]["ranks"][0].update(rank=lab, file=lab)
    evil["collectives"]["by_name"][0]["name"] = "ncclKernel" + EVIL_SCRIPT + EVIL_ESC
    for i in evil["collectives"]["instances"]:
        i.update(name=EVIL_LINK, late_rank=lab)
    evil["claims"][0].update(title=lab + " `" + EVIL_SCRIPT + "`", evidence=[EVIL_LINK + EVIL_BIDI])
    evil["warnings"] = [EVIL_IMG + EVIL_ESC]
    evil["alignment"]["reason"] = EVIL_SCRIPT
    return evil


def test_hostile_labels_in_the_dict_are_inert(straggler) -> None:
    _, d, _ = straggler
    text = render_cluster_html(ClusterResult.from_dict(_hostile_dict(d)), js="")
    page = Page(text)
    assert [t for t, _ in page.tags if t in ("img", "b", "iframe")] == []
    assert [t for t, _ in page.tags].count("script") == 3
    assert not [a for t, a in page.tags if t == "a" and "javascript" in str(a)]
    for ch in ("\x1b", "\x07", "\u202e", "\u2066"):
        assert ch not in text, repr(ch)
    assert "\\x1b[31mred" in page.text and "\\u202eevil" in page.text   # shown as visible escapes
    assert EVIL_IMG in page.text and EVIL_SCRIPT in page.text and EVIL_LINK in page.text
    # the link to the hostile label's report is one percent-encoded path segment
    hrefs = [a["href"] for t, a in page.tags if t == "a" and a.get("href", "").startswith("ranks/")]
    assert "ranks/%3Cimg%20src%3Dx%20onerror%3Dalert%281%29%3E" in hrefs[0] and all("<" not in x for x in hrefs)
    # chart labels reach plotly as entities (plotly shows them literally), never as tags
    figs = json.loads(re.search(r'id="nle-figures">(.*?)</script>', text, re.S).group(1))["figures"]
    labels = json.dumps(figs)
    assert "&lt;img src=x onerror=alert(1)&gt;" in labels and "<img" not in labels
    assert "<" not in re.search(r'id="nle-figures">(.*?)</script>', text, re.S).group(1)


def test_hostile_file_names_through_the_cli(tmp_path: Path) -> None:
    build_cluster("cluster_straggler", str(tmp_path / "in"))
    os.rename(tmp_path / "in" / "rank0.sqlite", tmp_path / "in" / HOSTILE_FILE)
    os.rename(tmp_path / "in" / "rank1.sqlite", tmp_path / "in" / (EVIL_BIDI + EVIL_ESC + ".sqlite"))
    out = tmp_path / "out"
    proc = run_cli(str(tmp_path / "in"), "-o", str(out), "--quiet", "--jobs", "1")
    assert proc.returncode == 0, proc.stderr
    text = (out / "cluster.html").read_text(encoding="utf-8")
    page = Page(text)
    assert [t for t, _ in page.tags if t == "img"] == [] and [t for t, _ in page.tags].count("script") == 3
    assert "\x1b" not in text and "\u202e" not in text
    assert str(tmp_path / "in" / HOSTILE_FILE) in page.text      # the path is shown as text
    hrefs = {a["href"] for t, a in page.tags if t == "a" and a.get("href", "").startswith("ranks/")}
    assert len(hrefs) == 4 and all((out / h).is_file() for h in hrefs)


def test_no_link_to_a_rank_report_that_was_not_written(straggler, tmp_path: Path) -> None:
    """Written without ``ranks/`` (the Python API, not the CLI): labels are shown, not linked to missing pages."""
    _, d, _ = straggler
    files = write_cluster_files(ClusterResult.from_dict(d), tmp_path / "w", js="")
    assert tmp_path / "w" / "cluster.html" in files
    page = Page((tmp_path / "w" / "cluster.html").read_text(encoding="utf-8"))
    assert not [a for t, a in page.tags if t == "a" and a.get("href", "").startswith("ranks/")]
    assert [r[1][1] for r in page.rows("ranks-table")] == ["rank0", "rank1", "rank2", "rank3"]
    (tmp_path / "w" / "ranks" / "rank2").mkdir(parents=True)
    (tmp_path / "w" / "ranks" / "rank2" / "report.html").write_text("x", encoding="utf-8")
    write_cluster_files(ClusterResult.from_dict(d), tmp_path / "w", js="")
    page = Page((tmp_path / "w" / "cluster.html").read_text(encoding="utf-8"))
    assert {a["href"] for t, a in page.tags if t == "a" and a.get("href", "").startswith("ranks/")} == {
        "ranks/rank2/report.html"}


@pytest.mark.slow
def test_a_users_cluster_html_is_never_replaced(tmp_path: Path) -> None:
    build_cluster("cluster_straggler", str(tmp_path / "in"))
    out = tmp_path / "out"
    out.mkdir()
    (out / "cluster.html").write_text("mine", encoding="utf-8")
    proc = run_cli(str(tmp_path / "in"), "-o", str(out), "--quiet", "--force", "--jobs", "1")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "'cluster.html'" in proc.stderr
    assert (out / "cluster.html").read_text(encoding="utf-8") == "mine" and sorted(os.listdir(out)) == [
        "cluster.html"]
    # a previous cluster report's cluster.html is ours: a second run replaces it
    proc = run_cli(str(tmp_path / "in"), "-o", str(tmp_path / "o2"), "--quiet", "--jobs", "1")
    assert proc.returncode == 0, proc.stderr
    (tmp_path / "o2" / "cluster.html").write_text("old", encoding="utf-8")
    proc = run_cli(str(tmp_path / "in"), "-o", str(tmp_path / "o2"), "--quiet", "--jobs", "1")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "o2" / "cluster.html").read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
