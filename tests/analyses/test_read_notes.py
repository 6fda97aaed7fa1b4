"""The read's own notes reach the report: rows of the wrong type left out and text that is not UTF-8 are
told in ``report.json`` ``warnings`` whichever table they were met in — NVTX text, process names and the samples
are read after the kernel and API tables — and a file that is not SQLite gets a runnable ``nsys export``
command (shell-quoted, absolute, never writing over the file)."""

from __future__ import annotations

import shlex
import sqlite3
from pathlib import Path
from typing import List

import pytest
from synth import TraceBuilder

import nsys_llm_explainer as nle
from nsys_llm_explainer.errors import InputError
from nsys_llm_explainer.read.connection import check_trace_path

PID = 100
NOT_UTF8 = ("1 text value(s) in {} hold bytes that are not UTF-8; they are shown with U+FFFD (\ufffd) in place of "
            "those bytes (names that differ only there are counted together).")
NVTX_LEFT_OUT = ("NVTX_EVENTS: 1 row(s) with a non-integer value (text, blob or real) in an integer column were "
                 "left out.")


def _trace(tmp_path: Path, *updates: str) -> str:
    """Six 100 ns kernels "k" inside an NVTX range "step" (start 900) holding a range "inner" (start 950)."""
    b = TraceBuilder()
    b.process(PID, name="server")
    g = b.thread(PID, 101)
    for i in range(6):
        b.launch(1000 + i * 1000, 1010 + i * 1000, 1100 + i * 1000, 1200 + i * 1000, pid=PID, tid=101, name="k")
    b.nvtx_push_pop(900, 7300, "step", tid_g=g)
    b.nvtx_push_pop(950, 2000, "inner", tid_g=g)
    p = tmp_path / "t.sqlite"
    b.write(str(p))
    c = sqlite3.connect(p)
    for u in updates:
        c.execute(u)
    c.commit()
    c.close()
    return str(p)


def _warnings(path: str) -> List[str]:
    return list(nle.analyze(path).to_dict()["warnings"])


def test_an_nvtx_message_that_is_not_utf8_is_told(tmp_path: Path) -> None:
    p = _trace(tmp_path, "UPDATE NVTX_EVENTS SET text = CAST(X'73746570ff' AS TEXT) WHERE start = 900")
    assert _warnings(p) == [NOT_UTF8.format("NVTX_EVENTS")]


def test_an_nvtx_row_with_a_text_start_is_told(tmp_path: Path) -> None:
    p = _trace(tmp_path, "UPDATE NVTX_EVENTS SET start = 'soon' WHERE start = 950")
    rep = nle.analyze(p).to_dict()
    assert rep["warnings"] == [NVTX_LEFT_OUT]
    assert [r["name"] for r in rep["nvtx"]["ranges"]] == ["step"]      # the bad row is left out, the other stays


def test_both_in_one_nvtx_read_are_told(tmp_path: Path) -> None:
    """The bad bytes are met, the read switches to lenient decoding, then stops on the text start and runs again
    without that row: the replaced value is still counted."""
    p = _trace(tmp_path, "UPDATE NVTX_EVENTS SET start = 'soon' WHERE start = 950",
               "UPDATE NVTX_EVENTS SET text = CAST(X'73746570ff' AS TEXT) WHERE start = 900")
    assert _warnings(p) == [NOT_UTF8.format("NVTX_EVENTS"), NVTX_LEFT_OUT]


def test_a_process_name_that_is_not_utf8_is_told(tmp_path: Path) -> None:
    p = _trace(tmp_path, "UPDATE PROCESSES SET name = CAST(X'736572766572fe' AS TEXT)")
    rep = nle.analyze(p).to_dict()
    assert rep["warnings"] == [NOT_UTF8.format("PROCESSES")]
    assert [pr["name"] for pr in rep["trace"]["processes"]] == ["server\ufffd"]


@pytest.mark.parametrize("name, out", [("my report.txt", "./my report.sqlite"),
                                       ("-x.nsys-rep", "./-x.sqlite"),
                                       ("renamed.sqlite", "./renamed.export.sqlite")])
def test_a_file_that_is_not_sqlite_gets_a_runnable_export_command(tmp_path: Path, name: str, out: str) -> None:
    f = tmp_path / name
    f.write_bytes(b"NSYS report, not a database" + b"\0" * 200)
    with pytest.raises(InputError) as e:
        check_trace_path(f)
    assert str(e.value) == (f"{f} is not an SQLite database; export the report first: nsys export --type sqlite "
                            f"--output {shlex.quote(out)} {shlex.quote(str(f.resolve()))}")
    cmd = shlex.split(str(e.value).split("export the report first: ", 1)[1])
    assert cmd == ["nsys", "export", "--type", "sqlite", "--output", out, str(f.resolve())]
