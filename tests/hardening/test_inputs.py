"""Hostile inputs given as the trace (docs/SECURITY.md §1): a file that is not an export (missing, a directory
of nothing, empty, text, another SQLite database, truncated, corrupt, compressed, JSON, one of our own outputs),
a WAL or hot journal beside it (also through links), paths the system refuses (too long, not searchable, empty,
a lone surrogate), a locked or empty export, a view named like a table, a malformed ``report.json`` dict given to
the API, and arguments of the wrong type. Each refusal is one line and exit 2 (``InputError`` from the API), the
input byte-identical and no output written."""

from __future__ import annotations

import contextlib
import errno
import gzip
import hashlib
import json
import os
import shutil
import sqlite3
import tempfile
import threading
import zipfile
from pathlib import Path
from typing import Dict, Iterator, List

import pytest
from conftest import run_cli
from hostile import PROG, one_line, refused

import nsys_llm_explainer as nle
from nsys_llm_explainer import cli
from nsys_llm_explainer.errors import InputError, OptionError
from nsys_llm_explainer.output import MANIFEST
from nsys_llm_explainer.read.sidecar import check_sidecars, names_of

K = "CUPTI_ACTIVITY_KIND_KERNEL"
HOT_JOURNAL = bytes.fromhex("d9d505f920a163d7") + b"\x00" * 504   # a hot rollback journal's header


def digests(*paths: Path) -> Dict[str, str]:
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in paths if p.exists()}


# ------------------------------------------------------------------------------------------ not an export
def _sqlite(path: Path, *sql: str) -> None:
    c = sqlite3.connect(path)
    for s in sql:
        c.execute(s)
    c.commit()
    c.close()


def _corrupt_pages(demo: Path, f: Path) -> None:
    data = bytearray(demo.read_bytes())
    for off in range(8192, len(data), 4096):   # scribble over every page after the first two
        data[off + 100: off + 164] = b"\xff" * 64
    f.write_bytes(bytes(data))


def _zip(demo: Path, f: Path) -> None:
    with zipfile.ZipFile(f, "w") as z:
        z.writestr("trace.sqlite", demo.read_bytes()[:65536])


NOT_AN_EXPORT: Dict[str, tuple] = {   # id → (make(demo, path), what the line says after "error: ")
    "missing": (None, "trace not found: {f}"),
    "empty-directory": (lambda d, f: f.mkdir(), "directory {f} holds no .sqlite / .nsys-rep file"),
    "empty-file": (lambda d, f: f.write_bytes(b""), "{f} is empty (0 bytes), not an SQLite export"),
    "text": (lambda d, f: f.write_text("hello, this is not a database\n" * 10),
             "{f} is not an SQLite database; export the report first: nsys export --type sqlite"),
    "other-sqlite": (lambda d, f: _sqlite(f, "CREATE TABLE users(id INTEGER, name TEXT)"),
                     "{f} is an SQLite database but not an Nsight Systems export (none of StringIds"),
    "sqlite-without-tables": (lambda d, f: _sqlite(f, "PRAGMA user_version = 1"),
                              "{f} is an empty SQLite database, not an Nsight Systems export"),
    "truncated-50%": (lambda d, f: f.write_bytes(d.read_bytes()[: d.stat().st_size // 2]),
                      "{f} is not a readable SQLite database (database disk image is malformed)"),
    "truncated-10%": (lambda d, f: f.write_bytes(d.read_bytes()[: d.stat().st_size // 10]),
                      "{f} is not a readable SQLite database (database disk image is malformed)"),
    "corrupt-pages": (_corrupt_pages, "SQLite error while reading the trace: database disk image is malformed"),
    "gzip": (lambda d, f: f.write_bytes(gzip.compress(d.read_bytes()[:65536])),
             "{f} is a gzip-compressed file; decompress it first (gunzip -k), not an SQLite export of an Nsight "
             "Systems report"),
    "zip": (_zip, "{f} is a zip archive; extract the .sqlite export from it first (unzip), not an SQLite export of "
                  "an Nsight Systems report"),
    "xz": (lambda d, f: f.write_bytes(b"\xfd7zXZ\x00" + b"\x00" * 200), "{f} is an xz-compressed file"),
    "json": (lambda d, f: f.write_bytes(b'[{"a": 1}]'), "{f} is a JSON text file, not an SQLite export"),
}


@pytest.mark.parametrize("kind", list(NOT_AN_EXPORT))
def test_a_file_that_is_not_an_export_is_one_line(tmp_path: Path, demo_trace: Path, capsys, kind: str) -> None:
    """One line saying what the file is (a compressed or JSON file is named, with no ``nsys export`` advice), exit
    2, the file unchanged (a missing one not created) and no output."""
    make, says = NOT_AN_EXPORT[kind]
    f = tmp_path / "in" / "trace.sqlite"
    f.parent.mkdir()
    if make is not None:
        make(demo_trace, f)
    before = digests(f) if f.is_file() else {}
    line = refused(capsys, [str(f), "--out", str(tmp_path / "o")])
    assert line.startswith(f"{PROG}: error: " + says.format(f=f)), line
    assert kind not in ("gzip", "zip", "xz", "json") or "nsys export" not in line, line
    assert (digests(f) if f.is_file() else {}) == before and f.exists() == (make is not None)
    assert not (tmp_path / "o").exists()


# ------------------------------------------------------------------------------------------ our own outputs
@pytest.fixture(scope="module")
def our_outputs(tmp_path_factory, small_trace: Path) -> Path:
    """A report (``r``), a comparison (``c``) and a cluster (``k``) of the demo trace."""
    d = tmp_path_factory.mktemp("ours")
    other = d / "b.sqlite"
    shutil.copyfile(small_trace, other)
    assert cli.main([str(small_trace), "--out", str(d / "r"), "--quiet"]) == 0
    assert cli.main(["compare", str(small_trace), str(small_trace), "--out", str(d / "c"), "--quiet"]) == 0
    assert cli.main([str(small_trace), str(other), "--out", str(d / "k"), "--quiet", "--jobs", "1"]) == 0
    return d


@pytest.mark.parametrize("rel, name", [("r/report.json", "report.json"), ("c/compare.json", "compare.json"),
                                       ("k/cluster.json", "cluster.json"), (f"r/{MANIFEST}", None)])
@pytest.mark.parametrize("as_sqlite", [False, True], ids=["json", "renamed-sqlite"])
def test_our_own_outputs_given_as_a_trace_are_named(tmp_path: Path, our_outputs: Path, capsys, rel, name,
                                                    as_sqlite) -> None:
    src = our_outputs / rel
    given = tmp_path / "given.sqlite" if as_sqlite else src
    if as_sqlite:
        shutil.copyfile(src, given)
    line = refused(capsys, [str(given), "--out", str(tmp_path / "o")])
    want = (f"is a {name} written by nsys-llm-explainer (an analysis result, not a trace); give the trace it was "
            "made from" if name else "is the manifest of an output directory of nsys-llm-explainer")
    assert line.startswith(f"{PROG}: error: {given} {want}"), line
    assert not (tmp_path / "o").exists()


# ------------------------------------------------------------------------------------------ sidecars
def _copied_wal(t: Path) -> None:
    """A WAL holding a committed table, copied beside ``t`` with it (no connection keeps it)."""
    scratch = t.with_name("scratch.sqlite")
    shutil.copyfile(t, scratch)
    c = sqlite3.connect(scratch)
    c.execute("PRAGMA journal_mode=WAL")
    c.execute("PRAGMA wal_autocheckpoint=0")
    c.execute("CREATE TABLE late(x)")
    c.commit()
    shutil.copyfile(scratch, t)
    shutil.copyfile(f"{scratch}-wal", f"{t}-wal")
    c.close()
    for p in t.parent.glob("scratch.sqlite*"):
        p.unlink()


SIDECARS: Dict[str, tuple] = {   # id → (make(trace), what a refusal says; None: the trace is read)
    "wal": (_copied_wal, "t.sqlite-wal beside it holds"),
    "empty-wal": (lambda t: Path(f"{t}-wal").write_bytes(b""), None),                 # harmless
    "hot-journal": (lambda t: Path(f"{t}-journal").write_bytes(HOT_JOURNAL), "hot rollback journal t.sqlite-journal"),
    "zeroed-journal": (lambda t: Path(f"{t}-journal").write_bytes(b"\x00" * 512), None),   # journal_mode=PERSIST
}


@pytest.mark.parametrize("through", ["direct", "link"])
@pytest.mark.parametrize("sidecar", list(SIDECARS))
def test_a_sidecar_beside_the_trace(tmp_path: Path, small_trace: Path, capsys, sidecar: str, through: str) -> None:
    """A WAL with pages not yet in the file, or a hot rollback journal, beside the trace (the real file, also when
    the trace is given through a link) is refused in one line naming it, nothing changed; an empty WAL or a
    journal whose header is zeroed is read."""
    make, says = SIDECARS[sidecar]
    real = tmp_path / "real" / "t.sqlite"
    real.parent.mkdir()
    shutil.copyfile(small_trace, real)
    make(real)
    given = real
    if through == "link":
        given = tmp_path / "l.sqlite"
        os.symlink(real, given)
    side = [real, Path(f"{real}-wal"), Path(f"{real}-journal")]
    before = digests(*side)
    out = tmp_path / "o"
    if says is None:
        assert cli.main([str(given), "--out", str(out), "--quiet"]) == 0, capsys.readouterr().err
        assert (out / "report.json").is_file()
    else:
        line = refused(capsys, [str(given), "--out", str(out)])
        assert line.startswith(f"{PROG}: error: {given}") and says in line, line
        assert through == "direct" or f"(through a link: {real})" in line, line
        assert not out.exists()
    assert digests(*side) == before


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


# ------------------------------------------------------------------------------------------ exports read as they are
def test_a_locked_database_is_read(tmp_path: Path, small_trace: Path, capsys) -> None:
    f = tmp_path / "locked.sqlite"
    shutil.copyfile(small_trace, f)
    holder = sqlite3.connect(f, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        code = cli.main([str(f), "--out", str(tmp_path / "out"), "--quiet"])
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert code == 0, capsys.readouterr().err
    assert (tmp_path / "out" / "report.json").exists()


def _nsys_shell(path: Path, with_kernel_table: bool) -> None:
    sql = ["CREATE TABLE StringIds(id INTEGER PRIMARY KEY, value TEXT NOT NULL)",
           "CREATE TABLE META_DATA_EXPORT(name TEXT, value TEXT)",
           "INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_PRODUCT_VERSION', '2024.2.3.38')"]
    if with_kernel_table:
        sql.append("CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL(start INTEGER NOT NULL, end INTEGER NOT NULL, "
                   "deviceId INTEGER, streamId INTEGER, correlationId INTEGER, globalPid INTEGER, "
                   "demangledName INTEGER, shortName INTEGER)")
    _sqlite(path, *sql)


@pytest.mark.parametrize("with_kernel_table", [True, False], ids=["empty-kernel-table", "no-activity-table"])
def test_an_export_without_kernels_is_a_report_saying_so(tmp_path: Path, capsys, with_kernel_table: bool) -> None:
    f = tmp_path / "t.sqlite"
    _nsys_shell(f, with_kernel_table)
    out = tmp_path / "out"
    assert cli.main([str(f), "--out", str(out), "--quiet"]) == 0, capsys.readouterr().err
    md = (out / "report.md").read_text()
    assert "no CUDA kernels were captured" in md and "--trace=cuda" in md
    j = json.loads((out / "report.json").read_text())
    assert j["kernels"] == [] and j["devices"] == []
    assert any("no cuda kernels were captured" in w.lower() for w in j["warnings"])


@pytest.mark.slow   # a CLI subprocess (bounded by its timeout should the view ever be read)
def test_view_named_like_a_table_is_not_read(tmp_path: Path, demo_trace: Path) -> None:
    trace = tmp_path / "t.sqlite"
    shutil.copyfile(demo_trace, trace)
    _sqlite(trace, "DROP TABLE IF EXISTS NVTX_EVENTS",
            "CREATE VIEW NVTX_EVENTS AS WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) "
            "SELECT i AS start, i AS end, 59 AS eventType, 'x' AS text, 1 AS globalTid FROM r")
    proc = run_cli(str(trace), "--out", str(tmp_path / "o"), "--quiet", timeout=120)
    assert proc.returncode == 0, proc.stderr


# ------------------------------------------------------------------------------------------ paths the system refuses
def test_a_trace_name_too_long_is_one_line(tmp_path: Path, demo_trace: Path, capsys) -> None:
    long = str(tmp_path / ("z" * 300 + ".sqlite"))            # ENAMETOOLONG: one component over 255 bytes
    deep = "/".join(["x" * 200] * 25)                          # over PATH_MAX
    for bad in (long, deep):
        line = refused(capsys, [bad, "--out", str(tmp_path / "o")])
        assert "name too long" in line.lower()
        refused(capsys, ["compare", str(demo_trace), bad, "--out", str(tmp_path / "c")])
        with pytest.raises(InputError):
            nle.analyze_cluster([str(demo_trace), bad])
        with pytest.raises(InputError):
            nle.compare([str(demo_trace), bad])
    assert not (tmp_path / "o").exists() and not (tmp_path / "c").exists()


def test_a_path_that_may_not_be_searched_is_one_line(tmp_path: Path, demo_trace: Path, capsys,
                                                     monkeypatch) -> None:
    """A parent directory without search permission (EACCES; as root the test plants the error, as a user
    ``chmod 700`` by another user makes it), for the trace and for ``--out``."""
    priv = tmp_path / "priv"
    priv.mkdir()
    shutil_copy = priv / "t.sqlite"
    shutil_copy.write_bytes(demo_trace.read_bytes())
    real_stat = os.stat

    def stat(path, *args, **kwargs):
        if str(priv) in os.fsdecode(os.fspath(path)) and os.fspath(path) != os.fspath(priv):
            raise PermissionError(errno.EACCES, "Permission denied", os.fspath(path))
        return real_stat(path, *args, **kwargs)

    monkeypatch.setattr(os, "stat", stat)
    line = refused(capsys, [str(priv / "t.sqlite"), "--out", str(tmp_path / "o")])
    assert line == f"{PROG}: error: cannot look up {priv / 't.sqlite'}: Permission denied"
    line = refused(capsys, [str(demo_trace), "--out", str(priv / "x")])
    assert line == f"{PROG}: error: --out {priv / 'x'} cannot be used: Permission denied"
    refused(capsys, ["demo", "--out", str(priv / "x")])
    refused(capsys, ["compare", str(demo_trace), str(priv / "t.sqlite"), "--out", str(tmp_path / "c")])
    with pytest.raises(InputError):
        nle.analyze_cluster([str(demo_trace), str(priv / "t.sqlite")])


@contextlib.contextmanager
def _unprivileged() -> Iterator[None]:
    """The permissions of an ordinary user: as root (which lists any directory) the effective user is ``nobody``
    (65534) inside, root again after; as another user, nothing changes."""
    if os.geteuid() != 0:
        yield
        return
    try:
        os.seteuid(65534)
    except PermissionError:   # root without CAP_SETUID (some containers): it lists any directory, so no test here
        pytest.skip("running as root and cannot take an ordinary user's permissions to be refused a listing")
    try:
        yield
    finally:
        os.seteuid(0)


def test_a_directory_that_may_not_be_listed_is_one_line(demo_trace: Path, capsys) -> None:
    """A directory of ranks without read permission (mode 000; the test runs the command as an ordinary user):
    the cluster command and ``analyze_cluster`` refuse it in one line, ``cannot list the directory D: Permission
    denied``, exit 2, and write nothing. (Built under the system temporary directory: pytest's is not searchable by
    another user.)"""
    base = Path(tempfile.mkdtemp(prefix="nle-unlisted-"))
    try:
        base.chmod(0o711)
        ranks, out = base / "ranks", base / "o"
        ranks.mkdir()
        shutil.copy(demo_trace, ranks / "rank0.sqlite")
        ranks.chmod(0)
        nle.analyze_cluster([str(demo_trace)], jobs=1)   # imports what a cluster run needs, as root
        want = f"cannot list the directory {ranks}: Permission denied"
        with _unprivileged():
            code = cli.main([str(ranks), "--out", str(out), "--jobs", "1"])
            with pytest.raises(InputError) as ei:
                nle.analyze_cluster(str(ranks))
        assert code == 2 and one_line(capsys.readouterr().err) == f"{PROG}: error: {want}"
        assert str(ei.value) == want and not out.exists()
    finally:
        (base / "ranks").chmod(0o700)
        shutil.rmtree(base)


def test_a_cluster_input_that_does_not_exist_is_one_line(tmp_path: Path, demo_trace: Path, capsys) -> None:
    """A cluster input that is neither a file, a directory nor a glob pattern (no ``*?[``) and does not exist,
    given after a good one: ``<it> does not exist``, exit 2, before any analysis."""
    gone = tmp_path / "rank1.sqlite"
    line = refused(capsys, [str(demo_trace), str(gone), "--out", str(tmp_path / "o")])
    assert line == f"{PROG}: error: {gone} does not exist" and not (tmp_path / "o").exists()
    with pytest.raises(InputError) as ei:
        nle.analyze_cluster([str(demo_trace), str(gone)])
    assert str(ei.value) == f"{gone} does not exist"


def test_an_empty_trace_argument_is_refused_not_read_as_the_working_directory(tmp_path: Path, capsys,
                                                                              monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "x.sqlite").write_bytes(b"")
    line = refused(capsys, ["", "--out", str(tmp_path / "o")])
    assert "an empty path" in line and not (tmp_path / "o").exists()
    with pytest.raises(InputError):
        nle.analyze_cluster([""])


def test_a_lone_surrogate_in_an_api_path_is_an_input_error() -> None:
    with pytest.raises(InputError) as e:
        nle.analyze("\ud800.sqlite")
    assert "\\ud800" in str(e.value)


# ------------------------------------------------------------------------------------------ the API's arguments
@pytest.mark.parametrize("call, error, message", [
    (lambda: nle.compare("x.sqlite"), InputError,
     "paths must be a list of trace paths (BASE first, then each NEW), got the str 'x.sqlite'; e.g. compare([BASE, "
     "NEW])"),
    (lambda: nle.compare([1, 2]), InputError, "paths[0] must be a file path (str, bytes or os.PathLike), got int 1"),
    (lambda: nle.compare(5), InputError, "paths must be a list of trace paths, got int"),
    (lambda: nle.analyze_cluster([]), InputError,
     "paths is empty: give at least one trace file, directory or glob pattern"),
    (lambda: nle.analyze_cluster("t.sqlite", jobs=1.5), OptionError, "jobs must be an integer, got 1.5"),
    (lambda: nle.analyze_cluster("t.sqlite", jobs="2"), OptionError, "jobs must be an integer, got '2'"),
    (lambda: nle.analyze_cluster("t.sqlite", scheduler=5), InputError,
     "scheduler must be an address string (or 'local'), got int"),
    (lambda: nle.analyze(123), InputError, "path must be a file path (str, bytes or os.PathLike), got int 123"),
    (lambda: nle.analyze(None), InputError, "path must be a file path (str, bytes or os.PathLike), got NoneType"),
    (lambda: nle.analyze("t.sqlite", workers=1.5), OptionError, "workers must be an integer, got 1.5"),
    (lambda: nle.render_markdown(5), InputError, "report must be a Report or its to_dict() dict, got int"),
])
def test_the_api_names_the_argument_of_the_wrong_type(call, error, message) -> None:
    with pytest.raises(error) as ei:
        call()
    assert str(ei.value) == message


def test_the_api_takes_bytes_and_pathlike_paths(small_trace) -> None:
    a = nle.analyze(os.fsencode(small_trace))
    b = nle.analyze(small_trace)
    assert a.to_dict()["trace"]["path"] == b.to_dict()["trace"]["path"] == str(small_trace)


# ------------------------------------------------------------------------------ a report.json dict given to the API
@pytest.fixture(scope="module")
def report_dict(demo_trace: Path) -> dict:
    import nsys_llm_explainer as nle

    return json.loads(json.dumps(nle.analyze(str(demo_trace)).to_dict()))   # as json.load gives it


def _with(d: dict, path: tuple, value) -> dict:
    d = json.loads(json.dumps(d))
    o = d
    for k in path[:-1]:
        o = o[k]
    o[path[-1]] = value
    return d


@pytest.mark.parametrize("path, value, named", [
    (("kernels_summary", "total_kernel_ns"), 10 ** 400, "report.json kernels_summary.total_kernel_ns: an integer "
                                                        "of 401 digits is out of range (at most 2^127)"),
    (("kernels", 0, "total_ns"), -(10 ** 400), "report.json kernels[0].total_ns: an integer of 401 digits"),
    (("launch", "launch_count"), 2 ** 128, "report.json launch.launch_count: an integer of 39 digits"),
    (("window", "start_ns"), float("inf"), "report.json window.start_ns: inf is not a finite number"),
])
def test_a_number_no_result_holds_is_an_input_error_naming_the_key(report_dict: dict, path, value, named) -> None:
    import nsys_llm_explainer as nle
    from nsys_llm_explainer.errors import InputError
    from nsys_llm_explainer.report import Report

    bad = _with(report_dict, path, value)
    with pytest.raises(InputError) as ei:
        Report.from_dict(bad)
    assert str(ei.value).startswith(named), str(ei.value)
    with pytest.raises(InputError) as ei:
        nle.render_markdown(bad)
    assert str(ei.value).startswith(named), str(ei.value)   # the dict is a report.json


@pytest.mark.parametrize("key", ["findings", "warnings", "kernels", "devices"])
def test_render_markdown_of_a_malformed_dict_names_the_key(report_dict: dict, key: str) -> None:
    import nsys_llm_explainer as nle
    from nsys_llm_explainer.errors import InputError

    with pytest.raises(InputError) as ei:
        nle.render_markdown(_with(report_dict, (key,), float("nan")))   # NaN where a list belongs
    assert f"report.json {key}" in str(ei.value), str(ei.value)
    assert nle.render_markdown(report_dict).startswith("# ")   # the dict itself renders


@pytest.mark.parametrize("damage", ["null-rules", "a-list", "a-number", "no-user_rules", "rule-of-one",
                                    "user_rules-a-number", "preset-without-detect"])
def test_a_damaged_categories_part_of_report_json_names_it(tmp_path: Path, demo_trace: Path, damage: str) -> None:
    """``options.categories`` of a run with ``--categories`` is the object ``CategoryRules.to_dict()`` writes; a saved
    report.json whose object is replaced by another value, or lacks a key, or holds a rule that is not a pair, is
    refused by ``Report.from_dict`` and ``render_markdown`` in one line naming the key (null: no rules file given,
    which renders)."""
    from nsys_llm_explainer.report import Report

    rules = tmp_path / "rules.json"
    rules.write_text('{"rules": [["gemm", "matmul"]]}')
    d = json.loads(json.dumps(nle.analyze(str(demo_trace), categories_file=str(rules)).to_dict()))
    good = d["options"]["categories"]
    assert good["user_rules"] == [["gemm", "matmul"]] and good["source"] == str(rules)
    value = {"null-rules": None, "a-list": [good], "a-number": 5,
             "no-user_rules": {k: v for k, v in good.items() if k != "user_rules"},
             "rule-of-one": {**good, "user_rules": [["gemm"]]}, "user_rules-a-number": {**good, "user_rules": 5},
             "preset-without-detect": {**good, "presets": [{"name": "vllm"}]}}[damage]
    bad = _with(d, ("options", "categories"), value)
    if value is None:
        assert Report.from_dict(bad).options.categories is None and nle.render_markdown(bad).startswith("# ")
        return
    want = "report.json options.categories: not the object CategoryRules.to_dict() writes"
    for read in (Report.from_dict, nle.render_markdown):
        with pytest.raises(InputError) as ei:
            read(bad)
        assert str(ei.value) == want


def _paths(d, pre=(), depth=0):
    if isinstance(d, dict):
        for k, v in d.items():
            yield pre + (k,)
            if depth < 1:
                yield from _paths(v, pre + (k,), depth + 1)
    elif isinstance(d, list) and d:
        yield pre + (0,)
        if depth < 1:
            yield from _paths(d[0], pre + (0,), depth + 1)


@pytest.mark.slow   # a few hundred renders
def test_render_markdown_raises_only_input_errors_on_any_malformed_part(report_dict: dict) -> None:
    """Every key of the dict, two levels deep, replaced by a value of the wrong kind or out of range: the public
    renderer renders or raises :class:`InputError`, never a raw TypeError / OverflowError."""
    import nsys_llm_explainer as nle
    from nsys_llm_explainer.errors import InputError

    raw = []
    for path in _paths(report_dict):
        for value in (float("nan"), 10 ** 400):
            try:
                nle.render_markdown(_with(report_dict, path, value))
            except InputError:
                pass
            except Exception as exc:   # noqa: BLE001 - what the test looks for
                raw.append((path, repr(value)[:12], type(exc).__name__))
    assert raw == []


# ------------------------------------------------------------------------------------------ the input is never changed
def _fingerprint(p: Path):
    st = p.stat()
    return hashlib.sha256(p.read_bytes()).hexdigest(), st.st_mtime_ns, st.st_size


@pytest.mark.slow   # the CLI on 12 real traces
def test_input_unchanged_and_no_side_files(tmp_path, shared_traces, capsys):
    """Every export layout (2019 → 2026) is opened read-only: nothing beside it, not a byte changed (the command
    line in this process: the read is the same code as in a subprocess)."""
    from nsys_llm_explainer.cli import main

    for trace in sorted(shared_traces.glob("*/trace.sqlite"))[:12]:
        before = _fingerprint(trace)
        siblings = sorted(x.name for x in trace.parent.iterdir())
        code = main([str(trace), "--out", str(tmp_path / trace.parent.name), "--quiet"])
        assert code == 0, (trace, capsys.readouterr().err)
        assert _fingerprint(trace) == before
        assert sorted(x.name for x in trace.parent.iterdir()) == siblings  # no -journal/-wal/-shm
