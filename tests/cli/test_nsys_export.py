"""``.nsys-rep`` inputs (single file and cluster mode) go through the user's ``nsys export``: tested with a stand-in
``nsys`` on PATH that writes the SQLite export (a copy of a file made by our generator), so the plumbing — the
exported copy lands in a temp dir, the report names the original file, nothing is written beside it — is checked
without Nsight Systems; the test with the real ``nsys`` (``test_qdrep_is_exported_to_a_temp_dir``) runs where it is
installed, and a ``.nsys-rep`` without ``nsys`` on PATH is one line naming the command to run.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
from pathlib import Path

import pytest
from conftest import one_line_error, run_cli
from synth.scenarios import build_cluster

import nsys_llm_explainer as nle

pytestmark = pytest.mark.slow   # subprocess CLI runs and a 4-file cluster

FAKE_NSYS = """#!{python}
import shutil, sys
args = sys.argv[1:]
assert args[:3] == ["export", "--type", "sqlite"] and args[3] == "--output", args
out, src = args[4], args[5]
if "broken" in src:
    sys.stderr.write("fake nsys: cannot read the report\\n")
    sys.exit(1)
shutil.copyfile(src, out)      # our stand-in .nsys-rep files are SQLite exports already
"""


@pytest.fixture()
def fake_nsys(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    exe = bin_dir / "nsys"
    exe.write_text(FAKE_NSYS.format(python=sys.executable))
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    return exe


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    d = tmp_path_factory.mktemp("cluster")
    build_cluster("cluster_straggler", str(d))
    files = sorted(d.glob("*.sqlite"))
    assert len(files) == 4, files
    return d, files


def _as_reports(files, dest: Path):
    dest.mkdir()
    out = []
    for f in files:
        r = dest / (f.stem + ".nsys-rep")
        shutil.copyfile(f, r)
        out.append(r)
    return out


def test_cluster_of_nsys_rep_equals_cluster_of_sqlite(tmp_path, ranks, fake_nsys):
    _, files = ranks
    reps = _as_reports(files, tmp_path / "reps")
    before = {p: p.read_bytes() for p in reps}
    a = nle.analyze_cluster([str(p) for p in files], jobs=1).to_dict()
    b = nle.analyze_cluster([str(p) for p in reps], jobs=1).to_dict()
    assert a["collectives"] == b["collectives"] and a["claims"] == b["claims"]
    assert [f["label"] for f in b["files"]] == [p.stem for p in reps]
    assert all(f["path"].endswith(".nsys-rep") for f in b["files"]), "the report names the user's file"
    assert {p: p.read_bytes() for p in reps} == before
    assert sorted(x.name for x in (tmp_path / "reps").iterdir()) == sorted(p.name for p in reps), \
        "nothing written beside the inputs"


def test_cli_cluster_with_nsys_rep_and_a_failing_export(tmp_path, ranks, fake_nsys):
    from conftest import run_cli

    _, files = ranks
    reps = _as_reports(files[:2], tmp_path / "reps")
    proc = run_cli(*map(str, reps), "-o", str(tmp_path / "out"), "--quiet")
    assert proc.returncode == 0, proc.stderr
    data = json.loads((tmp_path / "out" / "cluster.json").read_text())
    assert len(data["files"]) == 2
    broken = tmp_path / "reps" / "broken.nsys-rep"
    shutil.copyfile(files[0], broken)
    proc = run_cli(str(reps[0]), str(broken), "-o", str(tmp_path / "out2"), "--quiet")
    assert proc.returncode == 2
    err = proc.stderr.strip().splitlines()
    assert len(err) == 1 and "nsys export" in err[0] and "broken.nsys-rep" in err[0], proc.stderr
    assert not (tmp_path / "out2").exists()


def test_single_nsys_rep_via_cli(tmp_path, ranks, fake_nsys):
    from conftest import run_cli

    _, files = ranks
    rep = _as_reports(files[:1], tmp_path / "reps")[0]
    proc = run_cli(str(rep), "-o", str(tmp_path / "out"), "--quiet")
    assert proc.returncode == 0, proc.stderr
    data = json.loads((tmp_path / "out" / "report.json").read_text())
    assert data["trace"]["path"].endswith(".nsys-rep")


def test_jobs_with_one_trace_is_stated_and_reader_option(tmp_path, ranks):
    from conftest import run_cli

    _, files = ranks
    proc = run_cli(str(files[0]), "-o", str(tmp_path / "out"), "--jobs", "3", "--reader", "sqlite3")
    assert proc.returncode == 0, proc.stderr
    assert "note: --jobs / --scheduler apply to several traces" in proc.stderr
    a = json.loads((tmp_path / "out" / "report.json").read_text())
    proc = run_cli(str(files[0]), "-o", str(tmp_path / "out2"), "--quiet")
    assert proc.returncode == 0 and proc.stderr == ""
    b = json.loads((tmp_path / "out2" / "report.json").read_text())
    for d in (a, b):
        d.pop("timings_s", None)
    assert a == b   # --reader sqlite3 gives the same report as the default (columnar) reader
    proc = run_cli(str(files[0]), "-o", str(tmp_path / "out3"), "--jobs", "0")
    assert proc.returncode == 2 and "--jobs must be" in proc.stderr


# ------------------------------------------------------------------------------------------ no stand-in
def test_nsys_rep_without_nsys(tmp_path):
    f = tmp_path / "trace.nsys-rep"
    f.write_bytes(b"\x00" * 64)
    env = {"PATH": str(tmp_path)}  # no nsys on PATH
    proc = run_cli(str(f), "--out", str(tmp_path / "out"), env_extra=env)
    assert proc.returncode == 2
    line = one_line_error(proc)
    assert "nsys export --type sqlite" in line
    assert not list(tmp_path.glob("*.sqlite"))


def _fingerprint(p: Path):
    st = p.stat()
    return hashlib.sha256(p.read_bytes()).hexdigest(), st.st_mtime_ns, st.st_size


@pytest.mark.skipif(shutil.which("nsys") is None, reason="needs Nsight Systems (`nsys`) on PATH")
def test_qdrep_is_exported_to_a_temp_dir(tmp_path, shared_traces):
    src = shared_traces / "12_gartangh_keras_gtx1650" / "original.qdrep"
    assert src.is_file(), f"no .qdrep in ../shared: {src}"
    rep = tmp_path / "in" / "original.qdrep"
    rep.parent.mkdir()
    shutil.copyfile(src, rep)
    before = _fingerprint(rep)
    proc = run_cli(str(rep), "--out", str(tmp_path / "out"), "--quiet")
    assert proc.returncode == 0, proc.stderr
    assert _fingerprint(rep) == before
    assert sorted(p.name for p in rep.parent.iterdir()) == ["original.qdrep"]   # nothing written beside it
    import json
    j = json.loads((tmp_path / "out" / "report.json").read_text())
    assert j["kernels_summary"]["kernel_count"] > 0
    # the committed trace.sqlite was exported from this .qdrep by nsys 2022.4: same numbers when the local
    # nsys is that version
    ref = run_cli(str(src.parent / "trace.sqlite"), "--out", str(tmp_path / "ref"), "--quiet")
    assert ref.returncode == 0
    r = json.loads((tmp_path / "ref" / "report.json").read_text())
    if j["trace"]["nsys_version"] == r["trace"]["nsys_version"]:
        assert j["kernels"] == r["kernels"] and j["cuda_api"] == r["cuda_api"]
