"""One definition per vocabulary: the idle-cause kinds live in `vocabulary/cause_kinds.py`; the places that
cannot import it (the JSON schema, the docs) must say the same, and every kind has the words its finding needs."""

from __future__ import annotations

import json
import re
from pathlib import Path

from conftest import built_scenario

from nsys_llm_explainer.findings.advice import ADVICE
from nsys_llm_explainer.findings.base import CATEGORIES
from nsys_llm_explainer.vocabulary.cause_kinds import CAUSE_KINDS, COMPOSITE_CAUSES, HOST_PIECE_KINDS, KINDS

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((ROOT / "src" / "nsys_llm_explainer" / "report_schema.json").read_text(encoding="utf-8"))


def _enums(node, path=""):
    if isinstance(node, dict):
        if isinstance(node.get("enum"), list) and "host_cpu" in node["enum"]:
            yield path, node["enum"]
        for k, v in node.items():
            yield from _enums(v, f"{path}/{k}")
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _enums(v, f"{path}[{i}]")


def test_vocabularies_import_nothing_from_the_package():
    """Pure data every layer may read (render included): no import of the package's other modules."""
    for p in (ROOT / "src" / "nsys_llm_explainer" / "vocabulary").glob("*.py"):
        text = p.read_text(encoding="utf-8")
        assert not re.search(r"^\s*(from|import)\s+(\.|nsys_llm_explainer)", text, re.M), p


def test_schema_kind_enums_follow_the_table():
    seen = dict(_enums(SCHEMA))
    assert seen, "no kind enum in report_schema.json"
    for path, enum in seen.items():
        if "/host_samples/" in path:
            assert enum == list(HOST_PIECE_KINDS), path
        elif "/findings/" in path:
            assert enum == list(KINDS) + list(COMPOSITE_CAUSES), path
        else:
            assert enum == list(KINDS), path


def test_the_schema_file_is_what_the_kind_table_generates():
    """report_schema.json's kind enums are generated from the table (scripts/sync_schema_enums.py): the file holds
    exactly what the generator writes, so a new or moved kind is one table row and one script run."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("sync_schema_enums", ROOT / "scripts" / "sync_schema_enums.py")
    assert spec is not None and spec.loader is not None
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    text = (ROOT / "src" / "nsys_llm_explainer" / "report_schema.json").read_text(encoding="utf-8")
    assert gen.generate(text) == text
    moved = json.loads(text)
    moved["properties"]["idle_causes"]["properties"]["precedence"]["items"]["enum"] = ["host_cpu", "copy"]
    assert json.loads(gen.generate(json.dumps(moved)))["properties"]["idle_causes"]["properties"]["precedence"][
        "items"]["enum"] == list(KINDS)


def test_every_finding_cause_is_in_the_vocabulary(tmp_path_factory):
    """Each finding of the demo and the launch-bound scenario names a cause the vocabulary lists (a kind or a
    composite)."""
    from nsys_llm_explainer import analyze

    for name in ("demo", "launch_bound", "d2d_bound_step", "step_sync_host_work"):
        p = tmp_path_factory.mktemp(name) / "t.sqlite"
        built_scenario(name, str(p))
        causes = {f.cause[0] for f in analyze(str(p)).findings if f.cause is not None}
        assert causes and causes <= set(KINDS) | set(COMPOSITE_CAUSES), (name, causes)


def test_docs_precedence_follows_the_table():
    model = (ROOT / "docs" / "MODEL.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| (\d+) \| `(\w+)` \|", model, re.M)
    assert [k for _, k in rows] == list(KINDS) and [int(i) for i, _ in rows] == list(range(1, len(KINDS) + 1))
    findings = " ".join((ROOT / "docs" / "FINDINGS.md").read_text(encoding="utf-8").split())
    assert "precedence " + " → ".join(KINDS) in findings


def test_every_kind_has_its_finding_words():
    for k in CAUSE_KINDS:
        assert k.category in CATEGORIES, k.name
        assert "{share" in k.title, k.name
        assert k.advice and all(a in ADVICE for a in k.advice), k.name
        assert re.fullmatch(r"#[0-9a-f]{6}", k.color), k.name
    assert len({k.color for k in CAUSE_KINDS}) == len(CAUSE_KINDS)


def test_the_device_role_enum_is_the_role_table():
    """devices[].role: the schema's one role enum is generated from vocabulary/device_roles.py (in its order), the
    analysis writes only those roles, and every role that is not counted has its note for the device line."""
    from nsys_llm_explainer.analyses.idle.gpu_time import device_role
    from nsys_llm_explainer.vocabulary.device_roles import ROLE_KERNELS, ROLE_NOTES, ROLES

    role_enums = [e for _, e in _all_enums(SCHEMA) if "copies only" in e]
    assert role_enums == [list(ROLES)] and ROLES == ("kernels", "few kernels", "copies only", "idle")
    assert {device_role(1, 0, 0), device_role(0, 1, 0), device_role(0, 0, 1), device_role(0, 0, 0)} <= set(ROLES)
    assert all(ROLE_NOTES[r].startswith(r + ": ") for r in ROLES if r != ROLE_KERNELS) and not ROLE_NOTES[ROLE_KERNELS]


def _all_enums(node, path=""):
    if isinstance(node, dict):
        if isinstance(node.get("enum"), list):
            yield path, node["enum"]
        for k, v in node.items():
            yield from _all_enums(v, f"{path}/{k}")
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _all_enums(v, f"{path}[{i}]")
