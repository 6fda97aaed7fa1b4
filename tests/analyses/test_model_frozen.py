"""The trace model and the trace facts are frozen, typed values: every dataclass under model/ is frozen, a
model of another window is a new one (model/clip.py) sharing what it does not change, and the trace facts' capture
settings and row counts are typed, immutable and written to ``report.json`` as before (keys in the same order,
absent settings absent)."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import json
import pickle
import pkgutil
from pathlib import Path

import pytest
from synth import TraceBuilder

import nsys_llm_explainer.model as model_pkg
from nsys_llm_explainer.analyses.trace.info import CaptureSettings, TraceInfoResult, analyze_trace_info
from nsys_llm_explainer.errors import InputError
from nsys_llm_explainer.jsonable import from_json
from nsys_llm_explainer.model.clip import clip_model
from nsys_llm_explainer.model.info import RowCounts
from nsys_llm_explainer.pipeline import load_model

PID = 4242
T = 1_000_000


def test_every_model_dataclass_is_frozen() -> None:
    seen = []
    for mod in pkgutil.iter_modules(model_pkg.__path__):
        m = importlib.import_module(f"{model_pkg.__name__}.{mod.name}")
        for name, cls in inspect.getmembers(m, inspect.isclass):
            if cls.__module__ == m.__name__ and dataclasses.is_dataclass(cls):
                seen.append(name)
                assert cls.__dataclass_params__.frozen, f"model/{mod.name}.py: {name} is not frozen"
    assert {"TraceModel", "TraceInfo", "Kernels", "CpuSamples", "IntervalUnion", "RowCounts"} <= set(seen)


def _model(tmp_path: Path, flavor: str = "2024.2"):
    """Two threads named ``worker`` in one process, each launching one kernel: k1 [T, T+10), k2 [T+100, T+110)."""
    b = TraceBuilder(flavor=flavor)
    b.process(PID)
    g1 = b.thread(PID, 101, "worker")
    g2 = b.thread(PID, 102, "worker")
    b.launch(T - 5, T - 2, T, T + 10, pid=PID, tid=101, name="k1")
    b.launch(T + 95, T + 98, T + 100, T + 110, pid=PID, tid=102, name="k2")
    p = tmp_path / f"m{flavor}.sqlite"
    b.write(str(p))
    return load_model(str(p)), g1, g2


def test_clip_builds_a_new_model(tmp_path: Path) -> None:
    m, g1, g2 = _model(tmp_path)
    # labels computed once, at build: the two same-named threads of one process are told apart by their tid
    assert dict(m.thread_labels) == {g1: "worker (tid 101)", g2: "worker (tid 102)"}
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.kernels = None   # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.info.row_counts = RowCounts()   # type: ignore[misc]
    c = clip_model(m, T + 50, T + 200)
    assert c is not m and len(c.kernels) == 1 and len(m.kernels) == 2
    assert c.thread_labels is m.thread_labels and c.thread_names is m.thread_names   # shared, not copied
    assert c.kernels.names is m.kernels.names
    assert (c.info.row_counts["kernels"], c.info.row_counts["cuda_api"]) == (1, 1)
    assert (m.info.row_counts["kernels"], m.info.row_counts["cuda_api"]) == (2, 2)   # the source untouched
    assert list(c.info.row_counts) == list(m.info.row_counts)   # same tables, same order


def test_row_counts_are_an_immutable_mapping() -> None:
    rc = RowCounts.of({"kernels": 3, "cuda_api": 5, "memcpy": 0})
    assert list(rc) == ["kernels", "cuda_api", "memcpy"] and len(rc) == 3
    assert rc["cuda_api"] == 5 and "memcpy" in rc and "sync" not in rc and rc.get("sync") is None
    with pytest.raises(KeyError):
        rc["sync"]
    with pytest.raises(TypeError):
        rc["kernels"] = 4   # type: ignore[index]
    assert rc == {"kernels": 3, "cuda_api": 5, "memcpy": 0} and rc != {"kernels": 3}
    assert json.dumps(rc.to_dict()) == '{"kernels": 3, "cuda_api": 5, "memcpy": 0}'
    back = RowCounts.from_dict(json.loads(json.dumps(rc.to_dict())))
    assert back == rc and hash(back) == hash(rc) and list(back) == list(rc)
    assert pickle.loads(pickle.dumps(rc)) == rc
    assert not RowCounts()
    with pytest.raises(InputError, match="row_counts"):
        RowCounts.from_dict({"kernels": "3"})


def test_capture_settings_keep_their_keys(tmp_path: Path) -> None:
    m, _, _ = _model(tmp_path)          # 2024.2 export: META_DATA_CAPTURE and EXPORT_META_DATA settings
    info = analyze_trace_info(m)
    assert info.capture.to_dict() == {
        "CUDA_TRACE_SCOPE": "ProcessTree", "CUDA_SKIP_SOME_API_CALLS": "true", "EXPORT_PARAM_TIME_NORMALIZE": "false",
        "EXPORT_CONFIG_TIME_SHIFT": "0", "EXPORT_PARAM_LAZY": "true", "EXPORT_TIME_UTC": "2025-01-01T12:30:00"}
    assert list(info.capture.to_dict()) == [k for k, _ in info.capture.items()]
    assert info.capture.EXPORT_LAZY is None
    old, _, _ = _model(tmp_path, "2021.5")   # an old export records two of them: the others have no key
    oc = analyze_trace_info(old).capture
    assert oc.to_dict() == {"EXPORT_LAZY": "true", "EXPORT_TIME_UTC": "2025-01-01T12:30:00"}
    assert CaptureSettings().to_dict() == {}
    d = json.loads(json.dumps(info.to_dict()))
    assert list(d["row_counts"]) == ["kernels", "cuda_api", "nvtx_ranges", "memcpy", "memset", "sync", "graph_trace"]
    back = from_json(TraceInfoResult, d, "trace")
    assert back.capture == info.capture and back.row_counts == info.row_counts and back.to_dict() == d
