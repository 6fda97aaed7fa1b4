"""Hostile names where the native-host, teardown and compare-note sentences pick names up — the process names of the
`native_host` fact (report.json keeps them exactly; the host-gap advice they select names none), the module-unload calls
the window's teardown words name, a GGML kernel name the `gemm` category takes, and the trace labels in compare's note
under the idle-by-cause table (and compare.html's page title). Exports of the oldest and the newest generation;
report.md / .html (compare.md / .html), tables/*.csv and the terminal stay inert (the checkers of
tests/render/test_names_inert.py and test_names_inert_pause_and_harness_sentences.py)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import List, Sequence

import pytest
from test_claims_generations_native_engines import GGML, UNLOAD, decode, launch_bound
from test_names_inert_pause_and_harness_sentences import HIDDEN, HOSTILE, _rename, csv_cells_inert

from nsys_llm_explainer.cli import main


def _inert(d: Path, files: Sequence[str], terminal: str) -> None:
    """No hidden character on the terminal or in ``files`` of ``d`` (our own scripts aside), no raw HTML, no live
    Markdown link, no 100 KB name, no formula-like CSV cell."""
    assert not HIDDEN.search(terminal), repr(terminal)
    for f in files:
        text = (d / f).read_text(encoding="utf-8")
        text = re.sub(r"<script>.*?</script>", "", text, flags=re.S)
        bad = HIDDEN.search(text)
        assert bad is None, (f, repr(text[max(0, bad.start() - 60): bad.end() + 20]))
        for raw in ("<script>alert", "<img src") + (("](http://evil",) if f.endswith(".md") else ()):
            assert raw not in text, (f, raw, text[max(0, text.find(raw) - 300): text.find(raw) + 60])
        assert "L" * 5000 not in text, (f, text.find("L" * 5000))
    csv_cells_inert(d / "tables")


def _run(capsys, argv: List[str]) -> str:
    assert main(argv) == 0
    out, err = capsys.readouterr()
    return out + err


@pytest.mark.slow
@pytest.mark.parametrize("flavor", ["2021.5", "2026.2"])
@pytest.mark.parametrize("hostile", sorted(HOSTILE))
def test_native_host_teardown_and_ggml_names_stay_inert(hostile: str, flavor: str, tmp_path: Path, capsys) -> None:
    """(trace: test_claims_generations_native_engines's :func:`decode` with the 100 unload calls) The process
    `llama-server`, the unload call and the `mul_mat_vec_q` kernel renamed to a hostile name that keeps the original
    inside (so the rules still take it): the process is still a native host (report.json's `native_host` is the exact
    name: no stack, no Python interpreter's name), the tail still "teardown" (the call's name starts with
    `cuModuleUnload`; the formula name does not, so no word: 12.160 ms of tail, the calls during 65.8 %), the kernel
    still `gemm` — and every human-facing output inert."""
    h = HOSTILE[hostile]
    proc, call, gemv = (h.replace("NAME", n) for n in ("llama-server", UNLOAD, GGML[2]))
    p = tmp_path / "t.sqlite"
    decode(flavor, unloads=100).write(str(p))
    _rename(p, [("llama-server", proc), (UNLOAD, call), (GGML[2], gemv)])
    d = tmp_path / "out"
    _inert(d, ("report.md", "report.html"), _run(capsys, [str(p), "--out", str(d)]))
    j = json.loads((d / "report.json").read_text(encoding="utf-8"))
    assert j["facts"]["native_host"] == proc
    r = j["window"]["reason"]
    assert r.startswith("Auto-detected window: trimmed 12.160 ms of tail (GPU busy 0.0%" + (
        "); " if hostile == "formula" else "; teardown: ")), r
    gemm = {c["category"]: c for c in j["categories"]["overall"]}["gemm"]
    assert gemm["top_kernels"][0]["name"] == gemv and gemm["count"] == 40, gemm


@pytest.mark.slow
@pytest.mark.parametrize("hostile", sorted(HOSTILE))
def test_compare_labels_in_the_host_paced_note_stay_inert(hostile: str, tmp_path: Path, capsys) -> None:
    """(trace: test_claims_generations_native_engines's :func:`launch_bound`, BASE written by the 2021.5 exporter, NEW
    by 2026.2) NEW's label is hostile (given with ``--labels``; the formula, which holds commas, as the file's name):
    the note under the idle-by-cause table names both traces with 0.100 ms/step each; compare.md / .html stay inert —
    the page title included (it named a 100 KB label whole)."""
    a, b = tmp_path / "a" / "base.sqlite", tmp_path / "b" / "new.sqlite"
    for p, fl in ((a, "2021.5"), (b, "2026.2")):
        p.parent.mkdir()
        launch_bound(fl).write(str(p))
    label = HOSTILE[hostile].replace("NAME", "new")
    d = tmp_path / "cmp"
    if "," in label:
        named = b.with_name(label.replace("/", "_") + ".sqlite")
        shutil.copyfile(b, named)
        out = _run(capsys, ["compare", str(a), str(named), "-o", str(d)])
    else:
        out = _run(capsys, ["compare", str(a), str(b), "-o", str(d), "--labels", "base," + label])
    _inert(d, ("compare.md", "compare.html"), out)
    md = (d / "compare.md").read_text(encoding="utf-8")
    note = next(ln for ln in md.splitlines() if ln.startswith("`launch` includes the host-paced"))
    assert note.endswith(" 0.100 ms/step of it (detail `host-paced queued` in tables/part_changes.csv)."), note
    assert "`base` 0.100, " in note, note
