"""Hostile inputs (issue 17, items 3, 5 and 6): a trace given through symbolic links whose real file has a WAL
or a hot journal beside it is refused as its real path is; text that is not UTF-8 is read with U+FFFD and
counted in one warning (the report stands); option files past the depth / size / alias-expansion limits are
refused quickly, in one line naming the option and the limit, without quoting the file."""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
import threading
import time
import tracemalloc
from pathlib import Path
from typing import Dict, List

import pytest
from synth import TraceBuilder

import nsys_llm_explainer as nle
from nsys_llm_explainer import cli
from nsys_llm_explainer.config import user_file
from nsys_llm_explainer.errors import OptionError
from nsys_llm_explainer.read.connection import open_readonly
from nsys_llm_explainer.read.fetch_nvtx import fetch_nvtx
from nsys_llm_explainer.read.schema import probe
from nsys_llm_explainer.read.sidecar import check_sidecars, names_of

PID = 100
K = "CUPTI_ACTIVITY_KIND_KERNEL"
REPLACED = "\ufffd"


def one_line(err: str) -> str:
    got = [ln for ln in err.splitlines() if ln.strip()]
    assert len(got) == 1 and "Traceback" not in err, err
    return got[0]


def digests(*paths: Path) -> Dict[str, str]:
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in paths if p.exists()}


# ------------------------------------------------------------------------------------ sidecars through links
@pytest.fixture()
def wal_trace(tmp_path: Path, demo_trace: Path):
    """``real/t.sqlite`` in WAL mode with half its kernels deleted in the WAL (a connection kept open, so the
    WAL holds the frames), and links to it: a file link, a link to that link, a symlinked directory, and a
    relative link through a symlinked directory."""
    real = tmp_path / "real" / "t.sqlite"
    real.parent.mkdir()
    shutil.copyfile(demo_trace, real)
    c = sqlite3.connect(real)
    c.execute("PRAGMA journal_mode=WAL")
    c.execute("PRAGMA wal_autocheckpoint=0")
    c.execute(f"DELETE FROM {K} WHERE rowid % 2 = 0")
    c.commit()
    links = tmp_path / "links"
    links.mkdir()
    os.symlink(real, links / "file.sqlite")
    os.symlink("file.sqlite", links / "chain.sqlite")
    os.symlink(real.parent, tmp_path / "dirlink")
    os.symlink("../dirlink/t.sqlite", links / "through_dir.sqlite")
    yield real, [links / "file.sqlite", links / "chain.sqlite", tmp_path / "dirlink" / "t.sqlite",
                 links / "through_dir.sqlite"]
    c.close()


def test_wal_beside_the_real_file_is_seen_through_every_link(tmp_path: Path, wal_trace, capsys) -> None:
    real, links = wal_trace
    side = [real, Path(f"{real}-wal"), Path(f"{real}-shm")]
    before = digests(*side)
    assert os.path.getsize(f"{real}-wal") > 0
    for i, p in enumerate([real] + links):
        assert cli.main([str(p), "--out", str(tmp_path / f"o{i}")]) == 2
        line = one_line(capsys.readouterr().err)
        assert line.startswith(f"nsys-llm-explain: error: {p}") and "t.sqlite-wal beside it holds" in line
        assert "page(s) not yet in the file" in line and not (tmp_path / f"o{i}").exists()
    assert digests(*side) == before


def test_hot_journal_beside_the_real_file_is_seen_through_a_link(tmp_path: Path, demo_trace: Path,
                                                                  capsys) -> None:
    real = tmp_path / "real" / "t.sqlite"
    real.parent.mkdir()
    shutil.copyfile(demo_trace, real)
    Path(f"{real}-journal").write_bytes(bytes.fromhex("d9d505f920a163d7") + b"\x00" * 504)
    os.symlink(real, tmp_path / "l.sqlite")
    assert cli.main([str(tmp_path / "l.sqlite"), "--out", str(tmp_path / "o")]) == 2
    line = one_line(capsys.readouterr().err)
    assert f"(through a link: {real})" in line and "hot rollback journal t.sqlite-journal" in line


def test_names_of_a_link_chain(tmp_path: Path, wal_trace) -> None:
    real, links = wal_trace
    names = names_of(links[3])
    assert names[0] == links[3] and names[-1] == real and real in names
    assert names_of(real)[-1] == real


def test_a_fifo_named_like_a_wal_never_blocks(tmp_path: Path, demo_trace: Path) -> None:
    t = tmp_path / "t.sqlite"
    shutil.copyfile(demo_trace, t)
    os.mkfifo(f"{t}-wal")
    os.mkfifo(f"{t}-journal")
    done: List[bool] = []
    th = threading.Thread(target=lambda: (check_sidecars(t), done.append(True)), daemon=True)
    th.start()
    th.join(10)
    assert done == [True]


# ------------------------------------------------------------------------------------ text that is not UTF-8
def _names_trace(tmp_path: Path) -> Path:
    b = TraceBuilder()
    b.process(PID, name="server")
    g = b.thread(PID, 101)
    for i in range(6):                       # six 100 ns kernels "k", 1 µs apart, and one 50 ns kernel "other"
        b.launch(1000 + i * 1000, 1010 + i * 1000, 1100 + i * 1000, 1200 + i * 1000, pid=PID, tid=101, name="k")
    b.launch(8000, 8010, 8100, 8150, pid=PID, tid=101, name="other")
    b.nvtx_push_pop(900, 7300, "step", tid_g=g)
    p = tmp_path / "t.sqlite"
    b.write(str(p))
    return p


def _update(p: Path, *sql: str) -> None:
    c = sqlite3.connect(p)
    for s in sql:
        c.execute(s)
    c.commit()
    c.close()


@pytest.mark.parametrize("reader", ["adbc", "sqlite3"])
def test_kernel_name_that_is_not_utf8_is_replaced_and_counted(tmp_path: Path, reader: str) -> None:
    p = _names_trace(tmp_path)
    _update(p, "UPDATE StringIds SET value = CAST(X'6261646bff' AS TEXT) WHERE value = 'k'")   # b"badk\xff"
    before = digests(p)
    rep = nle.analyze(str(p), reader=reader).to_dict()
    rows = {r["name"]: r for r in rep["kernels"]}
    assert set(rows) == {"badk" + REPLACED, "other"}
    assert (rows["badk" + REPLACED]["count"], rows["badk" + REPLACED]["total_ns"]) == (6, 600)
    assert (rows["badk" + REPLACED]["min_ns"], rows["badk" + REPLACED]["max_ns"]) == (100, 100)
    assert (rows["other"]["count"], rows["other"]["total_ns"]) == (1, 50)
    bad = [w for w in rep["warnings"] if "not UTF-8" in w]
    assert bad == ["1 text value(s) in StringIds hold bytes that are not UTF-8; they are shown with U+FFFD "
                   "(\ufffd) in place of those bytes (names that differ only there are counted together)."]
    assert digests(p) == before


def test_report_with_a_bad_kernel_name_is_written_whole(tmp_path: Path, capsys) -> None:
    p = _names_trace(tmp_path)
    _update(p, "UPDATE StringIds SET value = CAST(X'6261646bff' AS TEXT) WHERE value = 'k'")
    out = tmp_path / "o"
    assert cli.main([str(p), "--out", str(out), "--quiet"]) == 0
    assert "error" not in capsys.readouterr().err
    csv = (out / "tables" / "kernels.csv").read_text(encoding="utf-8")
    assert f"\nbadk{REPLACED},0,6,0.000600,600," in csv
    assert "not UTF-8" in (out / "report.md").read_text(encoding="utf-8")


def test_every_text_column_read_is_replaced_not_refused(tmp_path: Path) -> None:
    """NVTX text, a process name and export metadata: each decoded with
    U+FFFD; the read counts them in one note (``excluded``: the model's warnings)."""
    p = _names_trace(tmp_path)
    _update(p, "UPDATE NVTX_EVENTS SET text = CAST(X'73746570ff' AS TEXT) WHERE eventType = 59",
            "UPDATE PROCESSES SET name = CAST(X'736572766572fe' AS TEXT)",
            "UPDATE META_DATA_EXPORT SET value = CAST(X'ff' AS TEXT) WHERE rowid = 1")
    conn = open_readonly(p)
    try:
        schema = probe(conn, str(p))
        nv = fetch_nvtx(conn, schema)
        assert nv is not None and nv.text == ["step" + REPLACED]
        (note,) = conn.excluded
        assert note.startswith("2 text value(s) in META_DATA_EXPORT, NVTX_EVENTS hold bytes that are not UTF-8")
    finally:
        conn.close()
    rep = nle.analyze(str(p)).to_dict()
    assert [r["name"] for r in rep["nvtx"]["ranges"]] == ["step" + REPLACED]
    assert any(pr.get("name") == "server" + REPLACED for pr in rep["trace"]["processes"])


# ------------------------------------------------------------------------------------ option files
def _bomb(levels: int = 9) -> str:
    names = "abcdefghijklmnop"
    text = f"{names[0]}: &{names[0]} [x, x, x, x, x, x, x, x, x]\n"
    for prev, cur in zip(names, names[1:levels]):
        text += f"{cur}: &{cur} [" + ", ".join([f"*{prev}"] * 9) + "]\n"
    return text + f"rules: [*{names[levels - 1]}]\n"   # 9^9 ≈ 387 million values once expanded


def _merge_bomb() -> str:
    names = "abcdefghijklmnopqrstu"
    text = "a: &a {x1: SECRET, x2: 2}\n"
    for prev, cur in zip(names, names[1:]):
        text += f"{cur}: &{cur} {{<<: [" + ", ".join([f"*{prev}"] * 8) + "]}\n"
    return text + "rules: []\n"


HOSTILE = {   # name → (text, what the line must say)
    "alias_bomb.yaml": (_bomb(), "more than 50,000 values"),
    "merge_bomb.yaml": (_merge_bomb(), "more than 50,000 values"),
    "cycle.yaml": ("rules: &a [SECRET, *a]\n", "a cycle"),
    "deep.yaml": ("[" * 100_000 + "]" * 100_000, "nested deeper than 64 levels"),
    "deep_block.yaml": ("".join(" " * i + "-\n" for i in range(0, 400, 2)) + " " * 400 + "- SECRET\n",
                        "nested deeper than 64 levels"),
    "deep.json": ("[" * 100_000 + "]" * 100_000, "nested deeper than 64 levels"),
    "deep_ok_for_python.json": ("[" * 200 + "]" * 200, "nested deeper than 64 levels"),
    "wide.json": ("[" + ",".join(['["SECRET", "b"]'] * 20_000) + "]", "more than 50,000 values"),
    "big.yaml": ("# SECRET\n" * 120_000, "YAML option files are limited to 1,048,576"),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_option_file_is_one_line_quickly(tmp_path: Path, demo_trace: Path, name: str, capsys) -> None:
    text, says = HOSTILE[name]
    f = tmp_path / name
    f.write_text(text)
    flags = ["--categories"] + (["--phase-map"] if name.endswith(".json") else [])
    for flag in flags:
        t0 = time.perf_counter()
        assert cli.main([str(demo_trace), "--out", str(tmp_path / "o"), flag, str(f)]) == 2
        line = one_line(capsys.readouterr().err)
        assert time.perf_counter() - t0 < 5
        assert line.startswith(f"nsys-llm-explain: error: {flag} {f}") and says in line, line
        assert "SECRET" not in line and "x, x" not in line and not (tmp_path / "o").exists()
    for keyword in ["categories_file"] + (["phase_map"] if name.endswith(".json") else []):   # the API: the keyword
        with pytest.raises(OptionError) as ei:
            nle.analyze(str(demo_trace), **{keyword: str(f)})
        msg = str(ei.value)
        assert ei.value.option == keyword and msg.startswith(f"{keyword} {f}: ") and says in msg, msg
        assert "\n" not in msg and "SECRET" not in msg and "x, x" not in msg


def test_alias_bomb_is_refused_in_bounded_memory(tmp_path: Path) -> None:
    tracemalloc.start()
    try:
        for text in (_bomb(12), _merge_bomb()):
            with pytest.raises(OptionError, match="^categories_file f: more than 50,000 values"):
                user_file.load_yaml(text, "categories_file", "f")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 32 << 20


def test_messages_never_quote_the_file(tmp_path: Path, demo_trace: Path, capsys) -> None:
    cases = {"bad_rule.json": '{"rules": [["SECRET", "a", "b"]]}', "bad_regex.json": '{"rules": [["(SECRET", "a"]]}',
             "bad.yaml": "rules: [\n  - 'SECRET\n", "alias.yaml": "rules: *SECRETALIAS\n",
             "bad_phase.json": '{"prefill": [1, "SECRET"]}'}
    for name, text in cases.items():
        f = tmp_path / name
        f.write_text(text)
        flag = "--phase-map" if "phase" in name else "--categories"
        assert cli.main([str(demo_trace), "--out", str(tmp_path / "o"), flag, str(f)]) == 2
        line = one_line(capsys.readouterr().err)
        assert "SECRET" not in line.replace(str(f), ""), line
        keyword = "phase_map" if "phase" in name else "categories_file"
        with pytest.raises(OptionError) as ei:
            nle.analyze(str(demo_trace), **{keyword: str(f)})
        assert ei.value.option == keyword and str(ei.value).startswith(f"{keyword} {f}")
        assert "SECRET" not in str(ei.value).replace(str(f), "") and "\n" not in str(ei.value)


def test_real_option_files_are_well_within_the_limits(tmp_path: Path) -> None:
    rules = [[f"kernel_{i}|gemm_{i}", f"cat{i % 7}"] for i in range(2000)]
    f = tmp_path / "rules.yaml"
    f.write_text("defaults: &d [nccl, comms]\nrules:\n" + "".join(f"  - [{a!r}, {b}]\n" for a, b in rules)
                 + "  - *d\n")
    from nsys_llm_explainer.config.categories import read_rules_file
    got = read_rules_file(f)
    assert len(got.rules) == 2001 and got.rules[-1] == ("nccl", "comms")
