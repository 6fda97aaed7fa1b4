"""The two readers (columnar ADBC and the standard library) give identical models and reports, the columnar
one is really used when installed, and it falls back to the standard path on anything it cannot read exactly.

The standard-library path is the independent oracle here: it is the path the ``nsys stats`` oracle tests
validated before the columnar reader existed.
"""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import numpy as np
import pytest
from conftest import built_scenario, real_traces, trace_id

import nsys_llm_explainer as nle
from nsys_llm_explainer.errors import InputError
from nsys_llm_explainer.pipeline import load_model
from nsys_llm_explainer.read import columnar


def test_columnar_reader_installed():
    """adbc-driver-sqlite and pyarrow are dependencies: without them every test below would only test the fallback."""
    assert columnar.adbc_available(), "adbc-driver-sqlite / pyarrow missing: `pip install .` installs them"


def _arrays(model) -> dict:
    out = {}
    for part in ("kernels", "api", "nvtx", "memcpy", "memset", "sync", "graph_trace", "osrt"):
        obj = getattr(model, part)
        if obj is None:
            out[part] = None
            continue
        for k, v in vars(obj).items():
            out[f"{part}.{k}"] = v.tolist() if isinstance(v, np.ndarray) else v
    out["warnings"] = list(model.warnings)
    out["notes"] = list(model.notes)
    return out


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.slow
@pytest.mark.parametrize("trace", real_traces(), ids=trace_id)
def test_models_identical_on_real_traces(trace: Path):
    before = _digest(trace)
    a = _arrays(load_model(str(trace), reader="sqlite3"))
    b = _arrays(load_model(str(trace), reader="adbc"))
    assert a.keys() == b.keys()
    for k in a:
        assert a[k] == b[k], f"{trace_id(trace)}: {k} differs between readers"
    assert _digest(trace) == before
    assert not list(trace.parent.glob("trace.sqlite-*")), "a reader left a -journal/-wal/-shm beside the input"


@pytest.mark.parametrize("scenario", ["demo", "nccl_straggler", "cuda_graph_node", "pageable_h2d"])
def test_reports_identical_on_scenarios(tmp_path, scenario):
    p = tmp_path / "t.sqlite"
    built_scenario(scenario, str(p))
    a, b = _arrays(load_model(str(p), reader="sqlite3")), _arrays(load_model(str(p), reader="adbc"))
    for k in a:
        assert a[k] == b[k], f"{scenario}: {k} differs between readers"
    a = nle.analyze(str(p), reader="sqlite3").to_dict()
    b = nle.analyze(str(p), reader="adbc").to_dict()
    a.pop("timings_s", None)
    b.pop("timings_s", None)
    assert a == b


def test_columnar_path_is_used_when_installed(tmp_path, monkeypatch):
    p = tmp_path / "t.sqlite"
    built_scenario("demo", str(p))
    calls = []
    real = columnar.fetch_ints

    def spy(uri, sql, names, capacity=0):
        got = real(uri, sql, names, capacity)
        calls.append((sql, got is not None))
        return got

    monkeypatch.setattr(columnar, "fetch_ints", spy)
    m = load_model(str(p), reader="adbc")
    big = [ok for sql, ok in calls if "CUPTI_ACTIVITY_KIND_KERNEL" in sql or "CUPTI_ACTIVITY_KIND_RUNTIME" in sql]
    assert len(big) == 2 and all(big), calls
    assert len(m.kernels) > 0
    calls.clear()
    load_model(str(p), reader="sqlite3")
    assert calls == []


def _mixed_db(path: Path) -> None:
    c = sqlite3.connect(path)
    c.execute("CREATE TABLE t (a INTEGER, b INTEGER)")
    c.executemany("INSERT INTO t VALUES (?, ?)", [(i, i * 2) for i in range(3000)])
    c.execute("INSERT INTO t VALUES (5, 'text')")
    c.execute("INSERT INTO t VALUES (7, NULL)")
    c.commit()
    c.close()


def test_falls_back_on_values_it_cannot_read_exactly(tmp_path):
    p = tmp_path / "m.sqlite"
    _mixed_db(p)
    uri = f"file:{p}?mode=ro&immutable=1"
    got = columnar.fetch_ints(uri, "SELECT a FROM t", ["a"], 10)    # capacity short: arrays grow
    assert got is not None and got["a"].tolist() == list(range(3000)) + [5, 7]
    mismatch = columnar.TYPE_MISMATCH                   # the caller then filters the rows and counts them
    assert columnar.fetch_ints(uri, "SELECT b FROM t", ["b"]) is mismatch                    # text in an int column
    assert columnar.fetch_ints(uri, "SELECT b FROM t WHERE typeof(b) != 'text'", ["b"]) is mismatch   # a NULL
    ok = columnar.fetch_ints(uri, "SELECT COALESCE(b, -1) FROM t WHERE typeof(b) != 'text'", ["b"])
    assert ok is not None and ok["b"].tolist()[-1] == -1 and ok["b"].tolist()[:3] == [0, 2, 4]
    assert columnar.fetch_ints(uri, "SELECT a FROM no_such_table", ["a"]) is None
    empty = columnar.fetch_ints(uri, "SELECT a FROM t WHERE a < 0", ["a"])
    assert empty is not None and empty["a"].shape == (0,)


def test_bad_value_gives_the_same_answer_with_both_readers(tmp_path):
    p = tmp_path / "t.sqlite"
    built_scenario("demo", str(p))
    c = sqlite3.connect(p)
    c.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET streamId = 'seven' WHERE rowid = 3")
    c.commit()
    c.close()
    results = []
    for reader in ("sqlite3", "adbc"):
        try:
            d = nle.analyze(str(p), reader=reader).to_dict()
            d.pop("timings_s", None)
            results.append(("ok", d))
        except Exception as exc:   # the same error type and message with both readers
            results.append((type(exc).__name__, str(exc)))
    assert results[0] == results[1]


def test_reader_choice(monkeypatch):
    monkeypatch.delenv("NSYS_LLM_EXPLAINER_READER", raising=False)
    assert columnar.resolve_reader("auto") == "adbc"
    assert columnar.resolve_reader("sqlite3") == "sqlite3"
    monkeypatch.setenv("NSYS_LLM_EXPLAINER_READER", "sqlite3")
    assert columnar.resolve_reader("auto") == "sqlite3"
    assert columnar.resolve_reader("adbc") == "adbc"      # an explicit option wins over the environment
    monkeypatch.setattr(columnar, "adbc_available", lambda: False)
    monkeypatch.setenv("NSYS_LLM_EXPLAINER_READER", "auto")
    assert columnar.resolve_reader("auto") == "sqlite3"
    assert columnar.resolve_reader("adbc") == "sqlite3"
    with pytest.raises(InputError, match="reader"):
        nle.analyze("/nonexistent.sqlite", reader="duckdb")


